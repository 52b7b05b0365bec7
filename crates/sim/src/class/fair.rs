//! The fair class, simplified: weighted virtual runtime (`vruntime += δ · 1024 / weight`, the
//! kernel's nice-to-weight table), the smallest vruntime runs, a fixed slice between picks, and
//! waking tasks placed at max(own vruntime, min_vruntime − slice). It gives SCHED_OTHER threads
//! (rt-app's default policy, CPU hogs) a plausible share next to the real-time classes; the full
//! CFS/EEVDF model, and VT-CFS, belong to the interactivity issue and plug in here.

use std::collections::BTreeSet;

use crate::record::ThreadId;

/// Slice between fair picks: EEVDF's base slice 0.75 ms · (1 + log2(min(ncpus, 8))) on 8 CPUs.
pub(crate) const FAIR_SLICE_NS: u64 = 3_000_000;

/// `sched_prio_to_weight[]` for nice −20..19 (one table for both kernels, in pacer-model).
pub(crate) fn weight_of_nice(nice: i32) -> u64 {
    pacer_model::policy::nice_weight(nice)
}

#[derive(Debug, Default)]
pub(crate) struct FairRq {
    queue: BTreeSet<(u64, ThreadId)>,
    pub min_vruntime: u64,
}

impl FairRq {
    pub fn enqueue(&mut self, t: ThreadId, vruntime: u64) {
        self.queue.insert((vruntime, t));
    }
    pub fn dequeue(&mut self, t: ThreadId, vruntime: u64) -> bool {
        self.queue.remove(&(vruntime, t))
    }
    pub fn first(&self) -> Option<(u64, ThreadId)> {
        self.queue.first().copied()
    }
    pub fn iter(&self) -> impl Iterator<Item = &(u64, ThreadId)> {
        self.queue.iter()
    }
    pub fn len(&self) -> usize {
        self.queue.len()
    }
    /// Where a waking task starts: not far behind the queue, so sleeping earns no unbounded credit.
    pub fn place(&self, vruntime: u64) -> u64 {
        vruntime.max(self.min_vruntime.saturating_sub(FAIR_SLICE_NS))
    }
}
