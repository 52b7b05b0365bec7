//! Global multiprocessor tests on m identical CPUs: EDF (GFB, BAK, BCL, iterative BCL,
//! Devi–Anderson tardiness) and fixed priority (Bertogna–Cirinei response-time analysis).

pub mod bak;
pub mod bcl;
pub mod bcl_iterative;
pub mod bertogna_cirinei;
pub mod devi_anderson;
pub mod gfb;

use crate::outcome::{Outcome, Verdict};
use crate::Timing;

/// Whether any sufficient global-EDF test (GFB, BCL, BAK, iterative BCL, cheapest first) proves
/// `ts` schedulable on `m` CPUs.
pub fn edf_schedulable(ts: &[Timing], m: usize) -> bool {
    gfb::test(ts, m).verdict.is_schedulable()
        || bcl::test(ts, m).verdict.is_schedulable()
        || bak::test(ts, m).verdict.is_schedulable()
        || bcl_iterative::test(ts, m).verdict.is_schedulable()
}

/// Whether the Bertogna–Cirinei response-time analysis proves `ts` schedulable under global
/// deadline-monotonic fixed priority on `m` CPUs.
pub fn fp_dm_schedulable(ts: &[Timing], m: usize) -> bool {
    bertogna_cirinei::test_dm(ts, m).verdict.is_schedulable()
}

/// The checks every hard-deadline global test shares; `Some` is the outcome to return at once.
///
/// An empty set is schedulable on any platform (even m = 0: there is nothing to run), so that is
/// decided before the platform is looked at. The tests' derivations assume D > 0, T > 0 and
/// D ≤ T, so other shapes are refused rather than analysed wrongly. A task with C > D misses its
/// deadline even alone on a CPU; reporting it as not proven (not unschedulable) keeps the rule
/// that a sufficient test never claims unschedulability.
pub(crate) fn precheck(ts: &[Timing], m: usize) -> Option<Outcome> {
    if ts.is_empty() {
        return Some(Outcome::new(Verdict::Schedulable).with_note("empty task set"));
    }
    if m == 0 {
        return Some(Outcome::not_applicable("no CPUs (m = 0)"));
    }
    if let Some(i) = ts.iter().position(|t| t.d == 0 || t.t == 0) {
        return Some(Outcome::not_applicable(format!(
            "task {i} has a zero deadline or period"
        )));
    }
    if let Some(i) = ts.iter().position(|t| t.d > t.t) {
        return Some(Outcome::not_applicable(format!(
            "task {i} has D > T; the test assumes constrained deadlines"
        )));
    }
    if let Some(i) = ts.iter().position(|t| t.c > t.d) {
        let mut o = Outcome::new(Verdict::NotProven).with_note(format!(
            "task {i} has C > D (density > 1): infeasible on any platform"
        ));
        o.failing_task = Some(i);
        return Some(o);
    }
    None
}

/// A non-negative rational with u128 parts, for sums of utilisations where an exact answer
/// matters (is U integral? is U ≤ m?); every operation is checked so callers can fall back to
/// floating point on overflow instead of wrapping.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Ratio {
    pub num: u128,
    pub den: u128,
}

fn gcd(mut a: u128, mut b: u128) -> u128 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

impl Ratio {
    pub const ZERO: Ratio = Ratio { num: 0, den: 1 };

    /// `num / den` in lowest terms; `None` if `den` is zero.
    pub fn new(num: u128, den: u128) -> Option<Ratio> {
        if den == 0 {
            return None;
        }
        let g = gcd(num, den).max(1);
        Some(Ratio {
            num: num / g,
            den: den / g,
        })
    }

    pub fn checked_add(self, o: Ratio) -> Option<Ratio> {
        let g = gcd(self.den, o.den);
        let lcm = (self.den / g).checked_mul(o.den)?;
        let a = self.num.checked_mul(lcm / self.den)?;
        let b = o.num.checked_mul(lcm / o.den)?;
        Ratio::new(a.checked_add(b)?, lcm)
    }

    /// The exact sum of `c / t` over `ts`, or `None` on overflow.
    pub fn total_u(ts: &[Timing]) -> Option<Ratio> {
        ts.iter().try_fold(Ratio::ZERO, |acc, t| {
            acc.checked_add(Ratio::new(u128::from(t.c), u128::from(t.t))?)
        })
    }

    pub fn to_f64(self) -> f64 {
        self.num as f64 / self.den as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratio_sums_exactly() {
        let ts = [
            Timing::implicit(1, 3),
            Timing::implicit(1, 6),
            Timing::implicit(1, 2),
        ];
        assert_eq!(Ratio::total_u(&ts), Some(Ratio { num: 1, den: 1 }));
        let big = [
            Timing::implicit(1, u64::MAX),
            Timing::implicit(1, u64::MAX - 1),
            Timing::implicit(1, u64::MAX - 2),
        ];
        // lcm ≈ 2^192 does not fit: the caller must be told, not given a wrapped value.
        assert_eq!(Ratio::total_u(&big), None);
    }

    #[test]
    fn precheck_order() {
        assert_eq!(precheck(&[], 0).map(|o| o.verdict), Some(Verdict::Schedulable));
        let ts = [Timing::new(1, 2, 3)];
        assert!(matches!(
            precheck(&ts, 0).map(|o| o.verdict),
            Some(Verdict::NotApplicable(_))
        ));
        assert!(precheck(&ts, 1).is_none());
        let heavy = [Timing::new(1, 2, 3), Timing::new(3, 2, 3)];
        let o = precheck(&heavy, 4).unwrap();
        assert_eq!(o.verdict, Verdict::NotProven);
        assert_eq!(o.failing_task, Some(1));
        assert!(matches!(
            precheck(&[Timing::new(1, 4, 3)], 1).map(|o| o.verdict),
            Some(Verdict::NotApplicable(_))
        ));
    }

    #[test]
    fn combined_helpers() {
        // Two CPUs, three tasks of utilisation 0.5: GFB accepts (1.5 ≤ 2 − 0.5).
        let ts = [Timing::implicit(5, 10); 3];
        assert!(edf_schedulable(&ts, 2));
        assert!(fp_dm_schedulable(&ts, 2));
        // U = 2.1 > 2: nothing may accept.
        let over = [Timing::implicit(7, 10); 3];
        assert!(!edf_schedulable(&over, 2));
        assert!(!fp_dm_schedulable(&over, 2));
        assert!(edf_schedulable(&[], 0));
        assert!(!edf_schedulable(&ts, 0));
    }
}
