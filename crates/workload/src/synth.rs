//! A real polyphonic synthesizer: the audio callback of a SynthMark-style benchmark
//! (`adaptive-deadline-audio-android.txt` §5.3: "a real polyphonic audio synthesizer that
//! produces audio samples generated with a chain of oscillators, filters and ADSR modules, and
//! whose computational effort depends on the number of requested notes").
//!
//! [`audio`](crate::audio) models the callback's *cost*; this module *is* a callback whose cost
//! can be measured on a real CPU. [`Synth::render`] is real-time safe: every voice is
//! preallocated by [`Synth::new`]; rendering allocates nothing, takes no lock and makes no
//! syscall.
//!
//! ## A voice
//! Per sample, each voice computes:
//!
//! - **Two detuned band-limited oscillators**: a sawtooth and a square, a few cents apart. Each is
//!   the naive waveform plus the 2-sample polynomial band-limited step (polyBLEP) residual of
//!   Välimäki & Huovilainen, "Antialiasing oscillators in subtractive synthesis", IEEE Signal
//!   Processing Magazine 24(2), 2007. With phase t ∈ [0, 1) and phase increment Δ = f/fs, the
//!   residual of a unit downward step at t = 0 is
//!   `r(t) = 2x − x² − 1` with x = t/Δ for t < Δ, `r(t) = x² + 2x + 1` with x = (t − 1)/Δ for
//!   t > 1 − Δ, and 0 elsewhere; saw = 2t − 1 − r(t), square = sign(0.5 − t) + r(t) − r(t + ½).
//!   The residual needs Δ < ½: the highest note (MIDI 84, 1047 Hz, plus detune and vibrato) stays
//!   below fs/4 at the lowest accepted rate, [`MIN_SAMPLE_RATE_HZ`].
//! - **A slow LFO** (triangle, 4–6 Hz) for vibrato of ±0.1–0.3 % in frequency.
//! - **A resonant low-pass filter**: the trapezoidal-integrated (zero-delay-feedback) state
//!   variable filter of A. Simper, "Linear Trapezoidal Integrated SVF" (Cytomic, 2013),
//!   equivalent to V. Zavalishin's TPT SVF ("The Art of VA Filter Design", ch. 4). With
//!   g = tan(π·fc/fs) and k = 1/Q: a₁ = 1/(1 + g(g + k)), a₂ = g·a₁, a₃ = g·a₂;
//!   v₃ = x − s₂, v₁ = a₁·s₁ + a₂·v₃, v₂ = s₂ + a₂·s₁ + a₃·v₃, s₁ ← 2v₁ − s₁, s₂ ← 2v₂ − s₂,
//!   low-pass output v₂. Unlike Chamberlin's SVF it is stable for every cutoff below Nyquist and
//!   every Q > 0; pacer keeps fc ∈ [20 Hz, 0.45·fs] and Q ∈ [0.7, 3].
//! - **Two linear ADSR envelopes**, one on the amplitude and one on the cutoff
//!   (fc = fc₀·2^(octaves·env)). The cutoff (a `tan` and an `exp2`) is recomputed every
//!   [`CONTROL_FRAMES`] samples: control-rate modulation keeps the cost per sample constant.
//! - **A constant-power pan**: gains cos θ and sin θ with θ = (pan + 1)·π/4.
//!
//! ## Notes
//! Each voice plays its own note sequence, drawn from a ChaCha8 stream seeded with the synth's
//! seed, stream = voice index: MIDI note 36–84, detune 4–12 cents, note length 0.4–0.6 s, gate
//! open for the first 80 % of it, then the note release ([`NOTE_RELEASE_NS`]), then the next note
//! re-triggers the envelopes from their current level (no click). Envelopes therefore stay busy
//! whatever the run length.
//!
//! ## Voices and cost
//! [`Synth::set_voices`]`(n)` makes voices 0..n sound and releases the others: a released voice
//! fades out linearly in at most [`RELEASE_NS`] (5 ms) and then stops costing anything. Every
//! voice that is sounding or fading costs the same work per sample (no stage-dependent
//! expensive path), so a callback costs a fixed overhead plus a constant per active voice.
//!
//! ## Mixer and headroom
//! The stereo mix Σ voice·pan gain is scaled by 1/√max_voices: uncorrelated voices add in power,
//! so the mix's RMS stays about that of one voice whatever the voice count. Coherent peaks can
//! still exceed full scale, so every sample then goes through the cubic soft clipper
//! y = x − (4/27)·x³ on x clamped to [−1.5, 1.5] (slope 1 at 0, slope 0 and y = ±1 at ±1.5),
//! followed by a clamp to [−1, 1] against rounding: every output sample is within [−1, 1].
//!
//! ## Numerics
//! No NaN or infinity can arise: every divisor is ≥ 1 and every `tan` argument is ≤ 0.45·π.
//! No denormals either, by construction rather than by a flush-to-zero mode: the filter is fed
//! by the oscillators, whose output is of order 1 on every sample, envelopes are linear ramps
//! clamped to exactly 0, and idle voices are not computed at all.
//!
//! ## Determinism
//! Same sample rate, voices, seed, `set_voices` calls and rendered frame counts give bit-identical
//! output; how the frames are split between `render` calls does not matter either (all timing
//! is counted in samples per voice). The arithmetic is plain IEEE f32 (no fast-math); `tan` and
//! `exp2` come from the platform's libm, so two different platforms may differ in the last bits.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Lowest accepted sampling rate, Hz (keeps the highest note's phase increment below ¼).
pub const MIN_SAMPLE_RATE_HZ: u32 = 8_000;
/// Highest accepted sampling rate, Hz.
pub const MAX_SAMPLE_RATE_HZ: u32 = 384_000;
/// Largest accepted `max_voices`.
pub const MAX_VOICES_LIMIT: usize = 4096;
/// Longest fade-out of a voice released by [`Synth::set_voices`], ns.
pub const RELEASE_NS: u64 = 5_000_000;
/// Longest release of a note at the end of its gate, ns.
pub const NOTE_RELEASE_NS: u64 = 60_000_000;
/// Samples between two cutoff updates of a voice.
pub const CONTROL_FRAMES: u32 = 16;

