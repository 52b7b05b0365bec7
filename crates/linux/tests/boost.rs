//! `pacer_linux::boost` on the real kernel: an interactive thread (5 ms jobs every 50 ms) shares
//! one CPU with 4 CPU hogs, all SCHED_OTHER nice 0; a control thread on the other CPU boosts it
//! shortly before each release, as the daemon does for a client that announces its job. The
//! start delay of each job (absolute release → the thread running) is compared with and without
//! the boost, in one run. Needs root (`pacer_testkit`: ignored in builds without root or
//! `PACER_REQUIRE_ROOT=1`): lowering a nice value needs CAP_SYS_NICE.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::Arc;

use pacer_linux::boost::{
    observe_run_queue, Actuator, Actuators, BoostConfig, BoostError, Booster, EndReason, How, Undone,
};
use pacer_linux::sched::{self, gettid, ThreadSched};
use pacer_model::Policy;
use pacer_testkit::{require, Need};

mod support;
use support::{burn, now, sleep_until, MS};

/// The CPU the workload shares; the control thread runs on the other one.
const SHARED_CPU: usize = 1;
const CONTROL_CPU: usize = 0;
const PERIOD: u64 = 50 * MS;
const JOB_CPU: u64 = 5 * MS;
/// The phases take turns in blocks of this many jobs (so that the load of the rest of the
/// machine, which moves over seconds, falls on all of them alike); the first job of each block
/// carries the previous phase's state and is not counted.
const BLOCK: usize = 5;
/// Blocks per phase: 40 counted jobs each.
const BLOCKS: usize = 10;
/// Boost requested this long before each release, for this long: to 40 ms after the release,
/// so it covers the job even on a loaded machine and ends before the next request.
const LEAD: u64 = 5 * MS;
const DURATION: u64 = 45 * MS;

/// Puts the calling thread's affinity back when dropped (even if an assertion fails).
struct AffinityGuard(Vec<usize>);

impl AffinityGuard {
    fn pin(cpu: usize) -> AffinityGuard {
        let before = sched::get_affinity(0).expect("affinity");
        sched::set_affinity(0, &[cpu]).expect("pin");
        AffinityGuard(before)
    }
}

impl Drop for AffinityGuard {
    fn drop(&mut self) {
        let _ = sched::set_affinity(0, &self.0);
    }
}

fn percentile(v: &[u64], p: f64) -> u64 {
    let mut s = v.to_vec();
    s.sort_unstable();
    s[((s.len() - 1) as f64 * p).round() as usize]
}

/// What the control thread does before each job of a phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Plain,
    Boost(How),
}

