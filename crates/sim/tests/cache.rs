//! The migration and cache-reload cost model (crates/sim/src/cache.rs) and the working-set
//! phase in the simulator, with a hand-made profile whose rates make every charge exact:
//! 2 ns a byte from the shared cache, 4 ns a byte from memory, 1.5 ns a warm line.

mod support;

use std::sync::Arc;

use pacer_model::{Duration, Task, TaskSet};
use pacer_sim::{CacheStats, JobRecord, Sim, SimConfig};
use pacer_workload::calibration::{CachePoint, MachineInfo};
use pacer_workload::{
    from_taskset, CacheProfile, Event, ExecModel, Phase, Policy, TaskPolicy, ThreadSpec, Work, WorkingSet,
    Workload, WssAmount, WssOrder, CALIBRATION_SCHEMA,
};
use support::{sleep, Jobs};

const KIB: u64 = 1024;

fn profile() -> Arc<CacheProfile> {
    let w = 256 * KIB;
    let warm = 4096 * 3 / 2; // 4096 lines at 1.5 ns
    Arc::new(CacheProfile {
        schema: CALIBRATION_SCHEMA.into(),
        machine: MachineInfo {
            cpu_model: "test".into(),
            cpus: 2,
            kernel: "test".into(),
            caches: vec![],
        },
        date: "2026-01-01T00:00:00Z".into(),
        command: "by hand".into(),
        line_bytes: 64,
        private_cache_bytes: 1024 * KIB,
        shared_cache_bytes: 32 * 1024 * KIB,
        evict_bytes: 64 * 1024 * KIB,
        repeats: 1,
        cpus: vec![0, 1],
        points: vec![CachePoint {
            order: WssOrder::Sequential,
            wss_bytes: w,
            warm_pass_ns: warm,
            migrated_pass_ns: warm + 2 * w,
            evicted_pass_ns: warm + 4 * w,
        }],
    })
}

fn wss(size: u64, amount: WssAmount) -> Event {
    Event::WorkingSet(WorkingSet {
        size,
        order: WssOrder::Sequential,
        seed: 0,
        amount,
    })
}

fn work_ms(ms: u64) -> WssAmount {
    WssAmount::Work {
        work: Work::Fixed {
            ns: Duration(ms * 1_000_000),
        },
    }
}

fn fifo(name: &str, prio: u8, cpus: Vec<usize>, phases: Vec<Phase>, loops: u64) -> ThreadSpec {
    ThreadSpec {
        name: name.into(),
        policy: Policy::Fifo { priority: prio },
        affinity: Some(cpus),
        phases,
        loops: Some(loops),
        ..Default::default()
    }
}

fn run(w: Workload, cpus: usize, model: bool) -> (Vec<JobRecord>, Option<CacheStats>) {
    let mut cfg = SimConfig::new(cpus);
    cfg.cache_model = model.then(profile);
    let mut sim = Sim::new(w, cfg).unwrap_or_else(|e| panic!("{e}"));
    let mut jobs = Jobs::default();
    sim.run_until(1_000_000_000, &mut jobs);
    (jobs.0, sim.cache_stats())
}

fn workload(threads: Vec<ThreadSpec>) -> Workload {
    Workload {
        threads,
        ..Default::default()
    }
}

#[test]
fn a_warm_resume_costs_nothing_and_the_first_load_comes_from_memory() {
    // One thread alone on CPU 0: 1 ms over 256 KiB, sleep 1 ms, five times.
    let t = fifo(
        "t",
        10,
        vec![0],
        vec![Phase::new(1, vec![wss(256 * KIB, work_ms(1)), sleep(1)])],
        5,
    );
    let (jobs, stats) = run(workload(vec![t]), 2, true);
    let exec: Vec<u64> = jobs.iter().map(|j| j.exec).collect();
    assert_eq!(
        exec,
        vec![
            1_000_000 + 4 * 256 * KIB,
            1_000_000,
            1_000_000,
            1_000_000,
            1_000_000
        ]
    );
    let s = stats.unwrap();
    assert_eq!(
        (
            s.cold_loads,
            s.warm_resumes,
            s.migration_reloads,
            s.eviction_reloads
        ),
        (1, 4, 0, 0)
    );
}

#[test]
fn a_migration_reloads_from_the_shared_cache() {
    // Phases alternate the thread between CPU 0 and CPU 1: every job after the first resumes on
    // the other CPU, whose private cache has none of it; the shared cache has it all.
    let mut p0 = Phase::new(1, vec![wss(256 * KIB, work_ms(1)), sleep(1)]);
    p0.affinity = Some(vec![0]);
    let mut p1 = p0.clone();
    p1.affinity = Some(vec![1]);
    let t = fifo("t", 10, vec![0, 1], vec![p0, p1], 3);
    let (jobs, stats) = run(workload(vec![t]), 2, true);
    assert_eq!(jobs.len(), 6);
    assert_eq!(jobs[0].exec, 1_000_000 + 4 * 256 * KIB);
    for j in &jobs[1..] {
        assert_eq!(j.exec, 1_000_000 + 2 * 256 * KIB, "job {}", j.job);
    }
    let s = stats.unwrap();
    assert_eq!((s.cold_loads, s.migration_reloads, s.warm_resumes), (1, 5, 0));
    assert_eq!(s.bytes_from_shared, 5 * 256 * KIB);
}

