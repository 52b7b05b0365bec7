//! The low-latency audio experiment of `adaptive-deadline-audio-android.txt` (§6, Tables 4–5) on
//! the simulator: SynthMark's LatencyMark under four configurations of one big HiKey960 CPU.
//!
//! The workload (crates/workload, [`pacer_workload::audio`]) is the synthesizer callback, one job
//! per burst of b frames at S Hz, whose cost follows its voices (210 voices fill the CPU at the top
//! OPP, §6.1) and which announces each change of voices to the adaptation engine
//! (`Event::WorkUnits`, §5.2). Each configuration is one simulation of that callback:
//!
//! | configuration | scheduling | frequency |
//! |---|---|---|
//! | `fifo-walt` | SCHED_FIFO | schedutil on WALT (20 ms windows), rt utilisation tracked by WALT rather than forced to the top, as on the paper's Android (§4.3, §6.1, §6.3) |
//! | `fifo-max` | SCHED_FIFO | the top OPP (§6.3: "force the CPU frequency to stay fixed at the maximum") |
//! | `adaptive` | SCHED_DEADLINE sized by the adaptation engine's [`ProactiveController`] (eq. 3–4; the margin: a percentile of each voice count's runtimes by default, or eq. 5 with m_m = 1.005, m_o = 0.041, see [`MarginKind`]) | schedutil on the deadline class's running bandwidth (GRUB-PA, §3.3, §5.2) |
//! | `clairvoyant` | — | a lower bound: each job at the lowest OPP that fits its work in its period, known in advance |
//!
//! **Units of m_o.** Eq. 5 reads Q = m_m·C_e + m_o with Q a runtime, but the paper's m_o = 0.041 is
//! dimensionless: the authors' HostCpuManager (the SynthMark extension §6 links to) applies the
//! margins to the *bandwidth*, `bandwidth *= m_m; bandwidth += m_o;` before multiplying by the
//! period. So Q = m_m·C_e + m_o·T: m_o = 0.041 is 54.7 µs at T = 1.333 ms
//! ([`AdaptiveSettings::margin_offset`]).
//!
//! **Latency.** The sink (Fig. 3: soft deadline b/S, hard deadline B/S = k·b/S) judges the
//! callback's finish times. The callback's schedule does not depend on k (the device reads on its
//! own clock and the thread is activated on the same grid whatever the buffer), so one simulation
//! per configuration gives the underruns for every k, and [`latency_mark`] searches the smallest
//! glitch-free k on them.
//!
//! **The clairvoyant bound** is computed analytically from the job sequence: job j, of work w_j
//! at the top OPP, runs at the lowest OPP of capacity c with w_j·1024 ≤ c·T, and the CPU stays at
//! that OPP for the job's whole period. Its residency and E_N follow; switch latency, intra-period
//! frequency mixing and slack borrowing across bursts are not used, so it bounds per-burst OPP
//! selection (what a governor that knew every callback's cost could do), not every conceivable
//! schedule.
//!
//! **Energy** is the paper's E_N = Σ_f t_f·P_f / 1000 (§6.3): t_f the CPU's residency at OPP f,
//! busy or idle, and P_f the Device Tree's normalised power of a busy CPU at f (Table 4).

use std::cell::RefCell;
use std::path::Path;
use std::rc::Rc;

use pacer_adapt::controller::{MarginMode, PercentileMargin, ProactiveConfig, ThreadOptions};
use pacer_adapt::{AppEvent, Controller, Kernel, ProactiveController};
use pacer_model::{Duration, Platform, Policy, CAPACITY_SCALE};
use pacer_workload::audio::{
    bursts_needed, callback_thread, callback_workload, latency_mark, AudioClock, AudioError, AudioSink,
    HintTiming, VoiceCost, VoicePattern, VoiceSchedule,
};
use pacer_workload::Work;
use rand::SeedableRng;
use serde::{Deserialize, Serialize};

use crate::{Governor, JobRecord, Observer, SchedutilConfig, Sim, SimConfig, UtilSignal, WaltPolicy};

/// The audio thread's id in every simulation of this module.
const CALLBACK: u32 = 0;

// ---------------------------------------------------------------------------------------------
// The scenario (file format: docs/formats/audio-scenario.md).

/// One configuration of the experiment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Configuration {
    /// SCHED_FIFO + schedutil on WALT, rt utilisation tracked by WALT (Android).
    FifoWalt,
    /// SCHED_FIFO at the top OPP.
    FifoMax,
    /// SCHED_DEADLINE sized by the proactive controller, schedutil on the DL bandwidth (GRUB-PA).
    Adaptive,
    /// Lower bound: each job at the lowest OPP that fits it, known in advance.
    Clairvoyant,
}

impl Configuration {
    pub const ALL: [Configuration; 4] = [
        Configuration::FifoWalt,
        Configuration::FifoMax,
        Configuration::Adaptive,
        Configuration::Clairvoyant,
    ];

    /// The name used in files and on the command line.
    pub fn key(self) -> &'static str {
        match self {
            Configuration::FifoWalt => "fifo-walt",
            Configuration::FifoMax => "fifo-max",
            Configuration::Adaptive => "adaptive",
            Configuration::Clairvoyant => "clairvoyant",
        }
    }

    /// A human label (the paper's column names).
    pub fn label(self) -> &'static str {
        match self {
            Configuration::FifoWalt => "SCHED_FIFO + WALT",
            Configuration::FifoMax => "SCHED_FIFO at max freq",
            Configuration::Adaptive => "adaptive SCHED_DEADLINE",
            Configuration::Clairvoyant => "clairvoyant bound",
        }
    }
}

