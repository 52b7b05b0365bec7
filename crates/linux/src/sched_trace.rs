//! Kernel-filtered recording of the context switches and wake-ups of chosen threads
//! (`sched:sched_switch` and `sched:sched_waking`), the source of `pacer run --trace`.
//!
//! Mechanism, shared with [`crate::trace`] (whose page and format parsing this module reuses):
//! a private tracefs instance `instances/pacer-sched-PID-N` with its own per-CPU rings,
//! `trace_clock = mono` (time stamps are CLOCK_MONOTONIC ns, the clock of the run's origin:
//! a job's `release_ns` plus the run's `origin_ns` is the trace time of its release), both events
//! enabled with kernel-side filters, read in binary from `per_cpu/cpuN/trace_pipe_raw`. The
//! instance of a process that died without its [`Drop`] is removed by the next tracer of either
//! module (and by `pacer doctor --repair`), and [`Drop`] removes this one.
//!
//! # The filter
//! Only events *involving* a traced thread are stored, decided in the kernel:
//! `sched_switch` with `prev_pid == A || next_pid == A || …` (the thread leaves or takes a CPU;
//! the other side may be any task, `swapper/N` or a kworker, recorded with its real pid, comm
//! and priority), `sched_waking` with `pid == A || …` (the thread is woken, by anyone, recorded
//! on the waker's CPU). Filtering by the process (`common_pid`, the task current when the event
//! is recorded) would be wrong for switches: a switch *to* a traced thread is recorded in the
//! context of the task leaving the CPU, which belongs to another process, so every switch-in
//! would be lost; the tracepoints carry no tgid either. So the filter names thread ids, which
//! exist only once the run has created its threads: [`SchedTracer::add`] rewrites both filters
//! (the kernel swaps a filter atomically) and enables the events with the first threads. The
//! executor adds the threads started with the run after they have set themselves up and before
//! they are released, and each thread a `fork` event starts adds itself before its first job.
//! The filter is one kernel string of at most a page, which bounds the set to some 90 threads
//! ([`TraceError::TooManyThreads`] beyond).
//!
//! # Draining and lost events
//! Once enabled, a thread named `pacer-trace` reads every CPU's ring every
//! [`DRAIN_INTERVAL_MS`] ms at SCHED_IDLE (it inherits the CPUs of the thread that enabled the
//! tracer: the run's writer, kept off the measured CPUs where the workload leaves some), so it
//! never takes a CPU from a thread of the run; [`SchedTracer::finish`] reads the rest. A ring
//! that fills between two reads (a starved reader, a very busy workload) overwrites its oldest
//! events; the kernel says so in the next page's header, and the count is kept per CPU and
//! reported by [`SchedTrace::lost`], never dropped silently. Records are kept in memory (about
//! 100 bytes each) until [`SchedTracer::finish`].
//!
//! CPU hotplug during a recording is not followed: the set of CPUs is read once.

use std::collections::BTreeSet;
use std::fs::{self, File};
use std::io::{self, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;

use pacer_adapt::kernel::Tid;
use pacer_model::Policy;

use crate::trace::{
    create_instance, field_offset, page_size, parse_page, remove_stale_instances, tracefs_root, u16_at,
    u32_at, u64_at, write_ctl, TraceError, MAX_FILTER_LEN,
};

/// Prefix of the instances this module creates: `pacer-sched-<pid>-<n>`.
pub(crate) const INSTANCE_PREFIX: &str = "pacer-sched-";

const SWITCH_DIR: &str = "events/sched/sched_switch";
const WAKING_DIR: &str = "events/sched/sched_waking";

/// Default per-CPU ring: 1 MiB, about 15 000 switches (68 bytes each with its header), i.e. a
/// CPU switching a traced thread in and out 75 000 times a second between two drains.
pub const DEFAULT_BUFFER_KB: usize = 1024;

/// How often the draining thread reads the rings.
pub const DRAIN_INTERVAL_MS: u64 = 200;

/// A task's command name as the kernel stores it: 16 bytes, NUL-padded.
#[derive(Clone, Copy, PartialEq, Eq, Default)]
pub struct Comm(pub [u8; 16]);

impl Comm {
    /// The name up to its first NUL, invalid UTF-8 replaced.
    pub fn as_str(&self) -> std::borrow::Cow<'_, str> {
        let end = self.0.iter().position(|&b| b == 0).unwrap_or(self.0.len());
        String::from_utf8_lossy(&self.0[..end])
    }

    /// `name` cut to 15 bytes, as the kernel would store it (tests, hand-made records).
    pub fn new(name: &str) -> Comm {
        let mut c = [0u8; 16];
        let n = name.len().min(15);
        c[..n].copy_from_slice(&name.as_bytes()[..n]);
        Comm(c)
    }
}

