//! The one narrow interface between the adaptation engine and a kernel (DESIGN.md, "One
//! adaptation engine, two kernels"): sensors (time, thread CPU time, traced wake-ups, current
//! SCHED_DEADLINE state, frequency) and actuators (scheduling policy and reservation, frequency).
//! The simulator implements it in `pacer-sim`; the real kernel in `pacer-linux`.

use pacer_model::Policy;
use serde::Serialize;

/// A thread as the kernel knows it: a simulator thread index, or a Linux TID.
pub type Tid = u32;

/// Why a kernel operation failed. Admission refusals are their own case: the supervisor treats
/// them as "system full", never as a crash.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KernelError {
    #[error("admission control refused the reservation (EBUSY): {0}")]
    Admission(String),
    #[error("invalid parameters (EINVAL): {0}")]
    Invalid(String),
    #[error("no such thread {0}")]
    NoSuchThread(Tid),
    #[error("not permitted: {0}")]
    Permission(String),
    #[error("not supported here: {0}")]
    Unsupported(String),
    #[error("{0}")]
    Other(String),
}

/// The SCHED_DEADLINE state the kernel exposes for a reserved thread: the current absolute
/// scheduling deadline and the remaining runtime (already scaled by frequency and capacity in
/// the kernel — the quantities of eq. 3 in adaptive-deadline-audio-android.txt).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct DlState {
    pub deadline: u64,
    pub runtime: i64,
}

/// A frequency domain's state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FreqState {
    /// Current frequency, kHz.
    pub cur_khz: u32,
    /// Frequencies the domain can run at, ascending, kHz.
    pub available_khz: Vec<u32>,
}

/// What a cooperating application tells the engine (through the client library on Linux, through
/// workload events in the simulator).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum AppEvent {
    /// The coming jobs will do `units` work units (the audio paper's workUnits hint).
    WorkUnits { thread: Tid, t: u64, units: u64 },
    /// A job (callback) begins; `dl` is the thread's deadline state at that instant.
    JobBegin {
        thread: Tid,
        t: u64,
        dl: Option<DlState>,
        cpu_time: u64,
    },
    /// A job ends.
    JobEnd {
        thread: Tid,
        t: u64,
        dl: Option<DlState>,
        cpu_time: u64,
    },
}

/// One record of a thread's wake-up trace: a wake-up and what raised it, or the expiry of a
/// timer the thread set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Wakeup {
    /// When the thread was woken, or set the timer, ns (the clock of [`Kernel::now`]).
    pub t_ns: u64,
    pub origin: Origin,
}

/// What a [`Wakeup`] record is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Origin {
    /// A wake-up raised by another thread, a device, or a source the kernel cannot tell.
    Other,
    /// A wake-up raised by a timer expiry (clock_nanosleep, timerfd, a periodic timer's
    /// release) rather than by another thread or an I/O completion. Its time does not move with
    /// the load, while the others follow the threads and devices that raise them. What each
    /// kernel counts as a timer is documented with its implementation.
    Timer,
    /// Not a wake-up: the thread set a timer to expire at `expiry_ns` (Linux: `hrtimer_start`
    /// of a sleep, timerfd or POSIX timer). A periodic thread sets its next activation this way
    /// at the end of every job, *also when it runs late* and the expiry is already past, so it
    /// never sleeps and leaves no wake-up: the expiries are the period's grid itself, the
    /// best evidence of a period a trace can hold.
    TimerSet { expiry_ns: u64 },
}

impl Wakeup {
    /// A wake-up of `origin` [`Origin::Other`].
    pub fn other(t_ns: u64) -> Self {
        Wakeup {
            t_ns,
            origin: Origin::Other,
        }
    }
    /// A wake-up marked [`Origin::Timer`] when `timer`, else [`Origin::Other`].
    pub fn woken(t_ns: u64, timer: bool) -> Self {
        Wakeup {
            t_ns,
            origin: if timer { Origin::Timer } else { Origin::Other },
        }
    }
    /// Whether the record is a wake-up (not a [`Origin::TimerSet`]).
    pub fn is_wakeup(&self) -> bool {
        !matches!(self.origin, Origin::TimerSet { .. })
    }
    /// Whether the record is a wake-up raised by a timer.
    pub fn is_timer(&self) -> bool {
        self.origin == Origin::Timer
    }
    /// The expiry of a [`Origin::TimerSet`] record.
    pub fn expiry_ns(&self) -> Option<u64> {
        match self.origin {
            Origin::TimerSet { expiry_ns } => Some(expiry_ns),
            _ => None,
        }
    }
}

