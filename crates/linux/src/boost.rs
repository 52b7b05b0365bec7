//! Interactive boosts: a SCHED_OTHER thread about to serve an interaction (a UI event, a
//! request) runs with more weight, and an earlier virtual deadline, for a bounded time; the boost
//! is undone when that time is up or the thread blocks.
//!
//! This is the framework-assisted priority promotion of vt-cfs-interactivity-android.txt §4,
//! done from user space. The paper promotes the task the framework names at wake-up to the
//! weight of eq. 6,
//!
//! W′(τ_a) = min(C · Σ_{τ_j ∈ S} W(τ_j) / P, ω₋₂₀),
//!
//! so that its CFS slice (eq. 2, TS = W/ΣW · P) covers C, the time an interactive job needs
//! (the paper's 100 ms on its phones), and demotes it "when it runs out of its time slice or
//! becomes blocked again". S is the run queue, P the scheduling period of eq. 3 (5 ms below 5
//! tasks, else 1 ms per task), ω₋₂₀ = 88761 the weight of nice −20; the thread gets the nice
//! value whose weight is the smallest one ≥ W′ (the paper: "a new nice value whose corresponding
//! weight is larger than W′").
//!
//! What pacer can observe, and what it approximates:
//! - **S**: the runnable (state `R`) SCHED_OTHER/SCHED_BATCH threads whose last CPU (field 39 of
//!   `/proc/PID/task/TID/stat`) is the boosted thread's last CPU, each with the weight of its nice
//!   value, plus the boosted thread at its current weight ([`observe_run_queue`]). A scan of
//!   `/proc` at the moment of the boost: a thread's last CPU is where it ran, not necessarily
//!   the queue it waits in, and group scheduling (autogroups, cgroups; this VM has autogroup on)
//!   is flattened — per-task weights are compared as if all were in one queue.
//! - **P**: eq. 3 with n = |S|. Linux ≥ 6.6 (EEVDF) has no scheduling period any more; eq. 3 is
//!   kept because C was tuned against it.
//! - **C**: [`BoostConfig::c_ns`], the paper's 100 ms by default.
//!
//! Two more actuators, where the kernel has them (probed once, [`Support::probe`]):
//! - **EEVDF slice** (Linux ≥ 6.12): `sched_attr.sched_runtime` of a SCHED_OTHER thread is its
//!   requested slice, clamped by the kernel to 0.1–100 ms. EEVDF gives each task the virtual
//!   deadline vruntime + slice · 1024 / weight, so a short slice is an early deadline: the woken
//!   thread is picked sooner, and (sched feature `PREEMPT_SHORT`) may preempt a running task
//!   with a longer slice instead of waiting for it to reach parity. On the development VM
//!   (Linux 6.18) it is supported.
//! - **uclamp** (`SCHED_FLAG_UTIL_CLAMP_MIN`, `CONFIG_UCLAMP_TASK`): raises the utilisation
//!   the frequency governor and the capacity-aware placement see. The development VM's kernel
//!   is built without it (`EOPNOTSUPP`), and has no cpufreq either.
//!
//! The blocking that ends a boost is seen as growth of the thread's voluntary context switches
//! (`voluntary_ctxt_switches` in `/proc/TID/status`) since the boost: a thread boosted while
//! asleep (the daemon's case: boosted just before its release) keeps the boost through its
//! wake-up and loses it when its job ends and it sleeps again. A job that blocks in the middle
//! (a page fault on a file, a lock) ends its boost there, as in the paper.
//!
//! Undoing restores exactly the attributes the thread had ([`crate::sched::restore`]), and only
//! if the thread still has what pacer applied: a thread that changed its own scheduling during
//! the boost keeps its choice. RT and DL threads are refused ([`BoostError::NotFair`]). A
//! [`Guardian`] attached with [`Booster::with_guardian`] is told the original and the applied
//! state of each boosted thread, so it undoes the boosts if pacer dies.

use std::collections::BTreeMap;
use std::fs;

use pacer_model::policy::{nice_weight, NICE_TO_WEIGHT};
use serde::Serialize;

use crate::guardian::Guardian;
use crate::sched::{
    self, LinuxError, SchedAttr, ThreadSched, Tid, SCHED_BATCH, SCHED_FLAG_KEEP_PARAMS,
    SCHED_FLAG_KEEP_POLICY, SCHED_FLAG_UTIL_CLAMP_MIN, SCHED_OTHER,
};

