//! The audio paper's proactive controller (adaptive-deadline-audio-android.txt §5.2): per-job
//! normalised runtime C_m (eq. 3, [`normalised_runtime`]), per-workUnits asymmetric EWMA (eq. 4)
//! in a [`WorkUnitsTable`], Q = m_m·C_e + m_o (eq. 5, [`audio_budget`]) on every workUnits
//! change and every N jobs, with an overload boost after an overrun.
//!
//! **Margin modes.** [`MarginMode::Fixed`] is eq. 5 as published. [`MarginMode::Percentile`] sizes
//! Q from the measured dispersion of each workUnits value instead: the p-th percentile of its last
//! N runtimes (the LFS++ percentile estimator, lfspp-legacy-multimedia.txt §5.3, kept per
//! workUnits value in a [`WorkUnitsPercentiles`]), never less than (1 + floor) times their median,
//! with eq. 5 as the fallback while a value has too few samples. See [`ProactiveController`].

use pacer_model::reservation::DL_MIN_RUNTIME_NS;
use serde::Serialize;

use super::budget::{audio_budget, cap_q, ceil_ns, clamp_budget, normalised_runtime};
use super::common::{roster_methods, Roster, ThreadOptions};
use super::pool::Seat;
use super::ControllerError;
use crate::kernel::{AppEvent, Controller, DlState, Kernel, Tid};
use crate::predictor::{WorkUnitsPercentiles, WorkUnitsTable};
use crate::supervisor::Compression;

/// Parameters of the [`ProactiveController`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProactiveConfig {
    /// Bandwidth cap per thread, and the runtime assumed while nothing is known (the empty-table
    /// case: "the maximum computing time, corresponding to a configurable constant bandwidth",
    /// 0.94 in the paper's experiments).
    pub max_bandwidth: f64,
    /// m_m ≥ 1 of eq. 5 (default 1.1).
    pub margin_mult: f64,
    /// m_o ≥ 0 of eq. 5, ns (default 0).
    pub margin_offset_ns: u64,
    /// Recompute Q every this many jobs (the paper: 30 bursts).
    pub update_every: u32,
    /// Overload boost factor ≥ 1 (default 1.25): see [`ProactiveController`].
    pub overload_boost: f64,
    /// Eq. 4 smoothing constants (default 0.95 rising, 0.1 falling).
    pub rise: f64,
    pub fall: f64,
    /// Smallest budget, ns (≥ 1024).
    pub min_budget_ns: u64,
    pub reclaim: bool,
    /// Σ Q/P available (CPUs); `None` = the kernel's admission limit.
    pub bound: Option<f64>,
    pub compression: Compression,
    /// Optional periodic activation (ns): only (re)applies pending reservations; the controller is
    /// event-driven.
    pub tick_ns: Option<u64>,
    /// How Q's margin over the measured runtimes is sized (default: eq. 5, [`MarginMode::Fixed`]).
    pub margin: MarginMode,
    /// Catch-up (default off): a job that begins less than 0.9·T after the previous one shows a
    /// thread running its jobs back to back, behind its period (after a late wake-up, a
    /// preemption, a hypervisor stall); Q goes to the bandwidth cap until a job begins at least
    /// 0.9·T after its predecessor again, so the backlog drains at the cap rather than at the
    /// budget's small margin over the load.
    pub catch_up: bool,
}

/// How the [`ProactiveController`] sizes the margin of Q over the measured runtimes.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "snake_case", tag = "mode")]
pub enum MarginMode {
    /// Eq. 5 as published: Q = m_m·C_e + m_o, a margin fixed in advance whatever the spread of
    /// the runtimes; after an overrun, Q × `overload_boost`.
    Fixed,
    /// Q from the measured dispersion of the current workUnits value (LFS++'s percentile budget,
    /// lfspp §5.3): see [`PercentileMargin`].
    Percentile(PercentileMargin),
}

/// Parameters of [`MarginMode::Percentile`]:
/// Q = max(P_p, ⌈(1 + floor)·P_50⌉) over the last `window` runtimes of the current workUnits
/// value, once it has `min_samples`; eq. 5 (m_m·C_e + m_o, from the workUnits table's four-case
/// lookup) until then.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct PercentileMargin {
    /// The percentile p ∈ (0, 1] (LFS++'s rank rule: the ⌊N·(1 − p)⌋+1-th largest sample).
    pub p: f64,
    /// N: runtimes remembered per workUnits value.
    pub window: u32,
    /// Samples a workUnits value needs before its percentile replaces eq. 5 (1 ≤ · ≤ N).
    pub min_samples: u32,
    /// Smallest margin over the median, as a fraction of it (≥ 0): what is left when the
    /// runtimes of a value barely vary, so that Q never equals a runtime exactly.
    pub floor: f64,
}

