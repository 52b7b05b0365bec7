//! The supervisor: turns the controllers' budget requests into grants that keep the global
//! schedulability condition, eq. 1 of lfspp-legacy-multimedia.txt (§3.2, §4.2, Fig. 3):
//! Σ Q_i/T_i ≤ bound, with bound = 1 on a uniprocessor and, under SCHED_DEADLINE, the root
//! domain's admission cap in CPUs (`Kernel::dl_bandwidth_limit`, 0.95·CPUs by default).
//!
//! "If the requests do not saturate the total available bandwidth, they can be entirely granted
//! Q_i = Q_i^req. Otherwise they have to be curbed to fit in the bound" (§4.2). How they are curbed
//! is the [`Compression`] policy. Every request carries a minimum that compression never goes
//! below (so no controlled task is starved by the others' growth); if even the minima do not fit,
//! the result says so ([`AllocationStatus::Infeasible`]) instead of panicking.
//!
//! [`apply_grants`] pushes grants to a [`Kernel`] in an admission-safe order (shrinking
//! reservations first) and treats `KernelError::Admission` as "system full": keep the previous
//! reservation, or for a thread not yet reserved retry once at its minimum; never a panic.

use pacer_model::{Duration, Policy, Reservation, ReservationFlags};
use serde::Serialize;

use crate::kernel::{Kernel, KernelError, Tid};

/// One budget request: runtime `q` every period `p` (ns).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Request {
    pub id: Tid,
    /// Requested runtime, ns.
    pub q: u64,
    /// Reservation period (= deadline), ns.
    pub p: u64,
    /// Importance under [`Compression::Weighted`] (> 0; larger keeps more).
    pub weight: f64,
    /// Importance under [`Compression::PriorityOrdered`] (larger is served first).
    pub priority: i32,
    /// Runtime never compressed away, ns. A request below its minimum is raised to it.
    pub min_q: u64,
}

impl Request {
    /// A request with weight 1, priority 0 and the kernel's minimum runtime (1024 ns) as minimum.
    pub fn new(id: Tid, q: u64, p: u64) -> Self {
        Request {
            id,
            q,
            p,
            weight: 1.0,
            priority: 0,
            min_q: pacer_model::reservation::DL_MIN_RUNTIME_NS,
        }
    }
}

/// A granted runtime `q` every `p` (ns); `min_q` is the request's minimum, kept so that
/// [`apply_grants`] can retry at it when admission refuses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Grant {
    pub id: Tid,
    pub q: u64,
    pub p: u64,
    pub min_q: u64,
}

impl Grant {
    pub fn bandwidth(&self) -> f64 {
        self.q as f64 / self.p as f64
    }
}

/// How requests are curbed when they do not fit. In every policy a request first receives its
/// minimum; only the part above the minimum ("excess", d_i = b_i − m_i in bandwidth) is compressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Compression {
    /// Every excess is scaled by the same factor c = E / Σ d_i, where E = bound − Σ m_i is the
    /// bandwidth left after the minima. With zero minima this is plain proportional scaling
    /// b_i · bound / Σ b.
    Proportional,
    /// Weighted compression "that penalises the tasks with a smaller weight" (lfspp §4.2), using
    /// [`Request::weight`]: each request keeps the fraction max(0, 1 − λ/w_i) of its excess, with
    /// the single λ ≥ 0 that makes the grants fill the bound exactly (an elastic model: the cut
    /// of request i is proportional to d_i / w_i, and a request whose cut would exceed its excess
    /// stops at its minimum). Equal weights give [`Compression::Proportional`].
    Weighted,
    /// Requests are served in decreasing [`Request::priority`]: after all minima, the highest
    /// priority level gets its full excess, then the next, …; the level where bandwidth runs out
    /// shares what is left proportionally to excess; lower levels keep their minima.
    PriorityOrdered,
}

/// Whether the requests fitted.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum AllocationStatus {
    /// Every request granted in full.
    Full { total: f64 },
    /// Requests were curbed to fit; `requested` and `granted` are Σ q/p.
    Compressed { requested: f64, granted: f64 },
    /// Even the minima exceed the bound: the grants are the minima (Σ = `minimum` > `bound`), and
    /// applying them will meet admission refusals that [`apply_grants`] handles.
    Infeasible { minimum: f64, bound: f64 },
}

