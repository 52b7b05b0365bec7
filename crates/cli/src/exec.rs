//! `pacer exec` and `pacer attach`: adaptive reservations for unmodified programs (LFS++), and the
//! hidden `pacer guardian` companion. The session logic lives in `pacer_linux::control`; this file
//! parses options, runs the loop and renders the status.

use std::io::{IsTerminal, Write};
use std::os::fd::AsRawFd;
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::Command;

use anyhow::{bail, Context, Result};
use clap::{Args as ClapArgs, ValueEnum};
use pacer_adapt::controller::{LegacyConfig, Phase};
use pacer_adapt::supervisor::AllocationStatus;
use pacer_adapt::Compression;
use pacer_linux::control::{self, Session, SessionConfig, SessionStatus};
use pacer_linux::guardian::{self, Guardian};
use pacer_linux::signals::{self, SignalFd};
use pacer_model::Duration;
use serde_json::json;

use crate::analyze::parse_duration;
use crate::table::Table;

const AFTER_HELP: &str = "\
How it works (LFS++, lfspp-legacy-multimedia.txt): pacer traces each thread's wake-ups in the \
kernel, finds its period with the spectral analyser once --window of trace is available, then \
every sampling period measures the CPU time the thread used, predicts the next demand \
(percentile of the last --history samples) and requests Q = (1+x)·prediction·P/S through the \
supervisor, which keeps Σ Q/P within the kernel's admission limit. Reservations carry \
SCHED_FLAG_RESET_ON_FORK, so reserved threads can still create threads and processes.

Threads already under SCHED_FIFO/RR/DEADLINE are left alone. On exit, Ctrl-C, SIGTERM or SIGHUP \
every thread gets its original policy back; if pacer is killed outright, a guardian process \
restores them. The program keeps running after pacer stops controlling it.

