//! Periodic and sporadic tasks (Liu & Layland's model with constrained deadlines) and task sets.
//!
//! A task τ_i = (C_i, D_i, T_i, O_i): worst-case execution time C, relative deadline D, period
//! or minimum inter-arrival time T, and release offset O. pacer uses the constrained-deadline
//! model C ≤ D ≤ T, the same constraint SCHED_DEADLINE puts on runtime ≤ deadline ≤ period.

use serde::{Deserialize, Serialize};

use crate::time::Duration;

/// How jobs of a task arrive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Arrival {
    /// Exactly every period, from the offset on.
    #[default]
    Periodic,
    /// At least one period apart (the period is the minimum inter-arrival time).
    Sporadic,
}

// By hand: the derived impl lets serde_json report a number here as malformed JSON, without
// the field's name.
impl<'de> Deserialize<'de> for Arrival {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)
            .map_err(|_| serde::de::Error::custom("expected \"periodic\" or \"sporadic\""))?;
        match s.as_str() {
            "periodic" => Ok(Arrival::Periodic),
            "sporadic" => Ok(Arrival::Sporadic),
            other => Err(serde::de::Error::custom(format!(
                "unknown arrival {other:?}: expected \"periodic\" or \"sporadic\""
            ))),
        }
    }
}

/// One task. Times are integer nanoseconds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Task {
    pub name: String,
    /// Worst-case execution time C (at the platform's reference capacity).
    pub wcet: Duration,
    /// Relative deadline D (C ≤ D ≤ T).
    pub deadline: Duration,
    /// Period, or minimum inter-arrival time for sporadic tasks, T.
    pub period: Duration,
    /// Release time of the first job, O.
    pub offset: Duration,
    pub arrival: Arrival,
    /// Working-set size of each job, bytes (rm-vs-edf-multicore-linux.txt §5.3: 16 KB or
    /// 256 KB); `None`: the set's [`TaskSet::wss_bytes`], else no working set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wss_bytes: Option<u64>,
}

impl Task {
    /// An implicit-deadline periodic task (D = T, O = 0).
    pub fn implicit(name: impl Into<String>, wcet: Duration, period: Duration) -> Self {
        Task {
            name: name.into(),
            wcet,
            deadline: period,
            period,
            offset: Duration::ZERO,
            arrival: Arrival::Periodic,
            wss_bytes: None,
        }
    }

    /// A constrained-deadline periodic task with zero offset.
    pub fn constrained(
        name: impl Into<String>,
        wcet: Duration,
        deadline: Duration,
        period: Duration,
    ) -> Self {
        Task {
            deadline,
            ..Task::implicit(name, wcet, period)
        }
    }

    /// Shorthand for tests and examples: (C, D, T) in nanoseconds.
    pub fn cdt(wcet: u64, deadline: u64, period: u64) -> Self {
        Task::constrained("", Duration(wcet), Duration(deadline), Duration(period))
    }

    /// U = C / T.
    pub fn utilization(&self) -> f64 {
        self.wcet.0 as f64 / self.period.0 as f64
    }

    /// λ = C / min(D, T); equals U for implicit deadlines.
    pub fn density(&self) -> f64 {
        self.wcet.0 as f64 / self.deadline.0.min(self.period.0) as f64
    }

    pub fn has_implicit_deadline(&self) -> bool {
        self.deadline == self.period
    }
}

/// Where a task set came from; written into generated files so every experiment is reproducible.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Provenance {
    /// Seed of the random generator, when the set was generated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// Generator and its parameters, free-form (e.g. `{"utilizations": "randfixedsum", ...}`).
    #[serde(default, skip_serializing_if = "serde_json::Map::is_empty")]
    pub parameters: serde_json::Map<String, serde_json::Value>,
    /// The command line that produced the file, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
}

/// A set of tasks plus optional provenance.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct TaskSet {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generator: Option<Provenance>,
    /// Working-set size of the tasks that give none, bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wss_bytes: Option<u64>,
    pub tasks: Vec<Task>,
}

impl TaskSet {
    pub fn new(tasks: Vec<Task>) -> Self {
        TaskSet {
            name: None,
            generator: None,
            wss_bytes: None,
            tasks,
        }
    }

    pub fn len(&self) -> usize {
        self.tasks.len()
    }

    /// Working-set size of task `i`'s jobs: its own, else the set's.
    pub fn task_wss(&self, i: usize) -> Option<u64> {
        self.tasks.get(i).and_then(|t| t.wss_bytes).or(self.wss_bytes)
    }

    pub fn is_empty(&self) -> bool {
        self.tasks.is_empty()
    }

    /// Σ C_i / T_i.
    pub fn utilization(&self) -> f64 {
        total_utilization(&self.tasks)
    }

    /// Σ C_i / D_i.
    pub fn density(&self) -> f64 {
        self.tasks.iter().map(Task::density).sum()
    }

    pub fn has_implicit_deadlines(&self) -> bool {
        self.tasks.iter().all(Task::has_implicit_deadline)
    }
}

/// Σ C_i / T_i over a slice (analyses work on slices so that partitions need no copies).
pub fn total_utilization(tasks: &[Task]) -> f64 {
    tasks.iter().map(Task::utilization).sum()
}
