//! RandFixedSum: vectors uniformly distributed over a slice of a hypercube.
//!
//! Source: R. Stafford, "Random vectors with fixed sum", MATLAB Central File Exchange 9700, 2006;
//! applied to task sets by P. Emberson, R. Stafford and R. I. Davis, "Techniques for the synthesis
//! of multiprocessor tasksets", WATERS 2010. Implemented here from the description of the
//! algorithm.
//!
//! Problem: draw x uniformly from P = {x ∈ [a, b]^n : Σx = s}. After the affine change
//! y = (x − a)/(b − a) this is the slice {y ∈ [0, 1]^n : Σy = s'} of the unit cube with
//! s' = (s − n·a)/(b − a) ∈ [0, n].
//!
//! Algorithm. Let k = ⌊s'⌋ (capped at n − 1), so k ≤ s' ≤ k + 1. Stafford decomposes the slice
//! into simplices and samples it by a walk over the coordinates that, at each step, either stays
//! at the current integer level j or drops to j − 1 (the coordinate being placed then takes one
//! whole unit of the remaining sum). The table w(i, j) is proportional to the volume of the
//! i-coordinate sub-problem at level j and obeys (j ≥ 1, w(1, ·) = [0, 1, 0, …])
//!   w(i, j) = [w(i−1, j)·(s' − k + j − 1) + w(i−1, j−1)·(k + i − j + 1 − s')] / i,
//! the two terms being the volumes reached by staying and by dropping; t(i, j), the second term's
//! share, is the probability of dropping. Sampling walks i = n−1 … 1: choose stay/drop with
//! t(i, j), and place the point inside the chosen simplex with the "largest of i uniforms" trick
//! (u^{1/i}, the Beta(i, 1) law of a simplex coordinate) — the device UUniFast also uses. The walk
//! treats coordinates asymmetrically, so the result is shuffled, then mapped back to [a, b].
//!
//! Numerics. Stafford scales w by `realmax` to postpone underflow; here each row of w is instead
//! normalised to a maximum of 1, which is exact for t (t only uses ratios within one row: both
//! terms and their sum scale with the previous row) and never underflows as a whole, so large n
//! (hundreds of tasks with a small total) works. We do not need the polytope volume Stafford also
//! returns. Of the two algebraically equal forms t = B/(A+B) = 1 − A/(A+B) we use the one that
//! avoids cancellation, as Stafford does.
//!
//! Size. The walk starts at level k and only drops, so only columns 0..=k of the tables are ever
//! read; keeping just those makes the cost O(n·k) instead of Stafford's O(n²). Sums above n/2
//! are sampled through the symmetry y ↦ 1 − y (which maps the slice at s' onto the slice at
//! n − s' and preserves uniformity), so k ≤ n/2; tables above [`MAX_TABLE_ENTRIES`] are refused
//! with an error instead of exhausting memory.
//!
//! Post-processing: the result is nudged so that |Σx − s| ≤ 1e-9 (in practice ~1e-15·n) and every
//! value lies in [a, b], by spreading the rounding residual over the coordinates in proportion to
//! their room towards the bound.

use rand::seq::SliceRandom;
use rand::Rng;

use super::GenError;

/// `n` values uniformly distributed over {x ∈ [a, b]^n : Σx = s}. Errors when n = 0, a > b, a
/// parameter is not finite, or s ∉ [n·a, n·b].
pub fn randfixedsum<R: Rng + ?Sized>(
    rng: &mut R,
    n: usize,
    s: f64,
    a: f64,
    b: f64,
) -> Result<Vec<f64>, GenError> {
    if n == 0 {
        return Err(GenError::invalid("n", n, "at least one value"));
    }
    for (name, v) in [("sum", s), ("lower bound a", a), ("upper bound b", b)] {
        if !v.is_finite() {
            return Err(GenError::invalid(name, v, "a finite number"));
        }
    }
    if a > b {
        return Err(GenError::invalid(
            "randfixedsum bounds [a, b]",
            format!("[{a}, {b}]"),
            "a ≤ b",
        ));
    }
    let (lo, hi) = (n as f64 * a, n as f64 * b);
    if !(lo..=hi).contains(&s) {
        return Err(GenError::SumOutOfRange {
            n,
            sum: s,
            a,
            b,
            lo,
            hi,
        });
    }
    // At either end of the range (or when a = b) the slice is a single point; return it exactly
    // rather than with the walk's last-bit rounding.
    if s == lo || a == b {
        return Ok(vec![a; n]);
    }
    if s == hi {
        return Ok(vec![b; n]);
    }
    let width = b - a;
    let unit = ((s - lo) / width).clamp(0.0, n as f64);
    // y ↦ 1 − y maps the slice at sum s' onto the slice at n − s' and preserves uniformity, so we
    // always sample the lower half: that bounds the level k ≤ n/2 and with it the table size.
    let flip = unit > n as f64 / 2.0;
    let low = if flip { n as f64 - unit } else { unit };
    let k = (low.floor() as usize).min(n - 1);
    let entries = (n - 1).saturating_mul(k + 1);
    if entries > MAX_TABLE_ENTRIES {
        return Err(GenError::invalid(
            "n",
            n,
            format!(
                "n·(k+1) ≤ {MAX_TABLE_ENTRIES} for RandFixedSum's transition table, with \
                 k = ⌊min(s', n − s')⌋ = {k} and s' = (s − n·a)/(b − a)"
            ),
        ));
    }
    let y = unit_slice(rng, n, low, k);
    let mut x: Vec<f64> = y
        .into_iter()
        .map(|y| a + width * if flip { 1.0 - y } else { y })
        .collect();
    fix_sum(&mut x, s, a, b);
    Ok(x)
}

