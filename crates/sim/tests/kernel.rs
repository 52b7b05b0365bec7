//! The simulator's `Kernel` implementation: run-time policy changes with admission control,
//! wake-up tracing, frequency scaling, workUnits hints and hosted controllers.

mod support;

use std::cell::RefCell;
use std::rc::Rc;
use support::Jobs;

use pacer_adapt::{AppEvent, Controller, Kernel, KernelError};
use pacer_model::{Duration, Policy, Reservation};
use pacer_sim::{Sim, SimConfig};
use pacer_workload::{Event, Phase, ThreadSpec, TimerId, TimerMode, Work, Workload};

const MS: u64 = 1_000_000;

fn ms(x: u64) -> Duration {
    Duration::from_ms(x)
}

fn spec(name: &str, policy: Policy, events: Vec<Event>) -> ThreadSpec {
    ThreadSpec {
        name: name.into(),
        policy,
        affinity: None,
        start_delay: Duration::ZERO,
        phases: vec![Phase::new(1, events)],
        loops: None,
        cooperative: false,
        job_deadline: None,
        ..Default::default()
    }
}

fn periodic(name: &str, timer: usize, c: u64, t: u64, policy: Policy) -> ThreadSpec {
    spec(
        name,
        policy,
        vec![
            Event::Run {
                work: Work::Fixed { ns: ms(c) },
            },
            Event::Timer {
                timer: TimerId(timer),
                period: ms(t),
                mode: TimerMode::Absolute,
            },
        ],
    )
}

fn sim(threads: Vec<ThreadSpec>, cfg: SimConfig) -> Sim {
    Sim::new(
        Workload {
            threads,
            duration: None,
            ignored: vec![],
            ..Default::default()
        },
        cfg,
    )
    .unwrap()
}

#[test]
fn policy_changes_at_run_time_with_admission_control() {
    let mut s = sim(
        vec![
            periodic("a", 0, 2, 10, Policy::Other { nice: 0 }),
            periodic("b", 1, 2, 10, Policy::Other { nice: 0 }),
        ],
        SimConfig::new(1),
    );
    s.run_until(5 * MS, &mut Jobs::default());
    let mut k = s.kernel();
    assert_eq!(k.dl_state(0).unwrap(), None);
    let r = Reservation::new(ms(3), ms(10), ms(10));
    k.set_policy(0, Policy::Deadline(r)).unwrap();
    assert_eq!(k.policy(0).unwrap(), Policy::Deadline(r));
    assert!(k.dl_state(0).unwrap().is_some());
    // One CPU: 0.95 − 0.05 (fair server) = 0.90 available; 0.3 + 0.7 does not fit.
    let big = Reservation::new(ms(7), ms(10), ms(10));
    assert!(matches!(
        k.set_policy(1, Policy::Deadline(big)),
        Err(KernelError::Admission(_))
    ));
    assert!(matches!(
        k.set_policy(1, Policy::Fifo { priority: 0 }),
        Err(KernelError::Invalid(_))
    ));
    assert!(matches!(
        k.set_policy(9, Policy::Other { nice: 0 }),
        Err(KernelError::NoSuchThread(9))
    ));
    assert!((k.dl_bandwidth_limit(None) - 0.90).abs() < 1e-3);
    // Under its reservation thread a keeps meeting its deadlines.
    let mut jobs = Jobs::default();
    s.run_until(205 * MS, &mut jobs);
    let a: Vec<_> = jobs.0.iter().filter(|j| j.thread == 0).collect();
    assert!(a.len() >= 19 && a.iter().all(|j| !j.missed()));
}

#[test]
fn wakeups_are_traced_on_request() {
    let mut s = sim(
        vec![periodic("p", 0, 1, 8, Policy::Other { nice: 0 })],
        SimConfig::new(1),
    );
    s.kernel().trace_wakeups(0, true).unwrap();
    // A SCHED_OTHER thread's timer fires its timer slack after the expiry.
    let slack = pacer_sim::DEFAULT_TIMER_SLACK_NS;
    s.run_until(40 * MS + slack, &mut Jobs::default());
    let mut w = Vec::new();
    s.kernel().drain_wakeups(0, &mut w).unwrap();
    let expected: Vec<u64> = (0..=5)
        .map(|k| if k == 0 { 0 } else { k * 8 * MS + slack })
        .collect();
    assert_eq!(w, expected);
    w.clear();
    s.kernel().drain_wakeups(0, &mut w).unwrap();
    assert!(w.is_empty(), "drained events are not returned twice");
}