/// The platform: a preset or an OPP table of one CPU's frequency domain (neither: the
/// `hikey960-big` preset).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default = "PlatformSpec::unset", deny_unknown_fields)]
pub struct PlatformSpec {
    /// `hikey960-big`: the HiKey960's big cluster, OPPs and powers of Table 4.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub preset: Option<String>,
    /// Or the OPPs, ascending: frequency (kHz) and power of a busy CPU at that OPP (any unit;
    /// energies come out in that unit × s / 1000).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub opps: Option<Vec<OppSpec>>,
    /// Time a frequency change takes to apply (default: the preset's; 0 for a table).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub switch_latency: Option<Duration>,
}

impl PlatformSpec {
    /// A `[platform]` table's starting point: nothing chosen yet.
    fn unset() -> Self {
        PlatformSpec {
            preset: None,
            opps: None,
            switch_latency: None,
        }
    }
}

impl Default for PlatformSpec {
    fn default() -> Self {
        PlatformSpec {
            preset: Some("hikey960-big".into()),
            opps: None,
            switch_latency: None,
        }
    }
}

/// One OPP of a custom platform table.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OppSpec {
    pub freq_khz: u32,
    pub power: f64,
}

/// Settings of the `adaptive` configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AdaptiveSettings {
    /// m_m ≥ 1 of eq. 5 (§6.2: 1.005).
    pub margin_mult: f64,
    /// m_o ≥ 0 of eq. 5 as a fraction of the period (§6.2: 0.041; see the module docs).
    pub margin_offset: f64,
    /// Recompute the budget every this many callbacks besides every workUnits change (§5.2: 30).
    pub update_every: u32,
    /// Budget cap and the bandwidth assumed before anything is measured (§5.2: 0.94).
    pub max_bandwidth: f64,
    /// Budget factor after an overrun until the next regular update.
    pub overload_boost: f64,
    /// schedutil's factor on the rt/fair utilisation (the deadline bandwidth gets none).
    pub headroom: f64,
    /// schedutil's rate limit.
    pub rate_limit: Duration,
    /// How the budget's margin is sized: eq. 5's fixed margins, or a percentile of each voice
    /// count's measured runtimes (the proactive controller's [`MarginMode`]).
    pub margin: MarginKind,
    /// `percentile` mode: the percentile p of a voice count's recent runtimes.
    pub percentile: f64,
    /// `percentile` mode: runtimes remembered per voice count (N).
    pub percentile_window: u32,
    /// `percentile` mode: runtimes a voice count needs before its percentile replaces eq. 5.
    pub percentile_min_samples: u32,
    /// `percentile` mode: smallest margin over the median runtime, as a fraction of it.
    pub margin_floor: f64,
}

/// The scenario's name for the proactive controller's [`MarginMode`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MarginKind {
    /// Eq. 5: Q = m_m·C_e + m_o·T, × `overload_boost` after an overrun.
    Fixed,
    /// Q = max(P_p, (1 + floor)·median) of the voice count's last N runtimes (eq. 5 until it has
    /// enough), raised to the overrun's runtime after an overrun.
    Percentile,
}

impl MarginKind {
    /// The name used in files and on the command line.
    pub fn key(self) -> &'static str {
        match self {
            MarginKind::Fixed => "fixed",
            MarginKind::Percentile => "percentile",
        }
    }
}

impl Default for AdaptiveSettings {
    fn default() -> Self {
        let pm = PercentileMargin::default();
        AdaptiveSettings {
            margin_mult: 1.005,
            margin_offset: 0.041,
            update_every: 30,
            max_bandwidth: 0.94,
            overload_boost: 1.25,
            headroom: 1.25,
            rate_limit: Duration::from_us(500),
            margin: MarginKind::Percentile,
            percentile: pm.p,
            percentile_window: pm.window,
            percentile_min_samples: pm.min_samples,
            margin_floor: pm.floor,
        }
    }
}

impl AdaptiveSettings {
    /// The controller's margin mode for these settings.
    pub fn margin_mode(&self) -> MarginMode {
        match self.margin {
            MarginKind::Fixed => MarginMode::Fixed,
            MarginKind::Percentile => MarginMode::Percentile(PercentileMargin {
                p: self.percentile,
                window: self.percentile_window,
                min_samples: self.percentile_min_samples,
                floor: self.margin_floor,
            }),
        }
    }
}

/// Settings of the `fifo-walt` configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WaltSettings {
    /// WALT's window (Android's default: 20 ms, §6.1).
    pub window: Duration,
    /// Windows of history.
    pub hist_size: usize,
    /// schedutil's factor on the tracked utilisation (1.25 as in the kernel).
    pub headroom: f64,
    /// schedutil's rate limit.
    pub rate_limit: Duration,
}

impl Default for WaltSettings {
    fn default() -> Self {
        WaltSettings {
            window: Duration::from_ms(20),
            hist_size: 5,
            headroom: 1.25,
            rate_limit: Duration::from_us(500),
        }
    }
}

/// Execution-time noise of the callback: each job's work is its voices' cost times a factor drawn
/// from a normal distribution of mean 1 and deviation `sd`, truncated to [1 − 3·sd, 1 + 3·sd]
/// (rejection-sampled), from a ChaCha8 stream seeded with `seed` — the variation that caches, branch
/// history and interrupts give a real callback of fixed voices. 0 = the paper's exactly linear cost.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct JitterSettings {
    /// Relative standard deviation of a job's work, in [0, 0.3].
    pub sd: f64,
    /// Seed of the factors (recorded in the output).
    pub seed: u64,
}

impl Default for JitterSettings {
    fn default() -> Self {
        JitterSettings { sd: 0.0, seed: 1 }
    }
}

impl JitterSettings {
    /// Largest deviation accepted: beyond it the truncation at 1 ± 3·sd would reach 0.
    pub const MAX_SD: f64 = 0.3;

