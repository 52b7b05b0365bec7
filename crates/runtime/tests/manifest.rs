//! Every way the manifest parser refuses a file: the error names the file, the full key, what
//! was expected and what was found.

use pacer_runtime::manifest::{Kind, Manifest, ManifestError, Overflow, Scheduling};

const BASE: &str = r#"
[app]
name = "t"
memory_limit = "1MiB"

[[component]]
name = "a"
kind = "periodic"
period = "10ms"
wcet = "1ms"
priority = 50
cpus = [0]

[[component]]
name = "b"
kind = "receiver"
period = "20ms"
deadline = "15ms"
reservation = { runtime = "2ms" }
cpus = [0, 1]
persistent = "4KiB"
per_release = "1KB"

[[channel]]
name = "c"
sender = "a"
receivers = ["b"]
message_size = "64B"
capacity = 3

[[audio]]
name = "s"
direction = "playback"
rate = 48000
channels = 2
burst_frames = 480
component = "a"
"#;

fn parse(text: &str) -> Result<Manifest, ManifestError> {
    Manifest::from_toml(text, "app.toml")
}

/// Parses BASE with `from` replaced by `to` (which must occur) and returns the error.
fn err(from: &str, to: &str) -> ManifestError {
    assert!(BASE.contains(from), "test bug: {from:?} not in BASE");
    match parse(&BASE.replacen(from, to, 1)) {
        Ok(_) => panic!("accepted {from:?} → {to:?}"),
        Err(e) => e,
    }
}

#[track_caller]
fn expect(from: &str, to: &str, key: &str, expected: &str) {
    let e = err(from, to);
    let msg = e.to_string();
    assert!(msg.starts_with("app.toml: "), "no file in {msg}");
    assert_eq!(e.key(), Some(key), "{msg}");
    assert!(msg.contains(expected), "{msg:?} lacks {expected:?}");
    assert!(msg.contains("found"), "{msg}");
}

#[test]
fn base_parses_to_integer_ns_and_bytes() {
    let m = parse(BASE).unwrap();
    assert_eq!(m.name, "t");
    assert_eq!(m.memory_limit_bytes, Some(1 << 20));
    let a = &m.components[0];
    assert_eq!(
        (a.kind, a.period_ns, a.deadline_ns, a.wcet_ns),
        (Kind::Periodic, 10_000_000, 10_000_000, Some(1_000_000))
    );
    assert_eq!(a.scheduling, Scheduling::Fifo { priority: 50 });
    assert_eq!(a.cost_ns(), 1_000_000);
    let b = &m.components[1];
    assert_eq!(b.kind, Kind::Receiver);
    // The reservation's deadline and period default to the component's.
    assert_eq!(
        b.scheduling,
        Scheduling::Deadline {
            runtime_ns: 2_000_000,
            deadline_ns: 15_000_000,
            period_ns: 20_000_000
        }
    );
    assert_eq!((b.persistent_bytes, b.per_release_bytes), (4096, 1024));
    assert_eq!(b.cpus, vec![0, 1]);
    let c = &m.channels[0];
    assert_eq!(
        (c.senders.clone(), c.per_release, c.overflow),
        (vec!["a".to_string()], 1, Overflow::PriorityOldest)
    );
    assert_eq!(m.audio[0].burst_bytes(), 480 * 2 * 2);
}

#[test]
fn file_level_errors() {
    assert!(matches!(parse("[app\nname="), Err(ManifestError::Syntax { .. })));
    let e = Manifest::from_file(std::path::Path::new("/nonexistent/app.toml")).unwrap_err();
    assert!(
        e.to_string().starts_with("/nonexistent/app.toml: cannot read"),
        "{e}"
    );
    expect("[app]\n", "colour = 1\n[app]\n", "colour", "no such key");
    expect(
        "[app]\nname = \"t\"\n",
        "[nope]\nname = \"t\"\n",
        "app",
        "an [app] table",
    );
    let e = parse("[app]\nname = \"t\"\n").unwrap_err();
    assert_eq!(e.key(), Some("component"));
    let e = parse("component = 5\n[app]\nname = \"t\"\n").unwrap_err();
    assert_eq!(e.key(), Some("component"));
    assert!(e.to_string().contains("array of tables"), "{e}");
}

#[test]
fn app_errors() {
    expect("name = \"t\"", "name = \"a b\"", "app.name", "a name of letters");
    expect("name = \"t\"", "nome = \"t\"", "app.name", "a name of letters");
    expect(
        "memory_limit = \"1MiB\"",
        "memory_limit = \"1\"",
        "app.memory_limit",
        "has no unit",
    );
    expect(
        "memory_limit = \"1MiB\"",
        "memory_limit = \"1 parsec\"",
        "app.memory_limit",
        "unknown unit",
    );
    expect(
        "memory_limit = \"1MiB\"",
        "memory_limit = 1.5",
        "app.memory_limit",
        "a size with a unit",
    );
}

