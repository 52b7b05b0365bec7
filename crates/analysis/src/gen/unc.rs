//! The UNC named distributions (Brandenburg's SchedCAT, used in the LITMUS^RT experiments at UNC).
//!
//! Parameters as in SchedCAT's `schedcat/generator/tasksets.py` (`NAMED_UTILIZATIONS`,
//! `NAMED_PERIODS`) and `tasks.py`:
//!
//! | utilisation   | law                                                           |
//! |---------------|---------------------------------------------------------------|
//! | `uni-light`   | uniform [0.001, 0.1]                                          |
//! | `uni-medium`  | uniform [0.1, 0.4]                                            |
//! | `uni-heavy`   | uniform [0.5, 0.9]                                            |
//! | `exp-light`   | exponential, mean 0.10, redrawn until in [0, 1]               |
//! | `exp-medium`  | exponential, mean 0.25, redrawn until in [0, 1]               |
//! | `exp-heavy`   | exponential, mean 0.50, redrawn until in [0, 1]               |
//! | `bimo-light`  | uniform [0.001, 0.5) w.p. 8/9, else uniform [0.5, 0.9]        |
//! | `bimo-medium` | uniform [0.001, 0.5) w.p. 6/9, else uniform [0.5, 0.9]        |
//! | `bimo-heavy`  | uniform [0.001, 0.5) w.p. 4/9, else uniform [0.5, 0.9]        |
//!
//! | period             | law (integer milliseconds)                              |
//! |--------------------|---------------------------------------------------------|
//! | `uni-short`        | uniform over {3, …, 33}                                 |
//! | `uni-moderate`     | uniform over {10, …, 100}                               |
//! | `uni-long`         | uniform over {50, …, 250}                               |
//! | `log-uni-short`    | log-uniform over [3, 33]                                |
//! | `log-uni-moderate` | log-uniform over [10, 100]                              |
//! | `log-uni-long`     | log-uniform over [50, 250]                              |
//!
//! Periods are whole milliseconds as in SchedCAT (`uniform_int`, `log_uniform_int`); the
//! log-uniform integer law is SchedCAT's: ⌊e^v⌋ with v uniform in [ln min, ln(max + 1)], clamped
//! to [min, max], so every integer gets the log-width of [i, i+1).
//!
//! A UNC task set ([`draw_until_cap`]) follows SchedCAT's `TaskGenerator.tasks` with
//! `squeeze=False`: draw a period, then a utilisation, set C = u·T (here rounded to the nearest
//! nanosecond, at least 1 ns), add C/T to the running total, and stop when the total reaches the
//! cap. The task whose C/T would push the total *above* the cap is discarded, so the total never
//! exceeds the cap and usually falls short of it by less than one task's utilisation.

use std::fmt;
use std::str::FromStr;

use pacer_model::Duration;
use rand::Rng;
use rand_distr::{Bernoulli, Distribution, Exp, Uniform};
use serde::{Deserialize, Serialize};

use super::{wcet_from_utilization, GenError, MAX_TASKS};

/// A UNC named utilisation distribution.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum UncUtilization {
    /// Uniform [0.001, 0.1].
    UniLight,
    /// Uniform [0.1, 0.4].
    UniMedium,
    /// Uniform [0.5, 0.9].
    UniHeavy,
    /// Exponential with mean 0.10, redrawn until ≤ 1.
    ExpLight,
    /// Exponential with mean 0.25, redrawn until ≤ 1.
    ExpMedium,
    /// Exponential with mean 0.50, redrawn until ≤ 1.
    ExpHeavy,
    /// Uniform [0.001, 0.5) w.p. 8/9, else uniform [0.5, 0.9].
    BimoLight,
    /// Uniform [0.001, 0.5) w.p. 6/9, else uniform [0.5, 0.9].
    BimoMedium,
    /// Uniform [0.001, 0.5) w.p. 4/9, else uniform [0.5, 0.9].
    BimoHeavy,
}

