//! The executor (`pacer runtime run`, rtdroid-android-timeliness.txt §3–4): runs a validated
//! application, one real-time thread per component, connected by the manifest's channels.
//!
//! What RTDroid's run-time does, as done here on Linux:
//! * **Set up once, before the first release** (§3.1): the process's memory is locked
//!   (`mlockall(MCL_CURRENT | MCL_FUTURE)`), each thread prefaults a stack region, takes its
//!   CPUs and its policy (SCHED_FIFO priority or SCHED_DEADLINE reservation, from the manifest)
//!   itself, and gets its per-release [`Arena`], its channel ends and its audio session, all
//!   allocated here. A component's own `init` runs then too, and what it allocates is counted
//!   as its persistent memory.
//! * **Releases**: a periodic component is released at t₀ + j·T on an absolute CLOCK_MONOTONIC
//!   timer; a service or receiver when a message is pending on its first input channel, at most
//!   once per period (release = max(previous + T, the oldest pending message's send time)). Each
//!   release runs inside the allocation guard's real-time section ([`crate::guard`]) and ends
//!   with the arena's reset.
//! * **Recorded per release**: release, start, finish, deadline, CPU time, involuntary
//!   switches, CPU, as `pacer_workload::jobs::JobRecord` (the jobs-CSV schema), handed to a
//!   collector thread through a preallocated lock-free queue, so the real-time threads never
//!   write files. Release jitter is start − release.
//! * **Shutdown** at the end of the duration or on SIGINT/SIGTERM/SIGHUP (blocked in every thread
//!   from before the first one starts and read through a signalfd): every component finishes its
//!   release, puts its own scheduling policy and affinity back (a thread restores itself, so a
//!   SCHED_DEADLINE thread is running when it leaves the class; see docs/linux.md on demoting a
//!   sleeping one from outside) and ends. If the process is killed outright its threads die with
//!   it and the kernel releases their bandwidth.
//!
//! [`Mode::Plain`] runs the same components on ordinary threads (SCHED_OTHER, no locking, no
//! prefaulting, no pinning): RTDroid's comparison with plain Android (Table 1, Figs. 22–26).

use std::collections::HashMap;
use std::io::Write;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::time::Duration;

use crossbeam_queue::ArrayQueue;
use hdrhistogram::Histogram;
use pacer_linux::run::Calibration;
use pacer_linux::sched::{self, SchedAttr, ThreadSched};
use pacer_linux::sys;
use pacer_model::Policy;
use pacer_workload::jobs::{Distribution, JobCsv, JobParquet, JobRecord, JobSink};
use serde::Serialize;
use thiserror::Error;

use crate::arena::Arena;
use crate::audio::{
    AudioManager, AudioOptions, Backend, PlaybackHandle, ReadOutcome, RecordHandle, SessionReport,
};
use crate::channel::{byte_channel, ByteReceiver, ByteSendError, ByteSender, Meta, Monitor, Overflow};
use crate::guard::{self, Section, Tally, TallyReport};
use crate::manifest::AudioSession;
use crate::manifest::{self, Direction, Kind, Manifest, Scheduling};

/// How the components' threads run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// The manifest's policies, memory locked, stacks prefaulted, CPUs pinned.
    Realtime,
    /// Ordinary SCHED_OTHER threads, nothing locked or pinned: the baseline.
    Plain,
}

/// A component's code. `release` runs on the component's real-time thread once per release;
/// it must not block (other than on the channels' bounded locks) and should not allocate (the
/// guard reports it if it does).
pub trait Component: Send {
    /// Runs once on the component's thread, after its policy is set and before the first
    /// release; what it allocates is its persistent memory (checked against the manifest's
    /// `persistent`). An `Err` stops the application before it starts.
    fn init(&mut self, _ctx: &mut Init<'_>) -> Result<(), String> {
        Ok(())
    }

    /// One release.
    fn release(&mut self, ctx: &mut Release<'_>);
}

/// What a component sees in `init`.
pub struct Init<'a> {
    pub name: &'a str,
    pub spec: &'a manifest::Component,
    /// Names of the channels it sends on and receives from.
    pub outputs: Vec<&'a str>,
    pub inputs: Vec<&'a str>,
    /// Message size of each output, in `outputs` order.
    pub output_sizes: Vec<usize>,
}

/// What a component sees during one release.
pub struct Release<'a> {
    /// 0-based release number.
    pub job: u64,
    /// Release time and absolute deadline, ns since the run's start.
    pub release_ns: u64,
    pub deadline_ns: u64,
    arena: &'a Arena,
    io: &'a mut Io,
}

/// A failed send on one of a channel's receiver queues.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum SendFailure {
    #[error("no output channel of that name")]
    NoSuchChannel,
    #[error("message of {len} bytes exceeds the channel's {max}")]
    TooLong { len: usize, max: usize },
}

/// What a send did on each receiver queue of a channel.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Delivery {
    pub queued: u32,
    /// Queued after the overflow rule evicted an older message.
    pub evicted: u32,
    /// Refused by the overflow rule, or the receiver is gone.
    pub dropped: u32,
}

impl<'a> Release<'a> {
    /// The per-release arena: emptied after this release.
    pub fn arena(&self) -> &Arena {
        self.arena
    }

    /// Sends `bytes` on output `channel` to every receiver's queue.
    pub fn send(&mut self, channel: &str, bytes: &[u8]) -> Result<Delivery, SendFailure> {
        let i = self
            .io
            .outputs
            .iter()
            .position(|o| o.name == channel)
            .ok_or(SendFailure::NoSuchChannel)?;
        self.io.send(i, bytes)
    }

    /// The playback session this component serves, if any: mix with
    /// [`PlaybackHandle::mixer`] and [`PlaybackHandle::play_mixed`], or [`PlaybackHandle::play`]
    /// one burst, exactly once per release.
    pub fn playback(&mut self) -> Option<&mut PlaybackHandle> {
        match self.io.audio.as_mut() {
            Some(AudioIo::Playback { handle, .. }) => Some(&mut **handle),
            _ => None,
        }
    }

    /// The record session this component serves, if any: [`RecordHandle::record`] once per
    /// release.
    pub fn record(&mut self) -> Option<&mut RecordHandle> {
        match self.io.audio.as_mut() {
            Some(AudioIo::Record { handle, .. }) => Some(&mut **handle),
            _ => None,
        }
    }

    /// Takes up to `max` pending messages of input `channel`, most urgent first.
    pub fn drain(
        &mut self,
        channel: &str,
        max: usize,
        handle: impl FnMut(Meta, &[u8]),
    ) -> Result<usize, SendFailure> {
        let i = self
            .io
            .inputs
            .iter()
            .position(|o| o.name == channel)
            .ok_or(SendFailure::NoSuchChannel)?;
        Ok(self.io.drain(i, max, handle))
    }
}

struct Output {
    name: String,
    size: usize,
    /// One per receiver queue of the channel.
    senders: Vec<ByteSender>,
}

struct Input {
    name: String,
    rx: ByteReceiver,
    /// Send-to-delivery latency of every message taken, ns.
    latency: Latencies,
    /// The receive side failed (the channel's lock refused): counted, never panicked on.
    errors: u64,
}