/// The supervisor's answer: one grant per request, in request order.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Allocation {
    pub grants: Vec<Grant>,
    pub status: AllocationStatus,
}

impl Allocation {
    pub fn grant(&self, id: Tid) -> Option<&Grant> {
        self.grants.iter().find(|g| g.id == id)
    }
}

/// Malformed requests or parameters.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SupervisorError {
    #[error("request {0}: period is 0")]
    ZeroPeriod(Tid),
    #[error("request {id}: runtime {q} exceeds period {p}")]
    RuntimeAbovePeriod { id: Tid, q: u64, p: u64 },
    #[error("request {id}: minimum runtime {min_q} exceeds period {p}")]
    MinimumAbovePeriod { id: Tid, min_q: u64, p: u64 },
    #[error("request {id}: weight {weight} must be finite and > 0")]
    BadWeight { id: Tid, weight: f64 },
    #[error("request id {0} appears twice")]
    DuplicateId(Tid),
    #[error("bandwidth bound {0} must be finite and ≥ 0")]
    BadBound(f64),
}

/// Fixed-point shift used for the exact fit check (2^-64 CPU resolution per reservation, far
/// below the kernel's 2^-20).
const FIT_SHIFT: u32 = 64;

/// The kernel's fixed-point unit of bandwidth, 2^-BW_SHIFT (kernel/sched/sched.h).
pub const KERNEL_BW_UNIT: f64 = 1.0 / (1u64 << pacer_model::reservation::BW_SHIFT) as f64;

/// Default safety margin for a bound of `bound` CPUs: 2·(⌈bound⌉ + 1) kernel units. The kernel
/// floors its per-CPU cap (`to_ratio(1 s, 0.95 s)` = 996147/2^20, not 0.95) and multiplies it by
/// the number of CPUs, so its total can sit up to one unit per CPU below bound·2^20; the margin
/// covers that for any machine where the bound is at least half the CPUs.
pub fn default_margin(bound: f64) -> f64 {
    2.0 * (bound.max(0.0).ceil() + 1.0) * KERNEL_BW_UNIT
}

/// The exact test "Σ q_i/p_i ≤ bound": each term is floored at 2^-64 resolution, the bound too, so
/// the only approximation is below 2^-64 CPU per reservation (no float accumulation error).
pub fn fits(items: impl IntoIterator<Item = (u64, u64)>, bound: f64) -> bool {
    excess_fixed(items, bound) == 0
}

/// By how much Σ q/p exceeds `bound`, in 2^-64 CPU units (0 when it fits).
fn excess_fixed(items: impl IntoIterator<Item = (u64, u64)>, bound: f64) -> u128 {
    let total: u128 = items
        .into_iter()
        .map(|(q, p)| {
            if p == 0 {
                u128::MAX / 4
            } else {
                ((q as u128) << FIT_SHIFT) / p as u128
            }
        })
        .fold(0u128, |a, b| a.saturating_add(b));
    let limit = if bound <= 0.0 {
        0
    } else if bound >= (1u64 << 60) as f64 {
        u128::MAX
    } else {
        // bound · 2^64, floored: exact for the f64's own bits (scaling by a power of two).
        (bound * 2f64.powi(FIT_SHIFT as i32)).floor() as u128
    };
    total.saturating_sub(limit)
}

/// The supervisor of lfspp §4.2.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Supervisor {
    /// Σ Q/P allowed, in CPUs (per root domain / cluster).
    pub bound: f64,
    pub policy: Compression,
    /// Subtracted from `bound` before allocating (kernel fixed-point rounding), CPUs.
    pub margin: f64,
}

impl Supervisor {
    /// A supervisor with the [`default_margin`].
    pub fn new(bound: f64, policy: Compression) -> Self {
        Supervisor {
            bound,
            policy,
            margin: default_margin(bound),
        }
    }

    /// The same supervisor with another margin (0 for exact hand-computed allocations).
    pub fn with_margin(mut self, margin: f64) -> Self {
        self.margin = margin;
        self
    }

    /// The bound the grants are fitted into: `bound − margin`, never negative.
    pub fn effective_bound(&self) -> f64 {
        (self.bound - self.margin).max(0.0)
    }

