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
    assert_eq!(
        rta["per_task_ns"],
        serde_json::json!([3_000_000, 6_000_000, 20_000_000])
    );
}

#[test]
fn gen_is_reproducible_and_records_its_seed() {
    let a = pacer(&["gen", "-n", "6", "-u", "0.8", "--seed", "7"]);
    let b = pacer(&["gen", "-n", "6", "-u", "0.8", "--seed", "7"]);
    assert!(a.status.success(), "{}", text(&a.stderr));
    assert_eq!(a.stdout, b.stdout);
    let set = pacer_model::parse_taskset(&text(&a.stdout), "gen").unwrap();
    assert_eq!(set.len(), 6);
    assert!((set.utilization() - 0.8).abs() < 1e-6);
    let g = set.generator.unwrap();
    assert_eq!(g.seed, Some(7));
    assert_eq!(g.parameters["utilizations"]["method"], "randfixedsum");
    assert!(g.command.unwrap().contains("--seed 7"));
    let c = pacer(&["gen", "-n", "6", "-u", "0.8", "--seed", "8"]);
    assert_ne!(a.stdout, c.stdout);
}

#[test]
fn gen_without_seed_reports_the_one_it_used() {
    let out = pacer(&["gen", "-n", "4", "-u", "0.5"]);
    assert!(out.status.success());
    let err = text(&out.stderr);
    let seed: u64 = err.rsplit("using seed ").next().unwrap().trim().parse().unwrap();
    let set = pacer_model::parse_taskset(&text(&out.stdout), "gen").unwrap();
    assert_eq!(set.generator.unwrap().seed, Some(seed));
}

