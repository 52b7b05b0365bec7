//! The straightforward implementations that the fast paths replaced, kept verbatim as test
//! oracles (the equivalence tests in `tests/equivalence.rs` compare every fast path against
//! them on random sets) and as benchmark baselines. Not for production use: their cost is what
//! issue 13 measured (partitioned DM on 2000 tasks: 99 s; RTA on 100 000 tasks: 36 s and more).
//!
//! - [`rta_response_time`], [`rta_response_times`], [`rta_schedulable_dm`]: response-time
//!   analysis by plain fixed-point iteration from R = Σ C (Joseph & Pandya 1986; Audsley et al.
//!   1993), O(n) per iteration, every task from scratch;
//! - [`bak_test`]: Baker's test trying every λ candidate with an O(n) sum (Baker, RTSS 2003);
//! - [`partitioned_dm_fits`] / [`partitioned_edf_fits`]: the per-bin predicates `pacer analyze`
//!   used for partitioned packing (load filter, then RTA or QPA on the whole bin).

use crate::global::precheck;
use crate::outcome::{Outcome, Verdict, EPS};
use crate::uni::priority::deadline_monotonic;
use crate::uni::qpa;
use crate::Timing;

/// Response time of `k` given its higher-priority tasks, or `None` once it exceeds `limit`.
pub fn rta_response_time(k: &Timing, hp: impl Iterator<Item = Timing> + Clone, limit: u64) -> Option<u64> {
    let mut r = hp.clone().try_fold(k.c, |acc, j| acc.checked_add(j.c))?;
    loop {
        if r > limit {
            return None;
        }
        let next = hp.clone().try_fold(k.c, |acc, j| {
            r.div_ceil(j.t).checked_mul(j.c).and_then(|w| acc.checked_add(w))
        })?;
        if next == r {
            return Some(r);
        }
        r = next;
    }
}

/// Response times in input order for the priority `order`; `None` above the deadline.
pub fn rta_response_times(ts: &[Timing], order: &[usize]) -> Vec<Option<u64>> {
    let mut out = vec![None; ts.len()];
    for (pos, &k) in order.iter().enumerate() {
        let hp = order[..pos].iter().map(|&j| ts[j]);
        out[k] = rta_response_time(&ts[k], hp, ts[k].d);
    }
    out
}

/// Yes/no under deadline-monotonic priorities, stopping at the first miss.
pub fn rta_schedulable_dm(ts: &[Timing]) -> bool {
    let order = deadline_monotonic(ts);
    order.iter().enumerate().all(|(pos, &k)| {
        let hp = order[..pos].iter().map(|&j| ts[j]);
        rta_response_time(&ts[k], hp, ts[k].d).is_some()
    })
}

/// The partitioned-DM bin predicate of `pacer analyze` before the incremental bins: load
/// filter, then RTA of the whole bin.
pub fn partitioned_dm_fits(bin: &[Timing], cap: usize) -> bool {
    crate::partition::load_fits(bin, cap) && rta_schedulable_dm(bin)
}

/// The partitioned-EDF bin predicate of `pacer analyze` before the incremental bins: load
/// filter, then QPA of the whole bin.
pub fn partitioned_edf_fits(bin: &[Timing], cap: usize) -> bool {
    crate::partition::load_fits(bin, cap) && qpa::schedulable(bin)
}

fn bak_beta(ti: &Timing, dk: f64, lambda: f64) -> f64 {
    let ui = ti.u();
    let body = ui * (1.0 + (ti.t - ti.d) as f64 / dk);
    if ui > lambda {
        body + (ti.c as f64 - lambda * ti.t as f64) / dk
    } else {
        body
    }
}

fn bak_sides(ts: &[Timing], k: usize, m: usize, lambda: f64) -> (f64, f64) {
    let dk = ts[k].d as f64;
    let lhs = ts.iter().map(|ti| bak_beta(ti, dk, lambda).min(1.0)).sum();
    let rhs = m as f64 * (1.0 - lambda) + lambda;
    (lhs, rhs)
}

/// Baker's test for global EDF, every candidate λ evaluated in full.
pub fn bak_test(ts: &[Timing], m: usize) -> Outcome {
    if let Some(o) = precheck(ts, m) {
        return o;
    }
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
            let (lhs, rhs) = bak_sides(ts, k, m, lambda);
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
                let (lhs, rhs) = bak_sides(ts, k, m, lambda_k);
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
