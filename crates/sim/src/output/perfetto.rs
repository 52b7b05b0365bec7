//! A run as a Perfetto protobuf trace that looks like a kernel ftrace recording, so that the
//! Perfetto UI draws per-CPU scheduling tracks, thread states (running, runnable, sleeping) and
//! wake-up arrows, and trace_processor fills its `sched`, `thread_state` and `thread` tables as
//! it does for a trace of a real machine.
//!
//! The file is a `perfetto.protos.Trace` (`protos/perfetto/trace/trace.proto`): a sequence of
//! `packet = 1` fields, each a `TracePacket` (`trace_packet.proto`) carrying
//! `trusted_packet_sequence_id = 10` (one sequence, [`SEQUENCE_ID`]) and one of:
//!
//! - `process_tree = 2` (`ps/process_tree.proto`): one process, pid [`PROCESS_PID`], named
//!   `pacer-sim`, whose threads are the simulated threads, tid [`thread_tid`]`(t)` = pid + 1 + t,
//!   named as in the workload. Written first at time 0 (packet `timestamp = 8`) and again for
//!   each thread a `fork` starts. pid/tid 0 is left to the idle task ("swapper/N"), as in the
//!   kernel.
//! - `ftrace_events = 1`, an `FtraceEventBundle` (`ftrace/ftrace_event_bundle.proto`) of one CPU
//!   (`cpu = 1`) with its `event = 2`s in timestamp order. Each `FtraceEvent`
//!   (`ftrace/ftrace_event.proto`) has `timestamp = 1` (ns), `pid = 2` (the task current on that
//!   CPU) and one of
//!   - `sched_switch = 4`, a `SchedSwitchFtraceEvent` (`ftrace/sched.proto`: `prev_comm = 1`,
//!     `prev_pid = 2`, `prev_prio = 3`, `prev_state = 4`, `next_comm = 5`, `next_pid = 6`,
//!     `next_prio = 7`) for every [`TraceEvent::Switch`]; `prev_state` is the kernel's task
//!     state: 0 (`TASK_RUNNING`, preempted or throttled), 1 (`TASK_INTERRUPTIBLE`, sleeping) or
//!     0x80 (`TASK_DEAD`), from [`PrevState`];
//!   - `sched_waking = 20` (not 330, which is `sys_exit`), a `SchedWakingFtraceEvent` (`comm = 1`,
//!     `pid = 2`, `prio = 3`, `success = 4`, `target_cpu = 5`) for every [`TraceEvent::Wakeup`].
//!     The simulator does not model which CPU a timer fires on, so the event is put on the
//!     target CPU, with the task current there as the waker: the hrtimer of a sleeping thread
//!     fires where it was armed, which is usually where the thread last ran.
//!   - `cpu_frequency = 11` (`ftrace/power.proto`: `state = 1` in kHz, `cpu_id = 2`) for every
//!     CPU of a cluster whose frequency changed ([`TraceEvent::Frequency`]), when the clusters
//!     were given ([`PerfettoTrace::with_clusters`]).
//!
//! Priorities are the kernel's `prio` (`-1` for SCHED_DEADLINE, `99 - p` for SCHED_FIFO/RR
//! priority `p`, `120 + nice` for the fair class; [`kernel_prio`]). Comms are the workload's
//! names, not cut to the kernel's 15 bytes: trace_processor accepts longer ones, and a cut name
//! could no longer be matched with the workload.
//!
//! Jobs and deadline misses have no ftrace counterpart; [`PerfettoTrace::with_job_slices`] adds
//! them as track events, with a "used bandwidth" counter (each job's CPU time over its period).
//! A SCHED_DEADLINE thread's "reserved bandwidth" counter (runtime / period, at its start and at
//! every change an adaptation controller makes, [`TraceEvent::Reservation`]) is always written:
//! both are counter tracks under the thread's own track. Throttling, replenishment and migrations are left out; the Chrome
//! JSON trace ([`super::trace`]) shows them.
//!
//! # Kernel recordings
//! The same encoder writes `pacer run --trace`, a recording of the real kernel
//! ([`PerfettoTrace::for_kernel`]): there the caller passes the kernel's own pids, comms,
//! priorities and raw `prev_state`s ([`PerfettoTrace::sched_switch`],
//! [`PerfettoTrace::sched_waking`] with [`Task`]s), so tasks of other processes that appear as
//! the other side of a switch (`swapper/N`, kworkers) keep their identity; it describes its
//! process with [`PerfettoTrace::process`] and the kernel with [`PerfettoTrace::system_info`]
//! (`system_info = 45`), from whose release trace_processor reads the meaning of `prev_state`'s
//! bits; [`PerfettoTrace::job_slices`] adds the jobs measured by the run. Time stamps there are
//! CLOCK_MONOTONIC ns as the kernel recorded them, not times from 0.
//!
//! The protobuf encoding is written by hand (varints and length-delimited fields, [`wire`])
//! rather than with `prost`: five messages with a dozen scalar fields do not justify a
//! dependency and its derive macros, and writing straight into reused byte buffers keeps the
//! writer allocation-free per event. [`wire::fields`] reads the encoding back, for tests.
//!
//! Events are buffered per CPU and a CPU's bundle is written once it holds
//! [`BUNDLE_BYTES`] bytes (and at the end), so memory stays constant for any horizon.
//! [`PerfettoTrace::finish`] writes what is left and reports the first I/O error (an observer
//! cannot).

