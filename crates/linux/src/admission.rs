//! The SCHED_DEADLINE admission cap, read without disturbing the kernel's accounting.
//!
//! The cap is `sched_rt_runtime_us / sched_rt_period_us` per CPU (sched-deadline.rst §5.1). The
//! obvious way to learn it, reading those two sysctls, is harmful on current kernels: on Linux
//! 6.18 (measured on pacer's VM, docs/linux.md "Reading sched_rt_*_us rebuilds the root
//! domains") every *read* of either file goes through `sched_rt_handler()`, which rebuilds the
//! sched domains and recomputes each root domain's `dl_bw->total_bw` from the tasks that are
//! SCHED_DEADLINE at that instant. A SCHED_DEADLINE thread that has just exited with its
//! 0-lag time still ahead is no longer a task then, so the rebuild drops its bandwidth; when its
//! inactive timer fires a moment later the kernel subtracts that bandwidth a second time.
//! `total_bw` ends below its true value (it can go negative), and because admission compares it
//! as an unsigned number, every later reservation on the machine is refused with EBUSY.
//!
//! pacer used to read the sysctls at every controller tick, so a controlled program that exited
//! while reserved corrupted the accounting in 6 runs out of 6 (issue 12). Now the cap is read
//! once per process, preferably from the scheduler's debugfs file (`.dl_bw->bw`, which reading
//! does not rebuild anything), and from the sysctls only when debugfs is not mounted.

use std::sync::OnceLock;

use pacer_model::reservation::{dl_total_limit, fair_servers_bw, BW_SHIFT, DEFAULT_FAIR_SERVER};

use crate::sched_debug::{parse_sched_debug, SCHED_DEBUG};

/// Where the cap came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CapSource {
    /// `.dl_bw->bw` of the scheduler's debugfs file.
    Debugfs,
    /// `kernel.sched_rt_{runtime,period}_us`, read once.
    Sysctl,
    /// Neither was readable: the kernel's defaults (950 ms / 1 s) are assumed.
    Default,
}

/// The per-CPU admission cap.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct AdmissionCap {
    /// Bandwidth one CPU may admit, BW_SHIFT fixed point; `None` when admission control is off
    /// (`sched_rt_runtime_us = -1`).
    pub per_cpu_bw: Option<u64>,
    pub source: CapSource,
}

impl AdmissionCap {
    /// Σ Q/P that reservations may hold on `cpus` CPUs, less one default fair server per CPU
    /// (Linux ≥ 6.12 counts them in `total_bw`); `cpus` itself when admission control is off.
    pub fn reservable(&self, cpus: usize) -> f64 {
        let Some(bw) = self.per_cpu_bw else {
            return cpus as f64;
        };
        let total = bw * cpus as u64;
        let avail = total.saturating_sub(fair_servers_bw(cpus, Some(DEFAULT_FAIR_SERVER)));
        avail as f64 / (1u64 << BW_SHIFT) as f64
    }
}

static CAP: OnceLock<AdmissionCap> = OnceLock::new();

/// The admission cap, read on the first call and remembered for the life of the process (the
/// sysctls change only when an administrator writes them).
pub fn cap() -> AdmissionCap {
    *CAP.get_or_init(read_cap)
}

fn read_cap() -> AdmissionCap {
    if let Some(bw) = std::fs::read_to_string(SCHED_DEBUG)
        .ok()
        .and_then(|t| parse_sched_debug(&t).first().map(|s| s.bw))
    {
        // The kernel prints `dl_bw->bw` as an unsigned long: -1 (no limit) is u64::MAX.
        let per_cpu_bw = (bw != u64::MAX).then_some(bw);
        return AdmissionCap {
            per_cpu_bw,
            source: CapSource::Debugfs,
        };
    }
    let read = |p: &str| -> Option<i64> { std::fs::read_to_string(p).ok()?.trim().parse().ok() };
    match (
        read("/proc/sys/kernel/sched_rt_runtime_us"),
        read("/proc/sys/kernel/sched_rt_period_us"),
    ) {
        (Some(runtime), Some(period)) => AdmissionCap {
            per_cpu_bw: dl_total_limit(1024, u64::try_from(runtime).ok(), period.max(1) as u64),
            source: CapSource::Sysctl,
        },
        _ => AdmissionCap {
            per_cpu_bw: dl_total_limit(1024, Some(950_000), 1_000_000),
            source: CapSource::Default,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reservable_subtracts_the_fair_servers() {
        // 0.95 per CPU as the kernel computes it (996147), two CPUs, two 0.05 fair servers.
        let cap = AdmissionCap {
            per_cpu_bw: Some(996_147),
            source: CapSource::Debugfs,
        };
        assert!((cap.reservable(2) - 1.8).abs() < 1e-4, "{}", cap.reservable(2));
        let off = AdmissionCap {
            per_cpu_bw: None,
            source: CapSource::Sysctl,
        };
        assert_eq!(off.reservable(4), 4.0);
    }

    #[test]
    fn the_cap_is_read_once() {
        let a = cap();
        let b = cap();
        assert_eq!(a, b);
        assert!(a.per_cpu_bw.is_none_or(|bw| bw <= 1 << BW_SHIFT));
    }
}
