//! How a task set runs under one of the study's configurations ({global, clustered,
//! partitioned} × {EDF, RM, DM} on M CPUs): which policy each thread gets and which CPUs it may
//! use. One mapping for every consumer — `pacer sim`, `pacer convert` (the rt-app file), `pacer
//! run` and the experiment pipeline — so the simulator and the kernel run the same threads.
//!
//! EDF is SCHED_DEADLINE (runtime C, deadline D, period T); RM and DM are SCHED_FIFO with rate-
//! or deadline-monotonic priorities ([`rate_monotonic_priorities`]). Global configurations leave
//! every thread free on all M CPUs; clustered ones split the CPUs into clusters of K consecutive
//! CPUs and partitioned ones into single CPUs, and place tasks into them by a bin-packing
//! heuristic or the min–max-load ILP (pacer_analysis::partition). Each thread's affinity is then
//! its bin's CPUs, and [`Placement::bins`] lists the bins so that a backend can give each its own
//! scheduling domain (on Linux, an exclusive cpuset: its own SCHED_DEADLINE root domain).

use std::fmt;
use std::str::FromStr;

use pacer_analysis::partition::{self, Heuristic};
use pacer_analysis::timings;
use pacer_model::{Duration, TaskSet};

use crate::model::{Policy, Workload};
use crate::taskset::{
    deadline_monotonic_priorities, from_taskset, rate_monotonic_priorities, ExecModel, TaskPolicy,
};

/// Where threads may run.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// Every thread on every CPU.
    Global,
    /// Clusters of `cluster_size` CPUs, tasks placed into them.
    Clustered,
    /// One CPU per bin.
    Partitioned,
}

/// Which scheduler orders the threads.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Sched {
    /// SCHED_DEADLINE reservations (C, D, T).
    Edf,
    /// SCHED_FIFO, rate-monotonic priorities.
    Rm,
    /// SCHED_FIFO, deadline-monotonic priorities.
    Dm,
}

/// A configuration's policy, written `g-edf`, `c-rm`, `p-dm`, …
#[derive(Clone, Copy, PartialEq, Eq, Debug, Hash)]
pub struct SchedPolicy(pub Scope, pub Sched);

impl fmt::Display for SchedPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let scope = match self.0 {
            Scope::Global => "g",
            Scope::Clustered => "c",
            Scope::Partitioned => "p",
        };
        let sched = match self.1 {
            Sched::Edf => "edf",
            Sched::Rm => "rm",
            Sched::Dm => "dm",
        };
        write!(f, "{scope}-{sched}")
    }
}

impl FromStr for SchedPolicy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let bad =
            || format!("`{s}`: expected one of g-edf, c-edf, p-edf, g-rm, c-rm, p-rm, g-dm, c-dm, p-dm");
        let (scope, sched) = s.split_once('-').ok_or_else(bad)?;
        let scope = match scope {
            "g" => Scope::Global,
            "c" => Scope::Clustered,
            "p" => Scope::Partitioned,
            _ => return Err(bad()),
        };
        let sched = match sched {
            "edf" => Sched::Edf,
            "rm" => Sched::Rm,
            "dm" => Sched::Dm,
            _ => return Err(bad()),
        };
        Ok(SchedPolicy(scope, sched))
    }
}

impl serde::Serialize for SchedPolicy {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// How clustered and partitioned configurations place tasks into bins.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Assign {
    /// A bin-packing heuristic by utilisation (Σ u ≤ the bin's CPUs).
    Heuristic(Heuristic),
    /// The min–max-load ILP of the RM-vs-EDF study, within this wall-clock limit.
    Ilp { time_limit: Duration },
}

impl Default for Assign {
    /// Worst-fit decreasing, as `pacer sim` has always defaulted to.
    fn default() -> Self {
        Assign::Heuristic(Heuristic::WFD)
    }
}

