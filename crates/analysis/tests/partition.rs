//! Partitioning: hand-worked bin-packing examples per heuristic, the min–max-load ILP against
//! brute force, and a time-limited large instance.

use std::time::{Duration, Instant};

use pacer_analysis::partition::milp::{self, SolutionSource};
use pacer_analysis::partition::{
    clusters_of, load_fits, pack, Assignment, Fit, Heuristic, MilpError, MilpOptions, MilpStatus, Unplaced,
};
use pacer_analysis::{Timing, Verdict};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Tasks with the given utilisations in tenths (C = u·10 ms, T = 10 ms, D = T).
fn tenths(us: &[u64]) -> Vec<Timing> {
    us.iter()
        .map(|&x| Timing::implicit(x * 1_000_000, 10_000_000))
        .collect()
}

/// The running example: u = [0.5, 0.7, 0.5, 0.2, 0.4, 0.2, 0.5, 0.1, 0.6], Σu = 3.7.
fn example() -> Vec<Timing> {
    tenths(&[5, 7, 5, 2, 4, 2, 5, 1, 6])
}

/// Σu ≤ 1 (within rounding), capacity-1 bins.
fn sum_le_one(bin: &[Timing], _cap: usize) -> bool {
    bin.iter().map(Timing::u).sum::<f64>() <= 1.0 + 1e-9
}

fn packed(h: Heuristic, bins: usize) -> Result<Vec<usize>, Unplaced> {
    pack(&example(), &vec![1; bins], h, sum_le_one).map(|a| a.bin_of)
}

fn assert_loads(a: &Assignment, expect_tenths: &[u64]) {
    assert_eq!(a.loads.len(), expect_tenths.len());
    for (b, (&l, &e)) in a.loads.iter().zip(expect_tenths).enumerate() {
        assert!((l - e as f64 / 10.0).abs() < 1e-9, "bin {b}: {l} vs {e}/10");
    }
}

// ---- Hand-worked placements on 5 unit bins (task i → bin bin_of[i]) ----

#[test]
fn first_fit_by_hand() {
    // 0.5→B0; 0.7→B1; 0.5→B0 (=1.0); 0.2→B1 (.9); 0.4→B2; 0.2→B2 (.6); 0.5→B3;
    // 0.1→B1 (=1.0, B0 full); 0.6→B4 (B2 .6+.6, B3 .5+.6 too big).
    assert_eq!(packed(Heuristic::FF, 5).unwrap(), vec![0, 1, 0, 1, 2, 2, 3, 1, 4]);
    let a = pack(&example(), &[1; 5], Heuristic::FF, sum_le_one).unwrap();
    assert_loads(&a, &[10, 10, 6, 5, 6]);
}

#[test]
fn best_fit_by_hand() {
    // Same as FF on this input: each time the tightest admitting bin is also the first one.
    assert_eq!(packed(Heuristic::BF, 5).unwrap(), vec![0, 1, 0, 1, 2, 2, 3, 1, 4]);
}

#[test]
fn worst_fit_by_hand() {
    // With 5 bins: 0.5→B0, 0.7→B1, 0.5→B2, 0.2→B3, 0.4→B4 (empty bins first); 0.2→B3 (rem .8);
    // 0.5→B3 (rem .6, tie with B4, lower index); 0.1→B4 (rem .6); then remaining capacities are
    // .5 .3 .5 .1 .5 and 0.6 fits nowhere.
    assert_eq!(packed(Heuristic::WF, 5), Err(Unplaced { task: 8 }));
    // With 6 bins: the sixth task opens B5; 0.5→B3 (rem .8, tie with B5); 0.1→B5 (rem .8);
    // 0.6→B5 (rem .7, the only bin with ≥ .6 left).
    let a = pack(&example(), &[1; 6], Heuristic::WF, sum_le_one).unwrap();
    assert_eq!(a.bin_of, vec![0, 1, 2, 3, 4, 5, 3, 5, 5]);
    assert_loads(&a, &[5, 7, 5, 7, 4, 9]);
}