#[test]
#[cfg_attr(
    not(pacer_privileged),
    ignore = "needs root: run as root or set PACER_REQUIRE_ROOT=1"
)]
fn boosted_jobs_start_sooner_beside_cpu_hogs() {
    require(Need::Root);
    require(Need::Cpus(&[CONTROL_CPU, SHARED_CPU]));
    let test = "boosted_jobs_start_sooner_beside_cpu_hogs";
    let _pinned = AffinityGuard::pin(CONTROL_CPU);
    let stop = Arc::new(AtomicBool::new(false));
    let hogs: Vec<_> = (0..4)
        .map(|_| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                sched::set_affinity(0, &[SHARED_CPU]).expect("pin hog");
                while !stop.load(Ordering::Relaxed) {
                    burn(MS);
                }
            })
        })
        .collect();

    let mut booster = Booster::new(BoostConfig::default());
    let support = booster.support();
    let mut phases = vec![("none", Phase::Plain), ("auto", Phase::Boost(How::Auto))];
    phases.push(("nice", Phase::Boost(How::Use(Actuators::only(Actuator::Nice)))));
    if support.slice {
        phases.push(("slice", Phase::Boost(How::Use(Actuators::only(Actuator::Slice)))));
    }
    let jobs = phases.len() * BLOCK * BLOCKS;
    let phase_of = |k: usize| (k / BLOCK) % phases.len();
    let start = now() + 100 * MS;
    let release = move |k: usize| start + k as u64 * PERIOD;

    let (tid_tx, tid_rx) = mpsc::channel();
    let (done_tx, done_rx) = mpsc::channel::<()>();
    let worker = std::thread::spawn(move || {
        sched::set_affinity(0, &[SHARED_CPU]).expect("pin worker");
        tid_tx.send(gettid()).unwrap();
        let mut delays = Vec::with_capacity(jobs);
        let mut responses = Vec::with_capacity(jobs);
        for k in 0..jobs {
            let r = release(k);
            sleep_until(r);
            let began = now();
            burn(JOB_CPU);
            delays.push(began.saturating_sub(r));
            responses.push(now().saturating_sub(r));
        }
        // Alive until the control loop is done with it.
        let _ = done_rx.recv();
        (delays, responses)
    });
    let tid = tid_rx.recv().unwrap();
    let original = ThreadSched::read(tid).unwrap();

    // The control loop: boost LEAD before each release of a boosted phase, tick every 1 ms.
    let mut ends: Vec<(usize, EndReason, Undone)> = Vec::new();
    let mut first_grant = Vec::new();
    let mut boost_cost = Vec::new();
    let mut mismatches = Vec::new();
    let mut tick = |booster: &mut Booster, k: usize, ends: &mut Vec<(usize, EndReason, Undone)>| {
        for e in booster.tick(now()) {
            // Every undo gives back exactly what the thread had (checked while it is alive).
            if e.undone == Undone::Restored {
                if let Ok(s) = ThreadSched::read(tid) {
                    if s != original {
                        mismatches.push((k, original.differences(&s)));
                    }
                }
            }
            ends.push((k, e.reason, e.undone));
        }
    };
    for k in 0..jobs {
        let phase = phases[phase_of(k)].1;
        let at = release(k) - LEAD;
        while now() < at {
            tick(&mut booster, k, &mut ends);
            sleep_until((now() + MS).min(at));
        }
        if let Phase::Boost(how) = phase {
            let t0 = now();
            let g = booster
                .boost(tid, DURATION, how)
                .unwrap_or_else(|e| panic!("boost before job {k} of {jobs}: {e}"));
            boost_cost.push(now() - t0);
            if k < BLOCK * phases.len() && k % BLOCK == 0 {
                first_grant.push(g);
            }
        }
    }
    let last = release(jobs);
    while now() < last {
        tick(&mut booster, jobs, &mut ends);
        sleep_until(now() + MS);
    }
    ends.extend(
        booster
            .release_all()
            .into_iter()
            .map(|e| (jobs, e.reason, e.undone)),
    );
    assert_eq!(
        ThreadSched::read(tid).unwrap(),
        original,
        "the worker ends as it began"
    );
    drop(done_tx);
    let (delays, responses) = worker.join().expect("worker");
    stop.store(true, Ordering::Relaxed);
    for h in hogs {
        h.join().unwrap();
    }

    for g in &first_grant {
        eprintln!(
            "{test}: grant {:?}: nice {} (from {}), W' {}, slice {:?}, run queue on CPU {}: {} others, ΣW {}",
            g.actuators.list(),
            g.nice,
            g.original_nice,
            g.target_weight,
            g.slice_ns,
            g.run_queue.cpu,
            g.run_queue.others.len(),
            g.run_queue.sum_weight()
        );
    }
    let blocked = ends.iter().filter(|e| e.1 == EndReason::Blocked).count();
    let expired = ends.iter().filter(|e| e.1 == EndReason::Expired).count();
    let restored = ends.iter().filter(|e| e.2 == Undone::Restored).count();
    eprintln!(
        "{test}: {} boosts ended: {blocked} on blocking, {expired} on expiry; {restored} restored; \
         boost() max {} us; \
         boost() took median {} us",
        ends.len(),
        percentile(&boost_cost, 1.0) / 1000,
        percentile(&boost_cost, 0.5) / 1000
    );
    let mut p90 = std::collections::BTreeMap::new();
    for (i, (name, _)) in phases.iter().enumerate() {
        let counted: Vec<usize> = (0..jobs)
            .filter(|&k| phase_of(k) == i && k % BLOCK != 0)
            .collect();
        let d: Vec<u64> = counted.iter().map(|&k| delays[k]).collect();
        let r: Vec<u64> = counted.iter().map(|&k| responses[k]).collect();
        let (d, r) = (&d[..], &r[..]);
        eprintln!(
            "{test}: {name:>5}: start delay median {:7.1} us p90 {:7.1} us max {:7.1} us; response median {:5.2} ms p90 {:5.2} ms",
            percentile(d, 0.5) as f64 / 1e3,
            percentile(d, 0.9) as f64 / 1e3,
            percentile(d, 1.0) as f64 / 1e3,
            percentile(r, 0.5) as f64 / 1e6,
            percentile(r, 0.9) as f64 / 1e6
        );
        p90.insert(*name, percentile(d, 0.9));
        if std::env::var_os("PACER_BOOST_DUMP").is_some() {
            let per_job: Vec<String> = counted
                .iter()
                .map(|&k| format!("{k}:{}/{}", delays[k] / 1000, responses[k] / 1_000_000))
                .collect();
            eprintln!(
                "{test}: {name} jobs (k:delay us/response ms): {}",
                per_job.join(" ")
            );
        }
    }
    assert!(mismatches.is_empty(), "not restored exactly: {mismatches:?}");
    assert!(
        ends.iter()
            .all(|e| e.2 == Undone::Restored || e.2 == Undone::Gone),
        "{ends:?}"
    );
    assert_eq!(
        restored + ends.iter().filter(|e| e.2 == Undone::Gone).count(),
        ends.len()
    );
    assert!(blocked > 0, "boosts end when the job ends and the thread sleeps");
    assert!(
        p90["auto"] < p90["none"],
        "boosted p90 start delay {} ns not below unboosted {} ns",
        p90["auto"],
        p90["none"]
    );
    assert_eq!(original.attr.sched_policy, sched::SCHED_OTHER);
}