    /// Each job's work: `cost(voices of job j)` times its factor, drawn by the workload crate's
    /// truncated normal ([`Work::normal`], rejection-sampled) so the noise model is the one task
    /// sets use for `normal:M,S`.
    pub fn works(&self, cost: &VoiceCost, schedule: &VoiceSchedule) -> Vec<u64> {
        let nominal = (0..schedule.jobs).map(|j| cost.cost_ns(schedule.voices_of(j)));
        if self.sd == 0.0 {
            return nominal.collect();
        }
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(self.seed);
        let k = 3.0 * self.sd;
        nominal
            .map(|w| {
                let scaled = |f: f64| Duration((w as f64 * f).round() as u64);
                match Work::normal(Duration(w), scaled(self.sd), scaled(1.0 - k), scaled(1.0 + k)) {
                    Ok(work) => work.sample(&mut rng).0,
                    // A callback too cheap for its deviation to reach 1 ns has nothing to vary.
                    Err(_) => w,
                }
            })
            .collect()
    }
}

/// An audio experiment. Every field has a default; the defaults are the paper's §6.3 set-up
/// (S = 48 kHz, b = 64, random voices in [5, 185] every 3 s for 60 s, seed 1, HiKey960 big CPU).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AudioScenario {
    /// S, Hz.
    pub sample_rate_hz: u32,
    /// b, frames.
    pub burst_frames: u32,
    /// Simulated time per configuration.
    pub duration: Duration,
    /// Time between changes of voices (rounded to whole callbacks).
    pub step: Duration,
    pub pattern: VoicePattern,
    /// Voices that fill the CPU at its top OPP (§6.1: 210).
    pub saturating_voices: u64,
    /// Fixed cost of a callback besides its voices, at the top OPP.
    pub base_cost: Duration,
    /// When the callback announces a change of voices.
    pub hint: HintTiming,
    /// Largest buffer LatencyMark tries, bursts.
    pub max_bursts: u32,
    /// The buffer the goal is judged at, bursts (the paper's 2).
    pub target_bursts: u32,
    /// SCHED_FIFO priority of the callback in the fifo-* configurations.
    pub fifo_priority: u8,
    pub platform: PlatformSpec,
    pub adaptive: AdaptiveSettings,
    pub walt: WaltSettings,
    /// Execution-time noise of the callback (none by default, as in the paper's model).
    pub jitter: JitterSettings,
    /// Configurations to run, in order.
    pub configurations: Vec<Configuration>,
}

impl Default for AudioScenario {
    fn default() -> Self {
        AudioScenario {
            sample_rate_hz: pacer_workload::audio::DEFAULT_SAMPLE_RATE_HZ,
            burst_frames: pacer_workload::audio::DEFAULT_BURST_FRAMES,
            duration: Duration::from_secs(60),
            step: Duration::from_secs(3),
            pattern: VoicePattern::paper_random(1),
            saturating_voices: pacer_workload::audio::SATURATING_VOICES,
            base_cost: Duration::ZERO,
            hint: HintTiming::Ahead,
            max_bursts: 128,
            target_bursts: 2,
            fifo_priority: 2,
            platform: PlatformSpec::default(),
            adaptive: AdaptiveSettings::default(),
            walt: WaltSettings::default(),
            jitter: JitterSettings::default(),
            configurations: Configuration::ALL.to_vec(),
        }
    }
}

/// Why a scenario cannot be read or run. Parse and validation errors name the file and field.
#[derive(Debug, thiserror::Error)]
pub enum AudioScenarioError {
    #[error("{file}: cannot read: {source}")]
    Read {
        file: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{file}: {field}: {message}")]
    Parse {
        file: String,
        field: String,
        message: String,
    },
    #[error("{file}: {field}: {message}")]
    Invalid {
        file: String,
        field: String,
        message: String,
    },
    #[error("{configuration}: {message}")]
    Run { configuration: String, message: String },
}

impl AudioScenario {
    /// The clock of this scenario.
    pub fn clock(&self) -> AudioClock {
        AudioClock {
            sample_rate_hz: self.sample_rate_hz,
            burst_frames: self.burst_frames,
        }
    }

    /// The seed of the voices, when the pattern is random.
    pub fn seed(&self) -> Option<u64> {
        match self.pattern {
            VoicePattern::Random { seed, .. } => Some(seed),
            _ => None,
        }
    }

