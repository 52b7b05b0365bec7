//! Execution-time predictors: the "predictor" block of the feedback loops.
//!
//! - [`Percentile`]: the LFS++ percentile estimator (lfspp-legacy-multimedia.txt §5.3): over the
//!   last N samples, the p-th percentile with p = (N − j)/N is the (j+1)-th largest sample
//!   (N = 16: p = 1 → maximum, p = 0.9375 → second maximum).
//! - [`MovingAverage`], [`Ewma`]: the classic alternatives the papers compare against.
//! - [`AsymmetricEwma`]: eq. 4 of adaptive-deadline-audio-android.txt §5.2,
//!   C_e\[k+1\] = α·C_m + (1−α)·C_e\[k\] with α = 0.95 when the sample rises above the estimate and
//!   α = 0.1 when it falls — react fast to load increases, slowly to decreases.
//! - [`WorkUnitsTable`]: the audio paper's workUnits map (§5.2): one asymmetric EWMA per workUnits
//!   value and a four-case lookup (empty → configured maximum, exact hit, below the smallest key,
//!   above the largest key → least-squares line).
//! - [`WorkUnitsPercentiles`]: one LFS++ [`Percentile`] estimator per workUnits value — the
//!   dispersion of the measured runtimes of each workUnits value, from which the proactive
//!   controller's percentile margin mode sizes the budget (lfspp §5.3 applied to the audio paper's
//!   per-workUnits statistics).
//!
//! All samples and predictions are integer nanoseconds. Float state (EWMAs, regression) is rounded
//! to the nearest nanosecond on output: a nanosecond is far below any budget that matters, and
//! rounding keeps the result independent of tiny float representation errors.

use std::collections::{BTreeMap, VecDeque};

use serde::Serialize;

/// Why a predictor's parameters were rejected.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PredictorError {
    #[error("the history length N must be at least 1")]
    EmptyHistory,
    #[error("percentile p = {0} must be in (0, 1]")]
    BadPercentile(f64),
    #[error("smoothing constant {name} = {value} must be in (0, 1]")]
    BadAlpha { name: &'static str, value: f64 },
    #[error("min_samples = {min_samples} must be in [1, N = {window}]")]
    BadMinSamples { min_samples: usize, window: usize },
}

/// A one-step-ahead predictor of a quantity measured in nanoseconds.
pub trait Predictor {
    /// Feeds one measured sample (ns).
    fn observe(&mut self, sample: u64);
    /// The prediction for the next sample, `None` before any sample was observed.
    fn predict(&self) -> Option<u64>;
    /// Forgets the history and restarts from a single sample equal to `value` — what the LFS++
    /// power manager does after a frequency switch (lfspp §6.3).
    fn reset_to(&mut self, value: u64);
}

/// Guards the float → index conversion of the percentile rule against representation error:
/// N·(1 − p) for p = 0.9, N = 10 evaluates to 0.9999999999999998 and must still mean j = 1.
const INDEX_EPS: f64 = 1e-9;

/// The LFS++ percentile estimator (lfspp §5.3): the exact p-th percentile of the last N samples.
///
/// **Index rule.** For p = (N − j)/N the estimator returns the (j+1)-th largest of the last N
/// samples, i.e. `j = ⌊N·(1 − p)⌋` samples are allowed above the estimate. For N = 16, p = 1 gives
/// j = 0 (the maximum) and p = 0.9375 gives j = 1 (the second maximum), as in the paper. A p that
/// is not of the form (N − j)/N rounds j *down*, i.e. towards the more conservative (larger)
/// estimate. While fewer than N samples are held (start-up, or after [`Predictor::reset_to`]), the
/// same rule is applied to the m samples held, j = ⌊m·(1 − p)⌋, so the estimate is the p-th
/// percentile of the evidence available (a single sample predicts itself).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Percentile {
    n: usize,
    p: f64,
    ring: VecDeque<u64>,
}

impl Percentile {
    pub fn new(n: usize, p: f64) -> Result<Self, PredictorError> {
        if n == 0 {
            return Err(PredictorError::EmptyHistory);
        }
        if !(p > 0.0 && p <= 1.0) {
            return Err(PredictorError::BadPercentile(p));
        }
        Ok(Percentile {
            n,
            p,
            ring: VecDeque::with_capacity(n),
        })
    }

