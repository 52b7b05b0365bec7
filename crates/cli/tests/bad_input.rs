//! Issue 13's careless-user cases, one test each: bad input gets a non-zero exit, no panic, and a
//! message that names the file or flag, the field and what is expected; work that cannot progress
//! and sizes taken from a parameter are refused before they hang or exhaust memory; nothing from
//! an input file reaches the terminal as a control sequence.

mod common;

use std::io::Write;
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use common::pacer;

/// Runs pacer with `args`, optionally feeding `stdin`, and kills it after 20 s: a hang is a
/// failure with a message, not a stuck test run.
fn run(args: &[&str], stdin: Option<&str>) -> Output {
    let mut child = pacer()
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run pacer");
    let mut input = child.stdin.take().unwrap();
    if let Some(s) = stdin {
        input.write_all(s.as_bytes()).unwrap();
    }
    drop(input);
    let end = Instant::now() + Duration::from_secs(20);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > end {
            let _ = child.kill();
            panic!("pacer {args:?} still running after 20 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

/// Asserts a failure whose standard error contains every one of `expect`, and no panic.
fn fails_with(out: &Output, expect: &[&str]) -> String {
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "exit 0; stderr: {err}");
    assert!(!err.contains("panicked"), "panic: {err}");
    for e in expect {
        assert!(err.contains(e), "expected {e:?} in: {err}");
    }
    err
}

fn file(dir: &tempfile::TempDir, name: &str, content: &str) -> String {
    let p = dir.path().join(name);
    std::fs::write(&p, content).unwrap();
    p.display().to_string()
}

const SET: &str = r#"{"tasks":[{"name":"a","wcet":"1ms","period":"10ms"}]}"#;

#[test]
fn a_bare_number_on_a_duration_flag_is_refused_with_the_units() {
    let dir = tempfile::tempdir().unwrap();
    let f = file(&dir, "set.json", SET);
    // `--duration 10` simulated 10 ns and printed 0 jobs with exit 0.
    let out = run(&["sim", &f, "--duration", "10"], None);
    fails_with(
        &out,
        &["--duration", "`10` has no unit: write 10s, 10ms, 10us or 10ns"],
    );
    // `--duration 1 s` said "the subcommand 's' cannot be used…".
    let out = run(&["sim", &f, "--duration", "1", "s"], None);
    fails_with(
        &out,
        &["--duration 1 s: write the unit without a space: --duration 1s"],
    );
    // Zero needs no unit.
    let out = run(&["sim", &f, "--duration", "10ms", "--wakeup-latency", "0"], None);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn a_task_set_duration_without_a_unit_names_the_field() {
    let dir = tempfile::tempdir().unwrap();
    for (wcet, msg) in [
        (r#""3""#, "`3` has no unit: write 3s, 3ms, 3us or 3ns"),
        ("3", r#"3 has no unit: write "3ms""#),
        ("2.5", "2.5 has no unit"),
    ] {
        let f = file(
            &dir,
            "set.json",
            &format!(r#"{{"tasks":[{{"wcet":{wcet},"period":"10ms"}}]}}"#),
        );
        fails_with(&run(&["analyze", &f], None), &["set.json", "tasks[0].wcet", msg]);
    }
}

#[test]
fn a_wrong_type_in_valid_json_names_the_field_not_malformed_json() {
    let dir = tempfile::tempdir().unwrap();
    let f = file(
        &dir,
        "set.json",
        r#"{"tasks":[{"wcet":"1ms","period":"10ms","arrival":1}]}"#,
    );
    let err = fails_with(
        &run(&["analyze", &f], None),
        &["tasks[0].arrival", r#"expected "periodic" or "sporadic""#],
    );
    assert!(!err.contains("malformed JSON"), "{err}");
}

#[test]
fn an_rt_app_file_given_to_analyze_says_what_it_is() {
    let ex = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/rtapp-periodic.json");
    let err = fails_with(
        &run(&["analyze", ex], None),
        &["this is an rt-app workload, not a task set", "pacer sim"],
    );
    assert!(!err.contains("key must be a string"), "{err}");
}

#[test]
fn an_rt_app_file_pinning_a_missing_cpu_counts_the_cpus_right() {
    let dir = tempfile::tempdir().unwrap();
    let f = file(
        &dir,
        "pin.json",
        r#"{"global":{"duration":1},"tasks":{"a":{"cpus":[1],"loop":10,"run":1000,"timer":{"ref":"t","period":10000}}}}"#,
    );
    let err = fails_with(
        &run(&["sim", &f], None),
        &["names CPU 1", "has 1 CPU (0)", "simulate 2 CPUs with --cpus"],
    );
    assert!(!err.contains("0..1"), "{err}");
}

#[test]
fn task_set_options_on_an_rt_app_file_are_refused_not_ignored() {
    let ex = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/rtapp-periodic.json");
    fails_with(
        &run(&["sim", ex, "--policy", "p-rm", "--duration", "100ms"], None),
        &["--policy", "only for task sets"],
    );
    fails_with(
        &run(&["sim", ex, "--exec", "uniform:0.5", "--reclaim"], None),
        &["--exec, --reclaim", "only for task sets"],
    );
}

#[test]
fn gen_without_a_task_count_names_the_flag() {
    let out = run(&["gen", "-u", "2", "--seed", "1"], None);
    let err = fails_with(&out, &["-n/--tasks: required with --utilizations randfixedsum"]);
    assert!(!err.contains("n = none"), "{err}");
}

#[test]
fn root_only_commands_say_they_need_root() {
    // Run as nobody: as root these commands would change the machine.
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        for cmd in [&["cpuset", "--cpus", "1", "--", "true"][..], &["doctor"]] {
            fails_with(&run(cmd, None), &["needs root", "sudo"]);
        }
        return;
    }
    use std::os::unix::process::CommandExt;
    // The binary is usually under a root-only home: run a copy nobody can read.
    let dir = tempfile::tempdir().unwrap();
    let exe = dir.path().join("pacer");
    std::fs::copy(env!("CARGO_BIN_EXE_pacer"), &exe).unwrap();
    let mut perms = std::fs::metadata(dir.path()).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(dir.path(), perms).unwrap();
    for cmd in [&["cpuset", "--cpus", "1", "--", "true"][..], &["doctor"]] {
        let out = std::process::Command::new(&exe)
            .args(cmd)
            .uid(65534)
            .gid(65534)
            .output()
            .unwrap();
        let err = fails_with(&out, &["needs root", "sudo"]);
        assert!(!err.contains("Permission denied"), "{err}");
    }
}

#[test]
fn sim_audio_reads_a_scenario_from_standard_input() {
    let out = run(
        &["sim", "audio", "-", "--json"],
        Some("duration = \"3s\"\n[pattern]\nkind = \"list\"\nvoices = [5, 50]\n"),
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let err = fails_with(&run(&["sim", "audio", "-"], Some("nonsense = 1\n")), &["<stdin>"]);
    assert!(!err.contains("-: cannot read"), "{err}");
}

#[test]
fn an_rt_app_loop_that_takes_no_time_is_refused_not_simulated_for_ever() {
    let dir = tempfile::tempdir().unwrap();
    for (name, task) in [
        ("sleep0", r#"{"loop":-1,"sleep":0}"#),
        ("yield", r#"{"loop":-1,"yield":""}"#),
        ("run0", r#"{"loop":-1,"run":0}"#),
    ] {
        let f = file(
            &dir,
            "w.json",
            &format!(r#"{{"global":{{"duration":1}},"tasks":{{"{name}":{task}}}}}"#),
        );
        let jobs = dir.path().join("jobs.csv").display().to_string();
        fails_with(
            &run(&["sim", &f, "--jobs", &jobs], None),
            &[
                name,
                "loop forever through events that take no time",
                "no simulated time",
            ],
        );
    }
    // A bounded timeless phase before real work is fine.
    let f = file(
        &dir,
        "ok.json",
        r#"{"global":{"duration":1},"tasks":{"t":{"phases":{"p0":{"loop":1000,"yield":""},"p1":{"loop":10,"run":100,"sleep":1000}}}}}"#,
    );
    let out = run(&["sim", &f], None);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn period_window_and_kmax_are_bounded_by_the_input() {
    let dir = tempfile::tempdir().unwrap();
    let trace: String = (0..2000).map(|i| format!("{:.6}\n", i as f64 * 0.01)).collect();
    let f = file(&dir, "ts.txt", &trace);
    // --window 1ns tried to allocate 191 GB; 10ns was OOM-killed at 24 GB.
    for w in ["1ns", "10ns"] {
        fails_with(
            &run(&["period", &f, "--window", w], None),
            &["--window", "more than its 2000 wake-ups", "at least"],
        );
    }
    // --kmax 10⁹ ran for ever.
    fails_with(
        &run(&["period", &f, "--kmax", "1000000000"], None),
        &["k_max = 1000000000", "expected 1 to 100"],
    );
    let out = run(&["period", &f, "--window", "1s"], None);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn sim_audio_refuses_voices_beyond_any_use() {
    // u64::MAX voices reported a used bandwidth of 1.4e13.
    fails_with(
        &run(
            &["sim", "audio", "-"],
            Some("[pattern]\nkind = \"list\"\nvoices = [18446744073709551615]\n"),
        ),
        &["pattern", "expected at most 3360"],
    );
    // 584 years were accepted, and sized per-callback arrays from it.
    fails_with(
        &run(&["sim", "audio", "--duration", "100000s"], None),
        &["duration", "expected at most 3600s"],
    );
}

#[test]
fn names_from_input_files_cannot_drive_the_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let f = file(
        &dir,
        "esc.json",
        "{\"name\":\"s\\u001b[31m\",\"tasks\":[{\"name\":\"x\\u001b[2Jy\",\"wcet\":\"1ms\",\"period\":\"10ms\"}]}",
    );
    let j1 = dir.path().join("a.csv").display().to_string();
    let j2 = dir.path().join("b.csv").display().to_string();
    for args in [
        vec!["analyze", &f],
        vec!["sim", &f, "--duration", "100ms", "--jobs", &j1],
        vec!["sim", &f, "--duration", "100ms", "--jobs", &j2, "--seed", "2"],
        vec!["compare", &j1, &j2],
    ] {
        let out = run(&args, None);
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let all = [out.stdout, out.stderr].concat();
        assert!(
            !all.contains(&0x1b),
            "{args:?} printed an escape: {}",
            String::from_utf8_lossy(&all)
        );
        assert!(String::from_utf8_lossy(&all).contains("x\\e[2Jy"), "{args:?}");
    }
    // Error messages too.
    let dup = file(
        &dir,
        "dup.json",
        "{\"tasks\":[{\"name\":\"x\\u001b[2J\",\"wcet\":\"1ms\",\"period\":\"10ms\"},{\"name\":\"x\\u001b[2J\",\"wcet\":\"1ms\",\"period\":\"10ms\"}]}",
    );
    let out = run(&["analyze", &dup], None);
    let err = fails_with(&out, &["appears twice"]);
    assert!(!err.contains('\u{1b}'), "{err}");
}

#[test]
fn numeric_options_name_the_flag_and_the_range() {
    let dir = tempfile::tempdir().unwrap();
    let f = file(&dir, "set.json", SET);
    for (args, expect) in [
        // 10⁹ trials aborted allocating 168 GB.
        (
            vec!["bench", "period", "--trials", "1000000000"],
            "--trials <TRIALS>': 1000000000 is not in 1..=100000",
        ),
        // 10⁹ task sets ran until the disk filled.
        (
            vec!["gen", "-n", "3", "-u", "0.5", "--count", "1000000000"],
            "--count <COUNT>': 1000000000 is not in 1..=100000",
        ),
        // The closed-loop table simulates trials × loads × horizon: bounded.
        (
            vec!["bench", "period", "--horizon", "7200s"],
            "--horizon 7200s: expected a duration from 0s (no closed-loop table) to 3600s",
        ),
        (
            vec!["bench", "exec", "--repeats", "0"],
            "--repeats <REPEATS>': 0 is not in 1..=1000",
        ),
        (
            vec!["analyze", &f, "--rt-period-us", "99999999999999"],
            "is not in 1..=2147483647",
        ),
        (
            vec!["sim", &f, "--work-scale", "1e300"],
            "--work-scale 1e300: expected a factor in (0, 1000]",
        ),
        // Negative numbers reach the range check instead of "unexpected argument '-1'".
        (vec!["gen", "-n", "3", "-u", "-1"], "utilization = -1"),
        (
            vec!["gen", "-n", "3", "-u", "0.5", "--util-min", "-1"],
            "expected 0 ≤ min ≤ max ≤ 1",
        ),
    ] {
        fails_with(&run(&args, None), &[expect]);
    }
}

/// `nodes_membind`: a node this machine does not have is refused before the run by `pacer run`
/// and by `pacer sim` (whose machine has node 0 only); node 0 runs in both.
#[test]
fn memory_binding_to_a_missing_node_is_refused_before_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let bad = file(
        &dir,
        "bad.json",
        r#"{"global":{"duration":1},"tasks":{"t":{"loop":2,"run":100,"nodes_membind":[1000]}}}"#,
    );
    let out = run(&["run", "--calibration", "20", &bad], None);
    fails_with(&out, &["NUMA node 1000", "online nodes"]);
    let out = run(&["sim", &bad], None);
    fails_with(&out, &["NUMA node 1000", "one memory node"]);
    let good = file(
        &dir,
        "good.json",
        r#"{"global":{"duration":1},"tasks":{"t":{"loop":2,"phases":{"p":{"run":100,"nodes_membind":[0]}}}}}"#,
    );
    let logs = dir.path().to_str().unwrap();
    for args in [
        vec!["run", "--calibration", "20", "--log-dir", logs, &good],
        vec!["sim", &good],
    ] {
        let out = run(&args, None);
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
