//! `pacer analyze`: read a task set, run the analysis suite, print a table or JSON.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::ValueEnum;
use pacer_analysis::admission::{bw_to_f64, AdmissionConfig};
use pacer_analysis::partition::Heuristic;
use pacer_analysis::suite::{self, Row, SuiteConfig};
use pacer_analysis::{timings, Verdict};
use pacer_model::{Duration, TaskSet};
use serde::Serialize;

use crate::table::Table;

#[derive(clap::Args)]
#[command(
    after_help = "Examples:\n  pacer analyze examples/textbook.json\n  pacer analyze set.json --cpus 4 --cluster-size 2 --json\n  pacer gen -n 12 -u 2.4 | pacer analyze - --cpus 4"
)]
pub struct Args {
    /// Task-set JSON file (docs/formats/taskset.md); `-` reads standard input.
    pub file: PathBuf,
    /// Number of identical CPUs. With 1, uniprocessor EDF/RM/DM tests run; with more, global,
    /// partitioned and (with --cluster-size) clustered tests.
    #[arg(short = 'm', long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub cpus: u32,
    /// CPUs per cluster for clustered scheduling (tasks are assigned to clusters, then scheduled
    /// globally inside each). Must divide --cpus; omit to skip clustered analysis.
    #[arg(long)]
    pub cluster_size: Option<u32>,
    /// Time limit of the optimal min–max-load ILP assignment (best solution so far is used).
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub milp_time_limit: Duration,
    /// Skip the optimal min–max-load ILP assignment (its cost is up to --milp-time-limit).
    #[arg(long)]
    pub no_milp: bool,
    /// Bin-packing heuristics for partitioned scheduling, comma-separated from
    /// ff, bf, wf, nf, ffd, bfd, wfd, nfd, or `all`.
    #[arg(long, default_value = "all", value_parser = parse_heuristics)]
    pub heuristics: Heuristics,
    /// kernel.sched_rt_runtime_us for the SCHED_DEADLINE admission check (-1 = no limit).
    #[arg(long, default_value_t = 950_000, allow_negative_numbers = true)]
    pub rt_runtime_us: i64,
    /// kernel.sched_rt_period_us for the SCHED_DEADLINE admission check.
    #[arg(long, default_value_t = 1_000_000, value_parser = clap::value_parser!(u64).range(1..=i32::MAX as u64))]
    pub rt_period_us: u64,
    /// Per-CPU fair-server reservation counted by admission control (Linux ≥ 6.12), as
    /// RUNTIME/PERIOD, or `none` for older kernels.
    #[arg(long, default_value = "50ms/1s")]
    pub fair_server: String,
    /// Print per-task response times and placements: always, never, or auto (sets of ≤ 24 tasks).
    #[arg(long, value_enum, default_value_t = Details::Auto)]
    pub details: Details,
    /// Machine-readable JSON on standard output instead of tables.
    #[arg(long)]
    pub json: bool,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Details {
    Auto,
    Always,
    Never,
}

#[derive(Clone)]
pub struct Heuristics(pub Vec<Heuristic>);

fn parse_heuristics(s: &str) -> Result<Heuristics, String> {
    if s == "all" {
        return Ok(Heuristics(Heuristic::ALL.to_vec()));
    }
    s.split(',')
        .map(|h| h.trim().parse::<Heuristic>().map_err(|e| e.to_string()))
        .collect::<Result<Vec<_>, _>>()
        .map(Heuristics)
}

pub fn parse_duration(s: &str) -> Result<Duration, String> {
    s.parse::<Duration>().map_err(|e| e.to_string())
}

pub fn run(args: Args) -> Result<()> {
    let set = read_set(&args.file)?;
    let cfg = suite_config(&args)?;
    let label = args.file.display().to_string();
    report(&label, &set, &cfg, args.details, args.json)
}

pub fn read_set(path: &std::path::Path) -> Result<TaskSet> {
    let (text, name) = if path.as_os_str() == "-" {
        (crate::read_stdin()?, "<stdin>".to_string())
    } else {
        let t = std::fs::read_to_string(path).with_context(|| format!("{}: cannot read", path.display()))?;
        (t, path.display().to_string())
    };
    match pacer_model::parse_taskset(&text, &name) {
        Ok(set) => Ok(set),
        // The parser's own error ("key must be a string" at an rt-app comment) would not say
        // what is wrong: the file is of the other kind pacer reads.
        Err(_) if pacer_workload::parse_rtapp(&text, &name).is_ok() => Err(anyhow::anyhow!(
            "{name}: this is an rt-app workload, not a task set (docs/formats/taskset.md): \
             simulate it with `pacer sim {name}` or run it with `pacer run {name}`"
        )),
        Err(e) => Err(e.into()),
    }
}

fn suite_config(args: &Args) -> Result<SuiteConfig> {
    let m = args.cpus as usize;
    let mut cfg = SuiteConfig::new(m);
    if let Some(k) = args.cluster_size {
        let k = k as usize;
        if k == 0 || !m.is_multiple_of(k) {
            bail!("--cluster-size {k}: expected a divisor of --cpus {m}");
        }
        cfg.cluster_size = Some(k);
    }
    cfg.milp = !args.no_milp;
    cfg.milp_time_limit = args.milp_time_limit;
    cfg.heuristics = args.heuristics.0.clone();
    let mut adm = AdmissionConfig::linux_default(m);
    adm.rt_runtime_us = match args.rt_runtime_us {
        -1 => None,
        r if r >= 0 => Some(r as u64),
        r => bail!("--rt-runtime-us {r}: expected -1 or a value ≥ 0"),
    };
    if args.rt_period_us == 0 {
        bail!("--rt-period-us: expected a period > 0");
    }
    adm.rt_period_us = args.rt_period_us;
    adm.fair_server = parse_fair_server(&args.fair_server)?;
    cfg.admission = adm;
    Ok(cfg)
}

fn parse_fair_server(s: &str) -> Result<Option<(Duration, Duration)>> {
    if s == "none" {
        return Ok(None);
    }
    let Some((r, p)) = s.split_once('/') else {
        bail!("--fair-server {s}: expected RUNTIME/PERIOD (e.g. 50ms/1s) or `none`");
    };
    let r: Duration = r
        .parse()
        .map_err(|e| anyhow::anyhow!("--fair-server runtime: {e}"))?;
    let p: Duration = p
        .parse()
        .map_err(|e| anyhow::anyhow!("--fair-server period: {e}"))?;
    if p.is_zero() || r > p {
        bail!("--fair-server {s}: expected 0 ≤ runtime ≤ period and period > 0");
    }
    Ok(Some((r, p)))
}

#[derive(Serialize)]
struct JsonReport<'a> {
    file: &'a str,
    name: Option<&'a str>,
    seed: Option<u64>,
    tasks: Vec<&'a str>,
    utilization: f64,
    density: f64,
    implicit_deadlines: bool,
    config: &'a SuiteConfig,
    results: &'a [Row],
}

