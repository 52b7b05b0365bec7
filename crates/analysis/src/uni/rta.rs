//! Exact response-time analysis for preemptive fixed priority on one processor with constrained
//! deadlines (Joseph & Pandya, "Finding response times in a real-time system", Computer Journal
//! 1986; Audsley, Burns, Richardson, Tindell & Wellings, "Applying new scheduling theory to static
//! priority pre-emptive scheduling", Software Engineering Journal 1993):
//! R_k = C_k + Σ_{j ∈ hp(k)} ⌈R_k / T_j⌉ C_j, the least fixed point at or above Σ_{hp(k) ∪ {k}} C;
//! the task meets its deadline iff R_k ≤ D_k (synchronous release is the critical instant).
//!
//! Whole priority orders ([`response_times`], [`schedulable_dm`]) are analysed in one sweep
//! instead of n independent iterations, which is what makes 100 000 tasks take well under a
//! second (the plain form, kept in [`crate::reference`], costs O(n) per iteration per task):
//!
//! - **Start values** (Davis, Zabos & Burns, "Efficient exact schedulability tests for fixed
//!   priority real-time systems", IEEE TC 57(9), 2008, §4): with W_k(t) = C_k + Σ_{hp(k)}
//!   ⌈t/T_j⌉ C_j, R_k is the least t ≥ 1 with W_k(t) ≤ t, so W_k(t) > t below it. The next task
//!   in priority order has W_{k+1}(t) ≥ W_k(t) + C_{k+1}, hence R_{k+1} ≥ R_k + C_{k+1}; and any
//!   iterate of a task that missed its deadline is still a lower bound on its R_k. Iterating
//!   from below a fixed point converges to the least one, so each task starts where the
//!   previous one stopped, and stops as soon as an iterate passes its deadline.
//! - **One interference sweep**: with those start values every instant at which some W is
//!   evaluated is at or after the previous one, over the whole order. `Interference` keeps
//!   Σ ⌈t/T_j⌉ C_j for the tasks analysed so far at the current instant and moves forward with a
//!   heap of the next instant at which each task's ⌈t/T_j⌉ grows, so each evaluation costs the
//!   period boundaries crossed since the last one (O(log n) each), not O(n).
//!
//! The results are the same numbers as the plain iteration; `tests/equivalence.rs` checks that
//! on random sets against [`crate::reference`].

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::outcome::{Outcome, Verdict};
use crate::timing::durations;
use crate::uni::priority::{deadline_monotonic, rate_monotonic};
use crate::Timing;

/// Response time of `k` given its higher-priority tasks, or `None` once it exceeds `limit`.
///
/// The plain iteration from R = Σ C, for one task on its own; whole priority orders should use
/// [`response_times`], which shares the work between tasks. u64 arithmetic (u128 division is a
/// slow library call); any overflow means the response time is beyond every representable
/// deadline.
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

/// Response time of `k` when each higher-priority task `(j, J_j)` may be released up to J_j
/// after its period boundary (release jitter: Tindell's extension in Audsley, Burns, Richardson,
/// Tindell & Wellings 1993, R_k = C_k + Σ ⌈(R_k + J_j)/T_j⌉ C_j), or `None` once it exceeds
/// `limit`. With J_j = D_j − C_j the term bounds the work of a task that meets its deadlines in
/// any window, carry-in included (it is never below Bertogna & Cirinei's workload bound), which
/// is what a caller needs when the interferers do not share one synchronous start with `k`.
pub fn response_time_jitter(
    k: &Timing,
    hp: impl Iterator<Item = (Timing, u64)> + Clone,
    limit: u64,
) -> Option<u64> {
    let mut r = hp.clone().try_fold(k.c, |acc, (j, _)| acc.checked_add(j.c))?;
    loop {
        if r > limit {
            return None;
        }
        let next = hp.clone().try_fold(k.c, |acc, (j, jitter)| {
            if j.c == 0 {
                return Some(acc);
            }
            // A zero period with C > 0 is unbounded interference.
            if j.t == 0 {
                return None;
            }
            r.checked_add(jitter)?
                .div_ceil(j.t)
                .checked_mul(j.c)
                .and_then(|w| acc.checked_add(w))
        })?;
        if next == r {
            return Some(r);
        }
        r = next;
    }
}

