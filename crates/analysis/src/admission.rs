//! SCHED_DEADLINE admission control as the kernel computes it (`__dl_overflow()` in
//! kernel/sched/deadline.c; Documentation/scheduler/sched-deadline.rst §5).
//!
//! Bandwidths are 20-bit fixed point (`to_ratio(period, runtime) = (runtime << 20) / period`).
//! A new reservation is refused with EBUSY when
//! `cap_scale(bw, cap) < total_bw − old_bw + new_bw`, where `bw = to_ratio(sched_rt_period_us,
//! sched_rt_runtime_us)` (0.95 by default), `cap` is the root domain's summed CPU capacity
//! (1024 per full CPU) and `cap_scale(v, c) = (v·c) >> 10`. Since Linux 6.12 every CPU's fair
//! server (`dl_server`, 50 ms every 1 s by default) is itself a deadline entity counted in
//! `total_bw`, so on m CPUs the space left for tasks is m·(0.95 − 0.05).
//! Measured on the development VM (Linux 6.18, 2 CPUs): 18 reservations of 1 ms / 10 ms are
//! admitted and the 19th is refused, as this model predicts (see docs/analysis.md).
//!
//! Admission is not a schedulability test for global EDF: it guarantees bounded tardiness only
//! (Devi & Anderson); for partitioned EDF on exclusive cpusets it is the exact D = T test.

use pacer_model::reservation::{dl_total_limit, fair_servers_bw, to_ratio};
use pacer_model::{Duration, Reservation, CAPACITY_SCALE};
use serde::Serialize;

use crate::outcome::{Outcome, Verdict};
use crate::Timing;

/// The kernel settings admission depends on.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AdmissionConfig {
    /// Capacity of each CPU in the root domain (1024 = full CPU).
    pub capacities: Vec<u32>,
    /// `kernel.sched_rt_runtime_us`; `None` for -1 (no limit: admission control disabled).
    pub rt_runtime_us: Option<u64>,
    /// `kernel.sched_rt_period_us`.
    pub rt_period_us: u64,
    /// Per-CPU fair-server reservation (runtime, period), `None` on kernels before 6.12 or when
    /// the server is disabled.
    #[serde(serialize_with = "pacer_model::time::as_ns::opt_reservation")]
    pub fair_server: Option<(Duration, Duration)>,
}

impl AdmissionConfig {
    /// Kernel defaults for `cpus` full-capacity CPUs (Linux ≥ 6.12).
    pub fn linux_default(cpus: usize) -> Self {
        AdmissionConfig {
            capacities: vec![CAPACITY_SCALE; cpus],
            rt_runtime_us: Some(950_000),
            rt_period_us: 1_000_000,
            fair_server: Some((Duration::from_ms(50), Duration::from_secs(1))),
        }
    }

    /// Summed capacity of the root domain (the kernel's `dl_bw_capacity()`).
    pub fn capacity(&self) -> u64 {
        self.capacities.iter().map(|&c| c as u64).sum()
    }

    /// Per-CPU limit `to_ratio(rt_period, rt_runtime)`, `None` when unlimited.
    pub fn bw_limit(&self) -> Option<u64> {
        self.rt_runtime_us.map(|r| to_ratio(self.rt_period_us, r))
    }

    /// The fixed-point bandwidth available to all deadline entities: cap_scale(bw, cap).
    pub fn total_limit(&self) -> Option<u64> {
        dl_total_limit(self.capacity(), self.rt_runtime_us, self.rt_period_us)
    }

    /// Bandwidth already taken by fair servers (one per CPU).
    pub fn reserved_by_servers(&self) -> u64 {
        fair_servers_bw(
            self.capacities.len(),
            self.fair_server.map(|(rt, p)| (rt.ns(), p.ns())),
        )
    }
}

/// Why one reservation would not be accepted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "error", rename_all = "snake_case")]
pub enum Refusal {
    /// `sched_setattr` would fail with EINVAL.
    Invalid { message: String },
    /// `sched_setattr` would fail with EBUSY (admission control).
    Busy,
}

/// The outcome of admitting reservations one after another, as successive `sched_setattr` calls.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AdmissionReport {
    /// For each reservation in order: `None` if admitted, otherwise why not.
    pub refused: Vec<Option<Refusal>>,
    /// Fixed-point total bandwidth after the admitted ones (including fair servers).
    pub total_bw: u64,
    /// Fixed-point limit, `None` if unlimited.
    pub limit: Option<u64>,
}

impl AdmissionReport {
    pub fn all_admitted(&self) -> bool {
        self.refused.iter().all(Option::is_none)
    }
    pub fn first_refused(&self) -> Option<usize> {
        self.refused.iter().position(Option::is_some)
    }
}

