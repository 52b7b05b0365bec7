//! Exact non-negative rationals for sums of utilisations (Σ C_i/T_i), where the answer to "is U
//! ≤ 1?", "is U integral?" must not depend on floating-point rounding.

use crate::Timing;

/// A non-negative rational with u128 parts, for sums of utilisations where an exact answer
/// matters (is U integral? is U ≤ m?); every operation is checked so callers can fall back to
/// floating point on overflow instead of wrapping.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ratio {
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
        Ratio::sum(ts.iter().map(|t| (t.c, t.t)))
    }

    pub fn to_f64(self) -> f64 {
        self.num as f64 / self.den as f64
    }

    /// The exact sum of `num_i / den_i`, or `None` on overflow.
    pub fn sum(terms: impl Iterator<Item = (u64, u64)>) -> Option<Ratio> {
        let mut acc = Ratio::ZERO;
        for (n, d) in terms {
            acc = acc.checked_add(Ratio::new(u128::from(n), u128::from(d))?)?;
        }
        Some(acc)
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
}