impl Default for PercentileMargin {
    /// p = 0.9 of the last N = 64 runtimes, trusted from 16, floor 1 %.
    ///
    /// - p: one job in ten may overrun by design. An overrun finishes in the next period, which
    ///   a double-buffered consumer (the audio paper's 2 bursts) absorbs; p ≥ 0.95 buys little
    ///   less lateness for a higher budget (docs/experiments/audio-energy.md).
    /// - N = 64: enough samples for the 0.9 percentile to be the 7th largest, not an extreme,
    ///   and few enough to follow drift within about 64 jobs.
    /// - 16 samples: the rank rule then allows one sample above the percentile (j = ⌊16·0.1⌋);
    ///   fewer would make Q the maximum of a handful.
    /// - floor 1 %: twice the paper's m_m = 1.005, and small enough that on the paper's workload
    ///   the floor alone never buys an OPP the runtime does not need (185 voices, 88.1 % of the
    ///   CPU, fit 2112 MHz's 89.4 % with 1 %, not with 2 %).
    fn default() -> Self {
        PercentileMargin {
            p: 0.9,
            window: 64,
            min_samples: 16,
            floor: 0.01,
        }
    }
}

impl Default for ProactiveConfig {
    fn default() -> Self {
        ProactiveConfig {
            max_bandwidth: 0.94,
            margin_mult: 1.1,
            margin_offset_ns: 0,
            update_every: 30,
            overload_boost: 1.25,
            rise: 0.95,
            fall: 0.1,
            min_budget_ns: DL_MIN_RUNTIME_NS,
            reclaim: false,
            bound: None,
            compression: Compression::Proportional,
            tick_ns: None,
            // The published eq. 5 stays the library's default: the daemon's sessions keep the
            // paper's behaviour unless they ask for the percentile margin.
            margin: MarginMode::Fixed,
            catch_up: false,
        }
    }
}

impl ProactiveConfig {
    pub fn validate(&self) -> Result<(), ControllerError> {
        let bad = |m: &str| Err(ControllerError::Config(m.to_string()));
        if !(self.max_bandwidth > 0.0 && self.max_bandwidth <= 1.0) {
            return bad("max_bandwidth must be in (0, 1]");
        }
        if !(self.margin_mult.is_finite() && self.margin_mult >= 1.0) {
            return bad("m_m (margin_mult) must be ≥ 1 (eq. 5)");
        }
        if !(self.overload_boost.is_finite() && self.overload_boost >= 1.0) {
            return bad("overload_boost must be ≥ 1");
        }
        if self.update_every == 0 {
            return bad("update_every must be ≥ 1");
        }
        if self.min_budget_ns < DL_MIN_RUNTIME_NS {
            return bad("min_budget_ns must be ≥ 1024 ns");
        }
        if self.tick_ns == Some(0) {
            return bad("tick_ns must be > 0");
        }
        WorkUnitsTable::with_alphas(0, self.rise, self.fall)?;
        if let MarginMode::Percentile(m) = self.margin {
            if !(m.floor.is_finite() && m.floor >= 0.0) {
                return bad("the percentile margin's floor must be ≥ 0");
            }
            WorkUnitsPercentiles::new(m.window as usize, m.p, m.min_samples as usize)?;
        }
        Ok(())
    }
}

/// How a job's runtime was measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Measure {
    /// Eq. 3 from the SCHED_DEADLINE state (frequency- and capacity-normalised by the kernel).
    Normalised,
    /// CPU-time difference (no deadline state at begin or end: not yet reserved).
    CpuTime,
}

/// Status of one thread of the [`ProactiveController`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProactiveThreadStatus {
    pub tid: Tid,
    pub period_ns: u64,
    /// Current workUnits.
    pub units: u64,
    /// C_e for the current workUnits (ns).
    pub estimate_ns: u64,
    /// The last job's C_m (ns) and how it was measured.
    pub last_runtime_ns: Option<u64>,
    pub last_measure: Option<Measure>,
    pub requested_ns: Option<u64>,
    pub budget_ns: Option<u64>,
    pub jobs: u64,
    /// Jobs with C_m > Q (the budget in force).
    pub overruns: u64,
    pub boosted: bool,
    pub table_entries: usize,
    pub admission_refusals: u64,
    pub last_error: Option<String>,
}

