//! The workload model both executors run: the simulator (`pacer sim`) and the real-kernel
//! executor (`pacer run`, crates/linux). It is rt-app's model (threads running phases of events in
//! key order) made explicit, so an rt-app file and a pacer task set become the same thing.
//!
//! Units: integer nanoseconds ([`Duration`]). rt-app files are in microseconds; the parser converts.

use pacer_model::Duration;
pub use pacer_model::Policy;
use serde::Serialize;

use crate::wss::{WorkingSet, WssAmount};

/// A set of threads to run, plus global settings.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct Workload {
    /// Threads started with the run, then threads only a [`Event::Fork`] starts
    /// ([`ThreadSpec::forked`]), in file order.
    pub threads: Vec<ThreadSpec>,
    /// Total run time requested by the file (rt-app `global.duration`), if any.
    pub duration: Option<Duration>,
    /// Keys pacer read but does not act on, with their JSON path (printed as warnings).
    pub ignored: Vec<String>,
    /// Mutexes, condition variables, barriers and semaphores the threads share, indexed by
    /// [`ResourceId`] (rt-app creates one per distinct (name, kind) its events use).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<Resource>,
    /// rt-app's `global` run-time settings that change what runs or what is written.
    pub settings: RunSettings,
    /// The buffers of `memrun` events, indexed by [`MemBufferId`] (rt-app creates one per
    /// distinct `ref` and type, or per thread and parameters without `ref`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mem_buffers: Vec<MemBuffer>,
}

/// Index into [`Workload::mem_buffers`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct MemBufferId(pub usize);

/// What a `memrun` event does with its buffer (rt-app's `rtapp_mem_read`, `rtapp_mem_write`,
/// `rtapp_mem_chase`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum MemAccess {
    /// Reads `count` bytes one at a time from offset 0, wrapping at the buffer's size.
    Read,
    /// Writes `count` bytes one at a time from offset 0 (byte j of the buffer gets `j mod 256`),
    /// wrapping at the buffer's size.
    Write,
    /// Follows `count` links of the buffer's pointer chain.
    Chase,
}

impl MemAccess {
    /// rt-app's name of the type (`"type"` of the event).
    pub fn name(self) -> &'static str {
        match self {
            MemAccess::Read => "read",
            MemAccess::Write => "write",
            MemAccess::Chase => "chase",
        }
    }
}

/// Order of a chase buffer's chain (rt-app's `pattern`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ChaseOrder {
    /// Position i links to position i + 1 (and the last to the first).
    Sequential,
    /// Bit-reversed: the chain visits the positions in the order of their bit-reversed indices,
    /// so that consecutive hops are far apart and hardware prefetchers cannot follow (rt-app's
    /// default).
    Random,
}

/// How a `memrun` buffer is laid out and used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(tag = "access", rename_all = "snake_case")]
pub enum MemBufferKind {
    /// Bytes set to 0xAA before the run, then read.
    Read,
    /// Bytes set to 0xAA before the run, then written.
    Write,
    /// A circular chain of pointers, one every `stride` bytes over [`MemBuffer::chase_positions`]
    /// positions, built before the run.
    Chase { stride: u64, order: ChaseOrder },
}

/// Smallest chase stride: each position holds a pointer (8 bytes on 64-bit machines, where
/// rt-app's chain of `char *` would overlap itself with a smaller stride).
pub const CHASE_MIN_STRIDE: u64 = 8;

/// A buffer of rt-app's `memrun` events, allocated and initialised before the run (rt-app's
/// `init_membuf_resource_sized()`, `init_memchase_resource()`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MemBuffer {
    /// rt-app's name of the buffer: the events' `ref`, or the name rt-app builds for a per-thread
    /// buffer (`memrun_read_<size>`, `memrun_write_<size>`, `memrun_<r|s>_<stride>_<size>`,
    /// followed by the thread's tag).
    pub name: String,
    /// Bytes asked for (`size`).
    pub size: u64,
    pub kind: MemBufferKind,
}

