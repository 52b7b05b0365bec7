//! End-to-end tests of `pacer run --trace`: the Perfetto file of a real run, decoded here with
//! the encoder's own wire reader, holds the kernel's switches of the workload's threads (at least
//! one switch-in per measured job), per-CPU time order, times within the run, and the threads
//! described under pacer's pid; no tracefs instance of the run is left, after a normal end or a
//! SIGINT; `pacer exec --trace` likewise for a program's threads. Root tests use `pacer_testkit` (ignored without root unless `PACER_REQUIRE_ROOT=1`).

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::{Output, Stdio};
use std::time::Duration;

use pacer_sim::output::perfetto::wire::{self, Value};
use pacer_testkit::{require, Need};
use serde_json::Value as Json;

fn examples() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples")
}

fn fields(b: &[u8]) -> Vec<(u32, Value<'_>)> {
    wire::fields(b).collect::<Result<_, _>>().expect("valid protobuf")
}

fn int(f: &[(u32, Value<'_>)], n: u32) -> Option<i64> {
    f.iter()
        .find(|(k, _)| *k == n)
        .and_then(|(_, v)| v.varint())
        .map(|v| v as i64)
}

fn string(f: &[(u32, Value<'_>)], n: u32) -> Option<String> {
    f.iter()
        .find(|(k, _)| *k == n)
        .and_then(|(_, v)| v.bytes())
        .map(|b| String::from_utf8_lossy(b).into_owned())
}

/// A decoded ftrace event: cpu, time, kind (4 switch, 20 waking) and its fields.
struct Event {
    cpu: i64,
    ts: u64,
    kind: u32,
    next_pid: Option<i64>,
    prev_pid: Option<i64>,
    woken: Option<i64>,
}

#[derive(Default)]
struct Trace {
    events: Vec<Event>,
    /// Per CPU, its event times in file order.
    per_cpu: BTreeMap<i64, Vec<u64>>,
    /// pid → cmdline of the described processes; tid → (tgid, name) of the described threads.
    processes: BTreeMap<i64, String>,
    threads: BTreeMap<i64, (i64, String)>,
    kernel_release: Option<String>,
}

fn decode(bytes: &[u8]) -> Trace {
    let mut t = Trace::default();
    for (k, p) in fields(bytes) {
        assert_eq!(k, 1, "a Trace holds only packets");
        for (k, v) in fields(p.bytes().unwrap()) {
            let Some(b) = v.bytes() else { continue };
            match k {
                45 => {
                    let u = fields(b);
                    let uts = u.iter().find(|(k, _)| *k == 1).unwrap().1.bytes().unwrap();
                    t.kernel_release = string(&fields(uts), 3);
                }
                2 => {
                    for (k, v) in fields(b) {
                        let f = fields(v.bytes().unwrap());
                        match k {
                            1 => {
                                t.processes.insert(int(&f, 1).unwrap(), string(&f, 3).unwrap());
                            }
                            2 => {
                                t.threads.insert(
                                    int(&f, 1).unwrap(),
                                    (int(&f, 3).unwrap(), string(&f, 2).unwrap()),
                                );
                            }
                            _ => {}
                        }
                    }
                }
                1 => {
                    let bundle = fields(b);
                    let cpu = int(&bundle, 1).expect("a bundle names its CPU");
                    for (k, e) in &bundle {
                        if *k != 2 {
                            continue;
                        }
                        let e = fields(e.bytes().unwrap());
                        let ts = int(&e, 1).unwrap() as u64;
                        let (kind, payload) = e
                            .iter()
                            .find(|(k, _)| *k > 2)
                            .map(|(k, v)| (*k, fields(v.bytes().unwrap())))
                            .expect("an event payload");
                        t.per_cpu.entry(cpu).or_default().push(ts);
                        t.events.push(Event {
                            cpu,
                            ts,
                            kind,
                            next_pid: (kind == 4).then(|| int(&payload, 6).unwrap()),
                            prev_pid: (kind == 4).then(|| int(&payload, 2).unwrap()),
                            woken: (kind == 20).then(|| int(&payload, 2).unwrap()),
                        });
                    }
                }
                _ => {}
            }
        }
    }
    t
}

/// Switch-outs of `tid` from a CPU on which its switch-in is missing, after its first switch
/// (some kernels do not record switches away from the idle task, docs/linux.md).
fn unrecorded_switch_ins(t: &Trace, tid: i64) -> u64 {
    let mut events: Vec<&Event> = t
        .events
        .iter()
        .filter(|e| e.kind == 4 && (e.prev_pid == Some(tid) || e.next_pid == Some(tid)))
        .collect();
    events.sort_by_key(|e| e.ts);
    let (mut on, mut seen, mut n) = (None, false, 0);
    for e in events {
        if e.prev_pid == Some(tid) {
            if seen && on != Some(e.cpu) {
                n += 1;
            }
            on = None;
        }
        if e.next_pid == Some(tid) {
            on = Some(e.cpu);
        }
        seen = true;
    }
    n
}

/// The tracefs instances `pacer_linux::sched_trace` made for process `pid`.
fn instances_of(pid: i64) -> Vec<String> {
    let prefix = format!("pacer-sched-{pid}-");
    std::fs::read_dir("/sys/kernel/tracing/instances")
        .map(|d| {
            d.flatten()
                .filter_map(|e| e.file_name().into_string().ok())
                .filter(|n| n.starts_with(&prefix))
                .collect()
        })
        .unwrap_or_default()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Checks the trace of a run against its `--json` report and jobs CSV; returns the trace.
fn check_run(trace: &Path, report: &Json, jobs_csv: Option<&Path>) -> Trace {
    let t = decode(&std::fs::read(trace).unwrap());
    let run = &report["run"];
    let origin = run["origin_ns"].as_u64().unwrap();
    let horizon = run["duration_ns"].as_u64().unwrap();
    let tids: BTreeMap<String, i64> = run["threads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["name"].as_str().unwrap().to_string(),
                t["tid"].as_i64().unwrap(),
            )
        })
        .collect();
    assert!(!t.events.is_empty());
    assert_eq!(t.processes.len(), 1, "{:?}", t.processes);
    let (&pid, cmdline) = t.processes.iter().next().unwrap();
    assert!(cmdline.contains("--trace"), "{cmdline}");
    for (name, tid) in &tids {
        assert_eq!(t.threads.get(tid), Some(&(pid, name.clone())), "{name}");
    }
    assert!(t.kernel_release.as_deref().is_some_and(|r| !r.is_empty()));
    // Per CPU, the time order of the kernel's rings.
    for (cpu, ts) in &t.per_cpu {
        assert!(ts.windows(2).all(|w| w[0] <= w[1]), "CPU {cpu} out of order");
    }
    // Within the run: from the threads' release (10 ms before the origin) to their exit, which
    // comes after the horizon by at most the longest step (a 100 ms `run` of the hog) and the
    // demotion.
    let (first, last) = (
        t.events.iter().map(|e| e.ts).min().unwrap(),
        t.events.iter().map(|e| e.ts).max().unwrap(),
    );
    assert!(
        first + 20_000_000 >= origin,
        "first event {first}, origin {origin}"
    );
    assert!(
        last <= origin + horizon + 500_000_000,
        "last event {last}, end {}",
        origin + horizon
    );
    // Every event involves a workload thread (the kernel filter).
    let ours: BTreeSet<i64> = tids.values().copied().collect();
    for e in &t.events {
        let involved = [e.next_pid, e.prev_pid, e.woken]
            .iter()
            .flatten()
            .any(|p| ours.contains(p));
        assert!(involved, "event on CPU {} at {} of kind {}", e.cpu, e.ts, e.kind);
    }
    // The run's summary counts each thread's context switches with getrusage, from its start to
    // its last measurement; the trace's switch-outs of the thread (all recorded; the switch-ins
    // are not, on this VM) hold the same switches plus the thread's own edges: the gate before
    // its first job, the demotion and the exit after its last (1 to 4 more per thread in 8
    // runs here, 0 fewer).
    let per_task = report["summary"]["per_task"].as_array().unwrap();
    for task in per_task {
        let name = task["name"].as_str().unwrap();
        let Some(tid) = tids.get(name) else { continue };
        let counted = task["switches"].as_u64().unwrap();
        let outs = t.events.iter().filter(|e| e.prev_pid == Some(*tid)).count() as u64;
        eprintln!("{name}: summary {counted} context switches, trace {outs} switch-outs");
        assert!(
            counted <= outs && outs <= counted + 6,
            "{name}: the summary counts {counted} context switches, the trace {outs} switch-outs"
        );
    }
    if let Some(csv) = jobs_csv {
        let text = std::fs::read_to_string(csv).unwrap();
        // Per thread: its jobs, and those that began after a sleep (the first, and every one
        // released after the previous one finished): each of these needs a switch-in; a job
        // released while its thread was still busy (an overrun on a loaded machine) does not.
        let mut jobs: BTreeMap<String, (u64, u64, u64)> = BTreeMap::new(); // (jobs, slept, last finish)
        for line in text.lines().skip(1) {
            let f: Vec<&str> = line.split(',').collect();
            let (release, finish): (u64, u64) = (f[2].parse().unwrap(), f[4].parse().unwrap());
            let e = jobs.entry(f[0].to_string()).or_insert((0, 0, 0));
            if e.0 == 0 || release > e.2 {
                e.1 += 1;
            }
            e.0 += 1;
            e.2 = finish;
        }
        let mut unrecorded_total = 0;
        for (name, tid) in &tids {
            let ins = t.events.iter().filter(|e| e.next_pid == Some(*tid)).count() as u64;
            let unrecorded = unrecorded_switch_ins(&t, *tid);
            unrecorded_total += unrecorded;
            let (n, slept, _) = jobs.get(name).copied().unwrap_or_default();
            eprintln!(
                "{name} (tid {tid}): {n} jobs ({slept} after a sleep), {ins} switch-ins, {unrecorded} not recorded by the kernel"
            );
            // A thread forked just before the end may not have finished a job.
            assert!(n > 0 || name.contains('-'), "{name} ran no job");
            // Recorded, or known to be missing from the switch-out that follows.
            assert!(
                ins + unrecorded >= slept,
                "{name}: {ins} switch-ins for {slept} jobs after a sleep"
            );
        }
        assert_eq!(
            report["run"]["trace"]["unrecorded_switch_ins"].as_u64(),
            Some(unrecorded_total),
            "pacer's count of the switch-ins the kernel did not record"
        );
    }
    assert!(instances_of(pid).is_empty(), "{:?} left", instances_of(pid));
    t
}

#[test]
#[cfg_attr(
    not(pacer_privileged),
    ignore = "needs root: run as root or set PACER_REQUIRE_ROOT=1"
)]
fn a_run_s_trace_holds_its_threads_switches() {
    let _g = common::privileged();
    let dir = tempfile::tempdir().unwrap();
    let (trace, jobs) = (dir.path().join("t.pftrace"), dir.path().join("jobs.csv"));
    let file = examples().join("rtapp-periodic.json");
    let out = common::output_within(
        common::pacer()
            .args(["run", "--duration", "1s", "--json", "--trace-jobs", "--trace"])
            .arg(&trace)
            .arg("--jobs")
            .arg(&jobs)
            .arg(&file),
        Duration::from_secs(60),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let report: Json = serde_json::from_slice(&out.stdout).unwrap();
    let t = check_run(&trace, &report, Some(&jobs));
    let info = &report["run"]["trace"];
    let switches = t.events.iter().filter(|e| e.kind == 4).count() as u64;
    let wakings = t.events.iter().filter(|e| e.kind == 20).count() as u64;
    eprintln!(
        "{} bytes, {switches} switches, {wakings} wakings, {} lost",
        std::fs::metadata(&trace).unwrap().len(),
        info["lost_events"]
    );
    assert_eq!(info["switches"].as_u64(), Some(switches));
    assert_eq!(info["wakings"].as_u64(), Some(wakings));
    assert_eq!(
        info["bytes"].as_u64(),
        Some(std::fs::metadata(&trace).unwrap().len())
    );
    assert_eq!(
        info["job_slices"].as_u64(),
        Some(report["run"]["jobs"].as_u64().unwrap())
    );
    // The lost-event count is the kernel's; on an idle 2-CPU machine a 1 s run loses nothing.
    assert_eq!(info["lost_events"].as_u64(), Some(0));
}

/// Threads a `fork` event starts during the run add themselves to the recording before their
/// first job.
#[test]
#[cfg_attr(
    not(pacer_privileged),
    ignore = "needs root: run as root or set PACER_REQUIRE_ROOT=1"
)]
fn forked_threads_are_traced_from_their_first_job() {
    let _g = common::privileged();
    let dir = tempfile::tempdir().unwrap();
    let (trace, jobs) = (dir.path().join("t.pftrace"), dir.path().join("jobs.csv"));
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/rtapp/fork.json");
    let out = common::output_within(
        common::pacer()
            .args(["run", "--duration", "1s", "--json", "--trace"])
            .arg(&trace)
            .arg("--jobs")
            .arg(&jobs)
            .arg(&file),
        Duration::from_secs(60),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let report: Json = serde_json::from_slice(&out.stdout).unwrap();
    let threads = report["run"]["threads"].as_array().unwrap().len();
    assert!(
        threads >= 5,
        "the parent forks a worker every 100 ms: {threads} threads"
    );
    check_run(&trace, &report, Some(&jobs));
}

#[test]
#[cfg_attr(
    not(pacer_privileged),
    ignore = "needs root: run as root or set PACER_REQUIRE_ROOT=1"
)]
fn sigint_ends_a_traced_run_with_its_trace_and_no_instance_left() {
    let _g = common::privileged();
    require(Need::Tracefs);
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.pftrace");
    let child = common::pacer()
        .args(["run", "--duration", "60s", "--json", "--trace"])
        .arg(&trace)
        .arg(examples().join("rtapp-periodic.json"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // After calibration (~25 ms) and a moment of running.
    std::thread::sleep(Duration::from_millis(1500));
    assert!(
        !instances_of(child.id() as i64).is_empty(),
        "the instance exists while the run goes on"
    );
    common::signal(child.id(), libc::SIGINT);
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let report: Json = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        report["run"]["stopped_by"]["signal"].as_i64(),
        Some(2),
        "{report}"
    );
    check_run(&trace, &report, None);
}

#[test]
fn trace_options_are_checked() {
    let file = examples().join("rtapp-periodic.json");
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("t.json");
    let out = common::pacer()
        .args(["run", "--trace"])
        .arg(&json)
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("Perfetto's protobuf format only"),
        "{}",
        stderr(&out)
    );
    assert!(!json.exists());
    let out = common::pacer()
        .args(["run", "--trace-jobs"])
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("--trace"), "{}", stderr(&out));
    // A directory that does not exist fails before anything runs.
    let out = common::pacer()
        .args(["run", "--trace", "/nonexistent/t.pftrace"])
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("/nonexistent"), "{}", stderr(&out));
    assert!(!stderr(&out).contains("panicked"));
}

