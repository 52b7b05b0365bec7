//! The low-latency audio workload of `adaptive-deadline-audio-android.txt`: a synthesizer callback
//! whose cost follows its number of voices (SynthMark, §5.3 and §6.1), the virtual audio sink
//! that counts underruns (§4.2, Fig. 3), the workUnits patterns of LatencyMark (§6.1–6.3), and
//! the LatencyMark search for the smallest glitch-free buffer.
//!
//! ## The callback (§4.2, §5.1)
//! "The application callback writes audio frames in chunks called *bursts* of size b […] With a
//! configured sampling rate of S frames per second for the audio device, this results in one
//! activation of the application callback every period of length b/S." The callback thread is a
//! periodic thread with an absolute timer of period T = b/S, rounded to whole nanoseconds
//! ([`AudioClock::period_ns`]; 64 frames at 48 kHz give 1 333 333 ns, 0.25 ppm short of the
//! exact 4/3 ms — the sink runs on the same rounded clock, so the model is self-consistent).
//!
//! ## The cost of a callback (§6.1)
//! "210 voices were able to saturate our big CPU when running at the maximum frequency", and the
//! paper's square wave of 5 ↔ 185 voices is "utilization of the big CPU ranging from 2.38 % to
//! 88 %" — exactly v/210. [`VoiceCost`] is therefore linear, cost(v) = base + v·c (work at
//! capacity 1024 at the top OPP), calibrated so that base + V_sat·c = T with V_sat = 210. The
//! default base is 0, which reproduces the paper's 2.38 % and 88 %; a scenario may set a small
//! fixed base (the synthesizer's per-callback overhead), and c shrinks so that 210 voices still
//! fill the period.
//!
//! ## The sink (§4.2, Fig. 3)
//! "The playback ring-buffer […] has a bigger size B set as a multiple of the burst size:
//! B = k·b." The buffer starts full (SynthMark's VirtualAudioSink "start full and primed"), and
//! the device reads one burst every b/S from the sink's start t₀. Burst j, produced by callback
//! job j activated at t₀ + j·b/S, is read at t₀ + (j + k)·b/S. "Each activation of the real-time
//! thread has a relative soft deadline of D = b/S, where the hard deadline is B/S instead": a job
//! that finishes after its soft deadline only lowers the fill level ("this does not immediately
//! result in an audio glitch thanks to the buffered additional bursts"); "an audio glitch only
//! occurs if the audio processing is delayed further, up to the hard deadline of B/b periods".
//! [`AudioSink`] counts one underrun for every burst written after its read time
//! t₀ + (j + k)·b/S (a burst written at exactly that instant is in time), and one soft miss for
//! every job finishing after t₀ + (j + 1)·b/S. The device reads on its own clock whatever the
//! thread does (SynthMark's sink advances its read position even when the buffer is empty), so
//! burst j is always the one read at t₀ + (j + k)·b/S and a late burst costs exactly one glitch.
//!
//! ## LatencyMark (§6.1–6.3)
//! SynthMark's LatencyMark grows the buffer by one burst after each glitch and restarts its
//! clock "so we get a full run without glitches"; the result is the smallest k with a
//! glitch-free run, reported as latency B/S = k·b/S. [`latency_mark`] finds that k for any
//! underrun count that does not increase with k (doubling, then bisection).
//!
//! ## workUnits patterns (§6.1–6.3)
//! "A number of workUnits that dynamically varied every 3 seconds": a square wave alternating
//! 5 and 185 voices ([`VoicePattern::Square`], starting low), and "a random number of workUnits
//! at every step, still in the range between 5 and 185, for a total duration of 60 seconds"
//! with a fixed seed ([`VoicePattern::Random`], uniform integers from a ChaCha8 stream seeded
//! with the pattern's seed). Steps are whole numbers of callbacks (3 s = 2250 bursts of 64
//! frames at 48 kHz).
//!
//! ## The workUnits hint (§5.2)
//! "The AudioTask notifies the currently requested workUnits to the HostCPUManager", so that
//! "schedutil can then immediately trigger an upfrequency switch, even before starting the
//! heavier computations". The callback announces the first step's voices before its first job
//! runs, and each change with [`Event::WorkUnits`] either at the end of the last callback before
//! the change ([`HintTiming::Ahead`], the proactive API: the application knows the notes it is
//! about to play) or at the start of the first callback after it ([`HintTiming::Inline`], as
//! SynthMark's harness changes its voices inside the callback).

