//! `pacer sim --report` and `pacer compare --report` end to end: the page parses as XML, every
//! SVG has data (paths, polylines or rectangles), the tasks are named, the notes say what could
//! not be drawn, and the output-file rules hold (an input is never overwritten, nothing is
//! written when the command fails).

use std::path::Path;
use std::process::{Command, Output};

fn pacer(args: &[&str], dir: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_pacer"))
        .args(args)
        .current_dir(dir)
        .output()
        .expect("runs pacer")
}

fn ok(o: &Output) {
    assert!(
        o.status.success(),
        "pacer failed: {}\n{}",
        String::from_utf8_lossy(&o.stderr),
        String::from_utf8_lossy(&o.stdout)
    );
}

/// Parses the page and checks every SVG draws data; returns the number of SVGs.
fn check_page(html: &str) -> usize {
    let x = pacer_testkit::html::xhtml(html);
    let doc = roxmltree::Document::parse(&x).unwrap_or_else(|e| panic!("report is not well-formed: {e}"));
    let svgs: Vec<_> = doc
        .descendants()
        .filter(|n| n.tag_name().name() == "svg")
        .collect();
    for svg in &svgs {
        let data = svg
            .descendants()
            .filter(|n| match n.tag_name().name() {
                "polyline" => n.attribute("points").is_some_and(|p| p.contains(' ')),
                "path" => n
                    .attribute("d")
                    .is_some_and(|d| d.contains("h0") || d.contains('V')),
                // Data rectangles are 16 px bars; the background and legend swatches are not.
                "rect" => n.attribute("height") == Some("16"),
                _ => false,
            })
            .count();
        assert!(data > 0, "an SVG without data: {:?}", svg.attribute("aria-label"));
    }
    assert!(!html.contains("NaN") && !html.contains("<script"));
    svgs.len()
}

const SET: &str = r#"{ "tasks": [
  { "name": "alpha", "wcet": "3ms", "period": "7ms" },
  { "name": "beta", "wcet": "3ms", "period": "12ms" },
  { "name": "gamma", "wcet": "5ms", "period": "20ms" }
] }"#;

#[test]
fn sim_report_has_every_figure_with_data() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("set.json"), SET).unwrap();
    let o = pacer(
        &[
            "sim",
            "set.json",
            "--cpus",
            "2",
            "--policy",
            "g-edf",
            "--duration",
            "1s",
            "--json",
            "--jobs",
            "jobs.csv",
            "--report",
            "r.html",
        ],
        tmp.path(),
    );
    ok(&o);
    // --json still prints its JSON alone on standard output.
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON on stdout");
    assert_eq!(v["run"]["seed"], 1);
    assert!(tmp.path().join("jobs.csv").exists());
    let html = std::fs::read_to_string(tmp.path().join("r.html")).unwrap();
    // Response CDFs, laxity histogram, misses, migrations, switches, timeline.
    assert_eq!(check_page(&html), 6);
    for name in ["alpha", "beta", "gamma", "CPU 0", "CPU 1"] {
        assert!(html.contains(name), "{name} missing");
    }
    assert!(html.contains("g-edf") && html.contains("CPU timeline, first 100ms"));
    // The summary table is the one the text output prints.
    assert!(html.contains(">p99.9_us</th>") && html.contains(">migration rate (/task, /task/s)<"));
}

#[test]
fn many_tasks_draw_the_eight_worst_and_say_how_many_were_left_out() {
    let tmp = tempfile::tempdir().unwrap();
    let tasks: Vec<String> = (0..11)
        .map(|i| {
            format!(
                r#"{{ "name": "task{i:02}", "wcet": "1ms", "period": "{}ms" }}"#,
                5 + i
            )
        })
        .collect();
    std::fs::write(
        tmp.path().join("set.json"),
        format!(r#"{{ "tasks": [{}] }}"#, tasks.join(",")),
    )
    .unwrap();
    let o = pacer(
        &[
            "sim",
            "set.json",
            "--cpus",
            "2",
            "--duration",
            "500ms",
            "--report",
            "r.html",
        ],
        tmp.path(),
    );
    ok(&o);
    let html = std::fs::read_to_string(tmp.path().join("r.html")).unwrap();
    check_page(&html);
    assert!(
        html.contains("The 8 tasks with the largest p99 response time are drawn; 3 other tasks"),
        "the left-out note"
    );
    // Shortest period 5 ms: the timeline shows 20 of them.
    assert!(
        html.contains("CPU timeline, first 100ms")
            || html.contains("20 periods of the shortest-period task, task00")
    );
}

#[test]
fn a_run_without_jobs_says_so_instead_of_drawing_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(
        tmp.path().join("set.json"),
        r#"{ "tasks": [ { "name": "slow", "wcet": "1ms", "period": "1s", "offset": "2s" } ] }"#,
    )
    .unwrap();
    let o = pacer(
        &["sim", "set.json", "--duration", "100ms", "--report", "r.html"],
        tmp.path(),
    );
    ok(&o);
    let html = std::fs::read_to_string(tmp.path().join("r.html")).unwrap();
    check_page(&html);
    assert!(
        html.contains("No job finished within the simulated time"),
        "{html}"
    );
    assert!(html.contains("No task ran in this window"));
}

