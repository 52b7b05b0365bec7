//! Real-kernel tests of the executor (`pacer_linux::run`, `pacer run`): rt-app workloads run on
//! this machine's kernel with real-time policies, so they need root and SCHED_DEADLINE
//! (`pacer_testkit`: ignored in builds without root or `PACER_REQUIRE_ROOT=1`, failing when a
//! need is missing otherwise). When they run they print what they measured.
//!
//! Tolerances are chosen for a 2-CPU VM that may be compiling other things at the same time:
//! the real-time threads preempt builds, so counts and spacings are exact by construction (the
//! executor records timer expiries, not wake-ups) while latencies and CPU times get margins of
//! a few hundred µs or tens of per cent, which still catch a wrong calibration, a missing sleep
//! or a wrong job boundary.

use std::sync::Mutex;

use pacer_linux::run::{self, Collect, RunConfig, RunReport, StopReason};
use pacer_linux::sched::{self, SCHED_DEADLINE};
use pacer_model::{Duration, Policy};
use pacer_sim::{JobRecord, Observer, Sim, SimConfig};
use pacer_testkit::{require, Need};
use pacer_workload::{parse_rtapp, Workload};

/// Admission control is global and the runs are timing-sensitive: one test at a time.
static KERNEL: Mutex<()> = Mutex::new(());

fn serialize() -> std::sync::MutexGuard<'static, ()> {
    KERNEL.lock().unwrap_or_else(|e| e.into_inner())
}

const MS: u64 = 1_000_000;

/// What every test here needs: real-time policies and SCHED_DEADLINE.
fn require_rt() {
    require(Need::Root);
    require(Need::SchedDeadline);
}

fn workload(json: &str) -> Workload {
    parse_rtapp(json, "test.json").expect("test workload parses")
}

fn config(duration_ms: Option<u64>) -> RunConfig {
    RunConfig {
        duration: duration_ms.map(Duration::from_ms),
        seed: 1,
        ..RunConfig::default()
    }
}

fn execute(w: &Workload, cfg: &RunConfig) -> (RunReport, Vec<JobRecord>) {
    let mut sink = Collect::default();
    let report = run::run(w, cfg, &mut sink).expect("the run succeeds");
    (report, sink.jobs)
}

fn of(jobs: &[JobRecord], t: u32) -> Vec<JobRecord> {
    jobs.iter().filter(|j| j.thread == t).copied().collect()
}

fn median(mut v: Vec<u64>) -> u64 {
    v.sort_unstable();
    v[(v.len() - 1) / 2]
}

#[derive(Default)]
struct Jobs(Vec<JobRecord>);
impl Observer for Jobs {
    fn job(&mut self, r: &JobRecord) {
        self.0.push(*r);
    }
}

/// The same workload in the simulator, for the job counts.
fn simulate(w: &Workload, horizon_ns: u64) -> Vec<JobRecord> {
    let mut sim = Sim::new(w.clone(), SimConfig::new(2)).expect("simulates");
    let mut jobs = Jobs::default();
    sim.run_until(horizon_ns, &mut jobs);
    jobs.0
}

/// `dl_bw->total_bw` of the first root domain in the scheduler's debugfs, if readable.
fn dl_total_bw() -> Option<u64> {
    let text = std::fs::read_to_string("/sys/kernel/debug/sched/debug").ok()?;
    text.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        (k.trim() == ".dl_bw->total_bw")
            .then(|| v.trim().parse().ok())
            .flatten()
    })
}

const TWO_PERIODIC: &str = r#"{
    "tasks": {
        "fast": { "policy": "SCHED_FIFO", "priority": 60, "run": 1000,
                  "timer": { "ref": "unique", "period": 10000, "mode": "absolute" } },
        "slow": { "policy": "SCHED_FIFO", "priority": 50, "run": 2000,
                  "timer": { "ref": "unique", "period": 16000, "mode": "absolute" } }
    }
}"#;