/// A component's channel ends and audio session.
struct Io {
    outputs: Vec<Output>,
    inputs: Vec<Input>,
    audio: Option<AudioIo>,
}

/// The audio session a component serves, with what the executor measures around it.
enum AudioIo {
    Playback {
        // Both sides boxed: the handles are large and of very different sizes.
        handle: Box<PlaybackHandle>,
        /// Playback latency (RTDroid Fig. 20): from a stream's send to the burst's write to the
        /// device, ns.
        latency: Box<Histogram<u64>>,
    },
    Record {
        handle: Box<RecordHandle>,
        /// One burst, the built-in component's buffer.
        buf: Vec<u8>,
    },
}

impl Io {
    fn send(&mut self, i: usize, bytes: &[u8]) -> Result<Delivery, SendFailure> {
        let Some(out) = self.outputs.get(i) else {
            return Err(SendFailure::NoSuchChannel);
        };
        if bytes.len() > out.size {
            return Err(SendFailure::TooLong {
                len: bytes.len(),
                max: out.size,
            });
        }
        let mut d = Delivery::default();
        for s in &out.senders {
            match s.send(bytes) {
                Ok(crate::channel::ByteSent::Queued { .. }) => d.queued += 1,
                Ok(crate::channel::ByteSent::Evicted { .. }) => {
                    d.queued += 1;
                    d.evicted += 1
                }
                Err(ByteSendError::TooLong { len, max }) => return Err(SendFailure::TooLong { len, max }),
                Err(_) => d.dropped += 1,
            }
        }
        Ok(d)
    }

    fn drain(&mut self, i: usize, max: usize, mut handle: impl FnMut(Meta, &[u8])) -> usize {
        let Some(input) = self.inputs.get_mut(i) else {
            return 0;
        };
        let lat = &mut input.latency;
        match input.rx.drain(max, |m, b| {
            // Delivered when handed over: later messages of a drain wait for the earlier ones.
            lat.record(sys::monotonic_ns(), &m);
            handle(m, b)
        }) {
            Ok(n) => n,
            Err(_) => {
                input.errors += 1;
                0
            }
        }
    }
}

/// Send-to-delivery latencies of one receiver queue: all messages, and per sender (RTDroid
/// Figs. 18–19 compare senders of different priorities on one channel).
struct Latencies {
    all: Histogram<u64>,
    by_sender: Vec<Histogram<u64>>,
}

impl Latencies {
    fn new(senders: usize) -> Result<Latencies, String> {
        let h = || {
            Histogram::new_with_bounds(1, LATENCY_TOP_NS, 3).map_err(|e| format!("latency histogram: {e}"))
        };
        Ok(Latencies {
            all: h()?,
            by_sender: (0..senders).map(|_| h()).collect::<Result<_, _>>()?,
        })
    }

    /// Records a message taken at `now`. Values beyond the histograms' top are recorded as the
    /// top: they never grow (no allocation on the real-time path).
    fn record(&mut self, now: u64, m: &Meta) {
        let v = now.saturating_sub(m.sent_ns).clamp(1, LATENCY_TOP_NS);
        let _ = self.all.record(v);
        if let Some(h) = self.by_sender.get_mut(m.sender.0 as usize) {
            let _ = h.record(v);
        }
    }
}

/// Highest latency a histogram records (larger values are recorded as this).
const LATENCY_TOP_NS: u64 = 60_000_000_000;

/// Run options.
pub struct RunOptions {
    /// How long to run; `None`: until a termination signal or `stop`.
    pub duration_ns: Option<u64>,
    pub mode: Mode,
    /// Set to end the run early (tests); termination signals do the same.
    pub stop: Arc<AtomicBool>,
    /// Where the per-release records go (the jobs CSV), if anywhere.
    pub jobs: Option<Box<dyn Write + Send>>,
    /// Write them as Parquet instead of CSV (the same columns).
    pub jobs_parquet: bool,
    /// The busy loop's calibration for built-in components' `work` (measured if `None` and
    /// needed).
    pub calibration: Option<Calibration>,
    /// Bytes of stack each thread touches before its first release.
    pub prefault_stack_bytes: usize,
    /// Termination signals, read by the collector: each ends the run as its duration would.
    /// Made by the caller (`SignalFd::new(&TERMINATING)`) before it starts any thread, so that
    /// no thread of the process, component or not, is left to receive them unblocked.
    pub signals: Option<pacer_linux::signals::SignalFd>,
    /// Called about every 100 ms from the collector with the run's elapsed ns (progress).
    pub progress: Option<Box<dyn FnMut(u64) + Send>>,
    /// A PM QoS CPU wake-up latency request held for the run (`/dev/cpu_dma_latency`), µs:
    /// keeps CPUs out of idle states slower to leave than this. `None`: the machine's own
    /// idle policy. [`RunOptions::new`] asks for 0 (poll, never halt) in real-time mode, as
    /// cyclictest does.
    pub cpu_latency_us: Option<u32>,
    /// Where the manifest's audio sessions go, and their device buffers.
    pub audio: Backend,
    pub audio_options: AudioOptions,
}

impl RunOptions {
    pub fn new(duration_ns: Option<u64>, mode: Mode) -> RunOptions {
        RunOptions {
            duration_ns,
            mode,
            stop: Arc::new(AtomicBool::new(false)),
            jobs: None,
            jobs_parquet: false,
            calibration: None,
            prefault_stack_bytes: 128 * 1024,
            signals: None,
            progress: None,
            cpu_latency_us: (mode == Mode::Realtime).then_some(0),
            audio: Backend::Null,
            audio_options: AudioOptions::default(),
        }
    }
}

/// Why a run could not start or finish.
#[derive(Debug, Error)]
pub enum ExecError {
    #[error("the application is not valid: {0}")]
    Invalid(String),
    #[error("component `{0}` is not in the manifest")]
    UnknownComponent(String),
    #[error("channel `{channel}`: {why}")]
    Channel { channel: String, why: String },
    #[error("component `{component}`: {why}")]
    Setup { component: String, why: String },
    #[error("{0}")]
    Os(String),
    #[error("writing the job records: {0}")]
    Jobs(std::io::Error),
    #[error("audio: {0}")]
    Audio(#[from] crate::audio::AudioError),
}

/// p50 / p99 / max of a distribution, ns: nearest-rank quantiles (pacer's one rule, as
/// `pacer_workload::jobs::compare::quantile`) on a histogram of 3 significant digits, each the
/// top of its bucket; max exact where the caller keeps it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Spread {
    pub p50_ns: u64,
    pub p99_ns: u64,
    pub max_ns: u64,
}

impl Spread {
    fn of_histogram(h: &Histogram<u64>) -> Spread {
        if h.is_empty() {
            return Spread::default();
        }
        Spread {
            p50_ns: h.value_at_quantile(0.5),
            p99_ns: h.value_at_quantile(0.99),
            max_ns: h.max(),
        }
    }

    fn of(d: &Distribution) -> Spread {
        Spread {
            p50_ns: d.quantile(0.5),
            p99_ns: d.quantile(0.99),
            max_ns: d.max(),
        }
    }
}