impl MemBuffer {
    /// The access the buffer serves.
    pub fn access(&self) -> MemAccess {
        match self.kind {
            MemBufferKind::Read => MemAccess::Read,
            MemBufferKind::Write => MemAccess::Write,
            MemBufferKind::Chase { .. } => MemAccess::Chase,
        }
    }

    /// Positions of a chase chain: `size / stride` rounded down to a power of two (rt-app
    /// numbers them with bit reversal); `None` for read and write buffers.
    pub fn chase_positions(&self) -> Option<u64> {
        match self.kind {
            MemBufferKind::Chase { stride, .. } => {
                let n = self.size.checked_div(stride).unwrap_or(0);
                Some(if n == 0 { 0 } else { 1 << n.ilog2() })
            }
            _ => None,
        }
    }

    /// Bytes the events touch: the size of a read or write buffer, positions × stride for a
    /// chase (rt-app allocates no more).
    pub fn footprint(&self) -> u64 {
        match self.kind {
            MemBufferKind::Chase { stride, .. } => self.chase_positions().unwrap_or(0).saturating_mul(stride),
            _ => self.size,
        }
    }

    /// Why the buffer cannot be built, if so: empty, or a chase chain of fewer than two
    /// positions or of pointers that would overlap.
    pub fn problem(&self) -> Option<String> {
        if self.size == 0 {
            return Some(format!("memrun buffer `{}` has size 0", self.name));
        }
        if let MemBufferKind::Chase { stride, .. } = self.kind {
            if stride < CHASE_MIN_STRIDE {
                return Some(format!(
                    "memrun buffer `{}` has stride {stride}, below a pointer's {CHASE_MIN_STRIDE} bytes",
                    self.name
                ));
            }
            if self.chase_positions().unwrap_or(0) < 2 {
                return Some(format!(
                    "memrun buffer `{}` of {} bytes holds fewer than 2 positions of stride {stride}",
                    self.name, self.size
                ));
            }
        }
        None
    }
}

/// A shared synchronisation object, named as in the file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Resource {
    pub name: String,
    pub kind: ResourceKind,
}

/// What a [`Resource`] is (rt-app's resource types `rtapp_mutex`, `rtapp_wait`, `rtapp_barrier`,
/// `rtapp_sem_post`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ResourceKind {
    /// A mutex (priority-inheriting when [`RunSettings::pi_enabled`]).
    Mutex,
    /// A condition variable (`wait`/`signal`/`broad`/`sync`, and `suspend`/`resume`).
    Cond,
    /// A barrier released when `users` arrivals have met: rt-app counts every `barrier` event
    /// naming it, times its task's instances.
    Barrier { users: u32 },
    /// A counting semaphore starting at 0.
    Semaphore,
}

/// The kind of resource an event needs (a barrier of any number of users).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    Mutex,
    Cond,
    Barrier,
    Semaphore,
}

impl Need {
    pub fn name(self) -> &'static str {
        match self {
            Need::Mutex => "mutex",
            Need::Cond => "condition variable",
            Need::Barrier => "barrier",
            Need::Semaphore => "semaphore",
        }
    }

    pub fn fits(self, kind: ResourceKind) -> bool {
        matches!(
            (kind, self),
            (ResourceKind::Mutex, Need::Mutex)
                | (ResourceKind::Cond, Need::Cond)
                | (ResourceKind::Barrier { .. }, Need::Barrier)
                | (ResourceKind::Semaphore, Need::Semaphore)
        )
    }
}

/// Index into [`Workload::resources`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct ResourceId(pub usize);

