//! The fair class, simplified: weighted virtual runtime (`vruntime += δ · 1024 / weight`, the
//! kernel's nice-to-weight table), the smallest vruntime runs, a fixed slice between picks, and
//! waking tasks placed at max(own vruntime, min_vruntime − slice). It gives SCHED_OTHER threads
//! (rt-app's default policy, CPU hogs) a plausible share next to the real-time classes; the full
//! CFS/EEVDF model, and VT-CFS, belong to the interactivity issue and plug in here.

use std::collections::BTreeSet;

use crate::record::ThreadId;

/// Slice between fair picks: EEVDF's base slice 0.75 ms · (1 + log2(min(ncpus, 8))) on 8 CPUs.
pub(crate) const FAIR_SLICE_NS: u64 = 3_000_000;

/// `sched_prio_to_weight[]` for nice −20..19.
const WEIGHTS: [u64; 40] = [
    88761, 71755, 56483, 46273, 36291, 29154, 23254, 18705, 14949, 11916, 9548, 7620, 6100, 4904, 3906, 3121,
    2501, 1991, 1586, 1277, 1024, 820, 655, 526, 423, 335, 272, 215, 172, 137, 110, 87, 70, 56, 45, 36, 29,
    23, 18, 15,
];

pub(crate) fn weight_of_nice(nice: i32) -> u64 {
    WEIGHTS[(nice.clamp(-20, 19) + 20) as usize]
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