    /// Checks every field; `origin` names the file in errors (`built-in` for the default).
    pub fn validate(&self, origin: &str) -> Result<(), AudioScenarioError> {
        let bad = |field: &str, message: String| AudioScenarioError::Invalid {
            file: origin.to_string(),
            field: field.to_string(),
            message,
        };
        let clock = self.clock();
        clock.validate().map_err(|e| {
            let field = match e {
                AudioError::SampleRate(_) => "sample_rate_hz",
                AudioError::BurstFrames(_) => "burst_frames",
                _ => "burst_frames",
            };
            bad(field, e.to_string())
        })?;
        let t = clock.period_ns();
        if self.duration.ns() < t {
            return Err(bad(
                "duration",
                format!(
                    "expected at least one callback period ({}), got {}",
                    Duration(t),
                    self.duration
                ),
            ));
        }
        // The run keeps a record per callback (750 per second at the default clock): an hour is
        // 2.7 M records; the accepted 584 years would have sized arrays beyond any memory.
        if self.duration.ns() > MAX_AUDIO_DURATION_NS {
            return Err(bad(
                "duration",
                format!(
                    "expected at most {} (the run keeps every callback), got {}",
                    Duration(MAX_AUDIO_DURATION_NS),
                    self.duration
                ),
            ));
        }
        if self.step.ns() == 0 {
            return Err(bad("step", "expected a step > 0".into()));
        }
        self.pattern
            .validate()
            .map_err(|e| bad("pattern", e.to_string()))?;
        // A callback of more voices than this takes MAX_VOICE_LOAD periods at the top OPP:
        // overload is part of the experiment, costs that overflow the arithmetic are not
        // (u64::MAX voices reported a used bandwidth of 1.4e13).
        let most = self.saturating_voices.saturating_mul(MAX_VOICE_LOAD);
        if self.pattern.max_voices() > most {
            return Err(bad(
                "pattern",
                format!(
                    "{} voices: expected at most {most} ({MAX_VOICE_LOAD} × saturating_voices = \
                     {MAX_VOICE_LOAD} periods of work per callback)",
                    self.pattern.max_voices()
                ),
            ));
        }
        VoiceCost::calibrated(t, self.saturating_voices, self.base_cost.ns()).map_err(|e| match e {
            AudioError::SaturatingVoices(_) => bad("saturating_voices", e.to_string()),
            _ => bad("base_cost", e.to_string()),
        })?;
        let sd = self.jitter.sd;
        if !(sd.is_finite() && (0.0..=JitterSettings::MAX_SD).contains(&sd)) {
            return Err(bad(
                "jitter.sd",
                format!(
                    "expected a relative deviation in [0, {}], got {sd}",
                    JitterSettings::MAX_SD
                ),
            ));
        }
        if self.max_bursts == 0 {
            return Err(bad("max_bursts", "expected at least 1 burst".into()));
        }
        if self.target_bursts == 0 {
            return Err(bad("target_bursts", "expected at least 1 burst".into()));
        }
        if !(1..=99).contains(&self.fifo_priority) {
            return Err(bad(
                "fifo_priority",
                format!(
                    "expected a SCHED_FIFO priority in 1..=99, got {}",
                    self.fifo_priority
                ),
            ));
        }
        if self.configurations.is_empty() {
            return Err(bad(
                "configurations",
                "expected at least one of fifo-walt, fifo-max, adaptive, clairvoyant".into(),
            ));
        }
        let a = &self.adaptive;
        if !(a.margin_mult.is_finite() && a.margin_mult >= 1.0) {
            return Err(bad(
                "adaptive.margin_mult",
                format!("expected m_m ≥ 1 (eq. 5), got {}", a.margin_mult),
            ));
        }
        if !(a.margin_offset.is_finite() && (0.0..1.0).contains(&a.margin_offset)) {
            return Err(bad(
                "adaptive.margin_offset",
                format!(
                    "expected m_o in [0, 1) (a fraction of the period), got {}",
                    a.margin_offset
                ),
            ));
        }
        if a.update_every == 0 {
            return Err(bad(
                "adaptive.update_every",
                "expected at least 1 callback".into(),
            ));
        }
        if !(a.max_bandwidth > 0.0 && a.max_bandwidth <= 1.0) {
            return Err(bad(
                "adaptive.max_bandwidth",
                format!("expected a bandwidth in (0, 1], got {}", a.max_bandwidth),
            ));
        }
        if !(a.overload_boost.is_finite() && a.overload_boost >= 1.0) {
            return Err(bad(
                "adaptive.overload_boost",
                format!("expected a factor ≥ 1, got {}", a.overload_boost),
            ));
        }
        if !(a.percentile > 0.0 && a.percentile <= 1.0) {
            return Err(bad(
                "adaptive.percentile",
                format!("expected a percentile p in (0, 1], got {}", a.percentile),
            ));
        }
        if !(1..=MAX_PERCENTILE_WINDOW).contains(&a.percentile_window) {
            return Err(bad(
                "adaptive.percentile_window",
                format!(
                    "expected 1..={MAX_PERCENTILE_WINDOW} runtimes, got {}",
                    a.percentile_window
                ),
            ));
        }
        if !(1..=a.percentile_window).contains(&a.percentile_min_samples) {
            return Err(bad(
                "adaptive.percentile_min_samples",
                format!(
                    "expected 1..=percentile_window ({}) runtimes, got {}",
                    a.percentile_window, a.percentile_min_samples
                ),
            ));
        }
        if !(a.margin_floor.is_finite() && (0.0..1.0).contains(&a.margin_floor)) {
            return Err(bad(
                "adaptive.margin_floor",
                format!(
                    "expected a fraction of the median in [0, 1), got {}",
                    a.margin_floor
                ),
            ));
        }
        for (field, h) in [
            ("adaptive.headroom", a.headroom),
            ("walt.headroom", self.walt.headroom),
        ] {
            if !(h.is_finite() && h > 0.0 && h <= 16.0) {
                return Err(bad(field, format!("expected a factor in (0, 16], got {h}")));
            }
        }
        if self.walt.window.ns() < 1_000 {
            return Err(bad(
                "walt.window",
                format!("expected at least 1us, got {}", self.walt.window),
            ));
        }
        if !(1..=8).contains(&self.walt.hist_size) {
            return Err(bad(
                "walt.hist_size",
                format!("expected 1..=8 windows, got {}", self.walt.hist_size),
            ));
        }
        self.platform(origin)?;
        Ok(())
    }