#[test]
fn real_time_threads_are_refused() {
    // Runs without root: the refusal comes before any change. A thread of this process at
    // SCHED_IDLE stands for "not fair" when SCHED_FIFO needs privileges we may not have.
    let (tid_tx, tid_rx) = mpsc::channel();
    let (stop_tx, stop_rx) = mpsc::channel::<()>();
    let h = std::thread::spawn(move || {
        let fifo = sched::set_policy(0, Policy::Fifo { priority: 1 }, false).is_ok();
        if !fifo {
            sched::set_policy(0, Policy::Idle, false).expect("SCHED_IDLE needs no privilege");
        }
        tid_tx.send((gettid(), fifo)).unwrap();
        let _ = stop_rx.recv();
        // Back to SCHED_OTHER before exiting (running, so nothing is left behind).
        let _ = sched::set_policy(0, Policy::Other { nice: 0 }, false);
    });
    let (tid, fifo) = tid_rx.recv().unwrap();
    let before = sched::get_attr(tid).unwrap();
    let mut b = Booster::new(BoostConfig::default());
    let r = b.boost(tid, 10 * MS, How::Auto);
    let want = if fifo {
        sched::SCHED_FIFO
    } else {
        sched::SCHED_IDLE
    };
    assert!(
        matches!(r, Err(BoostError::NotFair { tid: t, policy }) if t == tid && policy == want),
        "{r:?}"
    );
    assert_eq!(sched::get_attr(tid).unwrap(), before, "nothing changed");
    let msg = r.unwrap_err().to_string();
    assert!(msg.contains("not SCHED_OTHER"), "{msg}");
    drop(stop_tx);
    h.join().unwrap();
}

#[test]
fn the_run_queue_is_observed() {
    // The calling thread is running, so it is on its CPU's queue; others may or may not be.
    let rq = observe_run_queue(gettid()).expect("own run queue");
    assert!(rq.n() >= 1);
    assert_eq!(rq.own, 1024);
    assert!(rq.cpu < 1024);
}
