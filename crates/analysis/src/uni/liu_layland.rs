//! Liu & Layland's utilisation bound for Rate Monotonic (JACM 1973, Theorem 5): n implicit-deadline
//! periodic tasks are RM-schedulable on one processor if U ≤ n(2^{1/n} − 1). Sufficient only.

use crate::outcome::Outcome;
use crate::timing::{implicit_deadlines, total_u};
use crate::Timing;

/// n(2^{1/n} − 1); tends to ln 2 ≈ 0.6931.
pub fn bound(n: usize) -> f64 {
    if n == 0 {
        return 1.0;
    }
    let n = n as f64;
    n * (2f64.powf(1.0 / n) - 1.0)
}

pub fn test(ts: &[Timing]) -> Outcome {
    if !implicit_deadlines(ts) {
        return Outcome::not_applicable("needs implicit deadlines (D = T)");
    }
    Outcome::sufficient_bound(total_u(ts), bound(ts.len()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Verdict;

    #[test]
    fn known_values() {
        assert_eq!(bound(1), 1.0);
        assert!((bound(2) - 0.828427).abs() < 1e-6);
        assert!((bound(3) - 0.7798).abs() < 1e-4);
        assert!((bound(1_000_000) - std::f64::consts::LN_2).abs() < 1e-6);
    }

    #[test]
    fn verdicts() {
        let ok = [
            Timing::implicit(1, 4),
            Timing::implicit(1, 5),
            Timing::implicit(2, 10),
        ];
        assert!(test(&ok).verdict.is_schedulable()); // U = 0.65
        let hi = [
            Timing::implicit(1, 2),
            Timing::implicit(1, 3),
            Timing::implicit(1, 10),
        ];
        assert_eq!(test(&hi).verdict, Verdict::NotProven); // U = 0.933
        assert!(matches!(
            test(&[Timing::new(1, 2, 3)]).verdict,
            Verdict::NotApplicable(_)
        ));
    }
}
