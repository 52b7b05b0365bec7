//! rt-app's synchronisation, memory, I/O and fork events in the simulator: hand-computed
//! schedules (times in the comments are milliseconds).

mod support;

use pacer_model::Duration;
use pacer_sim::{JobRecord, Observer, Sim, SimConfig, SimError, FORKS_LIMIT};
use pacer_workload::{
    Event, Phase, Policy, Resource, ResourceId, ResourceKind, RunSettings, ThreadSpec, Workload,
};
use support::{run, sleep_us, Jobs};

const MS: u64 = 1_000_000;

impl Jobs {
    /// Finish times of a thread's jobs. A thread without timers whose program ends right after
    /// a pass also reports the empty job the pass end released (an existing rule of the engine,
    /// independent of synchronisation): those are left out.
    fn finishes(&self, thread: u32) -> Vec<u64> {
        self.0
            .iter()
            .filter(|r| r.thread == thread && !(r.exec == 0 && r.release == r.finish))
            .map(|r| r.finish)
            .collect()
    }
}

fn fifo(priority: u8) -> Policy {
    Policy::Fifo { priority }
}

/// A thread running `events` once per pass, `loops` passes (`None`: until the horizon), started
/// after `delay_ms`.
fn thread(name: &str, policy: Policy, delay_ms: u64, loops: Option<u64>, events: Vec<Event>) -> ThreadSpec {
    ThreadSpec {
        name: name.into(),
        policy,
        start_delay: Duration::from_ms(delay_ms),
        phases: vec![Phase::new(1, events)],
        loops,
        ..Default::default()
    }
}

fn res(name: &str, kind: ResourceKind) -> Resource {
    Resource {
        name: name.into(),
        kind,
    }
}

fn workload(threads: Vec<ThreadSpec>, resources: Vec<Resource>, pi: bool) -> Workload {
    Workload {
        threads,
        resources,
        settings: RunSettings {
            pi_enabled: pi,
            ..Default::default()
        },
        ..Default::default()
    }
}

fn simulate(w: Workload, cpus: usize, horizon_ms: u64) -> (Sim, Jobs) {
    let mut sim = Sim::new(w, SimConfig::new(cpus)).unwrap();
    let mut jobs = Jobs::default();
    sim.run_until(horizon_ms * MS, &mut jobs);
    (sim, jobs)
}

const M: ResourceId = ResourceId(0);
const C: ResourceId = ResourceId(1);
const C2: ResourceId = ResourceId(2);

fn mutex_and_conds() -> Vec<Resource> {
    vec![
        res("m", ResourceKind::Mutex),
        res("c", ResourceKind::Cond),
        res("c2", ResourceKind::Cond),
    ]
}

fn lock() -> Event {
    Event::Lock { mutex: M }
}
fn unlock() -> Event {
    Event::Unlock { mutex: M }
}
fn wait(cond: ResourceId) -> Event {
    Event::Wait { cond, mutex: M }
}
fn signal(cond: ResourceId) -> Event {
    Event::Signal { cond }
}

#[test]
fn signal_wait_ping_pong_alternates_the_threads() {
    // A: run 1, signal B, wait for B's signal. B: wait for A, run 1, signal A.
    // A runs 0–1, B 1–2, A 2–3, B 3–4, …: each pass of either ends every 2 ms.
    let a = thread(
        "a",
        fifo(10),
        0,
        None,
        vec![run(1), lock(), signal(C2), wait(C), unlock()],
    );
    let b = thread(
        "b",
        fifo(10),
        0,
        None,
        vec![lock(), wait(C2), unlock(), run(1), lock(), signal(C), unlock()],
    );
    let (sim, jobs) = simulate(workload(vec![a, b], mutex_and_conds(), false), 1, 9);
    assert_eq!(jobs.finishes(0), vec![2 * MS, 4 * MS, 6 * MS, 8 * MS]);
    assert_eq!(jobs.finishes(1), vec![2 * MS, 4 * MS, 6 * MS, 8 * MS]);
    // Waiting for the other thread is not execution: each ran 1 ms per 2 ms.
    let stats = sim.stats();
    assert_eq!(stats[0].exec + stats[1].exec, 9 * MS);
    assert!(stats[0].exec >= 4 * MS && stats[1].exec >= 4 * MS);
}

