//! A task set under one configuration of the RM-vs-EDF study, run on this machine's kernel
//! (rm-vs-edf-multicore-linux.txt §4–5): the entry point `pacer run SET.json --policy …` and the
//! experiment pipeline's Linux backend share.
//!
//! The threads are those `pacer sim` simulates (`pacer_workload::placement`): SCHED_DEADLINE
//! (C, D, T) for EDF, SCHED_FIFO with rate/deadline-monotonic priorities for RM/DM. Where they
//! may run is made real with cpusets, as in the paper:
//! * partitioned and clustered configurations get one exclusive cpuset per CPU or cluster for the
//!   run ([`crate::cpuset::Partitioning`]), each its own SCHED_DEADLINE root domain, so that a
//!   reservation is admitted against its own partition's capacity and global EDF runs inside each
//!   cluster; every thread writes itself into its bin's cpuset before it takes its policy;
//! * a global configuration on every CPU of the machine runs in the machine's root domain; one on
//!   fewer CPUs than the machine has gets one cpuset of CPUs 0..M−1 (a SCHED_DEADLINE thread
//!   cannot be confined to part of a root domain by affinity alone).
//!
//! Before anything changes, each bin's Σ C/T of SCHED_DEADLINE tasks is checked against what the
//! kernel admits there (the admission cap times its CPUs, less the fair servers), with an error
//! naming the bin. The cpusets are removed after the run, also when it ends on SIGINT, SIGTERM
//! or SIGHUP (the termination signals are blocked from before the cpusets exist until after they
//! are gone, and end the run normally). If pacer is killed outright, its threads die with it
//! (the kernel releases their bandwidth) and the empty cpusets and changed root knobs are listed
//! in a state file, which the next partitioning or `pacer cpuset --cleanup` restores.
//!
//! Measured per task: the kernel's counters of the executor (`pacer_workload::jobs::TaskCounters`:
//! CPU time, switches, involuntary switches, migrations) and the utilisation they imply. Cache
//! misses need a hardware PMU: counted per run where one exists, `None` with the reason where not.

use std::path::PathBuf;

use pacer_model::reservation::{fair_servers_bw, BW_SHIFT, DEFAULT_FAIR_SERVER};
use pacer_model::{Duration, TaskSet};
use pacer_workload::jobs::JobRecord;
use pacer_workload::placement::{self, Configuration, Placement, PlacementError, Scope};
use pacer_workload::Policy;
use serde::Serialize;

use crate::cgroup::{CgroupVersion, CpusetError, CpusetHierarchy, PartitionSpec, Partitioning};
use crate::run::{self, Calibration, Collect, RunConfig, RunError, RunReport, Sink, StopReason};
use crate::signals::{SignalFd, TERMINATING};

/// Settings of one run besides the configuration.
#[derive(Debug, Clone)]
pub struct TaskSetRunOptions {
    /// Length of the run.
    pub duration: Duration,
    /// Seed of the execution-time draws (the simulator's per-thread streams).
    pub seed: u64,
    /// The busy loop's speed; `None`: measured at the start of the run.
    pub calibration: Option<Calibration>,
    /// `mlockall` for the run.
    pub lock_memory: bool,
    /// Records the tasks' context switches and wake-ups ([`RunConfig::sched_trace`]).
    pub sched_trace: Option<std::sync::Arc<crate::sched_trace::SchedTracer>>,
}

impl TaskSetRunOptions {
    /// `duration` with seed `seed`, calibrated at start-up, memory locked.
    pub fn new(duration: Duration, seed: u64) -> TaskSetRunOptions {
        TaskSetRunOptions {
            duration,
            seed,
            calibration: None,
            lock_memory: true,
            sched_trace: None,
        }
    }
}

