//! Task groups (rt-app `taskgroup`, the cgroup v1 cpu controller, `cpu.shares` 1024): how the
//! threads of a group share the CPU with the others (`calc_group_shares()` per CPU, nested
//! groups, a sleeping group giving its share away), phase-level moves, and the cost of a move
//! (an RCU grace period, or the fast path right after another move).

mod support;

use pacer_model::Duration;
use pacer_sim::{JobRecord, Sim, SimConfig, SimError};
use pacer_workload::{Event, Phase, Policy, ThreadSpec, Workload};
use support::{run, sleep, Jobs};

const MS: u64 = 1_000_000;
const US: u64 = 1_000;

/// A SCHED_OTHER thread on `cpus`, in `group` from its start (`None`: the root), repeating
/// `events` forever.
fn thread(name: &str, cpus: &[usize], group: Option<&str>, events: Vec<Event>) -> ThreadSpec {
    ThreadSpec {
        name: name.into(),
        policy: Policy::Other { nice: 0 },
        affinity: Some(cpus.to_vec()),
        phases: vec![Phase::new(1, events)],
        taskgroup: group.map(str::to_string),
        ..Default::default()
    }
}

fn hog(name: &str, cpus: &[usize], group: Option<&str>) -> ThreadSpec {
    thread(name, cpus, group, vec![run(1000)])
}

/// `cpus` CPUs, tick at 0; moves free unless a test says otherwise.
fn cfg(cpus: usize) -> SimConfig {
    let mut c = SimConfig::new(cpus);
    c.tick_phase = Some(0);
    c.taskgroup_move_ns = 0;
    c.taskgroup_move_fast_ns = 0;
    c
}

fn sim(threads: Vec<ThreadSpec>, cfg: SimConfig) -> Sim {
    Sim::new(
        Workload {
            threads,
            ..Default::default()
        },
        cfg,
    )
    .unwrap()
}

/// Each thread's share of one CPU over `horizon`.
fn shares(threads: Vec<ThreadSpec>, cfg: SimConfig, horizon: u64) -> Vec<f64> {
    let mut s = sim(threads, cfg);
    s.run_until(horizon, &mut Jobs::default());
    s.stats()
        .iter()
        .map(|st| st.exec as f64 / horizon as f64)
        .collect()
}

fn assert_shares(got: &[f64], want: &[f64]) {
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() < 0.01,
            "thread {i}: share {g:.4}, expected {w:.4} (all: {got:.4?})"
        );
    }
}

#[test]
fn two_threads_in_a_group_share_half_a_cpu_with_one_outside() {
    // The group's entity weighs its shares, 1024, like the thread outside: 1/2 : 1/2, and the
    // group's half split between its two threads.
    let got = shares(
        vec![
            hog("a1", &[0], Some("/a")),
            hog("a2", &[0], Some("/a")),
            hog("b", &[0], None),
        ],
        cfg(1),
        10_000 * MS,
    );
    assert_shares(&got, &[0.25, 0.25, 0.5]);
    // Without the group, three equal threads: 1/3 each.
    let flat = shares(
        vec![hog("a1", &[0], None), hog("a2", &[0], None), hog("b", &[0], None)],
        cfg(1),
        10_000 * MS,
    );
    assert_shares(&flat, &[1.0 / 3.0; 3]);
}

#[test]
fn nested_groups_multiply_their_shares() {
    // Root: /a and x, 1/2 each. /a: its own thread and /a/b's entity, 1/4 each. /a/b: two
    // threads, 1/8 each.
    let got = shares(
        vec![
            hog("x", &[0], None),
            hog("a", &[0], Some("/a")),
            hog("b1", &[0], Some("/a/b")),
            hog("b2", &[0], Some("/a/b")),
        ],
        cfg(1),
        10_000 * MS,
    );
    assert_shares(&got, &[0.5, 0.25, 0.125, 0.125]);
}

#[test]
fn nice_values_share_within_the_group_only() {
    // /a holds nice 0 (1024) and nice 5 (335): they split /a's half 1024 : 335; the thread
    // outside keeps its half whatever the nice values inside.
    let mut n5 = hog("a5", &[0], Some("/a"));
    n5.policy = Policy::Other { nice: 5 };
    let got = shares(
        vec![hog("a0", &[0], Some("/a")), n5, hog("b", &[0], None)],
        cfg(1),
        10_000 * MS,
    );
    assert_shares(&got, &[0.5 * 1024.0 / 1359.0, 0.5 * 335.0 / 1359.0, 0.5]);
}

