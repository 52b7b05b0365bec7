//! The options that say how a task set becomes threads, shared by `pacer sim`, `pacer run` and
//! `pacer convert` so the three read them alike; the mapping itself is
//! `pacer_workload::placement`.

use anyhow::Result;
use pacer_model::Duration;
use pacer_workload::placement::{Assign, Configuration, SchedPolicy};
use pacer_workload::ExecModel;

use crate::analyze::parse_duration;

#[derive(clap::Args, Debug, Clone, Default)]
pub struct TaskSetArgs {
    /// Scheduler for task sets: {g,c,p}-{edf,rm,dm}. EDF = SCHED_DEADLINE reservations
    /// (runtime C, deadline D, period T); RM/DM = SCHED_FIFO with rate/deadline-monotonic
    /// priorities; g = global, c = clustered (--cluster-size), p = partitioned (one CPU each).
    /// [default: g-edf]. Task sets only: an rt-app file sets each thread's policy itself.
    #[arg(long)]
    pub policy: Option<SchedPolicy>,
    /// CPUs per cluster for c-* policies (must divide --cpus).
    #[arg(long)]
    pub cluster_size: Option<u32>,
    /// How c-* and p-* policies place tasks: a bin-packing heuristic (ff, bf, wf, nf and the
    /// decreasing variants ffd, bfd, wfd, nfd; by utilisation, Σu ≤ capacity) or `ilp`, the
    /// min–max-load assignment of the RM-vs-EDF study. [default: wfd]
    #[arg(long)]
    pub assign: Option<String>,
    /// Time limit for --assign ilp. [default: 5s]
    #[arg(long, value_parser = parse_duration)]
    pub milp_time_limit: Option<Duration>,
    /// Execution time of each job of a task set: `wcet` (exactly C), `uniform:F` (uniform in
    /// [F·C, C]) or `normal:M,S` (normal with mean M·C and deviation S·C, truncated to [0, C]).
    /// [default: wcet]
    #[arg(long, value_parser = parse_exec)]
    pub exec: Option<ExecArg>,
    /// Set SCHED_FLAG_RECLAIM (GRUB) on the SCHED_DEADLINE reservations of a task set.
    #[arg(long)]
    pub reclaim: bool,
}

impl TaskSetArgs {
    /// The policy asked for, g-edf when none is.
    pub fn policy(&self) -> SchedPolicy {
        self.policy
            .unwrap_or("g-edf".parse().expect("a valid policy name"))
    }

    /// The configuration these options describe on `cpus` CPUs.
    pub fn configuration(&self, cpus: u32) -> Result<Configuration> {
        let limit = self.milp_time_limit.unwrap_or(Duration::from_secs(5));
        let assign = match &self.assign {
            Some(s) => Assign::parse(s, limit)?,
            None => Assign::default(),
        };
        Ok(Configuration {
            policy: self.policy(),
            cpus,
            cluster_size: self.cluster_size,
            assign,
            exec: self.exec.map_or(ExecModel::Wcet, |e| e.0),
            reclaim: self.reclaim,
        })
    }

    /// The options given, which only a task set uses: an rt-app file decides these itself, and
    /// ignoring them silently would run something else than asked.
    pub fn given(&self) -> Vec<&'static str> {
        [
            ("--policy", self.policy.is_some()),
            ("--cluster-size", self.cluster_size.is_some()),
            ("--assign", self.assign.is_some()),
            ("--milp-time-limit", self.milp_time_limit.is_some()),
            ("--exec", self.exec.is_some()),
            ("--reclaim", self.reclaim),
        ]
        .into_iter()
        .filter_map(|(f, given)| given.then_some(f))
        .collect()
    }
}

#[derive(Clone, Copy, Debug)]
pub struct ExecArg(pub ExecModel);

fn parse_exec(s: &str) -> Result<ExecArg, String> {
    let bad = || format!("`{s}`: expected wcet, uniform:F or normal:M,S with fractions in [0, 1]");
    let frac = |x: &str| {
        x.trim()
            .parse::<f64>()
            .ok()
            .filter(|v| (0.0..=1.0).contains(v))
            .ok_or_else(bad)
    };
    if s == "wcet" {
        return Ok(ExecArg(ExecModel::Wcet));
    }
    if let Some(f) = s.strip_prefix("uniform:") {
        return Ok(ExecArg(ExecModel::Uniform {
            min_fraction: frac(f)?,
        }));
    }
    if let Some(ms) = s.strip_prefix("normal:") {
        let (m, sd) = ms.split_once(',').ok_or_else(bad)?;
        return Ok(ExecArg(ExecModel::Normal {
            mean_fraction: frac(m)?,
            sd_fraction: frac(sd)?,
        }));
    }
    Err(bad())
}
