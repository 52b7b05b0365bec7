//! Bin-packing heuristics for partitioned and clustered assignment: First Fit, Best Fit, Worst
//! Fit and Next Fit, each optionally Decreasing (tasks sorted by utilisation, non-increasing).
//!
//! Sources: Dhall & Liu, "On a real-time scheduling problem", Operations Research 26(1), 1978
//! (RM-Next-Fit / RM-First-Fit, the first partitioned heuristics); López, Díaz & García,
//! "Utilization bounds for EDF scheduling on real-time multiprocessor systems", Real-Time
//! Systems 28(1), 2004 (FF/BF/WF/NF and their decreasing variants with an exact uniprocessor
//! admission test, and their utilisation bounds).
//!
//! The admission test is the caller's: `fits(bin's tasks + candidate, bin capacity)`. With
//! capacity-1 bins and an exact uniprocessor test (EDF: U ≤ 1 or QPA; FP: RTA) this is
//! partitioned scheduling; with clusters and a global test it is clustered scheduling.
//!
//! Conventions (the papers leave them open, so they are fixed here and tested):
//! - "Decreasing" sorts by u non-increasing, ties by input index, so results are deterministic.
//! - Best/Worst Fit rank the bins where the candidate fits by remaining capacity
//!   (capacity − Σu of the bin before placing); Best takes the smallest, Worst the largest.
//!   Remaining capacities within [`EPS`] of each other count as equal (sums of ratios carry
//!   rounding: 0.7 + 0.2 ≠ 0.9 in binary) and ties go to the lowest bin index.
//! - Next Fit never reopens a bin it has moved past; it fails when it runs out of bins.

use std::fmt;
use std::str::FromStr;

use serde::Serialize;

use super::Assignment;
use crate::outcome::EPS;
use crate::Timing;

/// Which bin a task goes to among those that admit it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Fit {
    /// The lowest-indexed bin that admits the task.
    First,
    /// The admitting bin with the least remaining capacity (tightest packing).
    Best,
    /// The admitting bin with the most remaining capacity (load balancing).
    Worst,
    /// The current bin if it admits the task, else the next ones; earlier bins are closed.
    Next,
}

/// A packing heuristic: a [`Fit`] rule and whether tasks are taken by decreasing utilisation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub struct Heuristic {
    pub fit: Fit,
    pub decreasing: bool,
}

impl Heuristic {
    pub const FF: Heuristic = Heuristic::new(Fit::First, false);
    pub const BF: Heuristic = Heuristic::new(Fit::Best, false);
    pub const WF: Heuristic = Heuristic::new(Fit::Worst, false);
    pub const NF: Heuristic = Heuristic::new(Fit::Next, false);
    pub const FFD: Heuristic = Heuristic::new(Fit::First, true);
    pub const BFD: Heuristic = Heuristic::new(Fit::Best, true);
    pub const WFD: Heuristic = Heuristic::new(Fit::Worst, true);
    pub const NFD: Heuristic = Heuristic::new(Fit::Next, true);

    /// Every heuristic, in the order the CLI lists them.
    pub const ALL: [Heuristic; 8] = [
        Self::FF,
        Self::BF,
        Self::WF,
        Self::NF,
        Self::FFD,
        Self::BFD,
        Self::WFD,
        Self::NFD,
    ];

    pub const fn new(fit: Fit, decreasing: bool) -> Self {
        Heuristic { fit, decreasing }
    }

    /// Short name: `ff`, `bf`, `wf`, `nf`, `ffd`, `bfd`, `wfd`, `nfd`.
    pub const fn name(&self) -> &'static str {
        match (self.fit, self.decreasing) {
            (Fit::First, false) => "ff",
            (Fit::Best, false) => "bf",
            (Fit::Worst, false) => "wf",
            (Fit::Next, false) => "nf",
            (Fit::First, true) => "ffd",
            (Fit::Best, true) => "bfd",
            (Fit::Worst, true) => "wfd",
            (Fit::Next, true) => "nfd",
        }
    }

    /// Long name for help texts, e.g. `first-fit-decreasing`.
    pub const fn long_name(&self) -> &'static str {
        match (self.fit, self.decreasing) {
            (Fit::First, false) => "first-fit",
            (Fit::Best, false) => "best-fit",
            (Fit::Worst, false) => "worst-fit",
            (Fit::Next, false) => "next-fit",
            (Fit::First, true) => "first-fit-decreasing",
            (Fit::Best, true) => "best-fit-decreasing",
            (Fit::Worst, true) => "worst-fit-decreasing",
            (Fit::Next, true) => "next-fit-decreasing",
        }
    }
}

