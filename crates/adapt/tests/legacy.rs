//! LFS++ legacy controller (lfspp-legacy-multimedia.txt §4.2, §5.3, §6.3) driven through a fake
//! kernel: budgets from Q_req = (1 + x)·P·𝒫/S, the supervisor, admission failures, power
//! management's mode-change protocol.

mod support;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use pacer_adapt::controller::{LegacyConfig, Phase, ThreadOptions};
use pacer_adapt::period::PeriodEstimate;
use pacer_adapt::power::{ModeChange, PowerConfig};
use pacer_adapt::supervisor::{AllocationStatus, Compression};
use pacer_adapt::{Controller, LegacyController};
use pacer_model::{Policy, ReservationFlags};
use support::{FakeKernel, FakeThread, Op, MS, S};

fn cfg() -> LegacyConfig {
    LegacyConfig {
        tick_ns: 100 * MS,
        sampling_ns: S,
        spread: 0.15,
        ..LegacyConfig::default()
    }
}

fn known(p: u64) -> ThreadOptions {
    ThreadOptions {
        known_period: Some(p),
        ..ThreadOptions::default()
    }
}

fn periodic_estimate(period_ns: u64) -> PeriodEstimate {
    PeriodEstimate::Periodic {
        period_ns,
        freq_hz: 1e9 / period_ns as f64,
        confidence: 0.9,
        candidates: Vec::new(),
    }
}

#[test]
fn known_period_gives_the_lfspp_budget_with_reset_on_fork() {
    let mut k = FakeKernel::new(1, 0.95);
    k.periodic(1, 10 * MS, 2 * MS);
    let mut c = LegacyController::new(cfg()).unwrap();
    c.add_thread(1, known(10 * MS)).unwrap();
    assert_eq!(c.period(), Some(100 * MS));
    support::run_until(&mut k, &mut c, 1_000 * MS);
    assert!(k.deadline(1).is_none(), "no reservation before the first sample");
    support::run_until(&mut k, &mut c, 1_100 * MS);
    // S = 1 s = 100 periods; W_k − W_{k−1} = 100 jobs · 2 ms = 200 ms;
    // Q = 1.15 · 10 ms · 200 ms / 1 s = 2.3 ms.
    let r = k.deadline(1).expect("reserved");
    assert_eq!(
        (r.runtime.0, r.deadline.0, r.period.0),
        (2_300_000, 10 * MS, 10 * MS)
    );
    assert_eq!(
        r.flags,
        ReservationFlags {
            reset_on_fork: true,
            reclaim: false,
            overrun: false
        }
    );
    let st = c.thread_status(1).unwrap();
    assert_eq!(st.phase, Phase::Controlled);
    assert_eq!(st.period_ns, Some(10 * MS));
    assert_eq!(st.sampling_ns, Some(S));
    assert_eq!(st.budget_ns, Some(2_300_000));
    assert!((st.used_bandwidth.unwrap() - 0.2).abs() < 1e-9);
    assert!((st.reserved_bandwidth.unwrap() - 0.23).abs() < 1e-9);
    assert_eq!(st.overruns, None);
}

#[test]
fn reclaim_flag_is_configurable() {
    let mut k = FakeKernel::new(1, 0.95);
    k.periodic(1, 10 * MS, 2 * MS);
    let mut c = LegacyController::new(LegacyConfig {
        reclaim: true,
        ..cfg()
    })
    .unwrap();
    c.add_thread(1, known(10 * MS)).unwrap();
    support::run_until(&mut k, &mut c, 1_100 * MS);
    assert!(k.deadline(1).unwrap().flags.reclaim);
}

#[test]
fn percentile_predictor_drives_the_budget() {
    // Per-job work changes every sampling interval: 1, 3, 2, 1.5 ms → samples 100, 300, 200,
    // 150 ms per S. With N = 4, p = 0.75: j = ⌊m/4⌋ → max for m < 4, second max at m = 4.
    let mut k = FakeKernel::new(1, 0.95);
    let levels = [MS, 3 * MS, 2 * MS, 3 * MS / 2];
    k.threads.insert(
        1,
        FakeThread::periodic(
            10 * MS,
            Box::new(move |t| levels[((t.saturating_sub(101 * MS)) / S).min(3) as usize]),
        ),
    );
    let mut c = LegacyController::new(LegacyConfig {
        history: 4,
        percentile: 0.75,
        ..cfg()
    })
    .unwrap();
    c.add_thread(1, known(10 * MS)).unwrap();
    support::run_until(&mut k, &mut c, 4_100 * MS);
    let b: Vec<u64> = k.budgets(1).into_iter().map(|(_, q)| q).collect();
    // 1.15·10 ms·{100, 300 (max), 300 (max of 3), 200 (2nd max of 4)}/1000.
    assert_eq!(b, vec![1_150_000, 3_450_000, 2_300_000]);
    assert_eq!(k.budgets(1)[2].0, 4_100 * MS);
}

