//! rt-app's ftrace markers (`global.ftrace`), written into tracefs `trace_marker` so that tools
//! reading rt-app traces (LISA's `rtapp_*` analyses) read pacer's runs unchanged. The texts, their
//! field order and units are rt-app's (src/rt-app.c, `log_ftrace()` calls), one marker per write:
//!
//! | category | marker | written |
//! |---|---|---|
//! | `main` | `rtapp_main: event=start` | when the run begins, before any thread exists |
//! | `task` | `rtapp_main: event=clock_ref data=<µs>` | once, with the common origin (CLOCK_MONOTONIC µs); rt-app files it under `task` too |
//! | `task` | `rtapp_task: event=start` / `event=end` | by each thread, after the start gate / after demoting itself |
//! | `loop` | `rtapp_loop: event=start thread_loop=T phase=P phase_loop=L` / `event=end …` | around each pass through a phase's events |
//! | `event` | `rtapp_event: id=I type=N desc=NAME` | before each event (`I` its position in the phase, `N` rt-app's `resource_t` number) |
//! | `stats` | `rtapp_stats: period=… run=… wu_lat=… slack=… c_period=… c_run=…` | after each pass, µs, the values of its log row |
//! | `main` | `rtapp_main: event=shutdown` | when the run's duration ends it (not on a signal, as in rt-app) |
//! | `main` | `rtapp_main: event=end` | after every thread has ended |
//!
//! A marker is written by the thread it describes (its pid and comm are in the trace's `print`
//! event), with one `write(2)` on a descriptor opened before the run, from a stack buffer: no
//! allocation, no lock, nothing but the system call rt-app makes too. Categories that are off
//! cost one branch. A write that fails (the buffer is full, tracing was turned off) is not an
//! error of the run: the trace is the tool's business, the measurements go on.

use std::fmt::{self, Write as _};
use std::fs::OpenOptions;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use pacer_workload::{Event, FtraceCategories, MemAccess};

/// Longest marker text; rt-app's own buffer starts at 512 bytes. Longer ones are cut.
const MAX_MARKER: usize = 256;

/// rt-app's `resource_t` number of an event (src/rt-app_types.h), the `type=` of its
/// `rtapp_event` marker. pacer's own events (`workUnits`, `boost`) have none there: 0, rt-app's
/// `rtapp_unknown`. A `timer` is always 10 (`rtapp_timer`): the model does not say whether its
/// reference was `unique` (11).
pub fn rtapp_event_type(ev: &Event) -> u32 {
    match ev {
        Event::Wait { .. } => 2,
        Event::Signal { .. } => 3,
        Event::Broadcast { .. } => 4,
        Event::Sleep { .. } => 5,
        Event::Run { .. } => 6,
        Event::SignalWait { .. } => 7,
        Event::Lock { .. } => 8,
        Event::Unlock { .. } => 9,
        Event::Timer { .. } => 10,
        Event::Suspend { .. } => 12,
        Event::Resume { .. } => 13,
        Event::Mem { .. } => 14,
        Event::MemRun { access, .. } => match access {
            MemAccess::Write => 15,
            MemAccess::Read => 16,
            MemAccess::Chase => 17,
        },
        Event::IoRun { .. } => 18,
        Event::Runtime { .. } => 19,
        Event::Yield => 20,
        Event::Barrier { .. } => 21,
        Event::Fork { .. } => 22,
        Event::SemWait { .. } => 23,
        Event::SemPost { .. } => 24,
        // pacer's own events have no rt-app type.
        Event::WorkUnits { .. } | Event::Boost { .. } | Event::WorkingSet(_) => 0,
    }
}

/// Where a thread is in its program, as rt-app counts it: the iteration of the whole phase list
/// (`thread_loop`), the phase, and the iteration of that phase (`phase_loop`), all from 0.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LoopPos {
    pub thread_loop: u64,
    pub phase: usize,
    pub phase_loop: u64,
}

