//! Incremental per-CPU admission states for partitioned packing ([`super::pack_with`]): each
//! answers exactly what the load filter [`super::load_fits`] followed by the exact uniprocessor
//! test on the whole bin would answer, without re-analysing the whole bin for every candidate.
//!
//! - [`DmBin`]: deadline-monotonic response-time analysis (Audsley, Burns, Richardson, Tindell
//!   & Wellings 1993). A task τ_k of a fixed-priority set meets its deadline iff some t ≤ D_k
//!   has W_k(t) = C_k + Σ_{hp(k)} ⌈t/T_j⌉ C_j ≤ t (Lehoczky, Sha & Ding, "The rate monotonic
//!   scheduling algorithm: exact characterization and average case behavior", RTSS 1989). The
//!   bin keeps, for every task, such a *witness* t and its slack t − W_k(t). A candidate τ_c
//!   adds ⌈t/T_c⌉ C_c to W_j(t) of each lower-priority τ_j only, so τ_j stays schedulable
//!   whenever that is at most its slack (O(1)); only when it is not is τ_j's response time
//!   recomputed (exact iteration; the new witness is D_j if W_j(D_j) ≤ D_j, else the last
//!   instant before R_j's interference grows). Higher-priority tasks are unaffected. The
//!   candidate's own test is one evaluation at its deadline, or the exact iteration.
//! - [`EdfBin`]: QPA (Zhang & Burns, IEEE TC 58(9), 2009) behind its own shortcuts — U ≤ 1
//!   (Liu & Layland 1973), exact for implicit deadlines, and density Σ C/D ≤ 1, sufficient —
//!   whose sums are kept per bin in insertion order, so they are the very floating-point values
//!   the whole-bin test computes. Only a bin that passes neither shortcut runs the QPA walk.
//!
//! Both compare utilisation sums as [`super::load_fits`] does: the running sum in insertion
//! order, candidate last, is bit-for-bit the sum over the slice `pack` would hand the test.
//! `tests/equivalence.rs` checks placements against the whole-bin predicates of
//! [`crate::reference`] for every heuristic on random sets.

use std::cmp::Ordering;

use super::heuristics::BinState;
use crate::outcome::EPS;
use crate::uni::edf_utilization::ratio_sum_cmp_one;
use crate::uni::qpa;
use crate::Timing;

/// C_k + Σ_{j ∈ hp} ⌈t/T_j⌉ C_j, saturating (any value above u64::MAX exceeds every deadline).
fn workload<'a>(c: u64, hp: impl Iterator<Item = &'a Timing>, t: u64) -> u128 {
    hp.fold(u128::from(c), |acc, j| acc.saturating_add(jobs(j, t)))
}

/// ⌈t/T⌉ C of one task (u128::MAX for a zero period with C > 0).
fn jobs(j: &Timing, t: u64) -> u128 {
    if j.c == 0 {
        0
    } else if j.t == 0 {
        u128::MAX
    } else {
        u128::from(t.div_ceil(j.t)) * u128::from(j.c)
    }
}

/// What is known about one task's schedulability under its current higher-priority tasks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Proof {
    /// An instant t ≤ D with W(t) ≤ t, the witness.
    at: u64,
    /// at − W(at).
    slack: u64,
    /// A lower bound on the response time (the response time itself when it was computed).
    lower: u64,
}