use std::borrow::Cow;
use std::io::{self, BufWriter, Write};

use pacer_model::Policy;

use super::{thread_name, StopOnError};
use crate::record::{JobRecord, Observer, PrevState, ThreadId, TraceEvent};

/// `trusted_packet_sequence_id` of every packet: one writer, one sequence.
pub const SEQUENCE_ID: u32 = 1;
/// pid of the process holding the simulated threads.
pub const PROCESS_PID: i32 = 1000;
/// A CPU's pending events are written as one bundle once they take this many bytes.
pub const BUNDLE_BYTES: usize = 16 * 1024;
/// The fair class's default priority, also the idle task's.
const DEFAULT_PRIO: i32 = 120;

/// tid of simulated thread `thread`.
pub fn thread_tid(thread: ThreadId) -> i32 {
    PROCESS_PID + 1 + thread as i32
}

/// The kernel's `prio` of a thread under `policy`, as `sched_switch` reports it.
pub fn kernel_prio(policy: &Policy) -> i32 {
    match *policy {
        Policy::Other { nice } | Policy::Batch { nice } => DEFAULT_PRIO + nice,
        Policy::Idle => DEFAULT_PRIO,
        Policy::Fifo { priority } | Policy::Rr { priority } => 99 - i32::from(priority),
        Policy::Deadline(_) => -1,
    }
}

/// A task as the kernel's scheduling events name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Task<'a> {
    pub pid: i32,
    pub comm: &'a str,
    /// The kernel's `prio` ([`kernel_prio`]).
    pub prio: i32,
}

/// Encodes a `SchedSwitchFtraceEvent` into `s` (cleared first).
fn put_switch(s: &mut Vec<u8>, prev: Task<'_>, prev_state: i64, next: Task<'_>) {
    s.clear();
    wire::put_str(s, 1, prev.comm);
    wire::put_int(s, 2, i64::from(prev.pid));
    wire::put_int(s, 3, i64::from(prev.prio));
    wire::put_int(s, 4, prev_state);
    wire::put_str(s, 5, next.comm);
    wire::put_int(s, 6, i64::from(next.pid));
    wire::put_int(s, 7, i64::from(next.prio));
}

/// Encodes a `SchedWakingFtraceEvent` into `s` (cleared first).
fn put_waking(s: &mut Vec<u8>, woken: Task<'_>, target_cpu: i32) {
    s.clear();
    wire::put_str(s, 1, woken.comm);
    wire::put_int(s, 2, i64::from(woken.pid));
    wire::put_int(s, 3, i64::from(woken.prio));
    wire::put_int(s, 4, 1);
    wire::put_int(s, 5, i64::from(target_cpu));
}

// Field numbers, from the protos named in the module documentation.
const TRACE_PACKET: u32 = 1;
const PACKET_TRACK_EVENT: u32 = 11;
const PACKET_TRACK_DESCRIPTOR: u32 = 60;
const TRACK_UUID: u32 = 1;
const TRACK_THREAD: u32 = 4;
const THREAD_DESC_PID: u32 = 1;
const THREAD_DESC_TID: u32 = 2;
const TRACK_EVENT_TYPE: u32 = 9;
const TRACK_EVENT_TRACK_UUID: u32 = 11;
const TRACK_EVENT_NAME: u32 = 23;
const TYPE_SLICE_BEGIN: u64 = 1;
const TYPE_SLICE_END: u64 = 2;
const TYPE_INSTANT: u64 = 3;
/// uuid of thread `t`'s track is this plus `t`.
const THREAD_TRACK_UUID: u64 = 1 << 32;
/// uuid of thread `t`'s reserved-bandwidth counter track is this plus `t`.
const RESERVED_TRACK_UUID: u64 = 2 << 32;
/// uuid of thread `t`'s used-bandwidth counter track is this plus `t`.
const USED_TRACK_UUID: u64 = 3 << 32;
const TRACK_NAME: u32 = 2;
const TRACK_PARENT_UUID: u32 = 5;
const TRACK_COUNTER: u32 = 8;
const TYPE_COUNTER: u64 = 4;
const TRACK_EVENT_DOUBLE_COUNTER_VALUE: u32 = 44;
/// Bits of [`PerfettoTrace::counters`]: which of a thread's tracks are described.
const RESERVED: u8 = 1;
const USED: u8 = 2;
const TRACK: u8 = 4;
const PACKET_FTRACE_EVENTS: u32 = 1;
const PACKET_PROCESS_TREE: u32 = 2;
const PACKET_TIMESTAMP: u32 = 8;
const PACKET_SEQUENCE_ID: u32 = 10;
const PACKET_SYSTEM_INFO: u32 = 45;
const SYSTEM_INFO_UTSNAME: u32 = 1;
const UTSNAME_SYSNAME: u32 = 1;
const UTSNAME_VERSION: u32 = 2;
const UTSNAME_RELEASE: u32 = 3;
const UTSNAME_MACHINE: u32 = 4;
const BUNDLE_CPU: u32 = 1;
const BUNDLE_EVENT: u32 = 2;
const EVENT_TIMESTAMP: u32 = 1;
const EVENT_PID: u32 = 2;
const EVENT_SCHED_SWITCH: u32 = 4;
const EVENT_CPU_FREQUENCY: u32 = 11;
const EVENT_SCHED_WAKING: u32 = 20;
const TREE_PROCESSES: u32 = 1;
const TREE_THREADS: u32 = 2;
const PROCESS_PID_FIELD: u32 = 1;
const PROCESS_PPID: u32 = 2;
const PROCESS_CMDLINE: u32 = 3;
const THREAD_TID: u32 = 1;
const THREAD_NAME: u32 = 2;
const THREAD_TGID: u32 = 3;

