//! `pacer daemon` (pacerd, the service cooperating applications talk to) and `pacer status`.
//! The protocol, quotas and sessions live in `pacer_daemon`; this file parses options, sets the
//! daemon up (signals, its own priority, the guardian, the socket) and prints status.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args as ClapArgs;
use pacer_daemon::{Config, Listener, Server, Service};
use pacer_linux::signals::{self, SignalFd};
use pacer_model::text::escape_control;
use pacer_model::Policy;

use crate::table::Table;

#[derive(ClapArgs, Debug)]
#[command(
    about = "Serve adaptive SCHED_DEADLINE reservations to applications (pacerd)",
    long_about = "Serve adaptive SCHED_DEADLINE reservations to applications linked with libpacer \
(pacer.h) or the Rust client: they create sessions over their own threads, send workUnits hints \
and job begin/end, and the daemon sizes each reservation (proactive or job-based controller) \
under one supervisor for all clients. Clients are authenticated by their socket credentials \
(SO_PEERCRED) and limited by per-user and per-group quotas. A client that exits or closes its \
socket loses its reservations at once; if the daemon itself is killed, its guardian process \
restores every thread.\n\nRuns in the foreground until SIGINT/SIGTERM/SIGHUP, then gives every \
thread its original scheduling back. Needs root.",
    after_help = "Examples:\n  pacer daemon\n  pacer daemon --config /etc/pacer/pacerd.toml\n  \
pacer daemon --socket /tmp/pacer.sock --check\n\nConfiguration: docs/formats/daemon-config.md; \
protocol: docs/formats/protocol.md; client API: docs/client.md; systemd unit: dist/pacerd.service."
)]
pub struct Args {
    /// Configuration file (TOML); without it the built-in defaults apply.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Socket to listen on (overrides the file's `socket`; default /run/pacer/pacer.sock).
    #[arg(long, value_name = "PATH")]
    socket: Option<PathBuf>,
    /// Check the configuration, print the effective settings and exit.
    #[arg(long)]
    check: bool,
    /// With --check: print the settings as JSON.
    #[arg(long)]
    json: bool,
}

fn load(args: &Args) -> Result<Config> {
    let mut cfg = match &args.config {
        Some(p) => {
            let text = std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?;
            Config::parse(&p.display().to_string(), &text)?
        }
        None => Config::default(),
    };
    if let Some(s) = &args.socket {
        cfg.socket = s.clone();
    }
    Ok(cfg)
}

fn bound_text(cfg: &Config) -> String {
    cfg.bound.map_or("the kernel's admission limit".to_string(), |b| {
        format!("{b} CPUs")
    })
}

fn priority_text(cfg: &Config) -> String {
    match cfg.rt_priority {
        0 => "SCHED_OTHER".to_string(),
        p => format!("SCHED_FIFO {p}"),
    }
}

pub fn run(args: Args) -> Result<u8> {
    let cfg = load(&args)?;
    if args.check {
        if args.json {
            println!("{}", crate::output::json_text("pacer.daemon.config/1", &cfg)?);
        } else {
            let q = cfg.quota_for(65534, None, &[]);
            println!(
                "configuration OK: socket {} (mode {}), bound {}, daemon priority {}, unprivileged default: {} CPU in at most {} sessions, periods ≥ {} ns, {} CPU per thread",
                cfg.socket.display(),
                cfg.socket_mode,
                bound_text(&cfg),
                priority_text(&cfg),
                q.bandwidth.unwrap_or(f64::INFINITY),
                q.sessions.unwrap_or(u32::MAX),
                q.min_period_ns,
                q.thread_bandwidth
            );
        }
        return Ok(0);
    }
    crate::require_root(
        "pacer daemon",
        "it sets SCHED_DEADLINE on other users' threads and reads their credentials",
    )?;
    // Before any thread exists, so none inherits an unblocked mask.
    let sigs = SignalFd::new(&signals::TERMINATING).context("setting up signal handling")?;
    pacer_linux::control::preflight(false).context("pacer daemon")?;
    if cfg.rt_priority > 0 {
        // RESET_ON_FORK: the guardian and anything else started later run SCHED_OTHER.
        let prio = u8::try_from(cfg.rt_priority).unwrap_or(99);
        pacer_linux::sched::set_policy(
            pacer_linux::sched::gettid(),
            Policy::Fifo { priority: prio },
            true,
        )
        .context("setting the daemon's own SCHED_FIFO priority (rt_priority)")?;
    }
    let guardian = crate::exec::start_guardian().context("starting the guardian process")?;
    let service = Service::new(
        cfg.clone(),
        Some(guardian),
        Some(Box::new(crate::exec::start_guardian)),
    );
    let listener = Listener::bind(&cfg.socket, cfg.mode().unwrap_or(0o666))?;
    eprintln!(
        "pacer daemon: listening on {} (PID {}, bound {}, {}); stop with Ctrl-C or SIGTERM",
        cfg.socket.display(),
        std::process::id(),
        bound_text(&cfg),
        priority_text(&cfg)
    );
    let mut server = Server::new(service, Some(listener));
    use std::os::fd::AsRawFd;
    server.run(Some(sigs.as_raw_fd()), |n| {
        eprintln!("pacer daemon: {}", escape_control(n))
    })?;
    if let Some(sig) = sigs.next() {
        eprintln!("pacer daemon: signal {sig}: every session released; exiting");
    }
    Ok(0)
}

