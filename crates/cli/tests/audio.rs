//! `pacer sim audio` end to end: text and JSON reports, CSVs, overrides, and errors that name the
//! file and the field.

use std::process::{Command, Output};

fn pacer(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_pacer"))
        .args(args)
        .output()
        .expect("run pacer")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn text_report_has_every_configuration_and_the_table_4_layout() {
    let o = pacer(&["sim", "audio", "--duration", "6s"]);
    let out = text(&o.stdout);
    assert!(o.status.success(), "{}", text(&o.stderr));
    for label in [
        "SCHED_FIFO + WALT",
        "SCHED_FIFO at max freq",
        "adaptive SCHED_DEADLINE",
        "clairvoyant bound",
    ] {
        assert!(out.contains(label), "{label} missing:\n{out}");
    }
    assert!(out.contains("seed 1"), "the seed is reported:\n{out}");
    // Table 4: one row per OPP with its normalised power, then the energy row.
    for row in [
        "903   ",
        "1421  ",
        "1805  ",
        "2112  ",
        "2362  ",
        "normalised energy",
    ] {
        assert!(
            out.lines().any(|l| l.starts_with(row)),
            "row {row:?} missing:\n{out}"
        );
    }
    assert!(out.contains("goal: adaptive at 2 bursts"), "{out}");
}

#[test]
fn json_csv_and_overrides() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().display().to_string();
    let o = pacer(&[
        "sim",
        "audio",
        "--pattern",
        "random",
        "--seed",
        "7",
        "--duration",
        "3s",
        "--configurations",
        "fifo-max,adaptive",
        "--csv",
        &d,
        "--json",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["seed"], 7);
    assert_eq!(v["callbacks"], 2250);
    let results = v["results"].as_array().unwrap();
    assert_eq!(results.len(), 2);
    assert_eq!(results[0]["configuration"], "fifo-max");
    assert_eq!(results[1]["configuration"], "adaptive");
    assert!(results[1]["reserved_bandwidth"].as_f64().unwrap() > 0.0);
    assert_eq!(results[1]["residency_s"].as_array().unwrap().len(), 5);
    for c in ["fifo-max", "adaptive"] {
        let jobs = std::fs::read_to_string(dir.path().join(format!("{c}-jobs.csv"))).unwrap();
        let mut lines = jobs.lines();
        assert_eq!(
            lines.next(),
            Some(
                "job,release_ns,start_ns,finish_ns,response_ns,voices,work_ns,exec_ns,freq_khz,budget_ns,bursts_needed"
            )
        );
        assert_eq!(lines.count(), 2250);
        let u = std::fs::read_to_string(dir.path().join(format!("{c}-underruns.csv"))).unwrap();
        assert!(u.starts_with("bursts,latency_ms,underruns\n1,1.333,"), "{u}");
    }
    // The seed changes the pattern.
    let again = pacer(&[
        "sim",
        "audio",
        "--seed",
        "8",
        "--duration",
        "3s",
        "--configurations",
        "clairvoyant",
        "--json",
    ]);
    let w: serde_json::Value = serde_json::from_slice(&again.stdout).unwrap();
    assert_eq!(w["seed"], 8);
    assert_ne!(w["voices"], v["voices"]);
}

#[test]
fn bad_input_is_refused_with_the_file_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "burst_frames = 64\n[adaptive]\nmargin_offset = 2.5\n").unwrap();
    let o = pacer(&["sim", "audio", bad.to_str().unwrap()]);
    assert!(!o.status.success());
    let e = text(&o.stderr);
    assert!(
        e.contains("bad.toml: adaptive.margin_offset: expected m_o in [0, 1)"),
        "{e}"
    );
    assert!(!e.contains("panicked"), "{e}");
    assert!(o.stdout.is_empty(), "no partial report on error");

    let o = pacer(&["sim", "audio", dir.path().join("missing.toml").to_str().unwrap()]);
    let e = text(&o.stderr);
    assert!(
        !o.status.success() && e.contains("missing.toml: cannot read"),
        "{e}"
    );

    let o = pacer(&["sim", "audio", "--pattern", "square", "--seed", "3"]);
    let e = text(&o.stderr);
    assert!(
        !o.status.success() && e.contains("--seed: the voice pattern is not random"),
        "{e}"
    );

    let o = pacer(&["sim", "audio", "--configurations", "walt"]);
    assert!(!o.status.success());
    assert!(text(&o.stderr).contains("unknown configuration `walt`"));
}

#[test]
fn jitter_is_reported_and_range_checked() {
    let o = pacer(&["sim", "audio", "--jitter", "0.05", "--duration", "3s", "--json"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["scenario"]["jitter"]["sd"], 0.05);
    assert_eq!(v["scenario"]["jitter"]["seed"], 1);
    let o = pacer(&["sim", "audio", "--jitter", "0.05", "--duration", "3s"]);
    let out = text(&o.stdout);
    assert!(out.contains("N(1, 0.05) jitter"), "{out}");

    let o = pacer(&["sim", "audio", "--jitter", "0.5"]);
    let e = text(&o.stderr);
    assert!(
        !o.status.success() && e.contains("jitter.sd") && e.contains("0.5"),
        "{e}"
    );
    assert!(!e.contains("panicked"), "{e}");
}

#[test]
fn margin_mode_is_chosen_reported_and_checked() {
    let o = pacer(&["sim", "audio", "--duration", "3s", "--json"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["scenario"]["adaptive"]["margin"], "percentile");
    let o = pacer(&["sim", "audio", "--margin", "fixed", "--duration", "3s", "--json"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["scenario"]["adaptive"]["margin"], "fixed");
    let o = pacer(&["sim", "audio", "--margin", "fixed", "--duration", "3s"]);
    let out = text(&o.stdout);
    assert!(out.contains("fixed margins (eq. 5)"), "{out}");

    let o = pacer(&["sim", "audio", "--margin", "median"]);
    let e = text(&o.stderr);
    assert!(
        !o.status.success() && e.contains("unknown margin mode `median`"),
        "{e}"
    );
}
