//! A control session: LFS++ (lfspp-legacy-multimedia.txt §4–§6) applied to one unmodified, running
//! process — the engine behind `pacer exec` and `pacer attach`.
//!
//! The session owns the process handle (a pidfd, so a recycled PID is never touched), the
//! [`LinuxKernel`] and a [`LegacyController`]. Every tick it discovers threads that appeared or
//! exited, lets the controller trace, detect periods, sample CPU time and reserve through the
//! supervisor, and keeps the [`Guardian`] informed, so that the threads get their original policy
//! back when the session ends — by [`Session::release`] on a clean exit or a signal, or by the
//! guardian if pacer is killed.
//!
//! Which threads are taken: those under SCHED_OTHER or SCHED_IDLE (the legacy threads LFS++ is
//! for), optionally filtered by name. Threads already under a real-time policy were put there by
//! someone who meant it; the session lists them as skipped and leaves them alone.

use std::collections::BTreeMap;

use pacer_adapt::controller::{ControllerError, LegacyConfig, LegacyThreadStatus, Phase, ThreadOptions};
use pacer_adapt::supervisor::AllocationStatus;
use pacer_adapt::{Controller, Kernel, KernelError, LegacyController};
use pacer_model::Policy;
use serde::Serialize;

use crate::guardian::Guardian;
use crate::kernel::LinuxKernel;
use crate::ledger::{Entry, Ledger, ProcessId};
use crate::perf::ThreadCounters;
use crate::procfs::Pidfd;
use crate::sched::{self, LinuxError, SchedAttr, ThreadSched, Tid};
use crate::trace;

/// The skip reason of a thread whose name `--thread` does not select.
const NAME_NOT_SELECTED: &str = "name not selected";

