//! Fuzz harness of the recorded wake-up trace reader (`pacer period`'s input;
//! pacer_testkit::fuzz, `docs/testing.md`): timestamp lists, `perf script` and `trace-cmd report`
//! output, read with every format choice (detected or forced) and thread filter. No panic, no
//! hang, memory in proportion to the input, on arbitrary text and on mutations of the recorded
//! fixtures and of traces generated here in each format's line syntax.

use pacer_adapt::traceio::{parse_str, TraceFilter, TraceFormat, WakeupEvent};
use pacer_testkit::fuzz::{self, text};
use proptest::prelude::*;
use proptest::strategy::ValueTree;

#[global_allocator]
static ALLOC: fuzz::CountingAlloc = fuzz::CountingAlloc;

fn fixtures() -> Vec<String> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let mut paths: Vec<_> = std::fs::read_dir(&dir)
        .expect("fixtures directory")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "txt"))
        .collect();
    paths.sort();
    paths
        .iter()
        .map(|p| String::from_utf8_lossy(&std::fs::read(p).expect("fixture")).into_owned())
        .collect()
}

/// One wake-up: waker, woken thread, CPU, time in µs, and the event's name.
type Wake = (String, u32, String, u32, u32, u64, &'static str);

fn wakes() -> impl Strategy<Value = Vec<Wake>> {
    let comm = prop_oneof![
        Just("mplayer".to_string()),
        Just("<idle>".to_string()),
        Just("Web Content".to_string()),
        Just("kworker/u8:2".to_string()),
        "[a-zA-Z0-9_/:-]{1,15}",
    ];
    let event = proptest::sample::select(vec!["sched_wakeup", "sched_waking", "sched_wakeup_new"]);
    proptest::collection::vec(
        (
            comm.clone(),
            0u32..100_000,
            comm,
            1u32..100_000,
            0u32..8,
            0u64..10_000_000_000,
            event,
        ),
        1..60,
    )
}

fn perf_script(ws: &[Wake], period: bool) -> String {
    ws.iter()
        .map(|(c, p, wc, wp, cpu, us, ev)| {
            let col = if period { "          1 " } else { "" };
            format!(
                "{c:>16} {p:>6} [{cpu:03}] {}.{:06}: {col}sched:{ev}: comm={wc} pid={wp} prio=120 target_cpu={cpu:03}\n",
                us / 1_000_000,
                us % 1_000_000
            )
        })
        .collect()
}

fn trace_cmd(ws: &[Wake], raw: bool) -> String {
    let mut s = String::from("version = 6\ncpus=8\n");
    for (c, p, wc, wp, cpu, us, ev) in ws {
        let payload = if raw {
            format!("comm={wc} pid={wp} prio=120 target_cpu={cpu:03}")
        } else {
            format!("{wc}:{wp} [120] success=1 CPU:{cpu:03}")
        };
        s.push_str(&format!(
            "{c:>16}-{p:<6} [{cpu:03}] d..2. {}.{:06}: {ev}: {payload}\n",
            us / 1_000_000,
            us % 1_000_000
        ));
    }
    s
}

fn timestamps(ws: &[Wake]) -> String {
    let mut s = String::from("# wake-ups, seconds\n");
    for (_, _, _, _, _, us, _) in ws {
        s.push_str(&format!("{}.{:06}\n", us / 1_000_000, us % 1_000_000));
    }
    s
}

fn generated() -> impl Strategy<Value = String> {
    (wakes(), 0..5u8).prop_map(|(ws, kind)| match kind {
        0 => perf_script(&ws, false),
        1 => perf_script(&ws, true),
        2 => trace_cmd(&ws, false),
        3 => trace_cmd(&ws, true),
        _ => timestamps(&ws),
    })
}

/// How the reader is called: `format comm tid event` (`-` for no filter), as `pacer period`'s
/// `--format --comm --tid --event` would; a string, so that a failure prints it.
fn options() -> impl Strategy<Value = String> {
    (
        proptest::sample::select(vec!["auto", "timestamps", "perf", "trace-cmd"]),
        proptest::sample::select(vec!["-", "mplayer", "VideoDecoderThread", "Web", "", "🦀"]),
        proptest::sample::select(vec!["-", "4242", "0", "4294967295"]),
        proptest::sample::select(vec!["auto", "wakeup", "waking"]),
    )
        .prop_map(|(f, c, t, e)| format!("{f} {c} {t} {e}"))
}

fn parse_options(o: &str) -> (TraceFormat, TraceFilter) {
    let w: Vec<&str> = o.split(' ').collect();
    let format = w[0].parse().expect("a format name");
    let filter = TraceFilter {
        comm: (w[1] != "-").then(|| w[1].to_string()),
        tid: (w[2] != "-").then(|| w[2].parse().expect("a tid")),
        event: w[3].parse::<WakeupEvent>().expect("an event name"),
    };
    (format, filter)
}

const TRACE_TOKENS: &[&str] = &[
    " ",
    "\n",
    "#",
    ":",
    "[001]",
    "5678.123456:",
    "12.5",
    "sched:sched_wakeup:",
    "sched_wakeup:",
    "sched_waking:",
    "sched:sched_waking:",
    "comm=",
    "pid=",
    "prio=120",
    "target_cpu=001",
    "CPU:001",
    "mplayer:4242",
    "[120]",
    "success=1",
    "<idle>-0",
    "cpus=4",
    "1.5e-3",
    "1e308",
    "-1",
    "0.0",
];

#[test]
fn wakeup_trace_text() {
    let mut samples = fixtures();
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    for _ in 0..6 {
        samples.push(generated().new_tree(&mut runner).expect("a trace").current());
    }
    let lines = text::TextSamples::new(samples);
    let traces = prop_oneof![
        2 => text::any_text(400),
        1 => text::any_bytes_as_text(400),
        3 => text::token_soup(TRACE_TOKENS, 200),
        8 => text::mutated_lines(lines),
        2 => generated(),
    ];
    fuzz::check(
        "wakeup_trace_text",
        2500,
        (options(), traces),
        |(o, t): &(String, String)| {
            let (format, filter) = parse_options(o);
            let r = parse_str(t, "fuzz.txt", format, &filter);
            fuzz::render(&r);
            if let Ok(trace) = r {
                assert!(
                    trace.timestamps_ns.is_sorted(),
                    "timestamps are handed out ascending"
                );
                assert_ne!(
                    trace.format,
                    TraceFormat::Auto,
                    "the format read is always resolved"
                );
            }
        },
    );
}
