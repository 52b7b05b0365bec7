//! The fair class (SCHED_OTHER, SCHED_IDLE) in three models, chosen per simulation:
//!
//! - **EEVDF** (`kernel/sched/fair.c` as of Linux 6.18, the default): every entity has a virtual
//!   runtime v (`v += δ · 1024 / w`), a lag against the load-weighted average V = Σ wᵢvᵢ / Σ wᵢ
//!   (`avg_vruntime()`), and a virtual deadline d = v + slice · 1024 / w (`update_deadline()`).
//!   The pick is the eligible entity (v ≤ V, `entity_eligible()`) with the earliest deadline
//!   (`pick_eevdf()`); with RUN_TO_PARITY the running entity keeps the CPU until its deadline
//!   (`protect_slice()`, limited to the smallest queued slice). A waking entity is placed at
//!   v = V − lag · (W + w) / W (PLACE_LAG), with lag = V − v saved at dequeue and clamped to
//!   ± (largest slice + tick) in virtual time (`update_entity_lag()`); a new one gets half a
//!   slice (PLACE_DEADLINE_INITIAL). A sleeper with negative lag stays queued until it would be
//!   picked and then leaves with lag 0 (DELAY_DEQUEUE, DELAY_ZERO). On wake-up the running
//!   entity is preempted when it is past its protection and no longer the pick, or when the
//!   woken entity becomes the pick (`check_preempt_wakeup_fair()`; PREEMPT_SHORT ignores the
//!   protection for a shorter slice). Custom slices (`sched_attr.sched_runtime`, 0.1–100 ms)
//!   replace the base slice 0.7 ms · (1 + log2(min(CPUs, 8))). Without HRTICK (the default) a
//!   used-up slice is only noticed at the next scheduler tick.
//! - **CFS** (Linux < 6.6; VT-CFS paper eq. 1–4): the smallest v runs; at each tick the running
//!   entity is preempted once it ran its slice `sched_slice()` = P · w / Σw, P = max(latency,
//!   n · min_granularity) (eq. 2–3), or after min_granularity when it is more than a slice ahead
//!   of the leftmost (`check_preempt_tick()`); a waking entity is placed at max(v, min_vruntime −
//!   latency / 2) (GENTLE_FAIR_SLEEPERS, the paper's eq. 4) and preempts when the running one is
//!   more than wakeup_granularity · 1024 / w ahead (`wakeup_preempt_entity()`); a new one starts
//!   a slice late (START_DEBIT).
//! - **VT-CFS** (Huh, Yoo, Hong, §V): CFS, but at every preemption tick (a multiple of the
//!   scheduler tick) the running entity is preempted when it no longer has the smallest v, and a
//!   waking entity is placed at min v + T · ω₀ / ω₋₂₀ (eq. 7), second from the left, so a woken
//!   task waits at most one preemption tick.
//!
//! Framework-assisted boosting (§IV, eq. 6) is an entity state any model honours: a marked
//! thread's weight is raised at wake-up to W' = min(C · Σ W / P, ω₋₂₀), rounded up to a nice
//! level, and restored when it blocks or its slice runs out.

use std::collections::{BTreeSet, HashMap};

use super::Tick;
use crate::record::ThreadId;

/// The kernel's `WEIGHT_IDLEPRIO` (SCHED_IDLE).
pub(crate) const WEIGHT_IDLEPRIO: u64 = 3;
/// Weight of nice 0 (ω₀).
const NICE_0_WEIGHT: u64 = 1024;
/// Weight of nice −20 (ω₋₂₀), the largest.
const NICE_MINUS_20_WEIGHT: u64 = 88_761;
/// Smallest and largest custom slice (`sched_attr.sched_runtime` of a fair task).
pub const SLICE_RANGE_NS: (u64, u64) = (100_000, 100_000_000);

/// `sched_prio_to_weight[]` for nice −20..19 (one table for both kernels, in pacer-model).
pub(crate) fn weight_of_nice(nice: i32) -> u64 {
    pacer_model::policy::nice_weight(nice)
}

/// The load weight a fair policy gives a thread (`set_load_weight()`); `None` outside the fair
/// class.
pub(crate) fn policy_weight(policy: &pacer_model::Policy) -> Option<u64> {
    match *policy {
        pacer_model::Policy::Other { nice } | pacer_model::Policy::Batch { nice } => {
            Some(weight_of_nice(nice))
        }
        pacer_model::Policy::Idle => Some(WEIGHT_IDLEPRIO),
        _ => None,
    }
}

/// `SCHED_TUNABLESCALING_LOG`: the factor 1 + log2(min(CPUs, 8)) the kernel scales its fair
/// tunables by at boot.
pub fn tunable_factor(cpus: usize) -> u64 {
    let n = cpus.clamp(1, 8) as u64;
    1 + (63 - n.leading_zeros() as u64)
}

/// Which fair class the simulated kernel has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FairModel {
    /// EEVDF, Linux ≥ 6.6.
    Eevdf {
        /// `sysctl_sched_base_slice` (ns).
        base_slice: u64,
        /// RUN_TO_PARITY.
        run_to_parity: bool,
        /// PREEMPT_SHORT.
        preempt_short: bool,
        /// PLACE_LAG.
        place_lag: bool,
        /// DELAY_DEQUEUE (with DELAY_ZERO): a sleeper with negative lag stays queued until it
        /// would be picked, then leaves with lag 0.
        delay_dequeue: bool,
    },
    /// CFS, Linux < 6.6.
    Cfs(CfsTunables),
    /// VT-CFS: CFS with a preemption tick (ns, a multiple of the scheduler tick) and eq. 7.
    VtCfs { cfs: CfsTunables, preemption_tick: u64 },
}

