//! Global multiprocessor tests: hand-checked examples (Dhall's effect, BCL vs GFB, Bertogna–
//! Cirinei RTA on one CPU) and property tests against necessary conditions and unit-step
//! simulation on small integer task sets.

use pacer_analysis::global::{bak, bcl, bcl_iterative, bertogna_cirinei, devi_anderson, gfb};
use pacer_analysis::uni::priority::deadline_monotonic;
use pacer_analysis::{Outcome, Timing, Verdict};
use proptest::prelude::*;

const MS: u64 = 1_000_000;

fn r_of(o: &Outcome) -> Vec<Option<u64>> {
    o.per_task
        .as_ref()
        .expect("per-task bounds")
        .iter()
        .map(|d| d.map(|d| d.0))
        .collect()
}

fn gcd(a: u128, b: u128) -> u128 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// U > m, decided exactly (periods here are small, so the common denominator fits).
fn over_m(ts: &[Timing], m: usize) -> bool {
    let l = ts.iter().fold(1u128, |a, x| {
        let t = u128::from(x.t);
        a / gcd(a, t) * t
    });
    let num: u128 = ts.iter().map(|x| u128::from(x.c) * (l / u128::from(x.t))).sum();
    num > m as u128 * l
}

/// Unit-step simulation of synchronous periodic releases on m CPUs under global EDF (`fp` =
/// None; ties by task index) or global fixed priority (`fp` = priority order). Tardy jobs keep
/// running; a task's jobs run one at a time in release order. Returns each task's largest
/// observed response time and whether any job missed its deadline.
fn simulate(ts: &[Timing], m: usize, fp: Option<&[usize]>, horizon: u64) -> (Vec<u64>, bool) {
    let mut rank = vec![0usize; ts.len()];
    if let Some(order) = fp {
        for (p, &k) in order.iter().enumerate() {
            rank[k] = p;
        }
    }
    // (remaining, absolute deadline, task, release)
    let mut jobs: Vec<(u64, u64, usize, u64)> = Vec::new();
    let mut worst = vec![0u64; ts.len()];
    let mut missed = false;
    let mut next_release = vec![0u64; ts.len()];
    for now in 0..horizon {
        for (i, x) in ts.iter().enumerate() {
            if next_release[i] == now {
                jobs.push((x.c, now + x.d, i, now));
                next_release[i] += x.t;
            }
        }
        missed |= jobs.iter().any(|j| j.1 <= now);
        jobs.sort_by_key(|&(_, dl, i, rel)| match fp {
            None => (dl, i as u64, rel),
            Some(_) => (rank[i] as u64, rel, 0),
        });
        let mut busy = vec![false; ts.len()];
        let mut used = 0;
        for j in jobs.iter_mut() {
            if used == m {
                break;
            }
            if busy[j.2] {
                continue;
            }
            busy[j.2] = true;
            used += 1;
            j.0 -= 1;
            if j.0 == 0 {
                worst[j.2] = worst[j.2].max(now + 1 - j.3);
            }
        }
        jobs.retain(|j| j.0 > 0);
    }
    (worst, missed)
}

/// Classic uniprocessor response-time analysis (Joseph & Pandya 1986; Audsley et al. 1993):
/// R = C_k + Σ_{hp} ⌈R/T_i⌉·C_i.
fn classic_rta(ts: &[Timing], order: &[usize]) -> Vec<Option<u64>> {
    let mut r = vec![None; ts.len()];
    for (p, &k) in order.iter().enumerate() {
        let mut x = ts[k].c;
        r[k] = loop {
            let next = ts[k].c
                + order[..p]
                    .iter()
                    .map(|&i| x.div_ceil(ts[i].t) * ts[i].c)
                    .sum::<u64>();
            if next > ts[k].d {
                break None;
            }
            if next == x {
                break Some(x);
            }
            x = next;
        };
        if r[k].is_none() {
            break;
        }
    }
    r
}

// (a) Dhall's effect: m light tasks (C = 2 ns, T = 1000 ns) and one heavy (C = 1000, T = 1001).
// At t = 0 EDF runs the m light jobs first (earlier deadline), the heavy job starts at 2 and
// ends at 1002 > 1001. U = 0.002m + 0.999 exceeds the GFB bound m − (m − 1)·0.999 =
// 0.001m + 0.999; for BCL, τ_heavy has D − C = 1 and each light task interferes
// N = ⌊1/1000⌋ + 1 = 1 job plus carry-in min(2, 1001 − 1000) = 1 → W = 3, so
// Σ min(W, 1) = m = m·1 with no 0 < W ≤ 1: not proven.
#[test]
fn global_edf_rejects_dhall_effect() {
    for m in 2..=4 {
        let mut ts = vec![Timing::implicit(2, 1000); m];
        ts.push(Timing::implicit(1000, 1001));
        assert_eq!(gfb::test(&ts, m).verdict, Verdict::NotProven, "m = {m}");
        let o = bcl::test(&ts, m);
        assert_eq!(o.verdict, Verdict::NotProven, "m = {m}");
        assert_eq!(o.failing_task, Some(m));
        // The set really misses a deadline, so no sound test may accept it.
        assert!(!bak::test(&ts, m).verdict.is_schedulable());
        assert!(!bcl_iterative::test(&ts, m).verdict.is_schedulable());
        let (_, missed) = simulate(&ts, m, None, 1010);
        assert!(missed, "the simulation shows Dhall's effect for m = {m}");
    }
}