/// Why a session cannot start or go on.
#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    #[error("no process with PID {0}")]
    NoProcess(Tid),
    #[error("{tid} is a thread of process {tgid}, not a process: attach to {tgid}")]
    NotAProcess { tid: Tid, tgid: Tid },
    #[error("not permitted: {0}. pacer needs root (or CAP_SYS_NICE to reserve and root to trace wake-ups)")]
    Permission(String),
    #[error("this kernel cannot run SCHED_DEADLINE reservations: {0}")]
    NoDeadline(String),
    #[error("cannot trace wake-ups: {0}")]
    Tracing(String),
    #[error("session ledger: {0}")]
    Ledger(String),
    #[error("{0}")]
    Refused(String),
    #[error(transparent)]
    Controller(#[from] ControllerError),
    #[error(transparent)]
    Linux(#[from] LinuxError),
}

/// Checks, before anything is started, that this process may create SCHED_DEADLINE reservations
/// and trace wake-ups, so a user gets one clear error instead of a session that cannot act.
/// The reservation probe runs on a short-lived thread of our own (0.1 ms every 100 ms), which
/// demotes itself.
pub fn preflight(need_tracing: bool) -> Result<(), ControlError> {
    let probe = std::thread::spawn(|| {
        let mut r = pacer_model::Reservation::new(
            pacer_model::Duration::from_us(100),
            pacer_model::Duration::from_ms(100),
            pacer_model::Duration::from_ms(100),
        );
        r.flags.reset_on_fork = true;
        let res = sched::set_policy(0, Policy::Deadline(r), true);
        if res.is_ok() {
            // Straight back, without set_policy's parking step: the parked reservation (1 µs per
            // 4.19 s) would throttle this thread, the one that must run to leave it, for 4.19 s
            // whenever it sleeps in between (a debugger's syscall stop is enough). A running
            // thread leaving SCHED_DEADLINE itself releases its bandwidth (the leak parking
            // avoids is of sleeping threads moved by another), at the latest at its 0-lag time,
            // within the 100 ms period (tests/sched.rs, against the kernel's total_bw).
            let other = sched::SchedAttr::from_policy(&Policy::Other { nice: 0 }, false);
            let _ = sched::set_attr(0, &other);
        }
        res
    })
    .join()
    .map_err(|_| ControlError::NoDeadline("probe thread panicked".into()))?;
    if let Err(e) = probe {
        match e.errno() {
            Some(libc::EPERM) | Some(libc::EACCES) => return Err(ControlError::Permission(e.to_string())),
            // Admission refusal: SCHED_DEADLINE works, the system is just full right now.
            Some(libc::EBUSY) => {}
            _ => return Err(ControlError::NoDeadline(e.to_string())),
        }
    }
    if need_tracing {
        trace::tracefs_root().map_err(|e| ControlError::Tracing(e.to_string()))?;
    }
    Ok(())
}

/// Refuses processes pacer must never control: pacer itself, init, kernel threads.
pub fn check_target(pid: Tid) -> Result<(), ControlError> {
    let comm = crate::procfs::comm(pid, pid)
        .map(|s| pacer_model::text::escape_control(&s))
        .unwrap_or_default();
    if pid == std::process::id() {
        return Err(ControlError::Refused(format!(
            "PID {pid} is this pacer process: pacer does not control itself"
        )));
    }
    if pid == 1 {
        return Err(ControlError::Refused(format!(
            "PID 1 ({comm}) is the init process: pacer does not control it"
        )));
    }
    if crate::procfs::is_kernel_thread(pid) == Some(true) {
        return Err(ControlError::Refused(format!(
            "PID {pid} ({comm}) is a kernel thread: pacer controls user programs only"
        )));
    }
    Ok(())
}

/// Opens a process by PID for a session, with the errors a user can act on.
pub fn open_process(pid: Tid) -> Result<Pidfd, ControlError> {
    match Pidfd::open(pid) {
        Ok(p) => Ok(p),
        Err(e) if e.errno() == Some(libc::ESRCH) => Err(ControlError::NoProcess(pid)),
        Err(e) if matches!(e.errno(), Some(libc::EINVAL) | Some(libc::ENOENT)) => {
            // pidfd_open refuses non-leader threads (EINVAL before Linux 6.9, ENOENT since):
            // say which process to use.
            match thread_group_of(pid) {
                Some(tgid) if tgid != pid => Err(ControlError::NotAProcess { tid: pid, tgid }),
                _ => Err(ControlError::NoProcess(pid)),
            }
        }
        Err(e) => Err(e.into()),
    }
}

fn thread_group_of(tid: Tid) -> Option<Tid> {
    crate::procfs::status_field(tid, "Tgid")
}

/// Whether a session may take thread `tid` named `name`: its scheduling state if so, else why
/// it is left alone. Taken: threads under SCHED_OTHER or SCHED_IDLE selected by `names` (all
/// when empty), allowed on every CPU this process may use (the kernel admits a reservation only
/// for a thread allowed on its whole root domain).
pub fn takeable(tid: Tid, name: &str, names: &[String]) -> Result<ThreadSched, String> {
    if !names.is_empty() && !names.iter().any(|n| n == name) {
        return Err(NAME_NOT_SELECTED.into());
    }
    let state = ThreadSched::read(tid).map_err(|e| format!("cannot read its scheduling state: {e}"))?;
    match state.policy() {
        Ok(Policy::Other { .. } | Policy::Idle) => {}
        // Someone chose batch treatment on purpose, and a reservation is not a replacement.
        Ok(Policy::Batch { .. }) => {
            return Err("under SCHED_BATCH: not a policy pacer replaces".to_string());
        }
        Ok(other) => return Err(format!("already {}: left alone", other.name())),
        Err(_) => {
            return Err(format!(
                "under {}: not a policy pacer replaces",
                kernel_policy_name(state.attr.sched_policy)
            ))
        }
    }
    if let Ok(ours) = sched::get_affinity(0) {
        if !ours.iter().all(|c| state.affinity.contains(c)) {
            return Err(format!(
                "pinned to CPUs {}: SCHED_DEADLINE needs every CPU of the root domain ({})",
                crate::sys::format_cpu_list(&state.affinity),
                crate::sys::format_cpu_list(&ours)
            ));
        }
    }
    Ok(state)
}

/// Whether a skip reason is the name filter's: such a thread is offered again when it renames
/// itself (exec renames the main thread, and threads are often named just after they start).
pub fn skipped_for_name(reason: Option<&str>) -> bool {
    reason == Some(NAME_NOT_SELECTED)
}

/// What the session does with a process's threads.
#[derive(Debug, Clone)]
pub struct SessionConfig {
    pub legacy: LegacyConfig,
    /// Take only threads with one of these names (`comm`); empty = every thread.
    pub names: Vec<String>,
    /// Reserve with this period instead of detecting it (ns).
    pub known_period: Option<u64>,
    /// Also take threads created after the session started (default true).
    pub follow_new: bool,
}

impl Default for SessionConfig {
    fn default() -> Self {
        SessionConfig {
            legacy: LegacyConfig::default(),
            names: Vec::new(),
            known_period: None,
            follow_new: true,
        }
    }
}

/// One thread of the process as the status view shows it.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct ThreadView {
    pub tid: Tid,
    pub name: String,
    /// Why pacer does not control this thread, if it does not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skipped: Option<String>,
    /// The controller's view (period, confidence, budget, bandwidths, …).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub control: Option<LegacyThreadStatus>,
    /// Context switches and CPU migrations since the thread was taken (perf software events);
    /// `None` where perf is unavailable (e.g. `perf_event_paranoid`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub context_switches: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub migrations: Option<u64>,
}

