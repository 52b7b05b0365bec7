//! `pacer runtime …`: the real-time component runtime (rtdroid-android-timeliness.txt). Today
//! `check` (validation before start, `pacer_runtime::validate`); `run` comes next. The checks
//! themselves live in `pacer_runtime`; this file parses arguments and prints.

use std::path::PathBuf;

use anyhow::{Context, Result};
use pacer_model::Duration;
use pacer_runtime::manifest::Manifest;
use pacer_runtime::validate::{self, Machine, Report};

use crate::table::Table;

#[derive(clap::Args)]
#[command(after_help = "Examples:\n  \
pacer runtime check examples/runtime/app.toml\n  \
pacer runtime check examples/runtime/over-budget.toml --json\n\n\
An application is a manifest of real-time components (periodic tasks, services, receivers), \
channels and audio sessions: docs/formats/manifest.md, docs/runtime.md. `check` validates it \
before anything starts; `run` is planned.")]
pub struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::Subcommand)]
enum Command {
    /// Validate an application manifest before anything starts: schedulability, memory,
    /// channel capacities, audio sessions.
    Check(CheckArgs),
}

#[derive(clap::Args)]
#[command(after_help = "Examples:\n  \
pacer runtime check examples/runtime/app.toml\n  \
pacer runtime check examples/runtime/unschedulable.toml          # refused, with the reason\n  \
pacer runtime check examples/runtime/app.toml --json | jq .verdict\n  \
pacer runtime check app.toml --cpus 4                           # for a machine with 4 CPUs\n\n\
SCHED_FIFO components: response-time analysis per CPU (exact for a component pinned to one CPU \
with only SCHED_FIFO neighbours pinned there; otherwise conservative with carry-in, and a note \
says so). SCHED_DEADLINE components: the kernel's admission per root domain (each distinct CPU \
set; sets must be equal or disjoint) and an EDF test (QPA on one CPU, GFB on several). Then the \
real-time load per CPU against the kernel's rt limit, memory (persistent + per-release + channel \
queues + audio bursts) against each component's and the application's limit, each channel's \
worst-case backlog against its capacity, and each audio session's burst against its \
component's period. The machine is this one (online CPUs, the kernel's default rt and fair-server \
settings) unless --cpus is given.\n\n\
Exit status: 0 = valid; 1 = invalid (every violation is listed with its numbers) or the manifest \
cannot be read (the error names the file, the key, what was expected and what was found).\n\
Format: docs/formats/manifest.md; more: docs/runtime.md.")]
pub struct CheckArgs {
    /// The application manifest (TOML).
    file: PathBuf,
    /// Check for a machine with this many CPUs (default: this machine's).
    #[arg(long, value_parser = crate::count_in::<1, 4096>, value_name = "N")]
    cpus: Option<usize>,
    /// Machine-readable JSON on standard output (schema `pacer.runtime.check/1`).
    #[arg(long)]
    json: bool,
}

pub fn run(a: Args) -> Result<u8> {
    match a.command {
        Command::Check(c) => check(c),
    }
}

fn check(a: CheckArgs) -> Result<u8> {
    let manifest = Manifest::from_file(&a.file)?;
    let cpus = match a.cpus {
        Some(n) => n,
        None => pacer_linux::sys::online_cpus()
            .iter()
            .max()
            .map(|&c| c + 1)
            .context("no online CPU found in /sys/devices/system/cpu/online")?,
    };
    let report = validate::check(&manifest, &Machine::linux_default(cpus));
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", text(&report));
    }
    Ok(if report.is_valid() { 0 } else { 1 })
}

fn dur(ns: u64) -> String {
    Duration(ns).approx()
}

fn opt(v: Option<u64>, f: impl Fn(u64) -> String) -> String {
    v.map_or_else(|| "—".to_string(), f)
}

fn yes(ok: bool) -> String {
    if ok { "ok" } else { "FAIL" }.to_string()
}

fn cpus(c: &[usize]) -> String {
    c.iter().map(usize::to_string).collect::<Vec<_>>().join(",")
}

