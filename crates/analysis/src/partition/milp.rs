//! Optimal min–max-load assignment as an integer linear program, after Lelli, Faggioli,
//! Cucinotta & Lipari, "An experimental comparison of different real-time schedulers on
//! multicore systems" (JSS 2012), §5.4: tasks are assigned to cores or clusters "so as to
//! minimise the maximum total load on each core or group of cores", the ILP is solved (GLPK
//! there, [`microlp`] here) under a time limit (960 s in the paper, [`PAPER_TIME_LIMIT`]), and
//! the best solution found in that time is used.
//!
//! Model, for tasks i with utilisation u_i and bins j with capacity cap_j CPUs:
//!
//! ```text
//! minimise   z
//! subject to Σ_j x_ij = 1                    for every task i
//!            Σ_i (u_i / cap_j) x_ij ≤ z      for every bin j
//!            x_ij ∈ {0, 1}, z ≥ 0
//! ```
//!
//! Loads are normalised by capacity so that clusters of different sizes compare fairly (a
//! 4-CPU cluster at load 2 is as busy as a CPU at 0.5). x_ij exists only where u_i ≤ cap_j: a
//! bin cannot host a task that alone exceeds it (for partitioned bins, u_i > 1).
//!
//! **This balances load; it does not decide schedulability.** Min–max load is the paper's
//! objective. The caller must still run the exact per-bin test on the result
//! ([`super::Assignment::first_failing_bin`]); a bin at load ≤ 1 may fail a constrained-deadline
//! or fixed-priority test, and the ILP knows nothing of deadlines.
//!
//! Solver strategy, and why:
//! - A heuristic solution is always computed first: LPT (largest task to the least normalised
//!   load, Graham 1969) and Worst-Fit-Decreasing, each improved by a move/swap descent on the
//!   most loaded bin. It is the warm start handed to microlp, the fallback when the solver
//!   stops without an incumbent (microlp evaluates a warm start only after the root LP, which
//!   for 48×192 takes ~0.3 s optimised and several seconds unoptimised), and a guarantee that
//!   the result is never worse than WFD.
//! - The LP relaxation of this model is weak (its bound is essentially Σu/Σcap), so on large
//!   instances branch and bound rarely proves optimality and rarely beats the descent; the
//!   result is then reported as not optimal with the best lower bound known.
//! - If the heuristic already meets a combinatorial lower bound, the solver is not run.
//! - Symmetry breaking for bins of equal capacity: with tasks ranked by decreasing utilisation,
//!   the task of rank r may only use the first r + 1 bins of each equal-capacity group. Any
//!   assignment can be relabelled within a group (bins ordered by their highest-ranked task) to
//!   satisfy this, so the optimum is kept while most of the m! equivalent labellings are cut.
//! - microlp checks its deadline only every 1000 simplex pivots inside an LP, which can
//!   overshoot by seconds in debug builds. The solver therefore runs on a worker thread and the
//!   call returns at the time limit plus a short grace period whatever the solver is doing; a
//!   solver still running then is abandoned and stops by itself at its next deadline check.

use std::sync::mpsc;
use std::time::{Duration, Instant};

use microlp::{
    ComparisonOp, OptimizationDirection, Problem, SolveOptions, SolveOutcome, TerminationReason, Variable,
};
use serde::Serialize;

use super::Assignment;
use crate::outcome::EPS;
use crate::Timing;

/// The time limit used in the paper (960 s).
pub const PAPER_TIME_LIMIT: Duration = Duration::from_secs(960);

/// Largest number of x_ij variables handed to the solver (n × bins); above it the heuristic
/// result is returned with [`MilpStatus::SolverFailed`].
pub const MAX_VARIABLES: usize = 1_000_000;

/// Solver settings.
#[derive(Debug, Clone, PartialEq)]
pub struct MilpOptions {
    /// Wall-clock budget for the whole call (heuristics, model building and solver). The call
    /// returns within this plus a grace of max(50 ms, limit/20) capped at 1 s.
    pub time_limit: Duration,
    /// Relative MIP gap at which the solver may stop (0 = prove optimality).
    pub mip_gap: f64,
    /// Maximum branch-and-bound nodes (`None` = unlimited); a deterministic alternative to the
    /// time limit.
    pub node_limit: Option<u64>,
    /// Hand the heuristic solution to microlp as its initial incumbent.
    pub warm_start: bool,
    /// Restrict equal-capacity bins as described in the module doc.
    pub symmetry_breaking: bool,
}

