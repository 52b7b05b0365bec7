//! `pacer exec` / `pacer attach` on the real kernel (issue 5): period detection, reservations
//! visible to sched_getattr, restoration on SIGTERM and SIGKILL, forking under SCHED_DEADLINE,
//! admission failure, bad PIDs. The controlled programs are rt-app workloads run by `pacer run`.
//!
//! Most of these tests need root, SCHED_DEADLINE and tracefs (`pacer_testkit`: ignored in builds
//! without root or `PACER_REQUIRE_ROOT=1`, failing when a need is missing otherwise). They change
//! global scheduler state, so they run one at a time.

use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use pacer_linux::sched;
use pacer_model::Policy;
use pacer_testkit::{require, Need};
use serde_json::Value;

mod common;
use common::{json_lines, output_within, pacer, privileged, wait_within};

/// How long any one `pacer exec` of these tests may take before the test fails, naming what its
/// processes were doing: each takes seconds; a hang must not stall the suite.
const LIMIT: Duration = Duration::from_secs(120);

/// An rt-app workload of periodic threads `(name, period_us, run_us)` lasting `secs`.
fn workload(dir: &tempfile::TempDir, threads: &[(&str, u64, u64)], secs: u64) -> String {
    let tasks: Vec<String> = threads
        .iter()
        .map(|(name, period, run)| {
            format!(r#""{name}": {{ "loop": -1, "run": {run}, "timer": {{ "ref": "t_{name}", "period": {period} }} }}"#)
        })
        .collect();
    let json = format!(
        r#"{{ "global": {{ "duration": {secs} }}, "tasks": {{ {} }} }}"#,
        tasks.join(", ")
    );
    let path = dir.path().join("w.json");
    std::fs::write(&path, json).unwrap();
    path.display().to_string()
}

/// Starts `pacer exec --json` on `pacer run FILE`; JSON lines arrive on the receiver.
fn exec_json(extra: &[&str], file: &str) -> (Child, Receiver<Value>) {
    let mut child = pacer()
        .arg("exec")
        .args(["--json", "--status-every", "200ms"])
        .args(extra)
        .args(["--", env!("CARGO_BIN_EXE_pacer"), "run", "--calibration"])
        .arg(common::calibration())
        .arg(file)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start pacer exec");
    let rx = json_lines(&mut child);
    (child, rx)
}

/// Threads of a status line, by name.
fn threads(status: &Value) -> Vec<Value> {
    status["threads"].as_array().cloned().unwrap_or_default()
}

fn find<'a>(ths: &'a [Value], name: &str) -> Option<&'a Value> {
    ths.iter().find(|t| t["name"] == name)
}

/// Waits until every named thread is reserved with a period within 1 % of the expected one;
/// returns the last status and the TIDs.
fn wait_reserved(rx: &Receiver<Value>, expect: &[(&str, u64)], timeout: Duration) -> (Value, Vec<u32>) {
    let end = Instant::now() + timeout;
    let mut last = Value::Null;
    while Instant::now() < end {
        let Ok(v) = rx.recv_timeout(Duration::from_millis(500)) else {
            continue;
        };
        if v["type"] == "notice" {
            // E.g. a helper thread of `pacer run` that set its own policy after pacer took it.
            eprintln!("pacer exec: {v}");
            continue;
        }
        if v["type"] != "status" {
            panic!("pacer exec ended early: {v}");
        }
        last = v["status"].clone();
        let ths = threads(&last);
        let tids: Option<Vec<u32>> = expect
            .iter()
            .map(|(name, period_us)| {
                let t = find(&ths, name)?;
                let c = &t["control"];
                let p = c["period_ns"].as_u64()?;
                c["budget_ns"].as_u64()?;
                let err = (p as f64 - *period_us as f64 * 1e3).abs() / (*period_us as f64 * 1e3);
                (err <= 0.01).then(|| t["tid"].as_u64().unwrap() as u32)
            })
            .collect();
        if let Some(tids) = tids {
            return (last, tids);
        }
    }
    panic!("threads {expect:?} not reserved with the right period within {timeout:?}; last status: {last}");
}