/// Without root, `--trace` is refused before anything runs, naming what is missing (as root,
/// the test runs pacer as `nobody`).
#[test]
fn trace_without_root_is_refused_with_the_reason() {
    use std::os::unix::process::CommandExt;
    let file = examples().join("rtapp-run-vs-sim.json");
    let trace = std::env::temp_dir().join(format!("pacer-run-trace-{}.pftrace", std::process::id()));
    let mut cmd = common::pacer();
    cmd.args(["run", "--duration", "1s", "--trace"])
        .arg(&trace)
        .arg(&file);
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        cmd.uid(65534).gid(65534);
    }
    let out = cmd.output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("needs root"), "{}", stderr(&out));
    assert!(out.stdout.is_empty());
    assert!(!trace.exists());
    // `pacer exec --trace` alike, before the program starts.
    let mut cmd = common::pacer();
    cmd.args(["exec", "--trace"]).arg(&trace).args(["--", "true"]);
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        cmd.uid(65534).gid(65534);
    }
    let out = cmd.output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("needs root"), "{}", stderr(&out));
    assert!(!trace.exists());
}

/// `pacer exec --trace`: the program's threads, seen as they start, recorded until the session
/// ends; the exit line says what was written; nothing is left in tracefs.
#[test]
#[cfg_attr(
    not(pacer_privileged),
    ignore = "needs root: run as root or set PACER_REQUIRE_ROOT=1"
)]
fn exec_traces_the_program_s_threads() {
    let _g = common::privileged();
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("e.pftrace");
    let w = tick_workload(dir.path(), 4);
    let calibration = common::calibration();
    let out = common::output_within(
        common::pacer()
            .args(["exec", "--json", "--duration", "2s", "--trace"])
            .arg(&trace)
            .args([
                "--",
                env!("CARGO_BIN_EXE_pacer"),
                "run",
                "--calibration",
                &calibration,
            ])
            .arg(&w),
        Duration::from_secs(60),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let exit = exit_line(&out);
    let info = &exit["trace"];
    let program = exit["status"]["pid"].as_i64().unwrap();
    let t = decode(&std::fs::read(&trace).unwrap());
    assert_eq!(t.processes.len(), 1);
    assert!(t.processes.contains_key(&program), "{:?}", t.processes);
    let tick = t
        .threads
        .iter()
        .find(|(_, (tgid, name))| *tgid == program && name == "tick-0")
        .map(|(tid, _)| *tid)
        .expect("the program's timed thread is described");
    let ins = t.events.iter().filter(|e| e.next_pid == Some(tick)).count() as u64;
    let unrecorded = unrecorded_switch_ins(&t, tick);
    eprintln!("tick-0: {ins} switch-ins, {unrecorded} not recorded; {info}");
    // 2 s of a 10 ms thread, less its start-up (calibration is given) and the tick before pacer
    // sees it: 150 jobs is a wide margin.
    assert!(ins + unrecorded >= 150, "{ins} switch-ins");
    assert_eq!(
        info["switches"].as_u64(),
        Some(t.events.iter().filter(|e| e.kind == 4).count() as u64)
    );
    for (cpu, ts) in &t.per_cpu {
        assert!(ts.windows(2).all(|w| w[0] <= w[1]), "CPU {cpu} out of order");
    }
    assert_reservations_traced(&trace, info);
    let left = instances_of_dead_processes();
    assert!(left.is_empty(), "{left:?}");
}

/// `pacer attach --trace`: a process already running, every thread of it recorded from the
/// attach, with the reservations pacer applied; nothing left in tracefs.
#[test]
#[cfg_attr(
    not(pacer_privileged),
    ignore = "needs root: run as root or set PACER_REQUIRE_ROOT=1"
)]
fn attach_traces_a_running_process() {
    let _g = common::privileged();
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("a.pftrace");
    let w = tick_workload(dir.path(), 6);
    let calibration = common::calibration();
    let mut target = std::process::Command::new(env!("CARGO_BIN_EXE_pacer"))
        .args(["run", "--calibration", &calibration])
        .arg(&w)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let pid = target.id();
    // Until its timed thread exists (named tick-0 by the executor).
    let started = std::time::Instant::now();
    while !std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|d| {
            d.flatten()
                .any(|t| std::fs::read_to_string(t.path().join("comm")).is_ok_and(|c| c.trim() == "tick-0"))
        })
        .unwrap_or(false)
    {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "tick-0 never started"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = common::output_within(
        common::pacer()
            .args(["attach", "--json", "--duration", "2s", "--trace"])
            .arg(&trace)
            .arg(pid.to_string()),
        Duration::from_secs(60),
    );
    let _ = target.kill();
    let _ = target.wait();
    assert!(out.status.success(), "{}", stderr(&out));
    let exit = exit_line(&out);
    let info = &exit["trace"];
    let t = decode(&std::fs::read(&trace).unwrap());
    assert!(t.processes.contains_key(&(pid as i64)), "{:?}", t.processes);
    let tick = t
        .threads
        .iter()
        .find(|(_, (tgid, name))| *tgid == pid as i64 && name == "tick-0")
        .map(|(tid, _)| *tid)
        .expect("the process's timed thread is described");
    let ins = t.events.iter().filter(|e| e.next_pid == Some(tick)).count() as u64;
    let unrecorded = unrecorded_switch_ins(&t, tick);
    eprintln!("tick-0: {ins} switch-ins, {unrecorded} not recorded; {info}");
    // Every thread is followed from the attach: 2 s of a 10 ms thread is 200 jobs.
    assert!(ins + unrecorded >= 170, "{ins} switch-ins");
    assert_reservations_traced(&trace, info);
    let left = instances_of_dead_processes();
    assert!(left.is_empty(), "{left:?}");
}

