//! `pacer audio`: the SynthMark-style audio benchmark on this machine's kernel (issue 17). The
//! benchmark lives in `pacer_experiments::audio`; this module parses the command line, plans
//! the runs, and prints what they measured (text, `--json`, `--csv`, `--report`).

use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use pacer_experiments::audio::engine::{self, RunResult, RunSpec, Scheduling, Via};
use pacer_experiments::audio::voicemark::{self, VoiceMarkRun, VoiceMarkSpec};
use pacer_experiments::audio::{
    histogram_ns, scale_voices, AudioBenchError, Load, LoadSpec, Renderer, RunSummary,
};
use pacer_linux::cpufreq::{CpuFreq, Energy, PowerTable, ResidencySnapshot};
use pacer_linux::signals::{self, SignalFd};
use pacer_model::Duration;
use pacer_workload::audio::{latency_mark, AudioClock, VoicePattern};
use pacer_workload::synth::Synth;
use serde::{Deserialize, Serialize};

use crate::analyze::parse_duration;
use crate::output::{Outputs, Slot, Stdout};
use crate::table::Table;

/// JSON schema of `pacer audio`'s output (docs/formats/json.md style: `pacer.<command>/N`).
const SCHEMA: &str = "pacer.audio/1";
/// JSON schema of a VoiceMark result, which `pacer sim audio --cost-from` reads.
pub const VOICEMARK_SCHEMA: &str = "pacer.audio.voicemark/1";
/// The most voices the synthesizer is built for.
const VOICE_CAP: u32 = pacer_workload::synth::MAX_VOICES_LIMIT as u32;

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// The smallest glitch-free buffer per configuration (or, with --bursts K, the underruns at K).
    Latencymark,
    /// The voices one CPU renders in real time, over --runs runs with their spread.
    Voicemark,
    /// Wake-up latency and callback CPU time histograms per configuration.
    Jittermark,
    /// CPU time used against bandwidth reserved, step by step, per configuration.
    Utilizationmark,
    /// Only the background load (--hogs, --noise) for --duration: the load for an audio run in
    /// another process (e.g. an unprivileged one through `pacer daemon`).
    Load,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Config {
    /// SCHED_OTHER (nice --nice).
    Other,
    /// SCHED_FIFO at --fifo-priority (SynthMark's default on Linux).
    Fifo,
    /// A fixed SCHED_DEADLINE reservation (--dl-runtime, default sized for the loudest step).
    Deadline,
    /// SCHED_DEADLINE sized by pacer's proactive controller through the client library:
    /// workUnits hints before the bursts that need them, job begin/end marks.
    Adaptive,
}

impl Config {
    fn key(self) -> &'static str {
        match self {
            Config::Other => "other",
            Config::Fifo => "fifo",
            Config::Deadline => "deadline",
            Config::Adaptive => "adaptive",
        }
    }
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ViaArg {
    /// The daemon at $PACER_SOCKET or /run/pacer/pacer.sock; else, if privileged, in-process.
    Auto,
    /// pacer's service inside this process (root or CAP_SYS_NICE).
    Inprocess,
    /// The daemon (at --socket, $PACER_SOCKET or /run/pacer/pacer.sock).
    Daemon,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum PatternArg {
    /// Uniform random voices in [--low, --high] every --step (the paper's §6.3 run).
    Random,
    /// --low and --high alternating every --step (§6.1–6.2).
    Square,
    /// --high voices throughout.
    Constant,
}

#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:\n  \
pacer audio                                   # LatencyMark of every configuration allowed here\n  \
pacer audio voicemark --runs 5                # voices per CPU on this machine, with their spread\n  \
pacer audio --config fifo,adaptive --bursts 2 --duration 60s --cpu 1 --noise 0.5\n  \
                                              # 60 s at 2 bursts beside SCHED_FIFO noise above the audio\n  \
pacer audio jittermark --config fifo --report jitter.html\n  \
pacer audio load --noise 0.5 --cpu 1 --duration 70s &   # root: the noise for ...\n  \
pacer audio --config adaptive --via daemon --bursts 2 --cpu 1 --voices-per-cpu 2139\n  \
  # ... as any user (2139: the voices per CPU `pacer audio voicemark` measured)\n\n\
The callback renders b frames (--burst) of a real polyphonic synthesizer (band-limited \
oscillators, ADSR envelopes, a resonant filter per voice, a stereo mixer) every T = b/S on an \
absolute timer and writes them into a virtual sink of k bursts whose device reads one burst every \
T from the start (adaptive-deadline-audio-android.txt Fig. 3): a burst written after its read time \
is an underrun (a glitch), one written after T a late (soft-deadline) callback. The paper's \
workUnits patterns are in its voices (210 saturate its CPU); they are played in this machine's \
voices, scaled by the voices one CPU renders in real time (VoiceMark, measured at start unless \
--voices-per-cpu or --cost-from gives it), so 185 paper voices are 88 % of a CPU here too.\n\n\
Configurations a process may not use (SCHED_FIFO and SCHED_DEADLINE need root or CAP_SYS_NICE, \
adaptive needs `pacer daemon` or that privilege) are listed as not run when --config is not \
given, and are errors when it names them. Every policy given is gone when pacer audio exits: the \
callback thread ends with its run, and an adaptive session is closed (the daemon also releases it \
if the process is killed).")]
pub struct Args {
    /// What to measure.
    #[arg(value_enum, default_value = "latencymark")]
    pub mode: Mode,
    /// Configurations (comma-separated); default: every one this process may use.
    #[arg(long, value_enum, value_delimiter = ',')]
    pub config: Option<Vec<Config>>,
    /// Sampling rate S, Hz.
    #[arg(long, default_value_t = 48_000)]
    pub rate: u32,
    /// Burst size b, frames (the callback period is b/S).
    #[arg(long, default_value_t = 64)]
    pub burst: u32,
    /// Buffer of K bursts: measure the underruns at K instead of searching for the smallest
    /// glitch-free buffer (jittermark and utilizationmark default to 8).
    #[arg(long, value_name = "K")]
    pub bursts: Option<u32>,
    /// The largest buffer LatencyMark tries, bursts.
    #[arg(long, default_value_t = 32, value_name = "K")]
    pub max_bursts: u32,
    /// Length of each run.
    #[arg(short = 'd', long, value_parser = parse_duration, default_value = "10s")]
    pub duration: Duration,
    /// workUnits pattern, in the paper's voices.
    #[arg(long, value_enum, default_value = "random")]
    pub pattern: PatternArg,
    /// Fewest paper voices of the pattern.
    #[arg(long, default_value_t = 5)]
    pub low: u64,
    /// Most paper voices of the pattern (the constant pattern's voices).
    #[arg(long, default_value_t = 185)]
    pub high: u64,
    /// Time between changes of voices.
    #[arg(long, value_parser = parse_duration, default_value = "3s")]
    pub step: Duration,
    /// Seed of the random pattern and of the synthesizer's notes (recorded in the output).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Voices one CPU renders in real time here (skips the VoiceMark at start).
    #[arg(long, value_name = "V", conflicts_with = "cost_from")]
    pub voices_per_cpu: Option<f64>,
    /// Take voices per CPU from a `pacer audio voicemark --json` file.
    #[arg(long, value_name = "FILE")]
    pub cost_from: Option<PathBuf>,
    /// Scale the pattern's load: 0.5 plays every step at half the voices.
    #[arg(long, default_value_t = 1.0)]
    pub load_scale: f64,
    /// Pin the callback thread and the background load to this CPU (SynthMark pins to one CPU;
    /// SCHED_DEADLINE threads keep their root domain's CPUs, see `pacer cpuset`).
    #[arg(long, value_name = "N")]
    pub cpu: Option<usize>,
    /// The callback's SCHED_FIFO priority in the fifo configuration.
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u8).range(1..=99))]
    pub fifo_priority: u8,
    /// The callback's nice value in the other configuration.
    #[arg(long, default_value_t = 0, allow_hyphen_values = true)]
    pub nice: i32,
    /// Runtime of the fixed reservation (default: the loudest step's cost from VoiceMark, +25 %).
    #[arg(long, value_parser = parse_duration)]
    pub dl_runtime: Option<Duration>,
    /// Where the adaptive session lives.
    #[arg(long, value_enum, default_value = "auto")]
    pub via: ViaArg,
    /// The daemon's socket (implies --via daemon).
    #[arg(long, value_name = "PATH")]
    pub socket: Option<PathBuf>,
    /// Per-thread bandwidth ceiling asked of pacer for the adaptive session (default: 1.5 × the
    /// loudest step's share of a CPU from VoiceMark, within [0.3, 0.95]; the daemon counts it
    /// against the user's quota).
    #[arg(long, value_name = "Q/P")]
    pub max_bandwidth: Option<f64>,
    /// SCHED_OTHER busy threads beside the audio.
    #[arg(long, default_value_t = 0, value_parser = crate::count_in::<0, 256>)]
    pub hogs: usize,
    /// Periodic SCHED_FIFO noise taking this share of a CPU (e.g. 0.5) at --noise-priority.
    #[arg(long, value_name = "SHARE")]
    pub noise: Option<f64>,
    /// Period of the noise.
    #[arg(long, value_parser = parse_duration, default_value = "10ms")]
    pub noise_period: Duration,
    /// SCHED_FIFO priority of the noise (default: --fifo-priority + 1, above the audio).
    #[arg(long, value_parser = clap::value_parser!(u8).range(1..=99))]
    pub noise_priority: Option<u8>,
    /// VoiceMark: runs.
    #[arg(long, default_value_t = 5, value_parser = crate::count_in::<1, 100>)]
    pub runs: usize,
    /// VoiceMark: bursts rendered per point.
    #[arg(long, default_value_t = 400, value_parser = crate::count_in::<10, 100_000>)]
    pub bursts_per_point: usize,
    /// Period of the reservation sampler.
    #[arg(long, value_parser = parse_duration, default_value = "10ms")]
    pub sample: Duration,
    /// ALSA PCM that also plays every burst (`default`, `hw:0,0`, `plughw:1`; `null` discards
    /// them and has no clock). The callback keeps its own timer and the virtual sink; the device
    /// reports its own xruns and the bursts it had no room for. Without it the virtual sink
    /// plays alone.
    #[arg(long, value_name = "NAME")]
    pub device: Option<String>,
    /// OPP power table (docs/formats/power-table.md) for frequency residency and energy.
    #[arg(long, value_name = "FILE")]
    pub power: Option<PathBuf>,
    /// Machine-readable JSON on standard output.
    #[arg(long)]
    pub json: bool,
    /// An HTML report with SVG plots (completion and wake-up latency CDFs, reserved vs used
    /// bandwidth over time; VoiceMark: cost against voices), readable offline.
    #[arg(long, value_name = "FILE.html")]
    pub report: Option<PathBuf>,
    /// Write `<configuration>-callbacks.csv` and `<configuration>-bandwidth.csv` (the reported
    /// run of each configuration) into this directory.
    #[arg(long, value_name = "DIR")]
    pub csv: Option<PathBuf>,
}