/// A UNC named period distribution.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum UncPeriods {
    /// Uniform over {3, …, 33} ms.
    UniShort,
    /// Uniform over {10, …, 100} ms.
    UniModerate,
    /// Uniform over {50, …, 250} ms.
    UniLong,
    /// Log-uniform over [3, 33] ms, whole milliseconds.
    LogUniShort,
    /// Log-uniform over [10, 100] ms, whole milliseconds.
    LogUniModerate,
    /// Log-uniform over [50, 250] ms, whole milliseconds.
    LogUniLong,
}

impl UncUtilization {
    /// Every distribution, in SchedCAT's order.
    pub const ALL: [UncUtilization; 9] = [
        UncUtilization::UniLight,
        UncUtilization::UniMedium,
        UncUtilization::UniHeavy,
        UncUtilization::ExpLight,
        UncUtilization::ExpMedium,
        UncUtilization::ExpHeavy,
        UncUtilization::BimoLight,
        UncUtilization::BimoMedium,
        UncUtilization::BimoHeavy,
    ];

    /// The SchedCAT name, e.g. `bimo-medium`.
    pub fn name(self) -> &'static str {
        use UncUtilization::*;
        match self {
            UniLight => "uni-light",
            UniMedium => "uni-medium",
            UniHeavy => "uni-heavy",
            ExpLight => "exp-light",
            ExpMedium => "exp-medium",
            ExpHeavy => "exp-heavy",
            BimoLight => "bimo-light",
            BimoMedium => "bimo-medium",
            BimoHeavy => "bimo-heavy",
        }
    }

    /// The interval every draw lies in.
    pub fn support(self) -> (f64, f64) {
        use UncUtilization::*;
        match self {
            UniLight => (0.001, 0.1),
            UniMedium => (0.1, 0.4),
            UniHeavy => (0.5, 0.9),
            ExpLight | ExpMedium | ExpHeavy => (0.0, 1.0),
            BimoLight | BimoMedium | BimoHeavy => (0.001, 0.9),
        }
    }

    /// A sampler for this distribution.
    pub fn sampler(self) -> Result<UncUtilSampler, GenError> {
        use UncUtilization::*;
        let uniform = |lo: f64, hi: f64| {
            Uniform::new_inclusive(lo, hi)
                .map_err(|e| GenError::invalid("UNC utilisation range", self, e.to_string()))
        };
        let exp = |mean: f64| {
            Exp::new(1.0 / mean).map_err(|e| GenError::invalid("UNC exponential mean", mean, e.to_string()))
        };
        let bimodal = |light_weight: f64| -> Result<UncUtilSampler, GenError> {
            Ok(UncUtilSampler::Bimodal {
                light: Bernoulli::new(light_weight / 9.0)
                    .map_err(|e| GenError::invalid("UNC bimodal weight", light_weight, e.to_string()))?,
                // Python's random.uniform(0.001, 0.5) is half-open; keep it so.
                low: Uniform::new(0.001, 0.5)
                    .map_err(|e| GenError::invalid("UNC utilisation range", self, e.to_string()))?,
                high: uniform(0.5, 0.9)?,
            })
        };
        Ok(match self {
            UniLight => UncUtilSampler::Uniform(uniform(0.001, 0.1)?),
            UniMedium => UncUtilSampler::Uniform(uniform(0.1, 0.4)?),
            UniHeavy => UncUtilSampler::Uniform(uniform(0.5, 0.9)?),
            ExpLight => UncUtilSampler::Exponential(exp(0.10)?),
            ExpMedium => UncUtilSampler::Exponential(exp(0.25)?),
            ExpHeavy => UncUtilSampler::Exponential(exp(0.50)?),
            BimoLight => bimodal(8.0)?,
            BimoMedium => bimodal(6.0)?,
            BimoHeavy => bimodal(4.0)?,
        })
    }
}

/// Draws from a [`UncUtilization`].
#[derive(Debug, Clone)]
pub enum UncUtilSampler {
    /// Uniform over an interval.
    Uniform(Uniform<f64>),
    /// Exponential, redrawn while above 1 (SchedCAT's `redraw` limiter).
    Exponential(Exp<f64>),
    /// `low` with probability `light`, else `high`.
    Bimodal {
        light: Bernoulli,
        low: Uniform<f64>,
        high: Uniform<f64>,
    },
}

