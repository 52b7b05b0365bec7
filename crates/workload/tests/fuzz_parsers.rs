//! Fuzz harness of the workload crate's parsers (pacer_testkit::fuzz, `docs/testing.md`):
//! rt-app JSON (`pacer sim`, `pacer run`), the input detection of `pacer sim` / `pacer analyze`
//! between a task set and an rt-app file, and the per-job CSV with the comparison `pacer compare`
//! runs on two of them. No panic, no hang, memory in proportion to the input.
//!
//! rt-app inputs start from the examples, rt-app's own documentation examples (the fixtures, with
//! their comments and trailing commas) and files generated here from rt-app's grammar (the crate
//! has no rt-app writer); job CSVs from [`JobCsv`], the writer the simulator and the executor use.

use std::sync::Arc;

use pacer_model::{parse_taskset, write_taskset, Duration, Task, TaskSet};
use pacer_testkit::fuzz::{self, text, tree, tree::Node};
use pacer_workload::jobs::csv::JobReader;
use pacer_workload::jobs::{compare, JobCsv, JobRecord};
use pacer_workload::parse_rtapp;
use proptest::prelude::*;
use proptest::strategy::ValueTree;

#[global_allocator]
static ALLOC: fuzz::CountingAlloc = fuzz::CountingAlloc;

fn repo_file(rel: &str) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The rt-app files of the repository: examples, and rt-app's documentation examples.
fn rtapp_files() -> Vec<String> {
    let mut out: Vec<String> = [
        "examples/rtapp-periodic.json",
        "examples/rtapp-run-vs-sim.json",
        "examples/lfspp-7.2/hog.json",
        "examples/lfspp-7.2/trio.json",
        "examples/lfspp-7.4/load.json",
        "examples/lfspp-7.4/player.json",
    ]
    .iter()
    .map(|f| repo_file(f))
    .collect();
    let fixtures = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let mut names: Vec<_> = std::fs::read_dir(&fixtures)
        .expect("fixtures directory")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    names.sort();
    out.extend(names.iter().map(|p| std::fs::read_to_string(p).expect("fixture")));
    out
}

/// The entries of one thread or phase object: events pacer runs (at least one), then maybe
/// events it skips and properties.
fn rtapp_entries() -> impl Strategy<Value = Vec<(String, Node)>> {
    let us = || (0i64..200_000).prop_map(|v| Node::Num(v.to_string()));
    let runnable = prop_oneof![
        4 => ("run[0-9]?", us()).prop_map(|(k, v)| (k, v)),
        1 => us().prop_map(|v| ("runtime".into(), v)),
        3 => ("sleep[0-9]?", us()).prop_map(|(k, v)| (k, v)),
        3 => ("(unique|shared)[0-9]?", 1i64..100_000, any::<bool>()).prop_map(|(r, p, abs)| {
            let mut t = vec![("ref".into(), Node::Str(r)), ("period".into(), Node::Num(p.to_string()))];
            if abs {
                t.push(("mode".into(), Node::Str("absolute".into())));
            }
            ("timer".into(), Node::Obj(t))
        }),
    ];
    let other = prop_oneof![
        Just(("yield".to_string(), Node::Str(String::new()))),
        Just(("lock".to_string(), Node::Str("mutex".into()))),
        (1i64..4).prop_map(|n| ("loop".to_string(), Node::Num(n.to_string()))),
        proptest::collection::vec(0i64..4, 1..3).prop_map(|c| {
            (
                "cpus".to_string(),
                Node::Arr(c.into_iter().map(|c| Node::Num(c.to_string())).collect()),
            )
        }),
    ];
    (
        proptest::collection::vec(runnable, 1..4),
        proptest::collection::vec(other, 0..2),
    )
        .prop_map(|(mut a, b)| {
            // Keys repeat freely in rt-app, except the properties: keep their first occurrence.
            for (k, v) in b {
                if !a.iter().any(|(x, _)| *x == k) {
                    a.push((k, v));
                }
            }
            a
        })
}

/// A thread's scheduling keys: one of rt-app's policies with valid parameters.
fn rtapp_policy() -> impl Strategy<Value = Vec<(String, Node)>> {
    let s = |k: &str, v: &str| (k.to_string(), Node::Str(v.into()));
    let n = |k: &str, v: i64| (k.to_string(), Node::Num(v.to_string()));
    prop_oneof![
        Just(vec![]),
        (-20i64..20).prop_map(move |p| vec![s("policy", "SCHED_OTHER"), n("priority", p)]),
        (1i64..100).prop_map(move |p| vec![s("policy", "SCHED_FIFO"), n("priority", p)]),
        (1i64..100).prop_map(move |p| vec![s("policy", "SCHED_RR"), n("priority", p)]),
        // The kernel's range: runtime ≥ 1024 ns, period ≥ 100 µs (values in µs).
        (2i64..1000, 1i64..10).prop_map(move |(r, k)| {
            vec![
                s("policy", "SCHED_DEADLINE"),
                n("dl-runtime", r),
                n("dl-period", r * k + 100),
                n("dl-deadline", r * k + 100),
            ]
        }),
    ]
}

