//! Period analyser of LFS++ (Cucinotta, Checconi, Abeni, Palopoli, "Self-tuning schedulers for
//! legacy real-time applications", `lfspp-legacy-multimedia.txt` §5.1–5.2): infers the activation
//! period of an unmodified periodic task from the timestamps of its wake-up events (WKE, §7.4).
//!
//! # The paper's method
//! A wake-up at `t_i` is modelled as a Dirac `δ(t − t_i)`; a task with period `P` whose jobs each
//! produce `K` events at fixed phases is a sum of `K` Dirac combs, whose spectrum (eq. 2, finite
//! window `H`) has its main peaks at the multiples of `f_0 = 1/P`. The analyser samples, on
//! `[f_min, f_max]` with step `δf`, the amplitude spectrum (eq. 4)
//!
//! ```text
//! |S(f)| = | Σ_i e^{−j2π f t_i} |
//! ```
//!
//! and applies the peak heuristic of §5.2.1:
//! 1. sample `|S(f)|` on the grid ([`spectrum`]);
//! 2. take the local maxima of the sampled spectrum as first peaks;
//! 3. discard the peaks below `α · mean(|S|)`;
//! 4. if none is left, the task is **not periodic**;
//! 5. for each candidate `f_i`, sum `|S(f_j)|` over the grid samples within `±ε` of the multiples
//!    `h·f_i`, `h = 1..k_max`, `h·f_i ≤ f_max` (the harmonic sum `Σ_i`);
//! 6. the candidate with the highest `Σ_i` is the task's rate.
//!
//! # What this module adds
//! The additions were each driven by a failure of steps 1–6 measured on synthetic traces (see
//! `tests/period.rs`); [`AnalysisOptions::paper`] turns off those that are switchable, and the
//! others only act on what the switchable ones produce.
//! - **Short-window guard.** Candidates below `min_cycles / H` are ignored: a frequency with
//!   fewer cycles in the window than that is indistinguishable from the side lobes of the
//!   always-present peak at 0 Hz (the paper's reason for `f_min > 0`, made window-aware).
//! - **Ties.** Step 6 compares harmonic sums to 1 part in 10⁶ of the largest and gives ties to
//!   the lower frequency. On a clean comb every harmonic `m·f_0` with `m·k_max·f_0 ≤ f_max`
//!   collects the same `k_max` lines, so their sums tie, and the f32 spectrum's rounding used to
//!   pick among them (a clean 5 Hz comb on 10 s was step-6 won by 45 Hz).
//! - **Octave check.** Step 6 picks a harmonic `m·f_0` when spurious events or burst phases
//!   make it outscore `f_0` (seen in up to 7 of 30 traces of a 40 ms period with 30 % spurious
//!   events), and can pick a sub-harmonic: when `f_max`, not `k_max`, bounds the sum, a noise
//!   peak at `f_0/2` collects every harmonic of `f_0` *plus* noise. So among the candidates
//!   harmonically related to the winner (`m ≥ 2`), the lowest one that is not a sub-harmonic of
//!   another (its harmonics not shared with the other being noise, see
//!   [`OFF_HARMONIC_SIGNIFICANCE`], or weak, see [`SUBHARMONIC_RATIO`]) is chosen. This turns
//!   the paper's informal rule "the distance between two main peaks is the frequency of the
//!   first main peak" into a test. Candidates within the `m = 1` tolerance `ε + δf` of the
//!   winner are the same line and take no part: they used to, and on windows longer than
//!   2.4 s, where a line's side lobes (`±1.43/H`) come that close, the lowest side lobe won —
//!   the cause of the issue-12 reports (exact 12.5 ms timestamps, 300 events: 12.526 ms with
//!   confidence 0.00; 20 ms → 20.23 ms).
//! - **Long windows** ([`AnalysisOptions::window_aware`]). δf and ε are in Hz while a line's
//!   width is `1/H`, so past a few seconds the grid and the tolerances meet the lines' fine
//!   structure. Two remedies: (1) a local maximum within `max(ε + δf, 1.5/H)` of a higher sample
//!   is a side lobe, not a candidate (otherwise a side lobe of `f_0` lies within the tolerance
//!   `ε/m + δf` of being `m·f_0`'s sub-harmonic from 4.1 s on, and the octave check prefers it);
//!   (2) beyond [`PeriodConfig::fine_grid_from_ns`] (`1/(2δf)`, 5 s) the main lobe `±1/H` no
//!   longer holds two grid samples and a line between samples is missed (123.45 Hz on 20 s
//!   came out as 2P), so the spectrum is sampled `P = ⌈2Hδf⌉` times more finely and each grid
//!   sample takes the largest fine sample of its `δf` cell ([`MAX_POOL`] bounds `P`). The
//!   heuristic then sees lines one cell wide at full height, whatever H; the refinement starts
//!   from the fine peak. Measured on 88 traces of 1 500–15 000 events (5–30 s, 50–500 Hz,
//!   clean, 1 % jitter, 15 % dropped, 15 % spurious): no failure, against 12 without it (side
//!   lobes at 5 s, a missed line at 20–30 s) and 24 for `--paper`.
//! - **Band edges** ([`AnalysisOptions::band_edges`]). Steps 1–2 never take the band's end
//!   samples as peaks, so a 5 Hz or 500 Hz rate (the default band's ends) was reported as a
//!   harmonic or a side lobe. The spectrum is also computed `g = max(δf, ε)` outside the band
//!   (the padded grid, no extra pass) and an end sample is a peak when the spectrum falls from
//!   it inwards and at `g` outwards: a line whose maximum lies less than about `g/2` beyond the
//!   band counts at the end. Measured on the 600 traces of 0.2–30 s × 5–500 Hz with 25–1 500
//!   periods (clean and impaired as above): 71 failures without it, none with it.
//! - **Refinement.** The grid limits precision to `±δf/2` (0.5 % of a 10 Hz rate with
//!   `δf = 0.1 Hz`). The chosen peak is refined by parabolic interpolation (on the fine samples
//!   on long windows) and then by safeguarded Newton iterations on the Hann-tapered periodogram
//!   `Σ_h |Σ_i w_i e^{−j2πhf t_i}|²` of the whole window, first on the fundamental within one
//!   sample step of the start (inside the main lobe `±2/H`), then adding harmonics (each
//!   multiplies the phase slope, hence the precision, by `h`). The taper removes the leakage of
//!   the 0 Hz peak and of the negative-frequency image, which would otherwise bias the maximum
//!   by up to a few tenths of a percent on 1 s windows. Result on 1 s windows: 0.005–0.05 %
//!   mean error with 0.2 ms of jitter, 0.2 % with 2 ms of jitter on a 100 ms period (10 jobs):
//!   limited by the jitter. On 0.2–30 s windows with at least 25 periods and 1 % jitter: below
//!   0.06 %.
//! - **Significance.** Step 3's `α·mean` threshold cannot both keep sparse trains (a 10-event
//!   comb has peaks only ~4× its mean) and reject noise (a Rayleigh maximum over ~500
//!   independent frequencies reaches 3× the mean in a third of 1 s windows). The chosen
//!   harmonic series must therefore also be improbable for aperiodic events: its power, with
//!   the mean rate's 0 Hz leakage removed, over the local noise floor, tested against a Gamma
//!   tail corrected for the search over the band (`significance` below); p-value at most
//!   [`AnalysisOptions::max_false_alarm`]. Measured on 1 s windows: no false "periodic" in
//!   2400 windows of Poisson (10–3000 events/s) and bursty random arrivals (jobs of 1–3
//!   wake-ups), and none from 2 s up; the p-values are conservative (P(p < 0.1) ≈ 1 %).
//!   A step-6 winner that fails is passed over for the next candidate by harmonic sum (a strong
//!   single peak at 285 Hz loses step 6 to low-frequency noise, whose ten harmonic windows
//!   collect ten times the noise floor, when spurious events outnumber the real ones 2:1).
//! - **Confidence** in `[0, 1]`: `sqrt(coherence · dominance) · (1 − ambiguity)`.
//!   `coherence` is the normalised tapered peak height `|Σ w_i e^{−j2πf*t_i}| / Σ w_i` (1 for a
//!   perfect train of one event per period; lowered by jitter, spurious events and spread-out
//!   bursts). `dominance` is `1 − Σ_runner-up / Σ_chosen`, the runner-up being the best
//!   candidate that is neither a harmonic of the chosen rate (any in the band: a 5 Hz comb's
//!   60 Hz line supports it; counting only the first `k_max` put the 12th harmonic up as a
//!   rival and gave a clean 5 Hz comb 0.25) nor a sub-harmonic of it. `ambiguity` is how well
//!   the events also line up on every `m`-th tooth of the chosen comb (`Taper::ambiguity`,
//!   `m ≤ `[`MAX_AMBIGUITY_DIVISOR`]), i.e. how plausible it is that the chosen rate is a
//!   harmonic of the real one: a comb at `2f_0` is as coherent as one at `f_0`, and had
//!   confidence 1.00. Measured over 1 911 synthetic traces with every impairment on 0.3–5 s
//!   windows, the wrong answers with a confidence of at least 0.5 went from 27 of 52 to 19 of
//!   52 with the ambiguity factor, the right answers below 0.5 from 15 to 11 of 1 859. The
//!   figure says whether the period is the right one, not how precise it is
//!   ([`DEFAULT_MIN_CONFIDENCE`] is chosen from it).
//!
//! Known limits (measured, see `tests/period.rs`):
//! - with fewer than ~10 jobs in the window *and* every impairment at once (bursts, 20 %
//!   spurious, 10 % missing, jitter), the fundamental's grid peak can sit 2δf off, its step-5
//!   windows `h·f ± ε` then miss the true harmonics, and a harmonic wins (1 trace in 40 for a
//!   100 ms period on a 1 s window);
//! - on very short windows holding only ~5–8 random bursts of wake-ups, random times fit some
//!   comb too easily for the asymptotic test (15 % of 0.3 s windows of 15 random 3-wake-up
//!   jobs/s were called periodic, 2 % at 0.5 s, none from 1 s);
//! - a window holding no more than `min_cycles` periods cannot show the period; what it
//!   reports instead (a spacing of the wake-ups within a job) can have a high confidence (a
//!   100 ms task with bursts or spurious wake-ups on 0.3–0.5 s windows: 5–14 ms, 18 of the 52
//!   wrong answers of the synthetic traces, with confidences of 0.5–0.98);
//! - the confidence does not measure precision: 7 jittered events (σ = 2 % of P) gave a period
//!   1.5 % off with confidence 1.00;
//! - a real structure at twice the period that is strong enough (an extra mid-period wake-up
//!   every other job for over a third of the jobs) is reported as 2P ([`SUBHARMONIC_RATIO`]).
//!
//! Longer windows remove the first three.
//!
//! # Cost (eq. 3 and 5) and the fast path
//! Eq. 3 counts `O = N·(f_max − f_min)/δf` complex exponentials (≈ 1.5 M for 300 events and the
//! default grid). Calling `sin`/`cos` for each costs ~100× the fast path (17 ms for 75 events on
//! the benchmark machine, against 0.17 ms); instead each event gets its phasor
//! `z_i = e^{−j2π f_min t_i}` and rotation `r_i = e^{−j2π δf t_i}` once, and the grid is walked by
//! complex multiplication `z_i ← z_i·r_i`. The walk runs in `f32` lanes of 8 events (AVX when the
//! CPU has it, the same operations in portable code otherwise, bit-for-bit identical results so
//! the analyser stays deterministic across machines), re-seeded every [`RESEED`] frequencies
//! from `f64` master phasors so rounding cannot accumulate. Each pass over the events computes
//! 4 frequencies. The heuristic then scans `E` samples (eq. 5); the refinement
//! moves each event's phasor by a short Taylor series per Newton step instead of a `sin_cos`.
//! Beyond [`PeriodConfig::fine_grid_from_ns`] the fine grid multiplies the spectrum's cost by
//! `P = ⌈2Hδf⌉`: the analysis grows as `H²` (a 30 s window of 9 000 events: 34 ms, against
//! 6.9 ms for the grid alone, which misses lines). Up to 5 s the additions cost 1–6 % (1 s
//! windows of 25–1 140 events: 86–872 µs) and 26 % of an accumulator's analysis (91 µs).
//! Measured by `cargo bench -p pacer-adapt --bench period` (`benches/period.rs`).
//!
//! [`SpectrumAccumulator`] is the iterative form the paper mentions ("this computation can be
//! made iteratively"): it keeps the complex spectrum and adds (or, for a sliding window, removes)
//! one event's contribution in `O((f_max − f_min)/δf)`, so the analysis itself is `O(F + N)`.

use std::collections::VecDeque;
use std::f64::consts::{PI, TAU};

use serde::Serialize;

/// Largest spectrum grid accepted (samples): ~80 MB of working memory, minutes of CPU. Anything
/// larger is a configuration mistake (e.g. `δf` in the wrong unit).
pub const MAX_GRID: usize = 10_000_000;

/// Frequencies walked by the recurrence between two exact re-seedings of the `f32` phasors.
/// Each `f32` rotation adds ~6e-8 of phase and magnitude error, so after 128 steps the error is
/// ~1e-5 of an event's contribution: far below the noise floor `√N` of any real trace.
pub const RESEED: usize = 128;
const _: () = assert!(RESEED.is_power_of_two());

