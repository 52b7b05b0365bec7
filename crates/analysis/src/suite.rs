//! Runs every test that applies to a task set on a platform and collects one row per test:
//! what `pacer analyze` prints. No algorithm lives here, only the choice of which tests apply.

use serde::Serialize;

use crate::admission::{self, AdmissionConfig};
use crate::outcome::{Outcome, TestKind};
use crate::uni::{edf_utilization, hyperbolic, liu_layland, qpa, rta};
use crate::Timing;

/// What to analyse against.
#[derive(Debug, Clone, Serialize)]
pub struct SuiteConfig {
    /// Number of identical CPUs.
    pub cpus: usize,
    /// CPUs per cluster for clustered scheduling; `None` skips clustered analysis.
    pub cluster_size: Option<usize>,
    /// Wall-clock limit for the optimal (ILP) assignment.
    pub milp_time_limit: std::time::Duration,
    /// Kernel settings for the SCHED_DEADLINE admission check.
    pub admission: AdmissionConfig,
}

impl SuiteConfig {
    pub fn new(cpus: usize) -> Self {
        SuiteConfig {
            cpus,
            cluster_size: None,
            milp_time_limit: std::time::Duration::from_secs(10),
            admission: AdmissionConfig::linux_default(cpus),
        }
    }
}

/// One analysed (scheduler, test) pair.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// Stable identifier, e.g. `g-edf/bcl`, `p-edf/ffd`.
    pub id: String,
    /// The scheduler analysed, e.g. "global EDF".
    pub scheduler: String,
    /// The test, e.g. "BCL".
    pub test: String,
    pub kind: TestKind,
    /// Short citation of the test's source.
    pub source: &'static str,
    #[serde(flatten)]
    pub outcome: Outcome,
    /// Task → CPU/cluster placement, for partitioned and clustered rows.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub placement: Option<Placement>,
}

/// Where each task went and how loaded each bin is.
#[derive(Debug, Clone, Serialize)]
pub struct Placement {
    /// Bin (CPU or cluster) index per task, input order; `None` for a task that fits nowhere.
    pub bin_of_task: Vec<Option<usize>>,
    /// Σ utilisation per bin.
    pub loads: Vec<f64>,
    /// Capacity of each bin in CPUs.
    pub capacities: Vec<usize>,
    /// Free text about how the placement was found (e.g. ILP status).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

fn row(id: &str, scheduler: &str, test: &str, kind: TestKind, source: &'static str, outcome: Outcome) -> Row {
    Row {
        id: id.to_string(),
        scheduler: scheduler.to_string(),
        test: test.to_string(),
        kind,
        source,
        outcome,
        placement: None,
    }
}

/// Uniprocessor EDF and fixed-priority tests.
pub fn uniprocessor(ts: &[Timing]) -> Vec<Row> {
    use TestKind::*;
    let implicit = crate::timing::implicit_deadlines(ts);
    vec![
        row(
            "edf/utilization",
            "EDF",
            if implicit {
                "U ≤ 1"
            } else {
                "density Σ C/D ≤ 1"
            },
            if implicit { Exact } else { Sufficient },
            "Liu & Layland, JACM 1973",
            edf_utilization::test(ts),
        ),
        row(
            "edf/qpa",
            "EDF",
            "QPA processor demand",
            Exact,
            "Zhang & Burns, IEEE TC 2009",
            qpa::test(ts),
        ),
        row(
            "rm/liu-layland",
            "RM",
            "U ≤ n(2^{1/n} − 1)",
            Sufficient,
            "Liu & Layland, JACM 1973",
            liu_layland::test(ts),
        ),
        row(
            "rm/hyperbolic",
            "RM",
            "Π(U_i + 1) ≤ 2",
            Sufficient,
            "Bini, Buttazzo & Buttazzo, IEEE TC 2003",
            hyperbolic::test(ts),
        ),
        row(
            "rm/rta",
            "RM",
            "response-time analysis",
            Exact,
            "Joseph & Pandya 1986; Audsley et al. 1993",
            rta::test_rm(ts),
        ),
        row(
            "dm/rta",
            "DM",
            "response-time analysis",
            Exact,
            "Joseph & Pandya 1986; Audsley et al. 1993",
            rta::test_dm(ts),
        ),
    ]
}

/// The SCHED_DEADLINE admission row.
pub fn kernel_admission(ts: &[Timing], cfg: &AdmissionConfig) -> Row {
    row(
        "linux/sched_deadline",
        "SCHED_DEADLINE",
        "kernel admission control",
        TestKind::Admission,
        "kernel/sched/deadline.c __dl_overflow()",
        admission::test(ts, cfg),
    )
}

/// Every applicable test for `ts` on `cfg`.
pub fn run(ts: &[Timing], cfg: &SuiteConfig) -> Vec<Row> {
    let mut rows = Vec::new();
    if cfg.cpus == 1 {
        rows.extend(uniprocessor(ts));
    }
    rows.push(kernel_admission(ts, &cfg.admission));
    rows
}