#[test]
fn next_fit_by_hand() {
    // 0.5→B0; 0.7→B1; 0.5→B2; 0.2→B2; 0.4→B3; 0.2→B3; 0.5→B4; 0.1→B4; 0.6 needs a sixth bin.
    assert_eq!(packed(Heuristic::NF, 5), Err(Unplaced { task: 8 }));
    assert_eq!(packed(Heuristic::NF, 6).unwrap(), vec![0, 1, 2, 2, 3, 3, 4, 4, 5]);
}

// Decreasing order: t1 .7, t8 .6, t0 .5, t2 .5, t6 .5, t4 .4, t3 .2, t5 .2, t7 .1.

#[test]
fn first_fit_decreasing_by_hand() {
    // .7→B0; .6→B1; .5→B2; .5→B2 (=1); .5→B3; .4→B1 (=1); .2→B0 (.9); .2→B3 (.7); .1→B0 (=1).
    let a = pack(&example(), &[1; 5], Heuristic::FFD, sum_le_one).unwrap();
    assert_eq!(a.bin_of, vec![2, 0, 2, 0, 1, 3, 3, 0, 1]);
    assert_loads(&a, &[10, 10, 10, 7, 0]);
}

#[test]
fn best_fit_decreasing_by_hand() {
    // .4 goes to B1 (rem .4, tightest), .2 to B0 (rem .3), .2 to B3 (B0 now too full),
    // .1 to B0 (rem .1): same as FFD here.
    assert_eq!(
        packed(Heuristic::BFD, 5).unwrap(),
        vec![2, 0, 2, 0, 1, 3, 3, 0, 1]
    );
}

#[test]
fn worst_fit_decreasing_by_hand() {
    // .7→B0 .6→B1 .5→B2 .5→B3 .5→B4; .4→B2 (rem .5 tie B2/B3/B4); .2→B3 (rem .5 tie B3/B4);
    // .2→B4 (rem .5); .1→B1 (rem .4).
    let a = pack(&example(), &[1; 5], Heuristic::WFD, sum_le_one).unwrap();
    assert_eq!(a.bin_of, vec![2, 0, 3, 3, 2, 4, 4, 1, 1]);
    assert_loads(&a, &[7, 7, 9, 7, 7]);
}

#[test]
fn next_fit_decreasing_by_hand() {
    // .7→B0; .6→B1; .5→B2; .5→B2; .5→B3; .4→B3; .2→B4; .2→B4; .1→B4.
    assert_eq!(
        packed(Heuristic::NFD, 5).unwrap(),
        vec![2, 0, 2, 4, 3, 4, 3, 4, 1]
    );
    assert_eq!(packed(Heuristic::NFD, 4), Err(Unplaced { task: 3 }));
}

#[test]
fn first_best_worst_differ() {
    // u = [.5, .7, .3, .25] into 3 unit bins.
    let ts = tenths(&[5, 7, 3]);
    let mut ts = ts;
    ts.push(Timing::implicit(25, 100));
    let run = |h| pack(&ts, &[1, 1, 1], h, sum_le_one).unwrap().bin_of;
    // FF: .3 → B0 (first), .25 → B1 (B0 at .8 + .25 > 1).
    assert_eq!(run(Heuristic::FF), vec![0, 1, 0, 1]);
    // BF: .3 → B1 (rem .3, tightest), .25 → B0 (rem .5).
    assert_eq!(run(Heuristic::BF), vec![0, 1, 1, 0]);
    // WF: .3 → B2 (empty), .25 → B2 (rem .7, the largest).
    assert_eq!(run(Heuristic::WF), vec![0, 1, 2, 2]);
}

#[test]
fn predicate_sees_bin_contents_then_candidate() {
    let ts = tenths(&[5, 7, 3]);
    let mut calls: Vec<(Vec<u64>, usize)> = Vec::new();
    let a = pack(&ts, &[1, 2], Heuristic::FF, |bin, cap| {
        calls.push((bin.iter().map(|t| t.c / 1_000_000).collect(), cap));
        sum_le_one(bin, cap)
    })
    .unwrap();
    assert_eq!(a.bin_of, vec![0, 1, 0]);
    assert_eq!(
        calls,
        vec![
            (vec![5], 1),    // task 0 into empty B0
            (vec![5, 7], 1), // task 1 tried with B0's task 0, rejected
            (vec![7], 2),    // then into empty B1
            (vec![5, 3], 1), // task 2 with B0's task 0, accepted
        ]
    );
}