impl std::fmt::Debug for Comm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", self.as_str())
    }
}

/// One recorded event, fields as the tracepoints define them (include/trace/events/sched.h).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SchedEvent {
    /// `sched_switch`: `prev` leaves the CPU in state `prev_state` (the kernel's `TASK_REPORT`
    /// bits: 0 running, i.e. preempted, 1 `S`, 2 `D`, …, and `TASK_REPORT_MAX` added when
    /// preempted), `next` takes it. Priorities are the kernel's `prio` (-1 SCHED_DEADLINE,
    /// 0..98 real-time, 100..139 fair).
    Switch {
        prev_comm: Comm,
        prev_pid: i32,
        prev_prio: i32,
        prev_state: i64,
        next_comm: Comm,
        next_pid: i32,
        next_prio: i32,
    },
    /// `sched_waking`: task `pid` is being woken towards `target_cpu`, by the task current on
    /// the record's CPU.
    Waking {
        comm: Comm,
        pid: i32,
        prio: i32,
        target_cpu: i32,
    },
}

/// An event with where and when it was recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SchedRecord {
    /// CLOCK_MONOTONIC, ns.
    pub ts_ns: u64,
    pub cpu: u32,
    /// The task current on `cpu` when the event was recorded (`common_pid`).
    pub common_pid: i32,
    pub event: SchedEvent,
}

/// What a recording holds once finished.
#[derive(Debug, Clone, Default)]
pub struct SchedTrace {
    /// Every record, ordered by time (per CPU, the ring's order).
    pub records: Vec<SchedRecord>,
    /// Per CPU read (`(cpu, events lost)`), what the kernel's page headers reported lost.
    pub lost_per_cpu: Vec<(u32, u64)>,
    /// The traced threads.
    pub tids: Vec<Tid>,
}

impl SchedTrace {
    /// Events the kernel reported lost, over every CPU.
    pub fn lost(&self) -> u64 {
        self.lost_per_cpu
            .iter()
            .fold(0u64, |a, &(_, n)| a.saturating_add(n))
    }
}

/// A field: offset and size in the raw record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Field {
    offset: usize,
    size: usize,
}

impl Field {
    fn int(self, p: &[u8]) -> Option<i64> {
        match self.size {
            4 => u32_at(p, self.offset).map(|v| i64::from(v as i32)),
            8 => u64_at(p, self.offset).map(|v| v as i64),
            _ => None,
        }
    }

    fn comm(self, p: &[u8]) -> Option<Comm> {
        let b = p.get(self.offset..self.offset.checked_add(16)?)?;
        let mut c = [0u8; 16];
        c.copy_from_slice(b);
        Some(Comm(c))
    }
}

/// The layouts of both events, from their `format` files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Formats {
    switch_id: u16,
    waking_id: u16,
    common_pid: Field,
    // sched_switch
    prev_comm: Field,
    prev_pid: Field,
    prev_prio: Field,
    prev_state: Field,
    next_comm: Field,
    next_pid: Field,
    next_prio: Field,
    // sched_waking (common_pid is common to both)
    comm: Field,
    pid: Field,
    prio: Field,
    target_cpu: Field,
}