#[derive(Debug, Clone)]
struct OpenJob {
    dl: Option<DlState>,
    cpu: u64,
    units: u64,
}

#[derive(Debug, Clone)]
struct ProactiveThread {
    period: u64,
    opts: ThreadOptions,
    table: WorkUnitsTable,
    /// Per-workUnits runtime percentiles ([`MarginMode::Percentile`] only).
    spread: Option<WorkUnitsPercentiles>,
    /// The runtime of the last overrun while boosted ([`MarginMode::Percentile`]'s boost).
    overrun_ns: u64,
    units: u64,
    open: Option<OpenJob>,
    jobs: u64,
    since_update: u32,
    boosted: bool,
    last_cm: Option<(u64, Measure)>,
    overruns: u64,
    request: Option<u64>,
    started: bool,
    /// When the previous job began.
    last_begin: Option<u64>,
    /// Behind its period: Q at the cap ([`ProactiveConfig::catch_up`]).
    behind: bool,
}

/// The audio paper's adaptive controller (adaptive-deadline-audio-android.txt §5.2).
///
/// Per job: C_m by eq. 3 when the deadline state is available at begin and end (using the budget
/// in force at the job's end: a runtime change takes effect at the next replenishment, which is
/// what the postponement term counts), else the CPU-time difference. C_m updates the eq. 4 EWMA of
/// the workUnits value in force when the job began. Q = m_m·C_e + m_o (eq. 5), capped at
/// `max_bandwidth`·T, is recomputed immediately on every workUnits event and every
/// `update_every` jobs. The period T is the application's (configured per thread).
///
/// **Overload boost.** A job with C_m > Q overran its budget (its deadline was postponed, eq. 3's
/// last term). The EWMA already jumps most of the way (α = 0.95), but waiting up to N jobs for the
/// next update would leave the budget short meanwhile, so an overrun triggers an immediate update
/// with Q = `overload_boost`·(m_m·C_e + m_o); the boost stays until the next regular update (N
/// jobs later, or a workUnits event), which drops it unless another overrun happened.
///
/// **Percentile margin** ([`MarginMode::Percentile`]). Eq. 5's margins are fixed in advance: too
/// small for a noisy workload (every overrun then pays the boost), too large for a steady one, and
/// m_o, a share of the period, can buy a whole OPP on its own. LFS++ (lfspp §5.3) sizes the budget
/// from a percentile of the measured computation times instead; here that percentile is taken per
/// workUnits value, so the table's structure is kept: every C_m also joins its value's last N
/// runtimes, and Q = max(P_p, ⌈(1 + floor)·P_50⌉) of the current value. The floor is what is left
/// when a value's runtimes do not vary. Until a value has `min_samples` runtimes (a value never
/// seen, or just announced) Q is eq. 5 on the table's lookup, as in `Fixed`. The update points are
/// the same (every workUnits event, every N jobs). The boost differs: a fraction 1 − p of the
/// runtimes lie above Q by construction, so an overrun within the value's measured spread waits
/// for the regular update; only an overrun beyond every recent runtime of its value (a load step
/// the hints did not announce) boosts, and then to that overrun's runtime (the budget that job
/// needed) rather than by a fixed factor.
#[derive(Debug)]
pub struct ProactiveController {
    cfg: ProactiveConfig,
    roster: Roster<ProactiveThread>,
}

impl ProactiveController {
    pub fn new(cfg: ProactiveConfig) -> Result<Self, ControllerError> {
        cfg.validate()?;
        let roster = Roster::new(
            cfg.max_bandwidth,
            cfg.min_budget_ns,
            cfg.bound,
            cfg.compression,
            cfg.reclaim,
            true,
        );
        Ok(ProactiveController { cfg, roster })
    }

    roster_methods!(ProactiveThreadStatus, |_, _, _| {});

    pub fn config(&self) -> &ProactiveConfig {
        &self.cfg
    }