/// Largest pooling factor of the fine grid on long windows ([`AnalysisOptions::window_aware`]):
/// enough for windows up to `64/(2δf)` (320 s with the defaults). Longer windows are sampled at
/// that step, which can step over their lines as the plain grid does beyond `1/(2δf)`; the
/// cost of an analysis grows with `P` (`P·N` complex rotations per grid sample).
pub const MAX_POOL: usize = 64;

/// Octave check, for a candidate `f` whose only harmonics in the band are `f` and `m·f`: `f` is
/// taken for a sub-harmonic of `m·f` when its peak is below this fraction of the peak at `m·f`
/// (with more harmonics in the band the check looks at the other harmonics instead).
pub const SUPPORT_RATIO: f64 = 0.5;

/// Newton iterations of the refinement (it converges in 3–5 from the interpolated grid peak).
const MAX_REFINE_ITERATIONS: usize = 30;

/// Octave check: the harmonics of a candidate `f` not explained by `m·f` count as noise (so `f`
/// as a sub-harmonic of `m·f`) when their joint Gamma tail against the noise floor exceeds this.
pub const OFF_HARMONIC_SIGNIFICANCE: f64 = 1e-3;

/// Octave check: a candidate `f` whose harmonics not shared with `m·f` average less than this
/// fraction of the shared ones is a sub-harmonic of `m·f`, however significant they are. Bursty
/// jobs bound it from above: their burst phases modulate the harmonics of the real rate, and
/// jobs of 3 wake-ups at 0, 0.15 and 0.3 of the period have ratios of 0.35–0.5 for some `m`
/// (0.35 already misses a third of such traces). So a 2P structure at least this strong — an
/// extra mid-period wake-up every other job in over a third of the jobs — is reported as 2P.
pub const SUBHARMONIC_RATIO: f64 = 0.25;

/// Harmonics the refinement and the significance test look at, at most (`k_max` caps it too).
const MAX_HARMONICS: usize = 64;

/// Significance test: independent events per harmonic admitted in the statistic (see
/// `significance`). Measured on 1 s windows: 2 gives no false "periodic" in 2400 windows of
/// Poisson and bursty random arrivals (10–300 jobs/s) and misses none of 320 periodic traces
/// (P = 33.3 and 100 ms, every impairment); 3 misses 10-job trains with 2 ms jitter, 1.5 lets
/// random trains through.
const EVENTS_PER_HARMONIC: f64 = 2.0;

/// Confidence: sub-multiples `f/m`, `m = 2..=` this, checked for event alignment that would make
/// the chosen rate a harmonic (octave errors with one wake-up per job are `m = 2`; the
/// intra-job spacing of bursts on windows of a few periods gives `m` up to 20).
pub const MAX_AMBIGUITY_DIVISOR: usize = 32;

/// Candidates tried, in decreasing harmonic sum, until one has a significant harmonic series.
const MAX_SIGNIFICANCE_TRIES: usize = 8;

/// Confidence below which a controller does not adopt a period (`LegacyConfig::default()`,
/// `pacer exec --min-confidence`). Chosen from the confidence of right (within 1 %) and wrong
/// answers, measured with the analyser of this module:
/// - `pacer bench period` trials (`pacer_sim::experiments`, 60 per point, windows 0.6, 1, 2 s,
///   background load 0–85 %): 0.5 rejects 6 of 1 058 right answers (0.6 %) and 105 of 201 wrong
///   ones (52 %); 0.6 rejects 1.5 % and 70 %, 0.7 2.6 % and 85 %;
/// - the synthetic traces of `tests/period.rs` (every impairment, windows 0.3–5 s): 0.5 rejects
///   11 of 1 859 right answers (0.6 %) and 33 of 52 wrong ones (63 %); 0.6 rejects 1.7 % and
///   88 %, 0.7 5.6 % and 92 %;
/// - the clean, jittered, 15 %-dropped and 15 %-spurious sweep of 0.2–30 s × 5–500 Hz: the
///   lowest confidence of a right answer is 0.66.
///
/// A rejected right answer costs a retry on the next window (a thread without a period is
/// analysed at every tick), but the right answers that score low are those of threads whose
/// wake-ups are bursty, spurious and lossy at once (101 of the 105 synthetic ones below 0.7,
/// on every window length), which a higher
/// threshold would keep unreserved window after window; an adopted wrong period costs a wrong
/// reservation until the next check. At 0.5 fewer than 1 % of right answers are refused and
/// over half of the wrong ones.
pub const DEFAULT_MIN_CONFIDENCE: f64 = 0.5;

/// How many candidates a [`PeriodEstimate::Periodic`] reports.
pub const MAX_CANDIDATES: usize = 5;

/// Parameters of the spectrum and of the peak heuristic (LFS++ §5.2).
///
/// The defaults target multimedia and interactive periods from 2 ms (500 Hz: 96-sample audio
/// buffers at 48 kHz) to 200 ms (5 Hz: slow UI timers, 10 fps video has 100 ms), analysed on
/// windows of 0.5–2 s as in the paper's experiments (§7.4 uses 0.2–2 s, 1 s in the controller)
/// or on recorded traces of up to tens of seconds (see [`AnalysisOptions::window_aware`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PeriodConfig {
    /// Lowest frequency of the spectrum, Hz (default 5 Hz: periods up to 200 ms; a 1 s window
    /// then still holds 5 periods, enough to separate the peak from the 0 Hz lobe).
    pub f_min_hz: f64,
    /// Highest frequency, Hz (default 500 Hz: periods down to 2 ms, and room for `k_max = 10`
    /// harmonics of any rate up to 50 Hz — 20 ms video/audio periods get their full harmonic sum).
    pub f_max_hz: f64,
    /// Grid step δf, Hz (default 0.1 Hz). The main lobe of a peak is `±1/H` wide; 0.1 Hz puts 10
    /// samples in it on a 1 s window and still 2 on a 5 s window, so no peak falls between
    /// samples (longer windows are sampled more finely, [`Self::fine_grid_from_ns`]); the
    /// refinement, not the grid, sets the final precision. Cost is ∝ 1/δf (eq. 3).
    pub df_hz: f64,
    /// Step 3 threshold α: peaks below `α·mean(|S|)` are discarded (default 3). The ceiling is
    /// set by sparse trains: a comb of only M events (a 100 ms period seen for 1 s) has peaks of
    /// height M over a mean of about `0.4·ln M + 1.5` (its own side lobes), i.e. 4× the mean
    /// for M = 10 — α = 4 would call it aperiodic. The floor is set by noise: for aperiodic
    /// (Poisson) events `|S(f)|` is Rayleigh-distributed with mean `√(πN)/2` and exceeds `α·mean`
    /// with probability `exp(−πα²/4)` (8.5e-4 for α = 3), so on ~`(f_max − f_min)·H` ≈ 500
    /// independent frequencies a noise peak survives in a third of 1 s windows. The final word
    /// on noise is therefore the significance test ([`AnalysisOptions::max_false_alarm`]); α only
    /// keeps the candidate list short.
    pub alpha: f64,
    /// Step 5: at most this many multiples in the harmonic sum (default 10, as in the paper).
    pub k_max: usize,
    /// Step 5 tolerance ε, Hz (default 0.5 Hz): at least `k_max·δf/2`, the grid error of the
    /// fundamental multiplied by the highest harmonic, and half the main lobe of a 1 s window.
    /// A tolerance below `δf/2` still takes the nearest sample.
    pub eps_hz: f64,
}

impl Default for PeriodConfig {
    fn default() -> Self {
        PeriodConfig {
            f_min_hz: 5.0,
            f_max_hz: 500.0,
            df_hz: 0.1,
            alpha: 3.0,
            k_max: 10,
            eps_hz: 0.5,
        }
    }
}

/// The parts of an analysis that go beyond the paper's six parameters (kept out of
/// [`PeriodConfig`] so that it stays the paper's parameter set).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AnalysisOptions {
    /// Fewer events than this → not periodic (default 6: two events say nothing about a
    /// period, and a 5 Hz rate gives 5 events per second).
    pub min_events: usize,
    /// Candidates must complete at least this many cycles in the window (default 3): below, a
    /// peak cannot be told from the side lobes of the 0 Hz peak, whose first lobes reach 13–21 %
    /// of N.
    pub min_cycles: f64,
    /// Apply the octave check (see the module documentation).
    pub octave_check: bool,
    /// Refine the winning grid peak (without it the result is the grid frequency, precise to
    /// `±δf/2`).
    pub refine: bool,
    /// Largest accepted probability that an aperiodic trace would produce a harmonic series as
    /// strong as the chosen one anywhere in the band (default 1e-3; 1 disables the test). See
    /// the module documentation, "Significance".
    pub max_false_alarm: f64,
    /// Keep the heuristic's Hz-valued resolution (δf, ε) valid on windows of any length (the
    /// module documentation, "Long windows"): a local maximum within `ε + δf` of a higher sample
    /// is part of that peak (a side lobe), not a candidate; and on windows longer than
    /// [`PeriodConfig::fine_grid_from_ns`] the spectrum is sampled finely enough for the window
    /// and each grid sample takes the maximum of its `δf` cell.
    pub window_aware: bool,
    /// Let a line at `f_min` or `f_max` itself be a peak, by comparing the band's end samples with
    /// `|S|` one step `δf` outside the band (without it the ends are never local maxima).
    pub band_edges: bool,
}

impl Default for AnalysisOptions {
    fn default() -> Self {
        AnalysisOptions {
            min_events: 6,
            min_cycles: 3.0,
            octave_check: true,
            refine: true,
            max_false_alarm: 1e-3,
            window_aware: true,
            band_edges: true,
        }
    }
}

impl AnalysisOptions {
    /// The paper's heuristic alone: steps 1–6 of §5.2.1 on the spectrum of the whole window, no
    /// octave check, no refinement, no significance test, no band-edge peaks (the event-count
    /// and window guards stay).
    pub fn paper() -> Self {
        AnalysisOptions {
            octave_check: false,
            refine: false,
            max_false_alarm: 1.0,
            window_aware: false,
            band_edges: false,
            ..AnalysisOptions::default()
        }
    }

    /// Checks the options.
    pub fn validate(&self) -> Result<(), PeriodConfigError> {
        if !(self.min_cycles.is_finite() && self.min_cycles >= 0.0) {
            return Err(PeriodConfigError::MinCycles(self.min_cycles));
        }
        if !(self.max_false_alarm > 0.0 && self.max_false_alarm <= 1.0) {
            return Err(PeriodConfigError::FalseAlarm(self.max_false_alarm));
        }
        Ok(())
    }
}

/// Why a [`PeriodConfig`] is rejected.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PeriodConfigError {
    #[error("f_min = {0} Hz: expected a finite frequency > 0")]
    FMin(f64),
    #[error("f_max = {f_max} Hz: expected a finite frequency above f_min = {f_min} Hz")]
    Band { f_min: f64, f_max: f64 },
    #[error("δf = {0} Hz: expected a finite step > 0")]
    Step(f64),
    #[error(
        "the grid (f_max − f_min)/δf has {samples:.0} samples, more than the {max} allowed: is δf in Hz?"
    )]
    TooManySamples { samples: f64, max: usize },
    #[error("α = {0}: expected a finite value ≥ 0")]
    Alpha(f64),
    #[error("k_max = 0: expected at least 1 harmonic")]
    KMax,
    #[error(
        "k_max = {k_max}: expected 1 to {max} (⌈f_max/f_min⌉: no frequency in the band has more \
         multiples below f_max)"
    )]
    KMaxRange { k_max: usize, max: usize },
    #[error("ε = {0} Hz: expected a finite tolerance ≥ 0")]
    Eps(f64),
    #[error("min_cycles = {0}: expected a finite value ≥ 0")]
    MinCycles(f64),
    #[error("max_false_alarm = {0}: expected a probability in (0, 1]")]
    FalseAlarm(f64),
}

impl PeriodConfig {
    /// Checks the parameters; every analysis entry point calls it.
    pub fn validate(&self) -> Result<(), PeriodConfigError> {
        if !(self.f_min_hz.is_finite() && self.f_min_hz > 0.0) {
            return Err(PeriodConfigError::FMin(self.f_min_hz));
        }
        if !(self.f_max_hz.is_finite() && self.f_max_hz > self.f_min_hz) {
            return Err(PeriodConfigError::Band {
                f_min: self.f_min_hz,
                f_max: self.f_max_hz,
            });
        }
        if !(self.df_hz.is_finite() && self.df_hz > 0.0) {
            return Err(PeriodConfigError::Step(self.df_hz));
        }
        let samples = (self.f_max_hz - self.f_min_hz) / self.df_hz;
        if samples >= MAX_GRID as f64 {
            return Err(PeriodConfigError::TooManySamples {
                samples,
                max: MAX_GRID,
            });
        }
        if !(self.alpha.is_finite() && self.alpha >= 0.0) {
            return Err(PeriodConfigError::Alpha(self.alpha));
        }
        if self.k_max == 0 {
            return Err(PeriodConfigError::KMax);
        }
        // No candidate ≥ f_min has more multiples in the band; a larger k_max only makes the
        // harmonic-relation checks loop for nothing (k_max = 10⁹ ran for ever).
        let most = (self.f_max_hz / self.f_min_hz).ceil().max(1.0) as usize;
        if self.k_max > most {
            return Err(PeriodConfigError::KMaxRange {
                k_max: self.k_max,
                max: most,
            });
        }
        if !(self.eps_hz.is_finite() && self.eps_hz >= 0.0) {
            return Err(PeriodConfigError::Eps(self.eps_hz));
        }
        Ok(())
    }