/// ω₋₂₀: the weight of nice −20, eq. 6's bound.
pub const OMEGA_MINUS_20: u64 = NICE_TO_WEIGHT[0];

/// The kernel's bounds on a requested EEVDF slice (`__setscheduler_params()`: 0.1 ms … 100 ms).
pub const SLICE_MIN_NS: u64 = 100_000;
/// See [`SLICE_MIN_NS`].
pub const SLICE_MAX_NS: u64 = 100_000_000;

const MS: u64 = 1_000_000;

/// Eq. 3 of the VT-CFS paper: the scheduling period for `n` runnable tasks, ns.
pub fn eq3_period(n: usize) -> u64 {
    if n < 5 {
        5 * MS
    } else {
        n as u64 * MS
    }
}

/// Eq. 6 of the VT-CFS paper: the weight that gives a slice of `c_ns` in a run queue of total
/// weight `sum_weight` and period `p_ns`, bounded by ω₋₂₀.
pub fn eq6_weight(c_ns: u64, sum_weight: u64, p_ns: u64) -> u64 {
    if p_ns == 0 {
        return OMEGA_MINUS_20;
    }
    let w = u128::from(c_ns) * u128::from(sum_weight) / u128::from(p_ns);
    w.min(u128::from(OMEGA_MINUS_20)) as u64
}

/// The highest nice value whose weight is at least `weight` (nice −20 when none is).
pub fn nice_for_weight(weight: u64) -> i32 {
    (-20..=19)
        .rev()
        .find(|&n| nice_weight(n) >= weight)
        .unwrap_or(-20)
}

/// One of the ways a thread is boosted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Actuator {
    /// The nice value of eq. 6.
    Nice,
    /// A short EEVDF slice (Linux ≥ 6.12).
    Slice,
    /// `SCHED_FLAG_UTIL_CLAMP_MIN` (kernels with `CONFIG_UCLAMP_TASK`).
    Uclamp,
}

/// A set of [`Actuator`]s.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct Actuators {
    pub nice: bool,
    pub slice: bool,
    pub uclamp: bool,
}

impl Actuators {
    /// Just `a`.
    pub fn only(a: Actuator) -> Actuators {
        let mut s = Actuators::default();
        s.set(a);
        s
    }

    fn set(&mut self, a: Actuator) {
        match a {
            Actuator::Nice => self.nice = true,
            Actuator::Slice => self.slice = true,
            Actuator::Uclamp => self.uclamp = true,
        }
    }

    /// Whether `a` is in the set.
    pub fn contains(&self, a: Actuator) -> bool {
        match a {
            Actuator::Nice => self.nice,
            Actuator::Slice => self.slice,
            Actuator::Uclamp => self.uclamp,
        }
    }

    /// The actuators in the set.
    pub fn list(&self) -> Vec<Actuator> {
        [Actuator::Nice, Actuator::Slice, Actuator::Uclamp]
            .into_iter()
            .filter(|&a| self.contains(a))
            .collect()
    }
}

impl FromIterator<Actuator> for Actuators {
    fn from_iter<I: IntoIterator<Item = Actuator>>(iter: I) -> Self {
        let mut s = Actuators::default();
        for a in iter {
            s.set(a);
        }
        s
    }
}

/// Which actuators a boost uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum How {
    /// Every actuator the kernel supports.
    Auto,
    /// Exactly these ([`BoostError::Unsupported`] if the kernel lacks one).
    Use(Actuators),
}

/// What the kernel supports beyond nice values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Support {
    /// A SCHED_OTHER thread's `sched_runtime` is taken as its slice and read back.
    pub slice: bool,
    /// `SCHED_FLAG_UTIL_CLAMP_MIN` is accepted.
    pub uclamp: bool,
}

impl Support {
    /// Probes the kernel once per process, on a short-lived thread that changes only itself: it
    /// asks for a 3 ms slice and reads it back, then for a utilisation floor of 0.
    pub fn probe() -> Support {
        static PROBED: std::sync::OnceLock<Support> = std::sync::OnceLock::new();
        *PROBED.get_or_init(|| {
            std::thread::spawn(|| {
                let mut a = SchedAttr::new();
                a.sched_runtime = 3 * MS;
                let slice = sched::set_attr(0, &a).is_ok()
                    && sched::get_attr(0).is_ok_and(|r| r.sched_runtime == 3 * MS);
                let mut u = SchedAttr::new();
                u.sched_flags = SCHED_FLAG_KEEP_POLICY | SCHED_FLAG_KEEP_PARAMS | SCHED_FLAG_UTIL_CLAMP_MIN;
                u.sched_util_min = 0;
                let uclamp = sched::set_attr(0, &u).is_ok();
                Support { slice, uclamp }
            })
            .join()
            .unwrap_or(Support {
                slice: false,
                uclamp: false,
            })
        })
    }