impl Assign {
    /// Parses `--assign`: a heuristic's name or `ilp` (with `time_limit`).
    pub fn parse(s: &str, time_limit: Duration) -> Result<Assign, PlacementError> {
        if s == "ilp" {
            return Ok(Assign::Ilp { time_limit });
        }
        s.parse()
            .map(Assign::Heuristic)
            .map_err(|e: partition::ParseHeuristicError| PlacementError::Assign(format!("{e}; or `ilp`")))
    }
}

impl fmt::Display for Assign {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Assign::Heuristic(h) => f.write_str(h.name()),
            Assign::Ilp { .. } => f.write_str("ilp"),
        }
    }
}

/// One configuration of the study: everything that decides how a task set becomes threads.
#[derive(Clone, Debug, PartialEq)]
pub struct Configuration {
    pub policy: SchedPolicy,
    /// CPUs, numbered 0..cpus.
    pub cpus: u32,
    /// CPUs per cluster; required by clustered policies, ignored otherwise.
    pub cluster_size: Option<u32>,
    pub assign: Assign,
    /// Work of each job relative to C.
    pub exec: ExecModel,
    /// SCHED_FLAG_RECLAIM on the reservations (EDF only).
    pub reclaim: bool,
}

impl Configuration {
    /// `policy` on `cpus` CPUs with the defaults: worst-fit decreasing, jobs of exactly C, no
    /// reclaiming.
    pub fn new(policy: SchedPolicy, cpus: u32, cluster_size: Option<u32>) -> Configuration {
        Configuration {
            policy,
            cpus,
            cluster_size,
            assign: Assign::default(),
            exec: ExecModel::Wcet,
            reclaim: false,
        }
    }
}

/// Why a task set cannot run under a configuration.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PlacementError {
    #[error("--cpus {0}: expected at least one CPU")]
    NoCpus(u32),
    #[error("--policy {0}: needs --cluster-size K (CPUs per cluster, dividing --cpus)")]
    NoClusterSize(SchedPolicy),
    #[error("--cluster-size {size}: expected a divisor of --cpus {cpus}")]
    ClusterSize { size: u32, cpus: u32 },
    #[error("--assign: {0}")]
    Assign(String),
    #[error("--assign {assign}: task {task} (`{name}`) fits in no {bin} (Σ utilisation would exceed capacity); try another heuristic, more CPUs, or a global policy")]
    Unplaced {
        assign: String,
        task: usize,
        name: String,
        bin: &'static str,
    },
    #[error("--assign ilp: {0}")]
    Ilp(String),
    #[error("--reclaim: only SCHED_DEADLINE (the *-edf policies) reclaims bandwidth")]
    ReclaimWithoutEdf,
    #[error("the task set has no tasks")]
    Empty,
    #[error("a placement of {placed} tasks into {bins} bins does not fit a set of {tasks} tasks")]
    Given {
        tasks: usize,
        bins: usize,
        placed: usize,
    },
}

/// A task set mapped onto threads under one configuration.
#[derive(Clone, Debug, PartialEq)]
pub struct Placement {
    /// One thread per task, in task order, with its policy and affinity.
    pub workload: Workload,
    /// The CPUs of each bin (partition or cluster); one bin of every CPU for a global policy.
    pub bins: Vec<Vec<usize>>,
    /// The bin of each task, in task order.
    pub bin_of: Vec<usize>,
}

impl Placement {
    /// Whether the bins are separate scheduling domains (clustered and partitioned policies).
    pub fn is_split(&self) -> bool {
        self.workload.threads.iter().any(|t| t.affinity.is_some())
    }

    /// Σ C/T of each bin's tasks, in bin order (the load a SCHED_DEADLINE root domain admits).
    pub fn bin_loads(&self) -> Vec<f64> {
        let mut load = vec![0.0; self.bins.len()];
        for (t, &b) in self.workload.threads.iter().zip(&self.bin_of) {
            if let Policy::Deadline(r) = t.policy {
                load[b] += r.bandwidth();
            } else if let Some(p) = t.timer_period() {
                load[b] += wcet_of(t).ns() as f64 / p.ns().max(1) as f64;
            }
        }
        load
    }
}