#[test]
fn frequency_scales_work_and_runtime_accounting() {
    let mut cfg = SimConfig::new(1);
    cfg.freqs_khz = vec![500_000, 1_000_000];
    let r = Reservation::new(ms(3), ms(10), ms(10));
    let mut s = sim(vec![periodic("p", 0, 2, 10, Policy::Deadline(r))], cfg);
    let mut jobs = Jobs::default();
    s.run_until(5 * MS, &mut jobs);
    s.kernel().set_frequency(0, 500_000).unwrap();
    s.run_until(25 * MS, &mut jobs);
    // At full speed a job takes 2 ms; at half speed 4 ms of wall time, charged as 2 ms of runtime
    // (scale-invariant accounting), so the 3 ms budget still covers it.
    let rf: Vec<(u64, u64)> = jobs.0.iter().map(|j| (j.release / MS, j.finish / MS)).collect();
    assert_eq!(rf, vec![(0, 2), (10, 14), (20, 24)]);
    assert_eq!(s.stats()[0].overruns, 0);
    assert!(s.kernel().set_frequency(0, 123).is_err());
}

/// Records app events and, on a workUnits hint, sizes the reservation (as the proactive
/// controller will): 1 ms per 10 units.
struct Sizer(Rc<RefCell<Vec<(u64, AppEvent)>>>);
impl Controller for Sizer {
    fn period(&self) -> Option<u64> {
        None
    }
    fn tick(&mut self, _k: &mut dyn Kernel) {}
    fn on_app_event(&mut self, ev: &AppEvent, k: &mut dyn Kernel) {
        self.0.borrow_mut().push((k.now(), *ev));
        if let AppEvent::WorkUnits { thread, units, .. } = ev {
            let q = Duration((units / 10).max(1) * MS + 100_000);
            k.set_policy(*thread, Policy::Deadline(Reservation::new(q, ms(20), ms(20))))
                .unwrap();
        }
    }
}

#[test]
fn work_units_hints_reach_controllers_before_the_job_runs() {
    // As an audio app does, the hint for the next callback comes at the end of the current one;
    // on Linux a new budget applies from the next activation (the current one keeps its runtime).
    let run = || Event::Run {
        work: Work::Linear {
            base: Duration::ZERO,
            per_unit: Duration::from_us(100),
        },
    };
    let timer = || Event::Timer {
        timer: TimerId(0),
        period: ms(20),
        mode: TimerMode::Absolute,
    };
    let events = vec![
        Event::WorkUnits { units: 20 },
        run(),
        Event::WorkUnits { units: 120 },
        timer(),
        run(),
        Event::WorkUnits { units: 20 },
        timer(),
    ];
    let mut t = spec(
        "synth",
        Policy::Deadline(Reservation::new(ms(3), ms(20), ms(20))),
        events,
    );
    t.cooperative = true;
    let mut s = sim(vec![t], SimConfig::new(1));
    let log = Rc::new(RefCell::new(Vec::new()));
    s.add_controller(Box::new(Sizer(log.clone())));
    let mut jobs = Jobs::default();
    s.run_until(60 * MS, &mut jobs);
    // 20 units = 2 ms, 120 units = 12 ms: the budget (12.1 ms) is set at the hint, before the
    // heavier job is released, so nothing is throttled.
    assert_eq!(s.stats()[0].overruns, 0);
    let rf: Vec<(u64, u64)> = jobs.0.iter().map(|j| (j.release / MS, j.finish / MS)).collect();
    assert_eq!(&rf[..3], &[(0, 2), (20, 32), (40, 42)]);
    let log = log.borrow();
    assert!(log
        .iter()
        .any(|(_, e)| matches!(e, AppEvent::WorkUnits { units: 120, t, .. } if *t == 2 * MS)));
    let begins = log
        .iter()
        .filter(|(_, e)| matches!(e, AppEvent::JobBegin { .. }))
        .count();
    let ends = log
        .iter()
        .filter(|(_, e)| matches!(e, AppEvent::JobEnd { .. }))
        .count();
    assert!(begins >= 3 && ends >= 3);
}