fn text(r: &Report) -> String {
    let mut s = format!(
        "application {} on {} CPUs\n\ncomponents\n",
        pacer_model::text::escape_control(&r.app),
        r.machine.cpus
    );
    let mut t = Table::new(&[
        "component",
        "kind",
        "policy",
        "cpus",
        "period",
        "deadline",
        "cost",
        "util",
        "response",
        "test",
        "verdict",
    ]);
    for c in &r.components {
        let policy = match c.priority {
            Some(p) => format!("fifo {p}"),
            None => c.policy.to_string(),
        };
        t.push(vec![
            c.name.clone(),
            c.kind.to_string(),
            policy,
            cpus(&c.cpus),
            dur(c.period_ns),
            dur(c.deadline_ns),
            dur(c.cost_ns),
            format!("{:.3}", c.utilization),
            opt(c.response_ns, |v| format!("≤ {}", dur(v))),
            c.test.to_string(),
            yes(c.ok),
        ]);
    }
    s += &t.render();
    if !r.domains.is_empty() {
        s += "\nSCHED_DEADLINE root domains\n";
        let mut t = Table::new(&[
            "cpus",
            "components",
            "bandwidth",
            "admits",
            "admission",
            "edf test",
            "edf",
        ]);
        for d in &r.domains {
            let share = |bw: u64| {
                format!(
                    "{:.4}",
                    bw as f64 / (1u64 << pacer_model::reservation::BW_SHIFT) as f64
                )
            };
            t.push(vec![
                cpus(&d.cpus),
                d.components.join(","),
                share(d.requested_bw),
                opt(d.available_bw, share),
                yes(d.admitted),
                d.edf_test.to_string(),
                yes(d.edf_ok),
            ]);
        }
        s += &t.render();
    }
    s += "\nreal-time load per CPU\n";
    let mut t = Table::new(&["cpu", "load", "limit", "check"]);
    for c in &r.cpu_load {
        t.push(vec![
            c.cpu.to_string(),
            format!("{:.3}", c.utilization),
            format!("{:.3}", c.limit),
            yes(c.ok),
        ]);
    }
    s += &t.render();
    s += "\nmemory (bytes)\n";
    let mut t = Table::new(&[
        "component",
        "persistent",
        "per release",
        "channels",
        "audio",
        "total",
        "limit",
        "check",
    ]);
    for c in &r.memory.components {
        t.push(vec![
            c.name.clone(),
            c.persistent_bytes.to_string(),
            format!("{} × {}", c.per_release_bytes, c.releases_in_flight),
            c.channel_bytes.to_string(),
            c.audio_bytes.to_string(),
            c.total_bytes.to_string(),
            opt(c.limit_bytes, |v| v.to_string()),
            yes(c.ok),
        ]);
    }
    t.push(vec![
        "(application)".into(),
        String::new(),
        String::new(),
        String::new(),
        String::new(),
        r.memory.total_bytes.to_string(),
        opt(r.memory.limit_bytes, |v| v.to_string()),
        yes(r.memory.ok),
    ]);
    s += &t.render();
    if !r.channels.is_empty() {
        s += "\nchannels\n";
        let mut t = Table::new(&[
            "channel",
            "receiver",
            "window",
            "messages",
            "capacity",
            "pool bytes",
            "overflow",
            "check",
        ]);
        for c in &r.channels {
            t.push(vec![
                c.name.clone(),
                c.receiver.clone(),
                dur(c.window_ns),
                c.messages.to_string(),
                c.capacity.to_string(),
                c.pool_bytes.to_string(),
                c.overflow.to_string(),
                yes(c.ok),
            ]);
        }
        s += &t.render();
    }
    if !r.audio.is_empty() {
        s += "\naudio sessions\n";
        let mut t = Table::new(&[
            "session",
            "component",
            "direction",
            "rate",
            "channels",
            "burst",
            "period",
            "check",
        ]);
        for a in &r.audio {
            t.push(vec![
                a.name.clone(),
                a.component.clone(),
                a.direction.to_string(),
                a.rate.to_string(),
                a.channels.to_string(),
                format!("{} frames = {}", a.burst_frames, dur(a.burst_ns)),
                dur(a.period_ns),
                yes(a.ok),
            ]);
        }
        s += &t.render();
    }
    let esc = pacer_model::text::escape_control;
    if !r.notes.is_empty() {
        s += "\nnotes\n";
        for n in &r.notes {
            s += &format!("  - {}\n", esc(n));
        }
    }
    if r.is_valid() {
        s += "\nverdict: valid\n";
    } else {
        s += &format!("\nverdict: INVALID ({} violation(s))\n", r.violations.len());
        for v in &r.violations {
            s += &format!("  - {}\n", esc(&v.to_string()));
        }
    }
    s
}