/// rt-app's `global` settings other than `duration` and `default_policy`, with rt-app's defaults.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunSettings {
    /// Nanoseconds per loop of rt-app's calibrated work (`calibration` as a number); `None` =
    /// calibrate (`"CPUn"`, the default).
    pub calibration_ns_per_loop: Option<u64>,
    /// CPU to calibrate on (`"CPUn"`).
    pub calibration_cpu: usize,
    /// Mutexes use priority inheritance (`pi_enabled`, default false).
    pub pi_enabled: bool,
    /// Lock the process's pages in RAM (`lock_pages`, default true).
    pub lock_pages: bool,
    /// Log directory (`logdir`, default `./`).
    pub logdir: String,
    /// Log file and trace prefix (`log_basename`, default `rt-app`).
    pub log_basename: String,
    /// The file sets `logdir`, `log_basename` or `log_size`: it asks for rt-app's logs.
    pub logs_set: bool,
    /// Per-thread log buffer (`log_size`): `None` = straight to the file system, `Some(0)` =
    /// logging disabled, `Some(bytes)` = an in-memory buffer of that size.
    pub log_size: Option<u64>,
    /// ftrace marker categories (`ftrace`: comma-separated `main`, `task`, `loop`, `event`,
    /// `stats`, `attrs`, `all`, `none`; the deprecated `true` means all).
    pub ftrace: FtraceCategories,
    /// Write gnuplot scripts next to the logs (`gnuplot`).
    pub gnuplot: bool,
    /// Where `iorun` writes (`io_device`, default `/dev/null`).
    pub io_device: String,
    /// Size of the buffer `mem` writes into (`mem_buffer_size`, bytes, default 4 MiB).
    pub mem_buffer_size: u64,
    /// Log the sum of a pass's slacks instead of the last (`cumulative_slack`).
    pub cumulative_slack: bool,
}

impl Default for RunSettings {
    fn default() -> Self {
        RunSettings {
            calibration_ns_per_loop: None,
            calibration_cpu: 0,
            pi_enabled: false,
            lock_pages: true,
            logdir: "./".to_string(),
            log_basename: "rt-app".to_string(),
            logs_set: false,
            log_size: None,
            ftrace: FtraceCategories::default(),
            gnuplot: false,
            io_device: "/dev/null".to_string(),
            mem_buffer_size: DEFAULT_MEM_BUFFER_SIZE,
            cumulative_slack: false,
        }
    }
}

/// rt-app's `DEFAULT_MEM_BUF_SIZE`.
pub const DEFAULT_MEM_BUFFER_SIZE: u64 = 4 << 20;

/// Which `rtapp_*` ftrace markers to write (rt-app's `ftrace_level` bits).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct FtraceCategories {
    pub main: bool,
    pub task: bool,
    pub loops: bool,
    pub event: bool,
    pub stats: bool,
    pub attrs: bool,
}

impl FtraceCategories {
    pub const ALL: FtraceCategories = FtraceCategories {
        main: true,
        task: true,
        loops: true,
        event: true,
        stats: true,
        attrs: true,
    };

    /// Whether any marker is asked for.
    pub fn any(&self) -> bool {
        self.main || self.task || self.loops || self.event || self.stats || self.attrs
    }
}

/// One thread (rt-app: one instance of a task).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ThreadSpec {
    pub name: String,
    pub policy: Policy,
    /// CPUs the thread may run on; `None` = all.
    pub affinity: Option<Vec<usize>>,
    /// Delay before the thread starts (rt-app `delay`).
    pub start_delay: Duration,
    /// Phases run in order; the whole sequence repeats `loops` times (`None` = until the end of
    /// the run, rt-app `loop: -1`).
    pub phases: Vec<Phase>,
    pub loops: Option<u64>,
    /// A cooperating application: it reports each job's begin and end to the adaptation engine
    /// (through the client library on Linux).
    pub cooperative: bool,
    /// Relative deadline used to judge jobs that are not SCHED_DEADLINE (defaults to the period
    /// of the thread's timer; for task sets, D).
    pub job_deadline: Option<Duration>,
    /// rt-app's thread index (`tdata->ind`, the position in the file counting every instance):
    /// the `<idx>` of its name `<task>-<idx>` and of its log. Forked threads share their task's.
    #[serde(default)]
    pub index: u32,
    /// The thread's name under rt-app, `<task>-<index>` (its comm, log file and trace name), for
    /// threads read from an rt-app file; `name` stays pacer's label in job records.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rtapp_name: Option<String>,
    /// Started only by [`Event::Fork`] events naming this thread's task (rt-app `instance: 0`),
    /// never at the start of the run.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub forked: bool,
    /// Utilisation clamps (rt-app `util_min`/`util_max`, 0–1024).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub util_min: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub util_max: Option<u32>,
    /// cgroup the thread runs in (rt-app `taskgroup`, a path under the cpu controller).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub taskgroup: Option<String>,
    /// NUMA nodes the thread's memory is bound to (rt-app `nodes_membind`; `None`: the
    /// process's policy).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub membind: Option<Vec<u32>>,
}