/// CFS's tunables (`sysctl_sched_latency`, `sysctl_sched_min_granularity`,
/// `sysctl_sched_wakeup_granularity`), ns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CfsTunables {
    pub latency: u64,
    pub min_granularity: u64,
    pub wakeup_granularity: u64,
}

impl CfsTunables {
    /// Linux's defaults (6 ms, 0.75 ms, 1 ms) scaled for `cpus` CPUs.
    pub fn linux(cpus: usize) -> Self {
        let f = tunable_factor(cpus);
        CfsTunables {
            latency: 6_000_000 * f,
            min_granularity: 750_000 * f,
            wakeup_granularity: 1_000_000 * f,
        }
    }
    /// The VT-CFS paper's Android setting, eq. 3: P = 5 ms below 5 tasks, else 1 ms per task
    /// (latency 5 ms, min_granularity 1 ms), wake-up granularity 1 ms.
    pub fn android() -> Self {
        CfsTunables {
            latency: 5_000_000,
            min_granularity: 1_000_000,
            wakeup_granularity: 1_000_000,
        }
    }
}

impl FairModel {
    /// EEVDF with Linux 6.18's default features and base slice (0.7 ms, scaled) for `cpus`
    /// CPUs.
    pub fn eevdf(cpus: usize) -> Self {
        FairModel::Eevdf {
            base_slice: 700_000 * tunable_factor(cpus),
            run_to_parity: true,
            preempt_short: true,
            place_lag: true,
            delay_dequeue: true,
        }
    }
    pub fn name(&self) -> &'static str {
        match self {
            FairModel::Eevdf { .. } => "eevdf",
            FairModel::Cfs(_) => "cfs",
            FairModel::VtCfs { .. } => "vt-cfs",
        }
    }
}

/// The fair class's settings for one simulation.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct FairParams {
    pub model: FairModel,
    /// Scheduler tick (ns): without HRTICK the fair class notices a used-up slice only at ticks.
    pub tick: u64,
    /// Time of the first tick, in [0, tick): where the jiffies fall relative to the workload's
    /// start.
    pub tick_phase: u64,
}

impl FairParams {
    /// The first tick at or after `t`.
    pub(crate) fn tick_at_or_after(&self, t: u64) -> u64 {
        let tick = self.tick.max(1);
        if t <= self.tick_phase {
            return self.tick_phase;
        }
        self.tick_phase + (t - self.tick_phase).div_ceil(tick).saturating_mul(tick)
    }
    pub(crate) fn is_tick(&self, t: u64) -> bool {
        t >= self.tick_phase && (t - self.tick_phase).is_multiple_of(self.tick.max(1))
    }
}

impl FairParams {
    fn base_slice(&self) -> u64 {
        match self.model {
            FairModel::Eevdf { base_slice, .. } => base_slice,
            FairModel::Cfs(c) | FairModel::VtCfs { cfs: c, .. } => c.min_granularity,
        }
    }
}

/// How an entity enters the queue next time (set when it leaves it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    /// Never ran: placed as a new task.
    Initial,
    /// Blocked, or moved between CPUs or classes: placed by its lag.
    Lag,
    /// Put back by its CPU (preempted, slice over): keeps v and deadline.
    Keep,
}

/// `struct sched_entity`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FairEntity {
    /// The weight in use (boosted or not).
    pub weight: u64,
    /// The weight of its nice value.
    pub base_weight: u64,
    pub vruntime: u64,
    /// Virtual deadline (EEVDF).
    pub deadline: u64,
    /// V − v when it left the queue, clamped.
    pub vlag: i64,
    /// Request size (ns): the base slice or a custom one.
    pub slice: u64,
    pub custom_slice: bool,
    /// RUN_TO_PARITY: the virtual time up to which it keeps the CPU (`vprot`).
    pub vprot: u64,
    /// Execution since it was last picked (CFS's `sum_exec_runtime − prev_sum_exec_runtime`).
    pub ran: u64,
    /// Deadline − vruntime kept across a migration (`rel_deadline`).
    rel_deadline: Option<u64>,
    place: Place,
    /// Framework-assisted boosting: C (ns) when the thread is marked interactive.
    pub boost: Option<u64>,
    /// SCHED_IDLE.
    pub idle_policy: bool,
    /// SCHED_BATCH.
    pub batch_policy: bool,
}

impl FairEntity {
    pub fn new(weight: u64, p: &FairParams) -> Self {
        FairEntity {
            weight,
            base_weight: weight,
            vruntime: 0,
            deadline: 0,
            vlag: 0,
            slice: p.base_slice(),
            custom_slice: false,
            vprot: 0,
            ran: 0,
            rel_deadline: None,
            place: Place::Initial,
            boost: None,
            idle_policy: weight == WEIGHT_IDLEPRIO,
            batch_policy: false,
        }
    }

