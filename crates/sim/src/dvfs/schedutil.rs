//! schedutil's decision (`kernel/sched/cpufreq_schedutil.c`): what each CPU asks for and which
//! OPP its cluster gets. The engine gathers each CPU's inputs when a scheduler event touches the
//! cluster and applies the OPP this returns.

use pacer_model::reservation::BW_SHIFT;
use pacer_model::CAPACITY_SCALE;

use super::{opp_for_demand, Domain, SchedutilConfig, Signals};

/// What schedutil reads of one CPU at an evaluation. The signals are borrowed: WALT's window
/// history makes them large, and copying them per CPU per evaluation cost the schedutil cases
/// a tenth of their time.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CpuInput<'a> {
    /// The CPU's capacity at the top OPP (1024 scale).
    pub capacity: u64,
    /// GRUB running bandwidth of its SCHED_DEADLINE threads (BW_SHIFT fixed point).
    pub running_bw: u64,
    /// An rt thread runs or waits on it.
    pub rt_runnable: bool,
    /// Its PELT/WALT signals brought up to now.
    pub signals: Option<&'a Signals>,
}

/// `cpu_bw_dl()`: a running bandwidth (BW_SHIFT fixed point) in capacity units.
pub(crate) fn dl_util(running_bw: u64) -> u64 {
    (running_bw * CAPACITY_SCALE as u64) >> BW_SHIFT
}

/// What schedutil asks for on one CPU (capacity units): the top with `rt_at_max` while an rt
/// thread is runnable, else the deadline bandwidth plus the signal with its headroom
/// (`sugov_get_util()`, `map_util_perf()`).
pub(crate) fn demand(cfg: &SchedutilConfig, cpu: &CpuInput) -> u64 {
    if cfg.rt_at_max && cpu.rt_runnable {
        return cpu.capacity;
    }
    let util = cpu.signals.map_or(0, |s| s.util(&cfg.signal));
    dl_util(cpu.running_bw) + (util as f64 * cfg.headroom).ceil() as u64
}

/// `sugov_should_update_freq()` for cluster `d` at `now`: false while the rate limit holds,
/// unless its limits changed or a CPU's deadline bandwidth grew since the last evaluation
/// (`ignore_dl_rate_limit()`); `bw` holds each CPU's (running bandwidth, bandwidth seen).
pub(crate) fn should_update(
    d: &Domain,
    cfg: &SchedutilConfig,
    bw: impl IntoIterator<Item = (u64, u64)>,
    now: u64,
) -> bool {
    let bypass = d.limits_changed || bw.into_iter().any(|(running, seen)| dl_util(running) > seen);
    bypass
        || d.last_change
            .is_none_or(|t| now.saturating_sub(t) >= cfg.rate_limit_ns)
}

/// `sugov_next_freq_shared()`: the smallest OPP meeting the largest demand of the cluster's
/// CPUs, never below the floor.
pub(crate) fn target<'a>(
    d: &Domain,
    cfg: &SchedutilConfig,
    cpus: impl IntoIterator<Item = CpuInput<'a>>,
) -> usize {
    cpus.into_iter().fold(d.floor, |target, c| {
        target.max(opp_for_demand(&d.opps, c.capacity as u32, demand(cfg, &c)))
    })
}
