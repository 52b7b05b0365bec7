//! Where fair threads run on two CPUs (Linux 6.18's select_idle_sibling() with SIS_UTIL, and
//! idle balancing kicked from a busy CPU's tick), against the ideal placement. Times in the
//! comments are milliseconds.

mod support;

use pacer_sim::{FairBalance, JobRecord, Observer, Sim, SimConfig, TraceEvent};
use pacer_workload::{Event, Phase, Policy, ThreadSpec, Workload};
use support::{run, sleep};

const MS: u64 = 1_000_000;

#[derive(Default)]
struct Trace {
    /// (time, cpu, thread switched in).
    switches: Vec<(u64, u32, Option<u32>)>,
    /// (time, thread, from, to).
    migrations: Vec<(u64, u32, u32, u32)>,
    jobs: Vec<JobRecord>,
}

impl Observer for Trace {
    fn job(&mut self, r: &JobRecord) {
        self.jobs.push(*r);
    }
    fn event(&mut self, e: &TraceEvent) {
        match *e {
            TraceEvent::Switch { t, cpu, next, .. } => self.switches.push((t, cpu, next)),
            TraceEvent::Migrate { t, thread, from, to } => self.migrations.push((t, thread, from, to)),
            _ => {}
        }
    }
    fn wants_events(&self) -> bool {
        true
    }
}

fn other(name: &str, events: Vec<Event>) -> ThreadSpec {
    ThreadSpec {
        name: name.into(),
        policy: Policy::Other { nice: 0 },
        phases: vec![Phase::new(1, events)],
        ..Default::default()
    }
}

/// Thread 0 hogs CPU 0 and thread 1 CPU 1 until 100, when it sleeps; thread 2 runs 5 every
/// 100 or so from CPU 0, where it started (both CPUs were busy), sharing it with thread 0. It
/// wakes again after 110: CPU 1 has idled since 100, but the LLC's utilisation is still high
/// (CPU 0 ≈ 1000, CPU 1 ≈ 700, decaying from ≈ 900), so SIS_UTIL scans no CPU and thread 2 queues
/// on CPU 0, where it preempts thread 0. The next tick of CPU 0 kicks CPU 1, which pulls thread 0
/// (it left CPU 0 more than 0.5 ago: not cache hot). Under the ideal placement thread 2 goes to
/// CPU 1 as it wakes.
fn simulate(balance: FairBalance) -> Trace {
    let threads = vec![
        other("h0", vec![run(1000)]),
        other("h1", vec![run(100), sleep(10_000)]),
        other("t", vec![run(5), sleep(100)]),
    ];
    let mut cfg = SimConfig::new(2);
    cfg.tick_phase = Some(0);
    cfg.fair_balance = balance;
    let w = Workload {
        threads,
        ..Default::default()
    };
    let mut sim = Sim::new(w, cfg).unwrap();
    let mut tr = Trace::default();
    sim.run_until(200 * MS, &mut tr);
    tr
}

/// Where and when thread 2 first runs at or after `from`.
fn first_run(tr: &Trace, from: u64) -> (u64, u32) {
    tr.switches
        .iter()
        .find(|&&(t, _, next)| t >= from && next == Some(2))
        .map(|&(t, cpu, _)| (t, cpu))
        .expect("thread 2 runs")
}

#[test]
fn a_busy_llc_keeps_a_waking_thread_on_its_busy_cpu_until_a_tick_kicks_the_idle_one() {
    let tr = simulate(FairBalance::Linux);
    // Before 100 both CPUs are busy: thread 2 stays on CPU 0.
    assert!(tr
        .switches
        .iter()
        .filter(|&&(t, _, next)| t < 100 * MS && next == Some(2))
        .all(|&(_, cpu, _)| cpu == 0));
    let (wake, cpu) = first_run(&tr, 110 * MS);
    assert_eq!(cpu, 0, "queued on its busy previous CPU, not the idle one");
    // Thread 0 moves to CPU 1 at CPU 0's first tick after that, not before.
    assert!(tr.migrations.iter().all(|&(t, ..)| t < 100 * MS || t > wake));
    let next_tick = wake.div_ceil(4 * MS) * 4 * MS;
    assert_eq!(
        tr.migrations.iter().find(|&&(t, ..)| t > wake).copied(),
        Some((next_tick, 0, 0, 1))
    );
}

#[test]
fn the_ideal_placement_takes_the_idle_cpu_at_the_wakeup() {
    let (wake, _) = first_run(&simulate(FairBalance::Linux), 110 * MS);
    let tr = simulate(FairBalance::Ideal);
    assert_eq!(first_run(&tr, 110 * MS), (wake, 1));
    assert!(tr.migrations.iter().all(|&(t, ..)| t < 100 * MS));
}