/// `prev_state` values (the kernel's `TASK_*` bits).
const TASK_RUNNING: i64 = 0;
const TASK_INTERRUPTIBLE: i64 = 1;
const TASK_DEAD: i64 = 0x80;

/// Per-CPU state: the task current there and the events not yet written.
#[derive(Default)]
struct Cpu {
    current: Option<ThreadId>,
    /// Encoded `event = 2` fields of the pending bundle.
    pending: Vec<u8>,
    /// Timestamp of the last pending or written event, to keep the bundle ordered.
    last_ts: u64,
}

/// An [`Observer`] streaming a Perfetto protobuf trace (see the module documentation for what
/// it holds). Call [`PerfettoTrace::finish`] at the end of the run.
pub struct PerfettoTrace<W: Write> {
    out: BufWriter<StopOnError<W>>,
    names: Vec<String>,
    prios: Vec<i32>,
    cpus: Vec<Cpu>,
    /// Per cluster, its CPUs (for frequency events).
    clusters: Vec<Vec<u32>>,
    /// Threads described in a process tree so far.
    described: usize,
    /// Per thread, for job slices (if wanted): whether its track is described, and the finish
    /// of its latest job.
    jobs: Option<Vec<(bool, u64)>>,
    /// Per thread, which of its tracks are described ([`TRACK`], [`RESERVED`], [`USED`]).
    counters: Vec<u8>,
    /// Latest event time seen, for the packets describing forked threads.
    now: u64,
    /// Scratch buffers: the event being encoded, its payload, and the packet being framed.
    event: Vec<u8>,
    inner: Vec<u8>,
    packet: Vec<u8>,
    error: Option<io::Error>,
}

impl<W: Write> PerfettoTrace<W> {
    /// Starts a trace on `writer` (buffered here) for `cpus` CPUs and the threads named by
    /// `names`, and writes their process tree. Threads and CPUs beyond these are added when
    /// they first appear.
    pub fn new(writer: W, names: Vec<String>, cpus: u32) -> Self {
        let mut this = Self::bare(writer, names, cpus);
        this.describe_threads(true);
        this
    }

    /// Starts a trace of a kernel recording on `writer` for `cpus` CPUs (more are added as they
    /// appear): nothing is written until the caller describes its processes
    /// ([`process`](Self::process)) and events ([`sched_switch`](Self::sched_switch),
    /// [`sched_waking`](Self::sched_waking)) with the kernel's own pids, comms and priorities.
    /// The [`Observer`] methods are not meant for such a trace.
    pub fn for_kernel(writer: W, cpus: u32) -> Self {
        Self::bare(writer, Vec::new(), cpus)
    }

    fn bare(writer: W, names: Vec<String>, cpus: u32) -> Self {
        PerfettoTrace {
            out: BufWriter::with_capacity(64 * 1024, StopOnError::new(writer)),
            names,
            prios: Vec::new(),
            cpus: (0..cpus).map(|_| Cpu::default()).collect(),
            clusters: Vec::new(),
            described: 0,
            jobs: None,
            counters: Vec::new(),
            now: 0,
            event: Vec::with_capacity(256),
            inner: Vec::with_capacity(256),
            packet: Vec::with_capacity(BUNDLE_BYTES + 64),
            error: None,
        }
    }

    /// The trace of simulation `sim` on `cpus` CPUs: its threads' names and kernel priorities,
    /// and its frequency clusters (for `cpu_frequency` events).
    pub fn for_simulation(writer: W, sim: &crate::Sim, cpus: u32) -> Self {
        let names = sim.thread_names();
        let prios = (0..names.len() as ThreadId)
            .map(|t| sim.policy_of(t).map_or(DEFAULT_PRIO, |p| kernel_prio(&p)))
            .collect();
        let mut clusters: Vec<Vec<u32>> = Vec::new();
        for cpu in 0..cpus {
            if let Some(c) = sim.cluster_of(cpu as usize) {
                if clusters.len() <= c {
                    clusters.resize(c + 1, Vec::new());
                }
                clusters[c].push(cpu);
            }
        }
        PerfettoTrace::new(writer, names, cpus)
            .with_priorities(prios)
            .with_clusters(clusters)
    }

    /// Gives the threads' kernel priorities (see [`kernel_prio`]), in thread-id order; threads
    /// without one get 120.
    pub fn with_priorities(mut self, prios: Vec<i32>) -> Self {
        self.prios = prios;
        self
    }

    /// Gives the CPUs of each frequency cluster, so that frequency changes become
    /// `cpu_frequency` events of those CPUs (without it they are left out).
    pub fn with_clusters(mut self, clusters: Vec<Vec<u32>>) -> Self {
        self.clusters = clusters;
        self
    }

