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
pub(crate) mod group;
pub(crate) mod rt;

use pacer_model::Policy;

use crate::record::ThreadId;
use cpudl::RootHeaps;
use deadline::{DlEntity, DlRq, FairServer};
use fair::{FairEntity, FairParams, FairRq};
use rt::{RtBandwidth, RtEntity, RtRq};

/// A run queue's ordered set of queued entities: sorted, most urgent last, so that the next to
/// run leaves from the end. Per-CPU queues hold a few entities, where a sorted vector beats the
/// kernel's rb-tree (and a B-tree: the 10-task SimSo case ran 10 % faster), and insertion stays
/// cheap into the thousands.
#[derive(Debug)]
pub(crate) struct SortedQueue<K>(Vec<K>);

impl<K> Default for SortedQueue<K> {
    fn default() -> Self {
        SortedQueue(Vec::new())
    }
}

impl<K: Ord + Copy> SortedQueue<K> {
    fn position(&self, key: &K) -> Result<usize, usize> {
        self.0.binary_search_by(|probe| key.cmp(probe))
    }
    /// Inserts `key`; false if it was already there.
    pub fn insert(&mut self, key: K) -> bool {
        match self.position(&key) {
            Ok(_) => false,
            Err(i) => {
                self.0.insert(i, key);
                true
            }
        }
    }
    /// Removes `key`; false if it was not there.
    pub fn remove(&mut self, key: &K) -> bool {
        match self.position(key) {
            Ok(i) => {
                self.0.remove(i);
                true
            }
            Err(_) => false,
        }
    }
    /// The smallest key.
    pub fn first(&self) -> Option<&K> {
        self.0.last()
    }
    /// Smallest first.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &K> {
        self.0.iter().rev()
    }
}

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
            // SCHED_BATCH: a nice weight, and it never preempts on wake-up.
            Policy::Batch { nice } => {
                let mut e = FairEntity::new(fair::weight_of_nice(nice), fair);
                e.batch_policy = true;
                Entity::Fair(e)
            }
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

    #[inline]
    pub fn class(&self) -> ClassId {
        match self {
            Entity::Dl(_) => ClassId::Deadline,
            Entity::Rt(_) => ClassId::Rt,
            Entity::Fair(_) => ClassId::Fair,
        }
    }

    #[inline]
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

    /// Whether `other` joins a queue whose accounting depends on this running entity's progress
    /// (a fair entity's placement reads the running fair entity's v): the engine brings the
    /// running one up to date before such an enqueue.
    #[inline]
    pub fn same_queue(&self, other: &Entity) -> bool {
        matches!((self, other), (Entity::Fair(_), Entity::Fair(_)))
    }

    /// Whether the class may reschedule this entity when it is accounted between ticks, and may
    /// keep it queued while it sleeps (the fair class: EEVDF's protection and DELAY_DEQUEUE).
    /// Lets the engine skip that work for the other classes.
    #[inline]
    pub fn lazily_scheduled(&self) -> bool {
        matches!(self, Entity::Fair(_))
    }

    /// Bandwidth this entity holds on its run queue and root domain (`dl_bw`), 0 for classes
    /// without reservations.
    #[inline]
    pub fn bandwidth(&self) -> u64 {
        self.dl().map_or(0, |e| e.dl_bw)
    }

    /// Whether the entity counts in its run queue's running bandwidth now.
    #[inline]
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
    #[inline]
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
    #[inline]
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
    /// The time charged up to.
    pub now: u64,
}

/// One CPU's run queue (`struct rq`): one sub-queue per class.
#[derive(Debug)]
pub(crate) struct Rq {
    pub dl: DlRq,
    pub rt: RtRq,
    pub fair: FairRq,
    /// The fair server (Linux ≥ 6.12), when the kernel has one.
    pub server: Option<FairServer>,
    /// RT throttling of the root rt_rq (CONFIG_RT_GROUP_SCHED), when modelled.
    pub rt_bw: Option<RtBandwidth>,
    /// The running thread is a fair one running inside the fair server.
    served: bool,
}

impl Rq {
    /// `server` is the fair server's (runtime, period), `rt_bw` RT throttling's (runtime,
    /// period), ns.
    pub fn new(max_bw: u64, fair: FairParams, server: Option<(u64, u64)>, rt_bw: Option<(u64, u64)>) -> Self {
        Rq {
            dl: DlRq::new(max_bw),
            rt: RtRq::default(),
            fair: FairRq::new(fair),
            server: server.filter(|s| s.0 > 0).map(|(q, p)| FairServer::new(q, p)),
            rt_bw: rt_bw.map(|(q, p)| RtBandwidth::new(q, p)),
            served: false,
        }
    }

