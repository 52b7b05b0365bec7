//! `pacer`: adaptive real-time scheduling toolkit. Thin subcommands over the library crates; no
//! algorithm lives here (see ../../../../shared/DESIGN.md, "Layout").

// The runtime's allocation guard (pacer_runtime::guard): `pacer runtime run` reports heap
// allocations made on a component's real-time path; elsewhere it only passes calls through.
#[global_allocator]
static ALLOC: pacer_runtime::guard::GuardedAlloc = pacer_runtime::guard::GuardedAlloc;

mod analyze;
mod audio;
mod audio_bench;
mod bench;
mod bench_daemon;
mod bench_exec;
mod bench_stalls;
mod calibrate;
mod compare;
mod completions;
mod convert;
mod cpuset;
mod daemon;
mod demo;
mod doctor;
mod exec;
mod experiment;
mod gen;
#[cfg(test)]
mod help_examples;
mod man;
mod output;
mod period;
mod run;
mod run_trace;
mod runtime;
mod sim;
mod sim_kernel;
mod sim_report;
mod table;
mod taskset_args;
mod vtcfs;

use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "pacer",
    version,
    about = "Adaptive real-time scheduling toolkit for Linux: task sets, schedulability analysis, SCHED_DEADLINE",
    long_about = "pacer generates real-time task sets, analyses their schedulability under uniprocessor, \
global, partitioned and clustered EDF and fixed-priority scheduling, and checks SCHED_DEADLINE \
admission as the Linux kernel computes it.\n\nDurations need a unit: 10ms, 250us, 1.5s (a bare number other than 0 is refused; \
rt-app files keep rt-app's microseconds).",
    after_help = "Start with `pacer demo`, then `pacer gen --help` and `pacer analyze --help`.\nFile formats: docs/formats/taskset.md."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the built-in default scenario: generate a task set and analyse it.
    Demo(demo::Args),
    /// Generate random task sets (UUniFast, RandFixedSum, UNC distributions, the RM-vs-EDF recipe).
    Gen(gen::Args),
    /// Analyse a task set with every applicable schedulability test.
    #[command(alias = "analyse")]
    Analyze(analyze::Args),
    /// Simulate a task set or an rt-app workload on the Linux scheduling classes.
    Sim(Box<sim::Args>),
    /// The SynthMark-style audio benchmark on this machine's kernel: a real synthesizer callback
    /// under SCHED_OTHER, SCHED_FIFO, fixed or adaptive SCHED_DEADLINE (LatencyMark, VoiceMark,
    /// JitterMark, UtilizationMark).
    Audio(Box<audio_bench::Args>),
    /// Write a task set under a configuration ({g,c,p}-{edf,rm,dm}) as an rt-app JSON file.
    Convert(convert::Args),
    /// Run an experiment: task sets × scheduling configurations × backends, cached, sharded,
    /// aggregated as the RM-vs-EDF paper's Table 4 (`pacer experiment rm-vs-edf` is its sweep).
    Experiment(Box<experiment::Args>),
    /// Run an rt-app workload or a task set on this machine's kernel and measure every job (as
    /// `sim` does).
    Run(run::Args),
    /// The real-time component runtime (RTDroid-style): `pacer runtime check APP.toml` validates
    /// an application manifest (schedulability, memory, channels, audio) before it starts.
    Runtime(runtime::Args),
    /// Measure this machine's working-set costs (warm, migrated, evicted) for `sim --cache-model`.
    Calibrate(calibrate::Args),
    /// Compare the response times of two job CSVs (e.g. `pacer sim` against `pacer run`).
    Compare(compare::Args),
    /// Detect a thread's period from a recorded wake-up trace (LFS++ period analyser).
    Period(period::Args),
    /// Measure pacer itself (e.g. period-detection accuracy vs window and load).
    Bench(bench::Args),
    /// Run a program under adaptive SCHED_DEADLINE reservations (LFS++: period detection,
    /// feedback budgets, supervisor); its threads get their policy back when pacer stops.
    Exec(exec::ExecArgs),
    /// Put a running process's threads under adaptive SCHED_DEADLINE reservations (as `exec`).
    Attach(exec::AttachArgs),
    /// Run a command inside an exclusive CPU partition (its own SCHED_DEADLINE root domain).
    Cpuset(cpuset::Args),
    /// Check (and with --repair fix) SCHED_DEADLINE accounting, orphaned sessions and leftovers.
    Doctor(doctor::Args),
    // No doc comments here: they would replace the long help written on the argument structs.
    Daemon(daemon::Args),
    Status(daemon::StatusArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell) on standard output.
    Completions(completions::Args),
    /// Write the man pages: pacer.1 and one per subcommand (pacer-sim.1, pacer-runtime-run.1, …).
    Man(man::Args),
    /// Internal: the companion that restores threads if pacer is killed (reads stdin).
    #[command(hide = true)]
    Guardian(exec::GuardianArgs),
}