impl Default for MilpOptions {
    /// 10 s, exact (gap 0), no node limit, warm start and symmetry breaking on.
    fn default() -> Self {
        MilpOptions {
            time_limit: Duration::from_secs(10),
            mip_gap: 0.0,
            node_limit: None,
            warm_start: true,
            symmetry_breaking: true,
        }
    }
}

impl MilpOptions {
    /// Default options with the given time limit.
    pub fn with_time_limit(time_limit: Duration) -> Self {
        MilpOptions {
            time_limit,
            ..Self::default()
        }
    }
}

/// Why the search ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "status", content = "detail", rename_all = "snake_case")]
pub enum MilpStatus {
    /// The solver proved its solution optimal.
    Optimal,
    /// The heuristic solution met a lower bound, so it is optimal and the solver was not run
    /// (also used for the empty instance).
    BoundMet,
    /// The solver stopped at the requested MIP gap.
    MipGap,
    /// The time limit was reached (possibly before the solver started or found anything).
    TimeLimit,
    /// The node limit was reached.
    NodeLimit,
    /// The solver failed or panicked; the heuristic solution is returned.
    SolverFailed(String),
}

/// Where the returned assignment came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SolutionSource {
    /// microlp's incumbent (strictly better than the heuristic).
    Solver,
    /// The heuristic warm start (the solver found nothing better, or did not run).
    Heuristic,
}

/// The best assignment found and what is known about it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MilpResult {
    pub assignment: Assignment,
    /// max_j Σ_{i on j} u_i / cap_j of `assignment`, recomputed from it.
    pub max_load: f64,
    /// A proven lower bound on the optimal max load: the best of Σu/Σcap, max_i u_i / max cap,
    /// the pigeonhole bound on the (m)th and (m+1)th largest tasks, and the solver's bound.
    /// Never above `max_load`.
    pub lower_bound: f64,
    /// Whether `max_load` is proven optimal (by the solver, or by meeting `lower_bound`).
    pub optimal: bool,
    pub status: MilpStatus,
    pub source: SolutionSource,
    /// Max load of the heuristic warm start, for comparison.
    pub heuristic_max_load: f64,
    /// Branch-and-bound nodes solved.
    pub nodes: u64,
    /// Wall-clock time of the whole call.
    pub elapsed: Duration,
}

impl MilpResult {
    /// Relative gap (max_load − lower_bound) / max_load; 0 when proven optimal.
    pub fn gap(&self) -> f64 {
        if self.optimal || self.max_load <= 0.0 {
            0.0
        } else {
            ((self.max_load - self.lower_bound) / self.max_load).max(0.0)
        }
    }
}

/// Input the ILP cannot take.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum MilpError {
    /// No bin can host the task (u above every capacity, or no bins of positive capacity).
    #[error("task {task} (u = {u}) fits in no bin")]
    Unplaceable { task: usize, u: f64 },
    /// NaN, infinite or negative utilisation (e.g. a zero period).
    #[error("task {task} has an invalid utilisation ({u})")]
    InvalidUtilization { task: usize, u: f64 },
    /// `mip_gap` is negative or not finite.
    #[error("invalid MIP gap {0}: expected a finite value ≥ 0")]
    InvalidGap(f64),
}

/// Min–max normalised-load assignment of `ts` to bins of the given capacities (in CPUs).
pub fn solve(ts: &[Timing], bins: &[usize], opts: &MilpOptions) -> Result<MilpResult, MilpError> {
    let u: Vec<f64> = ts.iter().map(Timing::u).collect();
    solve_utilizations(&u, bins, opts)
}