#[test]
fn a_report_naming_the_input_is_refused_and_the_input_untouched() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("set.json"), SET).unwrap();
    let o = pacer(&["sim", "set.json", "--report", "./set.json"], tmp.path());
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("--report ./set.json: the same file as the input set.json"),
        "{err}"
    );
    assert_eq!(std::fs::read_to_string(tmp.path().join("set.json")).unwrap(), SET);

    let o = pacer(&["sim", "set.json", "--report", "."], tmp.path());
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("a directory"));

    // A failing run writes no report (and leaves no temporary file).
    let o = pacer(
        &["sim", "set.json", "--duration", "0s", "--report", "r.html"],
        tmp.path(),
    );
    assert!(!o.status.success());
    let left: Vec<_> = std::fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left, vec![std::ffi::OsString::from("set.json")]);
}

fn two_runs(dir: &Path) {
    std::fs::write(dir.join("set.json"), SET).unwrap();
    for (policy, out) in [("g-edf", "a.csv"), ("p-rm", "b.csv")] {
        ok(&pacer(
            &[
                "sim",
                "set.json",
                "--cpus",
                "2",
                "--policy",
                policy,
                "--duration",
                "1s",
                "--jobs",
                out,
            ],
            dir,
        ));
    }
}

#[test]
fn compare_report_has_a_cdf_pair_per_task_and_the_verdict() {
    let tmp = tempfile::tempdir().unwrap();
    two_runs(tmp.path());
    let o = pacer(
        &[
            "compare",
            "a.csv",
            "b.csv",
            "--tolerance",
            "0",
            "--report",
            "c.html",
        ],
        tmp.path(),
    );
    // The medians differ between the policies: exit 2, and the report is still written.
    assert_eq!(o.status.code(), Some(2), "{}", String::from_utf8_lossy(&o.stderr));
    let html = std::fs::read_to_string(tmp.path().join("c.html")).unwrap();
    // KS bars and one CDF pair per task.
    assert_eq!(check_page(&html), 1 + 3);
    for name in [
        "alpha: KS D",
        "beta: KS D",
        "gamma: KS D",
        "A (",
        "B (",
        "KS D",
        "D(5%)",
    ] {
        assert!(html.contains(name), "{name} missing");
    }
    assert!(html.contains("Beyond tolerance (exit status 2)"));

    let o = pacer(
        &[
            "compare",
            "a.csv",
            "a.csv",
            "--metric",
            "start-delay",
            "--tolerance",
            "1",
            "--json",
            "--report",
            "d.html",
        ],
        tmp.path(),
    );
    ok(&o);
    serde_json::from_slice::<serde_json::Value>(&o.stdout).expect("JSON on stdout");
    let html = std::fs::read_to_string(tmp.path().join("d.html")).unwrap();
    check_page(&html);
    assert!(html.contains("start delays (start − release)") && html.contains("Within tolerance"));
}

#[test]
fn compare_refuses_a_report_over_an_input() {
    let tmp = tempfile::tempdir().unwrap();
    two_runs(tmp.path());
    let before = std::fs::read(tmp.path().join("b.csv")).unwrap();
    let o = pacer(&["compare", "a.csv", "b.csv", "--report", "b.csv"], tmp.path());
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("--report b.csv: the same file as the input b.csv"),
        "{err}"
    );
    assert!(o.stdout.is_empty(), "nothing compared before the refusal");
    assert_eq!(std::fs::read(tmp.path().join("b.csv")).unwrap(), before);
}