    /// The history length N.
    pub fn n(&self) -> usize {
        self.n
    }

    /// The percentile p.
    pub fn p(&self) -> f64 {
        self.p
    }

    /// The 0-based rank from the top (0 = maximum) used when `m` samples are held:
    /// j = ⌊m·(1 − p)⌋ (see the type's documentation).
    pub fn rank_for(&self, m: usize) -> usize {
        let j = (m as f64 * (1.0 - self.p) + INDEX_EPS).floor() as usize;
        j.min(m.saturating_sub(1))
    }

    /// Samples currently held (oldest first).
    pub fn samples(&self) -> impl Iterator<Item = u64> + '_ {
        self.ring.iter().copied()
    }
}

impl Predictor for Percentile {
    fn observe(&mut self, sample: u64) {
        if self.ring.len() == self.n {
            self.ring.pop_front();
        }
        self.ring.push_back(sample);
    }

    fn predict(&self) -> Option<u64> {
        if self.ring.is_empty() {
            return None;
        }
        let j = self.rank_for(self.ring.len());
        let mut v: Vec<u64> = self.ring.iter().copied().collect();
        // Descending order: index j is the (j+1)-th maximum.
        let (_, nth, _) = v.select_nth_unstable_by(j, |a, b| b.cmp(a));
        Some(*nth)
    }

    fn reset_to(&mut self, value: u64) {
        self.ring.clear();
        self.ring.push_back(value);
    }
}

/// Mean of the last N samples (rounded to the nearest ns).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MovingAverage {
    n: usize,
    ring: VecDeque<u64>,
    sum: u128,
}

impl MovingAverage {
    pub fn new(n: usize) -> Result<Self, PredictorError> {
        if n == 0 {
            return Err(PredictorError::EmptyHistory);
        }
        Ok(MovingAverage {
            n,
            ring: VecDeque::with_capacity(n),
            sum: 0,
        })
    }

    pub fn n(&self) -> usize {
        self.n
    }
}

impl Predictor for MovingAverage {
    fn observe(&mut self, sample: u64) {
        if self.ring.len() == self.n {
            if let Some(old) = self.ring.pop_front() {
                self.sum -= old as u128;
            }
        }
        self.ring.push_back(sample);
        self.sum += sample as u128;
    }

    fn predict(&self) -> Option<u64> {
        let m = self.ring.len() as u128;
        (m > 0).then(|| ((self.sum + m / 2) / m) as u64)
    }

    fn reset_to(&mut self, value: u64) {
        self.ring.clear();
        self.ring.push_back(value);
        self.sum = value as u128;
    }
}

fn check_alpha(name: &'static str, value: f64) -> Result<(), PredictorError> {
    if value > 0.0 && value <= 1.0 {
        Ok(())
    } else {
        Err(PredictorError::BadAlpha { name, value })
    }
}

fn round_ns(x: f64) -> u64 {
    // Negative values cannot arise from non-negative samples; clamp anyway so a bad float never
    // wraps into a huge budget.
    if x <= 0.0 {
        0
    } else {
        x.round() as u64
    }
}

/// Exponentially weighted moving average, e = α·x + (1 − α)·e. The first sample initialises e
/// (the papers leave C_e\[0\] unspecified; starting from the first measurement avoids a bias towards
/// an arbitrary constant).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Ewma {
    alpha: f64,
    state: Option<f64>,
}

impl Ewma {
    pub fn new(alpha: f64) -> Result<Self, PredictorError> {
        check_alpha("alpha", alpha)?;
        Ok(Ewma { alpha, state: None })
    }

    pub fn alpha(&self) -> f64 {
        self.alpha
    }

    /// The unrounded estimate.
    pub fn value(&self) -> Option<f64> {
        self.state
    }
}

impl Predictor for Ewma {
    fn observe(&mut self, sample: u64) {
        let x = sample as f64;
        self.state = Some(match self.state {
            None => x,
            Some(e) => self.alpha * x + (1.0 - self.alpha) * e,
        });
    }

