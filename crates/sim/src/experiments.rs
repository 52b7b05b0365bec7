//! Experiment drivers that combine the simulator with the adaptation engine, used by
//! `pacer bench …` and the benchmarks in docs/BENCHMARKS.md.
//!
//! [`period_trial`] and [`period_point`] reproduce the LFS++ wake-up-tracing experiment
//! (lfspp-legacy-multimedia §7.4, Fig. 8–9): the period of a multimedia-like program is detected from its traced wake-ups
//! for a given observation window, while background SCHED_FIFO load shifts the wake-ups that
//! happen inside its jobs (its I/O completions), so only the job activations stay periodic.

use pacer_adapt::controller::{
    detect_marked, LegacyConfig, LegacyController, Phase as CtlPhase, ThreadOptions, WakeupSource,
};
use pacer_adapt::kernel::Wakeup;
use pacer_adapt::period::{analyse, PeriodConfig, PeriodEstimate, DEFAULT_MIN_CONFIDENCE};
use pacer_adapt::Controller;
use pacer_model::{Duration, Policy};
use pacer_workload::{Event, Phase, ThreadSpec, TimerId, TimerMode, Work, Workload};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

use crate::{JobRecord, Observer, Sim, SimConfig};

/// Simulated time before tracing starts, ns.
pub const WARMUP_NS: u64 = 500_000_000;

/// The periods of the trials, drawn from multimedia rates (24–60 fps and audio-like 10–40 ms).
pub const PERIODS: [u64; 6] = [
    41_666_667, 40_000_000, 33_366_700, 16_683_350, 10_000_000, 23_219_955,
];

struct Nothing;
impl Observer for Nothing {
    fn job(&mut self, _: &JobRecord) {}
}

/// One trial of the period-detection experiment.
#[derive(Debug, Clone, Serialize)]
pub struct PeriodTrial {
    pub seed: u64,
    pub true_period_ns: u64,
    /// Detected period with origin marking (the controller's rule, [`detect_marked`]), `None`
    /// when the analyser answered "not periodic".
    pub detected_ns: Option<u64>,
    /// |detected − true| / true.
    pub error: Option<f64>,
    /// The analyser's confidence in `detected_ns`.
    pub confidence: Option<f64>,
    /// The records `detected_ns` was found on.
    pub source: WakeupSource,
    /// Detected period with origin marking of the wake-ups but without the expiries of the
    /// timers the program set (what a tracer of `sched_wakeup` alone can do).
    pub detected_wakeups_ns: Option<u64>,
    pub error_wakeups: Option<f64>,
    /// Detected period from all wake-ups, origins ignored (the analyser alone, as before origin
    /// marking).
    pub detected_all_ns: Option<u64>,
    pub error_all: Option<f64>,
    /// Wake-ups the analyser saw, how many of them a timer raised, and how many timer expiries
    /// the program set in the window.
    pub events: usize,
    pub timer_events: usize,
    pub expiry_events: usize,
    /// Wall time of the analysis of all wake-ups, ns.
    pub analysis_ns: u64,
}

/// Impairments applied to the traced wake-ups before analysis, to test the analyser on
/// degraded traces (a lossy tracer, unrelated wake-ups, timestamp noise). Seeded by the trial.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Degradation {
    /// Fraction of wake-ups removed at random.
    pub drop: f64,
    /// Extra wake-ups per traced one, at uniformly random times of the window, not timer-raised.
    pub spurious: f64,
    /// Standard deviation of Gaussian noise added to every timestamp, ns.
    pub jitter_ns: u64,
}

impl Degradation {
    pub fn is_none(&self) -> bool {
        *self == Degradation::default()
    }

