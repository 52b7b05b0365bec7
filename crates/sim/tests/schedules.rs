//! Hand-computed schedules: EDF and RM on one CPU, CBS throttling and the wake-up rule, GRUB
//! reclaiming, Dhall's effect, determinism. Times in the comments are milliseconds.

mod support;

use pacer_model::{Duration, Reservation};
use pacer_sim::{CfsTunables, FairModel, JobRecord, Observer, Sim, SimConfig, TraceEvent};
use pacer_workload::{Event, Phase, Policy, ThreadSpec, TimerId, TimerMode, Work, Workload};
use support::Jobs;

const MS: u64 = 1_000_000;

fn ms(x: u64) -> Duration {
    Duration::from_ms(x)
}

fn thread(name: &str, policy: Policy, events: Vec<Event>, affinity: Option<Vec<usize>>) -> ThreadSpec {
    ThreadSpec {
        name: name.into(),
        policy,
        affinity,
        start_delay: Duration::ZERO,
        phases: vec![Phase::new(1, events)],
        loops: None,
        cooperative: false,
        job_deadline: None,
        ..Default::default()
    }
}

/// A periodic thread: run C, wait for its own timer of period T.
fn periodic(
    name: &str,
    timer: usize,
    c: u64,
    t: u64,
    policy: Policy,
    affinity: Option<Vec<usize>>,
) -> ThreadSpec {
    thread(
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
        affinity,
    )
}

fn dl(c: u64, d: u64, t: u64) -> Policy {
    Policy::Deadline(Reservation::new(ms(c), ms(d), ms(t)))
}

fn simulate(threads: Vec<ThreadSpec>, cpus: usize, horizon_ms: u64) -> Vec<JobRecord> {
    simulate_with(threads, SimConfig::new(cpus), horizon_ms)
}

fn simulate_with(threads: Vec<ThreadSpec>, cfg: SimConfig, horizon_ms: u64) -> Vec<JobRecord> {
    let w = Workload {
        threads,
        duration: None,
        ignored: vec![],
        ..Default::default()
    };
    let mut sim = Sim::new(w, cfg).unwrap();
    let mut jobs = Jobs::default();
    sim.run_until(horizon_ms * MS, &mut jobs);
    jobs.0
}

/// (release, finish) in ms of thread `t`'s jobs.
fn rf(jobs: &[JobRecord], t: u32) -> Vec<(u64, u64)> {
    jobs.iter()
        .filter(|j| j.thread == t)
        .map(|j| (j.release / MS, j.finish / MS))
        .collect()
}

#[test]
fn uniprocessor_edf_by_hand() {
    // τ1 = (2, 5), τ2 = (4, 7), U = 0.971. EDF: τ1 0–2; τ2 2–6 (d 7 beats τ1's d 10 at t=5);
    // τ1 6–8; τ2 8–12 (d 14 beats d 15 at t=10); τ1 12–14; τ2 14–15, τ1 15–17 (d 20 < 21), τ2 17–20.
    let jobs = simulate(
        vec![
            periodic("t1", 0, 2, 5, dl(2, 5, 5), None),
            periodic("t2", 1, 4, 7, dl(4, 7, 7), None),
        ],
        1,
        21,
    );
    assert_eq!(&rf(&jobs, 0)[..4], &[(0, 2), (5, 8), (10, 14), (15, 17)]);
    assert_eq!(&rf(&jobs, 1)[..3], &[(0, 6), (7, 12), (14, 20)]);
    assert!(jobs.iter().all(|j| !j.missed()));
    // τ2's third job was preempted once (at 15).
    assert_eq!(
        jobs.iter()
            .find(|j| j.thread == 1 && j.job == 2)
            .unwrap()
            .preemptions,
        1
    );
}

#[test]
fn uniprocessor_rm_by_hand() {
    // Same tasks under SCHED_FIFO with RM priorities: τ1 preempts τ2 at 5; τ2 has 1 ms left
    // at its deadline 7 and finishes at 8 — a miss EDF avoids.
    let jobs = simulate(
        vec![
            periodic("t1", 0, 2, 5, Policy::Fifo { priority: 2 }, None),
            periodic("t2", 1, 4, 7, Policy::Fifo { priority: 1 }, None),
        ],
        1,
        9,
    );
    assert_eq!(&rf(&jobs, 0)[..2], &[(0, 2), (5, 7)]);
    assert_eq!(rf(&jobs, 1)[0], (0, 8));
    assert!(jobs.iter().find(|j| j.thread == 1).unwrap().missed());
}

