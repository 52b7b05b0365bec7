//! Task-set generators.
//!
//! Utilisation vectors come from [`mod@uunifast`] (Bini & Buttazzo 2005, and the discard variant of
//! Davis & Burns 2009), [`mod@randfixedsum`] (Stafford 2006; Emberson, Stafford & Davis 2010) or the
//! UNC named distributions of [`unc`] (Brandenburg's SchedCAT); periods come from [`periods`]
//! (uniform or log-uniform with a granularity) or [`unc`]; [`rm_vs_edf`] is the complete recipe of
//! the RM-vs-EDF multicore Linux paper. [`generate`] turns a serialisable [`GenSpec`] into a
//! [`TaskSet`] whose provenance records the seed and every parameter, so that any generated file
//! can be regenerated bit for bit.
//!
//! Every random draw goes through `ChaCha8Rng::seed_from_u64(seed)`: ChaCha's output is specified
//! independently of platform and word size, unlike `StdRng`, whose algorithm may change between
//! `rand` releases.

pub mod periods;
pub mod randfixedsum;
pub mod rm_vs_edf;
pub mod unc;
pub mod uunifast;

use std::fmt;
use std::str::FromStr;

use pacer_model::{Duration, Provenance, Task, TaskSet};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Uniform};
use serde::{Deserialize, Serialize};

pub use periods::{PeriodDistribution, PeriodSampler};
pub use randfixedsum::randfixedsum;
pub use rm_vs_edf::{RmVsEdfParams, RmVsEdfVariant};
pub use unc::{UncPeriods, UncUtilization};
pub use uunifast::{uunifast, uunifast_discard};

/// Why a generation request was rejected. Messages name the offending parameter and what was
/// expected.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum GenError {
    /// A parameter has a value outside its domain.
    #[error("invalid {parameter} = {value}: expected {expected}")]
    InvalidParameter {
        parameter: &'static str,
        value: String,
        expected: String,
    },
    /// RandFixedSum was asked for a sum that no vector in [a, b]^n reaches.
    #[error(
        "randfixedsum: sum s = {sum} is unreachable with n = {n} values in [a, b] = [{a}, {b}]: \
         expected n·a ≤ s ≤ n·b, i.e. {lo} ≤ s ≤ {hi}"
    )]
    SumOutOfRange {
        n: usize,
        sum: f64,
        a: f64,
        b: f64,
        lo: f64,
        hi: f64,
    },
    /// UUniFast-discard drew `tries` vectors and every one had a value above `max`.
    #[error(
        "uunifast-discard: all {tries} draws of n = {n} utilisations summing to {total} had a value \
         above {max}; increase n or max_tries, or lower the total (expected total well below n·max)"
    )]
    DiscardLimit {
        n: usize,
        total: f64,
        max: f64,
        tries: u32,
    },
    /// Period range with min > max.
    #[error("period range [{min}, {max}] is empty: expected min ≤ max")]
    PeriodMinAboveMax { min: Duration, max: Duration },
    /// Period granularity of zero.
    #[error("period granularity is 0: expected a positive duration such as 1ns or 1ms")]
    ZeroGranularity,
    /// Period granularity larger than the largest period.
    #[error("period granularity {granularity} exceeds the maximum period {max}: expected granularity ≤ max")]
    GranularityAboveMax { granularity: Duration, max: Duration },
    /// No multiple of the granularity lies in the period range.
    #[error(
        "no multiple of the granularity {granularity} lies in the period range [{min}, {max}]: \
         expected a range containing at least one multiple"
    )]
    NoMultipleInRange {
        min: Duration,
        max: Duration,
        granularity: Duration,
    },
    /// An unknown distribution name (UNC utilisations or periods, or a method name).
    #[error("unknown {kind} `{name}`: expected one of {valid}")]
    UnknownName {
        kind: &'static str,
        name: String,
        valid: String,
    },
    /// A generated task broke a constraint the recipe promises (reported, never silently fixed).
    #[error("task {task} violates {constraint}: {detail}")]
    ConstraintViolated {
        task: usize,
        constraint: &'static str,
        detail: String,
    },
}

impl GenError {
    pub(crate) fn invalid(
        parameter: &'static str,
        value: impl fmt::Display,
        expected: impl Into<String>,
    ) -> Self {
        GenError::InvalidParameter {
            parameter,
            value: value.to_string(),
            expected: expected.into(),
        }
    }
}

/// One generation request: a seed and a recipe. Serialises to a flat JSON object such as
/// `{"seed": 1, "recipe": "rm-vs-edf", "m": 48, "x": 2, "r": 0.6, ...}`, which is exactly what
/// [`generate`] writes into [`Provenance::parameters`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GenSpec {
    /// Seed of the `ChaCha8Rng` that makes every random draw.
    pub seed: u64,
    #[serde(flatten)]
    pub recipe: Recipe,
}

