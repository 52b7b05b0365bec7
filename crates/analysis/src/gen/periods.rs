//! Uniform and log-uniform periods with a granularity.
//!
//! Log-uniform periods (ln T uniform in [ln T_min, ln T_max]) are the usual choice since
//! Emberson, Stafford & Davis (WATERS 2010): each decade gets the same number of tasks, whereas a
//! uniform draw over [1 ms, 1 s] would put 90 % of the periods above 100 ms. Uniform periods are
//! kept for older experiments (e.g. the UNC ranges).
//!
//! A period is drawn as a real number of nanoseconds in [min, max], then rounded to the nearest
//! multiple of the granularity g and clamped to the multiples that lie in [min, max], so every
//! period is a multiple of g inside the range. Rounding gives the two extreme multiples half the
//! weight of interior ones under the uniform law (a width-g bucket is cut in half by the range);
//! with g much smaller than max − min this is negligible, and it keeps both laws one formula.

use pacer_model::Duration;
use rand::Rng;
use rand_distr::{Distribution, Uniform};
use serde::{Deserialize, Serialize};

use super::GenError;

/// Shape of the period distribution.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PeriodDistribution {
    /// T uniform in [min, max].
    Uniform,
    /// ln T uniform in [ln min, ln max].
    LogUniform,
}

/// A validated period distribution: draw with [`PeriodSampler::sample`] or as a
/// `Distribution<Duration>`.
#[derive(Debug, Clone)]
pub struct PeriodSampler {
    distribution: PeriodDistribution,
    granularity: u64,
    /// Smallest and largest multiplier k such that k·g ∈ [min, max].
    k_min: u64,
    k_max: u64,
    /// Uniform over [min, max] (uniform law) or [ln min, ln max] (log-uniform law).
    draw: Uniform<f64>,
}

impl PeriodSampler {
    /// Validates the range: min ≤ max, g > 0, g ≤ max, a multiple of g in [min, max], and min > 0
    /// for the log-uniform law.
    pub fn new(
        distribution: PeriodDistribution,
        min: Duration,
        max: Duration,
        granularity: Duration,
    ) -> Result<Self, GenError> {
        if min > max {
            return Err(GenError::PeriodMinAboveMax { min, max });
        }
        if granularity.is_zero() {
            return Err(GenError::ZeroGranularity);
        }
        if granularity > max {
            return Err(GenError::GranularityAboveMax { granularity, max });
        }
        let g = granularity.0;
        let k_min = min.0.div_ceil(g).max(1);
        let k_max = max.0 / g;
        if k_min > k_max {
            return Err(GenError::NoMultipleInRange {
                min,
                max,
                granularity,
            });
        }
        let (lo, hi) = match distribution {
            PeriodDistribution::Uniform => (min.0 as f64, max.0 as f64),
            PeriodDistribution::LogUniform => {
                if min.is_zero() {
                    return Err(GenError::invalid(
                        "period min",
                        min,
                        "a positive minimum for log-uniform periods (ln 0 is undefined)",
                    ));
                }
                ((min.0 as f64).ln(), (max.0 as f64).ln())
            }
        };
        let draw = Uniform::new_inclusive(lo, hi)
            .map_err(|e| GenError::invalid("period range", format!("[{min}, {max}]"), e.to_string()))?;
        Ok(PeriodSampler {
            distribution,
            granularity: g,
            k_min,
            k_max,
            draw,
        })
    }

    /// One period: a multiple of the granularity in [min, max].
    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> Duration {
        let v = self.draw.sample(rng);
        let ns = match self.distribution {
            PeriodDistribution::Uniform => v,
            PeriodDistribution::LogUniform => v.exp(),
        };
        // `as u64` saturates, and the clamp keeps k·g inside [min, max] whatever the rounding.
        let k = ((ns / self.granularity as f64).round() as u64).clamp(self.k_min, self.k_max);
        Duration(k * self.granularity)
    }
}

impl Distribution<Duration> for PeriodSampler {
    fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> Duration {
        PeriodSampler::sample(self, rng)
    }
}

/// One uniform period in [min, max], a multiple of `granularity`.
pub fn uniform_period<R: Rng + ?Sized>(
    rng: &mut R,
    min: Duration,
    max: Duration,
    granularity: Duration,
) -> Result<Duration, GenError> {
    Ok(PeriodSampler::new(PeriodDistribution::Uniform, min, max, granularity)?.sample(rng))
}

/// One log-uniform period in [min, max], a multiple of `granularity`.
pub fn log_uniform_period<R: Rng + ?Sized>(
    rng: &mut R,
    min: Duration,
    max: Duration,
    granularity: Duration,
) -> Result<Duration, GenError> {
    Ok(PeriodSampler::new(PeriodDistribution::LogUniform, min, max, granularity)?.sample(rng))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    const MS: u64 = 1_000_000;

    #[test]
    fn gen_periods_respect_range_and_granularity() {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        for dist in [PeriodDistribution::Uniform, PeriodDistribution::LogUniform] {
            for &(min, max, g) in &[
                (10 * MS, 100 * MS, MS),
                (10 * MS, 100 * MS, 1),
                (3 * MS + 1, 33 * MS - 1, MS), // range ends not multiples of g
                (7 * MS, 7 * MS, MS),          // a single admissible value
                (1, 50, 7),
            ] {
                let s = PeriodSampler::new(dist, Duration(min), Duration(max), Duration(g)).unwrap();
                for _ in 0..2000 {
                    let t = s.sample(&mut rng).0;
                    assert!((min..=max).contains(&t), "{dist:?}: {t} not in [{min}, {max}]");
                    assert_eq!(t % g, 0, "{dist:?}: {t} not a multiple of {g}");
                }
            }
        }
    }

    #[test]
    fn gen_log_uniform_periods_spread_evenly_over_decades() {
        // [1 ms, 100 ms]: half the log-uniform periods fall below 10 ms, against ~9 % uniformly.
        let mut rng = ChaCha8Rng::seed_from_u64(4);
        let mut count = |dist| {
            let s = PeriodSampler::new(dist, Duration(MS), Duration(100 * MS), Duration(1)).unwrap();
            (0..10_000).filter(|_| s.sample(&mut rng).0 < 10 * MS).count()
        };
        let log = count(PeriodDistribution::LogUniform);
        let uni = count(PeriodDistribution::Uniform);
        assert!((4700..5300).contains(&log), "{log}");
        assert!((700..1100).contains(&uni), "{uni}");
    }

    #[test]
    fn gen_period_parameters_are_checked() {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let d = Duration;
        assert_eq!(
            uniform_period(&mut rng, d(100), d(10), d(1)),
            Err(GenError::PeriodMinAboveMax {
                min: d(100),
                max: d(10)
            })
        );
        assert_eq!(
            uniform_period(&mut rng, d(10), d(100), d(0)),
            Err(GenError::ZeroGranularity)
        );
        assert_eq!(
            log_uniform_period(&mut rng, d(10), d(100), d(101)),
            Err(GenError::GranularityAboveMax {
                granularity: d(101),
                max: d(100)
            })
        );
        assert!(matches!(
            uniform_period(&mut rng, d(15), d(18), d(10)),
            Err(GenError::NoMultipleInRange { .. })
        ));
        assert!(matches!(
            log_uniform_period(&mut rng, d(0), d(18), d(1)),
            Err(GenError::InvalidParameter { .. })
        ));
        // Uniform from 0 is fine: the smallest multiple used is g itself.
        assert_eq!(uniform_period(&mut rng, d(0), d(5), d(5)), Ok(d(5)));
    }
}
