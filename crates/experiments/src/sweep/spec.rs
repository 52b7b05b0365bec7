//! The experiment specification: which task sets (the §5.3 recipe of rm-vs-edf-multicore-linux.txt
//! or any independent-draws generator, swept over R = U/m and the number of tasks), which of the
//! six configurations of its Table 1 (P/C/G × EDF/RM, plus DM), on which backends, for how long.
//!
//! A spec is read from TOML (docs/formats/experiment-toml.md) key by key
//! (`pacer_model::toml_keys`, the runtime manifest's reader too) rather than through serde's
//! derive, so every error names the file, the key and what was expected, and an unknown
//! key is refused instead of ignored (a misspelt `duraton` must not silently run the default).
//! The resolved [`Spec`] is what identifies an experiment: it is written to the output directory
//! and a directory holding a different one is refused.

use std::path::Path;

use pacer_analysis::gen::{
    derive_seed, DeadlineMethod, GenSpec, PeriodMethod, Recipe, RmVsEdfVariant, UtilizationMethod,
};
use pacer_analysis::partition::{Heuristic, Placement};
use pacer_model::toml_keys::KeyError;
use pacer_model::Duration;
use serde::{Deserialize, Serialize};

/// Where a run executes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Backend {
    /// The discrete-event simulator (crates/sim).
    Sim,
    /// The real kernel (SCHED_DEADLINE / SCHED_FIFO in cpusets).
    Linux,
}

impl Backend {
    pub fn name(self) -> &'static str {
        match self {
            Backend::Sim => "sim",
            Backend::Linux => "linux",
        }
    }
    pub fn parse(s: &str) -> Option<Backend> {
        match s {
            "sim" => Some(Backend::Sim),
            "linux" => Some(Backend::Linux),
            _ => None,
        }
    }
}

/// Global, clustered or partitioned (the paper's §5.4), and the per-CPU (or per-cluster)
/// scheduling rule: the same types `pacer sim`, `pacer run` and `pacer convert` place task sets
/// with, so a configuration means one thing everywhere.
pub use pacer_workload::placement::{Sched, Scope};

/// One scheduling configuration (a cell of the paper's Table 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Configuration {
    pub scope: Scope,
    pub sched: Sched,
}

impl Configuration {
    /// The paper's six, in Table 4's order (global, clustered, partitioned; EDF then RM).
    pub const PAPER: [Configuration; 6] = [
        Configuration::new(Scope::Global, Sched::Edf),
        Configuration::new(Scope::Global, Sched::Rm),
        Configuration::new(Scope::Clustered, Sched::Edf),
        Configuration::new(Scope::Clustered, Sched::Rm),
        Configuration::new(Scope::Partitioned, Sched::Edf),
        Configuration::new(Scope::Partitioned, Sched::Rm),
    ];

    pub const fn new(scope: Scope, sched: Sched) -> Self {
        Configuration { scope, sched }
    }

    /// `G-EDF`, `C-RM`, `P-DM`… as the paper writes them.
    pub fn label(&self) -> String {
        let s = match self.scope {
            Scope::Global => "G",
            Scope::Clustered => "C",
            Scope::Partitioned => "P",
        };
        let p = match self.sched {
            Sched::Edf => "EDF",
            Sched::Rm => "RM",
            Sched::Dm => "DM",
        };
        format!("{s}-{p}")
    }

    /// Parses `g-edf`, `C-RM`, `p-dm`… (case-insensitive).
    pub fn parse(s: &str) -> Option<Configuration> {
        let lower = s.trim().to_ascii_lowercase();
        let (a, b) = lower.split_once('-')?;
        let scope = match a {
            "g" => Scope::Global,
            "c" => Scope::Clustered,
            "p" => Scope::Partitioned,
            _ => return None,
        };
        let sched = match b {
            "edf" => Sched::Edf,
            "rm" => Sched::Rm,
            "dm" => Sched::Dm,
            _ => return None,
        };
        Some(Configuration { scope, sched })
    }
}

