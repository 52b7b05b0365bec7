//! `pacer runtime …`: the real-time component runtime (rtdroid-android-timeliness.txt): `check`
//! (validation before start, `pacer_runtime::validate`) and `run` (the executor,
//! `pacer_runtime::exec`, with optional background load from `pacer_experiments::load`). The
//! checks and the executor live in `pacer_runtime`; this file parses arguments and prints.

use std::path::PathBuf;

use std::io::IsTerminal;

use anyhow::{bail, Context, Result};
use pacer_model::Duration;
use pacer_runtime::manifest::Manifest;
use pacer_runtime::validate::{self, Machine, Report};

use crate::output::{Outputs, Stdout};
use crate::table::Table;

#[derive(clap::Args)]
#[command(after_help = "Examples:\n  \
pacer runtime check examples/runtime/app.toml\n  \
pacer runtime check examples/runtime/over-budget.toml --json\n\n\
An application is a manifest of real-time components (periodic tasks, services, receivers), \
channels and audio sessions: docs/formats/manifest.md, docs/runtime.md. `check` validates it \
before anything starts; `run` validates it, then runs it on real-time threads and reports \
release jitter, misses, memory and channel delivery per component.")]
pub struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::Subcommand)]
enum Command {
    /// Validate an application manifest before anything starts: schedulability, memory,
    /// channel capacities, audio sessions.
    Check(CheckArgs),
    /// Validate, then run an application: one real-time thread per component, releases
    /// recorded (jobs CSV), jitter, misses, memory and channel latency reported.
    Run(RunArgs),
}

#[derive(clap::Args)]
#[command(after_help = "Examples:\n  \
sudo pacer runtime run examples/runtime/app.toml                       # 10 s, report on stdout\n  \
sudo pacer runtime run examples/runtime/app.toml --hogs 2 --mem-hogs 1 --jobs rt.csv\n  \
pacer runtime run examples/runtime/app.toml --plain --jobs plain.csv   # same code, plain threads\n  \
pacer compare plain.csv rt.csv --report cmp.html                      # side by side\n\n\
The manifest is validated first, exactly as `pacer runtime check` does; an invalid application is \
refused before any thread starts (exit 1, every violation listed). Each component then gets its \
own thread, set up once before the first release: memory locked (mlockall), idle CPUs kept \
polling (--cpu-latency), stack prefaulted, \
pinned to its `cpus`, SCHED_FIFO at its `priority` or SCHED_DEADLINE with its `reservation` \
(root or CAP_SYS_NICE), its per-release arena allocated. Periodic components are released every \
period on an absolute timer; services and receivers when a message is pending on their first \
input channel, at most once per period. A component without application code (always, from the \
command line) runs the built-in one: it reads every pending input message, uses its per-release \
memory, runs its `work` as a calibrated busy loop and sends its messages per release. \
--plain runs the same on ordinary SCHED_OTHER threads, the baseline of RTDroid's comparison.\n\n\
Stops after --duration, or at Ctrl-C / SIGTERM / SIGHUP: every component finishes its release \
and puts its own policy and affinity back.\n\n\
Exit status: 0 = ran with no deadline miss; 2 = ran, with misses; 1 = refused or failed; \
128 + N = stopped by signal N before --duration (the report is still complete). \
More: docs/runtime.md.")]
pub struct RunArgs {
    /// The application manifest (TOML).
    file: PathBuf,
    /// How long to run (`0s`: until Ctrl-C).
    #[arg(long, value_parser = crate::analyze::parse_duration, default_value = "10s")]
    duration: Duration,
    /// Run on plain SCHED_OTHER threads: no policies, no pinning, no memory locking.
    #[arg(long)]
    plain: bool,
    /// One CSV row per release (docs/formats/jobs-csv.md): task = component, release, start,
    /// finish, deadline, CPU time, preemptions, CPU. `pacer compare` reads it. A name ending in
    /// `.parquet` writes the same columns as Parquet.
    #[arg(long, value_name = "FILE")]
    jobs: Option<PathBuf>,
    /// Background load: SCHED_OTHER busy threads.
    #[arg(long, default_value_t = 0, value_parser = crate::count_in::<0, 256>, value_name = "N")]
    hogs: usize,
    /// Background load: SCHED_OTHER threads streaming through a 64 MiB buffer each (memory and
    /// cache pressure).
    #[arg(long, default_value_t = 0, value_parser = crate::count_in::<0, 256>, value_name = "N")]
    mem_hogs: usize,
    /// Background load: periodic SCHED_FIFO noise taking this share of a CPU (e.g. 0.3).
    #[arg(long, value_name = "SHARE")]
    noise: Option<f64>,
    /// Period of the noise.
    #[arg(long, value_parser = crate::analyze::parse_duration, default_value = "10ms")]
    noise_period: Duration,
    /// SCHED_FIFO priority of the noise (default 1, below every component).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u8).range(1..=99))]
    noise_priority: u8,
    /// Pin the background load to this CPU (default: anywhere).
    #[arg(long, value_name = "N")]
    load_cpu: Option<usize>,
    /// Where the manifest's audio sessions go: `null` (a virtual device on the run's clock:
    /// playback judged by the Fig. 3 model and discarded, capture a test tone), `file:DIR`
    /// (`DIR/<session>.wav` written for playback, read for recording), or `alsa:DEVICE` (an
    /// ALSA PCM such as `default`, `hw:0,0`, `null`).
    #[arg(long, value_name = "BACKEND", default_value = "null", value_parser = parse_backend)]
    audio: pacer_runtime::audio::Backend,
    /// CPU wake-up latency held for the run (PM QoS, /dev/cpu_dma_latency), µs, or `off`. The
    /// default 0 keeps idle CPUs polling instead of halting (real-time mode only).
    #[arg(long, value_name = "US|off", default_value = "0", value_parser = parse_latency)]
    cpu_latency: CpuLatency,
    /// Bursts in each audio device's buffer (the Fig. 3 model's k).
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=64), value_name = "K")]
    audio_bursts: u32,
    /// Machine-readable JSON on standard output (schema `pacer.runtime.run/1`).
    #[arg(long)]
    json: bool,
}