use pacer_model::{Duration, Policy};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use crate::model::{Event, Phase, ThreadSpec, TimerId, TimerMode, Work, Workload};

/// SynthMark's and the paper's sampling rate (Table 3), Hz.
pub const DEFAULT_SAMPLE_RATE_HZ: u32 = 48_000;
/// The paper's low-latency burst (Table 3, §6.1), frames.
pub const DEFAULT_BURST_FRAMES: u32 = 64;
/// Voices that saturate the big CPU at its top OPP (§6.1).
pub const SATURATING_VOICES: u64 = 210;
/// Shortest callback period accepted, ns (the kernel's `sched_deadline_period_min_us` is 100 µs).
pub const MIN_PERIOD_NS: u64 = 100_000;

/// Why an audio model was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AudioError {
    #[error("sample_rate_hz: expected a sampling rate > 0 Hz, got {0}")]
    SampleRate(u32),
    #[error("burst_frames: expected a burst of at least 1 frame, got {0}")]
    BurstFrames(u32),
    #[error("burst_frames / sample_rate_hz: the callback period {period_ns} ns is shorter than the 100 µs the kernel accepts")]
    PeriodTooShort { period_ns: u64 },
    #[error("buffer: expected at least 1 burst, got {0}")]
    BufferBursts(u32),
    #[error("saturating_voices: expected at least 1 voice, got {0}")]
    SaturatingVoices(u64),
    #[error("base cost {base_ns} ns: expected less than the callback period {period_ns} ns")]
    BaseCost { base_ns: u64, period_ns: u64 },
    #[error("pattern: {0}")]
    Pattern(String),
    #[error("duration: expected at least one callback period ({period_ns} ns), got {duration_ns} ns")]
    Duration { duration_ns: u64, period_ns: u64 },
}

/// The audio device's clock: S frames per second, consumed in bursts of b frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct AudioClock {
    pub sample_rate_hz: u32,
    pub burst_frames: u32,
}

impl Default for AudioClock {
    fn default() -> Self {
        AudioClock {
            sample_rate_hz: DEFAULT_SAMPLE_RATE_HZ,
            burst_frames: DEFAULT_BURST_FRAMES,
        }
    }
}

impl AudioClock {
    pub fn new(sample_rate_hz: u32, burst_frames: u32) -> Result<Self, AudioError> {
        let c = AudioClock {
            sample_rate_hz,
            burst_frames,
        };
        c.validate()?;
        Ok(c)
    }

    pub fn validate(&self) -> Result<(), AudioError> {
        if self.sample_rate_hz == 0 {
            return Err(AudioError::SampleRate(self.sample_rate_hz));
        }
        if self.burst_frames == 0 {
            return Err(AudioError::BurstFrames(self.burst_frames));
        }
        let period_ns = self.period_ns();
        if period_ns < MIN_PERIOD_NS {
            return Err(AudioError::PeriodTooShort { period_ns });
        }
        Ok(())
    }

    /// T = b/S, rounded to the nearest nanosecond (≥ 1).
    pub fn period_ns(&self) -> u64 {
        let s = self.sample_rate_hz.max(1) as u128;
        let num = self.burst_frames as u128 * 1_000_000_000u128;
        ((num + s / 2) / s).max(1) as u64
    }

    /// Audio latency of a buffer of k bursts, r_t = B/S = k·b/S, in milliseconds (exact, not
    /// rounded to the simulation's nanosecond period).
    pub fn latency_ms(&self, bursts: u32) -> f64 {
        bursts as f64 * self.burst_frames as f64 * 1000.0 / self.sample_rate_hz.max(1) as f64
    }
}

/// The callback's cost as a function of its voices: base + v·c ns of work at capacity 1024 and
/// the top OPP (work stretches at lower OPPs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct VoiceCost {
    pub base_ns: u64,
    pub per_voice_ns: u64,
}

