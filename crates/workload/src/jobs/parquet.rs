//! The per-job records as Apache Parquet (`--jobs out.parquet`): the same columns, names and
//! meaning as the CSV (docs/formats/jobs-csv.md, [`super::COLUMNS`]), typed, compressed
//! (Snappy) and columnar, so pandas, polars, DuckDB and Arrow read a run of millions of jobs
//! without parsing text.
//!
//! Writing keeps memory bounded by one row group ([`ROW_GROUP`] rows buffered column by column),
//! whatever the number of jobs. The low-level column writers of the `parquet` crate are used
//! rather than its Arrow layer: the rows are plain integers and one string per job, and Arrow
//! would add a large dependency for nothing the file needs.
//!
//! Column types: `task` UTF-8 string; `job`, `*_ns` unsigned 64-bit; `deadline_ns` and
//! `normalised_laxity` optional (null for a job without a deadline, as the CSV leaves them
//! empty); `normalised_laxity` double; `missed` boolean; `preemptions`, `migrations`, `cpu`
//! unsigned 32-bit.

use std::fs::File;
use std::io::{self, Write};
use std::path::Path;
use std::sync::Arc;

use parquet::basic::Compression;
use parquet::data_type::{BoolType, ByteArray, ByteArrayType, DoubleType, Int32Type, Int64Type};
use parquet::file::properties::WriterProperties;
use parquet::file::reader::SerializedFileReader;
use parquet::file::writer::SerializedFileWriter;
use parquet::record::RowAccessor;
use parquet::schema::parser::parse_message_type;

use super::csv::{JobRow, ReadError};
use super::{thread_name, JobRecord};

/// Rows buffered before a row group is written.
pub const ROW_GROUP: usize = 64 * 1024;

/// The file's schema; column order is the CSV's.
const SCHEMA: &str = "message pacer_jobs {
  REQUIRED BYTE_ARRAY task (UTF8);
  REQUIRED INT64 job (INTEGER(64,false));
  REQUIRED INT64 release_ns (INTEGER(64,false));
  REQUIRED INT64 start_ns (INTEGER(64,false));
  REQUIRED INT64 finish_ns (INTEGER(64,false));
  OPTIONAL INT64 deadline_ns (INTEGER(64,false));
  REQUIRED INT64 response_ns (INTEGER(64,false));
  OPTIONAL DOUBLE normalised_laxity;
  REQUIRED BOOLEAN missed;
  REQUIRED INT64 exec_ns (INTEGER(64,false));
  REQUIRED INT32 preemptions (INTEGER(32,false));
  REQUIRED INT32 migrations (INTEGER(32,false));
  REQUIRED INT32 cpu (INTEGER(32,false));
}";

/// Columns of the rows not yet written.
#[derive(Default)]
struct Columns {
    task: Vec<ByteArray>,
    job: Vec<i64>,
    release: Vec<i64>,
    start: Vec<i64>,
    finish: Vec<i64>,
    deadline: Vec<i64>,
    deadline_def: Vec<i16>,
    response: Vec<i64>,
    laxity: Vec<f64>,
    laxity_def: Vec<i16>,
    missed: Vec<bool>,
    exec: Vec<i64>,
    preemptions: Vec<i32>,
    migrations: Vec<i32>,
    cpu: Vec<i32>,
}

impl Columns {
    fn len(&self) -> usize {
        self.job.len()
    }

    fn clear(&mut self) {
        *self = Columns::default();
    }
}

/// Parquet stores unsigned integers in signed physical types, bit for bit.
fn u(v: u64) -> i64 {
    v as i64
}

/// Streams job records into a Parquet file.
pub struct JobParquet<W: Write + Send> {
    file: Option<SerializedFileWriter<W>>,
    names: Vec<String>,
    cols: Columns,
    error: Option<io::Error>,
}

fn to_io(e: parquet::errors::ParquetError) -> io::Error {
    io::Error::other(e.to_string())
}

impl<W: Write + Send> JobParquet<W> {
    /// Starts a file on `writer`; `names[i]` is the `task` of thread `i`.
    pub fn new(writer: W, names: Vec<String>) -> io::Result<Self> {
        let schema = Arc::new(parse_message_type(SCHEMA).map_err(to_io)?);
        let props = Arc::new(
            WriterProperties::builder()
                .set_compression(Compression::SNAPPY)
                .set_created_by(format!("pacer {}", env!("CARGO_PKG_VERSION")))
                .build(),
        );
        let file = SerializedFileWriter::new(writer, schema, props).map_err(to_io)?;
        Ok(JobParquet {
            file: Some(file),
            names,
            cols: Columns::default(),
            error: None,
        })
    }

