//! Per-job results, defined once for every executor: the record a finished job produces, the CSV
//! schema it is written in (`docs/formats/jobs-csv.md`), the summary statistics computed from it
//! and the comparison of two runs.
//!
//! The simulator (`pacer sim`, crates/sim) and the real-kernel executor (`pacer run`,
//! crates/linux) both produce [`JobRecord`]s with the same meaning, so a simulated and a measured
//! run of the same workload can be summarised with the same code and compared row for row
//! (`pacer compare`). This module lives in the workload crate because both executors depend on it
//! and neither may depend on the other (DESIGN.md, "Layout").
//!
//! - [`csv`]: the column list, a streaming writer and a reader of job CSV files;
//! - [`summary`]: per-task and per-set statistics in memory independent of the number of jobs;
//! - [`mod@compare`]: response-time statistics of two runs side by side, with the two-sample
//!   Kolmogorov–Smirnov distance.

pub mod compare;
pub mod csv;
pub mod parquet;
pub mod summary;

use serde::Serialize;

pub use self::compare::{compare, CompareReport, Overheads, TaskComparison};
pub use self::csv::{read_jobs, JobCsv, JobRow, ReadError, COLUMNS};
pub use self::parquet::{is_parquet, JobParquet};

/// Where a run's job records go: the CSV, or Parquet when the output's name ends in `.parquet`
/// or `.pq`. Both have the columns of docs/formats/jobs-csv.md.
pub enum JobSink<W: std::io::Write + Send> {
    Csv(JobCsv<W>),
    Parquet(JobParquet<W>),
}

impl<W: std::io::Write + Send> JobSink<W> {
    /// The format `path`'s extension asks for, writing to `writer`.
    pub fn for_path(path: &std::path::Path, writer: W, names: Vec<String>) -> std::io::Result<Self> {
        Ok(if is_parquet(path) {
            JobSink::Parquet(JobParquet::new(writer, names)?)
        } else {
            JobSink::Csv(JobCsv::new(writer, names))
        })
    }

    pub fn write(&mut self, r: &JobRecord) {
        match self {
            JobSink::Csv(c) => c.write(r),
            JobSink::Parquet(p) => p.write(r),
        }
    }

    /// The first error met so far, if any (writing stopped there).
    pub fn error(&self) -> Option<&std::io::Error> {
        match self {
            JobSink::Csv(c) => c.error(),
            JobSink::Parquet(p) => p.error(),
        }
    }

    pub fn set_name(&mut self, thread: u32, name: &str) {
        match self {
            JobSink::Csv(c) => c.set_name(thread, name),
            JobSink::Parquet(p) => p.set_name(thread, name),
        }
    }

    /// Pushes the CSV's buffered rows to the file. A Parquet file is readable only once
    /// finished (its footer comes last), so there it writes nothing early.
    pub fn flush(&mut self) -> std::io::Result<()> {
        match self {
            JobSink::Csv(c) => c.flush(),
            JobSink::Parquet(_) => Ok(()),
        }
    }

    /// Flushes everything; the output is complete only if this succeeds.
    pub fn finish(self) -> std::io::Result<W> {
        match self {
            JobSink::Csv(c) => c.finish(),
            JobSink::Parquet(p) => p.finish(),
        }
    }
}
pub use self::summary::{
    render_text, render_text_labelled, Distribution, Percentiles, Summary, SummaryReport, TaskCounters,
    TaskSummary,
};

/// Index of a thread (its position in the workload).
pub type ThreadId = u32;

/// One finished job. Times are absolute nanoseconds from the start of the run (simulated time 0,
/// or the real executor's common time origin).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct JobRecord {
    pub thread: ThreadId,
    /// 0-based job number within the thread.
    pub job: u64,
    pub release: u64,
    /// First time the job ran.
    pub start: u64,
    pub finish: u64,
    /// Absolute deadline.
    pub deadline: u64,
    /// The thread's period (for normalised laxity), or its relative deadline if aperiodic.
    pub period: u64,
    /// CPU time the job consumed.
    pub exec: u64,
    /// Times the job was preempted (involuntarily descheduled while runnable, incl. throttling).
    pub preemptions: u32,
    /// Times the job resumed on a different CPU than it last ran on.
    pub migrations: u32,
    /// CPU the job finished on.
    pub cpu: u32,
}

/// The relative deadline the workload model gives a thread that has none
/// (`ThreadSpec::relative_deadline_ns`: no `job_deadline`, no SCHED_DEADLINE, no timer): far
/// enough to never be missed, and not a deadline anyone asked for, so outputs leave it out.
pub const NO_DEADLINE: u64 = u64::MAX / 4;

impl JobRecord {
    /// Whether the job has a deadline someone asked for (not [`NO_DEADLINE`]); without one, the
    /// job CSV leaves `deadline_ns` and `normalised_laxity` empty.
    pub fn has_deadline(&self) -> bool {
        self.relative_deadline() < NO_DEADLINE
    }
    pub fn response_time(&self) -> u64 {
        self.finish.saturating_sub(self.release)
    }
    pub fn relative_deadline(&self) -> u64 {
        self.deadline.saturating_sub(self.release)
    }
    pub fn missed(&self) -> bool {
        self.finish > self.deadline
    }
    /// (relative deadline − response time) / period (rm-vs-edf-multicore-linux.txt, Table 2).
    pub fn normalised_laxity(&self) -> f64 {
        (self.relative_deadline() as f64 - self.response_time() as f64) / self.period as f64
    }
}

/// Name of thread `index` for outputs: its workload name, or `t<index>` (the task-set format's
/// default) when none was given.
pub fn thread_name(names: &[String], index: u32) -> std::borrow::Cow<'_, str> {
    match names.get(index as usize) {
        Some(n) => std::borrow::Cow::Borrowed(n.as_str()),
        None => std::borrow::Cow::Owned(format!("t{index}")),
    }
}

/// Names thread `index` in a writer's name list, giving the threads before it that have none
/// their default `t<i>` (a thread that appears during a run: rt-app's fork).
pub(crate) fn set_thread_name(names: &mut Vec<String>, index: u32, name: &str) {
    let i = index as usize;
    while names.len() <= i {
        let n = names.len();
        names.push(format!("t{n}"));
    }
    names[i] = name.to_string();
}

/// A writer that passes everything to `W` until the first error and then refuses all further
/// writes and flushes without touching `W`, so that buffers flushed on drop after a failure do
/// not write to (or block on) a sink that already failed. Used by the streaming writers here and
/// in the simulator's trace output.
pub struct StopOnError<W> {
    /// The wrapped writer.
    pub inner: W,
    failed: bool,
}

impl<W> StopOnError<W> {
    pub fn new(inner: W) -> Self {
        StopOnError { inner, failed: false }
    }

    fn stopped() -> std::io::Error {
        std::io::Error::other("writing stopped after an earlier error")
    }
}

impl<W: std::io::Write> std::io::Write for StopOnError<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.failed {
            return Err(Self::stopped());
        }
        self.inner.write(buf).inspect_err(|e| {
            // Interrupted writes are retried by `write_all`; anything else is final.
            if e.kind() != std::io::ErrorKind::Interrupted {
                self.failed = true;
            }
        })
    }

    fn flush(&mut self) -> std::io::Result<()> {
        if self.failed {
            return Err(Self::stopped());
        }
        self.inner.flush().inspect_err(|e| {
            if e.kind() != std::io::ErrorKind::Interrupted {
                self.failed = true;
            }
        })
    }
}