/// Sensors and actuators of a kernel.
pub trait Kernel {
    /// Monotonic time, ns.
    fn now(&self) -> u64;
    /// Number of CPUs.
    fn cpus(&self) -> usize;
    /// Threads the engine may observe and control.
    fn threads(&self) -> Vec<Tid>;
    /// Cumulative CPU time of a thread, ns.
    fn cpu_time(&self, t: Tid) -> Result<u64, KernelError>;
    /// Cumulative time the thread was runnable but waiting for a CPU (its run delay), ns; `None`
    /// when the kernel cannot tell (the default). A thread that waits a large share of its
    /// time runs late, and a late periodic thread's wake-ups no longer show its period: the
    /// [`LegacyController`](crate::controller::LegacyController) probes such a thread.
    fn run_delay(&self, _t: Tid) -> Result<Option<u64>, KernelError> {
        Ok(None)
    }
    /// Starts or stops recording a thread's wake-up timestamps.
    fn trace_wakeups(&mut self, t: Tid, on: bool) -> Result<(), KernelError>;
    /// Appends the wake-up timestamps (ns) recorded since the last call to `out`.
    fn drain_wakeups(&mut self, t: Tid, out: &mut Vec<u64>) -> Result<(), KernelError>;
    /// [`drain_wakeups`](Self::drain_wakeups) with each wake-up's origin, and the timers the
    /// thread set ([`Origin::TimerSet`]), in the order recorded; it drains the same records (a
    /// wake-up is handed out by one of the two, once; `drain_wakeups` drops the timer records).
    /// The default implementation, for kernels that cannot tell, marks every wake-up
    /// [`Origin::Other`].
    fn drain_wakeups_marked(&mut self, t: Tid, out: &mut Vec<Wakeup>) -> Result<(), KernelError> {
        let mut ts = Vec::new();
        self.drain_wakeups(t, &mut ts)?;
        out.extend(ts.into_iter().map(Wakeup::other));
        Ok(())
    }
    /// Current SCHED_DEADLINE state, `None` when the thread is not under SCHED_DEADLINE.
    fn dl_state(&self, t: Tid) -> Result<Option<DlState>, KernelError>;
    /// Current policy.
    fn policy(&self, t: Tid) -> Result<Policy, KernelError>;
    /// Sets a thread's policy/reservation; `KernelError::Admission` if admission control refuses.
    fn set_policy(&mut self, t: Tid, p: Policy) -> Result<(), KernelError>;
    /// Bandwidth available to SCHED_DEADLINE tasks in thread `t`'s root domain, in CPUs (the Σ Q/P
    /// admission control enforces there, less the fair servers); `None` asks for every CPU this
    /// handle covers.
    fn dl_bandwidth_limit(&self, t: Option<Tid>) -> f64;
    /// Frequency domain (cluster) of a CPU's state; `Unsupported` without cpufreq.
    fn frequency(&self, cluster: usize) -> Result<FreqState, KernelError>;
    /// Sets a cluster's frequency (a floor/target, as a userspace governor would).
    fn set_frequency(&mut self, cluster: usize, khz: u32) -> Result<(), KernelError>;
}

/// A piece of adaptation logic hosted by a kernel implementation: called every `period()` ns of
/// (simulated or real) time, and immediately on application events.
pub trait Controller {
    /// Sampling period of [`Controller::tick`], ns; `None` for purely event-driven controllers.
    fn period(&self) -> Option<u64>;
    /// Periodic activation.
    fn tick(&mut self, k: &mut dyn Kernel);
    /// An application event (workUnits hint, job begin/end), delivered when it happens.
    fn on_app_event(&mut self, _ev: &AppEvent, _k: &mut dyn Kernel) {}
}
