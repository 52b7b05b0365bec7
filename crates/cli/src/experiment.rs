//! `pacer experiment`: runs an experiment spec (or the RM-vs-EDF paper's sweep) through
//! `pacer_experiments::sweep`, with progress, resume, shards, merge and reports.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use pacer_experiments::sweep::{
    self, aggregate, execute, report, spec::parse_size, Backend, Configuration, LinuxRunner, Runner, Shard,
    SimRunner, Spec, Store,
};
use pacer_linux::run::signal_name;
use pacer_linux::signals::{SignalFd, TERMINATING};
use pacer_model::Duration;
use pacer_workload::calibration::CacheProfile;

use crate::analyze::parse_duration;

#[derive(clap::Args)]
#[command(
    after_help = "Examples:\n  \
pacer experiment rm-vs-edf --cpus 48          # the paper's Table 4 grid, simulated\n  \
pacer experiment rm-vs-edf --cpus 48 --duration 60s --report rm-vs-edf.html\n  \
pacer experiment rm-vs-edf --cpus 4 --x 2 --r 0.6,0.8 --sets 1 --duration 2s --json\n  \
pacer experiment examples/experiment.toml --out results\n  \
pacer experiment spec.toml --out part3 --shard 3/8   # one of 8 shards\n  \
pacer experiment merge part1 part2 part3 --out all --report all.html\n\n\
Results are cached per run in the output directory (one JSON file per set, configuration,\n\
backend and seed): running the same command again resumes and skips what is done. A directory\n\
holding another experiment is refused. Tables: Table 4's layout, mean ± sd over the sets of a\n\
row; rates per task per second. Spec format: docs/formats/experiment-toml.md; the paper
comparison, Slurm and GNU parallel recipes: docs/experiments/rm-vs-edf.md.\n\n\
Exit status: 0 = every run done; 1 = refused, or some run failed (the same command retries it);
128 + N = stopped by signal N (Ctrl-C, SIGTERM, SIGHUP): the runs done are saved and the same
command resumes.",
    args_conflicts_with_subcommands = true,
    subcommand_negates_reqs = true
)]
pub struct Args {
    /// Experiment spec (TOML, docs/formats/experiment-toml.md).
    #[arg(required = true)]
    pub file: Option<PathBuf>,
    #[command(subcommand)]
    pub command: Option<Sub>,
    #[command(flatten)]
    pub out: OutArgs,
}

#[derive(clap::Subcommand)]
pub enum Sub {
    /// The RM-vs-EDF paper's sweep (rm-vs-edf-multicore-linux.txt §5.3–5.4): N = x·m tasks,
    /// U = R·m, 6 configurations (G/C/P × EDF/RM).
    RmVsEdf(Box<RmVsEdfArgs>),
    /// Merge shard directories and print (and with --out write) the tables of the whole experiment.
    Merge(MergeArgs),
}

#[derive(clap::Args)]
pub struct OutArgs {
    /// Output directory (results cache and tables) [default: experiment-NAME-HASH, HASH naming
    /// the spec, so the same command resumes in the same place].
    #[arg(short, long)]
    pub out: Option<PathBuf>,
    /// Run only shard K of N (K in 1..=N): every N-th run of the matrix. Merge the shards'
    /// directories with `pacer experiment merge`.
    #[arg(long, value_name = "K/N")]
    pub shard: Option<Shard>,
    /// Machine-readable results on standard output (schema pacer.experiment/1).
    #[arg(long)]
    pub json: bool,
    /// Write an HTML report (tables, error bars, laxity CDFs) here.
    #[arg(long, value_name = "FILE.html")]
    pub report: Option<PathBuf>,
}

