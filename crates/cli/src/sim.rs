//! `pacer sim`: run a task set or an rt-app file through the simulator, stream per-job records and
//! a trace, print the summary.

use std::fs::File;
use std::io::{BufWriter, IsTerminal};
use std::path::PathBuf;
use std::time::Instant as WallClock;

use anyhow::{bail, Context, Result};
use pacer_analysis::admission::{self, AdmissionConfig};
use pacer_model::{Duration, Reservation, TaskSet};
use pacer_sim::output::perfetto::PerfettoTrace;
use pacer_sim::output::summary::{render_text, Summary, SummaryReport};
use pacer_sim::output::trace::ChromeTrace;
use pacer_sim::record::{Fanout, JobRecord, ThreadId};
use pacer_sim::{Observer, Sim, SimConfig};
use pacer_workload::jobs::JobSink;
use pacer_workload::{Policy, Workload};
use serde::Serialize;

pub use pacer_workload::placement::{Sched, SchedPolicy, Scope};

use crate::analyze::parse_duration;
use crate::output::{FlushClock, Outputs, Stdout};

#[derive(clap::Args)]
#[command(
    after_help = "Examples:\n  \
pacer sim examples/textbook.json --policy g-edf --duration 1s\n  \
pacer gen --recipe rm-vs-edf --cpus 4 | pacer sim - --cpus 4 --policy c-edf --cluster-size 2\n  \
# a Perfetto trace: open run.pftrace in ui.perfetto.dev\n  \
pacer sim set.json --cpus 2 --policy p-rm --jobs jobs.csv --trace run.pftrace\n  \
# Chrome JSON instead: also jobs, throttling and misses\n  \
pacer sim set.json --cpus 2 --policy p-rm --trace trace.json\n  \
# an rt-app workload\n  \
pacer sim examples/rtapp-periodic.json --cpus 2 --duration 5s\n  \
# cache-reload costs from a calibration\n  \
pacer sim set.json --cpus 8 --policy g-edf --wss 256K --cache-model data/calibration/dev-vm.json\n  \
# plots and tables, a page to open in a browser\n  \
pacer sim set.json --cpus 4 --policy g-edf --report sim.html\n\n\
Task sets (docs/formats/taskset.md) run under --policy; rt-app files (a `tasks` object) keep the\n\
policies, priorities and CPUs they declare. Unfinished jobs at the end of the run are not reported.\n\n\
`pacer sim audio` runs the low-latency audio experiment (see `pacer sim audio --help`);\n\
`pacer sim vt-cfs` the VT-CFS paper's interactivity experiments (see `pacer sim vt-cfs --help`).",
    args_conflicts_with_subcommands = true,
    subcommand_negates_reqs = true
)]
pub struct Args {
    /// Task-set JSON or rt-app JSON file; `-` reads standard input.
    #[arg(required = true)]
    pub file: Option<PathBuf>,
    /// Run an rt-app file even if it uses what pacer cannot run as rt-app would: skip those and
    /// list them all. Without it such a file is refused, since skipping changes what the
    /// workload does. (Current rt-app's whole grammar is read: nothing is skipped today.)
    #[arg(long)]
    pub lenient: bool,
    #[command(subcommand)]
    pub command: Option<SimCommand>,
    /// Number of identical CPUs.
    #[arg(short = 'm', long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub cpus: u32,
    #[command(flatten)]
    pub taskset: crate::taskset_args::TaskSetArgs,
    /// Simulated time [default: the rt-app file's `global.duration`, else 10s].
    #[arg(short = 'd', long, value_parser = parse_duration)]
    pub duration: Option<Duration>,
    /// Seed of the execution-time draws (recorded in the output).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Cost of a context switch, added to the switched-in job's execution.
    #[arg(long, default_value = "0ns", value_parser = parse_duration)]
    pub context_switch_cost: Duration,
    /// Extra cost when the job resumes on another CPU.
    #[arg(long, default_value = "0ns", value_parser = parse_duration)]
    pub migration_cost: Duration,
    /// Wake-up latency: a thread whose timer or sleep expires, or that another thread wakes
    /// (mutex, condition, barrier, semaphore, resume), becomes runnable this much later (a
    /// timer job's release stays the expiry). A machine's figure: tests/rtapp/machine_profile.py
    /// measures it (docs/rtapp.md), `pacer compare sim.csv run.csv` estimates it from a run.
    #[arg(long, default_value = "0ns", value_parser = parse_duration)]
    pub wakeup_latency: Duration,
    /// Idle-exit latency: a thread put on a CPU that was idle runs this much later, uncharged
    /// (the CPU leaving its idle state; on a VM, the host running the halted vCPU again). A
    /// machine's figure, measured by tests/rtapp/machine_profile.py.
    #[arg(long, default_value = "0ns", value_parser = parse_duration)]
    pub idle_exit_latency: Duration,
    /// NI_RANDOM's newidle ratio (0–1024) at the start: a CPU going idle tries to pull a fair
    /// thread with probability (1 + N) / 1024, and the kernel then follows its success. It is the
    /// machine's recent history, measured by tests/rtapp/machine_profile.py [default: 512, the kernel's
    /// value for a freshly built domain].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(0..=1024))]
    pub newidle_ratio: Option<u64>,
    /// Multiply the work of every `run` event and task-set job by F (> 0): how much slower the
    /// measured machine runs calibrated work (estimated by `pacer compare` too).
    #[arg(long, default_value_t = 1.0, value_name = "F")]
    pub work_scale: f64,
    /// Costs of rt-app's `memrun` accesses on the machine to simulate: the output of
    /// crates/sim/tools/memrun.c run there (`./memrun > FILE`). Default: the figures measured on
    /// pacer's development machine (docs/simulator.md).
    #[arg(long, value_name = "FILE")]
    pub memrun_cost: Option<PathBuf>,
    /// The migration and cache-reload cost model: a thread with a working set (a task's
    /// `wss_bytes`, `--wss`, an rt-app `pacer_wss` phase) that switches in on a CPU whose cache no
    /// longer holds it (it migrated, or others evicted it) pays the reload time of the missing
    /// part, from this calibration profile (written by `pacer calibrate`; the development
    /// machine's is data/calibration/dev-vm.json). Off by default (docs/simulator.md, "Cache
    /// model").
    #[arg(long, value_name = "FILE")]
    pub cache_model: Option<PathBuf>,
    /// Working-set size of every task of a task set that gives none (bytes, or 16K, 256K, 1M;
    /// a multiple of 64): each job then passes over that many bytes (docs/formats/taskset.md).
    #[arg(long, value_name = "SIZE", value_parser = pacer_model::bytes::parse_bytes)]
    pub wss: Option<u64>,
    /// How long a thread moving into an rt-app task group sleeps when no other move came just
    /// before (writing to a cgroup's `tasks` waits for an RCU grace period) [default: this
    /// development VM's mean, 9.6 ms, see docs/simulator.md, "Task groups"].
    #[arg(long, value_parser = parse_duration, value_name = "DUR")]
    pub taskgroup_move_cost: Option<Duration>,
    /// How long a move takes right after another one (the grace period is skipped)
    /// [default: this VM's mean, 8 µs].
    #[arg(long, value_parser = parse_duration, value_name = "DUR")]
    pub taskgroup_move_fast_cost: Option<Duration>,
    /// How long after a move ends the next one is still fast [default: this VM's, 16.5 ms].
    #[arg(long, value_parser = parse_duration, value_name = "DUR")]
    pub taskgroup_move_window: Option<Duration>,
    /// Write one CSV row per finished job here (docs/formats/jobs-csv.md). Rows stream to
    /// `.NAME.pacer-tmp-PID` beside the file, which replaces it only if the simulation succeeds;
    /// the input, the other output, devices and FIFOs are refused (docs/output-files.md). A name
    /// ending in `.parquet` writes the same columns as Parquet.
    #[arg(long)]
    pub jobs: Option<PathBuf>,
    /// Write a trace here, for ui.perfetto.dev; replaced only if the simulation succeeds, as
    /// --jobs. The format follows the extension unless --trace-format says: `.json` writes Chrome
    /// trace-event JSON (also loads in chrome://tracing; shows jobs, throttling and misses);
    /// `.perfetto-trace`, `.pftrace`, `.pb` and any other extension write Perfetto's protobuf
    /// format, shaped like a kernel ftrace recording (per-CPU scheduling, thread states and
    /// wake-ups; loads in trace_processor; much smaller and faster to write).
    #[arg(long)]
    pub trace: Option<PathBuf>,
    /// Format of --trace, overriding its extension.
    #[arg(long, value_name = "FORMAT", requires = "trace")]
    pub trace_format: Option<TraceFormat>,
    /// Also put each job (a slice from release to finish) and each deadline miss on its
    /// thread's track in the Perfetto protobuf trace (the JSON trace always has them); adds
    /// about two fifths to the file.
    #[arg(long, requires = "trace")]
    pub trace_jobs: bool,
    /// Write an HTML report here (self-contained, no scripts): the run's settings, the summary
    /// table, response-time CDFs per task, the normalised-laxity distribution, deadline misses,
    /// migrations and context switches per task, and a CPU timeline of the start of the run.
    /// Written only if the simulation succeeds; the output-file rules of --jobs apply.
    #[arg(long, value_name = "FILE.html")]
    pub report: Option<PathBuf>,
    /// Machine-readable JSON summary on standard output.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub kernel: crate::sim_kernel::KernelArgs,
}

