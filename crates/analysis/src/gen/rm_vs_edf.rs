//! The task-set recipe of the RM-vs-EDF multicore Linux paper (`rm-vs-edf-multicore-linux`, §5.3
//! "Task Set Generation").
//!
//! As written: N = x·m tasks on m processors (x ∈ {2, 3, 4}), total utilisation U = R·m
//! (R ∈ {0.6, 0.7, 0.8}); RandFixedSum (Stafford 2006, Emberson's implementation) draws N values
//! in (0, 1) with total m, which are rescaled to a total of U − C_min/T_min (T_min = 10 ms, the
//! smallest period); periods are log-uniform in [10 ms, 100 ms]; C_i = u_i·T_i + C_min with
//! C_min = 50 µs. The stated aims are C ≥ C_min, per-task utilisation below 1 (and well below, so
//! the sets partition evenly) and a total utilisation of U.
//!
//! The discrepancy: adding C_min to every task adds Σ_i C_min/T_i to the total, not C_min/T_min,
//! so the literal recipe yields
//!   U_literal = U − C_min/T_min + Σ_i C_min/T_i,
//! which lies in [U − C_min/T_min + N·C_min/T_max, U − C_min/T_min + N·C_min/T_min]. Only a set
//! with a single task at T_min hits U exactly; for N = 192 (x = 4, m = 48) log-uniform periods
//! give E[Σ C_min/T_i] ≈ N·(C_min/T_min)·(1 − T_min/T_max)/ln(T_max/T_min) ≈ 0.375, so the total
//! exceeds U by ≈ 0.37 — about a third of a processor.
//!
//! Two variants, chosen by [`RmVsEdfVariant`]:
//! - [`RmVsEdfVariant::Literal`]: as written (utilisations drawn first, then periods), total
//!   U_literal as above ([`literal_total_utilization`]);
//! - [`RmVsEdfVariant::ExactTotal`] (default): periods are drawn first and the RandFixedSum values
//!   are rescaled to U − Σ_i C_min/T_i, so Σ C_i/T_i = U up to the rounding of each C_i to whole
//!   nanoseconds (|error| ≤ Σ 0.5 ns/T_i ≤ N·0.5 ns/T_min).
//!
//! Both keep the paper's other properties: C_i ≥ C_min, and u_i ≤ (U − …)/m < R, so every task's
//! utilisation stays below R + C_min/T_min; the generator checks C_i ≥ C_min and C_i < T_i (per-task
//! utilisation below 1) on the integer result and reports a violation as an error rather than
//! returning a set that breaks the recipe. Deadlines are implicit (the paper's SCHED_DEADLINE tasks
//! have deadline = period). Periods are rounded to `period_granularity` (1 µs by default; the paper
//! does not say — 1 µs is far below the 10 ms minimum and keeps files readable).

use pacer_model::{Duration, Task};
use rand::Rng;
use serde::{Deserialize, Serialize};

use super::periods::{PeriodDistribution, PeriodSampler};
use super::randfixedsum::randfixedsum;
use super::{GenError, MAX_TASKS};

/// Which reading of §5.3 to implement (see the module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RmVsEdfVariant {
    /// Rescale to U − C_min/T_min as written; the total is U − C_min/T_min + Σ C_min/T_i.
    Literal,
    /// Rescale to U − Σ C_min/T_i, so the total is U up to nanosecond rounding.
    #[default]
    ExactTotal,
}

impl RmVsEdfVariant {
    /// The serialised name (`literal`, `exact-total`).
    pub fn name(self) -> &'static str {
        match self {
            RmVsEdfVariant::Literal => "literal",
            RmVsEdfVariant::ExactTotal => "exact-total",
        }
    }
}

fn default_c_min() -> Duration {
    Duration::from_us(50)
}
fn default_t_min() -> Duration {
    Duration::from_ms(10)
}
fn default_t_max() -> Duration {
    Duration::from_ms(100)
}
fn default_granularity() -> Duration {
    Duration::from_us(1)
}

/// Parameters of the recipe. `Default` is the paper's platform and constants with the first point
/// of its sweep: m = 48, x = 2, R = 0.6, C_min = 50 µs, periods in [10 ms, 100 ms].
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RmVsEdfParams {
    /// Number of processors m.
    pub m: usize,
    /// Tasks per processor x: N = x·m.
    pub x: usize,
    /// Per-processor utilisation R: U = R·m.
    pub r: f64,
    /// Which reading of the recipe.
    #[serde(default)]
    pub variant: RmVsEdfVariant,
    /// Minimum execution time C_min added to every task.
    #[serde(default = "default_c_min")]
    pub c_min: Duration,
    /// Smallest period T_min.
    #[serde(default = "default_t_min")]
    pub t_min: Duration,
    /// Largest period T_max.
    #[serde(default = "default_t_max")]
    pub t_max: Duration,
    /// Periods are multiples of this.
    #[serde(default = "default_granularity")]
    pub period_granularity: Duration,
}

impl Default for RmVsEdfParams {
    fn default() -> Self {
        RmVsEdfParams {
            m: 48,
            x: 2,
            r: 0.6,
            variant: RmVsEdfVariant::ExactTotal,
            c_min: default_c_min(),
            t_min: default_t_min(),
            t_max: default_t_max(),
            period_granularity: default_granularity(),
        }
    }
}

impl RmVsEdfParams {
    /// N = x·m (saturating; validation rejects huge values).
    pub fn n(&self) -> usize {
        self.x.saturating_mul(self.m)
    }

    /// The target total utilisation U = R·m.
    pub fn total_utilization(&self) -> f64 {
        self.r * self.m as f64
    }