impl VoiceCost {
    /// Calibrates c so that `saturating_voices` voices fill the period at the top OPP:
    /// c = round((T − base) / V_sat) (§6.1: V_sat = 210 on the HiKey960's big CPU).
    pub fn calibrated(period_ns: u64, saturating_voices: u64, base_ns: u64) -> Result<Self, AudioError> {
        if saturating_voices == 0 {
            return Err(AudioError::SaturatingVoices(saturating_voices));
        }
        if base_ns >= period_ns {
            return Err(AudioError::BaseCost { base_ns, period_ns });
        }
        let rest = period_ns - base_ns;
        let per_voice_ns = (rest + saturating_voices / 2) / saturating_voices;
        Ok(VoiceCost {
            base_ns,
            per_voice_ns,
        })
    }

    /// Work of one callback playing `voices` voices, ns at capacity 1024 and the top OPP.
    pub fn cost_ns(&self, voices: u64) -> u64 {
        self.base_ns
            .saturating_add(self.per_voice_ns.saturating_mul(voices))
    }

    /// Fraction of the big CPU at its top OPP that `voices` voices use.
    pub fn utilisation(&self, voices: u64, period_ns: u64) -> f64 {
        self.cost_ns(voices) as f64 / period_ns.max(1) as f64
    }

    /// The simulator's model of this cost: [`Work::Linear`], following the thread's workUnits.
    pub fn work(&self) -> Work {
        Work::Linear {
            base: Duration(self.base_ns),
            per_unit: Duration(self.per_voice_ns),
        }
    }
}

/// How the number of voices changes from step to step.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum VoicePattern {
    /// Alternates `low`, `high`, `low`, … (§6.1–6.2: 5 ↔ 185).
    Square { low: u64, high: u64 },
    /// Uniform integers in [min, max], one per step, from a ChaCha8 stream seeded with `seed`
    /// (§6.3: 5–185, fixed seed).
    Random { min: u64, max: u64, seed: u64 },
    /// These values in order, repeated if the run has more steps.
    List { voices: Vec<u64> },
}

impl VoicePattern {
    /// The paper's square wave, 5 ↔ 185 voices.
    pub fn paper_square() -> Self {
        VoicePattern::Square { low: 5, high: 185 }
    }

    /// The paper's random pattern, 5–185 voices, with `seed`.
    pub fn paper_random(seed: u64) -> Self {
        VoicePattern::Random {
            min: 5,
            max: 185,
            seed,
        }
    }

    pub fn validate(&self) -> Result<(), AudioError> {
        match self {
            VoicePattern::Square { low, high } if low > high => Err(AudioError::Pattern(format!(
                "square: expected low ≤ high, got low {low} and high {high}"
            ))),
            VoicePattern::Random { min, max, .. } if min > max => Err(AudioError::Pattern(format!(
                "random: expected min ≤ max, got min {min} and max {max}"
            ))),
            VoicePattern::List { voices } if voices.is_empty() => Err(AudioError::Pattern(
                "list: expected at least one value in `voices`".into(),
            )),
            _ => Ok(()),
        }
    }

    /// The most voices any step can have.
    pub fn max_voices(&self) -> u64 {
        match self {
            VoicePattern::Square { low, high } => *low.max(high),
            VoicePattern::Random { max, .. } => *max,
            VoicePattern::List { voices } => voices.iter().copied().max().unwrap_or(0),
        }
    }

    /// The voices of `steps` consecutive steps.
    pub fn steps(&self, steps: usize) -> Result<Vec<u64>, AudioError> {
        self.validate()?;
        Ok(match self {
            VoicePattern::Square { low, high } => (0..steps)
                .map(|i| if i % 2 == 0 { *low } else { *high })
                .collect(),
            VoicePattern::Random { min, max, seed } => {
                let mut rng = ChaCha8Rng::seed_from_u64(*seed);
                (0..steps).map(|_| rng.random_range(*min..=*max)).collect()
            }
            VoicePattern::List { voices } => (0..steps).map(|i| voices[i % voices.len()]).collect(),
        })
    }
}