#[test]
#[cfg_attr(
    not(pacer_privileged),
    ignore = "needs root: run as root or set PACER_REQUIRE_ROOT=1"
)]
fn two_periodic_threads_give_the_expected_jobs() {
    let _g = serialize();
    require_rt();
    let w = workload(TWO_PERIODIC);
    let (report, jobs) = execute(&w, &config(Some(1000)));
    assert_eq!(report.stopped_by, StopReason::Duration);
    assert_eq!(report.horizon_ns, 1000 * MS);
    assert_eq!(report.dropped_records, 0);
    assert!(report.calibration.measured && report.calibration.ps_per_loop > 0);
    let sim = simulate(&w, 1000 * MS);
    for (t, period, run) in [(0u32, 10 * MS, MS), (1, 16 * MS, 2 * MS)] {
        let real = of(&jobs, t);
        let simulated = of(&sim, t).len();
        // fast: releases 0, 10, … 990 ms, all done by 1 s: 100 jobs; slow: 0 … 992 ms: 63.
        let expected = if t == 0 { 100 } else { 63 };
        assert_eq!(simulated, expected, "the simulator's count");
        assert!(
            real.len().abs_diff(expected) <= 1,
            "thread {t}: {} jobs, expected {expected} (±1 at the end of the run)",
            real.len()
        );
        for (k, j) in real.iter().enumerate() {
            assert_eq!(j.job, k as u64, "jobs numbered in order");
            // Absolute timer: the k-th release is exactly k periods after the start.
            assert_eq!(j.release, k as u64 * period, "thread {t} job {k}");
            assert_eq!(
                j.deadline,
                j.release + period,
                "deadline = release + timer period"
            );
            assert!(j.start >= j.release && j.finish >= j.start);
        }
        let latency = median(real.iter().map(|j| j.start - j.release).collect());
        let exec = median(real.iter().map(|j| j.exec).collect());
        let response = median(real.iter().map(|j| j.finish - j.release).collect());
        eprintln!(
            "thread {t}: {} jobs, median wake-up latency {latency} ns, exec {exec} ns (run {run}), response {response} ns",
            real.len()
        );
        assert!(latency < MS / 2, "wake-up latency {latency} ns");
        // The calibrated loop does `run` of work at full speed, plus a few µs of bookkeeping.
        assert!(
            exec >= run * 85 / 100 && exec <= run * 13 / 10,
            "thread {t}: median exec {exec} ns for run {run} ns"
        );
        assert!(response >= run * 85 / 100 && response < run * 13 / 10 + MS);
    }
    for t in &report.threads {
        assert!(
            matches!(t.policy_applied, Some(Policy::Fifo { priority: 50 | 60 })),
            "{t:?}"
        );
        assert_eq!(t.policy_at_exit, Some(Policy::Other { nice: 0 }), "{t:?}");
    }
    // Per-thread counters from the kernel: CPU time ≈ jobs × run.
    let c = &report.counters[0];
    assert!(c.exec_ns > 80 * MS && c.exec_ns < 200 * MS, "{c:?}");
    assert_eq!(c.finished, of(&jobs, 0).len() as u64);
}