    /// A custom slice (`sched_attr.sched_runtime`), clamped as the kernel does; `None` restores
    /// the base slice.
    pub fn set_slice(&mut self, slice: Option<u64>, p: &FairParams) {
        match slice {
            Some(s) => {
                self.slice = s.clamp(SLICE_RANGE_NS.0, SLICE_RANGE_NS.1);
                self.custom_slice = true;
            }
            None => {
                self.slice = p.base_slice();
                self.custom_slice = false;
            }
        }
    }

    /// The order CPU selection and pulls use: the virtual deadline under EEVDF (what the
    /// kernel's tree is sorted by), v under CFS.
    pub fn key(&self) -> u64 {
        self.deadline
    }

    /// A nice change keeps v, lag and the relative deadline (`reweight_entity()`).
    pub fn reweighted_from(&mut self, old: &FairEntity) {
        self.vruntime = old.vruntime;
        self.deadline = old.deadline;
        self.vlag = old.vlag;
        self.place = match old.place {
            Place::Initial => Place::Initial,
            _ => Place::Lag,
        };
        self.boost = old.boost;
        if old.custom_slice {
            self.slice = old.slice;
            self.custom_slice = true;
        }
    }

    /// `calc_delta_fair()`: `delta` ns of execution in this entity's virtual time.
    fn vdelta(&self, delta: u64) -> u64 {
        if self.weight == NICE_0_WEIGHT {
            delta
        } else {
            ((delta as u128 * NICE_0_WEIGHT as u128) / self.weight as u128) as u64
        }
    }

    /// Wall time this entity takes to advance `dv` in virtual time (rounded up).
    fn walltime(&self, dv: u64) -> u64 {
        ((dv as u128 * self.weight as u128).div_ceil(NICE_0_WEIGHT as u128)).min(u64::MAX as u128) as u64
    }
}

/// A queued entity's place in the run queue (the kernel's tree): its order key first.
type Node = (u64, ThreadId);

/// What the run queue keeps of a queued entity.
#[derive(Debug, Clone, Copy)]
struct Queued {
    vruntime: u64,
    weight: u64,
    key: u64,
    deadline: u64,
    slice: u64,
    /// Asleep but still queued (DELAY_DEQUEUE).
    delayed: bool,
}

#[derive(Debug)]
pub(crate) struct FairRq {
    p: FairParams,
    /// Queued entities (not the running one) by key: deadline (EEVDF) or vruntime (CFS).
    queue: BTreeSet<Node>,
    /// Each queued entity, by thread.
    nodes: HashMap<ThreadId, Queued>,
    /// Σ wᵢ·vᵢ and Σ wᵢ over queued entities (`sum_w_vruntime`, `sum_weight`).
    sum_wv: i128,
    sum_w: u64,
    /// The running entity: (vruntime, weight, slice), counted in V while it runs.
    curr: Option<(u64, u64, u64)>,
    /// Delayed sleepers that left the queue since they last ran, with the lag they left with.
    settled: HashMap<ThreadId, i64>,
    /// V when the queue was last non-empty (`zero_vruntime`), or CFS's `min_vruntime`.
    pub min_vruntime: u64,
}

impl FairRq {
    pub fn new(p: FairParams) -> Self {
        FairRq {
            p,
            queue: BTreeSet::new(),
            nodes: HashMap::new(),
            sum_wv: 0,
            sum_w: 0,
            curr: None,
            settled: HashMap::new(),
            min_vruntime: 0,
        }
    }

    fn eevdf(&self) -> bool {
        matches!(self.p.model, FairModel::Eevdf { .. })
    }

    fn cfs(&self) -> Option<CfsTunables> {
        match self.p.model {
            FairModel::Cfs(c) | FairModel::VtCfs { cfs: c, .. } => Some(c),
            FairModel::Eevdf { .. } => None,
        }
    }

    /// A fair entity is running here.
    pub fn has_curr(&self) -> bool {
        self.curr.is_some()
    }

    /// No fair task is queued or running here (`rq->cfs.h_nr_queued == 0`).
    pub fn is_idle(&self) -> bool {
        self.nr_queued() == 0
    }

    /// Runnable entities on this queue, the running one included and delayed sleepers not
    /// (`cfs_rq->h_nr_runnable`).
    pub fn nr_runnable(&self) -> usize {
        self.nodes.values().filter(|q| !q.delayed).count() + usize::from(self.curr.is_some())
    }

    /// Entities on this queue, the running and delayed ones included (`cfs_rq->nr_queued`).
    fn nr_queued(&self) -> usize {
        self.queue.len() + usize::from(self.curr.is_some())
    }

    /// Σ wᵢ·vᵢ and Σ wᵢ with the running entity.
    fn sums(&self) -> (i128, u64) {
        match self.curr {
            Some((v, w, _)) => (self.sum_wv + v as i128 * w as i128, self.sum_w + w),
            None => (self.sum_wv, self.sum_w),
        }
    }

    /// `avg_vruntime()`: V, rounded down.
    fn avg_vruntime(&self) -> u64 {
        let (wv, w) = self.sums();
        if w == 0 {
            return self.min_vruntime;
        }
        wv.div_euclid(w as i128).clamp(0, u64::MAX as i128) as u64
    }

    /// `vruntime_eligible()`: v ≤ V, exactly (Σ wᵢvᵢ ≥ v · Σ wᵢ); ties are eligible.
    fn eligible(&self, v: u64) -> bool {
        let (wv, w) = self.sums();
        w == 0 || wv >= v as i128 * w as i128
    }