/// Largest transition table (n − 1)·(k + 1) RandFixedSum builds (128 MiB of f64): ample for task
/// sets (N = 192, U = 48 needs 9 000 entries), and an error rather than an out-of-memory abort for
/// absurd requests.
pub const MAX_TABLE_ENTRIES: usize = 1 << 24;

/// Uniform sample of {y ∈ [0, 1]^n : Σy = s}, with 0 ≤ s ≤ n and k = min(⌊s⌋, n − 1).
///
/// Only levels 0..=k are ever visited (the walk starts at k and only drops), so the tables keep
/// k + 1 columns of t and k + 2 of w: O(n·k) time and memory instead of O(n²).
fn unit_slice<R: Rng + ?Sized>(rng: &mut R, n: usize, s: f64, k: usize) -> Vec<f64> {
    if n == 1 {
        return vec![s];
    }
    let kf = k as f64;
    let s = s.clamp(kf, kf + 1.0);
    // s1[c] = s − (k − c) and s2[c] = (k + n − c) − s: distances from s to the integer levels the
    // walk can visit; both are ≥ 0 by the choice of k.
    let s1: Vec<f64> = (0..n).map(|c| s - kf + c as f64).collect();
    let s2: Vec<f64> = (0..n).map(|c| (k + n - c) as f64 - s).collect();

    // t[(i − 2)·cols + c] = probability of dropping from level c at dimension i (i = 2..=n).
    let cols = k + 1;
    let mut t = vec![0.0f64; (n - 1) * cols];
    let mut prev = vec![0.0f64; cols + 1];
    prev[1] = 1.0;
    let mut cur = vec![0.0f64; cols + 1];
    for i in 2..=n {
        let fi = i as f64;
        cur.iter_mut().for_each(|v| *v = 0.0);
        for c in 0..i.min(cols) {
            let stay = prev[c + 1] * s1[c] / fi;
            let drop = prev[c] * s2[n - i + c] / fi;
            let total = stay + drop;
            cur[c + 1] = total;
            let use_drop_form = s2[n - i + c] > s1[c];
            t[(i - 2) * cols + c] = if total > 0.0 {
                if use_drop_form {
                    drop / total
                } else {
                    1.0 - stay / total
                }
            } else if use_drop_form {
                0.0
            } else {
                1.0
            };
        }
        let peak = cur.iter().cloned().fold(0.0f64, f64::max);
        if peak > 0.0 {
            cur.iter_mut().for_each(|v| *v /= peak);
        }
        std::mem::swap(&mut prev, &mut cur);
    }

    // Walk back through the table, placing one coordinate per step.
    let mut x = vec![0.0f64; n];
    let mut level = k;
    let mut rest = s;
    let mut sm = 0.0f64;
    let mut pr = 1.0f64;
    for i in (1..n).rev() {
        let rt: f64 = rng.random();
        let rs: f64 = rng.random();
        // t at level 0 is 0 in exact arithmetic; the guard keeps `level` from underflowing.
        let drop = level > 0 && rt < t[(i - 1) * cols + level];
        let e = if drop { 1.0 } else { 0.0 };
        let sx = rs.powf(1.0 / i as f64);
        sm += (1.0 - sx) * pr * rest / (i + 1) as f64;
        pr *= sx;
        x[n - i - 1] = sm + pr * e;
        if drop {
            rest -= 1.0;
            level -= 1;
        }
    }
    x[n - 1] = sm + pr * rest;
    x.shuffle(rng);
    x
}

/// Spreads s − Σx over the coordinates in proportion to their room towards the bound in the
/// direction of the error, clamping to [a, b]; a few rounds drive the residual to the last bit.
fn fix_sum(x: &mut [f64], s: f64, a: f64, b: f64) {
    for v in x.iter_mut() {
        *v = v.clamp(a, b);
    }
    for _ in 0..8 {
        let err = s - neumaier_sum(x);
        if err == 0.0 {
            return;
        }
        let room = |v: f64| if err > 0.0 { b - v } else { v - a };
        let total_room: f64 = x.iter().map(|&v| room(v)).sum();
        if total_room <= 0.0 {
            return;
        }
        for v in x.iter_mut() {
            *v = (*v + err * room(*v) / total_room).clamp(a, b);
        }
    }
}