/// Why a task set could not run.
#[derive(Debug, thiserror::Error)]
pub enum TaskSetError {
    /// The set does not fit the configuration (placement, cluster size, …).
    #[error(transparent)]
    Placement(#[from] PlacementError),
    /// A bin asks for more SCHED_DEADLINE bandwidth than the kernel admits there.
    #[error("{bin}: Σ C/T of its SCHED_DEADLINE tasks is {load:.4}, above the {limit:.4} the kernel admits there ({cpus} CPU(s) × the {cap:.2} admission cap, less {fair:.2} per CPU for the fair servers); tasks: {tasks}")]
    Admission {
        bin: String,
        load: f64,
        limit: f64,
        cpus: usize,
        cap: f64,
        fair: f64,
        tasks: String,
    },
    /// The configuration names CPUs this process may not use.
    #[error("--cpus {cpus}: the configuration uses CPUs 0..{cpus}, but this process may only use CPUs {allowed:?}")]
    Cpus { cpus: u32, allowed: Vec<usize> },
    /// The run needs cpusets and cannot have them.
    #[error("making the cpusets of {what}: {source}")]
    Cpuset {
        what: String,
        #[source]
        source: CpusetError,
    },
    /// The executor failed.
    #[error(transparent)]
    Run(#[from] RunError),
    /// Cpusets need privileges this process lacks.
    #[error("{0}")]
    Privilege(String),
}

/// What was measured of one task on the kernel.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TaskMetrics {
    pub name: String,
    /// The task's bin: its CPU (partitioned) or cluster (clustered); 0 for global.
    pub bin: usize,
    pub jobs: u64,
    /// CPU time over the run, ns.
    pub cpu_time_ns: u64,
    /// `cpu_time_ns` over the run's length: the measured utilisation (C/T when every job ran
    /// exactly C on a CPU of the calibrated speed).
    pub utilisation: f64,
    /// Times the thread was switched in.
    pub context_switches: u64,
    /// Times it was switched out while still runnable (preemptions, throttling).
    pub involuntary_switches: u64,
    /// Moves to another CPU (`se.nr_migrations`).
    pub migrations: u64,
}

/// Hardware cache misses of a run, where a PMU exists.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum CacheMissCount {
    /// Counted over the run (all its threads, the writer included).
    Counted { misses: u64 },
    /// Not measurable here, and why (a VM without PMU says so rather than counting 0).
    Unavailable { reason: String },
}

impl CacheMissCount {
    /// The count, `None` when unavailable.
    pub fn misses(&self) -> Option<u64> {
        match self {
            CacheMissCount::Counted { misses } => Some(*misses),
            CacheMissCount::Unavailable { .. } => None,
        }
    }
}

/// The outcome of [`run_taskset`].
#[derive(Debug, Clone, Serialize)]
pub struct TaskSetReport {
    /// The configuration, `g-edf` and so on.
    pub policy: String,
    pub cpus: u32,
    pub cluster_size: Option<u32>,
    pub assign: String,
    /// CPUs of each bin (partition or cluster; one bin for global).
    pub bins: Vec<Vec<usize>>,
    /// The cpusets the run made, one per bin, removed after it (empty: the machine's root domain).
    pub cpusets: Vec<PathBuf>,
    /// Per task, in task order.
    pub tasks: Vec<TaskMetrics>,
    pub cache_misses: CacheMissCount,
    /// The executor's report (calibration, stop reason, threads, policies read back).
    pub run: RunReport,
}

/// A task set's run with its job records kept in memory.
#[derive(Debug, Clone)]
pub struct TaskSetOutcome {
    /// Every finished job, in the order the kernel's threads finished them (the record type
    /// `pacer sim` produces; thread ids are task indices).
    pub jobs: Vec<JobRecord>,
    pub report: TaskSetReport,
}

