//! Fuzz harness of the audio scenario reader (`pacer sim audio SCENARIO`;
//! pacer_testkit::fuzz, `docs/testing.md`): TOML parsing, the scenario's fields and their
//! validation. No panic, no hang, memory in proportion to the input, on arbitrary text and on
//! mutations of valid scenarios: the documented default (docs/formats/audio-scenario.md) and
//! scenarios written by `toml::to_string` from the crate's own types, edited as TOML lines and
//! as trees.

use pacer_model::Duration;
use pacer_sim::audio::{
    parse_audio_scenario, AudioScenario, Configuration, JitterSettings, OppSpec, PlatformSpec,
};
use pacer_testkit::fuzz::{self, text, tree, tree::Node};
use pacer_workload::audio::{HintTiming, VoicePattern};
use proptest::prelude::*;

#[global_allocator]
static ALLOC: fuzz::CountingAlloc = fuzz::CountingAlloc;

/// The TOML block of the format's documentation: the default scenario, commented.
fn documented_default() -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/formats/audio-scenario.md");
    let doc = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let start = doc.find("```toml\n").expect("a TOML block") + "```toml\n".len();
    let len = doc[start..].find("```").expect("the block's end");
    doc[start..start + len].to_string()
}

/// Valid scenarios other than the default: each pattern kind, a custom OPP table, jitter, a
/// subset of configurations.
fn scenarios() -> Vec<AudioScenario> {
    let d = AudioScenario::default();
    vec![
        d.clone(),
        AudioScenario {
            pattern: VoicePattern::paper_square(),
            duration: Duration::from_secs(6),
            hint: HintTiming::Inline,
            configurations: vec![Configuration::Adaptive, Configuration::FifoMax],
            ..d.clone()
        },
        AudioScenario {
            pattern: VoicePattern::List {
                voices: vec![5, 50, 185, 20],
            },
            platform: PlatformSpec {
                preset: None,
                opps: Some(vec![
                    OppSpec {
                        freq_khz: 500_000,
                        power: 100.0,
                    },
                    OppSpec {
                        freq_khz: 1_000_000,
                        power: 300.0,
                    },
                    OppSpec {
                        freq_khz: 2_000_000,
                        power: 1000.0,
                    },
                ]),
                switch_latency: Some(Duration::from_us(100)),
            },
            jitter: JitterSettings { sd: 0.05, seed: 9 },
            ..d
        },
    ]
}

fn samples() -> Vec<String> {
    let mut out = vec![documented_default()];
    out.extend(
        scenarios()
            .iter()
            .map(|s| toml::to_string(s).expect("scenarios serialise")),
    );
    out
}

fn as_tree(toml_text: &str) -> Node {
    let v: toml::Value = toml::from_str(toml_text).expect("samples are TOML");
    Node::from_json(&serde_json::to_value(v).expect("TOML values convert to JSON"))
}

const TOML_TOKENS: &[&str] = &[
    "\n",
    " = ",
    "[pattern]",
    "[platform]",
    "[adaptive]",
    "[walt]",
    "[jitter]",
    "[[platform.opps]]",
    "kind",
    "\"random\"",
    "\"square\"",
    "\"list\"",
    "voices",
    "min",
    "max",
    "seed",
    "low",
    "high",
    "sample_rate_hz",
    "burst_frames",
    "duration",
    "step",
    "\"60s\"",
    "\"1ns\"",
    "saturating_voices",
    "base_cost",
    "hint",
    "\"ahead\"",
    "max_bursts",
    "target_bursts",
    "fifo_priority",
    "configurations",
    "[\"adaptive\"]",
    "preset",
    "\"hikey960-big\"",
    "opps",
    "freq_khz",
    "power",
    "switch_latency",
    "margin_mult",
    "sd",
    "window",
    "hist_size",
    "headroom",
    "rate_limit",
    "{",
    "}",
    "[",
    "]",
    ",",
    "\"",
    "'",
    "'''",
    "#",
    "1.5",
    "nan",
    "inf",
    "-inf",
    "1e400",
    "true",
    "1979-05-27T07:32:00Z",
    "0x10",
    "0o7",
    "0b1",
];

#[test]
fn audio_scenario_toml() {
    let texts = samples();
    let trees = tree::TreeSamples::new(texts.iter().map(|t| as_tree(t)).collect());
    let lines = text::TextSamples::new(texts);
    let inputs = prop_oneof![
        2 => text::any_text(400),
        2 => text::token_soup(TOML_TOKENS, 200),
        6 => text::mutated_lines(lines),
        6 => tree::mutated(trees, Node::to_toml),
    ];
    // The toml crate's document model keeps some 1.1 KiB per table (key, spans, formatting),
    // and TOML opens a table every two bytes (`{a.a.a.a=1}`): measured 566 bytes per input byte
    // on such dotted keys, 237 on arrays of `{a=1}`, under 100 for everything else. Linear, so
    // still a bound, at that parser's rate rather than the harness's default.
    fuzz::check_with_bound("audio_scenario_toml", 2000, 640, inputs, |t: &String| {
        fuzz::render(&parse_audio_scenario(t, "fuzz.toml"));
    });
}

#[test]
fn audio_samples_are_valid() {
    // Mutations start from valid scenarios only if the samples are valid, in both renderings.
    for t in samples() {
        parse_audio_scenario(&t, "sample").unwrap_or_else(|e| panic!("{e}\n{t}"));
        let inline = as_tree(&t).to_toml();
        parse_audio_scenario(&inline, "sample").unwrap_or_else(|e| panic!("{e}\n{inline}"));
    }
}