    /// Also writes each job as a slice "job N" on its thread's track, from its release (or the
    /// previous job's finish, since slices on a track must nest) to its finish, and an instant
    /// "deadline miss" at the deadline of a job that missed it: `track_event = 11` packets
    /// (`track_event/track_event.proto`: `type = 9`, `track_uuid = 11`, `name = 23`) on
    /// `track_descriptor = 60` tracks (`track_event/track_descriptor.proto`: `uuid = 1`,
    /// `thread = 4`, a `ThreadDescriptor` with `pid = 1`, `tid = 2`), which the UI draws on
    /// the thread's own track, beside its states. Adds about two fifths to the size.
    ///
    /// Each job also sets a counter "used bandwidth" under its thread (the job's CPU time over
    /// its period), beside the "reserved bandwidth" counter that SCHED_DEADLINE threads always
    /// get (runtime / period, from [`TraceEvent::Reservation`]): `track_descriptor`s with
    /// `parent_uuid = 5` (the thread's track), `name = 2` and `counter = 8`, and `track_event`s
    /// of `type` 4 (`TYPE_COUNTER`) with `double_counter_value = 44`.
    pub fn with_job_slices(mut self) -> Self {
        self.jobs = Some(Vec::new());
        self
    }

    /// Describes a process of a kernel recording at time `t`: `(pid, ppid, cmdline)` and its
    /// threads as `(tid, name)`, so that trace_processor groups them and names them as given
    /// rather than by their 15-byte comms.
    pub fn process(&mut self, t: u64, process: (i32, i32, &str), threads: &[(i32, &str)]) {
        let pid = process.0;
        self.write_tree(
            t,
            Some(process),
            threads.iter().map(|&(tid, name)| (tid, name, pid)),
        );
    }

    /// Writes a `system_info = 45` packet (`system_info.proto`: `utsname = 1`, a `Utsname` with
    /// `sysname = 1`, `version = 2`, `release = 3`, `machine = 4`): trace_processor reads the
    /// meaning of `prev_state`'s bits from the kernel release.
    pub fn system_info(&mut self, sysname: &str, version: &str, release: &str, machine: &str) {
        let u = &mut self.inner;
        u.clear();
        wire::put_str(u, UTSNAME_SYSNAME, sysname);
        wire::put_str(u, UTSNAME_VERSION, version);
        wire::put_str(u, UTSNAME_RELEASE, release);
        wire::put_str(u, UTSNAME_MACHINE, machine);
        let i = &mut self.event;
        i.clear();
        wire::put_bytes(i, SYSTEM_INFO_UTSNAME, u);
        self.write_event_packet(None, PACKET_SYSTEM_INFO);
    }

    /// A kernel `sched_switch` on `cpu` at `t` (ns): `prev` leaves in `prev_state` (the
    /// kernel's raw value), `next` runs. The event's `pid` is `prev`'s, as in the kernel.
    /// A CPU's events must come in time order; an earlier one is put at its CPU's latest time.
    pub fn sched_switch(&mut self, t: u64, cpu: u32, prev: Task<'_>, prev_state: i64, next: Task<'_>) {
        let i = self.ensure_cpu(cpu);
        put_switch(&mut self.inner, prev, prev_state, next);
        self.push_event(i, t, prev.pid, EVENT_SCHED_SWITCH);
    }

    /// A kernel `sched_waking` recorded on `cpu` at `t` (ns) while `waker_pid` was current
    /// there: `woken` is being woken towards `target_cpu`.
    pub fn sched_waking(&mut self, t: u64, cpu: u32, waker_pid: i32, woken: Task<'_>, target_cpu: i32) {
        let i = self.ensure_cpu(cpu);
        put_waking(&mut self.inner, woken, target_cpu);
        self.push_event(i, t, waker_pid, EVENT_SCHED_WAKING);
    }

    /// Job `r` as slices on thread `tid` of process `pid` (as
    /// [`with_job_slices`](Self::with_job_slices) describes), its times shifted by `origin_ns` (a kernel
    /// recording's job records count from the run's origin). Written whether or not
    /// `with_job_slices` was called; `r.thread` keys the thread's track.
    pub fn job_slices(&mut self, r: &JobRecord, pid: i32, tid: i32, origin_ns: u64) {
        let jobs = self.jobs.get_or_insert_with(Vec::new);
        let i = r.thread as usize;
        if jobs.len() <= i {
            jobs.resize(i + 1, (false, 0));
        }
        let (release, finish) = (r.release + origin_ns, r.finish + origin_ns);
        let (described, last_finish) = jobs[i];
        let start = release.max(last_finish);
        jobs[i] = (true, last_finish.max(finish));
        let uuid = THREAD_TRACK_UUID + u64::from(r.thread);
        if !described {
            self.ensure_thread_track(r.thread, pid, tid);
        }
        let name = format!("job {}", r.job);
        self.track_event(start, uuid, TYPE_SLICE_BEGIN, Some(&name));
        self.track_event(finish.max(start), uuid, TYPE_SLICE_END, None);
        if r.missed() {
            self.track_event(r.deadline + origin_ns, uuid, TYPE_INSTANT, Some("deadline miss"));
        }
        if r.period > 0 {
            let used = r.exec as f64 / r.period as f64;
            self.counter(r.thread, USED, finish, used, pid, tid);
        }
    }

