//! Bandwidth controllers: the loops that turn measurements into SCHED_DEADLINE budgets.
//!
//! - [`LegacyController`] — LFS++ (lfspp-legacy-multimedia.txt §4.2, Fig. 3, §5.3) for unmodified
//!   applications: wake-ups → period analyser (§5.1–5.2) → period P; CPU time sampled every S
//!   (a multiple of P) → percentile predictor → Q_req = (1 + x)·P·𝒫(W_k − W_{k−1})/S →
//!   supervisor (eq. 1) → SCHED_DEADLINE(Q, P, P). Optionally owns the §6.3
//!   [`crate::power::PowerManager`].
//! - [`ProactiveController`] — the audio paper (adaptive-deadline-audio-android.txt §5.2) for
//!   cooperating applications: per-job normalised runtime C_m (eq. 3), per-workUnits asymmetric
//!   EWMA (eq. 4) in a [`WorkUnitsTable`], Q = m_m·C_e + m_o (eq. 5) on every workUnits change and
//!   every N jobs.
//! - [`JobController`] — the adaptive-reservation baseline LFS++ compares against (§7.3): jobs
//!   measured exactly from begin/end CPU times, percentile predictor, Q = (1 + x)·𝒫.
//!
//! All three submit their requests to a [`Supervisor`] and apply the grants with
//! [`apply_grants`](crate::supervisor::apply_grants), so an admission refusal is recorded as "system full" and never panics.
//! Every reservation carries `SCHED_FLAG_RESET_ON_FORK` (a reserved thread must stay able to
//! fork/create threads) and, if configured, `SCHED_FLAG_RECLAIM`.

use std::collections::{BTreeMap, VecDeque};
use std::fmt;

use pacer_model::reservation::{DEFAULT_PERIOD_MAX, DEFAULT_PERIOD_MIN, DL_MIN_RUNTIME_NS};
use pacer_model::{Policy, ReservationFlags};
use serde::Serialize;

use crate::kernel::{AppEvent, Controller, DlState, Kernel, KernelError, Tid, Wakeup};
use crate::period::{self, PeriodConfig, PeriodEstimate};
use crate::power::{ModeChange, PowerAction, PowerConfig, PowerError, PowerInputs, PowerManager, Reserved};
use crate::predictor::{Percentile, Predictor, PredictorError, WorkUnitsTable};
use crate::supervisor::{
    apply_grants_with, AllocationStatus, ApplyOutcome, Compression, Grant, Request, Supervisor,
};

/// Invalid controller configuration.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ControllerError {
    #[error(transparent)]
    Predictor(#[from] PredictorError),
    #[error(transparent)]
    Power(#[from] PowerError),
    #[error("invalid configuration: {0}")]
    Config(String),
    #[error("thread {0} is already controlled")]
    Duplicate(Tid),
    #[error(
        "period {0} ns is outside the SCHED_DEADLINE period range or leaves no room for the minimum budget"
    )]
    BadPeriod(u64),
}

// ---------------------------------------------------------------------------------------------
// The formulas, as pure functions.

/// Rounds a budget up to whole ns, ignoring float noise below 1e-6 ns (so that an exact
/// 3_450_000.0000000005 is 3_450_000, not 3_450_001).
fn ceil_ns(v: f64) -> u64 {
    if v.is_nan() || v <= 0.0 {
        0
    } else {
        (v - 1e-6).ceil().min(u64::MAX as f64) as u64
    }
}

/// LFS++ §5.3: Q_req = (1 + x) · P · 𝒫(W_k − W_{k−1}) / S, rounded up to whole ns.
/// `predicted` is 𝒫, the CPU time expected over one sampling period S (ns); `spread` is x.
pub fn lfspp_budget(predicted: u64, period: u64, sampling: u64, spread: f64) -> u64 {
    if sampling == 0 {
        return 0;
    }
    ceil_ns((1.0 + spread) * period as f64 * predicted as f64 / sampling as f64)
}

/// The predictor sample that makes [`lfspp_budget`] answer `budget`: 𝒫 = Q·S / ((1 + x)·P),
/// rounded to nearest. Used for the §6.3 history reset ("a single sample equal to the projected
/// budget value") — the history holds CPU time per S, so the budget is translated back.
pub fn lfspp_sample_for_budget(budget: u64, period: u64, sampling: u64, spread: f64) -> u64 {
    if period == 0 {
        return 0;
    }
    let v = budget as f64 * sampling as f64 / ((1.0 + spread) * period as f64);
    if v <= 0.0 {
        0
    } else {
        v.round() as u64
    }
}

/// The sampling period S for a task period P: the multiple of P nearest to `target` (at least P),
/// as §5.3 assumes S = k·P.
pub fn sampling_period_for(period: u64, target: u64) -> u64 {
    if period == 0 {
        return target;
    }
    ((target + period / 2) / period).max(1) * period
}

/// Eq. 3 of adaptive-deadline-audio-android.txt: the normalised runtime of a job,
/// C_m = q_start − q_end + Q·⌈(d_end − d_start)/T⌉, from the SCHED_DEADLINE state at job begin and
/// end. The remaining runtimes are already scaled by the kernel for frequency and capacity; the
/// last term adds back the budget recharged at each deadline postponement (zero when the job ends
/// within its deadline, d_end = d_start). Clamped at 0.
pub fn normalised_runtime(start: DlState, end: DlState, q: u64, t: u64) -> u64 {
    let postponements = if t == 0 {
        0
    } else {
        end.deadline.saturating_sub(start.deadline).div_ceil(t)
    };
    let v = start.runtime as i128 - end.runtime as i128 + q as i128 * postponements as i128;
    v.clamp(0, u64::MAX as i128) as u64
}

/// Eq. 5 of adaptive-deadline-audio-android.txt: Q = m_m·C_e + m_o, rounded up.
pub fn audio_budget(c_e: u64, m_m: f64, m_o: u64) -> u64 {
    ceil_ns(m_m * c_e as f64 + m_o as f64)
}

/// The adaptive-reservation budget of lfspp §7.3: Q = (1 + x)·𝒫(job time), rounded up.
pub fn job_budget(predicted: u64, spread: f64) -> u64 {
    ceil_ns((1.0 + spread) * predicted as f64)
}

fn cap_q(period: u64, max_bandwidth: f64) -> u64 {
    ((max_bandwidth * period as f64).floor().max(0.0) as u64).min(period)
}

fn period_in_range(p: u64) -> bool {
    (DEFAULT_PERIOD_MIN.0..=DEFAULT_PERIOD_MAX.0).contains(&p)
}

fn flags(reclaim: bool) -> ReservationFlags {
    ReservationFlags {
        reset_on_fork: true,
        reclaim,
        overrun: false,
    }
}

// ---------------------------------------------------------------------------------------------
// Shared reservation bookkeeping.

/// Per-thread reservation bookkeeping common to every controller.
#[derive(Debug, Clone, Default)]
struct Slot {
    /// (runtime, period) we know to be in place.
    applied: Option<(u64, u64)>,
    /// The policy the thread had before we first touched it, restored by `release`.
    saved: Option<Policy>,
    refusals: u64,
    last_error: Option<String>,
    gone: bool,
}

