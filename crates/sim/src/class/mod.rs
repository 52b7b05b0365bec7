//! Scheduling classes in the kernel's strict priority order: deadline > rt > fair > idle
//! (`for_each_class()` in kernel/sched/sched.h).
//!
//! This module is the dispatch table, the simulator's `struct sched_class`: each verb here matches
//! on the thread's scheduling entity (or walks the classes in priority order) and calls the body
//! that lives in the class's own file, next to its entity and run queue. The engine calls only
//! these verbs and carries out what they ask for (throttle a thread until a time, arm an inactive
//! timer, reprogram a CPU after its bandwidth sums changed), the way `core.c` does not ask which
//! class a task is in.

pub(crate) mod cpudl;
pub(crate) mod deadline;
pub(crate) mod fair;
pub(crate) mod rt;

use pacer_model::Policy;

use crate::record::ThreadId;
use cpudl::RootHeaps;
use deadline::{DlEntity, DlRq};
use fair::{FairEntity, FairParams, FairRq};
use rt::{RtEntity, RtRq};

/// A thread's class, in priority order (smaller runs first).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum ClassId {
    Deadline,
    Rt,
    Fair,
}

/// Total order of "who should run": class first, then the class's own key (earlier deadline,
/// higher rt priority, then the fair class's order). Smaller is more urgent; only a strictly
/// smaller key preempts across classes or within deadline and rt, so equal keys never cause a
/// switch. Within the fair class the key only orders CPU selection and pulls: whether a fair
/// thread preempts another is the fair class's own decision ([`Rq::wakeup_preempt`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Key {
    Deadline(u64),
    /// 99 − priority.
    Rt(u8),
    Fair(u64),
    /// An idle CPU.
    Idle,
}

impl Key {
    /// Whether a thread of key `self` preempts a CPU running one of key `curr` without asking the
    /// class (`wakeup_preempt()` across classes, and within deadline and rt).
    pub fn preempts(self, curr: Key) -> bool {
        !matches!((self, curr), (Key::Fair(_), Key::Fair(_))) && self < curr
    }
}

/// A thread's scheduling entity: `sched_dl_entity`, `sched_rt_entity` or `sched_entity`.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Entity {
    Dl(DlEntity),
    Rt(RtEntity),
    Fair(FairEntity),
}

/// What the class wants done with the running thread at a CPU-local expiry (`task_tick()` and
/// `update_curr()`'s checks).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Tick {
    /// Keep running.
    Stay,
    /// Out of runtime: off the CPU until the class's replenishment ([`Entity::throttled_until`]).
    Throttle,
    /// Slice over: back on the queue, and the class picks again.
    Requeue,
}

/// How a thread joins a run queue (`ENQUEUE_*` flags).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Enqueue {
    /// At the head of its priority list (rt: it was preempted).
    pub head: bool,
    /// It is waking up (`ENQUEUE_WAKEUP`).
    pub wakeup: bool,
    /// It comes from another CPU (`ENQUEUE_MIGRATED`).
    pub migrated: bool,
}

/// How the running thread leaves its CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Off {
    /// Preempted: back on the queue as it is (`put_prev_task()`).
    Preempted,
    /// Its slice ran out or it yielded: the caller queues it again as it is.
    Requeue,
    /// It blocks, exits, is throttled or changes class (`dequeue_task(DEQUEUE_SLEEP)`).
    Block,
}

/// What a blocking thread's class asks for (`dequeue_task(DEQUEUE_SLEEP)`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Block {
    Nothing,
    /// Blocked with its runtime used up: throttled until the replenishment.
    Throttle,
    /// Its bandwidth may be released now.
    ReleaseNow,
    /// Release its bandwidth at this time unless it wakes first (the inactive timer).
    ReleaseAt(u64),
}