/// Built-in experiments of `pacer sim`.
#[derive(clap::Subcommand)]
pub enum SimCommand {
    /// The low-latency audio experiment (adaptive-deadline-audio-android.txt §6): LatencyMark and
    /// CPU energy under SCHED_FIFO + WALT, SCHED_FIFO at max frequency, adaptive SCHED_DEADLINE
    /// and a clairvoyant bound.
    Audio(crate::audio::AudioArgs),
    /// The VT-CFS paper's experiments (vt-cfs-interactivity-android.txt §VI): Fig. 6, response
    /// time with framework-assisted boosting, and Fig. 7, Interbench-style latency, under CFS,
    /// VT-CFS and EEVDF.
    VtCfs(crate::vtcfs::Args),
}

/// The input file, after deciding what it is.
pub(crate) enum Input {
    TaskSet(TaskSet),
    RtApp(Workload),
}

/// Reads a task-set or rt-app file (`-`: standard input) and decides which it is.
pub(crate) fn read_input(path: &PathBuf, lenient: bool) -> Result<Input> {
    let (text, name) = if path.as_os_str() == "-" {
        (crate::read_stdin()?, "<stdin>".to_string())
    } else {
        let s = std::fs::read_to_string(path).with_context(|| format!("{}: cannot read", path.display()))?;
        (s, path.display().to_string())
    };
    // rt-app files have a `tasks` object, pacer task sets a `tasks` array; rt-app files may carry
    // comments, so anything that is not a task set is handed to the rt-app parser.
    let looks_like_taskset = serde_json::from_str::<serde_json::Value>(&text)
        .ok()
        .is_some_and(|v| v.get("tasks").is_some_and(|t| t.is_array()));
    if looks_like_taskset {
        Ok(Input::TaskSet(pacer_model::parse_taskset(&text, &name)?))
    } else {
        let opts = pacer_workload::RtAppOptions { lenient };
        Ok(Input::RtApp(pacer_workload::parse_rtapp_with(
            &text, &name, &opts,
        )?))
    }
}

