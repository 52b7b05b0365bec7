//! Fuzz harness of the model's parsers (pacer_testkit::fuzz, `docs/testing.md`): the task-set
//! JSON format (what `pacer analyze`, `gen` and `sim` read) and duration text (every duration a
//! user writes, in files and on the command line). No panic, no hang, memory in proportion to
//! the input, on arbitrary text and on mutations of valid task sets: the examples and sets
//! written by [`write_taskset`] from generated tasks.

use pacer_model::{parse_taskset, write_taskset, Arrival, Duration, Provenance, Task, TaskSet};
use pacer_testkit::fuzz::{self, text, tree, tree::Node};
use proptest::prelude::*;
use proptest::strategy::ValueTree;

#[global_allocator]
static ALLOC: fuzz::CountingAlloc = fuzz::CountingAlloc;

/// Valid task sets: C ≤ D ≤ T, unique names, with and without provenance.
fn task_sets() -> impl Strategy<Value = TaskSet> {
    let task = (
        1u64..1_000_000_000,
        0u64..1000,
        0u64..1000,
        0u64..1_000_000,
        any::<bool>(),
    );
    (
        proptest::collection::vec(task, 1..12),
        proptest::option::of("[a-zA-Z0-9 _-]{0,12}"),
        proptest::option::of(any::<u64>()),
    )
        .prop_map(|(tasks, name, seed)| TaskSet {
            name,
            generator: seed.map(|s| Provenance {
                seed: Some(s),
                parameters: serde_json::json!({"utilizations": "randfixedsum", "u": 0.5})
                    .as_object()
                    .cloned()
                    .unwrap_or_default(),
                command: Some("pacer gen -n 3".into()),
            }),
            wss_bytes: None,
            tasks: tasks
                .into_iter()
                .enumerate()
                .map(|(i, (c, dc, tc, off, sporadic))| {
                    // Deadline and period as multiples above the WCET keep C ≤ D ≤ T.
                    let d = c.saturating_mul(dc / 100 + 1);
                    let t = d.saturating_add(c.saturating_mul(tc / 100));
                    Task {
                        name: format!("t{i}"),
                        wcet: Duration(c),
                        deadline: Duration(d),
                        period: Duration(t),
                        offset: Duration(off),
                        arrival: if sporadic {
                            Arrival::Sporadic
                        } else {
                            Arrival::Periodic
                        },
                        wss_bytes: (i % 3 == 1).then_some(16384),
                    }
                })
                .collect(),
        })
}

fn example(name: &str) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The examples and a fixed handful of generated sets, as mutation starting points.
fn samples() -> Vec<String> {
    let mut out: Vec<String> = ["textbook.json", "dhall.json", "bench10.json"]
        .iter()
        .map(|f| example(f))
        .collect();
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    for _ in 0..6 {
        let set = task_sets().new_tree(&mut runner).expect("a task set").current();
        out.push(write_taskset(&set));
    }
    out
}

const TASKSET_TOKENS: &[&str] = &[
    "{",
    "}",
    "[",
    "]",
    ",",
    ":",
    "\"",
    "\"tasks\"",
    "\"wcet\"",
    "\"period\"",
    "\"deadline\"",
    "\"offset\"",
    "\"arrival\"",
    "\"name\"",
    "\"version\"",
    "\"generator\"",
    "\"seed\"",
    "\"parameters\"",
    "\"command\"",
    "\"periodic\"",
    "\"sporadic\"",
    "\"10ms\"",
    "\"1.5s\"",
    "\"250us\"",
    "1",
    "0",
    "-1",
    "1e3",
    "null",
    "true",
    "1",
    "\"x\"",
];

fn taskset_inputs() -> impl Strategy<Value = String> {
    let trees = tree::TreeSamples::new(
        samples()
            .iter()
            .map(|s| Node::parse_json(s).expect("samples are JSON"))
            .collect(),
    );
    let lines = text::TextSamples::new(samples());
    prop_oneof![
        2 => text::any_text(400),
        2 => text::token_soup(TASKSET_TOKENS, 200),
        8 => tree::mutated(trees, Node::to_json),
        2 => text::mutated_lines(lines),
        1 => task_sets().prop_map(|s| write_taskset(&s)),
    ]
}

#[test]
fn taskset_json() {
    fuzz::check("taskset_json", 3000, taskset_inputs(), |text: &String| {
        fuzz::render(&parse_taskset(text, "fuzz.json"));
    });
}