/// Runs `set` under `cfg` on this machine for `opts.duration` and returns its jobs and metrics:
/// [`run_taskset`] with the records collected.
pub fn run_taskset_collect(
    set: &TaskSet,
    cfg: &Configuration,
    opts: &TaskSetRunOptions,
) -> Result<TaskSetOutcome, TaskSetError> {
    let mut sink = Collect::default();
    let report = run_taskset(set, cfg, opts, &mut sink)?;
    Ok(TaskSetOutcome {
        jobs: sink.jobs,
        report,
    })
}

/// Runs `set` under `cfg` on this machine, streaming its job records to `sink` (see the module
/// documentation for what is made and undone). Call it from the main thread before other
/// threads exist, as [`run::run`].
pub fn run_taskset(
    set: &TaskSet,
    cfg: &Configuration,
    opts: &TaskSetRunOptions,
    sink: &mut dyn Sink,
) -> Result<TaskSetReport, TaskSetError> {
    run_placement(&placement::place(set, cfg)?, cfg, opts, sink)
}

/// [`run_taskset`] of a set already placed with `placement::place(set, cfg)` (a caller that
/// shows the placement first runs exactly it: an ILP under a time limit may place differently
/// twice).
pub fn run_placement(
    placement: &Placement,
    cfg: &Configuration,
    opts: &TaskSetRunOptions,
    sink: &mut dyn Sink,
) -> Result<TaskSetReport, TaskSetError> {
    let allowed = crate::sched::get_affinity(0).map_err(|e| TaskSetError::Privilege(e.to_string()))?;
    if (0..cfg.cpus as usize).any(|c| !allowed.contains(&c)) {
        return Err(TaskSetError::Cpus {
            cpus: cfg.cpus,
            allowed,
        });
    }
    check_admission(placement, cfg, crate::admission::cap().per_cpu_bw)?;
    // Global on the whole machine needs no cpuset; anything narrower does (module docs).
    let whole_machine = cfg.policy.0 == Scope::Global && cfg.cpus as usize == allowed.len();
    let specs: Vec<PartitionSpec> = if whole_machine {
        Vec::new()
    } else {
        placement
            .bins
            .iter()
            .enumerate()
            .map(|(i, cpus)| PartitionSpec::new(bin_name(cfg.policy.0, i), cpus))
            .collect()
    };
    // Blocked from before the cpusets exist until they are gone: a signal in between ends the
    // run (the executor reads it) instead of killing pacer with the cpusets in place.
    let old_mask = run::sys::signal_mask();
    let signals = SignalFd::new(&TERMINATING)
        .map_err(|e| RunError::Setup(format!("setting up signal handling: {e}")))?;
    let result = with_cpusets(&specs, |parts| {
        let cpusets: Vec<Option<PathBuf>> = match parts {
            Some(p) => placement
                .bin_of
                .iter()
                .map(|&b| Some(p.partitions()[b].dir().join(crate::cgroup::v1::TASKS)))
                .collect(),
            None => Vec::new(),
        };
        let dirs: Vec<PathBuf> = parts
            .map(|p| p.partitions().iter().map(|q| q.dir().to_path_buf()).collect())
            .unwrap_or_default();
        let run_cfg = RunConfig {
            duration: Some(opts.duration),
            seed: opts.seed,
            calibration: opts.calibration,
            lock_memory: opts.lock_memory,
            cpusets,
            sched_trace: opts.sched_trace.clone(),
            ..RunConfig::default()
        };
        let counter = crate::perf::CacheMisses::start();
        let report = run::run(&placement.workload, &run_cfg, sink)?;
        let cache_misses = match counter.and_then(|c| c.read()) {
            Ok(misses) => CacheMissCount::Counted { misses },
            Err(reason) => CacheMissCount::Unavailable { reason },
        };
        Ok((report, dirs, cache_misses))
    });
    // A signal that came after the executor's own handling (during teardown) is one the run
    // would have ended on: count it as the stop, and do not let it kill the process afterwards.
    let late = std::iter::from_fn(|| signals.next()).last();
    drop(signals);
    run::sys::set_signal_mask(&old_mask);
    let (mut report, cpusets, cache_misses) = result?;
    if let (Some(sig), StopReason::Duration | StopReason::Finished) = (late, report.stopped_by) {
        report.stopped_by = StopReason::Signal(sig);
    }
    Ok(TaskSetReport {
        policy: cfg.policy.to_string(),
        cpus: cfg.cpus,
        cluster_size: cfg.cluster_size,
        assign: cfg.assign.to_string(),
        tasks: metrics(placement, &report),
        bins: placement.bins.clone(),
        cpusets,
        cache_misses,
        run: report,
    })
}