/// As [`solve`], from utilisations.
pub fn solve_utilizations(u: &[f64], bins: &[usize], opts: &MilpOptions) -> Result<MilpResult, MilpError> {
    let start = Instant::now();
    // An absurd limit (Instant overflow) means no limit.
    let deadline = start.checked_add(opts.time_limit);

    if !opts.mip_gap.is_finite() || opts.mip_gap < 0.0 {
        return Err(MilpError::InvalidGap(opts.mip_gap));
    }
    for (task, &ui) in u.iter().enumerate() {
        if !ui.is_finite() || ui < 0.0 {
            return Err(MilpError::InvalidUtilization { task, u: ui });
        }
    }
    let eligible = |i: usize, j: usize| bins[j] > 0 && u[i] <= bins[j] as f64 + EPS;
    for (task, &ui) in u.iter().enumerate() {
        if !(0..bins.len()).any(|j| eligible(task, j)) {
            return Err(MilpError::Unplaceable { task, u: ui });
        }
    }

    let n = u.len();
    let m = bins.len();
    // Tasks by decreasing utilisation (ties by index) and each task's rank in that order.
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&a, &b| u[b].total_cmp(&u[a]).then(a.cmp(&b)));
    let mut rank = vec![0usize; n];
    for (r, &i) in order.iter().enumerate() {
        rank[i] = r;
    }

    let heuristic = best_heuristic(u, bins, &order, &eligible, deadline);
    let heuristic = if opts.symmetry_breaking {
        canonical_relabel(u, bins, &rank, heuristic)
    } else {
        heuristic
    };
    let heuristic_max_load = heuristic.max_normalized_load();
    let lb = lower_bound(u, bins, &order);

    let mut result = MilpResult {
        max_load: heuristic_max_load,
        lower_bound: lb.min(heuristic_max_load),
        optimal: true,
        status: MilpStatus::BoundMet,
        source: SolutionSource::Heuristic,
        heuristic_max_load,
        nodes: 0,
        elapsed: Duration::ZERO,
        assignment: heuristic,
    };
    if meets(heuristic_max_load, lb) {
        result.elapsed = start.elapsed();
        return Ok(result);
    }
    result.optimal = false;

    let remaining = deadline.map(|d| d.saturating_duration_since(Instant::now()));
    if remaining == Some(Duration::ZERO) {
        result.status = MilpStatus::TimeLimit;
        result.elapsed = start.elapsed();
        return Ok(result);
    }

    // Model building is not under microlp's deadline; refuse models whose construction alone
    // could take seconds and gigabytes.
    let candidate_vars = (0..m).filter(|&j| bins[j] > 0).count().saturating_mul(n);
    if candidate_vars > MAX_VARIABLES {
        result.status = MilpStatus::SolverFailed(format!(
            "model too large ({n} tasks × {m} bins > {MAX_VARIABLES} variables)"
        ));
        result.elapsed = start.elapsed();
        return Ok(result);
    }

    // Build the model.
    let mut problem = Problem::new(OptimizationDirection::Minimize);
    let z = problem.add_var(1.0, (0.0, f64::INFINITY));
    // Position of each bin within its equal-capacity group.
    let group_pos: Vec<usize> = (0..m)
        .map(|j| bins[..j].iter().filter(|&&c| c == bins[j]).count())
        .collect();
    let mut vars_of_task: Vec<Vec<(Variable, usize)>> = vec![Vec::new(); n];
    let mut rows_of_bin: Vec<Vec<(Variable, f64)>> = vec![Vec::new(); m];
    for i in 0..n {
        for j in 0..m {
            if !eligible(i, j) || (opts.symmetry_breaking && group_pos[j] > rank[i]) {
                continue;
            }
            let v = problem.add_binary_var(0.0);
            vars_of_task[i].push((v, j));
            if u[i] > 0.0 {
                rows_of_bin[j].push((v, u[i] / bins[j] as f64));
            }
        }
    }
    for vars in &vars_of_task {
        problem.add_constraint(vars.iter().map(|&(v, _)| (v, 1.0)), ComparisonOp::Eq, 1.0);
    }
    for mut row in rows_of_bin {
        if !row.is_empty() {
            row.push((z, -1.0));
            problem.add_constraint(row, ComparisonOp::Le, 0.0);
        }
    }

    let mut options = SolveOptions::default();
    options.time_limit = deadline.map(|d| d.saturating_duration_since(Instant::now()));
    options.mip_gap = opts.mip_gap;
    options.node_limit = opts.node_limit;
    if opts.warm_start {
        // Only the x's: the LP completion sets z to the max load.
        let hint = vars_of_task
            .iter()
            .enumerate()
            .flat_map(|(i, vars)| {
                let b = result.assignment.bin_of[i];
                vars.iter()
                    .map(move |&(v, j)| (v, if j == b { 1.0 } else { 0.0 }))
            })
            .collect();
        options.warm_start = Some(hint);
    }

    let report = run_solver(problem, options, vars_of_task, deadline, opts.time_limit);
    result.status = report.status;
    result.nodes = report.nodes;

    let mut solver_proved = false;
    if let Some(a) = report
        .bin_of
        .and_then(|b| Assignment::from_utilizations(u, bins, b))
        .filter(|a| a.bin_of.iter().enumerate().all(|(i, &j)| eligible(i, j)))
    {
        let load = a.max_normalized_load();
        solver_proved = result.status == MilpStatus::Optimal;
        if load < result.max_load - 1e-12 {
            result.max_load = load;
            result.assignment = a;
            result.source = SolutionSource::Solver;
        }
    }
    let bound = report.best_bound.filter(|b| b.is_finite()).unwrap_or(0.0);
    let lb = lb.max(bound);
    result.lower_bound = lb.min(result.max_load);
    result.optimal = solver_proved || meets(result.max_load, lb);
    result.elapsed = start.elapsed();
    Ok(result)
}

