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
use pacer_linux::ledger;
use pacer_linux::procfs;
use pacer_linux::sched::LinuxError;
use pacer_linux::sched_trace::SchedTracer;
use pacer_linux::signals::{self, SignalFd};
use pacer_model::text::escape_control;
use pacer_model::Duration;
use serde_json::json;

use crate::analyze::parse_duration;
use crate::output::{Outputs, Stdout};
use crate::table::Table;

const AFTER_HELP: &str = "\
How it works (LFS++, lfspp-legacy-multimedia.txt): pacer traces each thread's wake-ups in the \
kernel, finds its period with the spectral analyser once --window of trace is available, then \
every sampling period measures the CPU time the thread used, predicts the next demand \
(percentile of the last --history samples) and requests Q = (1+x)·prediction·P/S through the \
supervisor, which keeps Σ Q/P within the kernel's admission limit. Reservations carry \
SCHED_FLAG_RESET_ON_FORK, so reserved threads can still create threads and processes.

Threads already under SCHED_FIFO/RR/DEADLINE are left alone, and so is a thread that changes its \
own policy while controlled. On exit, Ctrl-C, SIGTERM or SIGHUP every thread gets its whole \
original scheduling state back (policy, flags, nice, priority, affinity); if pacer is killed \
outright, a guardian process restores them (pacer starts a new guardian if that one dies); if both \
are killed, `pacer doctor --repair` restores them from the session's ledger in /run/pacer. The \
program keeps running after pacer stops controlling it. Refuses kernel threads, PID 1 and itself.

Needs root (SCHED_DEADLINE and tracefs). Status: a live table on a terminal, the final table \
otherwise; --json prints one JSON object per line (\"status\" every --status-every, then \"exit\").

With --daemon, `pacer daemon` runs the session instead: its one supervisor then covers this \
program together with every other session (client applications, other exec sessions), so their \
sum stays admissible and compression is fair across them. No root is needed for your own \
program (the daemon checks the caller, its quota applies to every thread taken); the daemon \
restores the threads when this pacer exits or dies.

--trace FILE (root) records the program's context switches and wake-ups from the kernel into a \
Perfetto protobuf trace, as `pacer run --trace` does for a run: its threads are added as pacer \
sees them (exec: the main thread at once, the others within a --tick; attach: every thread at \
once, then new ones within a --tick), threads of its child processes are not recorded.

Example: sudo pacer exec --duration 10s --trace prog.pftrace -- ./prog";

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
    /// Smallest budget a thread is reserved. The default is the kernel's minimum (1024 ns); a
    /// thread measured idle gets it, and a burst then overruns it by up to a tick, which makes
    /// the kernel postpone its deadline by overrun/budget periods (throttled for seconds or
    /// minutes). Raise it for threads that sleep long and then burst (e.g. 1ms).
    #[arg(long, value_parser = parse_duration)]
    min_budget: Option<Duration>,
    /// Samples kept by the percentile predictor.
    #[arg(long, default_value_t = 16)]
    history: usize,
    /// Percentile of the history used as prediction (0.9375 with 16 samples = 2nd largest).
    #[arg(long, default_value_t = 0.9375)]
    percentile: f64,
    /// Largest bandwidth (Q/P) one thread may get [default: 0.9; with --daemon, the daemon's
    /// per-thread default for your user, counted against your quota for every thread taken].
    #[arg(long)]
    max_bandwidth: Option<f64>,
    /// Total bandwidth (CPUs) pacer may reserve; default: the kernel's admission limit.
    #[arg(long)]
    bound: Option<f64>,
    /// How requests are cut when they exceed the bound.
    #[arg(long, value_enum, default_value_t = CompressionArg::Proportional)]
    compression: CompressionArg,
    /// Set SCHED_FLAG_RECLAIM (GRUB: reserved threads may use idle bandwidth).
    #[arg(long)]
    reclaim: bool,
    /// Minimum analyser confidence (0–1) to adopt a detected period [default: the analyser's
    /// calibrated minimum, see docs/exec.md]. 0 adopts any period the analyser reports.
    #[arg(long)]
    min_confidence: Option<f64>,
    /// Starvation probe: a thread that waited for a CPU at least this share of its first
    /// window (0–1) runs late, and its wake-ups do not show its period; it is reserved at a
    /// 1 ms probe whose bandwidth doubles while it stays late, until a window on time shows its
    /// period (state "probing", see docs/exec.md).
    #[arg(long, default_value_t = pacer_adapt::controller::DEFAULT_PROBE_WAIT)]
    probe_wait: f64,
    /// Never probe: a starved thread is reserved at the period its late wake-ups suggest.
    #[arg(long)]
    no_probe: bool,
    /// pacer's own SCHED_FIFO priority while it controls (0: SCHED_OTHER). The control loop
    /// must run above the load it rescues threads from: as SCHED_OTHER it shares the fair
    /// server's 5 % with every CPU hog once probes and real-time load fill a CPU, and below a
    /// SCHED_FIFO load it gets nothing (measured: ticks 1 s apart, or none, instead of 100 ms;
    /// docs/exec.md). It uses about 1 % of a CPU. The program and everything pacer starts do
    /// not inherit it. Not used with --daemon (the daemon's own rt_priority applies).
    #[arg(long, default_value_t = 99, value_parser = clap::value_parser!(u8).range(0..=99))]
    rt_priority: u8,
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
    /// Have `pacer daemon` run the session, under its supervisor shared with every other
    /// session (no root needed for your own program). Only the session options --period,
    /// --thread, --no-follow and --max-bandwidth apply; the daemon's defaults set the rest.
    #[arg(long)]
    daemon: bool,
    /// The daemon's socket for --daemon [default: $PACER_SOCKET, else /run/pacer/pacer.sock].
    #[arg(long, value_name = "PATH", requires = "daemon")]
    socket: Option<PathBuf>,
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
    /// Write the kernel's record of the program's context switches and wake-ups here, as a
    /// Perfetto protobuf trace (as `pacer run --trace`; needs root), replaced only once the
    /// session has ended.
    #[arg(long, value_name = "FILE")]
    trace: Option<PathBuf>,
    /// The program and its arguments (after `--`).
    #[arg(required = true, trailing_var_arg = true, value_name = "CMD")]
    command: Vec<String>,
}

