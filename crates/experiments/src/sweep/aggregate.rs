//! Aggregation in the layout of rm-vs-edf-multicore-linux.txt Table 4 (§6.2): for each
//! configuration and each (U, n) row, normalised laxity, measured U, context-switch rate and
//! migration rate as mean ± sd; the laxity distributions of Figs. 3–4; and, when both backends
//! ran, the simulated-minus-measured difference per configuration and row.
//!
//! Each set contributes one value per metric (its set-level figure: the mean over its tasks, or
//! the sum over tasks per CPU for U), and a cell is the mean and sample standard deviation of
//! those values over the sets of the row. That is how the paper's sds can be 0.00 while its tasks'
//! laxities range over [0, 1]: the spread is between sets, not between tasks.
//!
//! Everything here is a function of the run records sorted by their key, so the same records give
//! byte-identical tables however they were produced (one run, shards, resumed runs).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

use super::execute::{matrix, Outcome};
use super::metrics::{LaxityDist, LaxityHist};
use super::spec::{Backend, Spec};
use super::store::{RunKey, RunRecord};

/// Schema name of the `--json` document.
pub const SCHEMA: &str = "pacer.experiment/1";

/// Mean and sample standard deviation of the values of one cell.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Stat {
    pub mean: f64,
    /// Sample sd (n − 1); 0 with one value.
    pub sd: f64,
    /// Values (sets) it is computed from.
    pub count: usize,
}

impl Stat {
    pub fn of(v: &[f64]) -> Option<Stat> {
        if v.is_empty() {
            return None;
        }
        let n = v.len() as f64;
        let mean = v.iter().sum::<f64>() / n;
        let sd = if v.len() > 1 {
            (v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt()
        } else {
            0.0
        };
        Some(Stat {
            mean,
            sd,
            count: v.len(),
        })
    }
}

/// One cell group of Table 4: a configuration on a backend at one (U, n) row.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Row {
    pub backend: Backend,
    pub configuration: String,
    /// Utilisation per CPU R and number of tasks n.
    pub r: f64,
    pub n: usize,
    pub sets: usize,
    pub normalised_laxity: Option<Stat>,
    pub utilisation: Option<Stat>,
    /// Per task per second.
    pub context_switch_rate: Option<Stat>,
    /// Per task per second.
    pub migration_rate: Option<Stat>,
    pub miss_ratio: Option<Stat>,
    /// `None`: not measured by this backend (never 0 in its place).
    pub l1d_miss_rate: Option<Stat>,
    pub l2_miss_rate: Option<Stat>,
}

/// Real minus simulated means of one configuration at one row.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Diff {
    pub configuration: String,
    pub r: f64,
    pub n: usize,
    pub normalised_laxity: Option<f64>,
    pub utilisation: Option<f64>,
    pub context_switch_rate: Option<f64>,
    pub migration_rate: Option<f64>,
    pub miss_ratio: Option<f64>,
}

/// Quantiles of a laxity distribution (bin resolution 0.001).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LaxitySummary {
    pub backend: Backend,
    pub configuration: String,
    pub r: f64,
    pub n: usize,
    pub jobs: u64,
    /// Fraction of jobs with negative laxity (deadline missed).
    pub negative_fraction: Option<f64>,
    pub min: Option<f64>,
    pub p01: Option<f64>,
    pub p10: Option<f64>,
    pub p50: Option<f64>,
    pub p90: Option<f64>,
    pub max: Option<f64>,
}

/// The aggregated experiment.
#[derive(Debug, Clone, Serialize)]
pub struct Aggregate {
    pub schema: &'static str,
    pub experiment: Spec,
    pub seed: u64,
    pub duration_ns: u64,
    /// Runs in the matrix, found, and missing (not run yet or failed).
    pub runs_expected: usize,
    pub runs_found: usize,
    pub missing: Vec<String>,
    pub table4: Vec<Row>,
    /// "compared", or "not run" when not both backends have results.
    pub sim_vs_real_status: &'static str,
    pub sim_vs_real: Vec<Diff>,
    pub laxity: Vec<LaxitySummary>,
    /// What was not measured or modelled, collected from the runs.
    pub notes: Vec<String>,
    /// Per-job laxity histograms per (backend, configuration, row), for the report.
    #[serde(skip)]
    pub distributions: Vec<(Backend, String, f64, usize, LaxityDist)>,
}