    /// The first error met so far, if any (writing stopped there).
    pub fn error(&self) -> Option<&io::Error> {
        self.error.as_ref()
    }

    /// Names thread `thread` (a thread that appears during the run: rt-app's fork).
    pub fn set_name(&mut self, thread: u32, name: &str) {
        super::set_thread_name(&mut self.names, thread, name);
    }

    /// Appends one job (a no-op after the first error, which [`JobParquet::finish`] reports).
    pub fn write(&mut self, r: &JobRecord) {
        if self.error.is_some() {
            return;
        }
        let c = &mut self.cols;
        c.task.push(ByteArray::from(
            thread_name(&self.names, r.thread).as_bytes().to_vec(),
        ));
        c.job.push(u(r.job));
        c.release.push(u(r.release));
        c.start.push(u(r.start));
        c.finish.push(u(r.finish));
        if r.has_deadline() {
            c.deadline.push(u(r.deadline));
            c.deadline_def.push(1);
            c.laxity.push(r.normalised_laxity());
            c.laxity_def.push(1);
        } else {
            c.deadline_def.push(0);
            c.laxity_def.push(0);
        }
        c.response.push(u(r.response_time()));
        c.missed.push(r.has_deadline() && r.missed());
        c.exec.push(u(r.exec));
        c.preemptions.push(r.preemptions as i32);
        c.migrations.push(r.migrations as i32);
        c.cpu.push(r.cpu as i32);
        if c.len() >= ROW_GROUP {
            if let Err(e) = self.flush_group() {
                self.error = Some(e);
            }
        }
    }

    /// Writes the buffered rows as one row group.
    fn flush_group(&mut self) -> io::Result<()> {
        if self.cols.len() == 0 {
            return Ok(());
        }
        let Some(file) = self.file.as_mut() else {
            return Ok(());
        };
        let c = &self.cols;
        let mut group = file.next_row_group().map_err(to_io)?;
        let mut i = 0;
        while let Some(mut col) = group.next_column().map_err(to_io)? {
            let r = match i {
                0 => col.typed::<ByteArrayType>().write_batch(&c.task, None, None),
                1 => col.typed::<Int64Type>().write_batch(&c.job, None, None),
                2 => col.typed::<Int64Type>().write_batch(&c.release, None, None),
                3 => col.typed::<Int64Type>().write_batch(&c.start, None, None),
                4 => col.typed::<Int64Type>().write_batch(&c.finish, None, None),
                5 => col
                    .typed::<Int64Type>()
                    .write_batch(&c.deadline, Some(&c.deadline_def), None),
                6 => col.typed::<Int64Type>().write_batch(&c.response, None, None),
                7 => col
                    .typed::<DoubleType>()
                    .write_batch(&c.laxity, Some(&c.laxity_def), None),
                8 => col.typed::<BoolType>().write_batch(&c.missed, None, None),
                9 => col.typed::<Int64Type>().write_batch(&c.exec, None, None),
                10 => col.typed::<Int32Type>().write_batch(&c.preemptions, None, None),
                11 => col.typed::<Int32Type>().write_batch(&c.migrations, None, None),
                _ => col.typed::<Int32Type>().write_batch(&c.cpu, None, None),
            };
            r.map_err(to_io)?;
            col.close().map_err(to_io)?;
            i += 1;
        }
        group.close().map_err(to_io)?;
        self.cols.clear();
        Ok(())
    }

    /// Writes what is buffered and the file's footer; the file is complete only if this
    /// succeeds. Returns the writer.
    pub fn finish(mut self) -> io::Result<W> {
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        self.flush_group()?;
        let file = self
            .file
            .take()
            .ok_or_else(|| io::Error::other("the Parquet writer was already finished"))?;
        file.into_inner().map_err(to_io)
    }
}

/// Whether `path` names a Parquet file (by its extension), for `--jobs` and `pacer compare`.
pub fn is_parquet(path: &Path) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| e.eq_ignore_ascii_case("parquet") || e.eq_ignore_ascii_case("pq"))
}