#[derive(ClapArgs, Debug)]
#[command(after_help = AFTER_HELP)]
pub struct AttachArgs {
    #[command(flatten)]
    control: ControlArgs,
    /// Write the kernel's record of the process's context switches and wake-ups while it is
    /// controlled here, as a Perfetto protobuf trace (as `pacer exec --trace`; needs root).
    #[arg(long, value_name = "FILE")]
    trace: Option<PathBuf>,
    /// Process to control (a process id, not a thread id).
    pid: u32,
}

#[derive(ClapArgs, Debug)]
pub struct GuardianArgs {
    /// pacer's process id: the guardian restores as soon as that process is gone, even if the
    /// pipe stays open.
    #[arg(long)]
    watch: Option<u32>,
    /// The session's ledger, deleted once every thread is restored (see `pacer doctor`).
    #[arg(long)]
    ledger: Option<PathBuf>,
}

/// Checks that `v` lies in `lo..=hi` (or `lo < v` when `open_low`), naming the flag and the range.
fn check_range(flag: &str, v: f64, lo: f64, hi: f64, open_low: bool, unit: &str) -> Result<()> {
    let ok = v.is_finite() && (if open_low { v > lo } else { v >= lo }) && v <= hi;
    if !ok {
        let low = if open_low {
            format!("above {lo}")
        } else {
            format!("from {lo}")
        };
        bail!("{flag} {v}: expected a number {low} to {hi}{unit}");
    }
    Ok(())
}

fn check_duration(flag: &str, d: Duration, lo: Duration, hi: Duration) -> Result<()> {
    if d < lo || d > hi {
        bail!(
            "{flag} {}: expected a duration from {} to {}",
            d.approx(),
            lo.approx(),
            hi.approx()
        );
    }
    Ok(())
}

