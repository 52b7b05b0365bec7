//! SCHED_DEADLINE reservations (runtime, deadline, period, flags) and the kernel's parameter rules.
//!
//! The rules are those of `__checkparam_dl()` in `kernel/sched/deadline.c` and of
//! Documentation/scheduler/sched-deadline.rst: runtime ≥ 2^DL_SCALE ns (1024 ns),
//! runtime ≤ deadline ≤ period (period 0 means period = deadline), the top bit of deadline and
//! period clear, and period within the `kernel.sched_deadline_period_{min,max}_us` sysctls.

use serde::{Deserialize, Serialize};

use crate::time::Duration;

/// `SCHED_FLAG_RESET_ON_FORK`: children start as SCHED_OTHER (needed for a reserved thread to fork).
pub const SCHED_FLAG_RESET_ON_FORK: u64 = 0x01;
/// `SCHED_FLAG_RECLAIM`: GRUB reclaiming of unused bandwidth.
pub const SCHED_FLAG_RECLAIM: u64 = 0x02;
/// `SCHED_FLAG_DL_OVERRUN`: SIGXCPU on runtime overrun.
pub const SCHED_FLAG_DL_OVERRUN: u64 = 0x04;

/// Smallest runtime the kernel accepts: 1 << DL_SCALE ns.
pub const DL_MIN_RUNTIME_NS: u64 = 1 << 10;
/// Default `kernel.sched_deadline_period_min_us` (100 µs).
pub const DEFAULT_PERIOD_MIN: Duration = Duration::from_us(100);
/// Default `kernel.sched_deadline_period_max_us` (2^22 µs ≈ 4.19 s).
pub const DEFAULT_PERIOD_MAX: Duration = Duration::from_us(1 << 22);

/// Flags of a reservation, as in `sched_attr.sched_flags`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ReservationFlags {
    #[serde(default)]
    pub reset_on_fork: bool,
    #[serde(default)]
    pub reclaim: bool,
    #[serde(default)]
    pub overrun: bool,
}

impl ReservationFlags {
    /// The `sched_flags` bit mask.
    pub fn bits(self) -> u64 {
        (self.reset_on_fork as u64 * SCHED_FLAG_RESET_ON_FORK)
            | (self.reclaim as u64 * SCHED_FLAG_RECLAIM)
            | (self.overrun as u64 * SCHED_FLAG_DL_OVERRUN)
    }
}

/// A CBS / SCHED_DEADLINE reservation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reservation {
    pub runtime: Duration,
    pub deadline: Duration,
    pub period: Duration,
    #[serde(default)]
    pub flags: ReservationFlags,
}

/// Why the kernel would refuse a reservation's parameters (EINVAL), before admission control.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReservationError {
    #[error("runtime {0} is below the kernel minimum of 1024ns")]
    RuntimeTooSmall(Duration),
    #[error("deadline must be > 0")]
    ZeroDeadline,
    #[error("runtime {runtime} exceeds deadline {deadline} (need runtime ≤ deadline ≤ period)")]
    RuntimeAboveDeadline { runtime: Duration, deadline: Duration },
    #[error("deadline {deadline} exceeds period {period} (need runtime ≤ deadline ≤ period)")]
    DeadlineAbovePeriod { deadline: Duration, period: Duration },
    #[error(
        "period {period} outside the allowed range [{min}, {max}] (sched_deadline_period_{{min,max}}_us)"
    )]
    PeriodOutOfRange {
        period: Duration,
        min: Duration,
        max: Duration,
    },
    #[error("deadline or period has its top bit set")]
    TopBitSet,
}

impl Reservation {
    pub fn new(runtime: Duration, deadline: Duration, period: Duration) -> Self {
        Reservation {
            runtime,
            deadline,
            period,
            flags: ReservationFlags::default(),
        }
    }

    /// The period the kernel uses: `period`, or `deadline` when period is 0.
    pub fn effective_period(&self) -> Duration {
        if self.period.is_zero() {
            self.deadline
        } else {
            self.period
        }
    }

    /// runtime / period as a float (reporting only; admission uses [`Reservation::bw_fixed`]).
    pub fn bandwidth(&self) -> f64 {
        self.runtime.0 as f64 / self.effective_period().0 as f64
    }

    /// The kernel's fixed-point bandwidth `to_ratio(period, runtime)` = (runtime << 20) / period.
    pub fn bw_fixed(&self) -> u64 {
        to_ratio(self.effective_period().0, self.runtime.0)
    }

    /// `__checkparam_dl()` with the given period limits.
    pub fn validate_with(&self, period_min: Duration, period_max: Duration) -> Result<(), ReservationError> {
        if self.deadline.is_zero() {
            return Err(ReservationError::ZeroDeadline);
        }
        if self.runtime.0 < DL_MIN_RUNTIME_NS {
            return Err(ReservationError::RuntimeTooSmall(self.runtime));
        }
        if (self.deadline.0 | self.period.0) & (1 << 63) != 0 {
            return Err(ReservationError::TopBitSet);
        }
        let period = self.effective_period();
        if period < period_min || period > period_max {
            return Err(ReservationError::PeriodOutOfRange {
                period,
                min: period_min,
                max: period_max,
            });
        }
        if self.runtime > self.deadline {
            return Err(ReservationError::RuntimeAboveDeadline {
                runtime: self.runtime,
                deadline: self.deadline,
            });
        }
        if self.deadline > period {
            return Err(ReservationError::DeadlineAbovePeriod {
                deadline: self.deadline,
                period,
            });
        }
        Ok(())
    }