#[test]
fn component_errors() {
    expect(
        "name = \"a\"",
        "name = \"b\"",
        "component[b].name",
        "no other component",
    );
    expect("name = \"a\"\n", "", "component[0].name", "a name");
    expect(
        "kind = \"periodic\"\nperiod = \"10ms\"",
        "period = \"10ms\"",
        "component[a].kind",
        "\"periodic\", \"service\" or \"receiver\"",
    );
    expect(
        "kind = \"periodic\"",
        "kind = \"task\"",
        "component[a].kind",
        "\"task\"",
    );
    expect(
        "period = \"10ms\"\nwcet",
        "wcet",
        "component[a].period",
        "a duration",
    );
    expect(
        "period = \"10ms\"\nwcet",
        "period = \"10\"\nwcet",
        "component[a].period",
        "no unit",
    );
    expect(
        "period = \"10ms\"\nwcet",
        "period = \"0ms\"\nwcet",
        "component[a].period",
        "above 0",
    );
    expect(
        "period = \"10ms\"\nwcet",
        "period = 10\nwcet",
        "component[a].period",
        "a duration",
    );
    expect(
        "period = \"10ms\"\nwcet",
        "period = \"10ms\"\ndeadline = \"11ms\"\nwcet",
        "component[a].deadline",
        "at most the period (10ms)",
    );
    expect(
        "priority = 50",
        "priority = 100",
        "component[a].priority",
        "1 to 99",
    );
    expect(
        "priority = 50",
        "priority = 0",
        "component[a].priority",
        "1 to 99",
    );
    expect(
        "priority = 50",
        "priority = -1",
        "component[a].priority",
        "non-negative integer",
    );
    expect(
        "priority = 50",
        "priority = \"high\"",
        "component[a].priority",
        "non-negative integer",
    );
    expect("priority = 50\n", "", "component[a].priority", "SCHED_DEADLINE");
    expect(
        "priority = 50",
        "priority = 50\nreservation = { runtime = \"1ms\" }",
        "component[a].reservation",
        "not both",
    );
    expect("wcet = \"1ms\"\n", "", "component[a].wcet", "`budget`");
    expect(
        "wcet = \"1ms\"",
        "wcet = \"1ms\"\nwecet = \"1ms\"",
        "component[a].wecet",
        "no such key",
    );
    expect(
        "cpus = [0]\n\n[[component]]\nname = \"b\"",
        "\n[[component]]\nname = \"b\"",
        "component[a].cpus",
        "non-empty list",
    );
    expect(
        "cpus = [0]\n\n",
        "cpus = []\n\n",
        "component[a].cpus",
        "an empty list",
    );
    expect(
        "cpus = [0]\n\n",
        "cpus = [0, 0]\n\n",
        "component[a].cpus",
        "distinct",
    );
    expect(
        "cpus = [0]\n\n",
        "cpus = \"0-1\"\n\n",
        "component[a].cpus",
        "list of distinct CPU numbers",
    );
    expect(
        "per_release = \"1KB\"",
        "per_release = \"1kib\"",
        "component[b].per_release",
        "unknown unit",
    );
}

#[test]
fn reservation_errors() {
    expect(
        "{ runtime = \"2ms\" }",
        "{ }",
        "component[b].reservation.runtime",
        "a duration",
    );
    expect(
        "{ runtime = \"2ms\" }",
        "{ runtime = \"2ms\", period = \"30ms\" }",
        "component[b].reservation.period",
        "at most the component's period (20ms)",
    );
    expect(
        "{ runtime = \"2ms\" }",
        "{ runtime = \"2ms\", deadline = \"16ms\" }",
        "component[b].reservation.deadline",
        "at most the component's deadline (15ms)",
    );
    expect(
        "{ runtime = \"2ms\" }",
        "{ runtime = \"100ns\" }",
        "component[b].reservation.runtime",
        "sched_setattr accepts",
    );
    expect(
        "{ runtime = \"2ms\" }",
        "{ runtime = \"16ms\" }",
        "component[b].reservation.runtime",
        "exceeds deadline",
    );
    expect(
        "{ runtime = \"2ms\" }",
        "{ runtime = \"2ms\", budget = \"1ms\" }",
        "component[b].reservation.budget",
        "no such key",
    );
    expect(
        "reservation = { runtime = \"2ms\" }",
        "reservation = 5",
        "component[b].reservation",
        "a table",
    );
}