    /// `enqueue_task()` at `now`. The first fair task starts the fair server; rt work starts the
    /// RT period timer.
    #[inline]
    pub fn enqueue(&mut self, t: ThreadId, se: &mut Entity, f: Enqueue, now: u64) {
        let first_fair = matches!(se, Entity::Fair(_)) && self.fair.is_idle();
        self.insert(t, se, f);
        match se {
            Entity::Rt(_) => {
                if let Some(b) = self.rt_bw.as_mut() {
                    b.start(now);
                }
            }
            Entity::Fair(_) if first_fair => {
                if let Some(s) = self.server.as_mut() {
                    s.start(now);
                }
            }
            _ => {}
        }
    }

    /// Puts `t` on its class's queue (the part of `enqueue_task()` a thread put back shares).
    #[inline]
    fn insert(&mut self, t: ThreadId, se: &mut Entity, f: Enqueue) {
        match se {
            Entity::Dl(e) => self.dl.enqueue(t, e.deadline),
            Entity::Rt(e) => self.rt.enqueue(t, e, f.head),
            Entity::Fair(e) => self.fair.enqueue(t, e, f),
        }
    }

    /// The rt class may not run now (throttled).
    fn rt_throttled(&self) -> bool {
        self.rt_bw.is_some_and(|b| b.throttled)
    }

    /// The fair server competes now, with this deadline, and has a fair task to run.
    fn server_deadline(&self) -> Option<u64> {
        self.server
            .and_then(|s| s.runnable())
            .filter(|_| self.fair.pick().is_some())
    }

    /// The key the running thread `se` holds against others: a fair thread inside the fair
    /// server holds the server's deadline.
    #[inline]
    pub fn curr_key(&self, se: &Entity) -> Key {
        match (se, self.served, self.server.and_then(|s| s.runnable())) {
            (Entity::Fair(_), true, Some(d)) => Key::Deadline(d),
            _ => se.key(),
        }
    }

    /// `dequeue_task()` of a queued thread that moves to another CPU or class.
    #[inline]
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

    /// `pick_next_task()`: the most urgent queued thread, walking the classes in order (the
    /// fair server is a deadline entity; a throttled rt class is passed over). Inlined: a key
    /// built in the callee's return slot and copied as a whole stalls on store forwarding (the
    /// 2-CPU benchmark spent ~2 % there).
    #[inline]
    pub fn pick(&self) -> Option<(Key, ThreadId)> {
        let server = self.server_deadline();
        if let Some((d, t)) = self.dl.first() {
            if server.is_none_or(|s| d <= s) {
                return Some((Key::Deadline(d), t));
            }
        }
        if let Some(s) = server {
            return self.fair.pick().map(|(_, t)| (Key::Deadline(s), t));
        }
        if !self.rt_throttled() {
            if let Some((p, t)) = self.rt.first() {
                return Some((Key::Rt(99 - p), t));
            }
        }
        self.fair.pick().map(|(k, t)| (Key::Fair(k), t))
    }

    /// `pick_next_task()` when the CPU is about to run what it picks: like [`Rq::pick`], and
    /// the fair class lets the delayed sleepers it meets leave its queue; a fair server with
    /// nothing left to run stops. Always inlined: the engine calls it from two places, and an
    /// out-of-line call here cost the 2-CPU benchmark about 1 % of its instructions.
    #[inline(always)]
    pub fn pick_next(&mut self) -> Option<(Key, ThreadId)> {
        let fair_turn = |rq: &Self| {
            rq.dl.first().is_none() && (rq.rt_throttled() || rq.rt.first().is_none())
                || rq.server.is_some_and(|s| s.runnable().is_some())
        };
        if fair_turn(self) {
            self.fair.pick_next();
        }
        if let Some(s) = self.server.as_mut() {
            if s.runnable().is_some() && self.fair.pick().is_none() && self.fair.is_idle() {
                s.stop();
            }
        }
        self.pick()
    }

