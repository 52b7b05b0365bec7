//! BAK: Baker's load-based test for global EDF on m identical CPUs.
//!
//! T. P. Baker, "Multiprocessor EDF and deadline monotonic schedulability analysis", RTSS 2003
//! (Theorem 12; journal version "An analysis of EDF schedulability on a multiprocessor", IEEE
//! TPDS 16(8), 2005), as restated by M. Bertogna, M. Cirinei, G. Lipari, "Schedulability analysis
//! of global scheduling algorithms on multiprocessor platforms", IEEE TPDS 20(4), 2009.
//!
//! A constrained-deadline task set is global-EDF schedulable on m CPUs if for every task τ_k
//! there is a λ ∈ {λ_k} ∪ {u_i | u_i ≥ λ_k} (λ_k = C_k / D_k) with
//!
//! ```text
//! Σ_{i=1..n} min(1, β_i(λ)) ≤ m(1 − λ) + λ
//! β_i(λ) = u_i·(1 + (T_i − D_i)/D_k)                        if u_i ≤ λ
//! β_i(λ) = u_i·(1 + (T_i − D_i)/D_k) + (C_i − λ·T_i)/D_k    if u_i > λ
//! ```
//!
//! Taking λ = λ_k alone is Baker's simplified corollary (the form SchedCAT and the TPDS 2009
//! survey use); the larger candidates can only add accepted sets. They suffice because
//! `LHS − RHS` is piecewise linear in λ with convex kinks only at the u_i (the `min(1, ·)` kinks
//! are concave), so its minimum over [λ_k, 1] lies at λ_k or at some u_i ≥ λ_k.
//!
//! The β terms mix ratios with unrelated denominators, so this test uses `f64` with the shared
//! tolerance [`crate::outcome::EPS`], like the other utilisation-style bounds.

use crate::global::precheck;
use crate::outcome::{Outcome, Verdict, EPS};
use crate::Timing;

fn beta(ti: &Timing, dk: f64, lambda: f64) -> f64 {
    let ui = ti.u();
    let body = ui * (1.0 + (ti.t - ti.d) as f64 / dk);
    if ui > lambda {
        body + (ti.c as f64 - lambda * ti.t as f64) / dk
    } else {
        body
    }
}

/// Σ_i min(1, β_i(λ)) and m(1 − λ) + λ for task `k`.
fn sides(ts: &[Timing], k: usize, m: usize, lambda: f64) -> (f64, f64) {
    let dk = ts[k].d as f64;
    let lhs = ts.iter().map(|ti| beta(ti, dk, lambda).min(1.0)).sum();
    let rhs = m as f64 * (1.0 - lambda) + lambda;
    (lhs, rhs)
}