    fn has(&self, a: Actuator) -> bool {
        match a {
            Actuator::Nice => true,
            Actuator::Slice => self.slice,
            Actuator::Uclamp => self.uclamp,
        }
    }
}

/// Parameters of the [`Booster`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct BoostConfig {
    /// C of eq. 6: the slice a boosted thread should get, ns (the paper's 100 ms).
    pub c_ns: u64,
    /// The EEVDF slice requested for a boosted thread, ns (clamped to the kernel's 0.1–100 ms).
    /// Short is the point: an early virtual deadline.
    pub slice_ns: u64,
    /// The utilisation floor of a boosted thread, 0–1024.
    pub util_min: u32,
    /// How often [`Booster::tick`] takes a census of the run queues ([`scan_run_queues`]), ns. Eq. 6 is
    /// insensitive to it in practice: with the paper's C, W′ reaches ω₋₂₀ as soon as the queue
    /// holds about 5 nice-0 threads.
    pub census_ttl_ns: u64,
}

impl Default for BoostConfig {
    fn default() -> Self {
        BoostConfig {
            c_ns: 100 * MS,
            slice_ns: SLICE_MIN_NS,
            util_min: 1024,
            census_ttl_ns: 1_000_000_000,
        }
    }
}

/// The run queue of a boosted thread as pacer could observe it (eq. 6's S).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RunQueue {
    /// The CPU the boosted thread last ran on.
    pub cpu: usize,
    /// Weights of the other runnable fair threads seen there.
    pub others: Vec<u64>,
    /// The boosted thread's weight before the boost.
    pub own: u64,
}

impl RunQueue {
    /// |S|: the others and the boosted thread.
    pub fn n(&self) -> usize {
        self.others.len() + 1
    }
    /// Σ W over S.
    pub fn sum_weight(&self) -> u64 {
        self.others.iter().sum::<u64>() + self.own
    }
}

/// The fields of a task's `stat` that [`observe_run_queue`] needs, or `None`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TaskStat {
    /// Field 3: `R` running or runnable, `S` sleeping, …
    pub state: u8,
    /// Field 19.
    pub nice: i32,
    /// Field 39: the CPU it last ran on.
    pub cpu: usize,
    /// Field 41: the scheduling policy.
    pub policy: u32,
}

