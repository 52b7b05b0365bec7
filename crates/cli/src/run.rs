//! `pacer run`: run an rt-app workload on this machine's kernel (`pacer_linux::run`), stream its
//! per-job records and rt-app logs, and print the same summary `pacer sim` prints for the same
//! file, so the two can be read side by side or compared with `pacer compare`.

use std::fs::File;
use std::io::{self, BufWriter, IsTerminal};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use pacer_linux::run::{
    self as executor, Calibration, LogMode, LogRow, RtAppLogs, RunConfig, RunError, RunReport, StopReason,
    ThreadReport,
};
use pacer_linux::sched_trace::{SchedTrace, SchedTracer};
use pacer_linux::taskset::{CacheMissCount, TaskSetError, TaskSetReport, TaskSetRunOptions};
use pacer_model::Duration;
use pacer_workload::jobs::{render_text_labelled, JobRecord, JobSink, Summary, SummaryReport, ThreadId};
use pacer_workload::{RunSettings, Workload};
use serde::Serialize;

use crate::analyze::parse_duration;
use crate::output::{FlushClock, Outputs, Stdout};
use crate::sim::{read_input, warn_ignored, Input};

#[derive(clap::Args)]
#[command(after_help = "Examples:\n  \
sudo pacer run examples/rtapp-periodic.json --duration 5s\n  \
sudo pacer run examples/textbook.json --policy p-edf --cpus 2 --duration 5s --jobs run.csv\n  \
sudo pacer run set.json --policy c-rm --cpus 2 --cluster-size 2 --json > run.json\n  \
sudo pacer run examples/rtapp-periodic.json --duration 5s --jobs run.csv --log-dir logs/\n  \
sudo pacer run examples/rtapp-periodic.json --duration 1s --trace run.pftrace  # ui.perfetto.dev\n  \
pacer sim examples/rtapp-periodic.json --cpus 2 --duration 5s --jobs sim.csv\n  \
pacer compare sim.csv run.csv                     # the simulator against the kernel\n\n\
Each thread of the file becomes an OS thread (named `<task>-<index>`) that sets its own policy\n\
(SCHED_DEADLINE with RESET_ON_FORK, SCHED_FIFO/RR, nice) and CPUs, then runs its phases:\n\
`run` spins a calibrated busy loop (work at full CPU speed; it stretches on a slower or shared\n\
CPU), `runtime` spins for wall-clock time, `sleep` and `timer` sleep on CLOCK_MONOTONIC. Jobs are\n\
those of `pacer sim`: released at the thread's start and at each timer expiry, finished at the\n\
next timer event. Real-time policies need root. Ctrl-C (or SIGTERM) ends the run between events;\n\
every thread puts itself back to SCHED_OTHER. Measurement details: docs/linux.md.\n\n\
--trace records the run's context switches and wake-ups from the kernel (root: a private tracefs\n\
instance, filtered in the kernel to events involving the workload's threads, removed at exit and\n\
on Ctrl-C/SIGTERM) into a Perfetto protobuf trace, the format of `pacer sim --trace`: open it in\n\
ui.perfetto.dev beside the simulation's. Times are CLOCK_MONOTONIC ns: a job's release_ns plus\n\
the run's origin_ns (--json) is its trace time. Events the kernel lost are reported. Details:\n\
docs/linux.md, \"Scheduler traces of a run\".\n\n\
rt-app's outputs, for tools such as LISA (docs/linux.md, \"rt-app logs and ftrace markers\"):\n\
threads are named (comm) `<task>-<index>` as in rt-app; logs `<log_basename>-<task>-<index>.log`,\n\
with rt-app's header and columns, go into --log-dir, or into the file's `logdir` when the file\n\
sets `logdir`, `log_basename` or `log_size` (logs a file asks for never replace existing files;\n\
`\"log_size\": \"disable\"` turns them off, a size in MiB keeps each thread's rows in memory until\n\
the end); the file's `ftrace` categories (main, task, loop, event, stats) write rt-app's\n\
`rtapp_*` markers into tracefs `trace_marker` (root; tracing must be on).\n\n\
Task sets (docs/formats/taskset.md) run as `pacer sim` simulates them, under --policy on --cpus\n\
(CPUs 0..M-1): EDF as SCHED_DEADLINE (C, D, T), RM/DM as SCHED_FIFO with rate/deadline-monotonic\n\
priorities. Partitioned and clustered policies get one exclusive cpuset per CPU or cluster for\n\
the run (each its own SCHED_DEADLINE root domain; each thread joins its cpuset before taking its\n\
policy), global ones the machine's root domain (or one cpuset of CPUs 0..M-1 when M is less than\n\
the machine's CPUs). Σ C/T of each partition's SCHED_DEADLINE tasks is checked against the\n\
kernel's limit first. The cpusets are removed after the run, also on Ctrl-C, SIGTERM or SIGHUP;\n\
after a SIGKILL, `sudo pacer cpuset --cleanup` (or the next run) removes them. Reported per task:\n\
CPU time and measured utilisation, context switches, involuntary switches, migrations; cache\n\
misses where a hardware PMU exists (otherwise reported as unavailable). `pacer convert` writes\n\
the same threads as an rt-app file. Details: docs/linux.md, \"Task sets on Linux\".")]
pub struct Args {
    /// rt-app JSON workload or pacer task set; `-` reads standard input.
    pub file: PathBuf,
    /// Task sets: number of CPUs, 0..M-1 [default: every CPU this process may use].
    #[arg(short = 'm', long, value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub cpus: Option<u32>,
    #[command(flatten)]
    pub taskset: crate::taskset_args::TaskSetArgs,
    /// Run an rt-app file even if it uses what pacer cannot run as rt-app would: skip those
    /// and list them all. Without it such a file is refused.
    #[arg(long)]
    pub lenient: bool,
    /// Length of the run from the threads' common start [default: the file's `global.duration`;
    /// without one, until every thread has ended or Ctrl-C; for a task set, 10s].
    #[arg(short = 'd', long, value_parser = parse_duration)]
    pub duration: Option<Duration>,
    /// Write one CSV row per finished job here (docs/formats/jobs-csv.md, the schema of
    /// `pacer sim --jobs`; a name ending in `.parquet` writes the same columns as Parquet). Rows stream to `.NAME.pacer-tmp-PID` beside the file (flushed every
    /// half second, so a killed run leaves them there), which replaces it only if the run
    /// succeeds; Ctrl-C, SIGTERM and SIGHUP end a run normally, so its files are written
    /// (docs/output-files.md).
    #[arg(long)]
    pub jobs: Option<PathBuf>,
    /// Write rt-app's per-thread logs (`<log_basename>-<task>-<index>.log`, rt-app's columns)
    /// into this existing directory instead of the file's `logdir`; like --jobs, they replace
    /// earlier logs of the same names, and only if the run succeeds.
    #[arg(long)]
    pub log_dir: Option<PathBuf>,
    /// Seed of the execution-time draws; the per-thread streams are those of `pacer sim --seed`,
    /// so both draw the same work (recorded in the output).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Speed of pacer's busy loop in nanoseconds per loop (decimals allowed), instead of
    /// measuring it at start-up (about 25 ms at SCHED_FIFO 99). Every run prints the value it
    /// used.
    #[arg(long, value_name = "NS_PER_LOOP")]
    pub calibration: Option<f64>,
    /// Write the kernel's record of the run's context switches and wake-ups here, as a Perfetto
    /// protobuf trace (open in ui.perfetto.dev or trace_processor), replaced only if the run
    /// succeeds, as --jobs. Needs root (tracefs). Only Perfetto's format: a name ending in
    /// `.json` is refused.
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
    /// Also write each measured job as a slice "job N" on its thread's track in --trace (and
    /// an instant "deadline miss"), as `pacer sim --trace-jobs`.
    #[arg(long, requires = "trace")]
    pub trace_jobs: bool,
    /// Machine-readable JSON summary on standard output.
    #[arg(long)]
    pub json: bool,
}

