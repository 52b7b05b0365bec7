//! Running the matrix of rm-vs-edf-multicore-linux.txt §5.3–5.4: sets (points × sets per point)
//! × configurations × backends, skipping what the output directory already holds, in parallel
//! where the backend allows, restricted to one shard when asked.
//!
//! Shards take every N-th run of the matrix in its fixed order (run i belongs to shard
//! i mod N + 1), so each shard gets a mix of light and heavy points and the union of all shards is
//! the matrix, whatever N.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use pacer_analysis::partition;
use pacer_analysis::timings;
use pacer_model::TaskSet;
use rayon::prelude::*;

use super::metrics::RunMetrics;
use super::runner::{RunError, RunRequest, Runner};
use super::spec::{Backend, Scope, Spec};
use super::store::{RunKey, RunRecord, Store, StoreError, RUN_SCHEMA};

/// Shard K of N (1-based K).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    pub k: usize,
    pub n: usize,
}

impl std::str::FromStr for Shard {
    type Err = String;
    fn from_str(s: &str) -> Result<Shard, String> {
        let bad = || format!("`{s}`: expected K/N with 1 ≤ K ≤ N, such as 2/8");
        let (k, n) = s.split_once('/').ok_or_else(bad)?;
        let k: usize = k.trim().parse().map_err(|_| bad())?;
        let n: usize = n.trim().parse().map_err(|_| bad())?;
        if n == 0 || k == 0 || k > n {
            return Err(bad());
        }
        Ok(Shard { k, n })
    }
}

/// Every run of the experiment, in the matrix's fixed order (point, set, configuration, backend).
pub fn matrix(spec: &Spec) -> Vec<RunKey> {
    let mut v = Vec::new();
    for point in 0..spec.points().len() {
        for set in 0..spec.sets {
            for config in 0..spec.configurations.len() {
                for &backend in &spec.backends {
                    v.push(RunKey {
                        point,
                        set,
                        config,
                        backend,
                    });
                }
            }
        }
    }
    v
}

/// The runs of one shard (all of them without a shard).
pub fn shard_of(spec: &Spec, shard: Option<Shard>) -> Vec<RunKey> {
    let all = matrix(spec);
    match shard {
        None => all,
        Some(s) => all
            .into_iter()
            .enumerate()
            .filter(|(i, _)| i % s.n == s.k - 1)
            .map(|(_, k)| k)
            .collect(),
    }
}

/// Progress of an experiment, reported after each run.
#[derive(Debug, Clone, Copy)]
pub struct Progress {
    /// Runs of this invocation finished (run or failed), and to do in total.
    pub done: usize,
    pub total: usize,
}

/// What an invocation did.
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    /// Runs of the shard.
    pub runs: usize,
    /// Found in the output directory and skipped.
    pub cached: usize,
    /// Run now.
    pub ran: Vec<RunKey>,
    /// Runs that failed, with why.
    pub failed: Vec<(RunKey, RunError)>,
}

/// Why an experiment stopped.
#[derive(Debug, thiserror::Error)]
pub enum ExperimentError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("{backend}: {source}")]
    Backend {
        backend: &'static str,
        #[source]
        source: RunError,
    },
    #[error("generating set {set} of R = {r}, n = {n}: {message}")]
    Generate {
        r: f64,
        n: usize,
        set: usize,
        message: String,
    },
    #[error("no runner for backend `{0}`")]
    NoRunner(&'static str),
}

/// A generated set and its per-task CPU lists under each scope the pending runs need.
struct Prepared {
    set: TaskSet,
    placement: BTreeMap<Scope, Result<Bins, String>>,
}

/// Generates set `k` of point `p` (deterministic from the spec).
pub fn generate_set(spec: &Spec, p: usize, k: usize) -> Result<TaskSet, ExperimentError> {
    let mut set = pacer_analysis::gen::generate(&spec.gen_spec(p, k)).map_err(|e| {
        let pt = spec.points()[p];
        ExperimentError::Generate {
            r: pt.r,
            n: pt.n,
            set: k,
            message: e.to_string(),
        }
    })?;
    // Every job passes over its working set (the paper's test program, §5.2): on the kernel a
    // real buffer, in the simulator a cost only with a cache model.
    set.wss_bytes = spec.wss_bytes;
    Ok(set)
}

/// Where each task of `set` runs under `scope`: the bins' CPUs and each task's bin (one bin of
/// every CPU for global scheduling).
pub fn placement_of(spec: &Spec, set: &TaskSet, scope: Scope) -> Result<Bins, String> {
    let Some((caps, cpus)) = spec.bins(scope) else {
        return Ok(Bins {
            cpus: vec![(0..spec.cpus).collect()],
            bin_of: vec![0; set.tasks.len()],
        });
    };
    let bin_of =
        partition::place(&timings(&set.tasks), &caps, spec.placement()).map_err(|e| e.to_string())?;
    Ok(Bins { cpus, bin_of })
}

/// A placement: `cpus[b]` are bin `b`'s CPUs, `bin_of[i]` is task `i`'s bin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bins {
    pub cpus: Vec<Vec<usize>>,
    pub bin_of: Vec<usize>,
}