/// rt-app files following the grammar: threads with instances, loops, policies, events, and
/// sometimes phases; a global object with a duration and a default policy.
fn rtapp_documents() -> impl Strategy<Value = Node> {
    let phases = proptest::collection::vec(rtapp_entries(), 1..3).prop_map(|ps| {
        Node::Obj(
            ps.into_iter()
                .enumerate()
                .map(|(i, p)| (format!("p{i}"), Node::Obj(p)))
                .collect(),
        )
    });
    let thread = (
        1i64..4,
        rtapp_policy(),
        rtapp_entries(),
        proptest::option::of(phases),
    )
        .prop_map(|(instance, policy, events, phases)| {
            let mut t = vec![("instance".to_string(), Node::Num(instance.to_string()))];
            t.extend(policy);
            match phases {
                Some(p) => t.push(("phases".into(), p)),
                None => t.extend(events),
            }
            Node::Obj(t)
        });
    (proptest::collection::vec(thread, 1..4), 0i64..10).prop_map(|(threads, duration)| {
        Node::Obj(vec![
            (
                "tasks".into(),
                Node::Obj(
                    threads
                        .into_iter()
                        .enumerate()
                        .map(|(i, t)| (format!("thread{i}"), t))
                        .collect(),
                ),
            ),
            (
                "global".into(),
                Node::Obj(vec![
                    ("duration".into(), Node::Num(duration.to_string())),
                    ("default_policy".into(), Node::Str("SCHED_OTHER".into())),
                    ("calibration".into(), Node::Str("CPU0".into())),
                ]),
            ),
        ])
    })
}

fn sample<T: std::fmt::Debug>(s: impl Strategy<Value = T>, n: usize) -> Vec<T> {
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    (0..n)
        .map(|_| s.new_tree(&mut runner).expect("a sample").current())
        .collect()
}

const RTAPP_TOKENS: &[&str] = &[
    "{",
    "}",
    "[",
    "]",
    ",",
    ":",
    "\"",
    "/*",
    "*/",
    "//",
    "\n",
    "\"tasks\"",
    "\"global\"",
    "\"thread0\"",
    "\"phases\"",
    "\"p0\"",
    "\"run\"",
    "\"runtime\"",
    "\"sleep\"",
    "\"timer\"",
    "\"ref\"",
    "\"period\"",
    "\"mode\"",
    "\"absolute\"",
    "\"unique\"",
    "\"loop\"",
    "\"instance\"",
    "\"cpus\"",
    "\"policy\"",
    "\"priority\"",
    "\"dl-runtime\"",
    "\"dl-period\"",
    "\"dl-deadline\"",
    "\"SCHED_DEADLINE\"",
    "\"SCHED_FIFO\"",
    "\"duration\"",
    "\"default_policy\"",
    "\"yield\"",
    "\"delay\"",
    "\"lock\"",
    "10000",
    "-1",
    "0",
    "1",
];

fn rtapp_inputs() -> impl Strategy<Value = String> {
    let files = rtapp_files();
    let mut docs: Vec<Node> = files.iter().filter_map(|f| Node::parse_json(f)).collect();
    docs.extend(sample(rtapp_documents(), 8));
    let trees = tree::TreeSamples::new(docs);
    let lines = text::TextSamples::new(files);
    prop_oneof![
        2 => text::any_text(400),
        2 => text::token_soup(RTAPP_TOKENS, 200),
        8 => tree::mutated(trees, Node::to_json),
        3 => text::mutated_lines(lines),
        1 => rtapp_documents().prop_map(|d| d.to_json()),
    ]
}

#[test]
fn rtapp_json() {
    fuzz::check("rtapp_json", 2500, rtapp_inputs(), |text: &String| {
        fuzz::render(&parse_rtapp(text, "fuzz.json"));
    });
}

#[test]
fn rtapp_generated_files_are_valid() {
    // The generator must stay inside rt-app's grammar, or its mutations start from nothing valid.
    fuzz::check(
        "rtapp_generated_files_are_valid",
        100,
        rtapp_documents().prop_map(|d| d.to_json()),
        |text: &String| {
            parse_rtapp(text, "generated.json").unwrap_or_else(|e| panic!("{e}"));
        },
    );
}

