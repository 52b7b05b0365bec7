//! Exact EDF test for constrained deadlines on one processor: processor-demand analysis with
//! Quick Processor-demand Analysis (Zhang & Burns, "Schedulability analysis for real-time systems
//! with EDF scheduling", IEEE Trans. Computers 58(9), 2009).
//!
//! Demand bound h(t) = Σ_{D_i ≤ t} (⌊(t − D_i)/T_i⌋ + 1)·C_i; the set is schedulable iff U ≤ 1 and
//! h(t) ≤ t for every absolute deadline t < L, with L = min(L_a, L_b): L_a = max(D_max,
//! Σ(T_i − D_i)U_i / (1 − U)) (Theorem 2, only when U < 1) and L_b the synchronous busy period.
//! QPA (Theorem 5) walks backwards from the last deadline before L: t ← h(t) if h(t) < t, else to
//! the previous deadline, until h(t) ≤ d_min (schedulable) or h(t) > t (deadline miss at t).

use crate::outcome::{Outcome, Verdict};
use crate::timing::{implicit_deadlines, total_u};
use crate::uni::edf_utilization::utilization_at_most_one;
use crate::Timing;

/// Iteration cap for the busy-period fixed point; only pathological U = 1 sets come near it.
pub const MAX_ITERATIONS: u64 = 10_000_000;

/// What QPA found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QpaResult {
    Schedulable,
    /// h(t) > t at this instant.
    DeadlineMiss {
        t: u64,
        demand: u64,
    },
    /// U > 1.
    Overloaded,
    /// The busy period or QPA walk hit [`MAX_ITERATIONS`].
    Limit,
}

/// Processor demand h(t) (u128: with many tasks and long intervals the sum overflows u64).
pub fn demand(ts: &[Timing], t: u64) -> u128 {
    ts.iter()
        .filter(|x| x.d <= t)
        .map(|x| ((t - x.d) / x.t + 1) as u128 * x.c as u128)
        .sum()
}

/// Largest absolute deadline strictly below `x`, if any.
fn prev_deadline(ts: &[Timing], x: u64) -> Option<u64> {
    ts.iter()
        .filter(|k| k.d < x)
        .map(|k| (x - 1 - k.d) / k.t * k.t + k.d)
        .max()
}

/// Length of the synchronous busy period (w = Σ ⌈w/T_i⌉ C_i), `None` if it does not converge
/// (or overflows u64, which only a set with U ≥ 1 can reach).
pub fn busy_period(ts: &[Timing]) -> Option<u64> {
    let mut w = ts.iter().try_fold(0u64, |a, x| a.checked_add(x.c))?;
    for _ in 0..MAX_ITERATIONS {
        let next = ts.iter().try_fold(0u64, |a, x| {
            w.div_ceil(x.t).checked_mul(x.c).and_then(|v| a.checked_add(v))
        })?;
        if next == w {
            return Some(w);
        }
        w = next;
    }
    None
}

/// Zhang & Burns' L_a bound, only defined for U < 1.
fn la_bound(ts: &[Timing]) -> Option<u64> {
    let u = total_u(ts);
    if u >= 1.0 {
        return None;
    }
    let dmax = ts.iter().map(|x| x.d).max().unwrap_or(0);
    let s: f64 = ts.iter().map(|x| (x.t - x.d) as f64 * x.u()).sum::<f64>() / (1.0 - u);
    // Rounding up keeps the bound safe; a float too big for u64 means "no useful bound".
    let s = s.ceil();
    if !s.is_finite() || s >= u64::MAX as f64 {
        return None;
    }
    Some(dmax.max(s as u64))
}