#[test]
fn taskset_json_round_trips() {
    // A set written by pacer reads back as itself: mutations start from valid inputs only if the
    // writer and the reader agree.
    fuzz::check(
        "taskset_json_round_trips",
        200,
        task_sets().prop_map(|s| write_taskset(&s)),
        |text: &String| {
            let set = parse_taskset(text, "fuzz.json").unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(write_taskset(&set), *text);
        },
    );
}

/// The exact value of `<digits>[.<digits>]<unit>` in nanoseconds, or why it has none (too large,
/// or not a whole number of nanoseconds), computed in u128 as the reference for the parser.
fn exact_ns(int: &str, frac: &str, scale: u128) -> Result<u64, &'static str> {
    let int: u128 = if int.is_empty() {
        0
    } else {
        int.parse().map_err(|_| "overflow")?
    };
    let frac = frac.trim_end_matches('0');
    let den = 10u128.checked_pow(frac.len() as u32).ok_or("fractional")?;
    let num: u128 = if frac.is_empty() {
        0
    } else {
        frac.parse().map_err(|_| "overflow")?
    };
    if !(num * scale).is_multiple_of(den) {
        return Err("fractional");
    }
    let total = int
        .checked_mul(scale)
        .and_then(|v| v.checked_add(num * scale / den))
        .ok_or("overflow")?;
    u64::try_from(total).map_err(|_| "overflow")
}

#[test]
fn duration_text() {
    // Numbers spelled in every way the grammar allows (and a few it does not), in every unit.
    let number = (
        prop_oneof![
            Just(String::new()),
            "[0-9]{1,22}",
            Just("18446744073709551615".into())
        ],
        prop_oneof![Just(None), proptest::option::of("[0-9]{0,12}0{0,12}[0-9]{0,3}")],
        proptest::sample::select(vec!["", "ns", "us", "µs", "μs", "ms", "s", " ms", "m", "x"]),
    )
        .prop_map(|(i, f, u)| match f {
            Some(f) => format!("{i}.{f}{u}"),
            None => format!("{i}{u}"),
        });
    let inputs = prop_oneof![
        4 => number,
        1 => text::any_text(40),
        1 => proptest::sample::select(tree::EXTREME_STRINGS).prop_map(str::to_string),
    ];
    fuzz::check("duration_text", 5000, inputs, |s: &String| {
        let parsed = s.parse::<Duration>();
        fuzz::render(&parsed);
        // Where the text is a plain number with a known unit, the parser must agree with exact
        // arithmetic: never round, never wrap.
        let t = s.trim();
        let split = t
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(t.len());
        let (num, unit) = (&t[..split], t[split..].trim());
        let scale: Option<u128> = match unit {
            "" | "ns" => Some(1),
            "us" | "µs" | "μs" => Some(1_000),
            "ms" => Some(1_000_000),
            "s" => Some(1_000_000_000),
            _ => None,
        };
        let (int, frac) = num.split_once('.').unwrap_or((num, ""));
        if let Some(scale) = scale {
            let digits = !int.is_empty() || !frac.is_empty();
            let a_number = digits && !frac.contains('.');
            if a_number {
                // A number without a unit is refused unless it is zero (docs/cli.md).
                let exact = match exact_ns(int, frac, scale) {
                    Ok(v) if unit.is_empty() && v != 0 => Err("without a unit"),
                    other => other,
                };
                match (exact, &parsed) {
                    (Ok(want), Ok(got)) => assert_eq!(got.ns(), want, "`{s}`"),
                    (Ok(want), Err(e)) => panic!("`{s}` is exactly {want} ns, but was refused: {e}"),
                    (Err(why), Ok(got)) => panic!("`{s}` is {why}, but was read as {} ns", got.ns()),
                    (Err(_), Err(_)) => {}
                }
            }
        }
        if let Ok(d) = parsed {
            assert_eq!(
                d.to_string().parse::<Duration>(),
                Ok(d),
                "`{s}` does not round-trip"
            );
        }
    });
}

// Keeps the strategies' sample list honest: every sample must itself be a valid task set.
#[test]
fn samples_are_valid() {
    for s in samples() {
        parse_taskset(&s, "sample").unwrap_or_else(|e| panic!("{e}\n{s}"));
    }
}