#[test]
#[cfg_attr(
    not(pacer_privileged),
    ignore = "needs root: run as root or set PACER_REQUIRE_ROOT=1"
)]
fn a_deadline_thread_gets_its_reservation_and_gives_it_back() {
    let _g = serialize();
    require_rt();
    let before = dl_total_bw();
    let w = workload(
        r#"{ "tasks": { "render": {
            "policy": "SCHED_DEADLINE", "dl-runtime": 3000, "dl-period": 10000, "dl-deadline": 8000,
            "run": 1500, "timer": { "ref": "unique", "period": 10000, "mode": "absolute" } } } }"#,
    );
    let mut sink = Collect::default();
    let report = match run::run(&w, &config(Some(500)), &mut sink) {
        Ok(r) => r,
        Err(e) if e.is_admission() => {
            // Only another process's reservations can leave no room for 30 % of a CPU here: the
            // machine cannot run this test, which must not pass unchecked.
            panic!(
                "other SCHED_DEADLINE threads on this machine hold the bandwidth \
                 (dl_bw->total_bw {before:?}), so the reservation cannot be tested: {e}"
            );
        }
        Err(e) => panic!("the run fails: {e}"),
    };
    let jobs = sink.jobs;
    let t = &report.threads[0];
    let Some(Policy::Deadline(r)) = t.policy_applied else {
        panic!("not SCHED_DEADLINE after setting it: {t:?}");
    };
    assert_eq!(
        (r.runtime, r.deadline, r.period),
        (
            Duration::from_us(3000),
            Duration::from_us(8000),
            Duration::from_us(10000)
        )
    );
    assert!(r.flags.reset_on_fork, "RESET_ON_FORK on every reservation");
    assert_eq!(
        t.policy_at_exit,
        Some(Policy::Other { nice: 0 }),
        "ends SCHED_OTHER"
    );
    // The thread is gone; its policy cannot linger, and its bandwidth is back.
    assert!(sched::get_attr(t.tid).map_or(true, |a| a.sched_policy != SCHED_DEADLINE));
    if let (Some(b), Some(a)) = (before, dl_total_bw()) {
        eprintln!("dl_bw->total_bw before {b}, after {a}");
        assert_eq!(a, b, "the reservation's bandwidth was returned");
    }
    // Jobs: deadline = release + dl-deadline (8 ms). 3 ms of budget for 1.5 ms of work leaves
    // room for a slowed-down CPU (a busy hyperthread sibling stretches the loop), but a job that
    // ran twice as slowly is throttled and misses: allow a few, not a pattern.
    assert!(jobs.len() >= 49, "{} jobs", jobs.len());
    assert!(jobs.iter().all(|j| j.deadline == j.release + 8 * MS));
    let missed = jobs.iter().filter(|j| j.missed()).count();
    eprintln!("render: {} jobs, {missed} missed, reservation {r:?}", jobs.len());
    assert!(
        missed * 10 <= jobs.len(),
        "{missed} misses: {:?}",
        jobs.iter().find(|j| j.missed())
    );
}

#[test]
#[cfg_attr(
    not(pacer_privileged),
    ignore = "needs root: run as root or set PACER_REQUIRE_ROOT=1"
)]
fn refused_reservations_fail_the_run_and_release_everything() {
    let _g = serialize();
    require_rt();
    let before = dl_total_bw();
    // Three reservations of 9/10 on 2 CPUs: at most two are admitted.
    let w = workload(
        r#"{ "tasks": { "big": { "instance": 3,
            "policy": "SCHED_DEADLINE", "dl-runtime": 9000, "dl-period": 10000,
            "run": 100, "timer": { "ref": "unique", "period": 10000 } } } }"#,
    );
    let mut sink = Collect::default();
    let err = run::run(&w, &config(Some(500)), &mut sink).expect_err("admission refuses one");
    let msg = err.to_string();
    eprintln!("{msg}");
    assert!(err.is_admission(), "{err:?}");
    assert!(msg.contains("thread `big-") && msg.contains("EBUSY"), "{msg}");
    assert!(sink.jobs.is_empty(), "nothing ran");
    if let (Some(b), Some(a)) = (before, dl_total_bw()) {
        assert_eq!(a, b, "the admitted threads gave their bandwidth back");
    }
}