impl Slot {
    fn absorb(&mut self, g: &Grant, o: &ApplyOutcome) {
        match o {
            ApplyOutcome::Unchanged | ApplyOutcome::Applied { .. } => self.applied = Some((g.q, g.p)),
            ApplyOutcome::ReducedToMinimum { q } => {
                self.applied = Some((*q, g.p));
                self.refusals += 1;
            }
            ApplyOutcome::KeptPrevious { q, p } => {
                self.applied = Some((*q, *p));
                self.refusals += 1;
            }
            ApplyOutcome::Refused { reason } => {
                self.refusals += 1;
                self.last_error = Some(format!("admission refused: {reason}"));
            }
            ApplyOutcome::Failed { error } => self.kernel_error(error),
        }
    }

    fn kernel_error(&mut self, e: &KernelError) {
        if matches!(e, KernelError::NoSuchThread(_)) {
            self.gone = true;
        }
        self.last_error = Some(e.to_string());
    }

    /// Remembers the thread's policy before the first change.
    fn save(&mut self, k: &dyn Kernel, tid: Tid) {
        match k.policy(tid) {
            Ok(p) => self.saved = Some(p),
            Err(e) => self.kernel_error(&e),
        }
    }

    fn release(&mut self, k: &mut dyn Kernel, tid: Tid) -> Result<(), KernelError> {
        if self.gone || self.applied.is_none() {
            return Ok(());
        }
        let back = self.saved.unwrap_or(Policy::Other { nice: 0 });
        k.set_policy(tid, back)?;
        self.applied = None;
        Ok(())
    }
}

/// Supervisor + application of grants, shared by the controllers.
#[derive(Debug, Clone)]
struct Reserver {
    bound: Option<f64>,
    compression: Compression,
    flags: ReservationFlags,
    /// On admission refusal, retry a thread without a reservation at its minimum budget.
    retry_at_minimum: bool,
    last_status: Option<AllocationStatus>,
    last_error: Option<String>,
}

impl Reserver {
    fn new(bound: Option<f64>, compression: Compression, reclaim: bool) -> Self {
        Reserver {
            retry_at_minimum: true,
            bound,
            compression,
            flags: flags(reclaim),
            last_status: None,
            last_error: None,
        }
    }

    /// The supervisor for this kernel: the configured bound, or the kernel's admission limit.
    fn supervisor(&self, k: &dyn Kernel) -> Supervisor {
        Supervisor::new(
            self.bound.unwrap_or_else(|| k.dl_bandwidth_limit()),
            self.compression,
        )
    }

    /// Allocates `reqs` and applies the grants that differ from what is in place.
    fn run(
        &mut self,
        k: &mut dyn Kernel,
        reqs: &[Request],
        applied: impl Fn(Tid) -> Option<(u64, u64)>,
    ) -> Vec<(Grant, ApplyOutcome)> {
        let sup = self.supervisor(&*k);
        let alloc = match sup.allocate(reqs) {
            Ok(a) => a,
            Err(e) => {
                self.last_error = Some(e.to_string());
                return Vec::new();
            }
        };
        self.last_status = Some(alloc.status.clone());
        let changed: Vec<Grant> = alloc
            .grants
            .iter()
            .filter(|g| applied(g.id) != Some((g.q, g.p)))
            .copied()
            .collect();
        if changed.is_empty() {
            return Vec::new();
        }
        let report = apply_grants_with(k, &changed, self.flags, self.retry_at_minimum);
        changed
            .into_iter()
            .zip(report.results)
            .map(|(g, (_, o))| (g, o))
            .collect()
    }
}

/// Per-thread options of the controllers that use the supervisor.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ThreadOptions {
    /// LegacyController: skip period detection and use this period (ns).
    pub known_period: Option<u64>,
    /// Supervisor weight ([`Compression::Weighted`]).
    pub weight: f64,
    /// Supervisor priority ([`Compression::PriorityOrdered`]).
    pub priority: i32,
}

impl Default for ThreadOptions {
    fn default() -> Self {
        ThreadOptions {
            known_period: None,
            weight: 1.0,
            priority: 0,
        }
    }
}

/// The checks every controller makes before taking a thread with a known period: not already
/// controlled, a period the kernel accepts with room for the minimum budget, a positive weight.
fn check_new_thread(
    duplicate: bool,
    tid: Tid,
    period_ns: u64,
    max_bandwidth: f64,
    min_budget_ns: u64,
    opts: &ThreadOptions,
) -> Result<(), ControllerError> {
    if duplicate {
        return Err(ControllerError::Duplicate(tid));
    }
    if !period_in_range(period_ns) || cap_q(period_ns, max_bandwidth) < min_budget_ns {
        return Err(ControllerError::BadPeriod(period_ns));
    }
    if !(opts.weight.is_finite() && opts.weight > 0.0) {
        return Err(ControllerError::Config(format!(
            "thread {tid}: weight must be > 0"
        )));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// LFS++.

/// Parameters of the [`LegacyController`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LegacyConfig {
    /// Activation period of [`Controller::tick`], ns (default 100 ms).
    pub tick_ns: u64,
    /// Sliding window of wake-ups given to the period analyser, ns (default 1 s: lfspp §7.4 finds
    /// the period "indisputable starting from 1 s of tracing time").
    pub window_ns: u64,
    /// Re-run the period analyser this often once a period is known, ns (default 10 s), to follow
    /// period changes (lfspp §4.2: the analyser runs at a lower rate than the bandwidth controller).
    pub recheck_ns: u64,
    /// Period analyser parameters (default: the analyser's own defaults).
    pub period: PeriodConfig,
    /// Minimum analyser confidence to adopt a period (default
    /// [`period::DEFAULT_MIN_CONFIDENCE`]).
    pub min_confidence: f64,
    /// A re-detected period within this relative distance of the current one is not a change
    /// (default 5 %): avoids resetting the loop on estimation jitter.
    pub period_tolerance: f64,
    /// Target sampling period S, ns; the actual S is the nearest multiple of P (default 1 s, the
    /// sampling period of the lfspp §7.3 experiments).
    pub sampling_ns: u64,
    /// Percentile estimator history N (default 16) and percentile p (default 0.9375 → 2nd max).
    pub history: usize,
    pub percentile: f64,
    /// Spread factor x (default 0.15; lfspp §5.3 recommends [0.1, 0.2]).
    pub spread: f64,
    /// Smallest budget requested and guaranteed by the supervisor, ns (≥ 1024, the kernel minimum).
    pub min_budget_ns: u64,
    /// Largest bandwidth one thread may get (default 0.9).
    pub max_bandwidth: f64,
    /// Set `SCHED_FLAG_RECLAIM` (GRUB) on the reservations.
    pub reclaim: bool,
    /// Σ Q/P available to this controller (CPUs); `None` = `Kernel::dl_bandwidth_limit()`.
    pub bound: Option<f64>,
    pub compression: Compression,
}

impl Default for LegacyConfig {
    fn default() -> Self {
        LegacyConfig {
            tick_ns: 100_000_000,
            window_ns: 1_000_000_000,
            recheck_ns: 10_000_000_000,
            period: PeriodConfig::default(),
            min_confidence: period::DEFAULT_MIN_CONFIDENCE,
            period_tolerance: 0.05,
            sampling_ns: 1_000_000_000,
            history: 16,
            percentile: 0.9375,
            spread: 0.15,
            min_budget_ns: DL_MIN_RUNTIME_NS,
            max_bandwidth: 0.9,
            reclaim: false,
            bound: None,
            compression: Compression::Proportional,
        }
    }
}

impl LegacyConfig {
    pub fn validate(&self) -> Result<(), ControllerError> {
        let bad = |m: &str| Err(ControllerError::Config(m.to_string()));
        if self.tick_ns == 0 || self.window_ns == 0 || self.sampling_ns == 0 {
            return bad("tick_ns, window_ns and sampling_ns must be > 0");
        }
        if !(self.spread.is_finite() && self.spread >= 0.0) {
            return bad("spread factor x must be ≥ 0");
        }
        if !(self.max_bandwidth > 0.0 && self.max_bandwidth <= 1.0) {
            return bad("max_bandwidth must be in (0, 1]");
        }
        if self.min_budget_ns < DL_MIN_RUNTIME_NS {
            return bad("min_budget_ns must be ≥ 1024 ns (the kernel's minimum runtime)");
        }
        if self.period_tolerance.is_nan() || self.period_tolerance < 0.0 {
            return bad("period_tolerance must be ≥ 0");
        }
        Percentile::new(self.history, self.percentile)?;
        Ok(())
    }

    fn min_budget(&self) -> u64 {
        self.min_budget_ns.max(DL_MIN_RUNTIME_NS)
    }

    fn usable_period(&self, p: u64) -> bool {
        period_in_range(p) && cap_q(p, self.max_bandwidth) >= self.min_budget()
    }
}

/// A period detector: wake-up timestamps (ns, ascending) → estimate. The default calls
/// [`period::analyse`]; tests and hosts with out-of-band knowledge inject their own.
pub type Detector = Box<dyn Fn(&[u64]) -> PeriodEstimate + Send>;

/// Which records of a thread's wake-up trace a period analysis ran on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum WakeupSource {
    /// The expiries of the timers the thread set ([`Origin::TimerSet`](crate::kernel::Origin::TimerSet)).
    TimerExpiry,
    /// The wake-ups raised by a timer ([`Origin::Timer`](crate::kernel::Origin::Timer)).
    Timer,
    /// All wake-ups.
    All,
}