#[test]
fn a_group_whose_threads_sleep_gives_its_share_away() {
    // /a: two hogs and a thread that runs 1 ms every 101 ms. While that one sleeps, the hogs
    // are /a's whole queue and share all of /a's 1024 against b's 1024: 1/4, 1/4, 1/2.
    // Counting the sleeper in /a's load (a static split of the group) would give the hogs 1/3
    // of /a's weight each, 1/5 of the CPU, and b 3/5; without the group each would get 1/3.
    let got = shares(
        vec![
            hog("a1", &[0], Some("/a")),
            hog("a2", &[0], Some("/a")),
            thread("sleeper", &[0], Some("/a"), vec![run(1), sleep(100)]),
            hog("b", &[0], None),
        ],
        cfg(1),
        10_000 * MS,
    );
    let busy = 1.0 / 101.0;
    assert!((got[2] - busy).abs() < 0.001, "sleeper {:.4}", got[2]);
    let rest = 1.0 - busy;
    assert_shares(&got, &[rest / 4.0, rest / 4.0, busy, rest / 2.0]);
    // And a group with nobody runnable takes nothing: b alone with a sleeping group.
    let got = shares(
        vec![
            thread("s", &[0], Some("/a"), vec![run(1), sleep(99)]),
            hog("b", &[0], None),
        ],
        cfg(1),
        10_000 * MS,
    );
    assert_shares(&got, &[0.01, 0.99]);
}

#[test]
fn a_groups_shares_split_across_cpus_by_its_load_on_each() {
    // /a has a hog on each CPU: its load is even, so its entity weighs 512 on each. On CPU 0 it
    // meets x (1024): 1/3 : 2/3; on CPU 1 it is alone and runs all the time.
    let got = shares(
        vec![
            hog("a0", &[0], Some("/a")),
            hog("a1", &[1], Some("/a")),
            hog("x", &[0], None),
        ],
        cfg(2),
        10_000 * MS,
    );
    assert_shares(&got, &[1.0 / 3.0, 1.0, 2.0 / 3.0]);
    // With two hogs of /a on CPU 1 and one on CPU 0, /a's entity weighs 1024/3 on CPU 0.
    let got = shares(
        vec![
            hog("a0", &[0], Some("/a")),
            hog("a1", &[1], Some("/a")),
            hog("a2", &[1], Some("/a")),
            hog("x", &[0], None),
        ],
        cfg(2),
        10_000 * MS,
    );
    let w = 1024.0 / 3.0;
    assert_shares(&got, &[w / (w + 1024.0), 0.5, 0.5, 1024.0 / (w + 1024.0)]);
}

/// A thread whose phases alternate between two groups: `p0` in `g0`, `p1` in `g1`, each pass
/// `events`.
fn mover(name: &str, g0: &str, g1: &str, events: Vec<Event>) -> ThreadSpec {
    let mut p0 = Phase::new(1, events.clone());
    p0.taskgroup = Some(g0.into());
    let mut p1 = Phase::new(1, events);
    p1.taskgroup = Some(g1.into());
    ThreadSpec {
        name: name.into(),
        policy: Policy::Other { nice: 0 },
        affinity: Some(vec![0]),
        phases: vec![p0, p1],
        ..Default::default()
    }
}

#[test]
fn phase_level_moves_change_the_share_of_each_pass() {
    // CPU 0: h in /a, x in the root, and m, which runs 20 ms per pass, in /a in phase 0 and in
    // the root in phase 1. In /a it shares /a's half with h: 1/4 of the CPU, 80 ms a pass. In
    // the root, m, x and /a weigh 1024 each: 1/3, 60 ms a pass. Moves cost 1 ms each.
    let mut c = cfg(1);
    c.taskgroup_move_ns = MS;
    c.taskgroup_move_window_ns = 0;
    let mut s = sim(
        vec![
            hog("h", &[0], Some("/a")),
            hog("x", &[0], None),
            mover("m", "/a", "/", vec![run(20)]),
        ],
        c,
    );
    let mut jobs = Jobs::default();
    s.run_until(2_000 * MS, &mut jobs);
    let m: Vec<&JobRecord> = jobs.0.iter().filter(|r| r.thread == 2).collect();
    assert!(m.len() >= 10, "{} passes", m.len());
    for (i, r) in m.iter().enumerate().skip(2) {
        // A job of a thread without timers is a pass: released at the previous pass's end, it
        // includes the move (1 ms, the thread asleep) and the run at its share.
        let want = if i % 2 == 0 { 81 * MS } else { 61 * MS };
        let got = r.finish - r.release;
        assert!(
            got.abs_diff(want) <= 2 * MS,
            "pass {i}: {} ms, expected {} ms",
            got / MS,
            want / MS
        );
    }
}

