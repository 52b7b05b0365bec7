//! Controllers for cooperating applications, driven by application events through a fake kernel:
//! the audio paper's proactive controller (adaptive-deadline-audio-android.txt §5.2, eqs. 3–5)
//! and the LFS++ §7.3 adaptive-reservation baseline.

mod support;

use pacer_adapt::controller::{
    audio_budget, JobConfig, MarginMode, Measure, PercentileMargin, ProactiveConfig, ThreadOptions,
};
use pacer_adapt::{AppEvent, Controller, DlState, JobController, ProactiveController};
use support::{FakeKernel, MS};

fn dl(deadline: u64, runtime: i64) -> Option<DlState> {
    Some(DlState { deadline, runtime })
}

/// One job: begin and end events at the given deadline states.
fn job(
    c: &mut dyn Controller,
    k: &mut FakeKernel,
    begin: Option<DlState>,
    end: Option<DlState>,
    cpu: (u64, u64),
) {
    let t = k.now;
    c.on_app_event(
        &AppEvent::JobBegin {
            thread: 1,
            t,
            dl: begin,
            cpu_time: cpu.0,
        },
        k,
    );
    c.on_app_event(
        &AppEvent::JobEnd {
            thread: 1,
            t,
            dl: end,
            cpu_time: cpu.1,
        },
        k,
    );
}

fn units(c: &mut dyn Controller, k: &mut FakeKernel, n: u64) {
    let t = k.now;
    c.on_app_event(
        &AppEvent::WorkUnits {
            thread: 1,
            t,
            units: n,
        },
        k,
    );
}

fn runtime(k: &FakeKernel) -> u64 {
    k.deadline(1).expect("reserved").runtime.0
}

#[test]
fn proactive_follows_eqs_3_4_5_with_work_units_and_overload_boost() {
    let mut k = FakeKernel::new(1, 0.95);
    k.periodic(1, 0, 0);
    let cfg = ProactiveConfig {
        margin_mult: 1.2,
        margin_offset_ns: 50_000,
        update_every: 3,
        overload_boost: 1.25,
        ..ProactiveConfig::default()
    };
    let mut c = ProactiveController::new(cfg).unwrap();
    c.add_thread(1, 20 * MS, ThreadOptions::default()).unwrap();
    assert_eq!(c.period(), None, "event-driven");

    // First contact, empty table → the configured maximum 0.94·T = 18.8 ms (eq. 5 would give
    // more; the cap holds). The period is the application's: deadline = period = 20 ms.
    units(&mut c, &mut k, 10);
    let r = k.deadline(1).unwrap();
    assert_eq!(
        (r.runtime.0, r.deadline.0, r.period.0),
        (18_800_000, 20 * MS, 20 * MS)
    );
    assert!(r.flags.reset_on_fork);

    // Three jobs within their deadline: C_m = q_start − q_end = 2 ms (eq. 3, no postponement).
    for i in 0..3u64 {
        assert_eq!(runtime(&k), 18_800_000, "no update before N = 3 jobs");
        let d = 100 * MS + i * 20 * MS;
        job(&mut c, &mut k, dl(d, 18_800_000), dl(d, 16_800_000), (0, 0));
    }
    // eq. 5: Q = 1.2 · 2 ms + 50 µs = 2.45 ms.
    assert_eq!(runtime(&k), 2_450_000);
    let st = c.thread_status(1).unwrap();
    assert_eq!(
        (st.jobs, st.estimate_ns, st.last_measure),
        (3, 2 * MS, Some(Measure::Normalised))
    );

    // workUnits 20: above the only key → proportional 4 ms → Q = 1.2·4 ms + 50 µs, immediately.
    units(&mut c, &mut k, 20);
    assert_eq!(runtime(&k), 4_850_000);

    // An overrunning job: its deadline was postponed once (d_end − d_start = T), so
    // C_m = 4.85 − 1.0 + 4.85·⌈20/20⌉ = 8.7 ms > Q. The EWMA of 20 units starts at 8.7 ms and the
    // budget is updated at once with the boost: ⌈1.25·(1.2·8.7 ms + 50 µs)⌉ = 13.1125 ms.
    job(
        &mut c,
        &mut k,
        dl(200 * MS, 4_850_000),
        dl(220 * MS, 1_000_000),
        (0, 0),
    );
    assert_eq!(c.thread_status(1).unwrap().last_runtime_ns, Some(8_700_000));
    assert_eq!(runtime(&k), 13_112_500);
    let st = c.thread_status(1).unwrap();
    assert!(st.boosted);
    assert_eq!(st.overruns, 1);

    // Three lighter jobs (5 ms, falling: α = 0.1): 8.7 → 8.33 → 7.997 → 7.6973 ms; the regular
    // update drops the boost: Q = 1.2·7.6973 ms + 50 µs = 9.28676 ms.
    for i in 0..3u64 {
        let d = 300 * MS + i * 20 * MS;
        job(&mut c, &mut k, dl(d, 13_112_500), dl(d, 8_112_500), (0, 0));
        if i < 2 {
            assert_eq!(runtime(&k), 13_112_500);
        }
    }
    assert_eq!(c.table(1).unwrap().predict(20), 7_697_300);
    assert_eq!(runtime(&k), 9_286_760);
    let st = c.thread_status(1).unwrap();
    assert!(!st.boosted);
    assert_eq!((st.jobs, st.overruns, st.table_entries), (7, 1, 2));

    // Back to 5 units: below the smallest key → that key's estimate (2 ms) → 2.45 ms.
    units(&mut c, &mut k, 5);
    assert_eq!(runtime(&k), 2_450_000);
}