    /// Controls a thread whose application period (and deadline) is `period_ns`.
    pub fn add_thread(
        &mut self,
        tid: Tid,
        period_ns: u64,
        opts: ThreadOptions,
    ) -> Result<(), ControllerError> {
        let cfg = &self.cfg;
        self.roster.add(tid, Some(period_ns), opts, |opts| {
            let max = cap_q(period_ns, cfg.max_bandwidth);
            Ok(ProactiveThread {
                period: period_ns,
                opts,
                table: WorkUnitsTable::with_alphas(max, cfg.rise, cfg.fall)?,
                spread: match cfg.margin {
                    MarginMode::Fixed => None,
                    MarginMode::Percentile(m) => Some(WorkUnitsPercentiles::new(
                        m.window as usize,
                        m.p,
                        m.min_samples as usize,
                    )?),
                },
                overrun_ns: 0,
                units: 0,
                open: None,
                jobs: 0,
                since_update: 0,
                boosted: false,
                last_cm: None,
                overruns: 0,
                request: None,
                started: false,
                last_begin: None,
                behind: false,
            })
        })
    }

    pub fn status(&self) -> Vec<ProactiveThreadStatus> {
        self.roster
            .each()
            .map(|(tid, th, slot)| ProactiveThreadStatus {
                tid,
                period_ns: th.period,
                units: th.units,
                estimate_ns: th.table.predict(th.units),
                last_runtime_ns: th.last_cm.map(|c| c.0),
                last_measure: th.last_cm.map(|c| c.1),
                requested_ns: th.request,
                budget_ns: slot.budget(),
                jobs: th.jobs,
                overruns: th.overruns,
                boosted: th.boosted,
                table_entries: th.table.len(),
                admission_refusals: slot.refusals,
                last_error: slot.last_error,
            })
            .collect()
    }

    /// The workUnits table of a thread.
    pub fn table(&self, tid: Tid) -> Option<&WorkUnitsTable> {
        self.roster.threads.get(&tid).map(|t| &t.table)
    }

    /// The per-workUnits percentiles of a thread ([`MarginMode::Percentile`] only).
    pub fn percentiles(&self, tid: Tid) -> Option<&WorkUnitsPercentiles> {
        self.roster.threads.get(&tid).and_then(|t| t.spread.as_ref())
    }

    /// Q before the boost and the bandwidth clamp, for the current workUnits value.
    fn budget(cfg: &ProactiveConfig, th: &ProactiveThread) -> u64 {
        let eq5 = || audio_budget(th.table.predict(th.units), cfg.margin_mult, cfg.margin_offset_ns);
        match (cfg.margin, &th.spread) {
            (MarginMode::Percentile(m), Some(spread)) => {
                match (spread.percentile(th.units), spread.median(th.units)) {
                    (Some(pct), Some(median)) => pct.max(ceil_ns((1.0 + m.floor) * median as f64)),
                    // Too few runtimes of this value for a percentile to mean anything (a new
                    // value, or just after a workUnits change): eq. 5 on the table's lookup.
                    _ => eq5(),
                }
            }
            _ => eq5(),
        }
    }

    fn recompute(cfg: &ProactiveConfig, th: &mut ProactiveThread) {
        let mut q = Self::budget(cfg, th);
        if th.behind {
            // clamp_budget below brings it down to the cap.
            q = u64::MAX;
        }
        if th.boosted {
            q = match cfg.margin {
                MarginMode::Fixed => ceil_ns(q as f64 * cfg.overload_boost),
                // Sized from the overrun: the budget that job needed, not a fixed factor. A fixed
                // factor re-pays the whole margin on every tail sample the percentile deliberately
                // leaves above Q; the overrun's own size covers a real step in load just as well.
                MarginMode::Percentile(_) => q.max(th.overrun_ns),
            };
        }
        th.since_update = 0;
        th.request = Some(clamp_budget(q, cfg.min_budget_ns, th.period, cfg.max_bandwidth));
    }

    /// Saves the policy and computes a first request at first contact; true then.
    fn start(cfg: &ProactiveConfig, seat: &Seat, k: &dyn Kernel, tid: Tid, th: &mut ProactiveThread) -> bool {
        let fresh = seat.save_once(k, tid, &mut th.started);
        if fresh {
            Self::recompute(cfg, th);
        }
        fresh
    }

