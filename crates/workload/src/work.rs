//! Execution-time models: checked constructors for [`Work`] and drawing one job's amount of work.
//!
//! rt-app's `run` event is a fixed amount of calibrated work (doc/tutorial.txt, "events", `run`);
//! pacer also draws it from a distribution when a task set is converted with a non-WCET execution
//! model. Degenerate distributions (an empty interval, a zero standard deviation, no samples) are
//! refused when the model is built, so a simulation never runs with a distribution that is not
//! the one the user asked for; [`Work::sample`] still never panics on a hand-built value.

use pacer_model::Duration;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Normal};

use crate::model::Work;

/// Why an execution-time model was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WorkError {
    /// A uniform or normal model whose interval [min, max] is empty or a single point.
    #[error("uniform work needs min < max, found min {min} and max {max} (use a fixed amount when they are equal)")]
    EmptyInterval { min: Duration, max: Duration },
    /// A normal model with a standard deviation of 0.
    #[error("normal work needs a standard deviation > 0 (use a fixed amount for a constant)")]
    ZeroDeviation,
    /// A normal model whose mean lies outside its truncation interval.
    #[error("normal work needs its mean {mean} inside [{min}, {max}]")]
    MeanOutside {
        mean: Duration,
        min: Duration,
        max: Duration,
    },
    /// An empirical model without samples.
    #[error("empirical work needs at least one sample")]
    NoSamples,
}

// Rejection sampling of the truncated normal gives up after this many draws and clamps instead,
// so a truncation window far in a tail cannot loop for long.
const MAX_NORMAL_DRAWS: usize = 64;

impl Work {
    /// Exactly `ns` every time.
    pub fn fixed(ns: Duration) -> Work {
        Work::Fixed { ns }
    }

    /// Uniform in [min, max]; needs min < max.
    pub fn uniform(min: Duration, max: Duration) -> Result<Work, WorkError> {
        let w = Work::Uniform { min, max };
        w.validate()?;
        Ok(w)
    }

    /// Normal(mean, sd) truncated to [min, max]; needs sd > 0, min < max and mean in [min, max].
    pub fn normal(mean: Duration, sd: Duration, min: Duration, max: Duration) -> Result<Work, WorkError> {
        let w = Work::Normal { mean, sd, min, max };
        w.validate()?;
        Ok(w)
    }

    /// Uniform choice among recorded samples; needs at least one.
    pub fn empirical(samples: Vec<Duration>) -> Result<Work, WorkError> {
        let w = Work::Empirical { samples };
        w.validate()?;
        Ok(w)
    }

    /// Checks the conditions the constructors enforce (for values built from the variants).
    pub fn validate(&self) -> Result<(), WorkError> {
        match self {
            Work::Fixed { .. } | Work::Linear { .. } => Ok(()),
            Work::Uniform { min, max } => {
                if min < max {
                    Ok(())
                } else {
                    Err(WorkError::EmptyInterval { min: *min, max: *max })
                }
            }
            Work::Normal { mean, sd, min, max } => {
                if sd.is_zero() {
                    Err(WorkError::ZeroDeviation)
                } else if min >= max {
                    Err(WorkError::EmptyInterval { min: *min, max: *max })
                } else if mean < min || mean > max {
                    Err(WorkError::MeanOutside {
                        mean: *mean,
                        min: *min,
                        max: *max,
                    })
                } else {
                    Ok(())
                }
            }
            Work::Empirical { samples } => {
                if samples.is_empty() {
                    Err(WorkError::NoSamples)
                } else {
                    Ok(())
                }
            }
        }
    }

    /// The largest amount a job can draw (its WCET under this model).
    pub fn upper_bound(&self) -> Duration {
        match self {
            Work::Fixed { ns } => *ns,
            Work::Uniform { min, max } | Work::Normal { min, max, .. } => (*min).max(*max),
            Work::Empirical { samples } => samples.iter().copied().max().unwrap_or(Duration::ZERO),
            // Grows with the workUnits the thread announces: no bound of its own.
            Work::Linear { .. } => Duration::MAX,
        }
    }

    /// Draws the work of one job of a thread that last announced `units` workUnits.
    pub fn sample_for<R: Rng + ?Sized>(&self, rng: &mut R, units: u64) -> Duration {
        match self {
            Work::Linear { base, per_unit } => {
                Duration(base.0.saturating_add(per_unit.0.saturating_mul(units)))
            }
            other => other.sample(rng),
        }
    }

    /// Draws the work of one job. Never panics: on a value that [`Work::validate`] would refuse
    /// it degrades to the obvious constant (the bound of an empty interval, the clamped mean for
    /// a zero deviation, zero for no samples).
    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> Duration {
        match self {
            Work::Fixed { ns } => *ns,
            Work::Linear { base, .. } => *base,
            Work::Uniform { min, max } => {
                let (lo, hi) = ordered(*min, *max);
                Duration(rng.random_range(lo.0..=hi.0))
            }
            Work::Normal { mean, sd, min, max } => {
                let (lo, hi) = ordered(*min, *max);
                let clamp = |x: f64| -> Duration {
                    // `as` saturates (and maps NaN to 0), so the clamp below is all the guarding needed.
                    Duration((x.round() as u64).clamp(lo.0, hi.0))
                };
                let Ok(dist) = Normal::new(mean.0 as f64, sd.0 as f64) else {
                    return clamp(mean.0 as f64);
                };
                if sd.is_zero() {
                    return clamp(mean.0 as f64);
                }
                let mut last = mean.0 as f64;
                for _ in 0..MAX_NORMAL_DRAWS {
                    let x = dist.sample(rng);
                    if x >= lo.0 as f64 && x <= hi.0 as f64 {
                        return clamp(x);
                    }
                    last = x;
                }
                clamp(last)
            }
            Work::Empirical { samples } => {
                if samples.is_empty() {
                    Duration::ZERO
                } else {
                    samples[rng.random_range(0..samples.len())]
                }
            }
        }
    }
}