    fn apply(&self, wakeups: &mut Vec<Wakeup>, window: (u64, u64), rng: &mut ChaCha8Rng) {
        if self.is_none() {
            return;
        }
        let kept = wakeups.len();
        wakeups.retain(|_| rng.random::<f64>() >= self.drop);
        if self.jitter_ns > 0 {
            for w in wakeups.iter_mut() {
                // Box–Muller: one standard normal from two uniforms.
                let (u1, u2): (f64, f64) = (1.0 - rng.random::<f64>(), rng.random());
                let z = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
                w.t_ns = (w.t_ns as f64 + z * self.jitter_ns as f64).max(0.0) as u64;
            }
        }
        let extra = (self.spurious * kept as f64).round() as usize;
        for _ in 0..extra {
            let t_ns = rng.random_range(window.0..window.1.max(window.0 + 1));
            wakeups.push(Wakeup::other(t_ns));
        }
        wakeups.sort_by_key(|w| w.t_ns);
    }
}

/// The program of [`period_trial`] (thread 0) and its background SCHED_FIFO load, drawn from
/// `rng`.
pub fn period_workload(period_ns: u64, load: f64, rng: &mut ChaCha8Rng) -> Vec<ThreadSpec> {
    let us = Duration::from_us;
    // The traced program: decode, wait for I/O, decode, wait, output — ~12 % of the CPU at 33 ms.
    let app = ThreadSpec {
        name: "player".into(),
        policy: Policy::Other { nice: 0 },
        affinity: None,
        start_delay: Duration(rng.random_range(0..period_ns)),
        phases: vec![Phase::new(
            1,
            vec![
                Event::Run {
                    work: Work::Uniform {
                        min: us(1_500),
                        max: us(2_500),
                    },
                },
                Event::Sleep { duration: us(1_000) },
                Event::Run {
                    work: Work::Uniform {
                        min: us(500),
                        max: us(1_500),
                    },
                },
                Event::Sleep { duration: us(500) },
                Event::Run {
                    work: Work::Fixed { ns: us(500) },
                },
                Event::Timer {
                    timer: TimerId(0),
                    period: Duration(period_ns),
                    mode: TimerMode::Absolute,
                },
            ],
        )],
        loops: None,
        cooperative: false,
        job_deadline: None,
        ..Default::default()
    };
    let mut threads = vec![app];
    if load > 0.0 {
        // Split the load over four periodic SCHED_FIFO tasks (sorted uniform cuts of [0, load]).
        let mut cuts: Vec<f64> = (0..3).map(|_| rng.random_range(0.0..load)).collect();
        cuts.push(0.0);
        cuts.push(load);
        cuts.sort_by(f64::total_cmp);
        for i in 0..4 {
            let u = cuts[i + 1] - cuts[i];
            let t = (5.0 * 10f64.powf(rng.random_range(0.0..1.0))) as u64 * 1_000_000; // 5–50 ms
            let c = ((u * t as f64) as u64).max(1);
            threads.push(ThreadSpec {
                name: format!("rt{i}"),
                policy: Policy::Fifo {
                    priority: 50 + i as u8,
                },
                affinity: None,
                start_delay: Duration(rng.random_range(0..t)),
                phases: vec![Phase::new(
                    1,
                    vec![
                        Event::Run {
                            work: Work::Fixed { ns: Duration(c) },
                        },
                        Event::Timer {
                            timer: TimerId(1 + i),
                            period: Duration(t),
                            mode: TimerMode::Absolute,
                        },
                    ],
                )],
                loops: None,
                cooperative: false,
                job_deadline: None,
                ..Default::default()
            });
        }
    }
    threads
}

/// The program of [`period_workload`] and its load on one CPU, seeded, run for [`WARMUP_NS`].
fn warmed_up(period_ns: u64, load: f64, seed: u64) -> Sim {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let threads = period_workload(period_ns, load, &mut rng);
    let mut sc = SimConfig::new(1);
    sc.seed = seed;
    // The tables of docs/BENCHMARKS.md ("Period detection") were made before timer slack was
    // modelled; with the kernel's 50 µs on the SCHED_OTHER program, 1 of 10 trials at 45 %
    // load changes its outcome. Kept at 0 so they reproduce.
    sc.timer_slack = 0;
    let mut sim = Sim::new(
        Workload {
            threads,
            duration: None,
            ignored: vec![],
            ..Default::default()
        },
        sc,
    )
    .expect("valid experiment workload");
    sim.run_until(WARMUP_NS, &mut Nothing);
    sim
}

