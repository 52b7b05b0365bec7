//! rt-app-compatible per-thread logs: one `<logdir>/<log_basename>-<thread>.log` file per thread,
//! where `<thread>` is rt-app's thread name `<task>-<index>` (`ThreadSpec::rtapp_name`), with
//! rt-app's header, columns, widths and units, so scripts written for rt-app's logs (LISA globs
//! `<log_basename>-*.log` and reads the columns after the `#idx` header) read them unchanged.
//!
//! rt-app (src/rt-app.c `thread_body()`, src/rt-app_utils.c `log_timing()`) writes one row per
//! pass through a phase's events ("loop"), after the header
//! `#idx perf run period start end rel_st slack c_duration c_period wu_lat`, all times in µs:
//!
//! | column | meaning (rt-app) | here |
//! |---|---|---|
//! | `idx` | thread index | exact |
//! | `perf` | work done: Σ run µs / ns-per-loop, i.e. thousands of calibrated loops | exact for pacer's loop (not comparable with rt-app's numbers, which count a different loop) |
//! | `run` | wall-clock time spent in `run`/`runtime` events | exact |
//! | `period` | wall-clock length of the pass (`end − start`) | exact |
//! | `start`, `end` | CLOCK_MONOTONIC at the start and end of the pass | exact |
//! | `rel_st` | `start` − start of the run | exact (pacer's origin is the common start of its threads; rt-app's is just before it creates them) |
//! | `slack` | timer expiry − now at the last `timer` event of the pass (negative: late) | exact |
//! | `c_duration` | configured work of the pass's `run`/`runtime` events | exact (for drawn work, the amount drawn) |
//! | `c_period` | Σ configured periods of the pass's `timer` events | exact |
//! | `wu_lat` | Σ wake-up latency after the pass's timers (now − expiry), 0 after a late timer | exact |
//!
//! As in rt-app, a pass cut short by the end of the run is not logged. `/` in a name becomes `_`
//! so every file stays inside the directory.
//!
//! Where the rows wait before they reach the file is rt-app's `log_size` ([`LogMode`]): with a
//! buffer, each thread keeps its rows in memory it allocated before the run (the last rows that
//! fit, as rt-app's ring) and they are written after the run; without one, they go to the
//! executor's writer as the run goes on.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use serde::Serialize;

/// One row of an rt-app log (µs; see the module documentation for each column).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct LogRow {
    pub idx: u32,
    pub perf: u64,
    pub run: u64,
    pub period: u64,
    pub start: u64,
    pub end: u64,
    pub rel_st: u64,
    pub slack: i64,
    pub c_duration: u64,
    pub c_period: u64,
    pub wu_lat: u64,
}

/// rt-app's header line (without the line end).
pub fn header() -> String {
    format!(
        "{} {:>8} {:>8} {:>8} {:>15} {:>15} {:>15} {:>10} {:>10} {:>10} {:>10}",
        "#idx",
        "perf",
        "run",
        "period",
        "start",
        "end",
        "rel_st",
        "slack",
        "c_duration",
        "c_period",
        "wu_lat"
    )
}

/// One row in rt-app's format (`"%4d %8lu %8lu %8lu %15llu %15llu %15llu %10ld %10lu %10lu %10lu"`).
pub fn format_row(r: &LogRow) -> String {
    format!(
        "{:4} {:8} {:8} {:8} {:15} {:15} {:15} {:10} {:10} {:10} {:10}",
        r.idx, r.perf, r.run, r.period, r.start, r.end, r.rel_st, r.slack, r.c_duration, r.c_period, r.wu_lat
    )
}

/// ns → µs rounded to nearest, as rt-app's `timespec_to_usec()` (`lround(ns / 1000.0)`).
pub fn us(ns: u64) -> u64 {
    ns / 1000 + u64::from(ns % 1000 >= 500)
}

/// Signed ns → µs rounded to nearest (half away from zero, as `lround`).
pub fn us_signed(ns: i64) -> i64 {
    let m = us(ns.unsigned_abs()).min(i64::MAX as u64) as i64;
    if ns < 0 {
        -m
    } else {
        m
    }
}

/// The log file of the thread named `thread` (rt-app's `<task>-<index>`) in `dir`, as rt-app
/// names it: `<dir>/<basename>-<thread>.log`.
pub fn log_path(dir: &Path, basename: &str, thread: &str) -> PathBuf {
    let safe = |s: &str| -> String {
        s.chars()
            .map(|c| if c == '/' || c == '\0' { '_' } else { c })
            .collect()
    };
    dir.join(format!("{}-{}.log", safe(basename), safe(thread)))
}