/// The voices of every callback of a run: `voices[s]` for the `step_jobs` callbacks of step s.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct VoiceSchedule {
    /// Callbacks per step (≥ 1).
    pub step_jobs: u64,
    /// Callbacks in the run.
    pub jobs: u64,
    pub voices: Vec<u64>,
}

impl VoiceSchedule {
    /// A run of `duration_ns` (⌊duration / T⌋ callbacks) whose voices change every `step_ns`
    /// (rounded to the nearest whole number of callbacks, at least one).
    pub fn new(
        pattern: &VoicePattern,
        clock: &AudioClock,
        step_ns: u64,
        duration_ns: u64,
    ) -> Result<Self, AudioError> {
        clock.validate()?;
        let period_ns = clock.period_ns();
        let jobs = duration_ns / period_ns;
        if jobs == 0 {
            return Err(AudioError::Duration {
                duration_ns,
                period_ns,
            });
        }
        let step_jobs = ((step_ns + period_ns / 2) / period_ns).max(1);
        let steps = jobs.div_ceil(step_jobs);
        let steps =
            usize::try_from(steps).map_err(|_| AudioError::Pattern(format!("{steps} steps are too many")))?;
        Ok(VoiceSchedule {
            step_jobs,
            jobs,
            voices: pattern.steps(steps)?,
        })
    }

    /// Voices of callback `job` (0-based).
    pub fn voices_of(&self, job: u64) -> u64 {
        let s = (job / self.step_jobs) as usize;
        self.voices.get(s).or(self.voices.last()).copied().unwrap_or(0)
    }

    /// Callbacks in step `s` (the last step may be shorter).
    pub fn jobs_in_step(&self, s: usize) -> u64 {
        let start = s as u64 * self.step_jobs;
        self.jobs.saturating_sub(start).min(self.step_jobs)
    }
}

/// When the callback announces a change of voices to the adaptation engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HintTiming {
    /// At the end of the last callback before the change (the proactive API, §5.2).
    #[default]
    Ahead,
    /// At the start of the first callback after the change, before its work.
    Inline,
}

/// Builds the callback thread: `schedule.jobs` jobs of cost `cost.cost_ns(voices)`, one per
/// period T on an absolute timer, announcing the voices with [`Event::WorkUnits`] (see
/// [`HintTiming`]); cooperative (job begin/end reach the adaptation engine), judged against the
/// soft deadline b/S.
///
/// `works`, when given, is each job's own work in ns (e.g. the cost with execution-time jitter),
/// indexed by job; jobs past its end run the linear cost. The hints still announce the voices of
/// `schedule`.
pub fn callback_thread(
    name: &str,
    policy: Policy,
    clock: &AudioClock,
    cost: &VoiceCost,
    schedule: &VoiceSchedule,
    hint: HintTiming,
    works: Option<&[u64]>,
) -> ThreadSpec {
    let period = Duration(clock.period_ns());
    let linear = cost.work();
    let timer = Event::Timer {
        timer: TimerId(0),
        period,
        mode: TimerMode::Absolute,
    };
    // One job's events: an optional hint before its work, the work, an optional hint after it,
    // the timer that ends the job.
    let job = |before: Option<u64>, after: Option<u64>, work: &Work| {
        let mut ev = Vec::with_capacity(4);
        ev.extend(before.map(|units| Event::WorkUnits { units }));
        ev.push(Event::Run { work: work.clone() });
        ev.extend(after.map(|units| Event::WorkUnits { units }));
        ev.push(timer.clone());
        ev
    };
    let mut phases: Vec<Phase> = Vec::new();
    let mut push = |loops: u64, events: Vec<Event>| {
        if loops == 0 {
            return;
        }
        match phases.last_mut() {
            Some(p) if p.events == events => p.loops += loops,
            _ => phases.push(Phase::new(loops, events)),
        }
    };
    let steps = schedule.voices.len();
    let mut first_job = 0u64;
    for s in 0..steps {
        let n = schedule.jobs_in_step(s);
        if n == 0 {
            break;
        }
        let v = schedule.voices[s];
        let changed = s > 0 && schedule.voices[s - 1] != v;
        let next = (s + 1 < steps && schedule.jobs_in_step(s + 1) > 0)
            .then(|| schedule.voices[s + 1])
            .filter(|&w| w != v);
        // The first callback of the run announces its voices before any work (no earlier
        // callback can); later changes follow `hint`.
        let before = (s == 0 || (changed && hint == HintTiming::Inline)).then_some(v);
        let after = next.filter(|_| hint == HintTiming::Ahead);
        match works {
            Some(works) => {
                for k in 0..n {
                    let work = works
                        .get((first_job + k) as usize)
                        .map_or(linear.clone(), |&ns| Work::Fixed { ns: Duration(ns) });
                    push(
                        1,
                        job(before.filter(|_| k == 0), after.filter(|_| k + 1 == n), &work),
                    );
                }
            }
            None if n == 1 => push(1, job(before, after, &linear)),
            None => {
                push(1, job(before, None, &linear));
                push(n - 2, job(None, None, &linear));
                push(1, job(None, after, &linear));
            }
        }
        first_job += n;
    }
    ThreadSpec {
        name: name.to_string(),
        policy,
        affinity: None,
        start_delay: Duration::ZERO,
        phases,
        loops: Some(1),
        cooperative: true,
        job_deadline: Some(period),
        ..Default::default()
    }
}