/// The values of an `rtapp_stats` marker (µs; those of the pass's log row).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    pub period: u64,
    pub run: u64,
    pub wu_lat: u64,
    pub slack: i64,
    pub c_period: u64,
    pub c_run: u64,
}

/// Why the markers cannot be written.
#[derive(Debug, thiserror::Error)]
pub enum MarkerError {
    #[error("{path}: cannot open the ftrace marker file: {source} (the workload's `ftrace` setting asks for markers; tracefs is writable by root)")]
    Open {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// rt-app refuses to run in this case too: markers nobody records are a misconfiguration.
    #[error("{0}: tracing is off, so the markers the workload's `ftrace` setting asks for would be lost (echo 1 > {0})")]
    TracingOff(PathBuf),
    #[error("tracefs: {0}")]
    Tracefs(String),
}

/// The open marker file and the categories to write.
#[derive(Debug, Default)]
pub struct Markers {
    fd: Option<OwnedFd>,
    cats: FtraceCategories,
}

impl Markers {
    /// Writes nothing.
    pub fn none() -> Markers {
        Markers::default()
    }

    /// Opens `<dir>/trace_marker` for the categories `cats` (nothing is opened when none is on),
    /// after checking `<dir>/tracing_on` as rt-app does. `dir` is a tracefs root or one of its
    /// instances; `None` finds the tracefs mount.
    pub fn open(dir: Option<&Path>, cats: FtraceCategories) -> Result<Markers, MarkerError> {
        if !cats.any() {
            return Ok(Markers::none());
        }
        let dir = match dir {
            Some(d) => d.to_path_buf(),
            None => crate::trace::tracefs_root().map_err(|e| MarkerError::Tracefs(e.to_string()))?,
        };
        let on = dir.join("tracing_on");
        // An unreadable tracing_on says nothing; the open below reports what matters.
        if let Ok(text) = std::fs::read_to_string(&on) {
            if text.trim() == "0" {
                return Err(MarkerError::TracingOff(on));
            }
        }
        let path = dir.join("trace_marker");
        let f = OpenOptions::new()
            .write(true)
            .open(&path)
            .map_err(|source| MarkerError::Open { path, source })?;
        Ok(Markers {
            fd: Some(f.into()),
            cats,
        })
    }

    /// The categories written.
    pub fn categories(&self) -> FtraceCategories {
        if self.fd.is_some() {
            self.cats
        } else {
            FtraceCategories::default()
        }
    }

    fn emit(&self, on: bool, args: fmt::Arguments) {
        let Some(fd) = self.fd.as_ref().filter(|_| on) else {
            return;
        };
        let mut buf = StackBuf::default();
        // A marker longer than the buffer is cut, never split into two records.
        let _ = buf.write_fmt(args);
        // SAFETY: `fd` is open for the life of `self`; the kernel reads `len` initialised bytes.
        unsafe {
            libc::write(fd.as_raw_fd(), buf.bytes.as_ptr().cast(), buf.len);
        }
    }

    pub fn main_start(&self) {
        self.emit(self.cats.main, format_args!("rtapp_main: event=start"));
    }

    /// `origin_us`: the run's common origin, CLOCK_MONOTONIC µs.
    pub fn clock_ref(&self, origin_us: u64) {
        self.emit(
            self.cats.task,
            format_args!("rtapp_main: event=clock_ref data={origin_us}"),
        );
    }

    pub fn main_shutdown(&self) {
        self.emit(self.cats.main, format_args!("rtapp_main: event=shutdown"));
    }

    pub fn main_end(&self) {
        self.emit(self.cats.main, format_args!("rtapp_main: event=end"));
    }

    pub fn task(&self, start: bool) {
        let what = if start { "start" } else { "end" };
        self.emit(self.cats.task, format_args!("rtapp_task: event={what}"));
    }

