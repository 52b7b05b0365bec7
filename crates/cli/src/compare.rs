//! `pacer compare A.csv B.csv`: response times of two runs of the same workload side by side
//! (typically `pacer sim --jobs` against `pacer run --jobs`), with the statistics of
//! `pacer_workload::jobs::compare`, and an optional tolerance on the medians for scripts and CI.

use std::io::Read;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use pacer_model::Duration;
use pacer_workload::jobs::compare::{
    compare_keeping, CompareReport, Metric, Overheads, PairedSamples, TaskComparison,
};
use pacer_workload::jobs::csv::JobReader;
use pacer_workload::jobs::{JobRow, ReadError};
use serde::Serialize;

use crate::analyze::parse_duration;
use crate::output::{Outputs, Stdout};
use crate::table::Table;

/// Exit status when a median is beyond the tolerance (1 is any error, as for every command).
pub const BEYOND_TOLERANCE: u8 = 2;

#[derive(clap::Args)]
#[command(after_help = "Examples:\n  \
pacer sim examples/rtapp-periodic.json --cpus 2 --duration 5s --jobs sim.csv\n  \
sudo pacer run examples/rtapp-periodic.json --duration 5s --jobs run.csv\n  \
pacer compare sim.csv run.csv\n  \
pacer compare sim.csv run.csv --tolerance 10 --tolerance-floor 200us   # for CI\n  \
pacer compare sim.csv run.csv --report compare.html   # CDFs of A and B per task, in a browser\n\n\
Per task present in both files (matched by the `task` column): job counts, median, p90, p99 and\n\
maximum response time (finish − release, exact order statistics; or with --metric start-delay\n\
the wake-up-to-start delay, start − release), the difference of the medians\n\
(B − A, absolute and relative to A), miss ratios, and the two-sample Kolmogorov–Smirnov distance\n\
D between the response-time distributions (0: identical, 1: disjoint) with its 5 % critical\n\
value. Times are in µs.\n\n\
Below the table: what B's machine adds to A's model, estimated from the job records: a factor on\n\
execution (median over tasks of B's median CPU time per job / A's) and a wake-up latency (the\n\
smallest per-task increase of the median start latency, i.e. that of a task nothing delays), with\n\
the `pacer sim --work-scale F --wakeup-latency D` that simulates them; comparing against that\n\
simulation checks the scheduling model apart from one machine's speed and timer latency.\n\n\
Exit status: 0 = compared (and within --tolerance, if given); 1 = error (unreadable or malformed\n\
CSV, named with its line and column); 2 = some task's median differs by more than --tolerance.")]
pub struct Args {
    /// First job CSV (the reference, e.g. from `pacer sim --jobs`); `-` reads standard input.
    pub a: PathBuf,
    /// Second job CSV (e.g. from `pacer run --jobs`); `-` reads standard input.
    pub b: PathBuf,
    /// Make the exit status 2 when any task's median response time in B differs from A's by more
    /// than PCT per cent of A's median (e.g. 10). Tasks found in only one file do not count.
    #[arg(long, value_name = "PCT", allow_negative_numbers = true)]
    pub tolerance: Option<f64>,
    /// With --tolerance: median differences up to this much never count, so tasks with tiny
    /// medians do not fail on a few µs of noise (e.g. 200us).
    #[arg(long, value_parser = parse_duration, default_value = "0ns", value_name = "DURATION")]
    pub tolerance_floor: Duration,
    /// What to compare: `response` (finish − release) or `start-delay` (start − release, the
    /// wake-up-to-start delay of each job).
    #[arg(long, value_enum, default_value = "response")]
    pub metric: MetricArg,
    /// Machine-readable JSON on standard output.
    #[arg(long)]
    pub json: bool,
    /// Write an HTML report here (self-contained, no scripts): per task, the CDFs of A and B
    /// side by side, the comparison table, the KS distances and the --tolerance verdict. Written
    /// when the comparison succeeds (exit status 0 or 2); an input, a device, a FIFO or a
    /// directory is refused, and an existing file is replaced only once the report is complete.
    #[arg(long, value_name = "FILE.html")]
    pub report: Option<PathBuf>,
}

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum MetricArg {
    Response,
    StartDelay,
}

#[derive(Serialize)]
struct JsonOut<'a> {
    a: String,
    b: String,
    tolerance_pct: Option<f64>,
    tolerance_floor_ns: u64,
    /// Tasks whose medians differ beyond the tolerance (empty without one).
    beyond_tolerance: Vec<&'a str>,
    /// B's overheads relative to A (`CompareReport::overheads`).
    overheads: Overheads,
    #[serde(flatten)]
    report: &'a CompareReport,
}

/// The rows of a jobs file: CSV (or `-`, standard input), or Parquet by its extension.
type Rows = Box<dyn Iterator<Item = Result<JobRow, ReadError>>>;