/// A workload of the callback thread alone (the paper pins SynthMark to one big CPU, §6).
pub fn callback_workload(thread: ThreadSpec, duration_ns: u64) -> Workload {
    Workload {
        threads: vec![thread],
        duration: Some(Duration(duration_ns)),
        ignored: Vec::new(),
        ..Default::default()
    }
}

/// What happened to one burst at the sink.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BurstOutcome {
    /// Written within its soft deadline b/S.
    OnTime,
    /// Written after its soft deadline but before it was read: the fill level dropped.
    Late,
    /// Not written when the device read it: an audible glitch.
    Underrun,
}

/// The virtual audio sink of §4.2 (Fig. 3) with a buffer of k bursts (B = k·b).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct AudioSink {
    pub period_ns: u64,
    pub bursts: u32,
}

/// Counts at the sink over a run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct SinkCount {
    /// Bursts the device read (those whose read time fell within the run).
    pub reads: u64,
    /// Reads that found their burst missing (glitches).
    pub underruns: u64,
    /// Callback jobs that finished after their soft deadline b/S (among those judged).
    pub soft_misses: u64,
}

impl AudioSink {
    pub fn new(period_ns: u64, bursts: u32) -> Result<Self, AudioError> {
        if bursts == 0 {
            return Err(AudioError::BufferBursts(bursts));
        }
        if period_ns == 0 {
            return Err(AudioError::PeriodTooShort { period_ns });
        }
        Ok(AudioSink { period_ns, bursts })
    }

    /// The hard deadline B/S relative to a callback's activation.
    pub fn hard_deadline_ns(&self) -> u64 {
        self.bursts as u64 * self.period_ns
    }

    /// The soft deadline b/S relative to a callback's activation.
    pub fn soft_deadline_ns(&self) -> u64 {
        self.period_ns
    }

    /// Burst `j` of a sink started at `t0`, written at `finish`.
    pub fn outcome(&self, t0: u64, j: u64, finish: u64) -> BurstOutcome {
        let activation = t0.saturating_add(j.saturating_mul(self.period_ns));
        if finish > activation.saturating_add(self.hard_deadline_ns()) {
            BurstOutcome::Underrun
        } else if finish > activation.saturating_add(self.soft_deadline_ns()) {
            BurstOutcome::Late
        } else {
            BurstOutcome::OnTime
        }
    }