#[test]
#[cfg_attr(
    not(pacer_privileged),
    ignore = "needs root: run as root or set PACER_REQUIRE_ROOT=1"
)]
fn finite_loops_and_phases_match_the_simulators_jobs() {
    let _g = serialize();
    require_rt();
    // A thread without timers (one job per pass) and a thread
    // whose phases pin it to CPU 0, then CPU 1, and change its priority.
    let w = workload(
        r#"{ "tasks": {
            "passes": { "loop": 5, "policy": "SCHED_FIFO", "priority": 10, "run": 500, "sleep": 1000 },
            "pinned": { "loop": 1, "policy": "SCHED_FIFO", "priority": 20, "phases": {
                "first": { "loop": 10, "cpus": [0], "run": 300,
                           "timer": { "ref": "unique", "period": 4000 } },
                "second": { "loop": 10, "cpus": [1], "priority": 30, "run": 300,
                            "timer": { "ref": "unique", "period": 4000 } } } } } }"#,
    );
    let cfg = config(None);
    let mut sink = Collect::default();
    let report = run::run(&w, &cfg, &mut sink).expect("runs");
    assert_eq!(report.stopped_by, StopReason::Finished);
    let sim = simulate(&w, 10_000 * MS);
    let real: Vec<(u64, u64)> = of(&sink.jobs, 0)
        .iter()
        .map(|j| (j.job, j.exec / 100_000))
        .collect();
    let simulated: Vec<(u64, u64)> = of(&sim, 0).iter().map(|j| (j.job, j.exec / 100_000)).collect();
    eprintln!("passes: real {real:?}, simulated {simulated:?}");
    assert_eq!(simulated.len(), real.len(), "same jobs as the simulator");
    assert!(real.iter().zip(&simulated).all(|(r, s)| r.0 == s.0));
    assert_eq!(real.len(), 5, "5 passes, and no empty job after the last");
    let pinned = of(&sink.jobs, 1);
    // 20 timer events end 20 jobs; nothing follows the last one, so no 21st job; the simulator
    // (which runs the phase-level cpus and priority too) agrees.
    assert_eq!(pinned.len(), 20);
    assert_eq!(of(&sim, 1).len(), 20);
    let cpus: Vec<u32> = pinned.iter().map(|j| j.cpu).collect();
    eprintln!("pinned: CPUs {cpus:?}");
    assert!(
        cpus[..10].iter().all(|&c| c == 0),
        "first phase on CPU 0: {cpus:?}"
    );
    assert!(
        cpus[11..20].iter().all(|&c| c == 1),
        "second phase on CPU 1: {cpus:?}"
    );
    assert!(
        pinned[10].migrations >= 1,
        "the job spanning the phase change migrated"
    );
    // The logs: one row per pass, rt-app's columns.
    let rows: Vec<_> = sink
        .logs
        .iter()
        .filter(|(t, _)| *t == 1)
        .map(|(_, r)| *r)
        .collect();
    assert_eq!(rows.len(), 20);
    assert!(rows.iter().all(|r| r.c_duration == 300 && r.c_period == 4000));
    let periods: Vec<u64> = rows[1..].iter().map(|r| r.period).collect();
    assert!(
        median(periods).abs_diff(4000) < 300,
        "a pass lasts a timer period"
    );
}

#[test]
#[cfg_attr(
    not(pacer_privileged),
    ignore = "needs root: run as root or set PACER_REQUIRE_ROOT=1"
)]
fn the_run_stops_at_its_duration_even_in_a_long_run() {
    let _g = serialize();
    require_rt();
    // 5 s of work per job, a 200 ms run: the busy loop checks the stop between chunks.
    let w =
        workload(r#"{ "tasks": { "busy": { "policy": "SCHED_FIFO", "priority": 10, "run": 5000000 } } }"#);
    let blocked = || {
        let status = std::fs::read_to_string("/proc/thread-self/status").unwrap();
        status
            .lines()
            .find(|l| l.starts_with("SigBlk:"))
            .unwrap()
            .to_string()
    };
    let mask_before = blocked();
    let t = std::time::Instant::now();
    let (report, jobs) = execute(&w, &config(Some(200)));
    let took = t.elapsed();
    assert_eq!(blocked(), mask_before, "the caller's signal mask is restored");
    eprintln!("a 200 ms run of a 5 s job took {took:?}");
    assert!(took < std::time::Duration::from_secs(2), "{took:?}");
    assert_eq!(report.stopped_by, StopReason::Duration);
    assert!(jobs.is_empty(), "the unfinished job is not reported");
    assert_eq!(report.threads[0].policy_at_exit, Some(Policy::Other { nice: 0 }));
}

#[test]
#[cfg_attr(
    not(pacer_privileged),
    ignore = "needs root: run as root or set PACER_REQUIRE_ROOT=1"
)]
fn a_thread_failing_mid_run_stops_the_others_even_asleep() {
    let _g = serialize();
    require_rt();
    // `greedy` asks, in its second phase, for SCHED_DEADLINE while pinned to one CPU, which the
    // kernel refuses; `sleepy` is then in a 10 s sleep and must be woken to stop.
    let w = workload(
        r#"{ "tasks": {
            "sleepy": { "policy": "SCHED_FIFO", "priority": 10, "run": 100, "sleep": 10000000 },
            "greedy": { "loop": 1, "policy": "SCHED_FIFO", "priority": 10, "phases": {
                "ok": { "loop": 5, "run": 100, "sleep": 10000 },
                "pinned_dl": { "cpus": [0], "policy": "SCHED_DEADLINE",
                               "dl-runtime": 1000, "dl-period": 10000, "run": 100 } } } } }"#,
    );
    let t = std::time::Instant::now();
    let mut sink = Collect::default();
    // The duration only bounds the test if the kernel accepts the phase after all.
    let err = match run::run(&w, &config(Some(5000)), &mut sink) {
        Err(e) => e,
        Ok(_) => {
            // Accepted: CPU 0 is a root domain of its own here (exclusive cpusets split the
            // machine), so a thread pinned to it may hold a reservation and nothing fails: the
            // machine cannot run this test, which must not pass unchecked.
            panic!(
                "the kernel accepted SCHED_DEADLINE on CPU 0 alone (CPU 0 is its own root \
                 domain: exclusive cpusets split this machine), so a failing thread cannot be \
                 provoked; remove that cpuset (`pacer cpuset --cleanup` if pacer left it) and rerun"
            );
        }
    };
    let took = t.elapsed();
    let msg = err.to_string();
    eprintln!("{msg} (after {took:?})");
    assert!(
        msg.starts_with("thread `greedy`: cannot set SCHED_DEADLINE"),
        "{msg}"
    );
    assert!(err.is_permission() && msg.contains("root domain"), "{msg}");
    assert!(took < std::time::Duration::from_secs(3), "{took:?}");
}