impl Distribution<f64> for UncUtilSampler {
    fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> f64 {
        match self {
            UncUtilSampler::Uniform(u) => u.sample(rng),
            UncUtilSampler::Exponential(e) => loop {
                // Redraw rather than truncate, so no mass piles up at 1. Even for mean 0.5 a draw
                // is ≤ 1 with probability 1 − e^{−2} ≈ 0.86, so the loop ends after a few tries.
                let v = e.sample(rng);
                if (0.0..=1.0).contains(&v) {
                    break v;
                }
            },
            UncUtilSampler::Bimodal { light, low, high } => {
                if light.sample(rng) {
                    low.sample(rng)
                } else {
                    high.sample(rng)
                }
            }
        }
    }
}

impl UncPeriods {
    /// Every distribution.
    pub const ALL: [UncPeriods; 6] = [
        UncPeriods::UniShort,
        UncPeriods::UniModerate,
        UncPeriods::UniLong,
        UncPeriods::LogUniShort,
        UncPeriods::LogUniModerate,
        UncPeriods::LogUniLong,
    ];

    /// The SchedCAT name, e.g. `log-uni-moderate`.
    pub fn name(self) -> &'static str {
        use UncPeriods::*;
        match self {
            UniShort => "uni-short",
            UniModerate => "uni-moderate",
            UniLong => "uni-long",
            LogUniShort => "log-uni-short",
            LogUniModerate => "log-uni-moderate",
            LogUniLong => "log-uni-long",
        }
    }

    /// The range in whole milliseconds, inclusive.
    pub fn range_ms(self) -> (u64, u64) {
        use UncPeriods::*;
        match self {
            UniShort | LogUniShort => (3, 33),
            UniModerate | LogUniModerate => (10, 100),
            UniLong | LogUniLong => (50, 250),
        }
    }

    /// Whether the law is log-uniform.
    pub fn is_log_uniform(self) -> bool {
        matches!(
            self,
            UncPeriods::LogUniShort | UncPeriods::LogUniModerate | UncPeriods::LogUniLong
        )
    }

    /// A sampler for this distribution.
    pub fn sampler(self) -> Result<UncPeriodSampler, GenError> {
        let (lo, hi) = self.range_ms();
        let err = |e: rand_distr::uniform::Error| GenError::invalid("UNC period range", self, e.to_string());
        Ok(if self.is_log_uniform() {
            UncPeriodSampler::LogUniform {
                lo,
                hi,
                ln: Uniform::new_inclusive((lo as f64).ln(), ((hi + 1) as f64).ln()).map_err(err)?,
            }
        } else {
            UncPeriodSampler::Uniform(Uniform::new_inclusive(lo, hi).map_err(err)?)
        })
    }
}

/// Draws from a [`UncPeriods`].
#[derive(Debug, Clone)]
pub enum UncPeriodSampler {
    /// Whole milliseconds, uniform.
    Uniform(Uniform<u64>),
    /// Whole milliseconds, ⌊e^v⌋ clamped to [lo, hi] with v = `ln` draw.
    LogUniform { lo: u64, hi: u64, ln: Uniform<f64> },
}

impl Distribution<Duration> for UncPeriodSampler {
    fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> Duration {
        let ms = match self {
            UncPeriodSampler::Uniform(u) => u.sample(rng),
            UncPeriodSampler::LogUniform { lo, hi, ln } => {
                (ln.sample(rng).exp().floor() as u64).clamp(*lo, *hi)
            }
        };
        Duration::from_ms(ms)
    }
}

impl fmt::Display for UncUtilization {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl fmt::Display for UncPeriods {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

fn names<T: Copy>(all: &[T], name: impl Fn(T) -> &'static str) -> String {
    all.iter().map(|&v| name(v)).collect::<Vec<_>>().join(", ")
}

impl FromStr for UncUtilization {
    type Err = GenError;