fn reader(path: &Path) -> Result<(Rows, String)> {
    if pacer_workload::jobs::is_parquet(path) {
        let rows = pacer_workload::jobs::parquet::read_jobs_parquet(path)?;
        return Ok((Box::new(rows.into_iter().map(Ok)), path.display().to_string()));
    }
    let (input, name): (Box<dyn Read>, String) = if path.as_os_str() == "-" {
        (
            Box::new(std::io::Cursor::new(crate::read_stdin()?)),
            "<stdin>".into(),
        )
    } else {
        let f = std::fs::File::open(path).with_context(|| format!("{}: cannot open", path.display()))?;
        (Box::new(std::io::BufReader::new(f)), path.display().to_string())
    };
    Ok((Box::new(JobReader::new(input, &name)?), name))
}

/// ns as µs with three decimals.
fn us(ns: u64) -> String {
    format!("{}.{:03}", ns / 1000, ns % 1000)
}

fn signed_us(ns: i64) -> String {
    let s = us(ns.unsigned_abs());
    if ns < 0 {
        format!("-{s}")
    } else {
        format!("+{s}")
    }
}

/// Column headings of the comparison table (text and HTML).
const COLUMNS: [&str; 12] = [
    "task",
    "jobs A/B",
    "p50_us A",
    "p50_us B",
    "Δp50_us",
    "Δp50",
    "p90_us A/B",
    "p99_us A/B",
    "max_us A/B",
    "miss% A/B",
    "KS D",
    "D(5%)",
];

fn row(t: &TaskComparison) -> Vec<String> {
    vec![
        t.task.clone(),
        format!("{}/{}", t.a.jobs, t.b.jobs),
        us(t.a.p50_ns),
        us(t.b.p50_ns),
        signed_us(t.median_diff_ns),
        t.median_rel_diff
            .map_or("-".into(), |r| format!("{:+.1}%", r * 100.0)),
        format!("{}/{}", us(t.a.p90_ns), us(t.b.p90_ns)),
        format!("{}/{}", us(t.a.p99_ns), us(t.b.p99_ns)),
        format!("{}/{}", us(t.a.max_ns), us(t.b.max_ns)),
        format!("{:.2}/{:.2}", t.a.miss_ratio * 100.0, t.b.miss_ratio * 100.0),
        format!("{:.3}", t.ks_distance),
        format!("{:.3}", t.ks_critical_5pct),
    ]
}

pub fn run(a: Args) -> Result<u8> {
    if a.a.as_os_str() == "-" && a.b.as_os_str() == "-" {
        bail!("only one of A and B can be `-` (standard input)");
    }
    if let Some(t) = a.tolerance {
        if !(t.is_finite() && t >= 0.0) {
            bail!("--tolerance {t}: expected a percentage ≥ 0");
        }
    }
    let mut out = Outputs::new(Stdout::Busy);
    out.input(&a.a);
    out.input(&a.b);
    let html = a.report.as_deref().map(|p| out.file("--report", p)).transpose()?;
    let (ra, name_a) = reader(&a.a)?;
    let (rb, name_b) = reader(&a.b)?;
    let metric = match a.metric {
        MetricArg::Response => Metric::Response,
        MetricArg::StartDelay => Metric::StartDelay,
    };
    let (report, samples) = compare_keeping(ra, rb, metric)?;
    let floor = a.tolerance_floor.ns();
    let beyond: Vec<&TaskComparison> = a.tolerance.map_or_else(Vec::new, |t| report.beyond(t, floor));
    if report.tasks.is_empty() {
        bail!("{name_a} and {name_b} have no task in common (nothing to compare)");
    }
    if let Some(slot) = html {
        let page = html_report(&a, &name_a, &name_b, &report, &samples, &beyond).context("--report")?;
        out.write(slot, page.as_bytes())?;
    }
    out.commit()?;
    if a.json {
        let out = JsonOut {
            a: name_a,
            b: name_b,
            tolerance_pct: a.tolerance,
            tolerance_floor_ns: floor,
            beyond_tolerance: beyond.iter().map(|t| t.task.as_str()).collect(),
            overheads: report.overheads(),
            report: &report,
        };
        println!("{}", crate::output::json_text("pacer.compare/1", &out)?);
    } else {
        let esc = pacer_model::text::escape_control;
        println!(
            "A = {}\nB = {}\n{}\n",
            esc(&name_a.to_string()),
            esc(&name_b.to_string()),
            metric_text(metric)
        );
        let mut table = Table::new(&COLUMNS);
        for t in &report.tasks {
            table.push(row(t));
        }
        print!("{}", table.render());
        for (names, file) in [(&report.only_in_a, "A"), (&report.only_in_b, "B")] {
            if !names.is_empty() {
                let names: Vec<String> = names.iter().map(|n| esc(n)).collect();
                println!("only in {file}: {}", names.join(", "));
            }
        }
        let o = report.overheads();
        println!(
            "\nB relative to A: work ×{:.3} (median CPU time per job), wake-up latency {} µs \
             (least-delayed task)\nto simulate them: pacer sim FILE --work-scale {:.3} --wakeup-latency {}us",
            o.work_scale,
            us(o.wakeup_latency_ns),
            o.work_scale,
            (o.wakeup_latency_ns + 500) / 1000
        );
        if let Some(t) = a.tolerance {
            if beyond.is_empty() {
                println!("\nall medians within {t}% (or {}) of A's", Duration(floor));
            } else {
                println!(
                    "\nmedians beyond {t}% (and {}) of A's: {}",
                    Duration(floor),
                    beyond
                        .iter()
                        .map(|t| t.task.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                );
            }
        }
    }
    Ok(if beyond.is_empty() { 0 } else { BEYOND_TOLERANCE })
}

fn metric_text(metric: Metric) -> &'static str {
    match metric {
        Metric::Response => "response times (finish − release)",
        Metric::StartDelay => "start delays (start − release)",
    }
}

