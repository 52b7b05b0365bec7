//! DVFS and energy (issue 6): frequency domains (clusters) with OPP tables, their governors, the
//! utilisation signals schedutil reads (PELT, WALT, GRUB running bandwidth), and the per-CPU
//! frequency residency that energy is computed from.
//!
//! - [`governor`]: `performance`, `powersave`, `userspace` ([`Governor::Fixed`]), `schedutil`;
//! - [`pelt`]: the kernel's PELT, integer-exact, with `rq_clock_pelt` invariance;
//! - [`walt`]: Android's WALT windows;
//! - `schedutil`: the governor's decision from each CPU's signals and deadline bandwidth;
//! - [`energy`]: residency tables, energy, and the paper's Table 4 metric.
//!
//! The engine (`crate::engine`) owns the state defined here and calls it on its events; nothing
//! here allocates after construction, and signals are advanced lazily in closed form, so a
//! simulation without schedutil pays only the residency bookkeeping.

pub mod energy;
pub mod governor;
pub mod pelt;
pub(crate) mod schedutil;
pub mod walt;

pub use energy::{table4_energy, CpuEnergy, EnergyReport, OppResidency};
pub use governor::{opp_capacity, opp_for_demand, Governor, SchedutilConfig, UtilSignal, WaltPolicy};

use pacer_model::Opp;
use serde::Serialize;

use crate::class::ClassId;
use pelt::{Pelt, PeltClock};
use walt::Walt;

/// One CPU's utilisation signals at an instant (for tests and plots), capacity units.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct CpuUtil {
    pub cpu: usize,
    pub cluster: usize,
    /// Whether signals are tracked on this CPU (schedutil cluster or `SimConfig::track_util`);
    /// the PELT and WALT fields are 0 otherwise.
    pub tracked: bool,
    /// PELT `util_avg` of the CPU's rt run queue (`rq->avg_rt`).
    pub pelt_rt: u64,
    /// PELT `util_avg` of the CPU's fair run queue (`rq->cfs.avg`, accumulated per CPU).
    pub pelt_fair: u64,
    /// WALT utilisation of the CPU's rt and fair busy time.
    pub walt: u64,
    /// `cpu_bw_dl()`: the GRUB running bandwidth of the CPU's SCHED_DEADLINE threads.
    pub dl_bw: u64,
    /// What schedutil asks for on this CPU now (`None` outside schedutil clusters).
    pub demand: Option<u64>,
    /// The CPU's capacity at its cluster's current OPP.
    pub capacity: u64,
}

/// A frequency domain and its governor state.
#[derive(Debug, Clone)]
pub(crate) struct Domain {
    pub cpus: Vec<usize>,
    pub opps: Vec<Opp>,
    pub freqs: Vec<u32>,
    pub latency: u64,
    pub governor: Governor,
    /// Current OPP index.
    pub cur: usize,
    /// Lowest OPP allowed (`scaling_min_freq`).
    pub floor: usize,
    /// OPP being switched to, effective when the `FreqSwitch` event of `switch_gen` fires.
    pub pending: Option<usize>,
    pub switch_gen: u64,
    /// Time of the last frequency decision (`last_freq_update_time`), for the rate limit.
    pub last_change: Option<u64>,
    /// The governor must look again at the end of the current event.
    pub dirty: bool,
    /// The floor changed: the next evaluation ignores the rate limit.
    pub limits_changed: bool,
}

impl Domain {
    pub fn schedutil(&self) -> Option<&SchedutilConfig> {
        match &self.governor {
            Governor::Schedutil(c) => Some(c),
            _ => None,
        }
    }

    /// Capacity at the current OPP of a CPU of top capacity `cpu_capacity`.
    pub fn speed(&self, cpu_capacity: u32) -> u64 {
        opp_capacity(&self.opps, self.cur, cpu_capacity)
    }
}

/// Lazily advanced signals of one CPU.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Signals {
    pub clock: PeltClock,
    pub rt: Pelt,
    pub fair: Pelt,
    pub walt: Walt,
    pub multiplier: u64,
    /// Wall time of the last advance.
    pub last: u64,
    /// The CPU was busy at the last advance (its PELT clock has not re-synchronised yet).
    busy: bool,
}

impl Signals {
    pub fn new(walt: Walt, multiplier: u64) -> Self {
        Signals {
            clock: PeltClock::default(),
            rt: Pelt::default(),
            fair: Pelt::default(),
            walt,
            multiplier,
            last: 0,
            busy: false,
        }
    }

    /// Brings the signals to `now`, the CPU having run a thread of class `running` (or nothing)
    /// at `speed` since the last advance.
    pub fn advance(&mut self, now: u64, running: Option<ClassId>, speed: u64) {
        if now <= self.last {
            return;
        }
        let m = self.multiplier;
        match running {
            Some(class) => {
                self.clock.advance_busy(now, speed, m);
                let t = self.clock.now();
                self.rt.update(t, class == ClassId::Rt);
                self.fair.update(t, class == ClassId::Fair);
                self.walt.advance(now, class != ClassId::Deadline, speed);
                self.busy = true;
            }
            None => {
                if self.busy {
                    // Went idle at `last` (the CPU stayed busy across back-to-back switches).
                    self.clock
                        .enter_idle(self.last, m, self.rt.util_sum + self.fair.util_sum);
                    self.busy = false;
                }
                self.clock.advance_idle(now, m);
                let t = self.clock.now();
                self.rt.update(t, false);
                self.fair.update(t, false);
                self.walt.advance(now, false, speed);
            }
        }
        self.last = now;
    }

    /// rt + fair utilisation as `signal` measures it.
    pub fn util(&self, signal: &UtilSignal) -> u64 {
        match signal {
            UtilSignal::Pelt { .. } => self.rt.util_avg + self.fair.util_avg,
            UtilSignal::Walt { .. } => self.walt.util(),
        }
    }
}

/// One CPU's DVFS bookkeeping.
#[derive(Debug, Clone)]
pub(crate) struct CpuDvfs {
    pub cluster: usize,
    /// Residency is settled up to this time (the cluster's last OPP change).
    pub opp_since: u64,
    /// Per OPP of the cluster, ns.
    pub busy: Vec<u64>,
    pub idle: Vec<u64>,
    pub signals: Option<Signals>,
    /// `sg_cpu->bw_min`: the deadline bandwidth the governor last saw (capacity units).
    pub bw_seen: u64,
    pub tick_armed: bool,
    pub tick_gen: u64,
}
