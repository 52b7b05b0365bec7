//! One real run of the audio callback (SynthMark's LatencyMark loop, `adaptive-deadline-audio-
//! android.txt` §4.2 and §5.3): a thread under the chosen scheduling wakes every T = b/S on an
//! absolute timer, renders one burst of b frames with the voices the pattern gives it, and
//! writes it into a [`VirtualSink`] of k bursts whose device side is the clock (Fig. 3). Under
//! the adaptive configuration the thread is a session of the client library: it announces the
//! coming voices as workUnits before the burst that plays them and marks each callback's begin
//! and end, so the proactive controller sizes its SCHED_DEADLINE budget (§5.2, eq. 3–5).
//!
//! Everything the loop touches is allocated before t₀; the loop's records go to a preallocated
//! vector. A second, SCHED_OTHER thread samples the callback thread's reservation
//! (`sched_getattr`) so that reserved bandwidth can be set against the CPU time the callbacks
//! used. The callback thread ends with the run, so every policy it was given ends with it: the
//! kernel releases a SCHED_DEADLINE thread's bandwidth when it exits, and the daemon (or the
//! in-process service) gives a session's threads back when the session closes.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration as StdDuration;

use pacer::{Client, Controller, SessionOptions};
use pacer_linux::playback::{Playback, PlaybackConfig, PlaybackReport};
use pacer_linux::sched::{self, SCHED_DEADLINE};
use pacer_linux::sys::{clock_ns, monotonic_ns, sleep_until_ns};
use pacer_model::{Duration, Policy, Reservation};
use pacer_workload::audio::{AudioClock, AudioSink, BurstOutcome, SinkCount, VirtualSink};
use serde::Serialize;

use super::AudioBenchError;

/// What renders a burst: the synthesizer, or a stand-in in tests.
pub trait Renderer: Send {
    /// Voices sounding from the next burst on.
    fn set_voices(&mut self, n: usize);
    /// Fills `out` (interleaved stereo) with the next burst.
    fn render(&mut self, out: &mut [f32]);
}

/// Where the adaptive configuration's session lives.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Via {
    /// `pacer_connect(NULL)`: the daemon at `$PACER_SOCKET` or the default socket, else (for a
    /// privileged process) the in-process service.
    Auto,
    /// The in-process service (root or CAP_SYS_NICE).
    InProcess,
    /// The daemon listening on this socket.
    Daemon(PathBuf),
}

/// How the callback thread is scheduled.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Scheduling {
    /// SCHED_OTHER at this nice value.
    Other { nice: i32 },
    /// SCHED_FIFO at this priority (SynthMark's default on Linux).
    Fifo { priority: u8 },
    /// A fixed SCHED_DEADLINE reservation of `runtime_ns` every T (deadline = period = T).
    Deadline { runtime_ns: u64 },
    /// SCHED_DEADLINE sized by the proactive controller through the client library.
    Adaptive {
        via: Via,
        /// Per-thread Q/P ceiling asked of pacer (`None`: its default).
        max_bandwidth: Option<f64>,
    },
}

impl Scheduling {
    /// The configuration's short name (`other`, `fifo`, `deadline`, `adaptive`).
    pub fn key(&self) -> &'static str {
        match self {
            Scheduling::Other { .. } => "other",
            Scheduling::Fifo { .. } => "fifo",
            Scheduling::Deadline { .. } => "deadline",
            Scheduling::Adaptive { .. } => "adaptive",
        }
    }

    fn is_deadline(&self) -> bool {
        matches!(self, Scheduling::Deadline { .. } | Scheduling::Adaptive { .. })
    }
}

/// One run.
#[derive(Debug, Clone)]
pub struct RunSpec {
    pub clock: AudioClock,
    /// Buffer size k (bursts).
    pub bursts: u32,
    /// Voices of each callback (its length is the number of callbacks).
    pub voices: Arc<Vec<u32>>,
    pub scheduling: Scheduling,
    /// Pin the callback thread to this CPU (SCHED_DEADLINE threads cannot be pinned inside a
    /// root domain of several CPUs: they keep the root domain's CPUs, and a note says so).
    pub cpu: Option<usize>,
    /// Period of the reservation sampler.
    pub sample_ns: u64,
    /// Callbacks done so far, for a progress display (one relaxed store per callback).
    pub progress: Option<Arc<AtomicU64>>,
    /// ALSA device that also gets every burst (`--device`), besides the virtual sink.
    pub device: Option<String>,
}