/// The stop flag the runs poll: set by SIGINT, SIGTERM or SIGHUP.
static STOP: AtomicBool = AtomicBool::new(false);

/// Blocks the terminating signals here (before any thread exists, so all inherit the mask) and
/// turns them into [`STOP`] on a watcher thread.
fn watch_signals() -> Result<Arc<AtomicBool>> {
    let sigs = SignalFd::new(&signals::TERMINATING).context("setting up signal handling")?;
    let done = Arc::new(AtomicBool::new(false));
    let d = done.clone();
    std::thread::Builder::new()
        .name("pacer-signals".into())
        .spawn(move || {
            use std::os::fd::AsRawFd;
            while !d.load(Ordering::Relaxed) {
                let _ = signals::wait_readable(&[sigs.as_raw_fd()], 200_000_000);
                if sigs.next().is_some() {
                    STOP.store(true, Ordering::Relaxed);
                }
            }
        })
        .context("starting the signal watcher")?;
    Ok(done)
}

fn make_synth(clock: &AudioClock, max_voices: u32, seed: u64) -> Result<Box<dyn Renderer>, AudioBenchError> {
    Synth::new(clock.sample_rate_hz, max_voices as usize, seed)
        .map(|s| Box::new(s) as Box<dyn Renderer>)
        .map_err(|e| AudioBenchError::Input(format!("the synthesizer: {e}")))
}

/// A VoiceMark result as `--json` writes it and `--cost-from` reads it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct VoiceMarkFile {
    pub schema: String,
    pub sample_rate_hz: u32,
    pub burst_frames: u32,
    pub period_ns: u64,
    pub seed: u64,
    /// Median over the runs.
    pub voices_per_cpu: f64,
    pub voices_per_cpu_min: f64,
    pub voices_per_cpu_max: f64,
    /// Median fitted cost of a burst without voices, ns.
    pub base_ns: f64,
    /// Median fitted cost of one voice in one burst, ns.
    pub per_voice_ns: f64,
    /// Burst-to-burst noise of the cost: the median over every point with voices of its
    /// sd / mean (what `pacer sim audio --cost-from` takes as its --jitter).
    #[serde(default)]
    pub cost_cv: f64,
    pub cpu: Option<usize>,
    pub runs: Vec<VoiceMarkRun>,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n == 0 {
        f64::NAN
    } else if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn voicemark_file(a: &Args, clock: &AudioClock, runs: Vec<VoiceMarkRun>) -> VoiceMarkFile {
    let v: Vec<f64> = runs.iter().map(|r| r.voices_per_cpu).collect();
    VoiceMarkFile {
        schema: VOICEMARK_SCHEMA.into(),
        sample_rate_hz: clock.sample_rate_hz,
        burst_frames: clock.burst_frames,
        period_ns: clock.period_ns(),
        seed: a.seed,
        voices_per_cpu: median(v.clone()),
        voices_per_cpu_min: v.iter().copied().fold(f64::INFINITY, f64::min),
        voices_per_cpu_max: v.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        base_ns: median(runs.iter().map(|r| r.base_ns).collect()),
        per_voice_ns: median(runs.iter().map(|r| r.per_voice_ns).collect()),
        cost_cv: median(
            runs.iter()
                .flat_map(|r| r.points.iter().filter(|p| p.voices > 0).map(|p| p.cv))
                .collect(),
        ),
        cpu: a.cpu,
        runs,
    }
}

