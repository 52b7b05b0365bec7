//! `pacer calibrate` and `pacer sim --cache-model`: a profile measured here round-trips into the
//! simulator, which then charges reloads; bad profiles and unsafe output paths are refused.

mod common;
use common::pacer;

fn set(dir: &std::path::Path) -> std::path::PathBuf {
    let file = dir.join("set.json");
    std::fs::write(
        &file,
        r#"{"wss_bytes": 262144, "tasks": [
            {"wcet": "2ms", "period": "5ms"}, {"wcet": "3ms", "period": "7ms"},
            {"wcet": "2ms", "period": "6ms"}, {"wcet": "1ms", "period": "4ms"}]}"#,
    )
    .unwrap();
    file
}

#[test]
fn a_measured_profile_drives_the_cache_model() {
    let dir = tempfile::tempdir().unwrap();
    let profile = dir.path().join("p.json");
    let out = pacer()
        .args([
            "calibrate",
            "--sizes",
            "4K,64K",
            "--orders",
            "sequential",
            "--repeats",
            "3",
            "--evict",
            "4M",
            "-o",
        ])
        .arg(&profile)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let p: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&profile).unwrap()).unwrap();
    assert_eq!(p["schema"], "pacer.calibration/1");
    assert_eq!(p["points"].as_array().unwrap().len(), 2);
    assert_eq!(p["evict_bytes"], 4 << 20);
    assert!(p["points"][1]["warm_pass_ns"].as_u64().unwrap() > 0);

    let run = |extra: &[&str]| {
        let out = pacer()
            .arg("sim")
            .arg(set(dir.path()))
            .args(["--cpus", "2", "--policy", "g-rm", "--duration", "1s", "--json"])
            .args(extra)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()
    };
    let off = run(&[]);
    assert!(off["run"].get("cache").is_none());
    let on = run(&["--cache-model", profile.to_str().unwrap()]);
    let charged = &on["run"]["cache"]["charged"];
    assert!(charged["reload_ns"].as_u64().unwrap() > 0, "{charged}");
    assert!(on["summary"]["utilisation"].as_f64().unwrap() > off["summary"]["utilisation"].as_f64().unwrap());
}

#[test]
fn bad_profiles_and_unsafe_outputs_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, r#"{"schema": "pacer.calibration/1", "line_bytes": 64}"#).unwrap();
    let out = pacer()
        .arg("sim")
        .arg(set(dir.path()))
        .args([
            "--cpus",
            "2",
            "--policy",
            "g-edf",
            "--duration",
            "10ms",
            "--cache-model",
        ])
        .arg(&bad)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("bad.json") && err.contains("missing field"), "{err}");

    // A symlink at the output path is left alone.
    let target = dir.path().join("target.txt");
    std::fs::write(&target, "keep").unwrap();
    let link = dir.path().join("link.json");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let out = pacer()
        .args([
            "calibrate",
            "--sizes",
            "4K",
            "--orders",
            "sequential",
            "--repeats",
            "1",
            "--evict",
            "1M",
            "-o",
        ])
        .arg(&link)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("symbolic link"));
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep");

    let out = pacer()
        .args(["calibrate", "--cpus", "0,0", "--json"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("two different CPUs"));
}
