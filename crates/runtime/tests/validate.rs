//! Validation arithmetic on small manifests, each number worked out by hand in the comments.

use pacer_runtime::manifest::Manifest;
use pacer_runtime::validate::{check, Machine, Report, Violation};

const MS: u64 = 1_000_000;

fn report(text: &str, cpus: usize) -> Report {
    let m = Manifest::from_toml(text, "t.toml").unwrap_or_else(|e| panic!("{e}"));
    check(&m, &Machine::linux_default(cpus))
}

/// A SCHED_FIFO periodic component.
fn fifo(name: &str, wcet_ms: u64, period_ms: u64, prio: u8, cpus: &str) -> String {
    format!(
        "[[component]]\nname = \"{name}\"\nkind = \"periodic\"\nperiod = \"{period_ms}ms\"\nwcet = \"{wcet_ms}ms\"\npriority = {prio}\ncpus = {cpus}\n"
    )
}

/// A SCHED_DEADLINE periodic component (reservation deadline and period = the component's).
fn dl(name: &str, runtime_ms: u64, deadline_ms: u64, period_ms: u64, cpus: &str) -> String {
    format!(
        "[[component]]\nname = \"{name}\"\nkind = \"periodic\"\nperiod = \"{period_ms}ms\"\ndeadline = \"{deadline_ms}ms\"\nreservation = {{ runtime = \"{runtime_ms}ms\" }}\ncpus = {cpus}\n"
    )
}

fn app(parts: &[String]) -> String {
    format!("[app]\nname = \"t\"\n{}", parts.concat())
}

fn response(r: &Report, name: &str) -> Option<u64> {
    r.components.iter().find(|c| c.name == name).unwrap().response_ns
}

#[test]
fn rta_on_one_cpu_is_exact() {
    // Burns & Wellings' example in ms: R_a = 3; R_b = 3 + ⌈6/7⌉·3 = 6;
    // R_c: 11 → 5+6+3 = 14 → 5+6+6 = 17 → 5+9+6 = 20 → 20.
    let r = report(
        &app(&[
            fifo("a", 3, 7, 30, "[0]"),
            fifo("b", 3, 12, 20, "[0]"),
            fifo("c", 5, 20, 10, "[0]"),
        ]),
        1,
    );
    assert_eq!(response(&r, "a"), Some(3 * MS));
    assert_eq!(response(&r, "b"), Some(6 * MS));
    assert_eq!(response(&r, "c"), Some(20 * MS));
    assert!(r.components.iter().all(|c| c.test == "RTA (exact, one CPU)"));
    assert!(r.notes.is_empty(), "{:?}", r.notes);
    // CPU 0 load 3/7 + 3/12 + 5/20 = 0.928571 ≤ 0.95.
    assert_eq!(r.cpu_load[0].utilization, 0.928571);
    assert!(r.is_valid(), "{:?}", r.violations);
    assert_eq!(r.verdict, "valid");
}

#[test]
fn rta_miss_names_the_component_and_its_interferers() {
    // c with 6 ms: 12 → 6 + ⌈12/7⌉·3 + ⌈12/12⌉·3 = 15 → 6 + 9 + 6 = 21 > 20.
    let r = report(
        &app(&[
            fifo("a", 3, 7, 30, "[0]"),
            fifo("b", 3, 12, 20, "[0]"),
            fifo("c", 6, 20, 10, "[0]"),
        ]),
        1,
    );
    assert_eq!(response(&r, "c"), None);
    // 3/7 + 3/12 + 6/20 = 0.978571 > 0.95: the rt limit is exceeded as well.
    assert_eq!(
        r.violations,
        vec![
            Violation::ResponseTime {
                component: "c".into(),
                cpus: vec![0],
                deadline_ns: 20 * MS,
                interferers: vec!["a".into(), "b".into()],
                cpu_utilization: 0.978571,
            },
            Violation::RtBandwidth {
                cpu: 0,
                utilization: 0.978571,
                limit: 0.95,
                components: vec!["a".into(), "b".into(), "c".into()],
            },
        ]
    );
    assert_eq!(r.verdict, "invalid");
}