/// Runs the suite and prints the result; shared with `pacer demo`.
pub fn report(label: &str, set: &TaskSet, cfg: &SuiteConfig, details: Details, json: bool) -> Result<()> {
    let ts = timings(&set.tasks);
    let placements = 1 + usize::from(cfg.cluster_size.is_some());
    if cfg.milp && cfg.cpus > 1 && set.len() > 24 && std::io::IsTerminal::is_terminal(&std::io::stderr()) {
        eprintln!(
            "pacer: solving the min–max-load ILP ({placements} placement{}, up to {} each; --no-milp skips it)…",
            if placements == 1 { "" } else { "s" },
            cfg.milp_time_limit
        );
    }
    let rows = suite::run(&ts, cfg);
    if json {
        println!(
            "{}",
            crate::output::json_text("pacer.analyze/1", &json_value(label, set, cfg, &rows)?)?
        );
        return Ok(());
    }
    print!("{}", render_text(label, set, cfg, &rows, details));
    Ok(())
}

/// Runs the suite and returns the `--json` document (for `pacer demo --json`).
pub fn report_json(label: &str, set: &TaskSet, cfg: &SuiteConfig) -> Result<serde_json::Value> {
    let rows = suite::run(&timings(&set.tasks), cfg);
    json_value(label, set, cfg, &rows)
}

fn json_value(label: &str, set: &TaskSet, cfg: &SuiteConfig, rows: &[Row]) -> Result<serde_json::Value> {
    {
        let out = JsonReport {
            file: label,
            name: set.name.as_deref(),
            seed: set.generator.as_ref().and_then(|g| g.seed),
            tasks: set.tasks.iter().map(|t| t.name.as_str()).collect(),
            utilization: set.utilization(),
            density: set.density(),
            implicit_deadlines: set.has_implicit_deadlines(),
            config: cfg,
            results: rows,
        };
        Ok(serde_json::to_value(&out)?)
    }
}

fn verdict_label(r: &Row) -> String {
    // Admission is the kernel's accept/refuse, not a schedulability verdict.
    match (r.kind, &r.outcome.verdict) {
        (pacer_analysis::TestKind::Admission, Verdict::Schedulable) => "admitted".into(),
        (pacer_analysis::TestKind::Admission, Verdict::NotProven) => "refused".into(),
        (pacer_analysis::TestKind::Bound, Verdict::Schedulable) => "bounded".into(),
        (pacer_analysis::TestKind::Bound, Verdict::Unschedulable) => "unbounded".into(),
        (_, v) => v.label().into(),
    }
}

fn fmt_num(x: Option<f64>) -> String {
    x.map(|v| format!("{v:.4}")).unwrap_or_default()
}

