//! The rt class: SCHED_FIFO and SCHED_RR (`kernel/sched/rt.c`). Priorities 1..99, higher first;
//! FIFO within a priority; a preempted task goes back to the head of its list (it was running
//! and keeps its place), a task whose RR slice expired or that yields goes to the tail.

use super::SortedQueue;
use crate::record::ThreadId;

/// Default `sched_rr_timeslice_ms` (100 ms).
pub(crate) const RR_TIMESLICE_NS: u64 = 100_000_000;

/// `struct sched_rt_entity`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RtEntity {
    pub prio: u8,
    /// SCHED_RR rather than SCHED_FIFO.
    pub rr: bool,
    /// Position in its priority list (smaller runs first).
    pub order: i64,
    /// Execution since the RR slice was last refilled.
    pub slice_used: u64,
}

impl RtEntity {
    pub fn new(prio: u8, rr: bool) -> Self {
        RtEntity {
            prio,
            rr,
            order: 0,
            slice_used: 0,
        }
    }
    /// 99 − priority: smaller is more urgent.
    pub fn key(&self) -> u8 {
        99 - self.prio.min(99)
    }
}

/// RT throttling of a CPU's root rt_rq (`sched_rt_runtime_exceeded()`,
/// `do_sched_rt_period_timer()`; kernels with CONFIG_RT_GROUP_SCHED, such as this machine's):
/// once rt tasks ran `runtime` within a period they are not picked until the period timer
/// gives back up to `runtime` of their accounted time.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RtBandwidth {
    pub runtime: u64,
    pub period: u64,
    /// `rt_rq->rt_time`.
    pub rt_time: u64,
    pub throttled: bool,
    /// Next expiry of the period timer, while it runs.
    pub timer: Option<u64>,
}

impl RtBandwidth {
    pub fn new(runtime: u64, period: u64) -> Self {
        RtBandwidth {
            runtime,
            period,
            rt_time: 0,
            throttled: false,
            timer: None,
        }
    }

    /// `start_rt_bandwidth()`: rt work arrived; the period timer runs from now.
    pub fn start(&mut self, now: u64) {
        if self.timer.is_none() {
            self.timer = Some(now + self.period);
        }
    }

    /// Charges `delta` ns of rt execution; true when that exceeds the runtime (throttled now).
    pub fn charge(&mut self, delta: u64) -> bool {
        self.rt_time += delta;
        if !self.throttled && self.rt_time > self.runtime {
            self.throttled = true;
            return true;
        }
        false
    }

    /// Execution left before throttling.
    pub fn left(&self) -> u64 {
        (self.runtime + 1).saturating_sub(self.rt_time)
    }

    /// The period timer at `now`: up to one runtime per elapsed period is given back; true when
    /// that unthrottled the queue. The timer stops once nothing is accounted and `busy` is false.
    pub fn fire(&mut self, now: u64, busy: bool) -> bool {
        let Some(at) = self.timer else { return false };
        let overrun = 1 + (now - at) / self.period.max(1);
        self.rt_time = self.rt_time.saturating_sub(overrun * self.runtime);
        let was = self.throttled;
        if self.throttled && self.rt_time < self.runtime {
            self.throttled = false;
        }
        self.timer = (self.rt_time > 0 || busy || self.throttled).then_some(at + overrun * self.period);
        was && !self.throttled
    }
}

#[derive(Debug, Default)]
pub(crate) struct RtRq {
    /// (inverted priority, order, thread): the first element is the next to run.
    queue: SortedQueue<(u8, i64, ThreadId)>,
    head: i64,
    tail: i64,
}

impl RtRq {
    /// Enqueues at the tail (`head = false`) or head of its priority list.
    pub fn enqueue(&mut self, t: ThreadId, e: &mut RtEntity, head: bool) {
        e.order = if head {
            self.head -= 1;
            self.head
        } else {
            self.tail += 1;
            self.tail
        };
        self.queue.insert((e.key(), e.order, t));
    }
    pub fn dequeue(&mut self, t: ThreadId, e: &RtEntity) -> bool {
        self.queue.remove(&(e.key(), e.order, t))
    }
    /// (priority, thread) of the first queued task.
    pub fn first(&self) -> Option<(u8, ThreadId)> {
        self.queue.first().map(|&(p, _, t)| (99 - p, t))
    }
    pub fn iter(&self) -> impl Iterator<Item = (u8, ThreadId)> + '_ {
        self.queue.iter().map(|&(p, _, t)| (99 - p, t))
    }
    /// Whether another task of priority `prio` is queued (RR rotates only then).
    pub fn has_prio(&self, prio: u8) -> bool {
        self.queue.iter().any(|&(p, _, _)| 99 - p == prio)
    }
}