/// Runs one trial: a program with period `period_ns` (three wake-ups per job: the timer and two
/// I/O completions; and the timer it sets at the end of each job) on one CPU next to SCHED_FIFO load of total utilisation `load` (four tasks,
/// UUniFast-like split, periods 5–50 ms), traced for `window_ns` after 0.5 s of warm-up; the
/// trace is then degraded by `degrade`. The simulator marks the timer's wake-ups (job releases)
/// and not the I/O completions, and records the expiry of each timer the program sets (see
/// `SimKernel::drain_wakeups_marked`).
pub fn period_trial(
    period_ns: u64,
    load: f64,
    window_ns: u64,
    degrade: Degradation,
    seed: u64,
    cfg: &PeriodConfig,
) -> PeriodTrial {
    let mut sim = warmed_up(period_ns, load, seed);
    let warmup = WARMUP_NS;
    let mut k = sim.kernel();
    pacer_adapt::Kernel::trace_wakeups(&mut k, 0, true).expect("thread 0 exists");
    sim.run_until(warmup + window_ns, &mut Nothing);
    let mut wakeups = Vec::new();
    pacer_adapt::Kernel::drain_wakeups_marked(&mut sim.kernel(), 0, &mut wakeups).expect("thread 0 exists");
    // Its own stream, so that degrading a trace does not change the simulated one.
    let mut noise = ChaCha8Rng::seed_from_u64(seed ^ 0x5eed_dec0_de00_0000);
    degrade.apply(&mut wakeups, (warmup, warmup + window_ns), &mut noise);
    let all: Vec<u64> = wakeups.iter().filter(|w| w.is_wakeup()).map(|w| w.t_ns).collect();
    let started = std::time::Instant::now();
    let est_all = analyse(&all, cfg);
    let analysis_ns = started.elapsed().as_nanos() as u64;
    let (est, source) = detect_marked(&|ts: &[u64]| analyse(ts, cfg), &wakeups);
    let err = |d: Option<u64>| d.map(|d| (d as f64 - period_ns as f64).abs() / period_ns as f64);
    let (detected_ns, confidence) = match est {
        PeriodEstimate::Periodic {
            period_ns,
            confidence,
            ..
        } => (Some(period_ns), Some(confidence)),
        PeriodEstimate::NotPeriodic { .. } => (None, None),
    };
    let detected_all_ns = est_all.period_ns();
    let only_wakeups: Vec<Wakeup> = wakeups.iter().copied().filter(Wakeup::is_wakeup).collect();
    let detected_wakeups_ns = detect_marked(&|ts: &[u64]| analyse(ts, cfg), &only_wakeups)
        .0
        .period_ns();
    PeriodTrial {
        seed,
        true_period_ns: period_ns,
        detected_ns,
        error: err(detected_ns),
        confidence,
        source,
        detected_wakeups_ns,
        error_wakeups: err(detected_wakeups_ns),
        detected_all_ns,
        error_all: err(detected_all_ns),
        events: all.len(),
        timer_events: wakeups.iter().filter(|w| w.is_timer()).count(),
        expiry_events: wakeups.iter().filter(|w| !w.is_wakeup()).count(),
        analysis_ns,
    }
}

