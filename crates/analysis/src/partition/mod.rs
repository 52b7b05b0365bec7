//! Partitioned and clustered assignment of tasks to CPUs or clusters.
//!
//! Both are the same problem with different bins: partitioned scheduling packs tasks into `m`
//! bins of capacity 1 (one per CPU) and checks each with an exact uniprocessor test; clustered
//! scheduling packs them into clusters of `k` CPUs (capacity `k`) and checks each cluster with a
//! global test on `k` CPUs. [`clusters_of`] gives the capacities.
//!
//! - [`heuristics`]: First/Best/Worst/Next Fit (optionally Decreasing) with a caller-supplied
//!   admission predicate per bin, or a per-bin admission state ([`BinState`]);
//! - [`bins`]: incremental exact per-CPU states for partitioned EDF (QPA) and DM (RTA);
//! - [`milp`]: the min–max-load integer linear program of Lelli, Faggioli, Cucinotta & Lipari,
//!   "An experimental comparison of different real-time schedulers on multicore systems"
//!   (JSS 2012), §5.4: tasks assigned "so as to minimise the maximum total load on each core or
//!   group of cores", solved under a time limit with the best solution found used.
//!
//! The ILP balances load only; whether the resulting bins are schedulable is for the caller's
//! exact per-bin test ([`Assignment::first_failing_bin`]).

pub mod bins;
pub mod heuristics;
pub mod milp;

use serde::Serialize;

use crate::outcome::{Outcome, Verdict};
use crate::Timing;

pub use bins::{DmBin, EdfBin};
pub use heuristics::{pack, pack_with, BinState, Fit, Heuristic, ParseHeuristicError, Unplaced};
pub use milp::{MilpError, MilpOptions, MilpResult, MilpStatus};

/// Bin capacities (in CPUs) for `m` CPUs split into clusters of `cluster_size` CPUs, in CPU
/// order: `clusters_of(8, 4) == [4, 4]`, `clusters_of(10, 4) == [4, 4, 2]` (the remainder forms
/// a smaller last cluster), `clusters_of(m, 1)` is partitioned (`[1; m]`), and a cluster size
/// ≥ m is one global cluster. `m == 0` or `cluster_size == 0` gives no bins.
pub fn clusters_of(m: usize, cluster_size: usize) -> Vec<usize> {
    if m == 0 || cluster_size == 0 {
        return Vec::new();
    }
    let full = m / cluster_size;
    let rest = m % cluster_size;
    let mut v = vec![cluster_size; full];
    if rest > 0 {
        v.push(rest);
    }
    v
}

/// A complete assignment of tasks to bins, with the per-bin loads it implies.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Assignment {
    /// `bin_of[i]` is the bin of task `i` (input order).
    pub bin_of: Vec<usize>,
    /// Σ u_i of the tasks in each bin.
    pub loads: Vec<f64>,
    /// Capacity of each bin in CPUs (as given to the packer / solver).
    pub capacities: Vec<usize>,
}

impl Assignment {
    /// Builds an assignment from `bin_of`, recomputing the loads; `None` if the lengths disagree
    /// or a bin index is out of range.
    pub fn new(ts: &[Timing], capacities: &[usize], bin_of: Vec<usize>) -> Option<Self> {
        let u: Vec<f64> = ts.iter().map(Timing::u).collect();
        Self::from_utilizations(&u, capacities, bin_of)
    }

    /// As [`Assignment::new`], from utilisations.
    pub fn from_utilizations(u: &[f64], capacities: &[usize], bin_of: Vec<usize>) -> Option<Self> {
        if u.len() != bin_of.len() || bin_of.iter().any(|&b| b >= capacities.len()) {
            return None;
        }
        let mut loads = vec![0.0; capacities.len()];
        for (&b, &ui) in bin_of.iter().zip(u) {
            loads[b] += ui;
        }
        Some(Assignment {
            bin_of,
            loads,
            capacities: capacities.to_vec(),
        })
    }

    /// Number of bins.
    pub fn num_bins(&self) -> usize {
        self.capacities.len()
    }

