//! LFS++ for legacy (unmodified) periodic applications (lfspp-legacy-multimedia.txt §4.2, §5,
//! §6.3): wake-ups → period analyser (§5.1–5.2, [`detect_marked`]) → period P; CPU time sampled
//! every S (a multiple of P) → percentile predictor → Q_req = (1 + x)·P·𝒫/S ([`lfspp_budget`])
//! → supervisor (eq. 1) → SCHED_DEADLINE(Q, P, P); optionally the §6.3 power manager.
//!
//! One step is pacer's own, for a case the paper's experiments leave out: a thread that waits
//! for a CPU much of its first window (starved by higher-priority load) runs late, and a late
//! periodic thread skips its sleeps, so its trace does not carry its period. Such a thread is
//! *probed*: reserved at a short period with a bandwidth that doubles while the thread stays
//! late, until it runs on time and its timers show the period (see [`LegacyConfig::probe_wait`]).

use std::collections::{BTreeMap, VecDeque};
use std::fmt;

use pacer_model::reservation::DL_MIN_RUNTIME_NS;
use serde::Serialize;

use super::budget::{
    cap_q, clamp_budget, lfspp_budget, lfspp_sample_for_budget, sampling_period_for, usable_period,
};
use super::common::{roster_methods, Roster, ThreadOptions};
use super::pool::Seat;
use super::ControllerError;
use crate::kernel::{Controller, Kernel, KernelError, Tid, Wakeup};
use crate::period::{self, PeriodConfig, PeriodEstimate};
use crate::power::{ModeChange, PowerAction, PowerConfig, PowerInputs, PowerManager, Reserved};
use crate::predictor::{Percentile, Predictor};
use crate::supervisor::Compression;

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
    /// Σ Q/P available to this controller (CPUs); `None` = `Kernel::dl_bandwidth_limit`.
    pub bound: Option<f64>,
    pub compression: Compression,
    /// Starvation probe: a thread that waited for a CPU at least this share of its first
    /// detection window (its run delay, [`Kernel::run_delay`]) is probed instead of reserved at
    /// the period its late wake-ups suggest: reserved at [`PROBE_PERIOD_NS`] with a bandwidth
    /// that doubles every tick in which it is still late (uses ≥ [`PROBE_LATE_USE`] of what it
    /// was granted), until a window in which it runs on time gives its period (default
    /// [`DEFAULT_PROBE_WAIT`]; `None`: never probe).
    pub probe_wait: Option<f64>,
}

/// A starved thread is probed when its window holds this many timer records (timer wake-ups
/// and expiries set; one could be a timeout), or when the analyser saw its pattern with at
/// least [`PROBE_MIN_CONFIDENCE`]: the evidence that it is a periodic program at all.
pub const MIN_PROBE_TIMERS: usize = 2;
/// See [`MIN_PROBE_TIMERS`].
pub const PROBE_MIN_CONFIDENCE: f64 = 0.2;

/// Default [`LegacyConfig::probe_wait`]: a thread that waited for a CPU 10 % of its first window.
pub const DEFAULT_PROBE_WAIT: f64 = 0.1;
/// Period of the probe reservation, ns: short, so that the budget arrives spread over any
/// period the thread may have (a long probe period would itself shape the activations).
pub const PROBE_PERIOD_NS: u64 = 1_000_000;
/// Smallest starting bandwidth of a probe.
pub const PROBE_MIN_BANDWIDTH: f64 = 0.1;
/// A probed thread that uses at least this share of the bandwidth it was granted is limited by
/// its budget, i.e. still late: the probe doubles.
pub const PROBE_LATE_USE: f64 = 0.8;
/// A probe gives up after this many detection windows without one the thread ran on time
/// through: its last window is judged as without the probe, and when that finds no period the
/// thread stays reserved at the probe period (never demoted, see docs/linux.md on re-entering
/// SCHED_DEADLINE) with every later window analysed until a period is found.
pub const PROBE_LIMIT_WINDOWS: u64 = 5;

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
            probe_wait: Some(DEFAULT_PROBE_WAIT),
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
        if self.probe_wait.is_some_and(|w| !(w > 0.0 && w <= 1.0)) {
            return bad("probe_wait must be in (0, 1]");
        }
        Percentile::new(self.history, self.percentile)?;
        Ok(())
    }

    fn min_budget(&self) -> u64 {
        self.min_budget_ns.max(DL_MIN_RUNTIME_NS)
    }

    fn usable_period(&self, p: u64) -> bool {
        usable_period(p, self.max_bandwidth, self.min_budget())
    }

    fn clamp(&self, q: u64, p: u64) -> u64 {
        clamp_budget(q, self.min_budget(), p, self.max_bandwidth)
    }
}

/// A period detector: wake-up timestamps (ns, ascending) → estimate. The default calls
/// [`period::analyse`]; tests and hosts with out-of-band knowledge inject their own.
pub type Detector = Box<dyn Fn(&[u64]) -> PeriodEstimate + Send>;

/// Which records of a thread's wake-up trace a period analysis ran on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
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

/// Where a thread is in the LFS++ pipeline (as a status view shows it; the controller's own
/// state carries each phase's data).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// Added, not yet seen by a tick.
    Pending,
    /// Tracing wake-ups, no period yet.
    Detecting,
    /// Starved while detecting: reserved at a probe period until it runs on time
    /// ([`LegacyConfig::probe_wait`]).
    Probing,
    /// Period known; sampled and reserved.
    Controlled,
    /// The thread no longer exists.
    Gone,
}