/// Every option range-checked before anything starts, each error naming the flag and the range.
fn validate(a: &ControlArgs) -> Result<()> {
    use pacer_model::reservation::{DEFAULT_PERIOD_MAX, DEFAULT_PERIOD_MIN};
    let ms = Duration::from_ms;
    if let Some(p) = a.period {
        // The kernel's sched_deadline_period_{min,max}_us defaults.
        check_duration("--period", p, DEFAULT_PERIOD_MIN, DEFAULT_PERIOD_MAX)?;
    }
    check_duration("--tick", a.tick, ms(1), ms(10_000))?;
    check_duration("--window", a.window, ms(100), ms(60_000))?;
    if a.window < a.tick {
        bail!(
            "--window {} is shorter than --tick {}: the analyser would never get a full window",
            a.window.approx(),
            a.tick.approx()
        );
    }
    check_duration("--sampling", a.sampling, a.tick.max(ms(10)), ms(60_000))?;
    check_range("--spread", a.spread, 0.0, 10.0, false, "")?;
    check_range("--history", a.history as f64, 1.0, 10_000.0, false, " samples")?;
    check_range("--percentile", a.percentile, 0.0, 1.0, true, "")?;
    check_range(
        "--max-bandwidth",
        a.max_bandwidth.unwrap_or(0.9),
        0.0,
        1.0,
        true,
        " (a fraction of one CPU)",
    )?;
    if let Some(b) = a.bound {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
        check_range(
            "--bound",
            b,
            0.01,
            cpus,
            false,
            " CPUs (this machine has that many)",
        )?;
    }
    if let Some(c) = a.min_confidence {
        check_range("--min-confidence", c, 0.0, 1.0, false, "")?;
    }
    check_range(
        "--probe-wait",
        a.probe_wait,
        0.0,
        1.0,
        true,
        " (a share of the window)",
    )?;
    if let Some(d) = a.duration {
        if d < ms(1) {
            bail!("--duration {}: expected a duration of at least 1ms", d.approx());
        }
    }
    if let Some(d) = a.status_every {
        check_duration("--status-every", d, ms(10), Duration::from_secs(24 * 3600))?;
    }
    Ok(())
}

fn session_config(a: &ControlArgs) -> Result<SessionConfig> {
    validate(a)?;
    if let Some(d) = a.min_budget.filter(|d| d.0 < 1024) {
        bail!("--min-budget {d}: expected at least 1024ns (the kernel's smallest SCHED_DEADLINE runtime)");
    }
    let defaults = LegacyConfig::default();
    let legacy = LegacyConfig {
        tick_ns: a.tick.0,
        window_ns: a.window.0,
        sampling_ns: a.sampling.0,
        spread: a.spread,
        min_budget_ns: a.min_budget.map_or(defaults.min_budget_ns, |d| d.0),
        history: a.history,
        percentile: a.percentile,
        max_bandwidth: a.max_bandwidth.unwrap_or(defaults.max_bandwidth),
        bound: a.bound,
        reclaim: a.reclaim,
        min_confidence: a.min_confidence.unwrap_or(defaults.min_confidence),
        probe_wait: (!a.no_probe).then_some(a.probe_wait),
        compression: match a.compression {
            CompressionArg::Proportional => Compression::Proportional,
            CompressionArg::Weighted => Compression::Weighted,
            CompressionArg::Priority => Compression::PriorityOrdered,
        },
        ..defaults
    };
    legacy.validate().context("invalid controller options")?;
    Ok(SessionConfig {
        legacy,
        names: a.threads.clone(),
        known_period: a.period.map(|d| d.0),
        follow_new: !a.no_follow,
    })
}

pub(crate) fn start_guardian() -> Result<Guardian, LinuxError> {
    let exe: PathBuf = std::env::current_exe().map_err(|e| LinuxError::Io {
        path: "/proc/self/exe".into(),
        source: e,
    })?;
    let mut cmd = Command::new(exe);
    cmd.arg("guardian")
        .arg("--watch")
        .arg(std::process::id().to_string());
    if let Some(l) = ledger::Ledger::new(&ledger::dir()) {
        cmd.arg("--ledger").arg(&l.path);
    }
    Guardian::spawn(cmd)
}