fn sigterm(child: &Child) {
    // SAFETY: kill with a valid pid and signal.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGTERM);
    }
}

/// The `pacer run` process under `pacer exec` (the only child of the pacer exec process that runs
/// the workload).
fn run_pid_of(status: &Value) -> i32 {
    status["pid"].as_i64().unwrap() as i32
}

fn kill(pid: i32) {
    // SAFETY: kill with a valid pid and signal.
    unsafe {
        libc::kill(pid, libc::SIGKILL);
    }
}

#[test]
#[cfg_attr(
    not(pacer_privileged),
    ignore = "needs root: run as root or set PACER_REQUIRE_ROOT=1"
)]
fn exec_detects_the_period_reserves_and_restores_on_sigterm() {
    let _g = privileged();
    let dir = tempfile::tempdir().unwrap();
    let file = workload(&dir, &[("video", 10_000, 2_000)], 30);
    let (mut child, rx) = exec_json(&[], &file);
    let (st, tids) = wait_reserved(&rx, &[("video-0", 10_000)], Duration::from_secs(15));
    let tid = tids[0];
    let policy = sched::get_policy(tid).expect("sched_getattr on the reserved thread");
    let Policy::Deadline(r) = policy else {
        panic!("thread {tid} is not under SCHED_DEADLINE: {policy:?}")
    };
    let p = r.period.0 as f64;
    assert!((p - 10e6).abs() / 10e6 <= 0.01, "reserved period {p} ns");
    assert!(r.flags.reset_on_fork, "reservations carry RESET_ON_FORK");
    let used = r.runtime.0 as f64 / p;
    assert!((0.15..0.6).contains(&used), "budget {:?} for a 20 % thread", r);
    eprintln!(
        "video: detected {} ns, reserved {}/{} ns",
        find(&threads(&st), "video-0").unwrap()["control"]["period_ns"],
        r.runtime.0,
        r.period.0
    );
    // perf software counters: a 10 ms thread switched out at least once per job by now.
    let video = find(&threads(&st), "video-0").unwrap().clone();
    assert!(
        video["context_switches"].as_u64().is_some_and(|n| n >= 50),
        "{video}"
    );
    let run_pid = run_pid_of(&st);
    sigterm(&child);
    let status = wait_within(&mut child, LIMIT);
    assert_eq!(status.code(), Some(128 + libc::SIGTERM));
    let after = sched::get_policy(tid).expect("the program keeps running after pacer stops");
    kill(run_pid);
    assert_eq!(after, Policy::Other { nice: 0 }, "SIGTERM restores SCHED_OTHER");
}

#[test]
#[cfg_attr(
    not(pacer_privileged),
    ignore = "needs root: run as root or set PACER_REQUIRE_ROOT=1"
)]
fn exec_controls_two_periodic_threads() {
    let _g = privileged();
    let dir = tempfile::tempdir().unwrap();
    let file = workload(&dir, &[("fast", 10_000, 1_500), ("slow", 16_000, 3_000)], 30);
    let (mut child, rx) = exec_json(&[], &file);
    let (st, tids) = wait_reserved(
        &rx,
        &[("fast-0", 10_000), ("slow-1", 16_000)],
        Duration::from_secs(20),
    );
    for (tid, period) in tids.iter().zip([10e6, 16e6]) {
        match sched::get_policy(*tid).unwrap() {
            Policy::Deadline(r) => assert!((r.period.0 as f64 - period).abs() / period <= 0.01, "{r:?}"),
            other => panic!("thread {tid}: {other:?}"),
        }
    }
    let run_pid = run_pid_of(&st);
    sigterm(&child);
    wait_within(&mut child, LIMIT);
    for tid in tids {
        assert_eq!(sched::get_policy(tid).unwrap(), Policy::Other { nice: 0 });
    }
    kill(run_pid);
}

