//! What a real machine and rt-app itself add to a workload, by hand: timer slack of the fair
//! policies, the wake-up latency of timers and of synchronisation, the idle-exit latency of a CPU
//! that was idle, and rt-app's `runtime` loop, which reads the clock between 32 µs bursts.
//! Times in the comments are microseconds.

mod support;

use pacer_model::Duration;
use pacer_sim::{JobRecord, Sim, SimConfig, DEFAULT_TIMER_SLACK_NS};
use pacer_workload::{
    Event, Phase, Policy, Resource, ResourceId, ResourceKind, ThreadSpec, TimerId, TimerMode, Workload,
};
use support::{run_us, runtime_us, sleep_us, Jobs};

const US: u64 = 1_000;

impl Jobs {
    fn of(&self, thread: u32) -> Vec<JobRecord> {
        self.0.iter().filter(|r| r.thread == thread).copied().collect()
    }
}

fn timer_us(us: u64) -> Event {
    Event::Timer {
        timer: TimerId(0),
        period: Duration::from_us(us),
        mode: TimerMode::Absolute,
    }
}

fn thread(name: &str, policy: Policy, cpus: &[usize], loops: Option<u64>, events: Vec<Event>) -> ThreadSpec {
    ThreadSpec {
        name: name.into(),
        policy,
        affinity: Some(cpus.to_vec()),
        phases: vec![Phase::new(1, events)],
        loops,
        ..Default::default()
    }
}

fn simulate(threads: Vec<ThreadSpec>, resources: Vec<Resource>, cfg: SimConfig, horizon_us: u64) -> Jobs {
    let w = Workload {
        threads,
        resources,
        ..Default::default()
    };
    let mut sim = Sim::new(w, cfg).unwrap();
    let mut jobs = Jobs::default();
    sim.run_until(horizon_us * US, &mut jobs);
    jobs
}

const FIFO: Policy = Policy::Fifo { priority: 10 };
const OTHER: Policy = Policy::Other { nice: 0 };

/// A pass of run 1000 then sleep 2000 ends when the sleep does: at 3000 for SCHED_FIFO, 50 µs
/// later for SCHED_OTHER, SCHED_BATCH and SCHED_IDLE (`timer_slack_ns`), and at 3000 again with
/// the slack set to 0.
#[test]
fn fair_threads_sleep_their_timer_slack_longer() {
    let finish = |policy: Policy, slack: u64| {
        let mut cfg = SimConfig::new(1);
        cfg.timer_slack = slack;
        let t = thread("t", policy, &[0], Some(1), vec![run_us(1000), sleep_us(2000)]);
        let jobs = simulate(vec![t], vec![], cfg, 10_000);
        jobs.of(0)[0].finish
    };
    assert_eq!(finish(FIFO, DEFAULT_TIMER_SLACK_NS), 3000 * US);
    assert_eq!(
        finish(Policy::Rr { priority: 10 }, DEFAULT_TIMER_SLACK_NS),
        3000 * US
    );
    assert_eq!(
        finish(OTHER, DEFAULT_TIMER_SLACK_NS),
        3000 * US + DEFAULT_TIMER_SLACK_NS
    );
    assert_eq!(finish(Policy::Batch { nice: 0 }, 20 * US), 3020 * US);
    assert_eq!(finish(Policy::Idle, 20 * US), 3020 * US);
    assert_eq!(finish(OTHER, 0), 3000 * US);
}

/// A periodic SCHED_OTHER thread's timer fires 50 µs late: its jobs are released on the grid
/// and start 50 µs after.
#[test]
fn a_fair_timer_releases_on_the_grid_and_starts_its_slack_later() {
    let t = thread("t", OTHER, &[0], None, vec![run_us(100), timer_us(1000)]);
    let jobs = simulate(vec![t], vec![], SimConfig::new(1), 5_000);
    let j = jobs.of(0);
    assert!(j.len() >= 4);
    for r in &j[1..] {
        assert_eq!(r.release % (1000 * US), 0);
        assert_eq!(r.start - r.release, DEFAULT_TIMER_SLACK_NS);
    }
}

