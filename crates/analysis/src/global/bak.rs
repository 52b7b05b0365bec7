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
//!
//! **Candidate search.** Trying the candidates in increasing order with an O(n) sum each is
//! O(n²) per task, O(n³) in all (9 s of `pacer analyze` on 2000 tasks). For a fixed k the
//! terms change in only two ways as λ grows: τ_i switches to the `u_i ≤ λ` branch when λ
//! passes u_i, and an unclamped β_i = a_i + e_i − λ·g_i (a_i the body, e_i = C_i/D_k,
//! g_i = T_i/D_k) leaves the `min(1, ·)` clamp once λ passes λ*_i = (a_i + e_i − 1)/g_i. A
//! sweep over the candidates keeps Σ min(1, a_i) over the first group, the count of clamped
//! terms and Σ (a_i + e_i), Σ g_i over the rest, so each candidate's LHS − RHS costs O(1)
//! amortised. Those sums are rounded differently from the plain sum, so they only *filter*:
//! a candidate whose swept margin exceeds EPS by more than a bound δ on the rounding of both
//! computations (O(n·ε·Σ(a_i + e_i + g_i) + n²ε + mε), see `rounding_bound`) cannot pass,
//! and every other one is decided by the plain sum as before. The verdict, λ, value and bound
//! are therefore exactly those of the full search (`tests/equivalence.rs` checks them against
//! [`crate::reference::bak_test`]).

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

/// Per-task terms of β for a fixed τ_k.
#[derive(Debug, Clone, Copy, Default)]
struct Terms {
    /// min(1, a_i): the whole term once u_i ≤ λ.
    low: f64,
    /// a_i + e_i and g_i: β_i = (a_i + e_i) − λ·g_i while u_i > λ.
    ae: f64,
    g: f64,
    /// λ*_i: β_i ≥ 1 (clamped) while λ ≤ λ*_i.
    star: f64,
}

/// Scratch space reused across tasks k.
#[derive(Default)]
struct Sweep {
    terms: Vec<Terms>,
    low: Vec<bool>,
    clamped: Vec<bool>,
    /// (λ*_i, i) of the terms clamped at λ_k, by λ*.
    unclamp: Vec<(f64, usize)>,
}

/// A bound on |swept − plain| for LHS − RHS, from the error analysis of recursive summation
/// (each of ≤ 3n updates of a running sum is off by ≤ ε·|sum| ≤ ε·`scale`, each term by a few
/// ε relative, each misclassified clamp by ≤ 4ε(2(a_i + e_i) + 1), the plain n-term sum by
/// ≤ n²ε as every term is in [0, 1]), with a safety factor of 4.
fn rounding_bound(n: usize, m: usize, scale: f64) -> f64 {
    let n = n as f64;
    4.0 * f64::EPSILON * ((3.0 * n + 18.0) * scale + n * n + 8.0 * n + 8.0 * (m as f64 + 1.0))
}

/// Walks τ_k's candidates λ (λ_k, then the u_i ≥ λ_k in `utils` order) and calls
/// `visit(λ, Some(i) if λ = u_i, swept LHS − RHS, rounding bound δ)` for each until it returns
/// true.
fn sweep_candidates(
    ts: &[Timing],
    k: usize,
    m: usize,
    utils: &[(f64, usize)],
    sw: &mut Sweep,
    mut visit: impl FnMut(f64, Option<usize>, f64, f64) -> bool,
) {
    let n = ts.len();
    let lambda_k = ts[k].density();
    let dk = ts[k].d as f64;
    sw.terms.clear();
    sw.terms.extend(ts.iter().map(|ti| {
        let body = ti.u() * (1.0 + (ti.t - ti.d) as f64 / dk);
        let ae = body + ti.c as f64 / dk;
        let g = ti.t as f64 / dk;
        Terms {
            low: body.min(1.0),
            ae,
            g,
            star: (ae - 1.0) / g,
        }
    }));
    sw.low.clear();
    sw.low.resize(n, false);
    sw.clamped.clear();
    sw.clamped.resize(n, false);
    sw.unclamp.clear();

    let mut scale = 0.0;
    let (mut low_sum, mut clamped, mut ae_sum, mut g_sum) = (0.0f64, 0usize, 0.0f64, 0.0f64);
    // `utils[..moved]` are in the u_i ≤ λ group.
    let mut moved = 0;
    while moved < n && utils[moved].0 <= lambda_k {
        let i = utils[moved].1;
        sw.low[i] = true;
        low_sum += sw.terms[i].low;
        moved += 1;
    }
    for (i, tm) in sw.terms.iter().enumerate() {
        scale += tm.ae + tm.g;
        if sw.low[i] {
            continue;
        }
        // The same rule decides here and in the sweep below, so each term is classified once
        // by its computed λ*, whatever rounding it carries.
        if tm.star >= lambda_k {
            sw.clamped[i] = true;
            clamped += 1;
            sw.unclamp.push((tm.star, i));
        } else {
            ae_sum += tm.ae;
            g_sum += tm.g;
        }
    }
    sw.unclamp.sort_by(|a, b| a.0.total_cmp(&b.0));
    let delta = rounding_bound(n, m, scale);
    let mut unclamped = 0;

    let first = utils.partition_point(|&(u, _)| u < lambda_k);
    let candidates =
        std::iter::once((lambda_k, None)).chain(utils[first..].iter().map(|&(u, i)| (u, Some(i))));
    for (lambda, from) in candidates {
        while moved < n && utils[moved].0 <= lambda {
            let i = utils[moved].1;
            let tm = sw.terms[i];
            sw.low[i] = true;
            low_sum += tm.low;
            if sw.clamped[i] {
                sw.clamped[i] = false;
                clamped -= 1;
            } else {
                ae_sum -= tm.ae;
                g_sum -= tm.g;
            }
            moved += 1;
        }
        while unclamped < sw.unclamp.len() && sw.unclamp[unclamped].0 < lambda {
            let i = sw.unclamp[unclamped].1;
            if sw.clamped[i] {
                sw.clamped[i] = false;
                clamped -= 1;
                ae_sum += sw.terms[i].ae;
                g_sum += sw.terms[i].g;
            }
            unclamped += 1;
        }
        let swept =
            low_sum + clamped as f64 + (ae_sum - lambda * g_sum) - (m as f64 * (1.0 - lambda) + lambda);
        if visit(lambda, from, swept, delta) {
            return;
        }
    }
}