    fn predict(&self) -> Option<u64> {
        self.state.map(round_ns)
    }

    fn reset_to(&mut self, value: u64) {
        self.state = Some(value as f64);
    }
}

/// Asymmetric EWMA, eq. 4 of adaptive-deadline-audio-android.txt §5.2:
/// C_e\[k+1\] = α·C_m + (1 − α)·C_e\[k\] with α = `rise` when C_m > C_e\[k\], else α = `fall`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AsymmetricEwma {
    rise: f64,
    fall: f64,
    state: Option<f64>,
}

impl AsymmetricEwma {
    /// The audio paper's constants: α = 0.95 on a rising sample, 0.1 on a falling one.
    pub const AUDIO_RISE: f64 = 0.95;
    pub const AUDIO_FALL: f64 = 0.1;

    pub fn new(rise: f64, fall: f64) -> Result<Self, PredictorError> {
        check_alpha("rise", rise)?;
        check_alpha("fall", fall)?;
        Ok(AsymmetricEwma {
            rise,
            fall,
            state: None,
        })
    }

    /// α = 0.95 rising, 0.1 falling (eq. 4).
    pub fn audio_paper() -> Self {
        AsymmetricEwma {
            rise: Self::AUDIO_RISE,
            fall: Self::AUDIO_FALL,
            state: None,
        }
    }

    pub fn rise(&self) -> f64 {
        self.rise
    }

    pub fn fall(&self) -> f64 {
        self.fall
    }

    /// The unrounded estimate C_e.
    pub fn value(&self) -> Option<f64> {
        self.state
    }
}

impl Predictor for AsymmetricEwma {
    fn observe(&mut self, sample: u64) {
        let x = sample as f64;
        self.state = Some(match self.state {
            None => x,
            Some(e) => {
                let a = if x > e { self.rise } else { self.fall };
                a * x + (1.0 - a) * e
            }
        });
    }

    fn predict(&self) -> Option<u64> {
        self.state.map(round_ns)
    }

    fn reset_to(&mut self, value: u64) {
        self.state = Some(value as f64);
    }
}

/// Which of the lookup cases of [`WorkUnitsTable::predict_case`] answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LookupCase {
    /// No statistics yet: the configured maximum runtime.
    Empty,
    /// The workUnits value has its own estimate.
    Exact,
    /// Below every known workUnits value: the smallest key's estimate (conservative).
    BelowSmallest,
    /// Between two known values (not covered by the paper): the larger of the two neighbours'
    /// estimates, the conservative extension of the "below smallest" rule.
    Between,
    /// Above every known workUnits value: the least-squares line through the table, ≥ 0.
    AboveLargest,
}

/// The audio paper's workUnits map (adaptive-deadline-audio-android.txt §5.2): an independent
/// [`AsymmetricEwma`] (eq. 4) per observed workUnits value.
///
/// The paper uses a hashmap because it needs no prior knowledge of the range of workUnits and
/// gives cheap access. This is a `BTreeMap`: same properties, plus ordered keys for the
/// "smallest/largest key" cases in O(log n), and — the deciding reason — a deterministic iteration
/// order, so the least-squares sums are bit-for-bit reproducible (std's `HashMap` iterates in a
/// per-process random order).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WorkUnitsTable {
    max_runtime: u64,
    rise: f64,
    fall: f64,
    map: BTreeMap<u64, AsymmetricEwma>,
}

impl WorkUnitsTable {
    /// A table answering `max_runtime` (ns) while empty, with the paper's α = 0.95/0.1.
    pub fn new(max_runtime: u64) -> Self {
        WorkUnitsTable {
            max_runtime,
            rise: AsymmetricEwma::AUDIO_RISE,
            fall: AsymmetricEwma::AUDIO_FALL,
            map: BTreeMap::new(),
        }
    }

    /// A table with other EWMA constants.
    pub fn with_alphas(max_runtime: u64, rise: f64, fall: f64) -> Result<Self, PredictorError> {
        AsymmetricEwma::new(rise, fall)?;
        Ok(WorkUnitsTable {
            max_runtime,
            rise,
            fall,
            map: BTreeMap::new(),
        })
    }