    /// Grants for `requests`, keeping Σ q/p ≤ bound − margin and every grant ≥ its minimum.
    /// Deterministic: the same requests always give the same grants.
    pub fn allocate(&self, requests: &[Request]) -> Result<Allocation, SupervisorError> {
        if !(self.bound.is_finite() && self.bound >= 0.0 && self.margin.is_finite()) {
            return Err(SupervisorError::BadBound(self.bound));
        }
        for (i, r) in requests.iter().enumerate() {
            if r.p == 0 {
                return Err(SupervisorError::ZeroPeriod(r.id));
            }
            if r.q > r.p {
                return Err(SupervisorError::RuntimeAbovePeriod {
                    id: r.id,
                    q: r.q,
                    p: r.p,
                });
            }
            if r.min_q > r.p {
                return Err(SupervisorError::MinimumAbovePeriod {
                    id: r.id,
                    min_q: r.min_q,
                    p: r.p,
                });
            }
            if !(r.weight.is_finite() && r.weight > 0.0) {
                return Err(SupervisorError::BadWeight {
                    id: r.id,
                    weight: r.weight,
                });
            }
            if requests[..i].iter().any(|o| o.id == r.id) {
                return Err(SupervisorError::DuplicateId(r.id));
            }
        }
        let bound = self.effective_bound();
        // A request below its own minimum is raised to it: the minimum is a guarantee.
        let want: Vec<u64> = requests.iter().map(|r| r.q.max(r.min_q)).collect();
        let grant = |qs: &[u64]| -> Vec<Grant> {
            requests
                .iter()
                .zip(qs)
                .map(|(r, &q)| Grant {
                    id: r.id,
                    q,
                    p: r.p,
                    min_q: r.min_q,
                })
                .collect()
        };
        let sum = |qs: &[u64]| -> f64 { requests.iter().zip(qs).map(|(r, &q)| q as f64 / r.p as f64).sum() };

        if fits(requests.iter().zip(&want).map(|(r, &q)| (q, r.p)), bound) {
            return Ok(Allocation {
                grants: grant(&want),
                status: AllocationStatus::Full { total: sum(&want) },
            });
        }
        let minima: Vec<u64> = requests.iter().map(|r| r.min_q).collect();
        if !fits(requests.iter().map(|r| (r.min_q, r.p)), bound) {
            return Ok(Allocation {
                grants: grant(&minima),
                status: AllocationStatus::Infeasible {
                    minimum: sum(&minima),
                    bound,
                },
            });
        }

        // Bandwidth terms: minimum m_i, excess d_i, room above the minima E.
        let m: Vec<f64> = requests.iter().map(|r| r.min_q as f64 / r.p as f64).collect();
        let d: Vec<f64> = requests
            .iter()
            .zip(&want)
            .zip(&m)
            .map(|((r, &q), &mi)| q as f64 / r.p as f64 - mi)
            .collect();
        let room = (bound - m.iter().sum::<f64>()).max(0.0);
        let keep = match self.policy {
            Compression::Proportional => proportional(&d, room),
            Compression::Weighted => {
                weighted(&d, &requests.iter().map(|r| r.weight).collect::<Vec<_>>(), room)
            }
            Compression::PriorityOrdered => {
                priority_ordered(&d, &requests.iter().map(|r| r.priority).collect::<Vec<_>>(), room)
            }
        };
        // Back to integer runtimes: floor (never above the float grant), within [min, request].
        // The tiny +1e-6 ns keeps an exactly representable grant (0.45 · 1e6) from flooring to
        // 449999 through float error; the exact check below removes any excess this creates.
        let mut qs: Vec<u64> = requests
            .iter()
            .zip(&want)
            .zip(&m)
            .zip(&keep)
            .map(|(((r, &w), &mi), &k)| {
                let q = ((mi + k) * r.p as f64 + 1e-6).floor();
                (q.max(0.0) as u64).clamp(r.min_q, w)
            })
            .collect();
        self.trim(requests, &mut qs, bound);
        let requested = sum(&want);
        let granted = sum(&qs);
        Ok(Allocation {
            grants: grant(&qs),
            status: AllocationStatus::Compressed { requested, granted },
        })
    }