/// `load` equals the lower bound `lb` up to rounding.
fn meets(load: f64, lb: f64) -> bool {
    load <= lb + EPS * lb.abs().max(1.0)
}

/// What the solver thread hands back.
struct SolverReport {
    status: MilpStatus,
    bin_of: Option<Vec<usize>>,
    best_bound: Option<f64>,
    nodes: u64,
}

/// Runs microlp on a worker thread and waits at most until `deadline` plus a grace period.
fn run_solver(
    problem: Problem,
    options: SolveOptions,
    vars_of_task: Vec<Vec<(Variable, usize)>>,
    deadline: Option<Instant>,
    time_limit: Duration,
) -> SolverReport {
    let failed = |msg: String| SolverReport {
        status: MilpStatus::SolverFailed(msg),
        bin_of: None,
        best_bound: None,
        nodes: 0,
    };
    let (tx, rx) = mpsc::channel();
    let spawned = std::thread::Builder::new()
        .name("pacer-milp".into())
        .spawn(move || {
            let outcome = problem.solve_with(options);
            // The receiver may be gone (caller timed out): nothing to do then.
            let _ = tx.send(read_outcome(outcome, &vars_of_task));
        });
    let handle = match spawned {
        Ok(h) => h,
        Err(e) => return failed(format!("could not start the solver thread: {e}")),
    };
    let grace = (time_limit / 20).clamp(Duration::from_millis(50), Duration::from_secs(1));
    let received = match deadline.and_then(|d| d.checked_add(grace)) {
        Some(until) => rx.recv_timeout(until.saturating_duration_since(Instant::now())),
        None => rx.recv().map_err(|_| mpsc::RecvTimeoutError::Disconnected),
    };
    match received {
        Ok(report) => {
            let _ = handle.join();
            report
        }
        // Abandon the thread: microlp stops at its own next deadline check.
        Err(mpsc::RecvTimeoutError::Timeout) => SolverReport {
            status: MilpStatus::TimeLimit,
            bin_of: None,
            best_bound: None,
            nodes: 0,
        },
        Err(mpsc::RecvTimeoutError::Disconnected) => {
            let _ = handle.join();
            failed("the solver panicked".into())
        }
    }
}

/// Extracts status, assignment, bound and node count from a microlp outcome.
fn read_outcome(
    outcome: Result<SolveOutcome, microlp::Error>,
    vars_of_task: &[Vec<(Variable, usize)>],
) -> SolverReport {
    let outcome = match outcome {
        Ok(o) => o,
        Err(e) => {
            return SolverReport {
                status: MilpStatus::SolverFailed(e.to_string()),
                bin_of: None,
                best_bound: None,
                nodes: 0,
            }
        }
    };
    let stats = outcome.stats();
    let status = match outcome.termination_reason() {
        TerminationReason::ProvenOptimal => MilpStatus::Optimal,
        TerminationReason::MipGap => MilpStatus::MipGap,
        TerminationReason::TimeLimit => MilpStatus::TimeLimit,
        TerminationReason::NodeLimit => MilpStatus::NodeLimit,
        other => MilpStatus::SolverFailed(format!("unexpected termination {other:?}")),
    };
    let bin_of = outcome.solution().and_then(|sol| {
        vars_of_task
            .iter()
            .map(|vars| {
                // var_value_raw, not var_value: the latter asserts on integrality.
                let mut on = vars.iter().filter(|&&(v, _)| sol.var_value_raw(v) > 0.5);
                match (on.next(), on.next()) {
                    (Some(&(_, j)), None) => Some(j),
                    _ => None,
                }
            })
            .collect::<Option<Vec<usize>>>()
    });
    SolverReport {
        status,
        bin_of,
        best_bound: stats.best_bound,
        nodes: stats.nodes_solved,
    }
}

