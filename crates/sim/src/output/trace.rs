//! Chrome trace-event JSON of a run, to look at a schedule in the Perfetto UI (or
//! `chrome://tracing`): which thread ran on which CPU when, each job from release to finish, and
//! the scheduler's throttling, replenishment, migrations and deadline misses.
//!
//! The file is the "JSON Object Format" of the Trace Event Format:
//! `{"traceEvents":[…],"displayTimeUnit":"ns"}`, with `ts`/`dur` in microseconds written as
//! decimal numbers with exactly three decimals (so nanoseconds are exact). Layout:
//!
//! - process `pid 1` "CPUs": one thread track per CPU (`tid 2·cpu + 3`, named "CPU n") with a
//!   complete (`"X"`) slice named after the running thread for every interval it ran, built from
//!   consecutive [`TraceEvent::Switch`]es of that CPU; idle time is left empty.
//! - process `pid 2` "tasks": one thread track per simulated thread (`tid 2·thread + 4`, named
//!   after it) with a complete slice "job N" per job from its release to its finish (args
//!   `release_us`, `deadline_us`, `response_us`, `exec_us`, `missed`, `preemptions`,
//!   `migrations`, `cpu`) and thread-scoped instant (`"i"`, `"s":"t"`) events "throttle" (args
//!   `until_us`), "replenish", "migrate" (args `from`, `to`) and "deadline miss" (at the deadline;
//!   args `job`, `finish_us`).
//! - counter (`"C"`) events "cluster k kHz" in the CPUs process, one per frequency change
//!   ([`TraceEvent::Frequency`]).
//! - metadata (`"M"`) events `process_name`, `process_sort_index`, `thread_name` and
//!   `thread_sort_index` name and order the tracks. They carry no `ts`.
//!
//! pids and tids start at 1 and are unique across the two processes, because Perfetto treats
//! pid/tid 0 specially and identifies threads by tid. Job slices come from
//! [`Observer::job`] (which carries release, deadline and miss), not from
//! [`TraceEvent::Finish`]; should a job be released before the previous job of the same thread has
//! finished, its slice is drawn from that finish (slices on one track must nest), and `release_us`
//! keeps the true release.
//!
//! Events are written as they arrive; only the start of the current slice of each CPU and the
//! latest release of each thread are kept. [`ChromeTrace::finish`] closes what is still open at the
//! end of the run, closes the JSON, and reports the first I/O error (an observer cannot).

use std::fmt::Write as _;
use std::io::{self, BufWriter, Write};

use super::{thread_name, StopOnError};
use crate::record::{JobRecord, Observer, ThreadId, TraceEvent};

/// pid of the process holding one track per CPU.
pub const CPUS_PID: u32 = 1;
/// pid of the process holding one track per simulated thread.
pub const TASKS_PID: u32 = 2;

/// tid of the track of CPU `cpu`.
pub fn cpu_tid(cpu: u32) -> u64 {
    2 * u64::from(cpu) + 3
}

/// tid of the track of simulated thread `thread`.
pub fn thread_tid(thread: ThreadId) -> u64 {
    2 * u64::from(thread) + 4
}

/// Per-thread state needed to draw job slices.
#[derive(Debug, Clone, Copy, Default)]
struct JobTrack {
    /// Latest release seen: (job number, time).
    released: Option<(u64, u64)>,
    /// Number of the latest finished job.
    finished: Option<u64>,
    /// Finish time of the latest finished job.
    last_finish: u64,
}

/// An [`Observer`] streaming a Chrome trace-event JSON file (see the module documentation for the
/// layout). Call [`ChromeTrace::finish`] at the end of the run.
pub struct ChromeTrace<W: Write> {
    out: BufWriter<StopOnError<W>>,
    names: Vec<String>,
    /// Per CPU: the thread running since when. Its length is the number of named CPU tracks.
    running: Vec<Option<(ThreadId, u64)>>,
    /// Per thread. Its length is the number of named thread tracks.
    jobs: Vec<JobTrack>,
    /// Whether no event was written yet (no separator needed).
    first: bool,
    /// Scratch buffer for the event being formatted.
    line: String,
    error: Option<io::Error>,
}

