//! `pacer bench exec`: what `pacer exec` costs on the real kernel.
//! - tracing overhead: wall time of a program with and without its wake-ups traced in the
//!   kernel, the measurement of LFS++ Table II (kernel tracer 0.02 %, strace 9.32 %);
//! - pacer's own CPU use while it controls 1, 10, 50… periodic threads (LFS++ §7.6).
//!
//! The programs are rt-app workloads run by `pacer run` with one busy-loop calibration. Runs of
//! the configurations are interleaved, and medians are reported, because timing on a shared
//! machine is noisy.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration as StdDuration, Instant};

use anyhow::{bail, Context, Result};
use pacer_linux::procfs::Pidfd;
use pacer_linux::run::calibrate::calibrate;
use pacer_linux::signals::SIGTERM;
use pacer_linux::trace::WakeupTracer;
use pacer_model::Duration;
use pacer_workload::jobs::compare::quantile;
use serde::Serialize;

use crate::analyze::parse_duration;
use crate::table::Table;

#[derive(clap::Args)]
#[command(after_help = "Needs root (tracefs, SCHED_DEADLINE). Example: sudo pacer bench exec --repeats 7")]
pub struct ExecBenchArgs {
    /// Runs of each configuration (medians are reported).
    #[arg(long, default_value_t = 5, value_parser = crate::count_in::<1, 1000>)]
    pub repeats: usize,
    /// CPU work of the CPU-bound program.
    #[arg(long, default_value = "2s", value_parser = parse_duration)]
    pub work: Duration,
    /// Numbers of periodic threads pacer controls while its CPU use is measured.
    #[arg(long, default_value = "1,10,50", value_delimiter = ',')]
    pub threads: Vec<usize>,
    /// How long pacer's CPU use is measured for each thread count (after detection).
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub control_for: Duration,
    #[arg(long)]
    pub json: bool,
}

#[derive(Serialize)]
struct OverheadRow {
    program: String,
    wakeups_per_s: u64,
    plain_median_ns: u64,
    traced_median_ns: u64,
    overhead: f64,
    plain_runs_ns: Vec<u64>,
    traced_runs_ns: Vec<u64>,
    traced_wakeups: u64,
}

#[derive(Serialize)]
struct CpuRow {
    threads: usize,
    reserved: usize,
    measured_ns: u64,
    pacer_cpu_ns: u64,
    cpu_fraction: f64,
}

#[derive(Serialize)]
struct Report {
    calibration_ns_per_loop: f64,
    repeats: usize,
    tracing: Vec<OverheadRow>,
    controller_cpu: Vec<CpuRow>,
}

fn pacer_exe() -> Result<std::path::PathBuf> {
    std::env::current_exe().context("locating pacer's own binary")
}

fn median(v: &[u64]) -> u64 {
    let mut s = v.to_vec();
    s.sort_unstable();
    quantile(&s, 0.5)
}

/// Runs `pacer run FILE` once; with `trace`, every thread of it has its wake-ups traced in the
/// kernel (new threads are added within 1 ms of appearing, as pacer exec's tracer does at its
/// tick). Returns the wall time and the number of traced wake-ups.
fn timed_run(file: &Path, cal: f64, trace: bool) -> Result<(u64, u64)> {
    let mut tracer = if trace { Some(WakeupTracer::new()?) } else { None };
    let t0 = Instant::now();
    let mut child = Command::new(pacer_exe()?)
        .args(["run", "--calibration", &cal.to_string()])
        .arg(file)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()?;
    let pid = child.id();
    let mut traced = std::collections::BTreeSet::new();
    let mut wakeups = 0u64;
    let mut drained = std::collections::HashMap::new();
    let status = loop {
        if let Some(st) = child.try_wait()? {
            break st;
        }
        if let Some(tr) = tracer.as_mut() {
            if let Ok(pidfd) = Pidfd::open(pid) {
                for tid in pidfd.threads().unwrap_or_default() {
                    if traced.insert(tid) {
                        tr.add(tid)?;
                    }
                }
            }
            tr.drain(&mut drained)?;
            wakeups += drained
                .values_mut()
                .map(|v| std::mem::take(v).len() as u64)
                .sum::<u64>();
        }
        std::thread::sleep(StdDuration::from_millis(1));
    };
    let wall = t0.elapsed().as_nanos() as u64;
    if !status.success() {
        bail!("`pacer run {}` failed: {status}", file.display());
    }
    if let Some(tr) = tracer.as_mut() {
        tr.drain(&mut drained)?;
        wakeups += drained.values().map(|v| v.len() as u64).sum::<u64>();
    }
    Ok((wall, wakeups))
}