impl Entity {
    /// The entity a thread of `policy` starts with (`__sched_setscheduler()` → `__setscheduler_params()`).
    pub fn from_policy(policy: &Policy, fair: &FairParams) -> Result<Entity, String> {
        Ok(match *policy {
            Policy::Deadline(r) => {
                r.validate().map_err(|e| e.to_string())?;
                Entity::Dl(DlEntity::new(&r))
            }
            Policy::Fifo { priority } => Entity::Rt(RtEntity::new(priority, false)),
            Policy::Rr { priority } => Entity::Rt(RtEntity::new(priority, true)),
            Policy::Other { nice } => Entity::Fair(FairEntity::new(fair::weight_of_nice(nice), fair)),
            // SCHED_IDLE: the fair class with the kernel's WEIGHT_IDLEPRIO.
            Policy::Idle => Entity::Fair(FairEntity::new(fair::WEIGHT_IDLEPRIO, fair)),
        })
    }

    /// The entity after `sched_setattr()` of `policy` at `now` (`__sched_setscheduler()`:
    /// `switched_from()` / `switched_to()` / `prio_changed()`): a deadline entity keeps its current
    /// (deadline, runtime) across a parameter change, a fair entity its vruntime.
    pub fn changed(
        self,
        policy: &Policy,
        fair: &FairParams,
        now: u64,
        runnable: bool,
    ) -> Result<Entity, String> {
        let mut next = Entity::from_policy(policy, fair)?;
        match (&self, &mut next) {
            (_, Entity::Dl(e)) => e.switched_to(self.dl().copied(), now, runnable),
            (Entity::Fair(old), Entity::Fair(new)) => new.reweighted_from(old),
            _ => {}
        }
        Ok(next)
    }

    pub fn class(&self) -> ClassId {
        match self {
            Entity::Dl(_) => ClassId::Deadline,
            Entity::Rt(_) => ClassId::Rt,
            Entity::Fair(_) => ClassId::Fair,
        }
    }

    pub fn key(&self) -> Key {
        match self {
            Entity::Dl(e) => Key::Deadline(e.deadline),
            Entity::Rt(e) => Key::Rt(e.key()),
            Entity::Fair(e) => Key::Fair(e.key()),
        }
    }

    /// The deadline entity, for the sensors the adaptation engine reads (`dl_state`).
    pub fn dl(&self) -> Option<&DlEntity> {
        match self {
            Entity::Dl(e) => Some(e),
            _ => None,
        }
    }

    /// Bandwidth this entity holds on its run queue and root domain (`dl_bw`), 0 for classes
    /// without reservations.
    pub fn bandwidth(&self) -> u64 {
        self.dl().map_or(0, |e| e.dl_bw)
    }

    /// Whether the entity counts in its run queue's running bandwidth now.
    pub fn holds_running_bw(&self) -> bool {
        self.dl().is_some_and(|e| e.active)
    }

    /// The key the entity will have once woken at `now` (a deadline entity's after the CBS
    /// wake-up rule), for ordering simultaneous wake-ups.
    pub fn wake_key(&self, now: u64) -> Key {
        match self {
            Entity::Dl(e) => {
                let mut e = *e;
                e.on_wakeup(now);
                Key::Deadline(e.deadline)
            }
            _ => self.key(),
        }
    }

    /// Whether a waking thread's class prefers an idle CPU to preempting (`select_task_rq_fair()`
    /// looks for an idle sibling; deadline and rt look for the CPU they preempt: cpudl / cpupri).
    pub fn prefers_idle_cpu(&self) -> bool {
        matches!(self, Entity::Fair(_))
    }

    /// A running thread is about to block at `now`.
    pub fn block(&mut self, now: u64) -> Block {
        match self {
            Entity::Dl(e) => e.block(now),
            _ => Block::Nothing,
        }
    }

    /// When a throttled entity's runtime comes back (`dl_next_period()`).
    pub fn throttled_until(&self) -> Option<u64> {
        self.dl().map(DlEntity::next_period_start)
    }

    /// The replenishment timer fired (`replenish_dl_entity()`).
    pub fn replenish(&mut self, now: u64) {
        if let Entity::Dl(e) = self {
            e.replenish(now);
        }
    }

