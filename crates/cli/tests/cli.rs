//! End-to-end tests of the `pacer` binary: exit codes, error messages, output shapes.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn pacer(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_pacer"))
        .args(args)
        .output()
        .expect("run pacer")
}

fn pacer_stdin(args: &[&str], input: &str) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_pacer"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    child.wait_with_output().unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples")
}

fn write_tmp(dir: &tempfile::TempDir, name: &str, content: &str) -> String {
    let p = dir.path().join(name);
    std::fs::write(&p, content).unwrap();
    p.display().to_string()
}

/// Bad input: non-zero exit, no panic, and a message naming the file, the field and the expectation.
fn assert_clean_error(out: &Output, needles: &[&str]) {
    let err = text(&out.stderr);
    assert!(!out.status.success(), "expected failure, stderr: {err}");
    assert_eq!(out.status.code(), Some(1), "stderr: {err}");
    assert!(!err.contains("panicked"), "{err}");
    for n in needles {
        assert!(err.contains(n), "stderr lacks `{n}`: {err}");
    }
    assert!(
        out.stdout.is_empty(),
        "no partial output on error: {}",
        text(&out.stdout)
    );
}

#[test]
fn bad_task_sets_give_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        (
            "missing.json",
            r#"{"tasks":[{"wcet":"1ms"}]}"#,
            vec!["missing.json", "tasks[0].period", "missing field"],
        ),
        (
            "negative.json",
            r#"{"tasks":[{"wcet":"1ms","period":"-10ms"}]}"#,
            vec!["negative.json", "tasks[0].period", "≥ 0"],
        ),
        (
            "cd.json",
            r#"{"tasks":[{"wcet":"6ms","period":"10ms","deadline":"5ms"}]}"#,
            vec!["tasks[0].wcet", "C ≤ D"],
        ),
        (
            "unit.json",
            r#"{"tasks":[{"wcet":"1 fortnight","period":"10ms"}]}"#,
            vec!["tasks[0].wcet", "expected one of ns"],
        ),
        (
            "malformed.json",
            "{\"tasks\": [\n  {\"wcet\": \"1ms\" \"period\": \"2ms\"}]}",
            vec!["malformed.json", "malformed JSON", "line 2"],
        ),
    ];
    for (name, body, needles) in cases {
        let f = write_tmp(&dir, name, body);
        assert_clean_error(&pacer(&["analyze", &f]), &needles);
    }
    assert_clean_error(
        &pacer(&["analyze", "/nonexistent/set.json"]),
        &["/nonexistent/set.json", "cannot read"],
    );
}

#[test]
fn bad_options_are_rejected() {
    let f = examples().join("textbook.json").display().to_string();
    assert_clean_error(
        &pacer(&["analyze", &f, "--cpus", "4", "--cluster-size", "3"]),
        &["--cluster-size", "divisor"],
    );
    assert_clean_error(
        &pacer(&["analyze", &f, "--fair-server", "50ms"]),
        &["RUNTIME/PERIOD"],
    );
    // clap's own usage errors exit with 2.
    let out = pacer(&["analyze", &f, "--cpus", "0"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn textbook_uniprocessor_table() {
    let f = examples().join("textbook.json").display().to_string();
    let out = pacer(&["analyze", &f]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let s = text(&out.stdout);
    assert!(s.contains("QPA"), "{s}");
    assert!(s.contains("20ms"), "RTA response time of c must be printed: {s}");
}

#[test]
fn json_output_and_stdin() {
    let body = std::fs::read_to_string(examples().join("textbook.json")).unwrap();
    let out = pacer_stdin(&["analyze", "-", "--json"], &body);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows = v["results"].as_array().unwrap();
    let rta = rows.iter().find(|r| r["id"] == "rm/rta").unwrap();
    assert_eq!(rta["verdict"], "schedulable");
    assert_eq!(rta["per_task"], serde_json::json!(["3ms", "6ms", "20ms"]));
}