/// One component's run.
#[derive(Debug, Clone, Serialize)]
pub struct ComponentReport {
    pub name: String,
    pub kind: Kind,
    /// The policy it ran under (`SCHED_FIFO 80`, `SCHED_DEADLINE 1ms/10ms/10ms`, `SCHED_OTHER`).
    pub policy: String,
    pub cpus: Vec<usize>,
    pub releases: u64,
    pub misses: u64,
    /// The misses by what took the time ([`MissCauses`]).
    pub miss_causes: MissCauses,
    /// Releases whose CPU time exceeded the manifest's budget (or wcet).
    pub overruns: u64,
    /// Start − release.
    pub jitter: Spread,
    /// Finish − release.
    pub response: Spread,
    /// CPU time per release.
    pub exec: Spread,
    pub preemptions: u64,
    pub migrations: u64,
    pub deadline_ns: u64,
    pub period_ns: u64,
    /// What the allocation guard saw (`None`: the guard is not this process's allocator).
    pub allocations: Option<TallyReport>,
    pub per_release_budget_bytes: u64,
    /// The most arena memory one release used, and requests the arena refused.
    pub per_release_peak_bytes: u64,
    pub arena_refused: u64,
    pub persistent_budget_bytes: u64,
    /// Whether the thread's policy and affinity were put back before it ended.
    pub restored: bool,
    /// The component's code panicked: the message, and the release it happened in.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub panicked: Option<String>,
}

/// One receiver queue of a channel.
#[derive(Debug, Clone, Serialize)]
pub struct ChannelReport {
    pub channel: String,
    pub receiver: String,
    pub capacity: usize,
    pub overflow: String,
    pub sent: u64,
    pub delivered: u64,
    pub dropped: u64,
    pub evicted: u64,
    pub pending: u64,
    /// Send to delivery to the receiving component.
    pub latency: Spread,
    /// The same per sender, most urgent first.
    pub senders: Vec<SenderReport>,
}

/// One sender's messages on one receiver queue.
#[derive(Debug, Clone, Serialize)]
pub struct SenderReport {
    pub sender: String,
    /// The priority its messages carry (SCHED_DEADLINE senders: 100, above every FIFO one).
    pub priority: u32,
    pub sent: u64,
    pub delivered: u64,
    pub dropped: u64,
    pub evicted: u64,
    pub latency: Spread,
}

/// One audio session's run.
#[derive(Debug, Clone, Serialize)]
pub struct AudioReport {
    pub component: String,
    #[serde(flatten)]
    pub session: SessionReport,
    /// Playback: from a stream message's send to its burst's write to the device (RTDroid's
    /// playback latency, Fig. 20).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latency: Option<Spread>,
}

/// What `pacer runtime run` measured (`pacer.runtime.run/1`).
#[derive(Debug, Clone, Serialize)]
pub struct RunReport {
    pub schema: &'static str,
    pub app: String,
    pub mode: Mode,
    /// From the first release to the end, ns.
    pub elapsed_ns: u64,
    pub memory_locked: bool,
    /// The CPU wake-up latency held during the run (PM QoS), µs, if one was.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_latency_us: Option<u32>,
    /// Whether the allocation guard watched the run.
    pub guard: bool,
    /// Calibrated busy-loop speed used for built-in `work`, ns per loop.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ns_per_loop: Option<f64>,
    /// The signal that ended the run, if one did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signal: Option<String>,
    /// Its number.
    #[serde(skip)]
    pub signal_number: Option<i32>,
    pub components: Vec<ComponentReport>,
    pub channels: Vec<ChannelReport>,
    pub audio: Vec<AudioReport>,
    /// Per-release records the collector could not take (its queue was full): also missing
    /// from the jobs CSV and the statistics.
    pub records_lost: u64,
    pub notes: Vec<String>,
}

impl RunReport {
    pub const SCHEMA: &'static str = "pacer.runtime.run/1";

    pub fn misses(&self) -> u64 {
        self.components.iter().map(|c| c.misses).sum()
    }
}

/// The application: a manifest and the code of its components. A component without code gets
/// the built-in one ([`crate::exec::Builtin`]): its manifest `work`, arena use and channel traffic.
pub struct App {
    manifest: Manifest,
    code: Vec<Option<Box<dyn Component>>>,
}

impl App {
    pub fn new(manifest: Manifest) -> App {
        let code = manifest.components.iter().map(|_| None).collect();
        App { manifest, code }
    }

    /// Gives component `name` its code.
    pub fn with(mut self, name: &str, component: impl Component + 'static) -> Result<App, ExecError> {
        let i = self
            .manifest
            .components
            .iter()
            .position(|c| c.name == name)
            .ok_or_else(|| ExecError::UnknownComponent(name.to_string()))?;
        self.code[i] = Some(Box::new(component));
        Ok(self)
    }

    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }
}

/// Depth of each component's record queue: the collector empties it every 50 ms, so this
/// holds 50 ms of releases at 80 kHz.
const RECORD_QUEUE: usize = 4096;

/// What a component thread hands back when it ends.
struct Outcome {
    /// The component's inputs, receivers included: they must outlive every sender's thread, or
    /// a sender still running after this component ended would count its messages as dropped
    /// (the receiver gone) instead of pending.
    inputs: Vec<Input>,
    audio: Option<AudioReport>,
    peak: usize,
    refused: u64,
    restored: bool,
    panicked: Option<String>,
    policy: String,
}

/// Everything one component thread owns.
struct Slot {
    index: usize,
    spec: manifest::Component,
    code: Box<dyn Component>,
    io: Io,
    records: Arc<ArrayQueue<JobRecord>>,
    tally: Arc<Tally>,
    lost: Arc<AtomicU64>,
}

/// Shared between the main thread and the component threads.
struct Shared {
    /// t₀ (CLOCK_MONOTONIC ns), set before the start barrier.
    t0: AtomicU64,
    /// End time (absolute ns; u64::MAX: none).
    end: AtomicU64,
    stop: Arc<AtomicBool>,
    /// Set when set-up failed somewhere: threads leave at the barrier.
    abort: AtomicBool,
    running: AtomicUsize,
    start: Barrier,
    mode: Mode,
    prefault: usize,
    /// Each component's audio session, opened once t₀ is known and taken by its thread after
    /// the start barrier (before its first release).
    audio: Vec<Mutex<Option<AudioIo>>>,
}