/// How the tasks are made.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "recipe", rename_all = "kebab-case")]
pub enum Recipe {
    /// Utilisations, periods and deadlines drawn independently by the chosen methods.
    Independent(IndependentSpec),
    /// The task-set recipe of the RM-vs-EDF multicore Linux paper, §5.3.
    RmVsEdf(RmVsEdfParams),
}

/// Parameters of [`Recipe::Independent`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IndependentSpec {
    /// Number of tasks. Required for uunifast, uunifast-discard and randfixedsum; for UNC it is an
    /// optional upper bound (SchedCAT's `max_tasks`), the utilisation cap deciding otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub n: Option<usize>,
    /// Target total utilisation Σ C/T (for UNC: the cap the total may not exceed).
    pub utilization: f64,
    /// How per-task utilisations are drawn.
    pub utilizations: UtilizationMethod,
    /// How periods are drawn.
    pub periods: PeriodMethod,
    /// How deadlines are chosen.
    #[serde(default)]
    pub deadlines: DeadlineMethod,
}

/// How per-task utilisations are drawn. Text form (for command lines): `uunifast`,
/// `uunifast-discard`, `randfixedsum`, `unc:<name>` (e.g. `unc:bimo-medium`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "method", rename_all = "kebab-case")]
pub enum UtilizationMethod {
    /// UUniFast (Bini & Buttazzo 2005); requires a total ≤ 1 so that no u_i exceeds 1.
    Uunifast,
    /// UUniFast-discard (Davis & Burns 2009): redraw while any u_i > `max`, at most `max_tries` times.
    UunifastDiscard {
        #[serde(default = "one")]
        max: f64,
        #[serde(default = "default_max_tries")]
        max_tries: u32,
    },
    /// RandFixedSum (Stafford 2006) with every u_i in [`min`, `max`] ⊆ [0, 1].
    Randfixedsum {
        #[serde(default)]
        min: f64,
        #[serde(default = "one")]
        max: f64,
    },
    /// A UNC named distribution; tasks are drawn until the total would exceed the cap.
    Unc { distribution: UncUtilization },
}

fn one() -> f64 {
    1.0
}

/// Default bound on UUniFast-discard redraws.
pub const DEFAULT_MAX_TRIES: u32 = 10_000;

fn default_max_tries() -> u32 {
    DEFAULT_MAX_TRIES
}

fn one_ns() -> Duration {
    Duration(1)
}

const UTILIZATION_METHODS: &str = "uunifast, uunifast-discard, randfixedsum, unc:<name> with <name> one of \
     uni-light, uni-medium, uni-heavy, exp-light, exp-medium, exp-heavy, bimo-light, bimo-medium, bimo-heavy";

impl FromStr for UtilizationMethod {
    type Err = GenError;

    /// Parses `uunifast`, `uunifast-discard` (max 1, default tries), `randfixedsum` (in [0, 1]) or
    /// `unc:<name>`.
    fn from_str(s: &str) -> Result<Self, GenError> {
        let t = s.trim();
        match t {
            "uunifast" => Ok(UtilizationMethod::Uunifast),
            "uunifast-discard" => Ok(UtilizationMethod::UunifastDiscard {
                max: 1.0,
                max_tries: DEFAULT_MAX_TRIES,
            }),
            "randfixedsum" => Ok(UtilizationMethod::Randfixedsum { min: 0.0, max: 1.0 }),
            _ => match t.strip_prefix("unc:") {
                Some(name) => Ok(UtilizationMethod::Unc {
                    distribution: name.parse()?,
                }),
                None => Err(GenError::UnknownName {
                    kind: "utilisation method",
                    name: s.to_string(),
                    valid: UTILIZATION_METHODS.to_string(),
                }),
            },
        }
    }
}

/// How periods are drawn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "method", rename_all = "kebab-case")]
pub enum PeriodMethod {
    /// Uniform in [min, max], rounded to a multiple of `granularity`.
    Uniform {
        min: Duration,
        max: Duration,
        #[serde(default = "one_ns")]
        granularity: Duration,
    },
    /// Log-uniform in [min, max], rounded to a multiple of `granularity`.
    LogUniform {
        min: Duration,
        max: Duration,
        #[serde(default = "one_ns")]
        granularity: Duration,
    },
    /// A UNC named period distribution (integer milliseconds, as in SchedCAT).
    Unc { distribution: UncPeriods },
}

/// How relative deadlines are chosen.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[serde(tag = "method", rename_all = "kebab-case")]
pub enum DeadlineMethod {
    /// D = T.
    #[default]
    Implicit,
    /// D = C + r·(T − C) with r uniform in [lo, hi] ⊆ [0, 1] (SchedCAT's `uniform_slack`).
    Constrained { lo: f64, hi: f64 },
}

