//! What the simulator reports while it runs: one record per finished job and, for traces, the
//! scheduling events. Observers receive them as they happen, so nothing is kept in memory that
//! grows with the simulated horizon.

use serde::Serialize;

// The job record and thread index are shared with the real-kernel executor, so both write the
// same CSV and summaries (`pacer_workload::jobs`); re-exported here for the simulator's users.
pub use pacer_workload::jobs::{JobRecord, ThreadId};

/// A scheduling event, for traces.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum TraceEvent {
    /// `cpu` switched from `prev` to `next` (`None` = idle).
    Switch {
        t: u64,
        cpu: u32,
        prev: Option<ThreadId>,
        next: Option<ThreadId>,
        /// What `prev` does after leaving the CPU (kernel traces need it as `prev_state`).
        prev_state: PrevState,
    },
    /// A sleeping (or not yet started) thread became runnable and was queued on `cpu` (or, if
    /// its SCHED_DEADLINE runtime is exhausted, waits there for the replenishment): the
    /// kernel's `sched_waking`.
    Wakeup { t: u64, thread: ThreadId, cpu: u32 },
    /// A job was released (its thread woke up for it).
    Release { t: u64, thread: ThreadId, job: u64 },
    /// A job finished.
    Finish {
        t: u64,
        thread: ThreadId,
        job: u64,
        missed: bool,
    },
    /// A SCHED_DEADLINE thread exhausted its runtime and was throttled until `until`.
    Throttle { t: u64, thread: ThreadId, until: u64 },
    /// A throttled thread was replenished.
    Replenish { t: u64, thread: ThreadId },
    /// A thread moved from one CPU's run queue to another's.
    Migrate {
        t: u64,
        thread: ThreadId,
        from: u32,
        to: u32,
    },
    /// A cluster's new frequency took effect.
    Frequency { t: u64, cluster: u32, khz: u32 },
    /// A thread's SCHED_DEADLINE reservation: given when the thread starts under one, and at
    /// every change (`sched_setattr`, e.g. by an adaptation controller); `runtime` and `period`
    /// are 0 when it leaves SCHED_DEADLINE.
    Reservation {
        t: u64,
        thread: ThreadId,
        runtime: u64,
        period: u64,
    },
}

/// The state a thread leaves a CPU in, as the kernel's `sched_switch` reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PrevState {
    /// Still runnable: preempted, or throttled (a throttled SCHED_DEADLINE task stays
    /// `TASK_RUNNING` in the kernel). Also the state of an idle CPU's switch.
    #[default]
    Runnable,
    /// Sleeping or blocked: it needs a wake-up to run again.
    Sleeping,
    /// Exited.
    Dead,
}

/// Receives results as the simulation produces them.
pub trait Observer {
    /// Called once per finished job, in finishing order.
    fn job(&mut self, record: &JobRecord);
    /// Called for every scheduling event when [`Observer::wants_events`] is true.
    fn event(&mut self, _event: &TraceEvent) {}
    /// Whether to build and deliver [`TraceEvent`]s (costly; only traces need them).
    fn wants_events(&self) -> bool {
        false
    }
    /// A `fork` event started thread `thread`, named `name` (rt-app's `<task>-<index>-<nfork>`),
    /// before any of its jobs or events: observers that name threads up front learn it here.
    fn thread_started(&mut self, _thread: ThreadId, _name: &str) {}
}

/// Per-thread counters the engine keeps itself (like the kernel's schedstat), for summaries.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct ThreadStats {
    /// Times the thread was switched in.
    pub switches: u64,
    /// Times it was switched out while still runnable (preemption or throttling).
    pub involuntary_switches: u64,
    /// Times it moved to another CPU.
    pub migrations: u64,
    /// Total CPU time consumed.
    pub exec: u64,
    /// Time runnable without a CPU (queued or throttled), ns; the wait in progress is counted
    /// by [`Sim::run_delay`](crate::Sim::run_delay).
    pub run_delay: u64,
    /// Runtime overruns (SCHED_DEADLINE budget exhausted before the job finished).
    pub overruns: u64,
    /// Jobs released / finished.
    pub released: u64,
    pub finished: u64,
}

/// Sends everything to several observers.
pub struct Fanout<'a>(pub Vec<&'a mut dyn Observer>);

impl Observer for Fanout<'_> {
    fn job(&mut self, r: &JobRecord) {
        for o in &mut self.0 {
            o.job(r);
        }
    }
    fn event(&mut self, e: &TraceEvent) {
        for o in &mut self.0 {
            if o.wants_events() {
                o.event(e);
            }
        }
    }
    fn wants_events(&self) -> bool {
        self.0.iter().any(|o| o.wants_events())
    }
    fn thread_started(&mut self, thread: ThreadId, name: &str) {
        for o in &mut self.0 {
            o.thread_started(thread, name);
        }
    }
}