impl Default for ThreadSpec {
    /// A SCHED_OTHER thread named `thread` with no phases, started with the run.
    fn default() -> Self {
        ThreadSpec {
            name: "thread".to_string(),
            policy: Policy::Other { nice: 0 },
            affinity: None,
            start_delay: Duration::ZERO,
            phases: Vec::new(),
            loops: None,
            cooperative: false,
            job_deadline: None,
            index: 0,
            rtapp_name: None,
            forked: false,
            util_min: None,
            util_max: None,
            taskgroup: None,
            membind: None,
        }
    }
}

impl ThreadSpec {
    /// Whether the thread names a task group, at thread or phase level (rt-app `taskgroup`).
    pub fn uses_taskgroups(&self) -> bool {
        self.taskgroup.is_some() || self.phases.iter().any(|p| p.taskgroup.is_some())
    }

    /// Period of the first `timer` event the thread runs, if any (its job period).
    pub fn timer_period(&self) -> Option<Duration> {
        self.phases
            .iter()
            .flat_map(|p| p.events.iter())
            .find_map(|e| match e {
                Event::Timer { period, .. } => Some(*period),
                _ => None,
            })
    }

    /// Whether the thread has any `timer` event: then jobs end at timers; otherwise each pass
    /// through a phase's events is one job.
    pub fn has_timer(&self) -> bool {
        self.timer_period().is_some()
    }

    /// Relative deadline of the thread's jobs, ns: [`ThreadSpec::job_deadline`], else the
    /// SCHED_DEADLINE relative deadline, else the timer period; a thread with none of them has
    /// practically no deadline (`u64::MAX / 4`, far enough from overflow for any run).
    /// Both executors judge jobs by this value.
    pub fn relative_deadline_ns(&self) -> u64 {
        let dl = match self.policy {
            Policy::Deadline(r) => Some(r.deadline.ns()),
            _ => None,
        };
        self.job_deadline
            .map(|d| d.ns())
            .or(dl)
            .or(self.timer_period().map(|p| p.ns()))
            .unwrap_or(u64::MAX / 4)
    }

    /// The period used to normalise laxity and utilisation, ns (≥ 1): the timer period, else the
    /// SCHED_DEADLINE period, else the relative deadline.
    pub fn period_ns(&self) -> u64 {
        let dl = match self.policy {
            Policy::Deadline(r) => Some(r.effective_period().ns()),
            _ => None,
        };
        self.timer_period()
            .map(|p| p.ns())
            .or(dl)
            .unwrap_or_else(|| self.relative_deadline_ns())
            .max(1)
    }
}