/// Admits `reservations` in order against `cfg`, exactly as successive `sched_setattr` calls would.
pub fn admit(cfg: &AdmissionConfig, reservations: &[Reservation]) -> AdmissionReport {
    let limit = cfg.total_limit();
    let mut total = cfg.reserved_by_servers();
    let refused = reservations
        .iter()
        .map(|r| {
            if let Err(e) = r.validate() {
                return Some(Refusal::Invalid {
                    message: e.to_string(),
                });
            }
            let bw = r.bw_fixed();
            match limit {
                Some(l) if l < total + bw => Some(Refusal::Busy),
                _ => {
                    total += bw;
                    None
                }
            }
        })
        .collect();
    AdmissionReport {
        refused,
        total_bw: total,
        limit,
    }
}

/// Fixed-point bandwidth as a fraction of one CPU.
pub fn bw_to_f64(bw: u64) -> f64 {
    bw as f64 / (1u64 << pacer_model::reservation::BW_SHIFT) as f64
}

/// Admission of a task set with runtime = C, deadline = D, period = T.
pub fn test(ts: &[Timing], cfg: &AdmissionConfig) -> Outcome {
    let rs: Vec<Reservation> = ts
        .iter()
        .map(|t| Reservation::new(Duration(t.c), Duration(t.d), Duration(t.t)))
        .collect();
    let report = admit(cfg, &rs);
    let tasks_bw = report.total_bw - cfg.reserved_by_servers();
    let available = report.limit.map(|l| l.saturating_sub(cfg.reserved_by_servers()));
    let mut o = Outcome::new(match report.first_refused() {
        None => Verdict::Schedulable,
        Some(_) => Verdict::NotProven,
    });
    o.value = Some(bw_to_f64(
        rs.iter()
            .filter(|r| r.validate().is_ok())
            .map(Reservation::bw_fixed)
            .sum(),
    ));
    o.bound = available.map(bw_to_f64);
    o.failing_task = report.first_refused();
    o.note = Some(match report.first_refused() {
        None => format!(
            "all {} reservations admitted; tasks use {:.4} of {} CPUs",
            rs.len(),
            bw_to_f64(tasks_bw),
            cfg.capacities.len()
        ),
        Some(i) => match &report.refused[i] {
            Some(Refusal::Invalid { message }) => format!("task {i}: EINVAL: {message}"),
            _ => format!(
                "task {i} refused with EBUSY; {} of {} admitted",
                report.refused.iter().filter(|r| r.is_none()).count(),
                rs.len()
            ),
        },
    });
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(x: u64) -> Duration {
        Duration::from_ms(x)
    }

    #[test]
    fn matches_measured_vm_behaviour() {
        // 2 CPUs, defaults: 18 × (1 ms / 10 ms) fit, the 19th is refused (measured on Linux 6.18).
        let cfg = AdmissionConfig::linux_default(2);
        let rs = vec![Reservation::new(ms(1), ms(10), ms(10)); 19];
        let rep = admit(&cfg, &rs);
        assert_eq!(rep.first_refused(), Some(18));
        assert_eq!(rep.refused[18], Some(Refusal::Busy));
    }

    #[test]
    fn no_fair_server_and_unlimited() {
        let mut cfg = AdmissionConfig::linux_default(2);
        cfg.fair_server = None;
        let rs = vec![Reservation::new(ms(1), ms(10), ms(10)); 19];
        assert!(admit(&cfg, &rs).all_admitted());
        let rs20 = vec![Reservation::new(ms(1), ms(10), ms(10)); 20];
        assert_eq!(admit(&cfg, &rs20).first_refused(), Some(19));
        cfg.rt_runtime_us = None;
        assert!(admit(&cfg, &vec![Reservation::new(ms(9), ms(10), ms(10)); 50]).all_admitted());
    }

    #[test]
    fn invalid_parameters_are_einval() {
        let cfg = AdmissionConfig::linux_default(1);
        let rep = admit(&cfg, &[Reservation::new(Duration(10), ms(1), ms(1))]);
        assert!(matches!(rep.refused[0], Some(Refusal::Invalid { .. })));
    }

    #[test]
    fn later_smaller_reservation_can_still_fit() {
        let cfg = AdmissionConfig::linux_default(1);
        let rs = [
            Reservation::new(ms(8), ms(10), ms(10)),
            Reservation::new(ms(5), ms(10), ms(10)),
            Reservation::new(ms(1), ms(10), ms(10)),
        ];
        let rep = admit(&cfg, &rs);
        assert_eq!(rep.refused[1], Some(Refusal::Busy));
        assert_eq!(rep.refused[2], None);
    }
}