#[test]
fn rtapp_sync_event_signals_then_waits() {
    // Two threads doing rt-app's `sync` on one condition variable, each after 1 ms of work:
    // they alternate as with separate signal and wait.
    let s = Event::SignalWait { cond: C, mutex: M };
    let a = thread("a", fifo(10), 0, None, vec![lock(), s.clone(), unlock(), run(1)]);
    let b = thread("b", fifo(10), 0, None, vec![lock(), s, unlock(), run(1)]);
    let (_, jobs) = simulate(workload(vec![a, b], mutex_and_conds(), false), 1, 10);
    // 0: a signals nobody and waits; b signals a and waits; a wakes with the mutex, runs 0–1
    // (pass ends at 1); a signals b and waits; b runs 1–2; …
    assert_eq!(jobs.finishes(0), vec![MS, 3 * MS, 5 * MS, 7 * MS, 9 * MS]);
    assert_eq!(jobs.finishes(1), vec![2 * MS, 4 * MS, 6 * MS, 8 * MS, 10 * MS]);
}

#[test]
fn barrier_of_three_releases_everyone_at_the_last_arrival() {
    let barrier = Event::Barrier {
        barrier: ResourceId(0),
    };
    let threads = (1..=3)
        .map(|k| {
            thread(
                &format!("t{k}"),
                fifo(10),
                0,
                Some(2),
                vec![run(k), barrier.clone(), run(1)],
            )
        })
        .collect();
    let w = workload(threads, vec![res("b", ResourceKind::Barrier { users: 3 })], false);
    let (sim, jobs) = simulate(w, 3, 20);
    // Arrivals at 1, 2, 3: all run on at 3 and end their pass at 4; then arrivals at 5, 6, 7,
    // release at 7, ends at 8.
    for t in 0..3 {
        assert_eq!(jobs.finishes(t), vec![4 * MS, 8 * MS], "thread {t}");
        assert_eq!(sim.sync_blocked(t), Some(false));
    }
}

#[test]
fn a_barrier_short_of_users_keeps_its_arrivals_blocked() {
    let barrier = Event::Barrier {
        barrier: ResourceId(0),
    };
    let threads = (1..=2)
        .map(|k| {
            thread(
                &format!("t{k}"),
                fifo(10),
                0,
                Some(1),
                vec![run(k), barrier.clone(), run(1)],
            )
        })
        .collect();
    let w = workload(threads, vec![res("b", ResourceKind::Barrier { users: 3 })], false);
    let (sim, jobs) = simulate(w, 2, 20);
    assert!(jobs.0.is_empty());
    assert_eq!(sim.sync_blocked(0), Some(true));
    assert_eq!(sim.sync_blocked(1), Some(true));
}

#[test]
fn a_signal_without_waiter_is_lost() {
    let waiter = thread(
        "waiter",
        fifo(10),
        0,
        Some(1),
        vec![sleep_us(1000), lock(), wait(C), unlock(), run(1)],
    );
    // Signals before the waiter waits: lost.
    let early = thread("early", fifo(20), 0, Some(1), vec![signal(C), run(1)]);
    let (sim, jobs) = simulate(
        workload(vec![waiter.clone(), early], mutex_and_conds(), false),
        2,
        50,
    );
    assert!(jobs.finishes(0).is_empty());
    assert_eq!(sim.sync_blocked(0), Some(true));
    // Signals after: the waiter wakes at 2 and runs until 3.
    let late = thread(
        "late",
        fifo(20),
        0,
        Some(1),
        vec![sleep_us(2000), signal(C), run(1)],
    );
    let (sim, jobs) = simulate(workload(vec![waiter, late], mutex_and_conds(), false), 2, 50);
    assert_eq!(jobs.finishes(0), vec![3 * MS]);
    assert_eq!(sim.sync_blocked(0), Some(false));
}