/// The session with its guardian (restarted if it dies) and its ledger; the calling thread,
/// which runs the control loop, then takes `--rt-priority` (after the guardian and the program
/// are started, and with SCHED_RESET_ON_FORK, so that nothing pacer starts inherits it).
/// `traced`: `--trace` is on, and the trace shows the reservations pacer applies as reserved
/// bandwidth, so the session logs them.
fn start_session(
    pidfd: pacer_linux::procfs::Pidfd,
    cfg: SessionConfig,
    rt_priority: u8,
    traced: bool,
) -> Result<Session> {
    let guardian = start_guardian().context("starting the guardian process")?;
    let mut session = Session::new(pidfd, cfg, Some(guardian))?
        .with_guardian_respawn(Box::new(start_guardian))
        .with_ledger(&ledger::dir())?;
    if traced {
        session = session.with_reservation_log();
    }
    if rt_priority > 0 {
        pacer_linux::sched::set_policy(
            pacer_linux::sched::gettid(),
            pacer_model::Policy::Fifo {
                priority: rt_priority,
            },
            true,
        )
        .with_context(|| format!("setting pacer's own SCHED_FIFO priority {rt_priority} (--rt-priority)"))?;
    }
    Ok(session)
}

/// How the loop ended.
enum End {
    Exited(Option<std::process::ExitStatus>),
    Signal(i32),
    Duration,
    /// The guardian died and no new one could be started: everything was given back.
    Unguarded(String),
}

pub fn exec(args: ExecArgs) -> Result<u8> {
    let cfg = session_config(&args.control)?;
    // Blocks the termination signals for good: the trace's tracefs instance below is removed
    // on every way out of this function.
    let sigs = SignalFd::new(&signals::TERMINATING).context("setting up signal handling")?;
    let mut trace = args
        .trace
        .as_deref()
        .map(|p| ExecTrace::new(p, &args.command))
        .transpose()?;
    // Connect first: a daemon that is not there is an error before the program starts.
    let client = match args.control.daemon {
        true => Some(connect_daemon(&args.control)?),
        false => {
            control::preflight(cfg.known_period.is_none()).context("pacer exec")?;
            None
        }
    };
    let mut cmd = Command::new(&args.command[0]);
    cmd.args(&args.command[1..]);
    let mut child =
        signals::spawn_unblocked(&mut cmd).with_context(|| format!("cannot run {:?}", args.command[0]))?;
    let pidfd = control::open_process(child.id()).context("opening the new process")?;
    if let Some(t) = &mut trace {
        t.pid = child.id();
        if let Some(n) = t.follow(&pidfd) {
            eprintln!("pacer: {n}");
        }
    }
    let label = escape_control(&args.command.join(" "));
    let exited = || child.try_wait().ok().flatten();
    let end = match client {
        Some(c) => run_loop(
            Hosted::start(c, pidfd, &args.control)?,
            &sigs,
            &args.control,
            &label,
            exited,
            trace,
        )?,
        None => run_loop(
            start_session(pidfd, cfg, args.control.rt_priority, trace.is_some())?,
            &sigs,
            &args.control,
            &label,
            exited,
            trace,
        )?,
    };
    Ok(match end {
        End::Exited(status) => {
            let status = status.or_else(|| child.wait().ok());
            status.map_or(0, |s| {
                s.code().map_or(128 + s.signal().unwrap_or(0) as u8, |c| c as u8)
            })
        }
        End::Signal(s) => 128 + s as u8,
        End::Duration => 0,
        End::Unguarded(_) => 1,
    })
}