#[test]
fn a_move_sleeps_a_grace_period_unless_another_move_just_ended() {
    let mut c = cfg(2);
    c.taskgroup_move_ns = 8 * MS;
    c.taskgroup_move_fast_ns = 10 * US;
    c.taskgroup_move_window_ns = 16 * MS;
    // p: moves into /a (first write: a grace period), runs 1 ms, sleeps 5 ms, moves back to /
    // 6 ms after the first move ended (fast), runs 1 ms, sleeps 30 ms: the next move into /a
    // comes 31 ms after the last one ended (a grace period again).
    let p = mover("p", "/a", "/", vec![run(1), sleep(5)]);
    let mut p = p;
    p.phases[1].events = vec![run(1), sleep(30)];
    // q starts in /b at 1 ms, while p waits for its grace period: it waits for the same one.
    let mut q = thread("q", &[1], Some("/b"), vec![run(1), sleep(10)]);
    q.start_delay = Duration::from_ms(1);
    let mut s = sim(vec![p, q], c);
    let mut jobs = Jobs::default();
    s.run_until(100 * MS, &mut jobs);
    let starts = |t: u32| -> Vec<u64> { jobs.0.iter().filter(|r| r.thread == t).map(|r| r.start).collect() };
    let p = starts(0);
    // Pass 0 starts after the grace period (8 ms: a move has no timer slack); it ends at
    // 8 + 1 + 5 ms + the sleep's 50 µs of slack; pass 1 after a fast move (10 µs); it ends at
    // 14.06 + 1 + 30.05 = 45.11; pass 2 after a grace period.
    let slack = pacer_sim::DEFAULT_TIMER_SLACK_NS;
    assert_eq!(p[0], 8 * MS);
    assert_eq!(p[1], 14 * MS + slack + 10 * US);
    assert_eq!(p[2], 45 * MS + 2 * slack + 10 * US + 8 * MS);
    // q's move began during p's grace period and ended with it (plus the fast path).
    assert_eq!(starts(1)[0], 8 * MS + 10 * US);
}

#[test]
fn the_first_write_moves_even_into_the_root_and_a_group_kept_is_no_move() {
    // Phase 0 names `/` (the thread is there, but rt-app writes it once), phase 1 names nothing
    // (it stays), so each loop moves once, into `/`... only the first time: the thread is in
    // `/` already afterwards.
    let mut c = cfg(1);
    c.taskgroup_move_ns = 5 * MS;
    c.taskgroup_move_window_ns = 0;
    let mut p0 = Phase::new(1, vec![run(1), sleep(9)]);
    p0.taskgroup = Some("/".into());
    let p1 = Phase::new(1, vec![run(1), sleep(9)]);
    let t = ThreadSpec {
        name: "t".into(),
        affinity: Some(vec![0]),
        phases: vec![p0, p1],
        ..Default::default()
    };
    let mut s = sim(vec![t], c);
    let mut jobs = Jobs::default();
    s.run_until(100 * MS, &mut jobs);
    let starts: Vec<u64> = jobs.0.iter().map(|r| r.start / MS).collect();
    assert_eq!(starts[..5], [5, 15, 25, 35, 45]);
}

#[test]
fn real_time_threads_in_groups_are_refused_and_workloads_without_groups_unchanged() {
    let mut rt = hog("r", &[0], Some("/a"));
    rt.policy = Policy::Fifo { priority: 10 };
    let err = Sim::new(
        Workload {
            threads: vec![rt],
            ..Default::default()
        },
        cfg(1),
    )
    .err()
    .unwrap();
    assert!(
        matches!(&err, SimError::BadThread { message, .. } if message.contains("fair class")),
        "{err}"
    );
    // A phase that makes a grouped thread SCHED_FIFO is refused too.
    let mut t = thread("t", &[0], Some("/a"), vec![run(1)]);
    t.phases[0].policy = Some(Policy::Fifo { priority: 10 });
    assert!(Sim::new(
        Workload {
            threads: vec![t],
            ..Default::default()
        },
        cfg(1)
    )
    .is_err());
}