fn render_text(label: &str, set: &TaskSet, cfg: &SuiteConfig, rows: &[Row], details: Details) -> String {
    let mut out = String::new();
    let seed = set
        .generator
        .as_ref()
        .and_then(|g| g.seed)
        .map(|s| format!(", seed {s}"))
        .unwrap_or_default();
    let esc = pacer_model::text::escape_control;
    out.push_str(&format!(
        "task set {}{}: {} tasks, U = {:.4}, density = {:.4}, {} deadlines{seed}\n",
        esc(label),
        set.name
            .as_ref()
            .map(|n| format!(" ({})", esc(n)))
            .unwrap_or_default(),
        set.len(),
        set.utilization(),
        set.density(),
        if set.has_implicit_deadlines() {
            "implicit"
        } else {
            "constrained"
        },
    ));
    out.push_str(&format!(
        "platform: {} CPU{}{}; SCHED_DEADLINE admission cap {}\n\n",
        cfg.cpus,
        if cfg.cpus == 1 { "" } else { "s" },
        cfg.cluster_size
            .map(|k| format!(" in clusters of {k}"))
            .unwrap_or_default(),
        match cfg.admission.total_limit() {
            Some(l) => format!(
                "{:.4} CPUs",
                bw_to_f64(l.saturating_sub(cfg.admission.reserved_by_servers()))
            ),
            None => "unlimited".into(),
        }
    ));
    let mut t = Table::new(&["scheduler", "test", "kind", "verdict", "value", "bound", "source"]);
    for r in rows {
        t.push(vec![
            r.scheduler.clone(),
            r.test.clone(),
            r.kind.label().into(),
            verdict_label(r),
            fmt_num(r.outcome.value),
            fmt_num(r.outcome.bound),
            r.source.into(),
        ]);
    }
    out.push_str(&t.render());

    let notes: Vec<String> = rows
        .iter()
        .filter_map(|r| {
            let reason = match &r.outcome.verdict {
                Verdict::NotApplicable(s) | Verdict::Unknown(s) => Some(s.clone()),
                _ => None,
            };
            let text: Vec<String> = reason.into_iter().chain(r.outcome.note.clone()).collect();
            (!text.is_empty()).then(|| format!("  {} / {}: {}", r.scheduler, r.test, text.join("; ")))
        })
        .collect();
    if !notes.is_empty() {
        out.push_str("\nnotes:\n");
        out.push_str(&notes.join("\n"));
        out.push('\n');
    }

    let show = match details {
        Details::Always => true,
        Details::Never => false,
        Details::Auto => set.len() <= 24,
    };
    if show {
        out.push_str(&render_details(set, rows));
    } else if details == Details::Auto {
        out.push_str("\n(per-task response times and placements omitted for > 24 tasks: use --details always or --json)\n");
    }
    out
}

fn render_details(set: &TaskSet, rows: &[Row]) -> String {
    let mut out = String::new();
    let rt_rows: Vec<&Row> = rows.iter().filter(|r| r.outcome.per_task.is_some()).collect();
    if !rt_rows.is_empty() {
        out.push_str("\nper-task bounds (response time; tardiness for soft real-time rows; `-` = exceeds deadline or unbounded):\n");
        let mut header = vec!["task", "C", "D", "T"];
        let names: Vec<String> = rt_rows
            .iter()
            .map(|r| format!("{} {}", r.scheduler, r.test))
            .collect();
        header.extend(names.iter().map(String::as_str));
        let mut t = Table::new(&header);
        for (i, task) in set.tasks.iter().enumerate() {
            let mut cells = vec![
                task.name.clone(),
                task.wcet.approx(),
                task.deadline.approx(),
                task.period.approx(),
            ];
            for r in &rt_rows {
                let v = r
                    .outcome
                    .per_task
                    .as_ref()
                    .and_then(|p| p.get(i).copied().flatten());
                cells.push(v.map(|d| d.approx()).unwrap_or_else(|| "-".into()));
            }
            t.push(cells);
        }
        out.push_str(&t.render());
    }
    for r in rows {
        let Some(p) = &r.placement else { continue };
        out.push_str(&format!("\nplacement, {} / {}:\n", r.scheduler, r.test));
        for (b, load) in p.loads.iter().enumerate() {
            let members: Vec<&str> = p
                .bin_of_task
                .iter()
                .enumerate()
                .filter(|(_, x)| **x == Some(b))
                .map(|(i, _)| set.tasks[i].name.as_str())
                .collect();
            let unit = if p.capacities[b] == 1 { "cpu" } else { "cluster" };
            out.push_str(&format!("  {unit}{b}: U = {load:.4}  {}\n", members.join(" ")));
        }
        let unplaced: Vec<&str> = p
            .bin_of_task
            .iter()
            .enumerate()
            .filter(|(_, x)| x.is_none())
            .map(|(i, _)| set.tasks[i].name.as_str())
            .collect();
        if !unplaced.is_empty() {
            out.push_str(&format!("  unplaced: {}\n", unplaced.join(" ")));
        }
        if let Some(n) = &p.note {
            out.push_str(&format!("  ({n})\n"));
        }
    }
    out
}
