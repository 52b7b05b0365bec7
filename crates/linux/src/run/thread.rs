//! One timed thread of a run: it sets its own policy and affinity, waits for the common start,
//! then interprets its [`ThreadSpec`] event by event with exactly the job semantics of the
//! simulator (`crates/sim/src/engine.rs`, `step()`, `start_job()`, `finish_job()`), measuring
//! each job as it goes.
//!
//! Jobs, as in the simulator: job 0 is released at the thread's start (the run's origin plus its
//! `delay`); a `timer` event finishes the current job and releases the next one at the timer's
//! expiry (or at once, when the expiry has passed); a thread without timers counts one job per
//! pass through a phase's events; a thread that ends finishes the job in progress, unless it
//! reached no event since its release (the job after a finite thread's last timer or pass is
//! no job: `loop: 3` gives 3 jobs).
//!
//! Each thread also writes rt-app's ftrace markers (`marker.rs`) and its log rows, which go to
//! the writer at the end of each pass or, with rt-app's `log_size` buffer, into a ring it
//! allocated before the run and hands over when it ends.
//!
//! Nothing in the loop allocates or does I/O: records go to the writer through a bounded,
//! preallocated lock-free queue ([`Outbox`], a `crossbeam_queue::ArrayQueue`) with
//! [`Sender::try_send`] (a full queue drops the record and counts it, it never blocks the timed
//! thread), and every measurement is a clock read, `getrusage` or `sched_getcpu`. The exceptions
//! are a phase that changes the thread's policy away from SCHED_DEADLINE (the kernel's period
//! limit is read from /proc once per change) and error paths.
//!
//! Sending wakes nobody: the writer polls the queue every 10 to 50 ms. With a channel that wakes its
//! receiver on every send (`std::sync::mpsc`, a futex wake), the kernel woke the writer onto the
//! sender's CPU whenever the other CPUs were busy, where it preempted the sender after the job it
//! had just measured, or during the next one: a disturbance of exactly what the executor
//! measures (docs/BENCHMARKS.md, "The executor's writer").

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex};

use crossbeam_queue::ArrayQueue;

use pacer_model::Policy;
use pacer_workload::jobs::{JobRecord, TaskCounters, ThreadId};
use pacer_workload::{Cursor, Event, Phase, Step, ThreadSpec, TimerMode, Workload};

use super::calibrate::{self, Calibration};
use super::fork::Instance;
use super::log::{us, us_signed, LogMode, LogRing, LogRow};
use super::marker::{LoopPos, Markers, Stats};
use super::sync::{Blocked, Extras, Local};
use super::sys::{self, Slept};
use super::taskgroup::Member;
use super::uclamp::Clamps;
use super::wss::{measured_profile, WssBuffer};
use super::{affinity_error, policy_error, RunError};
use crate::sched;

/// A timer slot that no thread has used yet.
pub(crate) const UNSET: u64 = u64::MAX;

/// Upper bound on events a thread steps through without running, blocking or yielding (a loop of
/// zero-work events); past it the thread ends, as in the simulator (`MAX_IDLE_STEPS`).
const MAX_IDLE_STEPS: u32 = 1_000_000;

/// Work done between two checks of the stop flag during a `run` event (and CPU samples for the
/// migration count).
const RUN_CHUNK_NS: u64 = 50_000;
/// Work done between two clock reads during a `runtime` event (its overshoot bound).
const RUNTIME_CHUNK_NS: u64 = 2_000;

/// What a timed thread sends to the writer.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Msg {
    Job(JobRecord),
    Log(ThreadId, LogRow),
}

/// The bounded queue from the timed threads to the writer: many senders ([`Sender`], one per
/// timed thread), one receiver (the writer, which polls it). Pushing never blocks and never wakes
/// the writer; the queue knows when its last sender is gone.
pub(crate) struct Outbox<T> {
    queue: ArrayQueue<T>,
    /// Live [`Sender`]s: incremented by [`Outbox::sender`], decremented when one is dropped.
    senders: AtomicUsize,
}

/// What [`Outbox::drain`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Drained {
    /// Senders remain: more may come.
    Open,
    /// Every sender was gone before the drain began, and the drain emptied the queue: nothing
    /// more will ever arrive.
    Disconnected,
}

impl<T> Outbox<T> {
    /// A queue holding up to `capacity` items (at least 1), allocated now, with no sender yet.
    pub(crate) fn new(capacity: usize) -> Arc<Outbox<T>> {
        Arc::new(Outbox {
            queue: ArrayQueue::new(capacity.max(1)),
            senders: AtomicUsize::new(0),
        })
    }

    /// A new sender.
    pub(crate) fn sender(self: &Arc<Self>) -> Sender<T> {
        self.senders.fetch_add(1, Ordering::Relaxed);
        Sender { outbox: self.clone() }
    }

    /// Hands every queued item to `f`, oldest first, without waiting. Items pushed meanwhile may
    /// be handed too. [`Drained::Disconnected`] means every sender had been dropped before the
    /// drain began, so the drain saw all they pushed.
    pub(crate) fn drain(&self, mut f: impl FnMut(T)) -> Drained {
        // The Acquire load pairs with the Release decrement of each dropped sender: once it reads
        // 0, every push of every sender is visible, and the drain below empties the queue for
        // good.
        let gone = self.senders.load(Ordering::Acquire) == 0;
        while let Some(item) = self.queue.pop() {
            f(item);
        }
        if gone {
            Drained::Disconnected
        } else {
            Drained::Open
        }
    }
}

/// The sending end of an [`Outbox`], owned by one timed thread; dropping it (also when the
/// thread panics) tells the writer one sender fewer remains.
pub(crate) struct Sender<T> {
    outbox: Arc<Outbox<T>>,
}