    /// The earliest-deadline eligible queued entity, delayed ones included (`pick_eevdf()`'s
    /// tree part).
    fn pick_queued_eevdf(&self) -> Option<Node> {
        self.queue
            .iter()
            .find(|(_, t)| self.eligible(self.nodes[t].vruntime))
            .or_else(|| self.queue.first())
            .copied()
    }

    /// The queued thread the class would run next, delayed sleepers passed over (they leave the
    /// queue when [`FairRq::pick_next`] meets them).
    pub fn pick(&self) -> Option<(u64, ThreadId)> {
        if self.eevdf() {
            match self.pick_queued_eevdf() {
                Some((_, t)) if self.nodes[&t].delayed => self
                    .queue
                    .iter()
                    .filter(|(_, t)| !self.nodes[t].delayed)
                    .find(|(_, t)| self.eligible(self.nodes[t].vruntime))
                    .or_else(|| self.queue.iter().find(|(_, t)| !self.nodes[t].delayed))
                    .copied(),
                p => p,
            }
        } else {
            self.queue.first().copied()
        }
    }

    /// `pick_next_entity()` when the CPU picks: delayed sleepers the pick meets leave the queue
    /// (`DEQUEUE_DELAYED`, with DELAY_ZERO's lag ≤ 0) until a runnable one comes up.
    pub fn pick_next(&mut self) -> Option<(u64, ThreadId)> {
        loop {
            let p = if self.eevdf() {
                self.pick_queued_eevdf()
            } else {
                self.queue.first().copied()
            };
            match p {
                Some((_, t)) if self.nodes[&t].delayed => {
                    let q = self.nodes[&t];
                    self.remove(t);
                    let lag = self.lag_of(q.vruntime, q.weight, q.slice).min(0);
                    self.settled.insert(t, lag);
                }
                p => return p,
            }
        }
    }

    pub fn first_allowed(&self, allowed: impl Fn(ThreadId) -> bool) -> Option<(u64, ThreadId)> {
        self.queue
            .iter()
            .find(|&&(_, t)| !self.nodes[&t].delayed && allowed(t))
            .copied()
    }

    /// Calls `f` with each runnable queued thread (not the running one, not delayed sleepers).
    pub fn each_queued(&self, mut f: impl FnMut(ThreadId)) {
        for &(_, t) in &self.queue {
            if !self.nodes[&t].delayed {
                f(t);
            }
        }
    }

    /// Whether `t` is asleep but still queued here (a wake-up finds it in place).
    pub fn holds_delayed(&self, t: ThreadId) -> bool {
        self.nodes.get(&t).is_some_and(|q| q.delayed)
    }

    /// Whether `t` is on this queue, waiting or asleep (delayed), not running.
    pub fn holds(&self, t: ThreadId) -> bool {
        self.nodes.contains_key(&t)
    }

    /// A delayed sleeper leaves for good (its thread changes class).
    pub fn drop_delayed(&mut self, t: ThreadId) {
        if self.holds_delayed(t) {
            self.remove(t);
        }
    }

    fn insert(&mut self, t: ThreadId, e: &FairEntity, delayed: bool) {
        let key = if self.eevdf() { e.deadline } else { e.vruntime };
        self.queue.insert((key, t));
        self.nodes.insert(
            t,
            Queued {
                vruntime: e.vruntime,
                weight: e.weight,
                key,
                deadline: e.deadline,
                slice: e.slice,
                delayed,
            },
        );
        self.sum_wv += e.vruntime as i128 * e.weight as i128;
        self.sum_w += e.weight;
    }

    fn remove(&mut self, t: ThreadId) {
        if let Some(q) = self.nodes.remove(&t) {
            self.queue.remove(&(q.key, t));
            self.sum_wv -= q.vruntime as i128 * q.weight as i128;
            self.sum_w -= q.weight;
        }
    }

    /// The largest slice of the running and queued entities (`cfs_rq_max_slice()`).
    fn max_slice(&self) -> u64 {
        let queued = self.nodes.values().map(|q| q.slice).max().unwrap_or(0);
        queued.max(self.curr.map_or(0, |c| c.2))
    }

    /// `update_entity_lag()` of an entity with (v, w, slice): V − v, clamped to
    /// ± calc_delta_fair(max slice + tick).
    fn lag_of(&self, v: u64, w: u64, slice: u64) -> i64 {
        let avg = self.avg_vruntime();
        let span = self.max_slice().max(slice) + self.p.tick;
        let limit = ((span as u128 * NICE_0_WEIGHT as u128) / w.max(1) as u128).min(i64::MAX as u128) as i128;
        (avg as i128 - v as i128).clamp(-limit, limit) as i64
    }