    /// Longest window, ns, whose spectrum the grid samples well enough: `1/(2δf)` (5 s with the
    /// defaults), where the main lobe `±1/H` of a line still holds two samples. Longer windows
    /// have narrower lines, which the grid can step over (see [`AnalysisOptions::window_aware`]).
    /// Call after [`validate`](Self::validate).
    pub fn fine_grid_from_ns(&self) -> u64 {
        (0.5e9 / self.df_hz).min(u64::MAX as f64) as u64
    }

    /// Samples between the band's end samples and the band-edge guards
    /// ([`AnalysisOptions::band_edges`]): `max(1, round(ε/δf))`.
    fn guard_cells(&self) -> usize {
        ((self.eps_hz / self.df_hz).round() as usize).max(1)
    }

    /// The grid extended by [`guard_cells`](Self::guard_cells) samples on both sides: the
    /// spectrum is computed on it so that the guards come with the band at no extra cost.
    fn padded_grid(&self) -> Grid {
        let (g, band) = (self.guard_cells(), self.grid());
        Grid {
            f_start: band.f_start - g as f64 * band.df,
            df: band.df,
            len: band.len + 2 * g,
        }
    }

    /// The sampling grid of this configuration (call after [`validate`](Self::validate)).
    fn grid(&self) -> Grid {
        // The tiny slack keeps f_max itself on the grid despite rounding of (f_max − f_min)/δf.
        let steps = ((self.f_max_hz - self.f_min_hz) / self.df_hz + 1e-9).floor() as usize;
        Grid {
            f_start: self.f_min_hz,
            df: self.df_hz,
            len: steps + 1,
        }
    }
}

/// One candidate frequency of the heuristic (a grid peak that survived step 3).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Candidate {
    /// Grid frequency of the peak, Hz (unrefined).
    pub freq_hz: f64,
    /// `1/freq_hz`, ns.
    pub period_ns: u64,
    /// `|S(freq_hz)|` (eq. 4); on a window sampled finely (`AnalysisOptions::window_aware`),
    /// the largest `|S|` of the grid sample's `δf` cell.
    pub amplitude: f64,
    /// The harmonic sum `Σ_i` of step 5.
    pub harmonic_sum: f64,
}

/// Result of a period analysis.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "result", rename_all = "snake_case")]
pub enum PeriodEstimate {
    /// The trace is periodic. `freq_hz` is the refined rate (the grid value when refinement is
    /// off), `period_ns = round(1e9/freq_hz)`. `candidates` lists up to [`MAX_CANDIDATES`] grid
    /// candidates, the chosen one first, then by decreasing harmonic sum.
    Periodic {
        period_ns: u64,
        freq_hz: f64,
        confidence: f64,
        candidates: Vec<Candidate>,
    },
    /// No period could be identified; `reason` says why in words.
    NotPeriodic { reason: String },
}

impl PeriodEstimate {
    /// The period, if periodic.
    pub fn period_ns(&self) -> Option<u64> {
        match self {
            PeriodEstimate::Periodic { period_ns, .. } => Some(*period_ns),
            PeriodEstimate::NotPeriodic { .. } => None,
        }
    }

    /// The frequency, if periodic.
    pub fn freq_hz(&self) -> Option<f64> {
        match self {
            PeriodEstimate::Periodic { freq_hz, .. } => Some(*freq_hz),
            PeriodEstimate::NotPeriodic { .. } => None,
        }
    }

    pub fn is_periodic(&self) -> bool {
        matches!(self, PeriodEstimate::Periodic { .. })
    }
}

/// An analysis with the intermediate figures a report or a controller log wants.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Analysis {
    pub estimate: PeriodEstimate,
    /// Events analysed.
    pub events: usize,
    /// Time from the first to the last event, ns (the observation window H).
    pub window_ns: u64,
    /// Mean of `|S|` over the grid (step 3; the cells' maxima on a finely sampled window), 0 when
    /// the spectrum was not computed.
    pub mean_amplitude: f64,
    /// Local maxima found (step 2).
    pub peaks: usize,
    /// Candidates left after the threshold (step 3).
    pub candidates: usize,
    /// The grid frequency chosen (after the octave check, before refinement), Hz; for a trace
    /// found not significant, the first candidate tested.
    pub grid_freq_hz: Option<f64>,
    /// The candidate with the highest harmonic sum (step 6), Hz, before the octave check.
    pub heuristic_freq_hz: Option<f64>,
    /// Probability that an aperiodic trace shows a harmonic series as strong as the chosen one
    /// (corrected for the frequencies searched); `None` when no candidate got that far.
    pub p_value: Option<f64>,
}

/// The sampled amplitude spectrum `|S(f_k)|`, `f_k = f_start_hz + k·df_hz`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Spectrum {
    pub f_start_hz: f64,
    pub df_hz: f64,
    pub amplitude: Vec<f64>,
}

impl Spectrum {
    /// Frequency of sample `k`, Hz.
    pub fn freq(&self, k: usize) -> f64 {
        self.f_start_hz + k as f64 * self.df_hz
    }

    pub fn len(&self) -> usize {
        self.amplitude.len()
    }

    pub fn is_empty(&self) -> bool {
        self.amplitude.is_empty()
    }

    /// `(frequency Hz, |S|)` pairs in ascending frequency.
    pub fn iter(&self) -> impl Iterator<Item = (f64, f64)> + '_ {
        self.amplitude.iter().enumerate().map(|(k, &a)| (self.freq(k), a))
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
struct Grid {
    f_start: f64,
    df: f64,
    len: usize,
}

impl Grid {
    fn freq(&self, k: usize) -> f64 {
        self.f_start + k as f64 * self.df
    }

    /// Grid indices within `[f − eps, f + eps]`, clipped to the grid; the nearest sample when the
    /// interval holds none. `None` if the interval lies outside the grid.
    fn range(&self, f: f64, eps: f64) -> Option<(usize, usize)> {
        let last = (self.len - 1) as f64;
        let lo = ((f - eps - self.f_start) / self.df).ceil().max(0.0);
        let hi = ((f + eps - self.f_start) / self.df).floor().min(last);
        if lo <= hi {
            return Some((lo as usize, hi as usize));
        }
        let k = ((f - self.f_start) / self.df).round();
        (0.0..=last).contains(&k).then_some((k as usize, k as usize))
    }
}

// ---------------------------------------------------------------------------------------------
// Entry points
// ---------------------------------------------------------------------------------------------

/// Analyses wake-up timestamps (ns; any order, duplicates allowed) with the LFS++ heuristic and
/// the default [`AnalysisOptions`]. An invalid configuration yields
/// [`PeriodEstimate::NotPeriodic`] naming the problem (use [`try_analyse`] to get it as an error).
pub fn analyse(timestamps_ns: &[u64], cfg: &PeriodConfig) -> PeriodEstimate {
    match try_analyse(timestamps_ns, cfg) {
        Ok(e) => e,
        Err(e) => PeriodEstimate::NotPeriodic {
            reason: format!("invalid configuration: {e}"),
        },
    }
}

/// [`analyse`], with configuration errors reported as such.
pub fn try_analyse(timestamps_ns: &[u64], cfg: &PeriodConfig) -> Result<PeriodEstimate, PeriodConfigError> {
    analyse_detailed(timestamps_ns, cfg, &AnalysisOptions::default()).map(|a| a.estimate)
}

/// [`analyse`] with explicit options and the intermediate figures.
pub fn analyse_detailed(
    timestamps_ns: &[u64],
    cfg: &PeriodConfig,
    opts: &AnalysisOptions,
) -> Result<Analysis, PeriodConfigError> {
    cfg.validate()?;
    opts.validate()?;
    let grid = cfg.grid();
    let Some(t_min) = timestamps_ns.iter().copied().min() else {
        return Ok(not_periodic(0, 0, "no events".into()));
    };
    let t_max = timestamps_ns.iter().copied().max().unwrap_or(t_min);
    if let Some(early) = precheck(timestamps_ns.len(), t_max - t_min, cfg, opts) {
        return Ok(early);
    }
    // Sorted, so that the f32 sums, hence the result, do not depend on the input order.
    let mut tau = relative_seconds(timestamps_ns, t_min);
    tau.sort_unstable_by(f64::total_cmp);
    let det = Detection::compute(&tau, t_max - t_min, grid, cfg, opts, None);
    Ok(analyse_core(&det, grid, &tau, t_max - t_min, cfg, opts))
}

/// The sampled spectrum `|S(f)|` of eq. 4 on the configured grid (all zeros without events):
/// what the analysis reads on windows up to [`PeriodConfig::fine_grid_from_ns`]; longer ones
/// are analysed on a finer grid ([`AnalysisOptions::window_aware`]).
pub fn spectrum(timestamps_ns: &[u64], cfg: &PeriodConfig) -> Result<Spectrum, PeriodConfigError> {
    cfg.validate()?;
    let grid = cfg.grid();
    let t_min = timestamps_ns.iter().copied().min().unwrap_or(0);
    // Sorted and on the padded grid as in `analyse_detailed`, so that this is exactly the
    // spectrum it analyses (on windows up to `fine_grid_from_ns`).
    let mut tau = relative_seconds(timestamps_ns, t_min);
    tau.sort_unstable_by(f64::total_cmp);
    let g = cfg.guard_cells();
    let mut amplitude = spectrum_of(&tau, cfg.padded_grid());
    amplitude.truncate(g + grid.len);
    amplitude.drain(..g);
    Ok(Spectrum {
        f_start_hz: grid.f_start,
        df_hz: grid.df,
        amplitude,
    })
}

/// Reference implementation of eq. 4 with one `sin`/`cos` per (event, frequency) pair, for
/// tests and benchmarks of the fast path.
pub fn spectrum_direct(timestamps_ns: &[u64], cfg: &PeriodConfig) -> Result<Spectrum, PeriodConfigError> {
    cfg.validate()?;
    let grid = cfg.grid();
    let t_min = timestamps_ns.iter().copied().min().unwrap_or(0);
    let tau = relative_seconds(timestamps_ns, t_min);
    let amplitude = (0..grid.len)
        .map(|k| {
            let f = grid.freq(k);
            let (mut re, mut im) = (0.0, 0.0);
            for &t in &tau {
                let (s, c) = (-TAU * (f * t).fract()).sin_cos();
                re += c;
                im += s;
            }
            re.hypot(im)
        })
        .collect();
    Ok(Spectrum {
        f_start_hz: grid.f_start,
        df_hz: grid.df,
        amplitude,
    })
}

fn not_periodic(events: usize, window_ns: u64, reason: String) -> Analysis {
    Analysis {
        estimate: PeriodEstimate::NotPeriodic { reason },
        events,
        window_ns,
        mean_amplitude: 0.0,
        peaks: 0,
        candidates: 0,
        grid_freq_hz: None,
        heuristic_freq_hz: None,
        p_value: None,
    }
}

/// The verdicts that need no spectrum: too few events, a window too short for any frequency of
/// the band to complete `min_cycles` cycles.
fn precheck(n: usize, window_ns: u64, cfg: &PeriodConfig, opts: &AnalysisOptions) -> Option<Analysis> {
    if n < opts.min_events.max(2) {
        let reason = if n == 0 {
            "no events".to_string()
        } else {
            format!("too few events: {n} (at least {} needed)", opts.min_events.max(2))
        };
        return Some(not_periodic(n, window_ns, reason));
    }
    let h = window_ns as f64 * 1e-9;
    if h <= 0.0 || h * cfg.f_max_hz < opts.min_cycles.max(1.0) {
        let reason = format!(
            "observation window too short: {:.3} ms holds fewer than {} cycles of f_max = {} Hz",
            window_ns as f64 * 1e-6,
            opts.min_cycles.max(1.0),
            cfg.f_max_hz
        );
        return Some(not_periodic(n, window_ns, reason));
    }
    None
}

/// Seconds since `t0` (exact for spans below 2^53 ns ≈ 104 days).
fn relative_seconds(timestamps_ns: &[u64], t0: u64) -> Vec<f64> {
    timestamps_ns
        .iter()
        .map(|&t| (t as i128 - t0 as i128) as f64 * 1e-9)
        .collect()
}

/// The amplitude spectrum the peak heuristic reads (steps 2–6, the octave check, the noise
/// floor) on the band grid: eq. 4 itself, or, on a window longer than
/// [`PeriodConfig::fine_grid_from_ns`] with [`AnalysisOptions::window_aware`], eq. 4 sampled
/// `P = ⌈2Hδf⌉` times more finely and pooled: each grid sample `f_k` takes the largest of the
/// `P` fine samples of its cell `[f_k − δf/2, f_k + δf/2)` (module documentation, "Long
/// windows").
struct Detection {
    /// On the band grid.
    amplitude: Vec<f64>,
    /// `|S|` (pooled alike) at `g = δf·max(1, round(ε/δf))` below the first and above the last
    /// grid sample: an end sample is a peak when the spectrum falls from it both inwards and at
    /// `g` outwards, i.e. when the line's maximum lies less than about `g/2` beyond the band (ε
    /// being where the heuristic lets a peak sit). `+∞` without
    /// [`AnalysisOptions::band_edges`], so that the end samples are never local maxima.
    guards: [f64; 2],
    /// With pooling (`P > 1`): the fine samples, from the lower guard's cell to the upper one's,
    /// and their grid.
    fine: Option<(Vec<f64>, Grid)>,
    /// Cells between the band's end samples and the guards (`g/δf`).
    guard_cells: usize,
    /// `P` (1: no pooling).
    pool: usize,
}

impl Detection {
    /// `padded`: eq. 4 on [`PeriodConfig::padded_grid`] when the caller already has it (the
    /// accumulator).
    fn compute(
        tau: &[f64],
        window_ns: u64,
        grid: Grid,
        cfg: &PeriodConfig,
        opts: &AnalysisOptions,
        padded: Option<Vec<f64>>,
    ) -> Detection {
        let h = window_ns as f64 * 1e-9;
        let guard_cells = cfg.guard_cells();
        let pool = if opts.window_aware && window_ns > cfg.fine_grid_from_ns() {
            let most = MAX_POOL.min(MAX_GRID / (grid.len + 2 * guard_cells)).max(1);
            ((2.0 * h * grid.df).ceil().max(1.0) as usize).min(most)
        } else {
            1
        };
        let g = guard_cells as f64 * grid.df;
        if pool == 1 {
            let mut amplitude = padded.unwrap_or_else(|| spectrum_of(tau, cfg.padded_grid()));
            let guards = if opts.band_edges {
                [amplitude[0], amplitude[amplitude.len() - 1]]
            } else {
                [f64::INFINITY; 2]
            };
            amplitude.truncate(guard_cells + grid.len);
            amplitude.drain(..guard_cells);
            return Detection {
                amplitude,
                guards,
                fine: None,
                guard_cells,
                pool,
            };
        }
        // Fine sample j of cell c (c = 0 is the lower guard's cell) sits at
        // f_{c − guard_cells} + (j − (P − 1)/2)·δf/P.
        let step = grid.df / pool as f64;
        let cells = grid.len + 2 * guard_cells;
        let fine_grid = Grid {
            f_start: grid.f_start - g - 0.5 * (pool - 1) as f64 * step,
            df: step,
            len: cells * pool,
        };
        let fine = spectrum_of(tau, fine_grid);
        let cell_max = |c: usize| fine[c * pool..(c + 1) * pool].iter().copied().fold(0.0, f64::max);
        let amplitude = (guard_cells..guard_cells + grid.len).map(cell_max).collect();
        let guards = if opts.band_edges {
            [cell_max(0), cell_max(cells - 1)]
        } else {
            [f64::INFINITY; 2]
        };
        Detection {
            amplitude,
            guards,
            fine: Some((fine, fine_grid)),
            guard_cells,
            pool,
        }
    }

