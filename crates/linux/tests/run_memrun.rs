//! Real-kernel tests of rt-app's `memrun` event in `pacer run` (crates/linux/src/run/memrun.rs):
//! each access type runs and takes CPU time in proportion to its count, buffers named by a `ref`
//! are one buffer for every thread, and buffers this machine cannot hold are refused before the
//! run. SCHED_OTHER threads only: no privilege needed; timings get wide margins for a loaded
//! 2-CPU VM.

use std::sync::Mutex;

use pacer_linux::run::{self, Collect, RunConfig, RunError, RunReport};
use pacer_model::Duration;
use pacer_workload::{
    parse_rtapp, ChaseOrder, Event, MemAccess, MemBuffer, MemBufferId, MemBufferKind, Phase, ThreadSpec,
    Workload,
};

/// Runs install process-wide signal handling: one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn serialize() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn config() -> RunConfig {
    RunConfig {
        duration: Some(Duration::from_secs(20)),
        lock_memory: false,
        ..RunConfig::default()
    }
}

fn execute(w: &Workload) -> Result<(RunReport, Collect), RunError> {
    let mut sink = Collect::default();
    let report = run::run(w, &config(), &mut sink)?;
    Ok((report, sink))
}

fn median(mut v: Vec<u64>) -> u64 {
    v.sort_unstable();
    v[(v.len() - 1) / 2]
}

/// One thread running `memrun count` on its one buffer `buf`, `passes` times (a job each).
fn one(buf: &MemBuffer, count: u64, passes: u64) -> Workload {
    Workload {
        threads: vec![ThreadSpec {
            name: "m".into(),
            phases: vec![Phase::new(
                1,
                vec![Event::MemRun {
                    buffer: MemBufferId(0),
                    access: buf.access(),
                    count,
                }],
            )],
            loops: Some(passes),
            ..ThreadSpec::default()
        }],
        mem_buffers: vec![buf.clone()],
        ..Workload::default()
    }
}

#[test]
fn each_memrun_type_runs_in_time_growing_with_its_count() {
    let _g = serialize();
    let chase = |order| MemBufferKind::Chase { stride: 64, order };
    for (kind, size, count) in [
        (MemBufferKind::Read, 1u64 << 20, 4u64 << 20),
        (MemBufferKind::Write, 1 << 20, 4 << 20),
        // A lap of each chain per job at least: a chase's first lap over lines it has not
        // visited yet costs more than the next ones. The random chain spans twice the largest
        // L3 seen here (32 MiB on the 2026-11-28 VM): a chain that fits in the L3 is fast or
        // slow by whether the host kept it there (its L3 is shared with other guests, and a
        // vCPU may move to another L3), 17 against 117 ns per access in one test run, so its
        // time said nothing about the count.
        (chase(ChaseOrder::Random), 64 << 20, 1 << 20),
        (chase(ChaseOrder::Sequential), 1 << 20, 100_000),
    ] {
        let buf = MemBuffer {
            name: "b".into(),
            size,
            kind,
        };
        let exec = |count| {
            let (report, sink) = execute(&one(&buf, count, 5)).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(report.memrun_bytes, buf.footprint());
            median(sink.jobs.iter().map(|j| j.exec).collect())
        };
        let (small, large) = (exec(count), exec(8 * count));
        eprintln!(
            "{kind:?} of {size} bytes: {count} accesses {small} ns ({:.3} ns each), 8× {large} ns",
            small as f64 / count as f64
        );
        // 8× the accesses: several times the CPU time (skipped accesses would take none).
        assert!(small > 100_000, "{kind:?}: {small} ns for {count}");
        assert!(
            large > 4 * small && large < 16 * small,
            "{kind:?}: {small} → {large} ns"
        );
    }
}

#[test]
fn a_ref_is_one_buffer_for_every_thread_naming_it() {
    let _g = serialize();
    let file = |refs: bool| {
        let r = |name: &str| {
            if refs {
                format!(r#","ref":"{name}""#)
            } else {
                String::new()
            }
        };
        format!(
            r#"{{"tasks":{{"t":{{"instance":3,"loop":20,
                 "memrun":{{"type":"write","size":4194304,"count":1000000{}}},
                 "memrun1":{{"type":"chase","size":4194304,"count":20000{}}},
                 "memrun2":{{"type":"read","size":1048576,"count":100000}}}}}}}}"#,
            r("w"),
            r("c")
        )
    };
    // Three threads writing and chasing at once: with `ref` they share one write buffer and one
    // chain (and each keeps its read buffer); without, each has its own of each.
    let shared = parse_rtapp(&file(true), "t.json").unwrap();
    let (report, sink) = execute(&shared).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(report.memrun_bytes, (4 << 20) * 2 + 3 * (1 << 20));
    for t in 0..3 {
        assert_eq!(
            sink.jobs.iter().filter(|j| j.thread == t).count(),
            20,
            "thread {t}"
        );
    }
    let private = parse_rtapp(&file(false), "t.json").unwrap();
    let (report, _) = execute(&private).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(report.memrun_bytes, 3 * ((4 << 20) * 2 + (1 << 20)));
}

#[test]
fn buffers_this_machine_cannot_hold_are_refused_before_the_run() {
    let _g = serialize();
    let buf = MemBuffer {
        name: "huge".into(),
        size: 1 << 50,
        kind: MemBufferKind::Write,
    };
    match execute(&one(&buf, 1, 1)) {
        Err(e @ RunError::MemRun(_)) => assert!(e.to_string().contains("MemAvailable"), "{e}"),
        other => panic!(
            "a 1 PiB buffer must be refused, got {:?}",
            other.map(|r| r.0.jobs)
        ),
    }
    // An event whose buffer is of another type is refused too (the parser never builds one).
    let mut w = one(
        &MemBuffer {
            name: "r".into(),
            size: 64,
            kind: MemBufferKind::Read,
        },
        1,
        1,
    );
    w.threads[0].phases[0].events[0] = Event::MemRun {
        buffer: MemBufferId(0),
        access: MemAccess::Chase,
        count: 1,
    };
    let Err(e) = execute(&w) else {
        panic!("an event naming a buffer of another type must be refused")
    };
    let msg = e.to_string();
    assert!(msg.contains("memrun") && msg.contains("read buffer"), "{msg}");
}
