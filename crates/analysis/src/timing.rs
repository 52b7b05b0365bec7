//! The (C, D, T) triple every test works on: `Copy`, integer nanoseconds, no name.
//!
//! Tests run in inner loops of partitioning heuristics and benchmarks; taking `&[Timing]`
//! instead of `&[Task]` keeps them allocation-free (a bin's contents are built by copying
//! 24-byte triples, not tasks with names).

use pacer_model::{Duration, Task};
use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub struct Timing {
    /// WCET C, ns.
    pub c: u64,
    /// Relative deadline D ≤ T, ns.
    pub d: u64,
    /// Period / minimum inter-arrival time T, ns.
    pub t: u64,
}

impl Timing {
    pub const fn new(c: u64, d: u64, t: u64) -> Self {
        Timing { c, d, t }
    }
    /// Implicit deadline (D = T).
    pub const fn implicit(c: u64, t: u64) -> Self {
        Timing { c, d: t, t }
    }
    pub fn u(&self) -> f64 {
        self.c as f64 / self.t as f64
    }
    /// Density C / D.
    pub fn density(&self) -> f64 {
        self.c as f64 / self.d as f64
    }
}

impl From<&Task> for Timing {
    fn from(t: &Task) -> Self {
        Timing {
            c: t.wcet.ns(),
            d: t.deadline.ns(),
            t: t.period.ns(),
        }
    }
}

/// The timings of a task list, in order.
pub fn timings(tasks: &[Task]) -> Vec<Timing> {
    tasks.iter().map(Timing::from).collect()
}

pub fn total_u(ts: &[Timing]) -> f64 {
    ts.iter().map(Timing::u).sum()
}

pub fn total_density(ts: &[Timing]) -> f64 {
    ts.iter().map(Timing::density).sum()
}

pub fn implicit_deadlines(ts: &[Timing]) -> bool {
    ts.iter().all(|t| t.d == t.t)
}

/// Converts a response-time vector of raw nanoseconds to durations.
pub fn durations(v: &[Option<u64>]) -> Vec<Option<Duration>> {
    v.iter().map(|x| x.map(Duration)).collect()
}