/// Parses `/proc/PID/task/TID/stat` (the command name may hold spaces and parentheses: the
/// fields start after the last `)`).
pub fn parse_task_stat(text: &str) -> Option<TaskStat> {
    let rest = &text[text.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // Field 3 (state) is f[0], so field N is f[N − 3].
    Some(TaskStat {
        state: *f.first()?.as_bytes().first()?,
        nice: f.get(16)?.parse().ok()?,
        cpu: f.get(36)?.parse().ok()?,
        policy: f.get(38)?.parse().ok()?,
    })
}

fn is_fair(policy: u32) -> bool {
    policy == SCHED_OTHER || policy == SCHED_BATCH
}

/// Runnable fair threads by the CPU they last ran on: `(TID, weight)` each.
pub type Census = BTreeMap<usize, Vec<(Tid, u64)>>;

/// The runnable fair threads of the machine by the CPU they last ran on, with their weights: one
/// scan of `/proc/*/task/*/stat` (about 1 ms for 200 threads on an idle VM; several under load,
/// which is why the [`Booster`] reuses one for [`BoostConfig::census_ttl_ns`]).
pub fn scan_run_queues() -> Result<Census, BoostError> {
    let mut out = Census::new();
    let procs = fs::read_dir("/proc").map_err(|e| {
        BoostError::Sched(LinuxError::Io {
            path: "/proc".into(),
            source: e,
        })
    })?;
    for p in procs.flatten() {
        let Some(pid) = p.file_name().to_str().and_then(|n| n.parse::<Tid>().ok()) else {
            continue;
        };
        let Ok(tasks) = fs::read_dir(format!("/proc/{pid}/task")) else {
            continue;
        };
        for t in tasks.flatten() {
            let Some(tid) = t.file_name().to_str().and_then(|n| n.parse::<Tid>().ok()) else {
                continue;
            };
            let Some(s) = fs::read_to_string(t.path().join("stat"))
                .ok()
                .and_then(|t| parse_task_stat(&t))
            else {
                continue;
            };
            if s.state == b'R' && is_fair(s.policy) {
                out.entry(s.cpu).or_default().push((tid, nice_weight(s.nice)));
            }
        }
    }
    Ok(out)
}

fn own_stat(tid: Tid) -> Result<TaskStat, BoostError> {
    fs::read_to_string(format!("/proc/{tid}/stat"))
        .ok()
        .and_then(|t| parse_task_stat(&t))
        .ok_or(BoostError::NoSuchThread(tid))
}

/// `tid`'s run queue in a census of [`scan_run_queues`].
fn run_queue_in(tid: Tid, own: &TaskStat, census: &Census) -> RunQueue {
    RunQueue {
        cpu: own.cpu,
        others: census
            .get(&own.cpu)
            .map(|v| v.iter().filter(|(t, _)| *t != tid).map(|&(_, w)| w).collect())
            .unwrap_or_default(),
        own: nice_weight(own.nice),
    }
}

/// Eq. 6's S for thread `tid`: the runnable fair threads whose last CPU is `tid`'s, by a scan
/// of `/proc` (see the module documentation for what this approximates).
pub fn observe_run_queue(tid: Tid) -> Result<RunQueue, BoostError> {
    let own = own_stat(tid)?;
    Ok(run_queue_in(tid, &own, &scan_run_queues()?))
}

/// The thread's voluntary context switches and its process (`/proc/TID/status`).
fn status(tid: Tid) -> Result<(u64, Tid), BoostError> {
    let text =
        fs::read_to_string(format!("/proc/{tid}/status")).map_err(|_| BoostError::NoSuchThread(tid))?;
    parse_status(&text).ok_or_else(|| {
        BoostError::Sched(LinuxError::Parse {
            path: format!("/proc/{tid}/status").into(),
            what: "voluntary_ctxt_switches and Tgid",
            content: text.chars().take(200).collect(),
        })
    })
}

/// `(voluntary_ctxt_switches, Tgid)` of a `status` file.
pub fn parse_status(text: &str) -> Option<(u64, Tid)> {
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().parse().ok())
    };
    Some((field("voluntary_ctxt_switches:")?, field("Tgid:")? as Tid))
}

/// Why a boost was refused or failed.
#[derive(Debug, thiserror::Error)]
pub enum BoostError {
    /// The thread runs under a real-time or deadline policy (or SCHED_IDLE): nice values and
    /// fair slices mean nothing there, and pacer does not lower a real-time thread.
    #[error("thread {tid} is not SCHED_OTHER/SCHED_BATCH (policy {policy}): only fair threads are boosted")]
    NotFair { tid: Tid, policy: u32 },
    /// An actuator asked for explicitly that this kernel does not have.
    #[error("this kernel does not support the {0:?} boost actuator")]
    Unsupported(Actuator),
    /// A duration of 0, or an empty set of actuators.
    #[error("invalid boost: {0}")]
    Invalid(String),
    /// The thread does not exist.
    #[error("no such thread {0}")]
    NoSuchThread(Tid),
    /// A syscall failed (EPERM: lowering a nice value needs CAP_SYS_NICE or RLIMIT_NICE).
    #[error(transparent)]
    Sched(#[from] LinuxError),
}

/// A boost in force.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BoostGrant {
    pub tid: Tid,
    /// The actuators used.
    pub actuators: Actuators,
    /// The nice value in force during the boost, and before it.
    pub nice: i32,
    pub original_nice: i32,
    /// W′ of eq. 6.
    pub target_weight: u64,
    /// The EEVDF slice in force during the boost (as the kernel reports it), if set.
    pub slice_ns: Option<u64>,
    /// The utilisation floor, if set.
    pub util_min: Option<u32>,
    /// When the boost ends at the latest (CLOCK_MONOTONIC, ns).
    pub until: u64,
    /// The run queue eq. 6 was computed from.
    pub run_queue: RunQueue,
}

/// Why a boost ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EndReason {
    /// Its duration elapsed.
    Expired,
    /// The thread blocked (voluntary context switch) after the boost.
    Blocked,
    /// [`Booster::release_all`] or [`Booster::release`].
    Released,
    /// The thread exited.
    Exited,
}

/// What undoing a boost did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Undone {
    /// The original attributes are back.
    Restored,
    /// The thread changed its scheduling during the boost: left as it is.
    Foreign {
        #[serde(skip)]
        now: SchedAttr,
    },
    /// The thread is gone.
    Gone,
    /// Restoring failed.
    Failed(String),
}