/// Aggregates `records` (any order) of `spec`'s matrix.
pub fn aggregate(spec: &Spec, records: &[(RunKey, RunRecord)]) -> Aggregate {
    let mut recs: Vec<&(RunKey, RunRecord)> = records.iter().collect();
    recs.sort_by_key(|(k, _)| *k);
    let points = spec.points();
    let all = matrix(spec);
    let have: std::collections::BTreeSet<RunKey> = recs.iter().map(|(k, _)| *k).collect();
    let missing: Vec<String> = all
        .iter()
        .filter(|k| !have.contains(k))
        .map(|k| k.file_name(spec))
        .collect();

    // (backend, config index, point) → records, in set order.
    let mut cells: BTreeMap<(Backend, usize, usize), Vec<&RunRecord>> = BTreeMap::new();
    for (k, r) in &recs {
        cells.entry((k.backend, k.config, k.point)).or_default().push(r);
    }
    let mut table4 = Vec::new();
    let mut laxity = Vec::new();
    let mut distributions = Vec::new();
    for &backend in &spec.backends {
        for (ci, c) in spec.configurations.iter().enumerate() {
            for (pi, pt) in points.iter().enumerate() {
                let rs = cells.get(&(backend, ci, pi)).cloned().unwrap_or_default();
                let col = |f: &dyn Fn(&RunRecord) -> Option<f64>| -> Option<Stat> {
                    let v: Option<Vec<f64>> = rs.iter().map(|r| f(r)).collect();
                    v.and_then(|v| Stat::of(&v))
                };
                table4.push(Row {
                    backend,
                    configuration: c.label(),
                    r: pt.r,
                    n: pt.n,
                    sets: rs.len(),
                    normalised_laxity: col(&|r| r.metrics.normalised_laxity),
                    utilisation: col(&|r| r.metrics.utilisation_per_cpu),
                    context_switch_rate: col(&|r| Some(r.metrics.context_switch_rate)),
                    migration_rate: col(&|r| Some(r.metrics.migration_rate)),
                    miss_ratio: col(&|r| r.metrics.miss_ratio),
                    l1d_miss_rate: col(&|r| r.metrics.l1d_miss_rate),
                    l2_miss_rate: col(&|r| r.metrics.l2_miss_rate),
                });
                let mut dist = LaxityDist::default();
                for r in &rs {
                    dist.merge(&r.output.laxity);
                }
                laxity.push(summarise(backend, &c.label(), pt.r, pt.n, &dist.all));
                distributions.push((backend, c.label(), pt.r, pt.n, dist));
            }
        }
    }

    let both = [Backend::Sim, Backend::Linux]
        .iter()
        .all(|b| recs.iter().any(|(k, _)| k.backend == *b));
    let mut sim_vs_real = Vec::new();
    if both {
        let find = |b: Backend, c: &str, r: f64, n: usize| {
            table4
                .iter()
                .find(|x| x.backend == b && x.configuration == c && x.r == r && x.n == n)
        };
        for row in table4.iter().filter(|x| x.backend == Backend::Sim) {
            let Some(real) = find(Backend::Linux, &row.configuration, row.r, row.n) else {
                continue;
            };
            let d = |a: Option<Stat>, b: Option<Stat>| Some(a?.mean - b?.mean);
            sim_vs_real.push(Diff {
                configuration: row.configuration.clone(),
                r: row.r,
                n: row.n,
                normalised_laxity: d(real.normalised_laxity, row.normalised_laxity),
                utilisation: d(real.utilisation, row.utilisation),
                context_switch_rate: d(real.context_switch_rate, row.context_switch_rate),
                migration_rate: d(real.migration_rate, row.migration_rate),
                miss_ratio: d(real.miss_ratio, row.miss_ratio),
            });
        }
    }
    let mut notes: Vec<String> = recs
        .iter()
        .flat_map(|(_, r)| r.output.notes.iter().cloned())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    if !both {
        notes.push(
            "sim-vs-real difference: not run (needs results of both the sim and linux backends)".into(),
        );
    }
    Aggregate {
        schema: SCHEMA,
        experiment: spec.clone(),
        seed: spec.seed,
        duration_ns: spec.duration_ns,
        runs_expected: all.len(),
        runs_found: recs.len(),
        missing,
        table4,
        sim_vs_real_status: if both { "compared" } else { "not run" },
        sim_vs_real,
        laxity,
        notes,
        distributions,
    }
}