    /// `enqueue_entity()`: places the entity as its last exit asks, then queues it. A waking
    /// entity is also boosted when marked.
    pub fn enqueue(&mut self, t: ThreadId, e: &mut FairEntity, f: super::Enqueue) {
        if let Some(q) = self.nodes.get(&t).copied() {
            // `requeue_delayed_entity()`: still queued from its last sleep.
            self.remove(t);
            e.vruntime = q.vruntime;
            e.deadline = q.deadline;
            let lag = self.lag_of(q.vruntime, e.weight, e.slice);
            if lag > 0 {
                // DELAY_ZERO: it caught up while asleep, so it comes back at V.
                e.vlag = 0;
                e.rel_deadline = None;
                self.place_entity(e, false, f);
            }
            e.place = Place::Keep;
            self.insert(t, e, false);
            return;
        }
        if let Some(lag) = self.settled.remove(&t) {
            // It left the queue while asleep: placed by the lag it left with.
            e.vlag = lag;
            e.rel_deadline = None;
            e.place = Place::Lag;
        }
        if f.wakeup {
            self.apply_boost(e);
        }
        match e.place {
            Place::Keep => {}
            Place::Initial => self.place_entity(e, true, f),
            Place::Lag => self.place_entity(e, false, f),
        }
        e.place = Place::Keep;
        self.insert(t, e, false);
    }

    /// `place_entity()` of each model. Under CFS an entity coming from another CPU first has its
    /// v moved from the old queue's min_vruntime to this one's (`vlag` holds v − min_vruntime).
    fn place_entity(&mut self, e: &mut FairEntity, initial: bool, f: super::Enqueue) {
        match self.p.model {
            FairModel::Eevdf { place_lag, .. } => {
                if !e.custom_slice {
                    e.slice = self.p.base_slice();
                }
                let avg = self.avg_vruntime();
                let (_, load) = self.sums();
                let mut lag: i128 = 0;
                if place_lag && self.nr_queued() > 0 && e.vlag != 0 {
                    // Inflated so that it is still `vlag` once the entity's own weight joins V.
                    lag = e.vlag as i128 * (load + e.weight) as i128 / load.max(1) as i128;
                }
                e.vruntime = (avg as i128 - lag).max(0) as u64;
                if let Some(rel) = e.rel_deadline.take() {
                    e.deadline = e.vruntime + rel;
                    return;
                }
                let mut vslice = e.vdelta(e.slice);
                if initial {
                    vslice /= 2;
                }
                e.deadline = e.vruntime + vslice;
                return;
            }
            FairModel::Cfs(_) | FairModel::VtCfs { .. } if !initial && f.migrated => {
                let min = self.cfs_min_vruntime();
                e.vruntime = (min as i128 + e.vlag as i128).max(0) as u64;
                if f.wakeup {
                    self.cfs_wakeup_placement(e);
                }
            }
            FairModel::Cfs(c) if initial => {
                // START_DEBIT: a new task starts one virtual slice late.
                let v = self.cfs_min_vruntime() + self.cfs_vslice(e, c);
                e.vruntime = e.vruntime.max(v);
            }
            FairModel::Cfs(_) | FairModel::VtCfs { .. } => {
                if f.wakeup || initial {
                    self.cfs_wakeup_placement(e);
                }
            }
        }
        e.deadline = e.vruntime;
    }

    /// Where CFS (eq. 4, with GENTLE_FAIR_SLEEPERS' half-latency credit) and VT-CFS (eq. 7) put
    /// a waking entity.
    fn cfs_wakeup_placement(&mut self, e: &mut FairEntity) {
        match self.p.model {
            FairModel::Cfs(c) => {
                let min = self.cfs_min_vruntime();
                e.vruntime = e.vruntime.max(min.saturating_sub(c.latency / 2));
            }
            FairModel::VtCfs { .. } => {
                // Eq. 7: second from the left, whatever the entity's own v.
                let lowest = match (self.curr.map(|c| c.0), self.queue.first().map(|n| n.0)) {
                    (Some(a), Some(b)) => a.min(b),
                    (a, b) => a.or(b).unwrap_or(self.min_vruntime),
                };
                e.vruntime = lowest + self.p.tick * NICE_0_WEIGHT / NICE_MINUS_20_WEIGHT;
            }
            FairModel::Eevdf { .. } => {}
        }
    }

    /// CFS's min_vruntime brought up to date: the smallest of the running and queued v, never
    /// decreasing.
    fn cfs_min_vruntime(&mut self) -> u64 {
        let lowest = match (self.curr.map(|c| c.0), self.queue.first().map(|n| n.0)) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        if let Some(l) = lowest {
            self.min_vruntime = self.min_vruntime.max(l);
        }
        self.min_vruntime
    }

    /// `sched_slice()`: P · w / Σw with P = latency up to latency / min_granularity tasks, else
    /// n · min_granularity (eq. 2–3), at least min_granularity (BASE_SLICE), for an entity that
    /// is queued or running here (`on_rq`), or about to be.
    fn cfs_slice(&self, e: &FairEntity, c: CfsTunables, on_rq: bool) -> u64 {
        let (_, mut load) = self.sums();
        let mut n = self.nr_queued() as u64;
        if !on_rq {
            load += e.weight;
            n += 1;
        }
        let slice = ((cfs_period(c, n) as u128 * e.weight as u128) / load.max(1) as u128) as u64;
        slice.max(c.min_granularity)
    }

    /// `sched_vslice()`.
    fn cfs_vslice(&self, e: &FairEntity, c: CfsTunables) -> u64 {
        e.vdelta(self.cfs_slice(e, c, false))
    }