/// Where the executor's records go: the summary, the CSV, the logs, the progress bar.
struct Sinks<'a> {
    summary: Summary,
    csv: Option<JobSink<BufWriter<File>>>,
    logs: Option<RtAppLogs>,
    /// Opens the logs of threads a `fork` starts, as they start.
    fork_logs: Option<ForkLogs<'a>>,
    /// The first error opening such a log, returned with the next row (or after the run).
    log_error: Option<io::Error>,
    bar: Option<indicatif::ProgressBar>,
    /// Paces the flushes that put the rows in the (temporary) files while the run goes on.
    flush: FlushClock,
    /// The jobs kept for --trace-jobs, written with the trace after the run.
    trace_jobs: Option<Vec<JobRecord>>,
}

/// What a forked thread's log needs: rt-app opens one per thread it creates, forked ones
/// included, named after the forked thread's unique name (`<task>-<index>-<nfork>`).
struct ForkLogs<'a> {
    files: &'a mut Outputs,
    flag: &'static str,
    dir: PathBuf,
    basename: String,
    /// `--log-dir` given: earlier logs there are replaced; else a file the workload names is
    /// never replaced.
    replace: bool,
}

impl ForkLogs<'_> {
    fn open(&mut self, thread: &str) -> Result<(PathBuf, File)> {
        let p = executor::log::log_path(&self.dir, &self.basename, thread);
        if !self.replace && std::fs::symlink_metadata(&p).is_ok() {
            bail!(
                "global.logdir: {} exists (the log of forked thread `{thread}`); pacer does not \
                 replace files a workload names (remove it, or pass --log-dir DIR to write the \
                 logs there, replacing earlier ones)",
                p.display()
            );
        }
        let slot = self.files.file(self.flag, &p)?;
        Ok((p, self.files.open(slot)?))
    }
}