/// A sequence of events repeated `loops` times.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Phase {
    pub loops: u64,
    pub events: Vec<Event>,
    /// CPUs for this phase only (rt-app phase-level `cpus`); `None` = the thread's affinity.
    /// rt-app re-applies the affinity at every phase start, so a phase without `cpus` goes back
    /// to the thread's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub affinity: Option<Vec<usize>>,
    /// Scheduling change applied at the start of each iteration of this phase (rt-app
    /// phase-level `policy`/`priority`/`dl-*`). Unlike `affinity` it is sticky: the thread keeps
    /// it in later phases until another phase changes it. `None` = leave the policy alone.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub policy: Option<Policy>,
    /// cgroup the thread moves to at the start of each pass of this phase (rt-app phase-level
    /// `taskgroup`, a path under the cpu controller, `/` its root). Sticky, like `policy`: the
    /// thread stays there in later phases until another phase names a group.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub taskgroup: Option<String>,
    /// NUMA nodes the thread's memory is bound to from the start of each pass of this phase
    /// (rt-app phase-level `nodes_membind`); sticky, like `taskgroup`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub membind: Option<Vec<u32>>,
    /// Utilisation clamps set at the start of each pass of this phase (rt-app phase-level
    /// `util_min`/`util_max`); they stay set in later phases, as in the kernel.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub util_min: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub util_max: Option<u32>,
    /// rt-app's name of each event (`run0`, `lock:m`, `wait:c:m`), the `desc` of its
    /// `rtapp_event` ftrace marker; empty for workloads not read from rt-app JSON (the markers
    /// then name the event's kind).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub event_descs: Vec<String>,
}

impl Phase {
    /// A phase with no affinity, policy, task group or memory binding change of its own.
    pub fn new(loops: u64, events: Vec<Event>) -> Self {
        Phase {
            loops,
            events,
            affinity: None,
            policy: None,
            taskgroup: None,
            membind: None,
            util_min: None,
            util_max: None,
            event_descs: Vec::new(),
        }
    }
}

/// How much work a `run` event does, in nanoseconds of execution on a CPU of capacity 1024 at
/// its maximum frequency (work stretches on slower CPUs / lower OPPs).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "model", rename_all = "snake_case")]
pub enum Work {
    Fixed {
        ns: Duration,
    },
    /// Uniform in [min, max].
    Uniform {
        min: Duration,
        max: Duration,
    },
    /// Normal(mean, sd) truncated to [min, max].
    Normal {
        mean: Duration,
        sd: Duration,
        min: Duration,
        max: Duration,
    },
    /// Drawn uniformly from recorded samples.
    Empirical {
        samples: Vec<Duration>,
    },
    /// `base + per_unit · u`, where u is the thread's current workUnits (set by
    /// [`Event::WorkUnits`]): the audio paper's callback whose cost follows the number of voices.
    Linear {
        base: Duration,
        per_unit: Duration,
    },
}

/// Which timer a `timer` event waits on; threads naming the same reference share one timer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub struct TimerId(pub usize);

/// How a timer recovers from an overrun. In both modes a timer event first advances the timer's
/// expiry by the event's period (the first use starts from the thread's start time, after its
/// `delay`) and sleeps until that expiry if it is still in the future (rt-app.c `run_event()`).
/// The modes differ only in what happens when that expiry has already passed (no sleep in
/// either case).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TimerMode {
    /// The expiry stays on its grid, so the following timer events return at once until the
    /// thread has caught up (rt-app `"mode": "absolute"`).
    Absolute,
    /// The expiry is reset to the current time, so the grid restarts from the late instant and
    /// later jobs are not affected (rt-app's default, `"mode": "relative"`).
    Relative,
}

