//! `pacer gen`: map command-line options to a `GenSpec`, generate, write files.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::ValueEnum;
use pacer_analysis::gen::rm_vs_edf::RmVsEdfVariant;
use pacer_analysis::gen::{self, DeadlineMethod, GenSpec, PeriodMethod, UtilizationMethod};
use pacer_model::{write_taskset, Duration, TaskSet};

use crate::analyze::parse_duration;
use crate::output::{Outputs, Slot, Stdout};

#[derive(clap::Args)]
#[command(after_help = "Examples:\n  \
pacer gen -n 10 -u 0.8 --utilizations uunifast --seed 1   # uniprocessor, UUniFast\n  \
pacer gen -n 12 -u 2.4 --periods uniform --period-min 5ms --period-max 50ms --granularity 1ms\n  \
pacer gen -u 3.0 --utilizations unc:bimo-medium --periods unc:log-uni-moderate\n  \
pacer gen -n 8 -u 1.5 --deadlines constrained:0.5..1.0   # D = C + r(T − C), r ~ U[0.5, 1]\n  \
pacer gen --recipe rm-vs-edf --cpus 48 --x 4 --r 0.8 --count 3 -o sets/   # RM-vs-EDF §5.3\n\n\
The seed and every parameter are written into each file's `generator` field; without --seed a\n\
random seed is drawn and reported on standard error.")]
pub struct Args {
    /// Which generator: `independent` draws utilisations, periods and deadlines with the methods
    /// below; `rm-vs-edf` is the exact recipe of the RM-vs-EDF multicore Linux study (§5.3).
    #[arg(long, value_enum, default_value_t = RecipeArg::Independent)]
    pub recipe: RecipeArg,
    /// Number of tasks (required except for UNC utilisations, where it is an optional maximum).
    #[arg(short = 'n', long = "tasks")]
    pub tasks: Option<usize>,
    /// Total utilisation Σ C/T (for UNC distributions: the cap).
    #[arg(short = 'u', long = "util", allow_negative_numbers = true)]
    pub util: Option<f64>,
    /// Per-task utilisation method: uunifast, uunifast-discard, randfixedsum, or unc:NAME with
    /// NAME one of uni-{light,medium,heavy}, exp-{light,medium,heavy}, bimo-{light,medium,heavy}.
    #[arg(long, default_value = "randfixedsum", value_parser = parse_util_method)]
    pub utilizations: UtilizationMethod,
    /// Smallest per-task utilisation (randfixedsum).
    #[arg(long, allow_negative_numbers = true)]
    pub util_min: Option<f64>,
    /// Largest per-task utilisation (randfixedsum, uunifast-discard).
    #[arg(long, allow_negative_numbers = true)]
    pub util_max: Option<f64>,
    /// Period distribution: log-uniform, uniform, or unc:NAME with NAME one of
    /// uni-{short,moderate,long}, log-uni-{short,moderate,long}.
    #[arg(long, default_value = "log-uniform")]
    pub periods: String,
    /// Smallest period (uniform, log-uniform).
    #[arg(long, default_value = "10ms", value_parser = parse_duration)]
    pub period_min: Duration,
    /// Largest period (uniform, log-uniform).
    #[arg(long, default_value = "100ms", value_parser = parse_duration)]
    pub period_max: Duration,
    /// Periods are multiples of this (uniform, log-uniform, rm-vs-edf).
    #[arg(long, default_value = "1us", value_parser = parse_duration)]
    pub granularity: Duration,
    /// Deadlines: `implicit` (D = T) or `constrained:LO..HI` (D = C + r·(T − C), r uniform in [LO, HI] ⊆ [0, 1]).
    #[arg(long, default_value = "implicit", value_parser = parse_deadlines)]
    pub deadlines: DeadlineMethod,
    /// rm-vs-edf: number of processors m.
    #[arg(long, default_value_t = 4)]
    pub cpus: usize,
    /// rm-vs-edf: tasks per processor x (N = x·m).
    #[arg(long, default_value_t = 3)]
    pub x: usize,
    /// rm-vs-edf: utilisation per processor R (U = R·m).
    #[arg(long, default_value_t = 0.6)]
    pub r: f64,
    /// rm-vs-edf: `exact-total` rescales so Σ C/T = U exactly; `literal` follows the paper's
    /// wording (rescale to U − C_min/T_min, then add C_min), whose total exceeds U (docs/analysis.md).
    #[arg(long, value_enum, default_value_t = VariantArg::ExactTotal)]
    pub variant: VariantArg,
    /// rm-vs-edf: minimum execution time added to every task.
    #[arg(long, default_value = "50us", value_parser = parse_duration)]
    pub c_min: Duration,
    /// Seed of the random generator (ChaCha8); default: drawn at random and reported.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Number of task sets; set k uses a seed derived from (seed, k), recorded in its file.
    #[arg(long, default_value_t = 1, value_parser = crate::count_in::<1, 100_000>)]
    pub count: usize,
    /// Output file (one set; `-`: standard output) or directory (several, or a path ending in
    /// `/`: DIR/taskset-000.json, …, created if missing); default: standard output. Files are
    /// replaced only once every set is written, keeping their mode and owner; a symbolic link is
    /// followed and kept; devices and FIFOs are refused (docs/output-files.md).
    #[arg(short = 'o', long)]
    pub output: Option<PathBuf>,
    /// Name written into the task set(s).
    #[arg(long)]
    pub name: Option<String>,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum RecipeArg {
    Independent,
    RmVsEdf,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum VariantArg {
    ExactTotal,
    Literal,
}

fn parse_util_method(s: &str) -> Result<UtilizationMethod, String> {
    s.parse().map_err(|e: gen::GenError| e.to_string())
}

fn parse_deadlines(s: &str) -> Result<DeadlineMethod, String> {
    if s == "implicit" {
        return Ok(DeadlineMethod::Implicit);
    }
    let bad = || format!("`{s}`: expected `implicit` or `constrained:LO..HI` with 0 ≤ LO ≤ HI ≤ 1");
    let range = s.strip_prefix("constrained:").ok_or_else(bad)?;
    let (lo, hi) = range.split_once("..").ok_or_else(bad)?;
    let lo: f64 = lo.trim().parse().map_err(|_| bad())?;
    let hi: f64 = hi.trim().parse().map_err(|_| bad())?;
    if !(0.0..=1.0).contains(&lo) || !(0.0..=1.0).contains(&hi) || lo > hi {
        return Err(bad());
    }
    Ok(DeadlineMethod::Constrained { lo, hi })
}

/// Builds the generation request from the options (shared with `pacer demo`).
pub fn spec_from_args(a: &Args, seed: u64) -> Result<GenSpec> {
    match a.recipe {
        RecipeArg::RmVsEdf => {
            let variant = match a.variant {
                VariantArg::ExactTotal => RmVsEdfVariant::ExactTotal,
                VariantArg::Literal => RmVsEdfVariant::Literal,
            };
            let mut spec = GenSpec::rm_vs_edf(seed, a.cpus, a.x, a.r, variant);
            if let gen::Recipe::RmVsEdf(p) = &mut spec.recipe {
                p.c_min = a.c_min;
                p.period_granularity = a.granularity;
            }
            Ok(spec)
        }
        RecipeArg::Independent => {
            let Some(u) = a.util else {
                bail!("--util: required for --recipe independent (the total utilisation Σ C/T, e.g. -u 2.4)");
            };
            let mut utilizations = a.utilizations.clone();
            if a.tasks.is_none() && !matches!(utilizations, UtilizationMethod::Unc { .. }) {
                bail!(
                    "-n/--tasks: required with --utilizations {} (only the unc:* distributions \
                     derive the number of tasks), e.g. -n 10 -u {u}",
                    match utilizations {
                        UtilizationMethod::Uunifast => "uunifast",
                        UtilizationMethod::UunifastDiscard { .. } => "uunifast-discard",
                        _ => "randfixedsum",
                    }
                );
            }
            match &mut utilizations {
                UtilizationMethod::Randfixedsum { min, max } => {
                    *min = a.util_min.unwrap_or(*min);
                    *max = a.util_max.unwrap_or(*max);
                }
                UtilizationMethod::UunifastDiscard { max, .. } => *max = a.util_max.unwrap_or(*max),
                _ if a.util_min.is_some() || a.util_max.is_some() => {
                    bail!("--util-min/--util-max: only meaningful with --utilizations randfixedsum or uunifast-discard")
                }
                _ => {}
            }
            let periods = match a.periods.as_str() {
                "log-uniform" => PeriodMethod::LogUniform {
                    min: a.period_min,
                    max: a.period_max,
                    granularity: a.granularity,
                },
                "uniform" => PeriodMethod::Uniform {
                    min: a.period_min,
                    max: a.period_max,
                    granularity: a.granularity,
                },
                other => match other.strip_prefix("unc:") {
                    Some(name) => PeriodMethod::Unc {
                        distribution: name
                            .parse()
                            .map_err(|e: gen::GenError| anyhow::anyhow!("--periods: {e}"))?,
                    },
                    None => bail!("--periods `{other}`: expected log-uniform, uniform or unc:NAME"),
                },
            };
            let mut spec = GenSpec::independent(seed, a.tasks, u, utilizations, periods);
            if let gen::Recipe::Independent(ind) = &mut spec.recipe {
                ind.deadlines = a.deadlines;
            }
            Ok(spec)
        }
    }
}

/// A seed from the clock and the process id, for runs without --seed (it is reported and recorded).
fn fresh_seed() -> u64 {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    gen::derive_seed(t, std::process::id() as u64)
}

pub fn run(a: Args) -> Result<()> {
    if a.count == 0 {
        bail!("--count: expected at least 1");
    }
    // Where the sets go is settled before anything is generated, so a bad -o costs nothing.
    let mut out = Outputs::new(Stdout::Free);
    let dest = destination(&mut out, a.output.as_deref(), a.count)?;
    let seed = match a.seed {
        Some(s) => s,
        None => {
            let s = fresh_seed();
            eprintln!("pacer gen: no --seed given, using seed {s}");
            s
        }
    };
    let spec = spec_from_args(&a, seed)?;
    let command = std::env::args().collect::<Vec<_>>().join(" ");
    // A single set uses the seed as given, so `--seed 7` reproduces and records 7.
    let mut sets = if a.count == 1 {
        vec![gen::generate(&spec).context("generating the task set")?]
    } else {
        gen::generate_many(&spec, a.count).context("generating task sets")?
    };
    for s in &mut sets {
        s.name = a.name.clone();
        if let Some(g) = &mut s.generator {
            g.command = Some(command.clone());
        }
    }
    write_sets(&sets, dest, out)
}

/// Where `pacer gen` writes: standard output, or one slot per set (a file, or DIR/taskset-NNN.json).
enum Destination {
    Stdout,
    Files(Vec<(Slot, PathBuf)>),
}

fn destination(out: &mut Outputs, output: Option<&Path>, count: usize) -> Result<Destination> {
    let Some(path) = output else {
        if count > 1 {
            bail!("--output DIR: required with --count > 1 (one file per task set)");
        }
        return Ok(Destination::Stdout);
    };
    // A trailing `/` asks for a directory even for one set.
    let as_dir = count > 1 || path.is_dir() || path.as_os_str().as_encoded_bytes().ends_with(b"/");
    if !as_dir {
        return Ok(Destination::Files(vec![(
            out.file("-o", path)?,
            path.to_path_buf(),
        )]));
    }
    if path.as_os_str() == "-" {
        bail!("--output DIR: required with --count > 1 (one file per task set); `-` is standard output");
    }
    out.dir("-o", path, true)?;
    (0..count)
        .map(|k| {
            let p = path.join(format!("taskset-{k:03}.json"));
            Ok((out.file("-o", &p)?, p))
        })
        .collect::<Result<_>>()
        .map(Destination::Files)
}

/// Writes every set, then replaces the files all together (none if one fails).
fn write_sets(sets: &[TaskSet], dest: Destination, mut out: Outputs) -> Result<()> {
    match dest {
        Destination::Stdout => {
            for s in sets {
                print!("{}", write_taskset(s));
            }
        }
        Destination::Files(files) => {
            for ((slot, _), s) in files.iter().zip(sets) {
                out.write(*slot, write_taskset(s).as_bytes())?;
            }
            out.commit()?;
            for ((_, path), s) in files.iter().zip(sets) {
                report(path, s);
            }
        }
    }
    Ok(())
}

fn report(path: &std::path::Path, s: &TaskSet) {
    eprintln!(
        "wrote {}: {} tasks, U = {:.4}, seed {}",
        path.display(),
        s.len(),
        s.utilization(),
        s.generator
            .as_ref()
            .and_then(|g| g.seed)
            .map(|x| x.to_string())
            .unwrap_or_default()
    );
}
