//! The Perfetto protobuf trace of whole simulations, decoded with the writer's own wire reader:
//! bundles per CPU in time order, well-formed and consistent `sched_switch`es whose number is
//! the simulator's own count of switches, wake-ups before every switch-in of a sleeper, and the
//! workload's thread names.

use std::collections::BTreeMap;

use pacer_sim::output::perfetto::{thread_tid, wire, PerfettoTrace, PROCESS_PID, SEQUENCE_ID};
use pacer_sim::record::{Fanout, Observer};
use pacer_sim::{Sim, SimConfig};

const MS: u64 = 1_000_000;

/// A decoded `FtraceEvent`.
#[derive(Debug, Default, Clone)]
struct Event {
    cpu: u32,
    ts: u64,
    pid: u64,
    kind: u32,
    /// The event's own fields: number → varint, or string.
    ints: BTreeMap<u32, i64>,
    strs: BTreeMap<u32, String>,
}

#[derive(Default)]
struct Decoded {
    events: Vec<Event>,
    /// tid → (tgid, name).
    threads: BTreeMap<i64, (i64, String)>,
    processes: Vec<i64>,
    /// Per CPU, the timestamps of its events in file order.
    per_cpu: BTreeMap<u32, Vec<u64>>,
    /// Track uuid → tid of its thread.
    tracks: BTreeMap<u64, u64>,
    /// Track events: (timestamp, type, track uuid, name).
    track_events: Vec<(u64, u64, u64, Option<String>)>,
    /// Counter tracks: uuid → (parent track uuid, name).
    counters: BTreeMap<u64, (u64, String)>,
    /// Counter values: (timestamp, track uuid, value).
    values: Vec<(u64, u64, f64)>,
}

fn msg(b: &[u8]) -> Vec<(u32, wire::Value<'_>)> {
    wire::fields(b).collect::<Result<_, _>>().expect("valid protobuf")
}

fn decode(bytes: &[u8]) -> Decoded {
    let mut d = Decoded::default();
    for (n, v) in msg(bytes) {
        assert_eq!(n, 1, "a Trace holds only packets");
        let packet = msg(v.bytes().expect("packet is a message"));
        let seq = packet
            .iter()
            .find(|(n, _)| *n == 10)
            .and_then(|(_, v)| v.varint());
        assert_eq!(seq, Some(u64::from(SEQUENCE_ID)), "trusted_packet_sequence_id");
        let ts = packet.iter().find(|(n, _)| *n == 8).and_then(|(_, v)| v.varint());
        for (n, v) in packet {
            match n {
                1 => decode_bundle(v.bytes().unwrap(), &mut d),
                2 => decode_tree(v.bytes().unwrap(), &mut d),
                11 => {
                    let f = msg(v.bytes().unwrap());
                    let int = |k| f.iter().find(|(n, _)| *n == k).and_then(|(_, v)| v.varint());
                    let name = f.iter().find(|(n, _)| *n == 23);
                    let name = name.map(|(_, v)| String::from_utf8(v.bytes().unwrap().to_vec()).unwrap());
                    let (kind, uuid) = (int(9).unwrap(), int(11).unwrap());
                    if kind == 4 {
                        let value = f.iter().find(|(n, _)| *n == 44).map(|(_, v)| *v);
                        let Some(wire::Value::Fixed64(bits)) = value else {
                            panic!("a counter event without double_counter_value: {f:?}")
                        };
                        d.values
                            .push((ts.expect("timestamp"), uuid, f64::from_bits(bits)));
                    } else {
                        d.track_events.push((ts.expect("timestamp"), kind, uuid, name));
                    }
                }
                60 => {
                    let f = msg(v.bytes().unwrap());
                    let uuid = f.iter().find(|(n, _)| *n == 1).and_then(|(_, v)| v.varint());
                    if f.iter().any(|(n, _)| *n == 8) {
                        let parent = f.iter().find(|(n, _)| *n == 5).and_then(|(_, v)| v.varint());
                        let name = f.iter().find(|(n, _)| *n == 2).unwrap().1.bytes().unwrap();
                        let name = String::from_utf8(name.to_vec()).unwrap();
                        d.counters
                            .insert(uuid.unwrap(), (parent.expect("parent_uuid"), name));
                    } else {
                        let thread = f.iter().find(|(n, _)| *n == 4).unwrap().1.bytes().unwrap();
                        let t = msg(thread);
                        let tid = t.iter().find(|(n, _)| *n == 2).and_then(|(_, v)| v.varint());
                        assert!(
                            d.tracks.insert(uuid.unwrap(), tid.unwrap()).is_none(),
                            "a thread track described twice"
                        );
                    }
                }
                8 | 10 => {}
                other => panic!("unexpected packet field {other}"),
            }
        }
    }
    d
}