/// Reads a VoiceMark file, checking it was measured for this clock.
pub fn read_voicemark(path: &std::path::Path, clock: Option<&AudioClock>) -> Result<VoiceMarkFile> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let f: VoiceMarkFile = serde_json::from_str(&text).with_context(|| {
        format!(
            "{}: expected the JSON of `pacer audio voicemark --json` (schema {VOICEMARK_SCHEMA})",
            path.display()
        )
    })?;
    if f.schema != VOICEMARK_SCHEMA {
        bail!(
            "{}: schema: expected {VOICEMARK_SCHEMA}, got {}",
            path.display(),
            f.schema
        );
    }
    if !(f.voices_per_cpu.is_finite() && f.voices_per_cpu > 0.0) {
        bail!(
            "{}: voices_per_cpu: expected a positive number, got {}",
            path.display(),
            f.voices_per_cpu
        );
    }
    if let Some(c) = clock {
        if (c.sample_rate_hz, c.burst_frames) != (f.sample_rate_hz, f.burst_frames) {
            bail!(
                "{}: measured for {} frames at {} Hz, this run is {} frames at {} Hz",
                path.display(),
                f.burst_frames,
                f.sample_rate_hz,
                c.burst_frames,
                c.sample_rate_hz
            );
        }
    }
    Ok(f)
}

/// Why a configuration cannot run in this process, if it cannot.
fn unavailable(c: Config, a: &Args) -> Option<String> {
    match c {
        Config::Other => None,
        Config::Fifo => (!pacer_linux::cred::may_set_fifo(a.fifo_priority))
            .then(|| "SCHED_FIFO needs root, CAP_SYS_NICE or an RLIMIT_RTPRIO".into()),
        Config::Deadline => {
            (!pacer::privileged()).then(|| "SCHED_DEADLINE needs root or CAP_SYS_NICE".into())
        }
        Config::Adaptive => {
            let via = via(a);
            match via {
                Via::InProcess if !pacer::privileged() => {
                    Some("the in-process service needs root or CAP_SYS_NICE; use --via daemon".into())
                }
                Via::InProcess => None,
                Via::Daemon(p) => (!p.exists()).then(|| format!("no pacer daemon socket at {}", p.display())),
                Via::Auto => {
                    let p = pacer::default_socket();
                    (!p.exists() && !pacer::privileged()).then(|| {
                        format!(
                            "no pacer daemon at {} and no privilege for the in-process service",
                            p.display()
                        )
                    })
                }
            }
        }
    }
}

fn via(a: &Args) -> Via {
    match (a.via, &a.socket) {
        (_, Some(p)) => Via::Daemon(p.clone()),
        (ViaArg::Daemon, None) => Via::Daemon(pacer::default_socket()),
        (ViaArg::Inprocess, None) => Via::InProcess,
        (ViaArg::Auto, None) => Via::Auto,
    }
}

/// The whole planned measurement, for the output.
#[derive(Serialize)]
struct Plan {
    schema: &'static str,
    mode: Mode,
    sample_rate_hz: u32,
    burst_frames: u32,
    period_ns: u64,
    duration_ns: u64,
    pattern: VoicePattern,
    step_ns: u64,
    seed: u64,
    voices_per_cpu: f64,
    voices_per_cpu_source: String,
    load_scale: f64,
    /// This machine's voices for the pattern's fewest and most paper voices.
    voices_range: (u32, u32),
    load: LoadSpec,
    cpu: Option<usize>,
    energy: String,
    device: String,
}

#[derive(Serialize)]
struct ConfigOutcome {
    configuration: &'static str,
    /// Why it did not run.
    not_run: Option<String>,
    /// LatencyMark's answer (search mode): the smallest glitch-free buffer, bursts.
    latency_bursts: Option<u32>,
    /// (bursts, underruns) of every run, in order.
    tried: Vec<(u32, u64)>,
    /// The reported run (the glitch-free one, the largest tried, or the --bursts one).
    run: Option<RunSummary>,
    /// Wake-up latency histogram of the reported run: (bin start ns, count), 10 µs bins.
    wakeup_histogram: Vec<(u64, u64)>,
    /// CPU time per callback histogram of the reported run, 10 µs bins.
    cpu_histogram: Vec<(u64, u64)>,
    /// Per step of the pattern: (voices, CPU used, reserved) of the reported run.
    steps: Vec<StepUse>,
    /// Frequency residency during the reported run (where cpufreq has statistics).
    residency: Option<ResidencySnapshot>,
    /// Its energy with --power.
    energy: Option<Energy>,
    #[serde(skip)]
    result: Option<RunResult>,
}

/// A run with the residency and energy measured around it.
type Measured = (RunResult, Option<ResidencySnapshot>, Option<Energy>);

#[derive(Serialize, Clone, Copy)]
struct StepUse {
    start_ns: u64,
    voices: u32,
    used: f64,
    reserved: Option<f64>,
}

fn step_use(r: &RunResult, step_jobs: usize) -> Vec<StepUse> {
    let step_jobs = step_jobs.max(1);
    r.callbacks
        .chunks(step_jobs)
        .map(|cs| {
            let start = cs[0].due_ns;
            let end = cs[cs.len() - 1].due_ns + r.period_ns;
            let used =
                cs.iter().map(|c| c.cpu_ns).sum::<u64>() as f64 / (cs.len() as f64 * r.period_ns as f64);
            let s: Vec<f64> = r
                .bandwidth
                .iter()
                .filter(|b| b.t_ns >= start && b.t_ns < end)
                .map(|b| b.bandwidth())
                .collect();
            let reserved =
                (!s.is_empty() && s.iter().any(|&b| b > 0.0)).then(|| s.iter().sum::<f64>() / s.len() as f64);
            StepUse {
                start_ns: start,
                voices: cs[0].voices,
                used,
                reserved,
            }
        })
        .collect()
}

pub fn run(a: Args) -> Result<()> {
    let clock = AudioClock::new(a.rate, a.burst).map_err(|e| anyhow::anyhow!("--rate/--burst: {e}"))?;
    if !(a.load_scale.is_finite() && a.load_scale > 0.0 && a.load_scale <= 2.0) {
        bail!("--load-scale: expected a factor in (0, 2], got {}", a.load_scale);
    }
    if let Some(b) = a.max_bandwidth {
        if !(b > 0.0 && b <= 1.0) {
            bail!("--max-bandwidth: expected a share of a CPU in (0, 1], got {b}");
        }
    }
    if let Some(k) = a.bursts {
        if k == 0 || k > 4096 {
            bail!("--bursts: expected 1 to 4096 bursts, got {k}");
        }
    }
    if a.max_bursts == 0 || a.max_bursts > 4096 {
        bail!("--max-bursts: expected 1 to 4096 bursts, got {}", a.max_bursts);
    }
    if a.low > a.high {
        bail!("--low {} is above --high {}", a.low, a.high);
    }
    if let Some(cpu) = a.cpu {
        let online = pacer_linux::sys::online_cpus();
        if !online.contains(&cpu) {
            bail!(
                "--cpu {cpu}: not an online CPU (online: {})",
                pacer_linux::sys::format_cpu_list(&online)
            );
        }
    }
    if a.duration.ns() < clock.period_ns() {
        bail!(
            "--duration: expected at least one callback period ({} ns)",
            clock.period_ns()
        );
    }
    if let Some(d) = &a.device {
        check_device(d, &clock)?;
    }
    let mut out = Outputs::new(Stdout::Busy);
    if let Some(p) = &a.cost_from {
        out.input(p);
    }
    let csv_dir = match &a.csv {
        Some(d) => Some(out.dir("--csv", d, true)?),
        None => None,
    };
    if a.report.is_some() && a.mode == Mode::Load {
        bail!("--report: `pacer audio load` measures nothing to report");
    }
    let report = match &a.report {
        Some(p) => Some(out.file("--report", p)?),
        None => None,
    };
    let meter = Meter::new(&a)?;
    let done_watching = watch_signals()?;
    let result = match a.mode {
        Mode::Voicemark => run_voicemark(&a, &clock, &mut out, report),
        Mode::Load => run_load(&a),
        _ => run_audio(&a, &clock, csv_dir.as_deref(), &mut out, report, &meter),
    };
    done_watching.store(true, Ordering::Relaxed);
    result?;
    out.commit()
}