/// How task sets are generated: the axes of the sweep and the recipe.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "recipe", rename_all = "kebab-case")]
pub enum Generator {
    /// §5.3: N = x·m tasks, U = R·m, RandFixedSum, log-uniform periods in [10 ms, 100 ms].
    RmVsEdf {
        x: Vec<usize>,
        r: Vec<f64>,
        variant: RmVsEdfVariant,
    },
    /// Independent draws (`pacer gen`'s generators) with n tasks and total utilisation R·m.
    Independent {
        n: Vec<usize>,
        r: Vec<f64>,
        utilizations: UtilizationMethod,
        periods: PeriodMethod,
        deadlines: DeadlineMethod,
    },
}

/// One point of the sweep: a row of Table 4.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Point {
    /// Utilisation per CPU, R (the table's "U" column).
    pub r: f64,
    /// Number of tasks (the "#" column).
    pub n: usize,
}

/// A resolved, validated experiment. Times are integer nanoseconds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Spec {
    pub name: String,
    /// Seed of everything random: set k of point (R, n) has seed [`Spec::set_seed`].
    pub seed: u64,
    pub cpus: usize,
    pub duration_ns: u64,
    /// Task sets per point (the paper: 3).
    pub sets: usize,
    /// Working-set size of the test program, bytes; recorded and handed to every runner (the
    /// simulator has no cache model and ignores it).
    pub wss_bytes: Option<u64>,
    pub backends: Vec<Backend>,
    pub configurations: Vec<Configuration>,
    /// CPUs per cluster for the clustered configurations.
    pub cluster_size: usize,
    /// `ilp` or a bin-packing heuristic's name.
    pub assign: String,
    /// Wall-clock limit of each ILP solve.
    pub ilp_time_limit_ns: u64,
    /// SCHED_FLAG_RECLAIM (GRUB) on the EDF configurations' reservations: a job that overruns
    /// its C uses bandwidth others leave unused instead of being throttled to its next period.
    /// The paper's SCHED_DEADLINE patch had soft reservations; mainline's nearest is GRUB.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub reclaim: bool,
    /// Each job's work as a fraction of its C, in (0, 1]. The reservations keep C: the paper
    /// sized its test program's jobs to stay below their WCET (§5.2), and on a real machine a
    /// job of exactly C overruns a runtime of C by its own overheads.
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub work: f64,
    /// The simulator's cache-reload profile (`pacer calibrate`'s file), as given; without it the
    /// simulator charges nothing for migrations and evictions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_model: Option<String>,
    pub generator: Generator,
}

/// A spec that cannot be used, naming the file and key.
#[derive(Debug, thiserror::Error)]
pub enum SpecError {
    #[error("{file}: cannot read: {source}")]
    Read {
        file: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{file}: not valid TOML: {message}")]
    Syntax { file: String, message: String },
    #[error("{file}: `{field}`: expected {expected}, found {found}")]
    Field {
        file: String,
        field: String,
        expected: String,
        found: String,
    },
}

impl From<KeyError> for SpecError {
    fn from(e: KeyError) -> SpecError {
        SpecError::Field {
            file: e.file,
            field: e.key,
            expected: e.expected,
            found: e.found,
        }
    }
}

/// The spec's reader of a table's keys (`pacer_model::toml_keys`).
type Fields = pacer_model::toml_keys::Keys<SpecError>;

/// What the spec's durations are expected to be.
const DURATION: &str = "a duration with a unit, such as \"10s\"";

/// The paper's clusters: six cores sharing an L3 (§5.4), when that divides the CPUs.
pub const PAPER_CLUSTER_SIZE: usize = 6;

/// The default cluster size for `cpus` CPUs: the paper's 6 when it divides them into several
/// clusters, else half the CPUs (two clusters), else one cluster of all of them.
pub fn default_cluster_size(cpus: usize) -> usize {
    if cpus > PAPER_CLUSTER_SIZE && cpus.is_multiple_of(PAPER_CLUSTER_SIZE) {
        PAPER_CLUSTER_SIZE
    } else if cpus >= 4 && cpus.is_multiple_of(2) {
        cpus / 2
    } else {
        cpus.max(1)
    }
}

impl Spec {
    /// The paper's sweep (x ∈ {2, 3, 4}, R ∈ {0.6, 0.7, 0.8}, 3 sets, the six configurations) on
    /// `cpus` CPUs, simulated for `duration`.
    pub fn rm_vs_edf(cpus: usize, duration: Duration, seed: u64) -> Spec {
        Spec {
            name: "rm-vs-edf".into(),
            seed,
            cpus,
            duration_ns: duration.ns(),
            sets: 3,
            wss_bytes: Some(16 * 1024),
            backends: vec![Backend::Sim],
            configurations: Configuration::PAPER.to_vec(),
            cluster_size: default_cluster_size(cpus),
            assign: "wfd".into(),
            ilp_time_limit_ns: Duration::from_secs(2).ns(),
            reclaim: false,
            work: 1.0,
            cache_model: None,
            generator: Generator::RmVsEdf {
                x: vec![2, 3, 4],
                r: vec![0.6, 0.7, 0.8],
                variant: RmVsEdfVariant::ExactTotal,
            },
        }
    }

