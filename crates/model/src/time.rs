//! Integer-nanosecond time.
//!
//! Every duration and instant in pacer is a whole number of nanoseconds, as in the kernel
//! (`u64` ns in `struct sched_attr`, `ktime_t`). Floating point appears only in derived ratios
//! (utilisation, density), never in time itself, so schedules and analyses are exact and
//! reproducible bit for bit.
//!
//! Human-facing text accepts units (`10ms`, `250us`, `1.5s`); a bare integer means nanoseconds.
//! Formatting picks the largest unit that represents the value exactly, so a value written and
//! read back is unchanged.

use std::fmt;
use std::ops::{Add, AddAssign, Div, Mul, Rem, Sub};
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A length of time in nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Duration(pub u64);

/// A point in time, in nanoseconds since the start of an experiment or of `CLOCK_MONOTONIC`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize)]
pub struct Instant(pub u64);

pub const NS_PER_US: u64 = 1_000;
pub const NS_PER_MS: u64 = 1_000_000;
pub const NS_PER_S: u64 = 1_000_000_000;

/// Why a duration string was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationParseError {
    #[error("empty duration")]
    Empty,
    #[error("negative duration `{0}`: durations must be ≥ 0")]
    Negative(String),
    #[error("`{0}` is not a number followed by a unit (ns, us, ms, s)")]
    NotANumber(String),
    #[error("unknown unit `{unit}` in `{text}`: expected one of ns, us (or µs), ms, s")]
    UnknownUnit { text: String, unit: String },
    #[error("`{0}` is not a whole number of nanoseconds")]
    Fractional(String),
    #[error("`{0}` is too large (more than 2^64 ns ≈ 584 years)")]
    Overflow(String),
    /// A bare number other than 0: nanoseconds, seconds and microseconds are all common
    /// readings, and a wrong guess silently changes an experiment by 10^3–10^9.
    #[error("`{0}` has no unit: write {0}s, {0}ms, {0}us or {0}ns")]
    NoUnit(String),
}

impl Duration {
    pub const ZERO: Duration = Duration(0);
    pub const MAX: Duration = Duration(u64::MAX);

    pub const fn from_ns(ns: u64) -> Self {
        Duration(ns)
    }
    pub const fn from_us(us: u64) -> Self {
        Duration(us * NS_PER_US)
    }
    pub const fn from_ms(ms: u64) -> Self {
        Duration(ms * NS_PER_MS)
    }
    pub const fn from_secs(s: u64) -> Self {
        Duration(s * NS_PER_S)
    }
    pub const fn ns(self) -> u64 {
        self.0
    }
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / NS_PER_S as f64
    }
    pub fn as_ms_f64(self) -> f64 {
        self.0 as f64 / NS_PER_MS as f64
    }
    pub fn checked_add(self, o: Duration) -> Option<Duration> {
        self.0.checked_add(o.0).map(Duration)
    }
    pub fn checked_sub(self, o: Duration) -> Option<Duration> {
        self.0.checked_sub(o.0).map(Duration)
    }
    pub fn saturating_sub(self, o: Duration) -> Duration {
        Duration(self.0.saturating_sub(o.0))
    }
    pub fn is_zero(self) -> bool {
        self.0 == 0
    }

    /// For tables: the exact form when it is short (`10ms`, `250us`), otherwise four significant
    /// figures in the largest unit ≥ 1 (`6.440ms` for 6439665 ns). Files use `Display` (exact).
    pub fn approx(self) -> String {
        let exact = self.to_string();
        if exact.len() <= 7 {
            return exact;
        }
        let ns = self.0 as f64;
        let (v, unit) = if ns >= NS_PER_S as f64 {
            (ns / NS_PER_S as f64, "s")
        } else if ns >= NS_PER_MS as f64 {
            (ns / NS_PER_MS as f64, "ms")
        } else {
            (ns / NS_PER_US as f64, "us")
        };
        let decimals = if v >= 100.0 {
            1
        } else if v >= 10.0 {
            2
        } else {
            3
        };
        format!("{v:.decimals$}{unit}")
    }
}