#[test]
fn wakeup_latency_and_work_scale_by_hand() {
    // The RM pair above with a 1 ms wake-up latency and work × 1.5: τ1 = 3 ms every 5, τ2 = 6
    // every 7. Both start at 0 (a thread's start is not a timer expiry): τ1 0–3, τ2 3–6. τ1's
    // timer expires at 5, it becomes runnable at 6 (its release stays 5) and runs 6–9; τ2 9–11;
    // τ1 expires at 10, runs 11–14; τ2 finishes its last 1 ms at 15.
    let threads = || {
        vec![
            periodic("t1", 0, 2, 5, Policy::Fifo { priority: 2 }, None),
            periodic("t2", 1, 4, 7, Policy::Fifo { priority: 1 }, None),
        ]
    };
    let mut cfg = SimConfig::new(1);
    cfg.wakeup_latency = MS;
    cfg.work_scale = 1.5;
    let jobs = simulate_with(threads(), cfg, 19);
    assert_eq!(&rf(&jobs, 0)[..3], &[(0, 3), (5, 9), (10, 14)]);
    assert_eq!(&rf(&jobs, 1)[..1], &[(0, 15)]);
    let j1 = jobs.iter().find(|j| j.thread == 0 && j.job == 1).unwrap();
    assert_eq!(
        (j1.start, j1.exec),
        (6 * MS, 3 * MS),
        "runnable 1 ms after its expiry"
    );

    // Each alone does what it says; scale and latency are independent.
    let mut cfg = SimConfig::new(1);
    cfg.work_scale = 0.5;
    let jobs = simulate_with(threads(), cfg, 9);
    assert_eq!(&rf(&jobs, 0)[..2], &[(0, 1), (5, 6)]);
    assert_eq!(rf(&jobs, 1)[0], (0, 3));
    let mut cfg = SimConfig::new(1);
    cfg.wakeup_latency = 2 * MS;
    let jobs = simulate_with(threads(), cfg, 9);
    assert_eq!(&rf(&jobs, 0)[..2], &[(0, 2), (5, 9)]);

    let mut cfg = SimConfig::new(1);
    cfg.work_scale = f64::NAN;
    let w = Workload {
        threads: threads(),
        duration: None,
        ignored: vec![],
        ..Default::default()
    };
    assert!(Sim::new(w, cfg).is_err());
}

#[test]
fn simultaneous_wakeups_run_the_most_urgent_first() {
    // `lo` (thread 0, FIFO 1) and `hi` (FIFO 2) share a 10 ms grid on one CPU; `lo`'s timer is
    // armed first. Woken in one batch, `hi` runs first and `lo` starts when it is done — never
    // switched in for zero time and preempted, which would count a preemption and a start at the
    // release that the kernel (one hrtimer interrupt, then schedule()) does not have.
    let jobs = simulate(
        vec![
            periodic("lo", 0, 3, 10, Policy::Fifo { priority: 1 }, None),
            periodic("hi", 1, 2, 10, Policy::Fifo { priority: 2 }, None),
        ],
        1,
        40,
    );
    let lo: Vec<(u64, u64, u32)> = jobs
        .iter()
        .filter(|j| j.thread == 0)
        .map(|j| (j.release / MS, j.start / MS, j.preemptions))
        .collect();
    assert_eq!(lo, [(0, 2, 0), (10, 12, 0), (20, 22, 0), (30, 32, 0)]);
    // The same holds for SCHED_DEADLINE threads, by the deadline they get on waking.
    let jobs = simulate(
        vec![
            periodic("late_d", 0, 3, 10, dl(3, 10, 10), None),
            periodic("early_d", 1, 2, 10, dl(2, 5, 10), None),
        ],
        1,
        30,
    );
    assert!(jobs
        .iter()
        .filter(|j| j.thread == 0)
        .all(|j| j.start == j.release + 2 * MS && j.preemptions == 0));
}

#[test]
fn cbs_throttles_an_overrunning_task() {
    // Reservation 2/10 ms, jobs of 5 ms every 20 ms. Job 0: runs 0–2, throttled to 10 (the next
    // period: d − D + P), 10–12, throttled to 20, 20–21: done at 21. Job 1 (released at 20, late)
    // starts at once with 1 ms of runtime left: 21–22, throttled to 30, 30–32, throttled to 40,
    // 40–42: 1 + 2 + 2 = 5 ms, done at 42.
    let w = Workload {
        threads: vec![periodic("hog", 0, 5, 20, dl(2, 10, 10), None)],
        duration: None,
        ignored: vec![],
        ..Default::default()
    };
    let mut sim = Sim::new(w, SimConfig::new(1)).unwrap();
    let mut jobs = Jobs::default();
    sim.run_until(43 * MS, &mut jobs);
    assert_eq!(rf(&jobs.0, 0), vec![(0, 21), (20, 42)]);
    assert!(sim.stats()[0].overruns >= 4);
    assert_eq!(jobs.0[0].exec, 5 * MS);
}

