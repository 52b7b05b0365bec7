//! Several controllers sharing one reservation pool (one supervisor for a whole SCHED_DEADLINE
//! root domain, the daemon's case): one allocation over everybody's requests, compression fair
//! across controllers, shares freed by a removed thread or a dropped controller, one TID once.

mod support;

use pacer_adapt::controller::{
    ControllerError, JobConfig, LegacyConfig, PoolError, ProactiveConfig, ThreadOptions,
};
use pacer_adapt::supervisor::AllocationStatus;
use pacer_adapt::{
    AppEvent, Compression, Controller, JobController, Kernel, LegacyController, Pool, ProactiveController,
    Tid,
};
use support::{FakeKernel, MS};

fn units(c: &mut dyn Controller, k: &mut FakeKernel, thread: Tid, n: u64) {
    let t = k.now;
    c.on_app_event(&AppEvent::WorkUnits { thread, t, units: n }, k);
}

/// One job of `work` ns of CPU time.
fn job(c: &mut dyn Controller, k: &mut FakeKernel, thread: Tid, work: u64) {
    let (t, cpu) = (k.now, k.cpu_time(thread).unwrap());
    let begin = AppEvent::JobBegin {
        thread,
        t,
        dl: None,
        cpu_time: cpu,
    };
    c.on_app_event(&begin, k);
    let end = AppEvent::JobEnd {
        thread,
        t,
        dl: None,
        cpu_time: cpu + work,
    };
    c.on_app_event(&end, k);
}

fn runtime(k: &FakeKernel, tid: Tid) -> u64 {
    k.deadline(tid).expect("reserved").runtime.0
}

fn bandwidth(k: &FakeKernel, tids: &[Tid]) -> f64 {
    tids.iter()
        .filter_map(|&t| k.deadline(t))
        .map(|r| r.bandwidth())
        .sum()
}

fn proactive(pool: &Pool) -> ProactiveController {
    ProactiveController::new(ProactiveConfig::default())
        .unwrap()
        .with_pool(pool)
        .unwrap()
}

/// A proactive and a job controller on a pool of 1 CPU (the kernel would admit 2).
fn two_on_one_pool() -> (FakeKernel, Pool, ProactiveController, JobController) {
    let mut k = FakeKernel::new(2, 2.0);
    k.periodic(1, 0, 0);
    k.periodic(2, 0, 0);
    let pool = Pool::new(Some(1.0), Compression::Proportional);
    let mut pc = proactive(&pool);
    pc.add_thread(1, 10 * MS, ThreadOptions::default()).unwrap();
    let mut jc = JobController::new(JobConfig::default())
        .unwrap()
        .with_pool(&pool)
        .unwrap();
    jc.add_thread(2, 10 * MS, ThreadOptions::default()).unwrap();
    // Proactive first contact: the maximum 0.94·T = 9.4 ms, alone in the pool, granted in full.
    units(&mut pc, &mut k, 1, 1);
    assert_eq!(runtime(&k, 1), 9_400_000);
    // A 5 ms job: Q = 1.15·5 = 5.75 ms; Σ = 0.94 + 0.575 > 1.
    job(&mut jc, &mut k, 2, 5 * MS);
    (k, pool, pc, jc)
}

#[test]
fn controllers_on_one_pool_are_compressed_together() {
    let (k, pool, pc, jc) = two_on_one_pool();
    assert_eq!(pool.threads(), vec![1, 2]);
    let (q1, q2) = (runtime(&k, 1), runtime(&k, 2));
    // The job controller's allocation also shrank the proactive thread, through the kernel.
    assert!(q1 < 9_400_000, "{q1}");
    assert!(bandwidth(&k, &[1, 2]) <= 1.0, "{q1} + {q2}");
    // Proportional: both keep the same fraction of their excess over the 1024 ns minimum.
    let kept = |q: u64, req: u64| (q - 1024) as f64 / (req - 1024) as f64;
    let (c1, c2) = (kept(q1, 9_400_000), kept(q2, 5_750_000));
    assert!((c1 - c2).abs() < 1e-3, "{c1} vs {c2}");
    assert!(c1 > 0.6, "{c1}");
    // Each controller sees the outcome for its own threads, and the pool's verdict.
    assert_eq!(pc.thread_status(1).unwrap().budget_ns, Some(q1));
    assert_eq!(pc.thread_status(1).unwrap().requested_ns, Some(9_400_000));
    assert_eq!(jc.thread_status(2).unwrap().budget_ns, Some(q2));
    let status = pool.allocation_status();
    assert!(
        matches!(status, Some(AllocationStatus::Compressed { .. })),
        "{status:?}"
    );
    assert_eq!(pc.allocation_status(), status);
    assert_eq!(jc.allocation_status(), status);
}