#[test]
#[cfg_attr(
    not(pacer_privileged),
    ignore = "needs root: run as root or set PACER_REQUIRE_ROOT=1"
)]
fn guardian_restores_when_pacer_is_killed() {
    let _g = privileged();
    let dir = tempfile::tempdir().unwrap();
    let file = workload(&dir, &[("victim", 10_000, 1_000)], 30);
    let (mut child, rx) = exec_json(&["--period", "10ms", "--sampling", "200ms"], &file);
    let (st, tids) = wait_reserved(&rx, &[("victim-0", 10_000)], Duration::from_secs(10));
    assert!(matches!(sched::get_policy(tids[0]).unwrap(), Policy::Deadline(_)));
    child.kill().unwrap();
    wait_within(&mut child, LIMIT);
    // The guardian notices the closed pipe at once; allow it a moment to act.
    let end = Instant::now() + Duration::from_secs(3);
    let mut p = sched::get_policy(tids[0]).unwrap();
    while p != (Policy::Other { nice: 0 }) && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(20));
        p = sched::get_policy(tids[0]).unwrap();
    }
    kill(run_pid_of(&st));
    assert_eq!(
        p,
        Policy::Other { nice: 0 },
        "the guardian restores a thread pacer left behind"
    );
}

#[test]
#[cfg_attr(
    not(pacer_privileged),
    ignore = "needs root: run as root or set PACER_REQUIRE_ROOT=1"
)]
fn exec_reports_the_program_exiting() {
    let _g = privileged();
    let dir = tempfile::tempdir().unwrap();
    let file = workload(&dir, &[("short", 10_000, 1_000)], 2);
    let (mut child, rx) = exec_json(&["--period", "10ms", "--sampling", "200ms"], &file);
    let status = wait_within(&mut child, LIMIT);
    assert_eq!(status.code(), Some(0), "exit status of the program");
    // The reader thread ends at end of file, after the last line.
    let mut lines: Vec<Value> = Vec::new();
    while let Ok(v) = rx.recv_timeout(Duration::from_secs(5)) {
        lines.push(v);
    }
    let exit = lines.last().expect("an exit line");
    assert_eq!(exit["type"], "exit");
    assert_eq!(exit["reason"], "the program exited");
    assert!(lines.iter().any(|l| l["type"] == "status"
        && find(&threads(&l["status"]), "short-0").is_some_and(|t| t["control"]["budget_ns"].is_u64())));
}

