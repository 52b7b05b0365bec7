//! The fair class, simplified: weighted virtual runtime (`vruntime += δ · 1024 / weight`, the
//! kernel's nice-to-weight table), the smallest vruntime runs, a fixed slice between picks, and
//! waking tasks placed at max(own vruntime, min_vruntime − slice).

use std::collections::BTreeSet;

use crate::record::ThreadId;

/// Slice between fair picks: EEVDF's base slice 0.75 ms · (1 + log2(min(ncpus, 8))) on 8 CPUs.
pub(crate) const FAIR_SLICE_NS: u64 = 3_000_000;

/// The kernel's `WEIGHT_IDLEPRIO` (SCHED_IDLE).
pub(crate) const WEIGHT_IDLEPRIO: u64 = 3;

/// `sched_prio_to_weight[]` for nice −20..19 (one table for both kernels, in pacer-model).
pub(crate) fn weight_of_nice(nice: i32) -> u64 {
    pacer_model::policy::nice_weight(nice)
}

/// The fair class's settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct FairParams {}

/// `struct sched_entity`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FairEntity {
    pub weight: u64,
    pub vruntime: u64,
    /// Execution since the thread last got the CPU.
    pub slice_used: u64,
}

impl FairEntity {
    pub fn new(weight: u64, _p: &FairParams) -> Self {
        FairEntity {
            weight,
            vruntime: 0,
            slice_used: 0,
        }
    }
    pub fn key(&self) -> u64 {
        self.vruntime
    }
    /// A nice change keeps the virtual runtime (`reweight_entity()`).
    pub fn reweighted_from(&mut self, old: &FairEntity) {
        self.vruntime = old.vruntime;
        self.slice_used = old.slice_used;
    }
    pub fn yield_task(&mut self) {
        self.slice_used = 0;
    }
}

#[derive(Debug)]
pub(crate) struct FairRq {
    queue: BTreeSet<(u64, ThreadId)>,
    pub min_vruntime: u64,
    #[allow(dead_code)]
    params: FairParams,
}

impl FairRq {
    pub fn new(params: FairParams) -> Self {
        FairRq {
            queue: BTreeSet::new(),
            min_vruntime: 0,
            params,
        }
    }
    pub fn enqueue(&mut self, t: ThreadId, e: &mut FairEntity, _wakeup: bool, _now: u64) {
        // Not far behind the queue, so sleeping earns no unbounded credit.
        e.vruntime = e.vruntime.max(self.min_vruntime.saturating_sub(FAIR_SLICE_NS));
        self.queue.insert((e.vruntime, t));
    }
    pub fn dequeue(&mut self, t: ThreadId, e: &FairEntity) {
        self.queue.remove(&(e.vruntime, t));
    }
    pub fn pick(&self) -> Option<(u64, ThreadId)> {
        self.queue.first().copied()
    }
    pub fn first_allowed(&self, allowed: impl Fn(ThreadId) -> bool) -> Option<(u64, ThreadId)> {
        self.queue.iter().find(|&&(_, t)| allowed(t)).copied()
    }
    pub fn put_prev(&mut self, _e: &mut FairEntity) {}
    pub fn set_next(&mut self, e: &mut FairEntity) {
        e.slice_used = 0;
    }
    pub fn update_curr(&mut self, e: &mut FairEntity, delta: u64) {
        e.slice_used += delta;
        e.vruntime += ((delta as u128 * 1024) / e.weight as u128) as u64;
        // min_vruntime only moves forward: the smaller of the running and the first queued.
        let lowest = self.queue.first().map_or(e.vruntime, |&(v, _)| v.min(e.vruntime));
        self.min_vruntime = self.min_vruntime.max(lowest);
    }
    pub fn expiry(&self, e: &FairEntity) -> u64 {
        if self.queue.is_empty() {
            u64::MAX
        } else {
            FAIR_SLICE_NS.saturating_sub(e.slice_used)
        }
    }
    pub fn task_tick(&mut self, e: &mut FairEntity) -> super::Tick {
        if e.slice_used >= FAIR_SLICE_NS && !self.queue.is_empty() {
            e.slice_used = 0;
            super::Tick::Requeue
        } else {
            super::Tick::Stay
        }
    }
    pub fn wakeup_preempt(&self, _curr: &FairEntity, _woken: &FairEntity) -> bool {
        false
    }
}