/// An rt-app file of one 10 ms thread (`tick`, 1 ms of work) lasting `secs`.
fn tick_workload(dir: &Path, secs: u32) -> std::path::PathBuf {
    let w = dir.join("w.json");
    std::fs::write(
        &w,
        format!(
            r#"{{ "global": {{ "duration": {secs} }}, "tasks": {{ "tick": {{ "loop": -1, "run": 1000, "timer": {{ "ref": "t", "period": 10000 }} }} }} }}"#
        ),
    )
    .unwrap();
    w
}

/// The `exit` line of `pacer exec`/`attach --json`.
fn exit_line(out: &Output) -> Json {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<Json>(l).ok())
        .find(|v| v["type"] == "exit")
        .expect("an exit line")
}

/// The reservations the session applied are the thread's reserved-bandwidth counters, as many
/// as the exit line says, and the controller reserved the 10 ms thread within the run.
fn assert_reservations_traced(trace: &Path, info: &Json) {
    let reserved = counter_values(&std::fs::read(trace).unwrap(), "reserved bandwidth");
    eprintln!("reserved bandwidth values: {reserved:?}");
    assert_eq!(Some(reserved.len() as u64), info["reservations"].as_u64());
    assert!(
        reserved.iter().any(|&v| v > 0.0 && v < 1.0),
        "no reservation in the trace: {reserved:?}"
    );
}