/// What `pacer sim` and `pacer analyze` do with an input file (crates/cli/src/sim.rs
/// `read_input`, which lives in the binary): a task set when the text is JSON with a `tasks`
/// array, else rt-app.
fn read_input(text: &str) {
    let looks_like_taskset = serde_json::from_str::<serde_json::Value>(text)
        .ok()
        .is_some_and(|v| v.get("tasks").is_some_and(|t| t.is_array()));
    if looks_like_taskset {
        fuzz::render(&parse_taskset(text, "fuzz.json"));
    } else {
        fuzz::render(&parse_rtapp(text, "fuzz.json"));
    }
}

#[test]
fn sim_input_detection() {
    let set = TaskSet::new(vec![
        Task::implicit("a", Duration::from_ms(1), Duration::from_ms(10)),
        Task::constrained(
            "b",
            Duration::from_ms(2),
            Duration::from_ms(15),
            Duration::from_ms(20),
        ),
    ]);
    let mut docs: Vec<Node> = rtapp_files().iter().filter_map(|f| Node::parse_json(f)).collect();
    docs.push(Node::parse_json(&write_taskset(&set)).expect("a task set is JSON"));
    docs.push(Node::parse_json(&repo_file("examples/dhall.json")).expect("JSON"));
    let trees = tree::TreeSamples::new(docs);
    fuzz::check(
        "sim_input_detection",
        600,
        tree::mutated(trees, Node::to_json),
        |text: &String| read_input(text),
    );
}

fn job_records() -> impl Strategy<Value = JobRecord> {
    (
        0u32..4,
        0u64..1000,
        0u64..1_000_000_000,
        0u64..1_000_000,
        0u64..50_000_000,
        1u64..50_000_000,
        0u32..3,
    )
        .prop_map(
            |(thread, job, release, wait, run, period, preemptions)| JobRecord {
                thread,
                job,
                release,
                start: release + wait,
                finish: release + wait + run,
                deadline: release + period,
                period,
                exec: run,
                preemptions,
                migrations: preemptions / 2,
                cpu: thread % 2,
            },
        )
}

/// A job CSV as `pacer sim --jobs` and `pacer run --jobs` write it.
fn job_csv(records: &[JobRecord]) -> String {
    let mut w = JobCsv::new(Vec::new(), vec!["fast".into(), "slow, \"quoted\"".into()]);
    for r in records {
        w.write(r);
    }
    String::from_utf8(w.finish().expect("writing to memory")).expect("CSV is UTF-8")
}

const CSV_TOKENS: &[&str] = &[
    "task",
    "job",
    "release_ns",
    "start_ns",
    "finish_ns",
    "deadline_ns",
    "response_ns",
    "normalised_laxity",
    "missed",
    "exec_ns",
    "preemptions",
    "migrations",
    "cpu",
    ",",
    "\n",
    "\r\n",
    "\"",
    "0",
    "1",
    "0.5",
    "-0.2",
    "NaN",
    "inf",
    "t0",
    "fast",
];

/// Reads a job CSV to the end as `pacer compare` does; the rows, or the first error.
fn read_jobs(text: &str) -> Result<Vec<pacer_workload::jobs::JobRow>, pacer_workload::jobs::ReadError> {
    JobReader::new(text.as_bytes(), "fuzz.csv")?.collect()
}

#[test]
fn job_csv_and_compare() {
    let originals: Vec<String> = sample(proptest::collection::vec(job_records(), 0..40), 8)
        .iter()
        .map(|r| job_csv(r))
        .collect();
    let lines = text::TextSamples::new(originals.clone());
    let originals = Arc::new(originals);
    let one = prop_oneof![
        2 => text::any_text(300),
        2 => text::token_soup(CSV_TOKENS, 200),
        8 => text::mutated_lines(lines),
        1 => proptest::collection::vec(job_records(), 0..40).prop_map(|r| job_csv(&r)),
    ];
    // `pacer compare A B`: the mutated file against an original, either way round.
    let pair = (one, 0..8usize, any::<bool>()).prop_map(move |(m, i, swap)| {
        let o = originals[i].clone();
        if swap {
            (o, m)
        } else {
            (m, o)
        }
    });
    fuzz::check("job_csv_and_compare", 2000, pair, |(a, b): &(String, String)| {
        let ra = read_jobs(a);
        fuzz::render(&ra);
        let rb = read_jobs(b);
        fuzz::render(&rb);
        if let (Ok(ra), Ok(rb)) = (ra, rb) {
            let report = compare(ra.into_iter().map(Ok), rb.into_iter().map(Ok)).expect("rows already read");
            let _ = report.overheads();
            let _ = report.beyond(5.0, 1000);
            let _ = format!("{report:?}");
        }
    });
}

#[test]
fn job_csv_round_trips() {
    fuzz::check(
        "job_csv_round_trips",
        100,
        proptest::collection::vec(job_records(), 0..40).prop_map(|r| job_csv(&r)),
        |text: &String| {
            let rows = read_jobs(text).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(rows.len(), text.lines().count() - 1);
        },
    );
}