/// A boost that ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Ended {
    pub tid: Tid,
    pub reason: EndReason,
    pub undone: Undone,
}

/// Whether `now` (read with `sched_getattr`) is still the setting `applied` describes: same
/// policy, RESET_ON_FORK/RECLAIM flags and parameters of that policy; for fair policies the nice
/// value, the slice when `applied` names one (non-zero `sched_runtime`; kernels before 6.12
/// report 0), and the utilisation floor when `applied` sets one (`SCHED_FLAG_UTIL_CLAMP_MIN`).
pub fn matches_applied(now: &SchedAttr, applied: &SchedAttr) -> bool {
    use pacer_model::reservation::{SCHED_FLAG_RECLAIM, SCHED_FLAG_RESET_ON_FORK};
    let flags = SCHED_FLAG_RESET_ON_FORK | SCHED_FLAG_RECLAIM;
    if now.sched_policy != applied.sched_policy || now.sched_flags & flags != applied.sched_flags & flags {
        return false;
    }
    match now.sched_policy {
        sched::SCHED_DEADLINE => {
            (now.sched_runtime, now.sched_deadline, now.sched_period)
                == (
                    applied.sched_runtime,
                    applied.sched_deadline,
                    applied.sched_period,
                )
        }
        sched::SCHED_FIFO | sched::SCHED_RR => now.sched_priority == applied.sched_priority,
        SCHED_OTHER | SCHED_BATCH => {
            now.sched_nice == applied.sched_nice
                && (applied.sched_runtime == 0 || now.sched_runtime == applied.sched_runtime)
                && (applied.sched_flags & SCHED_FLAG_UTIL_CLAMP_MIN == 0
                    || now.sched_util_min == applied.sched_util_min)
        }
        _ => true,
    }
}

/// Undoes a boost: gives `tid` back `original` if it still has what was `applied`
/// ([`matches_applied`]), including the utilisation floor when the boost set one (reset to the
/// default when the original floor was 0). Used by the [`Booster`] and by the guardian.
pub fn undo(tid: Tid, original: &ThreadSched, applied: &SchedAttr) -> Undone {
    let now = match sched::get_attr(tid) {
        Ok(a) => a,
        Err(e) if e.errno() == Some(libc::ESRCH) => return Undone::Gone,
        Err(e) => return Undone::Failed(e.to_string()),
    };
    if !matches_applied(&now, applied) {
        return Undone::Foreign { now };
    }
    let restored = sched::restore(tid, original).and_then(|()| {
        if applied.sched_flags & SCHED_FLAG_UTIL_CLAMP_MIN == 0 {
            return Ok(());
        }
        // sched::restore leaves clamps alone (the kernel keeps user-set ones across policy
        // changes): put the floor back explicitly, -1 meaning "the default" (Linux ≥ 5.11).
        let mut u = SchedAttr::new();
        u.sched_flags = SCHED_FLAG_KEEP_POLICY | SCHED_FLAG_KEEP_PARAMS | SCHED_FLAG_UTIL_CLAMP_MIN;
        u.sched_util_min = if original.attr.sched_util_min == 0 {
            u32::MAX
        } else {
            original.attr.sched_util_min
        };
        sched::set_attr(tid, &u)
    });
    match restored {
        Ok(()) => Undone::Restored,
        Err(e) if e.errno() == Some(libc::ESRCH) => Undone::Gone,
        Err(e) => Undone::Failed(e.to_string()),
    }
}

/// The attribute that boosts a thread whose state is `original`: its own policy and flags, the
/// boosted nice, the slice, the utilisation floor. `nice`, `slice` and `util_min` are `None`
/// for an actuator not used.
fn boosted_attr(
    original: &SchedAttr,
    nice: Option<i32>,
    slice: Option<u64>,
    util_min: Option<u32>,
) -> SchedAttr {
    use pacer_model::reservation::SCHED_FLAG_RESET_ON_FORK;
    let mut a = SchedAttr::new();
    a.sched_policy = original.sched_policy;
    a.sched_flags = original.sched_flags & SCHED_FLAG_RESET_ON_FORK;
    a.sched_nice = nice.unwrap_or(original.sched_nice);
    // Without the slice actuator the thread keeps its slice: a custom one written back as it
    // was, the default as 0 ("no custom slice"), as sched::restore does.
    a.sched_runtime = match slice {
        Some(s) => s,
        None if original.sched_runtime == sched::default_slice() => 0,
        None => original.sched_runtime,
    };
    if let Some(u) = util_min {
        a.sched_flags |= SCHED_FLAG_UTIL_CLAMP_MIN;
        a.sched_util_min = u;
    }
    a
}