/// A [`Proof`] that `k` meets its deadline under `hp`, or `None` if its response time exceeds
/// D. `lower` must be a lower bound on the response time; `try_deadline` is false when W(D) > D
/// is already known.
///
/// Witnesses are instants t ≥ 1 (W(t) ≤ t at t ≥ 1 bounds the least fixed point at or above
/// Σ C, which is the response time), except t = 0 when every C involved is 0 and so is R.
fn prove<'a>(
    k: &Timing,
    hp: impl Iterator<Item = &'a Timing> + Clone,
    lower: u64,
    try_deadline: bool,
) -> Option<Proof> {
    // The deadline itself is the cheapest certificate and usually the one with most slack.
    if try_deadline && k.d >= 1 {
        let at_d = workload(k.c, hp.clone(), k.d);
        if at_d <= u128::from(k.d) {
            return Some(Proof {
                at: k.d,
                slack: k.d - at_d as u64,
                lower,
            });
        }
    }
    // Exact: the plain iteration, from the lower bound when it is above Σ C (iterating from
    // below any fixed point still reaches the least one).
    let mut r = hp
        .clone()
        .fold(u128::from(k.c), |acc, j| acc.saturating_add(u128::from(j.c)))
        .max(u128::from(lower));
    loop {
        if r > u128::from(k.d) {
            return None;
        }
        let w = workload(k.c, hp.clone(), r as u64);
        if w <= r {
            break;
        }
        r = w;
    }
    // r ≤ D fits in u64. W is flat from R to the first multiple of a period at or after R
    // (⌈t/T_j⌉ only grows at multiples + 1), so that instant has slack t − R.
    let r = r as u64;
    if r == 0 {
        return Some(Proof {
            at: 0,
            slack: 0,
            lower: 0,
        });
    }
    let flat_until = hp
        .filter(|j| j.t > 0 && j.c > 0)
        .map(|j| r.div_ceil(j.t).saturating_mul(j.t))
        .fold(k.d, u64::min)
        .max(r);
    Some(Proof {
        at: flat_until,
        slack: flat_until - r,
        lower: r,
    })
}

#[derive(Debug, Clone)]
struct DmEntry {
    t: Timing,
    proof: Proof,
    /// Insertion number, to recognise the entry across insertions.
    seq: u64,
}

/// What the latest successful [`DmBin::fits`] computed, for the [`DmBin::push`] that follows.
#[derive(Debug, Clone)]
struct DmProbe {
    candidate: Timing,
    pos: usize,
    proof: Proof,
    /// (index in `tasks` before insertion, new proof) of lower-priority tasks whose witness did
    /// not survive the candidate.
    renewed: Vec<(usize, Proof)>,
}

/// One CPU under deadline-monotonic fixed priority, answering
/// `load_fits(bin + t, cap) && rta::schedulable_dm(bin + t)` incrementally (module doc).
///
/// Response times only grow as tasks join, so each task also keeps a lower bound on its own:
/// a task below a new one of WCET C_c gains at least C_c (W'(t) ≥ W(t) + C_c at t ≥ 1), and a
/// task's response time is at least the one above it plus its own C (Davis, Zabos & Burns
/// 2008). The exact iterations start there instead of at Σ C.
#[derive(Debug, Clone)]
pub struct DmBin {
    capacity: usize,
    /// Σ u in insertion order (the order [`super::load_fits`] sums the slice in).
    load: f64,
    /// Tasks in DM order: (D, T), then insertion order, as `deadline_monotonic` ranks a bin
    /// whose slice is in insertion order.
    tasks: Vec<DmEntry>,
    probe: Option<DmProbe>,
    /// The entry (by `seq`) whose miss rejected the latest rejected candidate.
    last_failed: Option<u64>,
    /// Scratch: (index, lower bound) of the entries a probe must prove again.
    stale: Vec<(usize, u64)>,
    /// Set if a task was pushed that the bin could not host (a broken [`BinState`] protocol);
    /// the bin then admits nothing more.
    overloaded: bool,
}

impl DmBin {
    pub fn new(capacity: usize) -> Self {
        DmBin {
            capacity,
            load: 0.0,
            tasks: Vec::new(),
            probe: None,
            last_failed: None,
            stale: Vec::new(),
            overloaded: false,
        }
    }

    /// The bin's tasks in priority order.
    pub fn tasks(&self) -> impl Iterator<Item = &Timing> {
        self.tasks.iter().map(|e| &e.t)
    }

    /// A lower bound on the response time of `tasks[j]` once `c` is above it, given one for
    /// the task that will be just above it (`above`).
    fn raised_lower(e: &DmEntry, c: &Timing, above: u64) -> u64 {
        e.proof.lower.saturating_add(c.c).max(above.saturating_add(e.t.c))
    }