#[test]
fn signal_wakes_the_highest_priority_waiter_and_broadcast_all() {
    let waiter = |p: u8| {
        thread(
            &format!("w{p}"),
            fifo(p),
            0,
            Some(1),
            vec![lock(), wait(C), unlock(), run(1)],
        )
    };
    let waiters = || vec![waiter(10), waiter(30), waiter(20)];
    let mut threads = waiters();
    threads.push(thread("signaller", fifo(5), 1, Some(1), vec![signal(C)]));
    let (_, jobs) = simulate(workload(threads, mutex_and_conds(), false), 1, 50);
    assert!(jobs.finishes(0).is_empty());
    assert_eq!(jobs.finishes(1), vec![2 * MS]);
    assert!(jobs.finishes(2).is_empty());
    let mut threads = waiters();
    threads.push(thread(
        "broadcaster",
        fifo(5),
        1,
        Some(1),
        vec![Event::Broadcast { cond: C }],
    ));
    let (_, jobs) = simulate(workload(threads, mutex_and_conds(), false), 1, 50);
    // All wake at 1 and take the mutex in priority order; they run by priority on the CPU.
    assert_eq!(jobs.finishes(1), vec![2 * MS]);
    assert_eq!(jobs.finishes(2), vec![3 * MS]);
    assert_eq!(jobs.finishes(0), vec![4 * MS]);
}

/// Classic priority inversion on one CPU: low (FIFO 10) locks at 0 and needs 4 ms in the
/// critical section; high (FIFO 30) wants the mutex at 1; medium (FIFO 20) wakes at 2 for 10 ms
/// without the mutex. Returns (low, high, medium) job finishes.
fn inversion(pi: bool) -> (Vec<u64>, Vec<u64>, Vec<u64>) {
    let low = thread("low", fifo(10), 0, Some(1), vec![lock(), run(4), unlock()]);
    let high = thread("high", fifo(30), 1, Some(1), vec![lock(), run(1), unlock()]);
    let medium = thread("medium", fifo(20), 2, Some(1), vec![run(10)]);
    let (sim, jobs) = simulate(workload(vec![low, high, medium], mutex_and_conds(), pi), 1, 50);
    // The boost is not a policy change the thread asked for.
    assert_eq!(sim.policy_of(0), Some(fifo(10)));
    (jobs.finishes(0), jobs.finishes(1), jobs.finishes(2))
}

#[test]
fn without_priority_inheritance_the_high_thread_waits_for_the_medium_one() {
    // 1: high blocks; low runs 1–2; 2: medium preempts low and runs to 12; low ends its section
    // (2 ms left) at 14; high runs 14–15: high's response is 14 ms.
    let (low, high, medium) = inversion(false);
    assert_eq!(medium, vec![12 * MS]);
    assert_eq!(low, vec![14 * MS]);
    assert_eq!(high, vec![15 * MS]);
}

#[test]
fn with_priority_inheritance_the_medium_thread_cannot_delay_the_high_one() {
    // 1: high blocks and low runs at 30; medium cannot preempt it; low unlocks at 4; high runs
    // 4–5; medium 5–15: high's response is 4 ms.
    let (low, high, medium) = inversion(true);
    assert_eq!(low, vec![4 * MS]);
    assert_eq!(high, vec![5 * MS]);
    assert_eq!(medium, vec![15 * MS]);
}

#[test]
fn priority_inheritance_boosts_a_fair_owner_into_the_rt_class() {
    // A SCHED_OTHER owner and an rt hog on one CPU: without PI the fair owner never runs again
    // once the hog starts, and the rt waiter waits for the hog.
    let low = thread(
        "low",
        Policy::Other { nice: 0 },
        0,
        Some(1),
        vec![lock(), run(4), unlock()],
    );
    let high = thread("high", fifo(30), 1, Some(1), vec![lock(), run(1), unlock()]);
    let hog = thread("hog", fifo(20), 2, Some(1), vec![run(10)]);
    let w = |pi| {
        workload(
            vec![low.clone(), high.clone(), hog.clone()],
            mutex_and_conds(),
            pi,
        )
    };
    let (_, jobs) = simulate(w(true), 1, 50);
    assert_eq!(jobs.finishes(1), vec![5 * MS]);
    let (_, jobs) = simulate(w(false), 1, 50);
    assert_eq!(jobs.finishes(1), vec![15 * MS]);
}

