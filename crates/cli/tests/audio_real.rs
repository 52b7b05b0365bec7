//! `pacer audio` on the real kernel (issue 17): a short run of each configuration (SCHED_OTHER
//! everywhere; SCHED_FIFO, fixed and adaptive SCHED_DEADLINE as root; adaptive through `pacer
//! daemon` as an unprivileged user), VoiceMark, the background load, bad input, and the kernel's
//! admission accounting back where it was after every run, after SIGKILL included.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Output, Stdio};
use std::time::{Duration, Instant};

use common::{client_user, pacer, signal};
use pacer_linux::cpuset::{read_dl_bandwidth, total_bw_of};
use pacer_testkit::{require, Need};
use serde_json::Value;

fn run(args: &[&str]) -> Output {
    pacer().arg("audio").args(args).output().expect("run pacer")
}

fn json_of(o: &Output) -> Value {
    assert!(
        o.status.success(),
        "pacer audio failed:\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}):\n{}", String::from_utf8_lossy(&o.stdout)))
}

fn config<'a>(v: &'a Value, key: &str) -> &'a Value {
    v["configurations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["configuration"] == key)
        .unwrap_or_else(|| panic!("no {key} in {v}"))
}

/// What every run's report must show: all callbacks made, audio produced, the sink's counts.
fn check_run(c: &Value, planned: u64) -> &Value {
    let r = &c["run"];
    assert!(r.is_object(), "{} did not run: {c}", c["configuration"]);
    assert_eq!(r["planned"], planned, "{r}");
    assert_eq!(r["callbacks"], planned, "every callback made: {r}");
    assert!(r["rms"].as_f64().unwrap() > 1e-4, "the synthesizer played: {r}");
    assert!(r["used_bandwidth"].as_f64().unwrap() > 0.0, "{r}");
    assert!(r["wakeup"]["count"].as_u64().unwrap() > 0, "{r}");
    assert!(r["underruns"].as_u64().is_some() && r["soft_misses"].as_u64().is_some());
    r
}

// 3 s at 64 frames and 48 kHz: ⌊3 s / 1 333 333 ns⌋ callbacks.
const PLANNED_3S: u64 = 2250;
// A small, fixed load so a debug build's synthesizer keeps up on a busy CI machine.
const SHORT: &[&str] = &["--bursts", "4", "-d", "3s", "--load-scale", "0.3", "--json"];

#[test]
fn sched_other_runs_anywhere_and_reports_every_callback() {
    let o = run(&[&["--config", "other"], SHORT].concat());
    let v = json_of(&o);
    assert_eq!(v["schema"], "pacer.audio/1");
    assert_eq!(v["seed"], 1);
    assert!(v["voices_per_cpu"].as_f64().unwrap() > 1.0, "{v}");
    let r = check_run(config(&v, "other"), PLANNED_3S);
    assert!(r["reserved_bandwidth"].is_null(), "no reservation: {r}");
    assert!(
        v["energy"]
            .as_str()
            .unwrap()
            .contains("no cpufreq on this machine")
            || Path::new("/sys/devices/system/cpu/cpufreq/policy0").exists(),
        "{v}"
    );
}

#[test]
fn voicemark_measures_a_cost_per_voice_and_its_file_feeds_a_run() {
    let o = run(&["voicemark", "--runs", "2", "--bursts-per-point", "50", "--json"]);
    let v = json_of(&o);
    assert_eq!(v["schema"], "pacer.audio.voicemark/1");
    assert_eq!(v["runs"].as_array().unwrap().len(), 2);
    let vpc = v["voices_per_cpu"].as_f64().unwrap();
    assert!(vpc > 1.0, "{v}");
    assert!(v["per_voice_ns"].as_f64().unwrap() > 0.0, "{v}");
    for r in v["runs"].as_array().unwrap() {
        assert!(
            r["r2"].as_f64().unwrap() > 0.9,
            "the cost is linear in the voices: {r}"
        );
        // Points grow until a burst costs more than its period.
        let last = r["points"].as_array().unwrap().last().unwrap();
        assert!(last["median_ns"].as_u64().unwrap() >= 1_333_333, "{r}");
    }
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("vm.json");
    std::fs::write(&f, &o.stdout).unwrap();
    let o = run(&[&["--config", "other", "--cost-from", f.to_str().unwrap()], SHORT].concat());
    let v = json_of(&o);
    assert_eq!(v["voices_per_cpu"].as_f64().unwrap(), vpc);
    assert!(v["voices_per_cpu_source"].as_str().unwrap().contains("vm.json"));
}