pub fn attach(args: AttachArgs) -> Result<u8> {
    let cfg = session_config(&args.control)?;
    let sigs = SignalFd::new(&signals::TERMINATING).context("setting up signal handling")?;
    let pidfd = control::open_process(args.pid).context("pacer attach")?;
    control::check_target(args.pid).context("pacer attach")?;
    let label = procfs::comm(args.pid, args.pid)
        .map(|s| escape_control(&s))
        .unwrap_or_default();
    let mut trace = match &args.trace {
        Some(p) => {
            let cmdline = procfs::cmdline(args.pid)
                .ok()
                .filter(|c| !c.is_empty())
                .unwrap_or_else(|| vec![label.clone()]);
            let mut t = ExecTrace::new(p, &cmdline)?;
            t.pid = args.pid;
            if let Some(n) = t.follow(&pidfd) {
                eprintln!("pacer: {n}");
            }
            Some(t)
        }
        None => None,
    };
    let end = if args.control.daemon {
        let hosted = Hosted::start(connect_daemon(&args.control)?, pidfd, &args.control)?;
        run_loop(hosted, &sigs, &args.control, &label, || None, trace.take())?
    } else {
        control::preflight(cfg.known_period.is_none()).context("pacer attach")?;
        let s = start_session(pidfd, cfg, args.control.rt_priority, trace.is_some())?;
        run_loop(s, &sigs, &args.control, &label, || None, trace.take())?
    };
    Ok(match end {
        End::Signal(s) => 128 + s as u8,
        End::Unguarded(_) => 1,
        _ => 0,
    })
}

/// `pacer guardian` (hidden): reads the protocol on stdin; see `pacer_linux::guardian`.
pub fn guardian(args: GuardianArgs) -> Result<u8> {
    // A pidfd taken while pacer runs; if pacer is already gone, the pipe's end of file says so.
    let watch = args.watch.and_then(|p| pacer_linux::procfs::Pidfd::open(p).ok());
    let report = guardian::serve_watching(std::io::stdin().as_raw_fd(), watch.as_ref())
        .context("guardian: reading from pacer")?;
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
    if !report.clean && report.failed.is_empty() {
        // Only pacer's own ledger: the file must name the process this guardian watched.
        if let (Some(path), Some(pid)) = (&args.ledger, args.watch) {
            let ours = std::fs::read_to_string(path)
                .ok()
                .and_then(|t| ledger::Ledger::parse(path, &t))
                .filter(|l| l.pacer.pid == pid);
            if let Some(l) = ours {
                let _ = l.remove();
            }
        }
    }
    Ok(if report.failed.is_empty() { 0 } else { 1 })
}

/// What [`run_loop`] drives: a session pacer runs itself, or one `pacer daemon` runs for it.
trait Controlled {
    fn tick(&mut self);
    fn take_notices(&mut self) -> Vec<String>;
    fn fatal(&self) -> Option<&str>;
    fn status(&self) -> SessionStatus;
    fn tick_ns(&self) -> u64;
    fn pidfd(&self) -> &procfs::Pidfd;
    fn alive(&self) -> bool;
    fn release(&mut self) -> control::ReleaseReport;
    /// The reservations applied so far, for `--trace` (none where pacer does not apply them
    /// itself: a daemon's session).
    fn take_reservations(&mut self) -> Vec<pacer_linux::kernel::ReservationChange> {
        Vec::new()
    }
}

impl Controlled for Session {
    fn tick(&mut self) {
        Session::tick(self)
    }
    fn take_reservations(&mut self) -> Vec<pacer_linux::kernel::ReservationChange> {
        Session::take_reservations(self)
    }
    fn take_notices(&mut self) -> Vec<String> {
        Session::take_notices(self)
    }
    fn fatal(&self) -> Option<&str> {
        Session::fatal(self)
    }
    fn status(&self) -> SessionStatus {
        Session::status(self)
    }
    fn tick_ns(&self) -> u64 {
        Session::tick_ns(self)
    }
    fn pidfd(&self) -> &procfs::Pidfd {
        Session::pidfd(self)
    }
    fn alive(&self) -> bool {
        Session::alive(self)
    }
    fn release(&mut self) -> control::ReleaseReport {
        Session::release(self)
    }
}

fn connect_daemon(a: &ControlArgs) -> Result<pacer::Client> {
    let c = match &a.socket {
        Some(p) => pacer::Client::connect_to(p),
        None => pacer::Client::connect(),
    };
    // The client's error already says where it looked and what to check.
    c.context("--daemon")
}