impl GenSpec {
    /// An independent-draws request with implicit deadlines.
    pub fn independent(
        seed: u64,
        n: Option<usize>,
        utilization: f64,
        utilizations: UtilizationMethod,
        periods: PeriodMethod,
    ) -> Self {
        GenSpec {
            seed,
            recipe: Recipe::Independent(IndependentSpec {
                n,
                utilization,
                utilizations,
                periods,
                deadlines: DeadlineMethod::Implicit,
            }),
        }
    }

    /// The RM-vs-EDF recipe with the paper's C_min and period range and the given m, x, R.
    pub fn rm_vs_edf(seed: u64, m: usize, x: usize, r: f64, variant: RmVsEdfVariant) -> Self {
        GenSpec {
            seed,
            recipe: Recipe::RmVsEdf(RmVsEdfParams {
                m,
                x,
                r,
                variant,
                ..RmVsEdfParams::default()
            }),
        }
    }

    /// The provenance [`generate`] records: the seed, and the spec as a JSON object (the same
    /// object `serde_json::to_value(spec)` gives).
    pub fn provenance(&self) -> Provenance {
        let parameters = match serde_json::to_value(self) {
            Ok(serde_json::Value::Object(map)) => map,
            // A struct with a flattened tagged enum always serialises to an object.
            _ => serde_json::Map::new(),
        };
        Provenance {
            seed: Some(self.seed),
            parameters,
            command: None,
        }
    }
}

/// Generates one task set: tasks `t0`..`t{n-1}` with integer-nanosecond times, C rounded to the
/// nearest nanosecond and at least 1 ns, C ≤ D ≤ T, and the seed and spec recorded in
/// `generator`.
pub fn generate(spec: &GenSpec) -> Result<TaskSet, GenError> {
    let mut rng = ChaCha8Rng::seed_from_u64(spec.seed);
    let tasks = match &spec.recipe {
        Recipe::Independent(s) => independent(s, &mut rng)?,
        Recipe::RmVsEdf(p) => rm_vs_edf::generate_tasks(p, &mut rng)?,
    };
    Ok(TaskSet {
        name: None,
        generator: Some(spec.provenance()),
        wss_bytes: None,
        tasks,
    })
}

/// Generates `count` task sets; set k uses the seed [`derive_seed`]`(spec.seed, k)`, which its
/// provenance records, so each set can be regenerated alone with [`generate`].
pub fn generate_many(spec: &GenSpec, count: usize) -> Result<Vec<TaskSet>, GenError> {
    (0..count as u64)
        .map(|k| {
            let mut s = spec.clone();
            s.seed = derive_seed(spec.seed, k);
            generate(&s)
        })
        .collect()
}