impl fmt::Display for Heuristic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An unrecognised heuristic name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown packing heuristic `{0}` (expected one of ff, bf, wf, nf, ffd, bfd, wfd, nfd)")]
pub struct ParseHeuristicError(pub String);

impl FromStr for Heuristic {
    type Err = ParseHeuristicError;

    /// Accepts the short and long names, case-insensitively, with `-`, `_` or spaces.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let norm: String = s
            .trim()
            .chars()
            .map(|c| match c {
                '_' | ' ' => '-',
                c => c.to_ascii_lowercase(),
            })
            .collect();
        Heuristic::ALL
            .into_iter()
            .find(|h| h.name() == norm || h.long_name() == norm)
            .ok_or_else(|| ParseHeuristicError(s.to_string()))
    }
}

/// A task that no bin admitted (the heuristic stops there).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error, Serialize)]
#[error("task {task} fits in no bin")]
pub struct Unplaced {
    /// Input index of the task.
    pub task: usize,
}

/// Admission state of one bin for [`pack_with`]: a per-bin test that keeps what it learnt about
/// the bin's tasks between candidates instead of re-analysing the whole bin for each one (see
/// [`super::bins`] for the exact uniprocessor ones).
///
/// Protocol: [`BinState::fits`] may be called any number of times; [`BinState::push`] is called
/// only with the candidate of this bin's latest `fits` call, and only when that call returned
/// true, so a state may keep the work of that call for the push.
pub trait BinState {
    /// Whether the bin can host its current tasks plus `t`.
    fn fits(&mut self, t: &Timing) -> bool;
    /// Adds `t` to the bin.
    fn push(&mut self, t: Timing);
}

/// The bins as [`pack_core`] sees them.
trait Bins {
    fn fits(&mut self, bin: usize, t: &Timing) -> bool;
    fn push(&mut self, bin: usize, t: Timing);
}

/// A slice predicate over each bin's contents (what [`pack`] takes).
struct SliceBins<F> {
    contents: Vec<Vec<Timing>>,
    capacities: Vec<usize>,
    fits: F,
}

impl<F: FnMut(&[Timing], usize) -> bool> Bins for SliceBins<F> {
    fn fits(&mut self, b: usize, t: &Timing) -> bool {
        // The candidate is pushed, tested, and popped, so no allocation happens per call once
        // the vectors have grown.
        let bin = &mut self.contents[b];
        bin.push(*t);
        let ok = (self.fits)(bin, self.capacities[b]);
        bin.pop();
        ok
    }
    fn push(&mut self, b: usize, t: Timing) {
        self.contents[b].push(t);
    }
}

impl<S: BinState> Bins for Vec<S> {
    fn fits(&mut self, b: usize, t: &Timing) -> bool {
        self[b].fits(t)
    }
    fn push(&mut self, b: usize, t: Timing) {
        self[b].push(t)
    }
}

/// Packs `ts` into bins of the given capacities (in CPUs) with heuristic `h`.
///
/// `fits(tasks, capacity)` is called with the bin's current tasks followed by the candidate
/// (always the last element) and must say whether the bin can host them all. It is never called
/// for a bin the heuristic does not need (Next Fit's closed bins; for Best/Worst Fit, bins ranked
/// after the first admitting one, except its ties within [`EPS`]), so an expensive exact test
/// costs as little as the rule allows. A test that can learn from earlier calls should use
/// [`pack_with`] instead, which places tasks identically.
///
/// Returns the assignment, or the first task (in packing order) that no bin admitted. Zero
/// tasks give an empty assignment; zero bins fail on the first task.
pub fn pack(
    ts: &[Timing],
    bins: &[usize],
    h: Heuristic,
    fits: impl FnMut(&[Timing], usize) -> bool,
) -> Result<Assignment, Unplaced> {
    let mut state = SliceBins {
        contents: vec![Vec::new(); bins.len()],
        capacities: bins.to_vec(),
        fits,
    };
    pack_core(ts, bins, h, &mut state)
}