#[test]
fn a_removed_thread_frees_its_share_for_the_other_controller() {
    let (mut k, pool, mut pc, mut jc) = two_on_one_pool();
    assert!(runtime(&k, 1) < 9_400_000);
    jc.remove_thread(&mut k, 2).unwrap();
    assert!(k.deadline(2).is_none(), "policy restored");
    assert_eq!(pool.threads(), vec![1]);
    assert!(jc.status().is_empty());
    // The proactive controller's next reservation gets the whole request again.
    pc.tick(&mut k);
    assert_eq!(runtime(&k, 1), 9_400_000);
    assert_eq!(pc.thread_status(1).unwrap().budget_ns, Some(9_400_000));
    assert!(matches!(
        pool.allocation_status(),
        Some(AllocationStatus::Full { .. })
    ));
}

#[test]
fn a_dropped_controller_leaves_the_pool_and_reallocate_regrants() {
    let (mut k, pool, pc, mut jc) = two_on_one_pool();
    jc.release(&mut k);
    drop(jc);
    pool.reallocate(&mut k);
    assert_eq!(pool.threads(), vec![1]);
    assert_eq!(runtime(&k, 1), 9_400_000);
    assert_eq!(pc.thread_status(1).unwrap().budget_ns, Some(9_400_000));

    // Dropping without release also takes the threads out of the pool's accounting.
    let mut pc = pc;
    let mut other = proactive(&pool);
    other.add_thread(2, 10 * MS, ThreadOptions::default()).unwrap();
    assert_eq!(pool.threads(), vec![1, 2]);
    drop(other);
    assert_eq!(pool.threads(), vec![1]);
    pc.release(&mut k);
    assert!(pool.threads().is_empty());
    assert!(k.deadline(1).is_none());
}

#[test]
fn a_tid_is_in_a_pool_once() {
    let pool = Pool::new(None, Compression::Proportional);
    let mut pc = proactive(&pool);
    pc.add_thread(7, 10 * MS, ThreadOptions::default()).unwrap();
    let mut lc = LegacyController::new(LegacyConfig::default())
        .unwrap()
        .with_pool(&pool)
        .unwrap();
    assert_eq!(
        lc.add_thread(7, ThreadOptions::default()),
        Err(ControllerError::Pool(PoolError::Duplicate(7)))
    );
    assert!(lc.status().is_empty(), "a refused thread is not half-added");
    // Joining a pool with a thread it already holds moves nothing.
    let mut jc = JobController::new(JobConfig::default()).unwrap();
    jc.add_thread(7, 10 * MS, ThreadOptions::default()).unwrap();
    assert_eq!(
        jc.with_pool(&pool).err(),
        Some(ControllerError::Pool(PoolError::Duplicate(7)))
    );
    assert_eq!(pool.threads(), vec![7]);
}

#[test]
fn legacy_and_proactive_share_one_bound() {
    // A legacy thread at a known 10 ms period using 6 ms asks 1.15·6 = 6.9 ms after one sampling
    // period (1 s); the proactive thread holds 9.4 ms; Σ 1.63 > 1.
    let mut k = FakeKernel::new(2, 2.0);
    k.periodic(1, 0, 0);
    k.periodic(3, 10 * MS, 6 * MS);
    let pool = Pool::new(Some(1.0), Compression::Proportional);
    let mut pc = proactive(&pool);
    pc.add_thread(1, 10 * MS, ThreadOptions::default()).unwrap();
    // Threads added before joining move with their controller.
    let mut lc = LegacyController::new(LegacyConfig::default()).unwrap();
    lc.add_thread(
        3,
        ThreadOptions {
            known_period: Some(10 * MS),
            ..ThreadOptions::default()
        },
    )
    .unwrap();
    let mut lc = lc.with_pool(&pool).unwrap();
    assert_eq!(pool.threads(), vec![1, 3]);
    units(&mut pc, &mut k, 1, 1);
    support::run_until(&mut k, &mut lc, 1_100 * MS);
    assert_eq!(lc.thread_status(3).unwrap().requested_ns, Some(6_900_000));
    assert!(bandwidth(&k, &[1, 3]) <= 1.0);
    assert!(runtime(&k, 1) < 9_400_000);
    assert!(runtime(&k, 3) < 6_900_000);
    assert_eq!(pc.thread_status(1).unwrap().budget_ns, Some(runtime(&k, 1)));
    assert!(matches!(
        lc.allocation_status(),
        Some(AllocationStatus::Compressed { .. })
    ));
}