// (b) BCL accepts, GFB rejects. m = 2, (C, T) in ms: τ0 = (1, 2), τ1 = (1, 3), τ2 = (2, 3).
// GFB: U = 1/2 + 1/3 + 2/3 = 3/2 > 2 − 2/3 = 4/3.
// BCL (everything in ms, N_i = ⌊(D_k − D_i)/T_i⌋ + 1, W_i = N_i·C_i + min(C_i, max(0, D_k − N_i·T_i))):
//   k = 0 (D − C = 1, cap 2): W1: D1 > D0 → N = 0, min(1, 2) = 1; W2: N = 0, min(2, 2) = 2 → 1.
//         Σ = 1 + 1 = 2 = cap, and 0 < W1 = 1 ≤ 1 → passes.
//   k = 1 (D − C = 2, cap 4): W0: N = ⌊1/2⌋ + 1 = 1, 1 + min(1, 3 − 2) = 2; W2: N = 1,
//         2 + min(2, 0) = 2. Σ = 4 = cap, and 0 < 2 ≤ 2 → passes.
//   k = 2 (D − C = 1, cap 2): W0 = 2 → 1; W1 = 1 + min(1, 0) = 1. Σ = 2 = cap, 0 < W1 ≤ 1.
// Every task passes only through the equality branch, which the integer arithmetic decides
// exactly.
#[test]
fn global_bcl_accepts_what_gfb_rejects() {
    let ts = [
        Timing::implicit(MS, 2 * MS),
        Timing::implicit(MS, 3 * MS),
        Timing::implicit(2 * MS, 3 * MS),
    ];
    let g = gfb::test(&ts, 2);
    assert_eq!(g.verdict, Verdict::NotProven);
    assert!((g.value.unwrap() - 1.5).abs() < 1e-9);
    assert!((g.bound.unwrap() - 4.0 / 3.0).abs() < 1e-9);
    let b = bcl::test(&ts, 2);
    assert_eq!(b.verdict, Verdict::Schedulable);
    // Every task sits exactly at the bound: Σ/D_k = m(1 − λ_k).
    assert!((b.value.unwrap() - b.bound.unwrap()).abs() < 1e-12);
    let (_, missed) = simulate(
        &[
            Timing::implicit(1, 2),
            Timing::implicit(1, 3),
            Timing::implicit(2, 3),
        ],
        2,
        None,
        60,
    );
    assert!(!missed);
}

// BAK needs a λ above λ_k here. m = 2, τ0 = (1,3,3), τ1 = τ2 = (2,4,4) (implicit, so
// β_i = u_i + [u_i > λ]·(C_i − λT_i)/D_k).
// k = 0, λ = λ_0 = 1/3: β0 = 1/3, β1 = β2 = 1/2 + (2 − 4/3)/3 = 13/18 → Σ = 16/9 > 2·2/3 + 1/3
//   = 5/3. λ = u_1 = 1/2: β = 1/3, 1/2, 1/2 → Σ = 4/3 ≤ 2·1/2 + 1/2 = 3/2.
// k = 1, 2 (λ = 1/2, D_k = 4): Σ = 1/3 + 1/2 + 1/2 = 4/3 ≤ 3/2.
#[test]
fn global_bak_raises_lambda() {
    let ts = [
        Timing::implicit(1, 3),
        Timing::implicit(2, 4),
        Timing::implicit(2, 4),
    ];
    let o = bak::test(&ts, 2);
    assert_eq!(o.verdict, Verdict::Schedulable);
    let note = o.note.unwrap();
    assert!(note.contains("τ0: λ = u_1 = 0.5000"), "{note}");
    assert!((o.value.unwrap() - 4.0 / 3.0).abs() < 1e-9);
    assert!((o.bound.unwrap() - 1.5).abs() < 1e-9);
}