    pub fn pass(&self, start: bool, p: LoopPos) {
        let what = if start { "start" } else { "end" };
        self.emit(
            self.cats.loops,
            format_args!(
                "rtapp_loop: event={what} thread_loop={} phase={} phase_loop={}",
                p.thread_loop, p.phase, p.phase_loop
            ),
        );
    }

    /// `desc`: rt-app's name of the event (`Phase::event_descs`); without one, its kind.
    pub fn event(&self, id: u32, ev: &Event, desc: Option<&str>) {
        self.emit(
            self.cats.event,
            format_args!(
                "rtapp_event: id={id} type={} desc={}",
                rtapp_event_type(ev),
                desc.unwrap_or(ev.rtapp_name())
            ),
        );
    }

    pub fn stats(&self, s: &Stats) {
        self.emit(
            self.cats.stats,
            format_args!(
                "rtapp_stats: period={} run={} wu_lat={} slack={} c_period={} c_run={}",
                s.period, s.run, s.wu_lat, s.slack, s.c_period, s.c_run
            ),
        );
    }
}

/// A fixed buffer `write!` fills without allocating; what does not fit is dropped.
struct StackBuf {
    bytes: [u8; MAX_MARKER],
    len: usize,
}

impl Default for StackBuf {
    fn default() -> Self {
        StackBuf {
            bytes: [0; MAX_MARKER],
            len: 0,
        }
    }
}

impl fmt::Write for StackBuf {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let room = MAX_MARKER - self.len;
        let n = s.len().min(room);
        self.bytes[self.len..self.len + n].copy_from_slice(&s.as_bytes()[..n]);
        self.len += n;
        if n < s.len() {
            Err(fmt::Error)
        } else {
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pacer_model::Duration;
    use pacer_workload::{ResourceId, TimerId, TimerMode, Work};
    use std::fmt::Write;

    /// Markers written into a plain file stand for tracefs: the texts are what matters here.
    fn into_file(cats: FtraceCategories) -> (tempfile::TempDir, Markers) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("tracing_on"), "1\n").unwrap();
        std::fs::write(dir.path().join("trace_marker"), "").unwrap();
        let m = Markers::open(Some(dir.path()), cats).unwrap();
        (dir, m)
    }

    fn lines(dir: &Path) -> Vec<String> {
        // Each marker is one write without a line end, as rt-app's; a file concatenates them, so
        // the test writes a separator of its own between them.
        std::fs::read_to_string(dir.join("trace_marker"))
            .unwrap()
            .split('|')
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect()
    }

    #[test]
    fn texts_are_rt_apps() {
        let (dir, m) = into_file(FtraceCategories::ALL);
        let sep = |m: &Markers| m.emit(true, format_args!("|"));
        m.main_start();
        sep(&m);
        m.clock_ref(8_348_400_624);
        sep(&m);
        m.task(true);
        sep(&m);
        let pos = LoopPos {
            thread_loop: 2,
            phase: 1,
            phase_loop: 3,
        };
        m.pass(true, pos);
        sep(&m);
        m.event(
            0,
            &Event::Run {
                work: Work::Fixed { ns: Duration(1000) },
            },
            Some("run0"),
        );
        sep(&m);
        m.event(
            1,
            &Event::Timer {
                timer: TimerId(0),
                period: Duration(1000),
                mode: TimerMode::Relative,
            },
            Some("timer:unique1"),
        );
        sep(&m);
        m.event(2, &Event::SemPost { sem: ResourceId(0) }, None);
        sep(&m);
        m.pass(false, pos);
        sep(&m);
        m.stats(&Stats {
            period: 10000,
            run: 2001,
            wu_lat: 54,
            slack: -15,
            c_period: 10000,
            c_run: 2000,
        });
        sep(&m);
        m.task(false);
        sep(&m);
        m.main_shutdown();
        sep(&m);
        m.main_end();
        assert_eq!(
            lines(dir.path()),
            [
                "rtapp_main: event=start",
                "rtapp_main: event=clock_ref data=8348400624",
                "rtapp_task: event=start",
                "rtapp_loop: event=start thread_loop=2 phase=1 phase_loop=3",
                "rtapp_event: id=0 type=6 desc=run0",
                "rtapp_event: id=1 type=10 desc=timer:unique1",
                "rtapp_event: id=2 type=24 desc=sem_post",
                "rtapp_loop: event=end thread_loop=2 phase=1 phase_loop=3",
                "rtapp_stats: period=10000 run=2001 wu_lat=54 slack=-15 c_period=10000 c_run=2000",
                "rtapp_task: event=end",
                "rtapp_main: event=shutdown",
                "rtapp_main: event=end",
            ]
        );
    }