/// Lower bound on the optimal max normalised load (no solver needed).
fn lower_bound(u: &[f64], bins: &[usize], order: &[usize]) -> f64 {
    let total_cap: usize = bins.iter().sum();
    let max_cap = bins.iter().copied().max().unwrap_or(0);
    let used = bins.iter().filter(|&&c| c > 0).count();
    if total_cap == 0 || u.is_empty() {
        return 0.0;
    }
    let total_u: f64 = u.iter().sum();
    let mut lb = total_u / total_cap as f64;
    lb = lb.max(u[order[0]] / max_cap as f64);
    // Pigeonhole: two of the `used + 1` largest tasks share a bin.
    if u.len() > used && used > 0 {
        lb = lb.max((u[order[used - 1]] + u[order[used]]) / max_cap as f64);
    }
    lb
}

/// The better of LPT and WFD, each after the local descent.
fn best_heuristic(
    u: &[f64],
    bins: &[usize],
    order: &[usize],
    eligible: &dyn Fn(usize, usize) -> bool,
    deadline: Option<Instant>,
) -> Assignment {
    let m = bins.len();
    // LPT on normalised load: each task (largest first) to the eligible bin it leaves least
    // loaded. Every task has an eligible bin (checked by the caller).
    let mut loads = vec![0.0f64; m];
    let mut lpt = vec![0usize; u.len()];
    for &i in order {
        let mut best: Option<(f64, usize)> = None;
        for j in (0..m).filter(|&j| eligible(i, j)) {
            let after = (loads[j] + u[i]) / bins[j] as f64;
            if best.is_none() || best.is_some_and(|(b, _)| after < b) {
                best = Some((after, j));
            }
        }
        let j = best.map_or(0, |(_, j)| j);
        loads[j] += u[i];
        lpt[i] = j;
    }

    // Worst-Fit-Decreasing by remaining capacity (cap − load), the same rule and tie-breaking
    // as `pack(.., Heuristic::WFD, ..)` with only the eligibility test. Differs from LPT when
    // capacities differ.
    loads.fill(0.0);
    let mut wfd = vec![0usize; u.len()];
    for &i in order {
        let remaining = |j: usize| bins[j] as f64 - loads[j];
        let top = (0..m)
            .filter(|&j| eligible(i, j))
            .map(remaining)
            .fold(f64::NEG_INFINITY, f64::max);
        let j = (0..m)
            .find(|&j| eligible(i, j) && remaining(j) >= top - EPS)
            .unwrap_or(0);
        loads[j] += u[i];
        wfd[i] = j;
    }

    let lpt = improve(u, bins, eligible, lpt, deadline);
    let wfd = improve(u, bins, eligible, wfd, deadline);
    if wfd.max_normalized_load() < lpt.max_normalized_load() {
        wfd
    } else {
        lpt
    }
}