fn tracing_overhead(dir: &Path, cal: f64, a: &ExecBenchArgs) -> Result<Vec<OverheadRow>> {
    let work_us = a.work.0 / 1000;
    let programs = [
        (
            "CPU-bound (one run)".to_string(),
            0,
            format!(r#"{{"tasks":{{"cpu":{{"loop":1,"run":{work_us}}}}}}}"#),
        ),
        (
            "1 kHz wake-ups (run 900 µs, sleep 100 µs)".to_string(),
            1000,
            format!(
                r#"{{"tasks":{{"wake":{{"loop":{},"run":900,"sleep":100}}}}}}"#,
                (work_us / 900).max(1)
            ),
        ),
    ];
    let mut rows = Vec::new();
    for (name, rate, json) in programs {
        let file = dir.join(format!("p{rate}.json"));
        std::fs::write(&file, json)?;
        let (mut plain, mut traced, mut events) = (Vec::new(), Vec::new(), 0);
        for i in 0..a.repeats {
            eprintln!("pacer bench exec: {name}: run {}/{}", i + 1, a.repeats);
            plain.push(timed_run(&file, cal, false)?.0);
            let (w, e) = timed_run(&file, cal, true)?;
            traced.push(w);
            events = e;
        }
        let (p, t) = (median(&plain), median(&traced));
        rows.push(OverheadRow {
            program: name,
            wakeups_per_s: rate,
            plain_median_ns: p,
            traced_median_ns: t,
            overhead: t as f64 / p as f64 - 1.0,
            plain_runs_ns: plain,
            traced_runs_ns: traced,
            traced_wakeups: events,
        });
    }
    Ok(rows)
}

/// CPU time of every thread of `pid` (ns), from schedstat.
fn process_cpu(pid: u32) -> u64 {
    let pfs = pacer_linux::procfs::ProcFs::system();
    pfs.threads_of(pid)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|t| pfs.cpu_time(pid, t).ok())
        .sum()
}