    /// `|S|` at grid index `k`, the guards outside the grid.
    fn at(&self, k: isize) -> f64 {
        if k < 0 {
            self.guards[0]
        } else {
            self.amplitude.get(k as usize).copied().unwrap_or(self.guards[1])
        }
    }

    /// Whether grid sample `k` is a local maximum (strict rise, then non-increase: the first
    /// sample of a plateau).
    fn is_peak(&self, k: usize) -> bool {
        let (a, k) = (self.amplitude[k], k as isize);
        a > self.at(k - 1) && a >= self.at(k + 1)
    }

    /// Where the peak at grid index `k` lies, interpolated, and the resolution of that estimate
    /// (the step of the samples it came from): parabolic interpolation through the highest
    /// sample of the cell and its two neighbours (fine samples with pooling).
    fn peak_location(&self, grid: Grid, k: usize) -> (f64, f64) {
        let parabola = |a: f64, b: f64, c: f64| {
            let denom = a - 2.0 * b + c;
            if denom < 0.0 && a.is_finite() && c.is_finite() {
                (0.5 * (a - c) / denom).clamp(-0.5, 0.5)
            } else {
                0.0
            }
        };
        match &self.fine {
            // The end samples' outer neighbours (the guards) are not δf away: no interpolation.
            None if k == 0 || k + 1 >= self.amplitude.len() => (grid.freq(k), grid.df),
            None => {
                let a = &self.amplitude;
                let d = parabola(a[k - 1], a[k], a[k + 1]);
                (grid.freq(k) + d * grid.df, grid.df)
            }
            Some((fine, fg)) => {
                let c = k + self.guard_cells;
                let cell = c * self.pool..(c + 1) * self.pool;
                let j = cell
                    .clone()
                    .fold(cell.start, |b, j| if fine[j] > fine[b] { j } else { b });
                let d = parabola(fine[j - 1], fine[j], fine[j + 1]);
                (fg.freq(j) + d * fg.df, fg.df)
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Heuristic (§5.2.1) and its extensions
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone, Copy)]
struct Peak {
    k: usize,
    freq: f64,
    amp: f64,
    hsum: f64,
}

/// Steps 2–6, the octave check, the refinement, the significance test and the confidence, on
/// the detection spectrum `det`. `tau` are the event times in seconds from the first event
/// (any order), `window_ns` their span.
fn analyse_core(
    det: &Detection,
    grid: Grid,
    tau: &[f64],
    window_ns: u64,
    cfg: &PeriodConfig,
    opts: &AnalysisOptions,
) -> Analysis {
    let n = tau.len();
    let h = window_ns as f64 * 1e-9;
    let amplitude = &det.amplitude[..];
    let mut out = not_periodic(n, window_ns, String::new());
    out.mean_amplitude = amplitude.iter().sum::<f64>() / amplitude.len() as f64;

    // Step 2: local maxima. The band's end samples are compared with the guards: without them
    // (+∞) they are never peaks, since a maximum there may be the flank of a peak outside the
    // band. Below min_cycles/H lies the 0 Hz lobe (see the module documentation).
    let f_lo = opts.min_cycles / h;
    let k_lo = ((f_lo - grid.f_start) / grid.df).ceil().max(0.0) as usize;
    let maxima: Vec<usize> = (k_lo..grid.len).filter(|&k| det.is_peak(k)).collect();
    out.peaks = maxima.len();

    // Step 3: discard peaks below α times the mean. With window_aware, also the side lobes: a
    // maximum within max(ε + δf, 1.5/H) of a higher sample is part of that peak (the first side
    // lobes are at ±1.43/H; harmonics of a rate with min_cycles cycles in the window are at
    // least 3/H apart, and a peak within ε + δf would count as the same line anyway).
    let threshold = cfg.alpha * out.mean_amplitude;
    let lobe = (cfg.eps_hz + grid.df).max(1.5 / h);
    let side_lobe = |k: usize| {
        opts.window_aware
            && grid
                .range(grid.freq(k), lobe)
                .is_some_and(|(lo, hi)| amplitude[lo..=hi].iter().any(|&a| a > amplitude[k]))
    };
    let mut cands: Vec<Peak> = maxima
        .iter()
        .filter(|&&k| amplitude[k] >= threshold && amplitude[k] > 0.0 && !side_lobe(k))
        .map(|&k| Peak {
            k,
            freq: grid.freq(k),
            amp: amplitude[k],
            hsum: 0.0,
        })
        .collect();
    out.candidates = cands.len();

    // Step 4: nothing left → not periodic.
    if cands.is_empty() {
        let best = maxima
            .iter()
            .copied()
            .max_by(|&a, &b| amplitude[a].total_cmp(&amplitude[b]));
        let detail = match best {
            Some(k) => format!(
                "; highest peak {:.1} at {:.2} Hz, {:.2}× the mean",
                amplitude[k],
                grid.freq(k),
                amplitude[k] / out.mean_amplitude.max(f64::MIN_POSITIVE)
            ),
            None => String::new(),
        };
        out.estimate = PeriodEstimate::NotPeriodic {
            reason: format!(
                "no spectral peak above α·mean = {} × {:.2}{detail}",
                cfg.alpha, out.mean_amplitude
            ),
        };
        return out;
    }

    // Step 5: harmonic sums.
    for c in cands.iter_mut() {
        c.hsum = harmonic_sum(amplitude, grid, c.freq, cfg);
    }

    // Step 6: highest harmonic sum; ties go to the lower frequency ("the first main peak").
    // Sums are compared to 1 part in 10^6 of the largest: the f32 spectrum rounds at ~1e-7, and
    // the harmonics of a clean comb all collect the same k_max lines, so exact comparison would
    // break their ties by rounding noise.
    // Extension: a winner whose harmonic series is not significant is passed over for the next
    // candidate in that order (see the module documentation); with the test off this is step 6.
    let top = cands.iter().map(|c| c.hsum).fold(f64::MIN_POSITIVE, f64::max);
    let rank = |c: &Peak| (c.hsum / top * 1e6).round() as i64;
    let mut order: Vec<usize> = (0..cands.len()).collect();
    order.sort_by(|&a, &b| {
        rank(&cands[b])
            .cmp(&rank(&cands[a]))
            .then(cands[a].freq.total_cmp(&cands[b].freq))
    });
    out.heuristic_freq_hz = Some(cands[order[0]].freq);

    let noise = NoiseFloor::new(amplitude, grid, h, n, det.pool);
    let mut taper = Taper::new(tau, h);
    let band = (grid.freq(grid.len - 1) - f_lo.max(grid.f_start)).max(0.0);
    let mut tried: Vec<usize> = Vec::new();
    let mut first_failure = None;
    let mut accepted = None;
    for &best in order.iter().take(MAX_SIGNIFICANCE_TRIES) {
        let chosen = if opts.octave_check {
            octave_check(amplitude, grid, &cands, best, threshold, &noise, cfg)
        } else {
            best
        };
        if tried.contains(&chosen) {
            continue;
        }
        tried.push(chosen);
        let f_grid = cands[chosen].freq;
        let freq = if opts.refine {
            let k_h = harmonics_in_band(f_grid, grid, cfg).min(MAX_HARMONICS);
            refine(det, grid, cands[chosen].k, &mut taper, k_h)
        } else {
            f_grid
        };
        // Significance of the harmonic series against the local noise floor.
        let k_h = harmonics_in_band(freq, grid, cfg).clamp(1, MAX_HARMONICS);
        let p_value = significance(&mut taper, freq, k_h, band, &noise);
        if p_value <= opts.max_false_alarm {
            accepted = Some((chosen, freq, p_value));
            break;
        }
        if first_failure.is_none() {
            out.grid_freq_hz = Some(f_grid);
            out.p_value = Some(p_value);
            first_failure = Some(format!(
                "best harmonic series ({freq:.2} Hz, {k_h} harmonic{}) is not significant: p = {p_value:.2e} > {:.0e}",
                if k_h == 1 { "" } else { "s" },
                opts.max_false_alarm
            ));
        }
    }
    let Some((chosen, freq, p_value)) = accepted else {
        let others = tried.len().saturating_sub(1);
        let more = if others > 0 {
            format!(
                ", nor are the next {others} candidate{}",
                if others == 1 { "'s" } else { "s'" }
            )
        } else {
            String::new()
        };
        out.estimate = PeriodEstimate::NotPeriodic {
            reason: format!("{}{more}", first_failure.unwrap_or_default()),
        };
        return out;
    };
    let f_grid = cands[chosen].freq;
    out.grid_freq_hz = Some(f_grid);
    out.p_value = Some(p_value);

    // Dominance over the best candidate that is neither a harmonic of the chosen rate (any in
    // the band, not only the first k_max: a 5 Hz rate has 99, all of which support it) nor one
    // of its sub-harmonics (whose sums collect the chosen one's lines; the octave question is
    // the ambiguity's below).
    let runner_up = cands
        .iter()
        .enumerate()
        .filter(|&(i, c)| {
            i != chosen
                && !is_multiple(c.freq, freq, cfg.eps_hz + grid.df)
                && !harmonically_related(c.freq, f_grid, cfg.k_max, cfg.eps_hz, grid.df)
        })
        .map(|(_, c)| c.hsum)
        .fold(0.0, f64::max);
    let chosen_sum = cands[chosen].hsum;
    let dominance = if chosen_sum > 0.0 {
        (1.0 - runner_up / chosen_sum).clamp(0.0, 1.0)
    } else {
        0.0
    };
    let coherence = taper.coherence(freq).clamp(0.0, 1.0);
    let ambiguity = taper.ambiguity(freq, opts.min_cycles);
    let confidence = (coherence * dominance).sqrt() * (1.0 - ambiguity);

    // Candidates: the chosen one first, then by decreasing harmonic sum.
    let candidates = std::iter::once(chosen)
        .chain(order.into_iter().filter(|&i| i != chosen))
        .take(MAX_CANDIDATES)
        .map(|i| Candidate {
            freq_hz: cands[i].freq,
            period_ns: period_of(cands[i].freq),
            amplitude: cands[i].amp,
            harmonic_sum: cands[i].hsum,
        })
        .collect();

    out.estimate = PeriodEstimate::Periodic {
        period_ns: period_of(freq),
        freq_hz: freq,
        confidence,
        candidates,
    };
    out
}

fn period_of(freq_hz: f64) -> u64 {
    (1e9 / freq_hz).round() as u64
}

/// Multiples `h·f ≤ f_max`, `h ≤ k_max`.
fn harmonics_in_band(f: f64, grid: Grid, cfg: &PeriodConfig) -> usize {
    let f_max = grid.freq(grid.len - 1) + 0.5 * grid.df;
    (1..=cfg.k_max).take_while(|&h| h as f64 * f <= f_max).count()
}

/// Step 5: `Σ_i = Σ_{h=1..k_max, h·f ≤ f_max} Σ_{|f_j − h·f| ≤ ε} |S(f_j)|`.
fn harmonic_sum(amplitude: &[f64], grid: Grid, f: f64, cfg: &PeriodConfig) -> f64 {
    (1..=harmonics_in_band(f, grid, cfg))
        .filter_map(|h| grid.range(h as f64 * f, cfg.eps_hz))
        .map(|(lo, hi)| amplitude[lo..=hi].iter().sum::<f64>())
        .sum()
}

/// Highest `|S|` within `±ε` of `f` (0 outside the grid).
fn peak_near(amplitude: &[f64], grid: Grid, f: f64, eps: f64) -> f64 {
    grid.range(f, eps)
        .map(|(lo, hi)| amplitude[lo..=hi].iter().copied().fold(0.0, f64::max))
        .unwrap_or(0.0)
}

/// Whether grid peaks `a` and `b` are harmonics of one another: `a ≈ m·b` or `b ≈ m·a`,
/// `m = 1..=k_max`. The tolerance is ε (where a peak may sit) plus `m·δf`, since the grid error
/// of the lower peak (`±δf/2`) is multiplied by `m`.
fn harmonically_related(a: f64, b: f64, k_max: usize, eps: f64, df: f64) -> bool {
    (1..=k_max.max(2)).any(|m| {
        let tol = eps + m as f64 * df;
        let m = m as f64;
        (a - b * m).abs() <= tol || (b - a * m).abs() <= tol
    })
}

/// Whether `c ≈ m·f` for an integer `m ≥ 1`, within `tol`.
fn is_multiple(c: f64, f: f64, tol: f64) -> bool {
    let m = (c / f).round();
    m >= 1.0 && (c - m * f).abs() <= tol
}

/// The octave check (module documentation): among the candidates harmonically related to the
/// step-6 winner (itself included), the lowest that is not a [`subharmonic_of`] another of them;
/// the winner if all are.
fn octave_check(
    amplitude: &[f64],
    grid: Grid,
    cands: &[Peak],
    best: usize,
    threshold: f64,
    noise: &NoiseFloor,
    cfg: &PeriodConfig,
) -> usize {
    let fw = cands[best].freq;
    // A candidate within the m = 1 tolerance of the winner is the same line (or one of its side
    // lobes), not an octave: letting it in made the lowest side lobe of the winner "the lowest
    // related candidate" on windows longer than 2.4 s, where the side lobes (±1.43/H) come
    // within ε + δf.
    let mut related: Vec<usize> = (0..cands.len())
        .filter(|&i| {
            i == best
                || ((cands[i].freq - fw).abs() > cfg.eps_hz + grid.df
                    && harmonically_related(cands[i].freq, fw, cfg.k_max, cfg.eps_hz, grid.df))
        })
        .collect();
    related.sort_by(|&a, &b| cands[a].freq.total_cmp(&cands[b].freq));
    related
        .iter()
        .copied()
        .find(|&i| {
            !related
                .iter()
                .any(|&j| subharmonic_of(amplitude, grid, &cands[i], &cands[j], threshold, noise, cfg))
        })
        .unwrap_or(best)
}

/// Whether candidate `low` is the sub-harmonic `f_0/m` of the rate `f_0` of candidate `high`
/// (`m ≥ 2`): `high` is above the step-3 threshold and higher than `low`, and the harmonics
/// `h·f_0/m` that `f_0` does not explain (`h ≥ 2`, `m ∤ h`) are either jointly
/// indistinguishable from noise — `Σ |S(h·f_0/m)|²/σ²` over them (peak heights within `±ε`,
/// `σ²` the local [`NoiseFloor`]) has a Gamma tail above [`OFF_HARMONIC_SIGNIFICANCE`] — or, on
/// average, below [`SUBHARMONIC_RATIO`] of the harmonics shared with `f_0` (a weak but real
/// structure at `f_0/m`, such as an extra wake-up every other job, does not make it the rate).
/// When no such harmonic is in the band, `low` is a sub-harmonic if its peak is below
/// [`SUPPORT_RATIO`] of `high`'s. The harmonics are placed from `high`, whose peak is the
/// better located: a weak line's grid peak can be a few δf off, which `h` multiplies.
///
/// A real fundamental passes: either its own peak is the higher one, or its other harmonics
/// carry comparable energy — even when the phases of bursty jobs suppress some of them (jobs of
/// 3 wake-ups at 0, 0.15 and 0.3 of the period weaken harmonics 2–5 to a fifth of harmonics 6–7).
fn subharmonic_of(
    amplitude: &[f64],
    grid: Grid,
    low: &Peak,
    high: &Peak,
    threshold: f64,
    noise: &NoiseFloor,
    cfg: &PeriodConfig,
) -> bool {
    let m = (high.freq / low.freq).round();
    if m < 2.0 || (high.freq - m * low.freq).abs() > cfg.eps_hz + m * grid.df {
        return false;
    }
    if high.amp < threshold || low.amp >= high.amp {
        return false;
    }
    let m = m as usize;
    let f = high.freq / m as f64;
    let heights: Vec<f64> = (1..=harmonics_in_band(f, grid, cfg))
        .map(|h| peak_near(amplitude, grid, h as f64 * f, cfg.eps_hz))
        .collect();
    let off: Vec<usize> = (2..=heights.len()).filter(|h| h % m != 0).collect();
    if off.is_empty() {
        return low.amp < SUPPORT_RATIO * high.amp;
    }
    let mean = |hs: &mut dyn Iterator<Item = usize>| {
        let (sum, n) = hs.fold((0.0, 0usize), |(s, n), h| (s + heights[h - 1], n + 1));
        sum / n.max(1) as f64
    };
    let z: f64 = off
        .iter()
        .map(|&h| heights[h - 1].powi(2) / noise.at(h as f64 * f))
        .sum();
    let on_mean = mean(&mut (m..=heights.len()).step_by(m));
    let off_mean = mean(&mut off.iter().copied());
    gamma_tail(off.len(), z) > OFF_HARMONIC_SIGNIFICANCE || off_mean < SUBHARMONIC_RATIO * on_mean
}

// ---------------------------------------------------------------------------------------------
// Refinement and significance
// ---------------------------------------------------------------------------------------------

/// The events seen from the centre of the window, for the refinement, the coherence and the
/// significance test: Hann weights, phase slopes and a cache of each event's phasor at the
/// frequency last evaluated.
struct Taper {
    /// `w_i = sin²(π(t_i − t_0)/H)`.
    w: Vec<f64>,
    /// `u_i = 2π(t_i − t_c)`, `t_c` the window's centre: the phase slope of event `i`.
    u: Vec<f64>,
    w_sum: f64,
    /// `max |u_i|` (= πH).
    u_max: f64,
    /// Window H, s.
    h: f64,
    /// Frequency of `phasor` (NaN before the first evaluation).
    f: f64,
    /// `(cos(f·u_i), sin(f·u_i))`.
    phasor: Vec<(f64, f64)>,
}

impl Taper {
    fn new(tau: &[f64], h: f64) -> Self {
        let t0 = tau.iter().copied().fold(f64::INFINITY, f64::min);
        let tc = t0 + 0.5 * h;
        let (w, u): (Vec<f64>, Vec<f64>) = tau
            .iter()
            .map(|&t| ((PI * (t - t0) / h).sin().powi(2), TAU * (t - tc)))
            .unzip();
        let w_sum = w.iter().sum();
        let u_max = u.iter().fold(0.0f64, |m, &x| m.max(x.abs()));
        let phasor = vec![(1.0, 0.0); u.len()];
        Taper {
            w,
            u,
            w_sum,
            u_max,
            h,
            f: f64::NAN,
            phasor,
        }
    }

    /// Moves the cached phasors to frequency `f`. Newton steps are small, so instead of a
    /// `sin_cos` per event (which would dominate the refinement) each phasor is rotated by
    /// `e^{jΔf·u_i}` from a Taylor series, exact to ~1e-11 for `|Δf·u_i| ≤ 0.5`; larger jumps
    /// recompute the phasors exactly.
    fn seek(&mut self, f: f64) {
        if f == self.f {
            return;
        }
        let d = f - self.f;
        if d.is_finite() && (d * self.u_max).abs() <= 0.5 {
            for (p, &u) in self.phasor.iter_mut().zip(&self.u) {
                let (c, s) = small_cos_sin(d * u);
                *p = (p.0 * c - p.1 * s, p.0 * s + p.1 * c);
            }
        } else {
            for (p, &u) in self.phasor.iter_mut().zip(&self.u) {
                let (s, c) = (f * u).sin_cos();
                *p = (c, s);
            }
        }
        self.f = f;
    }

    /// `|Σ w_i e^{j2πf(t_i − t_c)}| / Σ w_i`: 1 when every event has the same phase at `f`.
    fn coherence(&mut self, f: f64) -> f64 {
        if self.w_sum > 0.0 {
            self.power(f, 1).0.sqrt() / self.w_sum
        } else {
            0.0
        }
    }

    /// How plausible it is that `f` is a harmonic `m·f₀` of the real rate: each event is put on
    /// its tooth `k_i = round(f·(t_i − t_c) − φ)` of the comb at `f` (`φ` the comb's phase, the
    /// argument of `Σ w_i e^{j2πf(t_i − t_c)}`, in turns), and for `m = 2..=`
    /// [`MAX_AMBIGUITY_DIVISOR`] the teeth's residues modulo `m` are tested for alignment,
    /// `c_m = |Σ w_i e^{j2πk_i/m}| / Σ w_i` (1 when every event is on every m-th tooth, as for a
    /// comb at `f₀ = f/m`; about 0 for a comb at `f`, whose teeth are consecutive, whatever its
    /// jitter, bursts or missing events). Returns `max_m (c_m − c₀)/(1 − c₀)` clamped to
    /// `[0, 1]`, `c₀ = √(Σw²)/Σw` being what random residues reach. Only `f/m` with at least
    /// `min_cycles` (≥ 3) cycles in the window are tested: with fewer, the Hann weights alone
    /// make the residues look aligned. Costs `N` additions per divisor.
    fn ambiguity(&mut self, f: f64, min_cycles: f64) -> f64 {
        if self.w_sum <= 0.0 {
            return 0.0;
        }
        let c0 = self.w.iter().map(|w| w * w).sum::<f64>().sqrt() / self.w_sum;
        let m_max = ((f * self.h / min_cycles.max(3.0)).floor() as usize).min(MAX_AMBIGUITY_DIVISOR);
        if m_max < 2 || c0 >= 1.0 {
            return 0.0;
        }
        // Teeth counted from the comb's own phase, so that events near a tooth do not straddle
        // a rounding boundary (the phasors are at f already after `coherence`).
        self.seek(f);
        let (re, im) = self
            .w
            .iter()
            .zip(&self.phasor)
            .fold((0.0, 0.0), |(re, im), (&w, &(c, s))| (re + w * c, im + w * s));
        let phase = im.atan2(re) / TAU;
        let teeth: Vec<i64> = self
            .u
            .iter()
            .map(|&u| (f * u / TAU - phase).round() as i64)
            .collect();
        let first = teeth.iter().copied().min().unwrap_or(0);
        let span = teeth.iter().copied().max().unwrap_or(0) - first + 1;
        // Weight per tooth when the teeth are dense (every tooth of a comb, several events per
        // tooth for bursts): each divisor then costs one pass over the teeth, not the events.
        // Sparse teeth (a few events over many periods) keep one entry per event.
        let dense = span as usize <= 2 * teeth.len() + 64;
        let per_tooth = if dense {
            let mut per_tooth = vec![0.0; span as usize];
            for (&k, &w) in teeth.iter().zip(&self.w) {
                per_tooth[(k - first) as usize] += w;
            }
            per_tooth
        } else {
            Vec::new()
        };
        let mut worst = 0.0f64;
        let mut roots = Vec::with_capacity(m_max);
        for m in 2..=m_max {
            // The m-th roots of unity (sin, cos), by rotation: one sin_cos per divisor.
            let (s1, c1) = (TAU / m as f64).sin_cos();
            roots.clear();
            roots.push((0.0, 1.0));
            for r in 1..m {
                let (s, c) = roots[r - 1];
                roots.push((s * c1 + c * s1, c * c1 - s * s1));
            }
            let (mut re, mut im) = (0.0, 0.0);
            if dense {
                let mut r = 0;
                for &w in &per_tooth {
                    let (s, c) = roots[r];
                    re += w * c;
                    im += w * s;
                    r = if r + 1 == m { 0 } else { r + 1 };
                }
            } else {
                for (&k, &w) in teeth.iter().zip(&self.w) {
                    let (s, c) = roots[((k - first) as u64 % m as u64) as usize];
                    re += w * c;
                    im += w * s;
                }
            }
            let c_m = (re * re + im * im).sqrt() / self.w_sum;
            worst = worst.max((c_m - c0) / (1.0 - c0));
        }
        worst.clamp(0.0, 1.0)
    }

    /// `G(f) = Σ_{h=1..hmax} |Σ_i w_i e^{j2πhf(t_i − t_c)}|²` and its first two derivatives in
    /// `f`. Per harmonic, with `C_n = Σ w u^n cos(hfu)`, `S_n = Σ w u^n sin(hfu)`:
    /// `P = C0² + S0²`, `P' = 2h(S0·C1 − C0·S1)`, `P'' = 2h²(S1² + C1² − C0·C2 − S0·S2)`.
    fn power(&mut self, f: f64, hmax: usize) -> (f64, f64, f64) {
        self.seek(f);
        let mut acc = [[0.0f64; 6]; MAX_HARMONICS];
        let hmax = hmax.min(MAX_HARMONICS);
        for ((&w, &u), &(c1, s1)) in self.w.iter().zip(&self.u).zip(&self.phasor) {
            let (wu, wuu) = (w * u, w * u * u);
            let (mut c, mut s) = (c1, s1);
            for a in acc[..hmax].iter_mut() {
                a[0] += w * c;
                a[1] += w * s;
                a[2] += wu * c;
                a[3] += wu * s;
                a[4] += wuu * c;
                a[5] += wuu * s;
                (c, s) = (c * c1 - s * s1, c * s1 + s * c1);
            }
        }
        let (mut p, mut d1, mut d2) = (0.0, 0.0, 0.0);
        for (i, [c0, s0, c1, s1, c2, s2]) in acc[..hmax].iter().copied().enumerate() {
            let h = (i + 1) as f64;
            p += c0 * c0 + s0 * s0;
            d1 += 2.0 * h * (s0 * c1 - c0 * s1);
            d2 += 2.0 * h * h * (s1 * s1 + c1 * c1 - c0 * c2 - s0 * s2);
        }
        (p, d1, d2)
    }

    /// Maximises [`power`](Self::power) with `hmax` harmonics in `[lo, hi]`, from `f`: Newton
    /// steps, replaced by bisection when a step leaves the bracket or the curvature is not
    /// negative; the bracket shrinks with the sign of the derivative. Stops when a step is below
    /// a millionth of the main lobe `1/(hmax·H)`: far below any precision the events allow,
    /// and above the rounding noise of the derivative, on which Newton would only bounce.
    fn maximise(&mut self, mut f: f64, mut lo: f64, mut hi: f64, hmax: usize) -> f64 {
        let tol = (1e-6 / (hmax as f64 * self.h)).max(1e-13 * f);
        for _ in 0..MAX_REFINE_ITERATIONS {
            let (_, d1, d2) = self.power(f, hmax);
            if d1 > 0.0 {
                lo = f;
            } else {
                hi = f;
            }
            let newton = if d2 < 0.0 { f - d1 / d2 } else { f64::NAN };
            let next = if newton > lo && newton < hi {
                newton
            } else {
                0.5 * (lo + hi)
            };
            let done = (next - f).abs() <= tol || hi - lo <= tol;
            f = next;
            if done {
                break;
            }
        }
        f
    }

    /// `S̃(h·f)` for `h = 1..=k`, unweighted, in the centred time origin: the spectrum of the
    /// events minus that of their mean rate over the window, which from the centre is the real
    /// `N·sinc(πhfH)` (the leakage of the 0 Hz peak, not a periodicity).
    fn harmonics(&mut self, f: f64, k: usize) -> Vec<(f64, f64)> {
        self.seek(f);
        let n = self.u.len() as f64;
        let mut sums = vec![(0.0, 0.0); k];
        for &(c1, s1) in &self.phasor {
            let (mut c, mut s) = (c1, s1);
            for acc in sums.iter_mut() {
                acc.0 += c;
                acc.1 += s;
                (c, s) = (c * c1 - s * s1, c * s1 + s * c1);
            }
        }
        for (i, acc) in sums.iter_mut().enumerate() {
            let x = PI * (i + 1) as f64 * f * self.h;
            acc.0 -= n * if x.abs() < 1e-12 { 1.0 } else { x.sin() / x };
        }
        sums
    }
}

/// `(cos x, sin x)` by Taylor series, for `|x| ≤ 0.5` (truncation error below 2e-11).
fn small_cos_sin(x: f64) -> (f64, f64) {
    let x2 = x * x;
    let s =
        x * (1.0 - x2 / 6.0 * (1.0 - x2 / 20.0 * (1.0 - x2 / 42.0 * (1.0 - x2 / 72.0 * (1.0 - x2 / 110.0)))));
    let c = 1.0 - x2 / 2.0 * (1.0 - x2 / 12.0 * (1.0 - x2 / 30.0 * (1.0 - x2 / 56.0 * (1.0 - x2 / 90.0))));
    (c, s)
}

/// Refines grid peak `k` (which has `k_h` harmonics in the band). Parabolic interpolation of
/// the detection spectrum around the peak ([`Detection::peak_location`]) gives the start;
/// Newton iterations on the tapered fundamental, within one sample step of it (`δf`, or the fine
/// step `≤ 1/(2H)` on long windows: well inside the main lobe `±2/H`, so Newton cannot climb a
/// side lobe), give an estimate good to a small fraction of the main lobe; then the first three
/// harmonics and finally all `k_h` are added (each harmonic multiplies the phase slope, hence
/// the precision, by `h`), each stage within the main lobe `±1/(h_max·H)` of the previous
/// estimate.
fn refine(det: &Detection, grid: Grid, k: usize, taper: &mut Taper, k_h: usize) -> f64 {
    let f_grid = grid.freq(k);
    if !(det.at(k as isize - 1).is_finite() && det.at(k as isize + 1).is_finite()) {
        return f_grid;
    }
    let (start, step) = det.peak_location(grid, k);
    let lo = (start - step).max(0.5 * start);
    let mut f = taper.maximise(start, lo, start + step, 1);
    let mut prev = 1;
    for hmax in [3.min(k_h), k_h] {
        if hmax <= prev {
            continue;
        }
        let half = (1.0 / (hmax as f64 * taper.h)).min(grid.df);
        f = taper.maximise(f, f - half, f + half, hmax);
        prev = hmax;
    }
    f
}

/// Upper tail `P(X > z)` of a Gamma(k, 1) variable (the sum of `k` unit exponentials), integer k.
fn gamma_tail(k: usize, z: f64) -> f64 {
    if z.is_nan() || z <= 0.0 {
        return 1.0;
    }
    if z > 745.0 + 40.0 * k as f64 {
        return 0.0;
    }
    let (mut term, mut sum) = (1.0f64, 1.0f64);
    for i in 1..k {
        term *= z / i as f64;
        sum += term;
    }
    ((-z).exp() * sum).min(1.0)
}

/// Local noise power of the sampled spectrum: the median of `|S|²` over consecutive blocks of
/// `2·max(20 Hz, 20/H, 10·δf)`, divided by ln 2 (for aperiodic events `|S|²` is exponential,
/// whose median is ln 2 times its mean); at a frequency, the largest of its block's and the two
/// neighbouring blocks' values. The median ignores the few samples under peaks. The noise of
/// bursty aperiodic events is not flat — jobs of K wake-ups at fixed offsets scale it by
/// `|Σ_k e^{−j2πfφ_k}|²`, which swings by up to K² over ~1/φ Hz — so blocks stay narrow and the
/// upper envelope over neighbours keeps the estimate from falling below the local level where
/// that factor peaks (measured: this turns 3 % false "periodic" verdicts on 1 s windows of
/// 10 random 3-wake-up jobs/s into none in 1200, without losing real trains).
///
/// On a pooled spectrum ([`Detection`], `P > 1`) each sample is the largest of about `K = P/2`
/// independent ones (the fine step is `1/(2H)`, the spectrum decorrelates over `1/H`), whose
/// median is `−ln(1 − 2^{−1/K})` times the mean power instead of ln 2.
struct NoiseFloor {
    start: f64,
    width: f64,
    power: Vec<f64>,
}

impl NoiseFloor {
    fn new(amplitude: &[f64], grid: Grid, h: f64, n: usize, pool: usize) -> Self {
        let width = 2.0 * 20.0f64.max(20.0 / h).max(10.0 * grid.df);
        let per_block = ((width / grid.df).round() as usize).clamp(1, amplitude.len());
        let floor = 1e-12 * n.max(1) as f64;
        let k = (0.5 * pool as f64).max(1.0);
        let median_over_mean = -(1.0 - 0.5f64.powf(1.0 / k)).ln();
        let mut scratch = Vec::with_capacity(per_block);
        let power = amplitude
            .chunks(per_block)
            .map(|block| {
                scratch.clear();
                scratch.extend(block.iter().map(|a| a * a));
                let mid = scratch.len() / 2;
                (*scratch.select_nth_unstable_by(mid, f64::total_cmp).1 / median_over_mean).max(floor)
            })
            .collect();
        NoiseFloor {
            start: grid.f_start,
            width: per_block as f64 * grid.df,
            power,
        }
    }

    /// `n_eff = N²/max σ²`: N for Poisson arrivals, the number of jobs for jobs of K wake-ups
    /// (whose low-frequency noise power is `jobs·K²`), large for periodic trains.
    fn independent_events(&self, n: usize) -> f64 {
        let n = n as f64;
        n * n / self.power.iter().copied().fold(f64::MIN_POSITIVE, f64::max)
    }

    fn at(&self, f: f64) -> f64 {
        let i = ((f - self.start) / self.width).floor().max(0.0) as usize;
        let i = i.min(self.power.len() - 1);
        let (lo, hi) = (i.saturating_sub(1), (i + 1).min(self.power.len() - 1));
        self.power[lo..=hi].iter().copied().fold(0.0, f64::max)
    }
}

/// p-value of the harmonic series `h·f`, `h = 1..k_h`, corrected for the search over a band of
/// `band` Hz (the module documentation, "Significance").
///
/// The harmonics are independent under the null hypothesis only when the window holds many
/// independent events: with few (a sparse trace, or few bursts of wake-ups), random times that
/// happen to line up roughly with a comb make all harmonics large at once and the Gamma tail
/// below is far too small. So at most `n_eff/`[`EVENTS_PER_HARMONIC`] harmonics enter the
/// statistic, `n_eff = N²/max σ²` being the number of independent events (N for Poisson
/// arrivals; the number of jobs for jobs of K wake-ups, whose low-frequency noise is `jobs·K²`;
/// large for periodic trains, whose spectrum between the lines is small).
///
/// Statistic: `Z_k = Σ_{h ≤ k} |S̃(h·f)|² / σ²(h·f)`, `S̃` from [`Taper::harmonics`] (mean rate
/// removed) and `σ²` the [`NoiseFloor`]. For aperiodic events `|S̃|²/σ²` is a unit exponential
/// and `Z_k` is Gamma(k, 1). As `f` was chosen as the best of a continuum of frequencies, the
/// tail `Q(k, Z_k)` is multiplied by the expected number of up-crossings of level `Z_k` by the
/// harmonic-sum process over the band (Rice's formula for a χ² process, ≈
/// `B·H·√(π·Z·mean(h²)/3)`, the `h²` because harmonic `h` fluctuates `h` times faster in `f`)
/// and by `k_h`, since the best `k` is taken.
fn significance(taper: &mut Taper, f: f64, k_h: usize, band: f64, noise: &NoiseFloor) -> f64 {
    let h = taper.h;
    let n_eff = noise.independent_events(taper.u.len());
    let k_h = k_h.min(((n_eff / EVENTS_PER_HARMONIC).floor() as usize).max(1));
    let (mut z, mut h2) = (0.0, 0.0);
    let mut p = 1.0f64;
    for (i, (re, im)) in taper.harmonics(f, k_h).into_iter().enumerate() {
        let harmonic = i + 1;
        z += (re * re + im * im) / noise.at(harmonic as f64 * f);
        h2 += (harmonic * harmonic) as f64;
        let crossings = (band * h * (PI * z * h2 / harmonic as f64 / 3.0).sqrt()).max(1.0);
        p = p.min(gamma_tail(harmonic, z) * crossings * k_h as f64);
    }
    p.min(1.0)
}

// ---------------------------------------------------------------------------------------------
// Spectrum: the fast path
// ---------------------------------------------------------------------------------------------

/// Events per lane group of the kernel (one AVX register of `f32`).
const LANES: usize = 8;

/// `|S(f_k)|` for the grid, by the recurrence described in the module documentation.
fn spectrum_of(tau: &[f64], grid: Grid) -> Vec<f64> {
    let mut out = vec![0.0; grid.len];
    if tau.is_empty() {
        return out;
    }
    let n = tau.len();
    let padded = n.div_ceil(LANES) * LANES;
    // Working f32 phasors (padding lanes stay 0 and add nothing) and f64 masters.
    let (mut zr, mut zi) = (vec![0f32; padded], vec![0f32; padded]);
    let (mut rr, mut ri) = (vec![0f32; padded], vec![0f32; padded]);
    let (mut mr, mut mi) = (vec![0f64; n], vec![0f64; n]);
    let (mut br, mut bi) = (vec![0f64; n], vec![0f64; n]);
    for (i, &t) in tau.iter().enumerate() {
        // Phases as fractions of a turn: reducing before sin/cos keeps them exact for long spans.
        let (s, c) = (-TAU * (grid.f_start * t).fract()).sin_cos();
        (mr[i], mi[i]) = (c, s);
        let (s, c) = (-TAU * (grid.df * t).fract()).sin_cos();
        (rr[i], ri[i]) = (c as f32, s as f32);
        // r^RESEED by squaring (RESEED is a power of two): 7 f64 products, ~1e-15 error,
        // cheaper than a third sin/cos.
        let (mut a, mut b) = (c, s);
        for _ in 0..RESEED.trailing_zeros() {
            (a, b) = (a * a - b * b, 2.0 * a * b);
        }
        (br[i], bi[i]) = (a, b);
    }
    let kernel = select_kernel();
    for (block, chunk) in out.chunks_mut(RESEED).enumerate() {
        if block > 0 {
            // Advance the masters by RESEED steps: one f64 product per block.
            for i in 0..n {
                let (a, b) = (mr[i], mi[i]);
                mr[i] = a * br[i] - b * bi[i];
                mi[i] = a * bi[i] + b * br[i];
            }
        }
        for i in 0..n {
            zr[i] = mr[i] as f32;
            zi[i] = mi[i] as f32;
        }
        kernel(&mut zr, &mut zi, &rr, &ri, chunk);
    }
    out
}

type Kernel = fn(&mut [f32], &mut [f32], &[f32], &[f32], &mut [f64]);

fn select_kernel() -> Kernel {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx") {
            return kernel_avx_entry;
        }
    }
    kernel_portable
}

/// Frequencies computed per pass over the events: the phasors are loaded and stored once per
/// pass, and each frequency's accumulators get one addition per lane group, so a pass does 9.5
/// instead of 14 vector operations per (group, frequency).
const FREQ_BLOCK: usize = 4;

/// Lane sums → `|S|`, in a fixed order shared by both kernels so they agree bit for bit.
#[inline]
fn finish(acc_r: &[f32; LANES], acc_i: &[f32; LANES]) -> f64 {
    let sum = |l: &[f32; LANES]| (((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]))) as f64;
    let (re, im) = (sum(acc_r), sum(acc_i));
    // Not hypot: its overflow care is not needed here (|S| ≤ N) and costs 15 % of the analysis.
    (re * re + im * im).sqrt()
}