impl<T> Sender<T> {
    /// A new sender on the same queue (for a thread this one forks).
    pub(crate) fn another(&self) -> Sender<T> {
        self.outbox.sender()
    }

    /// Queues `item`; false when the queue is full (the item is dropped). Never blocks, never
    /// wakes the writer.
    pub(crate) fn try_send(&self, item: T) -> bool {
        self.outbox.queue.push(item).is_ok()
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        self.outbox.senders.fetch_sub(1, Ordering::Release);
    }
}

/// The start gate all threads wait at after setting themselves up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Gate {
    Pending,
    /// Start: the run's origin (CLOCK_MONOTONIC ns).
    Go {
        t0: u64,
    },
    /// Setup failed somewhere: end without running.
    Abort,
}

/// State shared by the writer and the timed threads.
pub(crate) struct Shared {
    /// Set when the run must end (duration reached, signal, error); checked between events and
    /// inside busy loops.
    pub stop: AtomicBool,
    /// Jobs and log rows ending after this instant (CLOCK_MONOTONIC ns) are not reported: the end
    /// of the requested duration, or the moment a signal or an error stopped the run.
    pub cutoff: AtomicU64,
    /// The first error a thread met while running (a phase's policy or affinity change).
    pub error: Mutex<Option<RunError>>,
    /// Next expiry of each timer (CLOCK_MONOTONIC ns), [`UNSET`] before first use.
    pub timers: Vec<AtomicU64>,
    pub gate: Mutex<Gate>,
    pub gate_cv: Condvar,
    pub calibration: Calibration,
    /// The CPUs the process may use (a thread without `cpus` goes back to these).
    pub default_affinity: Vec<usize>,
    /// rt-app's ftrace markers, written by the threads they describe.
    pub markers: Markers,
    /// Where the threads put their log rows.
    pub log_mode: LogMode,
    /// Synchronisation objects, I/O device, forks (sync.rs, fork.rs).
    pub extras: Extras,
    /// The cpu controller, when the workload names task groups (taskgroup.rs).
    pub taskgroups: Option<crate::cgroup::taskgroup::CpuHierarchy>,
    /// The cpuset `tasks` file of each workload thread ([`super::RunConfig::cpusets`]).
    pub cpusets: Vec<Option<std::path::PathBuf>>,
    /// The run's scheduler trace, which a forked thread joins before its first job.
    pub sched_trace: Option<Arc<crate::sched_trace::SchedTracer>>,
}

