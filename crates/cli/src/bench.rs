//! `pacer bench …`: experiments that measure pacer itself and print what they measured.

use anyhow::{bail, Result};
use pacer_adapt::controller::LegacyConfig;
use pacer_adapt::period::{PeriodConfig, DEFAULT_MIN_CONFIDENCE};
use pacer_model::Duration;
use pacer_sim::experiments::{closed_loop_point, period_point, ClosedLoopPoint, Degradation, PeriodPoint};
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
    /// Cost of talking to `pacer daemon`: a notification call, the round trip of a hint and of
    /// job begin/end (median, p99), and the daemon's CPU use with 1, 10, 100 sessions (root).
    Daemon(crate::bench_daemon::DaemonBenchArgs),
    /// Stalls the guest cannot see: gaps in a busy thread's clock reads without a context switch
    /// (the host descheduling a vCPU, SMIs), per CPU, with their recurring interval.
    Stalls(crate::bench_stalls::StallArgs),
}

#[derive(clap::Args)]
#[command(
    after_help = "Each trial: a multimedia-like program (period 10–42 ms, three wake-ups per job: the\n\
timer and two I/O completions) next to four SCHED_FIFO tasks of the given total load, traced for the\n\
window after 0.5 s of warm-up; success = detected period within 1 % of the truth.\n\
\n\
Detection uses origin marking as the LFS++ controller does: the simulator records the expiry of\n\
each timer the program sleeps on and marks the timer's wake-ups; the analyser runs on the\n\
expiries and on the timer wake-ups when the window holds enough of them, and the more confident\n\
answer is taken (else all wake-ups are analysed). A late job skips its sleep, as under rt-app,\n\
and leaves neither. Columns: 'within 1 %' with marking;\n\
'confident' = within 1 % and confidence ≥ the default minimum (what a controller adopts);\n\
'wrong+conf' = off by more than 1 % yet above it; 'wake-ups only' = within 1 % with the wake-ups'\n\
marks but without the expiries; 'no marks' = within 1 % from all wake-ups, origins ignored;\n\
'source exp/tmr' = share of estimates from the expiries / from the timer wake-ups; 'wake-ups\n\
(timer) exp' = median wake-ups, timer-raised among them, and expiries set; 'analysis' = median\n\
time of one analysis of all wake-ups.\n\
\n\
The degraded-trace table impairs the traced wake-ups at no load: 15 % dropped at random, 15 %\n\
spurious (random times, not timer-raised), Gaussian jitter of --degrade-jitter on every\n\
timestamp, and all three.\n\
\n\
The closed-loop table runs the LFS++ controller (pacer exec's, default options) on the same program\n\
and load for --horizon after the warm-up, with the load window as its detection window, once with\n\
the starvation probe and once without (--no-probe): a reservation that makes the program run on time\n\
changes what its trace shows. 'final within 1 %' = reserved period within 1 % at the end; 'first' =\n\
the first period reserved was; 'wrong' = ends reserved at a period more than 1 % off; 'probed' =\n\
share of trials probed; 'right after' = median / max time from the start of tracing until the\n\
period was right for good. --horizon 0 skips the table."
)]
pub struct PeriodArgs {
    /// Observation windows swept at load 0 (comma-separated durations).
    #[arg(long, default_value = "0.2s,0.4s,0.6s,0.8s,1s,1.5s,2s,5s,10s", value_delimiter = ',', value_parser = parse_duration)]
    pub windows: Vec<Duration>,
    /// Background SCHED_FIFO loads swept at --load-window (comma-separated fractions of a CPU).
    #[arg(long, default_value = "0,0.15,0.3,0.45,0.6,0.75,0.85", value_delimiter = ',')]
    pub loads: Vec<f64>,
    /// Window used for the load sweep (the paper: 0.6 s).
    #[arg(long, default_value = "0.6s", value_parser = parse_duration)]
    pub load_window: Duration,
    /// Window used for the degraded-trace table.
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    pub degrade_window: Duration,
    /// Timestamp jitter (standard deviation) of the degraded-trace table.
    #[arg(long, default_value = "0.1ms", value_parser = parse_duration)]
    pub degrade_jitter: Duration,
    /// How long the closed-loop table lets the controller run (0: skip the table).
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub horizon: Duration,
    /// Trials per point.
    #[arg(long, default_value_t = 30, value_parser = crate::count_in::<1, 100_000>)]
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
    /// The confidence threshold of the 'confident' columns.
    min_confidence: f64,
    window_sweep: Vec<PeriodPoint>,
    load_sweep: Vec<PeriodPoint>,
    degraded: Vec<PeriodPoint>,
    /// The controller in closed loop, with the starvation probe and without.
    closed_loop: Vec<ClosedLoopPoint>,
    closed_loop_no_probe: Vec<ClosedLoopPoint>,
}

pub fn run(a: Args) -> Result<()> {
    match a.what {
        What::Period(p) => period(p),
        What::Exec(e) => crate::bench_exec::run(e),
        What::Daemon(d) => crate::bench_daemon::run(d),
        What::Stalls(s) => crate::bench_stalls::run(s),
    }
}

