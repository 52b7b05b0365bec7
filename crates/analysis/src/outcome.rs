//! The common result shape of every schedulability test, so `pacer analyze` can tabulate them.

use pacer_model::Duration;
use serde::Serialize;

/// What a test concluded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "verdict", content = "reason", rename_all = "snake_case")]
pub enum Verdict {
    /// The test proves every deadline is met.
    Schedulable,
    /// The test proves some deadline can be missed (exact and necessary tests only).
    Unschedulable,
    /// A sufficient test failed: schedulability is not shown, but not disproved either.
    NotProven,
    /// The test does not apply to this task set or platform (the reason says why).
    NotApplicable(String),
    /// The test could not finish (e.g. an iteration or time limit); the reason says which.
    Unknown(String),
}

impl Verdict {
    pub fn is_schedulable(&self) -> bool {
        matches!(self, Verdict::Schedulable)
    }

    /// A short word for tables.
    pub fn label(&self) -> &'static str {
        match self {
            Verdict::Schedulable => "yes",
            Verdict::Unschedulable => "NO",
            Verdict::NotProven => "not proven",
            Verdict::NotApplicable(_) => "n/a",
            Verdict::Unknown(_) => "unknown",
        }
    }
}

/// What kind of condition a test checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TestKind {
    /// Necessary and sufficient.
    Exact,
    /// Passing proves schedulability; failing proves nothing.
    Sufficient,
    /// Failing proves unschedulability; passing proves nothing.
    Necessary,
    /// Bounds a quantity (e.g. tardiness) rather than deciding schedulability.
    Bound,
    /// Whether the kernel would accept the reservations (neither necessary nor sufficient for
    /// meeting deadlines under every scheduler).
    Admission,
}

impl TestKind {
    pub fn label(self) -> &'static str {
        match self {
            TestKind::Exact => "exact",
            TestKind::Sufficient => "sufficient",
            TestKind::Necessary => "necessary",
            TestKind::Bound => "bound",
            TestKind::Admission => "admission",
        }
    }
}

/// The result of one test on one task set.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Outcome {
    #[serde(flatten)]
    pub verdict: Verdict,
    /// The quantity the test compared (e.g. total utilisation), when it compares one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<f64>,
    /// The bound it was compared with (e.g. n(2^{1/n} − 1)).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bound: Option<f64>,
    /// Per-task response-time (or tardiness) bounds in input order; `None` where unbounded or
    /// above the deadline.
    #[serde(
        rename = "per_task_ns",
        skip_serializing_if = "Option::is_none",
        serialize_with = "pacer_model::time::as_ns::opt_list"
    )]
    pub per_task: Option<Vec<Option<Duration>>>,
    /// Index of the first task the test could not clear, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failing_task: Option<usize>,
    /// Free text for humans (e.g. the λ that made BAK succeed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl Outcome {
    pub fn new(verdict: Verdict) -> Self {
        Outcome {
            verdict,
            value: None,
            bound: None,
            per_task: None,
            failing_task: None,
            note: None,
        }
    }

    /// A sufficient utilisation-style test: schedulable when `value ≤ bound`, otherwise not proven.
    pub fn sufficient_bound(value: f64, bound: f64) -> Self {
        let verdict = if value <= bound + EPS {
            Verdict::Schedulable
        } else {
            Verdict::NotProven
        };
        Outcome {
            value: Some(value),
            bound: Some(bound),
            ..Outcome::new(verdict)
        }
    }

    pub fn not_applicable(reason: impl Into<String>) -> Self {
        Outcome::new(Verdict::NotApplicable(reason.into()))
    }

    pub fn with_note(mut self, note: impl Into<String>) -> Self {
        self.note = Some(note.into());
        self
    }
}

/// Tolerance for comparisons of floating-point sums of ratios (utilisations, densities): sums of
/// n ratios carry O(n·ε) rounding, and a set with U exactly at a bound must not fail by 1 ulp.
pub const EPS: f64 = 1e-9;