    /// A fair thread's custom slice (`sched_attr.sched_runtime` of SCHED_OTHER), clamped to
    /// 0.1–100 ms; `None` restores the base slice. False for other classes.
    pub fn set_fair_slice(&mut self, slice: Option<u64>, p: &FairParams) -> bool {
        match self {
            Entity::Fair(e) => {
                e.set_slice(slice, p);
                true
            }
            _ => false,
        }
    }

    /// Marks a fair thread interactive with budget C (ns) for framework-assisted boosting
    /// (VT-CFS paper §IV, eq. 6), or unmarks it; false for other classes.
    pub fn set_boost(&mut self, c: Option<u64>) -> bool {
        match self {
            Entity::Fair(e) => {
                e.boost = c.filter(|&c| c > 0);
                true
            }
            _ => false,
        }
    }

    /// The run-time statistics the job begin/end events carry for a reservation.
    pub fn dl_state(&self) -> Option<(u64, i64)> {
        self.dl().map(|e| (e.deadline, e.runtime))
    }
}

/// How the running thread is charged for `delta` ns of execution.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Charge {
    /// The CPU's current speed (capacity at its OPP) on the 1024 scale.
    pub speed: u64,
    /// Scale-invariant SCHED_DEADLINE accounting (`SimConfig::scale_invariant_runtime`).
    pub scale_invariant: bool,
}

/// One CPU's run queue (`struct rq`): one sub-queue per class.
#[derive(Debug)]
pub(crate) struct Rq {
    pub dl: DlRq,
    pub rt: RtRq,
    pub fair: FairRq,
}

impl Rq {
    pub fn new(max_bw: u64, fair: FairParams) -> Self {
        Rq {
            dl: DlRq::new(max_bw),
            rt: RtRq::default(),
            fair: FairRq::new(fair),
        }
    }

    /// `enqueue_task()`.
    pub fn enqueue(&mut self, t: ThreadId, se: &mut Entity, f: Enqueue) {
        match se {
            Entity::Dl(e) => self.dl.enqueue(t, e.deadline),
            Entity::Rt(e) => self.rt.enqueue(t, e, f.head),
            Entity::Fair(e) => self.fair.enqueue(t, e, f),
        }
    }

    /// `dequeue_task()` of a queued thread that moves to another CPU or class.
    pub fn dequeue(&mut self, t: ThreadId, se: &mut Entity) {
        match se {
            Entity::Dl(e) => {
                self.dl.dequeue(t, e.deadline);
            }
            Entity::Rt(e) => {
                self.rt.dequeue(t, e);
            }
            Entity::Fair(e) => self.fair.dequeue(t, e),
        }
    }

    /// `pick_next_task()`: the most urgent queued thread, walking the classes in order. Inlined:
    /// a key built in the callee's return slot and copied as a whole stalls on store forwarding
    /// (the 2-CPU benchmark spent ~2 % there).
    #[inline]
    pub fn pick(&self) -> Option<(Key, ThreadId)> {
        if let Some((d, t)) = self.dl.first() {
            return Some((Key::Deadline(d), t));
        }
        if let Some((p, t)) = self.rt.first() {
            return Some((Key::Rt(99 - p), t));
        }
        self.fair.pick().map(|(k, t)| (Key::Fair(k), t))
    }

    /// `pick_next_task()` when the CPU is about to run what it picks: like [`Rq::pick`], and
    /// the fair class lets the delayed sleepers it meets leave its queue.
    pub fn pick_next(&mut self) -> Option<(Key, ThreadId)> {
        if self.dl.first().is_some() || self.rt.first().is_some() {
            return self.pick();
        }
        self.fair.pick_next().map(|(k, t)| (Key::Fair(k), t))
    }

    /// Whether a sleeping thread is still queued here (a fair sleeper under DELAY_DEQUEUE): its
    /// wake-up finds it in place, on this CPU.
    pub fn holds_delayed(&self, t: ThreadId) -> bool {
        self.fair.holds_delayed(t)
    }

    /// A sleeping thread that is still queued leaves for good (it changes class).
    pub fn drop_delayed(&mut self, t: ThreadId) {
        self.fair.drop_delayed(t);
    }