    /// Runnable threads queued here, not the running one (`rq->nr_running` less `curr`; delayed
    /// fair sleepers do not count).
    pub fn nr_queued(&self) -> usize {
        let fair = self.fair.nr_runnable();
        // The running fair entity is counted by the fair queue itself.
        let fair_curr = usize::from(self.fair.has_curr());
        self.dl.iter().count() + self.rt.iter().count() + fair - fair_curr
    }

    /// Whether a sleeping thread is still queued here (a fair sleeper under DELAY_DEQUEUE): its
    /// wake-up finds it in place, on this CPU.
    #[inline]
    pub fn holds_delayed(&self, t: ThreadId) -> bool {
        self.fair.holds_delayed(t)
    }

    /// A sleeping thread that is still queued leaves for good (it changes class).
    pub fn drop_delayed(&mut self, t: ThreadId) {
        self.fair.drop_delayed(t);
    }

    /// The most urgent queued thread that `allowed` accepts (what a pull may take).
    #[inline]
    pub fn first_allowed(&self, allowed: impl Fn(ThreadId) -> bool) -> Option<(Key, ThreadId)> {
        if let Some(&(d, t)) = self.dl.iter().find(|&&(_, t)| allowed(t)) {
            return Some((Key::Deadline(d), t));
        }
        if !self.rt_throttled() {
            if let Some((p, t)) = self.rt.iter().find(|&(_, t)| allowed(t)) {
                return Some((Key::Rt(99 - p), t));
            }
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
    #[inline]
    pub fn put_prev(&mut self, t: ThreadId, se: &mut Entity, how: Off) {
        self.served = false;
        match (&mut *se, how) {
            (Entity::Fair(e), Off::Block) => self.fair.put_prev_blocking(t, e),
            (Entity::Fair(e), _) => self.fair.put_prev(e),
            _ => {}
        }
        if how == Off::Preempted {
            let head = matches!(se, Entity::Rt(_));
            let f = Enqueue {
                head,
                ..Enqueue::default()
            };
            // A thread put back was already counted: no server or timer starts.
            self.insert(t, se, f);
        }
    }

    /// `set_next_task()`: the queued thread `t` is switched in.
    #[inline]
    pub fn set_next(&mut self, t: ThreadId, se: &mut Entity) {
        match se {
            Entity::Dl(e) => {
                self.dl.dequeue(t, e.deadline);
            }
            Entity::Rt(e) => {
                self.rt.dequeue(t, e);
            }
            Entity::Fair(e) => {
                self.served = self.server_deadline().is_some();
                self.fair.set_next(t, e);
            }
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
    #[inline]
    pub fn update_curr(&mut self, se: &mut Entity, delta: u64, c: Charge) {
        match se {
            Entity::Dl(e) => self.dl.update_curr(e, delta, c.speed, c.scale_invariant),
            Entity::Rt(e) => {
                e.slice_used += delta;
                if let Some(b) = self.rt_bw.as_mut() {
                    b.charge(delta);
                }
            }
            Entity::Fair(e) => {
                self.fair.update_curr(e, delta, c.now);
                if let Some(s) = self.server.as_mut() {
                    s.charge(delta, c.now);
                }
            }
        }
    }

    /// Running time after which the class wants to look at the running thread again (runtime
    /// exhausted, slice over); `u64::MAX` for never.
    #[inline]
    pub fn expiry(&self, se: &Entity, c: Charge, rr_timeslice: u64, now: u64) -> u64 {
        match se {
            Entity::Dl(e) => self.dl.time_to_exhaust(e, c.speed, c.scale_invariant),
            Entity::Rt(e) => {
                let rr = if e.rr && self.rt.has_prio(e.prio) {
                    rr_timeslice.saturating_sub(e.slice_used)
                } else {
                    u64::MAX
                };
                rr.min(self.rt_bw.map_or(u64::MAX, |b| b.left()))
            }
            Entity::Fair(e) => {
                let own = self.fair.expiry(e, now);
                match self.server {
                    Some(s) if self.served => own.min(s.runtime.max(0) as u64),
                    _ => own,
                }
            }
        }
    }

    /// The running thread's class looks at it at a CPU-local expiry (`task_tick()`).
    #[inline]
    pub fn task_tick(&mut self, se: &mut Entity, rr_timeslice: u64, now: u64) -> Tick {
        match se {
            Entity::Dl(e) if e.runtime <= 0 => Tick::Throttle,
            Entity::Dl(_) => Tick::Stay,
            // Throttled: back on the queue, where the rt class is not picked for now.
            Entity::Rt(_) if self.rt_throttled() => Tick::Requeue,
            Entity::Rt(e) if e.rr && e.slice_used >= rr_timeslice => {
                e.slice_used = 0;
                Tick::Requeue
            }
            Entity::Rt(_) => Tick::Stay,
            // The fair server ran out under it: the classes it kept off run again.
            Entity::Fair(_) if self.served && self.server.is_some_and(|s| s.runnable().is_none()) => {
                self.served = false;
                Tick::Requeue
            }
            Entity::Fair(e) => self.fair.task_tick(e, now),
        }
    }

    /// After a timer made the fair server runnable while a fair thread runs: that thread now
    /// runs inside it (true when its key changed).
    pub fn rekey_curr(&mut self, se: &Entity) -> bool {
        if matches!(se, Entity::Fair(_))
            && !self.served
            && self.server.is_some_and(|s| s.runnable().is_some())
        {
            self.served = true;
            return true;
        }
        false
    }

    /// Whether `update_curr()` of the running `se` at an arbitrary instant (not a tick) ends in
    /// a switch: EEVDF reschedules a thread past its protection and then picks another.
    #[inline]
    pub fn resched_on_update(&self, se: &Entity) -> bool {
        match se {
            Entity::Fair(e) => self.fair.resched_on_update(e),
            _ => false,
        }
    }

    /// The next time a per-CPU timer of the classes fires: the fair server's (zero-laxity or
    /// replenishment) or RT throttling's period timer.
    #[inline]
    pub fn next_timer(&self) -> Option<u64> {
        let server = self.server.and_then(|s| s.timer());
        let rt = self.rt_bw.and_then(|b| b.timer);
        match (server, rt) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The per-CPU timers due at `now` fire, `curr` being the running thread's class; true when
    /// the CPU must pick again (the server became runnable, the rt class was unthrottled).
    pub fn fire_timers(&mut self, now: u64, curr: Option<ClassId>) -> bool {
        let mut resched = false;
        if let Some(s) = self.server.as_mut() {
            if s.timer().is_some_and(|at| at <= now) {
                resched |= s.fire(now);
            }
        }
        let busy = self.rt.first().is_some() || curr == Some(ClassId::Rt);
        if let Some(b) = self.rt_bw.as_mut() {
            if b.timer.is_some_and(|at| at <= now) {
                resched |= b.fire(now, busy);
            }
        }
        resched
    }

    /// `wakeup_preempt()` within a class that decides it itself (fair): should `woken`, just
    /// enqueued, take the CPU from `curr`?
    #[inline]
    pub fn wakeup_preempt(&self, curr: &mut Entity, t: ThreadId, woken: &Entity) -> bool {
        match (curr, woken) {
            (Entity::Fair(c), Entity::Fair(w)) => self.fair.wakeup_preempt(c, t, w),
            _ => false,
        }
    }

    /// A waking (or replenished, or migrated-in) entity joins this CPU's bandwidth sums
    /// (`add_running_bw()`, `task_contending()`); true when they changed.
    #[inline]
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
    #[inline]
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
    #[inline]
    pub fn attach_bw(&mut self, se: &Entity) {
        if let Entity::Dl(e) = se {
            self.dl.this_bw += e.dl_bw;
            if e.active {
                self.dl.running_bw += e.dl_bw;
            }
        }
    }

    /// The entity leaves this run queue's sums (`sub_rq_bw()`, `sub_running_bw()`).
    #[inline]
    pub fn detach_bw(&mut self, se: &Entity) {
        if let Entity::Dl(e) = se {
            self.dl.this_bw -= e.dl_bw;
            if e.active {
                self.dl.running_bw -= e.dl_bw;
            }
        }
    }

    /// A waking entity's class prepares it (the CBS wake-up rule).
    #[inline]
    pub fn task_waking(&mut self, se: &mut Entity, now: u64) {
        if let Entity::Dl(e) = se {
            e.on_wakeup(now);
        }
    }

    /// Whether an rt thread is runnable here or `curr` is one (schedutil runs rt at the top).
    #[inline]
    pub fn rt_runnable(&self, curr: Option<ClassId>) -> bool {
        self.rt.first().is_some() || curr == Some(ClassId::Rt)
    }

    /// Σ bandwidth of the active deadline entities of this CPU (`dl_rq.running_bw`).
    #[inline]
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
