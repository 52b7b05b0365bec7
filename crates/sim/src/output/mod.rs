//! The simulator's output layer: [`Observer`](crate::record::Observer)s that turn the stream of
//! finished jobs and scheduling events into files and reports without keeping anything that
//! grows with the simulated horizon.
//!
//! - [`csv::JobCsv`] streams one CSV row per job (schema: `docs/formats/jobs-csv.md`; the writer
//!   is `pacer_workload::jobs::JobCsv`, shared with the real-kernel executor).
//! - [`summary::Summary`] accumulates per-task statistics in fixed-size histograms and reports them
//!   with the set-level metrics of rm-vs-edf-multicore-linux.txt, Table 2 (the statistics are
//!   `pacer_workload::jobs::summary`, shared with `pacer run`).
//! - [`trace::ChromeTrace`] streams a Chrome trace-event JSON file that the Perfetto UI loads.
//! - [`perfetto::PerfettoTrace`] streams a Perfetto protobuf trace shaped like a kernel ftrace
//!   recording (per-CPU scheduling, thread states, wake-ups), smaller and faster to write.
//!
//! Observers cannot return errors, so the writers remember the first I/O error, stop writing, and
//! report it from their `finish` method.

pub mod csv;
pub mod perfetto;
pub mod summary;
pub mod trace;

pub use self::csv::JobCsv;
pub use perfetto::PerfettoTrace;
pub use summary::{render_text, Percentiles, Summary, SummaryReport, TaskSummary};
pub use trace::ChromeTrace;

pub(crate) use pacer_workload::jobs::{thread_name, StopOnError};
