//! Devi–Anderson tardiness bound for global EDF (soft real-time) on m identical CPUs.
//!
//! U. C. Devi, J. H. Anderson, "Tardiness bounds under global EDF scheduling on a
//! multiprocessor", RTSS 2005; journal version Real-Time Systems 38(2):133–189, 2008 (the
//! preemptive bound; also U. C. Devi's PhD thesis, UNC 2006, Corollary 4.11). For
//! implicit-deadline sporadic tasks with u_i ≤ 1 and U_sum ≤ m, every job of τ_k completes at
//! most x + e_k after its deadline, where
//!
//! ```text
//! x = (E_Λ − e_min) / (m − U_{Λ−1})
//! Λ = U_sum − 1 if U_sum is integral, ⌊U_sum⌋ otherwise      (i.e. ⌈U_sum⌉ − 1)
//! E_Λ     = sum of the Λ largest execution costs e_i
//! U_{Λ−1} = sum of the Λ − 1 largest utilisations
//! e_min   = smallest execution cost
//! ```
//!
//! x is clamped at 0 (Λ = 0 makes E_Λ − e_min negative). Since u_i ≤ 1 and U_sum ≤ m give
//! Λ ≤ m − 1, the denominator is at least 2 and the bound always exists: tardiness under global
//! EDF is bounded exactly when U_sum ≤ m. Above that the backlog grows without bound, so the
//! verdict is `Unschedulable`. On one CPU EDF is optimal and U ≤ 1 means no tardiness at all,
//! which is reported instead of the (valid but loose) x + e_k.
//!
//! Λ depends on whether U_sum is an integer, so U_sum is summed as an exact fraction when it
//! fits in u128; otherwise the float fallback picks the larger candidate Λ near an integer,
//! which only enlarges x (the bound stays safe).

use pacer_model::Duration;

use crate::global::Ratio;
use crate::outcome::{Outcome, Verdict, EPS};
use crate::timing::{implicit_deadlines, total_u};
use crate::Timing;

/// Orders two tasks by utilisation, exactly (cross-multiplied in u128).
fn cmp_u(a: &Timing, b: &Timing) -> std::cmp::Ordering {
    (u128::from(a.c) * u128::from(b.t)).cmp(&(u128::from(b.c) * u128::from(a.t)))
}

/// ⌈numer · Q / (m · Q − P)⌉, i.e. ⌈numer / (m − P/Q)⌉ with
/// `sum_u = P/Q`; `None` on overflow or a non-positive denominator.
fn exact_x(numer: u128, m: usize, sum_u: Ratio) -> Option<u128> {
    let denom = (m as u128)
        .checked_mul(sum_u.den)?
        .checked_sub(sum_u.num)
        .filter(|&d| d > 0)?;
    let top = numer.checked_mul(sum_u.den)?;
    Some(top.div_ceil(denom))
}

