//! Summaries of a simulation: the shared statistics of `pacer_workload::jobs::summary` (per-task
//! and per-set figures of rm-vs-edf-multicore-linux.txt, Table 2, in memory independent of the
//! number of jobs) as an [`Observer`], joined with the engine's own counters ([`ThreadStats`]).
//! `pacer run` summarises measured jobs with the same code, so both commands print the same
//! figures computed the same way.

pub use pacer_workload::jobs::summary::{
    render_text, render_text_labelled, Percentiles, SummaryReport, TaskCounters, TaskSummary,
};

use crate::record::{JobRecord, Observer, ThreadStats};

impl From<ThreadStats> for TaskCounters {
    fn from(s: ThreadStats) -> TaskCounters {
        TaskCounters {
            released: s.released,
            finished: s.finished,
            exec_ns: s.exec,
            switches: s.switches,
            involuntary_switches: s.involuntary_switches,
            migrations: s.migrations,
            // The engine sees every throttling, so its overrun count is exact.
            overruns: Some(s.overruns),
        }
    }
}

/// An [`Observer`] accumulating per-thread job statistics in memory independent of the number of
/// jobs. Turn it into a [`SummaryReport`] with [`Summary::report`].
#[derive(Debug, Clone, Default)]
pub struct Summary(pacer_workload::jobs::Summary);

impl Summary {
    /// A summary expecting `threads` threads (more are added if jobs of higher-numbered threads
    /// arrive).
    pub fn new(threads: usize) -> Self {
        Summary(pacer_workload::jobs::Summary::new(threads))
    }

    /// Number of jobs folded in so far, over all threads.
    pub fn jobs(&self) -> u64 {
        self.0.jobs()
    }

    /// Builds the report. `names[i]` names thread `i` (unnamed threads get `t<i>`), `stats[i]` are
    /// the engine's counters for thread `i` (missing entries count as zero), `horizon_ns` is the
    /// simulated time (for per-second rates) and `cpus` the number of CPUs (for utilisation per
    /// CPU).
    pub fn report(
        &self,
        names: &[String],
        stats: &[ThreadStats],
        horizon_ns: u64,
        cpus: u32,
    ) -> SummaryReport {
        let counters: Vec<TaskCounters> = stats.iter().map(|&s| s.into()).collect();
        self.0.report(names, &counters, horizon_ns, cpus)
    }
}

impl Observer for Summary {
    fn job(&mut self, r: &JobRecord) {
        self.0.add(r);
    }
}