/// A snapshot of the session.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct SessionStatus {
    pub pid: Tid,
    /// Time since the session started, ns.
    pub elapsed_ns: u64,
    /// Σ Q/P of the reservations in place.
    pub reserved_bandwidth: f64,
    /// Σ Q/P the supervisor may grant (the kernel's admission limit unless configured).
    pub bound: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allocation: Option<AllocationStatus>,
    /// Wake-up events the kernel dropped (tracing buffer overruns).
    pub lost_wakeups: u64,
    /// Threads pacer controlled that exited (also those that took their own policy back first).
    pub exited_threads: u64,
    pub threads: Vec<ThreadView>,
}

/// What giving the threads back did.
#[derive(Debug, Clone, Default, Serialize, serde::Deserialize)]
pub struct ReleaseReport {
    /// Threads whose original policy was restored.
    pub restored: Vec<Tid>,
    /// Threads that could not be restored (they are then the guardian's job), with the reason.
    pub failed: Vec<(Tid, String)>,
}

struct Seen {
    name: String,
    skipped: Option<String>,
    /// pacer controlled it at some point (a thread that later chose its own policy is skipped
    /// from then on, and its exit still counts as one of the threads pacer had and lost).
    controlled: bool,
    /// Given back for a budget debt: taken again once this time (CLOCK_MONOTONIC, ns) has passed.
    retake_at: Option<u64>,
}

/// How far ahead of now a throttled reservation's deadline may be before the thread is given
/// back: at least this many of its periods…
const DEBT_PERIODS: u64 = 8;
/// …and at least this long (the run queue's clock, in which the deadline is read, is within a
/// millisecond of CLOCK_MONOTONIC: `crate::dlstate`).
const DEBT_MIN_NS: u64 = 100_000_000;

/// A reserved thread in budget debt (see [`Session`]'s handling): throttled, with its next
/// deadline far ahead.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Debt {
    pub tid: Tid,
    /// How far the deadline is ahead of now, ns.
    pub ahead_ns: u64,
    /// The deadline, in the run queue's clock (within a millisecond of CLOCK_MONOTONIC).
    pub deadline_ns: u64,
}

impl Debt {
    /// Why the thread is left alone meanwhile (the status view's `skipped`).
    pub fn reason(&self) -> String {
        format!(
            "ran past its budget, next one {} away: given its original policy back until then",
            pacer_model::Duration(self.ahead_ns).approx()
        )
    }

    /// When to take the thread again: a little after the deadline, so the kernel starts it
    /// afresh (`ENQUEUE_RESTORE` sets up a new deadline only when the old one is past).
    pub fn retake_at(&self) -> u64 {
        self.deadline_ns.saturating_add(DEBT_MIN_NS)
    }
}