impl executor::Sink for Sinks<'_> {
    fn job(&mut self, r: &JobRecord) -> io::Result<()> {
        self.summary.add(r);
        if let Some(jobs) = &mut self.trace_jobs {
            jobs.push(*r);
        }
        if let Some(csv) = &mut self.csv {
            csv.write(r);
            if let Some(e) = csv.error() {
                return Err(io::Error::new(e.kind(), e.to_string()));
            }
        }
        Ok(())
    }

    fn log(&mut self, thread: ThreadId, row: &LogRow) -> io::Result<()> {
        if let Some(e) = self.log_error.take() {
            return Err(e);
        }
        match &mut self.logs {
            Some(l) => l.write(thread, row),
            None => Ok(()),
        }
    }

    fn thread_started(&mut self, thread: ThreadId, name: &str) {
        if let Some(csv) = &mut self.csv {
            csv.set_name(thread, name);
        }
        if let (Some(f), Some(logs)) = (&mut self.fork_logs, &mut self.logs) {
            if thread as usize == logs.len() && self.log_error.is_none() {
                let added = f
                    .open(name)
                    .map_err(|e| io::Error::other(format!("{e:#}")))
                    .and_then(|(p, file)| logs.add(p, file));
                if let Err(e) = added {
                    self.log_error = Some(e);
                }
            }
        }
    }

    fn progress(&mut self, elapsed_ns: u64) {
        if let Some(b) = &self.bar {
            b.set_position(elapsed_ns / 1_000_000);
        }
        if self.flush.due() {
            // Errors are kept: the CSV's stops the run at its next row, the logs' comes back
            // from `finish`.
            if let Some(csv) = &mut self.csv {
                let _ = csv.flush();
            }
            if let Some(logs) = &mut self.logs {
                let _ = logs.flush();
            }
        }
    }
}

#[derive(Serialize)]
struct RunInfo {
    file: String,
    seed: u64,
    /// ns per loop of the busy loop, and how it was obtained.
    calibration_ns_per_loop: f64,
    calibration: Calibration,
    /// The file's numeric `global.calibration`: `run` events then use rt-app's loop at this
    /// many ns per loop.
    #[serde(skip_serializing_if = "Option::is_none")]
    rtapp_ns_per_loop: Option<u64>,
    cpus: u32,
    /// Length of the run, ns.
    duration_ns: u64,
    stopped_by: StopReason,
    jobs: u64,
    dropped_records: u64,
    memory_locked: bool,
    threads: Vec<ThreadReport>,
    warnings: Vec<String>,
    ignored_keys: Vec<String>,
    /// For a task set: the configuration, its bins and cpusets, per-task metrics, cache misses.
    #[serde(skip_serializing_if = "Option::is_none")]
    taskset: Option<serde_json::Value>,
    /// CLOCK_MONOTONIC of the origin, ns: a job's `release_ns` plus this is its time in --trace.
    origin_ns: u64,
    /// What --trace holds.
    #[serde(skip_serializing_if = "Option::is_none")]
    trace: Option<TraceInfo>,
}

