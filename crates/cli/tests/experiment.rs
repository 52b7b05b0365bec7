//! `pacer experiment` as a user meets it: bad specs and flags are clear errors with a non-zero
//! exit, the linux backend says it is not wired, a run resumes from its directory, and a merge
//! never writes into its inputs.

use std::process::Command;

fn pacer(args: &[&str], dir: &std::path::Path) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_pacer"))
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

const SMALL: [&str; 12] = [
    "experiment",
    "rm-vs-edf",
    "--cpus",
    "2",
    "--x",
    "2",
    "--r",
    "0.5",
    "--sets",
    "1",
    "--duration",
    "200ms",
];

#[test]
fn bad_specs_and_flags_are_clear_errors() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(
        tmp.path().join("bad.toml"),
        "cpus = 4\nduraton = \"1s\"\n[generator]\nr = [0.5]\n",
    )
    .unwrap();
    let (ok, _, err) = pacer(&["experiment", "bad.toml"], tmp.path());
    assert!(!ok);
    assert!(err.contains("bad.toml: `duraton`: expected no such key"), "{err}");
    let (ok, _, err) = pacer(&["experiment", "missing.toml"], tmp.path());
    assert!(!ok && err.contains("missing.toml: cannot read"), "{err}");
    let (ok, _, err) = pacer(&[&SMALL[..], &["--cluster-size", "3"]].concat(), tmp.path());
    assert!(!ok && err.contains("--cluster-size 3"), "{err}");
    let (ok, _, err) = pacer(&[&SMALL[..], &["--shard", "3/2"]].concat(), tmp.path());
    assert!(!ok && err.contains("K/N"), "{err}");
    let (ok, _, err) = pacer(
        &[&SMALL[..], &["--backend", "linux", "-o", "l"]].concat(),
        tmp.path(),
    );
    assert!(!ok && err.contains("not wired yet"), "{err}");
    assert!(!err.contains("panicked"));
}

#[test]
fn a_run_resumes_and_a_merge_keeps_its_inputs() {
    let tmp = tempfile::tempdir().unwrap();
    let (ok, out, err) = pacer(&[&SMALL[..], &["-o", "a", "--json"]].concat(), tmp.path());
    assert!(ok, "{err}");
    assert!(out.contains("\"schema\": \"pacer.experiment/1\""));
    let (ok, _, err) = pacer(&[&SMALL[..], &["-o", "a"]].concat(), tmp.path());
    assert!(ok, "{err}");
    assert!(err.contains("6 cached, 0 run now"), "{err}");
    // Another spec into the same directory is refused.
    let (ok, _, err) = pacer(&[&SMALL[..], &["-o", "a", "--seed", "9"]].concat(), tmp.path());
    assert!(!ok && err.contains("different experiment"), "{err}");
    let (ok, _, err) = pacer(&["experiment", "merge", "a", "--out", "a"], tmp.path());
    assert!(!ok && err.contains("is one of the inputs"), "{err}");
    let (ok, _, err) = pacer(&["experiment", "merge", "a", "--report", "a/r.html"], tmp.path());
    assert!(!ok && err.contains("inside an input directory"), "{err}");
    let (ok, out, err) = pacer(
        &["experiment", "merge", "a", "--out", "b", "--report", "r.html"],
        tmp.path(),
    );
    assert!(ok, "{err}");
    assert!(out.contains("6 of 6 runs found"));
    assert_eq!(
        std::fs::read(tmp.path().join("a/table.txt")).unwrap(),
        std::fs::read(tmp.path().join("b/table.txt")).unwrap()
    );
    assert!(tmp.path().join("r.html").exists());
}