/// One callback as measured. Times are ns after t₀ (the sink's start).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Callback {
    /// When the callback was due: j·T.
    pub due_ns: u64,
    /// When the thread ran after its timer (= when it started if it did not sleep).
    pub wake_ns: u64,
    /// When the burst was in the sink.
    pub end_ns: u64,
    /// CPU time of the callback (render, sink write, the client library's notifications).
    pub cpu_ns: u64,
    pub voices: u32,
    /// Whether the thread slept until `due_ns` (false: it was late and went straight on).
    pub slept: bool,
    pub outcome: BurstOutcome,
}

impl Callback {
    /// Wake-up latency of a callback that slept: wake − due.
    pub fn wakeup_latency_ns(&self) -> Option<u64> {
        self.slept.then(|| self.wake_ns.saturating_sub(self.due_ns))
    }
    /// Completion latency: end − due (the burst's position in the buffer, in time).
    pub fn latency_ns(&self) -> u64 {
        self.end_ns.saturating_sub(self.due_ns)
    }
}

/// The callback thread's reservation at one instant (0 runtime: not SCHED_DEADLINE).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct BandwidthSample {
    /// ns after t₀ (negative times are clamped to 0).
    pub t_ns: u64,
    pub runtime_ns: u64,
    pub period_ns: u64,
}

impl BandwidthSample {
    pub fn bandwidth(&self) -> f64 {
        if self.period_ns == 0 {
            0.0
        } else {
            self.runtime_ns as f64 / self.period_ns as f64
        }
    }
}

/// What one run measured.
#[derive(Debug, Clone, Serialize)]
pub struct RunResult {
    pub configuration: &'static str,
    pub bursts: u32,
    pub period_ns: u64,
    /// Callbacks the run was to make.
    pub planned: u64,
    pub callbacks: Vec<Callback>,
    pub bandwidth: Vec<BandwidthSample>,
    pub sink: SinkCount,
    /// RMS level of the audio written (0 would mean the synthesizer produced silence).
    pub rms: f64,
    /// Stopped early (Ctrl-C, SIGTERM).
    pub interrupted: bool,
    /// The CPUs the callback thread was allowed on.
    pub cpus: Vec<usize>,
    /// Things worth knowing about this run (e.g. not pinned, memory not locked).
    pub notes: Vec<String>,
    /// Notifications the client library reported refused (adaptive only).
    pub refused_notifications: u32,
    /// Time the hypervisor ran something else while this machine's CPUs wanted to run
    /// (`steal` of /proc/stat, all CPUs) during the run; `None` where it cannot be read. A
    /// callback's CPU time includes stolen time the guest cannot see, so steal explains glitches
    /// no scheduling can prevent on a VM.
    pub steal_ns: Option<u64>,
    /// The ALSA device's side of the run (`--device`).
    pub device: Option<PlaybackReport>,
}

impl RunResult {
    /// Mean CPU time used per period over the callbacks: Σ cpu / (n·T).
    pub fn used_bandwidth(&self) -> f64 {
        if self.callbacks.is_empty() {
            return 0.0;
        }
        let cpu: u64 = self.callbacks.iter().map(|c| c.cpu_ns).sum();
        cpu as f64 / (self.callbacks.len() as f64 * self.period_ns as f64)
    }

    /// Time-averaged reserved bandwidth over the samples taken after t₀ (`None` when the thread
    /// never held a reservation).
    pub fn reserved_bandwidth(&self) -> Option<f64> {
        let s: Vec<&BandwidthSample> = self.bandwidth.iter().filter(|s| s.t_ns > 0).collect();
        if s.iter().all(|s| s.runtime_ns == 0) {
            return None;
        }
        Some(s.iter().map(|s| s.bandwidth()).sum::<f64>() / s.len() as f64)
    }
}