/// What `--trace` wrote.
#[derive(Serialize)]
struct TraceInfo {
    file: String,
    #[serde(flatten)]
    written: crate::run_trace::Written,
    /// Events the kernel reported lost (its ring buffer filled before pacer read it).
    lost_events: u64,
    bytes: u64,
}

#[derive(Serialize)]
struct JsonOut<'a> {
    run: RunInfo,
    summary: &'a SummaryReport,
}

fn stop_text(s: StopReason) -> String {
    match s {
        StopReason::Duration => "at the end of its duration".into(),
        StopReason::Finished => "when every thread had ended".into(),
        StopReason::Signal(sig) => format!("by {}", executor::signal_name(sig)),
    }
}

/// Whether the file asks for rt-app's logs without `--log-dir`: it sets `logdir`,
/// `log_basename` or a `log_size` other than "disable". The model keeps rt-app's defaults for
/// settings a file leaves out, so a setting equal to its default reads as left out: rt-app
/// would log into `./` for every file, pacer only when asked, so that runs do not scatter logs
/// in the working directory.
fn file_asks_for_logs(s: &RunSettings) -> bool {
    s.log_size != Some(0) && s.logs_set
}

/// Where the logs go, and how their rows wait: `None` when no logs are written.
fn log_plan<'a>(a: &'a Args, w: &'a Workload) -> Option<(&'a Path, LogMode)> {
    let mode = match LogMode::from_log_size(w.settings.log_size) {
        // --log-dir asks for logs whatever the file says.
        LogMode::Off => LogMode::Stream,
        m => m,
    };
    match &a.log_dir {
        Some(d) => Some((d.as_path(), mode)),
        None if file_asks_for_logs(&w.settings) => Some((Path::new(&w.settings.logdir), mode)),
        None => None,
    }
}