    /// Eq. 6: the weight a boosted entity gets at wake-up, W' = C · Σ W / P rounded up to a
    /// nice level, at most ω₋₂₀ (its lag is rescaled as `reweight_entity()` does).
    fn apply_boost(&mut self, e: &mut FairEntity) {
        let Some(c_ns) = e.boost else { return };
        let (_, others) = self.sums();
        let load = others + e.base_weight;
        let n = self.nr_queued() as u64 + 1;
        let period = match self.cfs() {
            Some(c) => cfs_period(c, n),
            // EEVDF has no period; n base slices is the time in which each runs once.
            None => self.p.base_slice() * n,
        };
        let wanted =
            ((c_ns as u128 * load as u128) / period.max(1) as u128).min(NICE_MINUS_20_WEIGHT as u128) as u64;
        let w = (-20..=19)
            .rev()
            .map(weight_of_nice)
            .find(|&w| w >= wanted)
            .unwrap_or(NICE_MINUS_20_WEIGHT)
            .max(e.base_weight);
        self.reweight(e, w);
    }

    /// A boost ends (the entity blocks, or its boosted slice ran out): back to its nice weight.
    fn end_boost(&mut self, e: &mut FairEntity) {
        if e.weight != e.base_weight {
            let w = e.base_weight;
            self.reweight(e, w);
        }
    }

    /// `reweight_entity()` of an entity that is not queued (asleep, or the running one being
    /// accounted separately): lag and relative deadline scale by old / new weight.
    fn reweight(&mut self, e: &mut FairEntity, w: u64) {
        let old = e.weight;
        e.vlag = (e.vlag as i128 * old as i128 / w as i128) as i64;
        let rel = e.deadline.saturating_sub(e.vruntime) as u128 * old as u128 / w as u128;
        e.deadline = e.vruntime + rel as u64;
        e.weight = w;
    }

    /// `reweight_entity()` of `t`, queued here (waiting, or asleep under DELAY_DEQUEUE), to
    /// weight `w`: under EEVDF its lag and relative deadline scale by old / new weight and it is
    /// placed again by that lag, which leaves V where it was; CFS keeps its v.
    pub fn reweight_queued(&mut self, t: ThreadId, e: &mut FairEntity, w: u64) {
        let Some(q) = self.nodes.get(&t).copied() else {
            return;
        };
        let old = e.weight;
        e.vruntime = q.vruntime;
        e.deadline = q.deadline;
        let vlag = self.lag_of(q.vruntime, old, q.slice);
        self.remove(t);
        e.weight = w;
        e.base_weight = w;
        if self.eevdf() {
            let rel = q.deadline.saturating_sub(q.vruntime) as u128 * old as u128 / w as u128;
            e.vlag = (vlag as i128 * old as i128 / w as i128) as i64;
            e.rel_deadline = Some(rel.min(u64::MAX as u128) as u64);
            self.place_entity(e, false, super::Enqueue::default());
        }
        e.place = Place::Keep;
        self.insert(t, e, q.delayed);
    }

    /// `reweight_entity()` of the running entity: as [`FairRq::reweight_queued`], and a
    /// protected slice keeps its length in wall time (`rel_vprot`).
    pub fn reweight_curr(&mut self, e: &mut FairEntity, w: u64) {
        let old = e.weight;
        if self.eevdf() {
            let vlag = self.lag_of(e.vruntime, old, e.slice);
            let rel = e.deadline.saturating_sub(e.vruntime) as u128 * old as u128 / w as u128;
            let vprot = self
                .protected(e)
                .then(|| (e.vprot - e.vruntime) as u128 * old as u128 / w as u128);
            self.curr = None;
            e.weight = w;
            e.base_weight = w;
            e.vlag = (vlag as i128 * old as i128 / w as i128) as i64;
            e.rel_deadline = Some(rel.min(u64::MAX as u128) as u64);
            self.place_entity(e, false, super::Enqueue::default());
            if let Some(p) = vprot {
                e.vprot = e.vruntime + p.min(u64::MAX as u128) as u64;
            }
        } else {
            e.weight = w;
            e.base_weight = w;
        }
        self.curr = Some((e.vruntime, e.weight, e.slice));
    }

    /// `reweight_entity()` of an entity on no queue (asleep, or not started): the lag it will be
    /// placed by, and a relative deadline it keeps, scale by old / new weight.
    pub fn reweight_sleeping(e: &mut FairEntity, w: u64) {
        let old = e.weight;
        e.vlag = (e.vlag as i128 * old as i128 / w as i128) as i64;
        if let Some(r) = e.rel_deadline.as_mut() {
            *r = (*r as u128 * old as u128 / w as u128).min(u64::MAX as u128) as u64;
        }
        e.weight = w;
        e.base_weight = w;
    }

    /// `dequeue_entity()` of a queued entity that moves to another CPU or class: it keeps its
    /// lag and its relative deadline.
    pub fn dequeue(&mut self, t: ThreadId, e: &mut FairEntity) {
        self.remove(t);
        self.save_lag(e);
        if self.eevdf() {
            e.rel_deadline = Some(e.deadline.saturating_sub(e.vruntime));
        }
        e.place = Place::Lag;
    }

    /// `update_entity_lag()`: lag = V − v, clamped; under CFS, v − min_vruntime (what
    /// `migrate_task_rq_fair()` keeps of v when the entity moves).
    fn save_lag(&mut self, e: &mut FairEntity) {
        if !self.eevdf() {
            let min = self.cfs_min_vruntime();
            e.vlag = (e.vruntime as i128 - min as i128).clamp(i64::MIN as i128, i64::MAX as i128) as i64;
            return;
        }
        e.vlag = self.lag_of(e.vruntime, e.weight, e.slice);
    }