#[test]
fn channel_errors() {
    expect(
        "sender = \"a\"",
        "sender = \"x\"",
        "channel[c].sender",
        "\"x\", which is not one",
    );
    expect("sender = \"a\"\n", "", "channel[c].sender", "a component name");
    expect(
        "sender = \"a\"",
        "sender = 1",
        "channel[c].sender",
        "a component name",
    );
    expect(
        "receivers = [\"b\"]",
        "receivers = []",
        "channel[c].receivers",
        "at least one",
    );
    expect(
        "receivers = [\"b\"]",
        "receivers = [\"b\", \"b\"]",
        "channel[c].receivers",
        "twice",
    );
    expect(
        "receivers = [\"b\"]",
        "receivers = [\"b\", \"a\"]",
        "channel[c].receivers",
        "also a sender",
    );
    expect(
        "message_size = \"64B\"",
        "message_size = \"0B\"",
        "channel[c].message_size",
        "above 0",
    );
    expect(
        "message_size = \"64B\"\n",
        "",
        "channel[c].message_size",
        "a size",
    );
    expect("capacity = 3", "capacity = 0", "channel[c].capacity", "≥ 1");
    expect(
        "capacity = 3\n",
        "",
        "channel[c].capacity",
        "a number of messages",
    );
    expect(
        "capacity = 3",
        "capacity = 3\nper_release = 0",
        "channel[c].per_release",
        "≥ 1",
    );
    expect(
        "capacity = 3",
        "capacity = 3\noverflow = \"block\"",
        "channel[c].overflow",
        "\"drop-newest\", \"drop-oldest\" or \"priority-oldest\"",
    );
    // A complete channel c, then the original's keys under a second `name = "c"`.
    expect(
        "name = \"c\"",
        "name = \"c\"\nsender = \"a\"\nreceivers = [\"b\"]\nmessage_size = \"1B\"\ncapacity = 1\n[[channel]]\nname = \"c\"",
        "channel[c].name",
        "no other channel",
    );
}

#[test]
fn audio_errors() {
    expect(
        "direction = \"playback\"",
        "direction = \"both\"",
        "audio[s].direction",
        "\"playback\" or \"record\"",
    );
    expect(
        "direction = \"playback\"\n",
        "",
        "audio[s].direction",
        "\"playback\" or \"record\"",
    );
    expect("rate = 48000", "rate = 0", "audio[s].rate", "sample rate");
    expect(
        "rate = 48000",
        "rate = 99999999999",
        "audio[s].rate",
        "sample rate",
    );
    expect("channels = 2", "channels = 0", "audio[s].channels", "≥ 1");
    expect(
        "burst_frames = 480\n",
        "",
        "audio[s].burst_frames",
        "frames per burst",
    );
    expect(
        "burst_frames = 480",
        "burst_frames = 480\nformat = \"u8\"",
        "audio[s].format",
        "\"s16\"",
    );
    expect(
        "component = \"a\"\n",
        "component = \"z\"\n",
        "audio[s].component",
        "\"z\", which is not one",
    );
    expect(
        "component = \"a\"\n",
        "component = \"b\"\n",
        "audio[s].component",
        "a periodic component",
    );
    expect(
        "component = \"a\"\n",
        "",
        "audio[s].component",
        "periodic component",
    );
}

#[test]
fn work_and_offset() {
    let m = parse(&BASE.replace(
        "wcet = \"1ms\"",
        "wcet = \"1ms\"\nwork = \"400us\"\noffset = \"3ms\"",
    ))
    .unwrap();
    assert_eq!(
        (m.components[0].work_ns, m.components[0].offset_ns),
        (400_000, 3_000_000)
    );
    assert_eq!((m.components[1].work_ns, m.components[1].offset_ns), (0, 0));
    // The built-in work may not exceed what the analysis charges (wcet here; a reservation's
    // runtime for b).
    expect(
        "wcet = \"1ms\"",
        "wcet = \"1ms\"\nwork = \"2ms\"",
        "component[a].work",
        "at most the cost the analysis charges (1ms)",
    );
    expect(
        "reservation = { runtime = \"2ms\" }",
        "reservation = { runtime = \"2ms\" }\nwork = \"3ms\"",
        "component[b].work",
        "at most the cost the analysis charges (2ms)",
    );
    expect(
        "wcet = \"1ms\"",
        "wcet = \"1ms\"\noffset = \"10ms\"",
        "component[a].offset",
        "an offset below the period (10ms)",
    );
    // Messages release a receiver: an offset would mean nothing.
    expect(
        "reservation = { runtime = \"2ms\" }",
        "reservation = { runtime = \"2ms\" }\noffset = \"1ms\"",
        "component[b].offset",
        "no offset: only periodic components have one (messages release the others)",
    );
}
