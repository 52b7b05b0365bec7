//! GFB: the utilisation/density bound for global EDF on m identical CPUs.
//!
//! J. Goossens, S. Funk, S. Baruah, "Priority-driven scheduling of periodic task systems on
//! multiprocessors", Real-Time Systems 25(2–3):187–205, 2003 (Theorem 5): implicit-deadline
//! tasks are global-EDF schedulable on m CPUs if
//!
//! ```text
//! U_sum ≤ m·(1 − u_max) + u_max
//! ```
//!
//! For constrained deadlines the same argument holds with densities λ_i = C_i / D_i in place of
//! utilisations (M. Bertogna, M. Cirinei, G. Lipari, ECRTS 2005, and S. Baruah's restatement):
//!
//! ```text
//! Σ λ_i ≤ m − (m − 1)·λ_max
//! ```
//!
//! With D = T the two conditions coincide, so one formula serves both; the note says which
//! reading applies.

use crate::global::precheck;
use crate::outcome::Outcome;
use crate::timing::{implicit_deadlines, total_density};
use crate::Timing;

/// GFB for global EDF: `value` is Σλ (= U for implicit deadlines), `bound` is m − (m − 1)·λ_max.
pub fn test(ts: &[Timing], m: usize) -> Outcome {
    if let Some(o) = precheck(ts, m) {
        return o;
    }
    let lambda_max = ts.iter().map(Timing::density).fold(0.0, f64::max);
    let value = total_density(ts);
    let mf = m as f64;
    let bound = mf - (mf - 1.0) * lambda_max;
    let note = if implicit_deadlines(ts) {
        "implicit deadlines: U ≤ m(1 − u_max) + u_max"
    } else {
        "constrained deadlines: Σλ ≤ m − (m − 1)λ_max (density generalisation)"
    };
    Outcome::sufficient_bound(value, bound).with_note(note)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outcome::Verdict;

    #[test]
    fn implicit_bound_by_hand() {
        // m = 2, u = {0.5, 0.3, 0.4}: U = 1.2, bound = 2 − 0.5 = 1.5.
        let ts = [
            Timing::implicit(5, 10),
            Timing::implicit(3, 10),
            Timing::implicit(4, 10),
        ];
        let o = test(&ts, 2);
        assert_eq!(o.verdict, Verdict::Schedulable);
        assert!((o.value.unwrap() - 1.2).abs() < 1e-12);
        assert!((o.bound.unwrap() - 1.5).abs() < 1e-12);
        // u_max = 0.8 → bound 1.2 < U = 1.5.
        let ts = [
            Timing::implicit(8, 10),
            Timing::implicit(3, 10),
            Timing::implicit(4, 10),
        ];
        let o = test(&ts, 2);
        assert_eq!(o.verdict, Verdict::NotProven);
        assert!((o.bound.unwrap() - 1.2).abs() < 1e-12);
    }

    #[test]
    fn exactly_at_the_bound_passes() {
        // m = 3, four tasks of u = 0.5: U = 2.0 ≤ 3 − 2·0.5 = 2.0 → passes at equality;
        // four of u = 0.6: U = 2.4 > 3 − 2·0.6 = 1.8 → fails.
        let ts = [Timing::implicit(1, 2); 4];
        assert_eq!(test(&ts, 3).verdict, Verdict::Schedulable);
        let ts = [Timing::implicit(6, 10); 4];
        assert_eq!(test(&ts, 3).verdict, Verdict::NotProven);
    }

    #[test]
    fn constrained_uses_density() {
        // λ = {0.5, 0.5}, U = {0.25, 0.25}; on m = 1 the bound is 1 and Σλ = 1.
        let ts = [Timing::new(2, 4, 8), Timing::new(2, 4, 8)];
        let o = test(&ts, 1);
        assert_eq!(o.verdict, Verdict::Schedulable);
        assert!((o.value.unwrap() - 1.0).abs() < 1e-12);
        // m = 2, λ = {0.75, 0.5, 0.5}: Σλ = 1.75 > 2 − 0.75 = 1.25.
        let ts = [
            Timing::new(3, 4, 100),
            Timing::new(2, 4, 100),
            Timing::new(2, 4, 100),
        ];
        assert_eq!(test(&ts, 2).verdict, Verdict::NotProven);
    }

    #[test]
    fn edge_cases() {
        assert_eq!(test(&[], 2).verdict, Verdict::Schedulable);
        assert!(matches!(
            test(&[Timing::implicit(1, 2)], 0).verdict,
            Verdict::NotApplicable(_)
        ));
        // One task of density just over 1 on many CPUs.
        assert_eq!(
            test(&[Timing::new(1_000_000_001, 1_000_000_000, 2_000_000_000)], 64).verdict,
            Verdict::NotProven
        );
    }
}