fn event_field(event: &'static str, format: &str, name: &str, sizes: &[usize]) -> Result<Field, TraceError> {
    match field_offset(format, name) {
        Some((offset, size)) if sizes.contains(&size) => Ok(Field { offset, size }),
        Some((_, size)) => Err(TraceError::EventMissing {
            event,
            why: format!("field {name} has size {size}, expected one of {sizes:?}"),
        }),
        None => Err(TraceError::EventMissing {
            event,
            why: format!("no field {name} in the format"),
        }),
    }
}

fn event_id(event: &'static str, id: &str) -> Result<u16, TraceError> {
    id.trim().parse().map_err(|_| TraceError::EventMissing {
        event,
        why: format!("unparsable id {:?}", id.trim()),
    })
}

/// Reads the layouts from the `id` and `format` texts of both events.
pub(crate) fn parse_formats(switch: (&str, &str), waking: (&str, &str)) -> Result<Formats, TraceError> {
    const S: &str = "sched:sched_switch";
    const W: &str = "sched:sched_waking";
    let (sid, sf) = switch;
    let (wid, wf) = waking;
    let common_pid = event_field(S, sf, "common_pid", &[4])?;
    if event_field(W, wf, "common_pid", &[4])? != common_pid {
        return Err(TraceError::EventMissing {
            event: W,
            why: "common_pid is not where sched_switch has it".into(),
        });
    }
    Ok(Formats {
        switch_id: event_id(S, sid)?,
        waking_id: event_id(W, wid)?,
        common_pid,
        prev_comm: event_field(S, sf, "prev_comm", &[16])?,
        prev_pid: event_field(S, sf, "prev_pid", &[4])?,
        prev_prio: event_field(S, sf, "prev_prio", &[4])?,
        prev_state: event_field(S, sf, "prev_state", &[4, 8])?,
        next_comm: event_field(S, sf, "next_comm", &[16])?,
        next_pid: event_field(S, sf, "next_pid", &[4])?,
        next_prio: event_field(S, sf, "next_prio", &[4])?,
        comm: event_field(W, wf, "comm", &[16])?,
        pid: event_field(W, wf, "pid", &[4])?,
        prio: event_field(W, wf, "prio", &[4])?,
        target_cpu: event_field(W, wf, "target_cpu", &[4])?,
    })
}

fn read_formats(root: &Path) -> Result<Formats, TraceError> {
    let read = |event: &'static str, dir: &str, name: &str| {
        let p = root.join(dir).join(name);
        fs::read_to_string(&p).map_err(|e| match e.kind() {
            io::ErrorKind::PermissionDenied => {
                TraceError::NoPermission(format!("reading {}: {e}", p.display()))
            }
            _ => TraceError::EventMissing {
                event,
                why: format!("{}: {e}", p.display()),
            },
        })
    };
    let s = ("sched:sched_switch", SWITCH_DIR);
    let w = ("sched:sched_waking", WAKING_DIR);
    parse_formats(
        (&read(s.0, s.1, "id")?, &read(s.0, s.1, "format")?),
        (&read(w.0, w.1, "id")?, &read(w.0, w.1, "format")?),
    )
}