/// `--cpu-latency`: microseconds, or none (`off`).
#[derive(Clone, Copy, Debug)]
struct CpuLatency(Option<u32>);

fn parse_latency(s: &str) -> Result<CpuLatency, String> {
    if s == "off" {
        return Ok(CpuLatency(None));
    }
    s.parse::<u32>()
        .map(|us| CpuLatency(Some(us)))
        .map_err(|_| format!("`{s}`: expected microseconds (e.g. 0, 50) or `off`"))
}

fn parse_backend(s: &str) -> Result<pacer_runtime::audio::Backend, String> {
    use pacer_runtime::audio::Backend;
    match s.split_once(':') {
        None if s == "null" => Ok(Backend::Null),
        Some(("file", dir)) if !dir.is_empty() => Ok(Backend::File(PathBuf::from(dir))),
        Some(("alsa", dev)) if !dev.is_empty() => Ok(Backend::Alsa {
            device: dev.to_string(),
        }),
        _ => Err(format!(
            "`{s}`: expected `null`, `file:DIR` or `alsa:DEVICE` (e.g. alsa:default)"
        )),
    }
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
        Command::Run(r) => run_app(r),
    }
}

fn this_machine() -> Result<usize> {
    pacer_linux::sys::online_cpus()
        .iter()
        .max()
        .map(|&c| c + 1)
        .context("no online CPU found in /sys/devices/system/cpu/online")
}