/// Σ_j ⌈t/T_j⌉ C_j over a growing set of tasks, at an instant t that only moves forward.
///
/// Sums are u128 and saturate: a sum above u64::MAX exceeds every deadline, which is all the
/// callers need to know. A task with a zero period and C > 0 makes the sum unbounded (the plain
/// iteration divided by zero there).
pub(crate) struct Interference {
    now: u64,
    sum: u128,
    /// (next instant at which ⌈t/T⌉ of `tasks[i]` grows, i), earliest first.
    steps: BinaryHeap<Reverse<(u64, usize)>>,
    /// (C, T) of the tasks that can still grow.
    tasks: Vec<(u64, u64)>,
    unbounded: bool,
}

impl Interference {
    pub(crate) fn with_capacity(n: usize) -> Self {
        Interference {
            now: 0,
            sum: 0,
            steps: BinaryHeap::with_capacity(n),
            tasks: Vec::with_capacity(n),
            unbounded: false,
        }
    }

    /// The sum at the current instant.
    pub(crate) fn sum(&self) -> u128 {
        if self.unbounded {
            u128::MAX
        } else {
            self.sum
        }
    }

    /// Adds a task at the current instant.
    pub(crate) fn insert(&mut self, t: &Timing) {
        if t.c == 0 {
            return;
        }
        if t.t == 0 {
            self.unbounded = true;
            return;
        }
        let q = self.now.div_ceil(t.t);
        self.sum = self.sum.saturating_add(u128::from(q) * u128::from(t.c));
        // ⌈t/T⌉ = q on ((q − 1)T, qT] and grows at qT + 1; past u64::MAX it never grows again.
        if let Some(at) = q.checked_mul(t.t).and_then(|x| x.checked_add(1)) {
            self.steps.push(Reverse((at, self.tasks.len())));
        }
        self.tasks.push((t.c, t.t));
    }

    /// Moves the instant forward to `to` (never backwards: an earlier `to` is a caller bug and
    /// is treated as the current instant).
    pub(crate) fn advance(&mut self, to: u64) {
        if to <= self.now {
            return;
        }
        self.now = to;
        while let Some(&Reverse((at, i))) = self.steps.peek() {
            if at > to {
                break;
            }
            self.steps.pop();
            let (c, t) = self.tasks[i];
            // One pop covers every period boundary crossed since the task last grew.
            let before = (at - 1) / t;
            let q = to.div_ceil(t);
            self.sum = self.sum.saturating_add(u128::from(q - before) * u128::from(c));
            if let Some(next) = q.checked_mul(t).and_then(|x| x.checked_add(1)) {
                self.steps.push(Reverse((next, i)));
            }
        }
    }

    /// The least fixed point of r = c + Σ ⌈r/T_j⌉ C_j at or above `start`, which must not exceed
    /// it (and not precede the current instant); `Err` with the last iterate, still a lower
    /// bound on the fixed point, once an iterate passes `limit`.
    pub(crate) fn solve(&mut self, c: u64, start: u128, limit: u64) -> Result<u64, u128> {
        let mut r = start;
        loop {
            if r > u128::from(limit) {
                return Err(r);
            }
            // r ≤ limit, so it fits in u64.
            let r64 = r as u64;
            self.advance(r64);
            let w = self.sum().saturating_add(u128::from(c));
            // Below the least fixed point W(r) > r; from below, W(r) ≤ r means r is it.
            if w <= r {
                return Ok(r64);
            }
            r = w;
        }
    }
}

/// Response times for the priority `order` (indices, highest first), in one sweep; `None` for a
/// task whose response time exceeds its deadline. With `stop_at_miss`, the sweep ends at the
/// first miss and returns its position in `order`.
fn sweep(ts: &[Timing], order: &[usize], stop_at_miss: bool) -> (Vec<Option<u64>>, Option<usize>) {
    let mut out = vec![None; ts.len()];
    let mut acc = Interference::with_capacity(order.len());
    // A lower bound on the response time of the task just analysed (its R, or its last iterate).
    let mut lower: u128 = 0;
    for (pos, &k) in order.iter().enumerate() {
        let tk = &ts[k];
        match acc.solve(tk.c, lower.saturating_add(u128::from(tk.c)), tk.d) {
            Ok(r) => {
                out[k] = Some(r);
                lower = u128::from(r);
            }
            Err(bound) => {
                if stop_at_miss {
                    return (out, Some(pos));
                }
                lower = bound;
            }
        }
        acc.insert(tk);
    }
    (out, None)
}