/// A task-set thread's WCET: the upper bound of its `run` work.
fn wcet_of(t: &crate::model::ThreadSpec) -> Duration {
    t.phases
        .iter()
        .flat_map(|p| &p.events)
        .find_map(|e| match e {
            crate::model::Event::Run { work } => Some(work.upper_bound()),
            _ => None,
        })
        .unwrap_or(Duration::ZERO)
}

/// Maps `set` onto threads under `cfg`.
pub fn place(set: &TaskSet, cfg: &Configuration) -> Result<Placement, PlacementError> {
    let SchedPolicy(scope, _) = cfg.policy;
    let m = cfg.cpus as usize;
    if m == 0 {
        return Err(PlacementError::NoCpus(cfg.cpus));
    }
    if set.tasks.is_empty() {
        return Err(PlacementError::Empty);
    }
    let (capacities, bins): (Vec<usize>, Vec<Vec<usize>>) = match scope {
        Scope::Global => return with_bins(set, cfg, vec![(0..m).collect()], vec![0; set.tasks.len()]),
        Scope::Partitioned => (vec![1; m], (0..m).map(|c| vec![c]).collect()),
        Scope::Clustered => {
            let k = cfg
                .cluster_size
                .ok_or(PlacementError::NoClusterSize(cfg.policy))?;
            if k == 0 || !cfg.cpus.is_multiple_of(k) {
                return Err(PlacementError::ClusterSize {
                    size: k,
                    cpus: cfg.cpus,
                });
            }
            let k = k as usize;
            (
                vec![k; m / k],
                (0..m / k).map(|c| (c * k..(c + 1) * k).collect()).collect(),
            )
        }
    };
    let ts = timings(&set.tasks);
    let how = match cfg.assign {
        Assign::Ilp { time_limit } => partition::Placement::Ilp {
            time_limit: std::time::Duration::from_nanos(time_limit.ns()),
        },
        Assign::Heuristic(h) => partition::Placement::Heuristic(h),
    };
    let bin_of = match partition::place(&ts, &capacities, how) {
        Ok(b) => b,
        Err(partition::PlaceError::Milp(e)) => return Err(PlacementError::Ilp(e.to_string())),
        Err(partition::PlaceError::Unplaced { heuristic, task }) => {
            return Err(PlacementError::Unplaced {
                assign: heuristic.name().to_string(),
                task,
                name: set.tasks[task].name.clone(),
                bin: if scope == Scope::Partitioned {
                    "CPU"
                } else {
                    "cluster"
                },
            })
        }
    };
    with_bins(set, cfg, bins, bin_of)
}

