//! The real-kernel executor of workloads (`pacer run`): runs a [`Workload`] (an rt-app file) on
//! this machine's kernel with one OS thread per [`pacer_workload::ThreadSpec`], and measures every
//! job into the same [`JobRecord`]s the simulator produces, so `pacer run` and `pacer sim` of one
//! file compare row for row.
//!
//! DESIGN.md puts "executors for sim and real" in the workload room, but the workload crate may
//! only depend on the model and every syscall pacer makes lives in crates/linux; so the model and
//! the job semantics live in `pacer_workload`, and the executor that turns them into syscalls
//! lives here.
//!
//! How a run goes:
//! 1. the workload is checked (threads, events and the resources they name, CPUs) and the busy
//!    loop calibrated ([`calibrate`]) unless a calibration is given; the mutexes, conditions,
//!    barriers and semaphores are created and `global.io_device` opened (`sync.rs`);
//! 2. SIGINT, SIGTERM and SIGHUP are blocked in the calling thread (and so in the threads it
//!    creates) and read from a signalfd, so a signal ends the run between events instead of
//!    killing threads that hold real-time policies;
//! 3. one thread per workload thread started with the run is created (`fork` events start the
//!    others later, `fork.rs`); each names itself, sets its own affinity and
//!    policy (SCHED_DEADLINE with RESET_ON_FORK) and reports; if any fails (EPERM, EBUSY, EINVAL)
//!    the others are released without running and the run fails with that thread's error;
//! 4. all threads start from a common origin (time 0 of every record); the calling thread
//!    becomes the writer: every 10 to 50 ms (`next_poll`) it drains the bounded lock-free queue the timed threads
//!    push their records into (pushing never blocks and never wakes the writer, see `thread.rs`)
//!    and passes them to the caller's [`Sink`] (CSV, summary, rt-app logs). For the run, the
//!    writer moves to the CPUs no timed thread may use, when there are some, so that its work
//!    stays off the measured CPUs; its affinity comes back afterwards. Where every CPU may run a
//!    timed thread, the writer runs at SCHED_IDLE instead (when it may come back from it), so
//!    that it never preempts a SCHED_OTHER thread when it wakes up;
//! 5. at the end of the duration, on a signal, or when a thread fails, the run stops: every
//!    thread notices between events (a sleeping one is woken by a signal, a blocked one by the
//!    writer's broadcasts and posts, `sync.rs`), unlocks the mutexes it holds, demotes itself to
//!    SCHED_OTHER and ends.
//!
//! The job semantics and the measurement of each column are in `thread.rs` and docs/linux.md.

pub mod calibrate;
mod fork;
pub mod log;
pub mod marker;
pub mod membind;
pub(crate) mod memrun;
mod sync;
pub(crate) mod sys;
mod taskgroup;
mod thread;
mod uclamp;
pub mod wss;

pub use self::fork::FORKS_LIMIT;

use std::io;
use std::os::unix::thread::JoinHandleExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

use pacer_model::{Duration, Policy};
use pacer_workload::jobs::{JobRecord, TaskCounters, ThreadId};
use pacer_workload::{FtraceCategories, ThreadSpec, Workload};
use serde::Serialize;

pub use self::calibrate::Calibration;
pub use self::log::{LogMode, LogRow, RtAppLogs};
pub use self::marker::MarkerError;
use self::marker::Markers;
use self::sync::Extras;
use self::thread::{Drained, End, Gate, Msg, Outbox, Shared, ThreadResult, UNSET};
use crate::sched::{self, LinuxError};
use crate::signals::{SignalFd, TERMINATING};

/// How long before the common origin the threads are released, so that every one of them is
/// asleep waiting for it (their first release is then a real timer wake-up like the others).
const START_LEAD_NS: u64 = 10_000_000;
/// How often the writer wakes up to drain the queue and check signals, the clock and ended
/// threads, at most; and at least ([`next_poll`]).
const POLL_NS: u64 = 10_000_000;
const POLL_MAX_NS: u64 = 50_000_000;
/// How often the writer reports progress.
const PROGRESS_NS: u64 = 100_000_000;

/// Settings of a run.
#[derive(Debug, Clone)]
pub struct RunConfig {
    /// Length of the run from the common origin; `None`: until every thread has ended or a
    /// signal arrives (rt-app without `duration`).
    pub duration: Option<Duration>,
    /// Seed of the execution-time draws (the same per-thread streams as the simulator's).
    pub seed: u64,
    /// The busy loop's speed; `None`: measure it now.
    pub calibration: Option<Calibration>,
    /// `mlockall` for the run (rt-app's `lock_pages`); a failure is a warning, not an error.
    pub lock_memory: bool,
    /// Records (jobs and log rows) the queue to the writer holds; a full queue drops records,
    /// which the report counts. The writer drains it every 10 to 50 ms, sooner the faster records
    /// come, so this bounds the rate of records a run can report without loss (16 384 per 10 ms
    /// by default, and per 50 ms for a burst after a quiet stretch).
    pub channel_capacity: usize,
    /// Where log rows wait (`None`: the workload's `log_size`, [`LogMode::from_log_size`]).
    pub logs: Option<LogMode>,
    /// rt-app's ftrace markers to write (`None`: the workload's `ftrace` setting).
    pub ftrace: Option<FtraceCategories>,
    /// The tracefs directory whose `trace_marker` receives them (a tracefs instance, say);
    /// `None`: the tracefs root, found in the mount table.
    pub tracefs: Option<PathBuf>,
    /// A cgroup v1 `tasks` file per workload thread (indexed like [`Workload::threads`]; missing
    /// or `None`: stay in the process's cgroup). Each thread writes its own id there before it
    /// sets its affinity and policy, so a thread of an exclusive cpuset gets its SCHED_DEADLINE
    /// reservation admitted in that cpuset's root domain (`crate::taskset`).
    pub cpusets: Vec<Option<PathBuf>>,
    /// Records the threads' context switches and wake-ups (`pacer run --trace`): the threads
    /// started with the run are added once they are set up, before their release; a thread a
    /// `fork` starts adds itself before its first job; recording stops when every thread has
    /// ended. The caller reads the records with [`SchedTracer::finish`](crate::sched_trace::SchedTracer::finish).
    pub sched_trace: Option<Arc<crate::sched_trace::SchedTracer>>,
}