    /// Reads and validates a TOML spec.
    pub fn from_file(path: &Path) -> Result<Spec, SpecError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| SpecError::Read {
            file: file.clone(),
            source,
        })?;
        Spec::from_toml(&text, &file)
    }

    /// Parses and validates TOML text; `file` names it in errors.
    pub fn from_toml(text: &str, file: &str) -> Result<Spec, SpecError> {
        let mut top = Fields::parse(file, text, |message| SpecError::Syntax {
            file: file.to_string(),
            message,
        })?;
        let name = top.string("name")?.unwrap_or_else(|| "experiment".into());
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        {
            return Err(top.bad(
                "name",
                "a non-empty name of letters, digits, `-`, `_`, `.`",
                &name,
            ));
        }
        let seed = top.integer("seed")?.unwrap_or(1);
        let cpus = top.integer("cpus")?.unwrap_or(48);
        if !(1..=4096).contains(&cpus) {
            return Err(top.bad("cpus", "an integer in 1..=4096", &cpus.to_string()));
        }
        let cpus = cpus as usize;
        let duration = top
            .duration("duration", DURATION)?
            .unwrap_or(Duration::from_secs(10));
        if duration.ns() == 0 {
            return Err(top.bad("duration", "a duration > 0, such as \"10s\"", "0"));
        }
        let sets = top.integer("sets")?.unwrap_or(3);
        if !(1..=1000).contains(&sets) {
            return Err(top.bad("sets", "an integer in 1..=1000", &sets.to_string()));
        }
        let wss_bytes = match top.string("wss")? {
            None => None,
            Some(s) => Some(
                parse_size(&s)
                    .ok_or_else(|| top.bad("wss", "a size such as \"16KiB\", \"256KB\" or \"4096B\"", &s))?,
            ),
        };
        let backends = match top.strings("backends")? {
            None => vec![Backend::Sim],
            Some(v) => {
                let mut out = Vec::new();
                for b in v {
                    let be = Backend::parse(&b).ok_or_else(|| top.bad("backends", "`sim` or `linux`", &b))?;
                    if !out.contains(&be) {
                        out.push(be);
                    }
                }
                if out.is_empty() {
                    return Err(top.bad("backends", "at least one of `sim`, `linux`", "[]"));
                }
                out
            }
        };
        let configurations = match top.strings("configurations")? {
            None => Configuration::PAPER.to_vec(),
            Some(v) => {
                let mut out = Vec::new();
                for c in v {
                    let cf = Configuration::parse(&c)
                        .ok_or_else(|| top.bad("configurations", "{g,c,p}-{edf,rm,dm}", &c))?;
                    if !out.contains(&cf) {
                        out.push(cf);
                    }
                }
                if out.is_empty() {
                    return Err(top.bad("configurations", "at least one configuration", "[]"));
                }
                out
            }
        };
        let cluster_size = match top.integer("cluster_size")? {
            None => default_cluster_size(cpus),
            Some(k) => k as usize,
        };
        if cluster_size == 0 || !cpus.is_multiple_of(cluster_size) {
            return Err(top.bad(
                "cluster_size",
                &format!("a divisor of cpus = {cpus}"),
                &cluster_size.to_string(),
            ));
        }
        let assign = top.string("assign")?.unwrap_or_else(|| "wfd".into());
        if assign != "ilp" && assign.parse::<Heuristic>().is_err() {
            return Err(top.bad(
                "assign",
                "`ilp` or a heuristic: ff, bf, wf, nf, ffd, bfd, wfd, nfd",
                &assign,
            ));
        }
        let ilp_time_limit = top
            .duration("ilp_time_limit", DURATION)?
            .unwrap_or(Duration::from_secs(2));
        let reclaim = top.boolean("reclaim")?.unwrap_or(false);
        let cache_model = top.string("cache_model")?;
        let work = match top.take("work") {
            None => 1.0,
            Some(toml::Value::Float(f)) if f > 0.0 && f <= 1.0 => f,
            Some(toml::Value::Integer(1)) => 1.0,
            Some(v) => return Err(top.wrong_type("work", "a fraction of C in (0, 1]", &v)),
        };
        let Some(gen) = top.table("generator")? else {
            return Err(top.bad("generator", "a [generator] table", "nothing"));
        };
        let generator = parse_generator(gen)?;
        top.done()?;
        let spec = Spec {
            name,
            seed,
            cpus,
            duration_ns: duration.ns(),
            sets: sets as usize,
            wss_bytes,
            backends,
            configurations,
            cluster_size,
            assign,
            ilp_time_limit_ns: ilp_time_limit.ns(),
            reclaim,
            work,
            cache_model,
            generator,
        };
        // Generating the first set of every point finds what the generator itself refuses
        // (e.g. R·m with too few tasks) before any run starts.
        for (i, p) in spec.points().iter().enumerate() {
            pacer_analysis::gen::generate(&spec.gen_spec(i, 0)).map_err(|e| SpecError::Field {
                file: file.to_string(),
                field: "generator".into(),
                expected: "parameters the generator accepts".into(),
                found: format!("R = {}, n = {}: {e}", p.r, p.n),
            })?;
        }
        Ok(spec)
    }

    /// The points of the sweep in Table 4's order: R ascending in the given order, then n.
    pub fn points(&self) -> Vec<Point> {
        let (ns, rs): (Vec<usize>, &Vec<f64>) = match &self.generator {
            Generator::RmVsEdf { x, r, .. } => (x.iter().map(|x| x * self.cpus).collect(), r),
            Generator::Independent { n, r, .. } => (n.clone(), r),
        };
        rs.iter()
            .flat_map(|&r| ns.iter().map(move |&n| Point { r, n }))
            .collect()
    }

    /// Seed of set `k` of point `p`: derived from the point's values, not its position, so adding
    /// a point to a sweep leaves the others' sets unchanged.
    pub fn set_seed(&self, p: usize, k: usize) -> u64 {
        let pt = self.points()[p];
        let s = derive_seed(self.seed, pt.n as u64);
        let s = derive_seed(s, pt.r.to_bits());
        derive_seed(s, k as u64)
    }

    /// The seed of a run's own randomness (execution-time draws, the real run's start jitter):
    /// shared by every configuration of one set so configurations are compared on equal terms.
    pub fn run_seed(&self, p: usize, k: usize) -> u64 {
        derive_seed(self.set_seed(p, k), 0x5eed)
    }

    /// The generator request of set `k` of point `p`.
    pub fn gen_spec(&self, p: usize, k: usize) -> GenSpec {
        let pt = self.points()[p];
        let seed = self.set_seed(p, k);
        match &self.generator {
            Generator::RmVsEdf { variant, .. } => {
                GenSpec::rm_vs_edf(seed, self.cpus, pt.n / self.cpus, pt.r, *variant)
            }
            Generator::Independent {
                utilizations,
                periods,
                deadlines,
                ..
            } => {
                let mut g = GenSpec::independent(
                    seed,
                    Some(pt.n),
                    pt.r * self.cpus as f64,
                    utilizations.clone(),
                    periods.clone(),
                );
                if let Recipe::Independent(i) = &mut g.recipe {
                    i.deadlines = *deadlines;
                }
                g
            }
        }
    }

    /// How the partitioned and clustered configurations place tasks.
    pub fn placement(&self) -> Placement {
        match self.assign.parse::<Heuristic>() {
            Ok(h) if self.assign != "ilp" => Placement::Heuristic(h),
            _ => Placement::Ilp {
                time_limit: std::time::Duration::from_nanos(self.ilp_time_limit_ns),
            },
        }
    }

    /// Bin capacities and the CPUs of each bin for a configuration's scope (`None` = global).
    pub fn bins(&self, scope: Scope) -> Option<(Vec<usize>, Vec<Vec<usize>>)> {
        let k = match scope {
            Scope::Global => return None,
            Scope::Partitioned => 1,
            Scope::Clustered => self.cluster_size,
        };
        let caps = pacer_analysis::partition::clusters_of(self.cpus, k);
        let mut first = 0;
        let cpus = caps
            .iter()
            .map(|&c| {
                let v: Vec<usize> = (first..first + c).collect();
                first += c;
                v
            })
            .collect();
        Some((caps, cpus))
    }
}