/// One step of a phase, in execution order.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    /// Execute `work` (rt-app `run`: a calibrated amount of work).
    Run { work: Work },
    /// Stay runnable for this much wall-clock time, whatever the CPU speed (rt-app `runtime`).
    Runtime { duration: Duration },
    /// Sleep for this long (rt-app `sleep`).
    Sleep { duration: Duration },
    /// Wait for the next expiry of a periodic timer (rt-app `timer`). Ends the current job: the
    /// next job is released at the expiry.
    Timer {
        timer: TimerId,
        period: Duration,
        mode: TimerMode,
    },
    /// sched_yield().
    Yield,
    /// The thread announces that its coming jobs will do `units` work units (the audio paper's
    /// workUnits hint); delivered at once to the adaptation engine, and used by [`Work::Linear`].
    WorkUnits { units: u64 },
    /// pthread_mutex_lock (rt-app `lock`).
    Lock { mutex: ResourceId },
    /// pthread_mutex_unlock (rt-app `unlock`).
    Unlock { mutex: ResourceId },
    /// pthread_cond_wait on `cond` with `mutex`, which the thread holds (rt-app `wait`).
    Wait { cond: ResourceId, mutex: ResourceId },
    /// pthread_cond_signal: wakes one waiter, if any (rt-app `signal`).
    Signal { cond: ResourceId },
    /// pthread_cond_broadcast: wakes every waiter (rt-app `broad`).
    Broadcast { cond: ResourceId },
    /// Signal then wait on `cond` with `mutex` held, with no gap between them (rt-app `sync`).
    SignalWait { cond: ResourceId, mutex: ResourceId },
    /// Waits until the barrier's users have all arrived; the last one releases them all.
    Barrier { barrier: ResourceId },
    /// Locks `mutex`, waits on `cond` and unlocks (rt-app `suspend`: both named after the
    /// thread's task).
    Suspend { cond: ResourceId, mutex: ResourceId },
    /// Locks `mutex`, broadcasts `cond` and unlocks (rt-app `resume TASK`): wakes the task's
    /// suspended threads; a thread not suspended yet misses it.
    Resume { cond: ResourceId, mutex: ResourceId },
    /// sem_post (rt-app `sem_post`).
    SemPost { sem: ResourceId },
    /// sem_wait (rt-app `sem_wait`).
    SemWait { sem: ResourceId },
    /// Writes `bytes` bytes into the shared memory buffer, wrapping at its size (rt-app `mem`).
    Mem { bytes: u64 },
    /// Writes `bytes` bytes to the I/O device (rt-app `iorun`), from the memory buffer.
    IoRun { bytes: u64 },
    /// `count` accesses of `access` to a sized buffer (rt-app `memrun`): bytes read or written
    /// one at a time, or links of a pointer chain followed. `access` is the buffer's
    /// ([`Workload::mem_buffer_problem`] checks it).
    MemRun {
        buffer: MemBufferId,
        access: MemAccess,
        count: u64,
    },
    /// Starts a new thread running the forked thread spec `thread` (an index into
    /// [`Workload::threads`]; rt-app `fork`).
    Fork { thread: usize },
    /// A pass (or passes) over the thread's working set: the test program of
    /// rm-vs-edf-multicore-linux.txt §5.2 (pacer's rt-app extension `pacer_wss`; see
    /// [`crate::wss`]).
    WorkingSet(WorkingSet),
    /// Framework-assisted boosting (VT-CFS paper §IV): from now on the thread is marked
    /// interactive with budget C = `budget`, so its fair-class weight is raised at each wake-up
    /// by eq. 6 and restored when it blocks or its slice runs out; a zero budget unmarks it.
    /// The simulator applies it; on Linux it needs the paper's kernel change and is a no-op.
    Boost { budget: Duration },
}

impl Work {
    /// Whether a `run` of this work can take any time at all (a linear model may, once the
    /// thread announces units).
    pub fn can_take_time(&self) -> bool {
        match self {
            Work::Fixed { ns } => !ns.is_zero(),
            Work::Uniform { max, .. } | Work::Normal { max, .. } => !max.is_zero(),
            Work::Empirical { samples } => samples.iter().any(|d| !d.is_zero()),
            Work::Linear { base, per_unit } => !base.is_zero() || !per_unit.is_zero(),
        }
    }
}