impl Default for RunConfig {
    fn default() -> Self {
        RunConfig {
            duration: None,
            seed: 1,
            calibration: None,
            lock_memory: true,
            channel_capacity: 16 * 1024,
            logs: None,
            ftrace: None,
            tracefs: None,
            cpusets: Vec::new(),
            sched_trace: None,
        }
    }
}

/// Receives the results of a run as they arrive, on the calling thread (the writer).
pub trait Sink {
    /// One finished job. An error stops the run (and is returned by [`run`]).
    fn job(&mut self, record: &JobRecord) -> io::Result<()>;
    /// One rt-app log row of thread `thread` (one pass through a phase).
    fn log(&mut self, _thread: ThreadId, _row: &LogRow) -> io::Result<()> {
        Ok(())
    }
    /// Called about every 100 ms with the time since the origin.
    fn progress(&mut self, _elapsed_ns: u64) {}
    /// A thread started by a `fork` event gets id `thread` (after the threads started with the
    /// run, in fork order) and this name; called before any record of it.
    fn thread_started(&mut self, _thread: ThreadId, _name: &str) {}
}

/// A [`Sink`] that keeps everything in memory (tests, small runs).
#[derive(Debug, Default, Clone)]
pub struct Collect {
    pub jobs: Vec<JobRecord>,
    pub logs: Vec<(ThreadId, LogRow)>,
}

impl Sink for Collect {
    fn job(&mut self, record: &JobRecord) -> io::Result<()> {
        self.jobs.push(*record);
        Ok(())
    }
    fn log(&mut self, thread: ThreadId, row: &LogRow) -> io::Result<()> {
        self.logs.push((thread, *row));
        Ok(())
    }
}

/// Why a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The requested duration passed.
    Duration,
    /// Every thread ended on its own (finite loops).
    Finished,
    /// A termination signal (its number).
    Signal(i32),
}

/// What a thread ended with.
#[derive(Debug, Clone, Serialize)]
pub struct ThreadReport {
    pub name: String,
    /// Its kernel thread id during the run.
    pub tid: u32,
    /// Its policy read back (`sched_getattr`) right after it set it.
    pub policy_applied: Option<Policy>,
    /// Its policy read back right before it ended (after demoting itself).
    pub policy_at_exit: Option<Policy>,
    /// Records it could not hand to the writer because the queue was full.
    pub dropped_records: u64,
}

/// The outcome of a run.
#[derive(Debug, Clone, Serialize)]
pub struct RunReport {
    /// Thread names, in thread order.
    pub names: Vec<String>,
    /// Threads started with the run, then those started by `fork` events (in fork order, their
    /// names rt-app's `<task>-<index>-<nfork>`); the index is the [`ThreadId`] of the records.
    /// Per-thread counters from the kernel (switches from `getrusage`, migrations from
    /// /proc/thread-self/sched, CPU time from CLOCK_THREAD_CPUTIME_ID) over the run.
    pub counters: Vec<TaskCounters>,
    pub threads: Vec<ThreadReport>,
    /// Length of the run, ns: the duration, or the time from the origin to the stop.
    pub horizon_ns: u64,
    /// CLOCK_MONOTONIC of the origin (time 0 of every record), ns.
    pub origin_ns: u64,
    pub calibration: Calibration,
    /// The file's numeric `global.calibration` (ns per loop of rt-app's loop), which `run`
    /// events then follow instead of `calibration` (calibrate.rs).
    pub rtapp_ns_per_loop: Option<u64>,
    pub seed: u64,
    pub stopped_by: StopReason,
    /// Jobs reported to the sink.
    pub jobs: u64,
    /// Records lost because the writer fell behind (the outputs are incomplete if not 0).
    pub dropped_records: u64,
    /// Bytes of the `memrun` buffers built for the run (one per `ref` and type, one per thread
    /// and parameters without `ref`).
    pub memrun_bytes: u64,
    /// CPUs the run could use.
    pub cpus: u32,
    /// Whether `mlockall` succeeded.
    pub memory_locked: bool,
    /// Things that went wrong without failing the run (e.g. `mlockall` refused).
    pub warnings: Vec<String>,
}