impl Shared {
    fn stopping(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    fn cutoff(&self) -> u64 {
        self.cutoff.load(Ordering::Relaxed)
    }

    /// Records a run-time error (the first one wins) and stops the run.
    fn fail(&self, e: RunError) {
        let mut slot = self.error.lock().unwrap_or_else(|p| p.into_inner());
        if slot.is_none() {
            *slot = Some(e);
        }
        self.cutoff.fetch_min(sys::now_ns(), Ordering::Relaxed);
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// What a thread reports when it ends.
#[derive(Debug, Clone)]
pub(crate) struct ThreadResult {
    pub tid: u32,
    pub counters: TaskCounters,
    /// The policy read back (`sched_getattr`) right after the thread set it.
    pub applied: Option<Policy>,
    /// The policy read back right before the thread ended, after it demoted itself.
    pub at_exit: Option<Policy>,
    /// Records lost because the queue to the writer was full.
    pub dropped: u64,
    /// Why demoting itself failed, if it did.
    pub demote_error: Option<String>,
    /// When the thread ended (CLOCK_MONOTONIC ns).
    pub ended: u64,
    /// Why its program ended.
    pub end: End,
    /// Its log rows, oldest first, when they were kept in memory ([`LogMode::Buffer`]).
    pub log_rows: Vec<LogRow>,
}

/// Why a thread's program ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum End {
    /// It ran all its loops (or the idle-step limit).
    Finished,
    /// Its next step would end after the run's cutoff.
    Cutoff,
    /// The run was stopped (signal, error, duration noticed by the writer) or never started.
    Stopped,
}

#[derive(Debug, Clone, Copy)]
struct Job {
    seq: u64,
    release: u64,
    start: u64,
    cpu_time: u64,
    involuntary: u64,
    migrations: u32,
    /// Whether the thread reached any event since the release: the job after a finite
    /// thread's last timer (or last pass) has none and is no job at all.
    stepped: bool,
}

/// The accumulators of one rt-app log row (one pass through a phase).
#[derive(Debug, Clone, Copy, Default)]
struct Pass {
    start: u64,
    loops: u64,
    run_ns: u64,
    c_duration_us: u64,
    c_period_us: u64,
    slack_us: i64,
    wu_lat_us: u64,
}

struct Interp<'a> {
    idx: ThreadId,
    spec: &'a ThreadSpec,
    shared: &'a Shared,
    tx: &'a Sender<Msg>,
    rng: pacer_workload::ThreadRng,
    t0: u64,
    t_first: u64,
    rel_deadline: u64,
    period: u64,
    has_timer: bool,
    units: u64,
    job: Option<Job>,
    released: u64,
    finished: u64,
    dropped: u64,
    /// CPU seen at the last sampling point, and CPU changes counted over the whole run.
    last_cpu: u32,
    migrations_seen: u64,
    run_chunk: u64,
    runtime_chunk: u64,
    pass: Pass,
    /// rt-app's loop counters of the current pass, and whether one is open (its end marker not
    /// written yet).
    pos: Option<LoopPos>,
    pass_open: bool,
    /// Position of the next event in the current pass (the `id` of its `rtapp_event` marker).
    event_id: u32,
    /// The rows kept in memory ([`LogMode::Buffer`]).
    ring: Option<LogRing>,
    /// The CPUs set now (borrowed from the workload or the process's set: changing them in the
    /// loop allocates nothing).
    affinity: &'a [usize],
    policy: Policy,
    /// Who the thread is (its id, its spec, forking).
    inst: Instance,
    /// The mutexes it holds and its `mem`/`iorun` buffer.
    sync: Local<'a>,
    /// Its task group, when its spec names any.
    group: Option<Member<'a>>,
    /// The NUMA nodes its memory is bound to now (`None`: the process's policy).
    membind: Option<&'a [u32]>,
    /// The utilisation clamps set now.
    clamps: Clamps,
    /// rt-app loops between two stop checks, under a numeric `global.calibration`.
    rtapp_chunk: u64,
    /// Its working set, when its program has `pacer_wss` phases.
    wss: Option<WssBuffer>,
}

/// Body of the timed thread of spec `idx`, whose records carry id `id` (its rank among the
/// threads started with the run): setup, start gate, run, demotion.
pub(crate) fn thread_main(
    idx: usize,
    id: ThreadId,
    workload: Arc<Workload>,
    shared: Arc<Shared>,
    tx: Sender<Msg>,
    ready: mpsc::Sender<(usize, Result<u32, RunError>)>,
    seed: u64,
) -> ThreadResult {
    let spec = &workload.threads[idx];
    // rt-app's name (`<task>-<index>`), so traces show the threads as rt-app's would be.
    sys::set_thread_name(spec.rtapp_name.as_deref().unwrap_or(&spec.name));
    let mut result = ThreadResult::new();
    let setup = set_up(idx, spec, &shared).and_then(|ok| {
        let local = Local::new(
            &shared.extras.objects,
            &shared.stop,
            &spec.name,
            shared.extras.buffer_for(spec),
        )?;
        // After set_up: the buffer's pages are faulted in on the thread's CPUs and nodes.
        let wss = WssBuffer::for_thread(spec)?;
        Ok((ok, (local, wss)))
    });
    let ((affinity, policy, group), local) = match setup {
        Ok(ok) => {
            result.applied = sched::get_policy(0).ok();
            let _ = ready.send((id as usize, Ok(result.tid)));
            ok
        }
        Err(e) => {
            let _ = ready.send((id as usize, Err(e)));
            demote(&mut result);
            return result;
        }
    };
    drop(ready);
    let gate = {
        let mut g = shared.gate.lock().unwrap_or_else(|p| p.into_inner());
        while *g == Gate::Pending {
            g = shared.gate_cv.wait(g).unwrap_or_else(|p| p.into_inner());
        }
        *g
    };
    let Gate::Go { t0 } = gate else {
        demote(&mut result);
        return result;
    };
    let inst = Instance::initial(idx, id, shared.clone());
    run_thread(
        inst,
        spec,
        &shared,
        &tx,
        seed,
        t0,
        (affinity, policy, group),
        local,
        &mut result,
    );
    demote(&mut result);
    result
}

/// Body of a thread started by a `fork` event (fork.rs): setup, then run at once, demotion.
pub(crate) fn forked_main(
    inst: Instance,
    name: String,
    workload: Arc<Workload>,
    shared: Arc<Shared>,
    tx: Sender<Msg>,
    seed: u64,
) -> ThreadResult {
    let spec = &workload.threads[inst.spec];
    sys::set_thread_name(&name);
    let mut result = ThreadResult::new();
    let setup = set_up(inst.spec, spec, &shared).and_then(|ok| {
        let local = Local::new(
            &shared.extras.objects,
            &shared.stop,
            &name,
            shared.extras.buffer_for(spec),
        )?;
        let wss = WssBuffer::for_thread(spec)?;
        Ok((ok, (local, wss)))
    });
    let traced = match &shared.sched_trace {
        Some(t) => t.add(&[result.tid]).map_err(RunError::Trace),
        None => Ok(()),
    };
    let (sched, local) = match setup.and_then(|ok| traced.map(|()| ok)) {
        Ok(ok) => {
            result.applied = sched::get_policy(0).ok();
            ok
        }
        Err(e) => {
            shared.fail(e);
            demote(&mut result);
            return result;
        }
    };
    // Forks happen only after the gate opened.
    let gate = *shared.gate.lock().unwrap_or_else(|p| p.into_inner());
    let Gate::Go { t0 } = gate else {
        demote(&mut result);
        return result;
    };
    run_thread(inst, spec, &shared, &tx, seed, t0, sched, local, &mut result);
    demote(&mut result);
    result
}

impl ThreadResult {
    fn new() -> ThreadResult {
        ThreadResult {
            tid: sched::gettid(),
            counters: TaskCounters::default(),
            applied: None,
            at_exit: None,
            dropped: 0,
            demote_error: None,
            ended: 0,
            end: End::Stopped,
            log_rows: Vec::new(),
        }
    }
}

/// Runs the thread's program from the origin `t0` and fills in its counters.
#[allow(clippy::too_many_arguments)]
fn run_thread<'a>(
    inst: Instance,
    spec: &'a ThreadSpec,
    shared: &'a Shared,
    tx: &'a Sender<Msg>,
    seed: u64,
    t0: u64,
    (affinity, policy, group): Setup<'a>,
    (local, wss): (Local<'a>, Option<WssBuffer>),
    result: &mut ThreadResult,
) {
    // Allocated before the first release, so that logging allocates nothing during the run.
    let ring = match shared.log_mode {
        LogMode::Buffer { rows } => Some(LogRing::with_capacity(rows)),
        LogMode::Off | LogMode::Stream => None,
    };
    shared.markers.task(true);
    let cpu_time0 = sys::thread_cpu_ns();
    let (voluntary0, involuntary0) = sys::context_switches();
    let kernel_migrations0 = sys::thread_migrations();
    let cal = shared.calibration;
    let rtapp_chunk = shared
        .extras
        .rtapp_ns_per_loop
        .map_or(1, |p| (RUN_CHUNK_NS / p).max(1));
    let mut it = Interp {
        idx: inst.id,
        spec,
        shared,
        tx,
        rng: pacer_workload::thread_rng(seed, inst.rng_index),
        t0,
        t_first: t0.saturating_add(spec.start_delay.ns()),
        rel_deadline: spec.relative_deadline_ns(),
        period: spec.period_ns(),
        has_timer: spec.has_timer(),
        units: 0,
        job: None,
        released: 0,
        finished: 0,
        dropped: 0,
        last_cpu: sys::current_cpu(),
        migrations_seen: 0,
        run_chunk: cal.loops_for(RUN_CHUNK_NS).max(1),
        runtime_chunk: cal.loops_for(RUNTIME_CHUNK_NS).max(1),
        pass: Pass::default(),
        pos: None,
        pass_open: false,
        event_id: 0,
        ring,
        affinity,
        policy,
        inst,
        sync: local,
        group,
        membind: spec.membind.as_deref(),
        clamps: Clamps::of_thread(spec),
        rtapp_chunk,
        wss,
    };
    result.end = it.run();
    if it.pass_open {
        // rt-app closes a pass the stop interrupted in the trace too (not in the log).
        it.pass_open = false;
        let row = it.row(sys::now_ns());
        it.close_pass_markers(&row);
    }
    if let Some(m) = it.group.take() {
        if let Err(e) = m.leave() {
            shared.fail(e);
        }
    }

    let (voluntary, involuntary) = sys::context_switches();
    let involuntary = involuntary.saturating_sub(involuntary0);
    result.counters = TaskCounters {
        released: it.released,
        finished: it.finished,
        exec_ns: sys::thread_cpu_ns().saturating_sub(cpu_time0),
        switches: voluntary.saturating_sub(voluntary0) + involuntary,
        involuntary_switches: involuntary,
        // The kernel's own count when it exposes one; else the changes seen at sampling points.
        migrations: match (kernel_migrations0, sys::thread_migrations()) {
            (Some(a), Some(b)) => b.saturating_sub(a),
            _ => it.migrations_seen,
        },
        overruns: None,
    };
    result.dropped = it.dropped;
    result.log_rows = it.ring.take().map(LogRing::into_rows).unwrap_or_default();
    shared.markers.task(false);
    // Dropping the interpreter unlocks the mutexes the thread still holds (sync.rs).
}

/// Sets the affinity and policy the thread starts with (those of its first phase that runs, else
/// its own), so that refusals surface before the run starts.
fn membind_error(spec: &ThreadSpec, nodes: &[u32], e: &std::io::Error) -> RunError {
    RunError::BadThread {
        thread: spec.name.clone(),
        message: format!("binding its memory to NUMA nodes {nodes:?} (set_mempolicy MPOL_BIND): {e}"),
    }
}

/// What a thread starts with: its affinity, its policy, its task-group membership.
type Setup<'a> = (&'a [usize], Policy, Option<Member<'a>>);

fn set_up<'a>(idx: usize, spec: &'a ThreadSpec, shared: &'a Shared) -> Result<Setup<'a>, RunError> {
    // First: the cpuset decides the root domain the reservation below is admitted in.
    if let Some(tasks) = shared.cpusets.get(idx).and_then(|p| p.as_ref()) {
        std::fs::write(tasks, sched::gettid().to_string()).map_err(|e| RunError::BadThread {
            thread: spec.name.clone(),
            message: format!("joining its cpuset ({}): {e}", tasks.display()),
        })?;
    }
    let first = spec.phases.iter().find(|p| p.loops > 0 && !p.events.is_empty());
    let cpus = first
        .and_then(|p| p.affinity.as_deref())
        .or(spec.affinity.as_deref());
    let affinity = match cpus {
        Some(cpus) => {
            sched::set_affinity(0, cpus).map_err(|e| affinity_error(spec, cpus, &e))?;
            cpus
        }
        None => &shared.default_affinity[..],
    };
    let restricted = *affinity != shared.default_affinity[..];
    let mut policy = spec.policy;
    sched::set_policy(0, policy, true).map_err(|e| policy_error(spec, &policy, restricted, &e))?;
    if let Some(p) = first.and_then(|p| p.policy) {
        if p != policy {
            sched::set_policy(0, p, true).map_err(|e| policy_error(spec, &p, restricted, &e))?;
            policy = p;
        }
    }
    super::uclamp::apply(&spec.name, Clamps::of_thread(spec), &policy)?;
    if let Some(nodes) = &spec.membind {
        super::membind::bind(nodes).map_err(|e| membind_error(spec, nodes, &e))?;
    }
    let group = Member::join(shared.taskgroups.as_ref(), spec)?;
    Ok((affinity, policy, group))
}

/// Puts the thread back to SCHED_OTHER if it holds a real-time policy or a reservation. The
/// thread does it itself, while running: demoting a sleeping SCHED_DEADLINE thread from another
/// thread leaks its bandwidth on Linux 6.18 (docs/linux.md).
fn demote(result: &mut ThreadResult) {
    match sched::get_policy(0) {
        Ok(
            Policy::Fifo { .. }
            | Policy::Rr { .. }
            | Policy::Deadline(_)
            | Policy::Idle
            | Policy::Batch { .. },
        ) => {
            if let Err(e) = sched::set_policy(0, Policy::Other { nice: 0 }, false) {
                result.demote_error = Some(e.to_string());
            }
        }
        Ok(Policy::Other { .. }) => {}
        Err(e) => result.demote_error = Some(e.to_string()),
    }
    result.at_exit = sched::get_policy(0).ok();
    result.ended = sys::now_ns();
}

impl<'a> Interp<'a> {
    fn rel(&self, abs: u64) -> u64 {
        abs.saturating_sub(self.t0)
    }