/// The threads of `ctl` in budget debt. The kernel enforces a budget at the tick (without
/// `HRTICK_DL`), so a thread that suddenly needs the CPU can run up to a tick past a small
/// budget, and the replenishment repays the overrun one budget per period: 4 ms past a 1 µs
/// budget every 20 ms pushes the next deadline 80 s away, and the thread waits that long, its
/// CPU time flat, which LFS++ reads as a thread that needs nothing (a throttled thread's run
/// delay is not counted either). Changing the reservation does not help: the kernel keeps the
/// far deadline, even across a switch to SCHED_OTHER and back (measured on 6.18). The way out
/// is to give the thread its original policy until the deadline has passed.
pub fn indebted(ctl: &LegacyController, kernel: &dyn Kernel, now: u64) -> Vec<Debt> {
    ctl.status()
        .iter()
        .filter(|st| st.phase != Phase::Gone)
        .filter_map(|st| {
            let period = st.period_ns.filter(|_| st.budget_ns.is_some())?;
            let dl = kernel.dl_state(st.tid).ok().flatten()?;
            let ahead_ns = dl.deadline.saturating_sub(now);
            let limit = period.saturating_mul(DEBT_PERIODS).max(DEBT_MIN_NS);
            (dl.runtime <= 0 && ahead_ns > limit).then_some(Debt {
                tid: st.tid,
                ahead_ns,
                deadline_ns: dl.deadline,
            })
        })
        .collect()
}

/// Starts a new guardian when the current one has died.
pub type GuardianFactory = Box<dyn FnMut() -> Result<Guardian, LinuxError>>;

/// LFS++ on one process.
pub struct Session {
    pidfd: Pidfd,
    kernel: LinuxKernel,
    ctl: LegacyController,
    cfg: SessionConfig,
    seen: BTreeMap<Tid, Seen>,
    guardian: Option<Guardian>,
    respawn: Option<GuardianFactory>,
    ledger: Option<Ledger>,
    /// Things the operator should know (a guardian restarted, a thread left alone), drained by
    /// [`Session::take_notices`].
    notices: Vec<String>,
    /// Why the session cannot go on safely (its guardian died and no new one could be started).
    fatal: Option<String>,
    counters: ThreadCounters,
    start: u64,
    first_scan: bool,
    exited: u64,
    released: bool,
}

impl Session {
    /// A session on the process behind `pidfd`. `guardian`, if given, is told about every thread
    /// before its policy is first changed.
    pub fn new(
        pidfd: Pidfd,
        cfg: SessionConfig,
        guardian: Option<Guardian>,
    ) -> Result<Session, ControlError> {
        let ctl = LegacyController::new(cfg.legacy.clone())?;
        let kernel = LinuxKernel::for_process(pidfd.pid());
        let start = kernel.now();
        Ok(Session {
            pidfd,
            kernel,
            ctl,
            cfg,
            seen: BTreeMap::new(),
            guardian,
            respawn: None,
            ledger: None,
            notices: Vec::new(),
            fatal: None,
            counters: ThreadCounters::new(),
            start,
            first_scan: true,
            exited: 0,
            released: false,
        })
    }

    /// Logs every reservation the session applies, for [`Session::take_reservations`]
    /// (`pacer exec --trace` shows them as the threads' reserved bandwidth).
    pub fn with_reservation_log(mut self) -> Session {
        self.kernel.log_reservations();
        self
    }

    /// The reservations applied since the last call, oldest first (empty without
    /// [`Session::with_reservation_log`]).
    pub fn take_reservations(&mut self) -> Vec<crate::kernel::ReservationChange> {
        self.kernel.take_reservations()
    }

    /// How to start a new guardian if the current one dies. Without it a dead guardian makes the
    /// session give every thread back and stop ([`Session::fatal`]).
    pub fn with_guardian_respawn(mut self, f: GuardianFactory) -> Session {
        self.respawn = Some(f);
        self
    }

    /// Keeps the session's ledger in `dir` (see [`crate::ledger`]), written before any thread
    /// is changed, so `pacer doctor --repair` can restore threads if pacer and its guardian are
    /// both killed.
    pub fn with_ledger(mut self, dir: &std::path::Path) -> Result<Session, ControlError> {
        let mut ledger = Ledger::new(dir).ok_or_else(|| {
            ControlError::Ledger(format!(
                "cannot read this process's start time for {}",
                dir.display()
            ))
        })?;
        ledger.guardian = self.guardian.as_ref().and_then(|g| ProcessId::of(g.pid()));
        ledger
            .write()
            .map_err(|e| ControlError::Ledger(format!("{}: {e}", ledger.path.display())))?;
        self.ledger = Some(ledger);
        Ok(self)
    }

    pub fn pid(&self) -> Tid {
        self.pidfd.pid()
    }