/// As [`pack`], with one [`BinState`] per bin made by `new_bin(capacity)`: the same placements
/// and the same sequence of admission questions as [`pack`] with the equivalent slice predicate.
pub fn pack_with<S: BinState>(
    ts: &[Timing],
    bins: &[usize],
    h: Heuristic,
    new_bin: impl FnMut(usize) -> S,
) -> Result<Assignment, Unplaced> {
    let mut states: Vec<S> = bins.iter().copied().map(new_bin).collect();
    pack_core(ts, bins, h, &mut states)
}

fn pack_core(
    ts: &[Timing],
    bins: &[usize],
    h: Heuristic,
    state: &mut impl Bins,
) -> Result<Assignment, Unplaced> {
    let m = bins.len();
    let u: Vec<f64> = ts.iter().map(Timing::u).collect();

    let mut order: Vec<usize> = (0..ts.len()).collect();
    if h.decreasing {
        // total_cmp: a NaN utilisation (c = t = 0) sorts without panicking.
        order.sort_by(|&a, &b| u[b].total_cmp(&u[a]).then(a.cmp(&b)));
    }

    let mut loads = vec![0.0f64; m];
    let mut bin_of = vec![usize::MAX; ts.len()];
    let mut ranked: Vec<usize> = Vec::with_capacity(m);
    let mut next = 0usize; // Next Fit's current bin

    for &i in &order {
        let t = ts[i];
        let chosen = match h.fit {
            Fit::First => (0..m).find(|&b| state.fits(b, &t)),
            Fit::Next => {
                while next < m && !state.fits(next, &t) {
                    next += 1;
                }
                (next < m).then_some(next)
            }
            Fit::Best | Fit::Worst => {
                let remaining = |b: usize| bins[b] as f64 - loads[b];
                ranked.clear();
                ranked.extend(0..m);
                // Best: ascending remaining capacity; Worst: descending. Ties by index.
                if h.fit == Fit::Best {
                    ranked.sort_by(|&a, &b| remaining(a).total_cmp(&remaining(b)).then(a.cmp(&b)));
                } else {
                    ranked.sort_by(|&a, &b| remaining(b).total_cmp(&remaining(a)).then(a.cmp(&b)));
                }
                match ranked.iter().position(|&b| state.fits(b, &t)) {
                    None => None,
                    Some(pos) => {
                        // Bins whose remaining capacity equals the chosen one's within EPS are
                        // ties that float rounding may have ordered after it: the lowest index
                        // among those that admit the task wins. Earlier tied bins were already
                        // tried and rejected.
                        let mut best = ranked[pos];
                        let r0 = remaining(best);
                        for &b in &ranked[pos + 1..] {
                            if (remaining(b) - r0).abs() > EPS {
                                break;
                            }
                            if b < best && state.fits(b, &t) {
                                best = b;
                            }
                        }
                        Some(best)
                    }
                }
            }
        };
        let Some(b) = chosen else {
            return Err(Unplaced { task: i });
        };
        state.push(b, t);
        loads[b] += u[i];
        bin_of[i] = b;
    }

    Ok(Assignment {
        bin_of,
        loads,
        capacities: bins.to_vec(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for h in Heuristic::ALL {
            assert_eq!(h.to_string().parse::<Heuristic>(), Ok(h));
            assert_eq!(h.long_name().parse::<Heuristic>(), Ok(h));
        }
        assert_eq!("Worst_Fit_Decreasing".parse(), Ok(Heuristic::WFD));
        assert!("xf".parse::<Heuristic>().is_err());
    }

    #[test]
    fn tie_tolerance_prefers_lowest_index() {
        // Bin 0 holds 0.7 + 0.2 (= 0.8999999999999999), bin 1 holds 0.9: equal remaining
        // capacity up to rounding, so Best Fit must pick bin 0 for the 0.1 task.
        let ts = [
            Timing::implicit(7, 10),
            Timing::implicit(9, 10),
            Timing::implicit(2, 10),
            Timing::implicit(1, 10),
        ];
        let a = pack(&ts, &[1, 1], Heuristic::BF, super::super::load_fits).unwrap();
        assert_eq!(a.bin_of, vec![0, 1, 0, 0]);
    }
}
