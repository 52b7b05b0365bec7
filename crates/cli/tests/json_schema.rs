//! Every `--json` document carries `"schema": "pacer.<command>/<version>"` and gives times as
//! integer `*_ns` fields, never as text with a unit, except inside the input documents some
//! outputs embed (docs/formats/json.md). Runs the commands that need neither root nor hardware.

use std::process::Command;

use serde_json::Value;

fn pacer(args: &[&str]) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_pacer"))
        .args(args)
        .output()
        .expect("pacer runs");
    assert!(
        out.status.success() || out.status.code() == Some(2),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{args:?}: not JSON: {e}"))
}

/// Paths of string values that look like durations with a unit ("10ms", "1.5s").
fn duration_texts(v: &Value, path: &str, found: &mut Vec<String>) {
    match v {
        Value::Object(m) => m
            .iter()
            .for_each(|(k, x)| duration_texts(x, &format!("{path}.{k}"), found)),
        Value::Array(a) => a
            .iter()
            .for_each(|x| duration_texts(x, &format!("{path}[]"), found)),
        Value::String(s) => {
            let digits = s.trim_end_matches(|c: char| c.is_alphabetic() || c == 'µ');
            let unit = &s[digits.len()..];
            if !digits.is_empty()
                && digits.chars().all(|c| c.is_ascii_digit() || c == '.')
                && ["ns", "us", "µs", "ms", "s", "min", "h"].contains(&unit)
            {
                found.push(path.to_string());
            }
        }
        _ => {}
    }
}

#[track_caller]
fn check(args: &[&str], schema: &str, embedded: &[&str]) {
    let v = pacer(args);
    assert_eq!(v["schema"], schema, "{args:?}");
    let mut found = Vec::new();
    duration_texts(&v, "", &mut found);
    found.retain(|p| !embedded.iter().any(|e| p.starts_with(e)));
    assert!(found.is_empty(), "{args:?}: times as text at {found:?}");
}

fn examples(name: &str) -> String {
    format!("{}/../../examples/{name}", env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn every_document_has_its_schema_and_integer_times() {
    let set = examples("textbook.json");
    check(&["analyze", &set, "--json"], "pacer.analyze/1", &[]);
    check(
        &[
            "sim",
            &set,
            "--cpus",
            "1",
            "--policy",
            "g-edf",
            "--duration",
            "200ms",
            "--json",
        ],
        "pacer.sim/1",
        &[],
    );
    check(
        &["sim", "audio", "--duration", "3s", "--json"],
        "pacer.sim.audio/1",
        &[".scenario"],
    );
    check(&["demo", "--json"], "pacer.demo/1", &[".taskset"]);
    check(
        &["bench", "stalls", "-d", "50ms", "--cpus", "0", "--json"],
        "pacer.bench.stalls/1",
        &[],
    );
    check(
        &["runtime", "check", &examples("runtime/app.toml"), "--json"],
        "pacer.runtime.check/1",
        &[],
    );
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.csv");
    let b = dir.path().join("b.csv");
    for (p, policy) in [(&a, "g-edf"), (&b, "g-rm")] {
        pacer(&[
            "sim",
            &set,
            "--cpus",
            "1",
            "--policy",
            policy,
            "--duration",
            "200ms",
            "--json",
            "--jobs",
            p.to_str().unwrap(),
        ]);
    }
    check(
        &["compare", a.to_str().unwrap(), b.to_str().unwrap(), "--json"],
        "pacer.compare/1",
        &[],
    );
}

#[test]
fn the_check_sees_times_written_as_text() {
    // The detector the test above relies on, on a document that breaks the rule.
    let v: Value = serde_json::json!({"a": {"b": ["10ms", 5]}, "c": "1.5s", "d": "name", "e": "3"});
    let mut found = Vec::new();
    duration_texts(&v, "", &mut found);
    assert_eq!(found, vec![".a.b[]".to_string(), ".c".to_string()]);
}