    /// The controller's tick period, ns.
    pub fn tick_ns(&self) -> u64 {
        self.ctl.period().unwrap_or(100_000_000)
    }

    /// The pidfd, readable once the process has exited (for polling).
    pub fn pidfd(&self) -> &Pidfd {
        &self.pidfd
    }

    /// Whether the process is still running.
    pub fn alive(&self) -> bool {
        self.pidfd.is_alive().unwrap_or(false)
    }

    /// Messages for the operator since the last call.
    pub fn take_notices(&mut self) -> Vec<String> {
        std::mem::take(&mut self.notices)
    }

    /// Why the session must stop (then call [`Session::release`]), if it must.
    pub fn fatal(&self) -> Option<&str> {
        self.fatal.as_deref()
    }

    fn write_ledger(&mut self) {
        if let Some(l) = &self.ledger {
            if let Err(e) = l.write() {
                let msg = format!("cannot update the session ledger {}: {e}", l.path.display());
                if !self.notices.contains(&msg) {
                    self.notices.push(msg);
                }
            }
        }
    }

    /// Takes new threads and forgets exited ones.
    fn refresh_threads(&mut self) {
        let Ok(now) = self.pidfd.threads() else {
            return;
        };
        let gone: Vec<Tid> = self.seen.keys().filter(|t| !now.contains(t)).copied().collect();
        let mut ledger_changed = false;
        for tid in gone {
            if let Some(s) = self.seen.remove(&tid) {
                // pacer run's threads, for one, put themselves back to SCHED_OTHER just before
                // they exit; whether a scan sees that first is a race, so the count must not
                // depend on it.
                if s.controlled {
                    self.exited += 1;
                }
                if s.skipped.is_none() {
                    // The thread is gone: nothing to restore, the kernel released its bandwidth.
                    let _ = self.ctl.remove_thread(&mut self.kernel, tid);
                    self.counters.remove(tid);
                    if let Some(g) = self.guardian.as_mut() {
                        g.untrack(tid);
                    }
                }
                self.kernel.forget(tid);
                if let Some(l) = self.ledger.as_mut() {
                    ledger_changed |= l.entries.remove(&tid).is_some();
                }
            }
        }
        let first = std::mem::replace(&mut self.first_scan, false);
        for tid in now {
            if let Some(at) = self.seen.get(&tid).and_then(|s| s.retake_at) {
                if self.kernel.now() >= at {
                    let name = self.pidfd.comm(tid).unwrap_or_default();
                    let r = self.take(tid, &name);
                    ledger_changed |= r.is_none();
                    let controlled = r.is_none();
                    let s = self.seen.get_mut(&tid).expect("listed above");
                    s.controlled |= controlled;
                    s.retake_at = None;
                    s.name = name;
                    s.skipped = r;
                }
                continue;
            }
            if let Some(s) = self.seen.get(&tid) {
                // A thread is often named after it starts (exec of the program, or
                // pthread_setname_np after pthread_create): a name skipped once is checked again.
                if skipped_for_name(s.skipped.as_deref()) {
                    let name = self.pidfd.comm(tid).unwrap_or_default();
                    if name != s.name {
                        let r = self.take(tid, &name);
                        ledger_changed |= r.is_none();
                        let controlled = r.is_none();
                        self.seen.insert(
                            tid,
                            Seen {
                                name,
                                skipped: r,
                                controlled,
                                retake_at: None,
                            },
                        );
                    }
                }
                continue;
            }
            let name = self.pidfd.comm(tid).unwrap_or_default();
            let skipped = if !first && !self.cfg.follow_new {
                Some("appeared after the start (--no-follow)".to_string())
            } else {
                let r = self.take(tid, &name);
                ledger_changed |= r.is_none();
                r
            };
            let controlled = skipped.is_none();
            self.seen.insert(
                tid,
                Seen {
                    name,
                    skipped,
                    controlled,
                    retake_at: None,
                },
            );
        }
        if ledger_changed {
            self.write_ledger();
        }
    }