    /// Sets thread `thread`'s reserved-bandwidth counter (runtime / period; 0 outside
    /// SCHED_DEADLINE) at `t`; `pid`/`tid` identify the thread in the trace.
    pub fn reserved_bandwidth(
        &mut self,
        t: u64,
        thread: ThreadId,
        runtime: u64,
        period: u64,
        pid: i32,
        tid: i32,
    ) {
        let bw = if period == 0 {
            0.0
        } else {
            runtime as f64 / period as f64
        };
        self.counter(thread, RESERVED, t, bw, pid, tid);
    }

    /// Writes, once, the `track_descriptor` of thread `thread`'s own track (uuid
    /// [`THREAD_TRACK_UUID`] + thread), which job slices and counters hang from.
    fn ensure_thread_track(&mut self, thread: ThreadId, pid: i32, tid: i32) {
        let i = thread as usize;
        if self.counters.len() <= i {
            self.counters.resize(i + 1, 0);
        }
        if self.counters[i] & TRACK != 0 {
            return;
        }
        self.counters[i] |= TRACK;
        let d = &mut self.inner;
        d.clear();
        wire::put_int(d, THREAD_DESC_PID, i64::from(pid));
        wire::put_int(d, THREAD_DESC_TID, i64::from(tid));
        let t = &mut self.event;
        t.clear();
        wire::put_uint(t, TRACK_UUID, THREAD_TRACK_UUID + u64::from(thread));
        wire::put_bytes(t, TRACK_THREAD, d);
        self.write_event_packet(None, PACKET_TRACK_DESCRIPTOR);
    }

    /// One value of a thread's counter `which` ([`RESERVED`] or [`USED`]), describing the
    /// counter track (and the thread's track, its parent) the first time.
    fn counter(&mut self, thread: ThreadId, which: u8, t: u64, value: f64, pid: i32, tid: i32) {
        let i = thread as usize;
        if self.counters.len() <= i {
            self.counters.resize(i + 1, 0);
        }
        let (base, name) = if which == RESERVED {
            (RESERVED_TRACK_UUID, "reserved bandwidth")
        } else {
            (USED_TRACK_UUID, "used bandwidth")
        };
        let uuid = base + u64::from(thread);
        if self.counters[i] & which == 0 {
            self.ensure_thread_track(thread, pid, tid);
            self.counters[i] |= which;
            let d = &mut self.event;
            d.clear();
            wire::put_uint(d, TRACK_UUID, uuid);
            wire::put_str(d, TRACK_NAME, name);
            wire::put_uint(d, TRACK_PARENT_UUID, THREAD_TRACK_UUID + u64::from(thread));
            wire::put_bytes(d, TRACK_COUNTER, &[]);
            self.write_event_packet(None, PACKET_TRACK_DESCRIPTOR);
        }
        let e = &mut self.event;
        e.clear();
        wire::put_uint(e, TRACK_EVENT_TYPE, TYPE_COUNTER);
        wire::put_uint(e, TRACK_EVENT_TRACK_UUID, uuid);
        wire::put_double(e, TRACK_EVENT_DOUBLE_COUNTER_VALUE, value);
        self.write_event_packet(Some(t), PACKET_TRACK_EVENT);
    }

    /// The first I/O error met so far, if any (writing stopped there).
    pub fn error(&self) -> Option<&io::Error> {
        self.error.as_ref()
    }

    /// Writes the pending bundles, flushes, and returns the writer — or the first I/O error met
    /// while writing (the file is then incomplete). Tasks still running keep running to the end
    /// of the trace, as in a recording stopped mid-run.
    pub fn finish(mut self) -> io::Result<W> {
        for cpu in 0..self.cpus.len() {
            self.write_bundle(cpu);
        }
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        self.out.flush()?;
        self.out.into_inner().map(|w| w.inner).map_err(|e| e.into_error())
    }

    fn prio(&self, thread: Option<ThreadId>) -> i32 {
        thread
            .and_then(|t| self.prios.get(t as usize).copied())
            .unwrap_or(DEFAULT_PRIO)
    }

    fn pid(thread: Option<ThreadId>) -> i32 {
        thread.map_or(0, thread_tid)
    }

