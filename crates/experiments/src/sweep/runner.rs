//! Backends that run one task set under one configuration (rm-vs-edf-multicore-linux.txt §5.4:
//! EDF = SCHED_DEADLINE with (C, D, T), RM = SCHED_FIFO with rate-monotonic priorities; global,
//! clustered or partitioned by the CPUs each task may use).
//!
//! The experiment decides the placement (one per set and scope, shared by EDF and RM and by every
//! backend, so a simulated and a real run of a set are placed alike) and hands it to the
//! [`Runner`] in a [`RunRequest`]; the runner returns a [`RunOutput`] built with
//! [`Collector`], so every backend produces the same record.

use pacer_linux::run::{Calibration, StopReason};
use pacer_linux::taskset::{run_placement, CacheMissCount, TaskSetRunOptions};
use pacer_model::TaskSet;
use pacer_sim::{Sim, SimConfig};
use pacer_workload::calibration::CacheProfile;
use pacer_workload::jobs::TaskCounters;
use pacer_workload::placement::{self, with_bins, Placement, SchedPolicy};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, Mutex};

use super::execute::Bins;
use super::metrics::{Collector, RunOutput};
use super::spec::{Backend, Configuration};

/// Everything a backend needs for one run.
#[derive(Debug, Clone, Copy)]
pub struct RunRequest<'a> {
    pub set: &'a TaskSet,
    pub config: Configuration,
    /// CPUs of the machine (simulated or used).
    pub cpus: usize,
    /// Where each task runs (one bin of every CPU for global scheduling).
    pub placement: &'a Bins,
    pub duration_ns: u64,
    pub seed: u64,
    /// Working-set size of the test program, bytes (the paper's WSS), if the spec gave one.
    pub wss_bytes: Option<u64>,
    /// GRUB reclaiming on the EDF reservations ([`super::Spec::reclaim`]).
    pub reclaim: bool,
    /// Each job's work as a fraction of C ([`super::Spec::work`]).
    pub work: f64,
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
    /// Stopped by a signal (Ctrl-C, SIGTERM, SIGHUP); nothing of the run is kept.
    #[error("interrupted by signal {0}")]
    Interrupted(i32),
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

/// The discrete-event simulator. Without a cache profile it has no overheads (no
/// context-switch, migration or cache-reload cost, and runs say so in their notes); with one
/// (`pacer calibrate`'s measurements), a job resuming where its working set is not cached pays
/// the measured reload (docs/simulator.md, "Cache model").
#[derive(Debug, Clone, Default)]
pub struct SimRunner {
    pub cache: Option<Arc<CacheProfile>>,
}

impl SimRunner {
    pub fn with_cache(cache: Option<CacheProfile>) -> SimRunner {
        SimRunner {
            cache: cache.map(Arc::new),
        }
    }
}

impl Runner for SimRunner {
    fn backend(&self) -> Backend {
        Backend::Sim
    }

    fn parallel(&self) -> bool {
        true
    }

    fn run(&self, req: &RunRequest<'_>) -> Result<RunOutput, RunError> {
        let set = req.set;
        // A bin of every CPU (a cluster as large as the machine) needs no special case: the
        // simulator schedules an affinity of every CPU as none.
        let w = placement(req)?.workload;
        let mut cfg = SimConfig::new(req.cpus);
        cfg.seed = req.seed;
        cfg.cache_model = self.cache.clone();
        let mut sim = Sim::new(w, cfg).map_err(|e| RunError::Setup(e.to_string()))?;
        let mut col = Collector::new(set);
        sim.run_until(req.duration_ns, &mut col);
        if let Some(e) = sim.failure() {
            return Err(RunError::Failed(e.to_string()));
        }
        let counters: Vec<TaskCounters> = sim.stats().into_iter().map(Into::into).collect();
        let mut notes = vec!["simulator: cache misses are not modelled (unavailable)".to_string()];
        if self.cache.is_none() {
            notes.push("simulator: no context-switch, migration or cache-reload cost is modelled".into());
            if req.wss_bytes.is_some() {
                notes.push("simulator: the working-set size has no effect without a cache model".into());
            }
        } else if req.wss_bytes.is_none() {
            notes.push("simulator: a cache model without working sets charges nothing".into());
        }
        Ok(col.finish(&counters, &[], req.duration_ns, req.cpus, notes))
    }
}