/// The whole command tree, for what is generated from it (completions, man pages, help checks).
pub(crate) fn cli_command() -> clap::Command {
    Cli::command()
}

/// The command line as given, for the header of HTML reports (what to run to get the same
/// report again).
pub(crate) fn command_line() -> String {
    std::env::args().collect::<Vec<_>>().join(" ")
}

/// Reads all of standard input (for the `-` file argument every file-taking command accepts).
pub(crate) fn read_stdin() -> anyhow::Result<String> {
    let mut text = String::new();
    std::io::Read::read_to_string(&mut std::io::stdin(), &mut text)
        .map_err(|e| anyhow::anyhow!("reading standard input: {e}"))?;
    Ok(text)
}

/// A count option within `LO..=HI` (clap's ranged parsers are for u64/i64 only), with the range
/// in the message: counts size loops and allocations, so an unbounded one can exhaust memory.
pub(crate) fn count_in<const LO: usize, const HI: usize>(s: &str) -> Result<usize, String> {
    let n: usize = s
        .trim()
        .parse()
        .map_err(|_| format!("`{s}` is not a whole number (expected {LO} to {HI})"))?;
    if !(LO..=HI).contains(&n) {
        return Err(format!("{n} is not in {LO}..={HI}"));
    }
    Ok(n)
}

/// Refuses to go on without root, before anything is tried: the kernel's own answer would be a
/// "Permission denied" on some internal path, which does not say what to do.
pub(crate) fn require_root(command: &str, why: &str) -> anyhow::Result<()> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        anyhow::bail!("{command} needs root: {why}; run it with sudo");
    }
    Ok(())
}

/// `--duration 1 s`: a unit given as a separate word. clap would take the unit for a positional
/// argument or a subcommand and say something unrelated, so it is caught before clap sees it.
fn spaced_unit(args: &[String]) -> Option<String> {
    args.windows(3).find_map(|w| {
        let (flag, num, unit) = (&w[0], &w[1], &w[2]);
        let numeric = !num.is_empty() && num.chars().all(|c| c.is_ascii_digit() || c == '.');
        let is_unit = ["ns", "us", "µs", "ms", "s"].contains(&unit.as_str());
        (flag.starts_with('-') && numeric && is_unit)
            .then(|| format!("{flag} {num} {unit}: write the unit without a space: {flag} {num}{unit}"))
    })
}

fn main() -> ExitCode {
    pacer_linux::default_sigpipe();
    let args: Vec<String> = std::env::args_os()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    if let Some(msg) = spaced_unit(&args) {
        eprintln!("pacer: error: {msg}");
        return ExitCode::from(2);
    }
    let cli = Cli::parse();
    let code = |r: anyhow::Result<u8>| r.map(ExitCode::from);
    let result = match cli.command {
        Command::Demo(a) => demo::run(a),
        Command::Gen(a) => gen::run(a),
        Command::Analyze(a) => analyze::run(a),
        Command::Sim(a) => sim::run(*a),
        Command::Convert(a) => convert::run(a),
        Command::Run(a) => run::run(a),
        Command::Experiment(a) => return finish(code(experiment::run(*a))),
        Command::Audio(a) => audio_bench::run(*a),
        Command::Calibrate(a) => calibrate::run(a),
        Command::Runtime(a) => return finish(code(runtime::run(a))),
        Command::Compare(a) => return finish(code(compare::run(a))),
        Command::Bench(a) => bench::run(a),
        Command::Period(a) => period::run(a),
        Command::Exec(a) => return finish(code(exec::exec(a))),
        Command::Attach(a) => return finish(code(exec::attach(a))),
        Command::Daemon(a) => return finish(code(daemon::run(a))),
        Command::Status(a) => return finish(code(daemon::status(a))),
        Command::Guardian(a) => return finish(code(exec::guardian(a))),
        Command::Cpuset(a) => return finish(code(cpuset::run(a))),
        Command::Doctor(a) => return finish(code(doctor::run(a))),
        Command::Completions(a) => completions::run(a),
        Command::Man(a) => man::run(a),
    };
    finish(result.map(|()| ExitCode::SUCCESS))
}

fn finish(result: anyhow::Result<ExitCode>) -> ExitCode {
    match result {
        Ok(c) => c,
        Err(e) => {
            // Messages quote names and paths from the input; only their line breaks are kept.
            let text: Vec<String> = error_chain(&e)
                .split('\n')
                .map(pacer_model::text::escape_control)
                .collect();
            eprintln!("pacer: error: {}", text.join("\n"));
            ExitCode::FAILURE
        }
    }
}

/// The error and its causes, like anyhow's `{:#}`, minus causes whose text the message already
/// quotes (library errors include their OS error in their own message).
fn error_chain(e: &anyhow::Error) -> String {
    let mut msg = e.to_string();
    for cause in e.chain().skip(1) {
        let c = cause.to_string();
        if !msg.contains(&c) {
            msg.push_str(": ");
            msg.push_str(&c);
        }
    }
    msg
}