/// Response times in input order for the priority `order` (indices, highest first); `None` for a
/// task whose response time exceeds its deadline (and, as it then misses, the analysis of lower
/// priorities still proceeds: their interference uses only C and T).
pub fn response_times(ts: &[Timing], order: &[usize]) -> Vec<Option<u64>> {
    sweep(ts, order, false).0
}

/// Yes/no under deadline-monotonic priorities, stopping at the first miss.
pub fn schedulable_dm(ts: &[Timing]) -> bool {
    sweep(ts, &deadline_monotonic(ts), true).1.is_none()
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
        let hp = [ts[0], ts[1]];
        assert_eq!(response_time(&ts[2], hp.iter().copied(), 20), Some(20));
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

    #[test]
    fn sweep_continues_after_a_miss() {
        // b misses: its first iterate 3 + 4 = 7 is past D_b = 6 (R_b is 16). c starts from 7 + 1
        // and still finds its exact response time: 8 → 11 → 14 → 17 → 20 = 1 + 3·⌈20/4⌉ + 4.
        let ts = [
            Timing::implicit(3, 4),
            Timing::new(4, 6, 40),
            Timing::new(1, 40, 40),
        ];
        assert_eq!(
            response_times(&ts, &[0, 1, 2]),
            crate::reference::rta_response_times(&ts, &[0, 1, 2])
        );
        assert_eq!(response_times(&ts, &[0, 1, 2]), vec![Some(3), None, Some(20)]);
    }

    #[test]
    fn interference_jumps_several_periods() {
        let mut acc = Interference::with_capacity(2);
        acc.insert(&Timing::implicit(2, 5));
        acc.advance(1);
        assert_eq!(acc.sum(), 2);
        acc.advance(23); // ⌈23/5⌉ = 5
        assert_eq!(acc.sum(), 10);
        acc.insert(&Timing::implicit(1, 10)); // ⌈23/10⌉ = 3
        assert_eq!(acc.sum(), 13);
        acc.advance(31); // 7·2 + 4·1
        assert_eq!(acc.sum(), 18);
        acc.advance(30); // backwards: ignored
        assert_eq!(acc.sum(), 18);
    }

    #[test]
    fn jitter_extends_interference() {
        // a (C=3, T=7) with jitter 4 against c (C=5): R = 5+3 = 8 → 5 + ⌈12/7⌉·3 = 11 →
        // 5 + ⌈15/7⌉·3 = 14 → 5 + ⌈18/7⌉·3 = 14. Without jitter: 5 + ⌈8/7⌉·3 = 11 → 11.
        let c = Timing::implicit(5, 20);
        let a = Timing::implicit(3, 7);
        assert_eq!(response_time_jitter(&c, [(a, 4)].into_iter(), 20), Some(14));
        assert_eq!(response_time_jitter(&c, [(a, 0)].into_iter(), 20), Some(11));
        assert_eq!(
            response_time_jitter(&c, [(a, 0)].into_iter(), 20),
            response_time(&c, [a].into_iter(), 20)
        );
        assert_eq!(response_time_jitter(&c, [(a, 4)].into_iter(), 13), None);
        // A zero period is no panic.
        assert_eq!(
            response_time_jitter(&c, [(Timing::new(1, 1, 0), 0)].into_iter(), 20),
            None
        );
    }

    #[test]
    fn degenerate_values_do_not_panic() {
        // Zero WCETs: every response time is 0 (the plain iteration's fixed point at Σ C = 0).
        let zeros = [Timing::implicit(0, 5), Timing::implicit(0, 7)];
        assert_eq!(response_times(&zeros, &[0, 1]), vec![Some(0), Some(0)]);
        // A zero period with C > 0 is unbounded interference for every lower priority.
        let odd = [Timing::new(1, 1, 0), Timing::implicit(1, 10)];
        assert_eq!(response_times(&odd, &[0, 1]), vec![Some(1), None]);
        // Sums beyond u64 saturate instead of wrapping.
        let big = [
            Timing::implicit(u64::MAX, u64::MAX),
            Timing::implicit(u64::MAX, u64::MAX),
        ];
        assert_eq!(response_times(&big, &[0, 1]), vec![Some(u64::MAX), None]);
    }
}