/// One job of runtime `c` (ns) under the budget `q` in force, within its deadline: eq. 3 gives
/// C_m = q − (q − c) = c (a remaining runtime below 0 is an overrun).
fn job_of(c_ctl: &mut dyn Controller, k: &mut FakeKernel, q: u64, c: u64) {
    let d = k.now + 20 * MS;
    job(c_ctl, k, dl(d, q as i64), dl(d, q as i64 - c as i64), (0, 0));
}

#[test]
fn proactive_percentile_margin_sizes_q_from_each_work_units_spread() {
    let mut k = FakeKernel::new(1, 0.95);
    k.periodic(1, 0, 0);
    // N = 8, p = 0.75 (the third largest of 8), trusted from 4 runtimes; floor 10 % over the
    // median; eq. 5's m_m = 1.2, m_o = 50 µs for values with too few runtimes.
    let cfg = ProactiveConfig {
        margin_mult: 1.2,
        margin_offset_ns: 50_000,
        update_every: 4,
        margin: MarginMode::Percentile(PercentileMargin {
            p: 0.75,
            window: 8,
            min_samples: 4,
            floor: 0.1,
        }),
        ..ProactiveConfig::default()
    };
    let mut c = ProactiveController::new(cfg).unwrap();
    c.add_thread(1, 20 * MS, ThreadOptions::default()).unwrap();
    units(&mut c, &mut k, 10);
    assert_eq!(runtime(&k), 18_800_000, "empty table: the maximum, as in eq. 5");

    // Runtimes 2, 3, 4, 5 ms of 10 units. At the regular update (N = 4 jobs): m = 4 → j = 1,
    // P_75 = 4 ms; median (j = 2) 3 ms → floor 3.3 ms; Q = 4 ms. Eq. 5 on the EWMA (2 → 2.95 →
    // 3.9475 → 4.947375 ms) would give 1.2·4.947375 + 0.05 = 5.98685 ms.
    for ms in [2, 3, 4, 5] {
        job_of(&mut c, &mut k, 18_800_000, ms * MS);
    }
    assert_eq!(runtime(&k), 4 * MS);
    assert_eq!(c.percentiles(1).unwrap().samples(10), 4);

    // 4.5 ms overruns Q = 4 ms but lies within the measured spread (≤ 5 ms): counted, no boost,
    // the budget waits for the regular update.
    job_of(&mut c, &mut k, 4 * MS, 4_500_000);
    let st = c.thread_status(1).unwrap();
    assert_eq!((st.overruns, st.boosted), (1, false));
    assert_eq!(runtime(&k), 4 * MS);

    // 6 ms is beyond every recent runtime of 10 units: boost at once, to that runtime (not × a
    // factor). The percentile itself is then 5 ms (m = 6, j = 1).
    job_of(&mut c, &mut k, 4 * MS, 6 * MS);
    let st = c.thread_status(1).unwrap();
    assert_eq!((st.overruns, st.boosted), (2, true));
    assert_eq!(runtime(&k), 6 * MS);

    // Four 3 ms jobs; the regular update drops the boost. Window (last 8): 4, 5, 4.5, 6, 3, 3, 3,
    // 3 ms → P_75 = 4.5 ms (j = 2); median 3 ms → floor 3.3 ms; Q = 4.5 ms.
    for _ in 0..4 {
        job_of(&mut c, &mut k, 6 * MS, 3 * MS);
    }
    assert!(!c.thread_status(1).unwrap().boosted);
    assert_eq!(runtime(&k), 4_500_000);

    // A workUnits value with no history: eq. 5 on the table's lookup (above the largest key:
    // proportional), as in the fixed mode, until it has min_samples runtimes of its own.
    units(&mut c, &mut k, 20);
    assert_eq!(c.percentiles(1).unwrap().samples(20), 0);
    let c_e = c.table(1).unwrap().predict(20);
    let eq5 = audio_budget(c_e, 1.2, 50_000);
    assert!(eq5 > 8 * MS);
    assert_eq!(runtime(&k), eq5);
    // Runtimes that never vary: the percentile is the runtime itself, so the floor decides:
    // Q = ⌈1.1 · 8 ms⌉ = 8.8 ms.
    for _ in 0..4 {
        job_of(&mut c, &mut k, eq5, 8 * MS);
    }
    assert_eq!(runtime(&k), 8_800_000);
    assert_eq!(c.thread_status(1).unwrap().overruns, 2);

    // Back to a value with history: its own percentile at once, at the hint (eq. 5's update point).
    units(&mut c, &mut k, 10);
    assert_eq!(runtime(&k), 4_500_000);
}