    /// `__checkparam_dl()` with the kernel's default period limits.
    pub fn validate(&self) -> Result<(), ReservationError> {
        self.validate_with(DEFAULT_PERIOD_MIN, DEFAULT_PERIOD_MAX)
    }
}

/// BW_SHIFT of kernel/sched/sched.h: bandwidths are 20-bit fixed point.
pub const BW_SHIFT: u32 = 20;

/// The kernel's `to_ratio(period, runtime)`: runtime/period in BW_SHIFT fixed point.
/// A period of 0 means "no limit" in the kernel's rt-bandwidth use and maps to the full unit.
pub fn to_ratio(period: u64, runtime: u64) -> u64 {
    if period == 0 {
        return 1 << BW_SHIFT;
    }
    (((runtime as u128) << BW_SHIFT) / period as u128) as u64
}

/// `SCHED_CAPACITY_SHIFT`: capacities are on the 1024 scale.
const CAPACITY_SHIFT: u32 = 10;

/// The SCHED_DEADLINE bandwidth admission control allows on a root domain, in BW_SHIFT fixed
/// point: `cap_scale(to_ratio(rt_period, rt_runtime), Σ capacity)` as `__dl_overflow()` computes
/// it; `None` when `sched_rt_runtime_us` is -1 (no limit). Fair servers are not subtracted here
/// (see [`fair_servers_bw`]): the kernel counts them in `total_bw`, like any reservation.
pub fn dl_total_limit(total_capacity: u64, rt_runtime_us: Option<u64>, rt_period_us: u64) -> Option<u64> {
    rt_runtime_us.map(|r| (to_ratio(rt_period_us, r) * total_capacity) >> CAPACITY_SHIFT)
}

/// Bandwidth held by one fair server (`dl_server`, Linux ≥ 6.12) per CPU, BW_SHIFT fixed point;
/// `fair_server` is (runtime, period) in ns, `None` on kernels without it.
pub fn fair_servers_bw(cpus: usize, fair_server: Option<(u64, u64)>) -> u64 {
    fair_server.map_or(0, |(rt, p)| to_ratio(p, rt) * cpus as u64)
}

/// The default fair server: 50 ms every 1 s.
pub const DEFAULT_FAIR_SERVER: (u64, u64) = (50_000_000, 1_000_000_000);

#[cfg(test)]
mod tests {
    use super::*;

    fn r(rt: u64, dl: u64, p: u64) -> Reservation {
        Reservation::new(Duration::from_us(rt), Duration::from_us(dl), Duration::from_us(p))
    }

    #[test]
    fn kernel_parameter_rules() {
        assert!(r(1000, 5000, 10000).validate().is_ok());
        assert!(matches!(
            Reservation::new(Duration(1000), Duration::from_ms(1), Duration::from_ms(1)).validate(),
            Err(ReservationError::RuntimeTooSmall(_))
        ));
        assert!(matches!(
            r(6000, 5000, 10000).validate(),
            Err(ReservationError::RuntimeAboveDeadline { .. })
        ));
        assert!(matches!(
            r(1000, 11000, 10000).validate(),
            Err(ReservationError::DeadlineAbovePeriod { .. })
        ));
        assert!(matches!(
            r(10, 50, 50).validate(),
            Err(ReservationError::PeriodOutOfRange { .. })
        ));
        assert!(matches!(
            r(10, 0, 50).validate(),
            Err(ReservationError::ZeroDeadline)
        ));
        // period 0 means period = deadline
        assert!(r(1000, 5000, 0).validate().is_ok());
        assert_eq!(r(1000, 5000, 0).effective_period(), Duration::from_us(5000));
    }

    #[test]
    fn admission_limit_matches_the_measured_vm() {
        // 2 CPUs, defaults: 18 reservations of 0.1 fit, 19 do not (measured on Linux 6.18).
        let avail = dl_total_limit(2048, Some(950_000), 1_000_000).unwrap()
            - fair_servers_bw(2, Some(DEFAULT_FAIR_SERVER));
        let r = Reservation::new(Duration::from_ms(1), Duration::from_ms(10), Duration::from_ms(10));
        assert!(18 * r.bw_fixed() <= avail && 19 * r.bw_fixed() > avail);
        assert_eq!(dl_total_limit(2048, None, 1_000_000), None);
    }

    #[test]
    fn fixed_point_bandwidth() {
        assert_eq!(r(500, 1000, 1000).bw_fixed(), 1 << 19);
        assert_eq!(to_ratio(1_000_000, 950_000), 996_147);
        let f = ReservationFlags {
            reset_on_fork: true,
            reclaim: true,
            overrun: false,
        };
        assert_eq!(f.bits(), 0x03);
    }
}