/// Reads every row of a jobs Parquet file written by [`JobParquet`] (or by anyone with the same
/// column names and types), as the CSV reader's [`JobRow`]s. `line` is the 1-based row number.
pub fn read_jobs_parquet(path: &Path) -> Result<Vec<JobRow>, ReadError> {
    let file_name = path.display().to_string();
    let bad = |row: u64, what: String| ReadError::Parquet {
        file: file_name.clone(),
        row,
        message: what,
    };
    let f = File::open(path).map_err(|source| ReadError::Io {
        file: file_name.clone(),
        source,
    })?;
    let reader = SerializedFileReader::new(f).map_err(|e| bad(0, e.to_string()))?;
    let mut out = Vec::new();
    for (i, row) in reader.into_iter().enumerate() {
        let n = i as u64 + 1;
        let row = row.map_err(|e| bad(n, e.to_string()))?;
        let get = |c: usize| row.get_ulong(c).map_err(|e| bad(n, format!("column {c}: {e}")));
        let get32 = |c: usize| row.get_uint(c).map_err(|e| bad(n, format!("column {c}: {e}")));
        let task = row
            .get_string(0)
            .map_err(|e| bad(n, format!("task: {e}")))?
            .clone();
        out.push(JobRow {
            task,
            job: get(1)?,
            release_ns: get(2)?,
            start_ns: get(3)?,
            finish_ns: get(4)?,
            deadline_ns: row.get_ulong(5).ok(),
            response_ns: get(6)?,
            normalised_laxity: row.get_double(7).ok(),
            missed: row.get_bool(8).map_err(|e| bad(n, format!("missed: {e}")))?,
            exec_ns: get(9)?,
            preemptions: get32(10)?,
            migrations: get32(11)?,
            cpu: get32(12)?,
            line: n,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jobs::csv::JobReader;
    use crate::jobs::{JobCsv, NO_DEADLINE};

    fn rec(thread: u32, job: u64, deadline: bool) -> JobRecord {
        let release = job * 1_000_000;
        JobRecord {
            thread,
            job,
            release,
            start: release + 10 + job % 7,
            finish: release + 500_000 + (job % 13) * 100_000,
            deadline: if deadline {
                release + 1_000_000
            } else {
                release + NO_DEADLINE
            },
            period: 1_000_000,
            exec: 400_000 + job,
            preemptions: (job % 3) as u32,
            migrations: (job % 2) as u32,
            cpu: (job % 4) as u32,
        }
    }

    /// The same records through the CSV and through Parquet read back as the same rows, over
    /// more than one row group, with and without deadlines, and for a thread named late.
    #[test]
    fn parquet_holds_what_the_csv_holds() {
        let recs: Vec<JobRecord> = (0..(ROW_GROUP as u64 + 5000))
            .map(|j| rec((j % 3) as u32, j / 3, j % 5 != 0))
            .collect();
        let names = vec!["a".to_string(), "b".to_string()];
        let mut csv = JobCsv::new(Vec::new(), names.clone());
        let dir = std::env::temp_dir().join(format!("pacer-parquet-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("jobs.parquet");
        let mut pq = JobParquet::new(File::create(&path).unwrap(), names).unwrap();
        csv.set_name(2, "forked");
        pq.set_name(2, "forked");
        for r in &recs {
            csv.write(r);
            pq.write(r);
        }
        let text = csv.finish().unwrap();
        pq.finish().unwrap();
        let from_csv: Vec<JobRow> = JobReader::new(text.as_slice(), "jobs.csv")
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        let from_pq = read_jobs_parquet(&path).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(from_pq.len(), recs.len());
        for (c, p) in from_csv.iter().zip(&from_pq) {
            // The CSV's line numbers count its header; the rows are otherwise identical.
            assert_eq!(JobRow { line: 0, ..c.clone() }, JobRow { line: 0, ..p.clone() });
        }
        assert!(from_pq
            .iter()
            .any(|r| r.deadline_ns.is_none() && r.normalised_laxity.is_none()));
        assert!(from_pq.iter().any(|r| r.task == "forked"));
    }

    #[test]
    fn a_file_that_is_not_parquet_is_named_in_the_error() {
        let dir = std::env::temp_dir().join(format!("pacer-parquet-bad-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("x.parquet");
        std::fs::write(&path, b"task,job\n").unwrap();
        let e = read_jobs_parquet(&path).unwrap_err().to_string();
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(e.contains("x.parquet") && e.contains("row 0"), "{e}");
        assert!(is_parquet(Path::new("a/B.PARQUET")) && !is_parquet(Path::new("a.csv")));
    }
}