#[derive(clap::Args)]
pub struct RmVsEdfArgs {
    /// Number of CPUs m.
    #[arg(short = 'm', long, default_value_t = 48, value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub cpus: u32,
    /// Tasks per CPU x (N = x·m), comma-separated.
    #[arg(long, value_delimiter = ',', default_values_t = [2usize, 3, 4])]
    pub x: Vec<usize>,
    /// Utilisation per CPU R (U = R·m), comma-separated.
    #[arg(long, value_delimiter = ',', default_values_t = [0.6, 0.7, 0.8])]
    pub r: Vec<f64>,
    /// Task sets per (x, R) point (the paper: 3).
    #[arg(long, default_value_t = 3, value_parser = crate::count_in::<1, 1000>)]
    pub sets: usize,
    /// Length of each run (the paper: 60s; shorter keeps a plain run quick).
    #[arg(short, long, default_value = "10s", value_parser = parse_duration)]
    pub duration: Duration,
    /// Working-set size of the test program (recorded; the simulator has no cache model yet).
    #[arg(long, default_value = "16KiB")]
    pub wss: String,
    /// Seed of the set generation and of each run (recorded in every output).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Where the runs execute: sim, linux, or both (comma-separated). linux needs root: each
    /// run makes one exclusive cpuset per partition or cluster and removes it afterwards, also
    /// on Ctrl-C; runs go one at a time.
    #[arg(long, value_delimiter = ',', default_value = "sim")]
    pub backend: Vec<String>,
    /// SCHED_FLAG_RECLAIM (GRUB) on the EDF reservations: a job running past C uses bandwidth
    /// others leave idle instead of waiting for its next period (the paper's patched kernel had
    /// soft reservations; this is mainline's nearest).
    #[arg(long)]
    pub reclaim: bool,
    /// Each job's work as a fraction of its C, in (0, 1]; reservations keep C. The paper's jobs
    /// stayed below their WCET (§5.2); on the kernel a job of exactly C overruns a runtime of C
    /// by its own overheads and is throttled, and with --cache-model so is a simulated one.
    #[arg(long, default_value_t = 1.0)]
    pub work: f64,
    /// The simulator's cache-reload profile (`pacer calibrate -o FILE`; data/calibration/ has
    /// this VM's): a job resuming where its working set (--wss) is not cached pays the measured
    /// reload, so migrations cost time in simulation as on the machine.
    #[arg(long, value_name = "FILE")]
    pub cache_model: Option<PathBuf>,
    /// Configurations, comma-separated {g,c,p}-{edf,rm,dm} [default: the paper's six].
    #[arg(long, value_delimiter = ',')]
    pub configs: Vec<String>,
    /// CPUs per cluster for c-* [default: 6 (the paper's L3 domains) when it divides --cpus].
    #[arg(long)]
    pub cluster_size: Option<usize>,
    /// Placement for c-* and p-*: a heuristic (wfd, ffd, bfd…) or `ilp` (the paper's min–max
    /// load, under --ilp-time-limit) [default: wfd].
    #[arg(long, default_value = "wfd")]
    pub assign: String,
    /// Time limit of each ILP solve.
    #[arg(long, default_value = "2s", value_parser = parse_duration)]
    pub ilp_time_limit: Duration,
    #[command(flatten)]
    pub out: OutArgs,
}

#[derive(clap::Args)]
pub struct MergeArgs {
    /// Shard directories of one experiment.
    #[arg(required = true, num_args = 1..)]
    pub dirs: Vec<PathBuf>,
    /// Write the merged results here (all run files, tables); must not be one of the inputs.
    #[arg(short, long)]
    pub out: Option<PathBuf>,
    /// Machine-readable results on standard output.
    #[arg(long)]
    pub json: bool,
    /// Write an HTML report here.
    #[arg(long, value_name = "FILE.html")]
    pub report: Option<PathBuf>,
}

/// Runs the command; returns the exit status (0, or 128 + N when signal N interrupted the sweep).
pub fn run(a: Args) -> Result<u8> {
    match a.command {
        Some(Sub::RmVsEdf(r)) => {
            let spec = rm_vs_edf_spec(&r)?;
            run_spec(&spec, &r.out, None)
        }
        Some(Sub::Merge(m)) => merge(&m).map(|()| 0),
        None => {
            let Some(file) = a.file else {
                bail!("expected a spec file, `rm-vs-edf` or `merge`");
            };
            let spec = Spec::from_file(&file)?;
            run_spec(&spec, &a.out, Some(&file))
        }
    }
}