/// Aggregate of trials at one (window, load, degradation) point.
#[derive(Debug, Clone, Serialize)]
pub struct PeriodPoint {
    pub window_ns: u64,
    pub load: f64,
    pub degradation: Degradation,
    pub trials: usize,
    /// Fraction of trials whose detected period (origin marking on) is within 1 % of the truth.
    pub within_1pct: f64,
    /// Fraction within 1 % and with a confidence of at least
    /// [`DEFAULT_MIN_CONFIDENCE`]: what a
    /// controller with the default threshold adopts correctly.
    pub within_1pct_confident: f64,
    /// Fraction of trials with a period off by more than 1 % yet adopted at the default
    /// confidence threshold.
    pub wrong_confident: f64,
    /// Fraction within 1 % with origin marking of the wake-ups but without the timer
    /// expiries ([`PeriodTrial::detected_wakeups_ns`]).
    pub within_1pct_wakeups: f64,
    /// Fraction within 1 % when all wake-ups are analysed, origins ignored.
    pub within_1pct_all: f64,
    /// Fraction of trials whose estimate came from the timer expiries alone, and from the timer
    /// wake-ups alone.
    pub expiry_source: f64,
    pub timer_source: f64,
    /// Median relative error over the trials that detected a period.
    pub median_error: Option<f64>,
    pub max_error: Option<f64>,
    /// Median wake-ups analysed, median timer wake-ups among them, median timer expiries set,
    /// and median analysis time (of all wake-ups), ns.
    pub median_events: usize,
    pub median_timer_events: usize,
    pub median_expiry_events: usize,
    pub median_analysis_ns: u64,
}

fn median<T: Copy + PartialOrd>(mut v: Vec<T>) -> Option<T> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    Some(v[v.len() / 2])
}

/// Runs `trials` seeded trials at one point; periods drawn from multimedia rates (24–60 fps and
/// audio-like 10–40 ms), seeds `seed..seed+trials`.
pub fn period_point(
    window_ns: u64,
    load: f64,
    degrade: Degradation,
    trials: usize,
    seed: u64,
    cfg: &PeriodConfig,
) -> (PeriodPoint, Vec<PeriodTrial>) {
    let runs: Vec<PeriodTrial> = (0..trials as u64)
        .map(|i| {
            period_trial(
                PERIODS[i as usize % PERIODS.len()],
                load,
                window_ns,
                degrade,
                seed + i,
                cfg,
            )
        })
        .collect();
    let share =
        |f: &dyn Fn(&PeriodTrial) -> bool| runs.iter().filter(|r| f(r)).count() as f64 / trials.max(1) as f64;
    let within = |e: Option<f64>| e.is_some_and(|e| e <= 0.01);
    let confident = |r: &PeriodTrial| r.confidence.is_some_and(|c| c >= DEFAULT_MIN_CONFIDENCE);
    let errors: Vec<f64> = runs.iter().filter_map(|r| r.error).collect();
    let point = PeriodPoint {
        window_ns,
        load,
        degradation: degrade,
        trials,
        within_1pct: share(&|r| within(r.error)),
        within_1pct_confident: share(&|r| within(r.error) && confident(r)),
        wrong_confident: share(&|r| r.error.is_some_and(|e| e > 0.01) && confident(r)),
        within_1pct_wakeups: share(&|r| within(r.error_wakeups)),
        within_1pct_all: share(&|r| within(r.error_all)),
        expiry_source: share(&|r| r.source == WakeupSource::TimerExpiry),
        timer_source: share(&|r| r.source == WakeupSource::Timer),
        median_error: median(errors.clone()),
        max_error: errors.iter().copied().reduce(f64::max),
        median_events: median(runs.iter().map(|r| r.events).collect()).unwrap_or(0),
        median_timer_events: median(runs.iter().map(|r| r.timer_events).collect()).unwrap_or(0),
        median_expiry_events: median(runs.iter().map(|r| r.expiry_events).collect()).unwrap_or(0),
        median_analysis_ns: median(runs.iter().map(|r| r.analysis_ns).collect()).unwrap_or(0),
    };
    (point, runs)
}

/// One trial of period detection in closed loop: the [`LegacyController`] runs on the program
/// of [`period_trial`] for `horizon_ns` after the warm-up, tracing, probing (when `cfg` lets it)
/// and reserving it, so a reservation that makes the program run on time changes what its
/// trace shows.
#[derive(Debug, Clone, Serialize)]
pub struct ClosedLoopTrial {
    pub seed: u64,
    pub true_period_ns: u64,
    /// The first period the controller reserved the program at, and the one at the end.
    pub first_period_ns: Option<u64>,
    pub final_period_ns: Option<u64>,
    /// |final − true| / true.
    pub final_error: Option<f64>,
    /// Whether the program was probed, and the share of its first window it waited for a CPU.
    pub probed: bool,
    pub wait_share: Option<f64>,
    /// Time from the start of tracing until the reserved period was within 1 % of the truth
    /// for good (`None`: not at the end).
    pub right_after_ns: Option<u64>,
}