fn load_spec(a: &Args) -> LoadSpec {
    LoadSpec {
        hogs: a.hogs,
        noise: a.noise,
        noise_period_ns: a.noise_period.ns(),
        noise_priority: a
            .noise_priority
            .unwrap_or_else(|| a.fifo_priority.saturating_add(1).min(99)),
        mem_hogs: 0,
        mem_bytes: 0,
        cpu: a.cpu,
    }
}

fn run_load(a: &Args) -> Result<()> {
    let spec = load_spec(a);
    if spec.is_empty() {
        bail!("pacer audio load: nothing to run; give --hogs N and/or --noise SHARE");
    }
    let load = Load::start(&spec).context("starting the background load")?;
    eprintln!(
        "pacer audio load: {} for {:.1} s (Ctrl-C stops it)",
        spec.describe(),
        a.duration.ns() as f64 / 1e9
    );
    let end = pacer_linux::sys::monotonic_ns() + a.duration.ns();
    while !STOP.load(Ordering::Relaxed) && pacer_linux::sys::monotonic_ns() < end {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    load.stop();
    Ok(())
}

fn voicemark_spec(a: &Args, clock: &AudioClock, bursts_per_point: usize) -> VoiceMarkSpec {
    VoiceMarkSpec {
        clock: *clock,
        bursts_per_point,
        stop_at: 1.1,
        max_voices: VOICE_CAP,
        cpu: a.cpu,
        fifo_priority: None,
    }
}

fn run_voicemark(a: &Args, clock: &AudioClock, out: &mut Outputs, report: Option<Slot>) -> Result<()> {
    let spec = voicemark_spec(a, clock, a.bursts_per_point);
    let seed = a.seed;
    let make = move || make_synth(clock, VOICE_CAP, seed);
    let mut runs = Vec::new();
    for i in 0..a.runs {
        if !a.json {
            eprintln!("pacer audio voicemark: run {}/{}…", i + 1, a.runs);
        }
        runs.push(voicemark::run(&spec, &make, &STOP).context("VoiceMark")?);
    }
    let f = voicemark_file(a, clock, runs);
    if let Some(slot) = report {
        out.write(slot, voicemark_report(&f)?.as_bytes())?;
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&f)?);
        return Ok(());
    }
    println!(
        "pacer audio voicemark: {} frames at {} Hz (T = {:.3} ms), {} runs of {} bursts per point{}",
        clock.burst_frames,
        clock.sample_rate_hz,
        clock.period_ns() as f64 / 1e6,
        a.runs,
        a.bursts_per_point,
        a.cpu.map(|c| format!(", on CPU {c}")).unwrap_or_default()
    );
    let mut t = Table::new(&[
        "run",
        "points",
        "base (ns)",
        "per voice (ns)",
        "r²",
        "voices per CPU",
    ]);
    for (i, r) in f.runs.iter().enumerate() {
        t.push(vec![
            (i + 1).to_string(),
            r.points.len().to_string(),
            format!("{:.0}", r.base_ns),
            format!("{:.1}", r.per_voice_ns),
            format!("{:.4}", r.r2),
            format!("{:.0}", r.voices_per_cpu),
        ]);
    }
    print!("{}", t.render());
    let spread = (f.voices_per_cpu_max - f.voices_per_cpu_min) / f.voices_per_cpu * 100.0;
    println!(
        "voices per CPU: median {:.0}, min {:.0}, max {:.0} (spread {:.1} % of the median); \
         {:.1} ns per voice per burst, {:.0} ns per burst without voices; burst-to-burst noise \
         {:.1} % (sd / mean)",
        f.voices_per_cpu,
        f.voices_per_cpu_min,
        f.voices_per_cpu_max,
        spread,
        f.per_voice_ns,
        f.base_ns,
        f.cost_cv * 100.0
    );
    println!(
        "the paper's CPU: 210 voices; 1 paper voice = {:.1} voices here",
        f.voices_per_cpu / 210.0
    );
    Ok(())
}

/// Frequency residency and energy around each run, where cpufreq allows (the paper's Table 4
/// and E = Σ residency × OPP power, §6.3).
struct Meter {
    freq: CpuFreq,
    power: Option<PowerTable>,
    /// Why nothing is measured, when nothing is.
    not_measured: Option<String>,
}

impl Meter {
    fn new(a: &Args) -> Result<Meter> {
        let power = match &a.power {
            Some(p) => Some(PowerTable::read(p).map_err(|e| anyhow::anyhow!("--power: {e}"))?),
            None => None,
        };
        let freq = CpuFreq::system();
        let not_measured = match freq.residency_snapshot() {
            Ok(_) => None,
            Err(e) if e.is_not_measured() => Some(e.to_string()),
            Err(e) => return Err(anyhow::anyhow!("cpufreq: {e}")),
        };
        Ok(Meter {
            freq,
            power,
            not_measured,
        })
    }

    fn describe(&self) -> String {
        match (&self.not_measured, &self.power) {
            (Some(why), _) => why.clone(),
            (None, None) => "frequency residency measured; energy needs --power FILE".into(),
            (None, Some(p)) => format!(
                "frequency residency and energy (power table {})",
                p.path.display()
            ),
        }
    }

    fn snapshot(&self) -> Option<ResidencySnapshot> {
        self.not_measured
            .is_none()
            .then(|| self.freq.residency_snapshot().ok())
            .flatten()
    }

    /// The residency since `before` and its energy.
    fn since(
        &self,
        before: Option<ResidencySnapshot>,
    ) -> Result<(Option<ResidencySnapshot>, Option<Energy>)> {
        let (Some(before), Some(after)) = (before, self.snapshot()) else {
            return Ok((None, None));
        };
        let during = after
            .since(&before)
            .map_err(|e| anyhow::anyhow!("cpufreq: {e}"))?;
        let energy = match &self.power {
            Some(p) => Some(p.energy(&during).map_err(|e| anyhow::anyhow!("--power: {e}"))?),
            None => None,
        };
        Ok((Some(during), energy))
    }
}

/// `--device`: opens the PCM once before any run, so a missing device or an unusable
/// configuration is an error before minutes of measuring; returns how the output line names it.
fn check_device(name: &str, clock: &AudioClock) -> Result<String> {
    let p = pacer_linux::playback::Playback::open(&pacer_linux::playback::PlaybackConfig {
        device: name.to_string(),
        rate: clock.sample_rate_hz,
        burst_frames: clock.burst_frames,
        bursts: 2,
    })
    .map_err(|e| anyhow::anyhow!("--device {name}: {e}"))?;
    let r = p.finish();
    let clock_note = if r.clocked {
        ""
    } else {
        ", which discards samples and has no clock: its counts say nothing about timing"
    };
    Ok(format!(
        "virtual sink and ALSA device {name:?} ({} Hz, {}, period {} frames{clock_note})",
        r.rate, r.format, r.period_frames
    ))
}