/// For each output frequency: `|Σ z|`, then `z ← z·r`, lane-wise per group of [`LANES`] events,
/// the groups in order. [`FREQ_BLOCK`] frequencies are done per pass (same arithmetic, fewer
/// memory operations).
fn kernel_portable(zr: &mut [f32], zi: &mut [f32], rr: &[f32], ri: &[f32], out: &mut [f64]) {
    for block in out.chunks_mut(FREQ_BLOCK) {
        let nf = block.len();
        let mut acc_r = [[0f32; LANES]; FREQ_BLOCK];
        let mut acc_i = [[0f32; LANES]; FREQ_BLOCK];
        let groups = zr
            .chunks_exact_mut(LANES)
            .zip(zi.chunks_exact_mut(LANES))
            .zip(rr.chunks_exact(LANES).zip(ri.chunks_exact(LANES)));
        for ((zr, zi), (rr, ri)) in groups {
            for l in 0..LANES {
                let (mut a, mut b) = (zr[l], zi[l]);
                for j in 0..nf {
                    acc_r[j][l] += a;
                    acc_i[j][l] += b;
                    // No FMA: Rust never contracts, and the AVX kernel uses separate mul/sub.
                    (a, b) = (a * rr[l] - b * ri[l], a * ri[l] + b * rr[l]);
                }
                (zr[l], zi[l]) = (a, b);
            }
        }
        for (j, o) in block.iter_mut().enumerate() {
            *o = finish(&acc_r[j], &acc_i[j]);
        }
    }
}