    /// Notes the CPU the thread is on now (migration sampling point).
    fn sample_cpu(&mut self) -> u32 {
        let cpu = sys::current_cpu();
        if cpu != self.last_cpu {
            self.last_cpu = cpu;
            self.migrations_seen += 1;
            if let Some(j) = &mut self.job {
                j.migrations = j.migrations.saturating_add(1);
            }
        }
        cpu
    }

    fn send(&mut self, m: Msg) {
        if !self.tx.try_send(m) {
            self.dropped += 1;
        }
    }

    fn start_job(&mut self, release: u64, start: u64) {
        let seq = self.released;
        self.released += 1;
        self.job = Some(Job {
            seq,
            release,
            start,
            cpu_time: sys::thread_cpu_ns(),
            involuntary: sys::context_switches().1,
            migrations: 0,
            stepped: false,
        });
    }

    /// The end of a finite thread's program: the job in progress is reported if the thread
    /// reached an event in it. The job released by the last timer (or opened by the last pass of
    /// a thread without timers) has none: it was never asked for, so it is neither released nor
    /// finished.
    fn finish_program(&mut self, now: u64) {
        if self.job.is_some_and(|j| !j.stepped) {
            self.job = None;
            self.released -= 1;
            return;
        }
        self.finish_job(now);
    }