/// Runs one closed-loop trial (see [`ClosedLoopTrial`]).
pub fn closed_loop_trial(
    period_ns: u64,
    load: f64,
    horizon_ns: u64,
    seed: u64,
    cfg: &LegacyConfig,
) -> ClosedLoopTrial {
    let mut sim = warmed_up(period_ns, load, seed);
    let mut lc = LegacyController::new(cfg.clone()).expect("valid controller configuration");
    lc.add_thread(0, ThreadOptions::default())
        .expect("thread 0 exists");
    let right =
        |p: Option<u64>| p.is_some_and(|p| (p as f64 - period_ns as f64).abs() <= 0.01 * period_ns as f64);
    let (mut first, mut last, mut right_since) = (None, None, None);
    let mut t = WARMUP_NS;
    let end = WARMUP_NS.saturating_add(horizon_ns);
    // The controller ticks after the simulation reaches each tick time, as a hosted one would.
    while t < end {
        t = t.saturating_add(cfg.tick_ns).min(end);
        sim.run_until(t, &mut Nothing);
        lc.tick(&mut sim.kernel());
        let st = lc.thread_status(0).expect("thread 0 is controlled");
        let reserved = (st.phase == CtlPhase::Controlled)
            .then_some(st.period_ns)
            .flatten();
        if first.is_none() {
            first = reserved;
        }
        if right(reserved) {
            right_since.get_or_insert(t - WARMUP_NS);
        } else {
            right_since = None;
        }
        last = Some(st);
    }
    let st = last.expect("at least one tick");
    let final_period_ns = (st.phase == CtlPhase::Controlled)
        .then_some(st.period_ns)
        .flatten();
    ClosedLoopTrial {
        seed,
        true_period_ns: period_ns,
        first_period_ns: first,
        final_period_ns,
        final_error: final_period_ns.map(|p| (p as f64 - period_ns as f64).abs() / period_ns as f64),
        probed: st.probes > 0,
        wait_share: st.wait_share,
        right_after_ns: right_since,
    }
}

/// Aggregate of closed-loop trials at one load.
#[derive(Debug, Clone, Serialize)]
pub struct ClosedLoopPoint {
    pub load: f64,
    pub horizon_ns: u64,
    pub trials: usize,
    /// Share of trials whose reserved period is within 1 % of the truth at the end.
    pub within_1pct: f64,
    /// Share whose first reserved period was already within 1 %.
    pub first_within_1pct: f64,
    /// Share of trials ending on a wrong period (reserved, more than 1 % off).
    pub wrong: f64,
    /// Share of trials in which the program was probed.
    pub probed: f64,
    /// Median and largest time until the period was right for good, over the trials that got
    /// there, ns.
    pub median_right_after_ns: Option<u64>,
    pub max_right_after_ns: Option<u64>,
}