// (d) On one CPU, Bertogna–Cirinei reduces to the uniprocessor recurrence on this set.
// (C, T) = (1,4), (2,6), (3,12), DM = RM order. Classic RTA: R0 = 1; R1: 2 + ⌈3/4⌉ = 3;
// R2: 3 → 3 + 1 + 2 = 6 → 3 + 2 + 2 = 7 → 3 + 2 + 4 = 9 → 3 + 3 + 4 = 10 → 10.
// BC (R_i known, W_i(L) = ⌊(L + R_i − C_i)/T_i⌋·C_i + min(C_i, remainder), capped at R − C + 1):
//   R1: R = 2: W0 = min(1, 2) = 1 → 2 + 1 = 3; R = 3: still 1 → 3.
//   R2: R = 3: W0 = 1, W1 = min(2, 3 + 1) = 2 capped to 1 → 5; R = 5: W0 = 1 + min(1, 1) = 2,
//   W1 = (span 6) 2 + 0 = 2 → 7; R = 7: W0 = 2, W1 = (span 8) 2 + 2 = 4 → 9; R = 9: W0 =
//   (span 9) 2 + 1 = 3, W1 = (span 10) 2 + 2 = 4 → 10; R = 10: W0 = 2 + 1 = 3, W1 = 4 → 10.
#[test]
fn global_fp_rta_on_one_cpu_matches_classic_rta() {
    let ts = [
        Timing::implicit(MS, 4 * MS),
        Timing::implicit(2 * MS, 6 * MS),
        Timing::implicit(3 * MS, 12 * MS),
    ];
    let o = bertogna_cirinei::test_dm(&ts, 1);
    assert_eq!(o.verdict, Verdict::Schedulable);
    let expect = vec![Some(MS), Some(3 * MS), Some(10 * MS)];
    assert_eq!(r_of(&o), expect);
    assert_eq!(classic_rta(&ts, &deadline_monotonic(&ts)), expect);
}

#[test]
fn global_fp_rta_with_m_ge_n_gives_r_eq_c() {
    let ts = [
        Timing::implicit(MS, 4 * MS),
        Timing::implicit(2 * MS, 6 * MS),
        Timing::implicit(3 * MS, 12 * MS),
        Timing::new(5 * MS, 5 * MS, 7 * MS),
    ];
    for m in 4..=6 {
        let o = bertogna_cirinei::test_dm(&ts, m);
        assert_eq!(o.verdict, Verdict::Schedulable);
        assert_eq!(r_of(&o), ts.iter().map(|t| Some(t.c)).collect::<Vec<_>>());
    }
}

#[test]
fn global_devi_anderson_soft_verdicts() {
    // U = 2 on two CPUs: GFB rejects (U = 2 > 2 − 0.5 = 1.5), but tardiness is bounded:
    // Λ = U − 1 = 1, x = (E_1 − e_min)/(m − U_0) = (2 − 2)/2 = 0, so the bound is e_k = 2.
    let ts = [Timing::implicit(2, 4); 4];
    assert_eq!(gfb::test(&ts, 2).verdict, Verdict::NotProven);
    let o = devi_anderson::test(&ts, 2);
    assert_eq!(o.verdict, Verdict::Schedulable);
    assert_eq!(r_of(&o), vec![Some(2); 4]);
    assert_eq!(
        devi_anderson::test(&[Timing::implicit(3, 4); 3], 2).verdict,
        Verdict::Unschedulable
    );
}

/// Small integer tasks, mostly constrained-deadline, some with C > D.
fn task() -> impl Strategy<Value = Timing> {
    (1u64..=20).prop_flat_map(|t| {
        (1..=t).prop_flat_map(move |d| {
            prop_oneof![
                9 => (1..=d).prop_map(move |c| Timing::new(c, d, t)),
                1 => (d + 1..=d + 3).prop_map(move |c| Timing::new(c, d, t)),
            ]
        })
    })
}

fn task_set() -> impl Strategy<Value = Vec<Timing>> {
    prop::collection::vec(task(), 1..=6)
}