    /// Ends the current job at `now`; it is reported if it ended before the run's cutoff.
    fn finish_job(&mut self, now: u64) {
        let Some(j) = self.job else { return };
        let exec = sys::thread_cpu_ns().saturating_sub(j.cpu_time);
        let preemptions = sys::context_switches().1.saturating_sub(j.involuntary);
        // The last sampling point, which may still count a migration for this job.
        let cpu = self.sample_cpu();
        let Some(j) = self.job.take() else { return };
        if now > self.shared.cutoff() {
            return;
        }
        self.finished += 1;
        let release = self.rel(j.release);
        let record = JobRecord {
            thread: self.idx,
            job: j.seq,
            release,
            start: self.rel(j.start),
            finish: self.rel(now),
            deadline: release.saturating_add(self.rel_deadline),
            period: self.period,
            exec,
            preemptions: preemptions.min(u32::MAX as u64) as u32,
            migrations: j.migrations,
            cpu,
        };
        self.send(Msg::Job(record));
    }

    /// Sleeps until `abs`, riding out stray signals; false when the run is stopping.
    fn sleep_until(&self, abs: u64) -> bool {
        loop {
            match sys::sleep_until(abs) {
                Slept::Done => return !self.shared.stopping(),
                Slept::Interrupted if self.shared.stopping() => return false,
                Slept::Interrupted => {}
            }
        }
    }

    /// Whether the run is over for this thread: stopped, or past its cutoff. The thread reads the
    /// clock itself rather than wait for the writer, which is a SCHED_OTHER thread that real-time
    /// hogs may keep off the CPU for a while.
    fn over(&self, now: u64) -> Option<End> {
        if self.shared.stopping() {
            Some(End::Stopped)
        } else if now > self.shared.cutoff() {
            Some(End::Cutoff)
        } else {
            None
        }
    }

    /// Busy work of `loops` calibrated loops; `Err` when the run ended meanwhile.
    fn spin_loops(&mut self, loops: u64) -> Result<(), End> {
        self.spin(loops, self.run_chunk, calibrate::waste)
    }

    /// `loops` iterations of `waste`, `chunk` at a time with a stop check and a CPU sample
    /// between chunks; `Err` when the run ended meanwhile.
    fn spin(&mut self, loops: u64, chunk: u64, waste: fn(u64)) -> Result<(), End> {
        let mut left = loops;
        while left > 0 {
            let n = left.min(chunk);
            waste(n);
            left -= n;
            self.pass.loops += n;
            self.sample_cpu();
            if let Some(end) = self.over(sys::now_ns()) {
                return Err(end);
            }
        }
        Ok(())
    }

    /// Busy work until `ns` of wall-clock time have passed; `Err` when the run ended meanwhile.
    fn spin_wall(&mut self, start: u64, ns: u64) -> Result<(), End> {
        loop {
            calibrate::waste(self.runtime_chunk);
            self.pass.loops += self.runtime_chunk;
            let now = sys::now_ns();
            if now.saturating_sub(start) >= ns {
                return Ok(());
            }
            self.sample_cpu();
            if let Some(end) = self.over(now) {
                return Err(end);
            }
        }
    }