fn decode_tree(b: &[u8], d: &mut Decoded) {
    for (n, v) in msg(b) {
        let fields = msg(v.bytes().unwrap());
        let int = |k| fields.iter().find(|(n, _)| *n == k).and_then(|(_, v)| v.varint());
        match n {
            1 => d.processes.push(int(1).unwrap() as i64),
            2 => {
                let name = fields.iter().find(|(n, _)| *n == 2).unwrap().1.bytes().unwrap();
                let name = String::from_utf8(name.to_vec()).unwrap();
                d.threads
                    .insert(int(1).unwrap() as i64, (int(3).unwrap() as i64, name));
            }
            other => panic!("unexpected process tree field {other}"),
        }
    }
}

fn decode_bundle(b: &[u8], d: &mut Decoded) {
    let fields = msg(b);
    let cpu = fields.iter().find(|(n, _)| *n == 1).and_then(|(_, v)| v.varint());
    let cpu = cpu.expect("a bundle names its CPU") as u32;
    for (n, v) in fields {
        if n != 2 {
            continue;
        }
        let mut e = Event {
            cpu,
            ..Event::default()
        };
        for (n, v) in msg(v.bytes().unwrap()) {
            match n {
                1 => e.ts = v.varint().unwrap(),
                2 => e.pid = v.varint().unwrap(),
                k => {
                    e.kind = k;
                    for (f, v) in msg(v.bytes().unwrap()) {
                        match v {
                            wire::Value::Varint(x) => {
                                e.ints.insert(f, x as i64);
                            }
                            wire::Value::Bytes(s) => {
                                e.strs.insert(f, String::from_utf8(s.to_vec()).unwrap());
                            }
                            other => panic!("unexpected value {other:?}"),
                        }
                    }
                }
            }
        }
        d.per_cpu.entry(cpu).or_default().push(e.ts);
        d.events.push(e);
    }
}

/// Counts the simulator's own switch events into a thread.
#[derive(Default)]
struct SwitchCount(u64);

impl Observer for SwitchCount {
    fn job(&mut self, _: &pacer_sim::record::JobRecord) {}
    fn event(&mut self, e: &pacer_sim::record::TraceEvent) {
        if let pacer_sim::record::TraceEvent::Switch { next: Some(_), .. } = e {
            self.0 += 1;
        }
    }
    fn wants_events(&self) -> bool {
        true
    }
}

/// Runs `file` (an rt-app workload) on `cpus` CPUs for `horizon` ns with a Perfetto trace.
fn run(file: &str, cpus: u32, horizon: u64) -> (Sim, Vec<u8>) {
    let (sim, bytes, _) = run_counting(file, cpus, horizon);
    (sim, bytes)
}

/// [`run`], also returning the number of switch events into a thread the simulator reported.
fn run_counting(file: &str, cpus: u32, horizon: u64) -> (Sim, Vec<u8>, u64) {
    let text = std::fs::read_to_string(format!("{}/../../{file}", env!("CARGO_MANIFEST_DIR"))).unwrap();
    let w = pacer_workload::parse_rtapp(&text, file).unwrap();
    let mut sim = Sim::new(w, SimConfig::new(cpus as usize)).unwrap();
    let names = sim.thread_names();
    let prios = (0..names.len() as u32)
        .map(|t| pacer_sim::output::perfetto::kernel_prio(&sim.policy_of(t).unwrap()))
        .collect();
    let mut trace = PerfettoTrace::new(Vec::new(), names, cpus).with_priorities(prios);
    let mut count = SwitchCount::default();
    sim.run_until(horizon, &mut Fanout(vec![&mut trace, &mut count]));
    let bytes = trace.finish().unwrap();
    (sim, bytes, count.0)
}