impl Event {
    /// Whether the event can let time pass: work, a wall-clock stretch, a sleep or a timer wait
    /// of non-zero length. `yield` and `workUnits` take none in the model.
    pub fn can_take_time(&self) -> bool {
        match self {
            Event::Run { work } => work.can_take_time(),
            Event::Runtime { duration } | Event::Sleep { duration } => !duration.is_zero(),
            Event::Timer { period, .. } => !period.is_zero(),
            // `mem` and `iorun` take time, but how much depends on the machine.
            Event::Mem { bytes } | Event::IoRun { bytes } => *bytes > 0,
            Event::MemRun { count, .. } => *count > 0,
            Event::WorkingSet(ws) => match &ws.amount {
                WssAmount::Work { work } => work.can_take_time(),
                _ => ws.fixed_accesses().is_some_and(|n| n > 0),
            },
            Event::Yield
            | Event::WorkUnits { .. }
            | Event::Boost { .. }
            | Event::Lock { .. }
            | Event::Unlock { .. }
            | Event::Signal { .. }
            | Event::Broadcast { .. }
            | Event::SemPost { .. }
            | Event::Resume { .. }
            | Event::Fork { .. } => false,
            // Blocking: time passes while the thread waits for another.
            Event::Wait { .. }
            | Event::SignalWait { .. }
            | Event::Barrier { .. }
            | Event::Suspend { .. }
            | Event::SemWait { .. } => true,
        }
    }
}

/// Most iterations of events that take no time a simulated thread may run: each is a step of
/// the simulator at one instant, so beyond this the run could not finish in reasonable time.
pub const MAX_TIMELESS_ITERATIONS: u64 = 1_000_000;

impl ThreadSpec {
    /// Why simulating this thread would never let time pass, if so: events that all take no
    /// time (only `yield`, `sleep: 0`, …) repeated forever or more than
    /// [`MAX_TIMELESS_ITERATIONS`] times, by one phase or by the whole thread. rt-app on a real kernel spins on such a loop until the
    /// run's duration; a discrete-event simulator at one instant would spin for ever.
    pub fn timeless_loop(&self) -> Option<String> {
        let timeless = |p: &Phase| p.loops == 0 || !p.events.iter().any(Event::can_take_time);
        let fix = format!(
            "no simulated time would ever pass; give it a run, runtime, sleep or timer > 0, or at \
             most {MAX_TIMELESS_ITERATIONS} iterations"
        );
        const WHAT: &str = "events that take no time (only yield, workUnits or zero-length run, \
                            runtime, sleep or timer)";
        for (i, p) in self.phases.iter().enumerate() {
            if timeless(p) && p.loops > MAX_TIMELESS_ITERATIONS {
                return Some(format!("phase {i} loops {} times through {WHAT}: {fix}", p.loops));
            }
        }
        if self.phases.iter().all(timeless) {
            let per_pass: u64 = self.phases.iter().map(|p| p.loops).sum();
            let total = self.loops.and_then(|l| l.checked_mul(per_pass));
            if per_pass > 0 && total.is_none_or(|n| n > MAX_TIMELESS_ITERATIONS) {
                let times = total.map_or("forever".to_string(), |n| format!("{n} times"));
                return Some(format!("its phases loop {times} through {WHAT}: {fix}"));
            }
        }
        None
    }
}

impl Event {
    /// The resources the event names, with the kind each must be.
    pub fn needs(&self) -> [Option<(ResourceId, Need)>; 2] {
        match *self {
            Event::Lock { mutex } | Event::Unlock { mutex } => [Some((mutex, Need::Mutex)), None],
            Event::Wait { cond, mutex }
            | Event::SignalWait { cond, mutex }
            | Event::Suspend { cond, mutex }
            | Event::Resume { cond, mutex } => [Some((cond, Need::Cond)), Some((mutex, Need::Mutex))],
            Event::Signal { cond } | Event::Broadcast { cond } => [Some((cond, Need::Cond)), None],
            Event::Barrier { barrier } => [Some((barrier, Need::Barrier)), None],
            Event::SemPost { sem } | Event::SemWait { sem } => [Some((sem, Need::Semaphore)), None],
            _ => [None, None],
        }
    }