    /// Indices of the tasks in bin `b`, ascending.
    pub fn tasks_in(&self, b: usize) -> impl Iterator<Item = usize> + '_ {
        self.bin_of
            .iter()
            .enumerate()
            .filter(move |&(_, &x)| x == b)
            .map(|(i, _)| i)
    }

    /// Task indices per bin.
    pub fn bins(&self) -> Vec<Vec<usize>> {
        let mut v = vec![Vec::new(); self.num_bins()];
        for (i, &b) in self.bin_of.iter().enumerate() {
            v[b].push(i);
        }
        v
    }

    /// Load of bin `b` divided by its capacity (0 for an empty bin, +∞ for a loaded bin of
    /// capacity 0). Out-of-range `b` gives 0.
    pub fn normalized_load(&self, b: usize) -> f64 {
        let (Some(&load), Some(&cap)) = (self.loads.get(b), self.capacities.get(b)) else {
            return 0.0;
        };
        if load == 0.0 {
            0.0
        } else if cap == 0 {
            f64::INFINITY
        } else {
            load / cap as f64
        }
    }

    /// The largest normalised load over all bins (the ILP's objective); 0 with no bins.
    pub fn max_normalized_load(&self) -> f64 {
        (0..self.num_bins())
            .map(|b| self.normalized_load(b))
            .fold(0.0, f64::max)
    }

    /// Runs an admission test on every bin (`fits(bin's tasks, capacity)`, the same predicate
    /// the heuristics use) and returns the first bin that fails, if any. This is how a
    /// load-balanced ILP assignment is turned into a schedulability verdict.
    pub fn first_failing_bin(
        &self,
        ts: &[Timing],
        mut fits: impl FnMut(&[Timing], usize) -> bool,
    ) -> Option<usize> {
        let mut buf = Vec::new();
        for b in 0..self.num_bins() {
            buf.clear();
            buf.extend(self.tasks_in(b).filter_map(|i| ts.get(i).copied()));
            if !fits(&buf, self.capacities[b]) {
                return Some(b);
            }
        }
        None
    }
}

/// The verdict of a heuristic partitioning whose admission predicate is an exact (or
/// sufficient) per-bin test: schedulable when every task was placed; otherwise not proven — a
/// heuristic that fails proves nothing — with the first task that fit nowhere.
pub fn outcome(result: &Result<Assignment, Unplaced>) -> Outcome {
    match result {
        Ok(a) => Outcome {
            value: Some(a.max_normalized_load()),
            ..Outcome::new(Verdict::Schedulable)
        },
        Err(e) => Outcome {
            failing_task: Some(e.task),
            ..Outcome::new(Verdict::NotProven)
        },
    }
}

/// How [`place`] assigns tasks to bins: a bin-packing heuristic under [`load_fits`], or the
/// min–max-load ILP of [`milp`] (the RM-vs-EDF paper's §5.4) under a wall-clock limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// A heuristic by utilisation (Σu ≤ capacity per bin).
    Heuristic(Heuristic),
    /// The ILP with this time limit; the best solution found in that time is used, as in the paper.
    Ilp { time_limit: std::time::Duration },
}

impl Placement {
    /// `ilp` or a heuristic's name (as [`Heuristic`] parses them).
    pub fn name(&self) -> String {
        match self {
            Placement::Heuristic(h) => h.name().to_string(),
            Placement::Ilp { .. } => "ilp".to_string(),
        }
    }
}

/// Why [`place`] found no assignment.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PlaceError {
    /// The heuristic left this task (input index) in no bin.
    #[error("{heuristic}: task {task} fits in no bin (Σ utilisation would exceed its capacity)")]
    Unplaced { heuristic: Heuristic, task: usize },
    /// The ILP refused its input.
    #[error("ilp: {0}")]
    Milp(#[from] MilpError),
}

/// Task → bin for partitioned (`bins` all 1) and clustered scheduling: the one placement used by
/// `pacer sim` and by the experiments, so a simulated and a real run of a set share it.
pub fn place(ts: &[Timing], bins: &[usize], how: Placement) -> Result<Vec<usize>, PlaceError> {
    match how {
        Placement::Ilp { time_limit } => {
            let r = milp::solve(ts, bins, &MilpOptions::with_time_limit(time_limit))?;
            Ok(r.assignment.bin_of)
        }
        Placement::Heuristic(h) => {
            pack(ts, bins, h, load_fits)
                .map(|a| a.bin_of)
                .map_err(|u| PlaceError::Unplaced {
                    heuristic: h,
                    task: u.task,
                })
        }
    }
}

/// Σu ≤ capacity (within [`crate::outcome::EPS`]) and no task above one CPU (u ≤ 1).
///
/// A necessary condition for any scheduler on `capacity` CPUs, and exact for implicit-deadline
/// EDF on one CPU; the load-only predicate for the heuristics when no exact test is wanted.
pub fn load_fits(bin: &[Timing], capacity: usize) -> bool {
    let mut sum = 0.0;
    for t in bin {
        let u = t.u();
        // NaN comes from c = t = 0.
        if u.is_nan() || u > 1.0 + crate::outcome::EPS {
            return false;
        }
        sum += u;
    }
    sum <= capacity as f64 + crate::outcome::EPS
}
