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
