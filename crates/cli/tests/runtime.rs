//! `pacer runtime check` on the example applications: their verdicts, exit statuses, the JSON
//! schema and the named reasons, with the numbers worked out by hand.

use std::path::PathBuf;
use std::process::{Command, Output};

use serde_json::Value;

fn example(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/runtime")
        .join(name)
}

fn check(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_pacer"))
        .args(["runtime", "check"])
        .args(args)
        .output()
        .expect("pacer runs")
}

fn json(name: &str) -> (i32, Value) {
    let path = example(name);
    let out = check(&[path.to_str().unwrap(), "--cpus", "2", "--json"]);
    let v: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    (out.status.code().unwrap(), v)
}

fn component<'a>(v: &'a Value, name: &str) -> &'a Value {
    v["components"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap()
}

#[test]
fn app_is_valid() {
    let (code, v) = json("app.toml");
    assert_eq!(code, 0, "{v:#}");
    assert_eq!(v["schema"], "pacer.runtime.check/1");
    assert_eq!(v["verdict"], "valid");
    // The mixer's reservation (1 ms / 10 ms, carry-in 9 ms) shares both CPUs:
    // sensor 1 + 1 → 1 + ⌈12/10⌉·1 = 3 ms; filter 2 + 1 + 1 → 2 + ⌈15/10⌉·(1 + 1) = 6 ms;
    // logger on CPU 1: 2 + ⌈13/10⌉·1 = 4 ms.
    assert_eq!(component(&v, "sensor")["response_ns"], 3_000_000);
    assert_eq!(component(&v, "filter")["response_ns"], 6_000_000);
    assert_eq!(component(&v, "logger")["response_ns"], 4_000_000);
    assert_eq!(component(&v, "mixer")["response_ns"], 10_000_000);
    // samples: W = 10 + 6 ms, ⌈(16 + 3)/10⌉ = 2; events: W = 50 + 4, ⌈(54 + 6)/10⌉ = 6.
    let ch = v["channels"].as_array().unwrap();
    assert_eq!(
        (ch[0]["messages"].as_u64(), ch[0]["window_ns"].as_u64()),
        (Some(2), Some(16_000_000))
    );
    assert_eq!(ch[1]["messages"], 6);
    assert_eq!(ch[2]["messages"], 3);
    // 20480 + 41216 + 13312 + 27904 bytes.
    assert_eq!(v["memory"]["total_bytes"], 102_912);
    assert_eq!(v["audio"][0]["burst_ns"], 10_000_000);
}