/// Compensated (Neumaier) summation, so that fix_sum measures the error of the values and not of
/// the summation.
fn neumaier_sum(x: &[f64]) -> f64 {
    let mut sum = 0.0f64;
    let mut comp = 0.0f64;
    for &v in x {
        let t = sum + v;
        if sum.abs() >= v.abs() {
            comp += (sum - t) + v;
        } else {
            comp += (v - t) + sum;
        }
        sum = t;
    }
    sum + comp
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    fn rng(seed: u64) -> ChaCha8Rng {
        ChaCha8Rng::seed_from_u64(seed)
    }

    #[test]
    fn gen_randfixedsum_rejects_unreachable_sums() {
        let e = randfixedsum(&mut rng(1), 4, 4.5, 0.0, 1.0).unwrap_err();
        assert!(matches!(e, GenError::SumOutOfRange { n: 4, .. }), "{e}");
        assert!(randfixedsum(&mut rng(1), 4, 0.3, 0.1, 1.0).is_err());
        assert!(randfixedsum(&mut rng(1), 0, 0.0, 0.0, 1.0).is_err());
        assert!(randfixedsum(&mut rng(1), 3, 1.0, 1.0, 0.0).is_err());
        assert!(randfixedsum(&mut rng(1), 3, f64::NAN, 0.0, 1.0).is_err());
        assert!(randfixedsum(&mut rng(1), 3, 1.0, f64::NEG_INFINITY, 1.0).is_err());
    }

    #[test]
    fn gen_randfixedsum_edge_cases() {
        assert_eq!(randfixedsum(&mut rng(1), 1, 0.4, 0.0, 1.0).unwrap(), vec![0.4]);
        assert_eq!(randfixedsum(&mut rng(1), 3, 1.5, 0.5, 0.5).unwrap(), vec![0.5; 3]);
        // The corners of the range: all at a, all at b.
        assert_eq!(randfixedsum(&mut rng(1), 5, 0.0, 0.0, 1.0).unwrap(), vec![0.0; 5]);
        assert_eq!(randfixedsum(&mut rng(1), 5, 5.0, 0.0, 1.0).unwrap(), vec![1.0; 5]);
        // Large n with a small sum (Stafford's unscaled table would underflow here).
        let x = randfixedsum(&mut rng(3), 2000, 0.5, 0.0, 1.0).unwrap();
        assert!((x.iter().sum::<f64>() - 0.5).abs() <= 1e-9);
        assert!(x.iter().all(|&v| (0.0..=1.0).contains(&v)));
    }

    #[test]
    fn gen_randfixedsum_large_n() {
        // Lower and upper halves (the upper one is sampled through y ↦ 1 − y) and a request whose
        // table would not fit, which is an error instead of an allocation failure.
        for &(n, s) in &[(5000usize, 40.0f64), (5000, 4960.0), (100_000, 0.9)] {
            let x = randfixedsum(&mut rng(4), n, s, 0.0, 1.0).unwrap();
            assert!((x.iter().sum::<f64>() - s).abs() <= 1e-9);
            assert!(x.iter().all(|&v| (0.0..=1.0).contains(&v)));
        }
        let e = randfixedsum(&mut rng(4), 1_000_000, 500_000.0, 0.0, 1.0).unwrap_err();
        assert!(e.to_string().contains("transition table"), "{e}");
    }

    #[test]
    fn gen_randfixedsum_is_reproducible() {
        let a = randfixedsum(&mut rng(5), 12, 4.2, 0.0, 1.0).unwrap();
        assert_eq!(a, randfixedsum(&mut rng(5), 12, 4.2, 0.0, 1.0).unwrap());
        assert_ne!(a, randfixedsum(&mut rng(6), 12, 4.2, 0.0, 1.0).unwrap());
    }

    proptest! {
        #[test]
        fn gen_randfixedsum_sum_and_bounds(
            seed in any::<u64>(),
            n in 1usize..200,
            a in -2.0f64..1.0,
            width in 0.001f64..3.0,
            frac in 0.0f64..=1.0,
        ) {
            let b = a + width;
            let s = n as f64 * a + frac * n as f64 * width;
            let s = s.clamp(n as f64 * a, n as f64 * b);
            let x = randfixedsum(&mut rng(seed), n, s, a, b).unwrap();
            prop_assert_eq!(x.len(), n);
            let sum: f64 = x.iter().sum();
            prop_assert!((sum - s).abs() <= 1e-9, "sum {} vs {}", sum, s);
            prop_assert!(x.iter().all(|&v| a <= v && v <= b), "{:?} not in [{}, {}]", x, a, b);
        }
    }
}
