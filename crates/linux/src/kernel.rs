//! The real kernel as the adaptation engine's [`Kernel`]: the same sensors and actuators the
//! simulator provides (`pacer_sim::SimKernel`), answered by Linux — so a controller proven in
//! simulation runs unchanged on a machine.
//!
//! | sensor / actuator | Linux interface |
//! |---|---|
//! | time | `clock_gettime(CLOCK_MONOTONIC)` |
//! | CPU time | `/proc/PID/task/TID/schedstat` ([`crate::procfs`]) |
//! | wake-ups | a private tracefs instance filtered on the traced TIDs ([`crate::trace`]) |
//! | policy / reservation | `sched_setattr`/`sched_getattr` ([`crate::sched`]), RESET_ON_FORK always on for reservations |
//! | admission limit | `.dl_bw->bw` in the scheduler's debugfs, else `kernel.sched_rt_{runtime,period}_us` read once ([`crate::admission`]), online CPUs, one 50 ms / 1 s fair server per CPU |
//! | frequency | cpufreq sysfs ([`crate::cpufreq`]); `Unsupported` without cpufreq |
//! | SCHED_DEADLINE state (remaining runtime, current deadline) | `dl.runtime`/`dl.deadline` of `/proc/PID/task/TID/sched` ([`crate::dlstate`]); the thread's CPU clock is read first to bring the runtime up to date |
//!
//! `sched_getattr` does not expose a reservation's remaining runtime or current deadline, but
//! the scheduler's per-task debug file does: [`Kernel::dl_state`] reads it. The deadline is in
//! the run queue's clock, not CLOCK_MONOTONIC (see [`crate::dlstate`]): compare deadlines with
//! each other, not with [`Kernel::now`]. For threads of another process the runtime of a thread
//! that is running at that instant can lag by up to one tick; a cooperating thread reports its
//! own state exactly with [`crate::dlstate::DlStateReader::read_own`].

use std::collections::BTreeMap;

use pacer_adapt::{DlState, FreqState, Kernel, KernelError, Tid};
use pacer_model::Policy;

use crate::cpufreq::CpuFreq;
use crate::procfs::ProcFs;
use crate::sched::{self, SchedAttr, ThreadSched, SCHED_DEADLINE};
use crate::trace::WakeupTracer;

/// The kernel, seen from pacer controlling one process's threads.
pub struct LinuxKernel {
    pid: Tid,
    procfs: ProcFs,
    cpufreq: CpuFreq,
    tracer: Option<WakeupTracer>,
    /// Each thread's full state before pacer first changed it: restored field by field.
    originals: BTreeMap<Tid, ThreadSched>,
    /// What pacer last set on each thread it changed, to notice a thread that changed itself.
    applied: BTreeMap<Tid, SchedAttr>,
    /// Threads that changed their own policy while controlled, with what they chose: from then
    /// on pacer leaves them alone (their decision wins).
    foreign: BTreeMap<Tid, SchedAttr>,
    /// Every reservation applied, when asked for ([`LinuxKernel::log_reservations`]).
    reservations: Option<Vec<ReservationChange>>,
}

/// A SCHED_DEADLINE reservation pacer gave a thread (or took back: `runtime_ns` and
/// `period_ns` 0), at CLOCK_MONOTONIC `t_ns`: what a trace of the session shows as the thread's
/// reserved bandwidth.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReservationChange {
    pub t_ns: u64,
    pub tid: Tid,
    pub runtime_ns: u64,
    pub period_ns: u64,
}

impl LinuxKernel {
    /// Controls the threads of process `pid`.
    pub fn for_process(pid: Tid) -> Self {
        LinuxKernel {
            pid,
            procfs: ProcFs::system(),
            cpufreq: CpuFreq::system(),
            tracer: None,
            originals: BTreeMap::new(),
            applied: BTreeMap::new(),
            foreign: BTreeMap::new(),
            reservations: None,
        }
    }