/// Decodes one raw record (payload from `common_type` on); `None` for another event or a
/// truncated record.
pub(crate) fn decode(f: &Formats, ts_ns: u64, cpu: u32, p: &[u8]) -> Option<SchedRecord> {
    let id = u16_at(p, 0)?;
    let common_pid = f.common_pid.int(p)? as i32;
    let event = if id == f.switch_id {
        SchedEvent::Switch {
            prev_comm: f.prev_comm.comm(p)?,
            prev_pid: f.prev_pid.int(p)? as i32,
            prev_prio: f.prev_prio.int(p)? as i32,
            prev_state: f.prev_state.int(p)?,
            next_comm: f.next_comm.comm(p)?,
            next_pid: f.next_pid.int(p)? as i32,
            next_prio: f.next_prio.int(p)? as i32,
        }
    } else if id == f.waking_id {
        SchedEvent::Waking {
            comm: f.comm.comm(p)?,
            pid: f.pid.int(p)? as i32,
            prio: f.prio.int(p)? as i32,
            target_cpu: f.target_cpu.int(p)? as i32,
        }
    } else {
        return None;
    };
    Some(SchedRecord {
        ts_ns,
        cpu,
        common_pid,
        event,
    })
}

/// The kernel filters for `tids`: (sched_switch's, sched_waking's).
pub(crate) fn filters(tids: &BTreeSet<Tid>) -> Result<(String, String), TraceError> {
    let join = |f: &dyn Fn(Tid) -> String| tids.iter().map(|&t| f(t)).collect::<Vec<_>>().join(" || ");
    let switch = join(&|t| format!("prev_pid == {t} || next_pid == {t}"));
    let waking = join(&|t| format!("pid == {t}"));
    if switch.len() > MAX_FILTER_LEN {
        return Err(TraceError::TooManyThreads {
            threads: tids.len(),
            len: switch.len(),
        });
    }
    Ok((switch, waking))
}

/// The per-CPU readers and what they have read, shared with the draining thread.
struct Rings {
    /// (cpu, its `trace_pipe_raw`, events lost there so far).
    readers: Vec<(u32, File, u64)>,
    records: Vec<SchedRecord>,
    page: Vec<u8>,
    /// The first read error of the draining thread, returned by `finish`.
    error: Option<TraceError>,
}

impl Rings {
    fn collect(&mut self, formats: &Formats) -> Result<(), TraceError> {
        let Rings {
            readers,
            records,
            page,
            ..
        } = self;
        for (cpu, r, lost) in readers.iter_mut() {
            loop {
                let n = match r.read(page) {
                    Ok(0) => break,
                    Ok(n) => n,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => return Err(TraceError::io(format!("reading cpu {cpu} ring"), e)),
                };
                let cpu = *cpu;
                let missed = parse_page(&page[..n], |ts, payload| {
                    if let Some(rec) = decode(formats, ts, cpu, payload) {
                        records.push(rec);
                    }
                });
                *lost = lost.saturating_add(missed);
            }
        }
        Ok(())
    }
}

struct Drainer {
    stop: mpsc::Sender<()>,
    handle: JoinHandle<()>,
}

/// Which threads are traced and whether the events are on.
#[derive(Default)]
struct Selection {
    tids: BTreeSet<Tid>,
    enabled: bool,
}

/// Records `sched_switch` and `sched_waking` of a set of threads (module documentation).
/// Shareable: [`add`](Self::add) takes `&self`, so threads may add themselves.
pub struct SchedTracer {
    instance: PathBuf,
    formats: Arc<Formats>,
    rings: Arc<Mutex<Rings>>,
    selection: Mutex<Selection>,
    drainer: Mutex<Option<Drainer>>,
}