#[test]
fn clustered_bins_rank_by_remaining_capacity() {
    // Bins of 1 and 2 CPUs with the load-only predicate: Worst Fit starts in the 2-CPU cluster,
    // Best Fit in the 1-CPU bin.
    let ts = tenths(&[6, 6, 6]);
    let wf = pack(&ts, &[1, 2], Heuristic::WF, load_fits).unwrap();
    // rem 1 vs 2 → B1; then 1 vs 1.4 → B1; then 1 vs 0.8 → B0.
    assert_eq!(wf.bin_of, vec![1, 1, 0]);
    let bf = pack(&ts, &[1, 2], Heuristic::BF, load_fits).unwrap();
    // .6 → B0 (rem 1); .6 → B1 (B0 full); .6 → B1 (rem 1.4).
    assert_eq!(bf.bin_of, vec![0, 1, 1]);
    assert!((bf.normalized_load(1) - 0.6).abs() < 1e-12);
}

#[test]
fn packing_edge_cases() {
    let none: [Timing; 0] = [];
    for h in Heuristic::ALL {
        // No tasks: an empty assignment, bins untouched.
        let a = pack(&none, &[1, 1], h, load_fits).unwrap();
        assert!(a.bin_of.is_empty());
        assert_eq!(a.loads, vec![0.0, 0.0]);
        // No bins: the first task in packing order is reported.
        let first = if h.decreasing { 1 } else { 0 };
        assert_eq!(
            pack(&tenths(&[5, 7]), &[], h, load_fits),
            Err(Unplaced { task: first })
        );
        // A task above one CPU fits nowhere.
        assert_eq!(
            pack(&tenths(&[5, 12, 1]), &[1, 4], h, load_fits),
            Err(Unplaced { task: 1 })
        );
        // Degenerate timings do not panic.
        let odd = [Timing::new(0, 0, 0), Timing::new(5, 0, 0), Timing::implicit(1, 2)];
        let _ = pack(&odd, &[1, 0, 2], h, load_fits);
        let _ = pack(&odd, &[1, 0, 2], h, |_, _| true);
    }
}

#[test]
fn heuristic_names() {
    assert_eq!(Heuristic::ALL.len(), 8);
    let names: Vec<String> = Heuristic::ALL.iter().map(|h| h.to_string()).collect();
    assert_eq!(names, ["ff", "bf", "wf", "nf", "ffd", "bfd", "wfd", "nfd"]);
    for h in Heuristic::ALL {
        assert_eq!(h.name().parse::<Heuristic>().unwrap(), h);
    }
    assert_eq!(
        "best-fit-decreasing".parse::<Heuristic>().unwrap(),
        Heuristic::new(Fit::Best, true)
    );
    assert!("fff".parse::<Heuristic>().is_err());
}

#[test]
fn cluster_capacities() {
    assert_eq!(clusters_of(8, 4), vec![4, 4]);
    assert_eq!(clusters_of(48, 6), vec![6; 8]);
    assert_eq!(clusters_of(10, 4), vec![4, 4, 2]);
    assert_eq!(clusters_of(3, 1), vec![1, 1, 1]);
    assert_eq!(clusters_of(4, 8), vec![4]);
    assert!(clusters_of(0, 2).is_empty());
    assert!(clusters_of(4, 0).is_empty());
}

