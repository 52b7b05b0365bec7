//! The simulator's output layer: [`Observer`](crate::record::Observer)s that turn the stream of
//! finished jobs and scheduling events into files and reports without keeping anything that
//! grows with the simulated horizon.
//!
//! - [`csv::JobCsv`] streams one CSV row per job (schema: `docs/formats/jobs-csv.md`, shared with
//!   the real-kernel executor).
//! - [`summary::Summary`] accumulates per-task statistics in fixed-size histograms and reports them
//!   with the set-level metrics of rm-vs-edf-multicore-linux.txt, Table 2.
//! - [`trace::ChromeTrace`] streams a Chrome trace-event JSON file that the Perfetto UI loads.
//!
//! Observers cannot return errors, so the writers remember the first I/O error, stop writing, and
//! report it from their `finish` method.

pub mod csv;
pub mod summary;
pub mod trace;

pub use self::csv::JobCsv;
pub use summary::{render_text, Percentiles, Summary, SummaryReport, TaskSummary};
pub use trace::ChromeTrace;

/// Name of thread `index` for outputs: its workload name, or `t<index>` (the task-set format's
/// default) when none was given.
pub(crate) fn thread_name(names: &[String], index: u32) -> std::borrow::Cow<'_, str> {
    match names.get(index as usize) {
        Some(n) => std::borrow::Cow::Borrowed(n.as_str()),
        None => std::borrow::Cow::Owned(format!("t{index}")),
    }
}

/// A writer that passes everything to `W` until the first error and then refuses all further
/// writes and flushes without touching `W`, so that buffers flushed on drop after a failure do
/// not write to (or block on) a sink that already failed.
pub(crate) struct StopOnError<W> {
    pub(crate) inner: W,
    failed: bool,
}

impl<W> StopOnError<W> {
    pub(crate) fn new(inner: W) -> Self {
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