#[test]
fn cbs_wakeup_rule() {
    // Reservation 2/10. Run 1, sleep, run 1, then the 10 ms timer.
    let mk = |sleep_ms| Workload {
        threads: vec![thread(
            "w",
            dl(2, 10, 10),
            vec![
                Event::Run {
                    work: Work::Fixed { ns: ms(1) },
                },
                Event::Sleep {
                    duration: ms(sleep_ms),
                },
                Event::Run {
                    work: Work::Fixed { ns: ms(1) },
                },
                Event::Timer {
                    timer: TimerId(0),
                    period: ms(10),
                    mode: TimerMode::Absolute,
                },
            ],
            None,
        )],
        duration: None,
        ignored: vec![],
        ..Default::default()
    };
    // Wakes at 4 with 1 ms left before deadline 10: 1/6 ≤ 2/10, so (deadline, runtime) are kept.
    let mut sim = Sim::new(mk(3), SimConfig::new(1)).unwrap();
    sim.run_until(4 * MS, &mut Jobs::default());
    assert_eq!(sim.dl_state(0), Some((10 * MS, MS as i64)));
    // Wakes at 8 with 1 ms left: 1/2 > 2/10 would overflow the bandwidth: new period, d = 18.
    let mut sim = Sim::new(mk(7), SimConfig::new(1)).unwrap();
    sim.run_until(8 * MS, &mut Jobs::default());
    assert_eq!(sim.dl_state(0), Some((18 * MS, 2 * MS as i64)));
}

#[test]
fn grub_reclaims_idle_bandwidth() {
    // The same 5 ms jobs in a 2/10 reservation, with SCHED_FLAG_RECLAIM, alone on the CPU: runtime
    // is charged at max(0.2, 0.95 − 0 − 0.75)/0.95, so 2 ms of runtime lasts 9.5 ms and the
    // job completes at 5 ms without being throttled.
    let mut r = Reservation::new(ms(2), ms(10), ms(10));
    r.flags.reclaim = true;
    let w = Workload {
        threads: vec![periodic("reclaimer", 0, 5, 20, Policy::Deadline(r), None)],
        duration: None,
        ignored: vec![],
        ..Default::default()
    };
    let mut sim = Sim::new(w, SimConfig::new(1)).unwrap();
    let mut jobs = Jobs::default();
    sim.run_until(60 * MS, &mut jobs);
    assert_eq!(rf(&jobs.0, 0)[..3], [(0, 5), (20, 25), (40, 45)]);
    assert_eq!(sim.stats()[0].overruns, 0);
}

#[test]
fn dhall_effect_under_global_edf() {
    // Two light tasks (2, 10) and a heavy one (10, 11) on 2 CPUs, U = 1.31. G-EDF runs the
    // lights first (deadline 10 < 11) on both CPUs; the heavy task starts at 2 and ends at 12 > 11.
    let set = |aff: [Option<Vec<usize>>; 3]| {
        let [a, b, c] = aff;
        vec![
            periodic("light0", 0, 2, 10, dl(2, 10, 10), a),
            periodic("light1", 1, 2, 10, dl(2, 10, 10), b),
            periodic("heavy", 2, 10, 11, dl(10, 11, 11), c),
        ]
    };
    let g = simulate(set([None, None, None]), 2, 12);
    let heavy = g.iter().find(|j| j.thread == 2).unwrap();
    assert_eq!((heavy.release, heavy.finish), (0, 12 * MS));
    assert!(heavy.missed());
    // Partitioned: lights on CPU 0, heavy alone on CPU 1: nothing misses.
    let p = simulate(set([Some(vec![0]), Some(vec![0]), Some(vec![1])]), 2, 110);
    assert!(!p.is_empty() && p.iter().all(|j| !j.missed()));
}

#[test]
fn identical_seeds_give_identical_runs() {
    let mk = || Workload {
        threads: (0..6)
            .map(|i| {
                thread(
                    &format!("t{i}"),
                    dl(3, 10 + i, 10 + i),
                    vec![
                        Event::Run {
                            work: Work::Uniform {
                                min: ms(1),
                                max: ms(4),
                            },
                        },
                        Event::Timer {
                            timer: TimerId(i as usize),
                            period: ms(10 + i),
                            mode: TimerMode::Absolute,
                        },
                    ],
                    None,
                )
            })
            .collect(),
        duration: None,
        ignored: vec![],
        ..Default::default()
    };
    let run = |seed| {
        let mut cfg = SimConfig::new(2);
        cfg.seed = seed;
        let mut sim = Sim::new(mk(), cfg).unwrap();
        let mut jobs = Jobs::default();
        sim.run_until(2_000 * MS, &mut jobs);
        jobs.0
    };
    let (a, b, c) = (run(7), run(7), run(8));
    assert!(a.len() > 900, "{}", a.len());
    assert_eq!(a, b);
    assert_ne!(a, c);
}