/// Fewest timer records (expiries set, or timer wake-ups) in the window for [`detect_marked`] to
/// analyse them alone: the analyser's own minimum event count
/// ([`period::AnalysisOptions::min_events`]) plus margin, so that a thread with only a few
/// timeouts among its other wake-ups is not judged on those.
pub const MIN_TIMER_WAKEUPS: usize = 8;

/// Detects a period on the records that are the cleanest evidence of it, best first:
/// 1. the expiries of the timers the thread set: a periodic thread sets its next activation at
///    the end of every job, on time or late, so these are the period's grid whatever the load;
/// 2. the wake-ups raised by a timer: at the expiry whatever the load, but a thread that runs
///    late has none (its expiry is past when it would sleep);
/// 3. all wake-ups: the others (another thread's signal, an I/O completion) move with the
///    interference.
///
/// A class is used when the window holds at least [`MIN_TIMER_WAKEUPS`] of its records and
/// `detector` finds them periodic (a thread whose timers are timeouts, not activations, falls
/// through); of the first two, the more confident answer is taken. Without origin marks ([`Kernel::drain_wakeups_marked`]'s default) this is
/// `detector` on all wake-ups.
pub fn detect_marked(
    detector: &dyn Fn(&[u64]) -> PeriodEstimate,
    wakeups: &[Wakeup],
) -> (PeriodEstimate, WakeupSource) {
    // An interrupted sleep that is restarted sets the same expiry again: count it once.
    let mut expiries: Vec<u64> = wakeups.iter().filter_map(Wakeup::expiry_ns).collect();
    expiries.sort_unstable();
    expiries.dedup();
    let timer: Vec<u64> = wakeups.iter().filter(|w| w.is_timer()).map(|w| w.t_ns).collect();
    let periodic = |ts: &[u64]| {
        (ts.len() >= MIN_TIMER_WAKEUPS)
            .then(|| detector(ts))
            .filter(PeriodEstimate::is_periodic)
    };
    let confidence = |e: &PeriodEstimate| match e {
        PeriodEstimate::Periodic { confidence, .. } => *confidence,
        PeriodEstimate::NotPeriodic { .. } => 0.0,
    };
    // Both classes hold the same activations when the thread sleeps on an absolute timer and is
    // on time. They differ when it is not: a late thread on an absolute grid keeps setting its
    // expiries (only those tell the period), while one whose timer restarts its grid when late
    // (rt-app's relative mode) sets its expiries exactly, phase jumps included, where the jitter
    // of the wake-ups blurs the jumps (measured in the LFS++ §7.2 experiment: expiries 0.14–0.44
    // confidence, wake-ups above 0.5). The more confident of the two is taken, expiries on a tie.
    match (periodic(&expiries), periodic(&timer)) {
        (Some(e), Some(t)) if confidence(&t) > confidence(&e) => return (t, WakeupSource::Timer),
        (Some(e), _) => return (e, WakeupSource::TimerExpiry),
        (None, Some(t)) => return (t, WakeupSource::Timer),
        (None, None) => {}
    }
    let all: Vec<u64> = wakeups.iter().filter(|w| w.is_wakeup()).map(|w| w.t_ns).collect();
    (detector(&all), WakeupSource::All)
}

/// Where a thread is in the LFS++ pipeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// Added, not yet seen by a tick.
    Pending,
    /// Tracing wake-ups, no period yet.
    Detecting,
    /// Period known; sampled and reserved.
    Controlled,
    /// The thread no longer exists.
    Gone,
}

/// What a status view shows for one thread of the [`LegacyController`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LegacyThreadStatus {
    pub tid: Tid,
    pub phase: Phase,
    /// Detected (or configured) period P, ns.
    pub period_ns: Option<u64>,
    pub confidence: Option<f64>,
    /// The wake-ups the last analysis ran on ([`detect_marked`]).
    pub detection_source: Option<WakeupSource>,
    /// Why the last analysis did not give (or change) a period.
    pub detection_note: Option<String>,
    /// The sampling period S in use, ns.
    pub sampling_ns: Option<u64>,
    /// Last Q_req, ns.
    pub requested_ns: Option<u64>,
    /// The runtime in place, ns.
    pub budget_ns: Option<u64>,
    /// budget / period in place.
    pub reserved_bandwidth: Option<f64>,
    /// CPU time / elapsed time over the last sampling interval.
    pub used_bandwidth: Option<f64>,
    pub samples: u64,
    /// Sampling intervals in which the thread used ≥ 98 % of its reserved bandwidth, i.e. the
    /// budget (not the application) limited it.
    pub saturated_samples: u64,
    /// Budget overruns; `None`: the Kernel interface does not expose them to this controller.
    pub overruns: Option<u64>,
    pub admission_refusals: u64,
    pub last_error: Option<String>,
}

/// Ratio of used to reserved bandwidth counted as "saturated".
const SATURATION: f64 = 0.98;

