//! The per-job CSV (`docs/formats/jobs-csv.md`): one row per finished job, written while a run
//! goes on by the simulator and by the real-kernel executor, and read back by `pacer compare` and
//! anyone else. The column list, the row serialisation and the reader are defined here and only
//! here.
//!
//! Writing keeps memory constant in the number of jobs: a row is formatted into the writer's
//! buffer and leaves it when the buffer fills. The first I/O error is remembered, nothing more is
//! written, and [`JobCsv::finish`] reports it, so an incomplete file is never passed off as
//! complete.
//!
//! Reading looks columns up by header name and ignores columns it does not know (the format's
//! compatibility rule: columns are only ever added at the end). Every row is checked for what the
//! format promises (integers where integers belong, `response_ns = finish_ns − release_ns`,
//! `missed` consistent with the deadline), and a problem is reported with the file, the line and
//! the column.
//!
//! A job without a deadline ([`JobRecord::has_deadline`]) has empty `deadline_ns` and
//! `normalised_laxity` fields and `missed` 0, rather than the model's stand-in
//! ([`super::NO_DEADLINE`]) and a laxity computed from it.

use std::io::{self, Read, Write};
use std::path::Path;

use serde::Serialize;

use super::{thread_name, JobRecord, StopOnError};

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

/// One row as written; field order must match [`COLUMNS`].
#[derive(Serialize)]
struct Row<'a> {
    task: &'a str,
    job: u64,
    release_ns: u64,
    start_ns: u64,
    finish_ns: u64,
    deadline_ns: Option<u64>,
    response_ns: u64,
    normalised_laxity: Option<f64>,
    missed: u8,
    exec_ns: u64,
    preemptions: u32,
    migrations: u32,
    cpu: u32,
}

/// Streams one CSV row per finished job.
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

    /// Appends the row of one finished job (a no-op after the first I/O error).
    pub fn write(&mut self, r: &JobRecord) {
        if self.error.is_some() {
            return;
        }
        let name = thread_name(&self.names, r.thread);
        let dl = r.has_deadline();
        let row = Row {
            task: &name,
            job: r.job,
            release_ns: r.release,
            start_ns: r.start,
            finish_ns: r.finish,
            deadline_ns: dl.then_some(r.deadline),
            response_ns: r.response_time(),
            normalised_laxity: dl.then(|| r.normalised_laxity()),
            missed: u8::from(dl && r.missed()),
            exec_ns: r.exec,
            preemptions: r.preemptions,
            migrations: r.migrations,
            cpu: r.cpu,
        };
        let result = self.out.serialize(row);
        self.keep_error(result);
    }

    /// Names thread `thread` in the rows that follow: a thread that appears during a run (one
    /// started by an rt-app `fork` event). Threads in between without a name keep `t<i>`.
    pub fn set_name(&mut self, thread: u32, name: &str) {
        super::set_thread_name(&mut self.names, thread, name);
    }

    /// The first I/O error met so far, if any (writing stopped there).
    pub fn error(&self) -> Option<&io::Error> {
        self.error.as_ref()
    }

    /// Pushes the buffered rows to the writer and flushes it, so that a process killed later
    /// loses only the rows written after this call. An error is kept: further rows are dropped
    /// and [`JobCsv::finish`] reports it.
    pub fn flush(&mut self) -> io::Result<()> {
        if let Some(e) = &self.error {
            return Err(io::Error::new(e.kind(), e.to_string()));
        }
        self.out.flush().inspect_err(|e| {
            self.error = Some(io::Error::new(e.kind(), e.to_string()));
        })
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

/// One row of a job CSV as read back, with the line it came from.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JobRow {
    pub task: String,
    pub job: u64,
    pub release_ns: u64,
    pub start_ns: u64,
    pub finish_ns: u64,
    /// Empty in the file (`None`) for a job without a deadline.
    pub deadline_ns: Option<u64>,
    pub response_ns: u64,
    /// Empty in the file (`None`) for a job without a deadline.
    pub normalised_laxity: Option<f64>,
    pub missed: bool,
    pub exec_ns: u64,
    pub preemptions: u32,
    pub migrations: u32,
    pub cpu: u32,
    /// 1-based line of the row in its file (the header is line 1).
    pub line: u64,
}