/// The first candidate λ of τ_k for which the plain sums pass, with its sides: (λ, Some(i) if
/// λ = u_i, LHS, RHS).
fn first_passing(
    ts: &[Timing],
    k: usize,
    m: usize,
    utils: &[(f64, usize)],
    sw: &mut Sweep,
) -> Option<(f64, Option<usize>, f64, f64)> {
    let mut found = None;
    sweep_candidates(ts, k, m, utils, sw, |lambda, from, swept, delta| {
        // Beyond EPS by more than the rounding of both computations: the plain sum fails too.
        if swept > EPS + delta {
            return false;
        }
        let (lhs, rhs) = sides(ts, k, m, lambda);
        if lhs <= rhs + EPS {
            found = Some((lambda, from, lhs, rhs));
            return true;
        }
        false
    });
    found
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

    let mut sweep = Sweep::default();
    let mut tightest: Option<(f64, f64, f64)> = None; // (margin, lhs, rhs)
    let mut raised: Vec<String> = Vec::new();
    for k in 0..ts.len() {
        match first_passing(ts, k, m, &utils, &mut sweep) {
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
                let (lhs, rhs) = sides(ts, k, m, ts[k].density());
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
    use rand::{Rng, SeedableRng};

    #[test]
    fn swept_margin_is_within_the_rounding_bound() {
        // Every candidate of every task, not only the ones the search reaches: the filter is
        // exact only if |swept − plain| ≤ δ everywhere.
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(13);
        let mut checked = 0usize;
        for round in 0..300 {
            let n = rng.random_range(1..=60);
            let m = rng.random_range(1..=8);
            let ts: Vec<Timing> = (0..n)
                .map(|_| {
                    let t = if round % 2 == 0 {
                        rng.random_range(1..=40u64)
                    } else {
                        rng.random_range(1_000..=100_000_000u64)
                    };
                    let d = rng.random_range(1..=t);
                    Timing::new(rng.random_range(1..=d), d, t)
                })
                .collect();
            let mut utils: Vec<(f64, usize)> = ts.iter().map(Timing::u).zip(0..).collect();
            utils.sort_by(|a, b| a.0.total_cmp(&b.0));
            let mut sw = Sweep::default();
            for k in 0..n {
                sweep_candidates(&ts, k, m, &utils, &mut sw, |lambda, _, swept, delta| {
                    let (lhs, rhs) = sides(&ts, k, m, lambda);
                    let plain = lhs - rhs;
                    assert!(
                        (swept - plain).abs() <= delta,
                        "k = {k}, λ = {lambda}: swept {swept} vs plain {plain}, δ = {delta}: {ts:?}"
                    );
                    // Far from the bound: the factor-4 margin is not what makes this pass.
                    assert!((swept - plain).abs() <= delta / 4.0 + 1e-300);
                    checked += 1;
                    false
                });
            }
        }
        assert!(checked > 10_000, "{checked}");
    }

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
