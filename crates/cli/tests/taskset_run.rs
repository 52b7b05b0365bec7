//! Issue 18: a task set on the real kernel (`pacer run SET.json --policy …`) and as an rt-app file
//! (`pacer convert`).
//!
//! Unprivileged: the conversion round trip (the simulator gives the same jobs, job for job, on the
//! converted file as on the task set) and the errors for bad input. Privileged (ignored unless
//! built as root or with `PACER_REQUIRE_ROOT=1`, serialised by `privileged()`): the six
//! configurations of this 2-CPU machine run with jobs recorded, and after a normal end and after
//! SIGTERM mid-run no cpuset is left, `total_bw` is back at its baseline and no thread keeps a
//! policy pacer gave it.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;

mod common;
use common::{assert_total_bw_back, baseline, output_within, pacer, privileged, signal};

/// Times in whole microseconds, so that the rt-app file is exact.
const SET: &str = r#"{"name": "small", "tasks": [
  {"name": "a", "wcet": "2ms", "period": "10ms"},
  {"name": "b", "wcet": "3ms", "period": "20ms"},
  {"name": "c", "wcet": "1500us", "period": "25ms", "offset": "1ms"},
  {"name": "d", "wcet": "4ms", "period": "40ms"}
]}"#;

fn write_set(dir: &Path) -> PathBuf {
    let p = dir.join("set.json");
    std::fs::write(&p, SET).unwrap();
    p
}