    /// The platform of the scenario: one CPU of the named preset or table.
    pub fn platform(&self, origin: &str) -> Result<Platform, AudioScenarioError> {
        let bad = |field: &str, message: String| AudioScenarioError::Invalid {
            file: origin.to_string(),
            field: field.to_string(),
            message,
        };
        let p = &self.platform;
        let mut platform = match (&p.preset, &p.opps) {
            (Some(_), Some(_)) => {
                return Err(bad(
                    "platform",
                    "expected either `preset` or `opps`, not both".into(),
                ))
            }
            (None, None) => Platform::hikey960_big(1),
            (Some(name), None) => match name.as_str() {
                "hikey960-big" => Platform::hikey960_big(1),
                other => {
                    return Err(bad(
                        "platform.preset",
                        format!("unknown preset `{other}`: expected `hikey960-big`"),
                    ))
                }
            },
            (None, Some(opps)) => {
                if opps.is_empty() {
                    return Err(bad("platform.opps", "expected at least one OPP".into()));
                }
                for (i, o) in opps.iter().enumerate() {
                    if o.freq_khz == 0 || (i > 0 && o.freq_khz <= opps[i - 1].freq_khz) {
                        return Err(bad(
                            &format!("platform.opps[{i}].freq_khz"),
                            format!(
                                "is {}, expected frequencies > 0 in strictly ascending order",
                                o.freq_khz
                            ),
                        ));
                    }
                    if !(o.power.is_finite() && o.power >= 0.0) {
                        return Err(bad(
                            &format!("platform.opps[{i}].power"),
                            format!("is {}, expected a finite value ≥ 0", o.power),
                        ));
                    }
                }
                let freqs: Vec<u32> = opps.iter().map(|o| o.freq_khz).collect();
                let mut pl = Platform::single_domain(&[CAPACITY_SCALE], &freqs);
                for (o, s) in pl.clusters[0].opps.iter_mut().zip(opps) {
                    o.active_mw = s.power;
                }
                pl
            }
        };
        if let Some(l) = p.switch_latency {
            platform.clusters[0].switch_latency_ns = l.ns();
        }
        platform.validate().map_err(|e| {
            // The model names `clusters[0].opps[i].field`; the scenario's table is `platform.opps[i]`.
            let field = e
                .field
                .replace("clusters[0].opps", "platform.opps")
                .replace("active_mw", "power");
            bad(&field, e.problem)
        })?;
        Ok(platform)
    }
}

/// Longest run `pacer sim audio` accepts, ns (one hour).
pub const MAX_AUDIO_DURATION_NS: u64 = 3_600_000_000_000;

/// Largest `adaptive.percentile_window`: each voice count keeps this many runtimes, and a
/// budget update sorts them.
pub const MAX_PERCENTILE_WINDOW: u32 = 4096;

/// Most voices a step may have, in units of `saturating_voices` (see `AudioScenario::validate`).
pub const MAX_VOICE_LOAD: u64 = 16;

/// Parses a TOML scenario; `origin` names the file in errors.
pub fn parse_audio_scenario(text: &str, origin: &str) -> Result<AudioScenario, AudioScenarioError> {
    let parse_err = |field: String, message: String| AudioScenarioError::Parse {
        file: origin.to_string(),
        field,
        message,
    };
    let de = toml::Deserializer::parse(text).map_err(|e| {
        let line = e
            .span()
            .map(|s| {
                format!(
                    "line {}: ",
                    text[..s.start.min(text.len())].lines().count().max(1)
                )
            })
            .unwrap_or_default();
        parse_err("(syntax)".into(), format!("{line}{}", e.message().trim()))
    })?;
    let s: AudioScenario = serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let field = if path.is_empty() || path == "." {
            "(top level)".to_string()
        } else {
            path
        };
        parse_err(field, e.into_inner().message().trim().to_string())
    })?;
    s.validate(origin)?;
    Ok(s)
}

/// Reads and parses a TOML scenario file.
pub fn read_audio_scenario(path: &Path) -> Result<AudioScenario, AudioScenarioError> {
    let origin = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| AudioScenarioError::Read {
        file: origin.clone(),
        source,
    })?;
    parse_audio_scenario(&text, &origin)
}

// ---------------------------------------------------------------------------------------------
// Results.

/// One OPP of the platform, as reported.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct OppInfo {
    pub freq_khz: u32,
    pub capacity: u32,
    pub power: f64,
}

/// One callback job of a configuration (the CSV's row).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct AudioJob {
    pub job: u64,
    /// Activation on the sink's grid, t₀ + j·T.
    pub release_ns: u64,
    pub start_ns: u64,
    pub finish_ns: u64,
    pub voices: u64,
    /// Work at the top OPP, ns.
    pub work_ns: u64,
    /// CPU time, ns (work stretched by the OPPs it ran at).
    pub exec_ns: u64,
    /// Frequency when the job started, kHz.
    pub freq_khz: u32,
    /// SCHED_DEADLINE runtime in force when the job started, ns.
    pub budget_ns: Option<u64>,
    /// Buffer this job needs to be heard without a glitch, bursts.
    pub bursts_needed: u32,
}

/// How a configuration's figures were obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Method {
    Simulated,
    Analytic,
}

/// Results of one configuration.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ConfigResult {
    pub configuration: Configuration,
    pub label: String,
    pub method: Method,
    /// LatencyMark: the smallest glitch-free buffer, bursts (`None`: none up to `max_bursts`).
    pub latency_bursts: Option<u32>,
    pub latency_ms: Option<f64>,
    /// Buffer sizes LatencyMark tried and their underruns.
    pub latency_search: Vec<(u32, u64)>,
    /// Underruns with a buffer of k bursts, k = 1, 2, … up to the glitch-free k (or max_bursts).
    pub underruns_by_bursts: Vec<u64>,
    /// Underruns at the scenario's target buffer.
    pub underruns_at_target: u64,
    /// Callbacks finished after their soft deadline b/S.
    pub soft_misses: u64,
    /// Callbacks finished / expected.
    pub jobs_finished: u64,
    pub jobs_expected: u64,
    pub max_response_ns: u64,
    /// SCHED_DEADLINE budget exhaustions.
    pub overruns: u64,
    /// Residency per OPP (ascending frequency), s.
    pub residency_s: Vec<f64>,
    /// E_N = Σ_f t_f·P_f / 1000.
    pub normalised_energy: f64,
    /// Mean work at the top OPP per period (what the callback needs).
    pub used_bandwidth: f64,
    /// Mean SCHED_DEADLINE budget per period at job start (adaptive only).
    pub reserved_bandwidth: Option<f64>,
    /// Time-averaged capacity of the OPPs the CPU ran at (1 = the top OPP all the time).
    pub provisioned_capacity: f64,
    /// Caveats about how this configuration was run.
    pub notes: Vec<String>,
    #[serde(skip)]
    pub jobs: Vec<AudioJob>,
}

