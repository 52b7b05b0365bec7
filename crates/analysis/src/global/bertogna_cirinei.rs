//! Response-time analysis for global fixed-priority scheduling on m identical CPUs.
//!
//! M. Bertogna, M. Cirinei, "Response-time analysis for globally scheduled symmetric
//! multiprocessor platforms", RTSS 2007 (global fixed-priority RTA with its workload bound).
//! Tasks are analysed from the highest priority down; τ_k's response time is bounded by the
//! least fixed point of
//!
//! ```text
//! R_k = C_k + ⌊ (1/m) · Σ_{i∈hp(k)} min(W_i(R_k), R_k − C_k + 1) ⌋
//! W_i(L) = N_i(L)·C_i + min(C_i, L + R_i − C_i − N_i(L)·T_i),  N_i(L) = ⌊(L + R_i − C_i)/T_i⌋
//! ```
//!
//! starting from R_k = C_k. W_i(L) bounds τ_i's work in any window of length L when its jobs
//! finish within R_i (carry-in job ending R_i after its release, later jobs as early as
//! possible); the `min(·, R − C + 1)` caps a task's useful interference, since τ_k only misses
//! R if it is blocked for R − C_k + 1 ns, and a task cannot block it longer than that. The "+1"
//! and the floor rely on integer time.
//!
//! With fewer than m higher-priority tasks the floor is 0, so R_k = C_k (in particular every
//! task has R = C when m ≥ n).

use crate::global::precheck;
use crate::outcome::{Outcome, Verdict};
use crate::timing::durations;
use crate::uni::priority::deadline_monotonic;
use crate::Timing;

/// W_i(L) for τ_i with response-time bound `ri` (≥ C_i).
fn workload(ti: &Timing, ri: u64, l: u64) -> u128 {
    // u64 whenever the window fits (always, in practice): u128 division is a slow library call
    // and this is the innermost loop of clustered partitioning. jobs·C ≤ span since C ≤ T.
    if let Some(span) = l.checked_add(ri - ti.c) {
        let jobs = span / ti.t;
        return u128::from(jobs * ti.c + ti.c.min(span - jobs * ti.t));
    }
    let span = u128::from(l) + u128::from(ri - ti.c);
    let t = u128::from(ti.t);
    let jobs = span / t;
    jobs * u128::from(ti.c) + u128::from(ti.c).min(span - jobs * t)
}

/// The response-time bound of `tk` given its higher-priority tasks as (timing, R_i) pairs, or
/// `None` if it exceeds D_k.
fn response_time(tk: &Timing, hp: &[(Timing, u64)], m: usize) -> Option<u64> {
    if hp.len() < m {
        return Some(tk.c);
    }
    let m = m as u128;
    // Tasks whose workload reaches the cap at R; once W_i(R) < R − C_k + 1 it stays below,
    // because W_i grows with slope 0 or 1 and the cap with slope 1.
    let capped = |r: u64| {
        let cap = u128::from(r - tk.c) + 1;
        hp.iter().filter(|(ti, ri)| workload(ti, *ri, r) >= cap).count()
    };
    let mut r = tk.c;
    loop {
        // While m or more tasks are capped, R grows by at most the minimum step and cannot be
        // a fixed point (the capped terms alone make the floor ≥ R − C_k + 1): jump to the
        // first R where fewer than m are capped, which the plain iteration would reach anyway.
        if capped(r) as u128 >= m {
            if capped(tk.d) as u128 >= m {
                return None;
            }
            let (mut lo, mut hi) = (r, tk.d); // capped(lo) ≥ m > capped(hi)
            while hi - lo > 1 {
                let mid = lo + (hi - lo) / 2;
                if capped(mid) as u128 >= m {
                    lo = mid;
                } else {
                    hi = mid;
                }
            }
            r = hi;
        }
        let cap = u128::from(r - tk.c) + 1;
        let interference: u128 = hp.iter().map(|(ti, ri)| workload(ti, *ri, r).min(cap)).sum();
        let next = u128::from(tk.c) + interference / m;
        if next > u128::from(tk.d) {
            return None;
        }
        // f is monotone and f(C_k) ≥ C_k, so the iterates never decrease; equality is the
        // least fixed point.
        if next <= u128::from(r) {
            return Some(r);
        }
        r = next as u64;
    }
}

