//! Backends that run one task set under one configuration (rm-vs-edf-multicore-linux.txt §5.4:
//! EDF = SCHED_DEADLINE with (C, D, T), RM = SCHED_FIFO with rate-monotonic priorities; global,
//! clustered or partitioned by the CPUs each task may use).
//!
//! The experiment decides the placement (one per set and scope, shared by EDF and RM and by every
//! backend, so a simulated and a real run of a set are placed alike) and hands it to the
//! [`Runner`] in a [`RunRequest`]; the runner returns a [`RunOutput`] built with
//! [`Collector`], so every backend produces the same record.

use pacer_model::TaskSet;
use pacer_sim::{Sim, SimConfig};
use pacer_workload::jobs::TaskCounters;
use pacer_workload::{ExecModel, TaskPolicy};

use super::metrics::{Collector, RunOutput};
use super::spec::{Backend, Configuration, Sched};

/// Everything a backend needs for one run.
#[derive(Debug, Clone, Copy)]
pub struct RunRequest<'a> {
    pub set: &'a TaskSet,
    pub config: Configuration,
    /// CPUs of the machine (simulated or used).
    pub cpus: usize,
    /// `affinity[i]`: the CPUs task `i` may run on (all of them for global scheduling).
    pub affinity: &'a [Vec<usize>],
    pub duration_ns: u64,
    pub seed: u64,
    /// Working-set size of the test program, bytes (the paper's WSS), if the spec gave one.
    pub wss_bytes: Option<u64>,
}

/// Why a run produced no output.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RunError {
    /// The backend exists in the spec but not in this build.
    #[error("backend `{0}` is not wired yet")]
    NotWired(&'static str),
    #[error("setting up the run: {0}")]
    Setup(String),
    #[error("the run failed: {0}")]
    Failed(String),
}

/// A backend. `Sync` because the experiment calls it from several threads when
/// [`Runner::parallel`] allows.
pub trait Runner: Sync {
    fn backend(&self) -> Backend;
    /// Whether runs may execute concurrently (the simulator: yes; a real machine: no, runs would
    /// disturb each other).
    fn parallel(&self) -> bool;
    /// Whether the backend can run here at all, checked once before any run starts.
    fn available(&self) -> Result<(), RunError> {
        Ok(())
    }
    fn run(&self, req: &RunRequest<'_>) -> Result<RunOutput, RunError>;
}

/// The discrete-event simulator, with no overheads: no context-switch, migration or cache cost
/// (the cost model is being added separately; until then runs say so in their notes).
#[derive(Debug, Clone, Copy, Default)]
pub struct SimRunner;

impl Runner for SimRunner {
    fn backend(&self) -> Backend {
        Backend::Sim
    }

    fn parallel(&self) -> bool {
        true
    }

    fn run(&self, req: &RunRequest<'_>) -> Result<RunOutput, RunError> {
        let set = req.set;
        let policy = match req.config.sched {
            Sched::Edf => TaskPolicy::Deadline,
            Sched::Rm => TaskPolicy::FixedPriority(pacer_workload::rate_monotonic_priorities(set)),
            Sched::Dm => TaskPolicy::FixedPriority(pacer_workload::deadline_monotonic_priorities(set)),
        };
        // Jobs run their WCET: the paper calibrates its test program to stay just below it.
        let mut w = pacer_workload::from_taskset(set, &policy, ExecModel::Wcet);
        if req.affinity.len() != w.threads.len() {
            return Err(RunError::Setup(format!(
                "{} affinities for {} tasks",
                req.affinity.len(),
                w.threads.len()
            )));
        }
        for (t, cpus) in w.threads.iter_mut().zip(req.affinity) {
            if cpus.len() < req.cpus {
                t.affinity = Some(cpus.clone());
            }
        }
        let mut cfg = SimConfig::new(req.cpus);
        cfg.seed = req.seed;
        let mut sim = Sim::new(w, cfg).map_err(|e| RunError::Setup(e.to_string()))?;
        let mut col = Collector::new(set);
        sim.run_until(req.duration_ns, &mut col);
        if let Some(e) = sim.failure() {
            return Err(RunError::Failed(e.to_string()));
        }
        let counters: Vec<TaskCounters> = sim.stats().into_iter().map(Into::into).collect();
        let mut notes = vec![
            "simulator: no context-switch, migration or cache-reload cost is modelled".to_string(),
            "simulator: cache misses are not modelled (unavailable)".to_string(),
        ];
        if req.wss_bytes.is_some() {
            notes.push("simulator: the working-set size has no effect without a cache model".into());
        }
        Ok(col.finish(&counters, &[], req.duration_ns, req.cpus, notes))
    }
}

/// The real-kernel backend's place holder: `pacer run` on task sets with cpusets is being written
/// separately; it will implement [`Runner`] with the same request and output.
#[derive(Debug, Clone, Copy, Default)]
pub struct LinuxRunner;

impl Runner for LinuxRunner {
    fn backend(&self) -> Backend {
        Backend::Linux
    }
    fn parallel(&self) -> bool {
        false
    }
    fn available(&self) -> Result<(), RunError> {
        Err(RunError::NotWired("linux"))
    }
    fn run(&self, _req: &RunRequest<'_>) -> Result<RunOutput, RunError> {
        Err(RunError::NotWired("linux"))
    }
}