fn parse_generator(mut g: Fields) -> Result<Generator, SpecError> {
    let recipe = g.string("recipe")?.unwrap_or_else(|| "rm-vs-edf".into());
    let r = g.floats("r")?.ok_or_else(|| {
        g.bad(
            "r",
            "a list of utilisations per CPU, such as [0.6, 0.7]",
            "nothing",
        )
    })?;
    if r.is_empty() || r.iter().any(|&v| !(v > 0.0 && v <= 1.0)) {
        return Err(g.bad("r", "a non-empty list of values in (0, 1]", &format!("{r:?}")));
    }
    let out = match recipe.as_str() {
        "rm-vs-edf" => {
            let x = g.integers("x")?.unwrap_or_else(|| vec![2, 3, 4]);
            if x.is_empty() || x.iter().any(|&v| !(1..=64).contains(&v)) {
                return Err(g.bad(
                    "x",
                    "a non-empty list of tasks per CPU in 1..=64",
                    &format!("{x:?}"),
                ));
            }
            let variant = match g.string("variant")?.as_deref() {
                None | Some("exact-total") => RmVsEdfVariant::ExactTotal,
                Some("literal") => RmVsEdfVariant::Literal,
                Some(v) => return Err(g.bad("variant", "`exact-total` or `literal`", v)),
            };
            Generator::RmVsEdf {
                x: x.into_iter().map(|v| v as usize).collect(),
                r,
                variant,
            }
        }
        "independent" => {
            let n = g
                .integers("n")?
                .ok_or_else(|| g.bad("n", "a list of task counts", "nothing"))?;
            if n.is_empty() || n.iter().any(|&v| !(1..=100_000).contains(&v)) {
                return Err(g.bad(
                    "n",
                    "a non-empty list of task counts in 1..=100000",
                    &format!("{n:?}"),
                ));
            }
            let utilizations = g
                .typed::<UtilizationMethod>("utilizations", "a table such as { method = \"randfixedsum\" }")?
                .unwrap_or(UtilizationMethod::Randfixedsum { min: 0.0, max: 1.0 });
            let periods = g
                .typed::<PeriodMethod>(
                    "periods",
                    "a table such as { method = \"log-uniform\", min = \"10ms\", max = \"100ms\" }",
                )?
                .unwrap_or(PeriodMethod::LogUniform {
                    min: Duration::from_ms(10),
                    max: Duration::from_ms(100),
                    granularity: Duration::from_us(1),
                });
            let deadlines = g
                .typed::<DeadlineMethod>(
                    "deadlines",
                    "{ method = \"implicit\" } or { method = \"constrained\", lo, hi }",
                )?
                .unwrap_or_default();
            Generator::Independent {
                n: n.into_iter().map(|v| v as usize).collect(),
                r,
                utilizations,
                periods,
                deadlines,
            }
        }
        other => return Err(g.bad("recipe", "`rm-vs-edf` or `independent`", other)),
    };
    g.done()?;
    Ok(out)
}