fn ok(cmd: &mut Command) -> std::process::Output {
    let out = output_within(cmd, Duration::from_secs(120));
    assert!(
        out.status.success(),
        "{cmd:?} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn fail(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap();
    assert!(!out.status.success(), "{cmd:?} should fail");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn the_simulator_gives_the_same_jobs_on_the_converted_file() {
    let dir = tempfile::tempdir().unwrap();
    let set = write_set(dir.path());
    for policy in ["p-edf", "g-edf", "p-rm"] {
        let rt = dir.path().join(format!("{policy}.json"));
        ok(pacer()
            .args([
                "convert",
                "--cpus",
                "2",
                "--policy",
                policy,
                "--duration",
                "2s",
                "-o",
            ])
            .arg(&rt)
            .arg(&set));
        let (from_set, from_file) = (dir.path().join("s.csv"), dir.path().join("f.csv"));
        ok(pacer()
            .args([
                "sim",
                "--cpus",
                "2",
                "--policy",
                policy,
                "--duration",
                "2s",
                "--jobs",
            ])
            .arg(&from_set)
            .arg(&set));
        ok(pacer()
            .args(["sim", "--cpus", "2", "--jobs"])
            .arg(&from_file)
            .arg(&rt));
        let (a, b) = (
            std::fs::read_to_string(&from_set).unwrap(),
            std::fs::read_to_string(&from_file).unwrap(),
        );
        assert!(a.lines().count() > 100, "{policy}: too few jobs:\n{a}");
        assert_eq!(a, b, "{policy}: the converted file simulates differently");
    }
}

#[test]
fn bad_input_names_the_file_the_field_and_what_was_expected() {
    let dir = tempfile::tempdir().unwrap();
    let set = write_set(dir.path());
    let bad = dir.path().join("bad.json");
    std::fs::write(
        &bad,
        r#"{"tasks": [{"name": "a", "wcet": "2ms", "period": "soon"}]}"#,
    )
    .unwrap();
    let e = fail(pacer().args(["convert", "--cpus", "2"]).arg(&bad));
    assert!(e.contains("bad.json") && e.contains("tasks[0].period"), "{e}");
    let e = fail(pacer().args(["run", "--cpus", "2"]).arg(&bad));
    assert!(e.contains("bad.json") && e.contains("tasks[0].period"), "{e}");
    // Options that do not fit the set: the flag and what it expects.
    for (args, expected) in [
        (
            &["convert", "--cpus", "2", "--policy", "c-edf"][..],
            "needs --cluster-size",
        ),
        (
            &["run", "--cpus", "3", "--policy", "c-edf", "--cluster-size", "2"],
            "--cluster-size 2: expected a divisor of --cpus 3",
        ),
        (
            &["convert", "--cpus", "2", "--policy", "x-edf"],
            "expected one of g-edf",
        ),
        (
            &["convert", "--cpus", "2", "--exec", "uniform:0.5"],
            "rt-app's `run`",
        ),
        (
            &["run", "--cpus", "2", "--policy", "p-edf", "--assign", "best"],
            "unknown packing heuristic `best`",
        ),
    ] {
        let e = fail(pacer().args(args).arg(&set));
        assert!(e.contains(expected), "{args:?}: {e}");
    }
    // The input is never the output, and a FIFO is not replaced.
    let e = fail(pacer().args(["convert", "--cpus", "2", "-o"]).arg(&set).arg(&set));
    assert!(e.contains("the same file as the input"), "{e}");
    assert_eq!(std::fs::read_to_string(&set).unwrap(), SET);
    let fifo = dir.path().join("fifo");
    assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let e = fail(
        pacer()
            .args(["convert", "--cpus", "2", "-o"])
            .arg(&fifo)
            .arg(&set),
    );
    assert!(e.contains("not a regular file") || e.contains("FIFO"), "{e}");
    // Task-set options on an rt-app file would be silently ignored: refused.
    let rt = dir.path().join("rt.json");
    ok(pacer().args(["convert", "--cpus", "2", "-o"]).arg(&rt).arg(&set));
    let e = fail(pacer().args(["run", "--policy", "p-edf"]).arg(&rt));
    assert!(e.contains("--policy: only for task sets"), "{e}");
    let e = fail(pacer().args(["convert", "--cpus", "2"]).arg(&rt));
    assert!(e.contains("an rt-app file already"), "{e}");
    // More bandwidth in one partition than the kernel admits: refused before anything runs, the
    // partition named.
    let over = dir.path().join("over.json");
    std::fs::write(
        &over,
        r#"{"tasks": [{"name": "x", "wcet": "9600us", "period": "10ms"}, {"name": "y", "wcet": "1ms", "period": "10ms"}]}"#,
    )
    .unwrap();
    let e = fail(
        pacer()
            .args(["run", "--cpus", "2", "--policy", "p-edf", "--duration", "1s"])
            .arg(&over),
    );
    assert!(
        e.contains("partition") && e.contains("Σ C/T") && e.contains("tasks: x"),
        "{e}"
    );
}

/// pacer's cpusets under the cpuset hierarchy, if any remain.
fn leftover_cpusets() -> Vec<String> {
    let root = pacer_linux::cpuset::detect().expect("a cpuset hierarchy");
    std::fs::read_dir(root.root())
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("pacer-"))
        .collect()
}

/// Threads that hold SCHED_DEADLINE or SCHED_FIFO and are named after this test's tasks.
fn our_rt_threads() -> Vec<String> {
    let mut out = Vec::new();
    for p in std::fs::read_dir("/proc").unwrap().filter_map(|e| e.ok()) {
        let Ok(tasks) = std::fs::read_dir(p.path().join("task")) else {
            continue;
        };
        for t in tasks.filter_map(|e| e.ok()) {
            let comm = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
            let comm = comm.trim();
            if !["a", "b", "c", "d"].contains(&comm) {
                continue;
            }
            let Ok(tid) = t.file_name().to_string_lossy().parse::<u32>() else {
                continue;
            };
            if let Ok(s) = pacer_linux::sched::get_policy(tid) {
                if !matches!(s, pacer_model::Policy::Other { .. }) {
                    out.push(format!("{tid} {comm} {s:?}"));
                }
            }
        }
    }
    out
}

fn check_machine_restored(base: i64, what: &str) {
    assert_eq!(leftover_cpusets(), Vec::<String>::new(), "{what}: cpusets left");
    assert_total_bw_back(base, what);
    assert_eq!(
        our_rt_threads(),
        Vec::<String>::new(),
        "{what}: threads keep a policy"
    );
}

#[test]
#[cfg_attr(
    not(pacer_privileged),
    ignore = "needs root: run as root or set PACER_REQUIRE_ROOT=1"
)]
fn each_configuration_runs_and_leaves_the_machine_as_it_was() {
    let _g = privileged();
    let dir = tempfile::tempdir().unwrap();
    let set = write_set(dir.path());
    let cal = common::calibration();
    for policy in ["g-edf", "c-edf", "p-edf", "g-rm", "c-rm", "p-rm"] {
        let base = baseline();
        let out = ok(pacer()
            .args([
                "run",
                "--json",
                "--cpus",
                "2",
                "--cluster-size",
                "2",
                "--duration",
                "1s",
            ])
            .args(["--policy", policy, "--calibration", &cal])
            .arg(&set));
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        let ts = &v["run"]["taskset"];
        assert_eq!(ts["policy"], policy);
        let jobs = v["run"]["jobs"].as_u64().unwrap();
        assert!(jobs >= 150, "{policy}: {jobs} jobs in 1 s");
        let tasks = ts["tasks"].as_array().unwrap();
        assert_eq!(tasks.len(), 4);
        for t in tasks {
            assert!(t["jobs"].as_u64().unwrap() > 0, "{policy}: {t}");
            assert!(t["utilisation"].as_f64().unwrap() > 0.0, "{policy}: {t}");
        }
        // No PMU on pacer's VM: said so, never a count of 0.
        let cm = &ts["cache_misses"];
        assert!(
            cm["status"] == "unavailable" && cm["reason"].as_str().is_some_and(|r| !r.is_empty())
                || cm["misses"].as_u64().is_some(),
            "{cm}"
        );
        let cpusets = ts["cpusets"].as_array().unwrap().len();
        let expected = match policy {
            "p-edf" | "p-rm" => 2,
            "c-edf" | "c-rm" => 1,
            _ => 0,
        };
        assert_eq!(cpusets, expected, "{policy}: {ts}");
        // Every thread took its policy (read back by the executor) and gave it back.
        for th in v["run"]["threads"].as_array().unwrap() {
            let want = if policy.ends_with("edf") {
                "deadline"
            } else {
                "fifo"
            };
            assert_eq!(th["policy_applied"]["policy"], want, "{policy}: {th}");
            assert_eq!(th["policy_at_exit"]["policy"], "other", "{policy}: {th}");
        }
        check_machine_restored(base, policy);
    }
}