    #[test]
    fn categories_filter_and_nothing_is_opened_without_one() {
        let cats = FtraceCategories {
            loops: true,
            ..FtraceCategories::default()
        };
        let (dir, m) = into_file(cats);
        m.main_start();
        m.task(true);
        m.pass(true, LoopPos::default());
        m.stats(&Stats::default());
        assert_eq!(
            lines(dir.path()),
            ["rtapp_loop: event=start thread_loop=0 phase=0 phase_loop=0"]
        );
        // No category: no file is needed at all.
        let m = Markers::open(Some(Path::new("/nonexistent")), FtraceCategories::default()).unwrap();
        assert_eq!(m.categories(), FtraceCategories::default());
        m.main_start();
    }

    #[test]
    fn tracing_off_and_a_missing_marker_file_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("tracing_on"), "0\n").unwrap();
        let e = Markers::open(Some(dir.path()), FtraceCategories::ALL).unwrap_err();
        assert!(matches!(e, MarkerError::TracingOff(_)), "{e}");
        std::fs::write(dir.path().join("tracing_on"), "1\n").unwrap();
        let e = Markers::open(Some(dir.path()), FtraceCategories::ALL).unwrap_err();
        assert!(e.to_string().contains("trace_marker"), "{e}");
    }

    #[test]
    fn long_markers_are_cut_not_split() {
        let mut b = StackBuf::default();
        let long = "x".repeat(MAX_MARKER + 10);
        assert!(write!(b, "{long}").is_err());
        assert_eq!(b.len, MAX_MARKER);
    }

    #[test]
    fn every_rt_app_event_has_rt_apps_number() {
        let r = ResourceId(0);
        let memrun = |access| Event::MemRun {
            buffer: pacer_workload::MemBufferId(0),
            access,
            count: 1,
        };
        let cases = [
            (
                Event::Sleep {
                    duration: Duration(1),
                },
                5,
            ),
            (
                Event::Runtime {
                    duration: Duration(1),
                },
                19,
            ),
            (Event::Yield, 20),
            (Event::Lock { mutex: r }, 8),
            (Event::Unlock { mutex: r }, 9),
            (Event::Wait { cond: r, mutex: r }, 2),
            (Event::Signal { cond: r }, 3),
            (Event::Broadcast { cond: r }, 4),
            (Event::SignalWait { cond: r, mutex: r }, 7),
            (Event::Barrier { barrier: r }, 21),
            (Event::Suspend { cond: r, mutex: r }, 12),
            (Event::Resume { cond: r, mutex: r }, 13),
            (Event::SemWait { sem: r }, 23),
            (Event::Mem { bytes: 1 }, 14),
            (Event::IoRun { bytes: 1 }, 18),
            (memrun(MemAccess::Write), 15),
            (memrun(MemAccess::Read), 16),
            (memrun(MemAccess::Chase), 17),
            (Event::Fork { thread: 0 }, 22),
            (Event::WorkUnits { units: 1 }, 0),
        ];
        for (ev, n) in cases {
            assert_eq!(rtapp_event_type(&ev), n, "{}", ev.rtapp_name());
        }
    }
}
