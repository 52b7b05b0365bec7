//! rt-app parser tests. The fixtures are rt-app's own documentation examples, re-typed from
//! github.com/scheduler-tools/rt-app (paths in tests/fixtures/README.md), comments and trailing
//! commas included; the expected models follow doc/tutorial.txt and src/rt-app_parse_config.c.

use std::path::{Path, PathBuf};

use pacer_model::{Duration, Reservation};
use pacer_workload::{
    parse_rtapp, read_rtapp, Event, Phase, Policy, RtAppError, ThreadSpec, TimerId, TimerMode, Work, Workload,
};
use proptest::prelude::*;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

fn load(name: &str) -> Workload {
    read_rtapp(&fixture(name)).unwrap_or_else(|e| panic!("{e}"))
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
    parse_rtapp(json, "test.json").unwrap_or_else(|e| panic!("{e}"))
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
    let paths: Vec<&str> = w.ignored.iter().map(|m| m.split(": ").next().unwrap()).collect();
    assert_eq!(
        paths,
        [
            "global.calibration",
            "global.pi_enabled",
            "global.lock_pages",
            "global.logdir",
            "global.log_basename",
            "global.ftrace",
            "global.gnuplot"
        ]
    );
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
    let one = |name: &str, n, evs| thread(name, nice(n), None, vec![Phase::new(1, evs)]);
    assert_eq!(
        w.threads,
        vec![
            tick,
            one("AudioOut", -19, vec![run(275), run(4725)]),
            one("AudioTrack", -16, vec![run(300)]),
            one("mp3.decoder", -2, vec![run(1000), run(150)]),
            one("OMXCall", -2, vec![run(300)]),
        ]
    );
    for p in [
        "tasks.AudioTick.phases.p1.resume",
        "tasks.AudioOut.resume",
        "tasks.AudioOut.suspend",
        "tasks.mp3.decoder.lock",
        "tasks.mp3.decoder.wait",
        "tasks.OMXCall.signal",
        "global.frag",
    ] {
        assert!(has_ignored(&w, p), "{p} not in {:?}", w.ignored);
    }
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
                vec![Phase::new(1, vec![run(275), run(25), sleep(7700)])]
            ),
            // `loop` in a thread without phases loops the (single) phase; the thread runs once.
            thread(
                "thread1",
                OTHER,
                Some(1),
                vec![Phase::new(100, vec![run(4000), run(1000), sleep(28000)])]
            ),
        ]
    );
    for p in [
        "resources",
        "tasks.thread0.lock",
        "tasks.thread1.unlock",
        "global.frag",
    ] {
        assert!(has_ignored(&w, p), "{p} not in {:?}", w.ignored);
    }
}

#[test]
fn tutorial_example5_repeated_keys_run_in_order() {
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
                    run(10000),
                    run(10000),
                    run(100000),
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
        vec![Phase::new(3, vec![run(10000), run(10000), run(10000)])],
    );
    t1.affinity = Some(vec![1]);
    assert_eq!(w.threads, vec![t0, t1]);
}

#[test]
fn tutorial_example7_runtime_is_not_run() {
    let w = load("tutorial_example7.json");
    assert_eq!(
        w.threads[0].phases[0].events,
        vec![
            runtime(1000),
            sleep(2000),
            runtime(2000),
            runtime(1000),
            sleep(2000)
        ]
    );
    assert_eq!(
        w.threads[1].phases[0].events,
        vec![runtime(2000), runtime(1000), sleep(2000), runtime(2000)]
    );
    assert!(has_ignored(&w, "tasks.task0.barrier2"));
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
    let w = parse(
        r#"{"resources":{},"extra":1,"global":{"calibration":100,"spacing":2},
            "tasks":{"t":{"taskgroup":"/a","util_min":10,"colour":"red","run":1,"lock":"m",
                          "wait":{"ref":"c","mutex":"m"},"fork":"t","mem":10,"iorun":10,
                          "timer":{"ref":"x","period":0}},
                     "p":{"run":5,"phases":{"a":{"util_max":5,"instance":3,"run":1,"barrier":"b"}}}}}"#,
    );
    for p in [
        "resources",
        "extra",
        "global.calibration",
        "global.spacing",
        "tasks.t.taskgroup",
        "tasks.t.util_min",
        "tasks.t.colour",
        "tasks.t.lock",
        "tasks.t.wait",
        "tasks.t.fork",
        "tasks.t.mem",
        "tasks.t.iorun",
        "tasks.t.timer.period",
        "tasks.p.run",
        "tasks.p.phases.a.util_max",
        "tasks.p.phases.a.instance",
        "tasks.p.phases.a.barrier",
    ] {
        assert!(has_ignored(&w, p), "{p} not in {:#?}", w.ignored);
    }
    assert_eq!(w.threads[0].phases[0].events, vec![run(1)]);
    assert_eq!(w.threads[1].phases[0].events, vec![run(1)]);
}

#[test]
fn repeated_property_keys_keep_the_first() {
    let w = parse(r#"{"tasks":{"t":{"loop":2,"loop":5,"run":1,"run":2}}}"#);
    assert_eq!(w.threads[0].phases, vec![Phase::new(2, vec![run(1), run(2)])]);
    assert!(has_ignored(&w, "tasks.t.loop"));
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
    let (f, m) = field_err(r#"{"tasks":{"t":{"run":1},"t":{"run":2}}}"#);
    assert_eq!(f, "tasks.t");
    assert!(m.contains("unique"), "{m}");
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
    let (f, m) = field_err(r#"{"tasks":{"t":{"policy":"SCHED_BATCH","run":1}}}"#);
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
    let (f, m) = field_err(r#"{"tasks":{"t":{"suspend":"t","lock":"m"}}}"#);
    assert_eq!(f, "tasks.t");
    assert!(m.contains("no event pacer can run"), "{m}");
    assert_eq!(
        field_err(r#"{"tasks":{"t":{"phases":{"p":{"loop":2}}}}}"#).0,
        "tasks.t.phases.p"
    );
}

#[test]
fn bad_counts_and_cpus() {
    for (json, field) in [
        (r#"{"tasks":{"t":{"instance":0,"run":1}}}"#, "tasks.t.instance"),
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
    let (_, m) = field_err(r#"{"tasks":{"t":{"instance":0,"run":1}}}"#);
    assert!(m.contains("≥ 1") && m.contains("fork"), "{m}");
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