#[test]
#[cfg_attr(
    not(pacer_privileged),
    ignore = "needs root: run as root or set PACER_REQUIRE_ROOT=1"
)]
fn sigterm_mid_run_removes_the_cpusets_and_the_reservations() {
    let _g = privileged();
    let dir = tempfile::tempdir().unwrap();
    let set = write_set(dir.path());
    let jobs = dir.path().join("jobs.csv");
    let cal = common::calibration();
    for policy in ["p-edf", "c-rm"] {
        let base = baseline();
        let mut child = pacer()
            .args(["run", "--cpus", "2", "--cluster-size", "2", "--duration", "60s"])
            .args(["--policy", policy, "--calibration", &cal, "--jobs"])
            .arg(&jobs)
            .arg(&set)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Mid-run: the cpusets exist and the threads hold their policies.
        let t0 = std::time::Instant::now();
        while leftover_cpusets().is_empty() || our_rt_threads().is_empty() {
            assert!(
                t0.elapsed() < Duration::from_secs(20),
                "{policy}: the run never started"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        std::thread::sleep(Duration::from_millis(500));
        signal(child.id(), libc::SIGTERM);
        let status = child.wait().unwrap();
        let mut err = String::new();
        std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err).unwrap();
        assert!(status.success(), "{policy}: {status:?}\n{err}");
        // A run ended by a signal is a normal end: its records are written.
        assert!(
            std::fs::read_to_string(&jobs).unwrap().lines().count() > 10,
            "{policy}"
        );
        check_machine_restored(base, &format!("{policy} after SIGTERM"));
    }
}