impl std::fmt::Debug for SchedTracer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SchedTracer")
            .field("instance", &self.instance)
            .field("tids", &lock(&self.selection).tids)
            .finish()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl SchedTracer {
    /// Creates the instance with [`DEFAULT_BUFFER_KB`] per CPU; nothing is recorded until
    /// [`add`](Self::add).
    pub fn new() -> Result<Self, TraceError> {
        Self::with_buffer_kb(DEFAULT_BUFFER_KB)
    }

    /// As [`new`](Self::new), with `kb` KiB of ring per CPU (at least 4).
    pub fn with_buffer_kb(kb: usize) -> Result<Self, TraceError> {
        let root = tracefs_root()?;
        let formats = read_formats(&root)?;
        let instances = root.join("instances");
        if !instances.is_dir() {
            return Err(TraceError::NoTracefs(format!(
                "{} has no instances/ directory (kernel too old)",
                root.display()
            )));
        }
        remove_stale_instances(&instances);
        let instance = create_instance(&instances, INSTANCE_PREFIX)?;
        // From here on, Drop removes the instance whatever step fails.
        let tracer = SchedTracer {
            instance,
            formats: Arc::new(formats),
            rings: Arc::new(Mutex::new(Rings {
                readers: Vec::new(),
                records: Vec::new(),
                page: vec![0; page_size()],
                error: None,
            })),
            selection: Mutex::new(Selection::default()),
            drainer: Mutex::new(None),
        };
        tracer.configure(kb)?;
        Ok(tracer)
    }

    fn configure(&self, kb: usize) -> Result<(), TraceError> {
        let inst = &self.instance;
        write_ctl(&inst.join("trace_clock"), "mono")?;
        write_ctl(&inst.join("buffer_size_kb"), &kb.max(4).to_string())?;
        for (event, dir) in [
            ("sched:sched_switch", SWITCH_DIR),
            ("sched:sched_waking", WAKING_DIR),
        ] {
            if !inst.join(dir).join("enable").exists() {
                return Err(TraceError::EventMissing {
                    event,
                    why: format!("{} missing in the instance", inst.join(dir).display()),
                });
            }
        }
        write_ctl(&inst.join("tracing_on"), "1")?;
        let mut rings = lock(&self.rings);
        for cpu in crate::sys::online_cpus() {
            let path = inst.join(format!("per_cpu/cpu{cpu}/trace_pipe_raw"));
            let f = fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_NONBLOCK)
                .open(&path)
                .map_err(|e| TraceError::io(format!("opening {}", path.display()), e))?;
            rings.readers.push((cpu as u32, f, 0));
        }
        Ok(())
    }

    /// The tracefs instance directory.
    pub fn instance(&self) -> &Path {
        &self.instance
    }

    /// The threads traced so far, ascending.
    pub fn traced(&self) -> Vec<Tid> {
        lock(&self.selection).tids.iter().copied().collect()
    }

    /// Traces `tids` too: rewrites both filters, and with the first threads enables the events
    /// and starts the draining thread (which inherits the caller's CPUs). On error the set is
    /// left as it was.
    pub fn add(&self, tids: &[Tid]) -> Result<(), TraceError> {
        if let Some(&t) = tids.iter().find(|&&t| t == 0 || t > i32::MAX as Tid) {
            return Err(TraceError::InvalidTid(t));
        }
        let mut sel = lock(&self.selection);
        let mut next = sel.tids.clone();
        next.extend(tids.iter().copied());
        if next.len() == sel.tids.len() {
            return Ok(());
        }
        let (switch, waking) = filters(&next)?;
        write_ctl(&self.instance.join(SWITCH_DIR).join("filter"), &switch)?;
        write_ctl(&self.instance.join(WAKING_DIR).join("filter"), &waking)?;
        if !sel.enabled {
            // The reader first: once the events are on, nothing may keep the rings from being
            // read.
            self.start_drainer()?;
            write_ctl(&self.instance.join(SWITCH_DIR).join("enable"), "1")?;
            write_ctl(&self.instance.join(WAKING_DIR).join("enable"), "1")?;
            sel.enabled = true;
        }
        sel.tids = next;
        Ok(())
    }

    fn start_drainer(&self) -> Result<(), TraceError> {
        let mut slot = lock(&self.drainer);
        if slot.is_some() {
            return Ok(());
        }
        let (stop, rx) = mpsc::channel::<()>();
        let (rings, formats) = (self.rings.clone(), self.formats.clone());
        let handle = std::thread::Builder::new()
            .name("pacer-trace".into())
            .spawn(move || {
                // Best effort: at worst the reader runs at the caller's policy.
                let _ = crate::sched::set_policy(0, Policy::Idle, false);
                let interval = std::time::Duration::from_millis(DRAIN_INTERVAL_MS);
                while let Err(mpsc::RecvTimeoutError::Timeout) = rx.recv_timeout(interval) {
                    let mut r = lock(&rings);
                    if r.error.is_none() {
                        if let Err(e) = r.collect(&formats) {
                            r.error = Some(e);
                        }
                    }
                }
            })
            .map_err(|e| TraceError::io("starting the trace reader thread", e))?;
        *slot = Some(Drainer { stop, handle });
        Ok(())
    }

    fn stop_drainer(&self) {
        if let Some(d) = lock(&self.drainer).take() {
            let _ = d.stop.send(());
            let _ = d.handle.join();
        }
    }

    /// Stops recording (events off, `tracing_on` 0); what was recorded stays readable by
    /// [`finish`](Self::finish). Called when the traced threads have ended.
    pub fn stop(&self) -> Result<(), TraceError> {
        let mut sel = lock(&self.selection);
        if sel.enabled {
            write_ctl(&self.instance.join("tracing_on"), "0")?;
            write_ctl(&self.instance.join(SWITCH_DIR).join("enable"), "0")?;
            write_ctl(&self.instance.join(WAKING_DIR).join("enable"), "0")?;
            sel.enabled = false;
        }
        Ok(())
    }

    /// Stops recording, reads what is left and returns everything recorded. The instance is
    /// removed when the tracer is dropped.
    pub fn finish(&self) -> Result<SchedTrace, TraceError> {
        self.stop()?;
        self.stop_drainer();
        let mut rings = lock(&self.rings);
        if let Some(e) = rings.error.take() {
            return Err(e);
        }
        rings.collect(&self.formats)?;
        let mut records = std::mem::take(&mut rings.records);
        // Stable: a CPU's records keep their ring order at equal times.
        records.sort_by_key(|r| r.ts_ns);
        Ok(SchedTrace {
            records,
            lost_per_cpu: rings.readers.iter().map(|(c, _, l)| (*c, *l)).collect(),
            tids: self.traced(),
        })
    }
}