fn period(a: PeriodArgs) -> Result<()> {
    if a.trials == 0 {
        bail!("--trials: expected at least 1");
    }
    if a.horizon > Duration::from_secs(3600) {
        bail!(
            "--horizon {}: expected a duration from 0s (no closed-loop table) to 3600s",
            a.horizon
        );
    }
    if let Some(l) = a.loads.iter().find(|l| !(0.0..1.0).contains(*l)) {
        bail!("--loads: {l} is not a fraction of one CPU in [0, 1)");
    }
    if a.windows
        .iter()
        .chain([&a.load_window, &a.degrade_window])
        .any(|w| w.is_zero())
    {
        bail!("--windows/--load-window/--degrade-window: expected durations > 0");
    }
    let cfg = PeriodConfig::default();
    let none = Degradation::default();
    let window_sweep: Vec<PeriodPoint> = a
        .windows
        .iter()
        .map(|w| period_point(w.ns(), 0.0, none, a.trials, a.seed, &cfg).0)
        .collect();
    let load_sweep: Vec<PeriodPoint> = a
        .loads
        .iter()
        .map(|&l| period_point(a.load_window.ns(), l, none, a.trials, a.seed, &cfg).0)
        .collect();
    let jitter_ns = a.degrade_jitter.ns();
    let degradations = [
        none,
        Degradation { drop: 0.15, ..none },
        Degradation {
            spurious: 0.15,
            ..none
        },
        Degradation { jitter_ns, ..none },
        Degradation {
            drop: 0.15,
            spurious: 0.15,
            jitter_ns,
        },
    ];
    let degraded: Vec<PeriodPoint> = degradations
        .iter()
        .map(|&d| period_point(a.degrade_window.ns(), 0.0, d, a.trials, a.seed, &cfg).0)
        .collect();
    let closed = |probe: bool| -> Vec<ClosedLoopPoint> {
        if a.horizon.is_zero() {
            return Vec::new();
        }
        let lc = LegacyConfig {
            window_ns: a.load_window.ns(),
            probe_wait: if probe {
                LegacyConfig::default().probe_wait
            } else {
                None
            },
            ..LegacyConfig::default()
        };
        a.loads
            .iter()
            .map(|&l| closed_loop_point(l, a.horizon.ns(), a.trials, a.seed, &lc).0)
            .collect()
    };
    let (closed_loop, closed_loop_no_probe) = (closed(true), closed(false));
    if a.json {
        let r = PeriodReport {
            seed: a.seed,
            trials: a.trials,
            analyser: cfg,
            min_confidence: DEFAULT_MIN_CONFIDENCE,
            window_sweep,
            load_sweep,
            degraded,
            closed_loop,
            closed_loop_no_probe,
        };
        println!("{}", crate::output::json_text("pacer.bench.period/1", &r)?);
        return Ok(());
    }
    let describe = |d: &Degradation| {
        if d.is_none() {
            return "as traced".to_string();
        }
        let mut parts = Vec::new();
        if d.drop > 0.0 {
            parts.push(format!("{:.0} % dropped", d.drop * 100.0));
        }
        if d.spurious > 0.0 {
            parts.push(format!("{:.0} % spurious", d.spurious * 100.0));
        }
        if d.jitter_ns > 0 {
            parts.push(format!("jitter {}", Duration(d.jitter_ns)));
        }
        parts.join(", ")
    };
    let table = |points: &[PeriodPoint]| {
        let mut t = Table::new(&[
            "window",
            "RT load",
            "trace",
            "within 1 %",
            "confident",
            "wrong+conf",
            "wake-ups only",
            "no marks",
            "source exp/tmr",
            "median error",
            "max error",
            "wake-ups (timer) exp",
            "analysis",
        ]);
        let pct = |x: Option<f64>| {
            x.map(|v| format!("{:.3} %", v * 100.0))
                .unwrap_or_else(|| "-".into())
        };
        let share = |x: f64| format!("{:.0} %", x * 100.0);
        for p in points {
            t.push(vec![
                Duration(p.window_ns).to_string(),
                format!("{:.0} %", p.load * 100.0),
                describe(&p.degradation),
                share(p.within_1pct),
                share(p.within_1pct_confident),
                share(p.wrong_confident),
                share(p.within_1pct_wakeups),
                share(p.within_1pct_all),
                format!("{}/{}", share(p.expiry_source), share(p.timer_source)),
                pct(p.median_error),
                pct(p.max_error),
                format!(
                    "{} ({}) {}",
                    p.median_events, p.median_timer_events, p.median_expiry_events
                ),
                format!("{:.1} µs", p.median_analysis_ns as f64 / 1000.0),
            ]);
        }
        t.render()
    };
    println!(
        "period detection from traced wake-ups, {} trials per point (seeds {}..{}), minimum confidence {}:\n",
        a.trials,
        a.seed,
        a.seed + a.trials as u64 - 1,
        DEFAULT_MIN_CONFIDENCE
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
    println!(
        "vs trace degradation, window {}, no background load:\n{}",
        a.degrade_window,
        table(&degraded)
    );
    if !closed_loop.is_empty() {
        let mut t = Table::new(&[
            "RT load",
            "final within 1 %",
            "first",
            "wrong",
            "probed",
            "right after",
            "no probe: final",
            "first",
            "wrong",
        ]);
        let share = |x: f64| format!("{:.0} %", x * 100.0);
        let secs = |x: Option<u64>| x.map_or("-".into(), |ns| format!("{:.1} s", ns as f64 / 1e9));
        for (p, q) in closed_loop.iter().zip(&closed_loop_no_probe) {
            t.push(vec![
                format!("{:.0} %", p.load * 100.0),
                share(p.within_1pct),
                share(p.first_within_1pct),
                share(p.wrong),
                share(p.probed),
                format!(
                    "{} / {}",
                    secs(p.median_right_after_ns),
                    secs(p.max_right_after_ns)
                ),
                share(q.within_1pct),
                share(q.first_within_1pct),
                share(q.wrong),
            ]);
        }
        println!(
            "closed loop: the LFS++ controller for {}, detection window {}:\n{}",
            a.horizon,
            a.load_window,
            t.render()
        );
    }
    Ok(())
}