pub fn run(a: Args) -> Result<()> {
    let mut files = Outputs::new(Stdout::Busy);
    files.input(&a.file);
    let jobs = a.jobs.as_deref().map(|p| files.file("--jobs", p)).transpose()?;
    if let Some(p) = &a.trace {
        if crate::sim::TraceFormat::of(None, p) == crate::sim::TraceFormat::Json {
            bail!(
                "--trace {}: `pacer run` writes Perfetto's protobuf format only; name the file \
                 e.g. run.pftrace",
                p.display()
            );
        }
    }
    let trace = a.trace.as_deref().map(|p| files.file("--trace", p)).transpose()?;
    let (workload, taskset) = match read_input(&a.file, a.lenient)? {
        Input::RtApp(w) => {
            let mut given = a.taskset.given();
            if a.cpus.is_some() {
                given.insert(0, "--cpus");
            }
            if !given.is_empty() {
                bail!(
                    "{}: only for task sets; an rt-app file sets each thread's policy, CPUs and work itself",
                    given.join(", ")
                );
            }
            (w, None)
        }
        Input::TaskSet(set) => {
            let cpus = match a.cpus {
                Some(m) => m,
                None => pacer_linux::sched::get_affinity(0)
                    .context("reading this process's CPUs")?
                    .len() as u32,
            };
            let cfg = a.taskset.configuration(cpus)?;
            let placed = pacer_workload::placement::place(&set, &cfg)?;
            (placed.workload.clone(), Some((cfg, placed)))
        }
    };
    let interactive = !a.json;
    if interactive {
        warn_ignored("pacer run", &workload.ignored);
    }
    let calibration = match a.calibration {
        Some(ns) => Some(Calibration::from_ns_per_loop(ns).with_context(|| {
            format!("--calibration {ns}: expected nanoseconds per loop, > 0 (e.g. 25.3)")
        })?),
        None => None,
    };
    let duration = a
        .duration
        .or(workload.duration)
        .or(taskset.as_ref().map(|_| Duration::from_secs(10)));
    if duration.is_some_and(|d| d.is_zero()) {
        bail!("--duration: expected a run time > 0");
    }
    // Threads started with the run; those a `fork` event starts are named as they start.
    let names: Vec<String> = workload.initial_threads().map(|(_, t)| t.name.clone()).collect();
    let plan = log_plan(&a, &workload);
    let flag = if a.log_dir.is_some() {
        "--log-dir"
    } else {
        "global.logdir"
    };
    let log_dir = plan
        .map(|(d, _)| files.dir(flag, d, false).map(|_| d))
        .transpose()?;
    // Outputs are opened before the run, so a bad path fails before anything runs; they are
    // temporary files until the run has succeeded.
    let log_slots = match log_dir {
        // The initial threads' logs; those of threads a `fork` starts are opened as they start
        // (their ids follow).
        Some(d) => workload
            .initial_threads()
            .map(|(_, t)| {
                let thread = t.rtapp_name.as_deref().unwrap_or(&t.name);
                let p = executor::log::log_path(d, &workload.settings.log_basename, thread);
                // Logs the workload names, not this command line, never replace a file.
                if a.log_dir.is_none() && std::fs::symlink_metadata(&p).is_ok() {
                    bail!(
                        "global.logdir: {} exists; pacer does not replace files a workload names \
                         (remove it, or pass --log-dir DIR to write the logs there, replacing \
                         earlier ones)",
                        p.display()
                    );
                }
                Ok((files.file(flag, &p)?, p))
            })
            .collect::<Result<Vec<_>>>()?,
        None => Vec::new(),
    };
    // The tracer's tracefs instance must not outlive the command: termination signals wait
    // until it is gone (the run reads them itself meanwhile and ends normally).
    let defer = match trace {
        Some(_) => {
            if !executor::is_root() {
                bail!(
                    "--trace records the kernel's scheduling events through tracefs, which needs \
                     root: run `sudo pacer run … --trace FILE`"
                );
            }
            Some(
                pacer_linux::signals::DeferTermination::new()
                    .context("--trace: blocking termination signals")?,
            )
        }
        None => None,
    };
    // Declared after `defer`, so dropped before it on every way out.
    let tracer = match trace {
        Some(_) => Some(Arc::new(
            SchedTracer::new().context("--trace: setting up the kernel recording")?,
        )),
        None => None,
    };
    let trace_file = trace.map(|s| files.open(s)).transpose()?;
    let csv = match jobs {
        Some(s) => Some(JobSink::for_path(
            a.jobs.as_deref().unwrap_or(Path::new("")),
            BufWriter::new(files.open(s)?),
            names.clone(),
        )?),
        None => None,
    };
    let logs = match log_dir {
        Some(d) => {
            let opened = log_slots
                .into_iter()
                .map(|(s, p)| Ok((p, files.open(s)?)))
                .collect::<Result<Vec<_>>>()?;
            Some(RtAppLogs::from_files(opened).with_context(|| format!("{flag} {}", d.display()))?)
        }
        None => None,
    };
    let bar = (interactive && std::io::stderr().is_terminal()).then(|| match duration {
        Some(d) => {
            let b = indicatif::ProgressBar::new(d.ns() / 1_000_000);
            b.set_style(
                indicatif::ProgressStyle::with_template("running {bar:40} {pos}/{len} ms ({eta} left)")
                    .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
            );
            b
        }
        None => {
            let b = indicatif::ProgressBar::new_spinner();
            b.set_style(
                indicatif::ProgressStyle::with_template("running {pos} ms (Ctrl-C ends the run)")
                    .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
            );
            b
        }
    });
    let log_basename = workload.settings.log_basename.clone();
    let fork_logs = log_dir.map(|d| ForkLogs {
        files: &mut files,
        flag,
        dir: d.to_path_buf(),
        basename: log_basename,
        replace: a.log_dir.is_some(),
    });
    let mut out = Sinks {
        summary: Summary::new(names.len()),
        csv,
        logs,
        fork_logs,
        log_error: None,
        bar,
        flush: FlushClock::new(),
        trace_jobs: a.trace_jobs.then(Vec::new),
    };
    let cfg = RunConfig {
        duration,
        seed: a.seed,
        calibration,
        logs: Some(plan.map_or(LogMode::Off, |(_, m)| m)),
        sched_trace: tracer.clone(),
        ..RunConfig::default()
    };
    let result = match &taskset {
        None => executor::run(&workload, &cfg, &mut out)
            .map(|r| (r, None))
            .map_err(explain),
        Some((tcfg, placed)) => {
            let opts = TaskSetRunOptions {
                duration: duration.unwrap_or(Duration::from_secs(10)),
                seed: a.seed,
                calibration,
                lock_memory: cfg.lock_memory,
                sched_trace: tracer.clone(),
            };
            match pacer_linux::taskset::run_placement(placed, tcfg, &opts, &mut out) {
                Ok(r) => Ok((r.run.clone(), Some(r))),
                Err(TaskSetError::Run(e)) => Err(explain(e)),
                Err(e) => Err(anyhow::Error::from(e)),
            }
        }
    };
    if let Some(b) = out.bar.take() {
        b.finish_and_clear();
    }
    let (report, taskset_report) = result?;
    // The records, then the tracefs instance removed, before anything is written.
    let recorded = tracer
        .as_ref()
        .map(|t| t.finish())
        .transpose()
        .context("--trace: reading the kernel's records")?;
    drop(cfg);
    drop(tracer);
    // Nothing is left in tracefs: a signal from here on acts as it would without --trace.
    drop(defer);
    if let (Some(c), Some(p)) = (out.csv.take(), &a.jobs) {
        c.finish()
            .with_context(|| format!("{}: writing job records", p.display()))?;
    }
    if let Some(e) = out.log_error.take() {
        return Err(anyhow::Error::from(e).context("opening the log of a forked thread"));
    }
    if let Some(l) = out.logs.take() {
        l.finish().context("writing the rt-app logs")?;
    }
    if report.dropped_records > 0 {
        bail!(
            "{} records were lost because the writer could not keep up with the threads; the job CSV, logs and summary are incomplete",
            report.dropped_records
        );
    }
    let summary = out
        .summary
        .report(&report.names, &report.counters, report.horizon_ns, report.cpus);
    let trace_info = match (trace_file, recorded, &a.trace) {
        (Some(f), Some(rec), Some(p)) => Some(write_trace(
            f,
            p,
            &rec,
            &report,
            out.trace_jobs.as_deref().unwrap_or_default(),
        )?),
        _ => None,
    };
    files.commit()?;
    print_results(
        &a,
        &workload.ignored,
        report,
        taskset_report,
        &summary,
        trace_info,
    )
}