Needs root (SCHED_DEADLINE and tracefs). Status: a live table on a terminal, the final table \
otherwise; --json prints one JSON object per line (\"status\" every --status-every, then \"exit\").";

/// Options shared by `exec` and `attach`.
#[derive(ClapArgs, Debug, Clone)]
pub struct ControlArgs {
    /// Reserve with this period instead of detecting it (e.g. 10ms).
    #[arg(long, value_parser = parse_duration)]
    period: Option<Duration>,
    /// Control only threads with this name (`comm`, as in /proc/PID/task/TID/comm); repeatable.
    #[arg(long = "thread", value_name = "NAME")]
    threads: Vec<String>,
    /// Do not take threads created after the start.
    #[arg(long)]
    no_follow: bool,
    /// Controller activation period.
    #[arg(long, default_value = "100ms", value_parser = parse_duration)]
    tick: Duration,
    /// Wake-up trace window given to the period analyser (LFS++ finds periods reliably from 1 s).
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    window: Duration,
    /// Target sampling period S of the budget controller (rounded to a multiple of the period).
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    sampling: Duration,
    /// Spread factor x: Q = (1+x)·predicted demand (LFS++ recommends 0.1–0.2).
    #[arg(long, default_value_t = 0.15)]
    spread: f64,
    /// Samples kept by the percentile predictor.
    #[arg(long, default_value_t = 16)]
    history: usize,
    /// Percentile of the history used as prediction (0.9375 with 16 samples = 2nd largest).
    #[arg(long, default_value_t = 0.9375)]
    percentile: f64,
    /// Largest bandwidth (Q/P) one thread may get.
    #[arg(long, default_value_t = 0.9)]
    max_bandwidth: f64,
    /// Total bandwidth (CPUs) pacer may reserve; default: the kernel's admission limit.
    #[arg(long)]
    bound: Option<f64>,
    /// How requests are cut when they exceed the bound.
    #[arg(long, value_enum, default_value_t = CompressionArg::Proportional)]
    compression: CompressionArg,
    /// Set SCHED_FLAG_RECLAIM (GRUB: reserved threads may use idle bandwidth).
    #[arg(long)]
    reclaim: bool,
    /// Minimum analyser confidence (0–1) to adopt a detected period.
    #[arg(long, default_value_t = 0.0)]
    min_confidence: f64,
    /// Stop controlling after this long (the program keeps running).
    #[arg(long, value_parser = parse_duration)]
    duration: Option<Duration>,
    /// Status interval (live view, --json lines; without a terminal, setting it prints the
    /// table at this interval).
    #[arg(long, value_parser = parse_duration)]
    status_every: Option<Duration>,
    /// Print JSON lines on stdout instead of tables.
    #[arg(long)]
    json: bool,
    /// Only the final table (or final JSON line).
    #[arg(short, long)]
    quiet: bool,
}

#[derive(ValueEnum, Debug, Clone, Copy)]
enum CompressionArg {
    Proportional,
    Weighted,
    Priority,
}

#[derive(ClapArgs, Debug)]
#[command(after_help = AFTER_HELP)]
pub struct ExecArgs {
    #[command(flatten)]
    control: ControlArgs,
    /// The program and its arguments (after `--`).
    #[arg(required = true, trailing_var_arg = true, value_name = "CMD")]
    command: Vec<String>,
}

#[derive(ClapArgs, Debug)]
#[command(after_help = AFTER_HELP)]
pub struct AttachArgs {
    #[command(flatten)]
    control: ControlArgs,
    /// Process to control (a process id, not a thread id).
    pid: u32,
}

#[derive(ClapArgs, Debug)]
pub struct GuardianArgs {}

fn session_config(a: &ControlArgs) -> Result<SessionConfig> {
    let legacy = LegacyConfig {
        tick_ns: a.tick.0,
        window_ns: a.window.0,
        sampling_ns: a.sampling.0,
        spread: a.spread,
        history: a.history,
        percentile: a.percentile,
        max_bandwidth: a.max_bandwidth,
        bound: a.bound,
        reclaim: a.reclaim,
        min_confidence: a.min_confidence,
        compression: match a.compression {
            CompressionArg::Proportional => Compression::Proportional,
            CompressionArg::Weighted => Compression::Weighted,
            CompressionArg::Priority => Compression::PriorityOrdered,
        },
        ..LegacyConfig::default()
    };
    legacy.validate().context("invalid controller options")?;
    if let Some(b) = a.bound {
        if !(b.is_finite() && b > 0.0) {
            bail!("--bound must be a positive number of CPUs, got {b}");
        }
    }
    Ok(SessionConfig {
        legacy,
        names: a.threads.clone(),
        known_period: a.period.map(|d| d.0),
        follow_new: !a.no_follow,
    })
}

fn start_guardian() -> Result<Guardian> {
    let exe: PathBuf = std::env::current_exe().context("locating pacer's own binary for the guardian")?;
    let mut cmd = Command::new(exe);
    cmd.arg("guardian");
    Guardian::spawn(cmd).context("starting the guardian process")
}

/// How the loop ended.
enum End {
    Exited(Option<std::process::ExitStatus>),
    Signal(i32),
    Duration,
}

pub fn exec(args: ExecArgs) -> Result<u8> {
    let cfg = session_config(&args.control)?;
    let sigs = SignalFd::new(&signals::TERMINATING).context("setting up signal handling")?;
    control::preflight(cfg.known_period.is_none()).context("pacer exec")?;
    let mut cmd = Command::new(&args.command[0]);
    cmd.args(&args.command[1..]);
    let mut child =
        signals::spawn_unblocked(&mut cmd).with_context(|| format!("cannot run {:?}", args.command[0]))?;
    let pidfd = control::open_process(child.id()).context("opening the new process")?;
    let guardian = start_guardian()?;
    let session = Session::new(pidfd, cfg, Some(guardian))?;
    let label = args.command.join(" ");
    let end = run_loop(session, &sigs, &args.control, &label, || {
        child.try_wait().ok().flatten()
    })?;
    Ok(match end {
        End::Exited(status) => {
            let status = status.or_else(|| child.wait().ok());
            status.map_or(0, |s| {
                s.code().map_or(128 + s.signal().unwrap_or(0) as u8, |c| c as u8)
            })
        }
        End::Signal(s) => 128 + s as u8,
        End::Duration => 0,
    })
}

pub fn attach(args: AttachArgs) -> Result<u8> {
    let cfg = session_config(&args.control)?;
    let sigs = SignalFd::new(&signals::TERMINATING).context("setting up signal handling")?;
    let pidfd = control::open_process(args.pid).context("pacer attach")?;
    control::preflight(cfg.known_period.is_none()).context("pacer attach")?;
    let guardian = start_guardian()?;
    let label = std::fs::read_to_string(format!("/proc/{}/comm", args.pid))
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    let session = Session::new(pidfd, cfg, Some(guardian))?;
    let end = run_loop(session, &sigs, &args.control, &label, || None)?;
    Ok(match end {
        End::Signal(s) => 128 + s as u8,
        _ => 0,
    })
}

/// `pacer guardian` (hidden): reads the protocol on stdin; see `pacer_linux::guardian`.
pub fn guardian(_: GuardianArgs) -> Result<u8> {
    let report = guardian::serve(std::io::stdin().lock()).context("guardian: reading from pacer")?;
    if !report.clean && (!report.restored.is_empty() || !report.failed.is_empty()) {
        eprintln!(
            "pacer guardian: pacer exited without releasing its threads; restored {:?}{}",
            report.restored,
            if report.failed.is_empty() {
                String::new()
            } else {
                format!(", could not restore {:?}", report.failed)
            }
        );
    }
    Ok(if report.failed.is_empty() { 0 } else { 1 })
}

fn run_loop(
    mut session: Session,
    sigs: &SignalFd,
    a: &ControlArgs,
    label: &str,
    mut exited: impl FnMut() -> Option<std::process::ExitStatus>,
) -> Result<End> {
    let tty = std::io::stderr().is_terminal() && !a.json && !a.quiet;
    let status_every = a.status_every.map(|d| d.0).unwrap_or(1_000_000_000).max(1);
    let periodic_output = !a.quiet && (tty || a.json || a.status_every.is_some());
    let start = std::time::Instant::now();
    let tick = session.tick_ns();
    let mut next_status = status_every;
    let mut drawn_lines = 0usize;
    let mut warned_guardian = false;
    let end = loop {
        session.tick();
        if let Some(p) = session.guardian_problem() {
            if !warned_guardian {
                eprintln!("pacer: warning: {p}; threads will not be restored if pacer is killed");
                warned_guardian = true;
            }
        }
        let elapsed = start.elapsed().as_nanos() as u64;
        if periodic_output && elapsed >= next_status {
            next_status = elapsed + status_every;
            let st = session.status();
            if a.json {
                print_json_line(json!({"type": "status", "status": st}))?;
            } else if tty {
                let text = render(&st, label);
                let mut err = std::io::stderr().lock();
                if drawn_lines > 0 {
                    write!(err, "\x1b[{drawn_lines}A\x1b[J")?;
                }
                err.write_all(text.as_bytes())?;
                drawn_lines = text.lines().count();
            } else {
                eprint!("{}", render(&st, label));
            }
        }
        if let Some(d) = a.duration {
            if elapsed >= d.0 {
                break End::Duration;
            }
        }
        let ready = signals::wait_readable(&[sigs.as_raw_fd(), session.pidfd().as_raw_fd()], tick)?;
        if let Some(s) = sigs.next() {
            break End::Signal(s);
        }
        if ready[1] || !session.alive() {
            break End::Exited(exited());
        }
    };
    let last = session.status();
    let report = session.release();
    let why = match &end {
        End::Exited(_) => "the program exited".to_string(),
        End::Signal(s) => format!("signal {s} received"),
        End::Duration => "--duration elapsed".to_string(),
    };
    if a.json {
        print_json_line(json!({"type": "exit", "reason": why, "status": last, "release": report}))?;
    } else {
        if tty && drawn_lines > 0 {
            eprint!("\x1b[{drawn_lines}A\x1b[J");
        }
        eprint!("{}", render(&last, label));
        eprintln!(
            "pacer: {why}; restored the original policy of {} thread(s){}",
            report.restored.len(),
            if matches!(end, End::Exited(_)) {
                String::new()
            } else {
                format!("; PID {} keeps running", last.pid)
            }
        );
    }
    for (tid, e) in &report.failed {
        eprintln!("pacer: warning: thread {tid}: could not restore its policy: {e} (the guardian retries)");
    }
    Ok(end)
}

fn print_json_line(v: serde_json::Value) -> Result<()> {
    let mut out = std::io::stdout().lock();
    serde_json::to_writer(&mut out, &v)?;
    out.write_all(b"\n")?;
    out.flush()?;
    Ok(())
}

fn pct(v: Option<f64>) -> String {
    v.map_or("-".into(), |x| format!("{:.1}%", 100.0 * x))
}

fn dur(v: Option<u64>) -> String {
    v.map_or("-".into(), |ns| Duration(ns).approx())
}

fn count(v: Option<u64>) -> String {
    v.map_or("-".into(), |n| n.to_string())
}

/// Periods with the precision the analyser has (better than 0.01 %).
fn period(v: Option<u64>) -> String {
    v.map_or("-".into(), |ns| format!("{:.4}ms", ns as f64 / 1e6))
}

/// The status table: one row per thread.
fn render(st: &SessionStatus, label: &str) -> String {
    let alloc = match &st.allocation {
        None => "no reservation yet".to_string(),
        Some(AllocationStatus::Full { .. }) => "all requests granted".to_string(),
        Some(AllocationStatus::Compressed { requested, granted }) => {
            format!("compressed: requested {requested:.3}, granted {granted:.3}")
        }
        Some(AllocationStatus::Infeasible { minimum, bound }) => {
            format!("infeasible: minima {minimum:.3} > bound {bound:.3}")
        }
    };
    let mut out = format!(
        "pacer: PID {} ({label}) {:.1} s; reserved {:.3} of {:.2} CPUs ({alloc}); {} thread(s) exited; {} wake-ups lost\n",
        st.pid,
        st.elapsed_ns as f64 / 1e9,
        st.reserved_bandwidth,
        st.bound,
        st.exited_threads,
        st.lost_wakeups,
    );
    let mut t = Table::new(&[
        "TID",
        "NAME",
        "STATE",
        "PERIOD",
        "CONF",
        "BUDGET",
        "RESERVED",
        "USED",
        "SATURATED",
        "REFUSED",
        "CSW",
        "MIGR",
        "NOTE",
    ]);
    for th in &st.threads {
        let row = match (&th.control, &th.skipped) {
            (Some(c), _) => {
                let state = match c.phase {
                    Phase::Pending => "pending",
                    Phase::Detecting => "detecting",
                    Phase::Controlled => "reserved",
                    Phase::Gone => "gone",
                };
                let state = if c.phase == Phase::Controlled && c.budget_ns.is_none() {
                    "waiting"
                } else {
                    state
                };
                vec![
                    th.tid.to_string(),
                    th.name.clone(),
                    state.to_string(),
                    period(c.period_ns),
                    c.confidence.map_or("-".into(), |v| format!("{v:.2}")),
                    dur(c.budget_ns),
                    pct(c.reserved_bandwidth),
                    pct(c.used_bandwidth),
                    format!("{}/{}", c.saturated_samples, c.samples),
                    c.admission_refusals.to_string(),
                    count(th.context_switches),
                    count(th.migrations),
                    c.last_error
                        .clone()
                        .or_else(|| c.detection_note.clone())
                        .unwrap_or_default(),
                ]
            }
            (None, skipped) => vec![
                th.tid.to_string(),
                th.name.clone(),
                "skipped".into(),
                "-".into(),
                "-".into(),
                "-".into(),
                "-".into(),
                "-".into(),
                "-".into(),
                "-".into(),
                "-".into(),
                "-".into(),
                skipped.clone().unwrap_or_default(),
            ],
        };
        t.push(row);
    }
    out.push_str(&t.render());
    out
}