/// Runs `trials` closed-loop trials at one load, periods from [`PERIODS`], seeds
/// `seed..seed+trials`.
pub fn closed_loop_point(
    load: f64,
    horizon_ns: u64,
    trials: usize,
    seed: u64,
    cfg: &LegacyConfig,
) -> (ClosedLoopPoint, Vec<ClosedLoopTrial>) {
    let runs: Vec<ClosedLoopTrial> = (0..trials as u64)
        .map(|i| {
            closed_loop_trial(
                PERIODS[i as usize % PERIODS.len()],
                load,
                horizon_ns,
                seed + i,
                cfg,
            )
        })
        .collect();
    let share = |f: &dyn Fn(&ClosedLoopTrial) -> bool| {
        runs.iter().filter(|r| f(r)).count() as f64 / trials.max(1) as f64
    };
    let near = |p: Option<u64>, truth: u64| {
        p.is_some_and(|p| (p as f64 - truth as f64).abs() <= 0.01 * truth as f64)
    };
    let times: Vec<u64> = runs.iter().filter_map(|r| r.right_after_ns).collect();
    let point = ClosedLoopPoint {
        load,
        horizon_ns,
        trials,
        within_1pct: share(&|r| near(r.final_period_ns, r.true_period_ns)),
        first_within_1pct: share(&|r| near(r.first_period_ns, r.true_period_ns)),
        wrong: share(&|r| r.final_period_ns.is_some() && !near(r.final_period_ns, r.true_period_ns)),
        probed: share(&|r| r.probed),
        median_right_after_ns: median(times.clone()),
        max_right_after_ns: times.iter().copied().max(),
    };
    (point, runs)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each job that sleeps on its timer leaves the expiry it set, which is the period's grid:
    /// on an idle CPU every job does, and the expiries alone give the period exactly. A program
    /// late at every expiry (10 ms with 35 % of the CPU beside 85 % of FIFO load) never sleeps
    /// on its timer, as under rt-app, and leaves none: the limit docs/BENCHMARKS.md reports.
    #[test]
    fn expiries_are_recorded_when_the_program_sleeps_on_its_timer() {
        let cfg = PeriodConfig::default();
        let idle = period_trial(33_366_700, 0.0, 1_000_000_000, Degradation::default(), 3, &cfg);
        assert_eq!(idle.source, WakeupSource::TimerExpiry, "{idle:?}");
        assert_eq!(idle.expiry_events, idle.timer_events, "{idle:?}");
        assert!(idle.expiry_events >= 29, "{idle:?}");
        assert_eq!(idle.error, Some(0.0), "{idle:?}");
        let late = period_trial(10_000_000, 0.85, 1_000_000_000, Degradation::default(), 5, &cfg);
        assert!(late.expiry_events < 8, "{late:?}");
        assert_eq!(late.expiry_events, late.timer_events, "{late:?}");
    }

    /// The run delay counts the time a thread is runnable without a CPU: a SCHED_OTHER spinner
    /// beside a SCHED_FIFO task taking half the CPU waits about half the time.
    #[test]
    fn run_delay_counts_the_wait_for_a_cpu() {
        let spin = ThreadSpec {
            name: "spin".into(),
            policy: Policy::Other { nice: 0 },
            affinity: None,
            start_delay: Duration(0),
            phases: vec![Phase::new(
                1,
                vec![Event::Run {
                    work: Work::Fixed {
                        ns: Duration::from_ms(1),
                    },
                }],
            )],
            loops: None,
            cooperative: false,
            job_deadline: None,
            ..Default::default()
        };
        let fifo = ThreadSpec {
            name: "rt".into(),
            policy: Policy::Fifo { priority: 50 },
            phases: vec![Phase::new(
                1,
                vec![
                    Event::Run {
                        work: Work::Fixed {
                            ns: Duration::from_ms(5),
                        },
                    },
                    Event::Timer {
                        timer: TimerId(0),
                        period: Duration::from_ms(10),
                        mode: TimerMode::Absolute,
                    },
                ],
            )],
            ..spin.clone()
        };
        let mut sim = Sim::new(
            Workload {
                threads: vec![spin, fifo],
                duration: None,
                ignored: vec![],
                ..Default::default()
            },
            SimConfig::new(1),
        )
        .unwrap();
        sim.run_until(1_000_000_000, &mut Nothing);
        let k = sim.kernel();
        let waited = pacer_adapt::Kernel::run_delay(&k, 0).unwrap().unwrap();
        let ran = pacer_adapt::Kernel::cpu_time(&k, 0).unwrap();
        assert!(
            (450_000_000..=550_000_000).contains(&waited),
            "waited {waited} ns"
        );
        assert_eq!(waited + ran, 1_000_000_000, "a spinner is waiting or running");
        // The FIFO task never waits: it preempts the spinner at once.
        assert_eq!(pacer_adapt::Kernel::run_delay(&k, 1).unwrap(), Some(0));
    }

    /// The rt-app-shaped program beside 85 % of FIFO load: late at most activations, so its
    /// trace holds no period. The controller sees it waiting for the CPU, probes it, and
    /// reserves it at its exact period.
    #[test]
    fn a_starved_program_is_probed_and_its_period_found() {
        let t = closed_loop_trial(10_000_000, 0.85, 6_000_000_000, 7, &LegacyConfig::default());
        assert!(t.probed, "{t:?}");
        assert!(t.wait_share.is_some_and(|w| w >= 0.1), "{t:?}");
        assert_eq!(t.first_period_ns, Some(10_000_000), "{t:?}");
        assert!(t.final_error.is_some_and(|e| e <= 0.01), "{t:?}");
        // Without the probe the same trial adopts what the late wake-ups suggest.
        let cfg = LegacyConfig {
            probe_wait: None,
            ..LegacyConfig::default()
        };
        let plain = closed_loop_trial(10_000_000, 0.85, 6_000_000_000, 7, &cfg);
        assert!(!plain.probed, "{plain:?}");
    }

    /// The target of issue 12: at 85 % background FIFO load, at least 90 % of the trials end
    /// reserved within 1 % of the true period after 10 s (the open-loop table stays at 40 %:
    /// one window of a late program cannot show its period).
    #[test]
    fn closed_loop_detection_at_85_percent_load() {
        let (p, runs) = closed_loop_point(0.85, 10_000_000_000, 30, 1, &LegacyConfig::default());
        let wrong: Vec<_> = runs
            .iter()
            .filter(|r| r.final_error.is_none_or(|e| e > 0.01))
            .collect();
        assert!(p.within_1pct >= 0.9, "{p:?}; off: {wrong:?}");
        assert!(p.first_within_1pct >= 0.9, "{p:?}");
        assert!(p.max_right_after_ns.is_some_and(|t| t <= 6_000_000_000), "{p:?}");
    }

    /// A probe that never finds a period leaves the thread reserved at the probe period (not
    /// demoted: see docs/linux.md on re-entering SCHED_DEADLINE), and analysed every window.
    #[test]
    fn a_probe_without_a_period_keeps_the_thread_reserved_at_the_probe_period() {
        let mut sim = warmed_up(10_000_000, 0.85, 3);
        // An analyser that sees a pattern but is never sure enough of it to adopt it (sure enough
        // to probe: PROBE_MIN_CONFIDENCE).
        let unsure = |_: &[u64]| PeriodEstimate::Periodic {
            period_ns: 10_000_000,
            freq_hz: 100.0,
            confidence: 0.3,
            candidates: vec![],
        };
        let cfg = LegacyConfig::default();
        let mut lc = LegacyController::new(cfg.clone())
            .unwrap()
            .with_detector(Box::new(unsure));
        lc.add_thread(0, ThreadOptions::default()).unwrap();
        let mut phases = Vec::new();
        for i in 1..=80u64 {
            sim.run_until(WARMUP_NS + i * cfg.tick_ns, &mut Nothing);
            lc.tick(&mut sim.kernel());
            let st = lc.thread_status(0).unwrap();
            if phases.last() != Some(&st.phase) {
                phases.push(st.phase);
            }
        }
        assert_eq!(
            phases,
            [CtlPhase::Detecting, CtlPhase::Probing, CtlPhase::Controlled]
        );
        let st = lc.thread_status(0).unwrap();
        assert_eq!(
            st.period_ns,
            Some(pacer_adapt::controller::PROBE_PERIOD_NS),
            "{st:?}"
        );
        assert_eq!(st.confidence, Some(0.0));
        assert!(
            st.probes >= 2,
            "the probe was raised while the thread was late: {st:?}"
        );
        let Policy::Deadline(r) = sim.policy_of(0).unwrap() else {
            panic!("not reserved: {:?}", sim.policy_of(0));
        };
        assert_eq!(r.period.ns(), pacer_adapt::controller::PROBE_PERIOD_NS);
    }
}