/// Why a job CSV could not be read. Every variant names the file; row problems name the line and
/// the column.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("{file}: {source}")]
    Io {
        file: String,
        #[source]
        source: io::Error,
    },
    #[error("{file}: line 1: missing column `{column}` (a job CSV has the columns {})", COLUMNS.join(","))]
    MissingColumn { file: String, column: &'static str },
    #[error("{file}: line {line}: {message}")]
    Csv {
        file: String,
        line: u64,
        message: String,
    },
    #[error("{file}: line {line}, column `{column}`: expected {expected}, found {found:?}")]
    Field {
        file: String,
        line: u64,
        column: &'static str,
        expected: &'static str,
        found: String,
    },
    #[error("{file}: line {line}: {message}")]
    Inconsistent {
        file: String,
        line: u64,
        message: String,
    },
    /// A Parquet jobs file that cannot be read (`row` 0: the file itself).
    #[error("{file}: row {row}: {message}")]
    Parquet { file: String, row: u64, message: String },
}

/// Streams the rows of a job CSV, checking each (see the module documentation).
pub struct JobReader<R: Read> {
    file: String,
    reader: ::csv::Reader<R>,
    /// Position of each known column in the file's header.
    index: [usize; 13],
    record: ::csv::StringRecord,
    failed: bool,
}

impl<R: Read> JobReader<R> {
    /// Reads the header of `input` and prepares to stream its rows; `file` names the source in
    /// error messages.
    pub fn new(input: R, file: &str) -> Result<Self, ReadError> {
        let mut reader = ::csv::ReaderBuilder::new().has_headers(true).from_reader(input);
        let headers = reader.headers().map_err(|e| csv_error(file, e))?.clone();
        let mut index = [0usize; 13];
        for (slot, column) in index.iter_mut().zip(COLUMNS) {
            *slot =
                headers
                    .iter()
                    .position(|h| h.trim() == column)
                    .ok_or_else(|| ReadError::MissingColumn {
                        file: file.to_string(),
                        column,
                    })?;
        }
        Ok(JobReader {
            file: file.to_string(),
            reader,
            index,
            record: ::csv::StringRecord::new(),
            failed: false,
        })
    }

    fn parse(&self) -> Result<JobRow, ReadError> {
        let r = &self.record;
        let line = r.position().map_or(0, |p| p.line());
        let field = |i: usize| r.get(self.index[i]).unwrap_or("").trim();
        let bad = |i: usize, expected: &'static str| ReadError::Field {
            file: self.file.clone(),
            line,
            column: COLUMNS[i],
            expected,
            found: field(i).to_string(),
        };
        let int = |i: usize| field(i).parse::<u64>().map_err(|_| bad(i, "an unsigned integer"));
        let maybe = |i: usize| (!field(i).is_empty()).then_some(i);
        let small = |i: usize| {
            field(i)
                .parse::<u32>()
                .map_err(|_| bad(i, "an unsigned 32-bit integer"))
        };
        let task = r.get(self.index[0]).unwrap_or("").to_string();
        if task.is_empty() {
            return Err(bad(0, "a task name"));
        }
        let row = JobRow {
            task,
            job: int(1)?,
            release_ns: int(2)?,
            start_ns: int(3)?,
            finish_ns: int(4)?,
            deadline_ns: maybe(5).map(int).transpose()?,
            response_ns: int(6)?,
            normalised_laxity: maybe(7)
                .map(|i| field(i).parse::<f64>().map_err(|_| bad(i, "a decimal number")))
                .transpose()?,
            missed: match field(8) {
                "0" => false,
                "1" => true,
                _ => return Err(bad(8, "0 or 1")),
            },
            exec_ns: int(9)?,
            preemptions: small(10)?,
            migrations: small(11)?,
            cpu: small(12)?,
            line,
        };
        let inconsistent = |message: String| ReadError::Inconsistent {
            file: self.file.clone(),
            line,
            message,
        };
        if row.finish_ns < row.release_ns {
            return Err(inconsistent(format!(
                "finish_ns {} is before release_ns {}",
                row.finish_ns, row.release_ns
            )));
        }
        if row.response_ns != row.finish_ns - row.release_ns {
            return Err(inconsistent(format!(
                "response_ns {} is not finish_ns − release_ns = {}",
                row.response_ns,
                row.finish_ns - row.release_ns
            )));
        }
        match row.deadline_ns {
            Some(deadline) if row.missed != (row.finish_ns > deadline) => {
                return Err(inconsistent(format!(
                    "missed is {} but finish_ns {} {} deadline_ns {}",
                    u8::from(row.missed),
                    row.finish_ns,
                    if row.finish_ns > deadline { ">" } else { "≤" },
                    deadline
                )));
            }
            None if row.missed => {
                return Err(inconsistent(
                    "missed is 1 but deadline_ns is empty (no deadline)".into(),
                ));
            }
            None if row.normalised_laxity.is_some() => {
                return Err(inconsistent(
                    "normalised_laxity is given but deadline_ns is empty (no deadline)".into(),
                ));
            }
            _ => {}
        }
        Ok(row)
    }
}