/// The `--report` page: what was compared, the table, the tolerance verdict, and per task the
/// two distributions drawn from the compared values themselves.
fn html_report(
    a: &Args,
    name_a: &str,
    name_b: &str,
    report: &CompareReport,
    samples: &[PairedSamples],
    beyond: &[&TaskComparison],
) -> Result<String> {
    use pacer_report::{cdf, Bars, Plot, Report, Series};
    let what = metric_text(report.metric);
    let mut r = Report::new(&format!("pacer compare: {name_a} vs {name_b}"));
    r.subtitle(&format!(
        "The {what} of two runs of the same workload, task by task"
    ));
    let floor = a.tolerance_floor.ns();
    r.meta("command", &crate::command_line())
        .meta("A", name_a)
        .meta("B", name_b)
        .meta("metric", what)
        .meta(
            "tolerance",
            &a.tolerance.map_or("none".to_string(), |t| {
                format!(
                    "{t}% of A's median, differences up to {} ignored",
                    Duration(floor)
                )
            }),
        );

    r.section("Comparison").paragraph(
        "Times in µs. Δp50 is B's median − A's. KS D is the two-sample Kolmogorov–Smirnov \
         distance between the distributions (0: identical, 1: disjoint); D(5%) its 5 % critical \
         value: a larger D rejects \"same distribution\" at the 5 % level.",
    );
    let rows: Vec<Vec<String>> = report.tasks.iter().map(row).collect();
    r.table(&COLUMNS, &rows);
    for (names, file) in [(&report.only_in_a, "A"), (&report.only_in_b, "B")] {
        if !names.is_empty() {
            r.paragraph(&format!("Only in {file} (not compared): {}.", names.join(", ")));
        }
    }
    let o = report.overheads();
    r.paragraph(&format!(
        "B relative to A: work ×{:.3} (median CPU time per job), wake-up latency {} µs \
         (least-delayed task); to simulate them: pacer sim FILE --work-scale {:.3} --wakeup-latency {}us",
        o.work_scale,
        us(o.wakeup_latency_ns),
        o.work_scale,
        (o.wakeup_latency_ns + 500) / 1000
    ));
    if let Some(t) = a.tolerance {
        r.section("Tolerance");
        if beyond.is_empty() {
            r.paragraph(&format!(
                "Within tolerance: every median of B is within {t}% (or {}) of A's (exit status 0).",
                Duration(floor)
            ));
        } else {
            let names: Vec<&str> = beyond.iter().map(|t| t.task.as_str()).collect();
            r.paragraph(&format!(
                "Beyond tolerance (exit status {BEYOND_TOLERANCE}): the medians of {} differ from \
                 A's by more than {t}% and more than {}.",
                names.join(", "),
                Duration(floor)
            ));
        }
    }

    r.section("KS distances");
    let mut ks = Bars::new("Kolmogorov–Smirnov distance per task").x_axis("D", "");
    for t in &report.tasks {
        ks.add_bar(&t.task, t.ks_distance);
    }
    r.bars(&ks)?;

    r.section("Distributions per task");
    r.paragraph(&format!(
        "The empirical CDF of the {what} of each task in A and in B."
    ));
    let axis = match report.metric {
        Metric::Response => "finish − release",
        Metric::StartDelay => "start − release",
    };
    for (t, s) in report.tasks.iter().zip(samples) {
        let to_us = |v: &[u64]| -> Vec<f64> { v.iter().map(|&ns| ns as f64 / 1e3).collect() };
        r.plot(
            &Plot::new(&format!("{}: KS D = {:.3}", t.task, t.ks_distance))
                .x_axis(axis, "µs")
                .y_axis("fraction of jobs", "")
                .series(Series::step(
                    &format!("A ({} jobs)", s.a.len()),
                    cdf(&to_us(&s.a)),
                ))
                .series(Series::step(
                    &format!("B ({} jobs)", s.b.len()),
                    cdf(&to_us(&s.b)),
                )),
        )?;
    }
    Ok(r.to_html())
}