    /// Keeps a log of every reservation applied from now on (`pacer exec --trace`).
    pub fn log_reservations(&mut self) {
        self.reservations.get_or_insert_with(Vec::new);
    }

    /// The reservations applied since the last call (empty unless logging).
    pub fn take_reservations(&mut self) -> Vec<ReservationChange> {
        self.reservations.as_mut().map(std::mem::take).unwrap_or_default()
    }

    fn log_reservation(&mut self, tid: Tid, p: &Policy) {
        if let Some(log) = self.reservations.as_mut() {
            let (runtime_ns, period_ns) = match p {
                Policy::Deadline(r) => (r.runtime.ns(), r.period.ns()),
                _ => (0, 0),
            };
            log.push(ReservationChange {
                t_ns: crate::sys::monotonic_ns(),
                tid,
                runtime_ns,
                period_ns,
            });
        }
    }

    /// Records a thread's state before pacer changes it (read by the caller at the moment it
    /// took the thread, so the guardian and the ledger hold the same snapshot). Without it the
    /// kernel reads the state itself before the first change.
    pub fn remember_original(&mut self, tid: Tid, state: ThreadSched) {
        self.originals.insert(tid, state);
    }

    /// The state `tid` had before pacer changed it, if pacer knows it.
    pub fn original(&self, tid: Tid) -> Option<&ThreadSched> {
        self.originals.get(&tid)
    }

    /// Forgets a thread that is gone.
    pub fn forget(&mut self, tid: Tid) {
        self.originals.remove(&tid);
        self.applied.remove(&tid);
        self.foreign.remove(&tid);
    }

    /// Threads whose scheduling state is no longer what pacer set: the thread (or someone else)
    /// changed it. Each is reported once, with the state it has now; pacer never changes it
    /// again, and giving it back leaves it as it is.
    pub fn take_foreign_changes(&mut self) -> Vec<(Tid, SchedAttr)> {
        let mut out = Vec::new();
        let tids: Vec<Tid> = self.applied.keys().copied().collect();
        for tid in tids {
            let Ok(now) = sched::get_attr(tid) else { continue };
            if !same_setting(&now, &self.applied[&tid]) {
                self.applied.remove(&tid);
                self.foreign.insert(tid, now);
                out.push((tid, now));
            }
        }
        out
    }

    /// Threads pacer took but has not changed yet whose scheduling state is no longer the
    /// snapshot taken when they were taken, with their state now. Many programs set a new
    /// thread's policy or nice value right after creating it; pacer may take the thread in
    /// between. That is the thread's starting state, not a change made against pacer: the caller
    /// refreshes the snapshot ([`LinuxKernel::remember_original`], and its guardian's copy) when
    /// the thread is still under a policy pacer takes, and leaves it alone otherwise.
    pub fn changed_before_applied(&self) -> Vec<(Tid, ThreadSched)> {
        self.originals
            .iter()
            .filter(|(t, _)| !self.applied.contains_key(t) && !self.foreign.contains_key(t))
            .filter_map(|(&t, o)| {
                let now = ThreadSched::read(t).ok()?;
                (!same_setting(&now.attr, &o.attr)).then_some((t, now))
            })
            .collect()
    }

    /// What `tid` chose, if it changed its own policy while controlled.
    pub fn foreign_state(&self, tid: Tid) -> Option<SchedAttr> {
        self.foreign.get(&tid).copied()
    }

    /// The controlled process.
    pub fn pid(&self) -> Tid {
        self.pid
    }

    /// Wake-up events the tracer lost (ring buffer overruns) since tracing began.
    pub fn lost_wakeups(&self) -> u64 {
        self.tracer.as_ref().map_or(0, |t| t.lost())
    }

    /// `Unsupported` when cpufreq (or this policy) does not exist, rather than an I/O error.
    fn check_policy(&self, cluster: usize) -> Result<(), KernelError> {
        let ids = self.cpufreq.policy_ids().map_err(KernelError::from)?;
        if ids.contains(&cluster) {
            Ok(())
        } else {
            Err(KernelError::Unsupported(format!(
                "no cpufreq policy {cluster} (policies: {ids:?})"
            )))
        }
    }