/// Writes `--trace` from the run's records, and reports lost events on standard error.
fn write_trace(
    file: File,
    path: &Path,
    rec: &SchedTrace,
    report: &RunReport,
    jobs: &[JobRecord],
) -> Result<TraceInfo> {
    let lost = rec.lost();
    if lost > 0 {
        let per_cpu: Vec<String> = rec
            .lost_per_cpu
            .iter()
            .filter(|(_, n)| *n > 0)
            .map(|(c, n)| format!("CPU {c}: {n}"))
            .collect();
        eprintln!(
            "pacer run: warning: --trace: the kernel lost {lost} scheduling events ({}): its ring \
             buffer filled before pacer read it; the trace has gaps there",
            per_cpu.join(", ")
        );
    }
    let threads: Vec<(u32, &str)> = report.threads.iter().map(|t| (t.tid, t.name.as_str())).collect();
    let cmdline: Vec<String> = std::env::args().collect();
    let cmdline = cmdline.join(" ");
    let process = crate::run_trace::Process {
        pid: std::process::id() as i32,
        ppid: std::os::unix::process::parent_id() as i32,
        cmdline: &cmdline,
        threads: &threads,
    };
    let cpus = rec.lost_per_cpu.iter().map(|(c, _)| c + 1).max().unwrap_or(1);
    let (file, written) = crate::run_trace::write_perfetto(
        file,
        rec,
        &process,
        &pacer_linux::sys::Uname::this_machine(),
        cpus,
        jobs,
        report.origin_ns,
        &[],
    )
    .with_context(|| format!("{}: writing the trace", path.display()))?;
    if written.unrecorded_switch_ins > 0 {
        eprintln!(
            "pacer run: warning: --trace: {} times a thread of the run left a CPU the kernel did not \
             record it entering (seen on VMs for switches away from the idle task): the trace shows \
             those runs as the CPU's previous task (docs/linux.md, \"Scheduler traces of a run\")",
            written.unrecorded_switch_ins
        );
    }
    let bytes = file.metadata().map(|m| m.len()).unwrap_or(0);
    Ok(TraceInfo {
        file: path.display().to_string(),
        written,
        lost_events: lost,
        bytes,
    })
}