#[test]
fn app_text_table() {
    let path = example("app.toml");
    let out = check(&[path.to_str().unwrap(), "--cpus", "2"]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8(out.stdout).unwrap();
    for want in [
        "component",
        "filter",
        "≤ 6ms",
        "RTA with carry-in",
        "verdict: valid",
        "speaker",
        "SCHED_DEADLINE root domains",
    ] {
        assert!(text.contains(want), "{want:?} not in\n{text}");
    }
}

#[test]
fn unschedulable_names_the_filter() {
    let (code, v) = json("unschedulable.toml");
    assert_eq!(code, 1);
    assert_eq!(v["verdict"], "invalid");
    // 7 + 1 + 1 = 9 → 7 + ⌈18/10⌉·(1 + 1) = 11 ms > 10 ms.
    let viol = v["violations"].as_array().unwrap();
    assert_eq!(viol.len(), 1, "{viol:#?}");
    assert_eq!(viol[0]["kind"], "response_time");
    assert_eq!(viol[0]["component"], "filter");
    assert_eq!(viol[0]["deadline_ns"], 10_000_000);
    assert_eq!(viol[0]["interferers"], serde_json::json!(["sensor", "mixer"]));
    let path = example("unschedulable.toml");
    let text = String::from_utf8(check(&[path.to_str().unwrap(), "--cpus", "2"]).stdout).unwrap();
    assert!(text.contains("verdict: INVALID (1 violation(s))"), "{text}");
    assert!(
        text.contains("component filter: response time exceeds its deadline 10ms"),
        "{text}"
    );
}

#[test]
fn over_budget_names_memory_and_the_channel() {
    let (code, v) = json("over-budget.toml");
    assert_eq!(code, 1);
    let kinds: Vec<&str> = v["violations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["component_memory", "app_memory", "channel_capacity"]);
    let viol = &v["violations"];
    // filter: 32768 + 8192 + 1·64 = 41024 > 32768; all: 20480 + 41024 + 13312 + 27904.
    assert_eq!(
        (viol[0]["component"].as_str(), viol[0]["use_bytes"].as_u64()),
        (Some("filter"), Some(41_024))
    );
    assert_eq!(
        (viol[1]["use_bytes"].as_u64(), viol[1]["limit_bytes"].as_u64()),
        (Some(102_720), Some(65_536))
    );
    assert_eq!(
        (
            viol[2]["channel"].as_str(),
            viol[2]["messages"].as_u64(),
            viol[2]["capacity"].as_u64()
        ),
        (Some("samples"), Some(2), Some(1))
    );
}

#[test]
fn bad_manifest_names_file_and_key() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.toml");
    let text = std::fs::read_to_string(example("app.toml")).unwrap().replacen(
        "period = \"10ms\"",
        "period = \"10\"",
        1,
    );
    std::fs::write(&path, text).unwrap();
    let out = check(&[path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("bad.toml: `component[sensor].period`: expected a duration with a unit"),
        "{err}"
    );
    assert!(err.contains("found \"10\""), "{err}");
}

// ---- pacer runtime run ----

mod common;

use common::{assert_total_bw_back, baseline, pacer, privileged, signal};

fn run_json(args: &[&str]) -> (Option<i32>, Value, String) {
    let out = pacer()
        .args(["runtime", "run", "--json"])
        .args(args)
        .output()
        .expect("pacer runs");
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    let v = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (out.status.code(), v, err)
}

#[test]
fn run_refuses_an_invalid_application_before_anything_starts() {
    let path = example("unschedulable.toml");
    let (code, v, err) = run_json(&[path.to_str().unwrap(), "--duration", "1s"]);
    assert_eq!(code, Some(1), "{err}");
    assert_eq!(v, Value::Null, "no report: nothing ran");
    assert!(err.contains("FAIL") && err.contains("filter"), "{err}");
    assert!(err.contains("is not valid; nothing was started"), "{err}");
}

#[test]
fn run_on_plain_threads_reports_every_component() {
    let path = example("app.toml");
    let dir = tempfile::tempdir().unwrap();
    let jobs = dir.path().join("jobs.csv");
    let (code, v, err) = run_json(&[
        path.to_str().unwrap(),
        "--plain",
        "--duration",
        "500ms",
        "--jobs",
        jobs.to_str().unwrap(),
    ]);
    assert!(matches!(code, Some(0) | Some(2)), "{err}");
    assert_eq!(v["schema"], "pacer.runtime.run/1");
    assert_eq!(v["mode"], "plain");
    let sensor = component(&v, "sensor");
    assert_eq!(sensor["releases"], 50);
    assert_eq!(sensor["policy"], "SCHED_OTHER");
    assert_eq!(v["guard"], true, "the pacer binary installs the allocation guard");
    for c in v["components"].as_array().unwrap() {
        assert_eq!(
            c["allocations"]["rt_allocations"], 0,
            "built-in code allocates nothing: {c}"
        );
        assert_eq!(c["restored"], true);
        let causes = &c["miss_causes"];
        let by_cause: u64 = ["preempted", "started_late", "ran_long"]
            .iter()
            .map(|k| {
                causes[k]
                    .as_u64()
                    .unwrap_or_else(|| panic!("miss_causes.{k}: {c}"))
            })
            .sum();
        assert_eq!(
            by_cause,
            c["misses"].as_u64().unwrap(),
            "every miss has one cause: {c}"
        );
    }
    let rows = pacer_workload::jobs::read_jobs(&jobs).expect("a valid jobs CSV");
    // The same classification from the jobs CSV's own rows.
    let missed_rows = rows.iter().filter(|r| r.missed).count() as u64;
    assert_eq!(
        missed_rows,
        v["components"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["misses"].as_u64().unwrap())
            .sum::<u64>()
    );
    let total: u64 = v["components"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["releases"].as_u64().unwrap())
        .sum();
    assert_eq!(rows.len() as u64, total);
}

/// The SCHED_DEADLINE bandwidth the process holds and the policies of its threads, read from
/// the kernel while the run goes on.
fn policies_of(pid: u32) -> Vec<(String, String)> {
    let mut out = Vec::new();
    if let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) {
        for t in dir.flatten() {
            let tid: u32 = t.file_name().to_string_lossy().parse().unwrap_or(0);
            let comm = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
            if let Ok(p) = pacer_linux::sched::get_policy(tid) {
                out.push((comm.trim().to_string(), p.name().to_string()));
            }
        }
    }
    out
}

#[test]
#[cfg_attr(
    not(pacer_privileged),
    ignore = "needs root: run as root or set PACER_REQUIRE_ROOT=1"
)]
fn run_takes_the_manifest_policies_and_gives_everything_back() {
    let _g = privileged();
    let base = baseline();
    let path = example("app.toml");
    let child = pacer()
        .args(["runtime", "run", "--json", "--duration", "2s"])
        .arg(&path)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("pacer runs");
    // While it runs, the kernel shows the manifest's policies on the components' threads.
    std::thread::sleep(std::time::Duration::from_millis(800));
    let seen = policies_of(child.id());
    let policy = |name: &str| seen.iter().find(|(c, _)| c == name).map(|(_, p)| p.clone());
    assert_eq!(policy("sensor").as_deref(), Some("SCHED_FIFO"), "{seen:?}");
    assert_eq!(policy("logger").as_deref(), Some("SCHED_FIFO"), "{seen:?}");
    assert_eq!(policy("mixer").as_deref(), Some("SCHED_DEADLINE"), "{seen:?}");
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {err}"));
    assert_eq!(v["mode"], "realtime");
    assert_eq!(v["memory_locked"], true);
    assert_eq!(component(&v, "mixer")["policy"], "SCHED_DEADLINE 1ms/10ms/10ms");
    assert_eq!(component(&v, "sensor")["policy"], "SCHED_FIFO 80");
    for c in v["components"].as_array().unwrap() {
        assert_eq!(c["restored"], true, "{c}");
        assert!(c["releases"].as_u64().unwrap() > 0, "{c}");
    }
    assert_total_bw_back(base, "after pacer runtime run");
}