#[derive(Debug, Clone)]
struct LegacyThread {
    opts: ThreadOptions,
    phase: Phase,
    trace_start: u64,
    /// CPU time at `trace_start`: the demand seen while detecting gives the first budget.
    trace_cpu: Option<u64>,
    /// A period was detected before the thread had a reservation; confirm it from a window
    /// traced once the reservation is in place.
    confirm: bool,
    /// The next analysis is that confirmation: its period replaces the first one even within
    /// `period_tolerance`.
    confirming: bool,
    wakeups: VecDeque<Wakeup>,
    period: Option<u64>,
    confidence: Option<f64>,
    source: Option<WakeupSource>,
    note: Option<String>,
    next_check: u64,
    sampling: u64,
    last_t: u64,
    last_cpu: u64,
    predictor: Percentile,
    request: Option<u64>,
    /// Power mode change: budget held until the frequency switch.
    hold: Option<u64>,
    used_bw: Option<f64>,
    samples: u64,
    saturated: u64,
    slot: Slot,
}

/// The power manager as owned by the [`LegacyController`].
#[derive(Debug, Clone)]
struct PowerHook {
    pm: PowerManager,
    cluster: usize,
    prev_cpu: BTreeMap<Tid, u64>,
    prev_t: Option<u64>,
    last_load: Option<f64>,
    last_error: Option<String>,
}

/// What a status view shows for the power manager.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PowerStatus {
    pub cluster: usize,
    pub state: ModeChange,
    pub stats: crate::power::PowerStats,
    /// System load at the last tick (busy fraction).
    pub load: Option<f64>,
    pub last_error: Option<String>,
}

/// LFS++ for legacy (unmodified) periodic applications (lfspp §4.2, §5, §6.3).
pub struct LegacyController {
    cfg: LegacyConfig,
    detector: Detector,
    threads: BTreeMap<Tid, LegacyThread>,
    reserver: Reserver,
    power: Option<PowerHook>,
}

impl fmt::Debug for LegacyController {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LegacyController")
            .field("cfg", &self.cfg)
            .field("threads", &self.threads.keys().collect::<Vec<_>>())
            .field("power", &self.power.as_ref().map(|p| p.pm.state()))
            .finish_non_exhaustive()
    }
}

impl LegacyController {
    /// A controller using the real period analyser.
    pub fn new(cfg: LegacyConfig) -> Result<Self, ControllerError> {
        cfg.validate()?;
        let pc = cfg.period.clone();
        let reserver = Reserver {
            // A legacy thread refused by admission stays under its own policy (see
            // `apply_grants_with`).
            retry_at_minimum: false,
            ..Reserver::new(cfg.bound, cfg.compression, cfg.reclaim)
        };
        Ok(LegacyController {
            cfg,
            detector: Box::new(move |ts| period::analyse(ts, &pc)),
            threads: BTreeMap::new(),
            reserver,
            power: None,
        })
    }

    /// Replaces the period detector.
    pub fn with_detector(mut self, d: Detector) -> Self {
        self.detector = d;
        self
    }

    /// Adds the LFS++ power manager (§6.3) for frequency domain `cluster`.
    pub fn with_power_manager(mut self, cfg: PowerConfig, cluster: usize) -> Result<Self, ControllerError> {
        self.power = Some(PowerHook {
            pm: PowerManager::new(cfg)?,
            cluster,
            prev_cpu: BTreeMap::new(),
            prev_t: None,
            last_load: None,
            last_error: None,
        });
        Ok(self)
    }

    pub fn config(&self) -> &LegacyConfig {
        &self.cfg
    }

    /// Puts a thread under control (from the next tick).
    pub fn add_thread(&mut self, tid: Tid, opts: ThreadOptions) -> Result<(), ControllerError> {
        if self.threads.contains_key(&tid) {
            return Err(ControllerError::Duplicate(tid));
        }
        if let Some(p) = opts.known_period {
            if !self.cfg.usable_period(p) {
                return Err(ControllerError::BadPeriod(p));
            }
        }
        if !(opts.weight.is_finite() && opts.weight > 0.0) {
            return Err(ControllerError::Config(format!(
                "thread {tid}: weight must be > 0"
            )));
        }
        let predictor = Percentile::new(self.cfg.history, self.cfg.percentile)?;
        self.threads.insert(
            tid,
            LegacyThread {
                opts,
                phase: Phase::Pending,
                trace_start: 0,
                trace_cpu: None,
                confirm: false,
                confirming: false,
                wakeups: VecDeque::new(),
                period: None,
                confidence: None,
                source: None,
                note: None,
                next_check: 0,
                sampling: 0,
                last_t: 0,
                last_cpu: 0,
                predictor,
                request: None,
                hold: None,
                used_bw: None,
                samples: 0,
                saturated: 0,
                slot: Slot::default(),
            },
        );
        Ok(())
    }

    /// Stops controlling a thread: stops tracing and restores its original policy.
    pub fn remove_thread(&mut self, k: &mut dyn Kernel, tid: Tid) -> Result<(), KernelError> {
        let Some(mut th) = self.threads.remove(&tid) else {
            return Ok(());
        };
        if th.phase != Phase::Gone && th.phase != Phase::Pending && th.opts.known_period.is_none() {
            // Best effort: the thread may be exiting; its policy matters more than the trace.
            let _ = k.trace_wakeups(tid, false);
        }
        th.slot.release(k, tid)
    }

    /// Restores every thread's original policy and stops tracing (call on exit).
    pub fn release(&mut self, k: &mut dyn Kernel) -> Vec<(Tid, Result<(), KernelError>)> {
        let tids: Vec<Tid> = self.threads.keys().copied().collect();
        tids.into_iter().map(|t| (t, self.remove_thread(k, t))).collect()
    }

    /// Per-thread status, by thread id.
    pub fn status(&self) -> Vec<LegacyThreadStatus> {
        self.threads
            .iter()
            .map(|(&tid, th)| LegacyThreadStatus {
                tid,
                phase: th.phase,
                period_ns: th.period,
                confidence: th.confidence,
                detection_source: th.source,
                detection_note: th.note.clone(),
                sampling_ns: th.period.map(|_| th.sampling),
                requested_ns: th.request,
                budget_ns: th.slot.applied.map(|a| a.0),
                reserved_bandwidth: th.slot.applied.map(|(q, p)| q as f64 / p as f64),
                used_bandwidth: th.used_bw,
                samples: th.samples,
                saturated_samples: th.saturated,
                overruns: None,
                admission_refusals: th.slot.refusals,
                last_error: th.slot.last_error.clone(),
            })
            .collect()
    }

    pub fn thread_status(&self, tid: Tid) -> Option<LegacyThreadStatus> {
        self.status().into_iter().find(|s| s.tid == tid)
    }

    /// The supervisor's verdict at the last allocation.
    pub fn allocation_status(&self) -> Option<&AllocationStatus> {
        self.reserver.last_status.as_ref()
    }

    pub fn power_status(&self) -> Option<PowerStatus> {
        self.power.as_ref().map(|p| PowerStatus {
            cluster: p.cluster,
            state: p.pm.state().clone(),
            stats: p.pm.stats().clone(),
            load: p.last_load,
            last_error: p.last_error.clone(),
        })
    }