/// Two SCHED_FIFO threads on two CPUs meet at a barrier: `a` arrives at 1000 and waits, `b`
/// arrives at 3000 and goes on, `a` runs 1000 more once woken. The wake-up latency (100) delays
/// `a` as it delays a timer's wake-up; the idle-exit latency (200) of `a`'s CPU, idle since 1000,
/// comes on top, uncharged; `b` never waits for either.
#[test]
fn wakeup_and_idle_exit_latencies_delay_a_barrier_wakeup() {
    let barrier = Event::Barrier {
        barrier: ResourceId(0),
    };
    let pass = |latency: u64, idle_exit: u64| {
        let mut cfg = SimConfig::new(2);
        cfg.wakeup_latency = latency * US;
        cfg.idle_exit_latency = idle_exit * US;
        let threads = vec![
            thread(
                "a",
                FIFO,
                &[0],
                Some(1),
                vec![run_us(1000), barrier.clone(), run_us(1000)],
            ),
            thread(
                "b",
                FIFO,
                &[1],
                Some(1),
                vec![run_us(3000), barrier.clone(), run_us(1000)],
            ),
        ];
        let res = vec![Resource {
            name: "x".into(),
            kind: ResourceKind::Barrier { users: 2 },
        }];
        let jobs = simulate(threads, res, cfg, 10_000);
        let (a, b) = (jobs.of(0)[0], jobs.of(1)[0]);
        (a.finish / US, a.exec / US, b.finish / US)
    };
    assert_eq!(pass(0, 0), (4000, 2000, 4000));
    assert_eq!(pass(100, 0), (4100, 2000, 4000));
    assert_eq!(pass(100, 200), (4300, 2000, 4000));
    assert_eq!(pass(0, 200), (4200, 2000, 4000));
}

/// A SCHED_FIFO timer thread alone on its CPU finds it idle at every expiry and pays the idle exit
/// (200) after the wake-up latency (30); beside a SCHED_OTHER hog, which it preempts, the CPU is
/// awake and it pays the wake-up latency only.
#[test]
fn the_idle_exit_is_paid_on_an_idle_cpu_only() {
    let start_delays = |with_hog: bool| {
        let mut cfg = SimConfig::new(1);
        cfg.wakeup_latency = 30 * US;
        cfg.idle_exit_latency = 200 * US;
        let mut threads = vec![thread("p", FIFO, &[0], None, vec![run_us(100), timer_us(2000)])];
        if with_hog {
            threads.push(thread("hog", OTHER, &[0], None, vec![run_us(1_000_000)]));
        }
        let jobs = simulate(threads, vec![], cfg, 20_000);
        let d: Vec<u64> = jobs.of(0)[1..]
            .iter()
            .map(|r| (r.start - r.release) / US)
            .collect();
        assert!(d.len() >= 5);
        d
    };
    assert!(
        start_delays(false).iter().all(|&d| d == 230),
        "{:?}",
        start_delays(false)
    );
    assert!(
        start_delays(true).iter().all(|&d| d == 30),
        "{:?}",
        start_delays(true)
    );
}

/// rt-app's `runtime` spins 32 µs bursts of calibrated loop and reads the clock after each: a
/// runtime of 1000 ends at the 32nd burst, 1024 (then the sleep 1000: the pass ends at 2024).
/// Bursts are calibrated work, scaled like `run` (× 1.5: 48 µs, 21 bursts, 1008); without
/// bursts it ends at 1000.
#[test]
fn a_runtime_ends_at_the_first_burst_past_its_duration() {
    let finish = |burst: u64, scale: f64| {
        let mut cfg = SimConfig::new(1);
        cfg.runtime_burst = burst * US;
        cfg.work_scale = scale;
        let t = thread("t", FIFO, &[0], Some(1), vec![runtime_us(1000), sleep_us(1000)]);
        simulate(vec![t], vec![], cfg, 10_000).of(0)[0].finish / US
    };
    assert_eq!(finish(32, 1.0), 2024);
    assert_eq!(finish(32, 1.5), 2008);
    assert_eq!(finish(0, 1.0), 2000);
}

/// A runtime is wall-clock time, preemptions included: `low` starts a runtime of 2000 at 0,
/// `high` preempts it from 500 to 1500; it resumes the burst it was in (done 500, 15.6 bursts),
/// and the first burst to end at or after 2000 ends at 2024, not at 3000 as if it only advanced
/// while running.
#[test]
fn a_preempted_runtime_ends_by_the_wall_clock() {
    let mut high = thread(
        "high",
        Policy::Fifo { priority: 20 },
        &[0],
        Some(1),
        vec![run_us(1000)],
    );
    high.start_delay = Duration::from_us(500);
    let low = thread("low", FIFO, &[0], Some(1), vec![runtime_us(2000)]);
    let jobs = simulate(vec![low, high], vec![], SimConfig::new(1), 10_000);
    assert_eq!(jobs.of(1)[0].finish / US, 1500);
    let l = jobs.of(0)[0];
    assert_eq!(l.finish / US, 2024);
    assert_eq!(l.exec / US, 1024);
}