fn run_app(a: RunArgs) -> Result<u8> {
    use pacer_runtime::exec::{self, App, Mode, RunOptions};

    let mut files = Outputs::new(if a.json { Stdout::Busy } else { Stdout::Free });
    files.input(&a.file);
    let jobs = a.jobs.as_deref().map(|p| files.file("--jobs", p)).transpose()?;
    let manifest = Manifest::from_file(&a.file)?;
    let report = validate::check(&manifest, &Machine::linux_default(this_machine()?));
    if !report.is_valid() {
        eprint!("{}", text(&report));
        eprintln!(
            "pacer runtime run: {} is not valid; nothing was started",
            a.file.display()
        );
        return Ok(1);
    }
    let mode = if a.plain { Mode::Plain } else { Mode::Realtime };
    if mode == Mode::Realtime && !pacer_linux::run::is_root() {
        let needs = manifest
            .components
            .iter()
            .any(|c| matches!(c.scheduling, pacer_runtime::manifest::Scheduling::Deadline { .. }));
        if needs {
            bail!(
                "{}: SCHED_DEADLINE components need root (CAP_SYS_NICE); run with sudo, or --plain for ordinary threads",
                a.file.display()
            );
        }
    }
    if let Some(c) = a.load_cpu {
        if !pacer_linux::sys::online_cpus().contains(&c) {
            bail!("--load-cpu: CPU {c} is not online");
        }
    }
    // Termination signals are blocked before the first thread (load or component) starts.
    let signals = pacer_linux::signals::SignalFd::new(&pacer_linux::signals::TERMINATING)
        .context("blocking SIGINT/SIGTERM/SIGHUP")?;
    let load_spec = pacer_experiments::load::LoadSpec {
        hogs: a.hogs,
        noise: a.noise,
        noise_period_ns: a.noise_period.ns(),
        noise_priority: a.noise_priority,
        mem_hogs: a.mem_hogs,
        mem_bytes: 0,
        cpu: a.load_cpu,
    };
    let load = if load_spec.is_empty() {
        None
    } else {
        Some(pacer_experiments::load::Load::start(&load_spec).context("starting the background load")?)
    };
    if let pacer_runtime::audio::Backend::File(dir) = &a.audio {
        if !dir.is_dir() {
            bail!("--audio file:{}: not a directory", dir.display());
        }
    }
    let mut opts = RunOptions::new((a.duration.ns() > 0).then_some(a.duration.ns()), mode);
    opts.signals = Some(signals);
    opts.audio = a.audio.clone();
    if mode == Mode::Realtime {
        opts.cpu_latency_us = a.cpu_latency.0;
    }
    opts.audio_options.device_bursts = a.audio_bursts;
    if let Some(s) = jobs {
        opts.jobs = Some(Box::new(std::io::BufWriter::new(files.open(s)?)));
        opts.jobs_parquet = a.jobs.as_deref().is_some_and(pacer_workload::jobs::is_parquet);
    }
    let bar = (std::io::stderr().is_terminal() && a.duration.ns() > 0).then(|| {
        let b = indicatif::ProgressBar::new(a.duration.ns() / 1_000_000);
        b.set_style(
            indicatif::ProgressStyle::with_template("running {bar:40} {pos}/{len} ms ({eta} left)")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        b
    });
    if let Some(b) = bar.clone() {
        opts.progress = Some(Box::new(move |ns| b.set_position(ns / 1_000_000)));
    }
    let result = exec::run(App::new(manifest), opts);
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    if let Some(l) = load {
        l.stop();
    }
    let out = match result {
        Err(e @ exec::ExecError::Setup { .. }) if e.to_string().contains("Operation not permitted") => {
            return Err(anyhow::Error::from(e)
                .context(format!("running {}", a.file.display()))
                .context("real-time policies need root or CAP_SYS_NICE (or an RLIMIT_RTPRIO covering the priorities); run with sudo, or --plain for ordinary threads"));
        }
        r => r.with_context(|| format!("running {}", a.file.display()))?,
    };
    files.commit()?;
    if a.json {
        #[derive(serde::Serialize)]
        struct Json<'a> {
            #[serde(flatten)]
            run: &'a exec::RunReport,
            load: String,
        }
        println!(
            "{}",
            serde_json::to_string_pretty(&Json {
                run: &out,
                load: load_spec.describe(),
            })?
        );
    } else {
        print!("{}", run_text(&out, &load_spec.describe()));
    }
    Ok(match out.signal_number {
        // Stopped before its duration: the shell's convention for a command a signal ended.
        Some(sig) if a.duration.ns() > 0 => 128u8.saturating_add(sig as u8),
        _ if out.misses() > 0 => 2,
        _ => 0,
    })
}

fn spread(s: &pacer_runtime::exec::Spread) -> String {
    format!("{} / {} / {}", us(s.p50_ns), us(s.p99_ns), us(s.max_ns))
}

/// Microseconds with one decimal: the resolution the clocks and the kernel's timers give here.
fn us(ns: u64) -> String {
    format!("{:.1}", ns as f64 / 1000.0)
}