#[test]
fn several_cpus_are_analysed_with_carry_in_and_said_so() {
    // c may run on CPUs 0 and 1, a is pinned to 0: a's jitter D − C = 4 ms.
    // R_c = 5+3 = 8 → 5 + ⌈12/7⌉·3 = 11 → 5 + ⌈15/7⌉·3 = 14 → 5 + ⌈18/7⌉·3 = 14.
    let r = report(
        &app(&[fifo("a", 3, 7, 50, "[0]"), fifo("c", 5, 20, 10, "[0, 1]")]),
        2,
    );
    assert_eq!(response(&r, "c"), Some(14 * MS));
    assert_eq!(r.components[1].test, "RTA with carry-in (conservative)");
    assert!(
        r.notes.iter().any(|n| n.contains("c may run on CPUs {0,1}")),
        "{:?}",
        r.notes
    );
    // CPU loads: c counts half on each CPU: 3/7 + 0.125 = 0.553571 and 0.125.
    assert_eq!(r.cpu_load[0].utilization, 0.553571);
    assert_eq!(r.cpu_load[1].utilization, 0.125);
}

#[test]
fn equal_priorities_count_as_higher() {
    // a and b at priority 10 on one CPU: R_a = 2 + 3 = 5, R_b = 3 + 2 = 5.
    let r = report(
        &app(&[fifo("a", 2, 10, 10, "[0]"), fifo("b", 3, 10, 10, "[0]")]),
        1,
    );
    assert_eq!(response(&r, "a"), Some(5 * MS));
    assert_eq!(response(&r, "b"), Some(5 * MS));
    assert_eq!(r.components[0].test, "RTA (one CPU, ties as higher)");
}

#[test]
fn reservations_interfere_with_fifo_components() {
    // d: 1 ms every 10 ms on CPU 0, jitter 9 ms. a (C = 2): 3 → 2 + ⌈12/10⌉·1 = 4 → 2 + ⌈13/10⌉ = 4.
    let r = report(&app(&[dl("d", 1, 10, 10, "[0]"), fifo("a", 2, 10, 99, "[0]")]), 1);
    assert_eq!(response(&r, "a"), Some(4 * MS));
    assert_eq!(response(&r, "d"), Some(10 * MS));
    assert_eq!(r.domains.len(), 1);
    assert!(r.domains[0].admitted && r.domains[0].edf_ok);
}

#[test]
fn admission_sums_as_the_kernel_does() {
    // 2 CPUs: limit cap_scale(to_ratio(1s, 950ms), 2048) = 996147·2 = 1992294, fair servers
    // 2·to_ratio(1s, 50ms) = 2·52428 = 104856, so 1887438 for tasks. Each 1 ms / 10 ms is
    // to_ratio = 104857: 18 of them are 1887426 (admitted), the 19th would make 1992283.
    let parts: Vec<String> = (0..19)
        .map(|i| dl(&format!("r{i:02}"), 1, 10, 10, "[0, 1]"))
        .collect();
    let r = report(&app(&parts), 2);
    let d = &r.domains[0];
    assert_eq!(d.requested_bw, 19 * 104857);
    assert_eq!(d.available_bw, Some(1887438));
    assert!(!d.admitted);
    let adm = r
        .violations
        .iter()
        .find(|v| matches!(v, Violation::Admission { .. }))
        .unwrap();
    let Violation::Admission {
        refused,
        requested,
        available,
        cpus,
        ..
    } = adm
    else {
        unreachable!()
    };
    assert_eq!(refused, &vec!["r18".to_string()]);
    assert_eq!(cpus, &vec![0, 1]);
    assert_eq!(*requested, 1.899989); // 1992283 / 2^20, to the ppm
    assert_eq!(*available, 1.800001); // 1887438 / 2^20
                                      // 18 fit.
    let r = report(&app(&parts[..18]), 2);
    assert!(r.domains[0].admitted, "{:?}", r.violations);
}

