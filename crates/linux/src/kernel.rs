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
//! | admission limit | `kernel.sched_rt_{runtime,period}_us`, online CPUs, one 50 ms / 1 s fair server per CPU |
//! | frequency | cpufreq sysfs ([`crate::cpufreq`]); `Unsupported` without cpufreq |
//!
//! Mainline `sched_getattr` does not expose a reservation's remaining runtime or current
//! deadline, so [`Kernel::dl_state`] answers `None` and the controllers fall back to CPU time.

use pacer_adapt::{DlState, FreqState, Kernel, KernelError, Tid};
use pacer_model::Policy;

use crate::cpufreq::CpuFreq;
use crate::procfs::ProcFs;
use crate::sched;
use crate::trace::WakeupTracer;

/// The kernel, seen from pacer controlling one process's threads.
pub struct LinuxKernel {
    pid: Tid,
    procfs: ProcFs,
    cpufreq: CpuFreq,
    tracer: Option<WakeupTracer>,
}

impl LinuxKernel {
    /// Controls the threads of process `pid`.
    pub fn for_process(pid: Tid) -> Self {
        LinuxKernel {
            pid,
            procfs: ProcFs::system(),
            cpufreq: CpuFreq::system(),
            tracer: None,
        }
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

fn read_sysctl(path: &str) -> Option<i64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

impl Kernel for LinuxKernel {
    fn now(&self) -> u64 {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: clock_gettime writes one timespec into the valid pointer given.
        unsafe {
            libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts);
        }
        ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
    }
    fn cpus(&self) -> usize {
        std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
    }
    fn threads(&self) -> Vec<Tid> {
        self.procfs.threads_of(self.pid).unwrap_or_default()
    }
    fn cpu_time(&self, t: Tid) -> Result<u64, KernelError> {
        self.procfs.cpu_time(self.pid, t).map_err(KernelError::from)
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
    fn dl_state(&self, _t: Tid) -> Result<Option<DlState>, KernelError> {
        Ok(None)
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
        // A reserved thread must stay able to create threads: RESET_ON_FORK always on.
        sched::set_policy(t, p, true).map_err(KernelError::from)
    }
    fn dl_bandwidth_limit(&self) -> f64 {
        use pacer_model::reservation::{dl_total_limit, fair_servers_bw, BW_SHIFT, DEFAULT_FAIR_SERVER};
        let runtime = read_sysctl("/proc/sys/kernel/sched_rt_runtime_us").unwrap_or(950_000);
        let period = read_sysctl("/proc/sys/kernel/sched_rt_period_us")
            .unwrap_or(1_000_000)
            .max(1) as u64;
        let cpus = self.cpus();
        // -1 disables admission control; Linux ≥ 6.12 holds one fair server per CPU.
        let Some(total) = dl_total_limit(cpus as u64 * 1024, u64::try_from(runtime).ok(), period) else {
            return cpus as f64;
        };
        let avail = total.saturating_sub(fair_servers_bw(cpus, Some(DEFAULT_FAIR_SERVER)));
        avail as f64 / (1u64 << BW_SHIFT) as f64
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