/// Prints, in full, what the rt-app parser noted: keys rt-app reads but that do not change what
/// runs, and with `--lenient` what was skipped (never a silent change of meaning).
pub(crate) fn warn_ignored(command: &str, ignored: &[String]) {
    if ignored.is_empty() {
        return;
    }
    let n = ignored.len();
    eprintln!(
        "{command}: note: {n} rt-app key{} read but not run:",
        if n == 1 { "" } else { "s" }
    );
    for k in ignored {
        eprintln!("  {}", pacer_model::text::escape_control(k));
    }
}

fn build_workload(set: &TaskSet, a: &Args) -> Result<Workload> {
    let cfg = a.taskset.configuration(a.cpus)?;
    let placed = match a.wss {
        Some(bytes) => {
            if bytes == 0 || !bytes.is_multiple_of(64) || bytes > 1 << 30 {
                bail!("--wss {bytes}: expected a working-set size that is a positive multiple of 64 bytes, at most 1G");
            }
            let mut with = set.clone();
            with.wss_bytes = Some(bytes);
            pacer_workload::placement::place(&with, &cfg)?
        }
        None => pacer_workload::placement::place(set, &cfg)?,
    };
    Ok(placed.workload)
}

/// Warns (does not refuse) when the kernel's admission control would reject the reservations:
/// overloaded sets are legitimate simulation experiments.
fn admission_note(w: &Workload, m: usize) -> Option<String> {
    let rs: Vec<Reservation> = w
        .threads
        .iter()
        .filter_map(|t| match t.policy {
            Policy::Deadline(r) => Some(r),
            _ => None,
        })
        .collect();
    if rs.is_empty() {
        return None;
    }
    let rep = admission::admit(&AdmissionConfig::linux_default(m), &rs);
    let refused = rep.refused.iter().filter(|r| r.is_some()).count();
    (refused > 0).then(|| {
        format!(
            "note: Linux's admission control would refuse {refused} of {} SCHED_DEADLINE reservations on {m} CPUs (Σ bandwidth over the 95% cap less the fair servers); simulating anyway",
            rs.len()
        )
    })
}