fn check(file: &str, cpus: u32) {
    let (sim, bytes, reported) = run_counting(file, cpus, 500 * MS);
    let d = decode(&bytes);
    let names = sim.thread_names();

    assert_eq!(d.processes, vec![i64::from(PROCESS_PID)]);
    for (t, name) in names.iter().enumerate() {
        let tid = i64::from(thread_tid(t as u32));
        assert!(tid > 0);
        assert_eq!(d.threads.get(&tid), Some(&(i64::from(PROCESS_PID), name.clone())));
    }
    let name_of = |pid: i64| -> String {
        if pid == 0 {
            String::new()
        } else {
            d.threads[&pid].1.clone()
        }
    };

    for (cpu, ts) in &d.per_cpu {
        assert!(*cpu < cpus);
        assert!(ts.windows(2).all(|w| w[0] <= w[1]), "CPU {cpu} goes back in time");
    }

    // Replays the switches per CPU: each one's prev is what the last one switched in, its pid is
    // the prev; a thread switched out asleep is woken before it runs again.
    let mut current: BTreeMap<u32, i64> = BTreeMap::new();
    let mut asleep: BTreeMap<i64, bool> = BTreeMap::new();
    let mut events = d.events.clone();
    events.sort_by_key(|e| e.ts); // stable: keeps each CPU's order
    let (mut switch_ins, mut wakings) = (0u64, 0u64);
    for e in &events {
        let cur = *current.get(&e.cpu).unwrap_or(&0);
        assert_eq!(e.pid as i64, cur, "event pid is the current task: {e:?}");
        match e.kind {
            4 => {
                for f in 1..=7 {
                    assert!(
                        e.ints.contains_key(&f) || e.strs.contains_key(&f),
                        "sched_switch lacks field {f}: {e:?}"
                    );
                }
                let (prev, next) = (e.ints[&2], e.ints[&6]);
                assert_eq!(prev, cur, "{e:?}");
                assert_ne!(prev, next, "{e:?}");
                for (comm, pid) in [(&e.strs[&1], prev), (&e.strs[&5], next)] {
                    if pid == 0 {
                        assert_eq!(comm, &format!("swapper/{}", e.cpu));
                    } else {
                        assert_eq!(comm, &name_of(pid));
                    }
                }
                assert!([0, 1, 0x80].contains(&e.ints[&4]), "{e:?}");
                if prev != 0 && e.ints[&4] == 1 {
                    asleep.insert(prev, true);
                }
                if next != 0 {
                    assert!(
                        !asleep.get(&next).copied().unwrap_or(false),
                        "a sleeping thread runs without a wake-up: {e:?}"
                    );
                    assert!(
                        !current.iter().any(|(c, &p)| *c != e.cpu && p == next),
                        "{next} runs on two CPUs"
                    );
                    switch_ins += 1;
                }
                current.insert(e.cpu, next);
            }
            20 => {
                let pid = e.ints[&2];
                assert_eq!(e.strs[&1], name_of(pid));
                assert_eq!(e.ints[&4], 1);
                assert_eq!(e.ints[&5], i64::from(e.cpu));
                asleep.insert(pid, false);
                wakings += 1;
            }
            11 => {}
            k => panic!("unexpected event {k}"),
        }
    }
    assert_eq!(
        switch_ins, reported,
        "{file} on {cpus} CPUs: switches into threads vs the simulator's switch events"
    );
    let counted: u64 = sim.stats().iter().map(|s| s.switches).sum();
    assert!(counted > 0, "{file}: {counted}");
    // The summary's context switches are the trace's switches: a thread that blocks and is
    // woken and picked again within one instant is no switch for either (nor for the kernel).
    assert_eq!(
        switch_ins, counted,
        "{file} on {cpus} CPUs: switches into threads vs the summary's context switches"
    );
    assert!(wakings > 0);
}

#[test]
fn rtapp_periodic_on_one_cpu() {
    check("examples/rtapp-periodic.json", 1);
}

#[test]
fn rtapp_periodic_on_two_cpus() {
    check("examples/rtapp-periodic.json", 2);
}

#[test]
fn priorities_are_the_kernels() {
    let (_, bytes) = run("examples/rtapp-periodic.json", 1, 100 * MS);
    let d = decode(&bytes);
    let mut prio: BTreeMap<String, i64> = BTreeMap::new();
    for e in d.events.iter().filter(|e| e.kind == 4) {
        prio.insert(e.strs[&5].clone(), e.ints[&7]);
    }
    let of = |prefix: &str| prio.iter().find(|(n, _)| n.starts_with(prefix)).map(|(_, &p)| p);
    assert_eq!(of("render"), Some(-1), "{prio:?}");
    assert_eq!(of("audio"), Some(49), "{prio:?}");
    assert_eq!(of("hog"), Some(120), "{prio:?}");
}