impl<W: Write> ChromeTrace<W> {
    /// Starts a trace on `writer` (buffered here) for `cpus` CPUs and the threads named by `names`,
    /// and writes the track metadata. Tracks for CPUs or threads beyond these are added when they
    /// first appear.
    pub fn new(writer: W, names: Vec<String>, cpus: u32) -> Self {
        let mut this = ChromeTrace {
            out: BufWriter::with_capacity(64 * 1024, StopOnError::new(writer)),
            names,
            running: Vec::new(),
            jobs: Vec::new(),
            first: true,
            line: String::with_capacity(256),
            error: None,
        };
        if let Err(e) = this.out.write_all(b"{\"traceEvents\":[\n") {
            this.error = Some(e);
        }
        this.process_meta(CPUS_PID, "CPUs", 0);
        this.process_meta(TASKS_PID, "tasks", 1);
        if cpus > 0 {
            this.ensure_cpu(cpus - 1);
        }
        if let Some(last) = this.names.len().checked_sub(1) {
            this.ensure_thread(last as ThreadId);
        }
        this
    }

    /// The first I/O error met so far, if any (writing stopped there).
    pub fn error(&self) -> Option<&io::Error> {
        self.error.as_ref()
    }

    /// Ends the trace at `end_ns`: closes the slices of threads still running and of jobs still
    /// pending at that time, closes the JSON, flushes, and returns the writer — or the first I/O
    /// error met while writing (the file is then incomplete).
    pub fn finish(mut self, end_ns: u64) -> io::Result<W> {
        for cpu in 0..self.running.len() {
            if let Some((thread, since)) = self.running[cpu].take() {
                self.cpu_slice(cpu as u32, thread, since, end_ns);
            }
        }
        for thread in 0..self.jobs.len() {
            let track = self.jobs[thread];
            if let Some((job, release)) = track.released {
                if track.finished.is_none_or(|f| f < job) {
                    let start = release.max(track.last_finish);
                    self.begin_event("X", TASKS_PID, thread_tid(thread as ThreadId), start);
                    let line = &mut self.line;
                    let _ = write!(line, ",\"name\":\"job {job}\",\"cat\":\"job\",\"dur\":");
                    push_us(line, end_ns.saturating_sub(start));
                    line.push_str(",\"args\":{\"release_us\":");
                    push_us(line, release);
                    line.push_str(",\"unfinished\":true}}");
                    self.emit();
                }
            }
        }
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        self.out.write_all(b"\n],\"displayTimeUnit\":\"ns\"}\n")?;
        self.out.flush()?;
        self.out.into_inner().map(|w| w.inner).map_err(|e| e.into_error())
    }

    /// Names and orders CPU tracks up to `cpu`.
    fn ensure_cpu(&mut self, cpu: u32) {
        while self.running.len() <= cpu as usize {
            let c = self.running.len() as u32;
            self.running.push(None);
            self.thread_meta(CPUS_PID, cpu_tid(c), &format!("CPU {c}"), c);
        }
    }

    /// Names and orders thread tracks up to `thread`.
    fn ensure_thread(&mut self, thread: ThreadId) {
        while self.jobs.len() <= thread as usize {
            let t = self.jobs.len() as ThreadId;
            self.jobs.push(JobTrack::default());
            let name = thread_name(&self.names, t).into_owned();
            self.thread_meta(TASKS_PID, thread_tid(t), &name, t);
        }
    }

    fn process_meta(&mut self, pid: u32, name: &str, sort_index: u32) {
        self.line.clear();
        let _ = write!(
            self.line,
            "{{\"ph\":\"M\",\"pid\":{pid},\"name\":\"process_name\",\"args\":{{\"name\":"
        );
        push_json_str(&mut self.line, name);
        self.line.push_str("}}");
        self.emit();
        self.line.clear();
        let _ = write!(
            self.line,
            "{{\"ph\":\"M\",\"pid\":{pid},\"name\":\"process_sort_index\",\"args\":{{\"sort_index\":{sort_index}}}}}"
        );
        self.emit();
    }