#[test]
fn proactive_percentile_margin_is_validated() {
    let bad = |m: PercentileMargin| {
        ProactiveController::new(ProactiveConfig {
            margin: MarginMode::Percentile(m),
            ..ProactiveConfig::default()
        })
        .is_err()
    };
    let ok = PercentileMargin::default();
    assert!(!bad(ok));
    assert!(bad(PercentileMargin { p: 0.0, ..ok }));
    assert!(bad(PercentileMargin { window: 0, ..ok }));
    assert!(bad(PercentileMargin {
        min_samples: ok.window + 1,
        ..ok
    }));
    assert!(bad(PercentileMargin { floor: -0.1, ..ok }));
    assert!(bad(PercentileMargin {
        floor: f64::NAN,
        ..ok
    }));
    // The library default stays eq. 5 (the daemon's behaviour is unchanged).
    assert_eq!(ProactiveConfig::default().margin, MarginMode::Fixed);
}

#[test]
fn proactive_without_deadline_state_measures_cpu_time() {
    let mut k = FakeKernel::new(1, 0.95);
    k.periodic(1, 0, 0);
    let cfg = ProactiveConfig {
        margin_mult: 1.0,
        update_every: 1,
        ..ProactiveConfig::default()
    };
    let mut c = ProactiveController::new(cfg).unwrap();
    c.add_thread(1, 10 * MS, ThreadOptions::default()).unwrap();
    job(&mut c, &mut k, None, None, (5 * MS, 8 * MS));
    let st = c.thread_status(1).unwrap();
    assert_eq!(
        (st.last_runtime_ns, st.last_measure),
        (Some(3 * MS), Some(Measure::CpuTime))
    );
    // 3 ms ≤ the 9.4 ms in force: no overrun; N = 1 → Q = C_e = 3 ms.
    assert_eq!(st.overruns, 0);
    assert_eq!(runtime(&k), 3 * MS);
}

#[test]
fn proactive_tick_reserves_the_maximum_up_front_and_release_restores() {
    let mut k = FakeKernel::new(1, 0.95);
    k.periodic(1, 0, 0);
    let mut c = ProactiveController::new(ProactiveConfig {
        tick_ns: Some(10 * MS),
        ..ProactiveConfig::default()
    })
    .unwrap();
    c.add_thread(1, 10 * MS, ThreadOptions::default()).unwrap();
    support::run_until(&mut k, &mut c, 10 * MS);
    assert_eq!(runtime(&k), 9_400_000);
    c.release(&mut k);
    assert!(k.deadline(1).is_none());
}

#[test]
fn proactive_admission_refusal_is_not_fatal() {
    let mut k = FakeKernel::new(1, 0.95);
    k.periodic(1, 0, 0);
    k.deny_admission = true;
    let mut c = ProactiveController::new(ProactiveConfig::default()).unwrap();
    c.add_thread(1, 10 * MS, ThreadOptions::default()).unwrap();
    units(&mut c, &mut k, 3);
    assert!(k.deadline(1).is_none());
    assert_eq!(c.thread_status(1).unwrap().admission_refusals, 1);
    // Without a reservation, jobs are measured by CPU time.
    job(&mut c, &mut k, None, None, (0, 2 * MS));
    assert_eq!(c.thread_status(1).unwrap().last_measure, Some(Measure::CpuTime));
}