#[derive(Debug)]
struct Active {
    original: ThreadSched,
    /// What pacer set, as read back (the flags include UTIL_CLAMP_MIN when a floor was set).
    applied: SchedAttr,
    nvcsw: u64,
    grant: BoostGrant,
}

/// Boosts threads and undoes the boosts (see the module documentation).
#[derive(Debug)]
pub struct Booster {
    cfg: BoostConfig,
    support: Support,
    active: BTreeMap<Tid, Active>,
    guardian: Option<Guardian>,
    /// The last census and when it was taken.
    census: Option<(u64, Census)>,
}

use crate::sys::monotonic_ns;

impl Booster {
    /// A booster with the kernel's support probed ([`Support::probe`]).
    pub fn new(cfg: BoostConfig) -> Booster {
        Booster::with_support(cfg, Support::probe())
    }

    /// A booster that assumes `support` (tests, or a caller that probed already).
    pub fn with_support(cfg: BoostConfig, support: Support) -> Booster {
        Booster {
            cfg,
            support,
            active: BTreeMap::new(),
            guardian: None,
            census: None,
        }
    }

    /// Tells `guardian` about every boost from now on, so it undoes them if pacer dies.
    pub fn with_guardian(mut self, guardian: Guardian) -> Booster {
        self.guardian = Some(guardian);
        self
    }

    /// The guardian, if one is attached (to check it, or finish it after [`Booster::release_all`]).
    pub fn take_guardian(&mut self) -> Option<Guardian> {
        self.guardian.take()
    }

    /// What the kernel supports.
    pub fn support(&self) -> Support {
        self.support
    }

    /// The boosts in force.
    pub fn active(&self) -> Vec<&BoostGrant> {
        self.active.values().map(|a| &a.grant).collect()
    }

    /// Boosts `tid` for `duration_ns` from now. A thread already boosted keeps its boost, with
    /// the end moved to the later of the two and the blocking check started afresh.
    pub fn boost(&mut self, tid: Tid, duration_ns: u64, how: How) -> Result<BoostGrant, BoostError> {
        if duration_ns == 0 {
            return Err(BoostError::Invalid("duration 0".into()));
        }
        let use_ = match how {
            How::Auto => [Actuator::Nice, Actuator::Slice, Actuator::Uclamp]
                .into_iter()
                .filter(|&a| self.support.has(a))
                .collect(),
            How::Use(set) => {
                if let Some(a) = set.list().into_iter().find(|&a| !self.support.has(a)) {
                    return Err(BoostError::Unsupported(a));
                }
                set
            }
        };
        if use_.list().is_empty() {
            return Err(BoostError::Invalid("no actuator".into()));
        }
        let now = monotonic_ns();
        let (nvcsw, pid) = status(tid)?;
        if let Some(a) = self.active.get_mut(&tid) {
            a.grant.until = a.grant.until.max(now.saturating_add(duration_ns));
            a.nvcsw = nvcsw;
            return Ok(a.grant.clone());
        }
        let original = ThreadSched::read(tid).map_err(|e| match e.errno() {
            Some(libc::ESRCH) => BoostError::NoSuchThread(tid),
            _ => BoostError::Sched(e),
        })?;
        if !is_fair(original.attr.sched_policy) {
            return Err(BoostError::NotFair {
                tid,
                policy: original.attr.sched_policy,
            });
        }
        let own = own_stat(tid)?;
        if self.census.is_none() {
            // The first boost pays for a census; later ones use the one [`Booster::tick`]
            // keeps fresh, off the path between the request and the job.
            self.census = Some((now, scan_run_queues()?));
        }
        let rq = run_queue_in(tid, &own, &self.census.as_ref().expect("just taken").1);
        let target_weight = eq6_weight(self.cfg.c_ns, rq.sum_weight(), eq3_period(rq.n()));
        // Never lower a thread: a nice value already below eq. 6's stays.
        let nice = use_
            .nice
            .then(|| nice_for_weight(target_weight).min(original.attr.sched_nice));
        let slice = use_
            .slice
            .then(|| self.cfg.slice_ns.clamp(SLICE_MIN_NS, SLICE_MAX_NS));
        let util_min = use_.uclamp.then_some(self.cfg.util_min.min(1024));
        let want = boosted_attr(&original.attr, nice, slice, util_min);
        // The guardian hears of it before the change: if pacer dies in between, the thread does
        // not have the applied state and is left alone.
        if let Some(g) = self.guardian.as_mut() {
            g.track_applied(pid, tid, &original, &want);
        }
        if let Err(e) = sched::set_attr(tid, &want) {
            if let Some(g) = self.guardian.as_mut() {
                g.untrack(tid);
            }
            return Err(match e.errno() {
                Some(libc::ESRCH) => BoostError::NoSuchThread(tid),
                _ => BoostError::Sched(e),
            });
        }
        let mut applied = sched::get_attr(tid).unwrap_or(want);
        applied.sched_flags |= want.sched_flags & SCHED_FLAG_UTIL_CLAMP_MIN;
        if applied != want {
            // What the kernel made of it (e.g. the slice as it reports it): the guardian compares
            // against that.
            if let Some(g) = self.guardian.as_mut() {
                g.track_applied(pid, tid, &original, &applied);
            }
        }
        let grant = BoostGrant {
            tid,
            actuators: use_,
            nice: applied.sched_nice,
            original_nice: original.attr.sched_nice,
            target_weight,
            slice_ns: slice.map(|_| applied.sched_runtime),
            util_min,
            until: now.saturating_add(duration_ns),
            run_queue: rq,
        };
        self.active.insert(
            tid,
            Active {
                original,
                applied,
                nvcsw,
                grant: grant.clone(),
            },
        );
        Ok(grant)
    }