impl Add for Duration {
    type Output = Duration;
    fn add(self, o: Duration) -> Duration {
        Duration(self.0 + o.0)
    }
}
impl AddAssign for Duration {
    fn add_assign(&mut self, o: Duration) {
        self.0 += o.0;
    }
}
impl Sub for Duration {
    type Output = Duration;
    fn sub(self, o: Duration) -> Duration {
        Duration(self.0 - o.0)
    }
}
impl Mul<u64> for Duration {
    type Output = Duration;
    fn mul(self, k: u64) -> Duration {
        Duration(self.0 * k)
    }
}
impl Div<u64> for Duration {
    type Output = Duration;
    fn div(self, k: u64) -> Duration {
        Duration(self.0 / k)
    }
}
impl Rem for Duration {
    type Output = Duration;
    fn rem(self, o: Duration) -> Duration {
        Duration(self.0 % o.0)
    }
}
impl Add<Duration> for Instant {
    type Output = Instant;
    fn add(self, d: Duration) -> Instant {
        Instant(self.0 + d.0)
    }
}
impl Sub for Instant {
    type Output = Duration;
    fn sub(self, o: Instant) -> Duration {
        Duration(self.0 - o.0)
    }
}

impl fmt::Display for Duration {
    /// The largest unit that is exact: `10ms`, `250us`, `1500001ns`, `0ns`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ns = self.0;
        if ns == 0 {
            return write!(f, "0ns");
        }
        for (unit, scale) in [("s", NS_PER_S), ("ms", NS_PER_MS), ("us", NS_PER_US)] {
            if ns.is_multiple_of(scale) {
                return write!(f, "{}{}", ns / scale, unit);
            }
        }
        write!(f, "{ns}ns")
    }
}

impl FromStr for Duration {
    type Err = DurationParseError;

    /// Accepts `<number><unit>` with unit one of ns, us, µs, ms, s (optional whitespace between).
    /// A bare number is refused ([`DurationParseError::NoUnit`]) except `0`. Decimal fractions
    /// are allowed as long as the result is a whole number of nanoseconds (`1.5ms` yes, `1.5ns`
    /// no).
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let t = text.trim();
        if t.is_empty() {
            return Err(DurationParseError::Empty);
        }
        if t.starts_with('-') {
            return Err(DurationParseError::Negative(text.to_string()));
        }
        let split = t
            .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+'))
            .unwrap_or(t.len());
        let (num, unit) = (t[..split].trim(), t[split..].trim());
        let scale = match unit {
            "" if t[..split].bytes().all(|b| b == b'0' || b == b'.' || b == b'+') => 1,
            "" => return Err(DurationParseError::NoUnit(t.to_string())),
            "ns" => 1,
            "us" | "µs" | "μs" => NS_PER_US,
            "ms" => NS_PER_MS,
            "s" => NS_PER_S,
            _ => {
                return Err(DurationParseError::UnknownUnit {
                    text: text.to_string(),
                    unit: unit.to_string(),
                })
            }
        };
        let num = num.strip_prefix('+').unwrap_or(num);
        let (int_part, frac_part) = match num.split_once('.') {
            Some((i, f)) => (i, f),
            None => (num, ""),
        };
        let digits_ok = |s: &str| s.chars().all(|c| c.is_ascii_digit());
        if (int_part.is_empty() && frac_part.is_empty()) || !digits_ok(int_part) || !digits_ok(frac_part) {
            return Err(DurationParseError::NotANumber(text.to_string()));
        }
        let overflow = || DurationParseError::Overflow(text.to_string());
        let int: u64 = if int_part.is_empty() {
            0
        } else {
            int_part.parse().map_err(|_| overflow())?
        };
        let mut total = int.checked_mul(scale).ok_or_else(overflow)?;
        // Exact decimal arithmetic: each fractional digit is worth scale/10^k nanoseconds.
        // `place` is that worth before the digit (a power of ten, reaching 0 past the
        // nanosecond): a non-zero digit below 10 ns per unit is a fraction of a nanosecond.
        let mut place = scale;
        for d in frac_part.bytes().map(|b| u64::from(b - b'0')) {
            if d == 0 {
                place /= 10;
                continue;
            }
            if place < 10 {
                return Err(DurationParseError::Fractional(text.to_string()));
            }
            place /= 10;
            total = total.checked_add(d * place).ok_or_else(overflow)?;
        }
        Ok(Duration(total))
    }
}