    /// `thread`'s comm, or the idle task's of `cpu` for `None`.
    fn comm(names: &[String], thread: Option<ThreadId>, cpu: u32) -> Cow<'_, str> {
        match thread {
            Some(t) => thread_name(names, t),
            None => Cow::Owned(format!("swapper/{cpu}")),
        }
    }

    /// Writes a process tree packet at time `t`: process `(pid, ppid, cmdline)` if given, and
    /// `threads` as `(tid, name, tgid)`.
    fn write_tree<'n>(
        &mut self,
        t: u64,
        process: Option<(i32, i32, &str)>,
        threads: impl Iterator<Item = (i32, &'n str, i32)>,
    ) {
        let tree = &mut self.event;
        tree.clear();
        if let Some((pid, ppid, cmdline)) = process {
            let p = &mut self.inner;
            p.clear();
            wire::put_int(p, PROCESS_PID_FIELD, i64::from(pid));
            wire::put_int(p, PROCESS_PPID, i64::from(ppid));
            wire::put_str(p, PROCESS_CMDLINE, cmdline);
            wire::put_bytes(tree, TREE_PROCESSES, p);
        }
        for (tid, name, tgid) in threads {
            let th = &mut self.inner;
            th.clear();
            wire::put_int(th, THREAD_TID, i64::from(tid));
            wire::put_str(th, THREAD_NAME, name);
            wire::put_int(th, THREAD_TGID, i64::from(tgid));
            wire::put_bytes(tree, TREE_THREADS, th);
        }
        self.write_event_packet(Some(t), PACKET_PROCESS_TREE);
    }

    /// Writes a process tree holding the process (if `process`) and the threads not described
    /// yet.
    fn describe_threads(&mut self, process: bool) {
        if self.described >= self.names.len() && !process {
            return;
        }
        // Taken out for the call (the tree writer borrows the scratch buffers), put back after.
        let names = std::mem::take(&mut self.names);
        let threads = (self.described..names.len())
            .map(|t| (thread_tid(t as ThreadId), names[t].as_str(), PROCESS_PID));
        self.write_tree(
            self.now,
            process.then_some((PROCESS_PID, 1, "pacer-sim")),
            threads,
        );
        self.described = names.len();
        self.names = names;
    }

    /// Names threads up to `thread` that appeared without a name (`t<N>`, as the other outputs
    /// name them).
    fn ensure_thread(&mut self, thread: ThreadId) {
        while self.names.len() <= thread as usize {
            let n = self.names.len();
            self.names.push(format!("t{n}"));
        }
        self.describe_threads(false);
    }

    fn ensure_cpu(&mut self, cpu: u32) -> usize {
        while self.cpus.len() <= cpu as usize {
            self.cpus.push(Cpu::default());
        }
        cpu as usize
    }

    /// Adds the event whose payload (field `kind`) is in `self.inner`, recorded while `pid` was
    /// current on `cpu`, to `cpu`'s bundle, writing the bundle if it is full.
    fn push_event(&mut self, cpu: usize, t: u64, pid: i32, kind: u32) {
        self.now = self.now.max(t);
        let c = &mut self.cpus[cpu];
        // Events reach the observer in time order; the clamp guards the bundle's order anyway.
        let ts = t.max(c.last_ts);
        c.last_ts = ts;
        let ev = &mut self.event;
        ev.clear();
        wire::put_uint(ev, EVENT_TIMESTAMP, ts);
        wire::put_int(ev, EVENT_PID, i64::from(pid));
        wire::put_bytes(ev, kind, &self.inner);
        wire::put_bytes(&mut c.pending, BUNDLE_EVENT, ev);
        if c.pending.len() >= BUNDLE_BYTES {
            self.write_bundle(cpu);
        }
    }

    fn write_bundle(&mut self, cpu: usize) {
        let c = &mut self.cpus[cpu];
        if c.pending.is_empty() {
            return;
        }
        let packet = &mut self.packet;
        packet.clear();
        // The bundle is framed around the pending events, which are copied, not re-encoded.
        let mut cpu_field = Vec::with_capacity(8);
        wire::put_uint(&mut cpu_field, BUNDLE_CPU, cpu as u64);
        wire::put_len(packet, PACKET_FTRACE_EVENTS, cpu_field.len() + c.pending.len());
        packet.extend_from_slice(&cpu_field);
        packet.extend_from_slice(&c.pending);
        wire::put_uint(packet, PACKET_SEQUENCE_ID, u64::from(SEQUENCE_ID));
        c.pending.clear();
        self.write_packet();
    }

    /// Writes `self.event` as the payload of packet field `field` (with its timestamp `t`, if
    /// any) on the trace's sequence.
    fn write_event_packet(&mut self, t: Option<u64>, field: u32) {
        let p = &mut self.packet;
        p.clear();
        if let Some(t) = t {
            wire::put_uint(p, PACKET_TIMESTAMP, t);
        }
        wire::put_bytes(p, field, &self.event);
        wire::put_uint(p, PACKET_SEQUENCE_ID, u64::from(SEQUENCE_ID));
        self.write_packet();
    }

    /// Writes `self.packet` as the next `packet` of the trace, unless writing already failed.
    fn write_packet(&mut self) {
        if self.error.is_some() {
            return;
        }
        let mut head = Vec::with_capacity(8);
        wire::put_len(&mut head, TRACE_PACKET, self.packet.len());
        let result = self
            .out
            .write_all(&head)
            .and_then(|()| self.out.write_all(&self.packet));
        if let Err(e) = result {
            self.error = Some(e);
        }
    }

    fn track_event(&mut self, t: u64, uuid: u64, kind: u64, name: Option<&str>) {
        let e = &mut self.event;
        e.clear();
        wire::put_uint(e, TRACK_EVENT_TYPE, kind);
        wire::put_uint(e, TRACK_EVENT_TRACK_UUID, uuid);
        if let Some(n) = name {
            wire::put_str(e, TRACK_EVENT_NAME, n);
        }
        self.write_event_packet(Some(t), PACKET_TRACK_EVENT);
    }

    fn switch(&mut self, t: u64, cpu: u32, next: Option<ThreadId>, prev_state: PrevState) {
        let i = self.ensure_cpu(cpu);
        if let Some(n) = next {
            self.ensure_thread(n);
        }
        // The CPU's own record of what ran is the `prev` (the engine's `prev` is the same).
        let prev = self.cpus[i].current;
        let state = match (prev, prev_state) {
            (None, _) | (_, PrevState::Runnable) => TASK_RUNNING,
            (_, PrevState::Sleeping) => TASK_INTERRUPTIBLE,
            (_, PrevState::Dead) => TASK_DEAD,
        };
        let (prev_prio, next_prio) = (self.prio(prev), self.prio(next));
        let (prev_comm, next_comm) = (
            Self::comm(&self.names, prev, cpu),
            Self::comm(&self.names, next, cpu),
        );
        put_switch(
            &mut self.inner,
            Task {
                pid: Self::pid(prev),
                comm: &prev_comm,
                prio: prev_prio,
            },
            state,
            Task {
                pid: Self::pid(next),
                comm: &next_comm,
                prio: next_prio,
            },
        );
        // The event belongs to the task switched out (its `pid`), so `current` changes after.
        self.push_event(i, t, Self::pid(prev), EVENT_SCHED_SWITCH);
        self.cpus[i].current = next;
    }

    fn waking(&mut self, t: u64, thread: ThreadId, cpu: u32) {
        let i = self.ensure_cpu(cpu);
        self.ensure_thread(thread);
        let prio = self.prio(Some(thread));
        let comm = thread_name(&self.names, thread);
        put_waking(
            &mut self.inner,
            Task {
                pid: thread_tid(thread),
                comm: &comm,
                prio,
            },
            cpu as i32,
        );
        let waker = Self::pid(self.cpus[i].current);
        self.push_event(i, t, waker, EVENT_SCHED_WAKING);
    }

    fn frequency(&mut self, t: u64, cluster: u32, khz: u32) {
        let Some(cpus) = self.clusters.get(cluster as usize) else {
            return;
        };
        for k in 0..cpus.len() {
            let cpu = self.clusters[cluster as usize][k];
            let i = self.ensure_cpu(cpu);
            let s = &mut self.inner;
            s.clear();
            wire::put_uint(s, 1, u64::from(khz));
            wire::put_uint(s, 2, u64::from(cpu));
            let current = Self::pid(self.cpus[i].current);
            self.push_event(i, t, current, EVENT_CPU_FREQUENCY);
        }
    }
}