/// Mutexes with priority inheritance, suspend/resume, condition variables, semaphores, task
/// groups, memory runs, forks: every way a thread sleeps and wakes is a `sched_waking`.
#[test]
fn synchronising_workloads() {
    for file in [
        "tests/rtapp/mutex-pi.json",
        "tests/rtapp/barrier.json",
        "tests/rtapp/fork.json",
        "tests/rtapp/mem-io.json",
        "tests/rtapp/suspend-chain.json",
        "tests/rtapp/cond-queue.json",
        "tests/rtapp/sem-pipeline.json",
        "tests/rtapp/taskgroups.json",
        "tests/rtapp/memrun.json",
        "crates/workload/tests/fixtures/mp3_short.json",
        "crates/workload/tests/fixtures/tutorial_example5.json",
    ] {
        for cpus in [2, 4] {
            check(file, cpus);
        }
    }
}

#[test]
fn frequency_changes_are_cpu_frequency_events_of_the_clusters_cpus() {
    use pacer_sim::record::TraceEvent;
    let mut trace =
        PerfettoTrace::new(Vec::new(), vec!["a".into()], 4).with_clusters(vec![vec![0, 1], vec![2, 3]]);
    trace.event(&TraceEvent::Frequency {
        t: 5,
        cluster: 1,
        khz: 1_800_000,
    });
    // An unknown cluster is left out rather than guessed.
    trace.event(&TraceEvent::Frequency {
        t: 6,
        cluster: 7,
        khz: 1,
    });
    let d = decode(&trace.finish().unwrap());
    let freq: Vec<(u32, i64, i64)> = d
        .events
        .iter()
        .filter(|e| e.kind == 11)
        .map(|e| (e.cpu, e.ints[&1], e.ints[&2]))
        .collect();
    assert_eq!(freq, vec![(2, 1_800_000, 2), (3, 1_800_000, 3)]);
}

/// A sink that fails after `left` bytes.
struct Failing {
    left: usize,
}