/// Where log rows wait before they reach the file (rt-app's `global.log_size`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogMode {
    /// No rows at all (`"disable"`): nothing is measured for them or sent.
    Off,
    /// Each row goes to the writer when its pass ends (`"file"`, `"auto"`, no `log_size`).
    Stream,
    /// Each thread keeps its last `rows` rows in memory allocated before the run, handed over
    /// when it ends (a size in MiB: rt-app's ring of `timing_point_t`, which has the size of a
    /// [`LogRow`]).
    Buffer { rows: usize },
}

impl LogMode {
    /// The mode of rt-app's `log_size` as the workload model keeps it: `None` = the file
    /// system, `Some(0)` = disabled, `Some(bytes)` = a buffer of that many bytes per thread.
    pub fn from_log_size(log_size: Option<u64>) -> LogMode {
        match log_size {
            None => LogMode::Stream,
            Some(0) => LogMode::Off,
            Some(bytes) => LogMode::Buffer {
                rows: usize::try_from(bytes / std::mem::size_of::<LogRow>() as u64)
                    .unwrap_or(usize::MAX)
                    .max(1),
            },
        }
    }
}

/// A thread's preallocated ring of log rows ([`LogMode::Buffer`]): pushing never allocates; once
/// full, the oldest row is overwritten, as in rt-app.
#[derive(Debug, Default)]
pub(crate) struct LogRing {
    rows: Vec<LogRow>,
    /// Where the next row goes once `rows` is full.
    next: usize,
}

impl LogRing {
    pub(crate) fn with_capacity(rows: usize) -> LogRing {
        LogRing {
            rows: Vec::with_capacity(rows.max(1)),
            next: 0,
        }
    }

    pub(crate) fn push(&mut self, row: LogRow) {
        if self.rows.len() < self.rows.capacity() {
            self.rows.push(row);
        } else if let Some(slot) = self.rows.get_mut(self.next) {
            *slot = row;
            self.next = (self.next + 1) % self.rows.len();
        }
    }

    /// The rows, oldest first.
    pub(crate) fn into_rows(mut self) -> Vec<LogRow> {
        self.rows.rotate_left(self.next);
        self.rows
    }
}

/// The open log files of a run.
pub struct RtAppLogs {
    files: Vec<(PathBuf, BufWriter<File>)>,
}

