//! Per-job CSV: one row per finished job, streamed as the simulation runs, so that results can be
//! analysed with any tool (pandas, R, a spreadsheet) and compared row for row with the real-kernel
//! executor, which writes the same schema (`docs/formats/jobs-csv.md`).
//!
//! Memory is constant in the number of jobs: a row is formatted into the writer's buffer and
//! leaves it when the buffer fills. [`Observer::job`] cannot return an error, so the first I/O
//! error is remembered, nothing more is written, and [`JobCsv::finish`] reports it.

use std::io::{self, Write};

use serde::Serialize;

use super::{thread_name, StopOnError};
use crate::record::{JobRecord, Observer};

/// Column names, in order (the header row). See `docs/formats/jobs-csv.md`.
pub const COLUMNS: [&str; 13] = [
    "task",
    "job",
    "release_ns",
    "start_ns",
    "finish_ns",
    "deadline_ns",
    "response_ns",
    "normalised_laxity",
    "missed",
    "exec_ns",
    "preemptions",
    "migrations",
    "cpu",
];

/// Size of the write buffer between rows and the underlying writer.
const BUFFER_BYTES: usize = 64 * 1024;

/// One row; field order must match [`COLUMNS`].
#[derive(Serialize)]
struct Row<'a> {
    task: &'a str,
    job: u64,
    release_ns: u64,
    start_ns: u64,
    finish_ns: u64,
    deadline_ns: u64,
    response_ns: u64,
    normalised_laxity: f64,
    missed: u8,
    exec_ns: u64,
    preemptions: u32,
    migrations: u32,
    cpu: u32,
}

/// An [`Observer`] writing one CSV row per finished job.
///
/// Rows go through the `csv` crate's writer, which buffers them (64 KiB, like a
/// [`std::io::BufWriter`]) before they reach `W`; call [`JobCsv::finish`] at the end to flush and
/// learn whether every row was written.
pub struct JobCsv<W: Write> {
    out: ::csv::Writer<StopOnError<W>>,
    names: Vec<String>,
    error: Option<io::Error>,
}

impl<W: Write> JobCsv<W> {
    /// Starts a CSV on `writer` and writes the header row. `names[i]` is the name written in the
    /// `task` column for thread `i` (threads without a name get `t<i>`).
    pub fn new(writer: W, names: Vec<String>) -> Self {
        let out = ::csv::WriterBuilder::new()
            .buffer_capacity(BUFFER_BYTES)
            .has_headers(false)
            .from_writer(StopOnError::new(writer));
        let mut this = JobCsv {
            out,
            names,
            error: None,
        };
        let header = this.out.write_record(COLUMNS);
        this.keep_error(header);
        this
    }

    /// The first I/O error met so far, if any (writing stopped there).
    pub fn error(&self) -> Option<&io::Error> {
        self.error.as_ref()
    }

    /// Flushes the buffered rows and returns the writer, or the first I/O error met while writing
    /// (in which case the output is incomplete).
    pub fn finish(mut self) -> io::Result<W> {
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        self.out.flush()?;
        self.out.into_inner().map(|w| w.inner).map_err(|e| e.into_error())
    }

    fn keep_error(&mut self, result: ::csv::Result<()>) {
        if let Err(e) = result {
            if self.error.is_none() {
                self.error = Some(into_io(e));
            }
        }
    }
}

/// The I/O error inside a `csv` error, or the `csv` error wrapped as one.
fn into_io(err: ::csv::Error) -> io::Error {
    if !err.is_io_error() {
        return io::Error::other(err);
    }
    match err.into_kind() {
        ::csv::ErrorKind::Io(e) => e,
        other => io::Error::other(format!("{other:?}")),
    }
}

impl<W: Write> Observer for JobCsv<W> {
    fn job(&mut self, r: &JobRecord) {
        if self.error.is_some() {
            return;
        }
        let name = thread_name(&self.names, r.thread);
        let row = Row {
            task: &name,
            job: r.job,
            release_ns: r.release,
            start_ns: r.start,
            finish_ns: r.finish,
            deadline_ns: r.deadline,
            response_ns: r.response_time(),
            normalised_laxity: r.normalised_laxity(),
            missed: u8::from(r.missed()),
            exec_ns: r.exec,
            preemptions: r.preemptions,
            migrations: r.migrations,
            cpu: r.cpu,
        };
        let result = self.out.serialize(row);
        self.keep_error(result);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(thread: u32, job: u64, release: u64, finish: u64) -> JobRecord {
        JobRecord {
            thread,
            job,
            release,
            start: release + 1,
            finish,
            deadline: release + 10_000_000,
            period: 10_000_000,
            exec: 2_000_000,
            preemptions: 1,
            migrations: 0,
            cpu: 1,
        }
    }

    #[test]
    fn header_only_when_no_job() {
        let csv = JobCsv::new(Vec::new(), vec!["a".into()]);
        let out = csv.finish().unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            format!("{}\n", COLUMNS.join(","))
        );
    }

    #[test]
    fn unnamed_thread_and_quoting() {
        let mut csv = JobCsv::new(Vec::new(), vec!["a,\"b\"".into()]);
        csv.job(&rec(0, 0, 0, 3_000_000));
        csv.job(&rec(5, 7, 0, 12_000_000));
        let out = String::from_utf8(csv.finish().unwrap()).unwrap();
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 3);
        assert!(lines[1].starts_with("\"a,\"\"b\"\"\",0,0,1,3000000,10000000,3000000,0.7,0,"));
        assert!(
            lines[2].starts_with("t5,7,0,1,12000000,10000000,12000000,-0.2,1,"),
            "{}",
            lines[2]
        );
    }
}