/// A session `pacer daemon` runs ([`pacer_daemon::protocol::Request::Attach`]): this pacer only
/// watches it, reading the daemon's status once per tick. The daemon releases the threads when
/// the session is closed, or when this pacer's connection closes, even if it is killed.
struct Hosted {
    client: pacer::Client,
    id: u32,
    pidfd: procfs::Pidfd,
    last: SessionStatus,
    notices: Vec<String>,
    fatal: Option<String>,
    closed: bool,
}

impl Hosted {
    fn start(client: pacer::Client, pidfd: procfs::Pidfd, a: &ControlArgs) -> Result<Hosted> {
        let spec = pacer::AttachSpec {
            pid: pidfd.pid(),
            names: a.threads.clone(),
            period_ns: a.period.map(|d| d.0),
            follow_new: !a.no_follow,
            max_bandwidth: a.max_bandwidth,
        };
        let id = client
            .attach(&spec)
            .with_context(|| format!("pacer daemon refused to control PID {}", spec.pid))?;
        let pid = pidfd.pid();
        let mut h = Hosted {
            client,
            id,
            pidfd,
            last: SessionStatus {
                pid,
                elapsed_ns: 0,
                reserved_bandwidth: 0.0,
                bound: 0.0,
                allocation: None,
                lost_wakeups: 0,
                exited_threads: 0,
                threads: Vec::new(),
            },
            notices: vec![format!("pacer daemon runs this program's session ({id})")],
            fatal: None,
            closed: false,
        };
        h.tick();
        Ok(h)
    }
}

impl Controlled for Hosted {
    fn tick(&mut self) {
        let fetched = self
            .client
            .status_json()
            .map_err(|e| e.to_string())
            .and_then(|j| {
                let v: serde_json::Value = serde_json::from_str(&j).map_err(|e| e.to_string())?;
                let ours = v["sessions"]
                    .as_array()
                    .and_then(|a| a.iter().find(|s| s["id"] == self.id))
                    .cloned();
                match ours {
                    // Closed by the daemon: the process exited, or the daemon lost its guardian.
                    None => Ok(None),
                    Some(s) => serde_json::from_value::<SessionStatus>(s["exec"].clone())
                        .map(Some)
                        .map_err(|e| format!("unreadable session status: {e}")),
                }
            });
        match fetched {
            Ok(Some(st)) => self.last = st,
            Ok(None) if self.alive() => {
                self.fatal = Some(format!("pacer daemon closed session {}", self.id));
            }
            Ok(None) => {}
            Err(e) => self.fatal = Some(format!("lost pacer daemon: {e}")),
        }
    }
    fn take_notices(&mut self) -> Vec<String> {
        std::mem::take(&mut self.notices)
    }
    fn fatal(&self) -> Option<&str> {
        self.fatal.as_deref()
    }
    fn status(&self) -> SessionStatus {
        self.last.clone()
    }
    fn tick_ns(&self) -> u64 {
        100_000_000
    }
    fn pidfd(&self) -> &procfs::Pidfd {
        &self.pidfd
    }
    fn alive(&self) -> bool {
        self.pidfd.is_alive().unwrap_or(false)
    }
    /// Closes the session: the daemon restores the threads it holds.
    fn release(&mut self) -> control::ReleaseReport {
        let mut report = control::ReleaseReport::default();
        if std::mem::replace(&mut self.closed, true) {
            return report;
        }
        let held: Vec<pacer_linux::sched::Tid> = self
            .last
            .threads
            .iter()
            .filter(|t| t.control.as_ref().is_some_and(|c| c.phase != Phase::Gone))
            .map(|t| t.tid)
            .collect();
        match self.client.close_session(self.id) {
            Ok(()) => report.restored = held,
            // Closed already (the program exited): the daemon gave the threads back then.
            Err(pacer::Error::Refused(e)) if e.code == pacer_daemon::protocol::ErrorCode::NoSuchSession => {
                report.restored = held
            }
            Err(e) => report.failed.extend(
                held.into_iter()
                    .map(|t| (t, format!("closing the daemon session: {e}"))),
            ),
        }
        report
    }
}