    /// Counts a run that ended at `horizon`: `finishes[j]` is when burst j was written (callback
    /// job j finished; jobs finish in order). The device reads burst j at t₀ + (j + k)·T; a read
    /// within the run whose burst is missing from `finishes` (never written) is an underrun too.
    pub fn count(&self, t0: u64, finishes: &[u64], horizon: u64) -> SinkCount {
        let mut c = SinkCount::default();
        let k = self.bursts as u64;
        // Reads of bursts 0.. happen at t0 + (j + k)·T ≤ horizon.
        let reads = if horizon < t0 {
            0
        } else {
            ((horizon - t0) / self.period_ns + 1).saturating_sub(k)
        };
        c.reads = reads;
        for j in 0..reads {
            match finishes.get(j as usize) {
                Some(&f) => match self.outcome(t0, j, f) {
                    BurstOutcome::Underrun => {
                        c.underruns += 1;
                        c.soft_misses += 1;
                    }
                    BurstOutcome::Late => c.soft_misses += 1,
                    BurstOutcome::OnTime => {}
                },
                None => {
                    c.underruns += 1;
                    c.soft_misses += 1;
                }
            }
        }
        c
    }
}

/// The ring buffer behind a real run's sink (SynthMark's VirtualAudioSink): B = k·b frames of
/// interleaved samples, started full of silence, whose device side is the clock. The device
/// reads one burst every T from t₀ on, whatever the writer does, so burst j leaves the ring at
/// t₀ + (j + k)·T and the writer may put burst j + 1 in once the device has read at t₀ + (j + 1)·T
/// ([`VirtualSink::space_at`]). A write is judged by [`AudioSink::outcome`], the model the
/// simulator counts with, so a real run and a simulated one count glitches by one rule.
#[derive(Debug, Clone)]
pub struct VirtualSink {
    model: AudioSink,
    t0: u64,
    burst_samples: usize,
    ring: Vec<f32>,
    written: u64,
    count: SinkCount,
    /// Sum of squares of everything written, so the data the writer copies is used.
    energy: f64,
}

impl VirtualSink {
    /// A sink of `model.bursts` bursts of `burst_samples` samples each whose device starts at
    /// `t0` (ns on the writer's clock). The ring is allocated here, never afterwards.
    pub fn new(model: AudioSink, burst_samples: usize, t0: u64) -> VirtualSink {
        VirtualSink {
            model,
            t0,
            burst_samples,
            ring: vec![0.0; burst_samples * model.bursts as usize],
            written: 0,
            count: SinkCount::default(),
            energy: 0.0,
        }
    }

    pub fn model(&self) -> AudioSink {
        self.model
    }

    pub fn t0(&self) -> u64 {
        self.t0
    }

    /// When burst `j` is due to be rendered: the device frees its slot at t₀ + j·T.
    pub fn space_at(&self, j: u64) -> u64 {
        self.t0.saturating_add(j.saturating_mul(self.model.period_ns))
    }

    /// Writes the next burst at time `now`: copies it into its slot (a shorter `samples` is
    /// padded with silence, a longer one cut to the burst) and judges it.
    pub fn write(&mut self, samples: &[f32], now: u64) -> BurstOutcome {
        let j = self.written;
        let slot = (j % self.model.bursts as u64) as usize * self.burst_samples;
        let dst = &mut self.ring[slot..slot + self.burst_samples];
        let n = samples.len().min(dst.len());
        dst[..n].copy_from_slice(&samples[..n]);
        dst[n..].fill(0.0);
        self.energy += dst.iter().map(|&x| (x as f64) * (x as f64)).sum::<f64>();
        self.written += 1;
        let o = self.model.outcome(self.t0, j, now);
        match o {
            BurstOutcome::Underrun => {
                self.count.underruns += 1;
                self.count.soft_misses += 1;
            }
            BurstOutcome::Late => self.count.soft_misses += 1,
            BurstOutcome::OnTime => {}
        }
        o
    }

    /// Bursts written so far.
    pub fn written(&self) -> u64 {
        self.written
    }

    /// Root-mean-square level of what was written (0 for silence).
    pub fn rms(&self) -> f64 {
        let n = self.written as f64 * self.burst_samples as f64;
        if n == 0.0 {
            0.0
        } else {
            (self.energy / n).sqrt()
        }
    }