    /// Ends the boosts whose time is up at `now` (CLOCK_MONOTONIC, ns) or whose thread blocked
    /// since it was boosted; threads that are gone are forgotten. Takes a new census of the run
    /// queues when the last one is older than [`BoostConfig::census_ttl_ns`] (a scan of
    /// `/proc` took up to 6 ms on the loaded development VM: done here, not in
    /// [`Booster::boost`]).
    pub fn tick(&mut self, now: u64) -> Vec<Ended> {
        if self
            .census
            .as_ref()
            .is_none_or(|(at, _)| now.saturating_sub(*at) >= self.cfg.census_ttl_ns)
        {
            if let Ok(c) = scan_run_queues() {
                self.census = Some((now, c));
            }
        }
        let mut ending = Vec::new();
        for (&tid, a) in &self.active {
            let reason = match status(tid) {
                Err(_) => {
                    ending.push((tid, EndReason::Exited, true));
                    continue;
                }
                Ok((nvcsw, _)) if nvcsw > a.nvcsw => EndReason::Blocked,
                Ok(_) if now >= a.grant.until => EndReason::Expired,
                Ok(_) => continue,
            };
            ending.push((tid, reason, false));
        }
        ending
            .into_iter()
            .map(|(tid, reason, gone)| self.end(tid, reason, gone))
            .collect()
    }

    /// Ends `tid`'s boost now, if it has one.
    pub fn release(&mut self, tid: Tid) -> Option<Ended> {
        self.active
            .contains_key(&tid)
            .then(|| self.end(tid, EndReason::Released, false))
    }

    /// Ends every boost.
    pub fn release_all(&mut self) -> Vec<Ended> {
        let tids: Vec<Tid> = self.active.keys().copied().collect();
        tids.into_iter()
            .map(|t| self.end(t, EndReason::Released, false))
            .collect()
    }

    fn end(&mut self, tid: Tid, reason: EndReason, gone: bool) -> Ended {
        let a = self.active.remove(&tid).expect("an active boost");
        let undone = if gone {
            Undone::Gone
        } else {
            undo(tid, &a.original, &a.applied)
        };
        if let Some(g) = self.guardian.as_mut() {
            g.untrack(tid);
        }
        Ended { tid, reason, undone }
    }
}