fn summarise(backend: Backend, c: &str, r: f64, n: usize, h: &LaxityHist) -> LaxitySummary {
    LaxitySummary {
        backend,
        configuration: c.to_string(),
        r,
        n,
        jobs: h.jobs,
        negative_fraction: (h.jobs > 0).then(|| h.negative as f64 / h.jobs as f64),
        min: h.min,
        p01: h.quantile(0.01),
        p10: h.quantile(0.10),
        p50: h.quantile(0.50),
        p90: h.quantile(0.90),
        max: h.max,
    }
}

/// `mean ± sd` with `d` decimals, or `-` when not measured.
pub fn pm(s: Option<Stat>, d: usize) -> String {
    s.map_or_else(|| "-".into(), |s| format!("{:.d$} ± {:.d$}", s.mean, s.sd))
}

/// One sub-table per backend and scope, as Table 4 (global, clustered, partitioned).
pub fn tables(a: &Aggregate) -> Vec<(String, Vec<String>, Vec<Vec<String>>)> {
    let mut out = Vec::new();
    for &backend in &a.experiment.backends {
        for scope in ["G", "C", "P"] {
            let configs: Vec<String> = a
                .experiment
                .configurations
                .iter()
                .map(|c| c.label())
                .filter(|l| l.starts_with(scope))
                .collect();
            if configs.is_empty() {
                continue;
            }
            let mut header = vec!["U".to_string(), "#".to_string()];
            for m in ["Norm. Laxity", "Exp. U", "Cont. Switch /s", "Migr. /s"] {
                for c in &configs {
                    header.push(format!("{m} {c}"));
                }
            }
            let mut rows = Vec::new();
            for pt in a.experiment.points() {
                let mut row = vec![format!("{}", pt.r), pt.n.to_string()];
                type Get = fn(&Row) -> (Option<Stat>, usize);
                let metrics: [Get; 4] = [
                    |r| (r.normalised_laxity, 3),
                    |r| (r.utilisation, 3),
                    |r| (r.context_switch_rate, 2),
                    |r| (r.migration_rate, 2),
                ];
                for get in metrics {
                    for c in &configs {
                        let cell = a
                            .table4
                            .iter()
                            .find(|x| {
                                x.backend == backend && &x.configuration == c && x.r == pt.r && x.n == pt.n
                            })
                            .map(|x| {
                                let (s, d) = get(x);
                                pm(s, d)
                            })
                            .unwrap_or_else(|| "-".into());
                        row.push(cell);
                    }
                }
                rows.push(row);
            }
            let title = format!(
                "{} ({}): {}",
                match scope {
                    "G" => "global",
                    "C" => "clustered",
                    _ => "partitioned",
                },
                backend.name(),
                configs.join(", ")
            );
            out.push((title, header, rows));
        }
    }
    out
}

/// Header and rows as text columns (first left-aligned, the rest right-aligned).
fn columns(header: &[String], rows: &[Vec<String>]) -> String {
    let mut all = Vec::with_capacity(rows.len() + 1);
    all.push(header.to_vec());
    all.extend(rows.iter().cloned());
    pacer_workload::jobs::summary::table(&all)
}