/// pacer's control loop runs at SCHED_FIFO `--rt-priority` (99 by default) with
/// RESET_ON_FORK; the program it started does not inherit it; 0 keeps pacer SCHED_OTHER.
#[test]
#[cfg_attr(
    not(pacer_privileged),
    ignore = "needs root: run as root or set PACER_REQUIRE_ROOT=1"
)]
fn pacer_runs_its_control_loop_at_its_rt_priority() {
    let _g = privileged();
    for (extra, pacer_policy, pacer_prio) in [
        (vec![], "SCHED_FIFO|SCHED_RESET_ON_FORK", "99"),
        (vec!["--rt-priority", "7"], "SCHED_FIFO|SCHED_RESET_ON_FORK", "7"),
        (vec!["--rt-priority", "0"], "SCHED_OTHER", "0"),
    ] {
        // No thread is taken (`--thread` matches none): the shell keeps its own policy.
        let out = output_within(
            pacer()
                .args(["exec", "-q", "--period", "20ms", "--thread", "no-such-thread"])
                .args(&extra)
                .args(["--", "sh", "-c", "sleep 0.5; chrt -p $PPID; chrt -p $$"]),
            LIMIT,
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{extra:?}: {stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let lines: Vec<&str> = stdout.lines().filter(|l| l.contains("pid ")).collect();
        assert_eq!(lines.len(), 4, "{extra:?}: {stdout}");
        assert!(
            lines[0].ends_with(&format!("policy: {pacer_policy}")),
            "{extra:?}: {stdout}"
        );
        assert!(
            lines[1].ends_with(&format!("priority: {pacer_prio}")),
            "{extra:?}: {stdout}"
        );
        assert!(lines[2].ends_with("policy: SCHED_OTHER"), "{extra:?}: {stdout}");
        assert!(lines[3].ends_with("priority: 0"), "{extra:?}: {stdout}");
    }
}

#[test]
#[cfg_attr(
    not(pacer_privileged),
    ignore = "needs root: run as root or set PACER_REQUIRE_ROOT=1"
)]
fn a_reserved_thread_can_fork() {
    let _g = privileged();
    // The shell is reserved (known period) while it sleeps, then forks: with RESET_ON_FORK the
    // fork succeeds and the child runs SCHED_OTHER (without it, fork fails with EAGAIN).
    let out = output_within(
        pacer()
            // A shell measured idle would get the kernel's 1024 ns; its fork then overruns that and
            // is throttled for minutes (overrun/budget periods): give it a budget a fork fits in.
            .args([
                "exec",
                "-q",
                "--period",
                "20ms",
                "--sampling",
                "100ms",
                "--min-budget",
                "2ms",
                "--",
            ])
            .args([
                "sh",
                "-c",
                r#"sleep 2; chrt -p $$; sh -c 'chrt -p $$'; echo forked-ok"#,
            ]),
        LIMIT,
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let lines: Vec<&str> = stdout.lines().filter(|l| l.contains("policy")).collect();
    assert_eq!(lines.len(), 2, "{stdout}");
    assert!(
        lines[0].contains("SCHED_DEADLINE|SCHED_RESET_ON_FORK"),
        "{stdout}"
    );
    assert!(lines[1].contains("SCHED_OTHER"), "{stdout}");
    assert!(stdout.contains("forked-ok"), "{stdout}");
}

#[test]
#[cfg_attr(
    not(pacer_privileged),
    ignore = "needs root: run as root or set PACER_REQUIRE_ROOT=1"
)]
fn admission_failure_is_reported_and_survived() {
    let _g = privileged();
    // Fill the kernel's admission limit with reservations of our own (threads that sleep), so
    // the kernel refuses what pacer's supervisor, told it has the whole limit, asks for.
    let limit = {
        use pacer_adapt::Kernel;
        pacer_linux::kernel::LinuxKernel::for_process(std::process::id()).dl_bandwidth_limit(None)
    };
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (tx, rx) = mpsc::channel();
    // Leave 0.05 CPU free: less than the 20 % thread below will ask for.
    let mut left = limit - 0.05;
    let mut shares = Vec::new();
    while left > 1e-9 {
        shares.push(left.min(0.9));
        left -= 0.9;
    }
    let fillers: Vec<_> = shares
        .into_iter()
        .map(|bw| {
            let stop = stop.clone();
            let tx = tx.clone();
            std::thread::spawn(move || {
                let mut r = pacer_model::Reservation::new(
                    pacer_model::Duration((bw * 100e6) as u64),
                    pacer_model::Duration::from_ms(100),
                    pacer_model::Duration::from_ms(100),
                );
                r.flags.reset_on_fork = true;
                let res = sched::set_policy(0, Policy::Deadline(r), true);
                tx.send(res.map_err(|e| e.to_string())).unwrap();
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(5));
                }
                // Demote from the thread itself (see docs/linux.md on bandwidth leaks).
                let _ = sched::set_policy(0, Policy::Other { nice: 0 }, false);
            })
        })
        .collect();
    drop(tx);
    // One answer per filler (they keep their sender while they hold the bandwidth).
    let filled: Vec<_> = (0..fillers.len())
        .map(|_| rx.recv().expect("filler answers"))
        .collect();
    let cleanup = |stop: &std::sync::atomic::AtomicBool| {
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
    };
    if filled.iter().any(|r| r.is_err()) {
        cleanup(&stop);
        fillers.into_iter().for_each(|f| f.join().unwrap());
        panic!("could not fill the admission limit: {filled:?}");
    }
    let dir = tempfile::tempdir().unwrap();
    let file = workload(&dir, &[("starved", 10_000, 2_000)], 30);
    let (mut child, rx) = exec_json(
        &["--period", "10ms", "--sampling", "100ms", "--bound", "1.8"],
        &file,
    );
    let end = Instant::now() + Duration::from_secs(10);
    let mut refused = None;
    let mut last = Value::Null;
    while Instant::now() < end && refused.is_none() {
        if let Ok(v) = rx.recv_timeout(Duration::from_millis(500)) {
            last = v["status"].clone();
            if let Some(t) = find(&threads(&last), "starved-0") {
                if t["control"]["admission_refusals"].as_u64().unwrap_or(0) > 0 {
                    refused = Some(t.clone());
                }
            }
        }
    }
    sigterm(&child);
    let code = wait_within(&mut child, LIMIT).code();
    cleanup(&stop);
    fillers.into_iter().for_each(|f| f.join().unwrap());
    if last.is_object() {
        kill(run_pid_of(&last));
    }
    let t = refused.unwrap_or_else(|| panic!("no admission refusal reported; last status {last}"));
    eprintln!("refusal reported: {t}");
    // Refused without a previous reservation: left under its own policy, not given a useless
    // 1024 ns reservation.
    assert!(t["control"]["budget_ns"].is_null(), "{t}");
    assert_eq!(
        code,
        Some(128 + libc::SIGTERM),
        "pacer survives and exits cleanly"
    );
}

