//! Analysis and simulation agree: a set an exact uniprocessor test accepts never misses over its
//! hyperperiod in the simulator (EDF through SCHED_DEADLINE reservations, DM through SCHED_FIFO),
//! and partitioned EDF with every CPU at U ≤ 1 never misses.

use pacer_analysis::partition::{self, Heuristic};
use pacer_analysis::uni::{priority, qpa, rta};
use pacer_analysis::Timing;
use pacer_model::{Duration, Reservation};
use pacer_sim::{JobRecord, Observer, Sim, SimConfig};
use pacer_workload::{Event, Phase, Policy, ThreadSpec, TimerId, TimerMode, Work, Workload};
use proptest::prelude::*;

const MS: u64 = 1_000_000;

#[derive(Default)]
struct Misses {
    jobs: u64,
    missed: Vec<JobRecord>,
}
impl Observer for Misses {
    fn job(&mut self, r: &JobRecord) {
        self.jobs += 1;
        if r.missed() {
            self.missed.push(*r);
        }
    }
}

fn lcm(a: u64, b: u64) -> u64 {
    pacer_model::time::lcm(a, b).expect("small periods")
}

fn thread(i: usize, t: &Timing, policy: Policy, affinity: Option<Vec<usize>>) -> ThreadSpec {
    ThreadSpec {
        name: format!("t{i}"),
        policy,
        affinity,
        start_delay: Duration::ZERO,
        phases: vec![Phase::new(
            1,
            vec![
                Event::Run {
                    work: Work::Fixed { ns: Duration(t.c) },
                },
                Event::Timer {
                    timer: TimerId(i),
                    period: Duration(t.t),
                    mode: TimerMode::Absolute,
                },
            ],
        )],
        loops: None,
        cooperative: false,
        job_deadline: Some(Duration(t.d)),
        ..Default::default()
    }
}

fn run(threads: Vec<ThreadSpec>, cpus: usize, horizon: u64) -> Misses {
    let mut sim = Sim::new(
        Workload {
            threads,
            duration: None,
            ignored: vec![],
            ..Default::default()
        },
        SimConfig::new(cpus),
    )
    .unwrap();
    let mut m = Misses::default();
    sim.run_until(horizon, &mut m);
    m
}

fn horizon(ts: &[Timing]) -> u64 {
    ts.iter().fold(1, |a, x| lcm(a, x.t)) + ts.iter().map(|x| x.d).max().unwrap()
}

fn small_set() -> impl Strategy<Value = Vec<Timing>> {
    prop::collection::vec(
        (2u64..=16).prop_flat_map(|t| {
            (1..=t).prop_flat_map(move |d| (1..=d).prop_map(move |c| Timing::new(c * MS, d * MS, t * MS)))
        }),
        1..=4,
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn qpa_schedulable_sets_never_miss_under_edf(ts in small_set()) {
        prop_assume!(qpa::schedulable(&ts));
        let threads = ts.iter().enumerate().map(|(i, t)| {
            let r = Reservation::new(Duration(t.c), Duration(t.d), Duration(t.t));
            thread(i, t, Policy::Deadline(r), None)
        }).collect();
        let m = run(threads, 1, horizon(&ts));
        prop_assert!(m.jobs > 0);
        prop_assert!(m.missed.is_empty(), "{:?} missed {:?}", ts, m.missed.first());
    }

    #[test]
    fn rta_schedulable_sets_never_miss_under_dm(ts in small_set()) {
        prop_assume!(rta::schedulable_dm(&ts));
        let order = priority::deadline_monotonic(&ts);
        let threads = ts.iter().enumerate().map(|(i, t)| {
            let rank = order.iter().position(|&k| k == i).unwrap();
            thread(i, t, Policy::Fifo { priority: 90 - rank as u8 }, None)
        }).collect();
        let m = run(threads, 1, horizon(&ts));
        prop_assert!(m.missed.is_empty(), "{:?} missed {:?}", ts, m.missed.first());
    }

    #[test]
    fn partitioned_edf_with_per_cpu_u_at_most_one_never_misses(
        ts in prop::collection::vec((2u64..=12).prop_flat_map(|t| (1..=t).prop_map(move |c| Timing::implicit(c * MS, t * MS))), 2..=7)
    ) {
        let cpus = 3;
        let Ok(a) = partition::pack(&ts, &[1; 3], Heuristic::FFD, partition::load_fits) else {
            return Ok(()); // does not fit: nothing to check
        };
        let threads = ts.iter().enumerate().map(|(i, t)| {
            let r = Reservation::new(Duration(t.c), Duration(t.d), Duration(t.t));
            thread(i, t, Policy::Deadline(r), Some(vec![a.bin_of[i]]))
        }).collect();
        let m = run(threads, cpus, horizon(&ts).min(2_000 * MS));
        prop_assert!(m.missed.is_empty(), "{:?} on {:?} missed {:?}", ts, a.bin_of, m.missed.first());
    }
}
