//! `pacer`: adaptive real-time scheduling toolkit. Thin subcommands over the library crates; no
//! algorithm lives here (see ../../../../shared/DESIGN.md, "Layout").

mod analyze;
mod bench;
mod demo;
mod gen;
mod period;
mod sim;
mod table;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "pacer",
    version,
    about = "Adaptive real-time scheduling toolkit for Linux: task sets, schedulability analysis, SCHED_DEADLINE",
    long_about = "pacer generates real-time task sets, analyses their schedulability under uniprocessor, \
global, partitioned and clustered EDF and fixed-priority scheduling, and checks SCHED_DEADLINE \
admission as the Linux kernel computes it.\n\nDurations accept units: 10ms, 250us, 1.5s (bare integers are nanoseconds).",
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
    Sim(sim::Args),
    /// Detect a thread's period from a recorded wake-up trace (LFS++ period analyser).
    Period(period::Args),
    /// Measure pacer itself (e.g. period-detection accuracy vs window and load).
    Bench(bench::Args),
}

/// Reads all of standard input (for the `-` file argument every file-taking command accepts).
pub(crate) fn read_stdin() -> anyhow::Result<String> {
    let mut text = String::new();
    std::io::Read::read_to_string(&mut std::io::stdin(), &mut text)
        .map_err(|e| anyhow::anyhow!("reading standard input: {e}"))?;
    Ok(text)
}

fn main() -> ExitCode {
    pacer_linux::default_sigpipe();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Demo(a) => demo::run(a),
        Command::Gen(a) => gen::run(a),
        Command::Analyze(a) => analyze::run(a),
        Command::Sim(a) => sim::run(a),
        Command::Bench(a) => bench::run(a),
        Command::Period(a) => period::run(a),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("pacer: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