impl<W: Write> Observer for PerfettoTrace<W> {
    /// A forked thread is described when it starts (threads named up front keep their name).
    fn thread_started(&mut self, thread: ThreadId, name: &str) {
        let i = thread as usize;
        if i >= self.described {
            while self.names.len() < i {
                let n = self.names.len();
                self.names.push(format!("t{n}"));
            }
            if self.names.len() == i {
                self.names.push(name.to_string());
            } else {
                self.names[i] = name.to_string();
            }
        }
        self.ensure_thread(thread);
    }

    fn job(&mut self, r: &JobRecord) {
        if self.jobs.is_none() {
            return;
        }
        self.ensure_thread(r.thread);
        self.job_slices(r, PROCESS_PID, thread_tid(r.thread), 0);
    }

    fn event(&mut self, e: &TraceEvent) {
        match *e {
            TraceEvent::Switch {
                t,
                cpu,
                next,
                prev_state,
                ..
            } => self.switch(t, cpu, next, prev_state),
            TraceEvent::Wakeup { t, thread, cpu } => self.waking(t, thread, cpu),
            TraceEvent::Frequency { t, cluster, khz } => self.frequency(t, cluster, khz),
            TraceEvent::Reservation {
                t,
                thread,
                runtime,
                period,
            } => {
                self.ensure_thread(thread);
                self.reserved_bandwidth(t, thread, runtime, period, PROCESS_PID, thread_tid(thread));
            }
            TraceEvent::Release { .. }
            | TraceEvent::Finish { .. }
            | TraceEvent::Throttle { .. }
            | TraceEvent::Replenish { .. }
            | TraceEvent::Migrate { .. } => {}
        }
    }

    fn wants_events(&self) -> bool {
        true
    }
}

/// The protobuf wire format, as far as the trace needs it
/// (<https://protobuf.dev/programming-guides/encoding/>): varints (wire type 0) and
/// length-delimited fields (wire type 2), and a reader of both for tests and tools.
pub mod wire {
    const VARINT: u64 = 0;
    const FIXED64: u64 = 1;
    const LEN: u64 = 2;
    const FIXED32: u64 = 5;

    /// Appends `v` as a base-128 varint.
    pub fn put_varint(buf: &mut Vec<u8>, mut v: u64) {
        while v >= 0x80 {
            buf.push(v as u8 | 0x80);
            v >>= 7;
        }
        buf.push(v as u8);
    }

    /// Appends field `field` as an unsigned varint (`uint32`, `uint64`, `bool`).
    pub fn put_uint(buf: &mut Vec<u8>, field: u32, v: u64) {
        put_varint(buf, u64::from(field) << 3 | VARINT);
        put_varint(buf, v);
    }

    /// Appends field `field` as a signed, not zigzag, varint (`int32`, `int64`: a negative value
    /// takes ten bytes, as protobuf specifies for both).
    pub fn put_int(buf: &mut Vec<u8>, field: u32, v: i64) {
        put_uint(buf, field, v as u64);
    }