    /// The counts of a run whose device stopped at `horizon`: the reads by then, plus one
    /// underrun for each of them whose burst was never written. Written bursts were judged when
    /// written, so `horizon` should be the read time of the last one (t₀ + (n − 1 + k)·T), as a
    /// real run's is; then this equals [`AudioSink::count`] over the same write times.
    pub fn finish(&self, horizon: u64) -> SinkCount {
        let mut c = self.count;
        let k = self.model.bursts as u64;
        let reads = if horizon < self.t0 {
            0
        } else {
            ((horizon - self.t0) / self.model.period_ns + 1).saturating_sub(k)
        };
        c.reads = reads;
        let missing = reads.saturating_sub(self.written);
        c.underruns += missing;
        c.soft_misses += missing;
        c
    }
}

/// Bursts of buffering callback job j needs to be heard without a glitch: ⌈(f − a)/T⌉ for
/// activation a = t₀ + j·T and finish f (at least 1).
pub fn bursts_needed(period_ns: u64, activation: u64, finish: u64) -> u32 {
    let r = finish.saturating_sub(activation);
    u32::try_from(r.div_ceil(period_ns.max(1)).max(1)).unwrap_or(u32::MAX)
}

/// Result of a LatencyMark search.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LatencyMark {
    /// The smallest glitch-free buffer, bursts; `None` if even `max_bursts` glitched.
    pub bursts: Option<u32>,
    /// Underruns at every buffer size tried, in the order tried.
    pub tried: Vec<(u32, u64)>,
}