/// Runs QPA.
pub fn qpa(ts: &[Timing]) -> QpaResult {
    if ts.is_empty() {
        return QpaResult::Schedulable;
    }
    if !utilization_at_most_one(ts) {
        return QpaResult::Overloaded;
    }
    // With D = T, U ≤ 1 is already exact (Liu & Layland); and density Σ C/D ≤ 1 is sufficient
    // for any constrained set (h(t) ≤ Σ C_i·t/D_i ≤ t). Either way the walk is unnecessary; the
    // margin keeps float rounding from accepting a set the exact walk would reject.
    if implicit_deadlines(ts) || crate::timing::total_density(ts) <= 1.0 - 1e-9 {
        return QpaResult::Schedulable;
    }
    let lb = busy_period(ts);
    let l = match (la_bound(ts), lb) {
        (Some(a), Some(b)) => a.min(b),
        (Some(a), None) => a,
        (None, Some(b)) => b,
        (None, None) => return QpaResult::Limit,
    };
    let d_min = ts.iter().map(|x| x.d).min().unwrap_or(0);
    // Deadlines at exactly L still count: the busy period may end on a deadline (check t ≤ L).
    let Some(mut t) = prev_deadline(ts, l.saturating_add(1)) else {
        return QpaResult::Schedulable;
    };
    for _ in 0..MAX_ITERATIONS {
        let h = demand(ts, t);
        if h > t as u128 {
            return QpaResult::DeadlineMiss {
                t,
                demand: h.min(u64::MAX as u128) as u64,
            };
        }
        if h <= d_min as u128 {
            return QpaResult::Schedulable;
        }
        let h = h as u64;
        t = if h < t {
            h
        } else {
            match prev_deadline(ts, t) {
                Some(p) => p,
                None => return QpaResult::Schedulable,
            }
        };
    }
    QpaResult::Limit
}

/// QPA as a yes/no, for partitioning inner loops (a limit counts as "does not fit").
pub fn schedulable(ts: &[Timing]) -> bool {
    qpa(ts) == QpaResult::Schedulable
}

pub fn test(ts: &[Timing]) -> Outcome {
    let mut o = match qpa(ts) {
        QpaResult::Schedulable => Outcome::new(Verdict::Schedulable),
        QpaResult::DeadlineMiss { t, demand } => Outcome::new(Verdict::Unschedulable)
            .with_note(format!("demand h({t} ns) = {demand} ns exceeds the interval")),
        QpaResult::Overloaded => Outcome::new(Verdict::Unschedulable).with_note("U > 1"),
        QpaResult::Limit => Outcome::new(Verdict::Unknown(format!(
            "busy period / QPA walk exceeded {MAX_ITERATIONS} iterations"
        ))),
    };
    o.value = Some(total_u(ts));
    o.bound = Some(1.0);
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn demand_function() {
        let ts = [Timing::new(1, 2, 4), Timing::new(2, 5, 6)];
        assert_eq!(demand(&ts, 1), 0);
        assert_eq!(demand(&ts, 2), 1);
        assert_eq!(demand(&ts, 5), 3);
        assert_eq!(demand(&ts, 6), 4);
        assert_eq!(demand(&ts, 11), 7);
        assert_eq!(prev_deadline(&ts, 6), Some(5));
        assert_eq!(prev_deadline(&ts, 2), None);
    }

    #[test]
    fn hand_examples() {
        // Two tasks both needing 2 units within 3: demand 4 > 3 at t = 3.
        let miss = [Timing::new(2, 3, 10), Timing::new(2, 3, 10)];
        assert_eq!(qpa(&miss), QpaResult::DeadlineMiss { t: 3, demand: 4 });
        // Same load with staggered deadlines fits: h(3) = 2, h(5) = 4.
        let ok = [Timing::new(2, 3, 10), Timing::new(2, 5, 10)];
        assert_eq!(qpa(&ok), QpaResult::Schedulable);
        assert_eq!(qpa(&[Timing::implicit(3, 2)]), QpaResult::Overloaded);
        assert_eq!(qpa(&[]), QpaResult::Schedulable);
    }

    #[test]
    fn full_utilisation_constrained() {
        // U = 1 exactly with a constrained deadline: only L_b bounds the walk.
        let ts = [Timing::new(1, 1, 2), Timing::new(1, 2, 2)];
        assert_eq!(qpa(&ts), QpaResult::Schedulable);
        let mixed = [Timing::new(1, 1, 2), Timing::implicit(2, 4)];
        assert_eq!(qpa(&mixed), QpaResult::Schedulable);
        // h(3) = 2·1 + 2 = 4 > 3.
        let bad = [Timing::new(1, 1, 2), Timing::new(2, 3, 4)];
        assert_eq!(qpa(&bad), QpaResult::DeadlineMiss { t: 3, demand: 4 });
    }
}
