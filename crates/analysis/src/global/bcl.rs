//! BCL: the interference-based test for global EDF on m identical CPUs.
//!
//! M. Bertogna, M. Cirinei, G. Lipari, "Improved schedulability analysis of EDF on
//! multiprocessor platforms", ECRTS 2005; restated in their IEEE TPDS 20(4), 2009
//! paper. A constrained-deadline task set is global-EDF schedulable on m CPUs if for every τ_k
//!
//! ```text
//! Σ_{i≠k} min(β_i^k, 1 − λ_k) < m(1 − λ_k)
//!   or  = m(1 − λ_k)  and  ∃ i ≠ k: 0 < β_i^k ≤ 1 − λ_k
//! β_i^k = (N_i·C_i + min(C_i, max(0, D_k − N_i·T_i))) / D_k,   N_i = ⌊(D_k − D_i)/T_i⌋ + 1
//! ```
//!
//! β_i^k·D_k bounds the work τ_i can do inside τ_k's scheduling window [r_k, r_k + D_k) with
//! higher EDF priority: the N_i jobs whose deadlines fall in the window, the last one aligned
//! with τ_k's deadline, plus a carried-in job that can run at most until its own deadline.
//! Every term is multiplied by D_k here, so the test runs on integers (u128 / i128) and the
//! equality branch is decided exactly, not up to rounding.

use crate::global::precheck;
use crate::outcome::{Outcome, Verdict};
use crate::Timing;

/// D_k · β_i^k generalised with a slack lower bound `slack_i` for τ_i's jobs: the carried-in job
/// finishes `slack_i` before its deadline, so it can run at most until D_k − N_i·T_i − slack_i.
/// With `slack_i = 0` this is BCL's bound; the iterative test passes its current slacks.
pub(crate) fn edf_interference(ti: &Timing, dk: u64, slack_i: u64) -> u128 {
    // D_k − D_i > −T_i because D_k > 0 and D_i ≤ T_i, so the floor is −1 (N_i = 0) whenever
    // D_i > D_k: only the carried-in job can then interfere.
    let n: u64 = if dk >= ti.d { (dk - ti.d) / ti.t + 1 } else { 0 };
    let body = u128::from(n) * u128::from(ti.c);
    let carry_end = i128::from(dk) - i128::from(n) * i128::from(ti.t) - i128::from(slack_i);
    // Clamped to [0, C_i], so the cast back is lossless.
    let carry = carry_end.clamp(0, i128::from(ti.c)) as u128;
    body + carry
}

/// One task's check: (Σ_{i≠k} min(D_k·β_i^k, D_k − C_k), m(D_k − C_k), passed).
fn check(ts: &[Timing], k: usize, m: usize) -> (u128, u128, bool) {
    let tk = &ts[k];
    let room = u128::from(tk.d - tk.c); // D_k(1 − λ_k)
    let cap = m as u128 * room; // < 2^128: both factors < 2^64
    let mut sum: u128 = 0;
    let mut some_small = false;
    for (i, ti) in ts.iter().enumerate() {
        if i == k {
            continue;
        }
        let w = edf_interference(ti, tk.d, 0);
        some_small |= w > 0 && w <= room;
        sum += w.min(room);
    }
    (sum, cap, sum < cap || (sum == cap && some_small))
}