fn run_loop<S: Controlled>(
    mut session: S,
    sigs: &SignalFd,
    a: &ControlArgs,
    label: &str,
    mut exited: impl FnMut() -> Option<std::process::ExitStatus>,
    mut trace: Option<ExecTrace>,
) -> Result<End> {
    let tty = std::io::stderr().is_terminal() && !a.json && !a.quiet;
    let status_every = a.status_every.map(|d| d.0).unwrap_or(1_000_000_000).max(1);
    let periodic_output = !a.quiet && (tty || a.json || a.status_every.is_some());
    let start = std::time::Instant::now();
    let tick = session.tick_ns();
    let mut next_status = status_every;
    let mut drawn_lines = 0usize;
    let end = loop {
        session.tick();
        let traced = trace.as_mut().and_then(|t| t.follow(session.pidfd()));
        for n in session.take_notices().into_iter().chain(traced) {
            if a.json {
                print_json_line(json!({"type": "notice", "message": n}))?;
            } else {
                if tty && drawn_lines > 0 {
                    // Keep the notice above the live table.
                    eprint!("\x1b[{drawn_lines}A\x1b[J");
                    drawn_lines = 0;
                }
                eprintln!("pacer: {n}");
            }
        }
        if let Some(why) = session.fatal() {
            break End::Unguarded(why.to_string());
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
    let reservations = session.take_reservations();
    // After the release: the threads have their policies back whatever writing the trace does.
    let trace = trace.map(|t| t.finish(&reservations)).transpose()?;
    let why = match &end {
        End::Exited(_) => "the program exited".to_string(),
        End::Signal(s) => format!("signal {s} received"),
        End::Duration => "--duration elapsed".to_string(),
        End::Unguarded(why) => why.clone(),
    };
    if a.json {
        let mut line = json!({"type": "exit", "reason": why, "status": last, "release": report});
        if let Some(t) = &trace {
            line["trace"] = serde_json::to_value(t)?;
        }
        print_json_line(line)?;
    } else {
        if tty && drawn_lines > 0 {
            eprint!("\x1b[{drawn_lines}A\x1b[J");
        }
        eprint!("{}", render(&last, label));
        eprintln!(
            "pacer: {why}; restored the original policy of {} thread(s){}",
            report.restored.len(),
            if matches!(end, End::Exited(_)) || last.threads.is_empty() {
                String::new()
            } else {
                format!("; PID {} keeps running", last.pid)
            }
        );
    }
    for (tid, e) in &report.failed {
        eprintln!("pacer: warning: thread {tid}: could not restore its policy: {e} (the guardian retries)");
    }
    if let (Some(t), false) = (&trace, a.json) {
        eprintln!(
            "pacer: trace {}: {} switches, {} wake-ups of {} thread(s) ({}), {} events lost",
            escape_control(&t.file),
            t.written.switches,
            t.written.wakings,
            t.threads,
            crate::sim::bytes(t.bytes),
            t.lost_events
        );
    }
    Ok(end)
}

/// `pacer exec --trace`: the program's threads recorded by `pacer_linux::sched_trace`, written
/// as `pacer run --trace` writes a run's (crate::run_trace). The tracer exists from before the
/// program starts; its threads join as they are seen (the filter names thread ids, which the
/// kernel gives out only as threads start), the main thread right after the start, the others
/// at the next tick.
struct ExecTrace {
    tracer: SchedTracer,
    files: Outputs,
    file: Option<std::fs::File>,
    path: PathBuf,
    /// The program's PID (0 until started) and command line.
    pid: u32,
    cmdline: String,
    /// Threads added, in the order seen, with their name then.
    threads: Vec<(u32, String)>,
    /// Why following stopped (a refused filter), once reported.
    stopped: Option<String>,
}

/// What `--trace` wrote (the `trace` of the exit line).
#[derive(serde::Serialize)]
struct ExecTraceInfo {
    file: String,
    threads: usize,
    #[serde(flatten)]
    written: crate::run_trace::Written,
    lost_events: u64,
    bytes: u64,
}

impl ExecTrace {
    fn new(path: &std::path::Path, command: &[String]) -> Result<ExecTrace> {
        if crate::sim::TraceFormat::of(None, path) == crate::sim::TraceFormat::Json {
            bail!(
                "--trace {}: `pacer exec` writes Perfetto's protobuf format only; name the file \
                 e.g. prog.pftrace",
                path.display()
            );
        }
        let mut files = Outputs::new(Stdout::Busy);
        let slot = files.file("--trace", path)?;
        if !pacer_linux::run::is_root() {
            bail!(
                "--trace records the kernel's scheduling events through tracefs, which needs \
                 root: run `sudo pacer exec --trace FILE -- …`"
            );
        }
        let tracer = SchedTracer::new().context("--trace: setting up the kernel recording")?;
        let file = Some(files.open(slot)?);
        Ok(ExecTrace {
            tracer,
            files,
            file,
            path: path.to_path_buf(),
            pid: 0,
            cmdline: command.join(" "),
            threads: Vec::new(),
            stopped: None,
        })
    }

    /// Adds the program's threads not traced yet; a notice when that fails (once: the
    /// recording then keeps the threads it has).
    fn follow(&mut self, pidfd: &procfs::Pidfd) -> Option<String> {
        if self.stopped.is_some() {
            return None;
        }
        let tids = pidfd.threads().ok()?;
        let new: Vec<u32> = tids
            .into_iter()
            .filter(|t| !self.threads.iter().any(|(s, _)| s == t))
            .collect();
        if new.is_empty() {
            return None;
        }
        if let Err(e) = self.tracer.add(&new) {
            let why = format!("--trace: no longer following new threads: {e}");
            self.stopped = Some(why.clone());
            return Some(why);
        }
        for t in new {
            let name = pidfd.comm(t).unwrap_or_else(|_| format!("tid {t}"));
            self.threads.push((t, name));
        }
        None
    }

    /// Stops the recording, removes the tracefs instance, writes and commits the file.
    fn finish(mut self, reservations: &[pacer_linux::kernel::ReservationChange]) -> Result<ExecTraceInfo> {
        let rec = self
            .tracer
            .finish()
            .context("--trace: reading the kernel's records")?;
        drop(self.tracer);
        let lost = rec.lost();
        if lost > 0 {
            eprintln!(
                "pacer: warning: --trace: the kernel lost {lost} scheduling events: its ring \
                 buffer filled before pacer read it; the trace has gaps there"
            );
        }
        let threads: Vec<(u32, &str)> = self.threads.iter().map(|(t, n)| (*t, n.as_str())).collect();
        let process = crate::run_trace::Process {
            pid: self.pid as i32,
            ppid: std::process::id() as i32,
            cmdline: &self.cmdline,
            threads: &threads,
        };
        let cpus = rec.lost_per_cpu.iter().map(|(c, _)| c + 1).max().unwrap_or(1);
        let file = self.file.take().context("--trace: no file")?;
        let (file, written) = crate::run_trace::write_perfetto(
            file,
            &rec,
            &process,
            &pacer_linux::sys::Uname::this_machine(),
            cpus,
            &[],
            0,
            reservations,
        )
        .with_context(|| format!("{}: writing the trace", self.path.display()))?;
        if written.unrecorded_switch_ins > 0 {
            eprintln!(
                "pacer: warning: --trace: {} times a thread left a CPU the kernel did not record it \
                 entering (seen on VMs for switches away from the idle task; docs/linux.md)",
                written.unrecorded_switch_ins
            );
        }
        let bytes = file.metadata().map(|m| m.len()).unwrap_or(0);
        drop(file);
        self.files.commit()?;
        Ok(ExecTraceInfo {
            file: self.path.display().to_string(),
            threads: self.threads.len(),
            written,
            lost_events: lost,
            bytes,
        })
    }
}

/// One line of `pacer exec|attach --json` (JSON Lines, schema `pacer.exec/1` on every line, so
/// a consumer that reads one line alone knows what it holds).
fn print_json_line(mut v: serde_json::Value) -> Result<()> {
    if let Some(m) = v.as_object_mut() {
        m.insert("schema".into(), serde_json::Value::from("pacer.exec/1"));
    }
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
                    Phase::Probing => "probing",
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
                    th.name.clone(), // Table::push escapes it
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
                th.name.clone(), // Table::push escapes it
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