    /// The answer while the table is empty (ns).
    pub fn max_runtime(&self) -> u64 {
        self.max_runtime
    }

    pub fn set_max_runtime(&mut self, max_runtime: u64) {
        self.max_runtime = max_runtime;
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Updates the estimate of `units` with a measured normalised runtime `c_m` (ns), eq. 4.
    pub fn observe(&mut self, units: u64, c_m: u64) {
        let (rise, fall) = (self.rise, self.fall);
        self.map
            .entry(units)
            .or_insert_with(|| AsymmetricEwma {
                rise,
                fall,
                state: None,
            })
            .observe(c_m);
    }

    /// The stored (unrounded) estimate for exactly `units`.
    pub fn estimate(&self, units: u64) -> Option<f64> {
        self.map.get(&units).and_then(|e| e.value())
    }

    /// Forgets everything.
    pub fn clear(&mut self) {
        self.map.clear();
    }

    /// Resets every entry to `value` (one sample) — the power manager's history reset.
    pub fn reset_all_to(&mut self, value: u64) {
        for e in self.map.values_mut() {
            e.reset_to(value);
        }
    }

    /// The predicted runtime (ns) of a job doing `units` work units.
    pub fn predict(&self, units: u64) -> u64 {
        self.predict_case(units).0
    }

    /// The prediction and which case produced it.
    pub fn predict_case(&self, units: u64) -> (u64, LookupCase) {
        let value = |e: &AsymmetricEwma| e.value().unwrap_or(self.max_runtime as f64);
        let (Some((&lo_key, lo)), Some((&hi_key, _))) =
            (self.map.first_key_value(), self.map.last_key_value())
        else {
            return (self.max_runtime, LookupCase::Empty);
        };
        if let Some(e) = self.map.get(&units) {
            return (round_ns(value(e)), LookupCase::Exact);
        }
        if units < lo_key {
            return (round_ns(value(lo)), LookupCase::BelowSmallest);
        }
        if units < hi_key {
            let below = self.map.range(..units).next_back().map(|(_, e)| value(e));
            let above = self.map.range(units..).next().map(|(_, e)| value(e));
            let v = below.unwrap_or(0.0).max(above.unwrap_or(0.0));
            return (round_ns(v), LookupCase::Between);
        }
        let points: Vec<(f64, f64)> = self.map.iter().map(|(&u, e)| (u as f64, value(e))).collect();
        (
            round_ns(extrapolate(&points, units as f64)),
            LookupCase::AboveLargest,
        )
    }
}

/// One LFS++ percentile estimator (lfspp §5.3, [`Percentile`]) per workUnits value: the last N
/// measured runtimes of each value, so a budget can be sized from the *dispersion* of a value's
/// runtimes rather than from a fixed margin over their mean (eq. 5 of the audio paper).
///
/// Unlike [`WorkUnitsTable`] there is no interpolation: a percentile of one value's runtimes says
/// nothing about another value's spread, so a value with fewer than `min_samples` samples answers
/// `None` and the caller falls back to its table-based estimate.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WorkUnitsPercentiles {
    /// An empty estimator of the configured N and p, cloned for each new value.
    proto: Percentile,
    /// The same N at p = 0.5, for its rank rule.
    median: Percentile,
    min_samples: usize,
    map: BTreeMap<u64, Percentile>,
}

impl WorkUnitsPercentiles {
    /// The p-th percentile of the last `window` runtimes of each value, trusted from
    /// `min_samples` samples on (1 ≤ `min_samples` ≤ `window`).
    pub fn new(window: usize, p: f64, min_samples: usize) -> Result<Self, PredictorError> {
        let proto = Percentile::new(window, p)?;
        if min_samples == 0 || min_samples > window {
            return Err(PredictorError::BadMinSamples { min_samples, window });
        }
        Ok(WorkUnitsPercentiles {
            proto,
            median: Percentile::new(window, 0.5)?,
            min_samples,
            map: BTreeMap::new(),
        })
    }