    /// Removes the float error left after rounding, so that the exact check passes: repeatedly
    /// takes the exceeding amount off the grant with the most bandwidth above its minimum.
    fn trim(&self, requests: &[Request], qs: &mut [u64], bound: f64) {
        loop {
            let over = excess_fixed(requests.iter().zip(qs.iter()).map(|(r, &q)| (q, r.p)), bound);
            if over == 0 {
                return;
            }
            let victim = (0..qs.len())
                .filter(|&i| qs[i] > requests[i].min_q)
                .max_by(|&a, &b| {
                    let sa = (qs[a] - requests[a].min_q) as f64 / requests[a].p as f64;
                    let sb = (qs[b] - requests[b].min_q) as f64 / requests[b].p as f64;
                    sa.total_cmp(&sb).then(b.cmp(&a))
                });
            let Some(i) = victim else { return };
            // ns needed to remove `over` (2^-64 CPU units) from a period p: ⌈over·p / 2^64⌉.
            let p = requests[i].p as u128;
            let need = ((over.saturating_mul(p) + ((1u128 << FIT_SHIFT) - 1)) >> FIT_SHIFT).max(1);
            let cut = (need.min(u64::MAX as u128) as u64).min(qs[i] - requests[i].min_q);
            qs[i] -= cut;
        }
    }
}

/// Kept excess per request under [`Compression::Proportional`].
fn proportional(d: &[f64], room: f64) -> Vec<f64> {
    let total: f64 = d.iter().sum();
    let c = if total > 0.0 { (room / total).min(1.0) } else { 0.0 };
    d.iter().map(|&di| di * c).collect()
}

/// Kept excess per request under [`Compression::Weighted`]: d_i·max(0, 1 − λ/w_i) with λ such
/// that the kept excesses sum to `room`. Solved exactly by water-filling: requests saturate (keep
/// nothing) in increasing weight order; with the set A of unsaturated requests,
/// Σ_A d_i − λ·Σ_A d_i/w_i = room gives λ, valid when λ < min_A w_i.
fn weighted(d: &[f64], w: &[f64], room: f64) -> Vec<f64> {
    let mut order: Vec<usize> = (0..d.len()).filter(|&i| d[i] > 0.0).collect();
    order.sort_by(|&a, &b| w[a].total_cmp(&w[b]).then(a.cmp(&b)));
    let mut lambda = f64::INFINITY;
    for start in 0..order.len() {
        let active = &order[start..];
        let sd: f64 = active.iter().map(|&i| d[i]).sum();
        let se: f64 = active.iter().map(|&i| d[i] / w[i]).sum();
        let l = ((sd - room) / se).max(0.0);
        if l < w[active[0]] {
            lambda = l;
            break;
        }
    }
    d.iter()
        .zip(w)
        .map(|(&di, &wi)| {
            if di > 0.0 {
                di * (1.0 - lambda / wi).max(0.0)
            } else {
                0.0
            }
        })
        .collect()
}

/// Kept excess per request under [`Compression::PriorityOrdered`].
fn priority_ordered(d: &[f64], prio: &[i32], room: f64) -> Vec<f64> {
    let mut levels: Vec<i32> = prio.to_vec();
    levels.sort_unstable_by(|a, b| b.cmp(a));
    levels.dedup();
    let mut keep = vec![0.0; d.len()];
    let mut left = room;
    for level in levels {
        let members: Vec<usize> = (0..d.len()).filter(|&i| prio[i] == level).collect();
        let need: f64 = members.iter().map(|&i| d[i]).sum();
        let c = if need <= left {
            1.0
        } else if need > 0.0 {
            left / need
        } else {
            0.0
        };
        for &i in &members {
            keep[i] = d[i] * c;
        }
        left = (left - need).max(0.0);
    }
    keep
}

/// What happened to one grant in [`apply_grants`].
#[derive(Debug, Clone, PartialEq)]
pub enum ApplyOutcome {
    /// The thread already had exactly this reservation; no system call.
    Unchanged,
    /// The reservation is in place.
    Applied { q: u64 },
    /// Admission refused the grant; the thread had no reservation, and its minimum was admitted.
    ReducedToMinimum { q: u64 },
    /// Admission refused the grant ("system full"); the previous reservation stays.
    KeptPrevious { q: u64, p: u64 },
    /// Admission refused the grant and the minimum; the thread keeps its previous (non-deadline)
    /// policy.
    Refused { reason: String },
    /// Another kernel error (thread gone, invalid parameters, …).
    Failed { error: KernelError },
}

impl ApplyOutcome {
    /// Whether the granted reservation (or its minimum) is now in place.
    pub fn in_place(&self) -> bool {
        matches!(self, ApplyOutcome::Unchanged | ApplyOutcome::Applied { .. })
    }
}