    /// Starts, traces, detects and samples one thread.
    fn sense(&mut self, k: &mut dyn Kernel, tid: Tid, now: u64) {
        let cfg = &self.cfg;
        let Some(th) = self.threads.get_mut(&tid) else {
            return;
        };
        if th.slot.gone {
            th.phase = Phase::Gone;
        }
        match th.phase {
            Phase::Gone => return,
            Phase::Pending => {
                th.slot.save(&*k, tid);
                if th.slot.gone {
                    th.phase = Phase::Gone;
                    return;
                }
                th.trace_start = now;
                th.trace_cpu = k.cpu_time(tid).ok();
                th.phase = Phase::Detecting;
                if let Some(p) = th.opts.known_period {
                    adopt(th, k, tid, cfg, p, 1.0, now, false);
                } else if let Err(e) = k.trace_wakeups(tid, true) {
                    th.note = Some(format!("cannot trace wake-ups: {e}"));
                    th.slot.kernel_error(&e);
                }
                return;
            }
            Phase::Detecting | Phase::Controlled => {}
        }
        if th.opts.known_period.is_none() {
            let mut fresh = Vec::new();
            match k.drain_wakeups_marked(tid, &mut fresh) {
                Ok(()) => th.wakeups.extend(fresh),
                Err(e) => th.slot.kernel_error(&e),
            }
            // A thread that shares the CPU with others before it is reserved often runs late, and
            // a late periodic thread does not sleep, so some activations leave no wake-up: the
            // first detection may find a harmonic. Once the reservation makes it run on time, a
            // fresh window tells the true period (checked one window later).
            if th.confirm && th.slot.applied.is_some() {
                th.confirm = false;
                th.confirming = true;
                th.wakeups.clear();
                th.next_check = now.saturating_add(cfg.window_ns);
            }
            let horizon = now.saturating_sub(cfg.window_ns);
            while th.wakeups.front().is_some_and(|w| w.t_ns < horizon) {
                th.wakeups.pop_front();
            }
            let due = match th.period {
                None => now.saturating_sub(th.trace_start) >= cfg.window_ns,
                Some(_) => now >= th.next_check,
            };
            if due && !th.slot.gone {
                th.next_check = now.saturating_add(cfg.recheck_ns);
                let force = std::mem::take(&mut th.confirming);
                let (est, source) = detect_marked(&*self.detector, th.wakeups.make_contiguous());
                th.source = Some(source);
                match est {
                    PeriodEstimate::Periodic {
                        period_ns,
                        confidence,
                        ..
                    } => {
                        if confidence < cfg.min_confidence {
                            th.note = Some(format!(
                                "period {period_ns} ns found with confidence {confidence:.3} < {}",
                                cfg.min_confidence
                            ));
                        } else if !cfg.usable_period(period_ns) {
                            th.note = Some(format!("period {period_ns} ns cannot be reserved"));
                        } else {
                            th.note = None;
                            adopt(th, k, tid, cfg, period_ns, confidence, now, force);
                        }
                    }
                    PeriodEstimate::NotPeriodic { reason } => {
                        // Keep a period already found: one noisy window is not a reason to drop
                        // the reservation.
                        th.note = Some(reason);
                    }
                }
            }
        }
        if th.slot.gone {
            th.phase = Phase::Gone;
            return;
        }
        let Some(p) = th.period else { return };
        if now.saturating_sub(th.last_t) < th.sampling {
            return;
        }
        let cpu = match k.cpu_time(tid) {
            Ok(c) => c,
            Err(e) => {
                th.slot.kernel_error(&e);
                if th.slot.gone {
                    th.phase = Phase::Gone;
                }
                return;
            }
        };
        let dt = now - th.last_t;
        let dw = cpu.saturating_sub(th.last_cpu);
        // W_k − W_{k−1} over exactly S: ticks may land a little after S has elapsed.
        let sample = (dw as u128 * th.sampling as u128 / dt as u128) as u64;
        let used = dw as f64 / dt as f64;
        if let Some((q, ap)) = th.slot.applied {
            if used >= SATURATION * q as f64 / ap as f64 {
                th.saturated += 1;
            }
        }
        th.used_bw = Some(used);
        th.predictor.observe(sample);
        th.samples += 1;
        th.last_t = now;
        th.last_cpu = cpu;
        let predicted = th.predictor.predict().unwrap_or(sample);
        let q = lfspp_budget(predicted, p, th.sampling, cfg.spread);
        th.request = Some(q.clamp(cfg.min_budget(), cap_q(p, cfg.max_bandwidth)));
    }

    /// Requests of all controlled threads through the supervisor, then the kernel.
    fn reserve(&mut self, k: &mut dyn Kernel) {
        let min_budget = self.cfg.min_budget();
        let reqs: Vec<Request> = self
            .threads
            .iter()
            .filter(|(_, th)| th.phase == Phase::Controlled && !th.slot.gone)
            .filter_map(|(&tid, th)| {
                let (p, q) = (th.period?, th.request?);
                let hold = th.hold.unwrap_or(0);
                Some(Request {
                    id: tid,
                    q: q.max(hold).min(p),
                    p,
                    weight: th.opts.weight,
                    priority: th.opts.priority,
                    min_q: min_budget.max(hold).min(p),
                })
            })
            .collect();
        let threads = &self.threads;
        let results = self
            .reserver
            .run(k, &reqs, |t| threads.get(&t).and_then(|th| th.slot.applied));
        for (g, o) in results {
            if let Some(th) = self.threads.get_mut(&g.id) {
                th.slot.absorb(&g, &o);
                if th.slot.gone {
                    th.phase = Phase::Gone;
                }
            }
        }
    }

    /// The §6.3 power manager's step: measures the load, runs the manager, executes its actions.
    fn power_step(&mut self, k: &mut dyn Kernel, now: u64) {
        let bound = self.reserver.supervisor(&*k).effective_bound();
        let Some(pw) = self.power.as_mut() else { return };
        let freq = match k.frequency(pw.cluster) {
            Ok(f) => f,
            Err(e) => {
                pw.last_error = Some(format!("power management inactive: {e}"));
                return;
            }
        };
        // System load = Σ thread CPU time / (elapsed · CPUs), the busy fraction powernowd follows.
        let mut busy = 0u64;
        let mut seen = BTreeMap::new();
        for t in k.threads() {
            if let Ok(c) = k.cpu_time(t) {
                if let Some(&prev) = pw.prev_cpu.get(&t) {
                    busy = busy.saturating_add(c.saturating_sub(prev));
                }
                seen.insert(t, c);
            }
        }
        pw.prev_cpu = seen;
        let Some(prev_t) = pw.prev_t.replace(now) else {
            return;
        };
        let dt = now.saturating_sub(prev_t);
        if dt == 0 {
            return;
        }
        let load = busy as f64 / (dt as f64 * k.cpus().max(1) as f64);
        pw.last_load = Some(load);
        let cap = self.cfg.max_bandwidth;
        let reservations: Vec<Reserved> = self
            .threads
            .iter()
            .filter(|(_, th)| th.phase == Phase::Controlled && !th.slot.gone)
            .filter_map(|(&id, th)| {
                let (q, p) = th.slot.applied?;
                Some(Reserved {
                    id,
                    q,
                    p,
                    max_q: cap_q(p, cap),
                })
            })
            .collect();
        let inputs = PowerInputs {
            load,
            cur_khz: freq.cur_khz,
            available_khz: &freq.available_khz,
            reservations: &reservations,
            bound,
        };
        for action in pw.pm.tick(now, &inputs) {
            match action {
                PowerAction::SetFrequency { khz } => {
                    if let Err(e) = k.set_frequency(pw.cluster, khz) {
                        pw.last_error = Some(format!("set_frequency({khz} kHz): {e}"));
                    }
                }
                PowerAction::RaiseBudgets { budgets } => {
                    for (tid, q) in budgets {
                        if let Some(th) = self.threads.get_mut(&tid) {
                            th.hold = Some(q);
                        }
                    }
                }
                PowerAction::ResetHistories { budgets } => {
                    for (tid, q) in budgets {
                        if let Some(th) = self.threads.get_mut(&tid) {
                            th.hold = None;
                            if let Some(p) = th.period {
                                let s = lfspp_sample_for_budget(q, p, th.sampling, self.cfg.spread);
                                th.predictor.reset_to(s);
                                th.request = Some(q.clamp(self.cfg.min_budget(), cap_q(p, cap)));
                            }
                        }
                    }
                }
            }
        }
    }