    /// The running entity `t` blocks, exits or changes class (`dequeue_entity(DEQUEUE_SLEEP)`
    /// of `curr`): a boost ends; under DELAY_DEQUEUE an ineligible sleeper stays queued,
    /// otherwise its lag is saved for its next placement.
    pub fn put_prev_blocking(&mut self, t: ThreadId, e: &mut FairEntity) {
        self.end_boost(e);
        let delay = matches!(
            self.p.model,
            FairModel::Eevdf {
                delay_dequeue: true,
                ..
            }
        );
        if delay && !self.eligible(e.vruntime) && self.nr_queued() > 1 {
            self.curr = None;
            e.place = Place::Keep;
            self.insert(t, e, true);
            return;
        }
        self.save_lag(e);
        self.curr = None;
        if self.eevdf() {
            self.min_vruntime = self.avg_vruntime();
        }
        e.place = Place::Lag;
        e.rel_deadline = None;
    }

    /// `put_prev_entity()`: the running entity goes back on the queue as it is.
    pub fn put_prev(&mut self, e: &mut FairEntity) {
        self.curr = None;
        e.place = Place::Keep;
    }

    /// `set_next_entity()`: `t` leaves the queue to run.
    pub fn set_next(&mut self, t: ThreadId, e: &mut FairEntity) {
        self.remove(t);
        self.settled.remove(&t);
        self.curr = Some((e.vruntime, e.weight, e.slice));
        e.ran = 0;
        self.set_protect_slice(e);
    }

    /// `set_protect_slice()`: RUN_TO_PARITY lets the picked entity run up to its deadline, or
    /// for the smallest queued slice if that is shorter; without it, for the normalised base
    /// slice.
    fn set_protect_slice(&self, e: &mut FairEntity) {
        let FairModel::Eevdf { run_to_parity, .. } = self.p.model else {
            return;
        };
        let min_slice = if run_to_parity {
            self.min_slice(e.slice)
        } else {
            NORMALIZED_BASE_SLICE
        };
        let slice = min_slice.min(e.slice);
        e.vprot = if slice != e.slice {
            e.deadline.min(e.vruntime + e.vdelta(slice))
        } else {
            e.deadline
        };
    }

    /// `cfs_rq_min_slice()`: the smallest request among the queued and `own`.
    fn min_slice(&self, own: u64) -> u64 {
        self.nodes.values().map(|q| q.slice).fold(own, u64::min)
    }

    /// `update_curr()` at `now` for the `delta` ns run since the last call: v advances, a
    /// passed deadline is renewed (`update_deadline()`).
    pub fn update_curr(&mut self, e: &mut FairEntity, delta: u64, now: u64) {
        e.ran += delta;
        let v0 = e.vruntime;
        e.vruntime += e.vdelta(delta);
        if self.eevdf() {
            self.renew_at_ticks(e, v0, now.saturating_sub(delta), now);
            self.update_deadline(e);
        } else {
            self.cfs_min_vruntime();
        }
        self.curr = Some((e.vruntime, e.weight, e.slice));
    }

    /// The kernel also accounts the running entity at every scheduler tick (`task_tick_fair()` →
    /// `update_curr()`), which the engine does not visit while it runs alone: its deadline was
    /// renewed at the first tick after v reached it, to that tick's v plus a slice, then again
    /// every ⌈slice / tick⌉ ticks. A thread waking within a slice after the last of those ticks
    /// therefore finds the running one's deadline earlier than its own and waits, as on Linux.
    /// `v0` was its v at `t0`, the last time it was accounted before `now`.
    fn renew_at_ticks(&self, e: &mut FairEntity, v0: u64, t0: u64, now: u64) {
        if e.vruntime < e.deadline {
            return;
        }
        let tick = self.p.tick.max(1);
        let reached = t0.saturating_add(e.walltime(e.deadline.saturating_sub(v0)));
        let first = self.p.tick_at_or_after(reached.max(t0 + 1));
        if first > now {
            return;
        }
        if !e.custom_slice {
            e.slice = self.p.base_slice();
        }
        let vslice = e.vdelta(e.slice);
        let every = e.walltime(vslice).div_ceil(tick).max(1) * tick;
        let last = first + (now - first) / every * every;
        e.deadline = v0 + e.vdelta(last - t0) + vslice;
    }

    /// `update_deadline()`: a new request from the current v once the deadline has passed.
    fn update_deadline(&self, e: &mut FairEntity) {
        if e.vruntime < e.deadline {
            return;
        }
        if !e.custom_slice {
            e.slice = self.p.base_slice();
        }
        e.deadline = e.vruntime + e.vdelta(e.slice);
    }

    fn protected(&self, e: &FairEntity) -> bool {
        e.vruntime < e.vprot
    }

    /// Running time until the next scheduler tick at which the class may preempt `e`:
    /// `u64::MAX` while nothing else is queued. Under EEVDF that is the first tick after its
    /// protection ends (then every tick while it keeps being the pick).
    pub fn expiry(&self, e: &FairEntity, now: u64) -> u64 {
        if self.queue.is_empty() {
            return u64::MAX;
        }
        let from = match self.p.model {
            FairModel::Eevdf { .. } if self.protected(e) => {
                now.saturating_add(e.walltime(e.vprot - e.vruntime))
            }
            _ => now + 1,
        };
        self.p.tick_at_or_after(from.max(now + 1)) - now
    }