#[test]
fn injected_detector_sees_the_wakeup_window_and_sets_the_period() {
    let mut k = FakeKernel::new(1, 0.95);
    k.periodic(1, 20 * MS, 4 * MS);
    let seen: Arc<Mutex<Vec<(usize, u64, u64)>>> = Arc::default();
    let answer = Arc::new(AtomicU64::new(20 * MS));
    let (s2, a2) = (seen.clone(), answer.clone());
    let mut c = LegacyController::new(LegacyConfig {
        recheck_ns: 2 * S,
        ..cfg()
    })
    .unwrap()
    .with_detector(Box::new(move |ts: &[u64]| {
        s2.lock().unwrap().push((ts.len(), ts[0], *ts.last().unwrap()));
        match a2.load(Ordering::SeqCst) {
            0 => PeriodEstimate::NotPeriodic {
                reason: "noise".into(),
            },
            p => periodic_estimate(p),
        }
    }));
    c.add_thread(1, ThreadOptions::default()).unwrap();
    support::run_until(&mut k, &mut c, 100 * MS);
    assert_eq!(k.log[0], (100 * MS, Op::Trace { tid: 1, on: true }));
    assert_eq!(c.thread_status(1).unwrap().phase, Phase::Detecting);
    support::run_until(&mut k, &mut c, 1_000 * MS);
    assert!(seen.lock().unwrap().is_empty(), "window of 1 s not yet full");
    support::run_until(&mut k, &mut c, 1_100 * MS);
    // Tracing starts at the 100 ms tick, after that instant's activation: the 1 s window
    // [100 ms, 1100 ms] holds the 50 activations 120 ms … 1100 ms.
    assert_eq!(seen.lock().unwrap().as_slice(), &[(50, 120 * MS, 1_100 * MS)]);
    let st = c.thread_status(1).unwrap();
    assert_eq!(
        (st.phase, st.period_ns, st.confidence),
        (Phase::Controlled, Some(20 * MS), Some(0.9))
    );
    support::run_until(&mut k, &mut c, 2_100 * MS);
    // 50 jobs · 4 ms = 200 ms per S → 1.15 · 20 ms · 0.2 = 4.6 ms.
    assert_eq!(k.deadline(1).unwrap().runtime.0, 4_600_000);

    // Re-check at 3.1 s: a noisy window keeps the period.
    answer.store(0, Ordering::SeqCst);
    support::run_until(&mut k, &mut c, 3_100 * MS);
    let st = c.thread_status(1).unwrap();
    assert_eq!(st.period_ns, Some(20 * MS));
    assert_eq!(st.detection_note.as_deref(), Some("noise"));
    // A jitter within 5 % is not a change; a real change restarts the loop with the new period.
    answer.store(20_500_000, Ordering::SeqCst);
    support::run_until(&mut k, &mut c, 5_100 * MS);
    assert_eq!(c.thread_status(1).unwrap().period_ns, Some(20 * MS));
    answer.store(40 * MS, Ordering::SeqCst);
    support::run_until(&mut k, &mut c, 7_100 * MS);
    let st = c.thread_status(1).unwrap();
    assert_eq!(st.period_ns, Some(40 * MS));
    assert_eq!(st.samples, 5, "samples at 2.1 … 6.1 s; a fresh S starts at 7.1 s");
    // Until the first sample against 40 ms, the bandwidth is kept: 4.6 ms/20 ms → 9.2 ms/40 ms.
    let r = k.deadline(1).unwrap();
    assert_eq!((r.runtime.0, r.period.0), (9_200_000, 40 * MS));
    support::run_until(&mut k, &mut c, 8_100 * MS);
    // Still 4 ms per 20 ms = 200 ms per S, now requested against P = 40 ms: 9.2 ms every 40 ms.
    let r = k.deadline(1).unwrap();
    assert_eq!((r.runtime.0, r.period.0), (9_200_000, 40 * MS));
    assert_eq!(c.thread_status(1).unwrap().samples, 6);
}