fn accepted_by_edf_tests(ts: &[Timing], m: usize) -> Vec<(&'static str, Outcome)> {
    vec![
        ("gfb", gfb::test(ts, m)),
        ("bak", bak::test(ts, m)),
        ("bcl", bcl::test(ts, m)),
        ("bcl_iterative", bcl_iterative::test(ts, m)),
    ]
    .into_iter()
    .filter(|(_, o)| o.verdict.is_schedulable())
    .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    // (c) No sufficient test accepts an overloaded set or a task with density > 1.
    #[test]
    fn global_nothing_accepts_infeasible_sets(ts in task_set(), m in 1usize..=4) {
        let infeasible = over_m(&ts, m) || ts.iter().any(|t| t.c > t.d);
        if infeasible {
            for (name, _) in accepted_by_edf_tests(&ts, m) {
                prop_assert!(false, "{} accepted infeasible {:?} on m = {}", name, ts, m);
            }
            prop_assert!(!bertogna_cirinei::test_dm(&ts, m).verdict.is_schedulable());
            prop_assert!(!pacer_analysis::global::edf_schedulable(&ts, m));
            prop_assert!(!pacer_analysis::global::fp_dm_schedulable(&ts, m));
        }
        let implicit: Vec<Timing> = ts.iter().map(|t| Timing::implicit(t.c, t.t)).collect();
        let da = devi_anderson::test(&implicit, m);
        let unbounded = over_m(&implicit, m) || implicit.iter().any(|t| t.c > t.t);
        prop_assert_eq!(da.verdict.is_schedulable(), !unbounded, "{:?}", da);
    }

    // (c) On one CPU every EDF test's acceptance implies U ≤ 1, every density ≤ 1 and
    // dbf(L) ≤ L (necessary for uniprocessor EDF); GFB additionally implies Σλ ≤ 1.
    #[test]
    fn global_tests_on_one_cpu_accept_only_feasible_sets(ts in task_set()) {
        for (name, _) in accepted_by_edf_tests(&ts, 1) {
            prop_assert!(!over_m(&ts, 1), "{} accepted U > 1: {:?}", name, ts);
            prop_assert!(ts.iter().all(|t| t.c <= t.d), "{}: density > 1 in {:?}", name, ts);
            for l in 1..=1000u64 {
                let dbf: u64 = ts
                    .iter()
                    .filter(|x| x.d <= l)
                    .map(|x| ((l - x.d) / x.t + 1) * x.c)
                    .sum();
                prop_assert!(dbf <= l, "{} accepted {:?} but dbf({}) = {}", name, ts, l, dbf);
            }
            if name == "gfb" {
                let density: f64 = ts.iter().map(Timing::density).sum();
                prop_assert!(density <= 1.0 + 1e-9);
            }
        }
        // Bertogna–Cirinei on one CPU is never below the exact uniprocessor RTA.
        let order = deadline_monotonic(&ts);
        let bc = bertogna_cirinei::test(&ts, 1, &order);
        if let Some(per_task) = &bc.per_task {
            let exact = classic_rta(&ts, &order);
            for (k, r) in per_task.iter().enumerate() {
                if let Some(r) = r {
                    let e = exact[k];
                    prop_assert!(e.is_some_and(|e| e <= r.0), "τ{}: BC {} < exact {:?}", k, r.0, e);
                }
            }
        }
    }

    // Accepted sets never miss a deadline in the synchronous periodic schedule, and the
    // per-task bounds are never below the simulated response (or tardiness) times.
    #[test]
    fn global_accepted_sets_survive_simulation(ts in task_set(), m in 1usize..=3) {
        // Only feasible tasks are interesting here: clamp C to D.
        let ts: Vec<Timing> = ts.iter().map(|t| Timing::new(t.c.min(t.d), t.d, t.t)).collect();
        let horizon = 400;
        let edf = accepted_by_edf_tests(&ts, m);
        if !edf.is_empty() {
            let (worst, missed) = simulate(&ts, m, None, horizon);
            prop_assert!(!missed, "{:?} accepted {:?} on m = {}", edf.iter().map(|e| e.0).collect::<Vec<_>>(), ts, m);
            for (name, o) in &edf {
                if let Some(per_task) = &o.per_task {
                    for (k, r) in per_task.iter().enumerate() {
                        prop_assert!(r.unwrap().0 >= worst[k], "{} τ{}: {:?} < {}", name, k, r, worst[k]);
                    }
                }
            }
        }
        let order = deadline_monotonic(&ts);
        let bc = bertogna_cirinei::test(&ts, m, &order);
        if let Some(per_task) = &bc.per_task {
            let (worst, missed) = simulate(&ts, m, Some(&order), horizon);
            if bc.verdict.is_schedulable() {
                prop_assert!(!missed, "BC accepted {:?} on m = {}", ts, m);
            }
            for (k, r) in per_task.iter().enumerate() {
                if let Some(r) = r {
                    prop_assert!(r.0 >= worst[k], "BC τ{}: {} < simulated {}", k, r.0, worst[k]);
                }
            }
            if m >= ts.len() {
                prop_assert_eq!(r_of(&bc), ts.iter().map(|t| Some(t.c)).collect::<Vec<_>>());
            }
        }
        let implicit: Vec<Timing> = ts.iter().map(|t| Timing::implicit(t.c, t.t)).collect();
        let da = devi_anderson::test(&implicit, m);
        if da.verdict.is_schedulable() {
            let (worst, _) = simulate(&implicit, m, None, horizon);
            for (k, b) in r_of(&da).iter().enumerate() {
                let tardiness = worst[k].saturating_sub(implicit[k].d);
                prop_assert!(b.unwrap() >= tardiness, "DA τ{}: {:?} < {}", k, b, tardiness);
            }
        }
    }
}