    /// During a mode change every held budget must be in place; otherwise abort the switch.
    fn check_holds(&mut self) {
        let Some(pw) = self.power.as_mut() else { return };
        let held: Vec<(Tid, u64)> = self
            .threads
            .iter()
            .filter_map(|(&t, th)| th.hold.map(|h| (t, h)))
            .collect();
        if held.is_empty() {
            return;
        }
        if !matches!(pw.pm.state(), ModeChange::Switching { .. }) {
            return;
        }
        let missing = held.iter().find(|(t, h)| {
            let th = &self.threads[t];
            !th.slot.gone && th.slot.applied.is_none_or(|(q, _)| q < *h)
        });
        if let Some((t, h)) = missing {
            pw.last_error = Some(format!(
                "mode change aborted: budget {h} ns of thread {t} could not be raised"
            ));
            pw.pm.abort();
            for th in self.threads.values_mut() {
                th.hold = None;
            }
        }
    }
}

/// Adopts period `p` for a thread (first detection, a real change, or — `force` — the
/// confirmation of a first detection, which replaces it even when close).
#[allow(clippy::too_many_arguments)]
fn adopt(
    th: &mut LegacyThread,
    k: &mut dyn Kernel,
    tid: Tid,
    cfg: &LegacyConfig,
    p: u64,
    confidence: f64,
    now: u64,
    force: bool,
) {
    th.confidence = Some(confidence);
    if let Some(old) = th.period {
        if p == old || (!force && (p as f64 - old as f64).abs() <= cfg.period_tolerance * old as f64) {
            return;
        }
    }
    let cpu = match k.cpu_time(tid) {
        Ok(c) => c,
        Err(e) => {
            th.slot.kernel_error(&e);
            return;
        }
    };
    // Until the first sample against the new period, keep the bandwidth (not the runtime) of
    // the current request: the old runtime every new period would be a different reservation.
    if let (Some(old), Some(q)) = (th.period, th.request) {
        let scaled = (q as u128 * p as u128)
            .div_ceil(old as u128)
            .min(u64::MAX as u128) as u64;
        th.request = Some(scaled.clamp(cfg.min_budget(), cap_q(p, cfg.max_bandwidth)));
    }
    if th.period.is_none() && th.opts.known_period.is_none() {
        th.confirm = true;
        // First budget from the CPU time used while detecting, so the thread is reserved now
        // rather than one sampling period later.
        if let Some(c0) = th.trace_cpu {
            let dt = now.saturating_sub(th.trace_start);
            if dt > 0 {
                let demand = (cpu.saturating_sub(c0) as u128 * p as u128 / dt as u128) as u64;
                let q = lfspp_budget(demand, p, p, cfg.spread);
                th.request = Some(q.clamp(cfg.min_budget(), cap_q(p, cfg.max_bandwidth)));
            }
        }
    }
    th.period = Some(p);
    th.sampling = sampling_period_for(p, cfg.sampling_ns);
    th.last_t = now;
    th.last_cpu = cpu;
    // Samples measured against another period mean something else: start over.
    if let Ok(fresh) = Percentile::new(cfg.history, cfg.percentile) {
        th.predictor = fresh;
    }
    th.phase = Phase::Controlled;
}

impl Controller for LegacyController {
    fn period(&self) -> Option<u64> {
        Some(self.cfg.tick_ns)
    }

    /// Order within a tick: sense every thread (trace, detect, sample, compute Q_req) → power
    /// manager (may hold budgets, switch frequency, reset histories) → supervisor and kernel →
    /// check that held budgets are in place (else abort the mode change).
    fn tick(&mut self, k: &mut dyn Kernel) {
        let now = k.now();
        let tids: Vec<Tid> = self.threads.keys().copied().collect();
        for tid in tids {
            self.sense(k, tid, now);
        }
        self.power_step(k, now);
        self.reserve(k);
        self.check_holds();
    }
}

// ---------------------------------------------------------------------------------------------
// The audio paper's proactive controller.

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
    units: u64,
    open: Option<OpenJob>,
    jobs: u64,
    since_update: u32,
    boosted: bool,
    last_cm: Option<(u64, Measure)>,
    overruns: u64,
    request: Option<u64>,
    started: bool,
    slot: Slot,
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
#[derive(Debug, Clone)]
pub struct ProactiveController {
    cfg: ProactiveConfig,
    threads: BTreeMap<Tid, ProactiveThread>,
    reserver: Reserver,
}

impl ProactiveController {
    pub fn new(cfg: ProactiveConfig) -> Result<Self, ControllerError> {
        cfg.validate()?;
        let reserver = Reserver::new(cfg.bound, cfg.compression, cfg.reclaim);
        Ok(ProactiveController {
            cfg,
            threads: BTreeMap::new(),
            reserver,
        })
    }

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
        check_new_thread(
            self.threads.contains_key(&tid),
            tid,
            period_ns,
            self.cfg.max_bandwidth,
            self.cfg.min_budget_ns,
            &opts,
        )?;
        let max = cap_q(period_ns, self.cfg.max_bandwidth);
        self.threads.insert(
            tid,
            ProactiveThread {
                period: period_ns,
                opts,
                table: WorkUnitsTable::with_alphas(max, self.cfg.rise, self.cfg.fall)?,
                units: 0,
                open: None,
                jobs: 0,
                since_update: 0,
                boosted: false,
                last_cm: None,
                overruns: 0,
                request: None,
                started: false,
                slot: Slot::default(),
            },
        );
        Ok(())
    }

    /// Restores every thread's original policy.
    pub fn release(&mut self, k: &mut dyn Kernel) -> Vec<(Tid, Result<(), KernelError>)> {
        self.threads
            .iter_mut()
            .map(|(&t, th)| (t, th.slot.release(k, t)))
            .collect()
    }

    pub fn status(&self) -> Vec<ProactiveThreadStatus> {
        self.threads
            .iter()
            .map(|(&tid, th)| ProactiveThreadStatus {
                tid,
                period_ns: th.period,
                units: th.units,
                estimate_ns: th.table.predict(th.units),
                last_runtime_ns: th.last_cm.map(|c| c.0),
                last_measure: th.last_cm.map(|c| c.1),
                requested_ns: th.request,
                budget_ns: th.slot.applied.map(|a| a.0),
                jobs: th.jobs,
                overruns: th.overruns,
                boosted: th.boosted,
                table_entries: th.table.len(),
                admission_refusals: th.slot.refusals,
                last_error: th.slot.last_error.clone(),
            })
            .collect()
    }

    pub fn thread_status(&self, tid: Tid) -> Option<ProactiveThreadStatus> {
        self.status().into_iter().find(|s| s.tid == tid)
    }

    /// The workUnits table of a thread.
    pub fn table(&self, tid: Tid) -> Option<&WorkUnitsTable> {
        self.threads.get(&tid).map(|t| &t.table)
    }

    fn recompute(cfg: &ProactiveConfig, th: &mut ProactiveThread) {
        let c_e = th.table.predict(th.units);
        let mut q = audio_budget(c_e, cfg.margin_mult, cfg.margin_offset_ns);
        if th.boosted {
            q = ceil_ns(q as f64 * cfg.overload_boost);
        }
        th.since_update = 0;
        th.request = Some(q.clamp(cfg.min_budget_ns, cap_q(th.period, cfg.max_bandwidth)));
    }

    fn start(cfg: &ProactiveConfig, k: &dyn Kernel, tid: Tid, th: &mut ProactiveThread) {
        if !th.started {
            th.started = true;
            th.slot.save(k, tid);
            Self::recompute(cfg, th);
        }
    }

    fn reserve(&mut self, k: &mut dyn Kernel) {
        let min = self.cfg.min_budget_ns;
        let reqs: Vec<Request> = self
            .threads
            .iter()
            .filter(|(_, th)| th.started && !th.slot.gone)
            .filter_map(|(&id, th)| {
                Some(Request {
                    id,
                    q: th.request?,
                    p: th.period,
                    weight: th.opts.weight,
                    priority: th.opts.priority,
                    min_q: min,
                })
            })
            .collect();
        let threads = &self.threads;
        for (g, o) in self
            .reserver
            .run(k, &reqs, |t| threads.get(&t).and_then(|th| th.slot.applied))
        {
            if let Some(th) = self.threads.get_mut(&g.id) {
                th.slot.absorb(&g, &o);
            }
        }
    }

    pub fn allocation_status(&self) -> Option<&AllocationStatus> {
        self.reserver.last_status.as_ref()
    }
}