/// Level of one voice before the mixer gain; leaves room for the filter's resonance peak (≤ Q).
const VOICE_GAIN: f32 = 0.3;
const LOWEST_NOTE: u32 = 36;
const HIGHEST_NOTE: u32 = 84;

/// Why a synthesizer was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SynthError {
    #[error("sample_rate_hz: expected {MIN_SAMPLE_RATE_HZ}..={MAX_SAMPLE_RATE_HZ} Hz, got {0}")]
    SampleRate(u32),
    #[error("max_voices: expected 1..={MAX_VOICES_LIMIT}, got {0}")]
    MaxVoices(usize),
}

/// The polyBLEP residual of a unit downward step at phase 0 (see the module docs).
#[inline(always)]
fn poly_blep(t: f32, dt: f32) -> f32 {
    if t < dt {
        let x = t / dt;
        x + x - x * x - 1.0
    } else if t > 1.0 - dt {
        let x = (t - 1.0) / dt;
        x * x + x + x + 1.0
    } else {
        0.0
    }
}

/// Band-limited sawtooth at phase `t` with increment `dt`.
#[inline(always)]
fn saw(t: f32, dt: f32) -> f32 {
    2.0 * t - 1.0 - poly_blep(t, dt)
}

/// Band-limited square at phase `t` with increment `dt`: +1 on [0, ½), −1 on [½, 1).
#[inline(always)]
fn square(t: f32, dt: f32) -> f32 {
    let naive = if t < 0.5 { 1.0 } else { -1.0 };
    let mut t2 = t + 0.5;
    if t2 >= 1.0 {
        t2 -= 1.0;
    }
    naive + poly_blep(t, dt) - poly_blep(t2, dt)
}

