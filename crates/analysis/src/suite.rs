//! Runs every test that applies to a task set on a platform and collects one row per test:
//! what `pacer analyze` prints. No algorithm lives here, only the choice of which tests apply.

use serde::Serialize;

use crate::admission::{self, AdmissionConfig};
use crate::global::{self as glob, bak, bcl, bcl_iterative, bertogna_cirinei, devi_anderson, gfb};
use crate::outcome::Verdict;
use crate::outcome::{Outcome, TestKind};
use crate::partition::{self, milp, Assignment, DmBin, EdfBin, Heuristic, MilpOptions, Unplaced};
use crate::uni::{edf_utilization, hyperbolic, liu_layland, qpa, rta};
use crate::Timing;

/// What to analyse against.
#[derive(Debug, Clone, Serialize)]
pub struct SuiteConfig {
    /// Number of identical CPUs.
    pub cpus: usize,
    /// CPUs per cluster for clustered scheduling; `None` skips clustered analysis.
    pub cluster_size: Option<usize>,
    /// Run the optimal min–max-load (ILP) assignment.
    pub milp: bool,
    /// Wall-clock limit for the optimal (ILP) assignment.
    #[serde(
        rename = "milp_time_limit_ns",
        serialize_with = "pacer_model::time::as_ns::one"
    )]
    pub milp_time_limit: pacer_model::Duration,
    /// Kernel settings for the SCHED_DEADLINE admission check.
    pub admission: AdmissionConfig,
    /// Bin-packing heuristics tried for partitioned scheduling.
    pub heuristics: Vec<Heuristic>,
    /// Bin-packing heuristics tried for clustered scheduling (the ILP is always added).
    pub cluster_heuristics: Vec<Heuristic>,
}