/// What a status view shows for one thread of the [`LegacyController`].
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
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
    /// Share of the first detection window the thread waited for a CPU (its run delay), when
    /// the kernel tells.
    pub wait_share: Option<f64>,
    /// Starvation probe: how many times its bandwidth was set (0: never probed), and the
    /// bandwidth asked for now while probing.
    pub probes: u64,
    pub probe_bandwidth: Option<f64>,
}

/// Ratio of used to reserved bandwidth counted as "saturated".
const SATURATION: f64 = 0.98;

/// A thread's wake-up trace while its period is detected, and what the last analysis said.
#[derive(Debug, Clone, Default)]
struct Trace {
    wakeups: VecDeque<Wakeup>,
    source: Option<WakeupSource>,
    note: Option<String>,
}

impl Trace {
    /// Drops the records older than `window_ns` before `now`: the analyser's sliding window.
    fn keep_window(&mut self, now: u64, window_ns: u64) {
        let horizon = now.saturating_sub(window_ns);
        while self.wakeups.front().is_some_and(|w| w.t_ns < horizon) {
            self.wakeups.pop_front();
        }
    }
}

/// Where the confirmation of a first detection stands. A thread that shares the CPU with others
/// before it is reserved often runs late, and a late periodic thread does not sleep, so some
/// activations leave no wake-up: the first detection may find a harmonic. Once the reservation
/// makes it run on time, a fresh window tells the true period.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Confirm {
    /// Nothing to confirm (confirmed, or the period was configured).
    Done,
    /// Detected before the thread had a reservation: trace a fresh window once it has one.
    AwaitReservation,
    /// The next analysis is the confirmation: its period replaces the first one even within
    /// `period_tolerance`.
    Next,
    /// Reserved at the probe period because the probe found none: every window is analysed,
    /// and the first period found replaces the probe's.
    Provisional,
}

/// Re-detection of a controlled thread's period (lfspp §4.2: the analyser keeps running, at a
/// lower rate than the bandwidth controller, to follow period changes).
#[derive(Debug, Clone)]
struct Follow {
    trace: Trace,
    next_check: u64,
    confirm: Confirm,
}

/// The bandwidth loop of a thread whose period is known.
#[derive(Debug, Clone)]
struct Control {
    period: u64,
    confidence: f64,
    /// The sampling period S.
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
}

/// A starved thread under its probe reservation.
#[derive(Debug, Clone)]
struct Probe {
    /// When probing started, and the thread's CPU time then.
    started: u64,
    started_cpu: u64,
    /// Since when the thread has been on time (the last tick it was late), and its CPU time
    /// then.
    on_time_since: u64,
    on_time_cpu: u64,
    /// Bandwidth asked for.
    bandwidth: f64,
    /// Times the bandwidth was set.
    steps: u64,
    /// The thread set a timer ([`Origin::TimerSet`](crate::kernel::Origin::TimerSet)) in its
    /// detection window or since: a tick in which it sets none is a tick it ran late.
    sets_timers: bool,
    /// The thread set timers or was woken by one: it is judged on the expiries it sets, which
    /// it starts setting only once it has caught up with its backlog.
    timer_user: bool,
    /// Time and CPU time at the last tick: the use since then judges lateness.
    last_t: u64,
    last_cpu: u64,
    used_bw: Option<f64>,
    trace: Trace,
}

/// A thread's place in the LFS++ pipeline, with the data that place needs.
#[derive(Debug, Clone)]
enum State {
    Pending,
    Detecting {
        /// When tracing started.
        since: u64,
        /// CPU time at `since`: the demand seen while detecting gives the first budget.
        cpu0: Option<u64>,
        /// Run delay at each tick of the last window (time, ns waited), oldest first.
        delays: VecDeque<(u64, u64)>,
        trace: Trace,
    },
    Probing {
        probe: Probe,
        /// The share of its first window the thread waited, shown in the status.
        wait_share: f64,
    },
    /// `follow` is `None` for a thread whose period was configured.
    Controlled {
        ctl: Control,
        follow: Option<Follow>,
        /// The starvation probe this thread went through (status only).
        probed: Option<(u64, f64)>,
    },
    /// The thread is gone; `last` is what it was, still reported.
    Gone {
        last: Box<State>,
    },
}

impl State {
    fn phase(&self) -> Phase {
        match self {
            State::Pending => Phase::Pending,
            State::Detecting { .. } => Phase::Detecting,
            State::Probing { .. } => Phase::Probing,
            State::Controlled { .. } => Phase::Controlled,
            State::Gone { .. } => Phase::Gone,
        }
    }

    fn bury(&mut self) {
        if !matches!(self, State::Gone { .. }) {
            let last = std::mem::replace(self, State::Pending);
            *self = State::Gone { last: Box::new(last) };
        }
    }

    /// The state whose data a status shows (a gone thread's last one).
    fn shown(&self) -> &State {
        match self {
            State::Gone { last } => last.shown(),
            s => s,
        }
    }

    fn control(&self) -> Option<&Control> {
        match self {
            State::Controlled { ctl, .. } => Some(ctl),
            _ => None,
        }
    }

    fn control_mut(&mut self) -> Option<&mut Control> {
        match self {
            State::Controlled { ctl, .. } => Some(ctl),
            _ => None,
        }
    }

    /// Whether wake-ups of the thread are being traced.
    fn tracing(&self) -> bool {
        matches!(
            self,
            State::Detecting { .. } | State::Probing { .. } | State::Controlled { follow: Some(_), .. }
        )
    }
}

#[derive(Debug, Clone)]
struct LegacyThread {
    opts: ThreadOptions,
    state: State,
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
    roster: Roster<LegacyThread>,
    /// An empty predictor of the configured shape: a period change starts the history over.
    blank: Percentile,
    power: Option<PowerHook>,
}