#[test]
fn supervisor_compresses_an_overload() {
    // Two threads using 0.6 CPU each request 1.15·6 ms = 6.9 ms every 10 ms: 1.38 > bound 1.0.
    let mut k = FakeKernel::new(1, 1.0);
    k.periodic(1, 10 * MS, 6 * MS);
    k.periodic(2, 10 * MS, 6 * MS);
    let mut c = LegacyController::new(cfg()).unwrap();
    c.add_thread(1, known(10 * MS)).unwrap();
    c.add_thread(2, known(10 * MS)).unwrap();
    support::run_until(&mut k, &mut c, 1_100 * MS);
    let (a, b) = (k.deadline(1).unwrap(), k.deadline(2).unwrap());
    assert_eq!(a.runtime, b.runtime);
    assert!(a.bandwidth() + b.bandwidth() <= 1.0);
    assert!(a.runtime.0 > 4_999_000, "{:?}", a.runtime);
    assert!(matches!(
        c.allocation_status(),
        Some(AllocationStatus::Compressed { .. })
    ));
    assert_eq!(c.thread_status(1).unwrap().requested_ns, Some(6_900_000));

    // Weighted: the heavier thread keeps more.
    let mut k = FakeKernel::new(1, 1.0);
    k.periodic(1, 10 * MS, 6 * MS);
    k.periodic(2, 10 * MS, 6 * MS);
    let mut c = LegacyController::new(LegacyConfig {
        compression: Compression::Weighted,
        ..cfg()
    })
    .unwrap();
    c.add_thread(1, known(10 * MS)).unwrap();
    c.add_thread(
        2,
        ThreadOptions {
            weight: 3.0,
            ..known(10 * MS)
        },
    )
    .unwrap();
    support::run_until(&mut k, &mut c, 1_100 * MS);
    let (a, b) = (k.deadline(1).unwrap(), k.deadline(2).unwrap());
    assert!(b.runtime > a.runtime);
    assert!(a.bandwidth() + b.bandwidth() <= 1.0);
}

#[test]
fn admission_refusal_is_recorded_not_fatal() {
    let mut k = FakeKernel::new(1, 0.95);
    k.periodic(1, 10 * MS, 2 * MS);
    k.deny_admission = true;
    let mut c = LegacyController::new(cfg()).unwrap();
    c.add_thread(1, known(10 * MS)).unwrap();
    support::run_until(&mut k, &mut c, 1_100 * MS);
    assert!(k.deadline(1).is_none());
    let st = c.thread_status(1).unwrap();
    assert_eq!(st.admission_refusals, 1);
    assert!(st.last_error.unwrap().contains("admission"));
    // The system frees up: the next sample's grant goes through.
    k.deny_admission = false;
    support::run_until(&mut k, &mut c, 2_100 * MS);
    assert_eq!(k.deadline(1).unwrap().runtime.0, 2_300_000);
    // Full again while the load grows: the previous reservation is kept.
    k.deny_admission = true;
    k.threads.get_mut(&1).unwrap().work = Box::new(|_| 3 * MS);
    support::run_until(&mut k, &mut c, 3_100 * MS);
    assert_eq!(k.deadline(1).unwrap().runtime.0, 2_300_000);
    let st = c.thread_status(1).unwrap();
    assert_eq!(
        (st.budget_ns, st.requested_ns, st.admission_refusals),
        (Some(2_300_000), Some(3_450_000), 2)
    );
}