#[test]
fn job_controller_is_the_lfspp_adaptive_reservation_baseline() {
    // Q = (1 + x)·𝒫 over job times 1, 3, 2, 1.5 ms with N = 4, p = 0.75 (j = ⌊m/4⌋).
    let mut k = FakeKernel::new(1, 0.95);
    k.periodic(1, 0, 0);
    let cfg = JobConfig {
        history: 4,
        percentile: 0.75,
        spread: 0.15,
        ..JobConfig::default()
    };
    let mut c = JobController::new(cfg).unwrap();
    c.add_thread(1, 10 * MS, ThreadOptions::default()).unwrap();
    let mut cpu = 0;
    let mut seen = Vec::new();
    for w in [MS, 3 * MS, 2 * MS, 3 * MS / 2] {
        job(&mut c, &mut k, None, None, (cpu, cpu + w));
        cpu += w;
        seen.push(runtime(&k));
    }
    // max 1 → 1.15; the 3 ms job overran 1.15 ms: the ceiling 0.9·10 ms while the thread
    // catches up; the 2 ms job fits the prediction (max of 3 → 3.45) again; second max of 4
    // (2 ms) → 2.3 ms.
    assert_eq!(seen, vec![1_150_000, 9_000_000, 3_450_000, 2_300_000]);
    let st = c.thread_status(1).unwrap();
    // The 3 ms job overran the 1.15 ms budget in force.
    assert_eq!((st.jobs, st.overruns, st.predicted_ns), (4, 1, Some(2 * MS)));
    assert_eq!(k.deadline(1).unwrap().period.0, 10 * MS);
}

/// Catch-up: jobs that begin back to back (less than 0.9·T apart) show a thread behind its
/// period; its budget goes to the cap until a job begins a period after the previous one. Under
/// GRUB reclaiming jobs are measured by CPU time, not by eq. 3's runtime difference.
#[test]
fn proactive_catches_up_at_the_cap_and_measures_cpu_time_under_reclaiming() {
    let mut k = FakeKernel::new(1, 0.95);
    k.periodic(1, 0, 0);
    let cfg = ProactiveConfig {
        margin_mult: 1.1,
        update_every: 1,
        catch_up: true,
        reclaim: true,
        ..ProactiveConfig::default()
    };
    let mut c = ProactiveController::new(cfg).unwrap();
    c.add_thread(1, 10 * MS, ThreadOptions::default()).unwrap();
    units(&mut c, &mut k, 1);
    let cap = 9_400_000;
    assert_eq!(runtime(&k), cap, "empty table: the cap");
    // On time: jobs begin one period apart. The runtime difference says 0.5 ms (reclaiming
    // depletes slowly); the CPU clock says 2 ms, and that is what is measured.
    for i in 0..3u64 {
        k.now = i * 10 * MS;
        job(
            &mut c,
            &mut k,
            dl(0, 9_000_000),
            dl(0, 8_500_000),
            (i * 10 * MS, i * 10 * MS + 2 * MS),
        );
    }
    assert_eq!(c.thread_status(1).unwrap().last_measure, Some(Measure::CpuTime));
    let normal = runtime(&k);
    assert_eq!(normal, 2_200_000, "1.1 × 2 ms");
    // A stall: the next job begins 25 ms late, and the following ones back to back, 2 ms apart.
    k.now = 45 * MS;
    job(&mut c, &mut k, None, None, (0, 2 * MS));
    assert_eq!(runtime(&k), normal, "a late job alone is not a backlog");
    k.now = 47 * MS;
    job(&mut c, &mut k, None, None, (0, 2 * MS));
    assert_eq!(runtime(&k), cap, "back to back: the cap until it has caught up");
    k.now = 49 * MS;
    job(&mut c, &mut k, None, None, (0, 2 * MS));
    assert_eq!(runtime(&k), cap);
    // Caught up: the next job begins a whole period later.
    k.now = 59 * MS;
    job(&mut c, &mut k, None, None, (0, 2 * MS));
    assert_eq!(runtime(&k), normal);
    // Off by default: the library keeps the paper's controller.
    assert!(!ProactiveConfig::default().catch_up);
}