fn run_audio(
    a: &Args,
    clock: &AudioClock,
    csv_dir: Option<&std::path::Path>,
    out: &mut Outputs,
    report: Option<Slot>,
    meter: &Meter,
) -> Result<()> {
    let period = clock.period_ns();
    // Which configurations, and which of them this process may use.
    let explicit = a.config.is_some();
    let configs = a
        .config
        .clone()
        .unwrap_or_else(|| vec![Config::Other, Config::Fifo, Config::Deadline, Config::Adaptive]);
    let mut seen = Vec::new();
    for c in &configs {
        if seen.contains(c) {
            bail!("--config: {} is listed twice", c.key());
        }
        seen.push(*c);
    }
    let mut skipped = Vec::new();
    for &c in &configs {
        if let Some(why) = unavailable(c, a) {
            if explicit {
                bail!("--config {}: {why}", c.key());
            }
            skipped.push((c, why));
        }
    }
    // Voices per CPU: given, from a file, or a quick VoiceMark now (before any load starts).
    let (vpc, source, fit) = if let Some(v) = a.voices_per_cpu {
        if !(v.is_finite() && v > 0.0) {
            bail!("--voices-per-cpu: expected a positive number, got {v}");
        }
        (v, "--voices-per-cpu".to_string(), None)
    } else if let Some(p) = &a.cost_from {
        let f = read_voicemark(p, Some(clock))?;
        (
            f.voices_per_cpu,
            format!("{} (VoiceMark)", p.display()),
            Some((f.base_ns, f.per_voice_ns)),
        )
    } else {
        if !a.json {
            eprintln!("pacer audio: measuring voices per CPU (VoiceMark, 1 run)…");
        }
        let spec = voicemark_spec(a, clock, 200);
        let seed = a.seed;
        let make = move || make_synth(clock, VOICE_CAP, seed);
        let r = voicemark::run(&spec, &make, &STOP).context("VoiceMark at start")?;
        (
            r.voices_per_cpu,
            format!(
                "VoiceMark at start{} ({:.1} ns per voice, r² {:.4})",
                a.cpu.map(|c| format!(" on CPU {c}")).unwrap_or_default(),
                r.per_voice_ns,
                r.r2
            ),
            Some((r.base_ns, r.per_voice_ns)),
        )
    };
    let pattern = match a.pattern {
        PatternArg::Random => VoicePattern::Random {
            min: a.low,
            max: a.high,
            seed: a.seed,
        },
        PatternArg::Square => VoicePattern::Square {
            low: a.low,
            high: a.high,
        },
        PatternArg::Constant => VoicePattern::List { voices: vec![a.high] },
    };
    let voices = Arc::new(
        scale_voices(&pattern, clock, a.step.ns(), a.duration.ns(), vpc, a.load_scale)
            .map_err(|e| anyhow::anyhow!("the pattern: {e}"))?,
    );
    let vmax = voices.iter().copied().max().unwrap_or(0);
    let vmin = voices.iter().copied().min().unwrap_or(0);
    if vmax > VOICE_CAP {
        bail!("the pattern needs {vmax} voices here, more than the synthesizer's {VOICE_CAP}");
    }
    let step_jobs = (a.step.ns() + period / 2) / period;
    let dl_runtime = match a.dl_runtime {
        Some(d) => d.ns(),
        None => {
            let (base, c) = fit.unwrap_or((0.0, period as f64 / vpc));
            ((base.max(0.0) + c * vmax as f64) * 1.25) as u64
        }
    }
    .clamp(pacer_model::reservation::DL_MIN_RUNTIME_NS, period * 95 / 100);
    let ceiling = a.max_bandwidth.unwrap_or_else(|| {
        let (base, c) = fit.unwrap_or((0.0, period as f64 / vpc));
        ((base.max(0.0) + c * vmax as f64) / period as f64 * 1.5).clamp(0.3, 0.95)
    });
    let load = load_spec(a);
    let plan = Plan {
        schema: SCHEMA,
        mode: a.mode,
        sample_rate_hz: clock.sample_rate_hz,
        burst_frames: clock.burst_frames,
        period_ns: period,
        duration_ns: a.duration.ns(),
        pattern: pattern.clone(),
        step_ns: a.step.ns(),
        seed: a.seed,
        voices_per_cpu: vpc,
        voices_per_cpu_source: source,
        load_scale: a.load_scale,
        voices_range: (vmin, vmax),
        load: load.clone(),
        cpu: a.cpu,
        energy: meter.describe(),
        device: match &a.device {
            Some(d) => check_device(d, clock)?,
            None => "virtual sink (no --device)".into(),
        },
    };
    // CSV slots, declared before the runs so a bad path fails before minutes of measuring.
    let mut csv_slots: Vec<(Config, Slot, Slot)> = Vec::new();
    if let Some(dir) = csv_dir {
        for &c in &configs {
            if skipped.iter().any(|(s, _)| *s == c) {
                continue;
            }
            let cb = out.file("--csv", &dir.join(format!("{}-callbacks.csv", c.key())))?;
            let bw = out.file("--csv", &dir.join(format!("{}-bandwidth.csv", c.key())))?;
            csv_slots.push((c, cb, bw));
        }
    }
    let load_threads = if load.is_empty() {
        None
    } else {
        Some(Load::start(&load).context("starting the background load")?)
    };
    let fixed_k = a.bursts.or(match a.mode {
        Mode::Jittermark | Mode::Utilizationmark => Some(8),
        _ => None,
    });
    let progress_bar = !a.json && std::io::stderr().is_terminal();
    let mut outcomes = Vec::new();
    for &c in &configs {
        if let Some((_, why)) = skipped.iter().find(|(s, _)| *s == c) {
            outcomes.push(ConfigOutcome {
                configuration: c.key(),
                not_run: Some(why.clone()),
                latency_bursts: None,
                tried: Vec::new(),
                run: None,
                wakeup_histogram: Vec::new(),
                cpu_histogram: Vec::new(),
                steps: Vec::new(),
                residency: None,
                energy: None,
                result: None,
            });
            continue;
        }
        let scheduling = match c {
            Config::Other => Scheduling::Other { nice: a.nice },
            Config::Fifo => Scheduling::Fifo {
                priority: a.fifo_priority,
            },
            Config::Deadline => Scheduling::Deadline {
                runtime_ns: dl_runtime,
            },
            Config::Adaptive => Scheduling::Adaptive {
                via: via(a),
                max_bandwidth: Some(ceiling),
            },
        };
        if STOP.load(Ordering::Relaxed) {
            break;
        }
        let do_run = |k: u32| -> Result<Measured> {
            let progress = Arc::new(AtomicU64::new(0));
            let spec = RunSpec {
                clock: *clock,
                bursts: k,
                voices: voices.clone(),
                scheduling: scheduling.clone(),
                cpu: a.cpu,
                sample_ns: a.sample.ns(),
                progress: Some(progress.clone()),
                device: a.device.clone(),
            };
            let renderer = make_synth(clock, vmax.max(1), a.seed)?;
            let before = meter.snapshot();
            let r = run_with_progress(&spec, renderer, progress, progress_bar, c.key(), k)
                .with_context(|| format!("{} at {k} bursts", c.key()))?;
            let (residency, energy) = meter.since(before)?;
            Ok((r, residency, energy))
        };
        // The reported run: the smallest glitch-free buffer, else the largest tried.
        let mut best: Option<Measured> = None;
        let mut keep = |m: Measured| {
            let r = &m.0;
            let better = match &best {
                None => true,
                Some((b, ..)) if r.sink.underruns == 0 => b.sink.underruns > 0 || r.bursts < b.bursts,
                Some((b, ..)) => b.sink.underruns > 0 && r.bursts > b.bursts,
            };
            if better {
                best = Some(m);
            }
        };
        let mut tried: Vec<(u32, u64)> = Vec::new();
        let mut record = |k: u32, r: Measured, tried: &mut Vec<(u32, u64)>| -> u64 {
            let u = r.0.sink.underruns;
            tried.push((k, u));
            keep(r);
            u
        };
        let latency_bursts = match fixed_k {
            Some(k) => {
                let r = do_run(k)?;
                record(k, r, &mut tried);
                None
            }
            None => {
                let m = latency_mark(a.max_bursts, |k| -> Result<u64> {
                    let r = do_run(k)?;
                    if r.0.interrupted {
                        bail!("interrupted");
                    }
                    Ok(record(k, r, &mut tried))
                });
                match m {
                    Ok(m) => m.bursts,
                    // Ctrl-C: report what was measured so far.
                    Err(_) if STOP.load(Ordering::Relaxed) => None,
                    Err(e) => return Err(e),
                }
            }
        };
        let (r, residency, energy) = match best {
            Some((r, res, e)) => (Some(r), res, e),
            None => (None, None, None),
        };
        let summary = r.as_ref().map(|r| RunSummary::of(r, clock));
        let wakeups: Vec<u64> = r
            .as_ref()
            .map(|r| r.callbacks.iter().filter_map(|c| c.wakeup_latency_ns()).collect())
            .unwrap_or_default();
        let cpus: Vec<u64> = r
            .as_ref()
            .map(|r| r.callbacks.iter().map(|c| c.cpu_ns).collect())
            .unwrap_or_default();
        outcomes.push(ConfigOutcome {
            configuration: c.key(),
            not_run: None,
            latency_bursts,
            tried,
            run: summary,
            wakeup_histogram: histogram_ns(&wakeups, 10_000),
            cpu_histogram: histogram_ns(&cpus, 10_000),
            steps: r
                .as_ref()
                .map(|r| step_use(r, step_jobs as usize))
                .unwrap_or_default(),
            residency,
            energy,
            result: r,
        });
    }
    if let Some(l) = load_threads {
        l.stop();
    }
    for (c, cb, bw) in csv_slots {
        if let Some(r) = outcomes
            .iter()
            .find(|o| o.configuration == c.key())
            .and_then(|o| o.result.as_ref())
        {
            out.write(cb, callbacks_csv(r).as_bytes())?;
            out.write(bw, bandwidth_csv(r).as_bytes())?;
        }
    }
    if let Some(slot) = report {
        out.write(slot, audio_report(&plan, &outcomes, a, fixed_k)?.as_bytes())?;
    }
    if a.json {
        #[derive(Serialize)]
        struct Json<'a> {
            #[serde(flatten)]
            plan: &'a Plan,
            configurations: &'a [ConfigOutcome],
        }
        println!(
            "{}",
            serde_json::to_string_pretty(&Json {
                plan: &plan,
                configurations: &outcomes,
            })?
        );
    } else {
        print!("{}", render_text(&plan, &outcomes, a, fixed_k));
    }
    if STOP.load(Ordering::Relaxed) {
        bail!("interrupted: the results above are what was measured before the signal");
    }
    Ok(())
}