#[derive(Serialize)]
pub(crate) struct RunInfo {
    pub file: String,
    pub seed: u64,
    pub cpus: u32,
    pub policy: Option<String>,
    pub simulated_ns: u64,
    pub events: u64,
    pub jobs: u64,
    pub wall_seconds: f64,
    pub jobs_per_wall_second: f64,
    pub events_per_wall_second: f64,
    pub ignored_keys: Vec<String>,
    /// The machine overheads simulated (all 0 and a scale of 1 unless given).
    pub overheads: SimOverheads,
    /// The simulated kernel's scheduler settings.
    pub kernel: crate::sim_kernel::KernelInfo,
    /// The cache model, when `--cache-model` turned it on: its profile and what it charged.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cache: Option<CacheInfo>,
}

#[derive(Serialize)]
pub(crate) struct CacheInfo {
    pub profile: PathBuf,
    pub charged: pacer_sim::CacheStats,
}

#[derive(Serialize)]
pub(crate) struct SimOverheads {
    pub context_switch_cost_ns: u64,
    pub migration_cost_ns: u64,
    pub wakeup_latency_ns: u64,
    pub idle_exit_latency_ns: u64,
    pub newidle_ratio: u64,
    pub work_scale: f64,
    /// The `--memrun-cost` file, when the `memrun` costs are not the default ones.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memrun_cost: Option<PathBuf>,
    /// The cost of moves between task groups, for workloads that have some.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub taskgroup_moves: Option<TaskgroupMoves>,
}

/// The move costs simulated (`SimConfig::taskgroup_move_*`), ns.
#[derive(Serialize)]
pub(crate) struct TaskgroupMoves {
    pub cost_ns: u64,
    pub fast_cost_ns: u64,
    pub window_ns: u64,
}

impl Args {
    /// Defaults for a task set already in memory (used by `pacer demo`).
    pub(crate) fn for_taskset(
        cpus: u32,
        policy: SchedPolicy,
        cluster_size: Option<u32>,
        duration: Duration,
        seed: u64,
    ) -> Self {
        Args {
            file: Some(PathBuf::from("<generated>")),
            lenient: false,
            command: None,
            cpus,
            taskset: crate::taskset_args::TaskSetArgs {
                policy: Some(policy),
                cluster_size,
                ..Default::default()
            },
            duration: Some(duration),
            seed,
            context_switch_cost: Duration::ZERO,
            migration_cost: Duration::ZERO,
            wakeup_latency: Duration::ZERO,
            idle_exit_latency: Duration::ZERO,
            newidle_ratio: None,
            work_scale: 1.0,
            memrun_cost: None,
            cache_model: None,
            wss: None,
            taskgroup_move_cost: None,
            taskgroup_move_fast_cost: None,
            taskgroup_move_window: None,
            jobs: None,
            trace: None,
            trace_format: None,
            trace_jobs: false,
            report: None,
            json: false,
            kernel: Default::default(),
        }
    }
}

#[derive(Serialize)]
struct JsonOut<'a> {
    run: RunInfo,
    summary: &'a SummaryReport,
}