#[test]
fn semaphores_count_posts_and_hand_them_to_waiters() {
    let sem = vec![res("s", ResourceKind::Semaphore)];
    let s = ResourceId(0);
    // Three posts 1, 2, 3 ms in; the taker starts at 5 and takes one per pass: three passes of
    // 1 ms (ending at 6, 7, 8), then it waits for ever.
    let poster = ThreadSpec {
        phases: vec![Phase::new(3, vec![run(1), Event::SemPost { sem: s }])],
        loops: Some(1),
        ..thread("poster", fifo(10), 0, None, vec![])
    };
    let taker = thread(
        "taker",
        fifo(10),
        5,
        Some(5),
        vec![Event::SemWait { sem: s }, run(1)],
    );
    let (sim, jobs) = simulate(workload(vec![poster, taker], sem.clone(), false), 2, 50);
    assert_eq!(jobs.finishes(1), vec![6 * MS, 7 * MS, 8 * MS]);
    assert_eq!(sim.sync_blocked(1), Some(true));
    // A waiter blocked first is woken by the post.
    let taker = thread(
        "taker",
        fifo(10),
        0,
        Some(1),
        vec![Event::SemWait { sem: s }, run(1)],
    );
    let poster = thread(
        "poster",
        fifo(10),
        0,
        Some(1),
        vec![sleep_us(2000), Event::SemPost { sem: s }],
    );
    let (_, jobs) = simulate(workload(vec![taker, poster], sem, false), 2, 50);
    assert_eq!(jobs.finishes(0), vec![3 * MS]);
}

#[test]
fn suspend_waits_for_a_resume_and_misses_an_earlier_one() {
    let r = vec![res("a", ResourceKind::Mutex), res("a", ResourceKind::Cond)];
    let suspend = Event::Suspend { cond: C, mutex: M };
    let resume = Event::Resume { cond: C, mutex: M };
    let sleeper = thread("a", fifo(10), 0, Some(1), vec![suspend.clone(), run(1)]);
    let waker = thread("b", fifo(10), 2, Some(1), vec![resume.clone()]);
    let (_, jobs) = simulate(workload(vec![sleeper, waker], r.clone(), false), 2, 50);
    assert_eq!(jobs.finishes(0), vec![3 * MS]);
    // Resumed at 0, suspended at 1: stays suspended.
    let sleeper = thread("a", fifo(10), 1, Some(1), vec![suspend, run(1)]);
    let waker = thread("b", fifo(10), 0, Some(1), vec![resume]);
    let (sim, jobs) = simulate(workload(vec![sleeper, waker], r, false), 2, 50);
    assert!(jobs.finishes(0).is_empty());
    assert_eq!(sim.sync_blocked(0), Some(true));
}

#[test]
fn fork_starts_threads_named_as_rtapp_names_them() {
    let parent = thread(
        "parent",
        fifo(10),
        0,
        Some(3),
        vec![Event::Fork { thread: 1 }, sleep_us(1000)],
    );
    let child = ThreadSpec {
        forked: true,
        ..thread("child", fifo(20), 0, Some(1), vec![run(1)])
    };
    let w = workload(vec![parent, child], vec![], false);
    let mut sim = Sim::new(w, SimConfig::new(2)).unwrap();
    // Forked specs do not start with the run.
    assert_eq!(sim.threads(), 1);
    let mut jobs = Jobs::default();
    sim.run_until(20 * MS, &mut jobs);
    assert_eq!(sim.threads(), 4);
    assert_eq!(
        sim.thread_names(),
        vec!["parent", "child-1-0000", "child-2-0001", "child-3-0002"]
    );
    // Forked at 0, 1, 2, each runs 1 ms on the second CPU.
    for (t, end) in [(1, 1), (2, 2), (3, 3)] {
        assert_eq!(jobs.finishes(t), vec![end * MS], "thread {t}");
    }
    assert!(sim.failure().is_none());
}

#[test]
fn forking_past_the_limit_stops_the_run_with_an_error() {
    let parent = thread(
        "parent",
        fifo(10),
        0,
        None,
        vec![Event::Fork { thread: 1 }, sleep_us(10)],
    );
    let child = ThreadSpec {
        forked: true,
        ..thread("child", fifo(20), 0, Some(1), vec![sleep_us(1_000_000)])
    };
    let (sim, _) = simulate(workload(vec![parent, child], vec![], false), 1, 100);
    assert_eq!(sim.threads(), 1 + FORKS_LIMIT as usize);
    match sim.failure() {
        Some(SimError::ForkLimit {
            thread, task, limit, ..
        }) => {
            assert_eq!(
                (thread.as_str(), task.as_str(), *limit),
                ("parent", "child", FORKS_LIMIT)
            );
        }
        other => panic!("expected the fork limit, got {other:?}"),
    }
    // The run stopped there.
    assert!(sim.now() >= 100 * MS);
}