fn print_results(
    a: &Args,
    ignored: &[String],
    report: RunReport,
    taskset: Option<TaskSetReport>,
    summary: &SummaryReport,
    trace: Option<TraceInfo>,
) -> Result<()> {
    let cal = report.calibration;
    if !a.json {
        for w in &report.warnings {
            eprintln!("pacer run: warning: {}", pacer_model::text::escape_control(w));
        }
        println!(
            "ran {} on {} CPU{} for {} (seed {}, busy loop {:.3} ns/loop {}): {} jobs; stopped {}\n",
            pacer_model::text::escape_control(&a.file.display().to_string()),
            report.cpus,
            if report.cpus == 1 { "" } else { "s" },
            Duration(report.horizon_ns),
            report.seed,
            cal.ns_per_loop(),
            match (cal.measured, cal.realtime) {
                (false, _) => "as given",
                (true, true) => "measured at SCHED_FIFO 99",
                (true, false) => "measured without real-time priority",
            },
            report.jobs,
            stop_text(report.stopped_by)
        );
        if let Some(p) = report.rtapp_ns_per_loop {
            println!("`run` events used rt-app's loop at {p} ns/loop, the file's `global.calibration`\n");
        }
        print!("{}", render_text_labelled(summary, "run time (s)"));
        if let Some(t) = &taskset {
            print!("{}", taskset_text(t));
        }
        if let Some(t) = &trace {
            println!(
                "\ntrace {}: {} switches, {} wake-ups{} of the run's threads ({}), {} events lost",
                pacer_model::text::escape_control(&t.file),
                t.written.switches,
                t.written.wakings,
                if a.trace_jobs {
                    format!(", {} jobs", t.written.job_slices)
                } else {
                    String::new()
                },
                crate::sim::bytes(t.bytes),
                t.lost_events
            );
        }
        return Ok(());
    }
    let info = RunInfo {
        file: a.file.display().to_string(),
        seed: report.seed,
        calibration_ns_per_loop: cal.ns_per_loop(),
        calibration: cal,
        rtapp_ns_per_loop: report.rtapp_ns_per_loop,
        cpus: report.cpus,
        duration_ns: report.horizon_ns,
        stopped_by: report.stopped_by,
        jobs: report.jobs,
        dropped_records: report.dropped_records,
        origin_ns: report.origin_ns,
        trace,
        memory_locked: report.memory_locked,
        threads: report.threads,
        warnings: report.warnings,
        ignored_keys: ignored.to_vec(),
        taskset: taskset
            .map(|t| {
                // The executor's report is `run` already.
                let mut v = serde_json::to_value(&t)?;
                if let Some(o) = v.as_object_mut() {
                    o.remove("run");
                }
                Ok::<_, serde_json::Error>(v)
            })
            .transpose()?,
    };
    println!(
        "{}",
        crate::output::json_text("pacer.run/1", &JsonOut { run: info, summary })?
    );
    Ok(())
}

