//! `pacer bench …`: experiments that measure pacer itself and print what they measured.

use anyhow::{bail, Result};
use pacer_adapt::period::PeriodConfig;
use pacer_model::Duration;
use pacer_sim::experiments::{period_point, PeriodPoint};
use serde::Serialize;

use crate::analyze::parse_duration;
use crate::table::Table;

#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    pub what: What,
}

#[derive(clap::Subcommand)]
pub enum What {
    /// Period-detection accuracy and cost vs observation window and background real-time load
    /// (the LFS++ §7.4 experiment, Fig. 8–9), on the simulator with the real period analyser.
    Period(PeriodArgs),
    /// Cost of `pacer exec` on the real kernel: wake-up tracing overhead on a program's wall
    /// time, and pacer's own CPU use while it controls 1, 10, 50 threads (needs root).
    Exec(crate::bench_exec::ExecBenchArgs),
}

#[derive(clap::Args)]
#[command(
    after_help = "Each trial: a multimedia-like program (period 10–42 ms, three wake-ups per job: the\n\
timer and two I/O completions) next to four SCHED_FIFO tasks of the given total load, traced for the\n\
window after 0.5 s of warm-up; success = detected period within 1 % of the truth."
)]
pub struct PeriodArgs {
    /// Observation windows swept at load 0 (comma-separated durations).
    #[arg(long, default_value = "0.2s,0.4s,0.6s,0.8s,1s,1.5s,2s", value_delimiter = ',', value_parser = parse_duration)]
    pub windows: Vec<Duration>,
    /// Background SCHED_FIFO loads swept at --load-window (comma-separated fractions of a CPU).
    #[arg(long, default_value = "0,0.15,0.3,0.45,0.6,0.75,0.85", value_delimiter = ',')]
    pub loads: Vec<f64>,
    /// Window used for the load sweep (the paper: 0.6 s).
    #[arg(long, default_value = "0.6s", value_parser = parse_duration)]
    pub load_window: Duration,
    /// Trials per point.
    #[arg(long, default_value_t = 30)]
    pub trials: usize,
    /// First seed; trial i uses seed + i.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Machine-readable JSON instead of tables.
    #[arg(long)]
    pub json: bool,
}

#[derive(Serialize)]
struct PeriodReport {
    seed: u64,
    trials: usize,
    analyser: PeriodConfig,
    window_sweep: Vec<PeriodPoint>,
    load_sweep: Vec<PeriodPoint>,
}

pub fn run(a: Args) -> Result<()> {
    match a.what {
        What::Period(p) => period(p),
        What::Exec(e) => crate::bench_exec::run(e),
    }
}

fn period(a: PeriodArgs) -> Result<()> {
    if a.trials == 0 {
        bail!("--trials: expected at least 1");
    }
    if let Some(l) = a.loads.iter().find(|l| !(0.0..1.0).contains(*l)) {
        bail!("--loads: {l} is not a fraction of one CPU in [0, 1)");
    }
    if a.windows.iter().chain([&a.load_window]).any(|w| w.is_zero()) {
        bail!("--windows/--load-window: expected durations > 0");
    }
    let cfg = PeriodConfig::default();
    let window_sweep: Vec<PeriodPoint> = a
        .windows
        .iter()
        .map(|w| period_point(w.ns(), 0.0, a.trials, a.seed, &cfg).0)
        .collect();
    let load_sweep: Vec<PeriodPoint> = a
        .loads
        .iter()
        .map(|&l| period_point(a.load_window.ns(), l, a.trials, a.seed, &cfg).0)
        .collect();
    if a.json {
        let r = PeriodReport {
            seed: a.seed,
            trials: a.trials,
            analyser: cfg,
            window_sweep,
            load_sweep,
        };
        println!("{}", serde_json::to_string_pretty(&r)?);
        return Ok(());
    }
    let table = |points: &[PeriodPoint]| {
        let mut t = Table::new(&[
            "window",
            "RT load",
            "within 1 %",
            "median error",
            "max error",
            "events",
            "analysis",
        ]);
        let pct = |x: Option<f64>| {
            x.map(|v| format!("{:.3} %", v * 100.0))
                .unwrap_or_else(|| "-".into())
        };
        for p in points {
            t.push(vec![
                Duration(p.window_ns).to_string(),
                format!("{:.0} %", p.load * 100.0),
                format!("{:.0} %", p.within_1pct * 100.0),
                pct(p.median_error),
                pct(p.max_error),
                p.median_events.to_string(),
                format!("{:.1} µs", p.median_analysis_ns as f64 / 1000.0),
            ]);
        }
        t.render()
    };
    println!(
        "period detection from traced wake-ups, {} trials per point (seeds {}..{}):\n",
        a.trials,
        a.seed,
        a.seed + a.trials as u64 - 1
    );
    println!(
        "vs observation window, no background load:\n{}",
        table(&window_sweep)
    );
    println!(
        "vs background SCHED_FIFO load, window {}:\n{}",
        a.load_window,
        table(&load_sweep)
    );
    Ok(())
}
