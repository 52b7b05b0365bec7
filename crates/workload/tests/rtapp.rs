//! rt-app parser tests. The fixtures are rt-app's own documentation examples, re-typed from
//! github.com/scheduler-tools/rt-app (paths in tests/fixtures/README.md), comments and trailing
//! commas included; the expected models follow doc/tutorial.txt and src/rt-app_parse_config.c.

use std::path::{Path, PathBuf};

use pacer_model::{Duration, Reservation};
use pacer_workload::{
    parse_rtapp, parse_rtapp_with, read_rtapp, ChaseOrder, Event, FtraceCategories, MemAccess, MemBuffer,
    MemBufferId, MemBufferKind, Phase, Policy, ResourceId, ResourceKind, RtAppError, RtAppOptions,
    ThreadSpec, TimerId, TimerMode, Work, Workload,
};
use proptest::prelude::*;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

fn load(name: &str) -> Workload {
    unnamed(read_rtapp(&fixture(name)).unwrap_or_else(|e| panic!("{e}")))
}

// rt-app's thread names and indices are checked by `rtapp_names_and_indices`; the other tests
// compare models without them.
fn unnamed(mut w: Workload) -> Workload {
    for t in &mut w.threads {
        t.rtapp_name = None;
        t.index = 0;
        for p in &mut t.phases {
            p.event_descs.clear();
        }
    }
    w
}

fn us(n: u64) -> Duration {
    Duration::from_us(n)
}

fn run(n: u64) -> Event {
    Event::Run {
        work: Work::Fixed { ns: us(n) },
    }
}

fn sleep(n: u64) -> Event {
    Event::Sleep { duration: us(n) }
}

fn runtime(n: u64) -> Event {
    Event::Runtime { duration: us(n) }
}

fn lock(m: usize) -> Event {
    Event::Lock { mutex: ResourceId(m) }
}

fn unlock(m: usize) -> Event {
    Event::Unlock { mutex: ResourceId(m) }
}

fn signal(c: usize) -> Event {
    Event::Signal { cond: ResourceId(c) }
}

fn wait(c: usize, m: usize) -> Event {
    Event::Wait {
        cond: ResourceId(c),
        mutex: ResourceId(m),
    }
}

fn suspend(c: usize, m: usize) -> Event {
    Event::Suspend {
        cond: ResourceId(c),
        mutex: ResourceId(m),
    }
}

fn resume(c: usize, m: usize) -> Event {
    Event::Resume {
        cond: ResourceId(c),
        mutex: ResourceId(m),
    }
}

fn barrier(b: usize) -> Event {
    Event::Barrier {
        barrier: ResourceId(b),
    }
}

fn timer(id: usize, period_us: u64, mode: TimerMode) -> Event {
    Event::Timer {
        timer: TimerId(id),
        period: us(period_us),
        mode,
    }
}

fn thread(name: &str, policy: Policy, loops: Option<u64>, phases: Vec<Phase>) -> ThreadSpec {
    ThreadSpec {
        name: name.into(),
        policy,
        affinity: None,
        start_delay: Duration::ZERO,
        phases,
        loops,
        cooperative: false,
        job_deadline: None,
        ..Default::default()
    }
}

const OTHER: Policy = Policy::Other { nice: 0 };

fn parse(json: &str) -> Workload {
    unnamed(parse_rtapp(json, "test.json").unwrap_or_else(|e| panic!("{e}")))
}

// The error's field path and message, failing the test on any other outcome.
fn field_err(json: &str) -> (String, String) {
    match parse_rtapp(json, "bad.json") {
        Err(e @ RtAppError::Field { .. }) => {
            let shown = e.to_string();
            assert!(shown.starts_with("bad.json: field `"), "{shown}");
            match e {
                RtAppError::Field { field, message, .. } => (field, message),
                _ => unreachable!(),
            }
        }
        other => panic!("expected a field error for {json}, got {other:?}"),
    }
}

fn events_of(json: &str) -> Vec<Event> {
    let w = parse(json);
    assert_eq!(w.threads.len(), 1);
    w.threads[0].phases[0].events.clone()
}

fn has_ignored(w: &Workload, path: &str) -> bool {
    w.ignored.iter().any(|m| m.starts_with(&format!("{path}: ")))
}

// ---------------------------------------------------------------------------------------------
// Documentation examples

#[test]
fn tutorial_example1_run_sleep_forever() {
    let w = load("tutorial_example1.json");
    assert_eq!(
        w.threads,
        vec![thread(
            "thread0",
            OTHER,
            None,
            vec![Phase::new(1, vec![run(20000), sleep(80000)])]
        )]
    );
    assert_eq!(w.duration, Some(Duration::from_secs(2)));
    // Every global setting is read, none ignored.
    assert!(w.ignored.is_empty(), "{:?}", w.ignored);
    let s = &w.settings;
    assert_eq!((s.calibration_ns_per_loop, s.calibration_cpu), (None, 0));
    assert!(!s.pi_enabled && !s.lock_pages && s.gnuplot);
    assert_eq!((s.logdir.as_str(), s.log_basename.as_str()), ("./", "rt-app1"));
    assert_eq!(s.ftrace, FtraceCategories::ALL);
}

#[test]
fn tutorial_example2_periodic_run_and_timer() {
    let w = load("tutorial_example2.json");
    assert_eq!(
        w.threads,
        vec![thread(
            "thread0",
            OTHER,
            None,
            vec![Phase::new(
                1,
                vec![run(10000), timer(0, 100000, TimerMode::Relative)]
            )]
        )]
    );
    assert_eq!(w.timer_count(), 1);
}

#[test]
fn tutorial_example3_instances_loops_and_phases() {
    let w = load("tutorial_example3.json");
    assert_eq!(w.threads.len(), 12);
    for (i, t) in w.threads.iter().enumerate() {
        // `unique` timers: one per instance, shared by the two phases of that instance.
        let expected = thread(
            &format!("thread0-{i}"),
            OTHER,
            Some(1),
            vec![
                Phase::new(10, vec![run(3000), timer(i, 30000, TimerMode::Relative)]),
                Phase::new(10, vec![run(27000), timer(i, 30000, TimerMode::Relative)]),
            ],
        );
        assert_eq!(*t, expected);
    }
    assert_eq!(w.timer_count(), 12);
    assert_eq!(w.duration, None);
    assert!(w.ignored.is_empty(), "{:?}", w.ignored);
}

#[test]
fn deadline_example_builds_a_reservation() {
    let w = load("deadline.json");
    let expected = thread(
        "thread0",
        // dl-deadline defaults to dl-period.
        Policy::Deadline(Reservation::new(us(12000), us(100000), us(100000))),
        None,
        vec![Phase::new(
            1,
            vec![run(10000), timer(0, 100000, TimerMode::Relative)],
        )],
    );
    assert_eq!(w.threads, vec![expected]);
    assert_eq!(w.duration, Some(Duration::from_secs(2)));
}