#[test]
fn outcome_and_bin_check() {
    let ok = pack(&example(), &[1; 5], Heuristic::FFD, sum_le_one);
    assert_eq!(
        pacer_analysis::partition::outcome(&ok).verdict,
        Verdict::Schedulable
    );
    let bad = pack(&example(), &[1; 3], Heuristic::FFD, sum_le_one);
    let o = pacer_analysis::partition::outcome(&bad);
    assert_eq!(o.verdict, Verdict::NotProven);
    assert!(o.failing_task.is_some());

    // An assignment with an overloaded bin is caught by the per-bin check.
    let a = Assignment::new(&example(), &[1, 1], vec![0, 0, 1, 1, 1, 1, 1, 1, 1]).unwrap();
    assert_eq!(a.first_failing_bin(&example(), sum_le_one), Some(0));
    let a = pack(&example(), &[1; 5], Heuristic::FFD, sum_le_one).unwrap();
    assert_eq!(a.first_failing_bin(&example(), sum_le_one), None);
    assert!(Assignment::new(&example(), &[1], vec![0; 8]).is_none());
    assert!(Assignment::new(&example(), &[1], vec![1; 9]).is_none());
}

// ---- MILP ----

/// Minimum over all assignments of the max normalised load (tasks may only use bins whose
/// capacity is at least their utilisation, as in the ILP).
fn brute_force(u: &[f64], bins: &[usize]) -> f64 {
    let m = bins.len();
    let n = u.len();
    let mut best = f64::INFINITY;
    let mut code = vec![0usize; n];
    'outer: loop {
        let mut loads = vec![0.0; m];
        let mut ok = true;
        for (i, &b) in code.iter().enumerate() {
            ok &= u[i] <= bins[b] as f64;
            loads[b] += u[i];
        }
        if ok {
            let worst = (0..m).map(|b| loads[b] / bins[b] as f64).fold(0.0, f64::max);
            best = best.min(worst);
        }
        for d in code.iter_mut() {
            *d += 1;
            if *d < m {
                continue 'outer;
            }
            *d = 0;
        }
        break;
    }
    best
}

fn random_tasks(rng: &mut ChaCha8Rng, n: usize, max_u_permille: u64) -> Vec<Timing> {
    (0..n)
        .map(|_| {
            let t = rng.random_range(10_000..100_000u64) * 1000;
            let permille = rng.random_range(1..=max_u_permille);
            Timing::implicit(t * permille / 1000, t)
        })
        .collect()
}

/// Every task assigned once to a valid bin, loads equal to the recomputed sums, max load
/// consistent, bound below it.
fn check_result(ts: &[Timing], bins: &[usize], r: &milp::MilpResult) {
    let a = &r.assignment;
    assert_eq!(a.bin_of.len(), ts.len());
    assert_eq!(a.capacities, bins);
    let mut loads = vec![0.0; bins.len()];
    for (i, &b) in a.bin_of.iter().enumerate() {
        assert!(b < bins.len(), "task {i} in bin {b}");
        assert!(ts[i].u() <= bins[b] as f64 + 1e-9);
        loads[b] += ts[i].u();
    }
    for (b, (&l, &e)) in a.loads.iter().zip(&loads).enumerate() {
        assert!((l - e).abs() < 1e-9, "bin {b} load {l} vs {e}");
    }
    let max = (0..bins.len())
        .map(|b| loads[b] / bins[b] as f64)
        .fold(0.0, f64::max);
    assert!((r.max_load - max).abs() < 1e-9);
    assert!(r.lower_bound <= r.max_load + 1e-12);
    let total: f64 = ts.iter().map(Timing::u).sum();
    let cap: usize = bins.iter().sum();
    assert!(r.lower_bound >= total / cap as f64 - 1e-9);
    if r.optimal {
        assert!(
            matches!(r.status, MilpStatus::Optimal | MilpStatus::BoundMet)
                || r.max_load <= r.lower_bound + 1e-9,
            "optimal claimed with status {:?}, load {} > bound {}",
            r.status,
            r.max_load,
            r.lower_bound
        );
    }
}

fn wfd_max_load(ts: &[Timing], bins: &[usize]) -> f64 {
    pack(ts, bins, Heuristic::WFD, |_, _| true)
        .unwrap()
        .max_normalized_load()
}