#[cfg(target_arch = "x86_64")]
fn kernel_avx_entry(zr: &mut [f32], zi: &mut [f32], rr: &[f32], ri: &[f32], out: &mut [f64]) {
    // SAFETY: only selected by `select_kernel` after the CPU reported AVX.
    unsafe { kernel_avx(zr, zi, rr, ri, out) }
}

/// [`kernel_portable`] with 256-bit registers: the same operations in the same order, the
/// accumulators of a block of frequencies in registers.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx")]
fn kernel_avx(zr: &mut [f32], zi: &mut [f32], rr: &[f32], ri: &[f32], out: &mut [f64]) {
    use std::arch::x86_64::*;
    let groups = zr.len() / LANES;
    assert!(
        zi.len() == zr.len()
            && rr.len() == zr.len()
            && ri.len() == zr.len()
            && zr.len().is_multiple_of(LANES)
    );
    let (pzr, pzi, prr, pri) = (zr.as_mut_ptr(), zi.as_mut_ptr(), rr.as_ptr(), ri.as_ptr());
    for block in out.chunks_mut(FREQ_BLOCK) {
        let nf = block.len();
        let mut acc_r = [_mm256_setzero_ps(); FREQ_BLOCK];
        let mut acc_i = [_mm256_setzero_ps(); FREQ_BLOCK];
        for g in 0..groups {
            let off = g * LANES;
            // SAFETY: off + LANES ≤ len of all four slices (asserted above); unaligned access.
            let (mut a, mut b, r, s) = unsafe {
                (
                    _mm256_loadu_ps(pzr.add(off)),
                    _mm256_loadu_ps(pzi.add(off)),
                    _mm256_loadu_ps(prr.add(off)),
                    _mm256_loadu_ps(pri.add(off)),
                )
            };
            if nf == FREQ_BLOCK {
                // Constant trip count: the accumulators stay in registers.
                for j in 0..FREQ_BLOCK {
                    acc_r[j] = _mm256_add_ps(acc_r[j], a);
                    acc_i[j] = _mm256_add_ps(acc_i[j], b);
                    (a, b) = (
                        _mm256_sub_ps(_mm256_mul_ps(a, r), _mm256_mul_ps(b, s)),
                        _mm256_add_ps(_mm256_mul_ps(a, s), _mm256_mul_ps(b, r)),
                    );
                }
            } else {
                for j in 0..nf {
                    acc_r[j] = _mm256_add_ps(acc_r[j], a);
                    acc_i[j] = _mm256_add_ps(acc_i[j], b);
                    (a, b) = (
                        _mm256_sub_ps(_mm256_mul_ps(a, r), _mm256_mul_ps(b, s)),
                        _mm256_add_ps(_mm256_mul_ps(a, s), _mm256_mul_ps(b, r)),
                    );
                }
            }
            // SAFETY: as for the loads.
            unsafe {
                _mm256_storeu_ps(pzr.add(off), a);
                _mm256_storeu_ps(pzi.add(off), b);
            }
        }
        for (j, o) in block.iter_mut().enumerate() {
            let (mut lr, mut li) = ([0f32; LANES], [0f32; LANES]);
            // SAFETY: each destination is an array of exactly 8 f32.
            unsafe {
                _mm256_storeu_ps(lr.as_mut_ptr(), acc_r[j]);
                _mm256_storeu_ps(li.as_mut_ptr(), acc_i[j]);
            }
            *o = finish(&lr, &li);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Incremental spectrum
// ---------------------------------------------------------------------------------------------

/// Frequencies per interleaved chain in [`SpectrumAccumulator`]'s update.
const ACC_LANES: usize = 8;
/// Steps between re-normalisations of the accumulator's f64 phasors.
const ACC_RENORM: usize = 64;

/// The complex spectrum `S(f_k) = Σ_i e^{−j2πf_k t_i}` kept up to date as events arrive and
/// leave (a sliding observation window): each push or removal costs `O(F)`, an analysis
/// `O(F + N)` instead of `O(F·N)`.
///
/// Phases are taken relative to an origin (the first event seen, reset on [`rebuild`]), which
/// only rotates `S` and leaves `|S|` unchanged. Removals subtract what the push added, so
/// rounding drifts slowly; the accumulator rebuilds itself exactly from the retained events
/// once the removals since the last rebuild exceed four times the events held (amortised `O(F)`
/// per removal).
///
/// [`rebuild`]: SpectrumAccumulator::rebuild
#[derive(Debug, Clone)]
pub struct SpectrumAccumulator {
    cfg: PeriodConfig,
    opts: AnalysisOptions,
    /// [`PeriodConfig::padded_grid`]: the band and its guards.
    grid: Grid,
    origin: Option<u64>,
    re: Vec<f64>,
    im: Vec<f64>,
    events: VecDeque<u64>,
    removed_since_rebuild: usize,
}

impl SpectrumAccumulator {
    /// An empty accumulator with the default [`AnalysisOptions`].
    pub fn new(cfg: &PeriodConfig) -> Result<Self, PeriodConfigError> {
        Self::with_options(cfg, &AnalysisOptions::default())
    }

    pub fn with_options(cfg: &PeriodConfig, opts: &AnalysisOptions) -> Result<Self, PeriodConfigError> {
        cfg.validate()?;
        opts.validate()?;
        let grid = cfg.padded_grid();
        let padded = grid.len.div_ceil(ACC_LANES) * ACC_LANES;
        Ok(SpectrumAccumulator {
            cfg: cfg.clone(),
            opts: opts.clone(),
            grid,
            origin: None,
            re: vec![0.0; padded],
            im: vec![0.0; padded],
            events: VecDeque::new(),
            removed_since_rebuild: 0,
        })
    }

    pub fn config(&self) -> &PeriodConfig {
        &self.cfg
    }

    /// Events held.
    pub fn len(&self) -> usize {
        self.events.len()
    }

    pub fn is_empty(&self) -> bool {
        self.events.is_empty()
    }

    /// The held events, oldest first.
    pub fn events(&self) -> impl Iterator<Item = u64> + '_ {
        self.events.iter().copied()
    }

    /// Span of the held events, ns.
    pub fn window_ns(&self) -> u64 {
        match (self.events.front(), self.events.back()) {
            (Some(a), Some(b)) => b - a,
            _ => 0,
        }
    }

    /// Adds one wake-up. Events are kept in time order; an out-of-order one is inserted in place.
    pub fn push(&mut self, t_ns: u64) {
        let origin = *self.origin.get_or_insert(t_ns);
        self.add(t_ns, origin, 1.0);
        match self.events.back() {
            Some(&last) if last > t_ns => {
                let at = self.events.partition_point(|&e| e <= t_ns);
                self.events.insert(at, t_ns);
            }
            _ => self.events.push_back(t_ns),
        }
    }

    pub fn extend<I: IntoIterator<Item = u64>>(&mut self, ts: I) {
        for t in ts {
            self.push(t);
        }
    }

    /// Removes and returns the oldest event.
    pub fn pop_oldest(&mut self) -> Option<u64> {
        let t = self.events.pop_front()?;
        if self.events.is_empty() {
            self.clear();
            return Some(t);
        }
        let origin = self.origin.unwrap_or(t);
        self.add(t, origin, -1.0);
        self.removed_since_rebuild += 1;
        if self.removed_since_rebuild > 4 * self.events.len().max(1024) {
            self.rebuild();
        }
        Some(t)
    }

    /// Removes the events older than `t_ns` (the sliding window's left edge); returns how many.
    pub fn expire_before(&mut self, t_ns: u64) -> usize {
        let mut n = 0;
        while self.events.front().is_some_and(|&e| e < t_ns) {
            self.pop_oldest();
            n += 1;
        }
        n
    }

    /// Forgets every event.
    pub fn clear(&mut self) {
        self.events.clear();
        self.origin = None;
        self.re.iter_mut().for_each(|x| *x = 0.0);
        self.im.iter_mut().for_each(|x| *x = 0.0);
        self.removed_since_rebuild = 0;
    }

    /// Recomputes the spectrum from the held events (origin reset to the oldest), discarding the
    /// rounding accumulated by removals.
    pub fn rebuild(&mut self) {
        let events: Vec<u64> = self.events.iter().copied().collect();
        self.clear();
        self.extend(events);
    }

    /// `|S(f_k)|` of the held events on the configured grid.
    pub fn spectrum(&self) -> Spectrum {
        let (g, band) = (self.cfg.guard_cells(), self.cfg.grid());
        Spectrum {
            f_start_hz: band.f_start,
            df_hz: band.df,
            amplitude: self.amplitudes()[g..g + band.len].to_vec(),
        }
    }

    fn amplitudes(&self) -> Vec<f64> {
        self.re[..self.grid.len]
            .iter()
            .zip(&self.im)
            .map(|(r, i)| (r * r + i * i).sqrt())
            .collect()
    }

    /// Analysis of the held events (as [`analyse`] on them, up to rounding of the spectrum).
    pub fn analyse(&self) -> PeriodEstimate {
        self.analyse_detailed().estimate
    }

    /// [`analyse_detailed`] of the held events.
    pub fn analyse_detailed(&self) -> Analysis {
        let n = self.events.len();
        let window = self.window_ns();
        if let Some(early) = precheck(n, window, &self.cfg, &self.opts) {
            return early;
        }
        let t0 = self.events[0];
        let tau: Vec<f64> = self.events.iter().map(|&t| (t - t0) as f64 * 1e-9).collect();
        // A window longer than `fine_grid_from_ns` is analysed on a finer grid than the
        // accumulator keeps: that spectrum is computed from the events.
        let band = self.cfg.grid();
        let det = Detection::compute(&tau, window, band, &self.cfg, &self.opts, Some(self.amplitudes()));
        analyse_core(&det, band, &tau, window, &self.cfg, &self.opts)
    }

    /// Adds `sign · e^{−j2πf_k(t − origin)}` to every frequency: [`ACC_LANES`] interleaved
    /// recurrence chains (frequencies `L·q + l`) stepping by `r^L`, re-normalised every
    /// [`ACC_RENORM`] steps. The loop is compiled twice, with and without AVX (same operations,
    /// no FMA, so the same results), and chosen at run time.
    fn add(&mut self, t_ns: u64, origin: u64, sign: f64) {
        let t = (t_ns as i128 - origin as i128) as f64 * 1e-9;
        let g = self.grid;
        let turn = |f: f64| (-TAU * (f * t).fract()).sin_cos();
        let seeds: [(f64, f64); ACC_LANES] = std::array::from_fn(|l| turn(g.f_start + l as f64 * g.df));
        let z = [seeds.map(|(_, c)| sign * c), seeds.map(|(s, _)| sign * s)];
        let step = turn(ACC_LANES as f64 * g.df);
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx") {
                // SAFETY: the CPU reported AVX.
                unsafe { accumulate_avx(&mut self.re, &mut self.im, z, step) };
                return;
            }
        }
        accumulate(&mut self.re, &mut self.im, z, step);
    }
}