impl Controller for ProactiveController {
    fn period(&self) -> Option<u64> {
        self.cfg.tick_ns
    }

    fn tick(&mut self, k: &mut dyn Kernel) {
        let cfg = &self.cfg;
        for (&tid, th) in self.threads.iter_mut() {
            Self::start(cfg, &*k, tid, th);
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
        let Some(th) = self.threads.get_mut(&tid) else {
            return;
        };
        if th.slot.gone {
            return;
        }
        let fresh = !th.started;
        Self::start(cfg, &*k, tid, th);
        let mut changed = fresh;
        match *ev {
            AppEvent::WorkUnits { units, .. } => {
                // eq. 5 "every time the application updates the workUnits number".
                th.units = units;
                th.boosted = false;
                Self::recompute(cfg, th);
                changed = true;
            }
            AppEvent::JobBegin { dl, cpu_time, .. } => {
                th.open = Some(OpenJob {
                    dl,
                    cpu: cpu_time,
                    units: th.units,
                });
            }
            AppEvent::JobEnd { dl, cpu_time, .. } => {
                let Some(job) = th.open.take() else { return };
                let q_now = th.slot.applied.map(|a| a.0);
                let (c_m, how) = match (job.dl, dl, q_now) {
                    (Some(a), Some(b), Some(q)) => {
                        (normalised_runtime(a, b, q, th.period), Measure::Normalised)
                    }
                    _ => (cpu_time.saturating_sub(job.cpu), Measure::CpuTime),
                };
                th.table.observe(job.units, c_m);
                th.last_cm = Some((c_m, how));
                th.jobs += 1;
                th.since_update += 1;
                if q_now.is_some_and(|q| c_m > q) {
                    th.overruns += 1;
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

// ---------------------------------------------------------------------------------------------
// The adaptive-reservation baseline (lfspp §7.3).

/// Parameters of the [`JobController`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JobConfig {
    /// Percentile estimator history N and percentile p over job execution times.
    pub history: usize,
    pub percentile: f64,
    /// Spread factor x.
    pub spread: f64,
    pub min_budget_ns: u64,
    pub max_bandwidth: f64,
    pub reclaim: bool,
    pub bound: Option<f64>,
    pub compression: Compression,
    pub tick_ns: Option<u64>,
}

impl Default for JobConfig {
    fn default() -> Self {
        JobConfig {
            history: 16,
            percentile: 0.9375,
            spread: 0.15,
            min_budget_ns: DL_MIN_RUNTIME_NS,
            max_bandwidth: 0.9,
            reclaim: false,
            bound: None,
            compression: Compression::Proportional,
            tick_ns: None,
        }
    }
}

impl JobConfig {
    pub fn validate(&self) -> Result<(), ControllerError> {
        let bad = |m: &str| Err(ControllerError::Config(m.to_string()));
        if !(self.spread.is_finite() && self.spread >= 0.0) {
            return bad("spread factor x must be ≥ 0");
        }
        if !(self.max_bandwidth > 0.0 && self.max_bandwidth <= 1.0) {
            return bad("max_bandwidth must be in (0, 1]");
        }
        if self.min_budget_ns < DL_MIN_RUNTIME_NS {
            return bad("min_budget_ns must be ≥ 1024 ns");
        }
        if self.tick_ns == Some(0) {
            return bad("tick_ns must be > 0");
        }
        Percentile::new(self.history, self.percentile)?;
        Ok(())
    }
}

/// Status of one thread of the [`JobController`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JobThreadStatus {
    pub tid: Tid,
    pub period_ns: u64,
    pub last_job_ns: Option<u64>,
    pub predicted_ns: Option<u64>,
    pub requested_ns: Option<u64>,
    pub budget_ns: Option<u64>,
    pub jobs: u64,
    /// Jobs whose execution time exceeded the budget in force.
    pub overruns: u64,
    pub admission_refusals: u64,
    pub last_error: Option<String>,
}

#[derive(Debug, Clone)]
struct JobThread {
    period: u64,
    opts: ThreadOptions,
    predictor: Percentile,
    open: Option<u64>,
    last: Option<u64>,
    jobs: u64,
    overruns: u64,
    request: Option<u64>,
    started: bool,
    slot: Slot,
}

/// Adaptive reservations for cooperating applications, the LFS++ §7.3 baseline: each job is
/// measured exactly between `JobBegin` and `JobEnd` (CPU time), a percentile estimator predicts the
/// next job, and Q = (1 + x)·𝒫 is requested at every job end (the paper's AR controller runs "upon
/// each job termination"). The period is communicated by the application (configured here).
/// Until the first job is measured the thread keeps its own policy.
#[derive(Debug, Clone)]
pub struct JobController {
    cfg: JobConfig,
    threads: BTreeMap<Tid, JobThread>,
    reserver: Reserver,
}

impl JobController {
    pub fn new(cfg: JobConfig) -> Result<Self, ControllerError> {
        cfg.validate()?;
        let reserver = Reserver::new(cfg.bound, cfg.compression, cfg.reclaim);
        Ok(JobController {
            cfg,
            threads: BTreeMap::new(),
            reserver,
        })
    }

    pub fn add_thread(
        &mut self,
        tid: Tid,
        period_ns: u64,
        opts: ThreadOptions,
    ) -> Result<(), ControllerError> {
        check_new_thread(
            self.threads.contains_key(&tid),
            tid,
            period_ns,
            self.cfg.max_bandwidth,
            self.cfg.min_budget_ns,
            &opts,
        )?;
        let predictor = Percentile::new(self.cfg.history, self.cfg.percentile)?;
        self.threads.insert(
            tid,
            JobThread {
                period: period_ns,
                opts,
                predictor,
                open: None,
                last: None,
                jobs: 0,
                overruns: 0,
                request: None,
                started: false,
                slot: Slot::default(),
            },
        );
        Ok(())
    }

    pub fn release(&mut self, k: &mut dyn Kernel) -> Vec<(Tid, Result<(), KernelError>)> {
        self.threads
            .iter_mut()
            .map(|(&t, th)| (t, th.slot.release(k, t)))
            .collect()
    }

    pub fn status(&self) -> Vec<JobThreadStatus> {
        self.threads
            .iter()
            .map(|(&tid, th)| JobThreadStatus {
                tid,
                period_ns: th.period,
                last_job_ns: th.last,
                predicted_ns: th.predictor.predict(),
                requested_ns: th.request,
                budget_ns: th.slot.applied.map(|a| a.0),
                jobs: th.jobs,
                overruns: th.overruns,
                admission_refusals: th.slot.refusals,
                last_error: th.slot.last_error.clone(),
            })
            .collect()
    }

    pub fn thread_status(&self, tid: Tid) -> Option<JobThreadStatus> {
        self.status().into_iter().find(|s| s.tid == tid)
    }

    fn reserve(&mut self, k: &mut dyn Kernel) {
        let min = self.cfg.min_budget_ns;
        let reqs: Vec<Request> = self
            .threads
            .iter()
            .filter(|(_, th)| !th.slot.gone)
            .filter_map(|(&id, th)| {
                Some(Request {
                    id,
                    q: th.request?,
                    p: th.period,
                    weight: th.opts.weight,
                    priority: th.opts.priority,
                    min_q: min,
                })
            })
            .collect();
        let threads = &self.threads;
        for (g, o) in self
            .reserver
            .run(k, &reqs, |t| threads.get(&t).and_then(|th| th.slot.applied))
        {
            if let Some(th) = self.threads.get_mut(&g.id) {
                th.slot.absorb(&g, &o);
            }
        }
    }
}

impl Controller for JobController {
    fn period(&self) -> Option<u64> {
        self.cfg.tick_ns
    }

    fn tick(&mut self, k: &mut dyn Kernel) {
        self.reserve(k);
    }

    fn on_app_event(&mut self, ev: &AppEvent, k: &mut dyn Kernel) {
        let cfg = &self.cfg;
        match *ev {
            AppEvent::WorkUnits { .. } => {}
            AppEvent::JobBegin { thread, cpu_time, .. } => {
                if let Some(th) = self.threads.get_mut(&thread) {
                    th.open = Some(cpu_time);
                }
            }
            AppEvent::JobEnd { thread, cpu_time, .. } => {
                let Some(th) = self.threads.get_mut(&thread) else {
                    return;
                };
                let Some(begin) = th.open.take() else { return };
                if !th.started {
                    th.started = true;
                    th.slot.save(&*k, thread);
                }
                let c = cpu_time.saturating_sub(begin);
                if th.slot.applied.is_some_and(|(q, _)| c > q) {
                    th.overruns += 1;
                }
                th.last = Some(c);
                th.jobs += 1;
                th.predictor.observe(c);
                let pred = th.predictor.predict().unwrap_or(c);
                let q = job_budget(pred, cfg.spread);
                th.request = Some(q.clamp(cfg.min_budget_ns, cap_q(th.period, cfg.max_bandwidth)));
                self.reserve(k);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn lfspp_request_formula() {
        // Q_req = (1 + x)·P·𝒫/S: P = 10 ms, S = 1 s, 𝒫 = 300 ms of CPU per S, x = 0.15
        // → 1.15 · 10 ms · 0.3 = 3.45 ms.
        assert_eq!(lfspp_budget(300 * MS, 10 * MS, 1000 * MS, 0.15), 3_450_000);
        // x = 0.1 and S = 2P: (1.1)·40 ms·30 ms/80 ms = 16.5 ms.
        assert_eq!(lfspp_budget(30 * MS, 40 * MS, 80 * MS, 0.1), 16_500_000);
        // Rounded up.
        assert_eq!(lfspp_budget(1, 3, 2, 0.0), 2);
        // The history-reset inverse gives back the budget.
        let s = lfspp_sample_for_budget(3_450_000, 10 * MS, 1000 * MS, 0.15);
        assert_eq!(s, 300 * MS);
        assert_eq!(lfspp_budget(s, 10 * MS, 1000 * MS, 0.15), 3_450_000);
    }

    #[test]
    fn sampling_period_is_a_multiple_of_p() {
        assert_eq!(sampling_period_for(10 * MS, 1000 * MS), 1000 * MS);
        assert_eq!(sampling_period_for(33 * MS, 1000 * MS), 990 * MS); // 30 periods
        assert_eq!(sampling_period_for(40 * MS, 1000 * MS), 1000 * MS);
        assert_eq!(sampling_period_for(3000 * MS, 1000 * MS), 3000 * MS); // at least one period
    }

    #[test]
    fn eq3_normalised_runtime() {
        // Within the deadline: d_end = d_start, C_m = q_start − q_end.
        let a = DlState {
            deadline: 100 * MS,
            runtime: 2_000_000,
        };
        let b = DlState {
            deadline: 100 * MS,
            runtime: 500_000,
        };
        assert_eq!(normalised_runtime(a, b, 3 * MS, 10 * MS), 1_500_000);
        // Two postponements by T: C_m = 2 − 1 + 3·⌈20/10⌉ = 7 ms.
        let c = DlState {
            deadline: 120 * MS,
            runtime: 1_000_000,
        };
        assert_eq!(normalised_runtime(a, c, 3 * MS, 10 * MS), 7 * MS);
        // A negative remaining runtime (overrun before throttling) counts as used.
        let d = DlState {
            deadline: 100 * MS,
            runtime: -100_000,
        };
        assert_eq!(normalised_runtime(a, d, 3 * MS, 10 * MS), 2_100_000);
    }

    #[test]
    fn eq5_budget() {
        // Q = m_m·C_e + m_o = 1.2·2 ms + 50 µs = 2.45 ms.
        assert_eq!(audio_budget(2 * MS, 1.2, 50_000), 2_450_000);
        assert_eq!(audio_budget(2 * MS, 1.0, 0), 2 * MS);
        assert_eq!(job_budget(2 * MS, 0.15), 2_300_000);
    }

    #[test]
    fn configs_are_validated() {
        assert!(LegacyConfig::default().validate().is_ok());
        assert!(LegacyConfig {
            min_budget_ns: 10,
            ..LegacyConfig::default()
        }
        .validate()
        .is_err());
        assert!(LegacyConfig {
            percentile: 0.0,
            ..LegacyConfig::default()
        }
        .validate()
        .is_err());
        assert!(ProactiveConfig::default().validate().is_ok());
        assert!(ProactiveConfig {
            margin_mult: 0.9,
            ..ProactiveConfig::default()
        }
        .validate()
        .is_err());
        assert!(JobConfig {
            max_bandwidth: 1.5,
            ..JobConfig::default()
        }
        .validate()
        .is_err());
    }
}