fn controller_cpu(dir: &Path, cal: f64, a: &ExecBenchArgs) -> Result<Vec<CpuRow>> {
    let mut rows = Vec::new();
    for &n in &a.threads {
        // Distinct periods 10–59 ms; 50 µs of work each keeps 50 threads under 10 % of a CPU.
        let tasks: Vec<String> = (0..n)
            .map(|i| {
                format!(
                    r#""t{i}":{{"loop":-1,"run":50,"timer":{{"ref":"r{i}","period":{}}}}}"#,
                    10_000 + (i % 50) * 1000
                )
            })
            .collect();
        let file = dir.join(format!("n{n}.json"));
        std::fs::write(&file, format!(r#"{{"tasks":{{{}}}}}"#, tasks.join(",")))?;
        eprintln!(
            "pacer bench exec: controlling {n} thread(s) for {}",
            a.control_for
        );
        let mut exec = Command::new(pacer_exe()?)
            .args(["exec", "--json", "-q", "--"])
            .arg(pacer_exe()?)
            .args(["run", "--calibration", &cal.to_string()])
            .arg(&file)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()?;
        let pid = exec.id();
        // Detection and the first reservations take about 2 s; measure the steady state.
        std::thread::sleep(StdDuration::from_secs(3));
        let (c0, t0) = (process_cpu(pid), Instant::now());
        std::thread::sleep(StdDuration::from_nanos(a.control_for.0));
        let (c1, dt) = (process_cpu(pid), t0.elapsed().as_nanos() as u64);
        Pidfd::open(pid)?.send_signal(SIGTERM)?;
        // The program shares pacer exec's stdout and outlives it: read up to the exit line only.
        let stdout = exec.stdout.take().context("pacer exec's stdout")?;
        let exit: serde_json::Value = std::io::BufRead::lines(std::io::BufReader::new(stdout))
            .map_while(Result::ok)
            .find_map(|l| {
                serde_json::from_str::<serde_json::Value>(&l)
                    .ok()
                    .filter(|v| v["type"] == "exit")
            })
            .context("pacer exec printed no exit line")?;
        exec.wait()?;
        let status = &exit["status"];
        let reserved = status["threads"]
            .as_array()
            .map(|ts| ts.iter().filter(|t| t["control"]["budget_ns"].is_u64()).count())
            .unwrap_or(0);
        // The program keeps running after pacer stops: end it.
        if let Some(p) = status["pid"].as_i64() {
            if let Ok(fd) = Pidfd::open(p as u32) {
                let _ = fd.send_signal(SIGTERM);
            }
        }
        rows.push(CpuRow {
            threads: n,
            reserved,
            measured_ns: dt,
            pacer_cpu_ns: c1.saturating_sub(c0),
            cpu_fraction: c1.saturating_sub(c0) as f64 / dt as f64,
        });
    }
    Ok(rows)
}

pub fn run(a: ExecBenchArgs) -> Result<()> {
    if a.repeats == 0 {
        bail!("--repeats: expected at least 1");
    }
    if a.threads.iter().any(|&n| n == 0 || n > 500) {
        bail!("--threads: expected counts between 1 and 500");
    }
    pacer_linux::control::preflight(true).context("pacer bench exec")?;
    let dir = tempfile::tempdir()?;
    // The same measurement `pacer run` makes at start-up, once for every run of the bench.
    let cal = calibrate().ns_per_loop();
    let tracing = tracing_overhead(dir.path(), cal, &a)?;
    let controller_cpu = controller_cpu(dir.path(), cal, &a)?;
    let report = Report {
        calibration_ns_per_loop: cal,
        repeats: a.repeats,
        tracing,
        controller_cpu,
    };
    if a.json {
        println!("{}", crate::output::json_text("pacer.bench.exec/1", &report)?);
        return Ok(());
    }
    println!(
        "tracing overhead: wall time of `pacer run` programs, median of {} runs each (busy loop {cal} ns/loop)\n",
        a.repeats
    );
    let mut t = Table::new(&["program", "untraced", "traced", "overhead", "wake-ups traced"]);
    for r in &report.tracing {
        t.push(vec![
            r.program.clone(),
            format!("{:.4} s", r.plain_median_ns as f64 / 1e9),
            format!("{:.4} s", r.traced_median_ns as f64 / 1e9),
            format!("{:+.3} %", r.overhead * 100.0),
            r.traced_wakeups.to_string(),
        ]);
    }
    println!("{}", t.render());
    println!("pacer exec's own CPU use (all its threads, from schedstat) in steady state:\n");
    let mut t = Table::new(&["threads", "reserved", "measured", "pacer CPU", "CPU use"]);
    for r in &report.controller_cpu {
        t.push(vec![
            r.threads.to_string(),
            r.reserved.to_string(),
            format!("{:.1} s", r.measured_ns as f64 / 1e9),
            format!("{:.1} ms", r.pacer_cpu_ns as f64 / 1e6),
            format!("{:.3} %", r.cpu_fraction * 100.0),
        ]);
    }
    println!("{}", t.render());
    Ok(())
}