    /// A scheduler tick on the CPU running `e` (`task_tick_fair()`): `Requeue` when another
    /// entity should run.
    pub fn task_tick(&mut self, e: &mut FairEntity, now: u64) -> Tick {
        if self.queue.is_empty() || !self.p.is_tick(now) {
            return Tick::Stay;
        }
        let preempt = match self.p.model {
            // update_curr() reschedules once the protection is over; the pick decides.
            FairModel::Eevdf { .. } => !self.protected(e) && self.pick_beats_curr(e),
            FairModel::Cfs(c) => self.check_preempt_tick(e, c),
            FairModel::VtCfs { preemption_tick, .. } => {
                // Fig. 5: at each scheduler tick, once it ran a preemption tick, yield to a
                // smaller v.
                e.ran >= preemption_tick && self.queue.first().is_some_and(|&(v, _)| v < e.vruntime)
            }
        };
        if !preempt {
            return Tick::Stay;
        }
        if e.boost.is_some() {
            // The boosted slice ran out: demoted (§IV).
            self.end_boost(e);
            self.curr = Some((e.vruntime, e.weight, e.slice));
        }
        Tick::Requeue
    }

    /// `update_curr()`'s resched outside a tick: EEVDF with others queued reschedules an entity
    /// past its protection, and the pick then takes another if one beats it.
    pub fn resched_on_update(&self, e: &FairEntity) -> bool {
        self.eevdf() && !self.queue.is_empty() && !self.protected(e) && self.pick_beats_curr(e)
    }

    /// `check_preempt_tick()`.
    fn check_preempt_tick(&self, e: &FairEntity, c: CfsTunables) -> bool {
        let ideal = self.cfs_slice(e, c, true);
        if e.ran > ideal {
            return true;
        }
        if e.ran < c.min_granularity {
            return false;
        }
        let Some(&(left, _)) = self.queue.first() else {
            return false;
        };
        e.vruntime > left && e.vruntime - left > ideal
    }

    /// `__pick_eevdf()` with the running entity `e`, slice protection aside: whether a queued
    /// entity (delayed sleepers included) beats it.
    fn pick_beats_curr(&self, e: &FairEntity) -> bool {
        let Some((d, t)) = self.pick_queued_eevdf() else {
            return false;
        };
        if !self.eligible(e.vruntime) {
            return true;
        }
        // `entity_before(curr, best)`: the running entity stays only with a strictly earlier
        // deadline.
        self.eligible(self.nodes[&t].vruntime) && d <= e.deadline
    }

    /// `check_preempt_wakeup_fair()`: should `woken` (entity `w`), just queued, preempt the
    /// running `c`?
    pub fn wakeup_preempt(&self, c: &mut FairEntity, woken: ThreadId, w: &FairEntity) -> bool {
        if c.idle_policy && !w.idle_policy {
            return true;
        }
        // "Batch and idle tasks do not preempt non-idle tasks (their preemption is driven by
        // the tick)."
        if w.idle_policy || w.batch_policy || c.idle_policy != w.idle_policy {
            return false;
        }
        match self.p.model {
            FairModel::Eevdf {
                preempt_short,
                run_to_parity,
                ..
            } => {
                // update_curr() already reschedules a running entity past its protection.
                if !self.protected(c) {
                    return self.pick_beats_curr(c);
                }
                let short = preempt_short && w.slice < c.slice;
                let wins =
                    self.pick_beats_curr(c) && self.pick_queued_eevdf().is_some_and(|(_, t)| t == woken);
                if short && wins {
                    c.vprot = c.vruntime;
                    return true;
                }
                if short && run_to_parity {
                    // `update_protect_slice()`: protected for the shortest slice at most.
                    c.vprot = c.vprot.min(c.vruntime + c.vdelta(self.min_slice(c.slice)));
                }
                false
            }
            FairModel::Cfs(t) | FairModel::VtCfs { cfs: t, .. } => {
                // wakeup_preempt_entity(): more than the wake-up granularity (in the woken
                // entity's virtual time) ahead.
                c.vruntime > w.vruntime && c.vruntime - w.vruntime > w.vdelta(t.wakeup_granularity)
            }
        }
    }

    /// `yield_task_fair()`: under EEVDF an eligible caller gives up the rest of its request.
    pub fn yield_task(&mut self, e: &mut FairEntity) {
        if self.eevdf() && self.eligible(e.vruntime) {
            e.vruntime = e.deadline;
            self.curr = Some((e.vruntime, e.weight, e.slice));
            self.update_deadline(e);
        }
    }
}

/// `normalized_sysctl_sched_base_slice` (6.18): the protection without RUN_TO_PARITY.
const NORMALIZED_BASE_SLICE: u64 = 700_000;

/// `__sched_period()`: latency up to latency / min_granularity tasks, then n · min_granularity.
fn cfs_period(c: CfsTunables, n: u64) -> u64 {
    let nr_latency = c.latency.div_ceil(c.min_granularity.max(1)).max(1);
    if n > nr_latency {
        n * c.min_granularity
    } else {
        c.latency
    }
}