/// The task-set part of the text report: where each task ran and what the kernel counted.
fn taskset_text(t: &TaskSetReport) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let cluster = t
        .cluster_size
        .map(|k| format!(", clusters of {k}"))
        .unwrap_or_default();
    let _ = writeln!(
        s,
        "\n{} on {} CPU(s){cluster}, assignment {}:",
        t.policy, t.cpus, t.assign
    );
    for (b, cpus) in t.bins.iter().enumerate() {
        let names: Vec<&str> = t
            .tasks
            .iter()
            .filter(|m| m.bin == b)
            .map(|m| m.name.as_str())
            .collect();
        let _ = writeln!(
            s,
            "  CPUs {}: {}",
            pacer_linux::cpuset::format_cpu_list(cpus),
            if names.is_empty() {
                "-".to_string()
            } else {
                names.join(", ")
            }
        );
    }
    if t.cpusets.is_empty() {
        let _ = writeln!(s, "  (the machine's root domain; no cpuset)");
    } else {
        for d in &t.cpusets {
            let _ = writeln!(s, "  cpuset {} (removed after the run)", d.display());
        }
    }
    let mut table = crate::table::Table::new(&[
        "task", "cpus", "jobs", "cpu_ms", "util", "switches", "invol", "migr",
    ]);
    for m in &t.tasks {
        table.push(vec![
            pacer_model::text::escape_control(&m.name),
            pacer_linux::cpuset::format_cpu_list(&t.bins[m.bin]),
            m.jobs.to_string(),
            format!("{:.3}", m.cpu_time_ns as f64 / 1e6),
            format!("{:.4}", m.utilisation),
            m.context_switches.to_string(),
            m.involuntary_switches.to_string(),
            m.migrations.to_string(),
        ]);
    }
    let _ = write!(s, "\nmeasured on the kernel per task:\n{}", table.render());
    let _ = writeln!(
        s,
        "cache misses: {}",
        match &t.cache_misses {
            CacheMissCount::Counted { misses } => format!("{misses} (hardware PMU, whole run)"),
            CacheMissCount::Unavailable { reason } => format!("unavailable: {reason}"),
        }
    );
    s
}

/// The executor's error, with what to do about it.
fn explain(e: RunError) -> anyhow::Error {
    let hint = if e.is_permission() && !executor::is_root() {
        "\nhint: run as root (sudo pacer run …); SCHED_OTHER-only workloads with nice ≥ 0 need no privilege"
    } else if e.is_admission() {
        "\nhint: lower the reservations or run fewer SCHED_DEADLINE threads; `sudo pacer doctor` shows the cap, what holds it, and whether the kernel's accounting is intact"
    } else {
        ""
    };
    anyhow::anyhow!("{e}{hint}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn logs_are_written_when_the_file_or_the_command_line_asks() {
        let d = RunSettings::default();
        assert!(
            !file_asks_for_logs(&d),
            "rt-app's defaults: pacer writes no logs unasked"
        );
        let with = |f: fn(&mut RunSettings)| {
            let mut s = RunSettings::default();
            f(&mut s);
            s
        };
        // The parser sets `logs_set` when the file names logdir, log_basename or log_size, even
        // to rt-app's defaults ("./").
        assert!(file_asks_for_logs(&with(|s| s.logs_set = true)));
        assert!(!file_asks_for_logs(&with(|s| {
            s.logs_set = true;
            s.log_size = Some(0);
        })));

        let args = |log_dir: Option<&str>| Args {
            file: "w.json".into(),
            duration: None,
            jobs: None,
            log_dir: log_dir.map(PathBuf::from),
            cpus: None,
            taskset: Default::default(),
            seed: 1,
            calibration: None,
            json: false,
            lenient: false,
            trace: None,
            trace_jobs: false,
        };
        let mut w = Workload::default();
        let a = args(None);
        assert_eq!(log_plan(&a, &w), None);
        w.settings.logdir = "/tmp/results".into();
        w.settings.log_size = Some(2 << 20);
        w.settings.logs_set = true;
        let a = args(None);
        assert_eq!(
            log_plan(&a, &w),
            Some((Path::new("/tmp/results"), LogMode::Buffer { rows: 2 * 11915 + 1 }))
        );
        // --log-dir overrides the directory, and asks for logs even when the file disables them.
        w.settings.log_size = Some(0);
        let a = args(Some("logs"));
        assert_eq!(log_plan(&a, &w), Some((Path::new("logs"), LogMode::Stream)));
    }
}