    /// Puts a thread under control; `Some(reason)` if it is left alone. A thread skipped for its
    /// name ([`NAME_NOT_SELECTED`]) is offered again when its name changes.
    fn take(&mut self, tid: Tid, name: &str) -> Option<String> {
        let state = match takeable(tid, name, &self.cfg.names) {
            Ok(s) => s,
            Err(why) => return Some(why),
        };
        let opts = ThreadOptions {
            known_period: self.cfg.known_period,
            ..ThreadOptions::default()
        };
        if let Err(e) = self.ctl.add_thread(tid, opts) {
            return Some(e.to_string());
        }
        let pid = self.pidfd.pid();
        if let Some(g) = self.guardian.as_mut() {
            g.track(pid, tid, &state);
        }
        if let (Some(l), Some(process)) = (self.ledger.as_mut(), ProcessId::of(pid)) {
            l.entries.insert(
                tid,
                Entry {
                    process,
                    tid,
                    original: state.clone(),
                },
            );
        }
        self.kernel.remember_original(tid, state);
        // Informational only: a session without perf counters still controls the thread.
        let _ = self.counters.add(tid);
        None
    }

    /// Gives threads that are exiting their original policy back at once. `do_exit()` still has
    /// work to do (unmapping memory, closing files, waking the parent), and a thread reserved
    /// for the little it ran before it started exiting may have a budget that makes that take
    /// minutes: with the kernel enforcing budgets at the tick, each tick run over a 1 µs budget
    /// is repaid at 1 µs per period. The exit is still counted when the thread is gone.
    fn release_exiting(&mut self) {
        let pid = self.pidfd.pid();
        let exiting: Vec<Tid> = self
            .seen
            .iter()
            .filter(|(_, s)| s.skipped.is_none())
            .filter(|(&tid, _)| crate::procfs::is_exiting(pid, tid) == Some(true))
            .map(|(&tid, _)| tid)
            .collect();
        if exiting.is_empty() {
            return;
        }
        for tid in exiting {
            // On failure it stays tracked by the guardian and the ledger, which retry at the end.
            if let Err(e) = self.hand_back(tid, "exiting: given its original policy back".into()) {
                self.notices.push(format!(
                    "thread {tid} is exiting and could not be given its policy back: {e}"
                ));
            }
        }
        self.write_ledger();
    }

    /// Gives back, for a while, the threads whose reservation is in debt ([`indebted`]); each
    /// is taken again, as new, once its far deadline has passed.
    fn release_indebted(&mut self) {
        let now = self.kernel.now();
        let debts: Vec<Debt> = indebted(&self.ctl, &self.kernel, now)
            .into_iter()
            .filter(|d| self.seen.get(&d.tid).is_some_and(|s| s.skipped.is_none()))
            .collect();
        for d in debts {
            let tid = d.tid;
            let wait = pacer_model::Duration(d.ahead_ns).approx();
            if let Err(e) = self.hand_back(tid, d.reason()) {
                self.notices.push(format!(
                    "thread {tid} waits {wait} for its next budget and could not be given its policy back: {e}"
                ));
                continue;
            }
            let name = self.seen.get(&tid).map(|s| s.name.clone()).unwrap_or_default();
            if let Some(s) = self.seen.get_mut(&tid) {
                s.retake_at = Some(d.retake_at());
            }
            self.notices.push(format!(
                "thread {tid} ({}) ran past its budget (the kernel enforces budgets at the tick) and would wait {wait} for the next one: pacer gave it its original policy and takes it again after that",
                pacer_model::text::escape_control(&name)
            ));
            self.write_ledger();
        }
    }

    /// Gives a controlled thread its original policy and stops tracking it (controller,
    /// counters, guardian, ledger), listing it as skipped for `why`. A thread already gone
    /// counts as given back.
    fn hand_back(&mut self, tid: Tid, why: String) -> Result<(), KernelError> {
        match self.ctl.remove_thread(&mut self.kernel, tid) {
            Ok(()) | Err(KernelError::NoSuchThread(_)) => {}
            Err(e) => return Err(e),
        }
        self.counters.remove(tid);
        if let Some(g) = self.guardian.as_mut() {
            g.untrack(tid);
        }
        if let Some(l) = self.ledger.as_mut() {
            l.entries.remove(&tid);
        }
        if let Some(s) = self.seen.get_mut(&tid) {
            s.skipped = Some(why);
        }
        Ok(())
    }