    fn thread_meta(&mut self, pid: u32, tid: u64, name: &str, sort_index: u32) {
        self.line.clear();
        let _ = write!(
            self.line,
            "{{\"ph\":\"M\",\"pid\":{pid},\"tid\":{tid},\"name\":\"thread_name\",\"args\":{{\"name\":"
        );
        push_json_str(&mut self.line, name);
        self.line.push_str("}}");
        self.emit();
        self.line.clear();
        let _ = write!(
            self.line,
            "{{\"ph\":\"M\",\"pid\":{pid},\"tid\":{tid},\"name\":\"thread_sort_index\",\"args\":{{\"sort_index\":{sort_index}}}}}"
        );
        self.emit();
    }

    /// Starts formatting an event (`{"ph":…,"pid":…,"tid":…,"ts":…`) into the scratch line.
    fn begin_event(&mut self, ph: &str, pid: u32, tid: u64, ts_ns: u64) {
        self.line.clear();
        let _ = write!(self.line, "{{\"ph\":\"{ph}\",\"pid\":{pid},\"tid\":{tid},\"ts\":");
        push_us(&mut self.line, ts_ns);
    }

    /// Writes a thread-scoped instant event on `thread`'s track; `args` is the inside of the
    /// args object.
    fn instant(&mut self, thread: ThreadId, ts_ns: u64, name: &str, args: &str) {
        self.ensure_thread(thread);
        self.begin_event("i", TASKS_PID, thread_tid(thread), ts_ns);
        let _ = write!(
            self.line,
            ",\"s\":\"t\",\"cat\":\"sched\",\"name\":\"{name}\",\"args\":{{{args}}}}}"
        );
        self.emit();
    }

    fn cpu_slice(&mut self, cpu: u32, thread: ThreadId, start: u64, end: u64) {
        if end <= start {
            return;
        }
        self.begin_event("X", CPUS_PID, cpu_tid(cpu), start);
        let name = thread_name(&self.names, thread);
        let line = &mut self.line;
        line.push_str(",\"dur\":");
        push_us(line, end - start);
        line.push_str(",\"cat\":\"cpu\",\"name\":");
        push_json_str(line, &name);
        let _ = write!(line, ",\"args\":{{\"thread\":{thread}}}}}");
        self.emit();
    }

    /// Writes the scratch line as the next array element, unless writing already failed.
    fn emit(&mut self) {
        if self.error.is_some() {
            return;
        }
        let sep: &[u8] = if self.first { b"" } else { b",\n" };
        self.first = false;
        let result = self
            .out
            .write_all(sep)
            .and_then(|()| self.out.write_all(self.line.as_bytes()));
        if let Err(e) = result {
            self.error = Some(e);
        }
    }
}

impl<W: Write> Observer for ChromeTrace<W> {
    /// A forked thread's track is named when it starts (threads named up front keep their name).
    fn thread_started(&mut self, thread: ThreadId, name: &str) {
        let i = thread as usize;
        if i >= self.names.len() && i >= self.jobs.len() {
            while self.names.len() < i {
                let n = self.names.len();
                self.names.push(format!("t{n}"));
            }
            self.names.push(name.to_string());
        }
        self.ensure_thread(thread);
    }