/// Every job and every scheduling event of a run.
#[derive(Default)]
struct Trace(Vec<JobRecord>, Vec<TraceEvent>);

impl Observer for Trace {
    fn job(&mut self, r: &JobRecord) {
        self.0.push(*r);
    }
    fn event(&mut self, e: &TraceEvent) {
        self.1.push(*e);
    }
    fn wants_events(&self) -> bool {
        true
    }
}

#[test]
fn an_affinity_of_every_cpu_is_no_affinity() {
    // A cluster as large as the machine (the experiment's clustered configurations when the
    // cluster size is the CPU count) lists every CPU: it must schedule as global does, job for
    // job and switch for switch, whatever the list's order or repeats. G-EDF reservations with
    // random execution times, FIFO and fair threads: every class's CPU choice sees the affinity.
    let m = 4;
    let mk = |affinity: Option<Vec<usize>>| -> Vec<ThreadSpec> {
        let mut v: Vec<ThreadSpec> = (0..6u64)
            .map(|i| {
                thread(
                    &format!("dl{i}"),
                    dl(3, 9 + i, 10 + i),
                    vec![
                        Event::Run {
                            work: Work::Uniform {
                                min: ms(1),
                                max: ms(4),
                            },
                        },
                        Event::Timer {
                            timer: TimerId(i as usize),
                            period: ms(10 + i),
                            mode: TimerMode::Absolute,
                        },
                    ],
                    affinity.clone(),
                )
            })
            .collect();
        for i in 0..2 {
            let rt = Policy::Fifo {
                priority: 50 + i as u8,
            };
            v.push(periodic(
                &format!("rt{i}"),
                6 + i,
                1,
                7 + i as u64,
                rt,
                affinity.clone(),
            ));
            let events = vec![support::run(2 + i as u64), support::sleep(1)];
            v.push(thread(
                &format!("cfs{i}"),
                Policy::Other { nice: 0 },
                events,
                affinity.clone(),
            ));
        }
        v
    };
    let sim = |affinity: Option<Vec<usize>>| {
        let mut cfg = SimConfig::new(m);
        cfg.seed = 5;
        cfg.fair = Some(FairModel::Cfs(CfsTunables::linux(m)));
        let w = Workload {
            threads: mk(affinity),
            duration: None,
            ignored: vec![],
            ..Default::default()
        };
        let mut sim = Sim::new(w, cfg).unwrap();
        let mut trace = Trace::default();
        sim.run_until(1_000 * MS, &mut trace);
        trace
    };
    let none = sim(None);
    assert!(none.0.len() > 1000, "{}", none.0.len());
    assert!(
        none.0.iter().any(|j| j.migrations > 0),
        "no migration: the affinity is not exercised"
    );
    for all in [vec![0, 1, 2, 3], vec![3, 1, 0, 2], vec![0, 1, 2, 3, 0]] {
        let got = sim(Some(all.clone()));
        assert_eq!(got.0.len(), none.0.len(), "{all:?}");
        for (a, b) in got.0.iter().zip(&none.0) {
            assert_eq!(a, b, "{all:?}");
        }
        assert!(got.1 == none.1, "{all:?}: the same jobs by another schedule");
    }
    // One CPU fewer is another schedule: the comparison can tell.
    assert_ne!(sim(Some(vec![0, 1, 2])).0, none.0);
}

#[test]
fn jobs_released_while_running_start_at_once() {
    // A 3 ms job with a 2 ms absolute timer is always late: each next job is released in the past
    // (at 2, 4, 6 …) while the thread is still on its CPU, and starts right then, when the
    // previous one finishes (3, 6, 9 …) — not at some later switch-in.
    let late = periodic("late", 0, 3, 2, Policy::Fifo { priority: 10 }, None);
    // Without timers, each pass is a job that starts where the previous one finished.
    let passes = thread(
        "passes",
        Policy::Fifo { priority: 10 },
        vec![Event::Run {
            work: Work::Fixed { ns: ms(1) },
        }],
        Some(vec![1]),
    );
    let jobs = simulate(vec![late, passes], 2, 10);
    let starts = |t: u32| -> Vec<(u64, u64, u64)> {
        jobs.iter()
            .filter(|j| j.thread == t)
            .map(|j| (j.release / MS, j.start / MS, j.finish / MS))
            .collect()
    };
    assert_eq!(&starts(0)[..3], &[(0, 0, 3), (2, 3, 6), (4, 6, 9)]);
    assert_eq!(&starts(1)[..3], &[(0, 0, 1), (1, 1, 2), (2, 2, 3)]);
}