/// The loop of [`SpectrumAccumulator::add`]: `S_k += z_k`, `z_{k+L} = z_k·r^L`, written as
/// straight-line operations on lane arrays so that it vectorises.
#[inline(always)]
fn accumulate(re: &mut [f64], im: &mut [f64], mut z: [[f64; ACC_LANES]; 2], (sr, cr): (f64, f64)) {
    let block = ACC_LANES * ACC_RENORM;
    for (re, im) in re.chunks_mut(block).zip(im.chunks_mut(block)) {
        for (re, im) in re.chunks_exact_mut(ACC_LANES).zip(im.chunks_exact_mut(ACC_LANES)) {
            for l in 0..ACC_LANES {
                re[l] += z[0][l];
                im[l] += z[1][l];
            }
            let [a, b] = z;
            z = [
                std::array::from_fn(|l| a[l] * cr - b[l] * sr),
                std::array::from_fn(|l| a[l] * sr + b[l] * cr),
            ];
        }
        // One Newton step towards |z| = 1 (|sign| = 1): the magnitude error of f64 rotations
        // is ~1e-16 per step; this keeps it from ever growing.
        let k: [f64; ACC_LANES] =
            std::array::from_fn(|l| 1.5 - 0.5 * (z[0][l] * z[0][l] + z[1][l] * z[1][l]));
        for l in 0..ACC_LANES {
            z[0][l] *= k[l];
            z[1][l] *= k[l];
        }
    }
}