/// Runs `app` (already validated by the caller: see [`crate::validate::check`]).
pub fn run(app: App, mut opts: RunOptions) -> Result<RunReport, ExecError> {
    let App { manifest, code } = app;
    let mut notes = Vec::new();

    // Termination signals were blocked by the caller before any thread existed, so each
    // component ends its release and restores itself instead of dying mid-release.
    let signals = opts.signals.take();

    let needs_loop = code
        .iter()
        .zip(&manifest.components)
        .any(|(c, m)| c.is_none() && m.work_ns > 0);
    let calibration = match (opts.calibration, needs_loop) {
        (Some(c), _) => Some(c),
        (None, true) => Some(pacer_linux::run::calibrate::calibrate()),
        (None, false) => None,
    };

    // A SCHED_DEADLINE thread's affinity must cover its root domain (the kernel refuses the
    // policy otherwise); a smaller CPU set would need an exclusive cpuset of its own.
    if opts.mode == Mode::Realtime {
        let online = sys::online_cpus();
        for c in &manifest.components {
            if matches!(c.scheduling, Scheduling::Deadline { .. }) && c.cpus != online {
                return Err(ExecError::Setup {
                    component: c.name.clone(),
                    why: format!(
                        "SCHED_DEADLINE on CPUs {} needs a root domain of its own (an exclusive cpuset), which `pacer runtime run` does not make yet: give it every online CPU ({}) or a SCHED_FIFO priority",
                        sys::format_cpu_list(&c.cpus),
                        sys::format_cpu_list(&online)
                    ),
                });
            }
        }
    }

    // Audio sessions: checked now, opened once t₀ is known (their devices start then).
    let mut serving: Vec<Option<usize>> = vec![None; manifest.components.len()];
    for (k, a) in manifest.audio.iter().enumerate() {
        crate::audio::check_session(a)?;
        crate::audio::check_backend(a, &opts.audio)?;
        let c = manifest
            .components
            .iter()
            .position(|c| c.name == a.component)
            .ok_or_else(|| ExecError::UnknownComponent(a.component.clone()))?;
        if serving[c].is_some() {
            return Err(ExecError::Setup {
                component: a.component.clone(),
                why: "serves two audio sessions; the runtime gives a component one".into(),
            });
        }
        serving[c] = Some(k);
    }

    let (mut ios, monitors) = wire_channels(&manifest)?;
    let mut slots = Vec::new();
    for (i, (spec, c)) in manifest.components.iter().zip(code).enumerate() {
        let io = std::mem::replace(
            &mut ios[i],
            Io {
                outputs: Vec::new(),
                inputs: Vec::new(),
                audio: None,
            },
        );
        if matches!(spec.kind, Kind::Service | Kind::Receiver) && io.inputs.is_empty() {
            return Err(ExecError::Setup {
                component: spec.name.clone(),
                why: format!(
                    "a {} is released by messages, and no channel has it as a receiver",
                    spec.kind.name()
                ),
            });
        }
        let code = match c {
            Some(c) => c,
            None => Box::new(Builtin::new(
                &manifest,
                spec,
                &io,
                calibration,
                serving[i].map(|k| &manifest.audio[k]),
            )) as Box<dyn Component>,
        };
        slots.push(Slot {
            index: i,
            spec: spec.clone(),
            code,
            io,
            records: Arc::new(ArrayQueue::new(RECORD_QUEUE)),
            tally: Arc::new(Tally::new()),
            lost: Arc::new(AtomicU64::new(0)),
        });
    }

    let memory_locked = match opts.mode {
        Mode::Realtime => match sys::lock_memory() {
            Ok(()) => true,
            Err(e) => {
                notes.push(format!(
                    "mlockall failed ({e}): page faults may delay releases (root or a larger RLIMIT_MEMLOCK lifts this)"
                ));
                false
            }
        },
        Mode::Plain => false,
    };
    // Held until `run` returns: the kernel drops the request when the file closes.
    let pm_qos = match opts.cpu_latency_us {
        Some(us) => match sys::CpuLatencyRequest::new(us) {
            Ok(r) => Some(r),
            Err(e) => {
                notes.push(format!(
                    "no CPU latency request ({e}): idle CPUs may take long to wake (root lifts this; --cpu-latency off silences it)"
                ));
                None
            }
        },
        None => None,
    };
    let guard_on = guard::installed();
    if !guard_on {
        notes.push("the allocation guard is not this program's allocator: allocations on the real-time path were not watched".into());
    }

    let shared = Arc::new(Shared {
        t0: AtomicU64::new(0),
        end: AtomicU64::new(u64::MAX),
        stop: opts.stop.clone(),
        abort: AtomicBool::new(false),
        running: AtomicUsize::new(slots.len()),
        start: Barrier::new(slots.len() + 1),
        mode: opts.mode,
        prefault: opts.prefault_stack_bytes,
        audio: manifest.components.iter().map(|_| Mutex::new(None)).collect(),
    });

    let names: Vec<String> = manifest.components.iter().map(|c| c.name.clone()).collect();
    let queues: Vec<_> = slots
        .iter()
        .map(|s| (s.records.clone(), s.lost.clone(), s.tally.clone()))
        .collect();
    let (ready_tx, ready_rx) = std::sync::mpsc::channel::<(usize, Result<(), String>)>();
    let mut handles = Vec::new();
    for slot in slots {
        let shared = shared.clone();
        let tx = ready_tx.clone();
        let name = slot.spec.name.clone();
        let h = std::thread::Builder::new()
            .name(name.clone())
            .stack_size(opts.prefault_stack_bytes.max(64 * 1024) + 256 * 1024)
            .spawn(move || component_thread(slot, shared, tx))
            .map_err(|e| ExecError::Setup {
                component: name,
                why: format!("starting its thread: {e}"),
            })?;
        handles.push(h);
    }
    drop(ready_tx);

    // Wait for every thread's set-up; the first failure aborts all of them at the barrier.
    let mut failure = None;
    for _ in 0..handles.len() {
        match ready_rx.recv() {
            Ok((i, Err(why))) => {
                if failure.is_none() {
                    failure = Some(ExecError::Setup {
                        component: names[i].clone(),
                        why,
                    });
                }
            }
            Ok((_, Ok(()))) => {}
            Err(_) => {
                failure.get_or_insert(ExecError::Os("a component thread ended during set-up".into()));
                break;
            }
        }
    }
    // Releases start a little after the barrier so every thread is asleep on its timer first,
    // and after the audio devices are open: they start at t₀ too.
    let margin = if manifest.audio.is_empty() {
        20_000_000
    } else {
        100_000_000
    };
    let t0 = sys::monotonic_ns() + margin;
    if failure.is_none() && !manifest.audio.is_empty() {
        if let Err(e) = open_audio(&manifest, &serving, &opts, t0, &shared) {
            failure = Some(e);
        } else if sys::monotonic_ns() + 10_000_000 > t0 {
            failure = Some(ExecError::Os(format!(
                "opening the audio sessions took longer than {} ms: the devices would start late",
                margin / 1_000_000
            )));
        }
    }
    if failure.is_some() {
        shared.abort.store(true, Ordering::SeqCst);
    }
    shared.t0.store(t0, Ordering::SeqCst);
    if let Some(d) = opts.duration_ns {
        shared.end.store(t0.saturating_add(d), Ordering::SeqCst);
    }
    shared.start.wait();
    if let Some(e) = failure {
        for h in handles {
            let _ = h.join();
        }
        if memory_locked {
            sys::unlock_memory();
        }
        return Err(e);
    }

    // The collector: records to the CSV and the statistics, signals, progress.
    let mut csv = match opts.jobs.take() {
        None => None,
        Some(w) if opts.jobs_parquet => Some(JobSink::Parquet(
            JobParquet::new(w, names.clone()).map_err(ExecError::Jobs)?,
        )),
        Some(w) => Some(JobSink::Csv(JobCsv::new(w, names.clone()))),
    };
    let mut stats: Vec<Collected> = (0..names.len()).map(|_| Collected::default()).collect();
    let limits: Vec<u64> = manifest.components.iter().map(|c| c.cost_ns()).collect();
    let mut signal = None;
    let mut last_progress = 0;
    loop {
        let done = shared.running.load(Ordering::SeqCst) == 0;
        for (i, (q, _, _)) in queues.iter().enumerate() {
            while let Some(r) = q.pop() {
                stats[i].add(&r, limits[i]);
                if let Some(c) = csv.as_mut() {
                    c.write(&r);
                }
            }
        }
        if done {
            break;
        }
        if let Some(s) = signals.as_ref().and_then(|s| s.next()) {
            signal.get_or_insert(s);
            shared.stop.store(true, Ordering::SeqCst);
        }
        let now = sys::monotonic_ns();
        if now.saturating_sub(last_progress) >= 100_000_000 {
            last_progress = now;
            if let Some(p) = opts.progress.as_mut() {
                p(now.saturating_sub(t0));
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let elapsed = sys::monotonic_ns().saturating_sub(t0);

    let mut outcomes = Vec::new();
    for h in handles {
        outcomes.push(
            h.join()
                .map_err(|_| ExecError::Os("a component thread panicked outside its code".into()))?,
        );
    }
    if memory_locked {
        sys::unlock_memory();
    }
    if let Some(c) = csv {
        c.finish().map_err(ExecError::Jobs)?;
    }

    let mut components = Vec::new();
    let mut latency_of: HashMap<(String, String), Latencies> = HashMap::new();
    let mut records_lost = 0;
    let mut audio = Vec::new();
    for (i, ((spec, o), st)) in manifest.components.iter().zip(outcomes).zip(stats).enumerate() {
        let (_, lost, tally) = &queues[i];
        records_lost += lost.load(Ordering::Relaxed);
        for Input {
            name: ch,
            latency: h,
            errors,
            ..
        } in o.inputs
        {
            if errors > 0 {
                notes.push(format!(
                    "component `{}`: {errors} receives on `{ch}` failed",
                    spec.name
                ));
            }
            latency_of.insert((ch, spec.name.clone()), h);
        }
        if let Some(p) = &o.panicked {
            notes.push(format!("component `{}` panicked: {p}", spec.name));
        }
        audio.extend(o.audio);
        components.push(ComponentReport {
            name: spec.name.clone(),
            kind: spec.kind,
            policy: o.policy,
            cpus: spec.cpus.clone(),
            releases: st.releases,
            misses: st.misses,
            miss_causes: st.miss_causes,
            overruns: st.overruns,
            jitter: Spread::of(&st.jitter),
            response: Spread::of(&st.response),
            exec: Spread::of(&st.exec),
            preemptions: st.preemptions,
            migrations: st.migrations,
            deadline_ns: spec.deadline_ns,
            period_ns: spec.period_ns,
            allocations: guard_on.then(|| tally.report()),
            per_release_budget_bytes: spec.per_release_bytes,
            per_release_peak_bytes: o.peak as u64,
            arena_refused: o.refused,
            persistent_budget_bytes: spec.persistent_bytes,
            restored: o.restored,
            panicked: o.panicked,
        });
    }
    let mut channels = Vec::new();
    for (channel, receiver, m) in monitors {
        let failed = |e: crate::channel::OsError| ExecError::Channel {
            channel: channel.clone(),
            why: e.to_string(),
        };
        let st = m.stats().map_err(failed)?;
        let per_sender = m.sender_stats().map_err(failed)?;
        let lat = latency_of.get(&(channel.clone(), receiver.clone()));
        let latency = lat.map(|l| Spread::of_histogram(&l.all)).unwrap_or_default();
        let names = &manifest
            .channels
            .iter()
            .find(|c| c.name == channel)
            .map(|c| c.senders.clone())
            .unwrap_or_default();
        let mut senders: Vec<SenderReport> = per_sender
            .iter()
            .map(|x| {
                let i = x.id.0 as usize;
                SenderReport {
                    sender: names.get(i).cloned().unwrap_or_default(),
                    priority: x.priority,
                    sent: x.counters.sent,
                    delivered: x.counters.delivered,
                    dropped: x.counters.dropped,
                    evicted: x.counters.evicted,
                    latency: lat
                        .and_then(|l| l.by_sender.get(i))
                        .map(Spread::of_histogram)
                        .unwrap_or_default(),
                }
            })
            .collect();
        senders.sort_by_key(|s| std::cmp::Reverse(s.priority));
        channels.push(ChannelReport {
            channel,
            receiver,
            capacity: st.capacity,
            overflow: overflow_name(st.overflow).into(),
            sent: st.totals.sent,
            delivered: st.totals.delivered,
            dropped: st.totals.dropped,
            evicted: st.totals.evicted,
            pending: st.pending as u64,
            latency,
            senders,
        });
    }
    Ok(RunReport {
        schema: RunReport::SCHEMA,
        app: manifest.name.clone(),
        mode: opts.mode,
        elapsed_ns: elapsed,
        memory_locked,
        cpu_latency_us: pm_qos.as_ref().map(|r| r.us),
        guard: guard_on,
        ns_per_loop: calibration.map(|c| c.ns_per_loop()),
        signal: signal.map(pacer_linux::run::signal_name),
        signal_number: signal,
        components,
        channels,
        audio,
        records_lost,
        notes,
    })
}

/// Opens every session with its device started at `t0` and leaves each in its component's slot.
fn open_audio(
    m: &Manifest,
    serving: &[Option<usize>],
    opts: &RunOptions,
    t0: u64,
    shared: &Shared,
) -> Result<(), ExecError> {
    let mut mgr = AudioManager::open_with(&m.audio, &opts.audio, t0, &opts.audio_options)?;
    for (c, k) in serving.iter().enumerate() {
        let Some(k) = *k else { continue };
        let a = &m.audio[k];
        let io = match a.direction {
            Direction::Playback => AudioIo::Playback {
                handle: Box::new(mgr.take_playback(&a.name)?),
                latency: Box::new(
                    Histogram::new_with_bounds(1, LATENCY_TOP_NS, 3)
                        .map_err(|e| ExecError::Os(format!("latency histogram: {e}")))?,
                ),
            },
            Direction::Record => {
                let handle = Box::new(mgr.take_record(&a.name)?);
                let buf = vec![0u8; handle.burst_bytes()];
                AudioIo::Record { handle, buf }
            }
        };
        if let Ok(mut slot) = shared.audio[c].lock() {
            *slot = Some(io);
        }
    }
    Ok(())
}

fn overflow_name(o: Overflow) -> &'static str {
    match o {
        Overflow::DropNewest => manifest::Overflow::DropNewest.name(),
        Overflow::DropOldest => manifest::Overflow::DropOldest.name(),
        Overflow::StealLowest => manifest::Overflow::PriorityOldest.name(),
    }
}

/// The SCHED_FIFO priority a component's messages carry (SCHED_DEADLINE components rank above
/// every FIFO priority, as the kernel runs them first).
fn sender_priority(c: &manifest::Component) -> u32 {
    match c.scheduling {
        Scheduling::Fifo { priority } => u32::from(priority),
        Scheduling::Deadline { .. } => 100,
    }
}

/// One byte channel per (channel, receiver): RTDroid's broadcast gives each receiver its own
/// queue (§3.2.2).
type Wired = (Vec<Io>, Vec<(String, String, Monitor)>);

fn wire_channels(m: &Manifest) -> Result<Wired, ExecError> {
    let index: HashMap<&str, usize> = m
        .components
        .iter()
        .enumerate()
        .map(|(i, c)| (c.name.as_str(), i))
        .collect();
    let mut ios: Vec<Io> = m
        .components
        .iter()
        .map(|_| Io {
            outputs: Vec::new(),
            inputs: Vec::new(),
            audio: None,
        })
        .collect();
    let mut monitors = Vec::new();
    for ch in &m.channels {
        let err = |why: String| ExecError::Channel {
            channel: ch.name.clone(),
            why,
        };
        let senders: Vec<usize> = ch
            .senders
            .iter()
            .map(|s| {
                index
                    .get(s.as_str())
                    .copied()
                    .ok_or_else(|| err(format!("no component `{s}`")))
            })
            .collect::<Result<_, _>>()?;
        let prios: Vec<u32> = senders
            .iter()
            .map(|&s| sender_priority(&m.components[s]))
            .collect();
        let overflow = match ch.overflow {
            manifest::Overflow::DropNewest => Overflow::DropNewest,
            manifest::Overflow::DropOldest => Overflow::DropOldest,
            manifest::Overflow::PriorityOldest => Overflow::StealLowest,
        };
        let size =
            usize::try_from(ch.message_size_bytes).map_err(|_| err("message size too large".into()))?;
        let capacity = usize::try_from(ch.capacity).map_err(|_| err("capacity too large".into()))?;
        let mut outs: Vec<Vec<ByteSender>> = senders.iter().map(|_| Vec::new()).collect();
        for r in &ch.receivers {
            let ri = *index
                .get(r.as_str())
                .ok_or_else(|| err(format!("no component `{r}`")))?;
            let (txs, rx) = byte_channel(&format!("{}->{}", ch.name, r), capacity, size, overflow, &prios)
                .map_err(|e| err(e.to_string()))?;
            monitors.push((ch.name.clone(), r.clone(), rx.monitor()));
            for (k, tx) in txs.into_iter().enumerate() {
                outs[k].push(tx);
            }
            ios[ri].inputs.push(Input {
                name: ch.name.clone(),
                rx,
                latency: Latencies::new(senders.len()).map_err(err)?,
                errors: 0,
            });
        }
        for (k, s) in senders.iter().enumerate() {
            ios[*s].outputs.push(Output {
                name: ch.name.clone(),
                size,
                senders: std::mem::take(&mut outs[k]),
            });
        }
    }
    Ok((ios, monitors))
}

/// What made missed releases late, from each release's own record: the first that applies of
/// preempted (the guest scheduler switched the thread out during the release), started late
/// (its CPU time fit between release and deadline, but it began after its deadline less that
/// time: woken late, or still busy with the previous release), and ran long (neither: its CPU
/// time did not fit, or the thread was stopped while running).
///
/// A release woken late with nothing of higher priority on its CPU, or one whose CPU-time clock
/// ran on through a gap with no switch, is time the machine itself did not run this system (a
/// virtual machine's host, firmware): `pacer bench stalls` measures that.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct MissCauses {
    pub preempted: u64,
    pub started_late: u64,
    pub ran_long: u64,
}

impl MissCauses {
    /// Counts `r` under its cause if it missed its deadline.
    fn add(&mut self, r: &JobRecord) {
        if !r.missed() {
            return;
        }
        if r.preemptions > 0 {
            self.preempted += 1;
        } else if r.release.saturating_add(r.exec) <= r.deadline
            && r.start.saturating_add(r.exec) > r.deadline
        {
            self.started_late += 1;
        } else {
            self.ran_long += 1;
        }
    }
}

/// Per-component statistics, kept by the collector.
#[derive(Default)]
struct Collected {
    releases: u64,
    misses: u64,
    miss_causes: MissCauses,
    overruns: u64,
    /// Histograms (3 significant digits) rather than every value: a run without a duration
    /// must not grow the collector's memory with its length.
    jitter: Distribution,
    response: Distribution,
    exec: Distribution,
    preemptions: u64,
    migrations: u64,
}

impl Collected {
    /// `limit`: the cost the analysis charged per release (0: none).
    fn add(&mut self, r: &JobRecord, limit: u64) {
        self.releases += 1;
        self.misses += u64::from(r.missed());
        self.miss_causes.add(r);
        self.overruns += u64::from(limit > 0 && r.exec > limit);
        self.jitter.add(r.start.saturating_sub(r.release));
        self.response.add(r.response_time());
        self.exec.add(r.exec);
        self.preemptions += u64::from(r.preemptions);
        self.migrations += u64::from(r.migrations);
    }
}

/// The description of the policy a thread runs under.
fn policy_text(p: &Policy) -> String {
    match p {
        Policy::Fifo { priority } => format!("SCHED_FIFO {priority}"),
        Policy::Deadline(r) => format!("SCHED_DEADLINE {}/{}/{}", r.runtime, r.deadline, r.period),
        other => other.name().to_string(),
    }
}

fn policy_of(spec: &manifest::Component) -> Policy {
    match spec.scheduling {
        Scheduling::Fifo { priority } => Policy::Fifo { priority },
        Scheduling::Deadline { .. } => match spec.scheduling.reservation() {
            Some(r) => Policy::Deadline(r),
            None => Policy::Other { nice: 0 },
        },
    }
}

/// Touches `bytes` of this thread's stack so its pages are faulted in (and, under mlockall,
/// locked) before the first release.
#[inline(never)]
fn prefault_stack(bytes: usize) {
    const STEP: usize = 16 * 1024;
    let mut page = [0u8; STEP];
    std::hint::black_box(&mut page);
    if bytes > STEP {
        prefault_stack(bytes - STEP);
    }
}

/// Sets the thread up as its component asks; returns the original state to restore.
fn set_up(
    slot: &mut Slot,
    shared: &Shared,
    tid: sched::Tid,
) -> Result<(ThreadSched, Vec<usize>, String), String> {
    let original = ThreadSched::read(tid).map_err(|e| format!("reading its policy: {e}"))?;
    let affinity = sched::get_affinity(tid).map_err(|e| format!("reading its affinity: {e}"))?;
    if shared.mode == Mode::Plain {
        return Ok((original, affinity, "SCHED_OTHER".into()));
    }
    prefault_stack(shared.prefault);
    if !slot.spec.cpus.is_empty() {
        sched::set_affinity(tid, &slot.spec.cpus)
            .map_err(|e| format!("pinning to CPUs {}: {e}", sys::format_cpu_list(&slot.spec.cpus)))?;
    }
    let policy = policy_of(&slot.spec);
    // Reset-on-fork: a real-time component must not hand its policy to a child it starts (and
    // a SCHED_DEADLINE thread cannot fork without it).
    let attr = SchedAttr::from_policy(&policy, true);
    if let Err(e) = sched::set_attr(tid, &attr) {
        let _ = sched::set_affinity(tid, &affinity);
        return Err(format!("taking {}: {e}", policy_text(&policy)));
    }
    Ok((original, affinity, policy_text(&policy)))
}

fn component_thread(
    mut slot: Slot,
    shared: Arc<Shared>,
    ready: std::sync::mpsc::Sender<(usize, Result<(), String>)>,
) -> Outcome {
    let tid = sched::gettid();
    sys::set_thread_name(&slot.spec.name);
    let mut arena = Arena::new(slot.spec.per_release_bytes as usize);
    let setup = set_up(&mut slot, &shared, tid);
    let (original, affinity, policy) = match setup {
        Ok(x) => x,
        Err(why) => {
            let _ = ready.send((slot.index, Err(why)));
            shared.start.wait();
            shared.running.fetch_sub(1, Ordering::SeqCst);
            return Outcome {
                inputs: Vec::new(),
                audio: None,
                peak: 0,
                refused: 0,
                restored: true,
                panicked: None,
                policy: "SCHED_OTHER".into(),
            };
        }
    };
    let restore = |original: &ThreadSched, affinity: &[usize]| -> bool {
        if shared.mode == Mode::Plain {
            return true;
        }
        let a = sched::restore(tid, original).is_ok();
        let b = sched::set_affinity(tid, affinity).is_ok();
        a && b
    };

    let init = {
        let Slot {
            spec,
            io,
            code,
            tally,
            ..
        } = &mut slot;
        let mut ctx = Init {
            name: &spec.name,
            spec,
            outputs: io.outputs.iter().map(|o| o.name.as_str()).collect(),
            inputs: io.inputs.iter().map(|o| o.name.as_str()).collect(),
            output_sizes: io.outputs.iter().map(|o| o.size).collect(),
        };
        let _g = guard::enter(tally, Section::Init);
        match std::panic::catch_unwind(AssertUnwindSafe(|| code.init(&mut ctx))) {
            Ok(r) => r,
            Err(p) => Err(format!("init panicked: {}", panic_text(&p))),
        }
    };
    let ok = init.is_ok();
    let _ = ready.send((slot.index, init.map_err(|e| format!("init: {e}"))));
    shared.start.wait();
    slot.io.audio = shared.audio[slot.index].lock().ok().and_then(|mut a| a.take());
    let mut outcome = Outcome {
        inputs: Vec::new(),
        audio: None,
        peak: 0,
        refused: 0,
        restored: false,
        panicked: None,
        policy,
    };
    if ok && !shared.abort.load(Ordering::SeqCst) {
        outcome.panicked = release_loop(&mut slot, &shared, &mut arena);
    }
    outcome.restored = restore(&original, &affinity);
    // Devices are closed and files renamed into place now, off the real-time path.
    outcome.audio = slot.io.audio.take().map(|a| match a {
        AudioIo::Playback { handle, latency } => AudioReport {
            component: slot.spec.name.clone(),
            session: handle.finish(),
            latency: Some(Spread::of_histogram(&latency)),
        },
        AudioIo::Record { handle, .. } => AudioReport {
            component: slot.spec.name.clone(),
            session: handle.finish(),
            latency: None,
        },
    });
    outcome.peak = arena.peak();
    outcome.refused = arena.refused();
    outcome.inputs = std::mem::take(&mut slot.io.inputs);
    shared.running.fetch_sub(1, Ordering::SeqCst);
    outcome
}

fn panic_text(p: &Box<dyn std::any::Any + Send>) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".into())
}