/// `16KiB`, `16KB` (both 1024-based, as cache sizes are quoted), `1MiB`, `4096B` or `4096`:
/// `pacer_model::bytes`, the one rule of every pacer format.
pub fn parse_size(s: &str) -> Option<u64> {
    pacer_model::bytes::parse_bytes(s).ok()
}

fn one() -> f64 {
    1.0
}

fn is_one(f: &f64) -> bool {
    *f == 1.0
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
name = "small"
seed = 7
cpus = 4
duration = "1s"
sets = 2
wss = "16KiB"
configurations = ["g-edf", "p-rm"]
[generator]
recipe = "rm-vs-edf"
x = [2]
r = [0.6, 0.8]
"#;

    fn err(text: &str) -> String {
        Spec::from_toml(text, "e.toml").unwrap_err().to_string()
    }

    #[test]
    fn a_good_spec_resolves() {
        let s = Spec::from_toml(GOOD, "e.toml").unwrap();
        assert_eq!(s.cpus, 4);
        assert_eq!(s.duration_ns, 1_000_000_000);
        assert_eq!(s.wss_bytes, Some(16384));
        assert_eq!(s.cluster_size, 2);
        let pts = s.points();
        assert_eq!(pts.len(), 2);
        assert_eq!((pts[0].r, pts[0].n), (0.6, 8));
        assert_eq!(s.configurations.len(), 2);
    }

    #[test]
    fn errors_name_file_field_and_expectation() {
        let e = err(&GOOD.replace("duration = \"1s\"", "duration = 10"));
        assert!(
            e.contains("e.toml") && e.contains("`duration`") && e.contains("with a unit"),
            "{e}"
        );
        let e = err(&GOOD.replace("\"p-rm\"", "\"p-xx\""));
        assert!(e.contains("`configurations`") && e.contains("p-xx"), "{e}");
        let e = err(&GOOD.replace("x = [2]", "x = [2]\nxx = 1"));
        assert!(e.contains("`generator.xx`") && e.contains("no such key"), "{e}");
        let e = err(&GOOD.replace("cpus = 4", "cpus = 4\ncluster_size = 3"));
        assert!(
            e.contains("`cluster_size`") && e.contains("divisor of cpus = 4"),
            "{e}"
        );
        let e = err(&GOOD.replace("r = [0.6, 0.8]", "r = [1.5]"));
        assert!(e.contains("`generator.r`") && e.contains("(0, 1]"), "{e}");
        let e = err("cpus = [");
        assert!(e.starts_with("e.toml: not valid TOML"), "{e}");
        let e = err(&GOOD.replace("wss = \"16KiB\"", "wss = \"16 parsecs\""));
        assert!(e.contains("`wss`"), "{e}");
        let e = err("cpus = 4\n");
        assert!(e.contains("`generator`"), "{e}");
        let e = err(&GOOD
            .replace("assign", "x")
            .replace("sets = 2", "sets = 2\nassign = \"best\""));
        assert!(e.contains("`assign`"), "{e}");
    }

    #[test]
    fn set_seeds_follow_values_not_positions() {
        let a = Spec::from_toml(GOOD, "e.toml").unwrap();
        let b = Spec::from_toml(&GOOD.replace("r = [0.6, 0.8]", "r = [0.8]"), "e.toml").unwrap();
        assert_eq!(a.set_seed(1, 0), b.set_seed(0, 0));
        assert_ne!(a.set_seed(0, 0), a.set_seed(0, 1));
    }
}