impl Serialize for Duration {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// Serialisers for `--json` outputs, which give times as integer nanoseconds in fields named
/// `*_ns` (docs/formats/json.md), where a [`Duration`]'s own serialisation is the human text
/// with a unit that input files use. Use with `#[serde(rename = "…_ns", serialize_with = …)]`.
pub mod as_ns {
    use super::Duration;
    use serde::ser::{SerializeMap, SerializeSeq};
    use serde::Serializer;

    pub fn one<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(d.0)
    }

    /// `None` entries stay `null`.
    pub fn opt_list<S: Serializer>(v: &Option<Vec<Option<Duration>>>, s: S) -> Result<S::Ok, S::Error> {
        match v {
            None => s.serialize_none(),
            Some(items) => {
                let mut seq = s.serialize_seq(Some(items.len()))?;
                for d in items {
                    seq.serialize_element(&d.map(|d| d.0))?;
                }
                seq.end()
            }
        }
    }

    /// A (runtime, period) reservation as `{"runtime_ns", "period_ns"}`, or `null`.
    pub fn opt_reservation<S: Serializer>(v: &Option<(Duration, Duration)>, s: S) -> Result<S::Ok, S::Error> {
        match v {
            None => s.serialize_none(),
            Some((runtime, period)) => {
                let mut m = s.serialize_map(Some(2))?;
                m.serialize_entry("runtime_ns", &runtime.0)?;
                m.serialize_entry("period_ns", &period.0)?;
                m.end()
            }
        }
    }
}

impl<'de> Deserialize<'de> for Duration {
    /// Accepts a string with a unit, or 0. Integers other than 0 are refused for the same reason
    /// as bare numbers in text ([`DurationParseError::NoUnit`]).
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = Duration;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a duration with a unit, such as \"10ms\", \"250us\" or \"1.5s\"")
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Duration, E> {
                if v == 0 {
                    return Ok(Duration::ZERO);
                }
                Err(E::custom(format!(
                    "{v} has no unit: write \"{v}ms\", \"{v}us\", \"{v}ns\" or \"{v}s\""
                )))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Duration, E> {
                match u64::try_from(v) {
                    Ok(v) => self.visit_u64(v),
                    Err(_) => Err(E::custom(format!("negative duration {v}: durations must be ≥ 0"))),
                }
            }
            fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Duration, E> {
                Err(E::custom(format!(
                    "{v} has no unit: write \"{v}ms\", \"{v}us\" or \"{v}s\""
                )))
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Duration, E> {
                v.parse().map_err(E::custom)
            }
        }
        d.deserialize_any(V)
    }
}