/// [`accumulate`] compiled for AVX.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx")]
fn accumulate_avx(re: &mut [f64], im: &mut [f64], z: [[f64; ACC_LANES]; 2], step: (f64, f64)) {
    accumulate(re, im, z, step)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn train(period_ns: u64, n: usize, offset: u64) -> Vec<u64> {
        (0..n as u64).map(|i| offset + i * period_ns).collect()
    }

    #[test]
    fn defaults_are_valid_and_paper_keeps_k_max() {
        let d = PeriodConfig::default();
        d.validate().unwrap();
        assert_eq!(d.k_max, 10);
        let p = AnalysisOptions::paper();
        assert!(!p.octave_check && !p.refine);
        assert!(AnalysisOptions {
            min_cycles: f64::NAN,
            ..p.clone()
        }
        .validate()
        .is_err());
        assert!(AnalysisOptions {
            max_false_alarm: 0.0,
            ..p.clone()
        }
        .validate()
        .is_err());
        assert!(AnalysisOptions {
            max_false_alarm: 1.5,
            ..p
        }
        .validate()
        .is_err());
    }

    #[test]
    fn nonsense_configs_are_rejected() {
        let d = PeriodConfig::default();
        let bad = [
            PeriodConfig {
                f_min_hz: 0.0,
                ..d.clone()
            },
            PeriodConfig {
                f_min_hz: f64::NAN,
                ..d.clone()
            },
            PeriodConfig {
                f_max_hz: 5.0,
                ..d.clone()
            },
            PeriodConfig {
                f_max_hz: 1.0,
                ..d.clone()
            },
            PeriodConfig {
                df_hz: 0.0,
                ..d.clone()
            },
            PeriodConfig {
                df_hz: -0.1,
                ..d.clone()
            },
            PeriodConfig {
                df_hz: 1e-9,
                ..d.clone()
            },
            PeriodConfig {
                alpha: -1.0,
                ..d.clone()
            },
            PeriodConfig {
                k_max: 0,
                ..d.clone()
            },
            PeriodConfig {
                eps_hz: f64::INFINITY,
                ..d.clone()
            },
        ];
        for c in bad {
            assert!(c.validate().is_err(), "{c:?} accepted");
            assert!(SpectrumAccumulator::new(&c).is_err());
            match analyse(&train(10_000_000, 100, 0), &c) {
                PeriodEstimate::NotPeriodic { reason } => {
                    assert!(reason.contains("invalid configuration"), "{reason}")
                }
                e => panic!("{e:?}"),
            }
        }
    }

    #[test]
    fn grid_covers_f_max() {
        let g = PeriodConfig::default().grid();
        assert_eq!(g.len, 4951);
        assert!((g.freq(g.len - 1) - 500.0).abs() < 1e-9);
        let g = PeriodConfig {
            f_min_hz: 1.0,
            f_max_hz: 2.05,
            df_hz: 0.1,
            ..PeriodConfig::default()
        }
        .grid();
        assert_eq!(g.len, 11);
    }

    #[test]
    fn fast_spectrum_matches_direct_sum() {
        // Timestamps far from 0 and irregular: the fast path must agree with eq. 4 computed
        // with one sin/cos per pair, to within f32 rounding (relative to N).
        let ts: Vec<u64> = (0..157u64)
            .map(|i| 5_678_000_000_000 + i * 6_397_113 + (i * i * 7919) % 900_000)
            .collect();
        let cfg = PeriodConfig::default();
        let fast = spectrum(&ts, &cfg).unwrap();
        let direct = spectrum_direct(&ts, &cfg).unwrap();
        assert_eq!(fast.len(), direct.len());
        let worst = fast
            .amplitude
            .iter()
            .zip(&direct.amplitude)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0, f64::max);
        assert!(worst < 1e-4 * ts.len() as f64, "max |fast − direct| = {worst}");
        // A wrong rotation (e.g. +j instead of −j, a wrong step) would be off by O(N) somewhere.
        let peak = direct.amplitude.iter().copied().fold(0.0, f64::max);
        assert!(peak > 100.0);
    }

    #[test]
    fn portable_and_avx_kernels_agree_bit_for_bit() {
        let n = 77usize;
        let padded = n.div_ceil(LANES) * LANES;
        let mk = |seed: u32| -> Vec<f32> {
            (0..padded)
                .map(|i| {
                    if i < n {
                        ((i as f32 + seed as f32) * 0.37).sin()
                    } else {
                        0.0
                    }
                })
                .collect()
        };
        let (rr, ri) = (mk(1), mk(2));
        let (mut zr1, mut zi1) = (mk(3), mk(4));
        let (mut zr2, mut zi2) = (zr1.clone(), zi1.clone());
        let mut o1 = vec![0.0; 50];
        let mut o2 = vec![0.0; 50];
        kernel_portable(&mut zr1, &mut zi1, &rr, &ri, &mut o1);
        select_kernel()(&mut zr2, &mut zi2, &rr, &ri, &mut o2);
        assert_eq!(o1, o2);
        assert_eq!(zr1, zr2);
        assert_eq!(zi1, zi2);
    }

    #[test]
    fn accumulator_loops_agree_bit_for_bit() {
        let n = 4 * ACC_LANES * ACC_RENORM + 3 * ACC_LANES;
        let z = [
            std::array::from_fn(|l| (l as f64 * 0.3).cos()),
            std::array::from_fn(|l| -(l as f64 * 0.3).sin()),
        ];
        let step = (-0.0123f64).sin_cos();
        let (mut re1, mut im1) = (vec![0.5; n], vec![-0.25; n]);
        let (mut re2, mut im2) = (re1.clone(), im1.clone());
        accumulate(&mut re1, &mut im1, z, step);
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx") {
            // SAFETY: the CPU reported AVX.
            unsafe { accumulate_avx(&mut re2, &mut im2, z, step) };
        } else {
            accumulate(&mut re2, &mut im2, z, step);
        }
        #[cfg(not(target_arch = "x86_64"))]
        accumulate(&mut re2, &mut im2, z, step);
        assert_eq!(re1, re2);
        assert_eq!(im1, im2);
        // And it is the sum it claims: S_k += e^{-j(θ_l + k·φ)} for the chain of lane l.
        let k = 2 * ACC_LANES * ACC_RENORM + 5;
        let (lane, q) = (k % ACC_LANES, k / ACC_LANES);
        let angle = -(lane as f64 * 0.3) - 0.0123 * q as f64;
        assert!((re1[k] - 0.5 - angle.cos()).abs() < 1e-12);
        assert!((im1[k] + 0.25 - angle.sin()).abs() < 1e-12);
    }

    #[test]
    fn accumulator_matches_batch_spectrum_and_slides() {
        let cfg = PeriodConfig::default();
        let ts: Vec<u64> = (0..300u64)
            .map(|i| 1_000_000_000 + i * 9_876_543 + (i * 7919) % 300_000)
            .collect();
        let mut acc = SpectrumAccumulator::new(&cfg).unwrap();
        acc.extend(ts.iter().copied());
        let batch = spectrum(&ts, &cfg).unwrap();
        let inc = acc.spectrum();
        let worst = batch
            .amplitude
            .iter()
            .zip(&inc.amplitude)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0, f64::max);
        assert!(worst < 1e-3 * ts.len() as f64, "{worst}");
        // Slide: drop the first 100 events, compare with the batch spectrum of the rest.
        let cut = ts[100];
        assert_eq!(acc.expire_before(cut), 100);
        let batch = spectrum(&ts[100..], &cfg).unwrap();
        let inc = acc.spectrum();
        let worst = batch
            .amplitude
            .iter()
            .zip(&inc.amplitude)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0, f64::max);
        assert!(worst < 1e-3 * ts.len() as f64, "{worst}");
        assert_eq!(acc.len(), 200);
        assert_eq!(acc.window_ns(), ts[299] - ts[100]);
    }

    #[test]
    fn accumulator_out_of_order_and_clear() {
        let cfg = PeriodConfig::default();
        let mut acc = SpectrumAccumulator::new(&cfg).unwrap();
        acc.extend([30, 10, 20]);
        assert_eq!(acc.events().collect::<Vec<_>>(), vec![10, 20, 30]);
        assert_eq!(acc.pop_oldest(), Some(10));
        acc.clear();
        assert!(acc.is_empty());
        assert!(acc.spectrum().amplitude.iter().all(|&a| a == 0.0));
        assert!(!acc.analyse().is_periodic());
    }

    #[test]
    fn perfect_train_is_found_and_refined() {
        // 40 ms exactly, 1 s: the grid has 25.0 Hz exactly; refinement must stay there.
        let ts = train(40_000_000, 26, 123_456_789);
        match analyse(&ts, &PeriodConfig::default()) {
            PeriodEstimate::Periodic {
                period_ns,
                confidence,
                candidates,
                ..
            } => {
                assert!((period_ns as i64 - 40_000_000).abs() < 4_000, "{period_ns}");
                assert!(confidence > 0.5, "{confidence}");
                assert!((candidates[0].freq_hz - 25.0).abs() < 0.06);
            }
            e => panic!("{e:?}"),
        }
    }

    #[test]
    fn off_grid_rate_is_refined_beyond_the_grid() {
        // 8.22 ms = 121.6545 Hz, between grid samples; the paper's heuristic alone is off by up
        // to δf/2, the refinement must get much closer.
        let ts = train(8_220_000, 122, 0);
        let f_true = 1e9 / 8_220_000.0;
        let refined = analyse(&ts, &PeriodConfig::default()).freq_hz().unwrap();
        let grid = analyse_detailed(&ts, &PeriodConfig::default(), &AnalysisOptions::paper())
            .unwrap()
            .estimate
            .freq_hz()
            .unwrap();
        assert!((refined - f_true).abs() < 1e-3, "refined {refined} vs {f_true}");
        assert!((grid - f_true).abs() > 1e-3, "grid {grid} vs {f_true}");
        assert!((grid - f_true).abs() <= 0.051);
    }

    #[test]
    fn too_few_and_degenerate_inputs() {
        let cfg = PeriodConfig::default();
        for ts in [
            vec![],
            vec![5],
            vec![7, 7, 7, 7, 7, 7, 7],
            vec![1, 2, 3, 4, 5, 6, 7, 8],
        ] {
            match analyse(&ts, &cfg) {
                PeriodEstimate::NotPeriodic { reason } => assert!(!reason.is_empty()),
                e => panic!("{ts:?}: {e:?}"),
            }
        }
    }

    #[test]
    fn harmonic_relation() {
        assert!(harmonically_related(20.0, 10.0, 10, 0.5, 0.1));
        assert!(harmonically_related(10.0, 30.05, 10, 0.5, 0.1));
        assert!(harmonically_related(175.0, 25.1, 10, 0.5, 0.1));
        assert!(!harmonically_related(15.0, 10.0, 10, 0.5, 0.1));
        assert!(!harmonically_related(10.0, 7.3, 10, 0.5, 0.1));
        assert!(!harmonically_related(180.0, 25.0, 10, 0.5, 0.1));
    }
}