    /// Parses a SchedCAT name (`uni-light`, …, `bimo-heavy`), ignoring case and surrounding space.
    fn from_str(s: &str) -> Result<Self, GenError> {
        let t = s.trim().to_ascii_lowercase();
        Self::ALL
            .into_iter()
            .find(|d| d.name() == t)
            .ok_or_else(|| GenError::UnknownName {
                kind: "UNC utilisation distribution",
                name: s.to_string(),
                valid: names(&Self::ALL, Self::name),
            })
    }
}

impl FromStr for UncPeriods {
    type Err = GenError;

    /// Parses a SchedCAT name (`uni-short`, …, `log-uni-long`), ignoring case and surrounding space.
    fn from_str(s: &str) -> Result<Self, GenError> {
        let t = s.trim().to_ascii_lowercase();
        Self::ALL
            .into_iter()
            .find(|d| d.name() == t)
            .ok_or_else(|| GenError::UnknownName {
                kind: "UNC period distribution",
                name: s.to_string(),
                valid: names(&Self::ALL, Self::name),
            })
    }
}

/// Draws UNC tasks as (C, T) until the total utilisation Σ C/T reaches `cap` or `max_tasks` tasks
/// exist; the task that would push the total above `cap` is discarded (SchedCAT's default). Each
/// task draws its period first, then its utilisation. Errors when `cap` is not a finite positive
/// number or `max_tasks` is not in [1, [`MAX_TASKS`]]; without `max_tasks`, a cap that
/// [`MAX_TASKS`] tasks do not reach is an error too (instead of exhausting memory).
pub fn draw_until_cap<R, F>(
    rng: &mut R,
    utilization: UncUtilization,
    cap: f64,
    max_tasks: Option<usize>,
    mut period: F,
) -> Result<Vec<(Duration, Duration)>, GenError>
where
    R: Rng + ?Sized,
    F: FnMut(&mut R) -> Duration,
{
    if !(cap.is_finite() && cap > 0.0) {
        return Err(GenError::invalid(
            "utilization cap",
            cap,
            "a finite total utilisation > 0",
        ));
    }
    let limit = max_tasks.unwrap_or(MAX_TASKS);
    if limit == 0 || limit > MAX_TASKS {
        return Err(GenError::invalid(
            "n",
            limit,
            format!("a task count in [1, {MAX_TASKS}]"),
        ));
    }
    if max_tasks.is_none() && cap > MAX_TASKS as f64 * utilization.support().1 {
        return Err(GenError::invalid(
            "utilization cap",
            cap,
            format!("a cap that at most {MAX_TASKS} {utilization} tasks can reach"),
        ));
    }
    let util = utilization.sampler()?;
    let mut tasks = Vec::new();
    let mut total = 0.0;
    let mut capped = false;
    while tasks.len() < limit && !capped {
        let t = period(rng);
        let c = wcet_from_utilization(util.sample(rng), t);
        let u = c.0 as f64 / t.0 as f64;
        if total + u > cap {
            capped = true;
        } else {
            total += u;
            tasks.push((c, t));
            capped = total >= cap;
        }
    }
    if !capped && max_tasks.is_none() {
        return Err(GenError::invalid(
            "utilization cap",
            cap,
            format!("a cap that at most {MAX_TASKS} {utilization} tasks reach"),
        ));
    }
    Ok(tasks)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    #[test]
    fn gen_unc_utilizations_stay_in_range() {
        let mut rng = ChaCha8Rng::seed_from_u64(11);
        for d in UncUtilization::ALL {
            let s = d.sampler().unwrap();
            let (lo, hi) = d.support();
            let draws: Vec<f64> = (0..20_000).map(|_| s.sample(&mut rng)).collect();
            assert!(draws.iter().all(|&u| lo <= u && u <= hi), "{d}");
            let mean = draws.iter().sum::<f64>() / draws.len() as f64;
            // Expected means: uniform midpoints; exponential truncated to [0, 1]; bimodal mixtures.
            let truncated_exp = |m: f64| {
                let l = 1.0 / m;
                1.0 / l - (-l).exp() / (1.0 - (-l).exp())
            };
            let bimo = |w: f64| w / 9.0 * 0.2505 + (1.0 - w / 9.0) * 0.7;
            let expected = match d {
                UncUtilization::UniLight => 0.0505,
                UncUtilization::UniMedium => 0.25,
                UncUtilization::UniHeavy => 0.7,
                UncUtilization::ExpLight => truncated_exp(0.10),
                UncUtilization::ExpMedium => truncated_exp(0.25),
                UncUtilization::ExpHeavy => truncated_exp(0.50),
                UncUtilization::BimoLight => bimo(8.0),
                UncUtilization::BimoMedium => bimo(6.0),
                UncUtilization::BimoHeavy => bimo(4.0),
            };
            assert!((mean - expected).abs() < 0.01, "{d}: mean {mean} vs {expected}");
        }
    }

    #[test]
    fn gen_unc_periods_stay_in_range() {
        let mut rng = ChaCha8Rng::seed_from_u64(12);
        for d in UncPeriods::ALL {
            let s = d.sampler().unwrap();
            let (lo, hi) = d.range_ms();
            let mut seen_lo = false;
            let mut seen_hi = false;
            for _ in 0..20_000 {
                let t = s.sample(&mut rng);
                assert_eq!(t.0 % 1_000_000, 0, "{d}: {t} is not whole ms");
                let ms = t.0 / 1_000_000;
                assert!((lo..=hi).contains(&ms), "{d}: {ms} ms");
                seen_lo |= ms == lo;
                seen_hi |= ms == hi;
            }
            assert!(seen_lo && seen_hi, "{d}: both ends reachable");
        }
    }

    #[test]
    fn gen_unc_names_parse_and_errors_list_valid_names() {
        for d in UncUtilization::ALL {
            assert_eq!(d.name().parse::<UncUtilization>().unwrap(), d);
            assert_eq!(d.to_string(), d.name());
        }
        for d in UncPeriods::ALL {
            assert_eq!(d.name().parse::<UncPeriods>().unwrap(), d);
        }
        assert_eq!(
            " Uni-Light ".parse::<UncUtilization>().unwrap(),
            UncUtilization::UniLight
        );
        let e = "uni-lite".parse::<UncUtilization>().unwrap_err().to_string();
        assert!(
            e.contains("uni-lite") && e.contains("bimo-heavy") && e.contains("uni-light"),
            "{e}"
        );
        let e = "short".parse::<UncPeriods>().unwrap_err().to_string();
        assert!(e.contains("log-uni-long"), "{e}");
    }

    #[test]
    fn gen_unc_task_set_stops_below_cap() {
        for seed in 0..50 {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            let p = UncPeriods::UniModerate.sampler().unwrap();
            let tasks =
                draw_until_cap(&mut rng, UncUtilization::BimoMedium, 4.0, None, |r| p.sample(r)).unwrap();
            let total: f64 = tasks.iter().map(|(c, t)| c.0 as f64 / t.0 as f64).sum();
            assert!(total <= 4.0, "{total}");
            // Falls short by less than one (discarded) task, i.e. less than 0.9.
            assert!(total > 4.0 - 0.9, "{total}");
            assert!(tasks.iter().all(|(c, t)| c.0 >= 1 && c <= t));
        }
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let p = UncPeriods::UniShort.sampler().unwrap();
        let five = draw_until_cap(&mut rng, UncUtilization::UniLight, 100.0, Some(5), |r| {
            p.sample(r)
        })
        .unwrap();
        assert_eq!(five.len(), 5);
        assert!(draw_until_cap(&mut rng, UncUtilization::UniLight, 0.0, Some(5), |r| p.sample(r)).is_err());
        assert!(
            draw_until_cap(&mut rng, UncUtilization::UniLight, f64::INFINITY, Some(5), |r| p
                .sample(r))
            .is_err()
        );
        assert!(draw_until_cap(&mut rng, UncUtilization::UniLight, 1.0, Some(0), |r| p.sample(r)).is_err());
    }
}