#[test]
fn vanished_thread_is_marked_gone_and_release_restores_policies() {
    let mut k = FakeKernel::new(1, 0.95);
    k.periodic(1, 10 * MS, 2 * MS);
    k.periodic(2, 10 * MS, MS);
    k.threads.get_mut(&2).unwrap().policy = Policy::Other { nice: -5 };
    let mut c = LegacyController::new(cfg()).unwrap();
    c.add_thread(1, known(10 * MS)).unwrap();
    c.add_thread(2, known(10 * MS)).unwrap();
    support::run_until(&mut k, &mut c, 1_100 * MS);
    assert!(k.deadline(2).is_some());
    k.threads.remove(&1);
    support::run_until(&mut k, &mut c, 2_100 * MS);
    assert_eq!(c.thread_status(1).unwrap().phase, Phase::Gone);
    let out = c.release(&mut k);
    assert!(out.iter().all(|(_, r)| r.is_ok()), "{out:?}");
    assert_eq!(k.threads[&2].policy, Policy::Other { nice: -5 });
}

#[test]
fn power_down_switch_follows_the_mode_change_protocol() {
    // lfspp §6.3 / §7.5: a periodic task plus a CPU hog keep the load in the band at 2 GHz; the
    // hog stops, the load falls below 20 %, and the manager steps down to 1 GHz.
    let mut k = FakeKernel::new(1, 0.95).with_freq(2_000_000, vec![1_000_000, 2_000_000]);
    k.periodic(1, 10 * MS, MS);
    k.threads.insert(99, FakeThread::hog(0.5));
    let mut c = LegacyController::new(cfg())
        .unwrap()
        .with_power_manager(PowerConfig::default(), 0)
        .unwrap();
    c.add_thread(1, known(10 * MS)).unwrap();
    support::run_until(&mut k, &mut c, 2_500 * MS);
    assert!(k.frequency_switches().is_empty());
    assert_eq!(k.deadline(1).unwrap().runtime.0, 1_150_000);
    k.threads.get_mut(&99).unwrap().hog = 0.0;

    // 2.6 s: load 0.1 → Down(1 GHz) permitted (projection 2 · 0.115 = 0.23 ≤ 0.95): budgets
    // are raised to ⌈1.15 ms · 2⌉ = 2.3 ms first, the frequency is untouched.
    support::run_until(&mut k, &mut c, 2_600 * MS);
    assert_eq!(k.budgets(1).last(), Some(&(2_600 * MS, 2_300_000)));
    assert!(k.frequency_switches().is_empty());
    assert!(matches!(
        c.power_status().unwrap().state,
        ModeChange::Switching { switch_at, .. } if switch_at == 2_610 * MS
    ));
    // 2.7 s: the longest period (10 ms) has passed; the switch happens, after the raise.
    support::run_until(&mut k, &mut c, 2_700 * MS);
    assert_eq!(k.frequency_switches(), vec![(2_700 * MS, 1_000_000)]);
    let raise = k.log.iter().position(|(_, op)| matches!(op, Op::SetPolicy { policy: Policy::Deadline(r), .. } if r.runtime.0 == 2_300_000)).unwrap();
    let switch = k
        .log
        .iter()
        .position(|(_, op)| matches!(op, Op::SetFrequency { .. }))
        .unwrap();
    assert!(raise < switch);
    // History reset to one sample worth the projected budget: the request is 2.3 ms.
    let st = c.thread_status(1).unwrap();
    assert_eq!(st.requested_ns, Some(2_300_000));
    assert_eq!(c.power_status().unwrap().state, ModeChange::Idle);
    // 3.1 s: the interval mixes 60 fast jobs (60 ms) and 40 slow ones (80 ms): 140 ms < the
    // reset sample (200 ms), so the budget stays at the projection instead of dipping.
    support::run_until(&mut k, &mut c, 3_100 * MS);
    assert_eq!(k.deadline(1).unwrap().runtime.0, 2_300_000);
    // 4.1 s: a full slow interval, 100 jobs · 2 ms = 200 ms → still 2.3 ms.
    support::run_until(&mut k, &mut c, 4_100 * MS);
    assert_eq!(k.deadline(1).unwrap().runtime.0, 2_300_000);
}