/// The threads of `set` under `cfg` with a placement already made (`bins[b]`: the CPUs of bin
/// `b`; `bin_of[i]`: task `i`'s bin), for a caller that places once and runs the set several
/// times or on several backends (an ILP under a time limit may place differently on two calls).
/// Global configurations leave the threads free on every CPU.
pub fn with_bins(
    set: &TaskSet,
    cfg: &Configuration,
    bins: Vec<Vec<usize>>,
    bin_of: Vec<usize>,
) -> Result<Placement, PlacementError> {
    let SchedPolicy(scope, sched) = cfg.policy;
    if set.tasks.is_empty() {
        return Err(PlacementError::Empty);
    }
    if cfg.reclaim && sched != Sched::Edf {
        return Err(PlacementError::ReclaimWithoutEdf);
    }
    if bin_of.len() != set.tasks.len() || bin_of.iter().any(|&b| b >= bins.len()) {
        return Err(PlacementError::Given {
            tasks: set.tasks.len(),
            bins: bins.len(),
            placed: bin_of.len(),
        });
    }
    let policy = match sched {
        Sched::Edf => TaskPolicy::Deadline,
        Sched::Rm => TaskPolicy::FixedPriority(rate_monotonic_priorities(set)),
        Sched::Dm => TaskPolicy::FixedPriority(deadline_monotonic_priorities(set)),
    };
    let mut workload = from_taskset(set, &policy, cfg.exec);
    if cfg.reclaim {
        for t in &mut workload.threads {
            if let Policy::Deadline(r) = &mut t.policy {
                r.flags.reclaim = true;
            }
        }
    }
    if scope != Scope::Global {
        for (t, &b) in workload.threads.iter_mut().zip(&bin_of) {
            t.affinity = Some(bins[b].clone());
        }
    }
    Ok(Placement {
        workload,
        bins,
        bin_of,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use pacer_model::Task;

    fn set(tasks: &[(u64, u64)]) -> TaskSet {
        TaskSet {
            tasks: tasks
                .iter()
                .enumerate()
                .map(|(i, &(c, t))| {
                    Task::implicit(format!("t{i}"), Duration::from_ms(c), Duration::from_ms(t))
                })
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn policies_parse_and_print() {
        for s in ["g-edf", "c-rm", "p-dm"] {
            assert_eq!(s.parse::<SchedPolicy>().unwrap().to_string(), s);
        }
        assert!("x-edf".parse::<SchedPolicy>().is_err());
        assert!("p-fifo".parse::<SchedPolicy>().is_err());
    }

    #[test]
    fn partitioned_places_every_task_on_one_cpu() {
        let s = set(&[(6, 10), (6, 10), (2, 10)]);
        let p = place(&s, &Configuration::new("p-edf".parse().unwrap(), 2, None)).unwrap();
        assert_eq!(p.bins, vec![vec![0], vec![1]]);
        for (t, &b) in p.workload.threads.iter().zip(&p.bin_of) {
            assert_eq!(t.affinity.as_deref(), Some(&p.bins[b][..]));
        }
        let loads = p.bin_loads();
        assert!((loads.iter().sum::<f64>() - 1.4).abs() < 1e-9, "{loads:?}");
        assert!(p.is_split());
    }

    #[test]
    fn global_and_clustered_bins() {
        let s = set(&[(1, 10), (2, 20)]);
        let g = place(&s, &Configuration::new("g-rm".parse().unwrap(), 2, None)).unwrap();
        assert_eq!(g.bins, vec![vec![0, 1]]);
        assert!(!g.is_split());
        assert!(matches!(
            g.workload.threads[0].policy,
            Policy::Fifo { priority: 99 }
        ));
        let c = place(&s, &Configuration::new("c-edf".parse().unwrap(), 2, Some(2))).unwrap();
        assert_eq!(c.bins, vec![vec![0, 1]]);
        assert!(c.is_split());
    }

    #[test]
    fn bad_configurations_say_what_to_change() {
        let s = set(&[(9, 10), (9, 10), (9, 10)]);
        let e = place(&s, &Configuration::new("c-edf".parse().unwrap(), 4, None)).unwrap_err();
        assert_eq!(e, PlacementError::NoClusterSize("c-edf".parse().unwrap()));
        let e = place(&s, &Configuration::new("c-edf".parse().unwrap(), 4, Some(3))).unwrap_err();
        assert!(e.to_string().contains("divisor of --cpus 4"), "{e}");
        let e = place(&s, &Configuration::new("p-edf".parse().unwrap(), 2, None)).unwrap_err();
        assert!(e.to_string().contains("task 2 (`t2`) fits in no CPU"), "{e}");
        let mut rm = Configuration::new("p-rm".parse().unwrap(), 4, None);
        rm.reclaim = true;
        assert_eq!(place(&s, &rm).unwrap_err(), PlacementError::ReclaimWithoutEdf);
        assert!(Assign::parse("best", Duration::ZERO).is_err());
        assert_eq!(
            Assign::parse("ilp", Duration::from_secs(1)).unwrap(),
            Assign::Ilp {
                time_limit: Duration::from_secs(1)
            }
        );
    }
}