fn rm_vs_edf_spec(r: &RmVsEdfArgs) -> Result<Spec> {
    let cpus = r.cpus as usize;
    if r.duration.ns() == 0 {
        bail!("--duration: expected a duration > 0");
    }
    let mut spec = Spec::rm_vs_edf(cpus, r.duration, r.seed);
    if r.x.is_empty() || r.x.iter().any(|&x| !(1..=64).contains(&x)) {
        bail!("--x {:?}: expected tasks per CPU in 1..=64", r.x);
    }
    if r.r.is_empty() || r.r.iter().any(|&v| !(v > 0.0 && v <= 1.0)) {
        bail!("--r {:?}: expected utilisations per CPU in (0, 1]", r.r);
    }
    if let sweep::spec::Generator::RmVsEdf { x, r: rr, .. } = &mut spec.generator {
        *x = r.x.clone();
        *rr = r.r.clone();
    }
    spec.sets = r.sets;
    spec.wss_bytes =
        Some(parse_size(&r.wss).with_context(|| format!("--wss {}: expected a size such as 16KiB", r.wss))?);
    let mut backends = Vec::new();
    for b in &r.backend {
        let list: &[Backend] = match b.as_str() {
            "sim" => &[Backend::Sim],
            "linux" => &[Backend::Linux],
            "both" => &[Backend::Sim, Backend::Linux],
            _ => bail!("--backend {b}: expected sim, linux or both"),
        };
        for be in list {
            if !backends.contains(be) {
                backends.push(*be);
            }
        }
    }
    spec.backends = backends;
    spec.reclaim = r.reclaim;
    if !(r.work > 0.0 && r.work <= 1.0) {
        bail!("--work {}: expected a fraction of C in (0, 1]", r.work);
    }
    spec.work = r.work;
    spec.cache_model = r.cache_model.as_ref().map(|p| p.display().to_string());
    if !r.configs.is_empty() {
        spec.configurations = r
            .configs
            .iter()
            .map(|c| {
                Configuration::parse(c)
                    .with_context(|| format!("--configs {c}: expected {{g,c,p}}-{{edf,rm,dm}}"))
            })
            .collect::<Result<_>>()?;
    }
    if let Some(k) = r.cluster_size {
        if k == 0 || !cpus.is_multiple_of(k) {
            bail!("--cluster-size {k}: expected a divisor of --cpus {cpus}");
        }
        spec.cluster_size = k;
    }
    if r.assign != "ilp" && r.assign.parse::<pacer_analysis::partition::Heuristic>().is_err() {
        bail!(
            "--assign {}: expected ilp or a heuristic (ff, bf, wf, nf, ffd, bfd, wfd, nfd)",
            r.assign
        );
    }
    spec.assign = r.assign.clone();
    spec.ilp_time_limit_ns = r.ilp_time_limit.ns();
    // The generator's own limits (e.g. too few tasks for R·m) are reported before any run.
    for p in 0..spec.points().len() {
        execute::generate_set(&spec, p, 0)?;
    }
    Ok(spec)
}

/// A short stable name for a spec: FNV-1a of its JSON, so the default directory of a command is
/// the same every time it is run and differs when anything in the spec does.
fn spec_hash(spec: &Spec) -> String {
    let text = serde_json::to_string(spec).unwrap_or_default();
    let mut h: u64 = 0xcbf29ce484222325;
    for b in text.bytes() {
        h ^= b as u64;
        h = h.wrapping_mul(0x100000001b3);
    }
    format!("{:08x}", h as u32)
}

fn same_path(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(x), Ok(y)) => x == y,
        _ => a == b,
    }
}

fn run_spec(spec: &Spec, o: &OutArgs, input: Option<&Path>) -> Result<u8> {
    let dir = o
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("experiment-{}-{}", spec.name, spec_hash(spec))));
    if let (Some(rep), Some(inp)) = (&o.report, input) {
        if same_path(rep, inp) {
            bail!(
                "--report {}: that is the input spec; choose another file",
                rep.display()
            );
        }
    }
    // A relative profile path in a spec file is relative to that file.
    let cache = match &spec.cache_model {
        Some(p) => {
            let path = match input.and_then(Path::parent) {
                Some(dir) if Path::new(p).is_relative() => dir.join(p),
                _ => PathBuf::from(p),
            };
            Some(CacheProfile::read(&path).with_context(|| format!("cache_model {}", path.display()))?)
        }
        None => None,
    };
    // The linux backend's runs end cleanly on SIGINT, SIGTERM and SIGHUP (cpusets removed,
    // policies restored) only if no other thread takes the signal: blocked here, before rayon
    // or the progress bar start a thread, every thread inherits the block, and each run's
    // signalfd sees the signal.
    let signals = if spec.backends.contains(&Backend::Linux) {
        Some(SignalFd::new(&TERMINATING).context("blocking the termination signals")?)
    } else {
        None
    };
    let store = Store::create(&dir, spec)?;
    let sim = SimRunner::with_cache(cache);
    let linux = LinuxRunner::new();
    let runners: [&dyn Runner; 2] = [&sim, &linux];
    let bar = Bar::new(!o.json);
    let outcome = sweep::run(spec, &store, &runners, o.shard, &|p| bar.update(p))?;
    bar.finish();
    if !o.json {
        eprintln!(
            "pacer experiment: {} ({})",
            aggregate::outcome_line(&outcome),
            dir.display()
        );
    }
    for (k, e) in &outcome.failed {
        eprintln!("pacer experiment: {}: {e}", k.file_name(spec));
    }
    let keys = sweep::matrix(spec);
    let (records, _) = sweep::collect(spec, std::slice::from_ref(&store), &keys);
    let agg = sweep::aggregate(spec, &records);
    write_tables(&store, &agg, &records)?;
    print(&agg, o.json, o.report.as_deref())?;
    let interrupted = outcome
        .failed
        .iter()
        .find_map(|(_, e)| match e {
            sweep::RunError::Interrupted(s) => Some(*s),
            _ => None,
        })
        .or_else(|| signals.as_ref().and_then(SignalFd::next));
    if let Some(sig) = interrupted {
        // Not an error: the sweep stopped where it was asked to, and the shell's convention for
        // a command a signal ended lets a script tell this from a failure.
        eprintln!(
            "pacer experiment: interrupted by signal {sig} ({}): {} run(s) saved in {}; the same command resumes",
            signal_name(sig),
            outcome.ran.len(),
            dir.display()
        );
        return Ok(128u8.saturating_add(sig as u8));
    }
    if !outcome.failed.is_empty() {
        bail!(
            "{} run(s) failed (listed above); run the command again to retry them",
            outcome.failed.len()
        );
    }
    Ok(0)
}