#[test]
#[cfg_attr(
    not(pacer_privileged),
    ignore = "needs root: run as root or set PACER_REQUIRE_ROOT=1"
)]
fn shared_timers_and_relative_timers_release_like_the_simulator() {
    let _g = serialize();
    require_rt();
    // `left` and `right` share the timer `tick` (10 ms): each timer event advances it by one
    // period, so they take turns and each is released every 20 ms. `late` (on the other CPU) runs
    // 3 ms against a 2 ms relative timer: always late, so its grid restarts at every timer event.
    let w = workload(
        r#"{ "tasks": {
            "left":  { "policy": "SCHED_FIFO", "priority": 20, "cpus": [1], "run": 500,
                       "timer": { "ref": "tick", "period": 10000 } },
            "right": { "policy": "SCHED_FIFO", "priority": 10, "cpus": [1], "run": 500,
                       "timer": { "ref": "tick", "period": 10000 } },
            "late":  { "policy": "SCHED_FIFO", "priority": 10, "cpus": [0], "run": 3000,
                       "timer": { "ref": "unique", "period": 2000 } } } }"#,
    );
    let (_, jobs) = execute(&w, &config(Some(300)));
    let sim = simulate(&w, 300 * MS);
    for t in [0u32, 1] {
        let real: Vec<u64> = of(&jobs, t).iter().map(|j| j.release).take(10).collect();
        let simulated: Vec<u64> = of(&sim, t).iter().map(|j| j.release).take(10).collect();
        eprintln!("thread {t}: releases {real:?}");
        assert_eq!(
            real, simulated,
            "shared timer: the same releases as the simulator"
        );
    }
    assert_eq!(of(&jobs, 0)[1].release, 10 * MS);
    assert_eq!(of(&jobs, 1)[1].release, 20 * MS);
    // Relative and late: each next job is released when the previous one reaches its timer, so
    // it starts at its release and the releases are ≈ 3 ms apart, not 2.
    let late = of(&jobs, 2);
    for pair in late.windows(2) {
        assert_eq!(
            pair[1].release, pair[0].finish,
            "released at the late timer event"
        );
        assert_eq!(pair[1].start, pair[1].release, "and started at once");
    }
    let gaps: Vec<u64> = late.windows(2).map(|p| p[1].release - p[0].release).collect();
    assert!(median(gaps) > 2 * MS + MS / 2, "the grid restarts late");
}

/// A private tracefs instance (its own ring buffer and `trace_marker`), removed on drop.
struct Instance(std::path::PathBuf);

impl Instance {
    fn new() -> Instance {
        let root = pacer_linux::trace::tracefs_root().expect("tracefs is mounted");
        let dir = root.join(format!("instances/pacer-markers-test-{}", std::process::id()));
        let _ = std::fs::remove_dir(&dir);
        std::fs::create_dir(&dir).expect("creates a tracefs instance");
        // As LISA's traces do: the switches also keep the kernel's pid → comm cache current, which
        // names the task of each marker line.
        std::fs::write(dir.join("events/sched/sched_switch/enable"), "1").expect("enables sched_switch");
        Instance(dir)
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.0);
    }
}