/// The result of [`apply_grants`], in grant order.
#[derive(Debug, Clone, PartialEq)]
pub struct ApplyReport {
    pub results: Vec<(Tid, ApplyOutcome)>,
    /// At least one admission refusal happened.
    pub system_full: bool,
}

impl ApplyReport {
    pub fn outcome(&self, id: Tid) -> Option<&ApplyOutcome> {
        self.results.iter().find(|(t, _)| *t == id).map(|(_, o)| o)
    }
}

/// The reservation a grant stands for: runtime q, deadline = period = p (implicit deadlines, as
/// both papers set them), with `flags`.
pub fn reservation_for(g: &Grant, flags: ReservationFlags) -> Reservation {
    Reservation {
        runtime: Duration(g.q),
        deadline: Duration(g.p),
        period: Duration(g.p),
        flags,
    }
}

/// Applies grants through `Kernel::set_policy` as SCHED_DEADLINE(q, p, p) with `flags`.
///
/// Order: grants that lower a thread's bandwidth go first (ascending change of bandwidth, ties by
/// id), so the total in the kernel never transiently exceeds what the supervisor allowed. On
/// `KernelError::Admission` ("system full") a thread that already has a reservation keeps it; a
/// thread that has none is retried once at its minimum. Every outcome is recorded; nothing panics.
pub fn apply_grants(k: &mut dyn Kernel, grants: &[Grant], flags: ReservationFlags) -> ApplyReport {
    apply_grants_with(k, grants, flags, true)
}

/// [`apply_grants`], choosing whether a refused thread without a reservation is retried at its
/// minimum (`retry_at_minimum`). A cooperating application's minimum is a real guarantee; a
/// legacy thread's minimum is the kernel's 1024 ns, and a reservation that small would throttle
/// a thread that needs a fifth of a CPU far worse than leaving it under its own policy.
pub fn apply_grants_with(
    k: &mut dyn Kernel,
    grants: &[Grant],
    flags: ReservationFlags,
    retry_at_minimum: bool,
) -> ApplyReport {
    apply_grants_each(k, grants, |_| (flags, retry_at_minimum))
}

