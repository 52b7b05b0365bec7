//! UUniFast and UUniFast-discard.
//!
//! UUniFast: E. Bini and G. C. Buttazzo, "Measuring the performance of schedulability tests",
//! Real-Time Systems 30(1–2), 2005. It draws n utilisations uniformly from the simplex
//! {u ∈ [0, U]^n : Σu = U} in O(n): the sum of the last n − i values, S_{i+1}, is
//! S_i · r^{1/(n−i)} with r uniform in [0, 1) (r^{1/k} is the largest of k uniforms, i.e. the
//! Beta(k, 1) law of the remaining sum's share), and u_i = S_i − S_{i+1}.
//!
//! UUniFast-discard: R. I. Davis and A. Burns, "Priority assignment for global fixed priority
//! pre-emptive scheduling in multiprocessor real-time systems", RTSS 2009. For U > 1 some u_i can
//! exceed 1 (impossible for a task); discarding such vectors and redrawing keeps the distribution
//! uniform over the valid region {u ∈ [0, max]^n : Σu = U}, at the cost of many redraws when U is
//! close to n·max — hence the bound on tries and the typed error. [`fn@super::randfixedsum`] samples
//! the same region without rejection.

use rand::Rng;

use super::GenError;

fn check(n: usize, total: f64) -> Result<(), GenError> {
    if n == 0 {
        return Err(GenError::invalid("n", n, "at least one task"));
    }
    if !(total.is_finite() && total >= 0.0) {
        return Err(GenError::invalid("utilization", total, "a finite total ≥ 0"));
    }
    Ok(())
}

/// UUniFast: `n` utilisations, uniformly distributed over the simplex, summing to `total` (up to
/// floating rounding).
pub fn uunifast<R: Rng + ?Sized>(rng: &mut R, n: usize, total: f64) -> Result<Vec<f64>, GenError> {
    check(n, total)?;
    Ok(draw(rng, n, total))
}

fn draw<R: Rng + ?Sized>(rng: &mut R, n: usize, total: f64) -> Vec<f64> {
    let mut u = Vec::with_capacity(n);
    let mut sum = total;
    for i in 1..n {
        let r: f64 = rng.random();
        let next = sum * r.powf(1.0 / (n - i) as f64);
        u.push(sum - next);
        sum = next;
    }
    // The last value is what is left, so the sum telescopes to `total`.
    u.push(sum);
    u
}

/// UUniFast-discard: redraws the whole vector while any value exceeds `max` (1 for tasks on unit
/// processors), giving up after `max_tries` draws with [`GenError::DiscardLimit`]. A total above
/// n·max is rejected at once, since no vector can satisfy it.
pub fn uunifast_discard<R: Rng + ?Sized>(
    rng: &mut R,
    n: usize,
    total: f64,
    max: f64,
    max_tries: u32,
) -> Result<Vec<f64>, GenError> {
    check(n, total)?;
    if !(max.is_finite() && max > 0.0) {
        return Err(GenError::invalid("max", max, "a finite per-task bound > 0"));
    }
    if max_tries == 0 {
        return Err(GenError::invalid("max_tries", max_tries, "at least 1"));
    }
    if total > n as f64 * max {
        return Err(GenError::invalid(
            "utilization",
            total,
            format!("≤ n·max = {n}·{max} = {} (no vector fits)", n as f64 * max),
        ));
    }
    for _ in 0..max_tries {
        let u = draw(rng, n, total);
        if u.iter().all(|&x| x <= max) {
            return Ok(u);
        }
    }
    Err(GenError::DiscardLimit {
        n,
        total,
        max,
        tries: max_tries,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    fn rng(seed: u64) -> ChaCha8Rng {
        ChaCha8Rng::seed_from_u64(seed)
    }

    #[test]
    fn gen_uunifast_sums_to_total() {
        for seed in 0..200 {
            for &(n, total) in &[(1, 0.5), (2, 0.9), (10, 0.7), (50, 1.0), (100, 3.5)] {
                let u = uunifast(&mut rng(seed), n, total).unwrap();
                assert_eq!(u.len(), n);
                assert!(u.iter().all(|&x| x >= 0.0));
                let s: f64 = u.iter().sum();
                assert!((s - total).abs() <= 1e-9, "n={n} total={total} sum={s}");
            }
        }
    }

    #[test]
    fn gen_uunifast_is_reproducible_and_seed_dependent() {
        let a = uunifast(&mut rng(7), 8, 0.8).unwrap();
        let b = uunifast(&mut rng(7), 8, 0.8).unwrap();
        let c = uunifast(&mut rng(8), 8, 0.8).unwrap();
        assert_eq!(a, b);
        assert_ne!(a, c);
    }

    #[test]
    fn gen_uunifast_discard_respects_max() {
        for seed in 0..100 {
            let u = uunifast_discard(&mut rng(seed), 8, 3.0, 1.0, 10_000).unwrap();
            assert!(u.iter().all(|&x| (0.0..=1.0).contains(&x)), "{u:?}");
            assert!((u.iter().sum::<f64>() - 3.0).abs() <= 1e-9);
            let v = uunifast_discard(&mut rng(seed), 10, 2.0, 0.4, 10_000).unwrap();
            assert!(v.iter().all(|&x| x <= 0.4), "{v:?}");
        }
    }

    #[test]
    fn gen_uunifast_discard_gives_up_with_typed_error() {
        // 4 values summing to 3.99 with each ≤ 1: feasible but practically never drawn.
        let e = uunifast_discard(&mut rng(1), 4, 3.99, 1.0, 50).unwrap_err();
        assert!(matches!(e, GenError::DiscardLimit { tries: 50, .. }), "{e}");
        assert!(e.to_string().contains("50 draws"), "{e}");
    }

    #[test]
    fn gen_uunifast_rejects_bad_parameters() {
        assert!(uunifast(&mut rng(1), 0, 0.5).is_err());
        assert!(uunifast(&mut rng(1), 3, -0.5).is_err());
        assert!(uunifast(&mut rng(1), 3, f64::NAN).is_err());
        assert!(uunifast_discard(&mut rng(1), 3, 3.5, 1.0, 10).is_err());
        assert!(uunifast_discard(&mut rng(1), 3, 1.5, 0.0, 10).is_err());
        assert!(uunifast_discard(&mut rng(1), 3, 1.5, 1.0, 0).is_err());
    }
}