    /// Start of a pass through `phase`: rt-app re-applies the affinity (the phase's, else the
    /// thread's, else the process's) and the phase's policy (sticky) at every pass; only changes
    /// reach the kernel.
    fn begin_pass(&mut self, phase: &'a Phase) -> Result<(), RunError> {
        let cpus: &'a [usize] = phase
            .affinity
            .as_deref()
            .or(self.spec.affinity.as_deref())
            .unwrap_or(&self.shared.default_affinity);
        if cpus != self.affinity {
            sched::set_affinity(0, cpus).map_err(|e| affinity_error(self.spec, cpus, &e))?;
            self.affinity = cpus;
        }
        if let Some(p) = phase.policy {
            if p != self.policy {
                let restricted = *self.affinity != self.shared.default_affinity[..];
                sched::set_policy(0, p, true).map_err(|e| policy_error(self.spec, &p, restricted, &e))?;
                self.policy = p;
            }
        }
        if let (Some(g), Some(m)) = (phase.taskgroup.as_deref(), self.group.as_mut()) {
            m.enter(g)?;
        }
        let clamps = Clamps::of_phase(phase);
        // A clamp the phase leaves unset keeps its value, as the kernel keeps it.
        let merged = Clamps {
            min: clamps.min.or(self.clamps.min),
            max: clamps.max.or(self.clamps.max),
        };
        if !clamps.is_empty() && merged != self.clamps {
            super::uclamp::apply(&self.spec.name, clamps, &self.policy)?;
            self.clamps = merged;
        }
        if let Some(nodes) = phase.membind.as_deref().filter(|&n| Some(n) != self.membind) {
            super::membind::bind(nodes).map_err(|e| membind_error(self.spec, nodes, &e))?;
            self.membind = Some(nodes);
        }
        let index = self
            .spec
            .phases
            .iter()
            .position(|p| std::ptr::eq(p, phase))
            .unwrap_or(0);
        let pos = next_pos(self.pos, index, |i| {
            self.spec.phases.get(i).map_or(1, |p| p.loops)
        });
        self.pos = Some(pos);
        self.event_id = 0;
        self.pass_open = true;
        self.shared.markers.pass(true, pos);
        self.pass = Pass {
            start: sys::now_ns(),
            ..Pass::default()
        };
        Ok(())
    }

    /// The log row of the pass in progress, as if it ended at `end`.
    fn row(&self, end: u64) -> LogRow {
        let p = self.pass;
        LogRow {
            // rt-app's thread index: file order for the threads started with the run, the
            // next free index for a forked one (its id here).
            idx: self.idx,
            perf: p.loops / 1000,
            run: us(p.run_ns),
            period: us(end.saturating_sub(p.start)),
            start: us(p.start),
            end: us(end),
            rel_st: us(self.rel(p.start)),
            slack: p.slack_us,
            c_duration: p.c_duration_us,
            c_period: p.c_period_us,
            wu_lat: p.wu_lat_us,
        }
    }

    /// rt-app's markers at the end of a pass: `rtapp_loop` end, then `rtapp_stats`.
    fn close_pass_markers(&self, row: &LogRow) {
        let m = &self.shared.markers;
        m.pass(false, self.pos.unwrap_or_default());
        m.stats(&Stats {
            period: row.period,
            run: row.run,
            wu_lat: row.wu_lat,
            slack: row.slack,
            c_period: row.c_period,
            c_run: row.c_duration,
        });
    }

    fn end_pass(&mut self) {
        let end = sys::now_ns();
        let row = self.row(end);
        self.pass_open = false;
        self.close_pass_markers(&row);
        if end > self.shared.cutoff() {
            return;
        }
        match self.shared.log_mode {
            LogMode::Off => {}
            LogMode::Stream => self.send(Msg::Log(self.idx, row)),
            LogMode::Buffer { .. } => {
                if let Some(ring) = &mut self.ring {
                    ring.push(row);
                }
            }
        }
    }