/// Runs the shard's runs that `store` does not hold yet. `runners` must cover the spec's
/// backends. Failed runs are reported in the outcome and leave no file, so a later invocation
/// tries them again.
pub fn run(
    spec: &Spec,
    store: &Store,
    runners: &[&dyn Runner],
    shard: Option<Shard>,
    progress: &(dyn Fn(Progress) + Sync),
) -> Result<Outcome, ExperimentError> {
    let keys = shard_of(spec, shard);
    let pending: Vec<RunKey> = keys
        .iter()
        .copied()
        .filter(|k| store.load(spec, k).is_none())
        .collect();
    let mut outcome = Outcome {
        runs: keys.len(),
        cached: keys.len() - pending.len(),
        ..Outcome::default()
    };
    let runner_of = |b: Backend| runners.iter().copied().find(|r| r.backend() == b);
    let backends: BTreeSet<Backend> = pending.iter().map(|k| k.backend).collect();
    for &b in &backends {
        let r = runner_of(b).ok_or(ExperimentError::NoRunner(b.name()))?;
        r.available().map_err(|source| ExperimentError::Backend {
            backend: b.name(),
            source,
        })?;
    }

    // Sets and placements first, once per set (the ILP is the costly part), shared by every
    // configuration and backend.
    let mut needed: BTreeMap<(usize, usize), BTreeSet<Scope>> = BTreeMap::new();
    for k in &pending {
        needed
            .entry((k.point, k.set))
            .or_default()
            .insert(spec.configurations[k.config].scope);
    }
    let prepared: Vec<((usize, usize), Prepared)> = needed
        .into_par_iter()
        .map(|((p, s), scopes)| {
            let set = generate_set(spec, p, s)?;
            let placement = scopes
                .into_iter()
                .map(|sc| (sc, placement_of(spec, &set, sc)))
                .collect();
            Ok(((p, s), Prepared { set, placement }))
        })
        .collect::<Result<_, ExperimentError>>()?;
    let prepared: BTreeMap<(usize, usize), Prepared> = prepared.into_iter().collect();

    let done = AtomicUsize::new(0);
    let total = pending.len();
    progress(Progress { done: 0, total });
    let results: Mutex<Vec<(RunKey, Result<(), RunError>)>> = Mutex::new(Vec::new());
    let one = |key: &RunKey| {
        let r = run_one(spec, store, runner_of(key.backend), &prepared, key);
        results.lock().unwrap_or_else(|e| e.into_inner()).push((*key, r));
        let d = done.fetch_add(1, Ordering::Relaxed) + 1;
        progress(Progress { done: d, total });
    };
    let (par, seq): (Vec<RunKey>, Vec<RunKey>) = pending
        .iter()
        .partition(|k| runner_of(k.backend).is_some_and(|r| r.parallel()));
    par.par_iter().for_each(one);
    seq.iter().for_each(one);

    let mut results = results.into_inner().unwrap_or_else(|e| e.into_inner());
    results.sort_by_key(|(k, _)| *k);
    for (k, r) in results {
        match r {
            Ok(()) => outcome.ran.push(k),
            Err(e) => outcome.failed.push((k, e)),
        }
    }
    Ok(outcome)
}

fn run_one(
    spec: &Spec,
    store: &Store,
    runner: Option<&dyn Runner>,
    prepared: &BTreeMap<(usize, usize), Prepared>,
    key: &RunKey,
) -> Result<(), RunError> {
    let runner = runner.ok_or(RunError::NotWired(key.backend.name()))?;
    let prep = prepared
        .get(&(key.point, key.set))
        .ok_or_else(|| RunError::Setup("set not generated".into()))?;
    let config = spec.configurations[key.config];
    let placement = match prep.placement.get(&config.scope) {
        Some(Ok(a)) => a,
        Some(Err(e)) => return Err(RunError::Setup(format!("placing the tasks: {e}"))),
        None => return Err(RunError::Setup("no placement".into())),
    };
    let run_seed = spec.run_seed(key.point, key.set);
    let req = RunRequest {
        set: &prep.set,
        config,
        cpus: spec.cpus,
        placement,
        duration_ns: spec.duration_ns,
        seed: run_seed,
        wss_bytes: spec.wss_bytes,
        reclaim: spec.reclaim,
        work: spec.work,
    };
    let started = Instant::now();
    let output = runner.run(&req)?;
    let wall_ns = started.elapsed().as_nanos() as u64;
    let pt = spec.points()[key.point];
    let rec = RunRecord {
        schema: RUN_SCHEMA.into(),
        backend: key.backend,
        configuration: config,
        label: config.label(),
        r: pt.r,
        n: pt.n,
        set: key.set,
        set_seed: spec.set_seed(key.point, key.set),
        run_seed,
        cpus: spec.cpus,
        metrics: RunMetrics::of(&output.tasks, output.duration_ns, spec.cpus),
        output,
        wall_ns,
    };
    store
        .save(spec, key, &rec)
        .map_err(|e| RunError::Failed(format!("saving the result: {e}")))
}

/// Every record of `keys` found in `stores` (the first store holding a key wins), with the keys
/// found in none.
pub fn collect(spec: &Spec, stores: &[Store], keys: &[RunKey]) -> (Vec<(RunKey, RunRecord)>, Vec<RunKey>) {
    let mut found = Vec::new();
    let mut missing = Vec::new();
    for k in keys {
        match stores.iter().find_map(|s| s.load(spec, k)) {
            Some(r) => found.push((*k, r)),
            None => missing.push(*k),
        }
    }
    (found, missing)
}