#[test]
fn milp_matches_brute_force() {
    let mut rng = ChaCha8Rng::seed_from_u64(0x9a7c);
    let shapes: [&[usize]; 6] = [&[1, 1], &[1, 1, 1], &[2, 1], &[2, 2, 1], &[4, 4], &[1, 2, 3]];
    let mut solver_proofs = 0;
    let mut solver_wins = 0;
    for k in 0..300 {
        let bins = shapes[k % shapes.len()];
        let n = rng.random_range(1..=8);
        let ts = random_tasks(&mut rng, n, 900);
        let u: Vec<f64> = ts.iter().map(Timing::u).collect();
        let mut opts = MilpOptions::with_time_limit(Duration::from_secs(20));
        // Exercise the plain model too: no warm start, no symmetry breaking.
        if k % 3 == 2 {
            opts.warm_start = false;
            opts.symmetry_breaking = false;
        }
        let r = milp::solve(&ts, bins, &opts).unwrap();
        check_result(&ts, bins, &r);
        let best = brute_force(&u, bins);
        assert!(
            (r.max_load - best).abs() < 1e-6,
            "instance {k}: u = {u:?}, bins = {bins:?}: ILP {} ({:?}) vs brute force {best}",
            r.max_load,
            r.status
        );
        assert!(r.optimal, "instance {k}: not proven optimal: {:?}", r.status);
        assert!(r.max_load <= wfd_max_load(&ts, bins) + 1e-12);
        solver_proofs += usize::from(r.status == MilpStatus::Optimal);
        solver_wins += usize::from(r.source == SolutionSource::Solver);
    }
    eprintln!("solver proofs {solver_proofs}, solver wins {solver_wins}");
    // The solver path (not just the bound shortcut) is exercised, and sometimes beats the
    // heuristic warm start.
    assert!(solver_proofs >= 50, "only {solver_proofs} solver proofs");
    assert!(solver_wins >= 1, "the solver never improved on the heuristic");
}

#[test]
fn milp_never_worse_than_wfd_on_mid_instances() {
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    for k in 0..20 {
        let bins = if k % 2 == 0 {
            vec![1; 4]
        } else {
            clusters_of(10, 4)
        };
        let ts = random_tasks(&mut rng, 14, 700);
        let opts = MilpOptions::with_time_limit(Duration::from_millis(300));
        let r = milp::solve(&ts, &bins, &opts).unwrap();
        check_result(&ts, &bins, &r);
        assert!(r.max_load <= wfd_max_load(&ts, &bins) + 1e-12);
        assert!(r.max_load <= r.heuristic_max_load + 1e-12);
    }
}

/// 192 tasks, 48 CPUs, Σu = 0.8·48, 2 s limit.
#[test]
fn milp_large_instance_respects_time_limit() {
    let mut rng = ChaCha8Rng::seed_from_u64(48);
    let raw: Vec<f64> = (0..192).map(|_| rng.random_range(0.05..1.0)).collect();
    let scale = 0.8 * 48.0 / raw.iter().sum::<f64>();
    let ts: Vec<Timing> = raw
        .iter()
        .map(|&x| {
            let t = 100_000_000u64;
            Timing::implicit((x * scale * t as f64).round() as u64, t)
        })
        .collect();
    let bins = vec![1; 48];
    let limit = Duration::from_secs(2);
    let t0 = Instant::now();
    let r = milp::solve(&ts, &bins, &MilpOptions::with_time_limit(limit)).unwrap();
    let wall = t0.elapsed();
    eprintln!(
        "48×192: max load {:.6} (heuristic {:.6}, WFD {:.6}), bound {:.6}, optimal {}, \
         status {:?}, source {:?}, nodes {}, elapsed {:?}",
        r.max_load,
        r.heuristic_max_load,
        wfd_max_load(&ts, &bins),
        r.lower_bound,
        r.optimal,
        r.status,
        r.source,
        r.nodes,
        wall
    );
    assert!(wall < limit + Duration::from_millis(500), "took {wall:?}");
    assert!(r.elapsed <= wall);
    check_result(&ts, &bins, &r);
    assert!(r.max_load <= wfd_max_load(&ts, &bins) + 1e-12);
    assert!(r.lower_bound >= 0.8 - 1e-6);
    // Honesty: a non-optimal result must say why the search stopped.
    if !r.optimal {
        assert!(matches!(
            r.status,
            MilpStatus::TimeLimit | MilpStatus::SolverFailed(_)
        ));
        assert!(r.gap() > 0.0);
    }
    // Every bin passes the load-only test at 0.8 average load.
    assert_eq!(r.assignment.first_failing_bin(&ts, load_fits), None);
}