#[test]
fn a_deadlock_ends_at_the_horizon_with_both_threads_blocked() {
    let r = vec![res("m1", ResourceKind::Mutex), res("m2", ResourceKind::Mutex)];
    let (m1, m2) = (ResourceId(0), ResourceId(1));
    let a = thread(
        "a",
        fifo(10),
        0,
        None,
        vec![
            Event::Lock { mutex: m1 },
            run(1),
            Event::Lock { mutex: m2 },
            Event::Unlock { mutex: m2 },
            Event::Unlock { mutex: m1 },
        ],
    );
    let b = thread(
        "b",
        fifo(10),
        0,
        None,
        vec![
            Event::Lock { mutex: m2 },
            run(1),
            Event::Lock { mutex: m1 },
            Event::Unlock { mutex: m1 },
            Event::Unlock { mutex: m2 },
        ],
    );
    for pi in [false, true] {
        let (sim, jobs) = simulate(workload(vec![a.clone(), b.clone()], r.clone(), pi), 2, 1000);
        assert!(jobs.0.is_empty());
        assert_eq!(sim.now(), 1000 * MS);
        assert_eq!(
            (sim.sync_blocked(0), sim.sync_blocked(1)),
            (Some(true), Some(true))
        );
        assert_eq!((sim.mutex_owner(0), sim.mutex_owner(1)), (Some(0), Some(1)));
        assert_eq!(sim.stats()[0].exec, MS);
    }
}

#[test]
fn threads_waking_each_other_without_time_passing_do_not_hang_the_simulator() {
    let s = Event::SignalWait { cond: C, mutex: M };
    let a = thread("a", fifo(10), 0, None, vec![lock(), s.clone(), unlock()]);
    let b = thread("b", fifo(10), 0, None, vec![lock(), s, unlock()]);
    let mut sim = Sim::new(workload(vec![a, b], mutex_and_conds(), false), SimConfig::new(1)).unwrap();
    struct Count(u64);
    impl Observer for Count {
        fn job(&mut self, _: &JobRecord) {
            self.0 += 1;
        }
    }
    let mut n = Count(0);
    sim.run_until(10 * MS, &mut n);
    assert_eq!(sim.now(), 10 * MS);
    assert!(n.0 > 0);
}

#[test]
fn mem_and_iorun_are_work_at_the_configured_cost_per_byte() {
    let t = thread(
        "t",
        fifo(10),
        0,
        Some(1),
        vec![Event::Mem { bytes: 1_000_000 }, Event::IoRun { bytes: 2_000_000 }],
    );
    let mut cfg = SimConfig::new(1);
    cfg.mem_ns_per_byte = 0.5;
    cfg.io_ns_per_byte = 0.25;
    let mut sim = Sim::new(workload(vec![t], vec![], false), cfg).unwrap();
    let mut jobs = Jobs::default();
    sim.run_until(10 * MS, &mut jobs);
    assert_eq!(jobs.finishes(0), vec![MS]);
    assert_eq!(sim.stats()[0].exec, MS);
}

#[test]
fn bad_resources_and_costs_are_refused() {
    // A lock naming a condition variable, an unknown resource, a fork of a missing spec.
    for e in [
        Event::Lock { mutex: C },
        Event::Signal { cond: ResourceId(9) },
        Event::Fork { thread: 5 },
    ] {
        let t = thread("t", fifo(10), 0, Some(1), vec![e.clone(), run(1)]);
        let err = Sim::new(workload(vec![t], mutex_and_conds(), false), SimConfig::new(1)).err();
        assert!(
            matches!(err, Some(SimError::BadResource { .. } | SimError::BadFork { .. })),
            "{e:?}: {err:?}"
        );
    }
    let t = thread("t", fifo(10), 0, Some(1), vec![run(1)]);
    let mut cfg = SimConfig::new(1);
    cfg.mem_ns_per_byte = f64::NAN;
    assert!(matches!(
        Sim::new(workload(vec![t], vec![], false), cfg),
        Err(SimError::BadByteCost { .. })
    ));
    // Only forked specs: nothing starts.
    let t = ThreadSpec {
        forked: true,
        ..thread("t", fifo(10), 0, Some(1), vec![run(1)])
    };
    assert!(matches!(
        Sim::new(workload(vec![t], vec![], false), SimConfig::new(1)),
        Err(SimError::NoThreads)
    ));
}