/// Steepest descent on the most loaded bin: move one of its tasks elsewhere, or swap one with a
/// smaller task of another bin, whichever lowers the pair's max load most; stop when nothing
/// does. Each step lowers the sorted load vector lexicographically, so it terminates; the step
/// cap and the deadline bound it anyway.
fn improve(
    u: &[f64],
    bins: &[usize],
    eligible: &dyn Fn(usize, usize) -> bool,
    mut bin_of: Vec<usize>,
    deadline: Option<Instant>,
) -> Assignment {
    let m = bins.len();
    let n = u.len();
    let cap = |j: usize| bins[j].max(1) as f64;
    let mut loads = vec![0.0f64; m];
    let mut members: Vec<Vec<usize>> = vec![Vec::new(); m];
    for (i, &j) in bin_of.iter().enumerate() {
        loads[j] += u[i];
        members[j].push(i);
    }
    let max_steps = 100 * (n + m);
    for _ in 0..max_steps {
        if deadline.is_some_and(|d| Instant::now() >= d) {
            break;
        }
        let Some(b) = (0..m).reduce(|a, j| {
            if loads[j] / cap(j) > loads[a] / cap(a) {
                j
            } else {
                a
            }
        }) else {
            break;
        };
        let current = loads[b] / cap(b);
        // (new pair max, task from b, destination bin, task swapped back or None)
        let mut best: Option<(f64, usize, usize, Option<usize>)> = None;
        let mut consider = |val: f64, i: usize, k: usize, l: Option<usize>| {
            if val < current - 1e-12 && (best.is_none() || best.is_some_and(|(bv, ..)| val < bv)) {
                best = Some((val, i, k, l));
            }
        };
        for &i in &members[b] {
            for k in 0..m {
                if k == b || !eligible(i, k) {
                    continue;
                }
                let moved = ((loads[b] - u[i]) / cap(b)).max((loads[k] + u[i]) / cap(k));
                consider(moved, i, k, None);
                for &l in &members[k] {
                    if u[l] < u[i] && eligible(l, b) {
                        let swapped =
                            ((loads[b] - u[i] + u[l]) / cap(b)).max((loads[k] - u[l] + u[i]) / cap(k));
                        consider(swapped, i, k, Some(l));
                    }
                }
            }
        }
        let Some((_, i, k, l)) = best else {
            break;
        };
        members[b].retain(|&x| x != i);
        members[k].push(i);
        loads[b] -= u[i];
        loads[k] += u[i];
        bin_of[i] = k;
        if let Some(l) = l {
            members[k].retain(|&x| x != l);
            members[b].push(l);
            loads[k] -= u[l];
            loads[b] += u[l];
            bin_of[l] = b;
        }
    }
    Assignment::from_utilizations(u, bins, bin_of).unwrap_or_else(|| {
        // Unreachable: bin_of came from valid bins and has one entry per task.
        Assignment {
            bin_of: vec![0; n],
            loads: vec![0.0; m],
            capacities: bins.to_vec(),
        }
    })
}

/// Relabels bins within each equal-capacity group so the symmetry-breaking restriction holds:
/// the group's bins, ordered by the best rank of their tasks (empty bins last), take the
/// group's indices in order. Loads and max load are unchanged.
fn canonical_relabel(u: &[f64], bins: &[usize], rank: &[usize], a: Assignment) -> Assignment {
    let m = bins.len();
    let mut best_rank = vec![usize::MAX; m];
    for (i, &j) in a.bin_of.iter().enumerate() {
        best_rank[j] = best_rank[j].min(rank[i]);
    }
    let mut new_index: Vec<usize> = (0..m).collect();
    let mut done = vec![false; m];
    for j in 0..m {
        if done[j] {
            continue;
        }
        let group: Vec<usize> = (j..m).filter(|&k| bins[k] == bins[j]).collect();
        let mut by_rank = group.clone();
        by_rank.sort_by_key(|&k| (best_rank[k], k));
        for (&old, &new) in by_rank.iter().zip(&group) {
            new_index[old] = new;
            done[old] = true;
        }
    }
    let bin_of = a.bin_of.iter().map(|&j| new_index[j]).collect();
    Assignment::from_utilizations(u, bins, bin_of).unwrap_or(a)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relabel_satisfies_symmetry_restriction() {
        let u = [0.1, 0.9, 0.5, 0.3];
        let bins = [1, 1, 1, 2];
        let rank = [3, 0, 1, 2];
        let a = Assignment::from_utilizations(&u, &bins, vec![1, 2, 0, 3]).unwrap();
        let r = canonical_relabel(&u, &bins, &rank, a.clone());
        // Task 1 (rank 0) must be in the first 1-CPU bin, task 2 (rank 1) in the second.
        assert_eq!(r.bin_of, vec![2, 0, 1, 3]);
        assert_eq!(r.max_normalized_load(), a.max_normalized_load());
    }

    #[test]
    fn lower_bound_pigeonhole() {
        let u = [0.6, 0.6, 0.6];
        let order = [0, 1, 2];
        assert!((lower_bound(&u, &[1, 1], &order) - 1.2).abs() < 1e-12);
    }

    #[test]
    fn descent_fixes_a_bad_start() {
        let u = [0.5, 0.5, 0.5, 0.5];
        let a = improve(&u, &[1, 1], &|_, _| true, vec![0, 0, 0, 1], None);
        assert!((a.max_normalized_load() - 1.0).abs() < 1e-12);
    }
}