#[test]
fn gen_many_into_a_directory() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("sets");
    let o = out_dir.display().to_string();
    let out = pacer(&[
        "gen",
        "--recipe",
        "rm-vs-edf",
        "--cpus",
        "4",
        "--x",
        "3",
        "--r",
        "0.7",
        "--count",
        "3",
        "--seed",
        "1",
        "-o",
        &o,
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let mut seeds = Vec::new();
    for k in 0..3 {
        let set = pacer_model::read_taskset(&out_dir.join(format!("taskset-{k:03}.json"))).unwrap();
        assert_eq!(set.len(), 12);
        assert!((set.utilization() - 2.8).abs() < 1e-4, "{}", set.utilization());
        assert!(set
            .tasks
            .iter()
            .all(|t| t.wcet >= pacer_model::Duration::from_us(50)));
        seeds.push(set.generator.unwrap().seed.unwrap());
    }
    seeds.dedup();
    assert_eq!(seeds.len(), 3);
    assert_clean_error(
        &pacer(&["gen", "-n", "4", "-u", "1", "--count", "2"]),
        &["--output DIR"],
    );
}

#[test]
fn gen_rejects_bad_parameters() {
    assert_clean_error(&pacer(&["gen", "-n", "4"]), &["--util", "required"]);
    assert_clean_error(
        &pacer(&["gen", "-n", "3", "-u", "5"]),
        &["generating", "s = 5", "expected"],
    );
    assert_clean_error(
        &pacer(&[
            "gen",
            "-n",
            "3",
            "-u",
            "1",
            "--period-min",
            "100ms",
            "--period-max",
            "10ms",
        ]),
        &["period"],
    );
    assert_clean_error(
        &pacer(&["gen", "-n", "3", "-u", "1", "--periods", "weekly"]),
        &["--periods", "log-uniform"],
    );
    for bad in [
        vec!["gen", "-n", "3", "-u", "1", "--utilizations", "magic"],
        vec!["gen", "-n", "3", "-u", "1", "--deadlines", "constrained:2..3"],
        vec!["gen", "-n", "3", "-u", "1", "--period-min", "10 parsecs"],
    ] {
        let out = pacer(&bad);
        assert_eq!(out.status.code(), Some(2), "{bad:?}: {}", text(&out.stderr));
        assert!(!text(&out.stderr).contains("panicked"));
    }
}

#[test]
fn gen_pipes_into_analyze_and_demo_runs() {
    let g = pacer(&[
        "gen",
        "--recipe",
        "rm-vs-edf",
        "--cpus",
        "4",
        "--x",
        "2",
        "--r",
        "0.6",
        "--seed",
        "3",
    ]);
    assert!(g.status.success());
    let a = pacer_stdin(
        &[
            "analyze",
            "-",
            "--cpus",
            "4",
            "--cluster-size",
            "2",
            "--json",
            "--milp-time-limit",
            "2s",
        ],
        &text(&g.stdout),
    );
    assert!(a.status.success(), "{}", text(&a.stderr));
    let v: serde_json::Value = serde_json::from_slice(&a.stdout).unwrap();
    assert_eq!(v["seed"], 3);
    let ids: Vec<&str> = v["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap())
        .collect();
    for id in [
        "g-edf/gfb",
        "g-edf/bcl-iterative",
        "g-dm/rta",
        "p-edf/ffd",
        "p-dm/ilp",
        "c-edf/ilp",
        "linux/sched_deadline",
    ] {
        assert!(ids.contains(&id), "{id} missing from {ids:?}");
    }
    let d = pacer(&["demo", "--json"]);
    assert!(d.status.success(), "{}", text(&d.stderr));
    let v: serde_json::Value = serde_json::from_slice(&d.stdout).unwrap();
    assert!(v["analysis"]["results"].as_array().unwrap().len() > 10);
    let sims = v["simulations"].as_array().unwrap();
    assert_eq!(sims.len(), 6);
    assert!(sims.iter().all(|s| s["summary"]["jobs"].as_u64().unwrap() > 0));
}

#[test]
fn sim_runs_a_task_set_and_writes_jobs_and_trace() {
    let dir = tempfile::tempdir().unwrap();
    let jobs = dir.path().join("jobs.csv").display().to_string();
    let trace = dir.path().join("trace.json").display().to_string();
    let f = examples().join("textbook.json").display().to_string();
    let out = pacer(&[
        "sim",
        &f,
        "--policy",
        "g-rm",
        "--duration",
        "200ms",
        "--jobs",
        &jobs,
        "--trace",
        &trace,
        "--json",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["run"]["seed"], 1);
    assert_eq!(v["run"]["policy"], "g-rm");
    // Textbook set under RM: response times 3, 6, 20 ms and no misses.
    let per_task = v["summary"]["per_task"].as_array().unwrap();
    assert_eq!(per_task.len(), 3);
    assert_eq!(v["summary"]["misses"], 0);
    let csv = std::fs::read_to_string(&jobs).unwrap();
    let mut lines = csv.lines();
    assert!(lines.next().unwrap().starts_with("task,job,release_ns"));
    let c_rows: Vec<&str> = lines.filter(|l| l.starts_with("c,")).collect();
    assert_eq!(c_rows.len(), 10, "c releases every 20 ms for 200 ms");
    assert!(
        c_rows[0].contains(",20000000,"),
        "first job of c responds in 20 ms: {}",
        c_rows[0]
    );
    let t: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&trace).unwrap()).unwrap();
    let events = t["traceEvents"].as_array().unwrap();
    assert!(events.iter().any(|e| e["ph"] == "X" && e["name"] == "c"));
    assert!(events
        .iter()
        .any(|e| e["ph"] == "M" && e["args"]["name"] == "CPUs"));
}

#[test]
fn sim_is_reproducible_and_takes_rtapp_files() {
    let f = examples().join("bench10.json").display().to_string();
    let args = [
        "sim",
        &f,
        "--cpus",
        "2",
        "--exec",
        "uniform:0.5",
        "--seed",
        "3",
        "--duration",
        "2s",
        "--json",
    ];
    let strip = |o: Output| {
        let mut v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        v["run"]["wall_seconds"] = 0.into();
        v["run"]["jobs_per_wall_second"] = 0.into();
        v["run"]["events_per_wall_second"] = 0.into();
        v
    };
    assert_eq!(strip(pacer(&args)), strip(pacer(&args)));
    let rtapp = examples().join("rtapp-periodic.json").display().to_string();
    let out = pacer(&["sim", &rtapp, "--cpus", "2", "--duration", "1s"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("jobs"));
}

#[test]
fn sim_rejects_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    let f = examples().join("textbook.json").display().to_string();
    assert_clean_error(
        &pacer(&["sim", &f, "--policy", "c-edf", "--cpus", "4"]),
        &["--cluster-size"],
    );
    assert_clean_error(
        &pacer(&["sim", &f, "--policy", "p-edf", "--cpus", "1", "--assign", "zz"]),
        &["--assign"],
    );
    assert_clean_error(&pacer(&["sim", &f, "--duration", "0s"]), &["--duration"]);
    assert_clean_error(
        &pacer(&["sim", &f, "--policy", "g-rm", "--reclaim"]),
        &["--reclaim"],
    );
    let bad = write_tmp(
        &dir,
        "bad-rtapp.json",
        r#"{"tasks": {"t": {"policy": "SCHED_FIFO", "priority": 200, "run": 1000}}}"#,
    );
    assert_clean_error(&pacer(&["sim", &bad]), &["bad-rtapp.json", "priority"]);
    let out = pacer(&["sim", &f, "--policy", "x-edf"]);
    assert_eq!(out.status.code(), Some(2));
    let unwritable = pacer(&[
        "sim",
        &f,
        "--duration",
        "10ms",
        "--jobs",
        "/nonexistent/dir/jobs.csv",
    ]);
    assert_clean_error(&unwritable, &["/nonexistent/dir/jobs.csv"]);
}

fn adapt_fixture(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../adapt/tests/fixtures")
        .join(name)
        .display()
        .to_string()
}

#[test]
fn period_detects_a_recorded_trace_and_rejects_bad_ones() {
    let f = adapt_fixture("perf-sched-wakeup.txt");
    let out = pacer(&["period", &f, "--comm", "mplayer", "--json"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let s = v.to_string();
    assert!(s.contains("period"), "{s}");
    let human = pacer(&["period", &f, "--comm", "mplayer"]);
    assert!(text(&human.stdout).contains("33.3"), "{}", text(&human.stdout));
    let bad = adapt_fixture("perf-malformed.txt");
    assert_clean_error(&pacer(&["period", &bad]), &["perf-malformed.txt:5", "expected"]);
    assert_clean_error(
        &pacer(&["period", "/nonexistent/trace.txt"]),
        &["/nonexistent/trace.txt"],
    );
}

#[test]
fn bench_period_measures_and_reports() {
    let out = pacer(&[
        "bench",
        "period",
        "--trials",
        "2",
        "--windows",
        "1s",
        "--loads",
        "0,0.3",
        "--json",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["window_sweep"][0]["within_1pct"], 1.0);
    assert_eq!(v["load_sweep"].as_array().unwrap().len(), 2);
    assert_clean_error(&pacer(&["bench", "period", "--loads", "1.5"]), &["--loads"]);
}

#[test]
fn bench_stalls_spins_the_cpus_asked() {
    let out = pacer(&["bench", "stalls", "-d", "100ms", "--cpus", "0", "--json"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["duration_ns"], 100_000_000);
    let cpus = v["cpus"].as_array().unwrap();
    assert_eq!(cpus.len(), 1);
    assert_eq!(cpus[0]["cpu"], 0);
    assert!(cpus[0]["reads"].as_u64().unwrap() > 1_000, "{v}");
    let out = pacer(&["bench", "stalls", "-d", "100ms"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("STALLED MS"), "{}", text(&out.stdout));
    // A malformed list is a usage error (clap's status 2).
    let out = pacer(&["bench", "stalls", "--cpus", "0-"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("--cpus"), "{}", text(&out.stderr));
    assert_clean_error(&pacer(&["bench", "stalls", "--cpus", "1023"]), &["CPU 1023"]);
}