/// BCL for global EDF. `value` and `bound` are Σ_{i≠k} min(β_i^k, 1 − λ_k) and m(1 − λ_k) for
/// the first task that failed, or else for the task closest to failing.
pub fn test(ts: &[Timing], m: usize) -> Outcome {
    if let Some(o) = precheck(ts, m) {
        return o;
    }
    let sides = |k: usize, sum: u128, cap: u128| {
        let dk = ts[k].d as f64;
        (sum as f64 / dk, cap as f64 / dk)
    };
    let mut tightest: Option<(f64, usize, u128, u128)> = None; // (sum / cap, k, sum, cap)
    for k in 0..ts.len() {
        let (sum, cap, ok) = check(ts, k, m);
        if !ok {
            let (value, bound) = sides(k, sum, cap);
            let mut o = Outcome::new(Verdict::NotProven).with_note(format!(
                "τ{k}: Σ_{{i≠k}} min(β_i, 1 − λ_k) is not below m(1 − λ_k)"
            ));
            o.value = Some(value);
            o.bound = Some(bound);
            o.failing_task = Some(k);
            return o;
        }
        // cap > 0 here: with cap = 0 the check cannot pass.
        let ratio = sum as f64 / cap as f64;
        match tightest {
            Some((r, ..)) if r >= ratio => {}
            _ => tightest = Some((ratio, k, sum, cap)),
        }
    }
    let Some((_, k, sum, cap)) = tightest else {
        return Outcome::new(Verdict::Schedulable);
    };
    let (value, bound) = sides(k, sum, cap);
    Outcome {
        value: Some(value),
        bound: Some(bound),
        ..Outcome::new(Verdict::Schedulable)
    }
    .with_note(format!("tightest task τ{k}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interference_by_hand() {
        // D_k = 10.
        // (2,4,5): N = ⌊6/5⌋ + 1 = 2, body 4, carry window 10 − 10 = 0 → 4.
        assert_eq!(edf_interference(&Timing::new(2, 4, 5), 10, 0), 4);
        // (2,3,4): N = ⌊7/4⌋ + 1 = 2, body 4, carry min(2, 10 − 8) = 2 → 6.
        assert_eq!(edf_interference(&Timing::new(2, 3, 4), 10, 0), 6);
        // Same with slack 1: the carried-in job stops 1 earlier → min(2, 1) = 1 → 5.
        assert_eq!(edf_interference(&Timing::new(2, 3, 4), 10, 1), 5);
        // D_i > D_k: N = 0, only the carry-in, min(1, 10) = 1.
        assert_eq!(edf_interference(&Timing::new(1, 20, 20), 10, 0), 1);
        // Large slack never makes the bound negative.
        assert_eq!(edf_interference(&Timing::new(2, 3, 4), 10, 50), 4);
        // No overflow at the extremes.
        let big = Timing::new(u64::MAX, u64::MAX, u64::MAX);
        assert_eq!(edf_interference(&big, u64::MAX, 0), u128::from(u64::MAX));
    }

    #[test]
    fn equality_branch() {
        // m = 2: τ0 = (6,10,10), τ1 = τ2 = (4,10,10).
        // k = 0: room 4, each W = 1·4 + min(4, 0) = 4 → Σ = 8 = 2·4, and 0 < 4 ≤ 4 → passes.
        // k = 1: room 6, W0 = 6, W2 = 4 → Σ = 10 < 12.
        let ts = [
            Timing::implicit(6, 10),
            Timing::implicit(4, 10),
            Timing::implicit(4, 10),
        ];
        let o = test(&ts, 2);
        assert_eq!(o.verdict, Verdict::Schedulable);
        // Tightest is k = 0 with ratio 1: value 8/10, bound 8/10.
        assert!((o.value.unwrap() - 0.8).abs() < 1e-12);
        assert!((o.bound.unwrap() - 0.8).abs() < 1e-12);

        // τ0 = (7,10,10): room 3, each min(4, 3) = 3 → Σ = 6 = 2·3 but no 0 < W ≤ 3 → fails.
        let ts = [
            Timing::implicit(7, 10),
            Timing::implicit(4, 10),
            Timing::implicit(4, 10),
        ];
        let o = test(&ts, 2);
        assert_eq!(o.verdict, Verdict::NotProven);
        assert_eq!(o.failing_task, Some(0));
    }

    #[test]
    fn mixed_periods() {
        // m = 2: τ0 = (3,10,12), τ1 = (2,4,5), τ2 = (2,3,4).
        // k = 0: room 7; W1 = 4, W2 = 6 → 10 < 14.
        // k = 1 (D = 4, room 2): W0: D_0 > D_k → N = 0, carry min(3, 4) = 3 → 2;
        //   W2: N = ⌊1/4⌋ + 1 = 1, body 2, carry min(2, 0) = 0 → 2 → Σ = 4 = 2·2,
        //   and 0 < 2 ≤ 2 → passes.
        // k = 2 (D = 3, room 1): W0: min(3, 3) = 3 → 1; W1: N = 0, min(2, 3) = 2 → 1;
        //   Σ = 2 = 2·1, no 0 < W ≤ 1 → fails.
        let ts = [Timing::new(3, 10, 12), Timing::new(2, 4, 5), Timing::new(2, 3, 4)];
        let o = test(&ts, 2);
        assert_eq!(o.verdict, Verdict::NotProven);
        assert_eq!(o.failing_task, Some(2));
        // On three CPUs k = 2 has Σ = 2 < 3.
        assert_eq!(test(&ts, 3).verdict, Verdict::Schedulable);
    }

    #[test]
    fn edge_cases() {
        assert_eq!(test(&[], 1).verdict, Verdict::Schedulable);
        assert!(matches!(
            test(&[Timing::implicit(1, 2)], 0).verdict,
            Verdict::NotApplicable(_)
        ));
        assert_eq!(test(&[Timing::new(3, 2, 4)], 4).verdict, Verdict::NotProven);
        // A lone task: Σ over no tasks = 0 < m(D − C).
        assert_eq!(test(&[Timing::implicit(3, 4)], 1).verdict, Verdict::Schedulable);
        let huge = [Timing::implicit(u64::MAX / 2, u64::MAX); 3];
        assert_eq!(test(&huge, usize::MAX).verdict, Verdict::Schedulable);
    }
}