impl RtAppLogs {
    /// Creates one log per thread in `dir`, which must exist, named after `basename` and each
    /// thread's rt-app name, and writes the headers. An existing file is an error: it is left
    /// alone (callers that replace earlier logs on purpose open the files themselves, see
    /// [`RtAppLogs::from_files`]).
    pub fn create(dir: &Path, basename: &str, names: &[String]) -> io::Result<RtAppLogs> {
        if !dir.is_dir() {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("{}: not a directory", dir.display()),
            ));
        }
        let mut files = Vec::with_capacity(names.len());
        for name in names {
            let path = log_path(dir, basename, name);
            let f = File::options()
                .write(true)
                .create_new(true)
                .open(&path)
                .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
            files.push((path, f));
        }
        RtAppLogs::from_files(files)
    }

    /// Writes the logs into files the caller opened, one per thread in thread order (`pacer run`
    /// writes temporary files it renames into place after the run); each path names its file in
    /// error messages. Writes the headers.
    pub fn from_files(files: Vec<(PathBuf, File)>) -> io::Result<RtAppLogs> {
        let mut out = Vec::with_capacity(files.len());
        for (path, f) in files {
            let mut w = BufWriter::new(f);
            writeln!(w, "{}", header())
                .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
            out.push((path, w));
        }
        Ok(RtAppLogs { files: out })
    }

    /// Adds the log of the next thread (a thread a `fork` started: its id is the number of logs
    /// so far) in a file the caller opened, and writes its header.
    pub fn add(&mut self, path: PathBuf, file: File) -> io::Result<()> {
        let mut w = BufWriter::new(file);
        writeln!(w, "{}", header())
            .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
        self.files.push((path, w));
        Ok(())
    }

    /// Number of logs (threads) so far.
    pub fn len(&self) -> usize {
        self.files.len()
    }

    /// Whether there is no log at all.
    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    /// Pushes the buffered rows to the files, so a killed run loses only the rows written since;
    /// the first error names its file.
    pub fn flush(&mut self) -> io::Result<()> {
        for (path, w) in &mut self.files {
            w.flush()
                .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
        }
        Ok(())
    }

    /// Appends a row to thread `thread`'s log.
    pub fn write(&mut self, thread: u32, row: &LogRow) -> io::Result<()> {
        let Some((path, w)) = self.files.get_mut(thread as usize) else {
            return Ok(());
        };
        writeln!(w, "{}", format_row(row))
            .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))
    }

    /// Flushes every file; the first error names its file.
    pub fn finish(self) -> io::Result<()> {
        for (path, mut w) in self.files {
            w.flush()
                .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
        }
        Ok(())
    }

    /// The files, in thread order.
    pub fn paths(&self) -> Vec<PathBuf> {
        self.files.iter().map(|(p, _)| p.clone()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rt_app_layout() {
        assert_eq!(
            header(),
            "#idx     perf      run   period           start             end          rel_st      slack c_duration   c_period     wu_lat"
        );
        let r = LogRow {
            idx: 1,
            perf: 123,
            run: 2001,
            period: 10000,
            start: 8_348_400_624_293,
            end: 8_348_400_634_293,
            rel_st: 20_000,
            slack: -15,
            c_duration: 2000,
            c_period: 10000,
            wu_lat: 54,
        };
        assert_eq!(
            format_row(&r),
            "   1      123     2001    10000   8348400624293   8348400634293           20000        -15       2000      10000         54"
        );
        // Columns line up with the header.
        assert_eq!(format_row(&r).len(), header().len());
    }

    #[test]
    fn rounding_and_paths() {
        assert_eq!((us(1499), us(1500), us(0)), (1, 2, 0));
        assert_eq!((us_signed(-1500), us_signed(-1499), us_signed(2500)), (-2, -1, 3));
        let p = log_path(Path::new("/tmp/x"), "rt-app", "a/b-3");
        assert_eq!(p, Path::new("/tmp/x/rt-app-a_b-3.log"));
    }

    #[test]
    fn log_size_modes_and_the_ring_keeps_the_last_rows() {
        assert_eq!(
            std::mem::size_of::<LogRow>(),
            88,
            "rt-app's timing_point_t on 64-bit Linux"
        );
        assert_eq!(LogMode::from_log_size(None), LogMode::Stream);
        assert_eq!(LogMode::from_log_size(Some(0)), LogMode::Off);
        assert_eq!(
            LogMode::from_log_size(Some(1 << 20)),
            LogMode::Buffer { rows: 11915 }
        );
        assert_eq!(LogMode::from_log_size(Some(1)), LogMode::Buffer { rows: 1 });
        let row = |idx| LogRow {
            idx,
            ..LogRow::default()
        };
        let mut ring = LogRing::with_capacity(3);
        for i in 0..2 {
            ring.push(row(i));
        }
        let idx = |r: Vec<LogRow>| r.iter().map(|r| r.idx).collect::<Vec<_>>();
        assert_eq!(idx(ring.into_rows()), [0, 1]);
        let mut ring = LogRing::with_capacity(3);
        for i in 0..7 {
            ring.push(row(i));
        }
        assert_eq!(idx(ring.into_rows()), [4, 5, 6]);
    }

    #[test]
    fn files_are_written() {
        let dir = tempfile::tempdir().unwrap();
        let mut logs = RtAppLogs::create(dir.path(), "rt-app", &["a-0".into(), "b-1".into()]).unwrap();
        logs.write(1, &LogRow::default()).unwrap();
        let paths = logs.paths();
        logs.finish().unwrap();
        assert_eq!(std::fs::read_to_string(&paths[0]).unwrap().lines().count(), 1);
        let b = std::fs::read_to_string(&paths[1]).unwrap();
        assert_eq!(b.lines().count(), 2);
        assert!(b.starts_with("#idx"));
        assert_eq!(paths[1], dir.path().join("rt-app-b-1.log"));
        assert!(RtAppLogs::create(&dir.path().join("missing"), "rt-app", &["a-0".into()]).is_err());
        // Logs already there are never replaced by `create`.
        let e = RtAppLogs::create(dir.path(), "rt-app", &["b-1".into()])
            .err()
            .unwrap();
        assert_eq!(e.kind(), io::ErrorKind::AlreadyExists);
        assert_eq!(std::fs::read_to_string(&paths[1]).unwrap(), b);
    }
}