    fn probe(&mut self, c: &Timing) -> Option<DmProbe> {
        if self.overloaded || !load_admits(self.load, self.capacity, c) {
            return None;
        }
        // After every task of equal or higher DM rank: the candidate is last in the slice.
        let pos = self.tasks.partition_point(|e| (e.t.d, e.t.t) <= (c.d, c.t));
        let above = pos.checked_sub(1).map_or(0, |p| self.tasks[p].proof.lower);
        let hp = self.tasks[..pos].iter().map(|e| &e.t);
        let proof = prove(c, hp, above.saturating_add(c.c), true)?;

        // O(1) per lower-priority task: its lower bound may already pass its deadline (then
        // R > D, a miss), its witness may absorb the candidate's jobs (then it still meets
        // it); the others are proved again below.
        let mut stale = std::mem::take(&mut self.stale);
        stale.clear();
        let mut above = proof.lower;
        for (j, e) in self.tasks.iter().enumerate().skip(pos) {
            let lower = Self::raised_lower(e, c, above);
            above = lower;
            if lower > e.t.d {
                self.last_failed = Some(e.seq);
                self.stale = stale;
                return None;
            }
            // Witness 0 (all C zero so far) certifies nothing once the candidate adds work.
            if e.proof.at == 0 || jobs(c, e.proof.at) > u128::from(e.proof.slack) {
                stale.push((j, lower));
            }
        }
        // One miss rejects the candidate, and probes of a bin tend to fail on the same tight
        // task: it goes first. The answer does not depend on the order.
        if let Some(k) = stale
            .iter()
            .position(|&(j, _)| Some(self.tasks[j].seq) == self.last_failed)
        {
            stale[..=k].rotate_right(1);
        }
        let mut renewed = Vec::with_capacity(stale.len());
        for &(j, lower) in &stale {
            let e = &self.tasks[j];
            let hp = self.tasks[..j].iter().map(|e| &e.t).chain(std::iter::once(c));
            // No use trying D: a stale witness at D means W(D) > D now, and a witness below D
            // was chosen because W(D) > D then (W only grows). Only an all-zero-WCET bin, whose
            // witness is 0, could pass at D, and the iteration is exact for it too.
            match prove(&e.t, hp, lower, false) {
                Some(p) => renewed.push((j, p)),
                None => {
                    self.last_failed = Some(e.seq);
                    self.stale = stale;
                    return None;
                }
            }
        }
        self.stale = stale;
        renewed.sort_unstable_by_key(|&(j, _)| j);
        Some(DmProbe {
            candidate: *c,
            pos,
            proof,
            renewed,
        })
    }
}

impl BinState for DmBin {
    fn fits(&mut self, t: &Timing) -> bool {
        self.probe = self.probe(t);
        self.probe.is_some()
    }

    fn push(&mut self, t: Timing) {
        let probe = match self.probe.take() {
            Some(p) if p.candidate == t => Some(p),
            _ => self.probe(&t),
        };
        let Some(p) = probe else {
            self.overloaded = true;
            self.load += t.u();
            let pos = self.tasks.partition_point(|e| (e.t.d, e.t.t) <= (t.d, t.t));
            let proof = Proof {
                at: t.d,
                slack: 0,
                lower: 0,
            };
            let seq = self.tasks.len() as u64;
            self.tasks.insert(pos, DmEntry { t, proof, seq });
            return;
        };
        let mut renewed = p.renewed.iter().peekable();
        let mut above = p.proof.lower;
        for (j, e) in self.tasks.iter_mut().enumerate().skip(p.pos) {
            if let Some(&(_, proof)) = renewed.next_if(|r| r.0 == j) {
                e.proof = proof;
            } else {
                e.proof.lower = Self::raised_lower(e, &t, above);
                // The probe checked that this fits in the slack.
                e.proof.slack -= jobs(&t, e.proof.at) as u64;
            }
            above = e.proof.lower;
        }
        let seq = self.tasks.len() as u64;
        self.tasks.insert(
            p.pos,
            DmEntry {
                t,
                proof: p.proof,
                seq,
            },
        );
        self.load += t.u();
    }
}

/// The candidate's part of [`super::load_fits`]: the bin's tasks already passed it, and `load`
/// is their sum in the same order.
fn load_admits(load: f64, capacity: usize, c: &Timing) -> bool {
    let u = c.u();
    !(u.is_nan() || u > 1.0 + EPS) && load + u <= capacity as f64 + EPS
}

/// One CPU under EDF, answering `load_fits(bin + t, cap) && qpa::schedulable(bin + t)` with
/// QPA's shortcuts on running sums (module doc).
#[derive(Debug, Clone)]
pub struct EdfBin {
    capacity: usize,
    /// Σ u and Σ C/D in insertion order.
    load: f64,
    density: f64,
    implicit: bool,
    /// Insertion order, for the exact fallbacks.
    tasks: Vec<Timing>,
}