#[test]
fn milp_limits_and_options() {
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    let ts = random_tasks(&mut rng, 40, 500);
    let bins = vec![1; 8];
    // Zero time: returns at once with the heuristic.
    let t0 = Instant::now();
    let mut opts = MilpOptions::with_time_limit(Duration::ZERO);
    let r = milp::solve(&ts, &bins, &opts).unwrap();
    assert!(t0.elapsed() < Duration::from_millis(200));
    check_result(&ts, &bins, &r);
    assert!(matches!(r.status, MilpStatus::TimeLimit | MilpStatus::BoundMet));
    // Root only.
    opts.time_limit = Duration::from_secs(5);
    opts.node_limit = Some(0);
    let r = milp::solve(&ts, &bins, &opts).unwrap();
    check_result(&ts, &bins, &r);
    // A gap target is accepted; a negative one is not.
    opts.node_limit = None;
    opts.mip_gap = 0.05;
    let r = milp::solve(&ts, &bins, &opts).unwrap();
    check_result(&ts, &bins, &r);
    if r.status == MilpStatus::MipGap {
        assert!(r.gap() <= 0.05 + 1e-6, "gap {}", r.gap());
    }
    opts.mip_gap = -1.0;
    assert_eq!(
        milp::solve(&ts, &bins, &opts).unwrap_err(),
        MilpError::InvalidGap(-1.0)
    );
}

#[test]
fn milp_edge_cases() {
    let opts = MilpOptions::with_time_limit(Duration::from_secs(1));
    // No tasks.
    let r = milp::solve(&[], &[1, 1], &opts).unwrap();
    assert!(r.optimal && r.assignment.bin_of.is_empty() && r.max_load == 0.0);
    let r = milp::solve(&[], &[], &opts).unwrap();
    assert!(r.optimal);
    // No bins.
    assert!(matches!(
        milp::solve(&tenths(&[5]), &[], &opts),
        Err(MilpError::Unplaceable { task: 0, .. })
    ));
    // A task larger than every bin; zero-capacity bins host nothing.
    assert!(matches!(
        milp::solve(&tenths(&[5, 15]), &[1, 1], &opts),
        Err(MilpError::Unplaceable { task: 1, .. })
    ));
    assert!(matches!(
        milp::solve(&tenths(&[5]), &[0, 0], &opts),
        Err(MilpError::Unplaceable { task: 0, .. })
    ));
    // A task of u = 1.5 can go to the 2-CPU cluster only.
    let r = milp::solve(&tenths(&[15, 5, 5]), &[1, 2, 0], &opts).unwrap();
    assert_eq!(r.assignment.bin_of[0], 1);
    check_result(&tenths(&[15, 5, 5]), &[1, 2, 0], &r);
    // Degenerate timings.
    assert!(matches!(
        milp::solve(&[Timing::new(0, 0, 0)], &[1], &opts),
        Err(MilpError::InvalidUtilization { task: 0, .. })
    ));
    assert!(matches!(
        milp::solve_utilizations(&[0.2, -0.1], &[1], &opts),
        Err(MilpError::InvalidUtilization { task: 1, .. })
    ));
    // One bin: trivially optimal.
    let r = milp::solve(&example(), &[4], &opts).unwrap();
    assert!(r.optimal && (r.max_load - 3.7 / 4.0).abs() < 1e-12);
    // Zero-utilisation tasks are fine.
    let r = milp::solve(
        &[Timing::implicit(0, 10), Timing::implicit(5, 10)],
        &[1, 1],
        &opts,
    )
    .unwrap();
    assert!(r.optimal && (r.max_load - 0.5).abs() < 1e-12);
}

#[test]
fn milp_result_serializes() {
    let r = milp::solve(&example(), &[1; 4], &MilpOptions::default()).unwrap();
    let json = serde_json::to_string(&r).unwrap();
    assert!(json.contains("\"max_load\""));
    assert!((r.max_load - 1.0).abs() < 1e-9, "{}", r.max_load);
}