#[test]
fn attach_errors_name_the_problem() {
    // A PID that cannot exist (above pid_max): no privileges needed to see the error.
    let out = pacer().args(["attach", "4194304"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("no process with PID 4194304"), "{err}");
    assert!(!err.contains("panicked"), "{err}");

    // A thread id that is not a process id.
    let (tx, rx) = mpsc::channel();
    let (stop_tx, stop_rx) = mpsc::channel::<()>();
    let h = std::thread::spawn(move || {
        tx.send(sched::gettid()).unwrap();
        let _ = stop_rx.recv();
    });
    let tid = rx.recv().unwrap();
    let out = pacer().args(["attach", &tid.to_string()]).output().unwrap();
    stop_tx.send(()).unwrap();
    h.join().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!("{tid} is a thread of process {}", std::process::id())),
        "{err}"
    );
}

#[test]
#[cfg_attr(
    not(pacer_privileged),
    ignore = "needs root: run as root or set PACER_REQUIRE_ROOT=1"
)]
fn unprivileged_users_get_a_clear_error() {
    // Root to drop to an unprivileged user; setpriv (util-linux) to do it.
    require(Need::Root);
    require(Need::Program("setpriv"));
    let out = Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--inh-caps=-all",
        ])
        .args([env!("CARGO_BIN_EXE_pacer"), "exec", "--", "true"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("not permitted"), "{err}");
    assert!(err.contains("needs root"), "{err}");
}

#[test]
#[cfg_attr(
    not(pacer_privileged),
    ignore = "needs root: run as root or set PACER_REQUIRE_ROOT=1"
)]
fn a_thread_exiting_mid_run_is_forgotten_and_the_rest_stay_controlled() {
    let _g = privileged();
    let dir = tempfile::tempdir().unwrap();
    // `brief` ends after 100 jobs (1 s); `long` runs until the 4 s duration.
    let json = r#"{ "global": { "duration": 4 }, "tasks": {
        "brief": { "loop": 100, "run": 1000, "timer": { "ref": "tb", "period": 10000 } },
        "long":  { "loop": -1,  "run": 1000, "timer": { "ref": "tl", "period": 10000 } } } }"#;
    let path = dir.path().join("w.json");
    std::fs::write(&path, json).unwrap();
    let (mut child, rx) = exec_json(
        &["--period", "10ms", "--sampling", "200ms"],
        &path.display().to_string(),
    );
    assert_eq!(wait_within(&mut child, LIMIT).code(), Some(0));
    let mut lines: Vec<Value> = Vec::new();
    while let Ok(v) = rx.recv_timeout(Duration::from_secs(5)) {
        lines.push(v);
    }
    // While the program still ran: `brief` gone and counted, `long` still reserved. The first
    // status after one that listed `brief` and without it (another thread of `pacer run`, such as
    // its calibration, may have exited earlier, before the workload's threads were listed).
    let statuses: Vec<&Value> = lines.iter().filter(|l| l["type"] == "status").collect();
    let listed = statuses
        .iter()
        .position(|l| find(&threads(&l["status"]), "brief-0").is_some())
        .unwrap_or_else(|| panic!("`brief-0` never listed: {lines:?}"));
    let mid = statuses[listed..]
        .iter()
        .find(|l| find(&threads(&l["status"]), "brief-0").is_none())
        .unwrap_or_else(|| panic!("no status without the exited thread: {lines:?}"));
    assert!(
        mid["status"]["exited_threads"].as_u64().unwrap_or(0) >= 1,
        "exit not counted: {mid}"
    );
    let ths = threads(&mid["status"]);
    let long = find(&ths, "long-1").expect("the other thread is still there");
    assert!(long["control"]["budget_ns"].is_u64(), "still reserved: {long}");
}