impl fmt::Debug for LegacyController {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LegacyController")
            .field("cfg", &self.cfg)
            .field("threads", &self.roster.threads.keys().collect::<Vec<_>>())
            .field("power", &self.power.as_ref().map(|p| p.pm.state()))
            .finish_non_exhaustive()
    }
}

impl LegacyController {
    /// A controller using the real period analyser.
    pub fn new(cfg: LegacyConfig) -> Result<Self, ControllerError> {
        cfg.validate()?;
        let pc = cfg.period.clone();
        // A legacy thread refused by admission stays under its own policy (see
        // `apply_grants_with`).
        let roster = Roster::new(
            cfg.max_bandwidth,
            cfg.min_budget(),
            cfg.bound,
            cfg.compression,
            cfg.reclaim,
            false,
        );
        Ok(LegacyController {
            blank: Percentile::new(cfg.history, cfg.percentile)?,
            cfg,
            detector: Box::new(move |ts| period::analyse(ts, &pc)),
            roster,
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

    roster_methods!(LegacyThreadStatus, stop_tracing);

    pub fn config(&self) -> &LegacyConfig {
        &self.cfg
    }

    /// Puts a thread under control (from the next tick).
    pub fn add_thread(&mut self, tid: Tid, opts: ThreadOptions) -> Result<(), ControllerError> {
        let known = opts.known_period;
        self.roster.add(tid, known, opts, |opts| {
            Ok(LegacyThread {
                opts,
                state: State::Pending,
            })
        })
    }

    /// Per-thread status, by thread id.
    pub fn status(&self) -> Vec<LegacyThreadStatus> {
        self.roster
            .each()
            .map(|(tid, th, slot)| {
                let phase = if slot.gone { Phase::Gone } else { th.state.phase() };
                let shown = th.state.shown();
                let ctl = shown.control();
                let trace = match shown {
                    State::Detecting { trace, .. }
                    | State::Probing {
                        probe: Probe { trace, .. },
                        ..
                    }
                    | State::Controlled {
                        follow: Some(Follow { trace, .. }),
                        ..
                    } => Some(trace),
                    _ => None,
                };
                let probe = match shown {
                    State::Probing { probe, .. } => Some(probe),
                    _ => None,
                };
                let (probes, wait_share) = match shown {
                    State::Probing { probe, wait_share } => (probe.steps, Some(*wait_share)),
                    State::Controlled {
                        probed: Some((steps, wait)),
                        ..
                    } => (*steps, Some(*wait)),
                    _ => (0, None),
                };
                LegacyThreadStatus {
                    tid,
                    phase,
                    period_ns: ctl.map(|c| c.period),
                    confidence: ctl.map(|c| c.confidence),
                    detection_source: trace.and_then(|t| t.source),
                    detection_note: trace.and_then(|t| t.note.clone()),
                    sampling_ns: ctl.map(|c| c.sampling),
                    requested_ns: ctl.and_then(|c| c.request),
                    budget_ns: slot.budget(),
                    reserved_bandwidth: slot.applied.map(|(q, p)| q as f64 / p as f64),
                    used_bandwidth: ctl.and_then(|c| c.used_bw).or(probe.and_then(|p| p.used_bw)),
                    samples: ctl.map_or(0, |c| c.samples),
                    saturated_samples: ctl.map_or(0, |c| c.saturated),
                    overruns: None,
                    admission_refusals: slot.refusals,
                    last_error: slot.last_error,
                    wait_share,
                    probes,
                    probe_bandwidth: probe.map(|p| p.bandwidth),
                }
            })
            .collect()
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
        let LegacyController {
            cfg,
            detector,
            roster,
            blank,
            ..
        } = self;
        let seat = &roster.seat;
        let Some(th) = roster.threads.get_mut(&tid) else {
            return;
        };
        if seat.gone(tid) {
            th.state.bury();
        }
        match th.state {
            State::Gone { .. } => return,
            State::Pending => return start(th, k, seat, tid, cfg, blank, now),
            State::Probing { .. } => {
                probe_step(&mut th.state, k, seat, tid, cfg, &**detector, blank, now);
                if seat.gone(tid) {
                    th.state.bury();
                }
                return;
            }
            State::Detecting { .. } | State::Controlled { .. } => {}
        }
        if let State::Detecting { delays, .. } = &mut th.state {
            note_run_delay(delays, k, tid, cfg, now);
        }
        if let Some(verdict) = follow_wakeups(&mut th.state, k, seat, tid, cfg, &**detector, now) {
            match starved(&th.state, &verdict, cfg) {
                Some(wait_share) => start_probe(&mut th.state, k, seat, tid, wait_share, now),
                None => {
                    if let Some(found) = verdict.found {
                        adopt(&mut th.state, k, seat, tid, cfg, blank, found, now);
                    }
                }
            }
        }
        if seat.gone(tid) {
            th.state.bury();
            return;
        }
        let State::Controlled { ctl, .. } = &mut th.state else {
            return;
        };
        if let Err(e) = sample(ctl, k, seat, tid, cfg, now) {
            seat.kernel_error(tid, &e);
            if seat.gone(tid) {
                th.state.bury();
            }
        }
    }

    /// Requests of all controlled threads through the supervisor, then the kernel.
    fn reserve(&mut self, k: &mut dyn Kernel) {
        let min_budget = self.cfg.min_budget();
        self.roster.reserve(k, |tid, th| {
            if let State::Probing { probe, .. } = &th.state {
                let q = (probe.bandwidth * PROBE_PERIOD_NS as f64).ceil() as u64;
                return Some(
                    th.opts
                        .request(tid, q.max(min_budget), PROBE_PERIOD_NS, min_budget),
                );
            }
            let ctl = th.state.control()?;
            let (p, q) = (ctl.period, ctl.request?);
            let hold = ctl.hold.unwrap_or(0);
            Some(
                th.opts
                    .request(tid, q.max(hold).min(p), p, min_budget.max(hold).min(p)),
            )
        });
        let seat = &self.roster.seat;
        for (&tid, th) in self.roster.threads.iter_mut() {
            if seat.gone(tid) {
                th.state.bury();
            }
        }
    }

    /// The §6.3 power manager's step: measures the load, runs the manager, executes its actions.
    fn power_step(&mut self, k: &mut dyn Kernel, now: u64) {
        let bound = self.roster.seat.supervisor(&*k).effective_bound();
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
        let cfg = &self.cfg;
        let seat = &self.roster.seat;
        let reservations: Vec<Reserved> = self
            .roster
            .threads
            .iter()
            .filter(|(&id, th)| th.state.control().is_some() && !seat.gone(id))
            .filter_map(|(&id, _)| {
                let (q, p) = seat.applied(id)?;
                Some(Reserved {
                    id,
                    q,
                    p,
                    max_q: cap_q(p, cfg.max_bandwidth),
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
        let threads = &mut self.roster.threads;
        for action in pw.pm.tick(now, &inputs) {
            match action {
                PowerAction::SetFrequency { khz } => {
                    if let Err(e) = k.set_frequency(pw.cluster, khz) {
                        pw.last_error = Some(format!("set_frequency({khz} kHz): {e}"));
                    }
                }
                PowerAction::RaiseBudgets { budgets } => {
                    for (tid, q) in budgets {
                        if let Some(ctl) = control_of(threads, tid) {
                            ctl.hold = Some(q);
                        }
                    }
                }
                PowerAction::ResetHistories { budgets } => {
                    for (tid, q) in budgets {
                        if let Some(ctl) = control_of(threads, tid) {
                            ctl.hold = None;
                            let s = lfspp_sample_for_budget(q, ctl.period, ctl.sampling, cfg.spread);
                            ctl.predictor.reset_to(s);
                            ctl.request = Some(cfg.clamp(q, ctl.period));
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
            .roster
            .threads
            .iter()
            .filter_map(|(&t, th)| th.state.control()?.hold.map(|h| (t, h)))
            .collect();
        if held.is_empty() {
            return;
        }
        if !matches!(pw.pm.state(), ModeChange::Switching { .. }) {
            return;
        }
        let seat = &self.roster.seat;
        let missing = held.iter().find(|(t, h)| {
            let slot = seat.slot(*t);
            !slot.gone && slot.applied.is_none_or(|(q, _)| q < *h)
        });
        if let Some((t, h)) = missing {
            pw.last_error = Some(format!(
                "mode change aborted: budget {h} ns of thread {t} could not be raised"
            ));
            pw.pm.abort();
            for th in self.roster.threads.values_mut() {
                if let Some(ctl) = th.state.control_mut() {
                    ctl.hold = None;
                }
            }
        }
    }
}

/// The bandwidth loop of a controlled thread.
fn control_of(threads: &mut BTreeMap<Tid, LegacyThread>, tid: Tid) -> Option<&mut Control> {
    threads.get_mut(&tid).and_then(|th| th.state.control_mut())
}

/// Stops tracing a thread whose wake-ups are traced.
fn stop_tracing(k: &mut dyn Kernel, tid: Tid, th: &LegacyThread) {
    if th.state.tracing() {
        // Best effort: the thread may be exiting; its policy matters more than the trace.
        let _ = k.trace_wakeups(tid, false);
    }
}

/// A thread's first tick: remember its policy, then control it at its configured period or
/// start tracing its wake-ups.
fn start(
    th: &mut LegacyThread,
    k: &mut dyn Kernel,
    seat: &Seat,
    tid: Tid,
    cfg: &LegacyConfig,
    blank: &Percentile,
    now: u64,
) {
    seat.save(&*k, tid);
    if seat.gone(tid) {
        th.state.bury();
        return;
    }
    if let Some(p) = th.opts.known_period {
        match k.cpu_time(tid) {
            Ok(cpu) => {
                th.state = State::Controlled {
                    ctl: Control::new(p, 1.0, cfg, blank, now, cpu, None),
                    follow: None,
                    probed: None,
                }
            }
            Err(e) => seat.kernel_error(tid, &e),
        }
        return;
    }
    let cpu0 = k.cpu_time(tid).ok();
    let mut trace = Trace::default();
    if let Err(e) = k.trace_wakeups(tid, true) {
        trace.note = Some(format!("cannot trace wake-ups: {e}"));
        seat.kernel_error(tid, &e);
    }
    let mut delays = VecDeque::new();
    note_run_delay(&mut delays, k, tid, cfg, now);
    th.state = State::Detecting {
        since: now,
        cpu0,
        delays,
        trace,
    };
}

/// Records a detecting thread's run delay at this tick, keeping one sample at least a window
/// old as the base of [`starved`]'s share.
fn note_run_delay(delays: &mut VecDeque<(u64, u64)>, k: &dyn Kernel, tid: Tid, cfg: &LegacyConfig, now: u64) {
    if cfg.probe_wait.is_none() {
        return;
    }
    if let Ok(Some(d)) = k.run_delay(tid) {
        delays.push_back((now, d));
    }
    let horizon = now.saturating_sub(cfg.window_ns);
    while delays.len() > 1 && delays[1].0 <= horizon {
        delays.pop_front();
    }
}

/// The share of the last window a detecting thread waited for a CPU, when that makes it a
/// thread to probe rather than reserve at the period its trace suggests.
///
/// Probed: a thread with a periodic pattern and some timer in its window, or one that timers
/// wake for most of its wake-ups ([`timer_driven`]) whatever its pattern: deep enough
/// starvation leaves a periodic thread only the gaps the higher-priority load leaves, so its
/// wake-ups show the load's pattern or none (seen: a 10 ms player that waited 93 % of the
/// window under 85 % SCHED_FIFO load and a CPU hog showed only the load's 31 ms; it was never
/// probed).
///
/// Not probed: a thread with too few wake-ups, no periodic pattern and few timer wake-ups, or
/// no timer in its window (a batch, I/O or helper thread: probing would reserve it at the probe
/// period for good if no period turned up, and the probe's judgement rests on the timers a
/// periodic thread sets), and a thread whose period came from timer expiries it set even when
/// late (the cyclictest idiom: an absolute grid, already past, still set): those expiries are
/// the grid however late the thread runs.
fn starved(state: &State, verdict: &Verdict, cfg: &LegacyConfig) -> Option<f64> {
    let threshold = cfg.probe_wait?;
    let State::Detecting { delays, .. } = state else {
        return None;
    };
    let evidence = verdict.timer_records >= MIN_PROBE_TIMERS || verdict.confidence >= PROBE_MIN_CONFIDENCE;
    if verdict.wakeups < MIN_TIMER_WAKEUPS || !(timer_driven(verdict) || verdict.periodic && evidence) {
        return None;
    }
    if verdict.found.is_some() && verdict.source == WakeupSource::TimerExpiry && verdict.late_expiries {
        return None;
    }
    let (&(t0, d0), &(t1, d1)) = (delays.front()?, delays.back()?);
    // Judged on a whole window, not on the first ticks of one.
    if t1.saturating_sub(t0) < cfg.window_ns {
        return None;
    }
    let share = d1.saturating_sub(d0) as f64 / (t1 - t0) as f64;
    (share >= threshold).then_some(share)
}

/// A thread timers wake: at least [`MIN_TIMER_WAKEUPS`] timer wake-ups in the window, and at
/// least half of its wake-ups (a starved thread with a few timeouts among its I/O or
/// other threads' signals is not a periodic program the probe could reveal).
fn timer_driven(verdict: &Verdict) -> bool {
    verdict.timer_wakeups >= MIN_TIMER_WAKEUPS && 2 * verdict.timer_wakeups >= verdict.wakeups
}

/// Puts a starved thread under its probe: twice the CPU share it got while detecting, at least
/// [`PROBE_MIN_BANDWIDTH`]; [`LegacyController::reserve`] applies it.
fn start_probe(state: &mut State, k: &mut dyn Kernel, seat: &Seat, tid: Tid, wait_share: f64, now: u64) {
    let State::Detecting {
        since, cpu0, trace, ..
    } = state
    else {
        return;
    };
    let cpu = match k.cpu_time(tid) {
        Ok(c) => c,
        Err(e) => return seat.kernel_error(tid, &e),
    };
    let dt = now.saturating_sub(*since).max(1);
    let got = cpu0.map_or(0.0, |c0| cpu.saturating_sub(c0) as f64 / dt as f64);
    // A thread seen setting a timer while it was starved uses timers for its activations: until
    // it has caught up with its backlog it sets none, and its usage alone can look on time (the
    // sleeps inside its jobs keep it below its grant), so only its timers can tell it is late.
    let sets_timers = trace.wakeups.iter().any(|w| w.expiry_ns().is_some());
    let timer_user = sets_timers || trace.wakeups.iter().any(Wakeup::is_timer);
    let mut trace = std::mem::take(trace);
    trace.wakeups.clear();
    trace.note = Some(format!(
        "waited for a CPU {:.0} % of the window: probing",
        wait_share * 100.0
    ));
    *state = State::Probing {
        probe: Probe {
            started: now,
            started_cpu: cpu,
            on_time_since: now,
            on_time_cpu: cpu,
            bandwidth: (2.0 * got).max(PROBE_MIN_BANDWIDTH),
            steps: 1,
            sets_timers,
            timer_user,
            last_t: now,
            last_cpu: cpu,
            used_bw: None,
            trace,
        },
        wait_share,
    };
}

/// One tick of a probed thread: judge whether it is still late under the bandwidth it was
/// granted, raise the probe if so, otherwise analyse the window it ran on time through. After
/// [`PROBE_LIMIT_WINDOWS`] windows without one, its trace is judged as a detecting thread's is
/// (a period found then is confirmed once reserved at it), or it stays at the probe period.
#[allow(clippy::too_many_arguments)]
fn probe_step(
    state: &mut State,
    k: &mut dyn Kernel,
    seat: &Seat,
    tid: Tid,
    cfg: &LegacyConfig,
    detector: &dyn Fn(&[u64]) -> PeriodEstimate,
    blank: &Percentile,
    now: u64,
) {
    let State::Probing { probe, wait_share } = state else {
        return;
    };
    let wait_share = *wait_share;
    let mut fresh = Vec::new();
    if let Err(e) = k.drain_wakeups_marked(tid, &mut fresh) {
        seat.kernel_error(tid, &e);
    }
    let set_timer = fresh.iter().any(|w| w.expiry_ns().is_some());
    probe.sets_timers |= set_timer;
    probe.timer_user |= set_timer || fresh.iter().any(Wakeup::is_timer);
    probe.trace.wakeups.extend(fresh);
    probe.trace.keep_window(now, cfg.window_ns);
    let cpu = match k.cpu_time(tid) {
        Ok(c) => c,
        Err(e) => return seat.kernel_error(tid, &e),
    };
    let dt = now.saturating_sub(probe.last_t);
    let used = (dt > 0).then(|| cpu.saturating_sub(probe.last_cpu) as f64 / dt as f64);
    probe.last_t = now;
    probe.last_cpu = cpu;
    if used.is_some() {
        probe.used_bw = used;
    }
    // Judged against the grant, not the request: probes that do not fit the bound together are
    // compressed by the supervisor. A late periodic thread skips the sleep on its timer, so sets
    // none: once the thread has shown that it sets timers, a tick without one is late even below
    // the grant.
    let granted = seat.applied(tid).map(|(q, p)| q as f64 / p as f64);
    let late = match (used, granted) {
        (Some(u), Some(g)) => u >= PROBE_LATE_USE * g || (probe.sets_timers && !set_timer),
        // Not reserved (refused, or not yet applied): nothing to judge.
        _ => true,
    };
    if late {
        if granted.is_some() && probe.bandwidth < cfg.max_bandwidth {
            probe.bandwidth = (probe.bandwidth * 2.0).min(cfg.max_bandwidth);
            probe.steps += 1;
        }
        probe.on_time_since = now;
        probe.on_time_cpu = cpu;
    }
    let on_time = now.saturating_sub(probe.on_time_since);
    let mut found = None;
    if on_time >= cfg.window_ns {
        // A thread that uses timers is judged on the expiries it sets alone: on time, they are
        // its grid, where its timer wake-ups also hold the ends of the sleeps inside its jobs
        // (on Linux a relative sleep's wake-up is a timer's too), which can make a harmonic the
        // more confident answer (seen: 5.1 ms for a 10 ms player with two sleeps per job). While
        // it works off its backlog it sets none, and the sleeps keep its use below the grant,
        // so a window without expiries is not judged.
        let records: Vec<Wakeup> = probe
            .trace
            .wakeups
            .iter()
            .filter(|w| w.t_ns >= probe.on_time_since && !(probe.timer_user && w.is_wakeup()))
            .copied()
            .collect();
        if !probe.timer_user || records.len() >= MIN_TIMER_WAKEUPS {
            let (est, source) = detect_marked(detector, &records);
            probe.trace.source = Some(source);
            found = judge(&mut probe.trace, est, cfg, false).map(|f| (f, Confirm::Done));
        }
    }
    let gave_up = now.saturating_sub(probe.started) >= PROBE_LIMIT_WINDOWS.saturating_mul(cfg.window_ns);
    if found.is_none() && gave_up {
        // Still late (e.g. probes compressed below the demand of an overloaded CPU) or no period
        // on time: what the trace shows, as without the probe, confirmed from a fresh window once
        // reserved at it.
        let (est, source) = detect_marked(detector, probe.trace.wakeups.make_contiguous());
        probe.trace.source = Some(source);
        found = judge(&mut probe.trace, est, cfg, false).map(|f| (f, Confirm::AwaitReservation));
    }
    if found.is_none() && !gave_up {
        return;
    }
    // First budget from the demand while on time, or over the whole probe.
    let (t0, c0) = if on_time >= cfg.tick_ns {
        (probe.on_time_since, probe.on_time_cpu)
    } else {
        (probe.started, probe.started_cpu)
    };
    let demand_bw = cpu.saturating_sub(c0) as f64 / now.saturating_sub(t0).max(1) as f64;
    let (period, confidence, confirm) = match found {
        Some((f, confirm)) => (f.period, f.confidence, confirm),
        // No period: keep the thread reserved at the probe period (demoting a thread that may be
        // throttled risks the kernel fault of docs/linux.md), and keep analysing every window.
        None => (PROBE_PERIOD_NS, 0.0, Confirm::Provisional),
    };
    let demand = (demand_bw * period as f64) as u64;
    let request = cfg.clamp(lfspp_budget(demand, period, period, cfg.spread), period);
    let mut trace = std::mem::take(&mut probe.trace);
    if confirm == Confirm::Provisional {
        trace.note = Some(format!(
            "no period found after probing {PROBE_LIMIT_WINDOWS} windows: reserved at the probe period"
        ));
    }
    let steps = probe.steps;
    *state = State::Controlled {
        ctl: Control::new(period, confidence, cfg, blank, now, cpu, Some(request)),
        follow: Some(Follow {
            trace,
            next_check: now.saturating_add(match confirm {
                Confirm::Provisional => cfg.window_ns,
                _ => cfg.recheck_ns,
            }),
            confirm,
        }),
        probed: Some((steps, wait_share)),
    };
}

/// A period the analyser found, to adopt.
#[derive(Debug, Clone, Copy)]
struct Found {
    period: u64,
    confidence: f64,
    /// The confirmation of a first detection: replaces it even when close.
    force: bool,
}

/// What an analysis of a thread's window said.
#[derive(Debug, Clone, Copy)]
struct Verdict {
    /// The period to adopt, if the analysis found one worth adopting.
    found: Option<Found>,
    source: WakeupSource,
    /// The analyser saw a periodic pattern, whatever its confidence.
    periodic: bool,
    /// Wake-ups in the window.
    wakeups: usize,
    /// At least a quarter of the timer expiries the thread set were already past when set.
    late_expiries: bool,
    /// Timer records in the window: wake-ups a timer raised, and expiries the thread set.
    timer_records: usize,
    /// Wake-ups a timer raised in the window.
    timer_wakeups: usize,
    /// The analyser's confidence in the pattern it saw (0 when it saw none).
    confidence: f64,
}

/// Drains a traced thread's wake-ups into its window and, when an analysis is due, runs it.
fn follow_wakeups(
    state: &mut State,
    k: &mut dyn Kernel,
    seat: &Seat,
    tid: Tid,
    cfg: &LegacyConfig,
    detector: &dyn Fn(&[u64]) -> PeriodEstimate,
    now: u64,
) -> Option<Verdict> {
    if !state.tracing() {
        return None;
    }
    let mut fresh = Vec::new();
    if let Err(e) = k.drain_wakeups_marked(tid, &mut fresh) {
        seat.kernel_error(tid, &e);
    }
    let (trace, due, force) = match state {
        State::Detecting { since, trace, .. } => {
            trace.wakeups.extend(fresh);
            (trace, now.saturating_sub(*since) >= cfg.window_ns, false)
        }
        State::Controlled { follow: Some(f), .. } => {
            f.trace.wakeups.extend(fresh);
            if f.confirm == Confirm::AwaitReservation && seat.applied(tid).is_some() {
                f.confirm = Confirm::Next;
                f.trace.wakeups.clear();
                f.next_check = now.saturating_add(cfg.window_ns);
            }
            let due = now >= f.next_check && !seat.gone(tid);
            let force = due && matches!(f.confirm, Confirm::Next | Confirm::Provisional);
            if due {
                // A provisional period is re-examined every window until one is found.
                let every = if f.confirm == Confirm::Provisional {
                    cfg.window_ns
                } else {
                    cfg.recheck_ns
                };
                f.next_check = now.saturating_add(every);
            }
            if due && f.confirm == Confirm::Next {
                f.confirm = Confirm::Done;
            }
            (&mut f.trace, due, force)
        }
        _ => return None,
    };
    trace.keep_window(now, cfg.window_ns);
    if !due || seat.gone(tid) {
        return None;
    }
    let records = trace.wakeups.make_contiguous();
    let wakeups = records.iter().filter(|w| w.is_wakeup()).count();
    let (mut expiries, mut late) = (0usize, 0usize);
    let timer_wakeups = records.iter().filter(|w| w.is_timer()).count();
    for w in records.iter() {
        if let Some(e) = w.expiry_ns() {
            expiries += 1;
            late += usize::from(e <= w.t_ns);
        }
    }
    let (est, source) = detect_marked(detector, records);
    trace.source = Some(source);
    let periodic = est.is_periodic();
    let confidence = match &est {
        PeriodEstimate::Periodic { confidence, .. } => *confidence,
        PeriodEstimate::NotPeriodic { .. } => 0.0,
    };
    let found = judge(trace, est, cfg, force);
    Some(Verdict {
        found,
        source,
        periodic,
        wakeups,
        late_expiries: expiries > 0 && late * 4 >= expiries,
        timer_records: timer_wakeups + expiries,
        timer_wakeups,
        confidence,
    })
}

/// The period of an estimate, if it is confident enough and can be reserved; otherwise the
/// reason goes to the trace's note.
fn judge(trace: &mut Trace, est: PeriodEstimate, cfg: &LegacyConfig, force: bool) -> Option<Found> {
    match est {
        PeriodEstimate::Periodic {
            period_ns,
            confidence,
            ..
        } => {
            if confidence < cfg.min_confidence {
                trace.note = Some(format!(
                    "period {period_ns} ns found with confidence {confidence:.3} < {}",
                    cfg.min_confidence
                ));
            } else if !cfg.usable_period(period_ns) {
                trace.note = Some(format!("period {period_ns} ns cannot be reserved"));
            } else {
                trace.note = None;
                return Some(Found {
                    period: period_ns,
                    confidence,
                    force,
                });
            }
        }
        PeriodEstimate::NotPeriodic { reason } => {
            // Keep a period already found: one noisy window is not a reason to drop the
            // reservation.
            trace.note = Some(reason);
        }
    }
    None
}

impl Control {
    /// The loop at period `p` from now, when the thread's CPU time is `cpu`.
    fn new(
        p: u64,
        confidence: f64,
        cfg: &LegacyConfig,
        blank: &Percentile,
        now: u64,
        cpu: u64,
        request: Option<u64>,
    ) -> Control {
        Control {
            period: p,
            confidence,
            sampling: sampling_period_for(p, cfg.sampling_ns),
            last_t: now,
            last_cpu: cpu,
            predictor: blank.clone(),
            request,
            hold: None,
            used_bw: None,
            samples: 0,
            saturated: 0,
        }
    }
}

/// Adopts a found period: the first detection, or a real change of a controlled thread's period
/// (or, forced, the confirmation of a first detection, which replaces it even when close).
#[allow(clippy::too_many_arguments)]
fn adopt(
    state: &mut State,
    k: &mut dyn Kernel,
    seat: &Seat,
    tid: Tid,
    cfg: &LegacyConfig,
    blank: &Percentile,
    found: Found,
    now: u64,
) {
    let Found {
        period: p,
        confidence,
        force,
    } = found;
    if let State::Controlled { ctl, follow, .. } = state {
        ctl.confidence = confidence;
        if let Some(f) = follow.as_mut().filter(|f| f.confirm == Confirm::Provisional) {
            f.confirm = Confirm::Done;
            f.next_check = now.saturating_add(cfg.recheck_ns);
        }
        let old = ctl.period;
        if p == old || (!force && (p as f64 - old as f64).abs() <= cfg.period_tolerance * old as f64) {
            return;
        }
    }
    let cpu = match k.cpu_time(tid) {
        Ok(c) => c,
        Err(e) => {
            seat.kernel_error(tid, &e);
            return;
        }
    };
    match state {
        State::Controlled { ctl, .. } => {
            // Until the first sample against the new period, keep the bandwidth (not the runtime)
            // of the current request: the old runtime every new period would be a different
            // reservation.
            if let Some(q) = ctl.request {
                let scaled = (q as u128 * p as u128)
                    .div_ceil(ctl.period as u128)
                    .min(u64::MAX as u128) as u64;
                ctl.request = Some(cfg.clamp(scaled, p));
            }
            ctl.period = p;
            ctl.sampling = sampling_period_for(p, cfg.sampling_ns);
            ctl.last_t = now;
            ctl.last_cpu = cpu;
            // Samples measured against another period mean something else: start over.
            ctl.predictor = blank.clone();
        }
        State::Detecting {
            since, cpu0, trace, ..
        } => {
            // First budget from the CPU time used while detecting, so the thread is reserved now
            // rather than one sampling period later.
            let dt = now.saturating_sub(*since);
            let request = cpu0.filter(|_| dt > 0).map(|c0| {
                let demand = (cpu.saturating_sub(c0) as u128 * p as u128 / dt as u128) as u64;
                cfg.clamp(lfspp_budget(demand, p, p, cfg.spread), p)
            });
            *state = State::Controlled {
                ctl: Control::new(p, confidence, cfg, blank, now, cpu, request),
                follow: Some(Follow {
                    trace: std::mem::take(trace),
                    next_check: now.saturating_add(cfg.recheck_ns),
                    confirm: Confirm::AwaitReservation,
                }),
                probed: None,
            };
        }
        State::Pending | State::Probing { .. } | State::Gone { .. } => {}
    }
}

/// One LFS++ sample when S has elapsed: W_k − W_{k−1} → predictor → Q_req.
fn sample(
    ctl: &mut Control,
    k: &dyn Kernel,
    seat: &Seat,
    tid: Tid,
    cfg: &LegacyConfig,
    now: u64,
) -> Result<(), KernelError> {
    if now.saturating_sub(ctl.last_t) < ctl.sampling {
        return Ok(());
    }
    let cpu = k.cpu_time(tid)?;
    let dt = now - ctl.last_t;
    let dw = cpu.saturating_sub(ctl.last_cpu);
    // W_k − W_{k−1} over exactly S: ticks may land a little after S has elapsed.
    let sample = (dw as u128 * ctl.sampling as u128 / dt as u128) as u64;
    let used = dw as f64 / dt as f64;
    if let Some((q, ap)) = seat.applied(tid) {
        if used >= SATURATION * q as f64 / ap as f64 {
            ctl.saturated += 1;
        }
    }
    ctl.used_bw = Some(used);
    ctl.predictor.observe(sample);
    ctl.samples += 1;
    ctl.last_t = now;
    ctl.last_cpu = cpu;
    let predicted = ctl.predictor.predict().unwrap_or(sample);
    ctl.request = Some(cfg.clamp(
        lfspp_budget(predicted, ctl.period, ctl.sampling, cfg.spread),
        ctl.period,
    ));
    Ok(())
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
        let tids: Vec<Tid> = self.roster.threads.keys().copied().collect();
        for tid in tids {
            self.sense(k, tid, now);
        }
        self.power_step(k, now);
        self.reserve(k);
        self.check_holds();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A detecting thread that waited `wait` of a whole window.
    fn detecting(wait: f64) -> State {
        let w = LegacyConfig::default().window_ns;
        State::Detecting {
            since: 0,
            cpu0: Some(0),
            delays: VecDeque::from([(0, 0), (w, (wait * w as f64) as u64)]),
            trace: Trace::default(),
        }
    }

    fn verdict(periodic: bool, wakeups: usize, timer_wakeups: usize, expiries: usize) -> Verdict {
        Verdict {
            found: None,
            source: WakeupSource::All,
            periodic,
            wakeups,
            late_expiries: false,
            timer_records: timer_wakeups + expiries,
            timer_wakeups,
            confidence: if periodic { 0.1 } else { 0.0 },
        }
    }

    #[test]
    fn which_starved_threads_are_probed() {
        let cfg = LegacyConfig::default();
        let starved_90 = detecting(0.9);
        let probed = |v: Verdict| starved(&starved_90, &v, &cfg).is_some();
        // A periodic pattern with a timer in the window.
        assert!(probed(verdict(true, 20, 2, 0)));
        // Deep starvation: the load's rhythm, no pattern of its own, but timers wake it.
        assert!(probed(verdict(false, 30, 28, 0)));
        assert!(probed(verdict(false, 16, 8, 0)));
        // No pattern and too few timer wake-ups, or mostly other wake-ups (I/O, signals).
        assert!(!probed(verdict(false, 30, 7, 0)));
        assert!(!probed(verdict(false, 40, 12, 0)));
        // A periodic pattern without any timer and little confidence: not a timer user.
        assert!(!probed(verdict(true, 20, 0, 1)));
        // Too few wake-ups at all.
        assert!(!probed(verdict(false, 7, 7, 0)));
        // Not starved: waited under the 10 % threshold.
        assert!(starved(&detecting(0.05), &verdict(false, 30, 28, 0), &cfg).is_none());
        assert!(starved(&detecting(0.2), &verdict(false, 30, 28, 0), &cfg)
            .is_some_and(|w| (w - 0.2).abs() < 1e-9));
    }
}