    /// Appends the key and length of a length-delimited field whose `len` bytes follow.
    pub fn put_len(buf: &mut Vec<u8>, field: u32, len: usize) {
        put_varint(buf, u64::from(field) << 3 | LEN);
        put_varint(buf, len as u64);
    }

    /// Appends field `field` as bytes or an embedded message.
    pub fn put_bytes(buf: &mut Vec<u8>, field: u32, bytes: &[u8]) {
        put_len(buf, field, bytes.len());
        buf.extend_from_slice(bytes);
    }

    /// Appends field `field` as a `double` (wire type 1, little-endian IEEE 754).
    pub fn put_double(buf: &mut Vec<u8>, field: u32, v: f64) {
        put_varint(buf, u64::from(field) << 3 | FIXED64);
        buf.extend_from_slice(&v.to_le_bytes());
    }

    /// Appends field `field` as a string.
    pub fn put_str(buf: &mut Vec<u8>, field: u32, s: &str) {
        put_bytes(buf, field, s.as_bytes());
    }

    /// A field's value as the wire carries it.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Value<'a> {
        Varint(u64),
        Fixed64(u64),
        Bytes(&'a [u8]),
        Fixed32(u32),
    }

    impl<'a> Value<'a> {
        /// The varint, if it is one.
        pub fn varint(self) -> Option<u64> {
            match self {
                Value::Varint(v) => Some(v),
                _ => None,
            }
        }

        /// The bytes (string or message), if length-delimited.
        pub fn bytes(self) -> Option<&'a [u8]> {
            match self {
                Value::Bytes(b) => Some(b),
                _ => None,
            }
        }
    }

    /// Why a buffer is not a protobuf message.
    #[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
    pub enum DecodeError {
        #[error("truncated at byte {0}")]
        Truncated(usize),
        #[error("varint longer than ten bytes at byte {0}")]
        LongVarint(usize),
        #[error("unsupported wire type {wire_type} at byte {at}")]
        WireType { wire_type: u64, at: usize },
    }

    /// The fields of message `buf`, in order: `(field number, value)`.
    pub fn fields(buf: &[u8]) -> Fields<'_> {
        Fields { buf, at: 0 }
    }

    /// Iterator returned by [`fields`]; it stops after the first error.
    pub struct Fields<'a> {
        buf: &'a [u8],
        at: usize,
    }

    impl<'a> Fields<'a> {
        fn varint(&mut self) -> Result<u64, DecodeError> {
            let start = self.at;
            let mut v = 0u64;
            for shift in (0..70).step_by(7) {
                let Some(&b) = self.buf.get(self.at) else {
                    return Err(DecodeError::Truncated(self.at));
                };
                self.at += 1;
                v |= u64::from(b & 0x7f) << shift;
                if b < 0x80 {
                    return Ok(v);
                }
            }
            Err(DecodeError::LongVarint(start))
        }

        fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
            let end = self
                .at
                .checked_add(n)
                .filter(|&e| e <= self.buf.len())
                .ok_or(DecodeError::Truncated(self.at))?;
            let s = &self.buf[self.at..end];
            self.at = end;
            Ok(s)
        }

        fn field(&mut self) -> Result<(u32, Value<'a>), DecodeError> {
            let at = self.at;
            let key = self.varint()?;
            let value = match key & 7 {
                VARINT => Value::Varint(self.varint()?),
                FIXED64 => {
                    let b = self.take(8)?;
                    Value::Fixed64(u64::from_le_bytes(b.try_into().expect("8 bytes")))
                }
                LEN => {
                    let n = self.varint()?;
                    let n = usize::try_from(n).map_err(|_| DecodeError::Truncated(self.at))?;
                    Value::Bytes(self.take(n)?)
                }
                FIXED32 => {
                    let b = self.take(4)?;
                    Value::Fixed32(u32::from_le_bytes(b.try_into().expect("4 bytes")))
                }
                wire_type => return Err(DecodeError::WireType { wire_type, at }),
            };
            Ok(((key >> 3) as u32, value))
        }
    }

    impl<'a> Iterator for Fields<'a> {
        type Item = Result<(u32, Value<'a>), DecodeError>;

        fn next(&mut self) -> Option<Self::Item> {
            if self.at >= self.buf.len() {
                return None;
            }
            let r = self.field();
            if r.is_err() {
                self.at = self.buf.len();
            }
            Some(r)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::wire::{self, Value};

    #[test]
    fn varints_round_trip() {
        let mut b = Vec::new();
        wire::put_uint(&mut b, 1, 300);
        wire::put_int(&mut b, 2, -1);
        wire::put_str(&mut b, 330, "hé");
        let got: Vec<_> = wire::fields(&b).collect::<Result<_, _>>().unwrap();
        assert_eq!(
            got,
            vec![
                (1, Value::Varint(300)),
                (2, Value::Varint(u64::MAX)),
                (330, Value::Bytes("hé".as_bytes())),
            ]
        );
        assert_eq!(&b[..3], &[0x08, 0xac, 0x02]);
    }

    #[test]
    fn truncated_input_is_an_error() {
        let mut b = Vec::new();
        wire::put_str(&mut b, 1, "abc");
        b.pop();
        assert!(wire::fields(&b).next().unwrap().is_err());
    }
}
