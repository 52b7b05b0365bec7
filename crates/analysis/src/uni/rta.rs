//! Exact response-time analysis for preemptive fixed priority on one processor with constrained
//! deadlines (Joseph & Pandya, "Finding response times in a real-time system", Computer Journal
//! 1986; Audsley, Burns, Richardson, Tindell & Wellings, "Applying new scheduling theory to static
//! priority pre-emptive scheduling", Software Engineering Journal 1993):
//! R_k = C_k + Σ_{j ∈ hp(k)} ⌈R_k / T_j⌉ C_j, iterated from R = Σ_{j ∈ hp(k) ∪ {k}} C_j to a fixed
//! point; the task meets its deadline iff R_k ≤ D_k (synchronous release is the critical instant).

use crate::outcome::{Outcome, Verdict};
use crate::timing::durations;
use crate::uni::priority::{deadline_monotonic, rate_monotonic};
use crate::Timing;

/// Response time of `k` given its higher-priority tasks, or `None` once it exceeds `limit`.
///
/// u64 arithmetic (u128 division is a slow library call and this is the inner loop of
/// partitioning); any overflow means the response time is beyond every representable deadline.
pub fn response_time(k: &Timing, hp: impl Iterator<Item = Timing> + Clone, limit: u64) -> Option<u64> {
    let mut r = hp.clone().try_fold(k.c, |acc, j| acc.checked_add(j.c))?;
    loop {
        if r > limit {
            return None;
        }
        let next = hp.clone().try_fold(k.c, |acc, j| {
            r.div_ceil(j.t).checked_mul(j.c).and_then(|w| acc.checked_add(w))
        })?;
        if next == r {
            return Some(r);
        }
        r = next;
    }
}

/// Response times in input order for the priority `order` (indices, highest first); `None` for a
/// task whose response time exceeds its deadline (and, as it then misses, the analysis of lower
/// priorities still proceeds: their interference uses only C and T).
pub fn response_times(ts: &[Timing], order: &[usize]) -> Vec<Option<u64>> {
    let mut out = vec![None; ts.len()];
    for (pos, &k) in order.iter().enumerate() {
        let hp = order[..pos].iter().map(|&j| ts[j]);
        out[k] = response_time(&ts[k], hp, ts[k].d);
    }
    out
}

/// Yes/no under deadline-monotonic priorities, stopping at the first miss.
pub fn schedulable_dm(ts: &[Timing]) -> bool {
    let order = deadline_monotonic(ts);
    order.iter().enumerate().all(|(pos, &k)| {
        let hp = order[..pos].iter().map(|&j| ts[j]);
        response_time(&ts[k], hp, ts[k].d).is_some()
    })
}

/// RTA for the given priority order.
pub fn test(ts: &[Timing], order: &[usize]) -> Outcome {
    let rs = response_times(ts, order);
    let failing = order.iter().copied().find(|&k| rs[k].is_none());
    Outcome {
        per_task: Some(durations(&rs)),
        failing_task: failing,
        ..Outcome::new(if failing.is_none() {
            Verdict::Schedulable
        } else {
            Verdict::Unschedulable
        })
    }
}

pub fn test_rm(ts: &[Timing]) -> Outcome {
    test(ts, &rate_monotonic(ts))
}

pub fn test_dm(ts: &[Timing]) -> Outcome {
    test(ts, &deadline_monotonic(ts))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn burns_wellings_example() {
        // Burns & Wellings, "Real-Time Systems and Programming Languages", the three-task RTA
        // example: a (T=7, C=3), b (T=12, C=3), c (T=20, C=5). By hand:
        // R_a = 3; R_b: 3 + ⌈6/7⌉·3 = 6; R_c: 11 → 5+6+3 = 14 → 5+6+6 = 17 → 5+9+6 = 20 → 20.
        let ts = [
            Timing::implicit(3, 7),
            Timing::implicit(3, 12),
            Timing::implicit(5, 20),
        ];
        let o = test_rm(&ts);
        assert!(o.verdict.is_schedulable());
        assert_eq!(
            response_times(&ts, &rate_monotonic(&ts)),
            vec![Some(3), Some(6), Some(20)]
        );
        assert!(schedulable_dm(&ts));
    }

    #[test]
    fn miss_is_reported() {
        // One more unit for c: R_c would be 5+1 → iterate past 20.
        let ts = [
            Timing::implicit(3, 7),
            Timing::implicit(3, 12),
            Timing::implicit(6, 20),
        ];
        let o = test_rm(&ts);
        assert_eq!(o.verdict, Verdict::Unschedulable);
        assert_eq!(o.failing_task, Some(2));
        assert!(!schedulable_dm(&ts));
    }

    #[test]
    fn dm_beats_rm_with_constrained_deadlines() {
        let ts = [Timing::new(2, 10, 10), Timing::new(2, 3, 20)];
        assert_eq!(test_rm(&ts).verdict, Verdict::Unschedulable);
        assert!(test_dm(&ts).verdict.is_schedulable());
    }
}
