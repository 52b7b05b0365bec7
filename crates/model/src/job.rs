//! Jobs: the instances a task releases. Used by simulators and by the real-kernel executor.

use serde::{Deserialize, Serialize};

use crate::time::{Duration, Instant};

/// The `seq`-th job of task `task` (index into its task set).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Job {
    pub task: usize,
    pub seq: u64,
    pub release: Instant,
    /// Absolute deadline = release + D.
    pub deadline: Instant,
    /// Execution demand of this job (≤ the task's WCET for a well-behaved task).
    pub cost: Duration,
}

impl Job {
    /// Normalised laxity as defined by rm-vs-edf-multicore-linux.txt (Table 2):
    /// (absolute deadline − finishing time) / relative deadline; negative means a miss.
    pub fn normalised_laxity(&self, finish: Instant) -> f64 {
        let rel = (self.deadline.0 - self.release.0) as f64;
        (self.deadline.0 as f64 - finish.0 as f64) / rel
    }
}