fn run_text(r: &pacer_runtime::exec::RunReport, load: &str) -> String {
    let mut s = format!(
        "application {} ran {} ({}), background load: {}\n",
        pacer_model::text::escape_control(&r.app),
        dur(r.elapsed_ns),
        match r.mode {
            pacer_runtime::exec::Mode::Realtime => "real-time threads",
            pacer_runtime::exec::Mode::Plain => "plain threads",
        },
        load
    );
    if let Some(sig) = &r.signal {
        s += &format!("stopped by {sig}\n");
    }
    s += &format!(
        "memory locked: {}; CPU wake-up latency held: {}; allocation guard: {}\n\ncomponents (µs: p50 / p99 / max)\n",
        if r.memory_locked { "yes" } else { "no" },
        r.cpu_latency_us.map_or("no".to_string(), |us| format!("{us} µs")),
        if r.guard { "on" } else { "not installed" }
    );
    let mut t = Table::new(&[
        "component",
        "policy",
        "releases",
        "misses",
        "overruns",
        "jitter",
        "response",
        "cpu",
        "preempt",
        "rt allocs",
        "arena peak",
        "restored",
    ]);
    for c in &r.components {
        t.push(vec![
            c.name.clone(),
            c.policy.clone(),
            c.releases.to_string(),
            c.misses.to_string(),
            c.overruns.to_string(),
            spread(&c.jitter),
            spread(&c.response),
            spread(&c.exec),
            c.preemptions.to_string(),
            c.allocations.map_or("—".into(), |a| a.rt_allocations.to_string()),
            format!("{} / {}", c.per_release_peak_bytes, c.per_release_budget_bytes),
            if c.restored { "yes" } else { "NO" }.into(),
        ]);
    }
    s += &t.render();
    if !r.channels.is_empty() {
        s += "\nchannels (delivery latency µs: p50 / p99 / max)\n";
        let mut t = Table::new(&[
            "channel",
            "receiver",
            "sent",
            "delivered",
            "dropped",
            "evicted",
            "pending",
            "latency",
        ]);
        for c in &r.channels {
            t.push(vec![
                c.channel.clone(),
                c.receiver.clone(),
                c.sent.to_string(),
                c.delivered.to_string(),
                c.dropped.to_string(),
                c.evicted.to_string(),
                c.pending.to_string(),
                spread(&c.latency),
            ]);
            if c.senders.len() > 1 {
                for x in &c.senders {
                    t.push(vec![
                        format!("  from {}", x.sender),
                        format!("priority {}", x.priority),
                        x.sent.to_string(),
                        x.delivered.to_string(),
                        x.dropped.to_string(),
                        x.evicted.to_string(),
                        String::new(),
                        spread(&x.latency),
                    ]);
                }
            }
        }
        s += &t.render();
    }
    if !r.audio.is_empty() {
        s += "\naudio sessions (playback latency µs: p50 / p99 / max)\n";
        let mut t = Table::new(&[
            "session",
            "component",
            "direction",
            "backend",
            "bursts",
            "underruns",
            "late",
            "silence",
            "clipped",
            "latency",
        ]);
        let mut files = String::new();
        for a in &r.audio {
            let x = &a.session;
            t.push(vec![
                x.session.clone(),
                a.component.clone(),
                format!("{:?}", x.direction).to_lowercase(),
                x.backend.to_string(),
                x.bursts.to_string(),
                x.underruns.to_string(),
                x.late.to_string(),
                x.silence_padded_bursts.to_string(),
                x.clipped_samples.to_string(),
                a.latency.as_ref().map_or("—".into(), spread),
            ]);
            if let Some(f) = &x.file {
                files += &match f.complete {
                    true => format!("{}: wrote {} ({} bursts)\n", x.session, f.path, f.bursts),
                    false => format!("{}: file NOT written: {:?}\n", x.session, f.error),
                };
            }
        }
        s += &t.render();
        s += &files;
    }
    if r.records_lost > 0 {
        s += &format!(
            "\n{} release records were lost (the collector fell behind): they are missing from the statistics and the jobs CSV\n",
            r.records_lost
        );
    }
    for n in &r.notes {
        s += &format!("note: {n}\n");
    }
    s += &format!(
        "\n{} misses in {} releases\n",
        r.misses(),
        r.components.iter().map(|c| c.releases).sum::<u64>()
    );
    s += &miss_causes_text(r);
    s
}

/// The misses by cause, per component that missed, and what a late start without a preemption
/// points at.
fn miss_causes_text(r: &pacer_runtime::exec::RunReport) -> String {
    let mut s = String::new();
    let mut unexplained = 0;
    for c in r.components.iter().filter(|c| c.misses > 0) {
        let m = &c.miss_causes;
        s += &format!(
            "  {}: {} started late, {} preempted, {} ran long\n",
            pacer_model::text::escape_control(&c.name),
            m.started_late,
            m.preempted,
            m.ran_long
        );
        // Misses without a switch of the thread itself.
        unexplained += m.started_late + m.ran_long;
    }
    if unexplained > 0 {
        s += "  started late: woken late, or behind its previous release; ran long: its CPU time did\n  \
              not fit, or it was stopped while running. With nothing of higher priority on its\n  \
              CPU, such time is the machine's own (on a virtual machine, its host stopping it:\n  \
              `pacer bench stalls` measures that)\n";
    }
    s
}

fn check(a: CheckArgs) -> Result<u8> {
    let manifest = Manifest::from_file(&a.file)?;
    let cpus = match a.cpus {
        Some(n) => n,
        None => this_machine()?,
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
