//! Iterative slack-based test for global EDF on m identical CPUs.
//!
//! M. Bertogna, M. Cirinei, "Response-time analysis for globally scheduled symmetric
//! multiprocessor platforms", RTSS 2007, and M. Bertogna, M. Cirinei, G. Lipari,
//! "Schedulability analysis of global scheduling algorithms on multiprocessor platforms",
//! IEEE TPDS 20(4), 2009 (the iterative EDF test, Eq. 17–18).
//!
//! Every task starts with slack lower bound S_k = 0 and the bounds are refined in rounds:
//!
//! ```text
//! S_k ← D_k − C_k − ⌊ (1/m) · Σ_{i≠k} min(I_i^k, D_k − C_k + 1) ⌋
//! I_i^k = N_i·C_i + min(C_i, max(0, D_k − N_i·T_i − S_i)),   N_i = ⌊(D_k − D_i)/T_i⌋ + 1
//! ```
//!
//! I_i^k is BCL's EDF interference bound with the carried-in job of τ_i finishing S_i before its
//! deadline. (The TPDS paper writes N_i = ⌊D_k/T_i⌋; the two give the same I_i^k, because the job
//! the larger count adds is released inside the window and finishes by D_i − S_i ≥ C_i, so the
//! `min` counts it whole either way.) The "+1" relies on integer time: interference of
//! D_k − C_k + 1 ns already makes τ_k miss, so larger contributions do not matter.
//!
//! Slacks only grow, which shrinks I and grows every other slack, so rounds (updating in place)
//! continue until no slack changes or the round limit is hit. The set is schedulable when every
//! bound of the last round is ≥ 0; then D_k − S_k bounds τ_k's response time. Soundness of
//! using the slacks rests on the papers' first-miss argument: the carried-in jobs have deadlines
//! before the first miss, so they met them with at least the slack proven so far.

use pacer_model::Duration;

use crate::global::bcl::edf_interference;
use crate::global::precheck;
use crate::outcome::{Outcome, Verdict};
use crate::Timing;

/// Rounds [`test()`] runs before giving up on reaching a fixed point.
pub const DEFAULT_ROUND_LIMIT: usize = 1000;

/// One slack update for τ_k given the current slacks of the others (may be negative).
fn slack_bound(ts: &[Timing], slack: &[u64], k: usize, m: usize) -> i128 {
    let tk = &ts[k];
    let room = u128::from(tk.d - tk.c);
    let sum: u128 = ts
        .iter()
        .zip(slack)
        .enumerate()
        .filter(|&(i, _)| i != k)
        .map(|(_, (ti, &si))| edf_interference(ti, tk.d, si).min(room + 1))
        .sum();
    // sum / m ≤ n·2^64, far inside i128 for any task count that fits in memory.
    let delay = i128::try_from(sum / m as u128).unwrap_or(i128::MAX);
    room as i128 - delay
}

/// The iterative BCL test with [`DEFAULT_ROUND_LIMIT`] rounds.
pub fn test(ts: &[Timing], m: usize) -> Outcome {
    test_with_limit(ts, m, DEFAULT_ROUND_LIMIT)
}