/// The whole experiment.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AudioReport {
    pub scenario: AudioScenario,
    /// Seed of the voices (random pattern).
    pub seed: Option<u64>,
    pub period_ns: u64,
    pub base_cost_ns: u64,
    pub per_voice_ns: u64,
    /// m_o·T, ns.
    pub margin_offset_ns: u64,
    pub callbacks: u64,
    pub callbacks_per_step: u64,
    /// Voices of each step.
    pub voices: Vec<u64>,
    pub opps: Vec<OppInfo>,
    pub results: Vec<ConfigResult>,
}

/// Progress of a run, for a progress bar: configuration index, simulated and total ns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    pub index: usize,
    pub of: usize,
    pub configuration: Configuration,
    pub simulated_ns: u64,
    pub horizon_ns: u64,
}

// ---------------------------------------------------------------------------------------------
// Running.

/// The prepared experiment: the scenario with its derived quantities.
struct Prepared {
    clock: AudioClock,
    period_ns: u64,
    cost: VoiceCost,
    schedule: VoiceSchedule,
    /// Each callback's work at the top OPP, ns (its voices' cost, with jitter when asked).
    works: Vec<u64>,
    platform: Platform,
    horizon: u64,
}

fn prepare(s: &AudioScenario, origin: &str) -> Result<Prepared, AudioScenarioError> {
    s.validate(origin)?;
    let clock = s.clock();
    let period_ns = clock.period_ns();
    let invalid = |field: &str, e: AudioError| AudioScenarioError::Invalid {
        file: origin.to_string(),
        field: field.to_string(),
        message: e.to_string(),
    };
    let cost = VoiceCost::calibrated(period_ns, s.saturating_voices, s.base_cost.ns())
        .map_err(|e| invalid("base_cost", e))?;
    let schedule = VoiceSchedule::new(&s.pattern, &clock, s.step.ns(), s.duration.ns())
        .map_err(|e| invalid("pattern", e))?;
    Ok(Prepared {
        clock,
        period_ns,
        cost,
        works: s.jitter.works(&cost, &schedule),
        schedule,
        platform: s.platform(origin)?,
        horizon: s.duration.ns(),
    })
}

/// Runs every configuration of `scenario`; `origin` names the scenario in errors, `progress`
/// is called as simulated time advances.
pub fn run_audio(
    scenario: &AudioScenario,
    origin: &str,
    progress: &mut dyn FnMut(Progress),
) -> Result<AudioReport, AudioScenarioError> {
    let p = prepare(scenario, origin)?;
    let opps = opp_infos(&p);
    let n = scenario.configurations.len();
    let mut results = Vec::with_capacity(n);
    for (index, &c) in scenario.configurations.iter().enumerate() {
        let mut report = |sim_ns: u64| {
            progress(Progress {
                index,
                of: n,
                configuration: c,
                simulated_ns: sim_ns,
                horizon_ns: p.horizon,
            })
        };
        results.push(run_configuration(scenario, &p, c, &mut report)?);
    }
    Ok(AudioReport {
        scenario: scenario.clone(),
        seed: scenario.seed(),
        period_ns: p.period_ns,
        base_cost_ns: p.cost.base_ns,
        per_voice_ns: p.cost.per_voice_ns,
        margin_offset_ns: margin_offset_ns(scenario, p.period_ns),
        callbacks: p.schedule.jobs,
        callbacks_per_step: p.schedule.step_jobs,
        voices: p.schedule.voices.clone(),
        opps,
        results,
    })
}

/// m_o·T rounded to ns (see the module docs on the units of m_o).
pub fn margin_offset_ns(s: &AudioScenario, period_ns: u64) -> u64 {
    (s.adaptive.margin_offset * period_ns as f64).round().max(0.0) as u64
}

/// The lowest OPP whose capacity fits `work_ns` (at the top OPP) in `period_ns`: the smallest i
/// with work·cap_top ≤ cap_i·T; the top OPP when none does.
pub fn lowest_fitting_opp(opps: &[OppInfo], work_ns: u64, period_ns: u64) -> usize {
    let top = opps.last().map_or(CAPACITY_SCALE, |o| o.capacity.max(1)) as u128;
    opps.iter()
        .position(|o| work_ns as u128 * top <= o.capacity as u128 * period_ns as u128)
        .unwrap_or(opps.len().saturating_sub(1))
}

fn run_configuration(
    s: &AudioScenario,
    p: &Prepared,
    c: Configuration,
    progress: &mut dyn FnMut(u64),
) -> Result<ConfigResult, AudioScenarioError> {
    match c {
        Configuration::Clairvoyant => clairvoyant(s, p),
        _ => simulate(s, p, c, progress),
    }
}

/// What each job started with: (start time, frequency kHz, SCHED_DEADLINE runtime ns).
#[derive(Default)]
struct ProbeData {
    begins: Vec<(u64, u32, Option<u64>)>,
}

/// Records what each job started with, after every other controller has acted on the event.
struct Probe(Rc<RefCell<ProbeData>>);