/// The global-EDF tardiness bound. `Schedulable` means every task's tardiness is bounded (not
/// that deadlines are met); `per_task` holds the bounds x + e_k, rounded up to whole ns.
pub fn test(ts: &[Timing], m: usize) -> Outcome {
    const SOFT: &str = "soft real-time: Schedulable means bounded tardiness, not met deadlines";
    if ts.is_empty() {
        return Outcome {
            per_task: Some(Vec::new()),
            ..Outcome::new(Verdict::Schedulable)
        }
        .with_note("empty task set");
    }
    if m == 0 {
        return Outcome::not_applicable("no CPUs (m = 0)");
    }
    if let Some(i) = ts.iter().position(|t| t.t == 0) {
        return Outcome::not_applicable(format!("task {i} has a zero period"));
    }
    if !implicit_deadlines(ts) {
        return Outcome::not_applicable("the Devi–Anderson bound is for implicit deadlines (D = T)");
    }
    if let Some(i) = ts.iter().position(|t| t.c > t.t) {
        let mut o = Outcome::new(Verdict::Unschedulable).with_note(format!(
            "task {i} has utilisation > 1: its own backlog grows without bound"
        ));
        o.failing_task = Some(i);
        return o;
    }

    let exact_u = Ratio::total_u(ts);
    let u = exact_u.map_or_else(|| total_u(ts), Ratio::to_f64);
    let mf = m as f64;
    let overloaded = match exact_u {
        // m·den overflowing u128 means it exceeds any u128 numerator.
        Some(r) => (m as u128).checked_mul(r.den).is_some_and(|cap| r.num > cap),
        None => u > mf + EPS,
    };
    if overloaded {
        let mut o = Outcome::new(Verdict::Unschedulable)
            .with_note("U > m: the backlog, and so tardiness, grows without bound");
        o.value = Some(u);
        o.bound = Some(mf);
        return o;
    }
    let outcome = |per_task: Vec<Option<Duration>>, note: String| {
        Outcome {
            value: Some(u),
            bound: Some(mf),
            per_task: Some(per_task),
            ..Outcome::new(Verdict::Schedulable)
        }
        .with_note(note)
    };

    if m == 1 {
        return outcome(
            vec![Some(Duration::ZERO); ts.len()],
            format!("{SOFT}; on one CPU EDF is optimal, so U ≤ 1 gives zero tardiness"),
        );
    }

    let lambda = match exact_u {
        // `Ratio` is in lowest terms, so U is integral exactly when the denominator is 1.
        Some(r) if r.den == 1 => r.num.saturating_sub(1),
        Some(r) => r.num / r.den,
        // ⌈U + EPS⌉ − 1 is ⌈U⌉ − 1 or one more, never less.
        None => ((u + EPS).ceil() as u128).saturating_sub(1),
    };
    let lambda = usize::try_from(lambda).unwrap_or(usize::MAX).min(ts.len());

    let mut costs: Vec<u64> = ts.iter().map(|t| t.c).collect();
    costs.sort_unstable_by(|a, b| b.cmp(a));
    let e_min = *costs.last().unwrap_or(&0);
    let e_lambda: u128 = costs[..lambda].iter().map(|&c| u128::from(c)).sum();
    let numer = e_lambda.saturating_sub(u128::from(e_min));

    let mut by_u: Vec<&Timing> = ts.iter().collect();
    by_u.sort_unstable_by(|a, b| cmp_u(b, a));
    let top = &by_u[..lambda.saturating_sub(1)];
    let exact_sum = top.iter().try_fold(Ratio::ZERO, |acc, t| {
        acc.checked_add(Ratio::new(u128::from(t.c), u128::from(t.t))?)
    });
    let x: Option<u128> = match exact_sum.and_then(|s| exact_x(numer, m, s)) {
        Some(x) => Some(x),
        None => {
            let reduced = mf - top.iter().map(|t| t.u()).sum::<f64>();
            // Inflate by far more than the rounding error so the ceiling never lands low.
            let xf = (numer as f64 / reduced * (1.0 + 1e-12)).ceil();
            (reduced > 0.0 && xf.is_finite() && xf < u128::MAX as f64).then_some(xf as u128)
        }
    };
    let Some(x) = x else {
        // Unreachable for U ≤ m (the denominator is ≥ 1), kept so a rounding surprise cannot
        // turn into a panic or a false bound.
        return Outcome::new(Verdict::Unknown(
            "could not evaluate m − U_{Λ−1} without overflow".into(),
        ));
    };
    let per_task = ts
        .iter()
        .map(|t| {
            x.checked_add(u128::from(t.c))
                .and_then(|v| u64::try_from(v).ok())
                .map(Duration)
        })
        .collect();
    outcome(
        per_task,
        format!("{SOFT}; tardiness of τ_k ≤ x + e_k with Λ = {lambda}, x = {x} ns"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bounds(o: &Outcome) -> Vec<u64> {
        o.per_task
            .as_ref()
            .unwrap()
            .iter()
            .map(|d| d.unwrap().0)
            .collect()
    }

    #[test]
    fn fractional_total_utilisation() {
        // m = 2, u = {0.5, 0.5, 0.5, 0.25}: U = 1.75 → Λ = 1; E_1 = 4, e_min = 1, U_0 = 0
        // → x = 3/2 → ⌈x + e_k⌉ = 2 + e_k.
        let ts = [
            Timing::implicit(2, 4),
            Timing::implicit(3, 6),
            Timing::implicit(4, 8),
            Timing::implicit(1, 4),
        ];
        let o = test(&ts, 2);
        assert_eq!(o.verdict, Verdict::Schedulable);
        assert_eq!(bounds(&o), vec![4, 5, 6, 3]);
        assert!(o.note.unwrap().contains("bounded tardiness"));
    }

    #[test]
    fn integral_total_utilisation() {
        // m = 4, u = {0.6, 0.5, 0.8, 0.9, 0.2}: U = 3 exactly → Λ = 2.
        // E_2 = 9 + 6 = 15, e_min = 2, U_1 = 0.9 → x = 13 / 3.1 = 130/31 ≈ 4.19 → 5.
        let ts = [
            Timing::implicit(6, 10),
            Timing::implicit(5, 10),
            Timing::implicit(4, 5),
            Timing::implicit(9, 10),
            Timing::implicit(2, 10),
        ];
        let o = test(&ts, 4);
        assert_eq!(bounds(&o), vec![11, 10, 9, 14, 7]);
        assert!(o.note.unwrap().contains("Λ = 2"));
        // e = 3 instead of 2: U = 3.1 → Λ = 3, E_3 = 20, e_min = 3, U_2 = 1.7
        // → x = 17 / 2.3 ≈ 7.39 → 8.
        let mut ts = ts;
        ts[4] = Timing::implicit(3, 10);
        assert_eq!(bounds(&test(&ts, 4)), vec![14, 13, 12, 17, 11]);
    }

    #[test]
    fn float_fallback_is_not_lower() {
        // Pairwise-coprime large periods overflow the exact sum; the float path must still
        // give a bound no smaller than the exact formula's.
        let periods = [
            1_000_000_007u64,
            998_244_353,
            1_000_000_009,
            999_999_937,
            999_999_929,
        ];
        let ts: Vec<Timing> = periods.iter().map(|&t| Timing::implicit(t / 2, t)).collect();
        assert!(Ratio::total_u(&ts).is_none());
        let o = test(&ts, 3);
        assert_eq!(o.verdict, Verdict::Schedulable);
        // U ≈ 2.5 → Λ = 2; E_2 = the two largest costs, U_1 ≈ 0.5 → x ≈ (E_2 − e_min) / 2.5.
        let mut c: Vec<u64> = ts.iter().map(|t| t.c).collect();
        c.sort_unstable();
        let x = (c[4] + c[3] - c[0]) as f64 / (3.0 - 0.5);
        let b = bounds(&o);
        for (t, bk) in ts.iter().zip(b) {
            assert!(bk as f64 >= x + t.c as f64 - 1.0, "{bk} vs {}", x + t.c as f64);
        }
    }

    #[test]
    fn verdicts() {
        // U = 2.1 > 2.
        let o = test(&[Timing::implicit(7, 10); 3], 2);
        assert_eq!(o.verdict, Verdict::Unschedulable);
        // U = m exactly is still bounded.
        let o = test(&[Timing::implicit(2, 3); 3], 2);
        assert_eq!(o.verdict, Verdict::Schedulable);
        // u > 1.
        let o = test(&[Timing::new(3, 2, 2)], 4);
        assert_eq!(o.verdict, Verdict::Unschedulable);
        assert_eq!(o.failing_task, Some(0));
        assert!(matches!(
            test(&[Timing::new(1, 2, 3)], 2).verdict,
            Verdict::NotApplicable(_)
        ));
        assert!(matches!(
            test(&[Timing::implicit(1, 2)], 0).verdict,
            Verdict::NotApplicable(_)
        ));
        assert_eq!(test(&[], 1).verdict, Verdict::Schedulable);
        // One CPU, U ≤ 1: zero tardiness.
        let o = test(&[Timing::implicit(1, 2), Timing::implicit(2, 4)], 1);
        assert_eq!(bounds(&o), vec![0, 0]);
        // U ≤ 1 on two CPUs: Λ = 0, x = 0, bound = e_k.
        let o = test(&[Timing::implicit(1, 4), Timing::implicit(2, 8)], 2);
        assert_eq!(bounds(&o), vec![1, 2]);
    }
}