/// The text report: Table 4's sub-tables, the laxity summary, sim-vs-real and notes.
pub fn render_text(a: &Aggregate) -> String {
    let mut s = String::new();
    let e = &a.experiment;
    let _ = writeln!(
        s,
        "experiment {}: {} CPUs, {} per run, {} set{} per point, seed {}; {} of {} runs found",
        e.name,
        e.cpus,
        pacer_model::Duration(e.duration_ns),
        e.sets,
        if e.sets == 1 { "" } else { "s" },
        e.seed,
        a.runs_found,
        a.runs_expected
    );
    let _ = writeln!(
        s,
        "cells: mean ± sd over the sets of a row (each set: its tasks' mean); rates per task per second\n"
    );
    for (title, header, rows) in tables(a) {
        let _ = writeln!(s, "{title}");
        s.push_str(&columns(&header, &rows));
        s.push('\n');
    }
    let _ = writeln!(s, "per-job normalised laxity (all tasks; quantiles to 0.001)");
    let header: Vec<String> = [
        "backend", "config", "U", "#", "jobs", "missed%", "min", "p1", "p10", "p50", "p90",
    ]
    .iter()
    .map(|x| x.to_string())
    .collect();
    let f = |v: Option<f64>| v.map_or_else(|| "-".into(), |v| format!("{v:.3}"));
    let rows: Vec<Vec<String>> = a
        .laxity
        .iter()
        .map(|l| {
            vec![
                l.backend.name().into(),
                l.configuration.clone(),
                format!("{}", l.r),
                l.n.to_string(),
                l.jobs.to_string(),
                l.negative_fraction
                    .map_or_else(|| "-".into(), |v| format!("{:.3}", v * 100.0)),
                f(l.min),
                f(l.p01),
                f(l.p10),
                f(l.p50),
                f(l.p90),
            ]
        })
        .collect();
    s.push_str(&columns(&header, &rows));
    s.push('\n');
    if a.sim_vs_real_status == "compared" {
        let _ = writeln!(s, "sim vs real (real − sim, means)");
        let header: Vec<String> = [
            "config",
            "U",
            "#",
            "laxity",
            "Exp. U",
            "switch /s",
            "migr. /s",
            "miss ratio",
        ]
        .iter()
        .map(|x| x.to_string())
        .collect();
        let g = |v: Option<f64>| v.map_or_else(|| "-".into(), |v| format!("{v:+.3}"));
        let rows: Vec<Vec<String>> = a
            .sim_vs_real
            .iter()
            .map(|d| {
                vec![
                    d.configuration.clone(),
                    format!("{}", d.r),
                    d.n.to_string(),
                    g(d.normalised_laxity),
                    g(d.utilisation),
                    g(d.context_switch_rate),
                    g(d.migration_rate),
                    g(d.miss_ratio),
                ]
            })
            .collect();
        s.push_str(&columns(&header, &rows));
    } else {
        let _ = writeln!(s, "sim vs real: not run");
    }
    s.push('\n');
    let _ = writeln!(s, "cache misses (L1D, L2): {}", cache_status(a));
    for n in &a.notes {
        let _ = writeln!(s, "note: {n}");
    }
    if !a.missing.is_empty() {
        let _ = writeln!(
            s,
            "incomplete: {} run(s) missing, e.g. {}",
            a.missing.len(),
            a.missing[0]
        );
    }
    s
}

/// Whether any row has cache figures.
pub fn cache_status(a: &Aggregate) -> &'static str {
    if a.table4
        .iter()
        .any(|r| r.l1d_miss_rate.is_some() || r.l2_miss_rate.is_some())
    {
        "measured (see --json)"
    } else {
        "unavailable (no backend that ran counts them)"
    }
}

/// The `--json` document.
pub fn render_json(a: &Aggregate) -> String {
    let mut s = serde_json::to_string_pretty(a).unwrap_or_default();
    s.push('\n');
    s
}

/// One CSV row per run, in matrix order (set-level figures; empty cell = not measured).
pub fn render_csv(records: &[(RunKey, RunRecord)]) -> String {
    let mut recs: Vec<&(RunKey, RunRecord)> = records.iter().collect();
    recs.sort_by_key(|(k, _)| *k);
    let mut s = String::from(
        "backend,configuration,r,n,set,set_seed,run_seed,cpus,duration_ns,tasks,jobs,misses,normalised_laxity,utilisation_per_cpu,context_switch_rate_per_task_s,migration_rate_per_task_s,l1d_miss_rate,l2_miss_rate\n",
    );
    let o = |v: Option<f64>| v.map_or_else(String::new, |v| format!("{v}"));
    for (_, r) in recs {
        let m = &r.metrics;
        let _ = writeln!(
            s,
            "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
            r.backend.name(),
            r.label,
            r.r,
            r.n,
            r.set,
            r.set_seed,
            r.run_seed,
            r.cpus,
            r.output.duration_ns,
            r.output.tasks.len(),
            m.jobs,
            m.misses,
            o(m.normalised_laxity),
            o(m.utilisation_per_cpu),
            m.context_switch_rate,
            m.migration_rate,
            o(m.l1d_miss_rate),
            o(m.l2_miss_rate)
        );
    }
    s
}

/// The outcome of an invocation in one line.
pub fn outcome_line(o: &Outcome) -> String {
    format!(
        "{} runs in this shard: {} cached, {} run now, {} failed",
        o.runs,
        o.cached,
        o.ran.len(),
        o.failed.len()
    )
}