impl Drop for Booster {
    /// No thread stays boosted because its booster went away.
    fn drop(&mut self) {
        self.release_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eq6_and_the_nice_it_maps_to() {
        // The paper's Example 1: ten nice-0 hogs and τ_a: W′ = 100 ms · 11264 / 11 ms ≫ ω₋₂₀.
        let p = eq3_period(11);
        assert_eq!(p, 11 * MS);
        assert_eq!(eq6_weight(100 * MS, 11 * 1024, p), OMEGA_MINUS_20);
        assert_eq!(nice_for_weight(OMEGA_MINUS_20), -20);
        // Alone on its CPU: W′ = 100/5 · 1024 = 20480 → nice −14 (23254 ≥ 20480 > 18705).
        assert_eq!(eq6_weight(100 * MS, 1024, eq3_period(1)), 20480);
        assert_eq!(nice_for_weight(20480), -14);
        // A short C against a light queue can leave the thread where it is.
        assert_eq!(nice_for_weight(eq6_weight(MS, 1024, 5 * MS)), 7);
        assert_eq!(nice_for_weight(1024), 0);
        assert_eq!(nice_for_weight(0), 19);
        assert_eq!(eq6_weight(MS, u64::MAX, 1), OMEGA_MINUS_20);
    }

    #[test]
    fn task_stat_and_status_fields() {
        let stat = "4242 (a (b) c) R 1 4242 4242 0 -1 4194560 0 0 0 0 7 3 0 0 20 -5 1 0 100 0 0 \
                    18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0";
        assert_eq!(
            parse_task_stat(stat),
            Some(TaskStat {
                state: b'R',
                nice: -5,
                cpu: 1,
                policy: 0
            })
        );
        assert_eq!(parse_task_stat("4242 (x) R 1"), None);
        let status = "Name:\tx\nTgid:\t4242\nPid:\t4243\nvoluntary_ctxt_switches:\t17\nnonvoluntary_ctxt_switches:\t3\n";
        assert_eq!(parse_status(status), Some((17, 4242)));
        assert_eq!(parse_status("Tgid: 1\n"), None);
    }

    #[test]
    fn the_boosted_attribute_keeps_what_is_not_boosted() {
        let mut orig = SchedAttr::new();
        orig.sched_flags = pacer_model::reservation::SCHED_FLAG_RESET_ON_FORK | SCHED_FLAG_KEEP_PARAMS;
        orig.sched_nice = 3;
        orig.sched_runtime = 2 * MS;
        let a = boosted_attr(&orig, Some(-20), None, None);
        assert_eq!(
            (a.sched_policy, a.sched_nice, a.sched_runtime),
            (SCHED_OTHER, -20, 2 * MS)
        );
        assert_eq!(a.sched_flags, pacer_model::reservation::SCHED_FLAG_RESET_ON_FORK);
        let a = boosted_attr(&orig, None, Some(SLICE_MIN_NS), Some(1024));
        assert_eq!(
            (a.sched_nice, a.sched_runtime, a.sched_util_min),
            (3, SLICE_MIN_NS, 1024)
        );
        assert_ne!(a.sched_flags & SCHED_FLAG_UTIL_CLAMP_MIN, 0);
    }

    #[test]
    fn applied_settings_compare_what_was_set() {
        let mut applied = SchedAttr::new();
        applied.sched_nice = -20;
        applied.sched_runtime = SLICE_MIN_NS;
        let mut now = applied;
        assert!(matches_applied(&now, &applied));
        now.sched_runtime = 1_400_000;
        assert!(!matches_applied(&now, &applied), "the thread set its own slice");
        // Nothing said about the slice: any slice matches.
        let mut nice_only = applied;
        nice_only.sched_runtime = 0;
        assert!(matches_applied(&now, &nice_only));
        now.sched_nice = -3;
        assert!(!matches_applied(&now, &nice_only), "the thread reniced itself");
        // A floor is compared only when one was applied.
        let mut floor = nice_only;
        floor.sched_flags = SCHED_FLAG_UTIL_CLAMP_MIN;
        floor.sched_util_min = 1024;
        let mut now = nice_only;
        assert!(!matches_applied(&now, &floor));
        now.sched_util_min = 1024;
        assert!(matches_applied(&now, &floor));
        now.sched_policy = sched::SCHED_FIFO;
        assert!(!matches_applied(&now, &floor));
    }

    #[test]
    fn refusals_need_no_privilege() {
        let mut b = Booster::with_support(
            BoostConfig::default(),
            Support {
                slice: false,
                uclamp: false,
            },
        );
        let me = sched::gettid();
        assert!(matches!(b.boost(me, 0, How::Auto), Err(BoostError::Invalid(_))));
        assert!(matches!(
            b.boost(me, MS, How::Use(Actuators::only(Actuator::Uclamp))),
            Err(BoostError::Unsupported(Actuator::Uclamp))
        ));
        assert!(matches!(
            b.boost(me, MS, How::Use(Actuators::default())),
            Err(BoostError::Invalid(_))
        ));
        assert!(matches!(
            b.boost(4_194_400, MS, How::Auto),
            Err(BoostError::NoSuchThread(4_194_400))
        ));
        assert!(b.active().is_empty());
    }
}