pub fn run(mut a: Args) -> Result<()> {
    match a.command.take() {
        Some(SimCommand::Audio(audio)) => return crate::audio::run(audio),
        Some(SimCommand::VtCfs(v)) => return crate::vtcfs::run(v),
        None => {}
    }
    let Some(file) = &a.file else {
        bail!("expected a task-set or rt-app file (or `pacer sim audio`, `pacer sim vt-cfs`)");
    };
    let mut out = Outputs::new(Stdout::Busy);
    out.input(file);
    let jobs = a.jobs.as_deref().map(|p| out.file("--jobs", p)).transpose()?;
    let trace = a.trace.as_deref().map(|p| out.file("--trace", p)).transpose()?;
    let html = a.report.as_deref().map(|p| out.file("--report", p)).transpose()?;
    let input = read_input(file, a.lenient)?;
    let files = Files {
        jobs: jobs.map(|s| out.open(s)).transpose()?,
        trace: trace.map(|s| out.open(s)).transpose()?,
    };
    let mut collector = html.map(|_| crate::sim_report::Collector::new());
    let (report, info, names) = simulate(&a, input, !a.json, files, collector.as_mut())?;
    if let (Some(slot), Some(c)) = (html, collector) {
        let page = crate::sim_report::build(c, &report, &info, &names, &crate::command_line())
            .context("--report")?;
        out.write(slot, page.as_bytes())?;
    }
    out.commit()?;
    if a.json {
        println!(
            "{}",
            crate::output::json_text(
                "pacer.sim/1",
                &JsonOut {
                    run: info,
                    summary: &report
                }
            )?
        );
    } else {
        println!(
            "simulated {} on {} CPU{} ({}fair class {}, seed {}): {} jobs, {} events in {:.3} s wall ({:.0} jobs/s, {:.0} events/s)\n",
            Duration(info.simulated_ns),
            a.cpus,
            if a.cpus == 1 { "" } else { "s" },
            info.policy.as_ref().map(|p| format!("{p}, ")).unwrap_or_default(),
            info.kernel.fair,
            a.seed,
            info.jobs,
            info.events,
            info.wall_seconds,
            info.jobs_per_wall_second,
            info.events_per_wall_second
        );
        if let Some(c) = &info.cache {
            let s = &c.charged;
            println!(
                "cache model ({}): {} reloads after a migration, {} after an eviction, {} cold loads, {} warm resumes; {} reloaded ({} from the shared cache), {:.3} ms charged\n",
                c.profile.display(),
                s.migration_reloads,
                s.eviction_reloads,
                s.cold_loads,
                s.warm_resumes,
                bytes(s.bytes_from_shared + s.bytes_from_memory),
                bytes(s.bytes_from_shared),
                s.reload_ns as f64 / 1e6
            );
        }
        let text = render_text(&report);
        print!("{text}");
        if !text.ends_with('\n') {
            println!();
        }
    }
    Ok(())
}

pub(crate) fn bytes(b: u64) -> String {
    if b >= 10 << 20 {
        format!("{} MiB", b >> 20)
    } else {
        format!("{} KiB", b >> 10)
    }
}

/// The format of `--trace`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum TraceFormat {
    /// Perfetto's protobuf trace format (ftrace scheduling events).
    Perfetto,
    /// Chrome trace-event JSON.
    Json,
}

impl TraceFormat {
    /// The format `--trace-format` gives, else the one `path`'s extension implies (JSON only
    /// for `.json`, so that the compact format is the default).
    pub fn of(explicit: Option<TraceFormat>, path: &std::path::Path) -> TraceFormat {
        explicit.unwrap_or_else(|| {
            let json = path.extension().is_some_and(|e| e.eq_ignore_ascii_case("json"));
            if json {
                TraceFormat::Json
            } else {
                TraceFormat::Perfetto
            }
        })
    }
}

/// The `--trace` writer.
enum TraceOut {
    Json(ChromeTrace<BufWriter<File>>),
    Perfetto(PerfettoTrace<BufWriter<File>>),
}

impl TraceOut {
    fn observer(&mut self) -> &mut dyn Observer {
        match self {
            TraceOut::Json(t) => t,
            TraceOut::Perfetto(t) => t,
        }
    }

    fn finish(self, end_ns: u64) -> std::io::Result<()> {
        match self {
            TraceOut::Json(t) => t.finish(end_ns).map(drop),
            TraceOut::Perfetto(t) => t.finish().map(drop),
        }
    }
}

/// Where `simulate` streams the job rows (`--jobs`) and the trace (`--trace`): files opened by
/// [`Outputs`], which the caller commits once the simulation has succeeded.
#[derive(Default)]
pub(crate) struct Files {
    pub jobs: Option<File>,
    pub trace: Option<File>,
}

/// The job CSV as an observer that pushes its rows to the file every [`FlushClock`] interval, so
/// that a simulation killed by SIGKILL leaves them in the temporary file.
struct PacedCsv {
    csv: JobSink<BufWriter<File>>,
    clock: FlushClock,
    rows: u32,
}

