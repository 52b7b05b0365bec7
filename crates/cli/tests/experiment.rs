//! `pacer experiment` as a user meets it: bad specs and flags are clear errors with a non-zero
//! exit, a run resumes from its directory, a merge never writes into its inputs, and (as root)
//! the six configurations run on the kernel beside the simulator and leave nothing behind, also
//! when the experiment is stopped by SIGTERM.

use std::process::Command;

mod common;

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
    let (ok, _, err) = pacer(&[&SMALL[..], &["--work", "1.5"]].concat(), tmp.path());
    assert!(
        !ok && err.contains("--work 1.5: expected a fraction of C in (0, 1]"),
        "{err}"
    );
    let (ok, _, err) = pacer(
        &[&SMALL[..], &["--cache-model", "nowhere.json"]].concat(),
        tmp.path(),
    );
    assert!(!ok && err.contains("nowhere.json"), "{err}");
    let (ok, _, err) = pacer(&[&SMALL[..], &["--backend", "kernel"]].concat(), tmp.path());
    assert!(
        !ok && err.contains("--backend kernel: expected sim, linux or both"),
        "{err}"
    );
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

mod kernel {
    //! The linux backend on this machine: one partition per CPU, one cluster of 2.

    use std::path::Path;
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};

    use super::common::{assert_total_bw_back, baseline, privileged, signal};

    fn pacer_cpusets() -> Vec<String> {
        std::fs::read_dir("/sys/fs/cgroup/cpuset")
            .map(|d| {
                d.filter_map(|e| e.ok())
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .filter(|n| n.starts_with("pacer-"))
                    .collect()
            })
            .unwrap_or_default()
    }

    fn experiment(dir: &Path, extra: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_pacer"));
        c.args(["experiment", "rm-vs-edf", "--cpus", "2", "--x", "2", "--r", "0.5"])
            .args(["--sets", "1", "--cluster-size", "2", "--backend", "sim,linux"])
            .args(extra)
            .current_dir(dir);
        c
    }

    #[test]
    #[cfg_attr(
        not(pacer_privileged),
        ignore = "needs root: run as root or set PACER_REQUIRE_ROOT=1"
    )]
    fn the_six_configurations_run_on_the_kernel_beside_the_simulator() {
        let _g = privileged();
        let base = baseline();
        let tmp = tempfile::tempdir().unwrap();
        let out = experiment(
            tmp.path(),
            &["--duration", "1s", "--json", "-o", "k", "--report", "k.html"],
        )
        .output()
        .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{stderr}");
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
        let text = v.to_string();
        for c in ["G-EDF", "G-RM", "C-EDF", "C-RM", "P-EDF", "P-RM"] {
            assert!(text.contains(c), "{c} missing");
        }
        // Twelve runs saved: six configurations on each backend.
        let runs = std::fs::read_dir(tmp.path().join("k/runs")).unwrap().count();
        assert_eq!(runs, 12, "{stderr}");
        let html = std::fs::read_to_string(tmp.path().join("k.html")).unwrap();
        assert!(
            html.contains("<svg") && html.contains("linux"),
            "report without the real runs"
        );
        assert!(pacer_cpusets().is_empty(), "left behind: {:?}", pacer_cpusets());
        assert_total_bw_back(base, "after the experiment");
    }

    #[test]
    #[cfg_attr(
        not(pacer_privileged),
        ignore = "needs root: run as root or set PACER_REQUIRE_ROOT=1"
    )]
    fn sigterm_stops_the_experiment_and_leaves_nothing_behind() {
        let _g = privileged();
        let base = baseline();
        let tmp = tempfile::tempdir().unwrap();
        let child = experiment(tmp.path(), &["--duration", "4s", "-o", "s"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Into the real runs (the simulated ones take well under a second), then SIGTERM.
        let start = Instant::now();
        while pacer_cpusets().is_empty() && start.elapsed() < Duration::from_secs(20) {
            std::thread::sleep(Duration::from_millis(20));
        }
        std::thread::sleep(Duration::from_millis(500));
        signal(child.id(), libc::SIGTERM);
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        // The shell's convention for a command a signal ended, as `pacer runtime run` exits.
        assert_eq!(out.status.code(), Some(128 + libc::SIGTERM), "{stderr}");
        assert!(stderr.contains("interrupted by signal 15 (SIGTERM)"), "{stderr}");
        assert!(stderr.contains("the same command resumes"), "{stderr}");
        assert!(pacer_cpusets().is_empty(), "left behind: {:?}", pacer_cpusets());
        assert_total_bw_back(base, "after SIGTERM");
    }
}