impl Controller for Probe {
    fn period(&self) -> Option<u64> {
        None
    }
    fn tick(&mut self, _k: &mut dyn Kernel) {}
    fn on_app_event(&mut self, ev: &AppEvent, k: &mut dyn Kernel) {
        if let AppEvent::JobBegin { thread, t, .. } = *ev {
            if thread == CALLBACK {
                let freq = k.frequency(0).map(|f| f.cur_khz).unwrap_or(0);
                let budget = match k.policy(thread) {
                    Ok(Policy::Deadline(r)) => Some(r.runtime.ns()),
                    _ => None,
                };
                self.0.borrow_mut().begins.push((t, freq, budget));
            }
        }
    }
}

#[derive(Default)]
struct Records(Vec<JobRecord>);

impl Observer for Records {
    fn job(&mut self, r: &JobRecord) {
        if r.thread == CALLBACK {
            self.0.push(*r);
        }
    }
}

/// The frequency set-up of a simulated configuration.
enum Frequency {
    /// The top OPP, always (`performance`).
    Max,
    /// schedutil on WALT, rt tracked by WALT (Android).
    Walt,
    /// schedutil on the deadline class's running bandwidth (GRUB-PA).
    GrubPa,
}

fn sim_config(s: &AudioScenario, p: &Prepared, f: &Frequency) -> SimConfig {
    let governor = match f {
        Frequency::Max => Governor::Performance,
        Frequency::Walt => Governor::Schedutil(SchedutilConfig {
            signal: UtilSignal::Walt {
                window_ns: s.walt.window.ns(),
                hist_size: s.walt.hist_size,
                policy: WaltPolicy::MaxRecentAvg,
            },
            rt_at_max: false,
            headroom: s.walt.headroom,
            rate_limit_ns: s.walt.rate_limit.ns(),
        }),
        // The callback is SCHED_DEADLINE: its reserved bandwidth drives the OPP (no headroom);
        // PELT tracks the (absent) rt and fair load, as in §6.2 with WALT disabled.
        Frequency::GrubPa => Governor::Schedutil(SchedutilConfig {
            signal: UtilSignal::pelt(),
            rt_at_max: false,
            headroom: s.adaptive.headroom,
            rate_limit_ns: s.adaptive.rate_limit.ns(),
        }),
    };
    let mut cfg = SimConfig::with_platform(p.platform.clone(), governor);
    // The paper's 4.9 kernel has no fair server: admission allows 0.95 of the CPU.
    cfg.fair_server = None;
    cfg
}

fn simulate(
    s: &AudioScenario,
    p: &Prepared,
    c: Configuration,
    progress: &mut dyn FnMut(u64),
) -> Result<ConfigResult, AudioScenarioError> {
    let run_err = |message: String| AudioScenarioError::Run {
        configuration: c.key().to_string(),
        message,
    };
    let fifo = Policy::Fifo {
        priority: s.fifo_priority,
    };
    let freq = match c {
        Configuration::FifoWalt => Frequency::Walt,
        Configuration::FifoMax => Frequency::Max,
        Configuration::Adaptive => Frequency::GrubPa,
        Configuration::Clairvoyant => return clairvoyant(s, p),
    };
    // Jittered works make every job distinct; without jitter the compact linear model is used.
    let works = (s.jitter.sd > 0.0).then_some(p.works.as_slice());
    let thread = callback_thread("synth", fifo, &p.clock, &p.cost, &p.schedule, s.hint, works);
    let workload = callback_workload(thread, p.horizon);
    let cfg = sim_config(s, p, &freq);
    let mut sim = Sim::new(workload, cfg).map_err(|e| run_err(e.to_string()))?;
    if c == Configuration::Adaptive {
        let a = &s.adaptive;
        let pc = ProactiveConfig {
            max_bandwidth: a.max_bandwidth,
            margin_mult: a.margin_mult,
            margin_offset_ns: margin_offset_ns(s, p.period_ns),
            update_every: a.update_every,
            overload_boost: a.overload_boost,
            margin: a.margin_mode(),
            ..ProactiveConfig::default()
        };
        let mut pc = ProactiveController::new(pc).map_err(|e| run_err(e.to_string()))?;
        pc.add_thread(CALLBACK, p.period_ns, ThreadOptions::default())
            .map_err(|e| run_err(e.to_string()))?;
        sim.add_controller(Box::new(pc));
    }
    let probe = Rc::new(RefCell::new(ProbeData::default()));
    sim.add_controller(Box::new(Probe(probe.clone())));
    let mut records = Records::default();
    let slices = 100u64;
    for i in 1..=slices {
        let until = if i == slices {
            p.horizon
        } else {
            p.horizon / slices * i
        };
        sim.run_until(until, &mut records);
        progress(until);
    }
    let stats = sim.stats();
    let overruns = stats.first().map_or(0, |t| t.overruns);
    let energy = sim.energy_report();
    let residency_ns: Vec<u64> = energy
        .cpus
        .first()
        .map(|c| c.opps.iter().map(|o| o.busy_ns + o.idle_ns).collect())
        .unwrap_or_default();
    let data = probe.borrow();
    // The timer that ends the last callback wakes the thread once more, to exit: that empty job
    // is not a callback.
    let jobs: Vec<AudioJob> = records
        .0
        .iter()
        .filter(|r| r.job < p.schedule.jobs)
        .enumerate()
        .map(|(i, r)| {
            let release = r.job * p.period_ns; // the sink's grid (t₀ = 0)
            let voices = p.schedule.voices_of(r.job);
            let begin = data.begins.get(i).filter(|b| b.0 == r.start);
            AudioJob {
                job: r.job,
                release_ns: release,
                start_ns: r.start,
                finish_ns: r.finish,
                voices,
                work_ns: p
                    .works
                    .get(r.job as usize)
                    .copied()
                    .unwrap_or(p.cost.cost_ns(voices)),
                exec_ns: r.exec,
                freq_khz: begin.map_or(0, |b| b.1),
                budget_ns: begin.and_then(|b| b.2),
                bursts_needed: bursts_needed(p.period_ns, release, r.finish),
            }
        })
        .collect();
    let mut result = judge(s, p, c, Method::Simulated, jobs, &residency_ns)?;
    result.overruns = overruns;
    Ok(result)
}