fn run_with_progress(
    spec: &RunSpec,
    renderer: Box<dyn Renderer>,
    progress: Arc<AtomicU64>,
    bar: bool,
    key: &str,
    k: u32,
) -> Result<RunResult, AudioBenchError> {
    let n = spec.voices.len() as u64;
    std::thread::scope(|s| {
        let h = s.spawn(|| engine::run(spec, renderer, &STOP));
        let pb = bar.then(|| {
            let b = indicatif::ProgressBar::new(n);
            b.set_style(
                indicatif::ProgressStyle::with_template("{msg} {bar:40} {pos}/{len} callbacks, {eta} left")
                    .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
            );
            b.set_message(format!("{key} at {k} bursts"));
            b
        });
        while !h.is_finished() {
            if let Some(b) = &pb {
                b.set_position(progress.load(Ordering::Relaxed));
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        if let Some(b) = pb {
            b.finish_and_clear();
        }
        h.join().unwrap_or_else(|_| {
            Err(AudioBenchError::Setup {
                what: "the run".into(),
                why: "it panicked".into(),
            })
        })
    })
}

fn callbacks_csv(r: &RunResult) -> String {
    let mut s = String::from("job,due_ns,wake_ns,end_ns,cpu_ns,voices,slept,outcome\n");
    for (j, c) in r.callbacks.iter().enumerate() {
        s.push_str(&format!(
            "{j},{},{},{},{},{},{},{}\n",
            c.due_ns,
            c.wake_ns,
            c.end_ns,
            c.cpu_ns,
            c.voices,
            c.slept,
            match c.outcome {
                pacer_workload::audio::BurstOutcome::OnTime => "on_time",
                pacer_workload::audio::BurstOutcome::Late => "late",
                pacer_workload::audio::BurstOutcome::Underrun => "underrun",
            }
        ));
    }
    s
}

fn bandwidth_csv(r: &RunResult) -> String {
    let mut s = String::from("t_ns,runtime_ns,period_ns,reserved\n");
    for b in &r.bandwidth {
        s.push_str(&format!(
            "{},{},{},{:.6}\n",
            b.t_ns,
            b.runtime_ns,
            b.period_ns,
            b.bandwidth()
        ));
    }
    s
}

fn us(ns: u64) -> String {
    format!("{:.0}", ns as f64 / 1000.0)
}

fn render_text(plan: &Plan, outcomes: &[ConfigOutcome], a: &Args, fixed_k: Option<u32>) -> String {
    let mut o = String::new();
    let pat = match &plan.pattern {
        VoicePattern::Random { min, max, seed } => format!("random {min}–{max} paper voices (seed {seed})"),
        VoicePattern::Square { low, high } => format!("square {low} ↔ {high} paper voices"),
        VoicePattern::List { voices } => format!("constant {} paper voices", voices[0]),
    };
    o.push_str(&format!(
        "pacer audio {}: {} frames at {} Hz (T = {:.3} ms), {pat} every {:.1} s, {:.1} s per run\n",
        match plan.mode {
            Mode::Latencymark => "latencymark",
            Mode::Jittermark => "jittermark",
            Mode::Utilizationmark => "utilizationmark",
            _ => "",
        },
        plan.burst_frames,
        plan.sample_rate_hz,
        plan.period_ns as f64 / 1e6,
        plan.step_ns as f64 / 1e9,
        plan.duration_ns as f64 / 1e9
    ));
    o.push_str(&format!(
        "voices: {:.0} per CPU here ({}); the pattern plays {}–{} voices{}\n",
        plan.voices_per_cpu,
        plan.voices_per_cpu_source,
        plan.voices_range.0,
        plan.voices_range.1,
        if plan.load_scale != 1.0 {
            format!(" (load scaled by {})", plan.load_scale)
        } else {
            String::new()
        }
    ));
    o.push_str(&format!("background load: {}\n", plan.load.describe()));
    o.push_str(&format!("output: {}; {}\n\n", plan.device, plan.energy));
    let mut t = Table::new(&[
        "configuration",
        "buffer",
        "underruns",
        "late",
        "wake-up µs p50/p99/max",
        "callback CPU µs p50/p99/max",
        "used",
        "reserved",
        "reserved/used",
    ]);
    for oc in outcomes {
        let Some(r) = &oc.run else {
            t.push(vec![
                oc.configuration.into(),
                format!("not run: {}", oc.not_run.clone().unwrap_or_default()),
            ]);
            continue;
        };
        let buffer = match (fixed_k, oc.latency_bursts) {
            (Some(k), _) => format!("{k} ({:.2} ms)", r.latency_ms),
            (None, Some(k)) => format!("{k} ({:.2} ms) glitch-free", r.latency_ms),
            (None, None) => format!("> {} (every size glitched)", a.max_bursts),
        };
        let spread = |s: &Option<pacer_experiments::audio::Spread>| {
            s.map(|s| format!("{}/{}/{}", us(s.p50_ns), us(s.p99_ns), us(s.max_ns)))
                .unwrap_or_else(|| "–".into())
        };
        t.push(vec![
            oc.configuration.into(),
            buffer,
            format!(
                "{}{}",
                r.underruns,
                if r.interrupted { " (interrupted)" } else { "" }
            ),
            r.soft_misses.to_string(),
            spread(&r.wakeup),
            spread(&r.cpu),
            format!("{:.3}", r.used_bandwidth),
            r.reserved_bandwidth
                .map(|b| format!("{b:.3}"))
                .unwrap_or_else(|| "–".into()),
            r.reserved_over_used
                .map(|b| format!("{b:.2}"))
                .unwrap_or_else(|| "–".into()),
        ]);
    }
    o.push_str(&t.render());
    if fixed_k.is_none() {
        for oc in outcomes.iter().filter(|o| o.run.is_some()) {
            let tried: Vec<String> = oc.tried.iter().map(|(k, u)| format!("{k}: {u}")).collect();
            o.push_str(&format!(
                "{}: underruns at each buffer tried (bursts: underruns) {}\n",
                oc.configuration,
                tried.join(", ")
            ));
        }
    }
    let measured: Vec<&ConfigOutcome> = outcomes.iter().filter(|o| o.residency.is_some()).collect();
    if !measured.is_empty() {
        o.push_str("\nFrequency residency during each reported run (s), all cpufreq policies:\n");
        let mut khz: Vec<u32> = measured
            .iter()
            .flat_map(|m| {
                m.residency
                    .iter()
                    .flat_map(|r| r.policies.iter().flat_map(|p| p.states.iter().map(|s| s.khz)))
            })
            .collect();
        khz.sort_unstable();
        khz.dedup();
        let mut header = vec!["frequency (MHz)".to_string()];
        header.extend(measured.iter().map(|m| m.configuration.to_string()));
        let header: Vec<&str> = header.iter().map(String::as_str).collect();
        let mut t = Table::new(&header);
        for f in khz {
            let mut row = vec![format!("{}", f / 1000)];
            for m in &measured {
                let ns: u64 = m
                    .residency
                    .iter()
                    .flat_map(|r| r.policies.iter().filter_map(|p| p.ns_at(f)))
                    .sum();
                row.push(format!("{:.3}", ns as f64 / 1e9));
            }
            t.push(row);
        }
        if measured.iter().any(|m| m.energy.is_some()) {
            let mut row = vec!["energy J (normalised)".to_string()];
            for m in &measured {
                row.push(
                    m.energy
                        .as_ref()
                        .map(|e| format!("{:.3} ({:.3})", e.energy_j, e.normalised))
                        .unwrap_or_else(|| "–".into()),
                );
            }
            t.push(row);
        }
        o.push_str(&t.render());
    }
    if plan.mode == Mode::Jittermark {
        for oc in outcomes.iter().filter(|o| o.run.is_some()) {
            o.push_str(&format!("\n{}: wake-up latency (10 µs bins)\n", oc.configuration));
            o.push_str(&histogram_text(&oc.wakeup_histogram));
            o.push_str(&format!(
                "{}: CPU time per callback (10 µs bins)\n",
                oc.configuration
            ));
            o.push_str(&histogram_text(&oc.cpu_histogram));
        }
    }
    if plan.mode == Mode::Utilizationmark {
        for oc in outcomes.iter().filter(|o| o.run.is_some()) {
            o.push_str(&format!("\n{}: per step\n", oc.configuration));
            let mut t = Table::new(&["start (s)", "voices", "used", "reserved", "reserved/used"]);
            for s in &oc.steps {
                t.push(vec![
                    format!("{:.1}", s.start_ns as f64 / 1e9),
                    s.voices.to_string(),
                    format!("{:.3}", s.used),
                    s.reserved
                        .map(|b| format!("{b:.3}"))
                        .unwrap_or_else(|| "–".into()),
                    s.reserved
                        .filter(|_| s.used > 0.0)
                        .map(|b| format!("{:.2}", b / s.used))
                        .unwrap_or_else(|| "–".into()),
                ]);
            }
            o.push_str(&t.render());
        }
    }
    for oc in outcomes {
        if let Some(r) = &oc.run {
            for n in &r.notes {
                o.push_str(&format!("note: {}: {n}\n", oc.configuration));
            }
            if let Some(st) = r.steal_ns.filter(|&n| n > 0) {
                o.push_str(&format!(
                    "note: {}: the hypervisor stole {:.1} ms of CPU time during the run (/proc/stat)\n",
                    oc.configuration,
                    st as f64 / 1e6
                ));
            }
            if let Some(d) = &r.device {
                o.push_str(&format!(
                    "device: {}: {} frames written, {} xruns, {} bursts dropped (buffer full){}\n",
                    oc.configuration,
                    d.frames_written,
                    d.xruns,
                    d.dropped_bursts,
                    d.last_error
                        .as_ref()
                        .map(|e| format!(", {} write errors (last: {e})", d.errors))
                        .unwrap_or_default()
                ));
            }
            if r.refused_notifications > 0 {
                o.push_str(&format!(
                    "note: {}: {} notifications were refused by pacer\n",
                    oc.configuration, r.refused_notifications
                ));
            }
        }
    }
    o
}

fn histogram_text(h: &[(u64, u64)]) -> String {
    let max = h.iter().map(|&(_, n)| n).max().unwrap_or(0).max(1);
    let mut s = String::new();
    for &(lo, n) in h {
        let bar = ((n as f64 / max as f64) * 40.0).ceil() as usize;
        s.push_str(&format!(
            "  {:>6}–{:<6} {:>7} {}\n",
            us(lo),
            us(lo + 10_000),
            n,
            "#".repeat(bar)
        ));
    }
    s
}

fn machine() -> String {
    let u = pacer_linux::sys::Uname::this_machine();
    format!(
        "{} CPUs, Linux {} ({})",
        pacer_linux::sys::online_cpus().len(),
        u.release,
        u.hostname
    )
}

/// The HTML report of a latencymark / jittermark / utilizationmark run.
fn audio_report(plan: &Plan, outcomes: &[ConfigOutcome], a: &Args, fixed_k: Option<u32>) -> Result<String> {
    use pacer_report::{cdf, Plot, Report, Series};
    let mut r = Report::new(&format!(
        "pacer audio: {} frames at {} Hz",
        plan.burst_frames, plan.sample_rate_hz
    ));
    r.subtitle("A real synthesizer callback on this machine's kernel (issue 17; adaptive-deadline-audio-android.txt §5.3–6)");
    r.meta("command", &crate::command_line())
        .meta("machine", &machine())
        .meta("seed", &plan.seed.to_string())
        .meta(
            "voices per CPU",
            &format!("{:.0} ({})", plan.voices_per_cpu, plan.voices_per_cpu_source),
        )
        .meta("background load", &plan.load.describe())
        .meta("energy", &plan.energy);
    r.section("Summary");
    let text = render_text(plan, outcomes, a, fixed_k);
    r.paragraph(text.lines().take(4).collect::<Vec<_>>().join(" ").as_str());
    let header = [
        "configuration",
        "buffer (bursts)",
        "underruns",
        "late",
        "wake-up p99 (µs)",
        "callback CPU p99 (µs)",
        "used",
        "reserved",
        "reserved/used",
    ];
    let rows: Vec<Vec<String>> = outcomes
        .iter()
        .map(|o| match &o.run {
            None => vec![
                o.configuration.to_string(),
                format!("not run: {}", o.not_run.clone().unwrap_or_default()),
            ],
            Some(s) => vec![
                o.configuration.to_string(),
                s.bursts.to_string(),
                s.underruns.to_string(),
                s.soft_misses.to_string(),
                s.wakeup.map(|w| us(w.p99_ns)).unwrap_or_else(|| "–".into()),
                s.cpu.map(|w| us(w.p99_ns)).unwrap_or_else(|| "–".into()),
                format!("{:.3}", s.used_bandwidth),
                s.reserved_bandwidth
                    .map(|b| format!("{b:.3}"))
                    .unwrap_or_else(|| "–".into()),
                s.reserved_over_used
                    .map(|b| format!("{b:.2}"))
                    .unwrap_or_else(|| "–".into()),
            ],
        })
        .collect();
    r.table(&header, &rows);
    let ran: Vec<(&ConfigOutcome, &RunResult)> = outcomes
        .iter()
        .filter_map(|o| o.result.as_ref().map(|r| (o, r)))
        .collect();
    r.section("Completion latency");
    r.paragraph(
        "Time from a callback's due time to its burst being in the sink. A burst later than the \
         buffer (k bursts × T) is an underrun; later than T, a late callback.",
    );
    let mut p = Plot::new("Completion latency, CDF")
        .x_axis("end − due", "ms")
        .y_axis("fraction of callbacks", "");
    for (o, run) in &ran {
        let v: Vec<f64> = run
            .callbacks
            .iter()
            .map(|c| c.latency_ns() as f64 / 1e6)
            .collect();
        p.add_series(Series::step(o.configuration, cdf(&v)));
    }
    r.plot(&p)?;
    r.section("Wake-up latency");
    let mut p = Plot::new("Wake-up latency, CDF (callbacks that slept)")
        .x_axis("wake − due", "µs")
        .y_axis("fraction of callbacks", "")
        .log_x(true);
    for (o, run) in &ran {
        let v: Vec<f64> = run
            .callbacks
            .iter()
            .filter_map(|c| c.wakeup_latency_ns())
            .map(|n| n as f64 / 1e3)
            .collect();
        p.add_series(Series::step(o.configuration, cdf(&v)));
    }
    r.plot(&p)?;
    r.section("Bandwidth over time");
    r.paragraph(
        "Used: the callbacks' CPU time per 100 ms window over the window. Reserved: the callback \
         thread's SCHED_DEADLINE runtime / period as sampled (sched_getattr).",
    );
    for (o, run) in &ran {
        let mut p = Plot::new(&format!("{}: bandwidth", o.configuration))
            .x_axis("time", "s")
            .y_axis("share of a CPU", "")
            .y_range(0.0, 1.0);
        let window = 100_000_000u64;
        let mut used: Vec<(f64, f64)> = Vec::new();
        let mut acc = 0u64;
        let mut w = 0u64;
        for c in &run.callbacks {
            let i = c.due_ns / window;
            if i != w {
                used.push(((w * window) as f64 / 1e9, acc as f64 / window as f64));
                acc = 0;
                w = i;
            }
            acc += c.cpu_ns;
        }
        used.push(((w * window) as f64 / 1e9, acc as f64 / window as f64));
        p.add_series(Series::step("used", used));
        if run.bandwidth.iter().any(|b| b.runtime_ns > 0) {
            let reserved: Vec<(f64, f64)> = run
                .bandwidth
                .iter()
                .map(|b| (b.t_ns as f64 / 1e9, b.bandwidth()))
                .collect();
            p.add_series(Series::step("reserved", reserved));
        }
        r.plot(&p)?;
    }
    for o in outcomes {
        if let Some(s) = &o.run {
            for n in &s.notes {
                r.paragraph(&format!("note: {}: {n}", o.configuration));
            }
        }
    }
    Ok(r.to_html())
}

/// The HTML report of VoiceMark: each run's points and fitted line.
fn voicemark_report(f: &VoiceMarkFile) -> Result<String> {
    use pacer_report::{Plot, Report, Series};
    let mut r = Report::new("pacer audio voicemark");
    r.subtitle("The CPU time of one burst against the voices it renders");
    r.meta("command", &crate::command_line())
        .meta("machine", &machine())
        .meta(
            "voices per CPU",
            &format!(
                "median {:.0}, min {:.0}, max {:.0} over {} runs",
                f.voices_per_cpu,
                f.voices_per_cpu_min,
                f.voices_per_cpu_max,
                f.runs.len()
            ),
        )
        .meta(
            "cost",
            &format!(
                "{:.1} ns per voice, {:.0} ns per burst without voices",
                f.per_voice_ns, f.base_ns
            ),
        );
    let mut p = Plot::new("Median CPU time per burst")
        .x_axis("voices", "")
        .y_axis("CPU time", "µs");
    for (i, run) in f.runs.iter().enumerate() {
        let pts: Vec<(f64, f64)> = run
            .points
            .iter()
            .map(|q| (q.voices as f64, q.median_ns as f64 / 1e3))
            .collect();
        p.add_series(Series::points(&format!("run {}", i + 1), pts));
    }
    let vmax = f
        .runs
        .iter()
        .flat_map(|r| r.points.iter().map(|p| p.voices))
        .max()
        .unwrap_or(0) as f64;
    p.add_series(Series::line(
        "fit (median)",
        vec![
            (0.0, f.base_ns / 1e3),
            (vmax, (f.base_ns + f.per_voice_ns * vmax) / 1e3),
        ],
    ));
    p.add_series(Series::line(
        "period T",
        vec![(0.0, f.period_ns as f64 / 1e3), (vmax, f.period_ns as f64 / 1e3)],
    ));
    r.plot(&p)?;
    let rows: Vec<Vec<String>> = f
        .runs
        .iter()
        .enumerate()
        .map(|(i, run)| {
            vec![
                (i + 1).to_string(),
                format!("{:.0}", run.base_ns),
                format!("{:.1}", run.per_voice_ns),
                format!("{:.4}", run.r2),
                format!("{:.0}", run.voices_per_cpu),
            ]
        })
        .collect();
    r.table(
        &["run", "base (ns)", "per voice (ns)", "r²", "voices per CPU"],
        &rows,
    );
    Ok(r.to_html())
}