fn thread_cpu_ns() -> u64 {
    clock_ns(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// Sleeps until `abs` on CLOCK_MONOTONIC, through stray signals.
fn sleep_until(abs: u64, stop: &AtomicBool) {
    while !sleep_until_ns(abs) {
        if stop.load(Ordering::Relaxed) {
            return;
        }
    }
}

/// The callback thread's set-up: policy, affinity, the adaptive session. Returns the session
/// (kept alive for the run) and notes.
struct Setup {
    session: Option<(Client, pacer::Session)>,
    notes: Vec<String>,
    cpus: Vec<usize>,
}

fn set_up(spec: &RunSpec, tid: u32, first_voices: u32) -> Result<Setup, AudioBenchError> {
    let mut notes = Vec::new();
    let period = spec.clock.period_ns();
    if let Some(cpu) = spec.cpu {
        if spec.scheduling.is_deadline() {
            let rd = sched::get_affinity(tid).unwrap_or_default();
            if rd != [cpu] {
                notes.push(format!(
                    "not pinned to CPU {cpu}: a SCHED_DEADLINE thread keeps its root domain's CPUs \
                     ({}); run under `pacer cpuset --cpus {cpu}` to confine it",
                    pacer_linux::sys::format_cpu_list(&rd)
                ));
            }
        } else {
            sched::set_affinity(tid, &[cpu]).map_err(|e| AudioBenchError::Setup {
                what: format!("pinning the callback thread to CPU {cpu}"),
                why: e.to_string(),
            })?;
        }
    }
    let fail = |what: &str, e: String| AudioBenchError::Setup {
        what: what.to_string(),
        why: e,
    };
    let mut session = None;
    match &spec.scheduling {
        Scheduling::Other { nice } => {
            sched::set_policy(tid, Policy::Other { nice: *nice }, true)
                .map_err(|e| fail("setting SCHED_OTHER", e.to_string()))?;
        }
        Scheduling::Fifo { priority } => {
            sched::set_policy(tid, Policy::Fifo { priority: *priority }, true)
                .map_err(|e| fail(&format!("setting SCHED_FIFO priority {priority}"), e.to_string()))?;
        }
        Scheduling::Deadline { runtime_ns } => {
            let r = Reservation::new(Duration(*runtime_ns), Duration(period), Duration(period));
            sched::set_policy(tid, Policy::Deadline(r), true).map_err(|e| {
                fail(
                    &format!("setting SCHED_DEADLINE {} ns every {period} ns", runtime_ns),
                    e.to_string(),
                )
            })?;
        }
        Scheduling::Adaptive { via, max_bandwidth } => {
            let client = match via {
                Via::Auto => Client::connect(),
                Via::InProcess => Client::in_process(Default::default()),
                Via::Daemon(p) => Client::connect_to(p),
            }
            .map_err(|e| fail("connecting to pacer", e.to_string()))?;
            let mut o = SessionOptions::new(&[tid], period).controller(Controller::Proactive);
            if let Some(b) = max_bandwidth {
                o = o.max_bandwidth(*b);
            }
            let s = client
                .session_with(&o)
                .map_err(|e| fail("creating the adaptive session", e.to_string()))?;
            // The first step's voices are known before the first callback (§5.2); wait until the
            // budget they give is applied so that the run starts with it.
            s.hint_work_units(first_voices)
                .map_err(|e| fail("sending the first workUnits hint", e.to_string()))?;
            s.sync()
                .map_err(|e| fail("waiting for the first hint", e.to_string()))?;
            if client.welcome().in_process {
                notes.push("pacer's in-process service (no daemon)".into());
            } else {
                notes.push(format!(
                    "through pacer daemon (pid {}) as uid {}",
                    client.welcome().daemon_pid,
                    client.welcome().uid
                ));
            }
            session = Some((client, s));
        }
    }
    let cpus = sched::get_affinity(tid).unwrap_or_default();
    Ok(Setup { session, notes, cpus })
}

/// Runs the callback for `spec.voices.len()` bursts (or until `stop`), rendering with
/// `renderer`. Blocks for the run's duration.
pub fn run(
    spec: &RunSpec,
    mut renderer: Box<dyn Renderer>,
    stop: &'static AtomicBool,
) -> Result<RunResult, AudioBenchError> {
    spec.clock
        .validate()
        .map_err(|e| AudioBenchError::Input(e.to_string()))?;
    let model = AudioSink::new(spec.clock.period_ns(), spec.bursts)
        .map_err(|e| AudioBenchError::Input(e.to_string()))?;
    let period = spec.clock.period_ns();
    let n = spec.voices.len();
    if n == 0 {
        return Err(AudioBenchError::Input("a run needs at least one callback".into()));
    }
    let samples_per_burst = spec.clock.burst_frames as usize * 2;
    let tid_cell = Arc::new(AtomicU32::new(0));
    let done = Arc::new(AtomicBool::new(false));
    let (t0_tx, t0_rx) = mpsc::channel::<u64>();

    // The sampler: every `sample_ns`, the callback thread's reservation. Plain SCHED_OTHER, so
    // it never delays the callback; it reads nothing the callback writes.
    let sampler = {
        let tid_cell = tid_cell.clone();
        let done = done.clone();
        let every = spec.sample_ns.max(1_000_000);
        let cap = (n as u64 * period / every + 16) as usize;
        std::thread::Builder::new()
            .name("pacer-audio-bw".into())
            .spawn(move || {
                let mut out: Vec<(u64, BandwidthSample)> = Vec::with_capacity(cap);
                let Ok(t0) = t0_rx.recv() else { return (0, out) };
                let tid = tid_cell.load(Ordering::Acquire);
                let mut next = monotonic_ns();
                while !done.load(Ordering::Acquire) && !stop.load(Ordering::Relaxed) {
                    let now = monotonic_ns();
                    if let Ok(a) = sched::get_attr(tid) {
                        let (runtime_ns, period_ns) = if a.sched_policy == SCHED_DEADLINE {
                            (a.sched_runtime, a.sched_period.max(a.sched_deadline))
                        } else {
                            (0, 0)
                        };
                        if out.len() < out.capacity() {
                            out.push((
                                now,
                                BandwidthSample {
                                    t_ns: now.saturating_sub(t0),
                                    runtime_ns,
                                    period_ns,
                                },
                            ));
                        }
                    }
                    next += every;
                    std::thread::sleep(StdDuration::from_nanos(next.saturating_sub(monotonic_ns())));
                }
                (t0, out)
            })
            .map_err(|e| AudioBenchError::Setup {
                what: "starting the sampler thread".into(),
                why: e.to_string(),
            })?
    };

    let spec2 = spec.clone();
    let tid_cell2 = tid_cell.clone();
    let callback = std::thread::Builder::new()
        .name("pacer-audio".into())
        .spawn(move || -> Result<_, AudioBenchError> {
            let spec = spec2;
            let tid = sched::gettid();
            tid_cell2.store(tid, Ordering::Release);
            let voices = spec.voices.clone();
            let setup = set_up(&spec, tid, voices[0]);
            let setup = match setup {
                Ok(s) => s,
                Err(e) => {
                    drop(t0_tx);
                    return Err(e);
                }
            };
            let mut device = match spec.device.as_deref().map(|d| open_device(d, &spec)) {
                Some(Ok(p)) => Some(p),
                Some(Err(e)) => {
                    drop(t0_tx);
                    return Err(e);
                }
                None => None,
            };
            let mut scratch = vec![0.0f32; samples_per_burst];
            let mut records: Vec<Callback> = Vec::with_capacity(n);
            // Warm the synthesizer, the scratch buffer and the code path before t₀.
            renderer.set_voices(voices[0] as usize);
            renderer.render(&mut scratch);
            // t₀ a few periods ahead, so the sampler is running and the first wake-up is a
            // timer's like every other.
            let t0 = monotonic_ns() + 4 * period;
            let mut sink = VirtualSink::new(model, samples_per_burst, t0);
            let _ = t0_tx.send(t0);
            let session = setup.session.as_ref().map(|(_, s)| s);
            let mut current = voices[0];
            let mut interrupted = false;
            for j in 0..n {
                if stop.load(Ordering::Relaxed) {
                    interrupted = true;
                    break;
                }
                let due = sink.space_at(j as u64);
                let before = monotonic_ns();
                let slept = before < due;
                if slept {
                    sleep_until(due, stop);
                }
                let wake = if slept { monotonic_ns() } else { before };
                let cpu0 = thread_cpu_ns();
                if let Some(s) = session {
                    let _ = s.job_begin();
                }
                let v = voices[j];
                if v != current {
                    renderer.set_voices(v as usize);
                    current = v;
                }
                renderer.render(&mut scratch);
                let end = monotonic_ns();
                let outcome = sink.write(&scratch, end);
                if let Some(d) = device.as_mut() {
                    if j == 0 {
                        // The device's clock starts here, with the sink's k bursts queued.
                        d.prime(spec.bursts.saturating_sub(1), samples_per_burst);
                    }
                    d.write(&scratch);
                }
                if let Some(s) = session {
                    let _ = s.job_end();
                    // Announce the next burst's voices before it (the proactive API, §5.2).
                    if let Some(&next) = voices.get(j + 1) {
                        if next != v {
                            let _ = s.hint_work_units(next);
                        }
                    }
                }
                let cpu1 = thread_cpu_ns();
                records.push(Callback {
                    due_ns: due - t0,
                    wake_ns: wake.saturating_sub(t0),
                    end_ns: end.saturating_sub(t0),
                    cpu_ns: cpu1.saturating_sub(cpu0),
                    voices: v,
                    slept,
                    outcome,
                });
                if let Some(p) = &spec.progress {
                    p.store(j as u64 + 1, Ordering::Relaxed);
                }
            }
            let written = sink.written();
            let horizon = t0 + (written.max(1) - 1 + model.bursts as u64) * period;
            let count = sink.finish(horizon);
            let mut refused = 0;
            let mut notes = setup.notes;
            let device = device.map(Playback::finish);
            if let Some((_, s)) = setup.session {
                if let Ok(r) = s.sync() {
                    refused = r.failed;
                    if let Some(e) = r.last_error {
                        notes.push(format!("the adaptive session refused notifications: {e:?}"));
                    }
                }
                if let Err(e) = s.close() {
                    notes.push(format!("closing the adaptive session: {e}"));
                }
            }
            Ok((
                records,
                count,
                sink.rms(),
                interrupted,
                setup.cpus,
                notes,
                refused,
                device,
            ))
        })
        .map_err(|e| AudioBenchError::Setup {
            what: "starting the callback thread".into(),
            why: e.to_string(),
        })?;
    let steal0 = pacer_linux::sys::steal_ns();
    let joined = callback.join();
    let steal = match (steal0, pacer_linux::sys::steal_ns()) {
        (Some(a), Some(b)) => Some(b.saturating_sub(a)),
        _ => None,
    };
    done.store(true, Ordering::Release);
    let (_, samples) = sampler.join().unwrap_or((0, Vec::new()));
    let (callbacks, sink, rms, interrupted, cpus, notes, refused, device) = match joined {
        Ok(r) => r?,
        Err(_) => {
            return Err(AudioBenchError::Setup {
                what: "the callback thread".into(),
                why: "it panicked".into(),
            })
        }
    };
    Ok(RunResult {
        configuration: spec.scheduling.key(),
        bursts: spec.bursts,
        period_ns: period,
        planned: n as u64,
        callbacks,
        bandwidth: samples.into_iter().map(|(_, s)| s).collect(),
        sink,
        rms,
        interrupted,
        cpus,
        notes,
        refused_notifications: refused,
        steal_ns: steal,
        device,
    })
}

/// Opens `--device` for this run's clock: a period of one burst, a buffer of k bursts.
fn open_device(name: &str, spec: &RunSpec) -> Result<Playback, AudioBenchError> {
    Playback::open(&PlaybackConfig {
        device: name.to_string(),
        rate: spec.clock.sample_rate_hz,
        burst_frames: spec.clock.burst_frames,
        bursts: spec.bursts,
    })
    .map_err(|e| AudioBenchError::Setup {
        what: "--device".into(),
        why: e.to_string(),
    })
}

impl Renderer for pacer_workload::synth::Synth {
    fn set_voices(&mut self, n: usize) {
        pacer_workload::synth::Synth::set_voices(self, n)
    }
    fn render(&mut self, out: &mut [f32]) {
        pacer_workload::synth::Synth::render(self, out)
    }
}