impl SuiteConfig {
    pub fn new(cpus: usize) -> Self {
        SuiteConfig {
            cpus,
            cluster_size: None,
            milp: true,
            milp_time_limit: pacer_model::Duration::from_secs(10),
            admission: AdmissionConfig::linux_default(cpus),
            heuristics: Heuristic::ALL.to_vec(),
            cluster_heuristics: vec![Heuristic::FFD, Heuristic::WFD],
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

/// Global EDF and global fixed-priority tests on `m` CPUs.
pub fn global(ts: &[Timing], m: usize) -> Vec<Row> {
    use TestKind::*;
    vec![
        row(
            "g-edf/gfb",
            "global EDF",
            "GFB",
            Sufficient,
            "Goossens, Funk & Baruah, RTS 2003",
            gfb::test(ts, m),
        ),
        row(
            "g-edf/bak",
            "global EDF",
            "BAK",
            Sufficient,
            "Baker, RTSS 2003 / TPDS 2005",
            bak::test(ts, m),
        ),
        row(
            "g-edf/bcl",
            "global EDF",
            "BCL",
            Sufficient,
            "Bertogna, Cirinei & Lipari, ECRTS 2005",
            bcl::test(ts, m),
        ),
        row(
            "g-edf/bcl-iterative",
            "global EDF",
            "iterative BCL (slack)",
            Sufficient,
            "Bertogna & Cirinei, RTSS 2007; BCL, TPDS 2009",
            bcl_iterative::test(ts, m),
        ),
        row(
            "g-edf/tardiness",
            "global EDF (soft)",
            "Devi–Anderson tardiness",
            Bound,
            "Devi & Anderson, RTSS 2005 / RTS 2008",
            devi_anderson::test(ts, m),
        ),
        row(
            "g-dm/rta",
            "global DM",
            "Bertogna–Cirinei RTA",
            Sufficient,
            "Bertogna & Cirinei, RTSS 2007",
            bertogna_cirinei::test_dm(ts, m),
        ),
    ]
}

/// A per-bin schedulability test: the exact uniprocessor test for partitions, a global test for
/// clusters.
struct BinTest {
    /// Row id prefix, e.g. `p-edf`.
    id: &'static str,
    scheduler: &'static str,
    /// Name of the per-bin test, for the row's "test" column.
    test: &'static str,
    /// Sufficient when the per-bin test is (clusters); partitions use exact per-CPU tests, but a
    /// failed heuristic still proves nothing, so partition rows are sufficient too.
    source: &'static str,
    /// The test on a whole bin (for the ILP's assignment).
    fits: fn(&[Timing], usize) -> bool,
    /// How the heuristics ask it, candidate by candidate.
    packer: Packer,
}

/// How a heuristic asks a [`BinTest`] whether a candidate fits.
#[derive(Clone, Copy)]
enum Packer {
    /// Incremental per-CPU state: same answers as `load_fits && fits` on the whole bin.
    Edf,
    Dm,
    /// `load_fits && fits` on the bin's slice (global tests per cluster).
    Slice,
}

fn qpa_fits(bin: &[Timing], _cap: usize) -> bool {
    qpa::schedulable(bin)
}
fn rta_dm_fits(bin: &[Timing], _cap: usize) -> bool {
    rta::schedulable_dm(bin)
}

const PARTITIONED: [BinTest; 2] = [
    BinTest {
        id: "p-edf",
        scheduler: "partitioned EDF",
        test: "QPA per CPU",
        source: "bin packing + Zhang & Burns 2009",
        fits: qpa_fits,
        packer: Packer::Edf,
    },
    BinTest {
        id: "p-dm",
        scheduler: "partitioned DM",
        test: "RTA per CPU",
        source: "bin packing + Audsley et al. 1993",
        fits: rta_dm_fits,
        packer: Packer::Dm,
    },
];

const CLUSTERED: [BinTest; 2] = [
    BinTest {
        id: "c-edf",
        scheduler: "clustered EDF",
        test: "global EDF tests per cluster",
        source: "bin packing + GFB/BCL/BAK/iter. BCL",
        fits: glob::edf_schedulable,
        packer: Packer::Slice,
    },
    BinTest {
        id: "c-dm",
        scheduler: "clustered DM",
        test: "Bertogna–Cirinei RTA per cluster",
        source: "bin packing + Bertogna & Cirinei 2007",
        fits: glob::fp_dm_schedulable,
        packer: Packer::Slice,
    },
];

/// Packs with `bt`'s test, Σu ≤ capacity first (necessary for every scheduler, and cheap).
fn pack_for(ts: &[Timing], bins: &[usize], h: Heuristic, bt: &BinTest) -> Result<Assignment, Unplaced> {
    match bt.packer {
        Packer::Edf => partition::pack_with(ts, bins, h, EdfBin::new),
        Packer::Dm => partition::pack_with(ts, bins, h, DmBin::new),
        Packer::Slice => partition::pack(ts, bins, h, |bin, cap| {
            partition::load_fits(bin, cap) && (bt.fits)(bin, cap)
        }),
    }
}

fn placement_of(a: &Assignment, note: Option<String>) -> Placement {
    Placement {
        bin_of_task: a.bin_of.iter().map(|&b| Some(b)).collect(),
        loads: a.loads.clone(),
        capacities: a.capacities.clone(),
        note,
    }
}

/// Heuristic rows and ILP rows for `bins` (capacities in CPUs) under each per-bin test.
fn packed(
    ts: &[Timing],
    bins: &[usize],
    tests: &[BinTest],
    heuristics: &[Heuristic],
    cfg: &SuiteConfig,
) -> Vec<Row> {
    let mut rows = Vec::new();
    for bt in tests {
        for h in heuristics {
            let result = pack_for(ts, bins, *h, bt);
            let mut outcome = partition::outcome(&result);
            outcome.bound = Some(1.0);
            let mut r = row(
                &format!("{}/{}", bt.id, h.name()),
                bt.scheduler,
                &format!("{} + {}", h.long_name(), bt.test),
                TestKind::Sufficient,
                bt.source,
                outcome,
            );
            match &result {
                Ok(a) => r.placement = Some(placement_of(a, None)),
                Err(e) => r.outcome.note = Some(format!("task {} fits in no bin", e.task)),
            }
            rows.push(r);
        }
    }
    if !cfg.milp {
        return rows;
    }
    // One ILP solve serves every per-bin test: it balances load, the tests then judge each bin.
    let opts = MilpOptions::with_time_limit(std::time::Duration::from_nanos(cfg.milp_time_limit.ns()));
    let solved = milp::solve(ts, bins, &opts);
    for bt in tests {
        let id = format!("{}/ilp", bt.id);
        let test = format!("min–max-load ILP + {}", bt.test);
        let source = "Lelli et al., JSS 2012 §5.4 (ILP, microlp)";
        let r = match &solved {
            Ok(res) => {
                let failing = res.assignment.first_failing_bin(ts, bt.fits);
                let mut o = Outcome::new(match failing {
                    None => Verdict::Schedulable,
                    Some(_) => Verdict::NotProven,
                });
                o.value = Some(res.max_load);
                o.bound = Some(1.0);
                let status = format!(
                    "ILP {}: max load {:.4}, lower bound {:.4}, heuristic {:.4}, {} nodes, {:.2}s",
                    if res.optimal {
                        "optimal".to_string()
                    } else {
                        format!("{:?}, not proven optimal", res.status)
                    },
                    res.max_load,
                    res.lower_bound,
                    res.heuristic_max_load,
                    res.nodes,
                    res.elapsed.as_secs_f64()
                );
                o.note = Some(match failing {
                    None => status.clone(),
                    Some(b) => format!("bin {b} fails {}; {status}", bt.test),
                });
                let mut r = row(&id, bt.scheduler, &test, TestKind::Sufficient, source, o);
                r.placement = Some(placement_of(&res.assignment, Some(status)));
                r
            }
            Err(e) => row(
                &id,
                bt.scheduler,
                &test,
                TestKind::Sufficient,
                source,
                Outcome::new(Verdict::NotProven).with_note(e.to_string()),
            ),
        };
        rows.push(r);
    }
    rows
}

/// Partitioned rows: every configured heuristic and the ILP, each with QPA and DM-RTA per CPU.
pub fn partitioned(ts: &[Timing], cfg: &SuiteConfig) -> Vec<Row> {
    packed(ts, &vec![1; cfg.cpus], &PARTITIONED, &cfg.heuristics, cfg)
}

/// Clustered rows (when a cluster size between 2 and m − 1 is configured).
pub fn clustered(ts: &[Timing], cfg: &SuiteConfig) -> Vec<Row> {
    match cfg.cluster_size {
        Some(k) if k > 1 && k < cfg.cpus => packed(
            ts,
            &partition::clusters_of(cfg.cpus, k),
            &CLUSTERED,
            &cfg.cluster_heuristics,
            cfg,
        ),
        _ => Vec::new(),
    }
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
    } else {
        rows.extend(global(ts, cfg.cpus));
        rows.extend(partitioned(ts, cfg));
        rows.extend(clustered(ts, cfg));
    }
    rows.push(kernel_admission(ts, &cfg.admission));
    rows
}
