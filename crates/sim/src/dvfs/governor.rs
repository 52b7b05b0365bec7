//! cpufreq governors of a frequency domain (cluster): `performance`, `powersave`, `userspace`
//! ([`Governor::Fixed`]) and `schedutil` (kernel/sched/cpufreq_schedutil.c) driven by the
//! scheduler's per-class utilisation, with GRUB-PA for the deadline class.
//!
//! schedutil, as modelled (Documentation/scheduler/schedutil.rst; adaptive-deadline-audio-android.txt
//! §4.3 and §5.2):
//!
//! - per CPU, demand = dl_bw + headroom · util, in capacity units (1024 = the biggest CPU at f_max):
//!   - dl_bw = `cpu_bw_dl()` = running_bw · 1024 >> 20, the GRUB active utilisation of the CPU's
//!     SCHED_DEADLINE threads (GRUB-PA: reserved bandwidth, known as soon as a reservation is
//!     active, so a bigger reservation raises the OPP before its job runs);
//!   - util = the rt + fair utilisation tracked by PELT (rt and fair run queues) or by WALT
//!     (busy time of rt and fair threads), see [`UtilSignal`];
//!   - with `rt_at_max` (mainline without uclamp: `effective_cpu_util()` returns the maximum when
//!     `rt_rq_is_runnable()`), any runnable rt thread asks for the highest OPP; Android, whose
//!     WALT tracks rt time like any other, runs without it;
//!   - headroom multiplies the tracked util only: mainline ≥ 6.8 applies its 1.25 (`map_util_perf()`)
//!     to the util and keeps the deadline bandwidth as a floor without headroom. Kernels up to 6.7
//!     (and the HiKey 4.9 kernels of the paper) applied 1.25 to the whole sum.
//! - the cluster's OPP is the smallest whose capacity meets the largest demand of its CPUs
//!   (`get_next_freq()` then `cpufreq_driver_resolve_freq()` with `CPUFREQ_RELATION_L`), and never
//!   below the floor set through `Sim::set_frequency` (`scaling_min_freq`);
//! - the governor runs on the events the kernel calls `cpufreq_update_util()` from: enqueue,
//!   dequeue and context switches of the cluster's CPUs, the scheduler tick of busy CPUs, and every
//!   change of a CPU's running_bw (`__add_running_bw()` / `__sub_running_bw()`);
//! - rate limit (`rate_limit_us`, `sugov_should_update_freq()`): no new frequency until
//!   `rate_limit_ns` after the last change, except when a CPU's deadline bandwidth grew since the
//!   governor last looked (`ignore_dl_rate_limit()`) or the floor changed (`limits_changed`). The
//!   kernel takes the default from the driver's `transition_delay_us` (500 µs for intel_pstate) or
//!   1000 × its transition latency; we default to 500 µs.
//!
//! Not modelled: util_est, uclamp, IO-wait boost, the "busy CPU does not lower the frequency" hold
//! of single-CPU policies, Android's separate up/down rate limits.

use pacer_model::Opp;
use serde::{Deserialize, Serialize};

pub use super::walt::WaltPolicy;

/// The governor of one cluster.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "governor", rename_all = "snake_case")]
pub enum Governor {
    /// The highest OPP, always.
    Performance,
    /// The lowest OPP (raised by a floor set with `Sim::set_frequency`).
    Powersave,
    /// The `userspace` governor at `khz`, which must be one of the cluster's OPPs;
    /// `Sim::set_frequency` changes it (`scaling_setspeed`).
    Fixed { khz: u32 },
    /// `schedutil`.
    Schedutil(SchedutilConfig),
}

/// Settings of a schedutil governor.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SchedutilConfig {
    /// What tracks rt and fair utilisation.
    pub signal: UtilSignal,
    /// A runnable rt thread asks for the highest OPP (mainline); `false` as on Android.
    pub rt_at_max: bool,
    /// Factor on the tracked rt/fair util (≥ 1 in practice; mainline 1.25). The default 1.0 maps
    /// demand to the smallest OPP that meets it. Beware: with 1.0 a CPU saturated by rt/fair work
    /// under WALT shows util = its current capacity and never asks for more (PELT's clock
    /// invariance still lets it climb, slowly); 1.25 is what makes the kernel step up.
    pub headroom: f64,
    /// Minimum time between two frequency changes, ns (`rate_limit_us` · 1000).
    pub rate_limit_ns: u64,
}

/// The utilisation signal of rt and fair threads.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "signal", rename_all = "snake_case")]
pub enum UtilSignal {
    /// PELT (32-period half-life, see [`crate::dvfs::pelt`]); `multiplier` speeds its clock up
    /// (Android's `sched_pelt_multiplier`: 1 → 32 periods ≈ 33.5 ms half-life, 2 → 16, 4 → 8).
    Pelt { multiplier: u32 },
    /// WALT (see [`crate::dvfs::walt`]).
    Walt {
        window_ns: u64,
        hist_size: usize,
        policy: WaltPolicy,
    },
}

impl UtilSignal {
    /// Mainline PELT.
    pub fn pelt() -> Self {
        UtilSignal::Pelt { multiplier: 1 }
    }