    /// The most urgent queued thread that `allowed` accepts (what a pull may take).
    pub fn first_allowed(&self, allowed: impl Fn(ThreadId) -> bool) -> Option<(Key, ThreadId)> {
        if let Some(&(d, t)) = self.dl.iter().find(|&&(_, t)| allowed(t)) {
            return Some((Key::Deadline(d), t));
        }
        if let Some((p, t)) = self.rt.iter().find(|&(_, t)| allowed(t)) {
            return Some((Key::Rt(99 - p), t));
        }
        self.fair.first_allowed(allowed).map(|(k, t)| (Key::Fair(k), t))
    }

    /// The key of the most urgent queued thread a pull may take (delayed fair sleepers are not
    /// taken), `Idle` when there is none: what the pull heap ([`cpudl::CpuQueued`]) holds for
    /// this CPU, a lower bound of every [`Rq::first_allowed`].
    pub fn first_queued(&self) -> Key {
        self.first_allowed(|_| true).map_or(Key::Idle, |(k, _)| k)
    }

    /// The running thread leaves the CPU. A preempted one goes back on its queue (rt: at the
    /// head of its priority list, as the kernel keeps a preempted FIFO task first).
    pub fn put_prev(&mut self, t: ThreadId, se: &mut Entity, how: Off) {
        match (&mut *se, how) {
            (Entity::Fair(e), Off::Block) => self.fair.put_prev_blocking(t, e),
            (Entity::Fair(e), _) => self.fair.put_prev(e),
            _ => {}
        }
        if how == Off::Preempted {
            let head = matches!(se, Entity::Rt(_));
            self.enqueue(
                t,
                se,
                Enqueue {
                    head,
                    ..Enqueue::default()
                },
            );
        }
    }

    /// `set_next_task()`: the queued thread `t` is switched in.
    pub fn set_next(&mut self, t: ThreadId, se: &mut Entity) {
        match se {
            Entity::Dl(e) => {
                self.dl.dequeue(t, e.deadline);
            }
            Entity::Rt(e) => {
                self.rt.dequeue(t, e);
            }
            Entity::Fair(e) => self.fair.set_next(t, e),
        }
    }

    /// `sched_yield()`: what the class does with the caller.
    pub fn yield_task(&mut self, se: &mut Entity) -> Tick {
        match se {
            // SCHED_DEADLINE gives up the rest of its runtime (`yield_task_dl()`).
            Entity::Dl(e) => {
                e.runtime = 0;
                Tick::Throttle
            }
            Entity::Rt(e) => {
                e.slice_used = 0;
                Tick::Requeue
            }
            Entity::Fair(e) => {
                self.fair.yield_task(e);
                Tick::Requeue
            }
        }
    }

    /// `update_curr()`: the class's share of charging `delta` ns to the running thread.
    pub fn update_curr(&mut self, se: &mut Entity, delta: u64, c: Charge) {
        match se {
            Entity::Dl(e) => self.dl.update_curr(e, delta, c.speed, c.scale_invariant),
            Entity::Rt(e) => e.slice_used += delta,
            Entity::Fair(e) => self.fair.update_curr(e, delta),
        }
    }

    /// Running time after which the class wants to look at the running thread again (runtime
    /// exhausted, slice over); `u64::MAX` for never.
    pub fn expiry(&self, se: &Entity, c: Charge, rr_timeslice: u64, now: u64) -> u64 {
        match se {
            Entity::Dl(e) => self.dl.time_to_exhaust(e, c.speed, c.scale_invariant),
            Entity::Rt(e) if e.rr && self.rt.has_prio(e.prio) => rr_timeslice.saturating_sub(e.slice_used),
            Entity::Rt(_) => u64::MAX,
            Entity::Fair(e) => self.fair.expiry(e, now),
        }
    }