#[test]
fn mp3_example_shared_timer_nice_values_and_skipped_events() {
    let w = load("mp3_short.json");
    let nice = |n| Policy::Other { nice: n };
    let mut tick = thread(
        "AudioTick",
        nice(-19),
        None,
        vec![
            Phase::new(1, vec![timer(0, 6000, TimerMode::Relative)]),
            Phase::new(4, vec![timer(0, 6000, TimerMode::Relative)]),
        ],
    );
    tick.affinity = Some(vec![0]);
    tick.phases[0].events.insert(0, resume(0, 1));
    let one = |name: &str, n, evs| thread(name, nice(n), None, vec![Phase::new(1, evs)]);
    // Each of AudioOut's and mp3.decoder's two `run` keys is one json-c entry: the last value
    // at the first place.
    assert_eq!(
        w.threads,
        vec![
            tick,
            one("AudioOut", -19, vec![run(4725), resume(2, 3), suspend(0, 1)]),
            one("AudioTrack", -16, vec![suspend(2, 3), run(300), resume(4, 5)]),
            one(
                "mp3.decoder",
                -2,
                vec![suspend(4, 5), run(150), lock(6), signal(7), wait(7, 6), unlock(6)]
            ),
            one(
                "OMXCall",
                -2,
                vec![lock(6), wait(7, 6), unlock(6), run(300), signal(7)]
            ),
        ]
    );
    // Resources by (name, kind), in file order: `resume AudioOut` names AudioOut's own.
    let names: Vec<(&str, ResourceKind)> = w.resources.iter().map(|r| (r.name.as_str(), r.kind)).collect();
    assert_eq!(
        names,
        [
            ("AudioOut", ResourceKind::Cond),
            ("AudioOut", ResourceKind::Mutex),
            ("AudioTrack", ResourceKind::Cond),
            ("AudioTrack", ResourceKind::Mutex),
            ("mp3.decoder", ResourceKind::Cond),
            ("mp3.decoder", ResourceKind::Mutex),
            ("mutex", ResourceKind::Mutex),
            ("queue", ResourceKind::Cond),
        ]
    );
    assert!(has_ignored(&w, "tasks.AudioOut.run"), "{:?}", w.ignored);
    assert!(has_ignored(&w, "global.frag"), "{:?}", w.ignored);
    assert_eq!(w.duration, Some(Duration::from_secs(6)));
}

#[test]
fn old_example2_run_prefixes_and_resources() {
    let w = load("example2_resources.json");
    assert_eq!(
        w.threads,
        vec![
            thread(
                "thread0",
                OTHER,
                None,
                vec![Phase::new(
                    1,
                    vec![lock(0), run(275), unlock(0), run(25), sleep(7700)]
                )]
            ),
            // `loop` in a thread without phases loops the (single) phase; the thread runs once.
            thread(
                "thread1",
                OTHER,
                Some(1),
                vec![Phase::new(
                    100,
                    vec![lock(0), run(4000), unlock(0), run(1000), sleep(28000)]
                )]
            ),
        ]
    );
    assert_eq!(w.resources.len(), 1);
    assert_eq!(w.settings.calibration_cpu, 1);
    for p in ["resources", "global.frag"] {
        assert!(has_ignored(&w, p), "{p} not in {:?}", w.ignored);
    }
}

#[test]
fn tutorial_example5_repeated_keys_follow_json_c() {
    let w = load("tutorial_example5.json");
    let mut t0 = thread(
        "thread0",
        Policy::Other { nice: -19 },
        Some(1),
        vec![
            Phase::new(1, vec![sleep(10000)]),
            Phase::new(
                8,
                vec![
                    lock(0),
                    run(100000),
                    signal(1),
                    unlock(0),
                    resume(2, 3),
                    timer(0, 200000, TimerMode::Relative),
                ],
            ),
        ],
    );
    t0.affinity = Some(vec![0]);
    let mut t1 = thread(
        "thread1",
        Policy::Other { nice: -19 },
        Some(1),
        vec![Phase::new(
            3,
            vec![lock(0), wait(1, 0), unlock(0), run(10000), suspend(2, 3)],
        )],
    );
    t1.affinity = Some(vec![1]);
    // The file says it is for workgen, which renames repeated keys; rt-app itself (json-c) keeps
    // one entry per key, with its last value at its first place, and so does pacer, noting it.
    assert_eq!(w.threads, vec![t0, t1]);
    assert!(has_ignored(&w, "tasks.thread0.phases.p1.run"), "{:?}", w.ignored);
    assert!(has_ignored(&w, "tasks.thread1.suspend"), "{:?}", w.ignored);
}

#[test]
fn tutorial_example7_runtime_is_not_run() {
    let w = load("tutorial_example7.json");
    assert_eq!(
        w.threads[0].phases[0].events,
        vec![
            runtime(1000),
            sleep(2000),
            barrier(0),
            runtime(2000),
            barrier(1),
            runtime(1000),
            sleep(2000),
            barrier(2)
        ]
    );
    assert_eq!(
        w.threads[1].phases[0].events,
        vec![
            runtime(2000),
            barrier(0),
            runtime(1000),
            sleep(2000),
            barrier(1),
            runtime(2000),
            barrier(2)
        ]
    );
    // Two users of each barrier (one event in each of two single-instance tasks).
    assert!(w
        .resources
        .iter()
        .all(|r| r.kind == ResourceKind::Barrier { users: 2 }));
    let f = w.settings.ftrace;
    assert!(f.main && f.task && f.loops && f.event && !f.stats);
    assert_eq!(w.duration, Some(Duration::from_secs(5)));
}

#[test]
fn tutorial_example8_phase_affinity() {
    let w = load("tutorial_example8.json");
    let mut p1 = Phase::new(1, vec![run(1500)]);
    p1.affinity = Some(vec![0]);
    let mut p2 = Phase::new(1, vec![run(1500)]);
    p2.affinity = Some(vec![1]);
    let p3 = Phase::new(1, vec![run(1500)]);
    let mut t = thread("thread0", OTHER, None, vec![p1, p2, p3]);
    t.affinity = Some(vec![2]);
    assert_eq!(w.threads, vec![t]);
}

#[test]
fn template_comments_everywhere() {
    let w = load("template.json");
    assert_eq!(
        w.threads[0].phases[0].events,
        vec![run(10000), sleep(0), timer(0, 100000, TimerMode::Relative)]
    );
    assert_eq!(w.duration, Some(Duration::from_secs(6)));
}

// ---------------------------------------------------------------------------------------------
// Grammar details

#[test]
fn events_are_matched_by_prefix_in_file_order() {
    assert_eq!(
        events_of(r#"{"tasks":{"t":{"run0":1,"sleep1":2,"run2":3}}}"#),
        vec![run(1), sleep(2), run(3)]
    );
    // File order, not key order.
    assert_eq!(
        events_of(r#"{"tasks":{"t":{"sleep1":2,"run0":1,"runA":4,"sleep_long":5}}}"#),
        vec![sleep(2), run(1), run(4), sleep(5)]
    );
    assert_eq!(
        events_of(r#"{"tasks":{"t":{"runtime":5,"run":6,"runtime_x":7,"run_y":8,"yield":""}}}"#),
        vec![runtime(5), run(6), runtime(7), run(8), Event::Yield]
    );
}

#[test]
fn task_properties_are_not_events() {
    let w = parse(
        r#"{"tasks":{"t":{"loop":3,"priority":5,"cpus":[3,1,1],"policy":"SCHED_FIFO","instance":1,
            "delay":250,"dl-runtime":10,"dl-period":20,"dl-deadline":20,"run":7}}}"#,
    );
    let t = &w.threads[0];
    assert_eq!(t.phases, vec![Phase::new(3, vec![run(7)])]);
    assert_eq!(t.loops, Some(1));
    assert_eq!(t.policy, Policy::Fifo { priority: 5 });
    assert_eq!(t.affinity, Some(vec![1, 3]));
    assert_eq!(t.start_delay, Duration(250_000));
    for k in ["dl-runtime", "dl-period", "dl-deadline"] {
        assert!(has_ignored(&w, &format!("tasks.t.{k}")), "{:?}", w.ignored);
    }
}