/// One `rtapp_*` marker of the text trace as LISA's text-trace parser reads it: the task
/// (`comm-pid`) and the `tracing_mark_write: rtapp_<what>: key=value …` payload, the values
/// taken with a `key=value` pattern in their order.
#[derive(Debug, Clone, PartialEq)]
struct Marker {
    pid: u32,
    comm: String,
    what: String,
    fields: Vec<(String, String)>,
}

impl Marker {
    fn get(&self, key: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
    fn keys(&self) -> Vec<&str> {
        self.fields.iter().map(|(k, _)| k.as_str()).collect()
    }
}

fn parse_markers(trace: &str) -> Vec<Marker> {
    let mut out = Vec::new();
    for line in trace.lines().filter(|l| !l.starts_with('#')) {
        let Some((head, payload)) = line.split_once(": tracing_mark_write: ") else {
            continue;
        };
        let Some(rest) = payload.trim_end().strip_prefix("rtapp_") else {
            continue;
        };
        let (what, kv) = rest.split_once(": ").expect("rtapp_<what>: fields");
        // `comm-pid [cpu] flags timestamp`; the comm may itself contain '-'.
        let task = head.split_whitespace().next().expect("task field");
        let (comm, pid) = task.rsplit_once('-').expect("comm-pid");
        let fields = kv
            .split_whitespace()
            .map(|f| {
                let (k, v) = f.split_once('=').expect("key=value");
                (k.to_string(), v.to_string())
            })
            .collect();
        out.push(Marker {
            pid: pid.parse().expect("pid"),
            comm: comm.to_string(),
            what: what.to_string(),
            fields,
        });
    }
    out
}

#[test]
#[cfg_attr(
    not(pacer_privileged),
    ignore = "needs root: run as root or set PACER_REQUIRE_ROOT=1"
)]
fn rt_app_ftrace_markers_reach_the_trace_as_lisa_reads_them() {
    let _g = serialize();
    require(Need::Root);
    let mut w = workload(
        r#"{ "global": { "ftrace": "main,task,loop,event,stats" },
             "tasks": {
               "a": { "loop": 3, "run": 1000, "timer": { "ref": "a", "period": 10000 } },
               "b": { "instance": 2, "loop": 2, "phases": {
                        "p1": { "loop": 2, "run": 500, "sleep": 1000 },
                        "p2": { "loop": 1, "run": 500 } } } } }"#,
    );
    // What the file's `ftrace` says, whether or not this build's parser reads it yet.
    w.settings.ftrace = pacer_workload::FtraceCategories {
        attrs: false,
        ..pacer_workload::FtraceCategories::ALL
    };
    let instance = Instance::new();
    let cfg = RunConfig {
        tracefs: Some(instance.0.clone()),
        ..config(None)
    };
    let mut sink = Collect::default();
    let report = run::run(&w, &cfg, &mut sink).expect("the run succeeds");
    assert_eq!(report.stopped_by, StopReason::Finished);
    let trace = std::fs::read_to_string(instance.0.join("trace")).expect("reads the trace");
    let markers = parse_markers(&trace);
    assert!(!markers.is_empty(), "no rtapp markers in\n{trace}");

    // The run's own markers, around everything else.
    let main: Vec<&Marker> = markers.iter().filter(|m| m.what == "main").collect();
    assert_eq!(main.first().and_then(|m| m.get("event")), Some("start"));
    assert_eq!(main.last().and_then(|m| m.get("event")), Some("end"));
    assert_eq!(markers.first().map(|m| m.what.as_str()), Some("main"));
    assert_eq!(markers.last().map(|m| m.what.as_str()), Some("main"));
    let clock_ref = markers
        .iter()
        .find(|m| m.get("event") == Some("clock_ref"))
        .expect("clock_ref");
    assert_eq!(
        clock_ref.get("data").and_then(|d| d.parse::<u64>().ok()),
        Some((report.origin_ns + 500) / 1000)
    );

    // Threads named and counted as rt-app's: a-0, b-1, b-2. A task without `phases` is one
    // phase looping `loop` times, run once (rt-app_parse_config.c).
    let expect_loops = [
        vec![(0, 0, 0), (0, 0, 1), (0, 0, 2)],
        vec![(0, 0, 0), (0, 0, 1), (0, 1, 0), (1, 0, 0), (1, 0, 1), (1, 1, 0)],
    ];
    for (i, (t, name)) in report.threads.iter().zip(["a-0", "b-1", "b-2"]).enumerate() {
        assert_eq!(w.threads[i].rtapp_name.as_deref(), Some(name));
        let mine: Vec<&Marker> = markers.iter().filter(|m| m.pid == t.tid).collect();
        // The trace names the task as rt-app's threads are named.
        for m in &mine {
            assert_eq!(m.comm, name, "{m:?}");
        }
        let what: Vec<&str> = mine.iter().map(|m| m.what.as_str()).collect();
        assert_eq!(what.first(), Some(&"task"), "{name}: {what:?}");
        assert_eq!(what.last(), Some(&"task"), "{name}: {what:?}");
        let loops: Vec<(&str, u64, u64, u64)> = mine
            .iter()
            .filter(|m| m.what == "loop")
            .map(|m| {
                assert_eq!(m.keys(), ["event", "thread_loop", "phase", "phase_loop"]);
                let n = |k| m.get(k).and_then(|v| v.parse().ok()).expect("a number");
                (
                    m.get("event").unwrap_or(""),
                    n("thread_loop"),
                    n("phase"),
                    n("phase_loop"),
                )
            })
            .collect();
        let expected = &expect_loops[i.min(1)];
        assert_eq!(loops.len(), 2 * expected.len(), "{name}: {loops:?}");
        for (pair, &(tl, ph, pl)) in loops.chunks(2).zip(expected) {
            assert_eq!(pair[0], ("start", tl, ph, pl), "{name}");
            assert_eq!(pair[1], ("end", tl, ph, pl), "{name}");
        }
        // Each pass: its events, numbered from 0 with rt-app's types, then loop end and stats.
        let events: Vec<(String, String, String)> = mine
            .iter()
            .filter(|m| m.what == "event")
            .map(|m| {
                assert_eq!(m.keys(), ["id", "type", "desc"]);
                let g = |k| m.get(k).unwrap_or("").to_string();
                (g("id"), g("type"), g("desc"))
            })
            .collect();
        let stats: Vec<&Marker> = mine.iter().copied().filter(|m| m.what == "stats").collect();
        assert_eq!(stats.len(), expected.len(), "{name}");
        for s in &stats {
            assert_eq!(
                s.keys(),
                ["period", "run", "wu_lat", "slack", "c_period", "c_run"]
            );
            for (_, v) in &s.fields {
                v.parse::<i64>().expect("integers, as rt-app's %d");
            }
        }
        let ev = |id: &str, ty: &str, desc: &str| (id.to_string(), ty.to_string(), desc.to_string());
        if i == 0 {
            assert_eq!(events.len(), 6);
            for pass in events.chunks(2) {
                assert_eq!(pass, [ev("0", "6", "run"), ev("1", "10", "timer:a")]);
            }
            for s in &stats {
                assert_eq!((s.get("c_period"), s.get("c_run")), (Some("10000"), Some("1000")));
            }
            // The log rows carry the same values as the stats markers.
            let rows: Vec<_> = sink
                .logs
                .iter()
                .filter(|(t, _)| *t == 0)
                .map(|(_, r)| *r)
                .collect();
            assert_eq!(rows.len(), 3);
            for (r, s) in rows.iter().zip(&stats) {
                assert_eq!(s.get("period"), Some(r.period.to_string().as_str()));
                assert_eq!(s.get("wu_lat"), Some(r.wu_lat.to_string().as_str()));
            }
        } else {
            let p1 = [ev("0", "6", "run"), ev("1", "5", "sleep")];
            let p2 = [ev("0", "6", "run")];
            let want: Vec<_> = [&p1[..], &p1[..], &p2[..], &p1[..], &p1[..], &p2[..]].concat();
            assert_eq!(events, want, "{name}");
        }
    }
    // `loop: 3` gives 3 jobs, the same as its 3 passes.
    assert_eq!(of(&sink.jobs, 0).len(), 3);
}