/// `cpu0`, `cluster1`, `global`: the cpuset's name (under `pacer-<pid>-`).
fn bin_name(scope: Scope, i: usize) -> String {
    match scope {
        Scope::Partitioned => format!("cpu{i}"),
        Scope::Clustered => format!("cluster{i}"),
        Scope::Global => "global".to_string(),
    }
}

type Ran = (RunReport, Vec<PathBuf>, CacheMissCount);

/// Makes the cpusets of `specs` (none: runs `f` with `None`), runs `f`, removes them whatever
/// `f` returned.
fn with_cpusets(
    specs: &[PartitionSpec],
    f: impl FnOnce(Option<&Partitioning>) -> Result<Ran, TaskSetError>,
) -> Result<Ran, TaskSetError> {
    if specs.is_empty() {
        return f(None);
    }
    let what = specs
        .iter()
        .map(|s| format!("{} (CPUs {})", s.name, crate::sys::format_cpu_list(&s.cpus)))
        .collect::<Vec<_>>()
        .join(", ");
    if !run::is_root() {
        return Err(TaskSetError::Privilege(format!(
            "running in exclusive cpusets ({what}) needs root: the cpusets are made and removed for the run"
        )));
    }
    let cpuset_err = |source| TaskSetError::Cpuset {
        what: what.clone(),
        source,
    };
    let hier = CpusetHierarchy::detect().map_err(cpuset_err)?;
    if hier.version() != CgroupVersion::V1 {
        // v2 moves whole processes; one process's threads in several partitions would need
        // threaded cgroups, which pacer does not make.
        return Err(cpuset_err(CpusetError::Unsupported(
            "threads of one process in several cpusets need cgroup v1 (v2 would need threaded cgroups)"
                .into(),
        )));
    }
    let parts = Partitioning::create(&hier, specs).map_err(cpuset_err)?;
    let result = f(Some(&parts));
    let torn = parts.teardown();
    let ran = result?;
    torn.map_err(|source| TaskSetError::Cpuset {
        what: format!("{what}: removing them (`pacer cpuset --cleanup` retries)"),
        source,
    })?;
    Ok(ran)
}

/// Refuses a bin whose SCHED_DEADLINE tasks ask for more than the kernel admits there, with
/// the kernel's own fixed-point arithmetic (`__dl_overflow`: Σ bw > cap × CPUs, the fair servers
/// counted in Σ).
fn check_admission(p: &Placement, cfg: &Configuration, per_cpu_bw: Option<u64>) -> Result<(), TaskSetError> {
    let Some(per_cpu) = per_cpu_bw else {
        return Ok(());
    };
    let unit = (1u64 << BW_SHIFT) as f64;
    for (b, cpus) in p.bins.iter().enumerate() {
        let n = cpus.len();
        let mut sum = fair_servers_bw(n, Some(DEFAULT_FAIR_SERVER));
        let mut names = Vec::new();
        for (t, _) in p.workload.threads.iter().zip(&p.bin_of).filter(|(_, &x)| x == b) {
            if let Policy::Deadline(r) = t.policy {
                sum += r.bw_fixed();
                names.push(t.name.as_str());
            }
        }
        let limit = per_cpu * n as u64;
        if sum > limit {
            let fair = fair_servers_bw(n, Some(DEFAULT_FAIR_SERVER));
            let bin = match cfg.policy.0 {
                Scope::Partitioned => format!("partition {b} (CPU {})", cpus[0]),
                Scope::Clustered => format!("cluster {b} (CPUs {})", crate::sys::format_cpu_list(cpus)),
                Scope::Global => format!("the global domain (CPUs {})", crate::sys::format_cpu_list(cpus)),
            };
            return Err(TaskSetError::Admission {
                bin,
                load: (sum - fair) as f64 / unit,
                limit: limit.saturating_sub(fair) as f64 / unit,
                cpus: n,
                cap: per_cpu as f64 / unit,
                fair: fair as f64 / unit / n as f64,
                tasks: names.join(", "),
            });
        }
    }
    Ok(())
}