impl EdfBin {
    pub fn new(capacity: usize) -> Self {
        EdfBin {
            capacity,
            load: 0.0,
            density: 0.0,
            implicit: true,
            tasks: Vec::new(),
        }
    }
}

impl BinState for EdfBin {
    fn fits(&mut self, c: &Timing) -> bool {
        if !load_admits(self.load, self.capacity, c) {
            return false;
        }
        // qpa::qpa's steps, in its order.
        let u = self.load + c.u();
        let u_at_most_one = if u < 1.0 - 1e-9 {
            true
        } else if u > 1.0 + 1e-9 {
            false
        } else {
            let terms = self.tasks.iter().chain(std::iter::once(c)).map(|t| (t.c, t.t));
            ratio_sum_cmp_one(terms) != Ordering::Greater
        };
        if !u_at_most_one {
            return false;
        }
        if (self.implicit && c.d == c.t) || self.density + c.density() <= 1.0 - 1e-9 {
            return true;
        }
        self.tasks.push(*c);
        let ok = qpa::schedulable(&self.tasks);
        self.tasks.pop();
        ok
    }

    fn push(&mut self, t: Timing) {
        self.load += t.u();
        self.density += t.density();
        self.implicit &= t.d == t.t;
        self.tasks.push(t);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::uni::rta;

    #[test]
    fn proofs_by_hand() {
        // hp: (1, 4), (2, 6); k = (3, 12, 12): W(12) = 3 + 3 + 4 = 10 ≤ 12 → witness D, slack 2.
        let hp = [Timing::implicit(1, 4), Timing::implicit(2, 6)];
        let witness = |k: Timing| prove(&k, hp.iter(), 0, true).map(|p| (p.at, p.slack));
        assert_eq!(witness(Timing::implicit(3, 12)), Some((12, 2)));
        // k = (3, 9, 12): W(9) = 3 + 3 + 4 = 10 > 9; R: 6 → 3 + 2 + 2 = 7 → 3 + 2 + 4 = 9 →
        // 3 + 3 + 4 = 10 > 9: misses.
        assert_eq!(witness(Timing::new(3, 9, 12)), None);
        // k = (2, 7, 12): W(7) = 2 + 2 + 4 = 8 > 7; R: 5 → 2 + 2 + 2 = 6 → 2 + 2 + 2 = 6; W is
        // flat until min(⌈6/4⌉·4, ⌈6/6⌉·6, 7) = 6: witness 6, slack 0.
        assert_eq!(witness(Timing::new(2, 7, 12)), Some((6, 0)));
        assert_eq!(
            prove(&Timing::new(2, 7, 12), hp.iter(), 5, false).map(|p| p.lower),
            Some(6)
        );
        // k = (1, 7, 12): W(7) = 1 + 2 + 4 = 7 ≤ 7 → (7, 0).
        assert_eq!(witness(Timing::new(1, 7, 12)), Some((7, 0)));
    }

    #[test]
    fn dm_bin_agrees_with_whole_bin_rta() {
        let ts = [
            Timing::implicit(3, 12),
            Timing::implicit(1, 4),
            Timing::new(2, 7, 12),
            Timing::implicit(2, 6),
            Timing::new(1, 3, 8),
            Timing::implicit(1, 24),
        ];
        let mut bin = DmBin::new(1);
        let mut slice: Vec<Timing> = Vec::new();
        for t in ts {
            slice.push(t);
            let whole = super::super::load_fits(&slice, 1) && rta::schedulable_dm(&slice);
            slice.pop();
            assert_eq!(bin.fits(&t), whole, "{t:?} into {slice:?}");
            if whole {
                bin.push(t);
                slice.push(t);
            }
        }
        assert!(slice.len() >= 4);
    }

    #[test]
    fn pushing_without_a_fit_closes_the_bin() {
        let mut bin = DmBin::new(1);
        bin.push(Timing::implicit(3, 4));
        bin.push(Timing::implicit(3, 4));
        assert!(!bin.fits(&Timing::implicit(1, 100)));
        assert_eq!(bin.tasks().count(), 2);
    }
}
