//! EDF utilisation bound on one processor (Liu & Layland, "Scheduling algorithms for
//! multiprogramming in a hard-real-time environment", JACM 1973, Theorem 7): with implicit
//! deadlines (D = T) a task set is EDF-schedulable iff U = Σ C_i/T_i ≤ 1. With constrained
//! deadlines the density condition Σ C_i/D_i ≤ 1 is sufficient only (use QPA for the exact answer).
//!
//! The comparison with 1 is exact (rational arithmetic in u128) whenever the common denominator
//! fits, so a set at exactly U = 1 is accepted and one a nanosecond over is not.

use std::cmp::Ordering;

use crate::outcome::{Outcome, Verdict};
use crate::ratio::Ratio;
use crate::timing::{implicit_deadlines, total_density, total_u};
use crate::Timing;

/// Compares Σ num_i/den_i with 1 exactly when possible, else by floating point.
pub fn ratio_sum_cmp_one(terms: impl Iterator<Item = (u64, u64)> + Clone) -> Ordering {
    match Ratio::sum(terms.clone()) {
        Some(r) => r.num.cmp(&r.den),
        None => {
            let f: f64 = terms.map(|(n, d)| n as f64 / d as f64).sum();
            f.partial_cmp(&1.0).unwrap_or(Ordering::Greater)
        }
    }
}

/// U ≤ 1, exactly where representable.
pub fn utilization_at_most_one(ts: &[Timing]) -> bool {
    // Exact rational arithmetic costs u128 gcds; only sums within float noise of 1 need it.
    let f = total_u(ts);
    if f < 1.0 - 1e-9 {
        return true;
    }
    if f > 1.0 + 1e-9 {
        return false;
    }
    ratio_sum_cmp_one(ts.iter().map(|t| (t.c, t.t))) != Ordering::Greater
}

/// Liu & Layland's bound for implicit deadlines (exact), the density bound otherwise (sufficient).
pub fn test(ts: &[Timing]) -> Outcome {
    if implicit_deadlines(ts) {
        let ok = utilization_at_most_one(ts);
        Outcome {
            value: Some(total_u(ts)),
            bound: Some(1.0),
            ..Outcome::new(if ok {
                Verdict::Schedulable
            } else {
                Verdict::Unschedulable
            })
        }
    } else {
        let ok = ratio_sum_cmp_one(ts.iter().map(|t| (t.c, t.d))) != Ordering::Greater;
        Outcome {
            value: Some(total_density(ts)),
            bound: Some(1.0),
            ..Outcome::new(if ok {
                Verdict::Schedulable
            } else {
                Verdict::NotProven
            })
        }
        .with_note("constrained deadlines: density test Σ C/D ≤ 1 (sufficient only)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_at_one() {
        let thirds = [Timing::implicit(1, 3); 3];
        assert!(test(&thirds).verdict.is_schedulable());
        let over = [
            Timing::implicit(1, 3),
            Timing::implicit(1, 3),
            Timing::implicit(334, 1000),
        ];
        assert_eq!(test(&over).verdict, Verdict::Unschedulable);
    }

    #[test]
    fn density_is_only_sufficient() {
        let ts = [Timing::new(2, 3, 10), Timing::new(2, 3, 10)];
        assert_eq!(test(&ts).verdict, Verdict::NotProven);
    }

    #[test]
    fn falls_back_when_denominators_overflow() {
        // Large co-prime periods overflow the exact common denominator.
        let primes = [
            1_000_000_007u64,
            998_244_353,
            1_000_000_009,
            999_999_937,
            999_999_929,
        ];
        let ts: Vec<Timing> = primes.iter().map(|&p| Timing::implicit(p / 10, p)).collect();
        assert!(utilization_at_most_one(&ts));
    }
}