    /// WALT's defaults: 20 ms windows, 5 windows of history, max(recent, average).
    pub fn walt() -> Self {
        UtilSignal::Walt {
            window_ns: super::walt::DEFAULT_WINDOW_NS,
            hist_size: super::walt::DEFAULT_HIST_SIZE,
            policy: WaltPolicy::MaxRecentAvg,
        }
    }
}

impl Default for SchedutilConfig {
    /// PELT, rt at the highest OPP, headroom 1.0 (the smallest OPP that meets demand), 500 µs.
    fn default() -> Self {
        SchedutilConfig {
            signal: UtilSignal::pelt(),
            rt_at_max: true,
            headroom: 1.0,
            rate_limit_ns: 500_000,
        }
    }
}

impl SchedutilConfig {
    /// Mainline schedutil: PELT, rt at the highest OPP, headroom 1.25, 500 µs.
    pub fn mainline() -> Self {
        SchedutilConfig {
            headroom: 1.25,
            ..SchedutilConfig::default()
        }
    }

    /// schedutil as on the paper's Android (HiKey960, EAS 4.9): WALT with 20 ms windows, rt
    /// utilisation tracked by WALT rather than forced to the top, headroom 1.25, 500 µs.
    pub fn android_walt() -> Self {
        SchedutilConfig {
            signal: UtilSignal::walt(),
            rt_at_max: false,
            headroom: 1.25,
            rate_limit_ns: 500_000,
        }
    }

    /// Checks the settings; the message names the field.
    pub fn validate(&self) -> Result<(), String> {
        if !(self.headroom.is_finite() && self.headroom > 0.0 && self.headroom <= 16.0) {
            return Err(format!(
                "headroom: is {}, expected a finite value in (0, 16]",
                self.headroom
            ));
        }
        match self.signal {
            UtilSignal::Pelt { multiplier } if !(1..=64).contains(&multiplier) => {
                Err(format!("signal.multiplier: is {multiplier}, expected 1..=64"))
            }
            UtilSignal::Walt { window_ns, .. } if window_ns < 1_000 => Err(format!(
                "signal.window_ns: is {window_ns}, expected at least 1000 ns"
            )),
            UtilSignal::Walt { hist_size, .. } if !(1..=super::walt::WALT_HIST_MAX).contains(&hist_size) => {
                Err(format!(
                    "signal.hist_size: is {hist_size}, expected 1..={}",
                    super::walt::WALT_HIST_MAX
                ))
            }
            _ => Ok(()),
        }
    }
}

/// Capacity of a CPU whose capacity at the top OPP is `cpu_capacity`, at OPP `idx` of `opps`
/// (the table's capacities are relative to its top entry).
pub fn opp_capacity(opps: &[Opp], idx: usize, cpu_capacity: u32) -> u64 {
    let top = opps.last().map_or(1, |o| o.capacity.max(1)) as u64;
    let c = opps.get(idx).map_or(top, |o| o.capacity as u64);
    (cpu_capacity as u64 * c / top).max(1)
}

/// The smallest OPP at which a CPU of top capacity `cpu_capacity` offers at least `demand`
/// (capacity units); the highest OPP when none does.
pub fn opp_for_demand(opps: &[Opp], cpu_capacity: u32, demand: u64) -> usize {
    (0..opps.len())
        .find(|&i| opp_capacity(opps, i, cpu_capacity) >= demand)
        .unwrap_or(opps.len().saturating_sub(1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use pacer_model::Platform;

    #[test]
    fn smallest_opp_meeting_demand() {
        let p = Platform::hikey960_big(1);
        let o = &p.clusters[0].opps; // capacities 391 616 782 915 1024
        assert_eq!(opp_for_demand(o, 1024, 0), 0);
        assert_eq!(opp_for_demand(o, 1024, 391), 0);
        assert_eq!(opp_for_demand(o, 1024, 392), 1);
        assert_eq!(opp_for_demand(o, 1024, 616), 1);
        assert_eq!(opp_for_demand(o, 1024, 700), 2);
        assert_eq!(opp_for_demand(o, 1024, 901), 3);
        assert_eq!(opp_for_demand(o, 1024, 916), 4);
        assert_eq!(opp_for_demand(o, 1024, 5000), 4);
        // A half-size CPU with the same table: capacities 195 308 391 457 512.
        assert_eq!(opp_for_demand(o, 512, 300), 1);
        assert_eq!(opp_capacity(o, 4, 512), 512);
    }

    #[test]
    fn presets_and_validation() {
        assert!(SchedutilConfig::default().validate().is_ok());
        assert!(SchedutilConfig::android_walt().validate().is_ok());
        let mut c = SchedutilConfig::mainline();
        c.headroom = f64::NAN;
        assert!(c.validate().unwrap_err().starts_with("headroom"));
        c = SchedutilConfig::android_walt();
        c.signal = UtilSignal::Walt {
            window_ns: 20_000_000,
            hist_size: 0,
            policy: WaltPolicy::Recent,
        };
        assert!(c.validate().unwrap_err().starts_with("signal.hist_size"));
    }
}