    fn tracer(&mut self) -> Result<&mut WakeupTracer, KernelError> {
        if self.tracer.is_none() {
            self.tracer = Some(WakeupTracer::new().map_err(KernelError::from)?);
        }
        Ok(self.tracer.as_mut().expect("just created"))
    }
}

impl Kernel for LinuxKernel {
    fn now(&self) -> u64 {
        crate::sys::monotonic_ns()
    }
    fn cpus(&self) -> usize {
        // Once per process: `available_parallelism` reads the cgroup quota files every call, and
        // the supervisor asks at every allocation (16 % of the daemon's CPU with 100 sessions).
        static CPUS: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
        *CPUS.get_or_init(|| std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1))
    }
    fn threads(&self) -> Vec<Tid> {
        self.procfs.threads_of(self.pid).unwrap_or_default()
    }
    fn cpu_time(&self, t: Tid) -> Result<u64, KernelError> {
        self.procfs.cpu_time(self.pid, t).map_err(KernelError::from)
    }
    /// schedstat's run delay: a wait is counted when it ends, so a thread waiting right now has
    /// its current wait missing (at most one wait, which under periodic interference is short).
    fn run_delay(&self, t: Tid) -> Result<Option<u64>, KernelError> {
        let info = self.procfs.sched_info(self.pid, t).map_err(KernelError::from)?;
        Ok(Some(info.wait_ns))
    }
    fn trace_wakeups(&mut self, t: Tid, on: bool) -> Result<(), KernelError> {
        if on {
            self.tracer()?.add(t).map_err(KernelError::from)
        } else if let Some(tr) = self.tracer.as_mut() {
            tr.remove(t).map_err(KernelError::from)
        } else {
            Ok(())
        }
    }
    fn drain_wakeups(&mut self, t: Tid, out: &mut Vec<u64>) -> Result<(), KernelError> {
        match self.tracer.as_mut() {
            Some(tr) => tr.drain_tid(t, out).map_err(KernelError::from),
            None => Ok(()),
        }
    }
    /// `timer`: recorded in hard-interrupt context, which is where hrtimer expiries wake their
    /// sleepers (see [`crate::trace`], "Wake-up origin", for what else lands there).
    fn drain_wakeups_marked(
        &mut self,
        t: Tid,
        out: &mut Vec<pacer_adapt::kernel::Wakeup>,
    ) -> Result<(), KernelError> {
        match self.tracer.as_mut() {
            Some(tr) => tr.drain_tid_marked(t, out).map_err(KernelError::from),
            None => Ok(()),
        }
    }
    fn dl_state(&self, t: Tid) -> Result<Option<DlState>, KernelError> {
        crate::dlstate::read(self.pid, t).map_err(KernelError::from)
    }
    fn policy(&self, t: Tid) -> Result<Policy, KernelError> {
        sched::get_policy(t).map_err(KernelError::from)
    }
    fn set_policy(&mut self, t: Tid, p: Policy) -> Result<(), KernelError> {
        // Only threads of the controlled process: a TID that was reused by another process since
        // the controller last saw it is not ours to change.
        if !self.procfs.has_thread(self.pid, t) {
            return Err(KernelError::NoSuchThread(t));
        }
        let leaving = !matches!(p, Policy::Deadline(_));
        if !self.foreign.contains_key(&t) {
            let now = sched::get_attr(t).map_err(KernelError::from)?;
            // Compare with what pacer left there last; checked right before every change, so a
            // thread that switched itself (e.g. to SCHED_FIFO) is never put back under a
            // reservation.
            let expected = self
                .applied
                .get(&t)
                .copied()
                .or_else(|| self.originals.get(&t).map(|o| o.attr));
            if expected.is_some_and(|exp| !same_setting(&now, &exp)) {
                self.applied.remove(&t);
                self.foreign.insert(t, now);
            }
        }
        if self.foreign.contains_key(&t) {
            return if leaving {
                // Giving back a thread that chose its own policy: that choice stays.
                Ok(())
            } else {
                Err(KernelError::Invalid(format!(
                    "thread {t} changed its own scheduling policy: pacer leaves it alone"
                )))
            };
        }
        if leaving {
            if let Some(orig) = self.originals.get(&t) {
                // Leaving a reservation is giving the thread back (the controllers set nothing
                // else): to its original, every field, even when the controller saved its
                // policy before the thread set its own at its start (changed_before_applied).
                let fair =
                    |x: &Policy| matches!(x, Policy::Other { .. } | Policy::Idle | Policy::Batch { .. });
                if orig.policy().is_ok_and(|o| o == p || (fair(&o) && fair(&p))) {
                    // Back to what it had: every field, not just the policy.
                    sched::restore(t, orig).map_err(KernelError::from)?;
                    self.applied.remove(&t);
                    self.log_reservation(t, &p);
                    return Ok(());
                }
            }
        } else if let std::collections::btree_map::Entry::Vacant(e) = self.originals.entry(t) {
            e.insert(ThreadSched::read(t).map_err(KernelError::from)?);
        }
        // A reserved thread must stay able to create threads: RESET_ON_FORK always on.
        sched::set_policy(t, p, true).map_err(KernelError::from)?;
        if leaving {
            self.applied.remove(&t);
        } else {
            self.applied.insert(t, SchedAttr::from_policy(&p, true));
        }
        self.log_reservation(t, &p);
        Ok(())
    }
    /// A thread's root domain is the CPUs of its affinity: SCHED_DEADLINE admission requires
    /// the affinity to cover the root domain, so for a thread that can be reserved the two agree.
    fn dl_bandwidth_limit(&self, t: Option<Tid>) -> f64 {
        let cpus = t
            .and_then(|t| sched::get_affinity(t).ok())
            .map_or_else(|| self.cpus(), |a| a.len().max(1));
        // Never the sysctls at every tick: reading them rebuilds the root domains and corrupts
        // the accounting of threads exiting meanwhile (see crate::admission).
        crate::admission::cap().reservable(cpus)
    }
    fn frequency(&self, cluster: usize) -> Result<FreqState, KernelError> {
        self.check_policy(cluster)?;
        Ok(self
            .cpufreq
            .policy(cluster)
            .map_err(KernelError::from)?
            .freq_state())
    }
    fn set_frequency(&mut self, cluster: usize, khz: u32) -> Result<(), KernelError> {
        self.check_policy(cluster)?;
        self.cpufreq.set_floor(cluster, khz).map_err(KernelError::from)
    }
}

/// Whether two attributes set the same scheduling: policy, flags that matter and the parameters
/// of that policy (the EEVDF slice `sched_getattr` reports for fair policies, and fields of other
/// policies, are not compared).
fn same_setting(a: &SchedAttr, b: &SchedAttr) -> bool {
    use pacer_model::reservation::{SCHED_FLAG_RECLAIM, SCHED_FLAG_RESET_ON_FORK};
    let flags = SCHED_FLAG_RESET_ON_FORK | SCHED_FLAG_RECLAIM;
    if a.sched_policy != b.sched_policy || a.sched_flags & flags != b.sched_flags & flags {
        return false;
    }
    match a.sched_policy {
        SCHED_DEADLINE => {
            (a.sched_runtime, a.sched_deadline, a.sched_period)
                == (b.sched_runtime, b.sched_deadline, b.sched_period)
        }
        sched::SCHED_FIFO | sched::SCHED_RR => a.sched_priority == b.sched_priority,
        sched::SCHED_OTHER | sched::SCHED_BATCH => a.sched_nice == b.sched_nice,
        _ => true,
    }
}