/// Why a run failed.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("the workload has no threads")]
    NoThreads,
    /// The workload cannot run here (no events, CPUs this process may not use, bad parameters).
    #[error("thread `{thread}`: {message}")]
    BadThread { thread: String, message: String },
    /// A thread could not get its scheduling policy.
    #[error("thread `{thread}`: cannot set {policy}: {reason}")]
    Policy {
        thread: String,
        policy: String,
        errno: Option<i32>,
        reason: String,
    },
    /// A thread could not get its CPU affinity.
    #[error("thread `{thread}`: cannot set its CPU affinity to {cpus:?}: {reason}")]
    Affinity {
        thread: String,
        cpus: Vec<usize>,
        errno: Option<i32>,
        reason: String,
    },
    /// The sink failed (e.g. the disk is full).
    #[error("writing the results: {0}")]
    Output(#[source] io::Error),
    /// Setting up the run failed (thread creation, signal handling).
    #[error("{0}")]
    Setup(String),
    /// The ftrace markers the workload asks for cannot be written.
    #[error(transparent)]
    Markers(#[from] MarkerError),
    /// A global setting of the file cannot be used (`key` is its JSON path, e.g.
    /// `global.io_device`).
    #[error("`{key}`: {message}")]
    Setting { key: &'static str, message: String },
    /// The `memrun` buffers cannot be built (too large for this machine, malformed).
    #[error("{0}")]
    MemRun(String),
    /// The scheduler trace could not follow the run's threads ([`RunConfig::sched_trace`]).
    #[error("recording the scheduler trace: {0}")]
    Trace(#[from] crate::trace::TraceError),
}

impl RunError {
    /// The errno behind a policy or affinity refusal.
    pub fn errno(&self) -> Option<i32> {
        match self {
            RunError::Policy { errno, .. } | RunError::Affinity { errno, .. } => *errno,
            _ => None,
        }
    }

    /// Admission control refused a reservation (EBUSY).
    pub fn is_admission(&self) -> bool {
        matches!(self, RunError::Policy { .. }) && self.errno() == Some(libc::EBUSY)
    }

    /// The process lacks the privilege (EPERM).
    pub fn is_permission(&self) -> bool {
        matches!(self.errno(), Some(libc::EPERM) | Some(libc::EACCES))
    }
}

/// "SCHED_FIFO priority 50", "SCHED_DEADLINE runtime 2ms, deadline 10ms, period 10ms", …
pub fn describe_policy(p: &Policy) -> String {
    match p {
        Policy::Other { nice } => format!("SCHED_OTHER nice {nice}"),
        Policy::Idle => "SCHED_IDLE".into(),
        Policy::Batch { nice } => format!("SCHED_BATCH nice {nice}"),
        Policy::Fifo { priority } => format!("SCHED_FIFO priority {priority}"),
        Policy::Rr { priority } => format!("SCHED_RR priority {priority}"),
        Policy::Deadline(r) => format!(
            "SCHED_DEADLINE runtime {}, deadline {}, period {}",
            r.runtime,
            r.deadline,
            r.effective_period()
        ),
    }
}

/// Whether the process runs as root (effective uid 0).
pub fn is_root() -> bool {
    // SAFETY: geteuid has no failure mode and touches no memory.
    unsafe { libc::geteuid() == 0 }
}

pub(crate) fn policy_error(spec: &ThreadSpec, policy: &Policy, restricted: bool, e: &LinuxError) -> RunError {
    let errno = e.errno();
    let reason = match errno {
        Some(libc::EPERM) | Some(libc::EACCES) => {
            if matches!(policy, Policy::Deadline(_)) && restricted {
                "refused (EPERM): a SCHED_DEADLINE thread must be allowed on every CPU of its root \
                 domain, and this thread's `cpus` restrict it (partitioned EDF needs exclusive cpusets)"
                    .to_string()
            } else if !is_root() {
                "permission denied (EPERM): SCHED_FIFO, SCHED_RR, SCHED_DEADLINE and negative nice \
                 values need root or CAP_SYS_NICE; run `pacer run` as root"
                    .to_string()
            } else {
                "refused (EPERM) although running as root: the thread's cgroup may have no \
                 real-time bandwidth (cpu.rt_runtime_us)"
                    .to_string()
            }
        }
        Some(libc::EBUSY) => "admission control refused the reservation (EBUSY): the SCHED_DEADLINE \
             bandwidth already admitted plus this thread's would exceed the kernel's cap \
             (sched_rt_runtime_us / sched_rt_period_us of each CPU, less the fair servers); \
             `pacer analyze` shows the admission check"
            .to_string(),
        Some(libc::EINVAL) => format!("the kernel rejected the parameters (EINVAL): {e}"),
        _ => e.to_string(),
    };
    RunError::Policy {
        thread: spec.name.clone(),
        policy: describe_policy(policy),
        errno,
        reason,
    }
}

pub(crate) fn affinity_error(spec: &ThreadSpec, cpus: &[usize], e: &LinuxError) -> RunError {
    let errno = e.errno();
    let reason = match errno {
        Some(libc::EBUSY) | Some(libc::EPERM) if matches!(spec.policy, Policy::Deadline(_)) => {
            "refused: a SCHED_DEADLINE thread must be allowed on every CPU of its root domain \
             (partitioned EDF needs exclusive cpusets)"
                .to_string()
        }
        Some(libc::EINVAL) => format!("none of these CPUs is usable here (EINVAL): {e}"),
        _ => e.to_string(),
    };
    RunError::Affinity {
        thread: spec.name.clone(),
        cpus: cpus.to_vec(),
        errno,
        reason,
    }
}

/// Checks what can be checked before any thread exists.
fn validate(w: &Workload, allowed: &[usize]) -> Result<(), RunError> {
    if w.initial_threads().next().is_none() {
        return Err(RunError::NoThreads);
    }
    let buffers = w.threads.iter().any(sync::uses_buffer);
    if buffers && (w.settings.mem_buffer_size == 0 || usize::try_from(w.settings.mem_buffer_size).is_err()) {
        return Err(RunError::Setting {
            key: "global.mem_buffer_size",
            message: format!(
                "`mem` and `iorun` need a buffer of 1 byte or more that this machine can address,                  not {}",
                w.settings.mem_buffer_size
            ),
        });
    }
    membind::check(w)?;
    memrun::check(w)?;
    for t in &w.threads {
        let bad = |message: String| RunError::BadThread {
            thread: t.name.clone(),
            message,
        };
        if t.phases.iter().all(|p| p.events.is_empty() || p.loops == 0) {
            return Err(bad("no events to run".into()));
        }
        for (what, v) in [("util_min", t.util_min), ("util_max", t.util_max)] {
            if let Some(v) = v.filter(|&v| v > uclamp::UTIL_MAX) {
                return Err(bad(format!(
                    "{what} {v} is out of range (0–{})",
                    uclamp::UTIL_MAX
                )));
            }
        }
        for (i, p) in t.phases.iter().enumerate() {
            for e in &p.events {
                sync::check_resources(w, e).map_err(|m| bad(format!("phase {i}: {m}")))?;
            }
        }
        let masks = std::iter::once(&t.affinity).chain(t.phases.iter().map(|p| &p.affinity));
        for cpus in masks.flatten() {
            if cpus.is_empty() {
                return Err(bad("empty CPU affinity".into()));
            }
            if let Some(c) = cpus.iter().find(|c| !allowed.contains(c)) {
                return Err(bad(format!(
                    "`cpus` names CPU {c}, but this process may only use CPUs {allowed:?}"
                )));
            }
        }
        let policies = std::iter::once(&t.policy).chain(t.phases.iter().filter_map(|p| p.policy.as_ref()));
        for p in policies {
            if let Policy::Deadline(r) = p {
                r.validate()
                    .map_err(|e| bad(format!("{}: {e}", describe_policy(p))))?;
            }
        }
    }
    Ok(())
}

/// While alive, the termination signals are blocked in this thread and readable from a signalfd;
/// on drop, pending ones are consumed and the thread's previous signal mask comes back.
struct Signals {
    fd: SignalFd,
    old_mask: libc::sigset_t,
}

impl Signals {
    fn new() -> Result<Signals, RunError> {
        let old_mask = sys::signal_mask();
        let fd = SignalFd::new(&TERMINATING)
            .map_err(|e| RunError::Setup(format!("setting up signal handling: {e}")))?;
        Ok(Signals { fd, old_mask })
    }

    fn next(&self) -> Option<i32> {
        self.fd.next()
    }
}

impl Drop for Signals {
    fn drop(&mut self) {
        while self.fd.next().is_some() {}
        sys::set_signal_mask(&self.old_mask);
    }
}

/// Runs `workload` on this machine and streams its records to `sink`.
///
/// Call it from the thread that handles the process's signals (the main thread of a program),
/// before other threads exist: the termination signals are blocked in it for the run and read
/// from a signalfd (see the module documentation).
pub fn run(workload: &Workload, cfg: &RunConfig, sink: &mut dyn Sink) -> Result<RunReport, RunError> {
    let allowed =
        sched::get_affinity(0).map_err(|e| RunError::Setup(format!("reading this process's CPUs: {e}")))?;
    validate(workload, &allowed)?;
    let markers = Markers::open(
        cfg.tracefs.as_deref(),
        cfg.ftrace.unwrap_or(workload.settings.ftrace),
    )?;
    markers.main_start();
    let signals = Signals::new()?;
    let calibration = cfg.calibration.unwrap_or_else(calibrate::calibrate);
    let mut warnings = Vec::new();
    let memory_locked = cfg.lock_memory
        && match sys::lock_memory() {
            Ok(()) => true,
            Err(e) => {
                warnings.push(format!(
                    "mlockall failed ({e}); page faults may delay the threads"
                ));
                false
            }
        };
    let kick =
        sys::KickHandler::install().map_err(|e| RunError::Setup(format!("installing the stop signal: {e}")));
    let result = kick.and_then(|_kick| {
        execute(
            workload,
            cfg,
            calibration,
            allowed,
            markers,
            &signals,
            sink,
            &mut warnings,
        )
    });
    if memory_locked {
        sys::unlock_memory();
    }
    drop(signals);
    let (mut report, error) = result?;
    if let Some(e) = error {
        return Err(e);
    }
    report.memory_locked = memory_locked;
    report.warnings = warnings;
    Ok(report)
}

type Executed = (RunReport, Option<RunError>);

#[allow(clippy::too_many_arguments)]
fn execute(
    workload: &Workload,
    cfg: &RunConfig,
    calibration: Calibration,
    allowed: Vec<usize>,
    markers: Markers,
    signals: &Signals,
    sink: &mut dyn Sink,
    warnings: &mut Vec<String>,
) -> Result<Executed, RunError> {
    // Threads started with the run, ids 0..n in file order (rt-app's indexes); the others start
    // only by `fork` and get the ids after (fork.rs).
    let initial: Vec<usize> = workload.initial_threads().map(|(i, _)| i).collect();
    let n = initial.len();
    let shared_workload = Arc::new(workload.clone());
    let extras = Extras::new(shared_workload.clone(), cfg.seed)?;
    // Removed after every thread has ended (below), or on drop if this returns early.
    let groups = taskgroup::create(workload)?;
    let shared = Arc::new(Shared {
        stop: AtomicBool::new(false),
        cutoff: AtomicU64::new(u64::MAX),
        error: Mutex::new(None),
        timers: (0..workload.timer_count())
            .map(|_| AtomicU64::new(UNSET))
            .collect(),
        gate: Mutex::new(Gate::Pending),
        gate_cv: Condvar::new(),
        calibration,
        default_affinity: allowed.clone(),
        markers,
        log_mode: cfg
            .logs
            .unwrap_or_else(|| LogMode::from_log_size(workload.settings.log_size)),
        extras,
        taskgroups: groups.as_ref().map(|g| g.hierarchy().clone()),
        cpusets: cfg.cpusets.clone(),
        sched_trace: cfg.sched_trace.clone(),
    });
    let outbox = Outbox::<Msg>::new(cfg.channel_capacity);
    let (ready_tx, ready_rx) = mpsc::channel::<(usize, Result<u32, RunError>)>();
    let open_gate = |g: Gate| {
        *shared.gate.lock().unwrap_or_else(|p| p.into_inner()) = g;
        shared.gate_cv.notify_all();
    };

    let mut handles: Vec<JoinHandle<ThreadResult>> = Vec::with_capacity(n);
    for (id, &i) in initial.iter().enumerate() {
        let (w, s, tx, ready) = (
            shared_workload.clone(),
            shared.clone(),
            outbox.sender(),
            ready_tx.clone(),
        );
        let seed = cfg.seed;
        match std::thread::Builder::new()
            .spawn(move || thread::thread_main(i, id as ThreadId, w, s, tx, ready, seed))
        {
            Ok(h) => handles.push(h),
            Err(e) => {
                open_gate(Gate::Abort);
                join_all(handles);
                return Err(RunError::Setup(format!(
                    "creating the thread of `{}`: {e}",
                    workload.threads[i].name
                )));
            }
        }
    }
    drop(ready_tx);

    // Every thread reports once, after setting its policy; a thread that died without reporting
    // closes its sender, which ends the wait.
    let mut setup_errors: Vec<(usize, RunError)> = Vec::new();
    let mut reported = 0;
    let mut tids = Vec::with_capacity(n);
    while reported < n {
        match ready_rx.recv() {
            Ok((_, Ok(tid))) => {
                tids.push(tid);
                reported += 1;
            }
            Ok((i, Err(e))) => {
                setup_errors.push((i, e));
                reported += 1;
            }
            Err(_) => break,
        }
    }
    if reported < n && setup_errors.is_empty() {
        setup_errors.push((n, RunError::Setup("a thread ended before it was set up".into())));
    }
    if !setup_errors.is_empty() {
        open_gate(Gate::Abort);
        join_all(handles);
        setup_errors.sort_by_key(|(i, _)| *i);
        return Err(setup_errors.remove(0).1);
    }

    // Keep the writer off the timed threads' CPUs for the run (restored when `_writer` drops, on
    // every path out of this function). Where every CPU may run a timed thread, the writer
    // becomes SCHED_IDLE instead: it then never preempts a SCHED_OTHER thread when it wakes up,
    // and runs when a CPU has nothing else to do.
    let free = writer_cpus(workload, &allowed);
    let _idle = if free.is_none() {
        WriterIdle::set(warnings)
    } else {
        None
    };
    let _writer = match free {
        Some(cpus) => match WriterAffinity::set(&cpus, &allowed) {
            Ok(guard) => Some(guard),
            Err(e) => {
                warnings.push(format!(
                    "could not move the writer to CPUs {cpus:?}, which no timed thread uses: {e}"
                ));
                None
            }
        },
        None => None,
    };

    // The threads wait at the gate: traced from here on, and the trace's reader thread starts
    // here, so that it inherits the writer's CPUs and policy.
    if let Some(tracer) = &cfg.sched_trace {
        if let Err(e) = tracer.add(&tids) {
            open_gate(Gate::Abort);
            join_all(handles);
            return Err(RunError::Trace(e));
        }
    }
    let t0 = sys::now_ns() + START_LEAD_NS;
    shared.markers.clock_ref(self::log::us(t0));
    let horizon = cfg.duration.map(|d| t0.saturating_add(d.ns()));
    shared
        .cutoff
        .store(horizon.unwrap_or(u64::MAX), Ordering::Relaxed);
    open_gate(Gate::Go { t0 });

    let mut stopped_by: Option<(StopReason, u64)> = None;
    let mut sink_error: Option<io::Error> = None;
    let mut jobs = 0u64;
    let mut last_progress = 0u64;
    let mut last_kick = 0u64;
    // Forked threads the sink has been told about: ids below this.
    let mut announced = n as ThreadId;
    let stop_now = |reason: StopReason, at: u64, stopped_by: &mut Option<(StopReason, u64)>| {
        if stopped_by.is_none() {
            *stopped_by = Some((reason, at));
            shared.cutoff.fetch_min(at, Ordering::Relaxed);
            shared.stop.store(true, Ordering::Relaxed);
        }
    };
    let mut poll = POLL_NS;
    loop {
        // The timed threads never wake the writer: it wakes on its own, drains what they queued
        // meanwhile and checks the signals and the clock.
        let slept_from = sys::now_ns();
        let until_horizon = horizon.map_or(u64::MAX, |h| h.saturating_sub(slept_from).max(1));
        std::thread::sleep(std::time::Duration::from_nanos(poll.min(until_horizon)));
        let mut count = 0u64;
        let drained = outbox.drain(|m| {
            count += 1;
            announce(&m, &shared, &mut *sink, &mut announced);
            deliver(m, &mut *sink, &mut sink_error, &mut jobs)
        });
        poll = next_poll(
            cfg.channel_capacity,
            count,
            sys::now_ns().saturating_sub(slept_from),
        );
        if drained == Drained::Disconnected {
            // Every timed thread has ended and everything they queued has been handled.
            break;
        }
        let now = sys::now_ns();
        if sink_error.is_some() {
            stop_now(StopReason::Finished, now, &mut stopped_by);
        }
        if let Some(sig) = signals.next() {
            stop_now(StopReason::Signal(sig), now, &mut stopped_by);
        }
        if horizon.is_some_and(|h| now >= h) {
            if stopped_by.is_none() {
                shared.markers.main_shutdown();
            }
            stop_now(StopReason::Duration, horizon.unwrap_or(now), &mut stopped_by);
        }
        if shared.stop.load(Ordering::Relaxed) && stopped_by.is_none() {
            // A thread failed and stopped the run itself.
            stop_now(StopReason::Finished, now, &mut stopped_by);
        }
        if stopped_by.is_some() && now >= last_kick + POLL_NS {
            // Wake threads asleep in clock_nanosleep so they see the stop; repeat, because one may
            // have been about to fall asleep when the previous kick arrived.
            last_kick = now;
            for h in &handles {
                if !h.is_finished() {
                    sys::kick(h.as_pthread_t());
                }
            }
            shared.extras.forks.each_running(sys::kick);
            // Threads blocked in a condition, a barrier or a semaphore (sync.rs).
            shared.extras.objects.wake_all();
        }
        if now >= t0 && now >= last_progress + PROGRESS_NS {
            last_progress = now;
            sink.progress(now - t0);
        }
    }

    let mut results = join_all(handles);
    // No thread is left to fork: every sender is gone.
    let mut all_names: Vec<String> = initial
        .iter()
        .map(|&i| workload.threads[i].name.clone())
        .collect();
    for f in shared.extras.forks.take() {
        if f.id >= announced {
            sink.thread_started(f.id, &f.name);
            announced = f.id + 1;
        }
        all_names.push(f.name);
        results.push(f.handle.join().ok());
    }
    if let Some(tracer) = &cfg.sched_trace {
        // Every traced thread has ended.
        if let Err(e) = tracer.stop() {
            warnings.push(format!("stopping the scheduler trace: {e}"));
        }
    }
    if let Some(g) = groups {
        if let Err(e) = g.teardown() {
            warnings.push(format!("{e} (`pacer doctor --repair` removes them)"));
        }
    }
    // Rows the threads kept in memory reach the sink now that nothing is measured any more.
    for (i, r) in results.iter_mut().enumerate() {
        for row in r
            .as_mut()
            .map(|r| std::mem::take(&mut r.log_rows))
            .unwrap_or_default()
        {
            if sink_error.is_none() {
                if let Err(e) = sink.log(i as ThreadId, &row) {
                    sink_error = Some(e);
                }
            }
        }
    }
    shared.markers.main_end();
    let ended = results.iter().flatten().map(|r| r.ended).max().unwrap_or(t0);
    let (stopped_by, horizon_ns) = match stopped_by {
        Some((StopReason::Signal(s), at)) => (StopReason::Signal(s), at.saturating_sub(t0)),
        Some((reason, _)) => (reason, cfg.duration.map_or(ended.saturating_sub(t0), |d| d.ns())),
        None => {
            // Threads end on their own once their next step would pass the end of the run, so the
            // duration may be the reason even though the writer never saw the clock reach it.
            let cut = results.iter().flatten().any(|r| r.end == End::Cutoff);
            (
                if cut && cfg.duration.is_some() {
                    StopReason::Duration
                } else {
                    StopReason::Finished
                },
                cfg.duration.map_or(ended.saturating_sub(t0), |d| d.ns()),
            )
        }
    };
    let mut names = Vec::with_capacity(results.len());
    let mut counters = Vec::with_capacity(results.len());
    let mut threads = Vec::with_capacity(results.len());
    let mut dropped = 0;
    for (name, r) in all_names.iter().zip(&results) {
        names.push(name.clone());
        match r {
            Some(r) => {
                counters.push(r.counters);
                dropped += r.dropped;
                if let Some(e) = &r.demote_error {
                    warnings.push(format!("thread `{}` could not demote itself: {e}", name));
                }
                threads.push(ThreadReport {
                    name: name.clone(),
                    tid: r.tid,
                    policy_applied: r.applied,
                    policy_at_exit: r.at_exit,
                    dropped_records: r.dropped,
                });
            }
            None => {
                warnings.push(format!("thread `{}` panicked; its counters are missing", name));
                counters.push(TaskCounters::default());
                threads.push(ThreadReport {
                    name: name.clone(),
                    tid: 0,
                    policy_applied: None,
                    policy_at_exit: None,
                    dropped_records: 0,
                });
            }
        }
    }
    let report = RunReport {
        names,
        counters,
        threads,
        horizon_ns,
        origin_ns: t0,
        calibration,
        rtapp_ns_per_loop: shared.extras.rtapp_ns_per_loop,
        seed: cfg.seed,
        stopped_by,
        jobs,
        dropped_records: dropped,
        memrun_bytes: shared.extras.mem.bytes(),
        cpus: allowed.len().max(1) as u32,
        memory_locked: false,
        warnings: Vec::new(),
    };
    let error = shared
        .error
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .take()
        .or(sink_error.map(RunError::Output));
    Ok((report, error))
}

/// How long the writer sleeps before its next drain, having just drained `drained` records
/// queued over `slept_ns`: as long as possible, since every wake-up of the writer may take a CPU
/// from a timed thread, but short enough that at that rate the queue of `capacity` would fill to
/// a quarter at most; between [`POLL_NS`] and [`POLL_MAX_NS`], so that the 100 ms progress
/// reports keep their pace and a burst after a quiet stretch has room for 50 ms of up to
/// `capacity` records.
fn next_poll(capacity: usize, drained: u64, slept_ns: u64) -> u64 {
    if drained == 0 {
        return POLL_MAX_NS;
    }
    let quarter = (capacity as u128 / 4).max(1);
    let ns = quarter * u128::from(slept_ns.max(1)) / u128::from(drained);
    u64::try_from(ns).unwrap_or(u64::MAX).clamp(POLL_NS, POLL_MAX_NS)
}

/// The CPUs of this process that no timed thread may ever use, if there are some: the writer's
/// place during the run. A thread runs each pass of a phase on the phase's `cpus`, else its own,
/// else all of `allowed` (`set_up` and `begin_pass` in thread.rs); every phase that has passes
/// counts, whether or not the thread gets that far.
fn writer_cpus(workload: &Workload, allowed: &[usize]) -> Option<Vec<usize>> {
    let mut used = vec![false; allowed.iter().max().map_or(0, |&c| c + 1)];
    for t in &workload.threads {
        let own = t.affinity.as_deref().unwrap_or(allowed);
        let phases = t.phases.iter().filter(|p| p.loops > 0);
        let masks = phases.map(|p| p.affinity.as_deref().unwrap_or(own));
        // `validate` refuses a thread without a phase that runs; should one get here, it would
        // keep its own CPUs.
        let idle = t.phases.iter().all(|p| p.loops == 0 || p.events.is_empty());
        for cpus in masks.chain(idle.then_some(own)) {
            for &c in cpus {
                if let Some(u) = used.get_mut(c) {
                    *u = true;
                }
            }
        }
    }
    let free: Vec<usize> = allowed.iter().copied().filter(|&c| !used[c]).collect();
    (!free.is_empty()).then_some(free)
}

/// While alive, the calling thread runs on the given CPUs; its previous affinity comes back on
/// drop.
struct WriterAffinity {
    original: Vec<usize>,
}

impl WriterAffinity {
    fn set(cpus: &[usize], original: &[usize]) -> Result<WriterAffinity, LinuxError> {
        sched::set_affinity(0, cpus)?;
        Ok(WriterAffinity {
            original: original.to_vec(),
        })
    }
}

impl Drop for WriterAffinity {
    fn drop(&mut self) {
        // Nothing to report to at this point; a failure leaves the thread on a subset of its
        // CPUs, which the caller may use anyway.
        let _ = sched::set_affinity(0, &self.original);
    }
}

/// While alive, the calling thread runs at SCHED_IDLE; its previous policy comes back on drop.
/// Only taken when that return is allowed: leaving SCHED_IDLE needs CAP_SYS_NICE or an
/// RLIMIT_NICE that permits the nice value (sched(7)), so without either the writer stays as it
/// is rather than be stuck at SCHED_IDLE after the run.
struct WriterIdle {
    original: Policy,
}

impl WriterIdle {
    fn set(warnings: &mut Vec<String>) -> Option<WriterIdle> {
        let original = sched::get_policy(0).ok()?;
        let Policy::Other { nice } = original else {
            // A caller at a real-time policy chose it; leave it.
            return None;
        };
        if !is_root() && !sys::rlimit_allows_nice(nice) {
            return None;
        }
        match sched::set_policy(0, Policy::Idle, false) {
            Ok(()) => Some(WriterIdle { original }),
            Err(e) => {
                warnings.push(format!("could not make the writer SCHED_IDLE: {e}"));
                None
            }
        }
    }
}

impl Drop for WriterIdle {
    fn drop(&mut self) {
        // Checked possible before the change; nothing to report to at this point.
        let _ = sched::set_policy(0, self.original, false);
    }
}

/// Tells the sink about forked threads up to the one `m` comes from, before its first record.
fn announce(m: &Msg, shared: &Shared, sink: &mut dyn Sink, announced: &mut ThreadId) {
    let t = match m {
        Msg::Job(r) => r.thread,
        Msg::Log(t, _) => *t,
    };
    if t < *announced {
        return;
    }
    // Registered before the thread could send anything (fork.rs).
    for (id, name) in shared.extras.forks.names_from(*announced) {
        sink.thread_started(id, &name);
        *announced = id + 1;
    }
}

/// Hands one record to the sink, unless it already failed (the first error is kept).
fn deliver(m: Msg, sink: &mut dyn Sink, sink_error: &mut Option<io::Error>, jobs: &mut u64) {
    if sink_error.is_some() {
        return;
    }
    let r = match m {
        Msg::Job(r) => {
            *jobs += 1;
            sink.job(&r)
        }
        Msg::Log(t, row) => sink.log(t, &row),
    };
    if let Err(e) = r {
        *sink_error = Some(e);
    }
}

fn join_all(handles: Vec<JoinHandle<ThreadResult>>) -> Vec<Option<ThreadResult>> {
    handles.into_iter().map(|h| h.join().ok()).collect()
}

/// The name of a termination signal ("SIGINT"), for messages.
pub fn signal_name(sig: i32) -> String {
    match sig {
        libc::SIGINT => "SIGINT".into(),
        libc::SIGTERM => "SIGTERM".into(),
        libc::SIGHUP => "SIGHUP".into(),
        other => format!("signal {other}"),
    }
}

/// Number of CPUs online, for callers that report per-CPU figures without a run.
pub fn online_cpus() -> u32 {
    crate::sys::online_cpus().len() as u32
}

#[cfg(test)]
mod tests {
    use super::*;
    use pacer_workload::parse_rtapp;

    fn workload(json: &str) -> Workload {
        parse_rtapp(json, "test.json").expect("test workload parses")
    }

    #[test]
    fn the_writer_sleeps_as_long_as_the_queue_allows() {
        // Nothing queued: the longest sleep.
        assert_eq!(next_poll(16 * 1024, 0, POLL_NS), POLL_MAX_NS);
        // 100 records in 10 ms: a quarter of 16 384 takes 410 ms at that rate, more than the most.
        assert_eq!(next_poll(16 * 1024, 100, POLL_NS), POLL_MAX_NS);
        // 4096 records in 50 ms fill a quarter in 50 ms; twice as fast, in 25 ms.
        assert_eq!(next_poll(16 * 1024, 4096, 50_000_000), 50_000_000);
        assert_eq!(next_poll(16 * 1024, 8192, 50_000_000), 25_000_000);
        // Faster still: never below the shortest sleep.
        assert_eq!(next_poll(16 * 1024, 1_000_000, 10_000_000), POLL_NS);
        assert_eq!(next_poll(1, 1, 1), POLL_NS);
    }

    #[test]
    fn the_writer_takes_the_cpus_no_timed_thread_may_use() {
        let all = [0, 1, 2, 3];
        // Threads pinned to CPUs 1 and 2 leave 0 and 3.
        let w = workload(
            r#"{ "tasks": { "a": { "cpus": [1], "run": 100, "timer": { "ref": "a", "period": 1000 } },
                            "b": { "cpus": [2], "run": 100, "sleep": 100 } } }"#,
        );
        assert_eq!(writer_cpus(&w, &all), Some(vec![0, 3]));
        // A thread without `cpus` may run anywhere: no CPU is free.
        let w = workload(
            r#"{ "tasks": { "a": { "cpus": [1], "run": 100, "sleep": 100 },
                            "b": { "run": 100, "sleep": 100 } } }"#,
        );
        assert_eq!(writer_cpus(&w, &all), None);
        // Phase-level `cpus` count, those of a phase without `cpus` are the thread's, and a
        // phase that never runs (loop 0) does not count.
        let mut w = workload(
            r#"{ "tasks": { "a": { "cpus": [1], "phases": {
                    "p1": { "loop": 2, "cpus": [2], "run": 100 },
                    "p2": { "loop": 1, "run": 100 },
                    "p3": { "loop": 1, "cpus": [3], "run": 100 } } } } }"#,
        );
        assert_eq!(writer_cpus(&w, &all), Some(vec![0]));
        w.threads[0].phases[2].loops = 0;
        assert_eq!(writer_cpus(&w, &all), Some(vec![0, 3]));
        // A thread without `cpus` whose every phase names some runs only there.
        let w = workload(
            r#"{ "tasks": { "a": { "phases": { "p1": { "loop": 1, "cpus": [2], "run": 100 },
                                               "p2": { "loop": 1, "cpus": [0], "run": 100 } } } } }"#,
        );
        assert_eq!(writer_cpus(&w, &all), Some(vec![1, 3]));
        // Every CPU taken.
        let w = workload(r#"{ "tasks": { "a": { "cpus": [0, 1, 2, 3], "run": 100, "sleep": 100 } } }"#);
        assert_eq!(writer_cpus(&w, &all), None);
        // The process's own CPUs need not start at 0 or be contiguous.
        let w = workload(r#"{ "tasks": { "a": { "cpus": [3], "run": 100, "sleep": 100 } } }"#);
        assert_eq!(writer_cpus(&w, &[1, 3, 5]), Some(vec![1, 5]));
    }

    /// Where the writer ran when it handed each record over, and what it may do on the way.
    #[derive(Default)]
    struct WhereAmI {
        jobs: u64,
        cpus: Vec<u32>,
        affinities: Vec<Vec<usize>>,
        fail: bool,
    }

    impl Sink for WhereAmI {
        fn job(&mut self, _record: &JobRecord) -> io::Result<()> {
            self.jobs += 1;
            self.cpus.push(sys::current_cpu());
            self.affinities
                .push(sched::get_affinity(0).expect("reads its affinity"));
            if self.fail {
                return Err(io::Error::other("disk full"));
            }
            Ok(())
        }
    }

    fn quick() -> RunConfig {
        RunConfig {
            calibration: Calibration::from_ns_per_loop(1.0),
            lock_memory: false,
            ..RunConfig::default()
        }
    }

    /// A SCHED_OTHER workload pinned to the last CPU of this process (no privilege needed):
    /// `None` when the process has a single CPU.
    fn pinned_workload(allowed: &[usize], passes: u32) -> Option<Workload> {
        let &[.., last] = allowed else { return None };
        (allowed.len() > 1).then(|| {
            workload(&format!(
                r#"{{ "tasks": {{ "t": {{ "loop": {passes}, "cpus": [{last}], "run": 200,
                    "timer": {{ "ref": "t", "period": 2000 }} }} }} }}"#
            ))
        })
    }

    #[test]
    fn the_writer_runs_off_the_timed_cpus_and_gets_its_affinity_back() {
        let _g = sys::tests::KICK.lock().unwrap_or_else(|p| p.into_inner());
        let before = sched::get_affinity(0).unwrap();
        let Some(w) = pinned_workload(&before, 40) else {
            eprintln!("one CPU only: nothing to test");
            return;
        };
        let mut sink = WhereAmI::default();
        let report = run(&w, &quick(), &mut sink).expect("the run succeeds");
        assert_eq!(report.stopped_by, StopReason::Finished);
        // 40 timer events end 40 jobs, and nothing follows the last; none lost.
        assert_eq!(report.jobs, 40);
        assert_eq!(sink.jobs, 40);
        assert_eq!(report.dropped_records, 0);
        let free = &before[..before.len() - 1];
        assert!(sink.affinities.iter().all(|a| a == free), "{:?}", sink.affinities);
        assert!(
            sink.cpus.iter().all(|c| free.contains(&(*c as usize))),
            "{:?}",
            sink.cpus
        );
        assert_eq!(sched::get_affinity(0).unwrap(), before, "affinity restored");
    }

    /// Records the writer's policy at each record.
    #[derive(Default)]
    struct Policies(Vec<Option<Policy>>);

    impl Sink for Policies {
        fn job(&mut self, _record: &JobRecord) -> io::Result<()> {
            self.0.push(sched::get_policy(0).ok());
            Ok(())
        }
    }

    #[test]
    fn the_writer_idles_beside_threads_that_may_use_every_cpu_and_comes_back() {
        let _g = sys::tests::KICK.lock().unwrap_or_else(|p| p.into_inner());
        let before = sched::get_policy(0).expect("reads its policy");
        // No `cpus`: every CPU may run the thread, so the writer cannot move away.
        let w = workload(
            r#"{ "tasks": { "t": { "loop": 20, "run": 200, "timer": { "ref": "t", "period": 2000 } } } }"#,
        );
        let mut sink = Policies::default();
        let report = run(&w, &quick(), &mut sink).expect("the run succeeds");
        assert_eq!(report.jobs, 20);
        let may_return =
            is_root() || matches!(before, Policy::Other { nice } if sys::rlimit_allows_nice(nice));
        if matches!(before, Policy::Other { .. }) && may_return {
            assert!(sink.0.iter().all(|p| *p == Some(Policy::Idle)), "{:?}", sink.0);
        } else {
            assert!(sink.0.iter().all(|p| *p == Some(before)), "{:?}", sink.0);
        }
        assert_eq!(sched::get_policy(0).ok(), Some(before), "policy restored");
    }

    #[test]
    fn log_rows_stream_stay_in_a_ring_until_the_end_or_are_off() {
        let _g = sys::tests::KICK.lock().unwrap_or_else(|p| p.into_inner());
        // 5 passes (no timer: 5 jobs), rt-app index 0.
        let w = workload(r#"{ "tasks": { "t": { "loop": 5, "run": 100, "sleep": 200 } } }"#);
        let with = |logs: LogMode| {
            let mut sink = Collect::default();
            let cfg = RunConfig {
                logs: Some(logs),
                ..quick()
            };
            let report = run(&w, &cfg, &mut sink).expect("the run succeeds");
            assert_eq!(report.jobs, 5, "one job per pass, none after the last");
            sink.logs
        };
        let streamed = with(LogMode::Stream);
        assert_eq!(streamed.len(), 5);
        assert!(streamed.iter().all(|(t, r)| *t == 0 && r.idx == 0));
        // A ring of 3 keeps the last 3 passes, in order.
        let kept = with(LogMode::Buffer { rows: 3 });
        assert_eq!(kept.len(), 3);
        assert!(kept.windows(2).all(|p| p[0].1.start < p[1].1.start));
        assert!(with(LogMode::Off).is_empty());
        // The workload's `log_size` decides when the configuration does not.
        let mut w2 = w.clone();
        w2.settings.log_size = Some(0);
        let mut sink = Collect::default();
        run(&w2, &quick(), &mut sink).expect("the run succeeds");
        assert!(sink.logs.is_empty());
    }

    #[test]
    fn the_writer_gets_its_affinity_back_when_the_run_fails() {
        let _g = sys::tests::KICK.lock().unwrap_or_else(|p| p.into_inner());
        let before = sched::get_affinity(0).unwrap();
        let Some(w) = pinned_workload(&before, 1_000_000) else {
            eprintln!("one CPU only: nothing to test");
            return;
        };
        let mut sink = WhereAmI {
            fail: true,
            ..WhereAmI::default()
        };
        let started = sys::now_ns();
        let err = run(&w, &quick(), &mut sink).expect_err("the sink's error fails the run");
        assert!(matches!(err, RunError::Output(_)), "{err}");
        // The writer noticed within a few polls, long before the 2000 s the thread would run.
        assert!(sys::now_ns() - started < 2_000_000_000);
        assert_eq!(sink.jobs, 1, "nothing handed to a failed sink");
        assert_eq!(sched::get_affinity(0).unwrap(), before, "affinity restored");
    }
}
