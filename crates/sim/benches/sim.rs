//! Simulator throughput (issue: simulated jobs and events per wall-second).
//! (a) the SimSo comparison set: 10 tasks, 2 CPUs, G-EDF, 10 s of model time;
//! (b) the RM-vs-EDF study's scale: 48 CPUs, 192 tasks, U = 0.8·48, G-EDF and P-EDF, 60 s;
//! (c) case (a) on two HiKey960 big CPUs under schedutil (PELT and WALT): the cost of DVFS.
//! Criterion reports jobs/s (the throughput element); the event count per run is printed so
//! events/s follows from the same timing. Results: docs/BENCHMARKS.md.

use std::hint::black_box;
use std::time::Duration as Wall;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use pacer_analysis::gen::{self, rm_vs_edf::RmVsEdfVariant, GenSpec};
use pacer_analysis::partition::{self, Heuristic};
use pacer_analysis::timings;
use pacer_model::Platform;
use pacer_model::{Duration, Task, TaskSet};
use pacer_sim::{Governor, JobRecord, Observer, SchedutilConfig, Sim, SimConfig};
use pacer_workload::{from_taskset, ExecModel, TaskPolicy, Workload};

struct Count(u64);
impl Observer for Count {
    fn job(&mut self, _: &JobRecord) {
        self.0 += 1;
    }
}

fn run(w: &Workload, cpus: usize, horizon: u64) -> (u64, u64) {
    run_cfg(w, SimConfig::new(cpus), horizon)
}

fn run_cfg(w: &Workload, cfg: SimConfig, horizon: u64) -> (u64, u64) {
    let mut sim = Sim::new(w.clone(), cfg).expect("valid workload");
    let mut c = Count(0);
    sim.run_until(horizon, &mut c);
    (c.0, sim.events_processed())
}

fn simso_set() -> TaskSet {
    let tc = [
        (10, 2),
        (20, 3),
        (25, 5),
        (40, 6),
        (50, 10),
        (50, 5),
        (100, 15),
        (100, 20),
        (200, 20),
        (250, 40),
    ];
    TaskSet::new(
        tc.iter()
            .enumerate()
            .map(|(i, &(t, c))| Task::implicit(format!("t{i}"), Duration::from_ms(c), Duration::from_ms(t)))
            .collect(),
    )
}

fn bench(c: &mut Criterion, name: &str, w: &Workload, cpus: usize, horizon: u64, samples: usize) {
    let (jobs, events) = run(w, cpus, horizon);
    eprintln!("{name}: {jobs} jobs and {events} events per run");
    let mut g = c.benchmark_group("sim");
    g.sample_size(samples)
        .warm_up_time(Wall::from_secs(1))
        .measurement_time(Wall::from_secs(8));
    g.throughput(Throughput::Elements(jobs));
    g.bench_function(BenchmarkId::from_parameter(name), |b| {
        b.iter(|| black_box(run(w, cpus, horizon)))
    });
    g.finish();
}

fn simso(c: &mut Criterion) {
    let w = from_taskset(&simso_set(), &TaskPolicy::Deadline, ExecModel::Wcet);
    bench(c, "simso-10tasks-2cpu-gedf-10s", &w, 2, 10_000_000_000, 50);
}

fn paper_scale(c: &mut Criterion) {
    let set =
        gen::generate(&GenSpec::rm_vs_edf(1, 48, 4, 0.8, RmVsEdfVariant::ExactTotal)).expect("valid recipe");
    let global = from_taskset(&set, &TaskPolicy::Deadline, ExecModel::Wcet);
    bench(
        c,
        "paper-192tasks-48cpu-gedf-60s",
        &global,
        48,
        60_000_000_000,
        10,
    );
    let a = partition::pack(
        &timings(&set.tasks),
        &[1; 48],
        Heuristic::WFD,
        partition::load_fits,
    )
    .expect("fits");
    let mut part = global.clone();
    for (t, b) in part.threads.iter_mut().zip(&a.bin_of) {
        t.affinity = Some(vec![*b]);
    }
    bench(c, "paper-192tasks-48cpu-pedf-60s", &part, 48, 60_000_000_000, 10);
}

fn simso_dvfs(c: &mut Criterion) {
    let w = from_taskset(&simso_set(), &TaskPolicy::Deadline, ExecModel::Wcet);
    let horizon = 10_000_000_000;
    for (name, g) in [
        ("simso-hikey2-schedutil-pelt-10s", SchedutilConfig::mainline()),
        ("simso-hikey2-schedutil-walt-10s", SchedutilConfig::android_walt()),
    ] {
        let cfg = SimConfig::with_platform(Platform::hikey960_big(2), Governor::Schedutil(g));
        let (jobs, events) = run_cfg(&w, cfg.clone(), horizon);
        eprintln!("{name}: {jobs} jobs and {events} events per run");
        let mut grp = c.benchmark_group("sim");
        grp.sample_size(50)
            .warm_up_time(Wall::from_secs(1))
            .measurement_time(Wall::from_secs(8));
        grp.throughput(Throughput::Elements(jobs));
        grp.bench_function(BenchmarkId::from_parameter(name), |b| {
            b.iter(|| black_box(run_cfg(&w, cfg.clone(), horizon)))
        });
        grp.finish();
    }
}

criterion_group!(benches, simso, simso_dvfs, paper_scale);
criterion_main!(benches);