impl<R: Read> Iterator for JobReader<R> {
    type Item = Result<JobRow, ReadError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        let result = match self.reader.read_record(&mut self.record) {
            Ok(false) => return None,
            Ok(true) => self.parse(),
            Err(e) => Err(csv_error(&self.file, e)),
        };
        // The first error ends the stream: later rows of a malformed file mean little.
        self.failed = result.is_err();
        Some(result)
    }
}

fn csv_error(file: &str, e: ::csv::Error) -> ReadError {
    let line = e.position().map_or(0, |p| p.line());
    match e.into_kind() {
        ::csv::ErrorKind::Io(source) => ReadError::Io {
            file: file.to_string(),
            source,
        },
        ::csv::ErrorKind::UnequalLengths {
            expected_len, len, ..
        } => ReadError::Csv {
            file: file.to_string(),
            line,
            message: format!("{len} fields, but the header has {expected_len}"),
        },
        ::csv::ErrorKind::Utf8 { .. } => ReadError::Csv {
            file: file.to_string(),
            line,
            message: "not valid UTF-8".into(),
        },
        other => ReadError::Csv {
            file: file.to_string(),
            line,
            message: format!("{other:?}"),
        },
    }
}

/// Reads every row of the jobs file at `path` into memory: CSV, or Parquet when the name ends
/// in `.parquet` or `.pq` ([`super::parquet`]).
pub fn read_jobs(path: &Path) -> Result<Vec<JobRow>, ReadError> {
    if super::parquet::is_parquet(path) {
        return super::parquet::read_jobs_parquet(path);
    }
    let file = path.display().to_string();
    let f = std::fs::File::open(path).map_err(|source| ReadError::Io {
        file: file.clone(),
        source,
    })?;
    JobReader::new(io::BufReader::new(f), &file)?.collect()
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

    fn read_str(text: &str) -> Result<Vec<JobRow>, ReadError> {
        JobReader::new(text.as_bytes(), "jobs.csv")?.collect()
    }

    #[test]
    fn flush_pushes_buffered_rows_to_the_writer() {
        #[derive(Clone, Default)]
        struct Shared(std::rc::Rc<std::cell::RefCell<Vec<u8>>>);
        impl Write for Shared {
            fn write(&mut self, b: &[u8]) -> io::Result<usize> {
                self.0.borrow_mut().extend_from_slice(b);
                Ok(b.len())
            }
            fn flush(&mut self) -> io::Result<()> {
                Ok(())
            }
        }
        let sink = Shared::default();
        let mut csv = JobCsv::new(sink.clone(), vec!["a".into()]);
        csv.write(&rec(0, 0, 0, 5_000_000));
        assert!(sink.0.borrow().is_empty(), "rows wait in the buffer");
        csv.flush().unwrap();
        assert_eq!(String::from_utf8_lossy(&sink.0.borrow()).lines().count(), 2);
    }

    #[test]
    fn header_only_when_no_job() {
        let csv = JobCsv::new(Vec::new(), vec!["a".into()]);
        let out = csv.finish().unwrap();
        let text = String::from_utf8(out).unwrap();
        assert_eq!(text, format!("{}\n", COLUMNS.join(",")));
        assert_eq!(read_str(&text).unwrap(), vec![]);
    }

    #[test]
    fn threads_named_during_the_run() {
        let mut csv = JobCsv::new(Vec::new(), vec!["a".into()]);
        csv.write(&rec(3, 0, 0, 1_000_000));
        csv.set_name(3, "child-3-0000");
        csv.write(&rec(3, 1, 0, 2_000_000));
        csv.write(&rec(2, 0, 0, 2_000_000));
        let out = String::from_utf8(csv.finish().unwrap()).unwrap();
        let tasks: Vec<&str> = out
            .lines()
            .skip(1)
            .map(|l| l.split(',').next().unwrap())
            .collect();
        assert_eq!(tasks, ["t3", "child-3-0000", "t2"]);
    }

    #[test]
    fn unnamed_thread_and_quoting() {
        let mut csv = JobCsv::new(Vec::new(), vec!["a,\"b\"".into()]);
        csv.write(&rec(0, 0, 0, 3_000_000));
        csv.write(&rec(5, 7, 0, 12_000_000));
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

    #[test]
    fn writer_and_reader_round_trip_every_field() {
        let names = vec!["video".to_string(), "audio, \"left\"".to_string()];
        let records = [
            JobRecord {
                thread: 0,
                job: 0,
                release: 0,
                start: 1_500,
                finish: 3_000_001,
                deadline: 10_000_000,
                period: 10_000_000,
                exec: 2_999_999,
                preemptions: 2,
                migrations: 1,
                cpu: 3,
            },
            JobRecord {
                thread: 1,
                job: 41,
                release: 123_456_789_012,
                start: 123_456_789_012,
                finish: 123_456_796_012,
                deadline: 123_456_794_012,
                period: 6_000_000,
                exec: 4_000_000,
                preemptions: u32::MAX,
                migrations: 7,
                cpu: 0,
            },
            rec(2, u64::MAX / 4, 5, 6),
        ];
        let mut csv = JobCsv::new(Vec::new(), names);
        for r in &records {
            csv.write(r);
        }
        let text = String::from_utf8(csv.finish().unwrap()).unwrap();
        let rows = read_str(&text).unwrap();
        assert_eq!(rows.len(), 3);
        for (i, (row, r)) in rows.iter().zip(&records).enumerate() {
            assert_eq!(row.line, i as u64 + 2);
            assert_eq!(
                (
                    row.job,
                    row.release_ns,
                    row.start_ns,
                    row.finish_ns,
                    row.deadline_ns
                ),
                (r.job, r.release, r.start, r.finish, Some(r.deadline))
            );
            assert_eq!(row.response_ns, r.response_time());
            assert_eq!(row.missed, r.missed());
            // Shortest round-trip representation: the same double comes back.
            assert_eq!(
                row.normalised_laxity.map(f64::to_bits),
                Some(r.normalised_laxity().to_bits())
            );
            assert_eq!(
                (row.exec_ns, row.preemptions, row.migrations, row.cpu),
                (r.exec, r.preemptions, r.migrations, r.cpu)
            );
        }
        assert_eq!(
            [rows[0].task.as_str(), &rows[1].task, &rows[2].task],
            ["video", "audio, \"left\"", "t2"]
        );
        assert!(rows[1].missed);
    }

    #[test]
    fn a_job_without_a_deadline_has_empty_deadline_and_laxity() {
        let r = JobRecord {
            deadline: 1_000 + crate::jobs::NO_DEADLINE,
            period: crate::jobs::NO_DEADLINE,
            ..rec(0, 0, 1_000, 5_000)
        };
        assert!(!r.has_deadline());
        assert!(rec(0, 0, 0, 5).has_deadline());
        let mut csv = JobCsv::new(Vec::new(), vec!["a".into()]);
        csv.write(&r);
        let text = String::from_utf8(csv.finish().unwrap()).unwrap();
        let line = text.lines().nth(1).unwrap();
        assert_eq!(line, "a,0,1000,1001,5000,,4000,,0,2000000,1,0,1");
        assert!(!line.contains("4611686018427387903"));
        let rows = read_str(&text).unwrap();
        assert_eq!(
            (rows[0].deadline_ns, rows[0].normalised_laxity, rows[0].missed),
            (None, None, false)
        );
        // The model's stand-in is the value this module leaves out.
        assert_eq!(
            crate::ThreadSpec::default().relative_deadline_ns(),
            crate::jobs::NO_DEADLINE
        );
        // Without a deadline, nothing can be missed or have a laxity.
        let header = COLUMNS.join(",");
        let bad = format!("{header}\na,0,0,0,5,,5,,1,1,0,0,0\n");
        assert!(read_str(&bad)
            .unwrap_err()
            .to_string()
            .contains("deadline_ns is empty"));
        let bad = format!("{header}\na,0,0,0,5,,5,0.5,0,1,0,0,0\n");
        assert!(read_str(&bad)
            .unwrap_err()
            .to_string()
            .contains("deadline_ns is empty"));
    }

    #[test]
    fn reader_uses_header_names_and_ignores_unknown_columns() {
        let text = "extra,cpu,migrations,preemptions,exec_ns,missed,normalised_laxity,response_ns,\
deadline_ns,finish_ns,start_ns,release_ns,job,task\n\
x,1,0,0,5,0,0.5,5,10,5,0,0,3,a\n";
        let rows = read_str(text).unwrap();
        assert_eq!(rows.len(), 1);
        assert_eq!((rows[0].task.as_str(), rows[0].job, rows[0].cpu), ("a", 3, 1));
    }

    #[test]
    fn malformed_files_name_the_file_line_and_column() {
        let header = COLUMNS.join(",");
        let cases = [
            (
                "task,job\na,1\n".to_string(),
                "jobs.csv: line 1: missing column `release_ns`",
            ),
            (
                format!("{header}\na,0,0,0,5,10,5,0.5,0,1,0,0,0\nb,x,0,0,5,10,5,0.5,0,1,0,0,0\n"),
                "jobs.csv: line 3, column `job`: expected an unsigned integer, found \"x\"",
            ),
            (
                format!("{header}\na,0,0,0,5,10,5,0.5,2,1,0,0,0\n"),
                "line 2, column `missed`: expected 0 or 1",
            ),
            (
                format!("{header}\na,0,0,0,5,10,5,half,0,1,0,0,0\n"),
                "column `normalised_laxity`: expected a decimal number",
            ),
            (
                format!("{header}\na,0,0,0,5,10,4,0.5,0,1,0,0,0\n"),
                "line 2: response_ns 4 is not finish_ns − release_ns = 5",
            ),
            (
                format!("{header}\na,0,0,0,15,10,15,-0.5,0,1,0,0,0\n"),
                "line 2: missed is 0 but finish_ns 15 > deadline_ns 10",
            ),
            (
                format!("{header}\na,0,9,0,5,10,5,0.5,0,1,0,0,0\n"),
                "finish_ns 5 is before release_ns 9",
            ),
            (
                format!("{header}\na,0,0,0,5,10,5,0.5,0,1,0,0\n"),
                "jobs.csv: line 2: 12 fields, but the header has 13",
            ),
            (
                format!("{header}\n,0,0,0,5,10,5,0.5,0,1,0,0,0\n"),
                "column `task`: expected a task name",
            ),
        ];
        for (text, want) in cases {
            let err = read_str(&text).unwrap_err().to_string();
            assert!(err.contains(want), "got `{err}`, want `{want}`");
        }
        let missing = read_jobs(Path::new("/nonexistent/jobs.csv"))
            .unwrap_err()
            .to_string();
        assert!(missing.starts_with("/nonexistent/jobs.csv: "), "{missing}");
    }
}