/// [`apply_grants_with`] with the flags and the retry choice given per grant by `terms`: a pool
/// shared by several controllers applies all their grants in one admission-safe order, each
/// with its own controller's terms.
pub fn apply_grants_each(
    k: &mut dyn Kernel,
    grants: &[Grant],
    terms: impl Fn(&Grant) -> (ReservationFlags, bool),
) -> ApplyReport {
    let prev: Vec<Option<Reservation>> = grants
        .iter()
        .map(|g| match k.policy(g.id) {
            Ok(Policy::Deadline(r)) => Some(r),
            _ => None,
        })
        .collect();
    let delta = |i: usize| -> f64 { grants[i].bandwidth() - prev[i].map(|r| r.bandwidth()).unwrap_or(0.0) };
    let mut order: Vec<usize> = (0..grants.len()).collect();
    order.sort_by(|&a, &b| {
        delta(a)
            .total_cmp(&delta(b))
            .then(grants[a].id.cmp(&grants[b].id))
    });

    let mut results: Vec<Option<ApplyOutcome>> = vec![None; grants.len()];
    let mut system_full = false;
    for i in order {
        let g = &grants[i];
        let (flags, retry_at_minimum) = terms(g);
        let want = reservation_for(g, flags);
        if prev[i] == Some(want) {
            results[i] = Some(ApplyOutcome::Unchanged);
            continue;
        }
        if let Err(e) = want.validate() {
            results[i] = Some(ApplyOutcome::Failed {
                error: KernelError::Invalid(e.to_string()),
            });
            continue;
        }
        let outcome = match k.set_policy(g.id, Policy::Deadline(want)) {
            Ok(()) => ApplyOutcome::Applied { q: g.q },
            Err(KernelError::Admission(why)) => {
                system_full = true;
                match prev[i] {
                    Some(r) => ApplyOutcome::KeptPrevious {
                        q: r.runtime.0,
                        p: r.effective_period().0,
                    },
                    None if retry_at_minimum && g.min_q < g.q => {
                        let min = reservation_for(&Grant { q: g.min_q, ..*g }, flags);
                        match k.set_policy(g.id, Policy::Deadline(min)) {
                            Ok(()) => ApplyOutcome::ReducedToMinimum { q: g.min_q },
                            Err(e) => ApplyOutcome::Refused {
                                reason: format!("{why}; at minimum: {e}"),
                            },
                        }
                    }
                    None => ApplyOutcome::Refused { reason: why },
                }
            }
            Err(error) => ApplyOutcome::Failed { error },
        };
        results[i] = Some(outcome);
    }
    ApplyReport {
        results: grants
            .iter()
            .zip(results)
            .map(|(g, o)| (g.id, o.unwrap_or(ApplyOutcome::Unchanged)))
            .collect(),
        system_full,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn req(id: Tid, q: u64, p: u64, min_q: u64) -> Request {
        Request {
            id,
            q,
            p,
            weight: 1.0,
            priority: 0,
            min_q,
        }
    }

    fn qs(a: &Allocation) -> Vec<u64> {
        a.grants.iter().map(|g| g.q).collect()
    }

    #[test]
    fn requests_that_fit_are_granted_in_full() {
        let s = Supervisor::new(0.95, Compression::Proportional);
        let a = s
            .allocate(&[req(1, 3 * MS, 10 * MS, 0), req(2, 10 * MS, 20 * MS, 0)])
            .unwrap();
        assert_eq!(qs(&a), vec![3 * MS, 10 * MS]);
        assert!(matches!(a.status, AllocationStatus::Full { .. }));
    }

    #[test]
    fn proportional_compression_by_hand() {
        // Requests 0.6 + 0.9 = 1.5 CPUs into a bound of 1.0, no minima: factor 2/3.
        // Grants 0.4 → 4 ms of 10 ms and 0.6 → 12 ms of 20 ms.
        let s = Supervisor::new(1.0, Compression::Proportional).with_margin(0.0);
        let a = s
            .allocate(&[req(1, 6 * MS, 10 * MS, 0), req(2, 18 * MS, 20 * MS, 0)])
            .unwrap();
        assert_eq!(qs(&a), vec![4 * MS, 12 * MS]);
        assert!(matches!(a.status, AllocationStatus::Compressed { .. }));
        // With minima 0.2 and 0.1: room = 1.0 − 0.3 = 0.7 for excesses 0.4 and 0.8 (c = 7/12):
        // 0.2 + 0.4·7/12 = 0.43333… → 4_333_333 ns; 0.1 + 0.8·7/12 = 0.56666… → 11_333_333 ns.
        let a = s
            .allocate(&[req(1, 6 * MS, 10 * MS, 2 * MS), req(2, 18 * MS, 20 * MS, 2 * MS)])
            .unwrap();
        assert_eq!(qs(&a), vec![4_333_333, 11_333_333]);
        assert!(fits(a.grants.iter().map(|g| (g.q, g.p)), 1.0));
    }

    #[test]
    fn weighted_compression_by_hand() {
        // Two requests of 0.6 into 1.0, weights 1 and 3: keep fractions 1 − λ/w with
        // 0.6(1 − λ) + 0.6(1 − λ/3) = 1.0 → λ = 0.25 → grants 0.45 and 0.55.
        let s = Supervisor::new(1.0, Compression::Weighted).with_margin(0.0);
        let r1 = req(1, 6 * MS, 10 * MS, 0);
        let mut r2 = req(2, 6 * MS, 10 * MS, 0);
        r2.weight = 3.0;
        let a = s.allocate(&[r1.clone(), r2.clone()]).unwrap();
        assert_eq!(qs(&a), vec![4_500_000, 5_500_000]);
        // Equal weights reduce to proportional.
        r2.weight = 1.0;
        assert_eq!(
            qs(&s.allocate(&[r1.clone(), r2.clone()]).unwrap()),
            vec![5 * MS, 5 * MS]
        );
        // Saturation: weights 1 and 10, requests 0.6 and 0.6 into 0.7. Unsaturated λ would be
        // (1.2 − 0.7)/(0.6 + 0.06) = 0.7576 < 1, valid: grants 0.6·0.2424 = 0.14545… and
        // 0.6·(1 − 0.07576) = 0.55454…
        r2.weight = 10.0;
        let s7 = Supervisor::new(0.7, Compression::Weighted).with_margin(0.0);
        let a = s7.allocate(&[r1.clone(), r2.clone()]).unwrap();
        assert_eq!(qs(&a), vec![1_454_545, 5_545_454]);
        // Into 0.5: λ would be 0.7/0.66 > 1 = w_1, so request 1 saturates at its minimum (0) and
        // request 2 alone fills the bound: 0.5.
        let s5 = Supervisor::new(0.5, Compression::Weighted).with_margin(0.0);
        let a = s5.allocate(&[r1, r2]).unwrap();
        assert_eq!(qs(&a), vec![0, 5 * MS]);
    }

    #[test]
    fn priority_ordered_compression_by_hand() {
        // Minima 0.1 each (1 ms of 10 ms): room = 1.0 − 0.4 = 0.6 for excesses 0.5 (prio 2),
        // 0.4 and 0.2 (prio 1), 0.2 (prio 0). Prio 2 gets all 0.5; prio 1 shares the 0.1 left
        // ∝ 0.4 : 0.2 → +0.0667 and +0.0333; prio 0 keeps its minimum.
        let s = Supervisor::new(1.0, Compression::PriorityOrdered).with_margin(0.0);
        let mut a = req(1, 6 * MS, 10 * MS, MS);
        a.priority = 2;
        let mut b = req(2, 5 * MS, 10 * MS, MS);
        b.priority = 1;
        let mut c = req(3, 3 * MS, 10 * MS, MS);
        c.priority = 1;
        let mut d = req(4, 3 * MS, 10 * MS, MS);
        d.priority = 0;
        let al = s.allocate(&[a, b, c, d]).unwrap();
        assert_eq!(qs(&al), vec![6 * MS, 1_666_666, 1_333_333, MS]);
    }

    #[test]
    fn minimum_guarantee_and_infeasible_minima() {
        // A large request cannot squeeze a small one below its minimum.
        let s = Supervisor::new(1.0, Compression::Proportional).with_margin(0.0);
        let a = s
            .allocate(&[req(1, 10 * MS, 10 * MS, 0), req(2, MS, 10 * MS, MS)])
            .unwrap();
        assert_eq!(qs(&a), vec![9 * MS, MS]);
        // A request below its minimum is raised to it.
        let a = s.allocate(&[req(1, 100, 10 * MS, 1024)]).unwrap();
        assert_eq!(qs(&a), vec![1024]);
        // Minima 0.6 + 0.6 > 1.0: no panic, reported, grants are the minima.
        let a = s
            .allocate(&[req(1, 8 * MS, 10 * MS, 6 * MS), req(2, 8 * MS, 10 * MS, 6 * MS)])
            .unwrap();
        assert_eq!(qs(&a), vec![6 * MS, 6 * MS]);
        assert!(
            matches!(a.status, AllocationStatus::Infeasible { minimum, .. } if (minimum - 1.2).abs() < 1e-12)
        );
    }

    #[test]
    fn margin_and_exact_fit() {
        let s = Supervisor::new(0.95, Compression::Proportional);
        assert!((s.margin - 4.0 * KERNEL_BW_UNIT).abs() < 1e-18);
        let a = s.allocate(&[req(1, 10 * MS, 10 * MS, 0)]).unwrap();
        // floor((0.95 − 4/2^20)·10 ms) = 9_499_961 ns.
        assert_eq!(qs(&a), vec![9_499_961]);
        // The kernel's fixed-point view of the grant stays under its own cap to_ratio(1s, 0.95s).
        let r = reservation_for(&a.grants[0], ReservationFlags::default());
        assert!(r.bw_fixed() <= pacer_model::reservation::to_ratio(1_000_000_000, 950_000_000));
        assert!(fits([(1, 3), (1, 3), (1, 3)], 1.0));
        assert!(!fits([(1, 3), (1, 3), (2, 3)], 1.0));
    }

    #[test]
    fn bad_requests_are_typed_errors() {
        let s = Supervisor::new(1.0, Compression::Weighted);
        assert_eq!(
            s.allocate(&[req(1, 1, 0, 0)]),
            Err(SupervisorError::ZeroPeriod(1))
        );
        assert!(matches!(
            s.allocate(&[req(1, 11, 10, 0)]),
            Err(SupervisorError::RuntimeAbovePeriod { .. })
        ));
        let mut w = req(1, 1, 10, 0);
        w.weight = 0.0;
        assert!(matches!(s.allocate(&[w]), Err(SupervisorError::BadWeight { .. })));
        assert_eq!(
            s.allocate(&[req(1, 1, 10, 0), req(1, 1, 10, 0)]),
            Err(SupervisorError::DuplicateId(1))
        );
    }
}