#[test]
#[cfg_attr(
    not(pacer_privileged),
    ignore = "needs root: run as root or set PACER_REQUIRE_ROOT=1"
)]
fn sigterm_ends_the_run_with_a_complete_report_and_nothing_left() {
    let _g = privileged();
    let base = baseline();
    let path = example("app.toml");
    let child = pacer()
        .args(["runtime", "run", "--json", "--duration", "30s"])
        .arg(&path)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("pacer runs");
    std::thread::sleep(std::time::Duration::from_millis(1000));
    assert!(policies_of(child.id()).iter().any(|(_, p)| p == "SCHED_DEADLINE"));
    signal(child.id(), libc::SIGTERM);
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(128 + libc::SIGTERM), "{err}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {err}"));
    assert_eq!(v["signal"], "SIGTERM");
    let elapsed = v["elapsed_ns"].as_u64().unwrap();
    assert!(elapsed < 5_000_000_000, "stopped early: {elapsed}");
    for c in v["components"].as_array().unwrap() {
        assert_eq!(c["restored"], true, "{c}");
    }
    assert_total_bw_back(base, "after SIGTERM to pacer runtime run");
}

#[test]
#[cfg_attr(
    not(pacer_privileged),
    ignore = "needs root: run as root or set PACER_REQUIRE_ROOT=1"
)]
fn an_unprivileged_user_is_told_to_use_sudo_or_plain_and_plain_runs() {
    use std::os::unix::process::CommandExt;
    let _g = privileged();
    let (uid, gid) = common::client_user();
    let path = example("messaging.toml");
    let out = pacer()
        .args(["runtime", "run", "--duration", "300ms"])
        .arg(&path)
        .uid(uid)
        .gid(gid)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("run with sudo, or --plain"), "{err}");
    assert!(err.contains("component `"), "names the component: {err}");
    let out = pacer()
        .args(["runtime", "run", "--plain", "--json", "--duration", "300ms"])
        .arg(&path)
        .uid(uid)
        .gid(gid)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(matches!(out.status.code(), Some(0) | Some(2)), "{err}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {err}"));
    assert_eq!(component(&v, "control")["releases"], 30);
    assert_eq!(v["memory_locked"], false);
}