fn write_tables(
    store: &Store,
    agg: &sweep::Aggregate,
    records: &[(sweep::RunKey, sweep::RunRecord)],
) -> Result<()> {
    store.write("table.txt", aggregate::render_text(agg).as_bytes())?;
    store.write("summary.json", aggregate::render_json(agg).as_bytes())?;
    store.write("runs.csv", aggregate::render_csv(records).as_bytes())?;
    Ok(())
}

fn print(agg: &sweep::Aggregate, json: bool, report_path: Option<&Path>) -> Result<()> {
    if let Some(path) = report_path {
        let command: Vec<String> = std::env::args().collect();
        report::build(agg, &command.join(" "))
            .context("building the report")?
            .write(path)?;
    }
    if json {
        print!("{}", aggregate::render_json(agg));
    } else {
        print!("{}", aggregate::render_text(agg));
    }
    Ok(())
}

fn merge(m: &MergeArgs) -> Result<()> {
    let mut stores = Vec::new();
    let mut spec: Option<Spec> = None;
    for d in &m.dirs {
        let (store, s) = Store::open(d)?;
        if let Some(first) = &spec {
            if !store.same_experiment(first) {
                bail!(
                    "{}: holds a different experiment than {}; merge only shards of one spec",
                    d.display(),
                    m.dirs[0].display()
                );
            }
        } else {
            spec = Some(s);
        }
        stores.push(store);
    }
    let Some(spec) = spec else {
        bail!("expected at least one directory");
    };
    let keys = sweep::matrix(&spec);
    let (records, _) = sweep::collect(&spec, &stores, &keys);
    let agg = sweep::aggregate(&spec, &records);
    if let Some(out) = &m.out {
        if m.dirs.iter().any(|d| same_path(d, out)) {
            bail!(
                "--out {}: is one of the inputs; merge into a new directory",
                out.display()
            );
        }
        let store = Store::create(out, &spec)?;
        for (k, r) in &records {
            store.save(&spec, k, r)?;
        }
        write_tables(&store, &agg, &records)?;
    }
    if let Some(rep) = &m.report {
        let parent = rep
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        if let Ok(parent) = parent.canonicalize() {
            if m.dirs
                .iter()
                .filter_map(|d| d.canonicalize().ok())
                .any(|d| parent.starts_with(d))
            {
                bail!(
                    "--report {}: is inside an input directory; write it elsewhere",
                    rep.display()
                );
            }
        }
    }
    print(&agg, m.json, m.report.as_deref())
}

/// A progress bar with ETA on a terminal; a plain line per tenth of the runs otherwise; nothing
/// under --json.
struct Bar {
    bar: Option<indicatif::ProgressBar>,
    plain: bool,
    last: std::sync::atomic::AtomicUsize,
}

impl Bar {
    fn new(enabled: bool) -> Bar {
        let tty = std::io::stderr().is_terminal();
        let bar = (enabled && tty).then(|| {
            let b = indicatif::ProgressBar::new(0);
            b.set_style(
                indicatif::ProgressStyle::with_template(
                    "runs {bar:40} {pos}/{len} ({elapsed} elapsed, {eta} left)",
                )
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
            );
            b
        });
        Bar {
            bar,
            plain: enabled && !tty,
            last: std::sync::atomic::AtomicUsize::new(usize::MAX),
        }
    }

    fn update(&self, p: sweep::Progress) {
        if let Some(b) = &self.bar {
            b.set_length(p.total as u64);
            b.set_position(p.done as u64);
        } else if self.plain && p.total > 0 {
            let tenth = p.done * 10 / p.total;
            let prev = self.last.swap(tenth, std::sync::atomic::Ordering::Relaxed);
            if prev != tenth {
                eprintln!("pacer experiment: {}/{} runs done", p.done, p.total);
            }
        }
    }

    fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}