/// Longest a message-released component sleeps before looking at the stop flag again.
const POLL_NS: u64 = 20_000_000;

/// Releases the component until the end; returns a panic message if its code panicked.
fn release_loop(slot: &mut Slot, shared: &Shared, arena: &mut Arena) -> Option<String> {
    let t0 = shared.t0.load(Ordering::SeqCst);
    let end = shared.end.load(Ordering::SeqCst);
    let spec = &slot.spec;
    let period = spec.period_ns;
    let periodic = spec.kind == Kind::Periodic;
    let mut prev_release: Option<u64> = None;
    let mut job: u64 = 0;
    loop {
        if shared.stop.load(Ordering::Relaxed) {
            return None;
        }
        // When is the next release?
        let release = if periodic {
            let r = t0
                .saturating_add(spec.offset_ns)
                .saturating_add(job.saturating_mul(period));
            if r >= end {
                return None;
            }
            sys::sleep_until_ns(r);
            r
        } else {
            let earliest = prev_release.map_or(t0, |p| p.saturating_add(period));
            // `run` refuses a message-released component without inputs; none: nothing to do.
            let input = slot.io.inputs.first_mut()?;
            let now = sys::monotonic_ns();
            if now >= end {
                return None;
            }
            let wait = POLL_NS.min(end - now);
            match input.rx.wait(Duration::from_nanos(wait)) {
                Ok(Some(sent)) => {
                    let r = earliest.max(sent);
                    if r >= end {
                        return None;
                    }
                    sys::sleep_until_ns(r);
                    r
                }
                Ok(None) => continue,
                Err(_) => return None,
            }
        };
        if shared.stop.load(Ordering::Relaxed) {
            return None;
        }
        let start = sys::monotonic_ns();
        let cpu0 = sys::current_cpu();
        let exec0 = sys::thread_cpu_ns();
        let (_, inv0) = sys::context_switches();
        let deadline = release.saturating_add(spec.deadline_ns);
        let result = {
            let mut ctx = Release {
                job,
                release_ns: release - t0,
                deadline_ns: deadline - t0,
                arena,
                io: &mut slot.io,
            };
            let _g = guard::enter(&slot.tally, Section::RealTime);
            std::panic::catch_unwind(AssertUnwindSafe(|| slot.code.release(&mut ctx)))
        };
        let finish = sys::monotonic_ns();
        let exec = sys::thread_cpu_ns().saturating_sub(exec0);
        let (_, inv1) = sys::context_switches();
        let cpu1 = sys::current_cpu();
        arena.reset();
        let record = JobRecord {
            thread: slot.index as u32,
            job,
            release: release - t0,
            start: start.saturating_sub(t0),
            finish: finish.saturating_sub(t0),
            deadline: deadline - t0,
            period,
            exec,
            preemptions: inv1.saturating_sub(inv0).min(u64::from(u32::MAX)) as u32,
            migrations: u32::from(cpu0 != cpu1),
            cpu: cpu1,
        };
        if slot.records.push(record).is_err() {
            slot.lost.fetch_add(1, Ordering::Relaxed);
        }
        if let Err(p) = result {
            return Some(format!("release {job}: {}", panic_text(&p)));
        }
        prev_release = Some(release);
        job += 1;
    }
}