fn metrics(p: &Placement, r: &RunReport) -> Vec<TaskMetrics> {
    let horizon = r.horizon_ns.max(1) as f64;
    p.workload
        .threads
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let c = r.counters.get(i).copied().unwrap_or_default();
            TaskMetrics {
                name: t.name.clone(),
                bin: p.bin_of[i],
                jobs: c.finished,
                cpu_time_ns: c.exec_ns,
                utilisation: c.exec_ns as f64 / horizon,
                context_switches: c.switches,
                involuntary_switches: c.involuntary_switches,
                migrations: c.migrations,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use pacer_model::Task;

    fn set(us: &[(u64, u64)]) -> TaskSet {
        TaskSet {
            tasks: us
                .iter()
                .enumerate()
                .map(|(i, &(c, t))| {
                    Task::implicit(format!("t{i}"), Duration::from_us(c), Duration::from_us(t))
                })
                .collect(),
            ..Default::default()
        }
    }

    const CAP: Option<u64> = Some(996_147); // 0.95 in the kernel's fixed point

    #[test]
    fn admission_names_the_partition_over_the_limit() {
        // wfd puts 0.6 and 0.3 on CPU 0, 0.6 on CPU 1 … then 0.3 on CPU 1: 0.9 ≤ 0.9 each.
        let ok = set(&[(6000, 10000), (6000, 10000), (3000, 10000), (2900, 10000)]);
        let cfg = Configuration::new("p-edf".parse().unwrap(), 2, None);
        check_admission(&placement::place(&ok, &cfg).unwrap(), &cfg, CAP).unwrap();
        let over = set(&[(6000, 10000), (6000, 10000), (3000, 10000), (3200, 10000)]);
        let e = check_admission(&placement::place(&over, &cfg).unwrap(), &cfg, CAP).unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.starts_with("partition 0 (CPU 0): Σ C/T of its SCHED_DEADLINE tasks is 0.92"),
            "{msg}"
        );
        assert!(msg.contains("above the 0.90"), "{msg}");
        // The same load under RM has no admission control to pass.
        let rm = Configuration::new("p-rm".parse().unwrap(), 2, None);
        check_admission(&placement::place(&over, &rm).unwrap(), &rm, CAP).unwrap();
        // Nor anything without a cap (sched_rt_runtime_us = -1).
        check_admission(&placement::place(&over, &cfg).unwrap(), &cfg, None).unwrap();
    }

    #[test]
    fn clustered_and_global_bins_are_named() {
        let over = set(&[(9500, 10000), (9000, 10000)]);
        let c = Configuration::new("c-edf".parse().unwrap(), 2, Some(2));
        let e = check_admission(&placement::place(&over, &c).unwrap(), &c, CAP).unwrap_err();
        assert!(e.to_string().starts_with("cluster 0 (CPUs 0-1): Σ C/T"), "{e}");
        let g = Configuration::new("g-edf".parse().unwrap(), 2, None);
        let e = check_admission(&placement::place(&over, &g).unwrap(), &g, CAP).unwrap_err();
        assert!(e.to_string().starts_with("the global domain (CPUs 0-1)"), "{e}");
        assert_eq!(bin_name(Scope::Partitioned, 1), "cpu1");
    }
}