    /// Stops controlling a thread that chose its own scheduling, without touching it.
    fn leave_alone(&mut self, tid: Tid, now: SchedAttr) {
        let _ = self.ctl.remove_thread(&mut self.kernel, tid);
        self.counters.remove(tid);
        if let Some(g) = self.guardian.as_mut() {
            g.untrack(tid);
        }
        if let Some(l) = self.ledger.as_mut() {
            l.entries.remove(&tid);
        }
        self.write_ledger();
        let what = describe_attr(&now);
        let name = self.seen.get(&tid).map(|s| s.name.clone()).unwrap_or_default();
        if let Some(s) = self.seen.get_mut(&tid) {
            s.skipped = Some(format!(
                "changed its own policy to {what}: released and left alone"
            ));
        }
        self.notices.push(format!(
            "thread {tid} ({}) changed its own policy to {what}: pacer released it and leaves it alone",
            pacer_model::text::escape_control(&name)
        ));
    }

    /// Threads that set their own policy after pacer took them but before pacer changed them:
    /// their new state is their original (guardian and ledger told), unless it is one pacer does
    /// not replace, which makes them threads that chose their own policy.
    fn refresh_originals(&mut self) {
        let pid = self.pidfd.pid();
        let mut changed = false;
        for (tid, now) in self.kernel.changed_before_applied() {
            if !matches!(now.policy(), Ok(Policy::Other { .. } | Policy::Idle)) {
                self.leave_alone(tid, now.attr);
                continue;
            }
            if let Some(g) = self.guardian.as_mut() {
                g.untrack(tid);
                g.track(pid, tid, &now);
            }
            if let Some(e) = self.ledger.as_mut().and_then(|l| l.entries.get_mut(&tid)) {
                e.original = now.clone();
                changed = true;
            }
            self.kernel.remember_original(tid, now);
        }
        if changed {
            self.write_ledger();
        }
    }

    /// Starts a new guardian if the current one died, or makes the session fatal.
    fn check_guardian(&mut self) {
        let Some(problem) = self.guardian.as_mut().and_then(|g| g.broken()) else {
            return;
        };
        let started = match self.respawn.as_mut() {
            Some(f) => f().map_err(|e| e.to_string()),
            None => Err("no way to start one".to_string()),
        };
        match started {
            Ok(mut g) => {
                let pid = self.pidfd.pid();
                let tracked: Vec<(Tid, ThreadSched)> = self
                    .seen
                    .iter()
                    .filter(|(_, s)| s.skipped.is_none())
                    .filter_map(|(&t, _)| self.kernel.original(t).map(|o| (t, o.clone())))
                    .collect();
                g.replay(tracked.iter().map(|(t, o)| (pid, *t, o)));
                self.notices.push(format!(
                    "{problem}; started a new guardian (PID {}) and handed it {} thread(s)",
                    g.pid(),
                    tracked.len()
                ));
                if let Some(l) = self.ledger.as_mut() {
                    l.guardian = ProcessId::of(g.pid());
                }
                self.guardian = Some(g);
                self.write_ledger();
            }
            Err(e) => {
                self.fatal = Some(format!(
                    "{problem}, and a new guardian could not be started ({e}): giving every thread back"
                ));
            }
        }
    }

    /// One control step: thread discovery, the guardian's health, threads that changed their
    /// own policy, then the controller's tick.
    pub fn tick(&mut self) {
        self.refresh_threads();
        self.release_exiting();
        self.check_guardian();
        if self.fatal.is_some() {
            return;
        }
        self.refresh_originals();
        for (tid, now) in self.kernel.take_foreign_changes() {
            self.leave_alone(tid, now);
        }
        self.ctl.tick(&mut self.kernel);
        self.release_indebted();
        // A change noticed by the kernel right before it would have overwritten it.
        let caught: Vec<(Tid, SchedAttr)> = self
            .ctl
            .status()
            .iter()
            .filter_map(|s| self.kernel.foreign_state(s.tid).map(|a| (s.tid, a)))
            .collect();
        for (tid, now) in caught {
            self.leave_alone(tid, now);
        }
    }