#[test]
fn the_html_report_has_its_plots_and_the_csvs_every_callback() {
    let dir = tempfile::tempdir().unwrap();
    let html = dir.path().join("audio.html");
    let csv = dir.path().join("csv");
    let o = run(&[
        &[
            "--config",
            "other",
            "--report",
            html.to_str().unwrap(),
            "--csv",
            csv.to_str().unwrap(),
        ],
        SHORT,
    ]
    .concat());
    json_of(&o);
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(!page.contains("<script"), "no JavaScript");
    // Completion CDF, wake-up CDF, one bandwidth plot per configuration.
    assert_eq!(page.matches("<svg").count(), 3, "{page}");
    for t in [
        "Completion latency, CDF",
        "Wake-up latency",
        "other: bandwidth",
        "pacer audio",
    ] {
        assert!(page.contains(t), "{t} missing");
    }
    let rows = std::fs::read_to_string(csv.join("other-callbacks.csv")).unwrap();
    assert_eq!(rows.lines().count() as u64, PLANNED_3S + 1);
    assert!(rows.starts_with("job,due_ns,wake_ns,end_ns,cpu_ns,voices,slept,outcome\n"));
    assert!(csv.join("other-bandwidth.csv").exists());
    // VoiceMark's report: the cost plot.
    let vm = dir.path().join("vm.html");
    let o = run(&[
        "voicemark",
        "--runs",
        "1",
        "--bursts-per-point",
        "20",
        "--report",
        vm.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let page = std::fs::read_to_string(&vm).unwrap();
    assert!(page.contains("Median CPU time per burst") && page.contains("<svg"));
}

#[test]
fn bad_input_is_named_and_refused() {
    let cases: &[(&[&str], &str)] = &[
        (&["--bursts", "0"], "--bursts"),
        (&["--load-scale", "0"], "--load-scale"),
        (&["--cpu", "4096"], "--cpu 4096: not an online CPU"),
        (&["--device", "hw:97"], "--device hw:97"),
        (&["--low", "9", "--high", "3"], "--low 9 is above --high 3"),
        (&["--config", "other,other"], "listed twice"),
        (&["load"], "nothing to run"),
        (&["--noise", "1.5", "--config", "other"], "noise"),
    ];
    for (args, msg) in cases {
        let o = run(args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{args:?} succeeded");
        assert!(err.contains(msg), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("bad.json");
    std::fs::write(&f, r#"{"schema": "something/else"}"#).unwrap();
    let o = run(&["--cost-from", f.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(
        err.contains("bad.json") && err.contains("pacer.audio.voicemark/1"),
        "{err}"
    );
}

#[test]
fn no_sound_device_is_said_clearly() {
    let cards = std::fs::read_to_string("/proc/asound/cards").unwrap_or_default();
    if !(cards.trim().is_empty() || cards.contains("no soundcards")) {
        eprintln!("skipped: this machine has a sound card");
        return;
    }
    let o = run(&["--device", "hw:0,0", "--config", "other"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(
        err.contains("--device hw:0,0") && err.contains("this machine has no sound card"),
        "{err}"
    );
}

#[test]
fn every_burst_reaches_the_alsa_device() {
    // ALSA's `null` PCM exists wherever libasound does: the whole playback path runs (open,
    // configure, prime, non-blocking writes), and the device's counts reach the JSON.
    let o = run(&[
        "--device",
        "null",
        "--config",
        "other",
        "--bursts",
        "2",
        "--duration",
        "1s",
        "--json",
    ]);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_str(&stdout).expect("one JSON document");
    assert!(
        v["device"].as_str().unwrap_or("").contains("no clock"),
        "{}",
        v["device"]
    );
    let run = &v["configurations"][0]["run"];
    let d = &run["device"];
    let callbacks = run["callbacks"].as_u64().unwrap();
    // One primed burst of silence (k − 1), then one per callback, 64 frames each.
    assert_eq!(d["frames_written"].as_u64(), Some((callbacks + 1) * 64), "{d}");
    assert_eq!(
        (d["xruns"].as_u64(), d["dropped_bursts"].as_u64()),
        (Some(0), Some(0)),
        "{d}"
    );
    assert_eq!(d["clocked"], false);
}

fn total_bw() -> i64 {
    total_bw_of(&read_dl_bandwidth().expect("read dl_bw from debugfs"), 0).expect("CPU 0 in sched debug")
}

fn settled_total_bw() -> i64 {
    std::thread::sleep(Duration::from_millis(200));
    total_bw()
}

fn back_to(base: i64) {
    let start = Instant::now();
    while total_bw() != base {
        assert!(
            start.elapsed() < Duration::from_secs(3),
            "total_bw {} is not back to {base}",
            total_bw()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
#[cfg_attr(
    not(pacer_privileged),
    ignore = "needs root: run as root or set PACER_REQUIRE_ROOT=1"
)]
fn fifo_fixed_and_adaptive_deadline_run_in_process_and_leave_nothing_behind() {
    let _g = common::privileged();
    require(Need::Root);
    require(Need::SchedDeadline);
    require(Need::SchedDebug);
    let base = settled_total_bw();
    let o = run(&[
        &["--config", "fifo,deadline,adaptive", "--via", "inprocess"],
        SHORT,
    ]
    .concat());
    let v = json_of(&o);
    back_to(base);
    let fifo = check_run(config(&v, "fifo"), PLANNED_3S);
    assert!(fifo["reserved_bandwidth"].is_null(), "{fifo}");
    let dl = check_run(config(&v, "deadline"), PLANNED_3S);
    let fixed = dl["reserved_bandwidth"].as_f64().unwrap();
    assert!(fixed > 0.0 && fixed <= 0.95, "{dl}");
    let ad = check_run(config(&v, "adaptive"), PLANNED_3S);
    let reserved = ad["reserved_bandwidth"].as_f64().unwrap();
    assert!(reserved > 0.0, "{ad}");
    assert!(ad["notes"].to_string().contains("in-process service"), "{ad}");
    // The proactive controller follows the hint: its reservation is of the order of what the
    // callbacks use, not the 0.95 ceiling.
    let used = ad["used_bandwidth"].as_f64().unwrap();
    assert!(
        reserved < 4.0 * used + 0.05,
        "reserved {reserved} for used {used}: {ad}"
    );
}

#[test]
#[cfg_attr(
    not(pacer_privileged),
    ignore = "needs root: run as root or set PACER_REQUIRE_ROOT=1"
)]
fn a_killed_benchmark_leaves_no_reservation_and_no_policy() {
    let _g = common::privileged();
    require(Need::Root);
    require(Need::SchedDeadline);
    require(Need::SchedDebug);
    let base = settled_total_bw();
    for cfg in ["deadline", "adaptive"] {
        let mut child = pacer()
            .args([
                "audio",
                "--config",
                cfg,
                "--via",
                "inprocess",
                "--bursts",
                "4",
                "-d",
                "30s",
                "--load-scale",
                "0.3",
                "--voices-per-cpu",
                "1000",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // Wait until the callback thread holds its reservation, then kill -9.
        let start = Instant::now();
        while total_bw() == base {
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "{cfg}: no reservation appeared"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        signal(child.id(), libc::SIGKILL);
        let _ = child.wait();
        back_to(base);
    }
}

struct Daemon(Child);

impl Drop for Daemon {
    fn drop(&mut self) {
        signal(self.0.id(), libc::SIGTERM);
        let _ = self.0.wait();
    }
}

#[test]
#[cfg_attr(
    not(pacer_privileged),
    ignore = "needs root: run as root or set PACER_REQUIRE_ROOT=1"
)]
fn an_unprivileged_user_plays_under_adaptive_deadline_through_the_daemon() {
    let _g = common::privileged();
    require(Need::Root);
    require(Need::SchedDeadline);
    require(Need::SchedDebug);
    let base = settled_total_bw();
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let socket = dir.path().join("pacer.sock");
    let cfg = dir.path().join("pacerd.toml");
    std::fs::write(&cfg, "[default]\nbandwidth = 0.95\nthread_bandwidth = 0.95\n").unwrap();
    let d = Daemon(
        pacer()
            .args(["daemon", "--socket"])
            .arg(&socket)
            .arg("--config")
            .arg(&cfg)
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap(),
    );
    let start = Instant::now();
    while std::os::unix::net::UnixStream::connect(&socket).is_err() {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "the daemon did not start"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let (uid, gid) = client_user();
    let mut cmd = pacer();
    cmd.arg("audio")
        .args(["--config", "adaptive", "--via", "daemon", "--socket"])
        .arg(&socket)
        .args(SHORT)
        .current_dir(dir.path())
        .uid(uid)
        .gid(gid);
    let o = cmd.output().unwrap();
    let v = json_of(&o);
    let ad = check_run(config(&v, "adaptive"), PLANNED_3S);
    assert!(ad["reserved_bandwidth"].as_f64().unwrap() > 0.0, "{ad}");
    assert!(
        ad["notes"].to_string().contains(&format!("as uid {uid}")),
        "went through the daemon as the user: {ad}"
    );
    // The user may not set SCHED_FIFO or SCHED_DEADLINE itself: those are listed as not run.
    let mut cmd = pacer();
    cmd.arg("audio")
        .args(["--socket"])
        .arg(&socket)
        .args(SHORT)
        .current_dir(dir.path())
        .uid(uid)
        .gid(gid);
    let v = json_of(&cmd.output().unwrap());
    assert!(config(&v, "deadline")["not_run"]
        .as_str()
        .unwrap()
        .contains("SCHED_DEADLINE needs root"));
    check_run(config(&v, "other"), PLANNED_3S);
    drop(d);
    back_to(base);
}

#[test]
#[cfg_attr(
    not(pacer_privileged),
    ignore = "needs root: run as root or set PACER_REQUIRE_ROOT=1"
)]
fn the_background_load_runs_its_fifo_noise_and_stops() {
    let _g = common::privileged();
    require(Need::Root);
    let mut child = pacer()
        .args(["audio", "load", "--noise", "0.3", "--hogs", "1", "-d", "20s"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The noise thread is SCHED_FIFO at the default priority 51.
    let pid = child.id();
    let start = Instant::now();
    let found = loop {
        let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).map(|d| {
            d.filter_map(|e| e.ok())
                .filter_map(|e| e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()))
                .collect::<Vec<_>>()
        });
        let fifo = tasks.unwrap_or_default().into_iter().any(|t| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/task/{t}/stat")).unwrap_or_default();
            // Fields after the command: policy is the 41st field, rt_priority the 40th.
            let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
            let f: Vec<&str> = rest.split_whitespace().collect();
            f.len() > 38 && f[37] == "51" && f[38] == "1"
        });
        if fifo || start.elapsed() > Duration::from_secs(5) {
            break fifo;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    signal(pid, libc::SIGTERM);
    let status = child.wait().unwrap();
    assert!(found, "no SCHED_FIFO priority 51 thread in the load process");
    assert!(status.success(), "SIGTERM stops the load cleanly: {status:?}");
}