#[test]
fn priority_inheritance_follows_a_chain_of_owners() {
    // low holds m1 (5 ms); mid (FIFO 15) takes m2 and waits for m1 at 1; high (FIFO 30) waits
    // for m2 at 2; a FIFO 20 hog arrives at 3. Through the chain low runs at 30 until it unlocks
    // at 5; mid runs 5–6; high 6–7. Without PI the hog runs 3–13 first and high ends at 17.
    let r = vec![res("m1", ResourceKind::Mutex), res("m2", ResourceKind::Mutex)];
    let (m1, m2) = (ResourceId(0), ResourceId(1));
    let (l1, u1) = (Event::Lock { mutex: m1 }, Event::Unlock { mutex: m1 });
    let (l2, u2) = (Event::Lock { mutex: m2 }, Event::Unlock { mutex: m2 });
    let low = thread("low", fifo(10), 0, Some(1), vec![l1.clone(), run(5), u1.clone()]);
    let mid = thread(
        "mid",
        fifo(15),
        1,
        Some(1),
        vec![l2.clone(), l1, run(1), u1, u2.clone()],
    );
    let high = thread("high", fifo(30), 2, Some(1), vec![l2, run(1), u2]);
    let hog = thread("hog", fifo(20), 3, Some(1), vec![run(10)]);
    let w = |pi| {
        workload(
            vec![low.clone(), mid.clone(), high.clone(), hog.clone()],
            r.clone(),
            pi,
        )
    };
    let (sim, jobs) = simulate(w(true), 1, 50);
    assert_eq!(jobs.finishes(0), vec![5 * MS]);
    assert_eq!(jobs.finishes(1), vec![6 * MS]);
    assert_eq!(jobs.finishes(2), vec![7 * MS]);
    assert_eq!(jobs.finishes(3), vec![17 * MS]);
    assert_eq!(sim.policy_of(1), Some(fifo(15)));
    let (_, jobs) = simulate(w(false), 1, 50);
    assert_eq!(jobs.finishes(3), vec![13 * MS]);
    assert_eq!(jobs.finishes(2), vec![17 * MS]);
}

#[test]
fn blocking_on_a_condition_does_not_end_a_job() {
    // A periodic thread (10 ms timer) waits for a signal sent at 3, then runs 1 ms: one job,
    // released at 0, ending at its timer at 4.
    let periodic = thread(
        "periodic",
        fifo(10),
        0,
        Some(1),
        vec![
            lock(),
            wait(C),
            unlock(),
            run(1),
            Event::Timer {
                timer: pacer_workload::TimerId(0),
                period: Duration::from_ms(10),
                mode: pacer_workload::TimerMode::Absolute,
            },
        ],
    );
    let signaller = thread("signaller", fifo(20), 3, Some(1), vec![signal(C)]);
    // The horizon ends before the next expiry (10), where the program ends.
    let (_, jobs) = simulate(
        workload(vec![periodic, signaller], mutex_and_conds(), false),
        1,
        9,
    );
    let mine: Vec<_> = jobs.0.iter().filter(|r| r.thread == 0).collect();
    assert_eq!(mine.len(), 1);
    assert_eq!((mine[0].release, mine[0].finish, mine[0].exec), (0, 4 * MS, MS));
}

#[test]
fn a_phase_policy_applies_from_its_pass_and_sticks() {
    // x runs phase 0 at FIFO 30 (2 ms), phase 1 at FIFO 5 (2 ms); a FIFO 20 thread wakes at 1
    // for 5 ms: it waits for x's first phase (until 2), then preempts x's second (2–7); x ends
    // at 9.
    let x = ThreadSpec {
        phases: vec![
            Phase {
                policy: Some(fifo(30)),
                ..Phase::new(1, vec![run(2)])
            },
            Phase {
                policy: Some(fifo(5)),
                ..Phase::new(1, vec![run(2)])
            },
        ],
        ..thread("x", fifo(10), 0, Some(1), vec![])
    };
    let y = thread("y", fifo(20), 1, Some(1), vec![run(5)]);
    let (sim, jobs) = simulate(workload(vec![x, y], vec![], false), 1, 50);
    assert_eq!(jobs.finishes(0), vec![2 * MS, 9 * MS]);
    assert_eq!(jobs.finishes(1), vec![7 * MS]);
    assert_eq!(sim.policy_of(0), Some(fifo(5)));
}