    fn reserve(&mut self, k: &mut dyn Kernel) {
        let min = self.cfg.min_budget_ns;
        self.roster.reserve(k, |tid, th| {
            th.started
                .then_some(th.request)
                .flatten()
                .map(|q| th.opts.request(tid, q, th.period, min))
        });
    }
}

impl Controller for ProactiveController {
    fn period(&self) -> Option<u64> {
        self.cfg.tick_ns
    }

    fn tick(&mut self, k: &mut dyn Kernel) {
        let cfg = &self.cfg;
        let seat = &self.roster.seat;
        for (&tid, th) in self.roster.threads.iter_mut() {
            Self::start(cfg, seat, &*k, tid, th);
        }
        self.reserve(k);
    }

    fn on_app_event(&mut self, ev: &AppEvent, k: &mut dyn Kernel) {
        let tid = match *ev {
            AppEvent::WorkUnits { thread, .. }
            | AppEvent::JobBegin { thread, .. }
            | AppEvent::JobEnd { thread, .. } => thread,
        };
        let cfg = &self.cfg;
        let seat = &self.roster.seat;
        let Some(th) = self.roster.threads.get_mut(&tid) else {
            return;
        };
        if seat.gone(tid) {
            return;
        }
        let mut changed = Self::start(cfg, seat, &*k, tid, th);
        match *ev {
            AppEvent::WorkUnits { units, .. } => {
                // eq. 5 "every time the application updates the workUnits number".
                th.units = units;
                th.boosted = false;
                Self::recompute(cfg, th);
                changed = true;
            }
            AppEvent::JobBegin { t, dl, cpu_time, .. } => {
                let behind = th
                    .last_begin
                    .is_some_and(|p| t.saturating_sub(p).saturating_mul(10) < th.period.saturating_mul(9));
                th.last_begin = Some(t);
                if cfg.catch_up && behind != th.behind {
                    th.behind = behind;
                    Self::recompute(cfg, th);
                    changed = true;
                }
                th.open = Some(OpenJob {
                    dl,
                    cpu: cpu_time,
                    units: th.units,
                });
            }
            AppEvent::JobEnd { dl, cpu_time, .. } => {
                let Some(job) = th.open.take() else { return };
                let q_now = seat.applied(tid).map(|a| a.0);
                let (c_m, how) = match (job.dl, dl, q_now) {
                    // Under GRUB reclaiming the runtime is depleted at the reclaiming rate, not
                    // at the CPU's (sched-deadline.rst §2.3: dq = −max{U_inact + U_extra, …}·dt
                    // / U_max), so the runtime difference of eq. 3 understates the job, down to
                    // a few % of it on an otherwise idle root domain (measured: a 0.33-CPU
                    // callback was sized at 0.03). The thread's CPU time is the job then.
                    (Some(a), Some(b), Some(q)) if !cfg.reclaim => {
                        (normalised_runtime(a, b, q, th.period), Measure::Normalised)
                    }
                    _ => (cpu_time.saturating_sub(job.cpu), Measure::CpuTime),
                };
                th.table.observe(job.units, c_m);
                // Whether this runtime lies beyond everything recently measured for its
                // workUnits value (always, without enough history), judged before it joins them.
                let beyond = th
                    .spread
                    .as_ref()
                    .and_then(|s| s.max(job.units))
                    .is_none_or(|m| c_m > m);
                if let Some(spread) = th.spread.as_mut() {
                    spread.observe(job.units, c_m);
                }
                th.last_cm = Some((c_m, how));
                th.jobs += 1;
                th.since_update += 1;
                let overran = q_now.is_some_and(|q| c_m > q);
                if overran {
                    th.overruns += 1;
                }
                // Fixed margins boost on every overrun. The percentile margin leaves a fraction
                // 1 − p of the runtimes above Q by design, so an overrun within the measured
                // spread is expected and waits for the regular update; only one beyond it (a
                // step in load the hints did not announce) boosts.
                let boost = overran && (cfg.margin == MarginMode::Fixed || beyond);
                if boost {
                    // The largest overrun since the boost began: the budget a repeat would need.
                    th.overrun_ns = if th.boosted { th.overrun_ns.max(c_m) } else { c_m };
                    th.boosted = true;
                    Self::recompute(cfg, th);
                    changed = true;
                } else if th.since_update >= cfg.update_every {
                    th.boosted = false;
                    Self::recompute(cfg, th);
                    changed = true;
                }
            }
        }
        if changed {
            self.reserve(k);
        }
    }
}