    fn run(&mut self) -> End {
        // The thread's start: job 0 is released at origin + delay.
        if self.t_first > self.shared.cutoff() {
            return End::Cutoff;
        }
        if !self.sleep_until(self.t_first) {
            return End::Stopped;
        }
        let woke = sys::now_ns();
        self.sample_cpu();
        // A forked thread's delay counts from the run's origin, like its timers; its first job
        // is released when it starts (fork.rs).
        self.start_job(self.t_first.max(self.inst.spawned_at), woke);

        let spec = self.spec;
        let mut pc = Cursor::default();
        let mut idle_steps = 0u32;
        loop {
            if self.shared.stopping() {
                return End::Stopped;
            }
            idle_steps += 1;
            if idle_steps > MAX_IDLE_STEPS {
                self.finish_job(sys::now_ns());
                return End::Finished;
            }
            let ev = match pc.advance(spec) {
                Step::Done => {
                    self.finish_program(sys::now_ns());
                    return End::Finished;
                }
                Step::PassStart(phase) => {
                    idle_steps -= 1;
                    if let Err(e) = self.begin_pass(phase) {
                        self.shared.fail(e);
                        return End::Stopped;
                    }
                    continue;
                }
                Step::PassEnd => {
                    self.end_pass();
                    if !self.has_timer {
                        // Without timers, each pass through a phase's events is one job.
                        let now = sys::now_ns();
                        self.finish_job(now);
                        self.start_job(now, now);
                    }
                    continue;
                }
                Step::Event(ev) => {
                    let desc = self.pos.and_then(|p| {
                        let descs = &self.spec.phases.get(p.phase)?.event_descs;
                        descs.get(self.event_id as usize).map(String::as_str)
                    });
                    self.shared.markers.event(self.event_id, ev, desc);
                    self.event_id = self.event_id.saturating_add(1);
                    if let Some(j) = &mut self.job {
                        j.stepped = true;
                    }
                    ev
                }
            };
            match ev {
                Event::Run { work } => {
                    let w = work.sample_for(&mut self.rng, self.units).ns();
                    self.pass.c_duration_us += us(w);
                    if w > 0 {
                        idle_steps = 0;
                        let start = sys::now_ns();
                        let done = match self.shared.extras.rtapp_ns_per_loop {
                            // rt-app's loop for rt-app's count (calibrate.rs).
                            Some(p) => self.spin_rtapp(calibrate::rtapp_loops(w / 1000, p)),
                            None => self.spin_loops(self.shared.calibration.loops_for(w)),
                        };
                        self.pass.run_ns += sys::now_ns().saturating_sub(start);
                        if let Err(end) = done {
                            return end;
                        }
                    }
                }
                Event::Runtime { duration } => {
                    let d = duration.ns();
                    self.pass.c_duration_us += us(d);
                    if d > 0 {
                        idle_steps = 0;
                        let start = sys::now_ns();
                        let done = self.spin_wall(start, d);
                        self.pass.run_ns += sys::now_ns().saturating_sub(start);
                        if let Err(end) = done {
                            return end;
                        }
                    }
                }
                Event::Sleep { duration } => {
                    idle_steps = 0;
                    let until = sys::now_ns().saturating_add(duration.ns());
                    if until > self.shared.cutoff() {
                        // Nothing this thread does after the end of the run is reported.
                        return End::Cutoff;
                    }
                    let mut left = duration.ns();
                    while sys::sleep_for(left, &mut left) == Slept::Interrupted {
                        if self.shared.stopping() {
                            return End::Stopped;
                        }
                    }
                    self.sample_cpu();
                }
                Event::Timer { timer, period, mode } => {
                    let now = sys::now_ns();
                    let p = period.ns();
                    let relative = *mode == TimerMode::Relative;
                    let t_first = self.t_first;
                    // rt-app's timer (`run_event()`), as the simulator models it: the expiry
                    // advances by one period from the previous one (the first from the thread's
                    // start); a late relative timer restarts its grid at now.
                    let step = |cur: u64| -> (u64, u64) {
                        let grid = if cur == UNSET { t_first } else { cur }.saturating_add(p);
                        let next = if grid <= now && relative { now } else { grid };
                        (grid, next)
                    };
                    let Some(slot) = self.inst.timer(&self.shared.timers, timer.0) else {
                        self.shared
                            .fail(RunError::Setup(format!("internal error: no timer {}", timer.0)));
                        return End::Stopped;
                    };
                    let prev = slot
                        .fetch_update(Ordering::AcqRel, Ordering::Acquire, |cur| Some(step(cur).1))
                        .unwrap_or_else(|cur| cur);
                    let (grid, next) = step(prev);
                    self.pass.c_period_us += us(p);
                    self.pass.slack_us = us_signed(grid as i64 - now as i64);
                    self.finish_job(now);
                    if next > now {
                        if next > self.shared.cutoff() {
                            return End::Cutoff;
                        }
                        if !self.sleep_until(next) {
                            return End::Stopped;
                        }
                        idle_steps = 0;
                        let woke = sys::now_ns();
                        self.pass.wu_lat_us += us(woke.saturating_sub(next));
                        self.sample_cpu();
                        self.start_job(next, woke);
                    } else {
                        // Late: the next job was released in the past and starts at once.
                        self.pass.wu_lat_us = 0;
                        self.start_job(next, now);
                    }
                }
                Event::Yield => {
                    idle_steps = 0;
                    sys::yield_now();
                    self.sample_cpu();
                }
                Event::WorkUnits { units } => self.units = *units,
                // The boost lives in the kernel's wake-up path (VT-CFS §IV); stock Linux has
                // none, and a user-space renice would not be the paper's mechanism.
                Event::Boost { .. } => {}
                Event::Lock { .. }
                | Event::Unlock { .. }
                | Event::Wait { .. }
                | Event::Signal { .. }
                | Event::Broadcast { .. }
                | Event::SignalWait { .. }
                | Event::Suspend { .. }
                | Event::Resume { .. }
                | Event::Barrier { .. }
                | Event::SemPost { .. }
                | Event::SemWait { .. }
                | Event::Mem { .. }
                | Event::IoRun { .. } => {
                    // Events that may wait or work count as progress for the idle-loop guard.
                    if !matches!(
                        ev,
                        Event::Unlock { .. }
                            | Event::Signal { .. }
                            | Event::Broadcast { .. }
                            | Event::Resume { .. }
                            | Event::SemPost { .. }
                    ) {
                        idle_steps = 0;
                    }
                    let io = self.shared.extras.io.as_ref();
                    if let Some(r) = self.sync.apply(ev, io) {
                        if let Some(end) = self.blocked(r) {
                            return end;
                        }
                    }
                }
                Event::MemRun {
                    buffer,
                    access,
                    count,
                } => {
                    if *count > 0 {
                        idle_steps = 0;
                    }
                    let r = self
                        .shared
                        .extras
                        .mem
                        .run(*buffer, *access, *count, &self.shared.stop);
                    if let Some(end) = self.blocked(r) {
                        return end;
                    }
                }
                Event::WorkingSet(ws) => {
                    let r = match &self.wss {
                        Some(buf) => {
                            let start = sys::now_ns();
                            let r = buf.run(
                                ws,
                                &mut self.rng,
                                self.units,
                                measured_profile(),
                                &self.shared.stop,
                            );
                            let took = sys::now_ns().saturating_sub(start);
                            self.pass.run_ns += took;
                            idle_steps = 0;
                            r
                        }
                        None => Err(Blocked::Failed(RunError::Setup(format!(
                            "internal error: thread `{}` has no working-set buffer",
                            self.spec.name
                        )))),
                    };
                    if let Some(end) = self.blocked(r) {
                        return end;
                    }
                }
                Event::Fork { thread } => {
                    let r = self
                        .inst
                        .fork(self.tx, self.sync.thread(), *thread, sys::now_ns());
                    if let Some(end) = self.blocked(r) {
                        return end;
                    }
                }
            }
        }
    }

    /// How a synchronisation event ended for the thread: `None` to go on; the end of its program
    /// when the run is stopping or past its cutoff, or when the event failed (the error then
    /// stops the run).
    fn blocked(&mut self, r: Result<(), Blocked>) -> Option<End> {
        match r {
            Ok(()) => {
                self.sample_cpu();
                self.over(sys::now_ns())
            }
            Err(Blocked::Stopped) => Some(End::Stopped),
            Err(Blocked::Failed(e)) => {
                self.shared.fail(e);
                Some(End::Stopped)
            }
        }
    }