/// LatencyMark: the smallest k in 1..=`max_bursts` for which `underruns(k)` is 0, assuming the
/// count does not increase with k (a bigger buffer never glitches more: the callback's schedule
/// does not depend on k, and its hard deadline k·b/S only moves later). Tries k = 1, 2, 4, … until
/// a glitch-free k, then bisects between it and the last glitching one; `underruns` may fail.
pub fn latency_mark<E>(
    max_bursts: u32,
    mut underruns: impl FnMut(u32) -> Result<u64, E>,
) -> Result<LatencyMark, E> {
    let mut tried = Vec::new();
    let mut bad = 0u32; // largest k known to glitch (0 = none)
    let mut good = None;
    let mut k = 1u32;
    while k <= max_bursts {
        let u = underruns(k)?;
        tried.push((k, u));
        if u == 0 {
            good = Some(k);
            break;
        }
        bad = k;
        if k == max_bursts {
            break;
        }
        k = k.saturating_mul(2).min(max_bursts);
    }
    let Some(mut hi) = good else {
        return Ok(LatencyMark { bursts: None, tried });
    };
    let mut lo = bad; // glitches (or 0)
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        let u = underruns(mid)?;
        tried.push((mid, u));
        if u == 0 {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    Ok(LatencyMark {
        bursts: Some(hi),
        tried,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cursor::{Cursor, Step};

    const T: u64 = 1_333_333;

    #[test]
    fn the_paper_clock() {
        let c = AudioClock::default();
        assert_eq!(c.period_ns(), T);
        assert!((c.latency_ms(2) - 2.6667).abs() < 1e-3);
        assert!((c.latency_ms(20) - 26.667).abs() < 1e-3);
        assert_eq!(AudioClock::new(0, 64), Err(AudioError::SampleRate(0)));
        assert_eq!(AudioClock::new(48_000, 0), Err(AudioError::BurstFrames(0)));
        assert!(matches!(
            AudioClock::new(48_000, 4),
            Err(AudioError::PeriodTooShort { period_ns: 83_333 })
        ));
    }

    #[test]
    fn hint_placement() {
        let clock = AudioClock::default();
        let cost = VoiceCost::calibrated(T, 210, 0).unwrap();
        let sched = VoiceSchedule {
            step_jobs: 3,
            jobs: 8,
            voices: vec![5, 185, 185],
        };
        // Walk the program and list (job, units announced before that job's run).
        let works: Vec<u64> = (0..8).map(|j| 1000 + j).collect();
        let walk_with = |hint, works: Option<&[u64]>| {
            let th = callback_thread(
                "cb",
                Policy::Fifo { priority: 10 },
                &clock,
                &cost,
                &sched,
                hint,
                works,
            );
            let mut cur = Cursor::default();
            let (mut job, mut hints, mut runs, mut fixed) = (0u64, Vec::new(), 0u64, Vec::new());
            loop {
                match cur.advance(&th) {
                    Step::Done => break,
                    Step::Event(Event::WorkUnits { units }) => hints.push((job, runs, *units)),
                    Step::Event(Event::Run { work }) => {
                        runs += 1;
                        if let Work::Fixed { ns } = work {
                            fixed.push(ns.0);
                        }
                    }
                    Step::Event(Event::Timer { .. }) => job += 1,
                    _ => {}
                }
            }
            ((job, runs, hints), fixed)
        };
        let walk = |hint| walk_with(hint, None).0;
        // Ahead: 5 before job 0 runs; 185 after job 2's run (before job 3); no repeat for step 2.
        assert_eq!(walk(HintTiming::Ahead), (8, 8, vec![(0, 0, 5), (2, 3, 185)]));
        // Inline: 185 at the start of job 3, before its run.
        assert_eq!(walk(HintTiming::Inline), (8, 8, vec![(0, 0, 5), (3, 3, 185)]));
        // Per-job works: the same jobs and hints, each job running its own work.
        for hint in [HintTiming::Ahead, HintTiming::Inline] {
            let (shape, fixed) = walk_with(hint, Some(&works));
            assert_eq!(shape, walk(hint));
            assert_eq!(fixed, works);
        }
        // One-job steps: every callback both runs and announces the next.
        let sched = VoiceSchedule {
            step_jobs: 1,
            jobs: 3,
            voices: vec![5, 185, 5],
        };
        let th = callback_thread(
            "cb",
            Policy::Fifo { priority: 10 },
            &clock,
            &cost,
            &sched,
            HintTiming::Ahead,
            None,
        );
        let events: Vec<_> = th.phases.iter().flat_map(|p| p.events.iter()).collect();
        let units: Vec<u64> = events
            .iter()
            .filter_map(|e| match e {
                Event::WorkUnits { units } => Some(*units),
                _ => None,
            })
            .collect();
        assert_eq!(units, vec![5, 185, 5]);
        assert_eq!(th.phases.iter().map(|p| p.loops).sum::<u64>(), 3);
    }

    #[test]
    fn the_virtual_sink_counts_what_it_is_given() {
        let model = AudioSink::new(T, 2).unwrap();
        let t0 = 1_000_000;
        let mut sink = VirtualSink::new(model, 128, t0);
        let burst = vec![0.5f32; 128];
        // Burst 0 on time, burst 1 late (after its soft deadline, before its read), burst 2
        // after its read time t0 + 4T: one glitch.
        let finishes = [t0 + T / 2, t0 + T + T + 10, t0 + 4 * T + 1];
        assert_eq!(sink.write(&burst, finishes[0]), BurstOutcome::OnTime);
        assert_eq!(sink.write(&burst, finishes[1]), BurstOutcome::Late);
        assert_eq!(sink.write(&burst, finishes[2]), BurstOutcome::Underrun);
        // A burst written at exactly its read time is in time.
        assert_eq!(sink.write(&burst, t0 + 5 * T), BurstOutcome::Late);
        assert_eq!(sink.space_at(4), t0 + 4 * T);
        // The device stops at the read time of burst 5; bursts 4 and 5 were never written: two
        // more glitches.
        let horizon = t0 + (5 + 2) * T;
        let c = sink.finish(horizon);
        assert_eq!(c.reads, 6);
        assert_eq!(c.underruns, 3);
        assert_eq!(c.soft_misses, 5);
        // The model the simulator counts with agrees.
        let all = [finishes[0], finishes[1], finishes[2], t0 + 5 * T];
        assert_eq!(model.count(t0, &all, horizon), c);
        assert!((sink.rms() - 0.5).abs() < 1e-9);
        // A short burst is padded with silence, a long one cut.
        let mut s2 = VirtualSink::new(model, 4, 0);
        s2.write(&[1.0, 1.0], 0);
        s2.write(&[1.0; 8], 0);
        assert!((s2.rms() - (6.0f64 / 8.0).sqrt()).abs() < 1e-9);
    }
}