    fn job(&mut self, r: &JobRecord) {
        self.ensure_thread(r.thread);
        let track = &mut self.jobs[r.thread as usize];
        let start = r.release.max(track.last_finish);
        track.last_finish = track.last_finish.max(r.finish);
        track.finished = Some(track.finished.map_or(r.job, |f| f.max(r.job)));

        self.begin_event("X", TASKS_PID, thread_tid(r.thread), start);
        let line = &mut self.line;
        let _ = write!(line, ",\"cat\":\"job\",\"name\":\"job {}\",\"dur\":", r.job);
        push_us(line, r.finish.saturating_sub(start));
        line.push_str(",\"args\":{\"release_us\":");
        push_us(line, r.release);
        line.push_str(",\"deadline_us\":");
        push_us(line, r.deadline);
        line.push_str(",\"response_us\":");
        push_us(line, r.response_time());
        line.push_str(",\"exec_us\":");
        push_us(line, r.exec);
        let _ = write!(
            line,
            ",\"missed\":{},\"preemptions\":{},\"migrations\":{},\"cpu\":{}}}}}",
            r.missed(),
            r.preemptions,
            r.migrations,
            r.cpu
        );
        self.emit();

        if r.missed() {
            let mut args = format!("\"job\":{},\"finish_us\":", r.job);
            push_us(&mut args, r.finish);
            self.instant(r.thread, r.deadline, "deadline miss", &args);
        }
    }

    fn event(&mut self, e: &TraceEvent) {
        match *e {
            TraceEvent::Switch { t, cpu, next, .. } => {
                self.ensure_cpu(cpu);
                if let Some((thread, since)) = self.running[cpu as usize].take() {
                    self.cpu_slice(cpu, thread, since, t);
                }
                self.running[cpu as usize] = next.map(|n| (n, t));
                if let Some(n) = next {
                    self.ensure_thread(n);
                }
            }
            TraceEvent::Release { t, thread, job } => {
                self.ensure_thread(thread);
                self.jobs[thread as usize].released = Some((job, t));
            }
            // Job slices are drawn from `job()`, which has the release and the deadline; the
            // JSON format has no thread states for wake-ups to change.
            TraceEvent::Finish { .. } | TraceEvent::Wakeup { .. } => {}
            TraceEvent::Throttle { t, thread, until } => {
                let mut args = String::from("\"until_us\":");
                push_us(&mut args, until);
                self.instant(thread, t, "throttle", &args);
            }
            TraceEvent::Replenish { t, thread } => self.instant(thread, t, "replenish", ""),
            TraceEvent::Migrate { t, thread, from, to } => {
                self.instant(thread, t, "migrate", &format!("\"from\":{from},\"to\":{to}"));
            }
            TraceEvent::Reservation {
                t,
                thread,
                runtime,
                period,
            } => {
                // A counter per thread in the tasks process: runtime / period.
                self.ensure_thread(thread);
                let bw = if period == 0 {
                    0.0
                } else {
                    runtime as f64 / period as f64
                };
                self.begin_event("C", TASKS_PID, 1, t);
                self.line.push_str(",\"name\":");
                let name = format!("reserved bandwidth {}", thread_name(&self.names, thread));
                push_json_str(&mut self.line, &name);
                let _ = write!(self.line, ",\"args\":{{\"bandwidth\":{bw}}}}}");
                self.emit();
            }
            TraceEvent::Frequency { t, cluster, khz } => {
                // A counter track per cluster in the CPUs process.
                self.begin_event("C", CPUS_PID, 1, t);
                let _ = write!(
                    self.line,
                    ",\"name\":\"cluster {cluster} kHz\",\"args\":{{\"khz\":{khz}}}}}"
                );
                self.emit();
            }
        }
    }

    fn wants_events(&self) -> bool {
        true
    }
}

/// Appends `ns` as microseconds with exactly three decimals (a JSON number, exact in ns).
fn push_us(out: &mut String, ns: u64) {
    let _ = write!(out, "{}.{:03}", ns / 1000, ns % 1000);
}

/// Appends `s` as a JSON string literal.
fn push_json_str(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_escaping() {
        let mut s = String::new();
        push_json_str(&mut s, "a\"b\\c\nd\u{1}é");
        let back: String = serde_json::from_str(&s).unwrap();
        assert_eq!(back, "a\"b\\c\nd\u{1}é");
    }

    #[test]
    fn microseconds_are_exact() {
        let mut s = String::new();
        push_us(&mut s, 1_234_567);
        s.push(' ');
        push_us(&mut s, 5);
        assert_eq!(s, "1234.567 0.005");
    }
}