    /// The history length N.
    pub fn window(&self) -> usize {
        self.proto.n()
    }

    /// The percentile p.
    pub fn p(&self) -> f64 {
        self.proto.p()
    }

    /// Samples a value needs before its percentile is trusted.
    pub fn min_samples(&self) -> usize {
        self.min_samples
    }

    /// Records a measured runtime (ns) of a job of `units` work units.
    pub fn observe(&mut self, units: u64, c_m: u64) {
        let proto = &self.proto;
        self.map
            .entry(units)
            .or_insert_with(|| proto.clone())
            .observe(c_m);
    }

    /// Samples held for `units`.
    pub fn samples(&self, units: u64) -> usize {
        self.map.get(&units).map_or(0, |e| e.samples().count())
    }

    /// The p-th percentile of `units`' recent runtimes, `None` with fewer than `min_samples`.
    pub fn percentile(&self, units: u64) -> Option<u64> {
        self.quantile(units, &self.proto)
    }

    /// The median of `units`' recent runtimes (the same rank rule at p = 0.5), `None` with fewer
    /// than `min_samples`.
    pub fn median(&self, units: u64) -> Option<u64> {
        self.quantile(units, &self.median)
    }

    /// The largest of `units`' recent runtimes, `None` with fewer than `min_samples`.
    pub fn max(&self, units: u64) -> Option<u64> {
        let e = self.map.get(&units)?;
        if e.samples().count() < self.min_samples {
            return None;
        }
        e.samples().max()
    }

    fn quantile(&self, units: u64, rule: &Percentile) -> Option<u64> {
        let mut v: Vec<u64> = self.map.get(&units)?.samples().collect();
        if v.len() < self.min_samples {
            return None;
        }
        let j = rule.rank_for(v.len());
        // Descending order: index j is the (j+1)-th maximum, as in `Percentile::predict`.
        let (_, nth, _) = v.select_nth_unstable_by(j, |a, b| b.cmp(a));
        Some(*nth)
    }

    /// Distinct workUnits values seen.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Forgets everything.
    pub fn clear(&mut self) {
        self.map.clear();
    }
}

/// Least-squares line y = a + b·x through `points`, evaluated at `x`, clamped at 0.
///
/// With a single point the line is undetermined; we take the line through the origin and that
/// point (proportional scaling, the paper's "runtime is linear in workUnits" assumption with no
/// fixed cost). If the real cost has a positive fixed part this over-estimates, which is the safe
/// side; with the single key at 0 units there is no slope to scale and the point's value is used.
pub fn extrapolate(points: &[(f64, f64)], x: f64) -> f64 {
    let y = match points {
        [] => 0.0,
        [(x0, y0)] => {
            if *x0 > 0.0 {
                y0 * x / x0
            } else {
                *y0
            }
        }
        _ => {
            let (a, b) = least_squares(points);
            a + b * x
        }
    };
    y.max(0.0)
}