impl PacedCsv {
    fn tick(&mut self) {
        // An error is kept by the CSV writer and reported by `finish`.
        if self.clock.due() {
            let _ = self.csv.flush();
        }
    }
}

impl Observer for PacedCsv {
    fn thread_started(&mut self, thread: ThreadId, name: &str) {
        self.csv.set_name(thread, name);
    }
    fn job(&mut self, r: &JobRecord) {
        self.csv.write(r);
        // Reading the clock every 64 rows costs nothing measurable next to formatting them.
        self.rows = self.rows.wrapping_add(1);
        if self.rows.is_multiple_of(64) {
            self.tick();
        }
    }
}

/// Runs one simulation; `interactive` enables warnings and the progress bar on standard error,
/// `collect` keeps what `--report` draws. Returns the summary, the run's settings and the
/// threads' names.
pub(crate) fn simulate(
    a: &Args,
    input: Input,
    interactive: bool,
    files: Files,
    mut collect: Option<&mut crate::sim_report::Collector>,
) -> Result<(SummaryReport, RunInfo, Vec<String>)> {
    let m = a.cpus as usize;
    let (workload, policy_label) = match input {
        Input::TaskSet(set) => (build_workload(&set, a)?, Some(a.taskset.policy().to_string())),
        Input::RtApp(w) => {
            let given = a.taskset.given();
            if !given.is_empty() {
                bail!(
                    "{}: only for task sets; an rt-app file sets each thread's policy, CPUs and \
                     work itself (docs/simulator.md, Workloads)",
                    given.join(", ")
                );
            }
            (w, None)
        }
    };
    if interactive {
        warn_ignored("pacer sim", &workload.ignored);
    }
    if let Some(n) = admission_note(&workload, m) {
        if interactive {
            eprintln!("pacer sim: {n}");
        }
    }
    let duration = a
        .duration
        .or(workload.duration)
        .unwrap_or(Duration::from_secs(10));
    let horizon = duration.ns();
    if horizon == 0 {
        bail!("--duration: expected a simulated time > 0");
    }
    // Beyond 1000× the work of a 1 ms job outlasts any run, and products overflow the ns range.
    if !(a.work_scale.is_finite() && a.work_scale > 0.0 && a.work_scale <= 1000.0) {
        bail!("--work-scale {:?}: expected a factor in (0, 1000]", a.work_scale);
    }
    let mut cfg = SimConfig::new(m);
    cfg.seed = a.seed;
    cfg.context_switch_cost = a.context_switch_cost.ns();
    cfg.migration_cost = a.migration_cost.ns();
    cfg.wakeup_latency = a.wakeup_latency.ns();
    cfg.idle_exit_latency = a.idle_exit_latency.ns();
    if let Some(r) = a.newidle_ratio {
        cfg.newidle_ratio = r;
    }
    cfg.work_scale = a.work_scale;
    if let Some(path) = &a.memrun_cost {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("--memrun-cost: reading {}", path.display()))?;
        cfg.memrun = pacer_sim::MemRunCost::from_tool_output(&text)
            .with_context(|| format!("--memrun-cost: {}", path.display()))?;
    }
    if let Some(d) = a.taskgroup_move_cost {
        cfg.taskgroup_move_ns = d.ns();
    }
    if let Some(path) = &a.cache_model {
        let profile = pacer_workload::CacheProfile::read(path).context("--cache-model")?;
        cfg.cache_model = Some(std::sync::Arc::new(profile));
    }
    if let Some(d) = a.taskgroup_move_fast_cost {
        cfg.taskgroup_move_fast_ns = d.ns();
    }
    if let Some(d) = a.taskgroup_move_window {
        cfg.taskgroup_move_window_ns = d.ns();
    }
    let has_groups = workload.threads.iter().any(|t| t.uses_taskgroups());
    let taskgroup_moves = has_groups.then_some(TaskgroupMoves {
        cost_ns: cfg.taskgroup_move_ns,
        fast_cost_ns: cfg.taskgroup_move_fast_ns,
        window_ns: cfg.taskgroup_move_window_ns,
    });
    let kernel = a.kernel.apply(&mut cfg, m)?;
    let ignored = workload.ignored.clone();
    let mut sim = match Sim::new(workload, cfg) {
        Ok(s) => s,
        Err(e @ pacer_sim::SimError::AffinityOutOfRange { cpu, .. }) => {
            bail!(
                "setting up the simulation: {e}: simulate {} CPUs with --cpus",
                cpu + 1
            )
        }
        Err(e) => return Err(e).context("setting up the simulation"),
    };
    let names = sim.thread_names();

    let mut summary = Summary::new(names.len());
    let mut csv = match files.jobs {
        Some(f) => Some(PacedCsv {
            csv: JobSink::for_path(
                a.jobs.as_deref().unwrap_or(std::path::Path::new("")),
                BufWriter::new(f),
                names.clone(),
            )?,
            clock: FlushClock::new(),
            rows: 0,
        }),
        None => None,
    };
    let format = a.trace.as_deref().map(|p| TraceFormat::of(a.trace_format, p));
    let mut trace = files.trace.map(|f| match format {
        Some(TraceFormat::Json) => TraceOut::Json(ChromeTrace::new(BufWriter::new(f), names.clone(), a.cpus)),
        _ => {
            let t = PerfettoTrace::for_simulation(BufWriter::new(f), &sim, a.cpus);
            TraceOut::Perfetto(if a.trace_jobs { t.with_job_slices() } else { t })
        }
    });

    let bar = (interactive && std::io::stderr().is_terminal()).then(|| {
        let b = indicatif::ProgressBar::new(horizon / 1_000_000);
        b.set_style(
            indicatif::ProgressStyle::with_template(
                "simulating {bar:40} {pos}/{len} ms model time ({eta} left)",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        b
    });
    let started = WallClock::now();
    // Run in slices so the progress bar moves; the slicing does not change the schedule.
    let steps = 200u64;
    for i in 1..=steps {
        let until = if i == steps { horizon } else { horizon / steps * i };
        let mut observers: Vec<&mut dyn Observer> = vec![&mut summary];
        if let Some(c) = csv.as_mut() {
            observers.push(c);
        }
        if let Some(t) = trace.as_mut() {
            observers.push(t.observer());
        }
        if let Some(c) = collect.as_deref_mut() {
            observers.push(c);
        }
        sim.run_until(until, &mut Fanout(observers));
        if let Some(c) = csv.as_mut() {
            c.tick();
        }
        if let Some(b) = &bar {
            b.set_position(until / 1_000_000);
        }
    }
    let wall = started.elapsed().as_secs_f64();
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    if let (Some(c), Some(p)) = (csv, &a.jobs) {
        c.csv
            .finish()
            .with_context(|| format!("{}: writing job records", p.display()))?;
    }
    if let (Some(t), Some(p)) = (trace, &a.trace) {
        t.finish(horizon)
            .with_context(|| format!("{}: writing the trace", p.display()))?;
    }
    if let Some(e) = sim.failure() {
        bail!("the simulation stopped at {} ms: {e}", sim.now() / 1_000_000);
    }
    // Threads `fork` events started are named now.
    let names = sim.thread_names();
    let report = summary.report(&names, &sim.stats(), horizon, a.cpus);
    let info = RunInfo {
        file: a
            .file
            .as_ref()
            .map_or_else(String::new, |f| f.display().to_string()),
        seed: a.seed,
        cpus: a.cpus,
        policy: policy_label,
        simulated_ns: horizon,
        events: sim.events_processed(),
        jobs: sim.jobs_finished(),
        wall_seconds: wall,
        jobs_per_wall_second: sim.jobs_finished() as f64 / wall.max(1e-9),
        events_per_wall_second: sim.events_processed() as f64 / wall.max(1e-9),
        ignored_keys: ignored,
        overheads: SimOverheads {
            context_switch_cost_ns: a.context_switch_cost.ns(),
            migration_cost_ns: a.migration_cost.ns(),
            wakeup_latency_ns: a.wakeup_latency.ns(),
            idle_exit_latency_ns: a.idle_exit_latency.ns(),
            newidle_ratio: a.newidle_ratio.unwrap_or(pacer_sim::BOOT_NEWIDLE_RATIO),
            work_scale: a.work_scale,
            memrun_cost: a.memrun_cost.clone(),
            taskgroup_moves,
        },
        cache: a.cache_model.as_ref().map(|f| CacheInfo {
            profile: f.clone(),
            charged: sim.cache_stats().unwrap_or_default(),
        }),
        kernel,
    };
    Ok((report, info, names))
}