/// The iterative BCL test with at most `max_rounds` refinement rounds. On success `per_task`
/// holds the response-time bounds D_k − S_k. If the limit stops the refinement before the set is
/// proven, the verdict is `Unknown` (more rounds might still prove it).
pub fn test_with_limit(ts: &[Timing], m: usize, max_rounds: usize) -> Outcome {
    if let Some(o) = precheck(ts, m) {
        return o;
    }
    let n = ts.len();
    // Stored slacks never go below 0: a negative bound proves nothing, and 0 is what the
    // first-miss argument grants every job before the first miss.
    let mut slack = vec![0u64; n];
    let mut last = vec![i128::MIN; n];
    let mut rounds = 0;
    let converged = loop {
        if rounds == max_rounds {
            break false;
        }
        rounds += 1;
        let mut changed = false;
        for k in 0..n {
            let s = slack_bound(ts, &slack, k, m);
            last[k] = s;
            if s > i128::from(slack[k]) {
                // s ≤ D_k − C_k, so it fits in u64.
                slack[k] = s as u64;
                changed = true;
            }
        }
        if !changed {
            break true;
        }
    };
    let failing = if rounds == 0 {
        Some(0)
    } else {
        last.iter().position(|&s| s < 0)
    };
    match failing {
        None => {
            let per_task = ts
                .iter()
                .zip(&slack)
                .map(|(t, &s)| Some(Duration(t.d - s)))
                .collect();
            let how = if converged { "fixed point" } else { "round limit" };
            Outcome {
                per_task: Some(per_task),
                ..Outcome::new(Verdict::Schedulable)
            }
            .with_note(format!(
                "all slacks ≥ 0 after {rounds} round(s) ({how}); per-task values are D − slack"
            ))
        }
        Some(k) if converged => {
            let mut o = Outcome::new(Verdict::NotProven).with_note(format!(
                "τ{k}: slack bound {} < 0 at the fixed point (round {rounds})",
                last[k]
            ));
            o.failing_task = Some(k);
            o
        }
        Some(k) => {
            let mut o = Outcome::new(Verdict::Unknown(format!(
                "round limit {max_rounds} reached before a fixed point"
            )));
            o.failing_task = Some(k);
            o
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slack_update_by_hand() {
        // m = 2: τ0 = (6,10,10), τ1 = τ2 = (4,10,10), all slacks 0.
        // k = 0: room 4, I = 4 each → min(4, 5) = 4 → Σ = 8 → S0 = 4 − 4 = 0.
        // k = 1: room 6, I0 = 6, I2 = 4 → Σ = 10 → S1 = 6 − 5 = 1.
        let ts = [
            Timing::implicit(6, 10),
            Timing::implicit(4, 10),
            Timing::implicit(4, 10),
        ];
        let zero = [0; 3];
        assert_eq!(slack_bound(&ts, &zero, 0, 2), 0);
        assert_eq!(slack_bound(&ts, &zero, 1, 2), 1);
        let o = test(&ts, 2);
        assert_eq!(o.verdict, Verdict::Schedulable);
        // The carry-in windows are D_k − N_i·T_i = 0 here, so slacks never lower any I_i:
        // S = (0, 1, 1), response bounds D − S = (10, 9, 9).
        let r: Vec<u64> = o.per_task.unwrap().iter().map(|d| d.unwrap().0).collect();
        assert_eq!(r, vec![10, 9, 9]);
    }

    #[test]
    fn slack_reduces_carry_in() {
        // m = 1: τ0 = (1,2,3), τ1 = (2,5,7).
        // Round 1, k = 0: room 1; τ1 has D > D_k → N = 0, carry min(2, 2 − 0) = 2 → min(2, 2)
        //   = 2 → S0 = 1 − 2 = −1 (stays 0).
        // k = 1: room 3; τ0: N = ⌊3/3⌋ + 1 = 2, body 2, carry min(1, max(0, 5 − 6)) = 0 → 2
        //   → S1 = 3 − 2 = 1.
        // Round 2, k = 0: τ1's carry-in now stops 1 earlier: min(2, 2 − 1) = 1 → S0 = 0 ≥ 0.
        // k = 1 unchanged (τ0's carry window is already empty) → S1 = 1. No stored slack
        // changed in round 2 (S0 stays 0), so that is the fixed point.
        let ts = [Timing::new(1, 2, 3), Timing::new(2, 5, 7)];
        assert_eq!(slack_bound(&ts, &[0, 0], 0, 1), -1);
        assert_eq!(slack_bound(&ts, &[0, 0], 1, 1), 1);
        assert_eq!(slack_bound(&ts, &[0, 1], 0, 1), 0);
        let o = test(&ts, 1);
        assert_eq!(o.verdict, Verdict::Schedulable);
        let r: Vec<u64> = o.per_task.unwrap().iter().map(|d| d.unwrap().0).collect();
        assert_eq!(r, vec![2, 4]);
        // One round is not enough to prove it.
        assert!(matches!(test_with_limit(&ts, 1, 1).verdict, Verdict::Unknown(_)));
    }

    #[test]
    fn fixed_point_without_proof() {
        // Dhall-like: m = 2, two (2,1000,1000) and one (1000,1001,1001).
        // k = 2: room 1; each small task: N = 1, body 2, carry min(2, 1001 − 1000 − S) ≥ 0
        //   → ≥ 2 → min(·, 2) = 2 → Σ = 4 → S2 = 1 − 2 = −1 in every round.
        let ts = [
            Timing::implicit(2, 1000),
            Timing::implicit(2, 1000),
            Timing::implicit(1000, 1001),
        ];
        let o = test(&ts, 2);
        assert_eq!(o.verdict, Verdict::NotProven);
        assert_eq!(o.failing_task, Some(2));
    }

    #[test]
    fn edge_cases() {
        assert_eq!(test(&[], 2).verdict, Verdict::Schedulable);
        assert!(matches!(
            test(&[Timing::implicit(1, 2)], 0).verdict,
            Verdict::NotApplicable(_)
        ));
        assert_eq!(test(&[Timing::new(3, 2, 4)], 4).verdict, Verdict::NotProven);
        // n ≤ m: every task runs on its own CPU, including one with C = D.
        let o = test(&[Timing::implicit(5, 5), Timing::implicit(1, 9)], 2);
        assert_eq!(o.verdict, Verdict::Schedulable);
        assert!(matches!(
            test_with_limit(&[Timing::implicit(1, 2)], 1, 0).verdict,
            Verdict::Unknown(_)
        ));
    }
}