impl std::io::Write for Failing {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        if self.left == 0 {
            return Err(std::io::Error::other("disk full"));
        }
        let n = b.len().min(self.left);
        self.left -= n;
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn the_first_write_error_is_reported_by_finish() {
    use pacer_sim::record::TraceEvent;
    let mut trace = PerfettoTrace::new(Failing { left: 10 }, vec!["a".into()], 1);
    for i in 0..100_000u64 {
        trace.event(&TraceEvent::Switch {
            t: i,
            cpu: 0,
            prev: None,
            next: (i % 2 == 0).then_some(0),
            prev_state: pacer_sim::record::PrevState::Sleeping,
        });
    }
    let err = trace.finish().err().expect("an error");
    assert_eq!(err.to_string(), "disk full");
}

#[test]
fn job_slices_are_track_events_on_the_threads_tracks() {
    let text = std::fs::read_to_string(format!(
        "{}/../../examples/rtapp-periodic.json",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap();
    let w = pacer_workload::parse_rtapp(&text, "rtapp-periodic.json").unwrap();
    let mut sim = Sim::new(w, SimConfig::new(1)).unwrap();
    let mut trace = PerfettoTrace::new(Vec::new(), sim.thread_names(), 1).with_job_slices();
    sim.run_until(500 * MS, &mut trace);
    let d = decode(&trace.finish().unwrap());
    let tids: Vec<u64> = d.tracks.values().copied().collect();
    for tid in &tids {
        assert!(d.threads.contains_key(&(*tid as i64)), "{tid}");
    }
    let begins = d.track_events.iter().filter(|e| e.1 == 1).count() as u64;
    let ends = d.track_events.iter().filter(|e| e.1 == 2).count() as u64;
    assert_eq!(begins, sim.jobs_finished());
    assert_eq!(ends, begins);
    // Per track, slices alternate begin/end in time order and do not overlap.
    for uuid in d.tracks.keys() {
        let mut ev: Vec<_> = d
            .track_events
            .iter()
            .filter(|e| e.2 == *uuid && e.1 != 3)
            .collect();
        ev.sort_by_key(|e| (e.0, e.1 == 1)); // an end before a begin at the same instant
        for (i, e) in ev.iter().enumerate() {
            assert_eq!(e.1, if i % 2 == 0 { 1 } else { 2 }, "{ev:?}");
            assert_eq!(e.3.is_some(), e.1 == 1);
        }
    }
    assert!(d.track_events.iter().all(|e| d.tracks.contains_key(&e.2)));
}

/// The reserved-bandwidth counter follows the reservations an adaptation controller makes, and
/// job slices come with a used-bandwidth counter per job: what an adaptive reservation is judged
/// by, on the thread's own track.
#[test]
fn reserved_and_used_bandwidth_are_counters_on_the_thread() {
    use pacer_adapt::controller::{LegacyConfig, LegacyController, ThreadOptions};
    use pacer_model::{Duration, Policy};
    use pacer_workload::{Event as WEvent, Phase, ThreadSpec, TimerId, TimerMode, Work, Workload};

    let period = 20 * MS;
    let video = ThreadSpec {
        name: "video".into(),
        policy: Policy::Other { nice: 0 },
        // 150 jobs of 4 ms, then 8 ms: the controller reserves, then follows the step.
        phases: [(150, 4), (250, 8)]
            .into_iter()
            .map(|(loops, ms)| {
                Phase::new(
                    loops,
                    vec![
                        WEvent::Run {
                            work: Work::Fixed {
                                ns: Duration(ms * MS),
                            },
                        },
                        WEvent::Timer {
                            timer: TimerId(0),
                            period: Duration(period),
                            mode: TimerMode::Absolute,
                        },
                    ],
                )
            })
            .collect(),
        ..Default::default()
    };
    let w = Workload {
        threads: vec![video],
        ..Default::default()
    };
    let mut sim = Sim::new(w, SimConfig::new(1)).unwrap();
    let mut lc = LegacyController::new(LegacyConfig::default()).unwrap();
    lc.add_thread(0, ThreadOptions::default()).unwrap();
    sim.add_controller(Box::new(lc));
    let mut trace = PerfettoTrace::new(Vec::new(), sim.thread_names(), 1).with_job_slices();
    let mut jobs = 0u64;
    struct Count<'a>(&'a mut u64);
    impl Observer for Count<'_> {
        fn job(&mut self, _: &pacer_sim::JobRecord) {
            *self.0 += 1;
        }
    }
    sim.run_until(8_000 * MS, &mut Fanout(vec![&mut trace, &mut Count(&mut jobs)]));
    let d = decode(&trace.finish().unwrap());
    let Policy::Deadline(r) = sim.policy_of(0).unwrap() else {
        panic!("the controller reserved nothing in 8 s")
    };
    let thread_track = *d
        .tracks
        .iter()
        .find(|(_, &tid)| tid == thread_tid(0) as u64)
        .unwrap()
        .0;
    let find = |name: &str| {
        let (&uuid, (parent, _)) = d.counters.iter().find(|(_, (_, n))| n == name).unwrap();
        assert_eq!(*parent, thread_track, "{name} hangs from the thread's track");
        d.values
            .iter()
            .filter(|v| v.1 == uuid)
            .map(|v| (v.0, v.2))
            .collect::<Vec<_>>()
    };
    let reserved = find("reserved bandwidth");
    let used = find("used bandwidth");
    eprintln!(
        "reserved bandwidth: {} values, last {:.4} ({} / {}); used: {} values",
        reserved.len(),
        reserved.last().unwrap().1,
        r.runtime,
        r.period,
        used.len()
    );
    assert!(reserved.len() >= 2, "{reserved:?}");
    let last = reserved.last().unwrap().1;
    assert!((last - r.runtime.ns() as f64 / r.period.ns() as f64).abs() < 1e-12);
    assert!(reserved.windows(2).all(|w| w[0].0 <= w[1].0));
    assert_eq!(used.len() as u64, jobs);
    // 4 ms, then 8 ms of work every 20 ms.
    let near = |u: f64, x: f64| (u - x).abs() < 1e-9;
    assert!(
        used.iter().all(|&(_, u)| near(u, 0.2) || near(u, 0.4)),
        "{:?}",
        &used[..3]
    );
    assert_eq!(used.iter().filter(|&&(_, u)| near(u, 0.2)).count(), 150);
}