#[test]
fn power_down_switch_refused_when_the_projection_breaks_the_bound() {
    // Load 0.15 < 0.2 wants 2 GHz → 0.5 GHz; Q = 1.725 ms projects to 6.9 ms: Σ = 0.69 > 0.5.
    let mut k = FakeKernel::new(1, 0.95).with_freq(2_000_000, vec![500_000, 2_000_000]);
    k.periodic(1, 10 * MS, 3 * MS / 2);
    k.threads.insert(99, FakeThread::hog(0.5));
    let mut c = LegacyController::new(LegacyConfig {
        bound: Some(0.5),
        ..cfg()
    })
    .unwrap()
    .with_power_manager(PowerConfig::default(), 0)
    .unwrap();
    c.add_thread(1, known(10 * MS)).unwrap();
    support::run_until(&mut k, &mut c, 1_500 * MS);
    assert_eq!(k.deadline(1).unwrap().runtime.0, 1_725_000);
    k.threads.get_mut(&99).unwrap().hog = 0.0;
    support::run_until(&mut k, &mut c, 3_000 * MS);
    assert!(k.frequency_switches().is_empty());
    assert_eq!(k.deadline(1).unwrap().runtime.0, 1_725_000);
    let ps = c.power_status().unwrap();
    assert!(ps.stats.refused >= 1);
    let r = ps.stats.last_refusal.unwrap();
    assert_eq!(r.to_khz, 500_000);
    assert!((r.projected - 0.69).abs() < 1e-9);
}

#[test]
fn power_up_switch_is_immediate_and_seeds_histories_with_the_projection() {
    let mut k = FakeKernel::new(1, 0.95).with_freq(1_000_000, vec![1_000_000, 2_000_000]);
    k.periodic(1, 10 * MS, MS); // 2 ms per job at 1 GHz
    let mut c = LegacyController::new(cfg())
        .unwrap()
        .with_power_manager(PowerConfig::default(), 0)
        .unwrap();
    c.add_thread(1, known(10 * MS)).unwrap();
    k.threads.insert(99, FakeThread::hog(0.4));
    support::run_until(&mut k, &mut c, 2_500 * MS);
    assert_eq!(k.deadline(1).unwrap().runtime.0, 2_300_000);
    assert!(k.frequency_switches().is_empty());
    k.threads.get_mut(&99).unwrap().hog = 0.7; // load 0.9 > 0.8
    support::run_until(&mut k, &mut c, 2_600 * MS);
    assert_eq!(k.frequency_switches(), vec![(2_600 * MS, 2_000_000)]);
    // Projected ⌈2.3 ms · 1/2⌉ = 1.15 ms, requested and applied in the same tick.
    assert_eq!(c.thread_status(1).unwrap().requested_ns, Some(1_150_000));
    assert_eq!(k.budgets(1).last(), Some(&(2_600 * MS, 1_150_000)));
}

#[test]
fn without_cpufreq_power_management_reports_and_stays_out_of_the_way() {
    let mut k = FakeKernel::new(1, 0.95);
    k.periodic(1, 10 * MS, 2 * MS);
    let mut c = LegacyController::new(cfg())
        .unwrap()
        .with_power_manager(PowerConfig::default(), 0)
        .unwrap();
    c.add_thread(1, known(10 * MS)).unwrap();
    support::run_until(&mut k, &mut c, 1_100 * MS);
    assert_eq!(k.deadline(1).unwrap().runtime.0, 2_300_000);
    assert!(c
        .power_status()
        .unwrap()
        .last_error
        .unwrap()
        .contains("no cpufreq"));
}

/// End to end with the real period analyser (lfspp §5.1–5.2): a 20 ms task with an extra I/O
/// wake-up 3 ms into each period must be detected and reserved with P ≈ 20 ms.
#[test]
fn real_period_analyser_end_to_end() {
    let mut k = FakeKernel::new(1, 0.95);
    let mut t = FakeThread::periodic(20 * MS, Box::new(|_| 4 * MS));
    t.extra_wakeups = vec![3 * MS];
    k.threads.insert(1, t);
    let mut c = LegacyController::new(cfg()).unwrap();
    c.add_thread(1, ThreadOptions::default()).unwrap();
    support::run_until(&mut k, &mut c, 3_200 * MS);
    let st = c.thread_status(1).unwrap();
    let p = st
        .period_ns
        .unwrap_or_else(|| panic!("no period detected: {:?}", st.detection_note));
    assert!((p as f64 - 20e6).abs() / 20e6 < 0.02, "detected {p} ns");
    let r = k.deadline(1).expect("reserved");
    assert_eq!(r.period.0, p);
    // 4 ms per 20 ms with x = 0.15: Q ≈ 0.23 · P.
    assert!((r.bandwidth() - 0.23).abs() < 0.01, "{}", r.bandwidth());
}