#[test]
fn edf_demand_on_one_cpu() {
    // A (3 ms, D 4 ms, T 10 ms), B (3 ms, D 5 ms, T 10 ms) on CPU 0: U = 0.6 is admitted
    // (≤ 0.9), but the busy period is 6 ms and h(5 ms) = 3 + 3 = 6 ms > 5 ms.
    let r = report(&app(&[dl("A", 3, 4, 10, "[0]"), dl("B", 3, 5, 10, "[0]")]), 2);
    assert!(r.domains[0].admitted);
    assert!(!r.domains[0].edf_ok);
    assert_eq!(
        r.violations,
        vec![Violation::EdfDemand {
            cpus: vec![0],
            components: vec!["A".into(), "B".into()],
            at_ns: 5 * MS,
            demand_ns: 6 * MS
        }]
    );
    assert!(r.components.iter().all(|c| !c.ok && c.response_ns.is_none()));
}

#[test]
fn overlapping_deadline_cpu_sets_are_refused() {
    let r = report(
        &app(&[dl("A", 1, 10, 10, "[0]"), dl("B", 1, 10, 10, "[0, 1]")]),
        2,
    );
    assert!(r.violations.contains(&Violation::OverlappingDomains {
        cpus: vec![0],
        other_cpus: vec![0, 1],
        components: vec!["A".into(), "B".into()],
    }));
}

#[test]
fn estimates_above_budgets() {
    let text = app(&[
        fifo("a", 3, 10, 10, "[0]").replace("wcet = \"3ms\"", "wcet = \"3ms\"\nbudget = \"2ms\""),
        dl("d", 1, 10, 10, "[1]").replace("reservation", "wcet = \"2ms\"\nreservation"),
    ]);
    let r = report(&text, 2);
    // The budget is what the analysis charges: R_a = 2 ms.
    assert_eq!(response(&r, "a"), Some(2 * MS));
    assert_eq!(
        r.violations,
        vec![
            Violation::EstimateOverBudget {
                component: "a".into(),
                wcet_ns: 3 * MS,
                budget_ns: 2 * MS,
                budget_is: "budget"
            },
            Violation::EstimateOverBudget {
                component: "d".into(),
                wcet_ns: 2 * MS,
                budget_ns: MS,
                budget_is: "reservation runtime"
            },
        ]
    );
}

#[test]
fn missing_cpu() {
    let r = report(&app(&[fifo("a", 1, 10, 10, "[5]")]), 2);
    assert_eq!(
        r.violations,
        vec![Violation::CpuNotPresent {
            component: "a".into(),
            cpu: 5,
            cpus: 2
        }]
    );
}

const PIPE: &str = r#"
[app]
name = "pipe"
memory_limit = "3000B"

[[component]]
name = "s"
kind = "periodic"
period = "10ms"
wcet = "1ms"
priority = 80
cpus = [0]
persistent = "1000B"
per_release = "200B"

[[component]]
name = "f"
kind = "periodic"
period = "10ms"
wcet = "2ms"
priority = 70
cpus = [0]
persistent = "1000B"
per_release = "200B"
memory_limit = "1499B"

[[channel]]
name = "x"
sender = "s"
receivers = ["f"]
message_size = "100B"
capacity = 3
"#;

#[test]
fn memory_sums() {
    // s: 1000 + 200·1 = 1200. f: 1000 + 200·1 + 3·100 (its queue) = 1500 > 1499.
    // Application: 2700 ≤ 3000.
    let r = report(PIPE, 1);
    let f = &r.memory.components[1];
    assert_eq!(
        (f.channel_bytes, f.releases_in_flight, f.total_bytes),
        (300, 1, 1500)
    );
    assert_eq!(r.memory.components[0].total_bytes, 1200);
    assert_eq!(r.memory.total_bytes, 2700);
    assert!(r.memory.ok);
    assert_eq!(
        r.violations,
        vec![Violation::ComponentMemory {
            component: "f".into(),
            use_bytes: 1500,
            limit_bytes: 1499
        }]
    );
    // An application limit of 2699 is one byte short.
    let r = report(&PIPE.replace("\"3000B\"", "\"2699B\""), 1);
    assert!(r.violations.contains(&Violation::AppMemory {
        use_bytes: 2700,
        limit_bytes: 2699
    }));
}