#[test]
fn policies_and_default_priorities() {
    let pol = |json: &str| parse(json).threads[0].policy;
    // rt-app's default real-time priority is 10.
    assert_eq!(
        pol(r#"{"tasks":{"t":{"policy":"SCHED_FIFO","run":1}}}"#),
        Policy::Fifo { priority: 10 }
    );
    assert_eq!(
        pol(r#"{"tasks":{"t":{"policy":"SCHED_RR","priority":99,"run":1}}}"#),
        Policy::Rr { priority: 99 }
    );
    assert_eq!(
        pol(r#"{"tasks":{"t":{"policy":"SCHED_IDLE","run":1}}}"#),
        Policy::Idle
    );
    assert_eq!(
        pol(r#"{"global":{"default_policy":"SCHED_RR"},"tasks":{"t":{"run":1}}}"#),
        Policy::Rr { priority: 10 }
    );
    assert_eq!(
        pol(r#"{"tasks":{"t":{"priority":19,"run":1}}}"#),
        Policy::Other { nice: 19 }
    );
    // Legacy thread-level spellings of the deadline parameters; dl-period defaults to runtime.
    assert_eq!(
        pol(r#"{"tasks":{"t":{"policy":"SCHED_DEADLINE","runtime":1000,"period":5000,"deadline":4000}}}"#),
        Policy::Deadline(Reservation::new(us(1000), us(4000), us(5000)))
    );
    assert_eq!(
        pol(r#"{"tasks":{"t":{"policy":"SCHED_DEADLINE","dl-runtime":1000,"run":1}}}"#),
        Policy::Deadline(Reservation::new(us(1000), us(1000), us(1000)))
    );
}

#[test]
fn phase_level_scheduling_changes() {
    let w = parse(
        r#"{"tasks":{"t":{"policy":"SCHED_FIFO","priority":5,"phases":{
            "a":{"run":1},
            "b":{"priority":30,"run":1},
            "c":{"policy":"SCHED_OTHER","run":1},
            "d":{"policy":"SCHED_DEADLINE","dl-runtime":1000,"dl-period":10000,"run":1}}}}}"#,
    );
    let got: Vec<Option<Policy>> = w.threads[0].phases.iter().map(|p| p.policy).collect();
    assert_eq!(
        got,
        vec![
            None,
            Some(Policy::Fifo { priority: 30 }),
            Some(Policy::Other { nice: 0 }),
            Some(Policy::Deadline(Reservation::new(us(1000), us(10000), us(10000)))),
        ]
    );
    assert_eq!(w.threads[0].policy, Policy::Fifo { priority: 5 });
}

#[test]
fn timers_are_shared_by_name_across_the_file() {
    let w = parse(
        r#"{"tasks":{
            "a":{"run":1,"timer":{"ref":"shared","period":1000}},
            "b":{"instance":2,"run":1,"timer":{"ref":"shared","period":2000},"timer2":{"ref":"own","period":3000}},
            "c":{"instance":2,"phases":{
                "x":{"run":1,"timer":{"ref":"unique","period":1000},"timer1":{"ref":"uniqueB","period":1000}},
                "y":{"run":1,"timer":{"ref":"unique","period":1000}}}}}}"#,
    );
    let ids = |t: &ThreadSpec| -> Vec<usize> {
        t.phases
            .iter()
            .flat_map(|p| p.events.iter())
            .filter_map(|e| match e {
                Event::Timer { timer, .. } => Some(timer.0),
                _ => None,
            })
            .collect()
    };
    let names: Vec<&str> = w.threads.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["a", "b-0", "b-1", "c-0", "c-1"]);
    assert_eq!(ids(&w.threads[0]), [0]);
    // Without `unique`, instances share the task's timers too (tutorial: "the timer will be
    // shared across the thread instance").
    assert_eq!(ids(&w.threads[1]), [0, 1]);
    assert_eq!(ids(&w.threads[2]), [0, 1]);
    // `unique…`: per instance; the same name in two phases of one thread is the same timer.
    assert_eq!(ids(&w.threads[3]), [2, 3, 2]);
    assert_eq!(ids(&w.threads[4]), [4, 5, 4]);
    assert_eq!(w.timer_count(), 6);
}

#[test]
fn absolute_mode_belongs_to_the_timer() {
    let w = parse(
        r#"{"tasks":{
            "a":{"run":1,"timer":{"ref":"t","period":1000}},
            "b":{"run":1,"timer":{"ref":"t","period":1000,"mode":"absolute"}},
            "c":{"run":1,"timer":{"ref":"u","period":1000,"mode":"relative"}}}}"#,
    );
    let mode = |i: usize| match w.threads[i].phases[0].events[1] {
        Event::Timer { mode, .. } => mode,
        ref e => panic!("{e:?}"),
    };
    assert_eq!(
        [mode(0), mode(1), mode(2)],
        [TimerMode::Absolute, TimerMode::Absolute, TimerMode::Relative]
    );
}