    /// A snapshot for the status view.
    pub fn status(&self) -> SessionStatus {
        let ctl: BTreeMap<Tid, LegacyThreadStatus> =
            self.ctl.status().into_iter().map(|s| (s.tid, s)).collect();
        let counts: BTreeMap<Tid, crate::perf::SwitchCounts> = self
            .counters
            .read_all()
            .unwrap_or_default()
            .into_iter()
            .map(|s| (s.tid, s.counts))
            .collect();
        let threads: Vec<ThreadView> = self
            .seen
            .iter()
            .map(|(&tid, s)| ThreadView {
                tid,
                // Read again: a thread renames itself, and `exec` renames the main thread.
                name: self.pidfd.comm(tid).unwrap_or_else(|_| s.name.clone()),
                skipped: s.skipped.clone(),
                control: ctl.get(&tid).cloned(),
                context_switches: counts.get(&tid).map(|c| c.context_switches),
                migrations: counts.get(&tid).map(|c| c.migrations),
            })
            .collect();
        let reserved_bandwidth = ctl
            .values()
            .filter(|s| s.phase != Phase::Gone)
            .filter_map(|s| s.reserved_bandwidth)
            .sum::<f64>()
            // An empty float sum is -0.0, which would print as "-0.000".
            + 0.0;
        SessionStatus {
            pid: self.pidfd.pid(),
            elapsed_ns: self.kernel.now().saturating_sub(self.start),
            reserved_bandwidth,
            bound: self
                .cfg
                .legacy
                .bound
                .unwrap_or_else(|| self.kernel.dl_bandwidth_limit(None)),
            allocation: self.ctl.allocation_status(),
            lost_wakeups: self.kernel.lost_wakeups(),
            exited_threads: self.exited,
            threads,
        }
    }

    /// Gives every thread its original state back and stops tracing; then dismisses the
    /// guardian and deletes the ledger, unless a thread could not be restored (the guardian then
    /// retries when it sees the pipe close, and the ledger stays for `pacer doctor`). Idempotent.
    pub fn release(&mut self) -> ReleaseReport {
        let mut report = ReleaseReport::default();
        if self.released {
            return report;
        }
        self.released = true;
        for (tid, r) in self.ctl.release(&mut self.kernel) {
            match r {
                Ok(()) if self.kernel.foreign_state(tid).is_some() => {}
                Ok(()) => report.restored.push(tid),
                // Exited threads have nothing left to restore.
                Err(KernelError::NoSuchThread(_)) => {}
                Err(e) => report.failed.push((tid, e.to_string())),
            }
        }
        if let Some(g) = self.guardian.take() {
            if report.failed.is_empty() {
                g.finish();
            } else {
                // Dropping the pipe without `done` makes the guardian try again.
                drop(g);
            }
        }
        if report.failed.is_empty() {
            if let Some(l) = self.ledger.take() {
                let _ = l.remove();
            }
        }
        report
    }
}

/// A short description of a scheduling attribute, as `chrt` would put it.
pub fn describe_attr(a: &SchedAttr) -> String {
    match a.to_policy() {
        Ok(Policy::Fifo { priority }) => format!("SCHED_FIFO {priority}"),
        Ok(Policy::Rr { priority }) => format!("SCHED_RR {priority}"),
        Ok(Policy::Other { nice }) => format!("SCHED_OTHER (nice {nice})"),
        Ok(Policy::Idle) => "SCHED_IDLE".into(),
        Ok(Policy::Batch { nice }) => format!("SCHED_BATCH (nice {nice})"),
        Ok(Policy::Deadline(r)) => format!(
            "SCHED_DEADLINE {}/{}/{}",
            r.runtime.approx(),
            r.deadline.approx(),
            r.period.approx()
        ),
        Err(_) => kernel_policy_name(a.sched_policy).to_string(),
    }
}

/// The kernel's name of a policy number.
pub fn kernel_policy_name(policy: u32) -> &'static str {
    match policy {
        sched::SCHED_OTHER => "SCHED_OTHER",
        sched::SCHED_FIFO => "SCHED_FIFO",
        sched::SCHED_RR => "SCHED_RR",
        sched::SCHED_BATCH => "SCHED_BATCH",
        sched::SCHED_IDLE => "SCHED_IDLE",
        sched::SCHED_DEADLINE => "SCHED_DEADLINE",
        sched::SCHED_EXT => "SCHED_EXT",
        _ => "an unknown policy",
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        self.release();
    }
}