    /// rt-app's busy loop, `loops` iterations; `Err` when the run ended meanwhile.
    fn spin_rtapp(&mut self, loops: u64) -> Result<(), End> {
        self.spin(loops, self.rtapp_chunk, calibrate::rtapp_waste)
    }
}

/// rt-app's loop counters of the pass through phase `index` that follows the pass at `prev`
/// (`None`: the first pass), `loops(i)` being phase `i`'s loop count: the phase's iteration
/// advances while the same phase repeats, and the thread's when the phase list starts over.
fn next_pos(prev: Option<LoopPos>, index: usize, loops: impl Fn(usize) -> u64) -> LoopPos {
    let Some(p) = prev else {
        return LoopPos {
            thread_loop: 0,
            phase: index,
            phase_loop: 0,
        };
    };
    if index == p.phase && p.phase_loop + 1 < loops(index) {
        LoopPos {
            phase_loop: p.phase_loop + 1,
            ..p
        }
    } else if index > p.phase {
        LoopPos {
            phase: index,
            phase_loop: 0,
            ..p
        }
    } else {
        LoopPos {
            thread_loop: p.thread_loop + 1,
            phase: index,
            phase_loop: 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loop_counters_follow_rt_apps() {
        // Phases looping 2, 1 and 3 times; the list twice.
        let loops = [2u64, 1, 3];
        let mut pos = None;
        let mut seen = Vec::new();
        for _ in 0..2 {
            for (i, &n) in loops.iter().enumerate() {
                for _ in 0..n {
                    let p = next_pos(pos, i, |i| loops[i]);
                    seen.push((p.thread_loop, p.phase, p.phase_loop));
                    pos = Some(p);
                }
            }
        }
        assert_eq!(
            seen,
            [
                (0, 0, 0),
                (0, 0, 1),
                (0, 1, 0),
                (0, 2, 0),
                (0, 2, 1),
                (0, 2, 2),
                (1, 0, 0),
                (1, 0, 1),
                (1, 1, 0),
                (1, 2, 0),
                (1, 2, 1),
                (1, 2, 2),
            ]
        );
        // One phase looping once, the list repeated: the thread's loop advances each time.
        let p0 = next_pos(None, 0, |_| 1);
        let p1 = next_pos(Some(p0), 0, |_| 1);
        assert_eq!((p1.thread_loop, p1.phase, p1.phase_loop), (1, 0, 0));
    }

    #[test]
    fn a_full_outbox_drops_and_the_last_sender_disconnects_it() {
        let out = Outbox::<u32>::new(2);
        let a = out.sender();
        let b = out.sender();
        assert!(a.try_send(1));
        assert!(b.try_send(2));
        // Full: the item is refused at once, nothing blocks.
        assert!(!a.try_send(3));
        let mut got = Vec::new();
        assert_eq!(out.drain(|x| got.push(x)), Drained::Open);
        assert_eq!(got, [1, 2]);
        // Room again after the drain.
        assert!(a.try_send(4));
        drop(a);
        // One sender left: still open, though the queue is drained.
        assert_eq!(out.drain(|x| got.push(x)), Drained::Open);
        assert!(b.try_send(5));
        drop(b);
        // The last sender is gone: the drain hands what it left, then reports the end.
        assert_eq!(out.drain(|x| got.push(x)), Drained::Disconnected);
        assert_eq!(got, [1, 2, 4, 5]);
        assert_eq!(out.drain(|x| got.push(x)), Drained::Disconnected);
        assert_eq!(got.len(), 4);
        // A capacity of 0 is taken as 1.
        let one = Outbox::<u32>::new(0);
        let s = one.sender();
        assert!(s.try_send(7));
        assert!(!s.try_send(8));
    }

    #[test]
    fn nothing_sent_is_lost_or_duplicated_across_threads() {
        const THREADS: usize = 4;
        const EACH: u64 = 20_000;
        // Small enough that senders overrun the poller now and then.
        let out = Outbox::<(usize, u64)>::new(256);
        let handles: Vec<_> = (0..THREADS)
            .map(|t| {
                let tx = out.sender();
                std::thread::spawn(move || {
                    let mut dropped = 0u64;
                    for i in 0..EACH {
                        if !tx.try_send((t, i)) {
                            dropped += 1;
                        }
                    }
                    dropped
                })
            })
            .collect();
        let mut last: Vec<Option<u64>> = vec![None; THREADS];
        let mut received = 0u64;
        loop {
            let d = out.drain(|(t, i)| {
                // Each sender's items arrive in the order sent, once.
                assert!(
                    last[t].is_none_or(|l| i > l),
                    "thread {t}: {i} after {:?}",
                    last[t]
                );
                last[t] = Some(i);
                received += 1;
            });
            if d == Drained::Disconnected {
                break;
            }
            std::thread::yield_now();
        }
        let dropped: u64 = handles.into_iter().map(|h| h.join().unwrap()).sum();
        assert_eq!(received + dropped, THREADS as u64 * EACH);
        assert!(received > 0);
    }

    #[test]
    fn a_panicking_sender_still_disconnects() {
        let out = Outbox::<u8>::new(4);
        let tx = out.sender();
        let h = std::thread::spawn(move || {
            assert!(tx.try_send(1));
            panic!("boom");
        });
        assert!(h.join().is_err());
        let mut got = Vec::new();
        assert_eq!(out.drain(|x| got.push(x)), Drained::Disconnected);
        assert_eq!(got, [1]);
    }
}