    /// The running thread's class looks at it at a CPU-local expiry (`task_tick()`).
    pub fn task_tick(&mut self, se: &mut Entity, rr_timeslice: u64, now: u64) -> Tick {
        match se {
            Entity::Dl(e) if e.runtime <= 0 => Tick::Throttle,
            Entity::Dl(_) => Tick::Stay,
            Entity::Rt(e) if e.rr && e.slice_used >= rr_timeslice => {
                e.slice_used = 0;
                Tick::Requeue
            }
            Entity::Rt(_) => Tick::Stay,
            Entity::Fair(e) => self.fair.task_tick(e, now),
        }
    }

    /// `wakeup_preempt()` within a class that decides it itself (fair): should `woken`, just
    /// enqueued, take the CPU from `curr`?
    pub fn wakeup_preempt(&self, curr: &mut Entity, t: ThreadId, woken: &Entity) -> bool {
        match (curr, woken) {
            (Entity::Fair(c), Entity::Fair(w)) => self.fair.wakeup_preempt(c, t, w),
            _ => false,
        }
    }

    /// A waking (or replenished, or migrated-in) entity joins this CPU's bandwidth sums
    /// (`add_running_bw()`, `task_contending()`); true when they changed.
    pub fn activate(&mut self, se: &mut Entity) -> bool {
        match se {
            Entity::Dl(e) if !e.active => {
                e.active = true;
                self.dl.running_bw += e.dl_bw;
                true
            }
            _ => false,
        }
    }

    /// The entity leaves the running bandwidth (its 0-lag time passed); true when it changed.
    pub fn deactivate(&mut self, se: &mut Entity) -> bool {
        match se {
            Entity::Dl(e) if e.active => {
                e.active = false;
                self.dl.running_bw -= e.dl_bw;
                true
            }
            _ => false,
        }
    }

    /// The entity is assigned to this run queue (`add_rq_bw()`), with its running bandwidth when
    /// active.
    pub fn attach_bw(&mut self, se: &Entity) {
        if let Entity::Dl(e) = se {
            self.dl.this_bw += e.dl_bw;
            if e.active {
                self.dl.running_bw += e.dl_bw;
            }
        }
    }

    /// The entity leaves this run queue's sums (`sub_rq_bw()`, `sub_running_bw()`).
    pub fn detach_bw(&mut self, se: &Entity) {
        if let Entity::Dl(e) = se {
            self.dl.this_bw -= e.dl_bw;
            if e.active {
                self.dl.running_bw -= e.dl_bw;
            }
        }
    }

    /// A waking entity's class prepares it (the CBS wake-up rule).
    pub fn task_waking(&mut self, se: &mut Entity, now: u64) {
        if let Entity::Dl(e) = se {
            e.on_wakeup(now);
        }
    }

    /// Whether an rt thread is runnable here or `curr` is one (schedutil runs rt at the top).
    pub fn rt_runnable(&self, curr: Option<ClassId>) -> bool {
        self.rt.first().is_some() || curr == Some(ClassId::Rt)
    }

    /// Σ bandwidth of the active deadline entities of this CPU (`dl_rq.running_bw`).
    pub fn running_bw(&self) -> u64 {
        self.dl.running_bw
    }
}

/// `select_task_rq()` of a thread that may run on more than one CPU (core.c answers for a pinned
/// one without asking the class), from the running keys of the CPUs of its root domain: a fair
/// thread takes an idle allowed CPU (`prev` first, then the lowest), else stays on `prev`;
/// deadline and rt take the CPU running the least urgent thread they preempt (cpudl / cpupri; ties
/// to `prev`, then the lowest), else stay on `prev`. A `prev` outside the affinity falls back to
/// the lowest allowed CPU of `0..ncpus`.
pub(crate) fn select_task_rq(
    se: &Entity,
    prev: usize,
    ncpus: usize,
    allowed: impl Fn(usize) -> bool,
    cpus: &mut RootHeaps,
) -> usize {
    let found = if se.prefers_idle_cpu() {
        cpus.find_free(prev, &allowed)
    } else {
        let k = se.key();
        cpus.find(prev, &allowed, |ck| k.preempts(ck))
    };
    found.unwrap_or_else(|| {
        if allowed(prev) {
            prev
        } else {
            (0..ncpus).find(|&c| allowed(c)).unwrap_or(prev)
        }
    })
}