/// The values of the counter tracks named `name` (`track_descriptor = 60` with `counter = 8`;
/// `track_event = 11` of type 4 with `double_counter_value = 44`), in file order.
fn counter_values(bytes: &[u8], name: &str) -> Vec<f64> {
    let mut tracks = BTreeSet::new();
    let mut values = Vec::new();
    for (_, p) in fields(bytes) {
        for (k, v) in fields(p.bytes().unwrap()) {
            let Some(b) = v.bytes() else { continue };
            let f = fields(b);
            match k {
                60 if f.iter().any(|(n, _)| *n == 8) && string(&f, 2).as_deref() == Some(name) => {
                    tracks.insert(int(&f, 1).unwrap());
                }
                11 if int(&f, 9) == Some(4) && tracks.contains(&int(&f, 11).unwrap()) => {
                    let Some((_, Value::Fixed64(bits))) = f.iter().find(|(n, _)| *n == 44) else {
                        panic!("a counter value that is not a double")
                    };
                    values.push(f64::from_bits(*bits));
                }
                _ => {}
            }
        }
    }
    values
}

/// pacer's sched-trace instances of processes that are gone (the exec test's pacer has exited).
fn instances_of_dead_processes() -> Vec<String> {
    std::fs::read_dir("/sys/kernel/tracing/instances")
        .map(|d| {
            d.flatten()
                .filter_map(|e| e.file_name().into_string().ok())
                .filter(|n| {
                    n.strip_prefix("pacer-sched-")
                        .and_then(|r| r.split('-').next())
                        .is_some_and(|pid| !Path::new(&format!("/proc/{pid}")).exists())
                })
                .collect()
        })
        .unwrap_or_default()
}