/// Bertogna–Cirinei RTA for global fixed priority; `order` lists task indices from highest to
/// lowest priority. `per_task` holds the response-time bounds (in input order) up to the first
/// task that misses, `None` from there on.
pub fn test(ts: &[Timing], m: usize, order: &[usize]) -> Outcome {
    if let Some(o) = precheck(ts, m) {
        return o;
    }
    let mut seen = vec![false; ts.len()];
    let is_permutation = order.len() == ts.len()
        && order
            .iter()
            .all(|&i| i < ts.len() && !std::mem::replace(&mut seen[i], true));
    if !is_permutation {
        return Outcome::not_applicable("priority order is not a permutation of the task indices");
    }
    let mut r: Vec<Option<u64>> = vec![None; ts.len()];
    let mut hp: Vec<(Timing, u64)> = Vec::with_capacity(ts.len());
    for &k in order {
        match response_time(&ts[k], &hp, m) {
            Some(rk) => {
                r[k] = Some(rk);
                hp.push((ts[k], rk));
            }
            None => {
                // Lower-priority tasks cannot be bounded without R_k: stop here.
                let mut o = Outcome::new(Verdict::NotProven)
                    .with_note(format!("τ{k}: response-time bound exceeds its deadline"));
                o.per_task = Some(durations(&r));
                o.failing_task = Some(k);
                return o;
            }
        }
    }
    Outcome {
        per_task: Some(durations(&r)),
        ..Outcome::new(Verdict::Schedulable)
    }
}