#[test]
fn channel_bound() {
    // R_s = 1 ms, R_f = 2 + 1 = 3 ms. f empties its queue at most W = T_f + R_f = 13 ms apart;
    // s's sends fall in [release, release + 1 ms]: ⌈(13 + 1)/10⌉ = 2 releases, 1 message each.
    let r = report(PIPE, 1);
    let c = &r.channels[0];
    assert_eq!(
        (c.window_ns, c.messages, c.capacity, c.pool_bytes),
        (13 * MS, 2, 3, 300)
    );
    assert!(c.ok);
    // Three messages per release: 6 > 5.
    let text = PIPE
        .replace("capacity = 3", "capacity = 5\nper_release = 3")
        .replace("\"1499B\"", "\"2000B\"");
    let r = report(&text, 1);
    assert_eq!(
        r.violations,
        vec![Violation::ChannelCapacity {
            channel: "x".into(),
            receiver: "f".into(),
            messages: 6,
            capacity: 5,
            window_ns: 13 * MS,
            senders: vec!["s".into()],
        }]
    );
    let msg = r.violations[0].to_string();
    assert!(msg.contains("set capacity = 6"), "{msg}");
}

fn audio(name: &str, rate: u32, frames: u32, channels: u32) -> String {
    format!(
        "[[audio]]\nname = \"{name}\"\ndirection = \"playback\"\nrate = {rate}\nchannels = {channels}\nburst_frames = {frames}\ncomponent = \"m\"\n"
    )
}

#[test]
fn audio_sessions() {
    let m = fifo("m", 1, 10, 50, "[0]");
    // 441 frames at 44.1 kHz are exactly 10 ms; 2 bursts of 441·2·2 bytes are the mixer's.
    let r = report(&app(&[m.clone(), audio("ok", 44100, 441, 2)]), 1);
    assert!(r.is_valid(), "{:?}", r.violations);
    assert_eq!(r.audio[0].burst_ns, 10 * MS);
    assert_eq!(r.memory.components[0].audio_bytes, 2 * 441 * 2 * 2);
    // 480 frames at 44.1 kHz last 10.884 ms: the hint is the frame count that lasts 10 ms.
    let r = report(&app(&[m.clone(), audio("bad", 44100, 480, 2)]), 1);
    assert_eq!(
        r.violations,
        vec![Violation::AudioPeriod {
            session: "bad".into(),
            component: "m".into(),
            burst_frames: 480,
            rate: 44100,
            period_ns: 10 * MS
        }]
    );
    assert!(r.violations[0].to_string().contains("burst_frames = 441"));
    assert_eq!(r.audio[0].burst_ns, 10_884_353);
    // An unsupported rate, too many channels, and two rates.
    let r = report(
        &app(&[m, audio("x", 12000, 120, 9), audio("y", 48000, 480, 2)]),
        1,
    );
    assert_eq!(
        r.violations,
        vec![
            Violation::AudioRatesDiffer {
                sessions: vec!["x".into(), "y".into()],
                rates: vec![12000, 48000]
            },
            Violation::AudioRate {
                session: "x".into(),
                rate: 12000
            },
            Violation::AudioChannels {
                session: "x".into(),
                channels: 9
            },
        ]
    );
}

#[test]
fn report_serializes_with_schema_and_ns() {
    let r = report(PIPE, 1);
    let v = serde_json::to_value(&r).unwrap();
    assert_eq!(v["schema"], "pacer.runtime.check/1");
    assert_eq!(v["verdict"], "invalid");
    assert_eq!(v["components"][1]["response_ns"], 3 * MS);
    assert_eq!(v["violations"][0]["kind"], "component_memory");
}