/// The seed of set `k` in a batch seeded with `seed`: the (k+1)-th output of SplitMix64 (Steele,
/// Lea & Flood 2014) started at `seed`. SplitMix64's finaliser decorrelates neighbouring inputs,
/// so sets k and k+1 do not get related ChaCha streams.
pub fn derive_seed(seed: u64, k: u64) -> u64 {
    let mut z = seed.wrapping_add(k.wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Upper bound on the number of tasks any recipe may produce, so a typo (n = 10^9, or a UNC cap of
/// 10^6) is an error rather than an out-of-memory abort.
pub const MAX_TASKS: usize = 1_000_000;

fn independent<R: Rng + ?Sized>(s: &IndependentSpec, rng: &mut R) -> Result<Vec<Task>, GenError> {
    if !(s.utilization.is_finite() && s.utilization > 0.0) {
        return Err(GenError::invalid(
            "utilization",
            s.utilization,
            "a finite total utilisation > 0",
        ));
    }
    if let Some(n) = s.n {
        if n == 0 || n > MAX_TASKS {
            return Err(GenError::invalid(
                "n",
                n,
                format!("a task count in [1, {MAX_TASKS}]"),
            ));
        }
    }
    let deadlines = DeadlineSampler::new(s.deadlines)?;
    let periods = PeriodSource::new(&s.periods)?;
    let need_n = || {
        s.n.ok_or_else(|| {
            GenError::invalid(
                "n",
                "none",
                "a task count: uunifast, uunifast-discard and randfixedsum need n (only unc derives it)",
            )
        })
    };

    // Utilisations are drawn first (all of them), then periods, so the utilisation vector depends
    // on the seed and n only, whatever the period method. UNC draws (T, u) task by task instead,
    // as SchedCAT does, because its stopping rule looks at each task's rounded C/T.
    let utilizations = match &s.utilizations {
        UtilizationMethod::Unc { .. } => None,
        UtilizationMethod::Uunifast => {
            if s.utilization > 1.0 {
                return Err(GenError::invalid(
                    "utilization",
                    s.utilization,
                    "≤ 1 for plain uunifast (larger totals can give u_i > 1; use uunifast-discard \
                     or randfixedsum)",
                ));
            }
            Some(uunifast(rng, need_n()?, s.utilization)?)
        }
        UtilizationMethod::UunifastDiscard { max, max_tries } => {
            if !(*max > 0.0 && *max <= 1.0) {
                return Err(GenError::invalid(
                    "utilizations.max",
                    max,
                    "a per-task bound in (0, 1] (C ≤ T)",
                ));
            }
            Some(uunifast_discard(rng, need_n()?, s.utilization, *max, *max_tries)?)
        }
        UtilizationMethod::Randfixedsum { min, max } => {
            if !(*min >= 0.0 && min <= max && *max <= 1.0) {
                return Err(GenError::invalid(
                    "utilizations.min/max",
                    format!("[{min}, {max}]"),
                    "0 ≤ min ≤ max ≤ 1 (C ≤ T)",
                ));
            }
            Some(randfixedsum(rng, need_n()?, s.utilization, *min, *max)?)
        }
    };
    let pairs: Vec<(Duration, Duration)> = match (utilizations, &s.utilizations) {
        (Some(u), _) => u
            .into_iter()
            .map(|ui| {
                let t = periods.sample(rng);
                (wcet_from_utilization(ui, t), t)
            })
            .collect(),
        (None, UtilizationMethod::Unc { distribution }) => {
            unc::draw_until_cap(rng, *distribution, s.utilization, s.n, |r: &mut R| {
                periods.sample(r)
            })?
        }
        // Only UNC leaves `utilizations` empty.
        (None, _) => Vec::new(),
    };

    Ok(pairs
        .into_iter()
        .enumerate()
        .map(|(i, (c, t))| Task::constrained(format!("t{i}"), c, deadlines.sample(rng, c, t), t))
        .collect())
}

/// C = u·T rounded to the nearest nanosecond, clamped to [1 ns, T].
pub(crate) fn wcet_from_utilization(u: f64, period: Duration) -> Duration {
    let c = (u * period.0 as f64).round();
    // `as u64` saturates (NaN → 0), and the clamp restores 1 ≤ C ≤ T.
    Duration((c as u64).clamp(1, period.0.max(1)))
}

/// The period distribution of an [`IndependentSpec`], validated once.
enum PeriodSource {
    Range(PeriodSampler),
    Unc(unc::UncPeriodSampler),
}

impl PeriodSource {
    fn new(m: &PeriodMethod) -> Result<Self, GenError> {
        Ok(match m {
            PeriodMethod::Uniform {
                min,
                max,
                granularity,
            } => PeriodSource::Range(PeriodSampler::new(
                PeriodDistribution::Uniform,
                *min,
                *max,
                *granularity,
            )?),
            PeriodMethod::LogUniform {
                min,
                max,
                granularity,
            } => PeriodSource::Range(PeriodSampler::new(
                PeriodDistribution::LogUniform,
                *min,
                *max,
                *granularity,
            )?),
            PeriodMethod::Unc { distribution } => PeriodSource::Unc(distribution.sampler()?),
        })
    }

    fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> Duration {
        match self {
            PeriodSource::Range(s) => s.sample(rng),
            PeriodSource::Unc(s) => s.sample(rng),
        }
    }
}

/// Draws deadlines for a [`DeadlineMethod`].
struct DeadlineSampler {
    ratio: Option<Uniform<f64>>,
}

impl DeadlineSampler {
    fn new(m: DeadlineMethod) -> Result<Self, GenError> {
        match m {
            DeadlineMethod::Implicit => Ok(DeadlineSampler { ratio: None }),
            DeadlineMethod::Constrained { lo, hi } => {
                if !(lo >= 0.0 && lo <= hi && hi <= 1.0) {
                    return Err(GenError::invalid(
                        "deadlines.lo/hi",
                        format!("[{lo}, {hi}]"),
                        "0 ≤ lo ≤ hi ≤ 1 (D = C + r·(T − C) must stay in [C, T])",
                    ));
                }
                let u = Uniform::new_inclusive(lo, hi).map_err(|e| {
                    GenError::invalid("deadlines.lo/hi", format!("[{lo}, {hi}]"), e.to_string())
                })?;
                Ok(DeadlineSampler { ratio: Some(u) })
            }
        }
    }

    fn sample<R: Rng + ?Sized>(&self, rng: &mut R, c: Duration, t: Duration) -> Duration {
        match &self.ratio {
            None => t,
            Some(u) => {
                let slack = t.0 - c.0;
                let r = u.sample(rng);
                let extra = ((r * slack as f64).round() as u64).min(slack);
                Duration(c.0 + extra)
            }
        }
    }
}