/// [`test()`] with deadline-monotonic priorities.
pub fn test_dm(ts: &[Timing], m: usize) -> Outcome {
    test(ts, m, &deadline_monotonic(ts))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rs(o: &Outcome) -> Vec<Option<u64>> {
        o.per_task
            .as_ref()
            .unwrap()
            .iter()
            .map(|d| d.map(|d| d.0))
            .collect()
    }

    #[test]
    fn workload_by_hand() {
        // τ_i = (2,4,4) with R_i = 3, L = 5: span = 5 + 1 = 6, N = 1 → 2 + min(2, 2) = 4.
        assert_eq!(workload(&Timing::implicit(2, 4), 3, 5), 4);
        // L = 2: span 3, N = 0 → min(2, 3) = 2.
        assert_eq!(workload(&Timing::implicit(2, 4), 3, 2), 2);
        assert_eq!(
            workload(&Timing::implicit(u64::MAX, u64::MAX), u64::MAX, u64::MAX),
            u128::from(u64::MAX)
        );
    }

    #[test]
    fn uniprocessor_example() {
        // m = 1, (1,4), (2,6), (3,12): classic RTA gives 1, 3, 10; the paper's iteration for
        // τ2 runs 3 → 5 → 7 → 9 → 10 → 10 (steps in tests/global.rs).
        let ts = [
            Timing::implicit(1, 4),
            Timing::implicit(2, 6),
            Timing::implicit(3, 12),
        ];
        let o = test_dm(&ts, 1);
        assert_eq!(o.verdict, Verdict::Schedulable);
        assert_eq!(rs(&o), vec![Some(1), Some(3), Some(10)]);
    }

    #[test]
    fn two_cpus_by_hand() {
        // m = 2, DM order 0,1,2,3.
        // τ0, τ1: fewer than 2 higher-priority tasks → R = C = 1, 2.
        // τ2 = (2,6): R = 2: W0 = 1, W1 = 2, both ≥ cap 1 → R = 2 + ⌊2/2⌋ = 3;
        //   R = 3: W0 = 1 + min(1, 0) = 1, W1 = min(2, 3) = 2 → ⌊(1 + 2)/2⌋ = 1 → 3.
        // τ3 = (4,12): 4 → 5 → 7 → 9 → 10 → 11 → 11:
        //   R = 9: W0 = 3, W1 = 4 + min(2, 1) = 5, W2 = 2 + min(2, 4) = 4 → ⌊12/2⌋ = 6 → 10;
        //   R = 11: W0 = 3 + min(1, 2) = 4, W1 = 4 + min(2, 3) = 6, W2 = 4 + min(2, 0) = 4
        //   → ⌊14/2⌋ = 7 → 11.
        let ts = [
            Timing::implicit(1, 3),
            Timing::implicit(2, 4),
            Timing::implicit(2, 6),
            Timing::implicit(4, 12),
        ];
        let o = test_dm(&ts, 2);
        assert_eq!(o.verdict, Verdict::Schedulable);
        assert_eq!(rs(&o), vec![Some(1), Some(2), Some(3), Some(11)]);
    }

    #[test]
    fn capped_tasks_jump() {
        // m = 2, three (5,10): τ2 sees both others capped (W = 5 ≥ R − 4) until R = 10, where
        // W = 1·5 + min(5, 0) = 5 < 6 → R = 5 + ⌊10/2⌋ = 10.
        let ts = [Timing::implicit(5, 10); 3];
        assert_eq!(rs(&test_dm(&ts, 2)), vec![Some(5), Some(5), Some(10)]);
        // Same with a 1 s period in ns: must not take 10^9 single-ns steps.
        let ts = [Timing::implicit(500_000_000, 1_000_000_000); 3];
        assert_eq!(
            rs(&test_dm(&ts, 2)),
            vec![Some(500_000_000), Some(500_000_000), Some(1_000_000_000)]
        );
        // (6,10) ×3: at R = 10, W = 6 ≥ 5 for both → still capped at the deadline → fails.
        let ts = [Timing::implicit(6, 10); 3];
        let o = test_dm(&ts, 2);
        assert_eq!(o.verdict, Verdict::NotProven);
        assert_eq!(o.failing_task, Some(2));
        assert_eq!(rs(&o), vec![Some(6), Some(6), None]);
    }

    #[test]
    fn explicit_order_and_m_ge_n() {
        let ts = [
            Timing::implicit(1, 4),
            Timing::implicit(2, 6),
            Timing::implicit(3, 12),
        ];
        // Reverse priorities on one CPU: τ2 alone → 3; τ1 under τ2: 2 + 3 = 5;
        // τ0 under both: at R = 4, W2 = 3 and W1 = (span 4 + 3 = 7, N = 1) 2 + min(2, 1) = 3,
        // both below the cap 4 → 1 + 6 = 7 > 4, and below 4 one of them stays capped → fails.
        let o = test(&ts, 1, &[2, 1, 0]);
        assert_eq!(o.verdict, Verdict::NotProven);
        assert_eq!(o.failing_task, Some(0));
        assert_eq!(rs(&o), vec![None, Some(5), Some(3)]);
        // m ≥ n: R = C.
        assert_eq!(rs(&test_dm(&ts, 3)), vec![Some(1), Some(2), Some(3)]);
        assert!(matches!(
            test(&ts, 1, &[0, 0, 1]).verdict,
            Verdict::NotApplicable(_)
        ));
        assert!(matches!(test(&ts, 1, &[0, 1]).verdict, Verdict::NotApplicable(_)));
        assert!(matches!(
            test(&ts, 1, &[0, 1, 7]).verdict,
            Verdict::NotApplicable(_)
        ));
    }

    #[test]
    fn edge_cases() {
        assert_eq!(test_dm(&[], 1).verdict, Verdict::Schedulable);
        assert!(matches!(
            test_dm(&[Timing::implicit(1, 2)], 0).verdict,
            Verdict::NotApplicable(_)
        ));
        assert_eq!(test_dm(&[Timing::new(3, 2, 4)], 4).verdict, Verdict::NotProven);
    }
}