/// Advances a phase in [0, 1) by `dt` < 1.
#[inline(always)]
fn advance(phase: &mut f32, dt: f32) {
    *phase += dt;
    if *phase >= 1.0 {
        *phase -= 1.0;
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    Attack,
    Decay,
    Sustain,
    Release,
    Off,
}

/// A linear ADSR; steps are per sample.
#[derive(Debug, Clone, Copy)]
struct Adsr {
    stage: Stage,
    level: f32,
    attack_step: f32,
    decay_step: f32,
    sustain: f32,
    release_step: f32,
}

impl Adsr {
    fn new(fs: f32, attack_s: f32, decay_s: f32, sustain: f32) -> Adsr {
        Adsr {
            stage: Stage::Off,
            level: 0.0,
            attack_step: 1.0 / (attack_s * fs),
            decay_step: (1.0 - sustain) / (decay_s * fs),
            sustain,
            release_step: 1.0,
        }
    }

    /// Attacks from the current level, so a re-trigger does not click.
    fn gate_on(&mut self) {
        self.stage = Stage::Attack;
    }

    /// Releases with `step` per sample (a ramp from full level lasts 1/step samples).
    fn release(&mut self, step: f32) {
        if self.stage != Stage::Off {
            self.stage = Stage::Release;
            self.release_step = step;
        }
    }

    #[inline(always)]
    fn next(&mut self) -> f32 {
        match self.stage {
            Stage::Attack => {
                self.level += self.attack_step;
                if self.level >= 1.0 {
                    self.level = 1.0;
                    self.stage = Stage::Decay;
                }
            }
            Stage::Decay => {
                self.level -= self.decay_step;
                if self.level <= self.sustain {
                    self.level = self.sustain;
                    self.stage = Stage::Sustain;
                }
            }
            Stage::Release => {
                self.level -= self.release_step;
                if self.level <= 0.0 {
                    self.level = 0.0;
                    self.stage = Stage::Off;
                }
            }
            Stage::Sustain | Stage::Off => {}
        }
        self.level
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum VoiceState {
    Idle,
    Playing,
    /// Released by `set_voices`: fading out, then idle.
    Fading,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum NextEvent {
    GateOff,
    NoteOn,
}

#[derive(Debug, Clone)]
struct Voice {
    state: VoiceState,
    rng: ChaCha8Rng,
    // Oscillators: phases in [0, 1), increments in cycles per sample (before vibrato).
    phase_saw: f32,
    phase_sq: f32,
    inc_saw: f32,
    inc_sq: f32,
    lfo_phase: f32,
    lfo_inc: f32,
    vibrato: f32,
    // Filter state and coefficients.
    s1: f32,
    s2: f32,
    a1: f32,
    a2: f32,
    a3: f32,
    k: f32,
    cutoff_hz: f32,
    cutoff_octaves: f32,
    amp: Adsr,
    fenv: Adsr,
    gain_l: f32,
    gain_r: f32,
    /// Samples until `next_event`; `u32::MAX` while fading so no new note starts.
    event_in: u32,
    next_event: NextEvent,
    /// Samples of the current note after its gate closes.
    rest_len: u32,
    control_in: u32,
}

impl Voice {
    fn new(fs: f32, seed: u64, index: usize) -> Voice {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        rng.set_stream(index as u64);
        // Random starting phases: voices started together must not sum coherently.
        let phase_saw = rng.random::<f32>();
        let phase_sq = rng.random::<f32>();
        let lfo_phase = rng.random::<f32>();
        let lfo_inc = rng.random_range(4.0f32..6.0) / fs;
        let vibrato = rng.random_range(0.001f32..0.003);
        let q = rng.random_range(0.7f32..3.0);
        let pan = rng.random_range(-0.8f32..0.8);
        let theta = (pan + 1.0) * std::f32::consts::FRAC_PI_4;
        Voice {
            state: VoiceState::Idle,
            rng,
            phase_saw,
            phase_sq,
            inc_saw: 0.0,
            inc_sq: 0.0,
            lfo_phase,
            lfo_inc,
            vibrato,
            s1: 0.0,
            s2: 0.0,
            a1: 1.0,
            a2: 0.0,
            a3: 0.0,
            k: 1.0 / q,
            cutoff_hz: 1000.0,
            cutoff_octaves: 2.0,
            amp: Adsr::new(fs, 0.005, 0.15, 0.7),
            fenv: Adsr::new(fs, 0.003, 0.25, 0.25),
            gain_l: theta.cos(),
            gain_r: theta.sin(),
            event_in: 0,
            next_event: NextEvent::NoteOn,
            rest_len: 0,
            control_in: 0,
        }
    }

    /// Starts the next note of this voice's sequence.
    fn note_on(&mut self, fs: f32) {
        let note = self.rng.random_range(LOWEST_NOTE..=HIGHEST_NOTE);
        let detune_cents = self.rng.random_range(4.0f32..12.0);
        let len_s = self.rng.random_range(0.4f32..0.6);
        let brightness = self.rng.random_range(1.5f32..4.0);
        let octaves = self.rng.random_range(1.5f32..3.0);
        let f0 = 440.0 * ((note as f32 - 69.0) / 12.0).exp2();
        self.inc_saw = f0 / fs;
        self.inc_sq = f0 * (detune_cents / 1200.0).exp2() / fs;
        self.cutoff_hz = f0 * brightness;
        self.cutoff_octaves = octaves;
        self.amp.gate_on();
        self.fenv.gate_on();
        let len = (len_s * fs) as u32;
        self.event_in = len * 4 / 5;
        self.rest_len = len - self.event_in;
        self.next_event = NextEvent::GateOff;
        self.state = VoiceState::Playing;
        // The new note's cutoff applies from the next sample.
        self.control_in = 0;
    }

    fn event(&mut self, fs: f32, note_release_step: f32) {
        match self.next_event {
            NextEvent::GateOff => {
                self.amp.release(note_release_step);
                self.fenv.release(note_release_step);
                self.next_event = NextEvent::NoteOn;
                self.event_in = self.rest_len;
            }
            NextEvent::NoteOn => self.note_on(fs),
        }
    }

    fn fade(&mut self, step: f32) {
        self.amp.release(step);
        self.fenv.release(step);
        self.event_in = u32::MAX;
        self.state = VoiceState::Fading;
    }

    fn update_filter(&mut self, fs: f32) {
        let fc = (self.cutoff_hz * (self.cutoff_octaves * self.fenv.level).exp2()).clamp(20.0, 0.45 * fs);
        let g = (std::f32::consts::PI * fc / fs).tan();
        self.a1 = 1.0 / (1.0 + g * (g + self.k));
        self.a2 = g * self.a1;
        self.a3 = g * self.a2;
    }

    /// Adds this voice to the interleaved stereo `out`.
    fn render_add(&mut self, out: &mut [f32], fs: f32, note_release_step: f32) {
        for frame in out.chunks_exact_mut(2) {
            if self.event_in == 0 {
                self.event(fs, note_release_step);
            }
            self.event_in -= 1;
            if self.control_in == 0 {
                self.update_filter(fs);
                self.control_in = CONTROL_FRAMES;
            }
            self.control_in -= 1;

            // Triangle in [−1, 1].
            let lfo = 4.0 * (self.lfo_phase - 0.5).abs() - 1.0;
            advance(&mut self.lfo_phase, self.lfo_inc);
            let vib = 1.0 + self.vibrato * lfo;
            let dt_saw = self.inc_saw * vib;
            let dt_sq = self.inc_sq * vib;
            let x = 0.5 * (saw(self.phase_saw, dt_saw) + square(self.phase_sq, dt_sq));
            advance(&mut self.phase_saw, dt_saw);
            advance(&mut self.phase_sq, dt_sq);

            let v3 = x - self.s2;
            let v1 = self.a1 * self.s1 + self.a2 * v3;
            let v2 = self.s2 + self.a2 * self.s1 + self.a3 * v3;
            self.s1 = 2.0 * v1 - self.s1;
            self.s2 = 2.0 * v2 - self.s2;

            self.fenv.next();
            let y = v2 * self.amp.next() * VOICE_GAIN;
            frame[0] += y * self.gain_l;
            frame[1] += y * self.gain_r;
        }
    }
}

/// The cubic soft clipper of the module docs, then a clamp against rounding.
#[inline(always)]
fn soft_clip(x: f32) -> f32 {
    let x = x.clamp(-1.5, 1.5);
    (x - (4.0 / 27.0) * x * x * x).clamp(-1.0, 1.0)
}

/// A polyphonic synthesizer with preallocated voices.
#[derive(Debug, Clone)]
pub struct Synth {
    sample_rate_hz: u32,
    fs: f32,
    voices: Box<[Voice]>,
    sounding: usize,
    master_gain: f32,
    fade_step: f32,
    note_release_step: f32,
}

impl Synth {
    /// All voices preallocated here; nothing allocates afterwards. No voice sounds until
    /// [`Synth::set_voices`].
    pub fn new(sample_rate_hz: u32, max_voices: usize, seed: u64) -> Result<Synth, SynthError> {
        if !(MIN_SAMPLE_RATE_HZ..=MAX_SAMPLE_RATE_HZ).contains(&sample_rate_hz) {
            return Err(SynthError::SampleRate(sample_rate_hz));
        }
        if !(1..=MAX_VOICES_LIMIT).contains(&max_voices) {
            return Err(SynthError::MaxVoices(max_voices));
        }
        let fs = sample_rate_hz as f32;
        // Half a sample short, so that rounding in the f32 ramp can never need an extra sample.
        let samples = |ns: u64| (ns * u64::from(sample_rate_hz)).div_ceil(1_000_000_000).max(1) as f32 - 0.5;
        Ok(Synth {
            sample_rate_hz,
            fs,
            voices: (0..max_voices).map(|i| Voice::new(fs, seed, i)).collect(),
            sounding: 0,
            master_gain: 1.0 / (max_voices as f32).sqrt(),
            fade_step: 1.0 / samples(RELEASE_NS),
            note_release_step: 1.0 / samples(NOTE_RELEASE_NS),
        })
    }

    /// Number of sounding voices from now on (clamped to max_voices); voices beyond it are
    /// released and fade out within [`RELEASE_NS`].
    pub fn set_voices(&mut self, n: usize) {
        let n = n.min(self.voices.len());
        for (i, v) in self.voices.iter_mut().enumerate() {
            if i < n && v.state != VoiceState::Playing {
                v.note_on(self.fs);
            } else if i >= n && v.state == VoiceState::Playing {
                v.fade(self.fade_step);
            }
        }
        self.sounding = n;
    }

    /// Renders out.len()/2 frames of interleaved stereo f32 into `out` (overwrites it; an odd
    /// last sample is set to 0). Real-time safe: no allocation, no locks, no syscalls.
    pub fn render(&mut self, out: &mut [f32]) {
        out.fill(0.0);
        let n = out.len() / 2 * 2;
        let out = &mut out[..n];
        for v in self.voices.iter_mut() {
            if v.state == VoiceState::Idle {
                continue;
            }
            v.render_add(out, self.fs, self.note_release_step);
            if v.state == VoiceState::Fading && v.amp.stage == Stage::Off {
                v.state = VoiceState::Idle;
            }
        }
        for s in out.iter_mut() {
            *s = soft_clip(*s * self.master_gain);
        }
    }

    /// Voices that cost work right now: sounding ones and those still fading out.
    pub fn active_voices(&self) -> usize {
        self.voices.iter().filter(|v| v.state != VoiceState::Idle).count()
    }

    /// Voices requested by the last [`Synth::set_voices`] (after clamping).
    pub fn sounding_voices(&self) -> usize {
        self.sounding
    }

    pub fn max_voices(&self) -> usize {
        self.voices.len()
    }

    pub fn sample_rate_hz(&self) -> u32 {
        self.sample_rate_hz
    }

    /// Frames of the fade-out of a released voice ([`RELEASE_NS`] at this rate, rounded up).
    pub fn release_frames(&self) -> usize {
        (RELEASE_NS * u64::from(self.sample_rate_hz)).div_ceil(1_000_000_000) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// In-place iterative radix-2 FFT (Cooley–Tukey); `re.len()` must be a power of two.
    fn fft(re: &mut [f64], im: &mut [f64]) {
        let n = re.len();
        let mut j = 0;
        for i in 1..n {
            let mut bit = n >> 1;
            while j & bit != 0 {
                j ^= bit;
                bit >>= 1;
            }
            j |= bit;
            if i < j {
                re.swap(i, j);
                im.swap(i, j);
            }
        }
        let mut len = 2;
        while len <= n {
            let ang = -2.0 * std::f64::consts::PI / len as f64;
            for start in (0..n).step_by(len) {
                for k in 0..len / 2 {
                    let (s, c) = (ang * k as f64).sin_cos();
                    let (a, b) = (start + k, start + k + len / 2);
                    let tr = re[b] * c - im[b] * s;
                    let ti = re[b] * s + im[b] * c;
                    re[b] = re[a] - tr;
                    im[b] = im[a] - ti;
                    re[a] += tr;
                    im[a] += ti;
                }
            }
            len <<= 1;
        }
    }

    const N: usize = 4096;
    /// Cycles per N samples: odd, so N/K is not an integer and folded harmonics land between
    /// the true ones (a multiple of K mod N is never the mirror of another multiple's bin).
    const K: usize = 431;

    /// Fraction of the energy (DC excluded) outside the harmonic bins m·K: the aliases.
    fn aliasing_fraction(osc: impl Fn(f32, f32) -> f32) -> f64 {
        let dt = K as f64 / N as f64;
        let mut re: Vec<f64> = (0..N)
            .map(|i| {
                let t = (i as f64 * dt).fract();
                f64::from(osc(t as f32, dt as f32))
            })
            .collect();
        let mut im = vec![0.0; N];
        fft(&mut re, &mut im);
        let (mut harmonic, mut alias) = (0.0, 0.0);
        for b in 1..N / 2 {
            let e = re[b] * re[b] + im[b] * im[b];
            if b.is_multiple_of(K) {
                harmonic += e;
            } else {
                alias += e;
            }
        }
        alias / (alias + harmonic)
    }

    #[test]
    fn polyblep_saw_aliases_far_less_than_naive() {
        // f0 = 431/4096·48 kHz ≈ 5.05 kHz: only 4 harmonics below Nyquist, strong aliasing.
        let naive = aliasing_fraction(|t, _| 2.0 * t - 1.0);
        let blep = aliasing_fraction(saw);
        eprintln!("saw aliasing: naive {naive:.3e}, polyBLEP {blep:.3e}");
        assert!(
            naive > 1e-2,
            "the naive saw must alias for the test to mean anything: {naive}"
        );
        assert!(blep < naive / 10.0, "polyBLEP {blep} vs naive {naive}");
    }

    #[test]
    fn polyblep_square_aliases_far_less_than_naive() {
        let naive = aliasing_fraction(|t, _| if t < 0.5 { 1.0 } else { -1.0 });
        let blep = aliasing_fraction(square);
        eprintln!("square aliasing: naive {naive:.3e}, polyBLEP {blep:.3e}");
        assert!(naive > 1e-2);
        assert!(blep < naive / 10.0, "polyBLEP {blep} vs naive {naive}");
    }

    #[test]
    fn residual_is_continuous_at_the_step() {
        // Saw just before the wrap and just after it meet (the step is smoothed, not kept).
        let dt = 0.01;
        let before = saw(1.0 - 1e-6, dt);
        let after = saw(1e-6, dt);
        assert!((before - after).abs() < 1e-3, "{before} vs {after}");
    }

    #[test]
    fn filter_and_envelopes_stay_normal_at_extremes() {
        // The lowest rate, the highest voices' notes: every state value must be finite and
        // either 0 or a normal float.
        for rate in [MIN_SAMPLE_RATE_HZ, 48_000, MAX_SAMPLE_RATE_HZ] {
            let mut s = Synth::new(rate, 8, 3).unwrap();
            s.set_voices(8);
            let mut buf = vec![0.0; 2 * 256];
            for i in 0..(rate as usize * 2 / 256) {
                if i == rate as usize / 256 {
                    s.set_voices(2);
                }
                s.render(&mut buf);
                for v in s.voices.iter() {
                    for x in [v.s1, v.s2, v.a1, v.a2, v.a3, v.amp.level, v.fenv.level] {
                        assert!(x.is_finite() && (x == 0.0 || x.is_normal()), "{x} at {rate} Hz");
                    }
                }
            }
        }
    }

    #[test]
    fn soft_clip_is_bounded_and_transparent_near_zero() {
        for x in [-1e9f32, -2.0, -1.5, -1.0, 0.0, 1.0, 1.5, 2.0, 1e9, f32::INFINITY] {
            let y = soft_clip(x);
            assert!((-1.0..=1.0).contains(&y), "{x} → {y}");
        }
        assert_eq!(soft_clip(1.5), 1.0);
        assert!((soft_clip(0.1) - 0.1).abs() < 2e-4);
    }
}