#[derive(ClapArgs, Debug)]
#[command(
    about = "Show the daemon's sessions, threads, bandwidths, quotas and refusals",
    long_about = "Show the state of `pacer daemon`: its bound and the bandwidth reserved now, \
each user's quota and what it holds, each session's threads with their budget, reserved and \
used bandwidth, and the most recent refused requests. Root sees every user; others see their \
own sessions.",
    after_help = "Examples:\n  pacer status\n  pacer status --json\n  PACER_SOCKET=/tmp/pacer.sock pacer status"
)]
pub struct StatusArgs {
    /// The daemon's socket (default: $PACER_SOCKET, else /run/pacer/pacer.sock).
    #[arg(long, value_name = "PATH")]
    socket: Option<PathBuf>,
    /// Print the status as JSON.
    #[arg(long)]
    json: bool,
}

pub fn status(args: StatusArgs) -> Result<u8> {
    let path = args.socket.unwrap_or_else(pacer::default_socket);
    let client = pacer::Client::connect_to(&path)?;
    let json = client.status_json()?;
    let v: serde_json::Value = serde_json::from_str(&json).context("the daemon's status")?;
    if args.json {
        println!("{}", crate::output::json_text("pacer.status/1", &v)?);
        return Ok(0);
    }
    let f = |x: &serde_json::Value| x.as_f64().map_or("-".to_string(), |b| format!("{b:.3}"));
    println!(
        "pacer daemon PID {} (protocol {}), up {:.1} s: {} connection(s), reserved {} of {} CPUs, guardian {}",
        v["pid"],
        v["version"],
        v["uptime_ns"].as_f64().unwrap_or(0.0) / 1e9,
        v["connections"],
        f(&v["reserved_bandwidth"]),
        f(&v["bound"]),
        v["guardian"].as_u64().map_or("none".to_string(), |p| format!("PID {p}"))
    );
    let mut users = Table::new(&[
        "uid",
        "user",
        "limits",
        "quota CPU",
        "held CPU",
        "sessions",
        "max sessions",
        "min period",
    ]);
    for u in v["users"].as_array().into_iter().flatten() {
        let q = &u["quota"];
        users.push(vec![
            u["uid"].to_string(),
            u["name"].as_str().unwrap_or("-").to_string(),
            q["source"].as_str().unwrap_or("-").to_string(),
            q["bandwidth"]
                .as_f64()
                .map_or("unlimited".into(), |b| format!("{b:.3}")),
            f(&u["held_bandwidth"]),
            u["sessions"].to_string(),
            q["sessions"]
                .as_u64()
                .map_or("unlimited".into(), |s| s.to_string()),
            format!("{:.3} ms", q["min_period_ns"].as_f64().unwrap_or(0.0) / 1e6),
        ]);
    }
    println!("\n{}", users.render());
    let mut t = Table::new(&[
        "session",
        "pid",
        "uid",
        "controller",
        "period",
        "thread",
        "budget",
        "reserved",
        "used",
        "jobs",
        "hints",
    ]);
    for s in v["sessions"].as_array().into_iter().flatten() {
        for th in s["threads"].as_array().into_iter().flatten() {
            t.push(vec![
                s["id"].to_string(),
                s["pid"].to_string(),
                s["uid"].to_string(),
                s["controller"].as_str().unwrap_or("-").to_lowercase(),
                th["period_ns"]
                    .as_f64()
                    .map_or("-".into(), |p| format!("{:.3} ms", p / 1e6)),
                th["tid"].to_string(),
                th["budget_ns"]
                    .as_f64()
                    .map_or("-".into(), |q| format!("{:.3} ms", q / 1e6)),
                f(&th["reserved_bandwidth"]),
                f(&th["used_bandwidth"]),
                s["jobs"].to_string(),
                s["hints"].to_string(),
            ]);
        }
    }
    if v["sessions"].as_array().is_none_or(|a| a.is_empty()) {
        println!("no sessions");
    } else {
        println!("{}", t.render());
    }
    let refusals = v["refusals"].as_array().cloned().unwrap_or_default();
    if !refusals.is_empty() {
        println!("recent refusals:");
        for r in refusals {
            println!(
                "  pid {} uid {}: {}",
                r["pid"],
                r["uid"],
                escape_control(r["message"].as_str().unwrap_or(""))
            );
        }
    }
    Ok(0)
}
