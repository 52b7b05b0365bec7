//! `pacer sim --trace`: the format follows the extension (or --trace-format), and the protobuf
//! trace holds as many switches into threads as the summary's `context_switches`.

use std::path::PathBuf;
use std::process::Command;

use pacer_sim::output::perfetto::wire;

fn textbook() -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/textbook.json")
        .display()
        .to_string()
}

fn fields(b: &[u8]) -> Vec<(u32, wire::Value<'_>)> {
    wire::fields(b).collect::<Result<_, _>>().expect("valid protobuf")
}

/// Switches into a thread (`next_pid` > 0) and the thread names of a protobuf trace.
fn switches_and_names(bytes: &[u8]) -> (u64, Vec<String>) {
    let (mut switches, mut names) = (0, Vec::new());
    for (n, packet) in fields(bytes) {
        assert_eq!(n, 1);
        for (n, v) in fields(packet.bytes().unwrap()) {
            let inner = v.bytes();
            match n {
                1 => {
                    for (n, ev) in fields(inner.unwrap()) {
                        if n != 2 {
                            continue;
                        }
                        for (n, body) in fields(ev.bytes().unwrap()) {
                            if n != 4 {
                                continue;
                            }
                            let next = fields(body.bytes().unwrap())
                                .into_iter()
                                .find(|(n, _)| *n == 6)
                                .and_then(|(_, v)| v.varint())
                                .expect("next_pid");
                            switches += u64::from(next > 0);
                        }
                    }
                }
                2 => {
                    for (n, t) in fields(inner.unwrap()) {
                        if n != 2 {
                            continue;
                        }
                        for (n, v) in fields(t.bytes().unwrap()) {
                            if n == 2 {
                                names.push(String::from_utf8(v.bytes().unwrap().to_vec()).unwrap());
                            }
                        }
                    }
                }
                _ => {}
            }
        }
    }
    (switches, names)
}

fn run(file: &str, format: Option<&str>) -> (Vec<u8>, serde_json::Value) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(file);
    let path_s = path.display().to_string();
    let f = textbook();
    let mut args = vec![
        "sim",
        &f,
        "--cpus",
        "2",
        "--policy",
        "g-edf",
        "--duration",
        "300ms",
        "--json",
        "--trace",
        &path_s,
    ];
    if let Some(fmt) = format {
        args.extend(["--trace-format", fmt]);
    }
    let out = Command::new(env!("CARGO_BIN_EXE_pacer"))
        .args(&args)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    (std::fs::read(&path).unwrap(), summary)
}

fn assert_protobuf(bytes: &[u8], summary: &serde_json::Value) {
    assert_ne!(bytes.first(), Some(&b'{'), "not JSON");
    let (switches, names) = switches_and_names(bytes);
    let expected = summary["summary"]["context_switches"].as_u64().unwrap();
    assert!(expected > 0);
    assert_eq!(switches, expected);
    for task in ["a", "b", "c"] {
        assert!(names.iter().any(|n| n == task), "{task} in {names:?}");
    }
}

fn assert_json(bytes: &[u8]) {
    let v: serde_json::Value = serde_json::from_slice(bytes).expect("Chrome JSON");
    assert!(!v["traceEvents"].as_array().unwrap().is_empty());
}

#[test]
fn protobuf_for_perfetto_extensions_and_unknown_ones() {
    for file in ["t.perfetto-trace", "t.pftrace", "t.pb", "t.trace", "t"] {
        let (bytes, summary) = run(file, None);
        assert_protobuf(&bytes, &summary);
    }
}

#[test]
fn json_for_dot_json() {
    let (bytes, _) = run("t.json", None);
    assert_json(&bytes);
    let (bytes, _) = run("t.JSON", None);
    assert_json(&bytes);
}

#[test]
fn trace_format_overrides_the_extension() {
    let (bytes, summary) = run("t.json", Some("perfetto"));
    assert_protobuf(&bytes, &summary);
    let (bytes, _) = run("t.pftrace", Some("json"));
    assert_json(&bytes);
}

#[test]
fn trace_jobs_adds_track_events() {
    let (plain, _) = run("t.pftrace", None);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("jobs.pftrace");
    let out = Command::new(env!("CARGO_BIN_EXE_pacer"))
        .args([
            "sim",
            &textbook(),
            "--cpus",
            "2",
            "--policy",
            "g-edf",
            "--duration",
            "300ms",
        ])
        .args(["--json", "--trace-jobs", "--trace"])
        .arg(&path)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let bytes = std::fs::read(&path).unwrap();
    assert_protobuf(&bytes, &summary);
    // Track events by type (`TrackEvent.type = 9`).
    let mut by_type = std::collections::BTreeMap::<u64, u64>::new();
    for (_, p) in fields(&bytes) {
        for (n, e) in fields(p.bytes().unwrap()) {
            if n == 11 {
                let t = fields(e.bytes().unwrap())
                    .iter()
                    .find(|(n, _)| *n == 9)
                    .and_then(|(_, v)| v.varint())
                    .unwrap();
                *by_type.entry(t).or_default() += 1;
            }
        }
    }
    let jobs = summary["summary"]["jobs"].as_u64().unwrap();
    let tasks = summary["summary"]["tasks"].as_u64().unwrap();
    // A begin and an end per finished job, no misses under G-EDF here; counters: each job's
    // used bandwidth, and each task's reservation (SCHED_DEADLINE under G-EDF) at its start.
    assert_eq!(by_type.get(&1), Some(&jobs));
    assert_eq!(by_type.get(&2), Some(&jobs));
    assert_eq!(by_type.get(&3), None);
    assert_eq!(by_type.get(&4), Some(&(jobs + tasks)));
    assert!(bytes.len() > plain.len());
}

#[test]
fn trace_format_needs_trace() {
    let out = Command::new(env!("CARGO_BIN_EXE_pacer"))
        .args(["sim", &textbook(), "--trace-format", "json"])
        .output()
        .unwrap();
    assert!(!out.status.success());
}