/// Ordinary least squares through ≥ 2 points with distinct x: returns (intercept, slope).
pub fn least_squares(points: &[(f64, f64)]) -> (f64, f64) {
    let n = points.len() as f64;
    let mx = points.iter().map(|p| p.0).sum::<f64>() / n;
    let my = points.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = points.iter().map(|p| (p.0 - mx) * (p.0 - mx)).sum();
    let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    if sxx == 0.0 {
        return (my, 0.0);
    }
    let b = sxy / sxx;
    (my - b * mx, b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentile_index_rule_pinned_to_lfspp() {
        // lfspp §5.3: N = 16, p = 1.0 (j = 0) → maximum; p = 0.9375 (j = 1) → second maximum.
        let mut max = Percentile::new(16, 1.0).unwrap();
        let mut second = Percentile::new(16, 0.9375).unwrap();
        let mut third = Percentile::new(16, 0.875).unwrap();
        assert_eq!(second.rank_for(16), 1);
        assert_eq!(max.rank_for(16), 0);
        assert_eq!(third.rank_for(16), 2);
        for s in [5u64, 90, 12, 70, 33, 100, 1, 2, 3, 4, 6, 7, 8, 9, 10, 11] {
            max.observe(s);
            second.observe(s);
            third.observe(s);
        }
        assert_eq!(max.predict(), Some(100));
        assert_eq!(second.predict(), Some(90));
        assert_eq!(third.predict(), Some(70));
        // The ring forgets the oldest sample: pushing one more drops 5, then 90 after the next.
        second.observe(0);
        assert_eq!(second.predict(), Some(90));
        second.observe(0);
        assert_eq!(second.predict(), Some(70), "90 left the window of the last 16");
    }

    #[test]
    fn percentile_index_rule_is_robust_to_float_error_and_partial_history() {
        // 10·(1 − 0.9) = 0.9999999999999998 in f64, must still be j = 1.
        assert_eq!(Percentile::new(10, 0.9).unwrap().rank_for(10), 1);
        // p between (N−1)/N and 1 rounds j down: the maximum (conservative).
        assert_eq!(Percentile::new(16, 0.95).unwrap().rank_for(16), 0);
        // With m < N samples, j = ⌊m(1 − p)⌋: 8 samples at p = 0.9375 → j = 0 (maximum).
        let mut p = Percentile::new(16, 0.9375).unwrap();
        assert_eq!(p.predict(), None);
        for s in [4u64, 8, 6, 2, 1, 3, 5, 7] {
            p.observe(s);
        }
        assert_eq!(p.predict(), Some(8));
        p.reset_to(42);
        assert_eq!(p.predict(), Some(42));
        assert_eq!(p.samples().collect::<Vec<_>>(), vec![42]);
        assert!(Percentile::new(0, 0.5).is_err());
        assert!(Percentile::new(4, 0.0).is_err());
        assert!(Percentile::new(4, 1.1).is_err());
    }

    #[test]
    fn moving_average_and_ewma() {
        let mut m = MovingAverage::new(3).unwrap();
        for s in [10u64, 20, 30, 40] {
            m.observe(s);
        }
        assert_eq!(m.predict(), Some(30)); // (20 + 30 + 40)/3
        m.observe(41);
        assert_eq!(m.predict(), Some(37)); // 111/3
        m.reset_to(5);
        assert_eq!(m.predict(), Some(5));

        let mut e = Ewma::new(0.5).unwrap();
        e.observe(100);
        e.observe(200);
        assert_eq!(e.predict(), Some(150));
        e.observe(0);
        assert_eq!(e.predict(), Some(75));
        assert!(Ewma::new(0.0).is_err());
    }

    #[test]
    fn asymmetric_ewma_uses_the_audio_paper_constants() {
        // eq. 4: α = 0.95 when C_m > C_e, α = 0.1 otherwise.
        let mut e = AsymmetricEwma::audio_paper();
        assert_eq!((e.rise(), e.fall()), (0.95, 0.1));
        e.observe(1000);
        assert_eq!(e.predict(), Some(1000));
        e.observe(2000); // rising: 0.95·2000 + 0.05·1000 = 1950
        assert_eq!(e.predict(), Some(1950));
        e.observe(1000); // falling: 0.1·1000 + 0.9·1950 = 1855
        assert_eq!(e.predict(), Some(1855));
        e.observe(1855); // equal is not "bigger": α = 0.1, stays 1855
        assert_eq!(e.predict(), Some(1855));
    }

    #[test]
    fn work_units_table_four_cases() {
        // Empty → configured maximum (e.g. 0.94·T with T = 1 ms).
        let mut t = WorkUnitsTable::new(940_000);
        assert_eq!(t.predict_case(7), (940_000, LookupCase::Empty));

        t.observe(10, 100_000);
        t.observe(20, 180_000);
        t.observe(40, 300_000);
        // Exact hit.
        assert_eq!(t.predict_case(20), (180_000, LookupCase::Exact));
        // Below the smallest key → the smallest key's value.
        assert_eq!(t.predict_case(3), (100_000, LookupCase::BelowSmallest));
        // Above the largest key → least squares through (10,100k), (20,180k), (40,300k):
        // x̄ = 70/3, ȳ = 580k/3, Sxx = 1400/3, Sxy = 9_200_000/3 → slope b = 46_000/7
        // ≈ 6571.43 per unit, intercept ȳ − b·x̄ = 40_000. At 50: 368_571.43 → 368_571.
        assert_eq!(t.predict_case(50), (368_571, LookupCase::AboveLargest));
        // Between keys (not in the paper): the larger neighbour.
        assert_eq!(t.predict_case(30), (300_000, LookupCase::Between));
        // The stored values are EWMAs (eq. 4): a falling sample moves 10 %.
        t.observe(20, 80_000);
        assert_eq!(t.predict(20), 170_000);
    }

    #[test]
    fn work_units_percentiles_are_kept_per_value() {
        // N = 8, p = 0.75 → j = ⌊8·0.25⌋ = 2: the third largest; trusted from 4 samples.
        let mut t = WorkUnitsPercentiles::new(8, 0.75, 4).unwrap();
        assert!(t.is_empty());
        for c in [10u64, 20, 30] {
            t.observe(5, c);
        }
        // Three samples < min_samples: no answer, whatever the rank rule would give.
        assert_eq!((t.percentile(5), t.median(5), t.max(5)), (None, None, None));
        t.observe(5, 40);
        // m = 4: j = ⌊4·0.25⌋ = 1 → 30; median j = 2 → 20.
        assert_eq!(
            (t.percentile(5), t.median(5), t.max(5)),
            (Some(30), Some(20), Some(40))
        );
        for c in [50u64, 60, 70, 80, 90] {
            t.observe(5, c);
        }
        // The window holds the last 8: 20..=90; j = 2 → 70; median j = 4 → 50.
        assert_eq!(
            (t.percentile(5), t.median(5), t.max(5)),
            (Some(70), Some(50), Some(90))
        );
        // Another value has its own window: nothing of value 5 leaks into it.
        assert_eq!(t.percentile(6), None);
        for c in [1u64, 1, 1, 1000] {
            t.observe(6, c);
        }
        assert_eq!(t.percentile(6), Some(1));
        assert_eq!(t.percentile(5), Some(70));
        assert_eq!((t.len(), t.samples(5), t.samples(6), t.samples(7)), (2, 8, 4, 0));
        assert_eq!((t.window(), t.p(), t.min_samples()), (8, 0.75, 4));
        assert!(WorkUnitsPercentiles::new(8, 0.75, 0).is_err());
        assert!(WorkUnitsPercentiles::new(8, 0.75, 9).is_err());
        assert!(WorkUnitsPercentiles::new(8, 1.5, 4).is_err());
        assert!(WorkUnitsPercentiles::new(0, 0.75, 1).is_err());
        t.clear();
        assert!(t.is_empty());
    }

    #[test]
    fn work_units_regression_is_clamped_non_negative() {
        let mut t = WorkUnitsTable::new(1_000_000);
        t.observe(1, 500_000);
        t.observe(2, 100_000); // slope −400k/unit
        assert_eq!(t.predict_case(5), (0, LookupCase::AboveLargest));
        // Single point: proportional through the origin.
        let mut s = WorkUnitsTable::new(1_000_000);
        s.observe(4, 100_000);
        assert_eq!(s.predict(6), 150_000);
        let mut z = WorkUnitsTable::new(1_000_000);
        z.observe(0, 100_000);
        assert_eq!(z.predict(6), 100_000);
    }

    #[test]
    fn extrapolation_by_hand() {
        // Line through (1, 500k), (2, 100k): y = 900k − 400k·x; at 5 → −1.1M, clamped to 0.
        assert_eq!(extrapolate(&[(1.0, 500_000.0), (2.0, 100_000.0)], 5.0), 0.0);
        assert_eq!(extrapolate(&[(1.0, 500_000.0), (2.0, 100_000.0)], 2.0), 100_000.0);
        assert_eq!(extrapolate(&[(4.0, 100.0)], 6.0), 150.0);
    }

    #[test]
    fn least_squares_by_hand() {
        let (a, b) = least_squares(&[(0.0, 1.0), (1.0, 3.0), (2.0, 5.0)]);
        assert!((a - 1.0).abs() < 1e-12 && (b - 2.0).abs() < 1e-12);
    }
}