/// The random stream of one thread's execution-time draws.
pub type ThreadRng = ChaCha8Rng;

/// Seed of thread `index`'s draws in a run seeded with `seed`: one ChaCha8 stream per thread, so
/// a thread's draws do not depend on the other threads, and the simulator and the real-kernel
/// executor draw the same amounts of work for the same seed.
pub fn thread_seed(seed: u64, index: usize) -> u64 {
    // SplitMix64 step: decorrelates neighbouring thread indices.
    let mut z = seed.wrapping_add((index as u64).wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The random stream of thread `index` in a run seeded with `seed` (see [`thread_seed`]).
pub fn thread_rng(seed: u64, index: usize) -> ThreadRng {
    ChaCha8Rng::seed_from_u64(thread_seed(seed, index))
}

fn ordered(a: Duration, b: Duration) -> (Duration, Duration) {
    if a <= b {
        (a, b)
    } else {
        (b, a)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use rand::rngs::StdRng;
    use rand::SeedableRng;

    const MS: Duration = Duration::from_ms(1);

    #[test]
    fn constructors_refuse_degenerate_models() {
        assert_eq!(
            Work::uniform(MS, MS),
            Err(WorkError::EmptyInterval { min: MS, max: MS })
        );
        assert_eq!(
            Work::normal(MS, Duration::ZERO, Duration::ZERO, MS * 2),
            Err(WorkError::ZeroDeviation)
        );
        assert!(matches!(
            Work::normal(MS * 3, MS, Duration::ZERO, MS * 2),
            Err(WorkError::MeanOutside { .. })
        ));
        assert_eq!(Work::empirical(vec![]), Err(WorkError::NoSamples));
        assert!(Work::uniform(MS, MS * 2).is_ok());
        assert!(Work::normal(MS, MS, Duration::ZERO, MS * 2).is_ok());
    }

    #[test]
    fn samples_stay_in_range() {
        let mut rng = StdRng::seed_from_u64(7);
        let u = Work::uniform(MS, MS * 2).unwrap();
        let n = Work::normal(MS, MS, Duration::ZERO, MS * 2).unwrap();
        let e = Work::empirical(vec![MS, MS * 5]).unwrap();
        let mut saw_uniform_spread = (false, false);
        for _ in 0..2000 {
            let x = u.sample(&mut rng);
            assert!(x >= MS && x <= MS * 2);
            saw_uniform_spread.0 |= x < Duration::from_us(1100);
            saw_uniform_spread.1 |= x > Duration::from_us(1900);
            let y = n.sample(&mut rng);
            assert!(y <= MS * 2);
            let z = e.sample(&mut rng);
            assert!(z == MS || z == MS * 5);
        }
        assert_eq!(saw_uniform_spread, (true, true));
        assert_eq!(Work::fixed(MS).sample(&mut rng), MS);
    }

    #[test]
    fn hand_built_degenerate_values_do_not_panic() {
        let mut rng = StdRng::seed_from_u64(1);
        let cases = [
            Work::Uniform { min: MS, max: MS },
            Work::Uniform { min: MS * 2, max: MS },
            Work::Normal {
                mean: MS,
                sd: Duration::ZERO,
                min: Duration::ZERO,
                max: MS,
            },
            Work::Normal {
                mean: MS * 9,
                sd: Duration(1),
                min: MS * 2,
                max: MS,
            },
            Work::Normal {
                mean: Duration::MAX,
                sd: Duration::MAX,
                min: Duration::ZERO,
                max: Duration::MAX,
            },
            Work::Empirical { samples: vec![] },
        ];
        let got: Vec<Duration> = cases.iter().map(|w| w.sample(&mut rng)).collect();
        assert_eq!(got[0], MS);
        assert!(got[1] >= MS && got[1] <= MS * 2);
        assert_eq!(got[2], MS);
        assert_eq!(got[3], MS * 2, "far tail: clamped to the window");
        assert_eq!(got[5], Duration::ZERO);
        assert_eq!(cases[1].upper_bound(), MS * 2);
    }

    proptest! {
        #[test]
        fn sample_never_panics_and_respects_bounds(
            a in any::<u64>(), b in any::<u64>(), c in any::<u64>(), d in any::<u64>(), seed in any::<u64>()
        ) {
            let mut rng = StdRng::seed_from_u64(seed);
            let (lo, hi) = (a.min(b), a.max(b));
            let u = Work::Uniform { min: Duration(a), max: Duration(b) }.sample(&mut rng);
            prop_assert!(u.0 >= lo && u.0 <= hi);
            let n = Work::Normal { mean: Duration(c), sd: Duration(d), min: Duration(a), max: Duration(b) }
                .sample(&mut rng);
            prop_assert!(n.0 >= lo && n.0 <= hi);
        }
    }
}