/// The built-in component: what a manifest component does when the application gives it no
/// code. Per release it takes every pending message of its inputs (reading each byte), fills
/// its per-release memory, runs its `work` as a calibrated busy loop, and sends its declared
/// messages per release on each output (their bytes stamped with the release number).
///
/// Serving an audio session it is also RTDroid's audio manager task (§4.2): for playback, the
/// mixer: every message of an input whose message size is one burst is a stream, mixed into
/// the release's burst (silence when no stream delivered), which is then written to the device;
/// for recording, the recorder: one burst read per release and sent on every output whose
/// message size is one burst.
pub struct Builtin {
    loops: u64,
    per_release: usize,
    /// (output index, messages per release, bytes, carries the recorded burst).
    sends: Vec<(usize, u64, usize, bool)>,
    /// Per input: `Some(senders)` when its messages are audio streams to mix.
    inputs: Vec<Option<usize>>,
    payload: Vec<u8>,
    /// Send times of the streams mixed in this release (capacity preallocated).
    sent: Vec<u64>,
    checksum: u64,
}

impl Builtin {
    fn new(
        m: &Manifest,
        spec: &manifest::Component,
        io: &Io,
        calibration: Option<Calibration>,
        session: Option<&AudioSession>,
    ) -> Builtin {
        let burst = session.map(|a| a.burst_bytes() as usize);
        let recording = session.is_some_and(|a| a.direction == Direction::Record);
        let playing = session.is_some_and(|a| a.direction == Direction::Playback);
        let sends: Vec<(usize, u64, usize, bool)> = io
            .outputs
            .iter()
            .enumerate()
            .map(|(i, o)| {
                let per = m
                    .channels
                    .iter()
                    .find(|c| c.name == o.name)
                    .map_or(1, |c| c.per_release);
                (i, per, o.size, recording && Some(o.size) == burst)
            })
            .collect();
        // A stream input gives one burst per sender per release: the bursts of one stream are
        // consecutive in time, so a second one waits for the next release instead of being
        // summed onto the first.
        let inputs: Vec<Option<usize>> = io
            .inputs
            .iter()
            .map(|i| {
                let senders = m
                    .channels
                    .iter()
                    .find(|c| c.name == i.name)
                    .map_or(1, |c| c.senders.len());
                (playing && Some(i.rx.message_size()) == burst).then_some(senders)
            })
            .collect();
        let streams: usize = m
            .channels
            .iter()
            .filter(|c| c.receivers.contains(&spec.name))
            .map(|c| c.capacity as usize)
            .sum();
        let biggest = sends.iter().map(|s| s.2).max().unwrap_or(0);
        Builtin {
            loops: calibration.map_or(0, |c| c.loops_for(spec.work_ns)),
            per_release: spec.per_release_bytes as usize,
            sends,
            inputs,
            payload: vec![0u8; biggest],
            sent: Vec::with_capacity(streams),
            checksum: 0,
        }
    }
}