/// Greatest common divisor (Euclid).
pub fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// Least common multiple, `None` on overflow (hyperperiods of random periods overflow quickly).
pub fn lcm(a: u64, b: u64) -> Option<u64> {
    if a == 0 || b == 0 {
        return Some(0);
    }
    (a / gcd(a, b)).checked_mul(b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parses_units() {
        assert_eq!("10ms".parse::<Duration>().unwrap(), Duration::from_ms(10));
        assert_eq!("250us".parse::<Duration>().unwrap(), Duration::from_us(250));
        assert_eq!("250 µs".parse::<Duration>().unwrap(), Duration::from_us(250));
        assert_eq!("1.5s".parse::<Duration>().unwrap(), Duration::from_ms(1500));
        assert_eq!("0.000001ms".parse::<Duration>().unwrap(), Duration(1));
        assert_eq!("42ns".parse::<Duration>().unwrap(), Duration(42));
        assert_eq!("0".parse::<Duration>().unwrap(), Duration::ZERO);
        assert_eq!("0.0".parse::<Duration>().unwrap(), Duration::ZERO);
        assert_eq!(".5ms".parse::<Duration>().unwrap(), Duration::from_us(500));
    }

    #[test]
    fn rejects_bad_text() {
        let e = "10".parse::<Duration>().unwrap_err();
        assert_eq!(e, DurationParseError::NoUnit("10".into()));
        assert_eq!(e.to_string(), "`10` has no unit: write 10s, 10ms, 10us or 10ns");
        assert!(matches!(
            "1.5".parse::<Duration>(),
            Err(DurationParseError::NoUnit(_))
        ));
        assert!(matches!(
            "-5ms".parse::<Duration>(),
            Err(DurationParseError::Negative(_))
        ));
        assert!(matches!(
            "5min".parse::<Duration>(),
            Err(DurationParseError::UnknownUnit { .. })
        ));
        assert!(matches!(
            "1.5ns".parse::<Duration>(),
            Err(DurationParseError::Fractional(_))
        ));
        assert!(matches!(
            "ms".parse::<Duration>(),
            Err(DurationParseError::NotANumber(_))
        ));
        assert!(matches!(
            "1.2.3ms".parse::<Duration>(),
            Err(DurationParseError::NotANumber(_))
        ));
        assert!(matches!(
            "99999999999999s".parse::<Duration>(),
            Err(DurationParseError::Overflow(_))
        ));
        assert!(matches!("".parse::<Duration>(), Err(DurationParseError::Empty)));
    }

    // Found by the fuzz harness (duration_text): a non-zero digit after more zeros than the
    // unit has nanosecond digits was dropped (`.00000001` read as 0 ns, `1.01ns` as 1 ns).
    // (Bare numbers now need a unit; the case keeps its digits with `ns`.)
    #[test]
    fn fuzz_regression_sub_nanosecond_digit_after_zeros() {
        for text in [".00000001ns", "1.01ns", "1.0001ns", "1.00001us", "2.0000000001s"] {
            assert!(
                matches!(text.parse::<Duration>(), Err(DurationParseError::Fractional(_))),
                "{text}: {:?}",
                text.parse::<Duration>()
            );
        }
        assert_eq!("1.000000000000s".parse::<Duration>(), Ok(Duration::from_secs(1)));
        assert_eq!("1.00ns".parse::<Duration>(), Ok(Duration(1)));
    }

    #[test]
    fn formats_exactly() {
        assert_eq!(Duration::from_ms(10).to_string(), "10ms");
        assert_eq!(Duration(1_500_001).to_string(), "1500001ns");
        assert_eq!(Duration::from_secs(2).to_string(), "2s");
        assert_eq!(Duration::ZERO.to_string(), "0ns");
    }

    #[test]
    fn approx_for_tables() {
        assert_eq!(Duration::from_ms(10).approx(), "10ms");
        assert_eq!(Duration(6_439_665).approx(), "6.440ms");
        assert_eq!(Duration(18_270_922).approx(), "18.27ms");
        assert_eq!(Duration(1_234_567_891).approx(), "1.235s");
        assert_eq!(Duration(25_263_000).approx(), "25263us");
        assert_eq!(Duration(123_456_789).approx(), "123.5ms");
    }

    #[test]
    fn lcm_overflow_is_none() {
        assert_eq!(lcm(4, 6), Some(12));
        assert_eq!(lcm(u64::MAX - 1, u64::MAX - 2), None);
    }

    proptest! {
        #[test]
        fn display_roundtrips(ns in any::<u64>()) {
            let d = Duration(ns);
            prop_assert_eq!(d.to_string().parse::<Duration>().unwrap(), d);
        }
    }
}