/// Baker's test for global EDF. `value`/`bound` are the two sides for the task with the least
/// margin (at the λ that worked for it, or at λ_k for the first task that failed); the note
/// records which tasks needed a λ above their own density.
pub fn test(ts: &[Timing], m: usize) -> Outcome {
    if let Some(o) = precheck(ts, m) {
        return o;
    }
    // The candidate λ's other than λ_k are the utilisations; sorting them once lets each task
    // try them in increasing order (the first that works is reported).
    let mut utils: Vec<(f64, usize)> = ts.iter().map(Timing::u).zip(0..).collect();
    utils.sort_by(|a, b| a.0.total_cmp(&b.0));

    let mut tightest: Option<(f64, f64, f64)> = None; // (margin, lhs, rhs)
    let mut raised: Vec<String> = Vec::new();
    for (k, tk) in ts.iter().enumerate() {
        let lambda_k = tk.density();
        let candidates = std::iter::once((lambda_k, None)).chain(
            utils
                .iter()
                .filter(|&&(u, _)| u >= lambda_k)
                .map(|&(u, i)| (u, Some(i))),
        );
        let mut found = None;
        for (lambda, from) in candidates {
            let (lhs, rhs) = sides(ts, k, m, lambda);
            if lhs <= rhs + EPS {
                found = Some((lambda, from, lhs, rhs));
                break;
            }
        }
        match found {
            Some((lambda, from, lhs, rhs)) => {
                if let Some(i) = from {
                    raised.push(format!("τ{k}: λ = u_{i} = {lambda:.4}"));
                }
                let margin = rhs - lhs;
                match tightest {
                    Some((best, _, _)) if best <= margin => {}
                    _ => tightest = Some((margin, lhs, rhs)),
                }
            }
            None => {
                let (lhs, rhs) = sides(ts, k, m, lambda_k);
                let mut o = Outcome::new(Verdict::NotProven).with_note(format!(
                    "τ{k}: no λ in {{λ_k}} ∪ {{u_i ≥ λ_k}} satisfies Σ min(1, β_i) ≤ m(1 − λ) + λ"
                ));
                o.value = Some(lhs);
                o.bound = Some(rhs);
                o.failing_task = Some(k);
                return o;
            }
        }
    }
    let (_, lhs, rhs) = tightest.unwrap_or((0.0, 0.0, 0.0));
    let note = if raised.is_empty() {
        "λ = λ_k (the task's own density) worked for every task".to_string()
    } else {
        format!(
            "λ = λ_k worked for the other tasks; raised λ for {}",
            raised.join(", ")
        )
    };
    Outcome {
        value: Some(lhs),
        bound: Some(rhs),
        ..Outcome::new(Verdict::Schedulable)
    }
    .with_note(note)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hand_computed_sides() {
        // m = 2: τ0 = (1,4,4), τ1 = (2,4,4), τ2 = (2,8,8).
        // k = 0 (λ = 0.25, D_k = 4): β0 = 0.25, β1 = 0.5 + (2 − 1)/4 = 0.75, β2 = 0.25 → 1.25;
        //   RHS = 2·0.75 + 0.25 = 1.75.
        // k = 2 (λ = 0.25, D_k = 8): β1 = 0.5 + 1/8 = 0.625 → Σ = 1.125 ≤ 1.75.
        let ts = [
            Timing::implicit(1, 4),
            Timing::implicit(2, 4),
            Timing::implicit(2, 8),
        ];
        let (l, r) = sides(&ts, 0, 2, 0.25);
        assert!((l - 1.25).abs() < 1e-12 && (r - 1.75).abs() < 1e-12);
        let (l, _) = sides(&ts, 2, 2, 0.25);
        assert!((l - 1.125).abs() < 1e-12);
        let o = test(&ts, 2);
        assert_eq!(o.verdict, Verdict::Schedulable);
        // Least margin: k = 1 (λ = 0.5): Σ = 0.25 + 0.5 + 0.25 = 1.0 vs 1.5, margin 0.5,
        // equal to k = 0's 0.5; k = 2 has 0.625.
        assert!((o.bound.unwrap() - o.value.unwrap() - 0.5).abs() < 1e-12);
        assert!(o.note.unwrap().contains("every task"));
    }

    #[test]
    fn constrained_deadline_term() {
        // (T_i − D_i)/D_k inflates β for tasks with slack between deadline and period:
        // τ0 = (1,2,4), D_k = 2, λ = 0.5 ≥ u0 = 0.25 → β0 = 0.25·(1 + 2/2) = 0.5.
        let ts = [Timing::new(1, 2, 4)];
        let (l, r) = sides(&ts, 0, 1, 0.5);
        assert!((l - 0.5).abs() < 1e-12 && (r - 1.0).abs() < 1e-12);
    }

    #[test]
    fn overload_is_not_proven() {
        // U = 3 · 0.7 = 2.1 > 2.
        let ts = [Timing::implicit(7, 10); 3];
        let o = test(&ts, 2);
        assert_eq!(o.verdict, Verdict::NotProven);
        assert_eq!(o.failing_task, Some(0));
        // k = 0, λ = 0.7: every β = 0.7 (u ≤ λ) → Σ = 2.1 > 2·0.3 + 0.7 = 1.3.
        assert!((o.value.unwrap() - 2.1).abs() < 1e-12);
        assert!((o.bound.unwrap() - 1.3).abs() < 1e-12);
    }

    #[test]
    fn edge_cases() {
        assert_eq!(test(&[], 3).verdict, Verdict::Schedulable);
        assert!(matches!(
            test(&[Timing::implicit(1, 2)], 0).verdict,
            Verdict::NotApplicable(_)
        ));
        assert_eq!(test(&[Timing::new(3, 2, 4)], 8).verdict, Verdict::NotProven);
        // A lone task with C = D: Σ = 1 ≤ m(1 − 1) + 1 = 1.
        assert_eq!(test(&[Timing::new(5, 5, 9)], 1).verdict, Verdict::Schedulable);
    }
}