/// The OPPs of the audio CPU's cluster, as reported.
fn opp_infos(p: &Prepared) -> Vec<OppInfo> {
    p.platform.clusters[0]
        .opps
        .iter()
        .map(|o| OppInfo {
            freq_khz: o.freq_khz,
            capacity: o.capacity,
            power: o.active_mw,
        })
        .collect()
}

/// The clairvoyant bound, analytically (see the module docs).
fn clairvoyant(s: &AudioScenario, p: &Prepared) -> Result<ConfigResult, AudioScenarioError> {
    let opps = opp_infos(p);
    let top = opps.last().map_or(CAPACITY_SCALE, |o| o.capacity.max(1)) as u64;
    let mut residency_ns = vec![0u64; opps.len()];
    let jobs: Vec<AudioJob> = (0..p.schedule.jobs)
        .map(|j| {
            let voices = p.schedule.voices_of(j);
            let work = p.works[j as usize];
            let i = lowest_fitting_opp(&opps, work, p.period_ns);
            residency_ns[i] += p.period_ns;
            let cap = opps.get(i).map_or(top, |o| o.capacity.max(1) as u64);
            let exec = (work as u128 * top as u128).div_ceil(cap as u128) as u64;
            let release = j * p.period_ns;
            AudioJob {
                job: j,
                release_ns: release,
                start_ns: release,
                finish_ns: release + exec,
                voices,
                work_ns: work,
                exec_ns: exec,
                freq_khz: opps.get(i).map_or(0, |o| o.freq_khz),
                budget_ns: None,
                bursts_needed: bursts_needed(p.period_ns, release, release + exec),
            }
        })
        .collect();
    // The bound covers the jobs' periods; the rest of the horizon (< one period) idles at the
    // lowest OPP.
    let covered = p.schedule.jobs * p.period_ns;
    if let Some(r) = residency_ns.first_mut() {
        *r += p.horizon.saturating_sub(covered);
    }
    let mut r = judge(
        s,
        p,
        Configuration::Clairvoyant,
        Method::Analytic,
        jobs,
        &residency_ns,
    )?;
    r.notes.push(
        "analytic: each callback at the lowest OPP that fits its work in its period, no switch latency"
            .into(),
    );
    Ok(r)
}

/// The sink's verdicts, LatencyMark, energy and bandwidths of one configuration's jobs.
fn judge(
    s: &AudioScenario,
    p: &Prepared,
    c: Configuration,
    method: Method,
    jobs: Vec<AudioJob>,
    residency_ns: &[u64],
) -> Result<ConfigResult, AudioScenarioError> {
    let run_err = |message: String| AudioScenarioError::Run {
        configuration: c.key().to_string(),
        message,
    };
    let finishes: Vec<u64> = jobs.iter().map(|j| j.finish_ns).collect();
    let t0 = 0;
    let count = |k: u32| -> Result<pacer_workload::audio::SinkCount, AudioScenarioError> {
        Ok(AudioSink::new(p.period_ns, k)
            .map_err(|e| run_err(e.to_string()))?
            .count(t0, &finishes, p.horizon))
    };
    let mark = latency_mark(s.max_bursts, |k| count(k).map(|c| c.underruns))?;
    let upto = mark.bursts.unwrap_or(s.max_bursts);
    let mut by_bursts = Vec::with_capacity(upto as usize);
    for k in 1..=upto {
        by_bursts.push(count(k)?.underruns);
    }
    let at_target = count(s.target_bursts)?;
    let opps = &p.platform.clusters[0].opps;
    let residency_s: Vec<f64> = residency_ns.iter().map(|&ns| ns as f64 / 1e9).collect();
    let power: Vec<f64> = opps.iter().map(|o| o.active_mw).collect();
    let energy = residency_s.iter().zip(&power).map(|(t, p)| t * p).sum::<f64>() / 1000.0;
    let top = opps.last().map_or(CAPACITY_SCALE, |o| o.capacity.max(1)) as f64;
    let total_ns: u64 = residency_ns.iter().sum();
    let provisioned = residency_ns
        .iter()
        .zip(opps)
        .map(|(&ns, o)| ns as f64 * o.capacity as f64 / top)
        .sum::<f64>()
        / total_ns.max(1) as f64;
    let n = p.schedule.jobs.max(1) as f64;
    let used = p.works.iter().map(|&w| w as f64).sum::<f64>() / (n * p.period_ns as f64);
    let budgets: Vec<u64> = jobs.iter().filter_map(|j| j.budget_ns).collect();
    let reserved = (!budgets.is_empty()).then(|| {
        budgets.iter().map(|&q| q as f64).sum::<f64>() / (budgets.len() as f64 * p.period_ns as f64)
    });
    Ok(ConfigResult {
        configuration: c,
        label: c.label().into(),
        method,
        latency_bursts: mark.bursts,
        latency_ms: mark.bursts.map(|k| p.clock.latency_ms(k)),
        latency_search: mark.tried,
        underruns_by_bursts: by_bursts,
        underruns_at_target: at_target.underruns,
        soft_misses: count(1)?.soft_misses,
        jobs_finished: jobs.len() as u64,
        jobs_expected: p.schedule.jobs,
        max_response_ns: jobs
            .iter()
            .map(|j| j.finish_ns.saturating_sub(j.release_ns))
            .max()
            .unwrap_or(0),
        overruns: 0,
        residency_s,
        normalised_energy: energy,
        used_bandwidth: used,
        reserved_bandwidth: reserved,
        provisioned_capacity: provisioned,
        notes: Vec::new(),
        jobs,
    })
}
