//! Global multiprocessor tests on m identical CPUs: EDF (GFB, BAK, BCL, iterative BCL,
//! Devi–Anderson tardiness) and fixed priority (Bertogna–Cirinei response-time analysis).

pub mod bak;
pub mod bcl;
pub mod bcl_iterative;
pub mod bertogna_cirinei;
pub mod devi_anderson;
pub mod gfb;

use crate::outcome::{Outcome, Verdict};
pub(crate) use crate::ratio::Ratio;
use crate::Timing;

/// Whether any sufficient global-EDF test (GFB, BCL, iterative BCL, BAK; cheapest first) proves
/// `ts` schedulable on `m` CPUs.
pub fn edf_schedulable(ts: &[Timing], m: usize) -> bool {
    gfb::test(ts, m).verdict.is_schedulable()
        || bcl::test(ts, m).verdict.is_schedulable()
        || bcl_iterative::test(ts, m).verdict.is_schedulable()
        || bak::test(ts, m).verdict.is_schedulable()
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

#[cfg(test)]
mod tests {
    use super::*;

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