    fn validate(&self) -> Result<(), GenError> {
        if self.m == 0 {
            return Err(GenError::invalid("m", self.m, "at least one processor"));
        }
        if self.x == 0 {
            return Err(GenError::invalid("x", self.x, "at least one task per processor"));
        }
        if self.n() > MAX_TASKS {
            return Err(GenError::invalid(
                "x·m",
                self.n(),
                format!("at most {MAX_TASKS} tasks"),
            ));
        }
        if !(self.r.is_finite() && self.r > 0.0 && self.r <= 1.0) {
            return Err(GenError::invalid(
                "R",
                self.r,
                "a per-processor utilisation in (0, 1]",
            ));
        }
        if self.t_min.is_zero() {
            return Err(GenError::invalid(
                "t_min",
                self.t_min,
                "a positive minimum period",
            ));
        }
        Ok(())
    }
}

/// The literal recipe's total utilisation for the given periods: U − C_min/T_min + Σ C_min/T_i
/// (before nanosecond rounding).
pub fn literal_total_utilization(p: &RmVsEdfParams, periods: &[Duration]) -> f64 {
    let c = p.c_min.0 as f64;
    p.total_utilization() - c / p.t_min.0 as f64 + periods.iter().map(|t| c / t.0 as f64).sum::<f64>()
}

/// Generates the N = x·m implicit-deadline tasks `t0`… of the recipe.
pub fn generate_tasks<R: Rng + ?Sized>(p: &RmVsEdfParams, rng: &mut R) -> Result<Vec<Task>, GenError> {
    p.validate()?;
    let n = p.n();
    let m = p.m as f64;
    let u_total = p.total_utilization();
    let periods = PeriodSampler::new(
        PeriodDistribution::LogUniform,
        p.t_min,
        p.t_max,
        p.period_granularity,
    )?;
    let c_min = p.c_min.0 as f64;

    // The order of draws follows each variant's description: the literal text draws utilisations
    // and then periods; ExactTotal needs the periods to compute its rescaling target.
    let (v, t) = match p.variant {
        RmVsEdfVariant::Literal => {
            let v = randfixedsum(rng, n, m, 0.0, 1.0)?;
            let t: Vec<Duration> = (0..n).map(|_| periods.sample(rng)).collect();
            (v, t)
        }
        RmVsEdfVariant::ExactTotal => {
            let t: Vec<Duration> = (0..n).map(|_| periods.sample(rng)).collect();
            let v = randfixedsum(rng, n, m, 0.0, 1.0)?;
            (v, t)
        }
    };
    let target = match p.variant {
        RmVsEdfVariant::Literal => u_total - c_min / p.t_min.0 as f64,
        RmVsEdfVariant::ExactTotal => u_total - t.iter().map(|ti| c_min / ti.0 as f64).sum::<f64>(),
    };
    if target.is_nan() || target <= 0.0 {
        return Err(GenError::invalid(
            "c_min",
            p.c_min,
            format!(
                "a C_min leaving utilisation to distribute: U = R·m = {u_total} minus the C_min share \
                 is {target} ≤ 0"
            ),
        ));
    }
    let scale = target / m;

    let mut tasks = Vec::with_capacity(n);
    for (i, (vi, ti)) in v.into_iter().zip(t).enumerate() {
        // C = u·T + C_min with u = v·scale, rounded to the nearest ns; C_min is whole ns already.
        let c = Duration(
            ((vi * scale * ti.0 as f64).round() as u64)
                .saturating_add(p.c_min.0)
                .max(1),
        );
        if c < p.c_min {
            return Err(GenError::ConstraintViolated {
                task: i,
                constraint: "C ≥ C_min",
                detail: format!("C = {c} < C_min = {}", p.c_min),
            });
        }
        if c >= ti {
            return Err(GenError::ConstraintViolated {
                task: i,
                constraint: "per-task utilisation < 1",
                detail: format!("C = {c} ≥ T = {ti}; lower R or C_min"),
            });
        }
        tasks.push(Task::implicit(format!("t{i}"), c, ti));
    }
    Ok(tasks)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    #[test]
    fn gen_rm_vs_edf_rejects_bad_parameters() {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let base = RmVsEdfParams::default();
        for bad in [
            RmVsEdfParams { m: 0, ..base },
            RmVsEdfParams { x: 0, ..base },
            RmVsEdfParams { r: 0.0, ..base },
            RmVsEdfParams { r: 1.5, ..base },
            RmVsEdfParams { r: f64::NAN, ..base },
            RmVsEdfParams {
                t_min: Duration::from_ms(200),
                ..base
            },
            RmVsEdfParams {
                t_min: Duration::ZERO,
                ..base
            },
            // C_min = 9 ms on periods ≥ 10 ms eats all of U.
            RmVsEdfParams {
                c_min: Duration::from_ms(9),
                ..base
            },
        ] {
            assert!(generate_tasks(&bad, &mut rng).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn gen_rm_vs_edf_reports_per_task_overload() {
        // x = 1, R = 1: every RandFixedSum value is 1, so u_i ≈ 1 − mean(C_min/T) and tasks with
        // short periods get u_i + C_min/T_i > 1.
        let mut rng = ChaCha8Rng::seed_from_u64(2);
        let p = RmVsEdfParams {
            m: 8,
            x: 1,
            r: 1.0,
            c_min: Duration::from_ms(2),
            ..RmVsEdfParams::default()
        };
        let e = generate_tasks(&p, &mut rng).unwrap_err();
        assert!(matches!(e, GenError::ConstraintViolated { .. }), "{e}");
    }
}