    /// rt-app's event name (its `desc` in `rtapp_event` markers, without the resource).
    pub fn rtapp_name(&self) -> &'static str {
        match self {
            Event::Run { .. } => "run",
            Event::Runtime { .. } => "runtime",
            Event::Sleep { .. } => "sleep",
            Event::Timer { .. } => "timer",
            Event::Yield => "yield",
            Event::WorkUnits { .. } => "workUnits",
            Event::Boost { .. } => "boost",
            Event::Lock { .. } => "lock",
            Event::Unlock { .. } => "unlock",
            Event::Wait { .. } => "wait",
            Event::Signal { .. } => "signal",
            Event::Broadcast { .. } => "broad",
            Event::SignalWait { .. } => "sync",
            Event::Barrier { .. } => "barrier",
            Event::Suspend { .. } => "suspend",
            Event::Resume { .. } => "resume",
            Event::SemPost { .. } => "sem_post",
            Event::SemWait { .. } => "sem_wait",
            Event::Mem { .. } => "mem",
            Event::IoRun { .. } => "iorun",
            Event::MemRun { .. } => "memrun",
            Event::WorkingSet(_) => "pacer_wss",
            Event::Fork { .. } => "fork",
        }
    }
}

impl ThreadSpec {
    /// The largest working set the thread's `pacer_wss` events name, bytes (0: none): the
    /// footprint the simulator's cache model keeps per thread, and the buffer `pacer run`
    /// allocates for it.
    pub fn working_set_bytes(&self) -> u64 {
        self.phases
            .iter()
            .flat_map(|p| p.events.iter())
            .filter_map(|e| match e {
                Event::WorkingSet(ws) => Some(ws.size),
                _ => None,
            })
            .max()
            .unwrap_or(0)
    }

    /// The first event of this thread an executor that supports only `supported` cannot run,
    /// with its phase index: executors refuse such a workload rather than change its meaning.
    pub fn first_unsupported(&self, supported: impl Fn(&Event) -> bool) -> Option<(usize, &Event)> {
        self.phases
            .iter()
            .enumerate()
            .flat_map(|(i, p)| p.events.iter().map(move |e| (i, e)))
            .find(|(_, e)| !supported(e))
    }
}

impl Workload {
    /// Why resource `r` cannot serve as `need`, if so (the rt-app parser never builds such an
    /// event; a workload built in code can).
    pub fn resource_problem(&self, r: ResourceId, need: Need) -> Option<String> {
        match self.resources.get(r.0) {
            None => Some(format!(
                "resource {} does not exist (the workload has {})",
                r.0,
                self.resources.len()
            )),
            Some(res) if !need.fits(res.kind) => Some(format!("`{}` is not a {}", res.name, need.name())),
            Some(_) => None,
        }
    }

    /// Why `memrun` buffer `b` cannot serve an `access` event, if so (the rt-app parser never
    /// builds such an event; a workload built in code can).
    pub fn mem_buffer_problem(&self, b: MemBufferId, access: MemAccess) -> Option<String> {
        let Some(buf) = self.mem_buffers.get(b.0) else {
            return Some(format!(
                "memrun buffer {} does not exist (the workload has {})",
                b.0,
                self.mem_buffers.len()
            ));
        };
        if buf.access() != access {
            return Some(format!(
                "memrun buffer `{}` is a {} buffer, not a {} one",
                buf.name,
                buf.access().name(),
                access.name()
            ));
        }
        buf.problem()
    }

    /// Threads started with the run (not [`ThreadSpec::forked`]).
    pub fn initial_threads(&self) -> impl Iterator<Item = (usize, &ThreadSpec)> {
        self.threads.iter().enumerate().filter(|(_, t)| !t.forked)
    }

    /// Index of the largest timer id used, plus one (the number of distinct timers).
    pub fn timer_count(&self) -> usize {
        self.threads
            .iter()
            .flat_map(|t| t.phases.iter())
            .flat_map(|p| p.events.iter())
            .filter_map(|e| match e {
                Event::Timer { timer, .. } => Some(timer.0 + 1),
                _ => None,
            })
            .max()
            .unwrap_or(0)
    }
}