#[test]
fn phase_cpus_apply_for_their_phase_and_fall_back_to_the_threads() {
    // Pinned to CPU 0, phase 0 on CPU 1, phase 1 with the thread's CPUs: passes alternate CPUs.
    let x = ThreadSpec {
        affinity: Some(vec![0]),
        phases: vec![
            Phase {
                affinity: Some(vec![1]),
                ..Phase::new(1, vec![run(1)])
            },
            Phase::new(1, vec![run(1)]),
        ],
        ..thread("x", fifo(10), 0, Some(2), vec![])
    };
    let (_, jobs) = simulate(workload(vec![x], vec![], false), 2, 50);
    let cpus: Vec<(u64, u32)> = jobs
        .0
        .iter()
        .filter(|r| r.exec > 0)
        .map(|r| (r.finish / MS, r.cpu))
        .collect();
    assert_eq!(cpus, vec![(1, 1), (2, 0), (3, 1), (4, 0)]);
    // A phase naming a CPU the platform lacks is refused.
    let bad = ThreadSpec {
        phases: vec![Phase {
            affinity: Some(vec![7]),
            ..Phase::new(1, vec![run(1)])
        }],
        ..thread("bad", fifo(10), 0, Some(1), vec![])
    };
    assert!(matches!(
        Sim::new(workload(vec![bad], vec![], false), SimConfig::new(2)),
        Err(SimError::AffinityOutOfRange { cpu: 7, .. })
    ));
}

mod random {
    //! Random workloads of every sync event on a few shared objects, PI on and off, phase-level
    //! changes and forks: the simulator neither panics (debug assertions included) nor hangs,
    //! and ends each run at its horizon or at a fork-limit stop.
    use super::*;
    use proptest::prelude::*;

    fn event(kind: u8, a: usize, b: u64) -> Event {
        // Resources: 0, 1 mutexes; 2, 3 conditions; 4 barrier; 5 semaphore.
        let m = ResourceId(a % 2);
        let c = ResourceId(2 + a % 2);
        match kind % 16 {
            0 => Event::Lock { mutex: m },
            1 => Event::Unlock { mutex: m },
            2 => Event::Wait { cond: c, mutex: m },
            3 => Event::Signal { cond: c },
            4 => Event::Broadcast { cond: c },
            5 => Event::SignalWait { cond: c, mutex: m },
            6 => Event::Barrier {
                barrier: ResourceId(4),
            },
            7 => Event::Suspend { cond: c, mutex: m },
            8 => Event::Resume { cond: c, mutex: m },
            9 => Event::SemPost { sem: ResourceId(5) },
            10 => Event::SemWait { sem: ResourceId(5) },
            11 => Event::Mem { bytes: b * 10_000 },
            12 => Event::IoRun { bytes: b * 10_000 },
            13 => Event::Fork { thread: 3 },
            14 => sleep_us(b * 100 + 1),
            _ => run((b % 3) + 1),
        }
    }