impl Component for Builtin {
    fn release(&mut self, ctx: &mut Release<'_>) {
        let mut sum = self.checksum;
        let io = &mut *ctx.io;
        self.sent.clear();
        if let Some(AudioIo::Playback { handle, .. }) = io.audio.as_mut() {
            handle.mixer().begin();
        }
        for (i, &streams) in self.inputs.iter().enumerate() {
            let stream = streams.is_some();
            let Io { inputs, audio, .. } = &mut *io;
            let Some(input) = inputs.get_mut(i) else { continue };
            let sent = &mut self.sent;
            let lat = &mut input.latency;
            let r = input.rx.drain(streams.unwrap_or(usize::MAX), |m, b| {
                lat.record(sys::monotonic_ns(), &m);
                sum = sum.wrapping_add(m.seq);
                match (stream, audio.as_mut()) {
                    (true, Some(AudioIo::Playback { handle, .. })) => {
                        handle.mixer().add(b);
                        // Within the capacity reserved at creation: no allocation.
                        if sent.len() < sent.capacity() {
                            sent.push(m.sent_ns);
                        }
                    }
                    _ => {
                        for x in b {
                            sum = sum.wrapping_mul(31).wrapping_add(u64::from(*x));
                        }
                    }
                }
            });
            if r.is_err() {
                input.errors += 1;
            }
        }
        if self.per_release > 0 {
            if let Ok(mem) = ctx.arena.alloc_slice(self.per_release, 0u8) {
                for (k, b) in mem.iter_mut().enumerate().step_by(64) {
                    *b = k as u8;
                }
                sum = sum.wrapping_add(u64::from(mem[mem.len() - 1]));
            }
        }
        pacer_linux::run::calibrate::waste(self.loops);
        let mut recorded = false;
        match io.audio.as_mut() {
            Some(AudioIo::Playback { handle, latency }) => {
                let now = sys::monotonic_ns();
                handle.play_mixed(now);
                for &t in &self.sent {
                    let _ = latency.record(now.saturating_sub(t).clamp(1, LATENCY_TOP_NS));
                }
            }
            Some(AudioIo::Record { handle, buf }) => {
                recorded = matches!(
                    handle.record(sys::monotonic_ns(), buf),
                    ReadOutcome::Fresh { .. } | ReadOutcome::Overrun { .. }
                );
            }
            None => {}
        }
        let stamp = ctx.job.to_le_bytes();
        for &(out, per, size, burst) in &self.sends {
            if burst {
                if !recorded {
                    continue;
                }
                if let Some(AudioIo::Record { buf, .. }) = io.audio.as_ref() {
                    // Split borrow: the buffer is only read while sending.
                    let buf: &[u8] = buf;
                    for s in io.outputs.get(out).map(|o| o.senders.as_slice()).unwrap_or(&[]) {
                        let _ = s.send(buf);
                    }
                }
                continue;
            }
            let msg = &mut self.payload[..size];
            for (d, s) in msg.iter_mut().zip(stamp.iter().cycle()) {
                *d = *s;
            }
            for _ in 0..per {
                let _ = io.send(out, msg);
            }
        }
        self.checksum = std::hint::black_box(sum);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A release of a 10 ms component: released at 0, deadline 10 ms.
    fn release(start: u64, finish: u64, exec: u64, preemptions: u32) -> JobRecord {
        JobRecord {
            thread: 0,
            job: 0,
            release: 0,
            start,
            finish,
            deadline: 10_000_000,
            period: 10_000_000,
            exec,
            preemptions,
            migrations: 0,
            cpu: 0,
        }
    }

    #[test]
    fn misses_are_counted_under_the_first_cause_that_applies() {
        let mut m = MissCauses::default();
        // On time: not a miss, whatever happened.
        m.add(&release(9_000_000, 9_900_000, 900_000, 3));
        assert_eq!(m, MissCauses::default());
        // Switched out during the release: preempted, even though it also started late.
        m.add(&release(9_500_000, 11_000_000, 1_000_000, 1));
        // Woken at 9.5 ms with 1 ms of work: could not fit.
        m.add(&release(9_500_000, 10_500_000, 1_000_000, 0));
        // Started at 1 ms, 1 ms of CPU time, finished at 12 ms with no switch: the time went
        // elsewhere while it ran (a stopped machine), or its CPU time grew: ran long.
        m.add(&release(1_000_000, 12_000_000, 1_000_000, 0));
        m.add(&release(1_000_000, 12_000_000, 10_500_000, 0));
        assert_eq!(
            m,
            MissCauses {
                preempted: 1,
                started_late: 1,
                ran_long: 2
            }
        );
    }
}