#[test]
fn other_working_sets_evict_by_capacity() {
    // Two threads of 768 KiB share CPU 0 (1 MiB private cache), taking turns: each returns to
    // find 1024 − 768 = 256 KiB of its own still there and reloads 512 KiB from the shared
    // cache. A third thread of 64 KiB beside one of 768 KiB would leave it whole.
    let big = |name: &str, prio| {
        fifo(
            name,
            prio,
            vec![0],
            vec![Phase::new(1, vec![wss(768 * KIB, work_ms(1)), sleep(2)])],
            4,
        )
    };
    let (jobs, stats) = run(workload(vec![big("a", 20), big("b", 10)]), 1, true);
    let a: Vec<u64> = jobs.iter().filter(|j| j.thread == 0).map(|j| j.exec).collect();
    // Per-byte rates are the single point's (256 KiB) at every size.
    assert_eq!(a[0], 1_000_000 + 4 * 768 * KIB);
    for &e in &a[1..] {
        assert_eq!(e, 1_000_000 + 2 * 512 * KIB);
    }
    let s = stats.unwrap();
    // a's three returns and b's three; b's resumes after a preempted it are not counted here.
    assert_eq!((s.cold_loads, s.eviction_reloads, s.migration_reloads), (2, 6, 0));

    let small = fifo(
        "s",
        10,
        vec![0],
        vec![Phase::new(1, vec![wss(64 * KIB, work_ms(1)), sleep(2)])],
        4,
    );
    let (jobs, _) = run(workload(vec![big("a", 20), small]), 1, true);
    let a: Vec<u64> = jobs.iter().filter(|j| j.thread == 0).map(|j| j.exec).collect();
    assert_eq!(&a[1..], &[1_000_000; 3]);
}

#[test]
fn passes_and_lines_cost_the_profiles_warm_line() {
    // 4096 lines at 1.5 ns: a pass is 6144 ns; 1000 lines 1500 ns. The model off: no reload.
    let t = fifo(
        "t",
        10,
        vec![0],
        vec![Phase::new(
            1,
            vec![
                wss(256 * KIB, WssAmount::Passes { passes: 2 }),
                wss(256 * KIB, WssAmount::Lines { lines: 1000 }),
            ],
        )],
        1,
    );
    let mut cfg = SimConfig::new(1);
    cfg.cache_model = Some(profile());
    let mut sim = Sim::new(workload(vec![t.clone()]), cfg).unwrap();
    sim.run_until(1_000_000_000, &mut Jobs::default());
    assert_eq!(sim.stats()[0].exec, 2 * 6144 + 1500 + 4 * 256 * KIB);
    // Without a profile the development machine's warm cost applies, and no reload.
    let mut sim = Sim::new(workload(vec![t]), SimConfig::new(1)).unwrap();
    sim.run_until(1_000_000_000, &mut Jobs::default());
    let dev = CacheProfile::measured();
    let expect = (8192.0 * dev.warm_line_ns(WssOrder::Sequential, 256 * KIB)).round() as u64
        + (1000.0 * dev.warm_line_ns(WssOrder::Sequential, 256 * KIB)).round() as u64;
    assert_eq!(sim.stats()[0].exec, expect);
    assert_eq!(sim.cache_stats(), None);
}

#[test]
fn working_sets_change_nothing_with_the_model_off() {
    // A task set with and without working sets gives the same jobs under G-EDF on 2 CPUs, with
    // drawn execution times: the phase draws its work as `run` does.
    let mut set = TaskSet::new(
        (0..6)
            .map(|i| {
                Task::implicit(
                    format!("t{i}"),
                    Duration(1_500_000 + i * 300_000),
                    Duration(5_000_000 + i * 1_700_000),
                )
            })
            .collect(),
    );
    let exec = ExecModel::Uniform { min_fraction: 0.5 };
    let plain = from_taskset(&set, &TaskPolicy::Deadline, exec);
    set.wss_bytes = Some(256 * KIB);
    let with = from_taskset(&set, &TaskPolicy::Deadline, exec);
    assert!(matches!(
        with.threads[0].phases[0].events[0],
        Event::WorkingSet(_)
    ));
    let (a, _) = run(plain, 2, false);
    let (b, stats) = run(with.clone(), 2, false);
    assert!(a.len() > 100);
    assert_eq!(a, b);
    assert_eq!(stats, None);
    // With the model on, the same set takes longer.
    let (c, stats) = run(with, 2, true);
    let total = |j: &[JobRecord]| j.iter().take(100).map(|r| r.exec).sum::<u64>();
    assert!(total(&c) > total(&a));
    assert!(stats.unwrap().reload_ns > 0);
}