    fn policy(p: u8) -> Policy {
        match p % 4 {
            0 => Policy::Other {
                nice: (p as i32 % 40) - 20,
            },
            1 => Policy::Rr { priority: 1 + p % 90 },
            2 => Policy::Deadline(pacer_model::Reservation::new(
                Duration::from_ms(1),
                Duration::from_ms(10),
                Duration::from_ms(10),
            )),
            _ => fifo(1 + p % 90),
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 500, ..ProptestConfig::default() })]
        #[test]
        fn random_sync_workloads_end_without_panicking(
            programs in prop::collection::vec(
                (any::<u8>(), any::<u8>(), prop::collection::vec((any::<u8>(), 0usize..4, 0u64..20), 1..8)),
                4,
            ),
            pi in any::<bool>(),
            cpus in 1usize..4,
        ) {
            let threads: Vec<ThreadSpec> = programs
                .iter()
                .enumerate()
                .map(|(i, (p, phase_bits, evs))| {
                    let mut events: Vec<Event> = evs.iter().map(|&(k, a, b)| event(k, a, b)).collect();
                    // Some time passes in every pass.
                    events.push(run(1));
                    let mut phase = Phase::new(1 + (*phase_bits as u64 % 3), events);
                    if phase_bits & 4 != 0 {
                        phase.policy = Some(policy(phase_bits.wrapping_mul(7)));
                    }
                    if phase_bits & 8 != 0 {
                        phase.affinity = Some(vec![(*phase_bits as usize / 16) % cpus]);
                    }
                    ThreadSpec {
                        forked: i == 3,
                        phases: vec![phase, Phase::new(1, vec![run(1)])],
                        ..thread(&format!("t{i}"), policy(*p), 0, if i == 3 { Some(1) } else { None }, vec![])
                    }
                })
                .collect();
            let resources = vec![
                res("m0", ResourceKind::Mutex),
                res("m1", ResourceKind::Mutex),
                res("c0", ResourceKind::Cond),
                res("c1", ResourceKind::Cond),
                res("b", ResourceKind::Barrier { users: 3 }),
                res("s", ResourceKind::Semaphore),
            ];
            let w = workload(threads, resources, pi);
            let mut sim = match Sim::new(w, SimConfig::new(cpus)) {
                Ok(s) => s,
                // Deadline phases may not be admitted, a timeless program is refused: fine.
                Err(_) => return Ok(()),
            };
            let mut jobs = Jobs::default();
            sim.run_until(200 * MS, &mut jobs);
            prop_assert_eq!(sim.now(), 200 * MS);
            prop_assert_eq!(sim.thread_names().len(), sim.threads());
        }
    }
}

#[test]
fn a_phase_policy_the_kernel_refuses_stops_the_run() {
    // A full-CPU reservation on one CPU is beyond admission (0.95 less the fair server).
    let greedy = pacer_model::Reservation::new(
        Duration::from_ms(10),
        Duration::from_ms(10),
        Duration::from_ms(10),
    );
    let x = ThreadSpec {
        phases: vec![
            Phase::new(1, vec![run(1)]),
            Phase {
                policy: Some(Policy::Deadline(greedy)),
                ..Phase::new(1, vec![run(1)])
            },
        ],
        ..thread("x", fifo(10), 0, None, vec![])
    };
    let (sim, jobs) = simulate(workload(vec![x], vec![], false), 1, 50);
    assert!(matches!(sim.failure(), Some(SimError::PhasePolicy { t, .. }) if *t == MS));
    assert_eq!(jobs.finishes(0), vec![MS]);
    assert_eq!(sim.policy_of(0), Some(fifo(10)));
}

#[test]
fn observers_learn_forked_threads_names_before_their_jobs() {
    #[derive(Default)]
    struct Seen(Vec<String>);
    impl Observer for Seen {
        fn job(&mut self, r: &JobRecord) {
            self.0.push(format!("job {}", r.thread));
        }
        fn thread_started(&mut self, thread: u32, name: &str) {
            self.0.push(format!("start {thread} {name}"));
        }
    }
    let parent = thread("p", fifo(10), 0, Some(1), vec![Event::Fork { thread: 1 }, run(1)]);
    let child = ThreadSpec {
        forked: true,
        ..thread("c", fifo(20), 0, Some(1), vec![run(1)])
    };
    let mut sim = Sim::new(workload(vec![parent, child], vec![], false), SimConfig::new(2)).unwrap();
    let mut seen = Seen::default();
    sim.run_until(10 * MS, &mut seen);
    assert_eq!(seen.0[0], "start 1 c-1-0000");
    assert!(seen.0.contains(&"job 1".to_string()));
    // The Chrome trace names the forked thread's track.
    let mut trace = pacer_sim::output::ChromeTrace::new(Vec::new(), sim.thread_names()[..1].to_vec(), 2);
    let parent = thread("p", fifo(10), 0, Some(1), vec![Event::Fork { thread: 1 }, run(1)]);
    let child = ThreadSpec {
        forked: true,
        ..thread("c", fifo(20), 0, Some(1), vec![run(1)])
    };
    let mut sim = Sim::new(workload(vec![parent, child], vec![], false), SimConfig::new(2)).unwrap();
    sim.run_until(10 * MS, &mut trace);
    let text = String::from_utf8(trace.finish(10 * MS).unwrap()).unwrap();
    assert!(text.contains("\"c-1-0000\""), "{text}");
}