#[test]
fn forever_loops() {
    // With phases, the thread loops forever by default.
    let w = parse(r#"{"tasks":{"t":{"phases":{"p":{"run":1}}}}}"#);
    assert_eq!(w.threads[0].loops, None);
    // A first phase looping forever makes later phases unreachable.
    let w = parse(r#"{"tasks":{"t":{"loop":3,"phases":{"p":{"loop":-1,"run":1},"q":{"run":2}}}}}"#);
    assert_eq!(w.threads[0].loops, None);
    assert_eq!(w.threads[0].phases, vec![Phase::new(1, vec![run(1)])]);
    assert!(has_ignored(&w, "tasks.t.phases.q"));
    let (f, m) = field_err(r#"{"tasks":{"t":{"phases":{"p":{"run":1},"q":{"loop":-1,"run":2}}}}}"#);
    assert_eq!(f, "tasks.t.phases.q.loop");
    assert!(m.contains("only the first phase"), "{m}");
}

#[test]
fn ignored_keys_are_listed_with_their_path() {
    let text = r#"{"resources":{},"extra":1,"global":{"calibration":100,"spacing":2},
            "tasks":{"t":{"taskgroup":"/a","util_min":10,"colour":"red","run":1,"nodes_membind":[0],
                          "timer":{"ref":"x","period":0}},
                     "p":{"run":5,"phases":{"a":{"util_max":5,"instance":3,"run":1}}}}}"#;
    // Nothing of current rt-app is left for `--lenient` to skip: both read the file alike.
    let w = unnamed(parse_rtapp_with(text, "t.json", &RtAppOptions { lenient: true }).unwrap());
    assert_eq!(w, unnamed(parse_rtapp(text, "t.json").unwrap()));
    for p in [
        "resources",
        "extra",
        "global.spacing",
        "tasks.t.colour",
        "tasks.t.timer.period",
        "tasks.p.run",
        "tasks.p.phases.a.instance",
    ] {
        assert!(has_ignored(&w, p), "{p} not in {:#?}", w.ignored);
    }
    assert_eq!(w.settings.calibration_ns_per_loop, Some(100));
    let t = &w.threads[0];
    assert_eq!(
        (t.taskgroup.as_deref(), t.util_min, t.util_max),
        (Some("/a"), Some(10), None)
    );
    assert_eq!(t.phases[0].events, vec![run(1)]);
    assert_eq!(w.threads[1].phases[0].events, vec![run(1)]);
    assert_eq!(w.threads[1].phases[0].util_max, Some(5));
}

/// `util_min`/`util_max` at phase level (rt-app's tutorial: "task level or phase level"),
/// 0..=1024.
#[test]
fn utilisation_clamps_at_phase_level() {
    let w = parse(
        r#"{"tasks":{"t":{"util_max":800,"phases":{"a":{"run":1,"util_min":100},"b":{"run":1,"util_max":1024},"c":{"run":1}}}}}"#,
    );
    let t = &w.threads[0];
    assert_eq!(t.util_max, Some(800));
    let clamps: Vec<_> = t.phases.iter().map(|p| (p.util_min, p.util_max)).collect();
    assert_eq!(clamps, [(Some(100), None), (None, Some(1024)), (None, None)]);
    let (f, m) = field_err(r#"{"tasks":{"t":{"phases":{"a":{"run":1,"util_min":1025}}}}}"#);
    assert_eq!(f, "tasks.t.phases.a.util_min");
    assert!(m.contains("0..=1024"), "{m}");
}

#[test]
fn sync_memory_io_and_fork_events() {
    let w = parse(
        r#"{"global":{"pi_enabled":true,"io_device":"/tmp/x","mem_buffer_size":64},
            "tasks":{
              "a":{"instance":2,"lock":"m","sync":{"ref":"c","mutex":"m"},"unlock":"m",
                   "barrier":"b","sem_post":"s","mem":100,"iorun":200,"fork":"w","broad":"c"},
              "b":{"sem_wait":"s","wait":{},"barrier":"b","barrier1":"b","resume":"a"},
              "w":{"instance":0,"run":10,"yield":""}}}"#,
    );
    assert_eq!(w.threads.len(), 4);
    let r = |name: &str, kind| {
        w.resources
            .iter()
            .position(|x| x.name == name && x.kind == kind)
            .map(ResourceId)
            .unwrap_or_else(|| panic!("no {name} {kind:?} in {:?}", w.resources))
    };
    let (m, c, s) = (
        r("m", ResourceKind::Mutex),
        r("c", ResourceKind::Cond),
        r("s", ResourceKind::Semaphore),
    );
    // Two instances of `a` and two uses in `b`: four users of `b`.
    let b = r("b", ResourceKind::Barrier { users: 4 });
    assert_eq!(
        w.threads[0].phases[0].events,
        vec![
            Event::Lock { mutex: m },
            Event::SignalWait { cond: c, mutex: m },
            Event::Unlock { mutex: m },
            Event::Barrier { barrier: b },
            Event::SemPost { sem: s },
            Event::Mem { bytes: 100 },
            Event::IoRun { bytes: 200 },
            Event::Fork { thread: 3 },
            Event::Broadcast { cond: c },
        ]
    );
    // `wait` without names uses rt-app's "unknown" condition and mutex; `resume a` names a's.
    assert_eq!(
        w.threads[2].phases[0].events,
        vec![
            Event::SemWait { sem: s },
            Event::Wait {
                cond: r("unknown", ResourceKind::Cond),
                mutex: r("unknown", ResourceKind::Mutex)
            },
            Event::Barrier { barrier: b },
            Event::Barrier { barrier: b },
            Event::Resume {
                cond: r("a", ResourceKind::Cond),
                mutex: r("a", ResourceKind::Mutex)
            },
        ]
    );
    assert!(w.threads[3].forked && !w.threads[0].forked);
    assert!(w.settings.pi_enabled);
    assert_eq!(
        (w.settings.io_device.as_str(), w.settings.mem_buffer_size),
        ("/tmp/x", 64)
    );
}

#[test]
fn rtapp_names_and_indices() {
    let w = parse_rtapp(
        r#"{"tasks":{"pair":{"instance":2,"run":1},"w":{"instance":0,"run":1},"solo":{"run":1}}}"#,
        "t.json",
    )
    .unwrap();
    let got: Vec<(&str, Option<&str>, u32, bool)> = w
        .threads
        .iter()
        .map(|t| (t.name.as_str(), t.rtapp_name.as_deref(), t.index, t.forked))
        .collect();
    // rt-app numbers the threads it creates at the start in file order (`<task>-<index>`); a
    // forked thread gets its index and name when forked.
    assert_eq!(
        got,
        [
            ("pair-0", Some("pair-0"), 0, false),
            ("pair-1", Some("pair-1"), 1, false),
            ("w", None, 0, true),
            ("solo", Some("solo-2"), 2, false),
        ]
    );
}

#[test]
fn sched_batch_takes_a_nice_value() {
    let w = parse(r#"{"tasks":{"b":{"policy":"SCHED_BATCH","priority":5,"run":1}}}"#);
    assert_eq!(w.threads[0].policy, Policy::Batch { nice: 5 });
    let (f, _) = field_err(r#"{"tasks":{"b":{"policy":"SCHED_BATCH","priority":30,"run":1}}}"#);
    assert_eq!(f, "tasks.b.priority");
}

#[test]
fn global_settings_are_checked() {
    for (json, field) in [
        (
            r#"{"global":{"calibration":0},"tasks":{"t":{"run":1}}}"#,
            "global.calibration",
        ),
        (
            r#"{"global":{"calibration":"GPU0"},"tasks":{"t":{"run":1}}}"#,
            "global.calibration",
        ),
        (
            r#"{"global":{"ftrace":"main,bogus"},"tasks":{"t":{"run":1}}}"#,
            "global.ftrace",
        ),
        (
            r#"{"global":{"pi_enabled":1},"tasks":{"t":{"run":1}}}"#,
            "global.pi_enabled",
        ),
        (
            r#"{"global":{"log_size":-1},"tasks":{"t":{"run":1}}}"#,
            "global.log_size",
        ),
        (
            r#"{"global":{"mem_buffer_size":0},"tasks":{"t":{"run":1}}}"#,
            "global.mem_buffer_size",
        ),
        (r#"{"tasks":{"t":{"lock":1}}}"#, "tasks.t.lock"),
        (r#"{"tasks":{"t":{"mem":-1}}}"#, "tasks.t.mem"),
        (r#"{"tasks":{"t":{"util_min":2000,"run":1}}}"#, "tasks.t.util_min"),
    ] {
        assert_eq!(field_err(json).0, field, "{json}");
    }
    let w = parse(r#"{"global":{"log_size":"disable","ftrace":"none"},"tasks":{"t":{"run":1}}}"#);
    assert_eq!(w.settings.log_size, Some(0));
    assert!(!w.settings.ftrace.any());
    let w = parse(r#"{"global":{"log_size":2},"tasks":{"t":{"run":1}}}"#);
    assert_eq!(w.settings.log_size, Some(2 << 20));
    // A file naming rt-app's own default still asks for logs.
    assert!(
        parse(r#"{"global":{"logdir":"./"},"tasks":{"t":{"run":1}}}"#)
            .settings
            .logs_set
    );
    assert!(
        !parse(r#"{"global":{"duration":1},"tasks":{"t":{"run":1}}}"#)
            .settings
            .logs_set
    );
}

#[test]
fn repeated_keys_keep_the_last_value_at_the_first_place() {
    let w = parse(r#"{"tasks":{"t":{"loop":2,"run":1,"sleep":3,"loop":5,"run":2}}}"#);
    assert_eq!(w.threads[0].phases, vec![Phase::new(5, vec![run(2), sleep(3)])]);
    assert!(has_ignored(&w, "tasks.t.loop"));
    assert!(has_ignored(&w, "tasks.t.run"));
}

// ---------------------------------------------------------------------------------------------
// Errors

#[test]
fn malformed_json_reports_line_and_column() {
    match parse_rtapp("{\"tasks\": {\n  \"t\": {\"run\": 1,, }}}", "bad.json") {
        Err(RtAppError::Syntax {
            file, line, column, ..
        }) => {
            assert_eq!((file.as_str(), line), ("bad.json", 2));
            assert!(column > 1);
        }
        other => panic!("{other:?}"),
    }
    // Comments do not shift positions.
    match parse_rtapp("{ /* one\n two */ \"tasks\": {\n  \"t\": [1 2]}}", "f") {
        Err(RtAppError::Syntax { line, .. }) => assert_eq!(line, 3),
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        parse_rtapp(r#"{"tasks":{"t":{"run":1}}} x"#, "f"),
        Err(RtAppError::Syntax { .. })
    ));
    assert!(matches!(
        parse_rtapp("{\"tasks\": /* never closed", "f"),
        Err(RtAppError::Syntax {
            line: 1,
            column: 11,
            ..
        })
    ));
    assert!(matches!(parse_rtapp("", "f"), Err(RtAppError::Syntax { .. })));
}

#[test]
fn structural_errors() {
    assert_eq!(field_err("[1, 2]").0, "(top level)");
    assert_eq!(field_err(r#"{"global":{}}"#).0, "tasks");
    assert_eq!(field_err(r#"{"tasks":[]}"#).0, "tasks");
    assert_eq!(field_err(r#"{"tasks":{}}"#).0, "tasks");
    assert_eq!(field_err(r#"{"tasks":{"t":5}}"#).0, "tasks.t");
    assert_eq!(field_err(r#"{"global":3,"tasks":{"t":{"run":1}}}"#).0, "global");
    assert_eq!(
        field_err(r#"{"tasks":{"t":{"phases":[],"run":1}}}"#).0,
        "tasks.t.phases"
    );
    assert_eq!(field_err(r#"{"tasks":{"t":{"phases":{}}}}"#).0, "tasks.t.phases");
    assert_eq!(
        field_err(r#"{"tasks":{"t":{"phases":{"p":1}}}}"#).0,
        "tasks.t.phases.p"
    );
    // A repeated task name is one json-c entry, the last.
    let w = parse(r#"{"tasks":{"t":{"run":1},"t":{"run":2}}}"#);
    assert_eq!(w.threads.len(), 1);
    assert_eq!(w.threads[0].phases[0].events, vec![run(2)]);
    assert!(has_ignored(&w, "tasks.t"));
    let (f, m) = field_err(r#"{"tasks":{"a":{"instance":2,"run":1},"a-1":{"run":1}}}"#);
    assert_eq!(f, "tasks.a-1");
    assert!(m.contains("a-1"), "{m}");
}

#[test]
fn bad_durations() {
    let (f, m) = field_err(r#"{"tasks":{"t":{"run":-5}}}"#);
    assert_eq!(f, "tasks.t.run");
    assert!(m.contains("microseconds ≥ 0") && m.contains("-5"), "{m}");
    let (f, m) = field_err(r#"{"tasks":{"t":{"sleep0":1.5}}}"#);
    assert_eq!(f, "tasks.t.sleep0");
    assert!(m.contains("non-integer"), "{m}");
    assert_eq!(
        field_err(r#"{"tasks":{"t":{"runtime":"10"}}}"#).0,
        "tasks.t.runtime"
    );
    let (f, m) = field_err(r#"{"tasks":{"t":{"run":3000000000}}}"#);
    assert_eq!(f, "tasks.t.run");
    assert!(m.contains("32-bit"), "{m}");
    assert_eq!(
        field_err(r#"{"tasks":{"t":{"phases":{"p":{"run":[1]}}}}}"#).0,
        "tasks.t.phases.p.run"
    );
    assert_eq!(
        field_err(r#"{"tasks":{"t":{"delay":-1,"run":1}}}"#).0,
        "tasks.t.delay"
    );
    assert_eq!(
        field_err(r#"{"global":{"duration":-2},"tasks":{"t":{"run":1}}}"#).0,
        "global.duration"
    );
}

#[test]
fn bad_policies_and_priorities() {
    let (f, m) = field_err(r#"{"tasks":{"t":{"policy":"SCHED_EXT","run":1}}}"#);
    assert_eq!(f, "tasks.t.policy");
    assert!(m.contains("SCHED_BATCH") && m.contains("SCHED_FIFO"), "{m}");
    assert_eq!(
        field_err(r#"{"global":{"default_policy":"sched_fifo"},"tasks":{"t":{"run":1}}}"#).0,
        "global.default_policy"
    );
    for (policy, prio) in [
        ("SCHED_FIFO", 0),
        ("SCHED_FIFO", 100),
        ("SCHED_RR", -1),
        ("SCHED_OTHER", 20),
    ] {
        let json = format!(r#"{{"tasks":{{"t":{{"policy":"{policy}","priority":{prio},"run":1}}}}}}"#);
        let (f, m) = field_err(&json);
        assert_eq!(f, "tasks.t.priority", "{json}");
        assert!(m.contains(&prio.to_string()), "{m}");
    }
    assert_eq!(
        field_err(r#"{"tasks":{"t":{"phases":{"p":{"policy":"SCHED_FIFO","priority":0,"run":1}}}}}"#).0,
        "tasks.t.phases.p.priority"
    );
}

#[test]
fn bad_deadline_parameters() {
    let dl = |params: &str| {
        field_err(&format!(
            r#"{{"tasks":{{"t":{{"policy":"SCHED_DEADLINE",{params}"run":1}}}}}}"#
        ))
    };
    let (f, m) = dl(r#""dl-runtime":6000,"dl-deadline":5000,"dl-period":10000,"#);
    assert_eq!(f, "tasks.t.dl-runtime");
    assert!(m.contains("exceeds deadline"), "{m}");
    let (f, m) = dl(r#""dl-runtime":1000,"dl-deadline":11000,"dl-period":10000,"#);
    assert_eq!(f, "tasks.t.dl-deadline");
    assert!(m.contains("exceeds period"), "{m}");
    // No parameters at all: runtime 0 is below the kernel's minimum.
    let (f, m) = dl("");
    assert_eq!(f, "tasks.t.dl-runtime");
    assert!(m.contains("1024ns"), "{m}");
    // 1 µs is below the kernel's 1024 ns minimum; a 50 µs period below its 100 µs minimum.
    assert_eq!(dl(r#""dl-runtime":1,"dl-period":1000,"#).0, "tasks.t.dl-runtime");
    let (f, m) = dl(r#""dl-runtime":20,"dl-period":50,"#);
    assert_eq!(f, "tasks.t.dl-period");
    assert!(m.contains("outside the allowed range"), "{m}");
    // A global SCHED_DEADLINE default applies the same checks.
    assert_eq!(
        field_err(r#"{"global":{"default_policy":"SCHED_DEADLINE"},"tasks":{"t":{"run":1}}}"#).0,
        "tasks.t.dl-runtime"
    );
}

#[test]
fn bad_timers() {
    let (f, m) = field_err(r#"{"tasks":{"t":{"run":1,"timer":{"ref":"a"}}}}"#);
    assert_eq!(f, "tasks.t.timer.period");
    assert!(m.contains("missing"), "{m}");
    assert_eq!(
        field_err(r#"{"tasks":{"t":{"run":1,"timer":{"ref":"a","period":10,"mode":"abs"}}}}"#).0,
        "tasks.t.timer.mode"
    );
    assert_eq!(
        field_err(r#"{"tasks":{"t":{"run":1,"timer0":100}}}"#).0,
        "tasks.t.timer0"
    );
    assert_eq!(
        field_err(r#"{"tasks":{"t":{"run":1,"timer":{"ref":3,"period":10}}}}"#).0,
        "tasks.t.timer.ref"
    );
    assert_eq!(
        field_err(r#"{"tasks":{"t":{"run":1,"timer":{"ref":"a","period":-10}}}}"#).0,
        "tasks.t.timer.period"
    );
}

#[test]
fn threads_without_events() {
    let (f, m) = field_err(r#"{"tasks":{"t":{"loop":3}}}"#);
    assert_eq!(f, "tasks.t");
    assert!(m.contains("at least one event"), "{m}");
    assert_eq!(
        field_err(r#"{"tasks":{"t":{"phases":{"p":{"loop":2}}}}}"#).0,
        "tasks.t.phases.p"
    );
}

#[test]
fn bad_counts_and_cpus() {
    for (json, field) in [
        (r#"{"tasks":{"t":{"instance":-1,"run":1}}}"#, "tasks.t.instance"),
        (
            r#"{"tasks":{"t":{"instance":1000000,"run":1}}}"#,
            "tasks.t.instance",
        ),
        (r#"{"tasks":{"t":{"loop":0,"run":1}}}"#, "tasks.t.loop"),
        (r#"{"tasks":{"t":{"loop":-2,"run":1}}}"#, "tasks.t.loop"),
        (
            r#"{"tasks":{"t":{"phases":{"p":{"loop":1.0,"run":1}}}}}"#,
            "tasks.t.phases.p.loop",
        ),
        (r#"{"tasks":{"t":{"cpus":0,"run":1}}}"#, "tasks.t.cpus"),
        (r#"{"tasks":{"t":{"cpus":[],"run":1}}}"#, "tasks.t.cpus"),
        (r#"{"tasks":{"t":{"cpus":[0,-1],"run":1}}}"#, "tasks.t.cpus[1]"),
        (
            r#"{"tasks":{"t":{"phases":{"p":{"cpus":["0"],"run":1}}}}}"#,
            "tasks.t.phases.p.cpus[0]",
        ),
    ] {
        assert_eq!(field_err(json).0, field, "{json}");
    }
    let (_, m) = field_err(r#"{"tasks":{"t":{"fork":"nobody","run":1}}}"#);
    assert!(m.contains("nobody"), "{m}");
}

#[test]
fn read_errors_name_the_file() {
    match read_rtapp(Path::new("/nonexistent/x.json")) {
        Err(e @ RtAppError::Io { .. }) => {
            assert!(e.to_string().starts_with("/nonexistent/x.json: cannot read"))
        }
        other => panic!("{other:?}"),
    }
    match read_rtapp(&fixture("deadline.json")) {
        Ok(w) => assert_eq!(w.threads.len(), 1),
        Err(e) => panic!("{e}"),
    }
}

// ---------------------------------------------------------------------------------------------
// Robustness

fn arb_json() -> impl Strategy<Value = serde_json::Value> {
    use serde_json::Value;
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        (-3i64..200_000).prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        "[a-z_-]{0,8}".prop_map(Value::String),
        prop_oneof![
            Just("SCHED_FIFO"),
            Just("SCHED_DEADLINE"),
            Just("unique"),
            Just("absolute"),
            Just("tick")
        ]
        .prop_map(|s| Value::String(s.into())),
    ];
    let key = prop_oneof![
        "[a-z_-]{0,8}",
        prop_oneof![
            Just("tasks"),
            Just("global"),
            Just("phases"),
            Just("run"),
            Just("runtime"),
            Just("sleep"),
            Just("timer"),
            Just("ref"),
            Just("period"),
            Just("mode"),
            Just("loop"),
            Just("instance"),
            Just("policy"),
            Just("priority"),
            Just("dl-runtime"),
            Just("dl-period"),
            Just("cpus"),
            Just("delay"),
            Just("yield"),
            Just("duration"),
            Just("default_policy")
        ]
        .prop_map(String::from),
    ];
    leaf.prop_recursive(5, 64, 6, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec((key.clone(), inner), 0..6)
                .prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn garbage_never_panics(text in "\\PC{0,200}") {
        let _ = parse_rtapp(&text, "g");
    }

    #[test]
    fn json_like_garbage_never_panics(text in "[{}\\[\\]\":,/* \n0-9a-z-]{0,120}") {
        let _ = parse_rtapp(&text, "g");
    }

    #[test]
    fn random_json_never_panics(v in arb_json()) {
        let _ = parse_rtapp(&v.to_string(), "g");
        let _ = parse_rtapp(&serde_json::json!({ "tasks": v.clone() }).to_string(), "g");
        let _ = parse_rtapp(&serde_json::json!({ "tasks": { "t": v } }).to_string(), "g");
    }

    // Files that parse give a consistent model: every thread has something to run and timer ids
    // are dense.
    #[test]
    fn accepted_files_are_consistent(v in arb_json()) {
        if let Ok(w) = parse_rtapp(&serde_json::json!({ "tasks": { "t": v } }).to_string(), "g") {
            for t in &w.threads {
                prop_assert!(t.phases.iter().any(|p| !p.events.is_empty()));
                prop_assert!(t.phases.iter().all(|p| p.loops >= 1));
            }
            let n = w.timer_count();
            let mut used = vec![false; n];
            for e in w.threads.iter().flat_map(|t| t.phases.iter()).flat_map(|p| p.events.iter()) {
                if let Event::Timer { timer, period, .. } = e {
                    used[timer.0] = true;
                    prop_assert!(!period.is_zero());
                }
            }
            prop_assert!(used.into_iter().all(|u| u));
        }
    }
}

/// rt-app's `taskgroup` at thread and phase level (tutorial examples 10 and 11): a path from the
/// cpu controller's root; phase-level groups are sticky, `/` is the root; only fair policies
/// may be in a group (rt-app's check_taskgroup_policy_dep()).
#[test]
fn task_groups_at_thread_and_phase_level() {
    let w = parse(
        r#"{"tasks":{"t":{"loop":-1,"taskgroup":"/tg1","phases":{
              "a":{"run":10,"sleep":10,"taskgroup":"/tg1/tg11"},
              "b":{"run":10},
              "c":{"run":10,"taskgroup":"/"}}}}}"#,
    );
    let t = &w.threads[0];
    assert_eq!(t.taskgroup.as_deref(), Some("/tg1"));
    let groups: Vec<Option<&str>> = t.phases.iter().map(|p| p.taskgroup.as_deref()).collect();
    assert_eq!(groups, [Some("/tg1/tg11"), None, Some("/")]);
    // An empty string is no group, as in rt-app.
    let w = parse(r#"{"tasks":{"t":{"run":1,"taskgroup":""}}}"#);
    assert_eq!(w.threads[0].taskgroup, None);

    for (text, field, says) in [
        (
            r#"{"tasks":{"t":{"run":1,"taskgroup":"tg1"}}}"#,
            "tasks.t.taskgroup",
            "starting with \"/\"",
        ),
        (
            r#"{"tasks":{"t":{"run":1,"taskgroup":"/a/../b"}}}"#,
            "tasks.t.taskgroup",
            "without `.`, `..`",
        ),
        (
            r#"{"tasks":{"t":{"run":1,"taskgroup":3}}}"#,
            "tasks.t.taskgroup",
            "cgroup path",
        ),
        (
            r#"{"tasks":{"t":{"run":1,"policy":"SCHED_FIFO","taskgroup":"/g"}}}"#,
            "tasks.t",
            "policy SCHED_FIFO",
        ),
        // The policy a phase sets meets the group an earlier phase set.
        (
            r#"{"tasks":{"t":{"phases":{"a":{"run":1,"taskgroup":"/g"},"b":{"run":1,"policy":"SCHED_RR"}}}}}"#,
            "tasks.t",
            "policy SCHED_RR",
        ),
        (
            r#"{"tasks":{"t":{"policy":"SCHED_FIFO","phases":{"a":{"run":1,"taskgroup":"/g"}}}}}"#,
            "tasks.t.phases.a.taskgroup",
            "only for SCHED_OTHER, SCHED_BATCH and SCHED_IDLE",
        ),
    ] {
        let (f, m) = field_err(text);
        assert_eq!(f, field, "{text}: {m}");
        assert!(m.contains(says), "{text}: {m}");
    }
    // SCHED_BATCH and SCHED_IDLE threads may be in groups.
    parse(r#"{"tasks":{"t":{"run":1,"policy":"SCHED_BATCH","taskgroup":"/g"}}}"#);
    parse(r#"{"tasks":{"t":{"run":1,"policy":"SCHED_IDLE","taskgroup":"/g"}}}"#);
}

/// rt-app's `nodes_membind` at thread and phase level (its tutorial's example): an array of
/// node numbers, kept sorted without repeats; phases without one keep the current binding.
#[test]
fn memory_binding_at_thread_and_phase_level() {
    let w = parse(
        r#"{"tasks":{
              "thread1":{"nodes_membind":[3,2],"phases":{"phase1":{"run":10,"sleep":10}}},
              "thread2":{"phases":{"phase1":{"nodes_membind":[0,1,1],"run":10,"sleep":10},
                                   "phase2":{"nodes_membind":[2],"run":10,"sleep":10},
                                   "phase3":{"run":10}}}}}"#,
    );
    assert_eq!(w.threads[0].membind, Some(vec![2, 3]));
    let phases: Vec<Option<Vec<u32>>> = w.threads[1].phases.iter().map(|p| p.membind.clone()).collect();
    assert_eq!(phases, [Some(vec![0, 1]), Some(vec![2]), None]);
    assert_eq!(w.threads[1].membind, None);
    for (text, field) in [
        (
            r#"{"tasks":{"t":{"run":1,"nodes_membind":0}}}"#,
            "tasks.t.nodes_membind",
        ),
        (
            r#"{"tasks":{"t":{"run":1,"nodes_membind":[]}}}"#,
            "tasks.t.nodes_membind",
        ),
        (
            r#"{"tasks":{"t":{"run":1,"nodes_membind":[0,-1]}}}"#,
            "tasks.t.nodes_membind[1]",
        ),
        (
            r#"{"tasks":{"t":{"phases":{"p":{"run":1,"nodes_membind":["a"]}}}}}"#,
            "tasks.t.phases.p.nodes_membind[0]",
        ),
    ] {
        let (f, m) = field_err(text);
        assert_eq!(f, field, "{text}: {m}");
        assert!(m.contains("NUMA node"), "{text}: {m}");
    }
}

/// Each event keeps rt-app's name for it (`event_data_t.name`, the `desc` of its `rtapp_event`
/// marker): the key, `key:resource`, `key:cond:mutex`, unique names with the thread's tag.
#[test]
fn events_keep_rt_app_names_for_the_trace_markers() {
    let parse = |text: &str| parse_rtapp(text, "t.json").unwrap_or_else(|e| panic!("{e}"));
    let w = parse(
        r#"{"tasks":{
              "a":{"run0":10,"lock":"m","wait":{"ref":"c","mutex":"m"},"unlock":"m","barrier":"b",
                   "sleep_long":5,"mem":8,"suspend":"a","timer":{"ref":"unique_t","period":100},
                   "resume":"b","fork":"w","sem_post":"s","yield":""},
              "b":{"barrier":"b","sem_wait":"s","timer":{"ref":"shared","period":100},
                   "suspend":"b","signal":"c","sync":{"ref":"c","mutex":"m"},"broad":"c","iorun":4},
              "w":{"instance":0,"run":1}}}"#,
    );
    let descs: Vec<&str> = w.threads[0].phases[0]
        .event_descs
        .iter()
        .map(String::as_str)
        .collect();
    assert_eq!(
        descs,
        [
            "run0",
            "lock:m",
            "wait:c:m",
            "unlock:m",
            "barrier:b",
            "sleep_long",
            "mem1",
            "suspend:a:a",
            "timer:unique_t1",
            "resume:b:b",
            "fork:w",
            "sem_post:s",
            "yield"
        ]
    );
    let descs: Vec<&str> = w.threads[1].phases[0]
        .event_descs
        .iter()
        .map(String::as_str)
        .collect();
    assert_eq!(
        descs,
        [
            "barrier:b",
            "sem_wait:s",
            "timer:shared",
            "suspend:b:b",
            "signal:c",
            "sync:c:m",
            "broad:c",
            "mem2"
        ]
    );
    assert_eq!(
        w.threads[0].phases[0].event_descs.len(),
        w.threads[0].phases[0].events.len()
    );
    // rt-app's 48-byte field: 46 characters after a `key:` prefix.
    let long = "x".repeat(60);
    let w = parse(&format!(
        r#"{{"tasks":{{"t":{{"lock":"{long}","unlock":"{long}"}}}}}}"#
    ));
    assert_eq!(
        w.threads[0].phases[0].event_descs[0],
        format!("lock:{}", &long[..41])
    );
}

// ---------------------------------------------------------------------------------------------
// memrun

fn memrun(buffer: usize, access: MemAccess, count: u64) -> Event {
    Event::MemRun {
        buffer: MemBufferId(buffer),
        access,
        count,
    }
}

/// rt-app's `memrun` (tutorial "memrun", parse_task_event_data()): per-thread buffers keyed by
/// type and parameters, shared ones by `ref` and type, rt-app's names for both.
#[test]
fn memrun_events_and_their_buffers() {
    let w = parse_rtapp(
        r#"{"tasks":{
              "a":{"instance":2,
                   "memrun":{"type":"read","size":4096,"count":10000},
                   "memrun1":{"type":"read","size":4096,"count":5},
                   "memrun2":{"type":"write","size":4096,"count":7},
                   "memrun3":{"type":"chase","size":1048576,"count":100},
                   "memrun4":{"type":"chase","size":1000,"stride":16,"pattern":"sequential",
                              "count":3,"ref":"shared"}},
              "b":{"memrun":{"type":"chase","size":1000,"stride":16,"pattern":"sequential",
                             "count":1,"ref":"shared"},
                   "memrun_r":{"type":"read","size":64,"count":0,"ref":"shared","stride":null}}}}"#,
        "t.json",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    use MemAccess::{Chase, Read, Write};
    // Thread a-0 (tag 1): the two reads of one size share its buffer; the shared chain is 3.
    assert_eq!(
        w.threads[0].phases[0].events,
        [
            memrun(0, Read, 10000),
            memrun(0, Read, 5),
            memrun(1, Write, 7),
            memrun(2, Chase, 100),
            memrun(3, Chase, 3)
        ]
    );
    // Thread a-1 (tag 2) has buffers of its own, but the same shared chain.
    assert_eq!(
        w.threads[1].phases[0].events,
        [
            memrun(4, Read, 10000),
            memrun(4, Read, 5),
            memrun(5, Write, 7),
            memrun(6, Chase, 100),
            memrun(3, Chase, 3)
        ]
    );
    // `b` shares the chain; a read buffer named "shared" is another buffer (name and type).
    assert_eq!(
        w.threads[2].phases[0].events,
        [memrun(3, Chase, 1), memrun(7, Read, 0)]
    );
    let names: Vec<&str> = w.mem_buffers.iter().map(|b| b.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "memrun_read_40961",
            "memrun_write_40961",
            "memrun_r_64_10485761",
            "shared",
            "memrun_read_40962",
            "memrun_write_40962",
            "memrun_r_64_10485762",
            "shared"
        ]
    );
    let seq = MemBufferKind::Chase {
        stride: 16,
        order: ChaseOrder::Sequential,
    };
    assert_eq!(
        w.mem_buffers[3],
        MemBuffer {
            name: "shared".into(),
            size: 1000,
            kind: seq
        }
    );
    // 1000 / 16 = 62 positions, rounded down to 32: 512 bytes of chain.
    assert_eq!(w.mem_buffers[3].chase_positions(), Some(32));
    assert_eq!(w.mem_buffers[3].footprint(), 512);
    assert_eq!(
        w.mem_buffers[2].kind,
        MemBufferKind::Chase {
            stride: 64,
            order: ChaseOrder::Random
        }
    );
    assert_eq!(w.mem_buffers[7].kind, MemBufferKind::Read);
    assert!(
        w.ignored
            .iter()
            .any(|n| n.starts_with("tasks.b.memrun_r.ref: ") && n.contains("chase")),
        "{:#?}",
        w.ignored
    );
    // The marker's desc is the buffer's name, as rt-app's data->name.
    assert_eq!(
        w.threads[1].phases[0].event_descs,
        [
            "memrun_read_40962",
            "memrun_read_40962",
            "memrun_write_40962",
            "memrun_r_64_10485762",
            "shared"
        ]
    );
    for t in &w.threads {
        for e in &t.phases[0].events {
            if let Event::MemRun { buffer, access, .. } = *e {
                assert_eq!(w.mem_buffer_problem(buffer, access), None);
            }
        }
    }
    assert!(w.mem_buffer_problem(MemBufferId(0), Write).is_some());
    assert!(w.mem_buffer_problem(MemBufferId(8), Read).is_some());
}

#[test]
fn memrun_keys_rt_app_ignores_are_noted() {
    let w = parse(
        r#"{"tasks":{"t":{"memrun":{"type":"write","size":8,"count":1,"stride":8,"pattern":"random",
                                  "colour":"red","ref":null}}}}"#,
    );
    for p in [
        "tasks.t.memrun.stride",
        "tasks.t.memrun.pattern",
        "tasks.t.memrun.colour",
    ] {
        assert!(has_ignored(&w, p), "{p} not in {:#?}", w.ignored);
    }
    // `ref: null` is no `ref` (json-c gives null for both): a per-thread buffer.
    assert_eq!(w.mem_buffers[0].name, "memrun_write_81");
    // A long `ref` is cut at rt-app's 48-byte name in the marker, not in the buffer's name.
    let long = "x".repeat(60);
    let w = parse_rtapp(
        &format!(r#"{{"tasks":{{"t":{{"memrun":{{"type":"read","size":8,"count":1,"ref":"{long}"}}}}}}}}"#),
        "t.json",
    )
    .unwrap();
    assert_eq!(w.mem_buffers[0].name, long);
    assert_eq!(w.threads[0].phases[0].event_descs[0], long[..47]);
}

#[test]
fn memrun_errors_name_their_field() {
    let t = |m: &str| format!(r#"{{"tasks":{{"t":{{"run":1,"memrun":{m}}}}}}}"#);
    for (event, field, says) in [
        ("5", "tasks.t.memrun", "expected an object"),
        ("{}", "tasks.t.memrun.type", "missing"),
        (
            r#"{"type":null,"size":1,"count":1}"#,
            "tasks.t.memrun.type",
            "missing",
        ),
        (
            r#"{"type":"copy","size":1,"count":1}"#,
            "tasks.t.memrun.type",
            "\"copy\"",
        ),
        (
            r#"{"type":1,"size":1,"count":1}"#,
            "tasks.t.memrun.type",
            "integer 1",
        ),
        (r#"{"type":"read","count":1}"#, "tasks.t.memrun.size", "missing"),
        (
            r#"{"type":"read","size":0,"count":1}"#,
            "tasks.t.memrun.size",
            "≥ 1, found 0",
        ),
        (
            r#"{"type":"write","size":-5,"count":1}"#,
            "tasks.t.memrun.size",
            "found -5",
        ),
        (
            r#"{"type":"read","size":"1","count":1}"#,
            "tasks.t.memrun.size",
            "string",
        ),
        (
            r#"{"type":"read","size":4294967296,"count":1}"#,
            "tasks.t.memrun.size",
            "32-bit",
        ),
        (r#"{"type":"read","size":1}"#, "tasks.t.memrun.count", "missing"),
        (
            r#"{"type":"read","size":1,"count":-1}"#,
            "tasks.t.memrun.count",
            "found -1",
        ),
        (
            r#"{"type":"chase","size":128,"count":1.5}"#,
            "tasks.t.memrun.count",
            "non-integer",
        ),
        (
            r#"{"type":"read","size":1,"count":1,"ref":3}"#,
            "tasks.t.memrun.ref",
            "string",
        ),
        (
            r#"{"type":"chase","size":4096,"count":1,"stride":4}"#,
            "tasks.t.memrun.stride",
            "≥ 8",
        ),
        (
            r#"{"type":"chase","size":4096,"count":1,"stride":0}"#,
            "tasks.t.memrun.stride",
            "found 0",
        ),
        (
            r#"{"type":"chase","size":4096,"count":1,"stride":"64"}"#,
            "tasks.t.memrun.stride",
            "string",
        ),
        (
            r#"{"type":"chase","size":4096,"count":1,"pattern":"sequantial"}"#,
            "tasks.t.memrun.pattern",
            "\"sequantial\"",
        ),
        (
            r#"{"type":"chase","size":127,"count":1}"#,
            "tasks.t.memrun.size",
            "2 × stride (128 bytes)",
        ),
    ] {
        let (f, m) = field_err(&t(event));
        assert_eq!(f, field, "{event}: {m}");
        assert!(m.contains(says), "{event}: {m}");
    }
    // Two positions are enough.
    assert_eq!(
        parse(&t(r#"{"type":"chase","size":128,"count":1}"#))
            .mem_buffers
            .len(),
        1
    );
}

/// rt-app exits when memrun events share a `ref` and a type but not their parameters
/// (validate_init_args()); pacer names the first field that differs.
#[test]
fn memrun_buffers_shared_by_ref_must_agree() {
    let two = |a: &str, b: &str| {
        format!(r#"{{"tasks":{{"a":{{"memrun":{a}}},"b":{{"phases":{{"p":{{"memrun":{b}}}}}}}}}}}"#)
    };
    for (a, b, field, says) in [
        (
            r#"{"type":"read","size":64,"count":1,"ref":"x"}"#,
            r#"{"type":"read","size":128,"count":1,"ref":"x"}"#,
            "tasks.b.phases.p.memrun.size",
            "`tasks.a.memrun` with size 64, here with size 128",
        ),
        (
            r#"{"type":"chase","size":4096,"count":1,"ref":"x"}"#,
            r#"{"type":"chase","size":4096,"stride":128,"count":1,"ref":"x"}"#,
            "tasks.b.phases.p.memrun.stride",
            "size 4096, stride 64, pattern random, here with size 4096, stride 128",
        ),
        (
            r#"{"type":"chase","size":4096,"count":1,"ref":"x"}"#,
            r#"{"type":"chase","size":4096,"pattern":"sequential","count":1,"ref":"x"}"#,
            "tasks.b.phases.p.memrun.pattern",
            "pattern sequential",
        ),
    ] {
        let (f, m) = field_err(&two(a, b));
        assert_eq!(f, field, "{m}");
        assert!(m.contains(says) && m.contains("\"x\""), "{m}");
    }
    // Agreeing events share one buffer, whatever their counts; without `ref`, the same
    // parameters in two tasks are two buffers.
    let w = parse(&two(
        r#"{"type":"chase","size":4096,"count":1,"ref":"x"}"#,
        r#"{"type":"chase","size":4096,"stride":64,"pattern":"random","count":9,"ref":"x"}"#,
    ));
    assert_eq!(w.mem_buffers.len(), 1);
    let w = parse(&two(
        r#"{"type":"write","size":64,"count":1}"#,
        r#"{"type":"write","size":64,"count":1}"#,
    ));
    assert_eq!(w.mem_buffers.len(), 2);
    // A forked task's threads all run its one spec: one per-thread buffer for every fork, as
    // rt-app's forks share the template's resources.
    let w = parse(
        r#"{"tasks":{"p":{"fork":"c","sleep":10},"c":{"instance":0,"memrun":{"type":"read","size":64,"count":1}}}}"#,
    );
    assert_eq!(w.mem_buffers.len(), 1);
}

#[test]
fn pacer_wss_extension_reads_size_order_seed_and_amount() {
    use pacer_workload::{WorkingSet, WssAmount, WssOrder};
    let w = parse_rtapp(
        r#"{ "tasks": { "t": { "loop": 1,
            "pacer_wss": { "size": 16384, "order": "random", "seed": 9, "lines": 100 },
            "pacer_wss2": { "size": 262144 },
            "pacer_wss3": { "size": 4096, "run": 50 } } } }"#,
        "w.json",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let ev = &w.threads[0].phases[0].events;
    assert_eq!(
        ev[0],
        Event::WorkingSet(WorkingSet {
            size: 16384,
            order: WssOrder::Random,
            seed: 9,
            amount: WssAmount::Lines { lines: 100 },
        })
    );
    assert_eq!(
        ev[1],
        Event::WorkingSet(WorkingSet {
            size: 262144,
            order: WssOrder::Sequential,
            seed: 0,
            amount: WssAmount::Passes { passes: 1 },
        })
    );
    assert!(matches!(
        &ev[2],
        Event::WorkingSet(WorkingSet { amount: WssAmount::Work { work: Work::Fixed { ns } }, .. }) if ns.0 == 50_000
    ));
    assert_eq!(w.threads[0].working_set_bytes(), 262144);
    assert!(w.ignored.is_empty(), "{:?}", w.ignored);
}

#[test]
fn pacer_wss_errors_name_the_field() {
    for (body, field, expect) in [
        (r#"{ "size": 100 }"#, "size", "multiple of 64"),
        (r#"{ "order": "random" }"#, "size", "missing"),
        (
            r#"{ "size": 4096, "order": "diagonal" }"#,
            "order",
            "\"sequential\" or \"random\"",
        ),
        (
            r#"{ "size": 4096, "passes": 2, "lines": 3 }"#,
            "lines",
            "one of passes, lines or run",
        ),
        (r#"{ "size": 4096, "passes": -1 }"#, "passes", "≥ 0"),
        (
            r#"{ "size": 4096, "stride": 8 }"#,
            "stride",
            "not a key of pacer_wss",
        ),
        (r#"{ "size": 2147483584 }"#, "size", "at most"),
    ] {
        let text = format!(r#"{{ "tasks": {{ "t": {{ "pacer_wss": {body} }} }} }}"#);
        let e = parse_rtapp(&text, "w.json").expect_err(body).to_string();
        assert!(e.contains(&format!("tasks.t.pacer_wss.{field}")), "{body}: {e}");
        assert!(e.contains(expect), "{body}: {e}");
    }
}