#[test]
#[cfg_attr(
    not(pacer_privileged),
    ignore = "needs root: run as root or set PACER_REQUIRE_ROOT=1"
)]
fn a_thread_selected_by_a_name_it_takes_later_is_controlled() {
    let _g = privileged();
    // The program is a shell for 0.5 s, then execs `sleep`: `--thread sleep` skips it by name at
    // first and must take it once it is named so.
    let out = output_within(
        pacer()
            .args([
                "exec",
                "--json",
                "--period",
                "20ms",
                "--thread",
                "sleep",
                "--status-every",
                "200ms",
                "--",
            ])
            .args(["sh", "-c", "sleep 0.5; exec sleep 1.5"]),
        LIMIT,
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let statuses: Vec<Value> = stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["type"] == "status")
        .collect();
    let first = threads(&statuses[0]["status"]);
    assert_eq!(first[0]["skipped"], "name not selected", "{stdout}");
    let controlled = statuses.iter().any(|v| {
        threads(&v["status"])
            .iter()
            .any(|t| t["name"] == "sleep" && t["control"]["period_ns"] == 20_000_000)
    });
    assert!(controlled, "never controlled after the rename:\n{stdout}");
}

#[test]
#[cfg_attr(
    not(pacer_privileged),
    ignore = "needs root: run as root or set PACER_REQUIRE_ROOT=1"
)]
fn a_thread_that_needs_the_cpu_after_idling_under_a_tiny_budget_is_not_starved() {
    let _g = privileged();
    // `late` (a shell under that name) is taken while it sleeps, so its budget shrinks to the
    // minimum; then it computes. The kernel enforces budgets at the tick, so its first tick of
    // work put it tens of seconds in debt: before the fix it took minutes (in CI, `sleep`'s own
    // exit path took 8+). pacer must notice the far deadline and give it its policy back.
    let dir = tempfile::tempdir().unwrap();
    let late = dir.path().join("late");
    std::os::unix::fs::symlink("/bin/sh", &late).unwrap();
    let script = format!(
        "sleep 0.3; exec {} -c 'sleep 1.5; i=0; while [ $i -lt 400000 ]; do i=$((i+1)); done; echo done $i'",
        late.display()
    );
    let mut child = pacer()
        .args(["exec", "--json", "--period", "20ms", "--thread", "late"])
        .args(["--status-every", "200ms", "--", "sh", "-c", &script])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let rx = json_lines(&mut child);
    let deadline = Instant::now() + Duration::from_secs(15);
    let mut lines = Vec::new();
    let exit = loop {
        match rx.recv_timeout(Duration::from_millis(200)) {
            Ok(v) if v["type"] == "exit" => break Some(v),
            Ok(v) => lines.push(v),
            Err(RecvTimeoutError::Disconnected) => break None,
            Err(RecvTimeoutError::Timeout) if Instant::now() > deadline => break None,
            Err(RecvTimeoutError::Timeout) => {}
        }
    };
    if exit.is_none() {
        sigterm(&child);
    }
    let status = wait_within(&mut child, LIMIT);
    let exit = exit.unwrap_or_else(|| panic!("the program did not finish within 15 s: {lines:?}"));
    assert!(status.success(), "{exit}");
    assert_eq!(exit["reason"], "the program exited", "{exit}");
    // Whichever way the session saw it, the thread was controlled at some point.
    let taken = lines.iter().any(|v| {
        threads(&v["status"])
            .iter()
            .any(|t| t["name"] == "late" && t["control"]["period_ns"] == 20_000_000)
    });
    assert!(taken, "`late` was never controlled: {lines:?}");
}
