//! Hyperbolic bound for Rate Monotonic (Bini, Buttazzo & Buttazzo, "Rate monotonic analysis: the
//! hyperbolic bound", IEEE TC 2003): implicit-deadline tasks are RM-schedulable on one processor if
//! Π (U_i + 1) ≤ 2. Sufficient, and never more pessimistic than Liu & Layland.

use crate::outcome::Outcome;
use crate::timing::implicit_deadlines;
use crate::Timing;

pub fn test(ts: &[Timing]) -> Outcome {
    if !implicit_deadlines(ts) {
        return Outcome::not_applicable("needs implicit deadlines (D = T)");
    }
    let product: f64 = ts.iter().map(|t| t.u() + 1.0).product();
    Outcome::sufficient_bound(product, 2.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::uni::liu_layland;
    use crate::Verdict;

    #[test]
    fn accepts_what_liu_layland_rejects() {
        // U = 0.85 > 0.8284 (Liu & Layland rejects), but (1 + 0.6)(1 + 0.25) = 2 (hyperbolic accepts).
        let ts = [Timing::implicit(6, 10), Timing::implicit(1, 4)];
        assert_eq!(liu_layland::test(&ts).verdict, Verdict::NotProven);
        assert!(test(&ts).verdict.is_schedulable());
        let over = [Timing::implicit(6, 10), Timing::implicit(26, 100)];
        assert_eq!(test(&over).verdict, Verdict::NotProven);
    }
}