/// The threads of a request: the task set under its configuration, placed as the experiment
/// placed it (`pacer_workload::placement`, the mapping `pacer sim`, `pacer run` and `pacer
/// convert` use).
fn placement(req: &RunRequest<'_>) -> Result<Placement, RunError> {
    with_bins(
        req.set,
        &workload_config(req),
        req.placement.cpus.clone(),
        req.placement.bin_of.clone(),
    )
    .map_err(|e| RunError::Setup(e.to_string()))
}

fn workload_config(req: &RunRequest<'_>) -> placement::Configuration {
    let mut c = placement::Configuration::new(
        SchedPolicy(req.config.scope, req.config.sched),
        req.cpus as u32,
        None,
    );
    c.reclaim = req.reclaim && req.config.sched == placement::Sched::Edf;
    if req.work < 1.0 {
        c.exec = pacer_workload::ExecModel::Normal {
            mean_fraction: req.work,
            sd_fraction: 0.0,
        };
    }
    c
}

/// The real kernel (`pacer_linux::taskset`): SCHED_DEADLINE (C, D, T) for EDF, SCHED_FIFO with
/// RM/DM priorities, one exclusive cpuset per partition or cluster, made and removed by each
/// run. Runs go one at a time on the calling thread; the busy loop is calibrated once, at the
/// first run. A run ended by SIGINT, SIGTERM or SIGHUP (after its cpusets and policies are
/// undone) fails as interrupted, and so does every run after it, so the experiment stops with
/// its finished runs saved. The caller blocks those signals before it starts any thread
/// ([`pacer_linux::signals::SignalFd`]), so that no other thread takes one instead.
#[derive(Debug, Default)]
pub struct LinuxRunner {
    calibration: Mutex<Option<Calibration>>,
    interrupted: AtomicI32,
}

impl LinuxRunner {
    pub fn new() -> LinuxRunner {
        LinuxRunner::default()
    }
}

impl Runner for LinuxRunner {
    fn backend(&self) -> Backend {
        Backend::Linux
    }
    fn parallel(&self) -> bool {
        false
    }
    fn available(&self) -> Result<(), RunError> {
        if !pacer_linux::cred::may_set_deadline() {
            return Err(RunError::Setup(
                "the linux backend needs root (SCHED_DEADLINE, SCHED_FIFO and cpusets)".into(),
            ));
        }
        Ok(())
    }
    fn run(&self, req: &RunRequest<'_>) -> Result<RunOutput, RunError> {
        let sig = self.interrupted.load(Ordering::Relaxed);
        if sig != 0 {
            return Err(RunError::Interrupted(sig));
        }
        let p = placement(req)?;
        let cfg = workload_config(req);
        let calibration = *self
            .calibration
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get_or_insert_with(pacer_linux::run::calibrate::calibrate);
        let mut opts = TaskSetRunOptions::new(pacer_model::Duration(req.duration_ns), req.seed);
        opts.calibration = Some(calibration);
        let mut sink = JobSink(Collector::new(req.set));
        let report =
            run_placement(&p, &cfg, &opts, &mut sink).map_err(|e| RunError::Failed(e.to_string()))?;
        if let StopReason::Signal(s) = report.run.stopped_by {
            self.interrupted.store(s, Ordering::Relaxed);
            return Err(RunError::Interrupted(s));
        }
        let counters: Vec<TaskCounters> = report
            .tasks
            .iter()
            .map(|t| TaskCounters {
                released: t.jobs,
                finished: t.jobs,
                exec_ns: t.cpu_time_ns,
                switches: t.context_switches,
                involuntary_switches: t.involuntary_switches,
                migrations: t.migrations,
                overruns: None,
            })
            .collect();
        let mut notes = vec![format!(
            "linux: busy loop calibrated at {:.3} ns per loop",
            calibration.ns_per_loop()
        )];
        match &report.cache_misses {
            CacheMissCount::Counted { misses } => notes.push(format!(
                "linux: {misses} cache misses over the whole run (not counted per task)"
            )),
            CacheMissCount::Unavailable { reason } => {
                notes.push(format!("linux: cache misses unavailable: {reason}"))
            }
        }
        if let Some(w) = req.wss_bytes {
            notes.push(format!(
                "linux: every job passes over its own {w}-byte working set (pacer_wss), its accesses sized by the committed calibration profile"
            ));
        }
        Ok(sink.0.finish(&counters, &[], req.duration_ns, req.cpus, notes))
    }
}

/// The executor's job stream into the experiment's collector.
struct JobSink(Collector);

impl pacer_linux::run::Sink for JobSink {
    fn job(&mut self, record: &pacer_workload::jobs::JobRecord) -> std::io::Result<()> {
        self.0.job(record);
        Ok(())
    }
}