impl Drop for SchedTracer {
    fn drop(&mut self) {
        // Best effort, in the order the kernel needs: events off, reader thread gone, files
        // closed (an open file keeps the instance busy), directory removed.
        let _ = fs::write(self.instance.join(SWITCH_DIR).join("enable"), "0");
        let _ = fs::write(self.instance.join(WAKING_DIR).join("enable"), "0");
        let _ = fs::write(self.instance.join("tracing_on"), "0");
        self.stop_drainer();
        lock(&self.rings).readers.clear();
        let _ = fs::remove_dir(&self.instance);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SWITCH: &str = "name: sched_switch
ID: 372
format:
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;

\tfield:char prev_comm[16];\toffset:8;\tsize:16;\tsigned:0;
\tfield:pid_t prev_pid;\toffset:24;\tsize:4;\tsigned:1;
\tfield:int prev_prio;\toffset:28;\tsize:4;\tsigned:1;
\tfield:long prev_state;\toffset:32;\tsize:8;\tsigned:1;
\tfield:char next_comm[16];\toffset:40;\tsize:16;\tsigned:0;
\tfield:pid_t next_pid;\toffset:56;\tsize:4;\tsigned:1;
\tfield:int next_prio;\toffset:60;\tsize:4;\tsigned:1;
";
    const WAKING: &str = "name: sched_waking
ID: 375
format:
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;

\tfield:char comm[16];\toffset:8;\tsize:16;\tsigned:0;
\tfield:pid_t pid;\toffset:24;\tsize:4;\tsigned:1;
\tfield:int prio;\toffset:28;\tsize:4;\tsigned:1;
\tfield:int target_cpu;\toffset:32;\tsize:4;\tsigned:1;
";

    fn formats() -> Formats {
        parse_formats(("372\n", SWITCH), ("375\n", WAKING)).unwrap()
    }

    fn switch_payload() -> Vec<u8> {
        let mut p = vec![0u8; 64];
        p[0..2].copy_from_slice(&372u16.to_ne_bytes());
        p[4..8].copy_from_slice(&0i32.to_ne_bytes());
        p[8..17].copy_from_slice(b"swapper/1");
        p[28..32].copy_from_slice(&120i32.to_ne_bytes());
        p[40..47].copy_from_slice(b"audio-1");
        p[56..60].copy_from_slice(&4242i32.to_ne_bytes());
        p[60..64].copy_from_slice(&(-1i32).to_ne_bytes());
        p
    }

    #[test]
    fn decodes_switch_and_waking_records() {
        let f = formats();
        let r = decode(&f, 77, 1, &switch_payload()).unwrap();
        assert_eq!(
            r,
            SchedRecord {
                ts_ns: 77,
                cpu: 1,
                common_pid: 0,
                event: SchedEvent::Switch {
                    prev_comm: Comm::new("swapper/1"),
                    prev_pid: 0,
                    prev_prio: 120,
                    prev_state: 0,
                    next_comm: Comm::new("audio-1"),
                    next_pid: 4242,
                    next_prio: -1,
                },
            }
        );
        let mut w = vec![0u8; 36];
        w[0..2].copy_from_slice(&375u16.to_ne_bytes());
        w[4..8].copy_from_slice(&17i32.to_ne_bytes());
        w[8..15].copy_from_slice(b"audio-1");
        w[24..28].copy_from_slice(&4242i32.to_ne_bytes());
        w[28..32].copy_from_slice(&49i32.to_ne_bytes());
        w[32..36].copy_from_slice(&1i32.to_ne_bytes());
        let r = decode(&f, 80, 0, &w).unwrap();
        assert_eq!(r.common_pid, 17);
        assert_eq!(
            r.event,
            SchedEvent::Waking {
                comm: Comm::new("audio-1"),
                pid: 4242,
                prio: 49,
                target_cpu: 1
            }
        );
        assert_eq!(Comm::new("audio-1").as_str(), "audio-1");
        // Another event, and truncated records, give nothing rather than garbage.
        let mut other = switch_payload();
        other[0..2].copy_from_slice(&9u16.to_ne_bytes());
        assert_eq!(decode(&f, 1, 0, &other), None);
        assert_eq!(decode(&f, 1, 0, &switch_payload()[..60]), None);
        assert_eq!(decode(&f, 1, 0, &w[..30]), None);
    }

    #[test]
    fn formats_without_the_fields_are_refused() {
        assert!(matches!(
            parse_formats(("372", "format:\n"), ("375", WAKING)),
            Err(TraceError::EventMissing {
                event: "sched:sched_switch",
                ..
            })
        ));
        assert!(matches!(
            parse_formats(("x", SWITCH), ("375", WAKING)),
            Err(TraceError::EventMissing { .. })
        ));
        let bad = WAKING.replace(
            "size:4;\tsigned:1;\n\tfield:int prio",
            "size:2;\tsigned:1;\n\tfield:int prio",
        );
        let e = parse_formats(("372", SWITCH), ("375", &bad)).unwrap_err();
        assert!(e.to_string().contains("field pid has size 2"), "{e}");
    }

    #[test]
    fn filters_name_both_sides_of_a_switch() {
        let tids: BTreeSet<Tid> = [12, 7].into_iter().collect();
        let (s, w) = filters(&tids).unwrap();
        assert_eq!(
            s,
            "prev_pid == 7 || next_pid == 7 || prev_pid == 12 || next_pid == 12"
        );
        assert_eq!(w, "pid == 7 || pid == 12");
        let many: BTreeSet<Tid> = (1_000_000..1_000_200).collect();
        assert!(matches!(
            filters(&many),
            Err(TraceError::TooManyThreads { threads: 200, .. })
        ));
    }
}
