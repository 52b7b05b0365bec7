//! cpufreq residency (`stats/time_in_state`) and energy from a power table, against fake sysfs
//! trees in temporary directories.

use std::fs;
use std::path::{Path, PathBuf};

use pacer_linux::cpufreq::{
    parse_time_in_state, user_hz, CpuFreq, EnergyError, FreqResidency, PolicyResidency, PowerTable,
    ResidencySnapshot,
};

fn write(path: &Path, text: &str) {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, text).unwrap();
}

fn policy(root: &Path, id: usize, cpus: &str) -> PathBuf {
    let p = root.join(format!("cpufreq/policy{id}"));
    write(&p.join("related_cpus"), cpus);
    write(&p.join("scaling_governor"), "schedutil\n");
    p
}

/// policy0 (LITTLE) and policy4 (big), both with statistics.
fn fake_tree(root: &Path, little: &str, big: &str) {
    let p0 = policy(root, 0, "0-3\n");
    write(&p0.join("stats/time_in_state"), little);
    write(&p0.join("stats/total_trans"), "12\n");
    let p4 = policy(root, 4, "4-7\n");
    write(&p4.join("stats/time_in_state"), big);
}

fn states(p: &PolicyResidency) -> Vec<(u32, u64)> {
    p.states.iter().map(|s| (s.khz, s.ns)).collect()
}

#[test]
fn reads_time_in_state_as_ns() {
    let dir = tempfile::tempdir().unwrap();
    // The kernel lists frequencies in its table's order, which need not be ascending.
    fake_tree(
        dir.path(),
        "300000 5\n576000 0\n1017600 120\n",
        "2419200 7\n710400 300\n",
    );
    let snap = CpuFreq::new(dir.path()).residency_snapshot_with(100).unwrap();
    assert_eq!(snap.policies.len(), 2);
    let p0 = snap.policy(0).unwrap();
    assert_eq!(
        states(p0),
        vec![(300_000, 50_000_000), (576_000, 0), (1_017_600, 1_200_000_000)]
    );
    assert_eq!(p0.total_ns(), 1_250_000_000);
    assert_eq!(p0.ns_at(576_000), Some(0));
    assert_eq!(p0.ns_at(1), None);
    assert_eq!(
        states(snap.policy(4).unwrap()),
        vec![(710_400, 3_000_000_000), (2_419_200, 70_000_000)]
    );
    // A different USER_HZ scales the ticks.
    let snap = CpuFreq::new(dir.path()).residency_snapshot_with(1000).unwrap();
    assert_eq!(snap.policy(0).unwrap().ns_at(1_017_600), Some(120_000_000));
}

#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
#[test]
fn user_hz_is_the_documented_10_ms_tick() {
    assert_eq!(user_hz(), 100);
    let dir = tempfile::tempdir().unwrap();
    fake_tree(dir.path(), "300000 1\n", "710400 2\n");
    let snap = CpuFreq::new(dir.path()).residency_snapshot().unwrap();
    assert_eq!(snap.policy(4).unwrap().ns_at(710_400), Some(20_000_000));
}

#[test]
fn no_cpufreq_is_its_own_error() {
    let dir = tempfile::tempdir().unwrap();
    let e = CpuFreq::new(dir.path()).residency_snapshot().unwrap_err();
    assert!(matches!(e, EnergyError::NoCpufreq), "{e:?}");
    assert!(e.is_not_measured());
    assert_eq!(
        e.to_string(),
        "no cpufreq on this machine: frequency residency and energy not measured"
    );
    // An empty cpufreq directory (no policyN) is the same.
    fs::create_dir_all(dir.path().join("cpufreq")).unwrap();
    let e = CpuFreq::new(dir.path()).residency_snapshot().unwrap_err();
    assert!(matches!(e, EnergyError::NoCpufreq), "{e:?}");
}

#[test]
fn missing_stats_dir_is_reported_per_policy() {
    let dir = tempfile::tempdir().unwrap();
    let p0 = policy(dir.path(), 0, "0-3\n");
    write(&p0.join("stats/time_in_state"), "300000 1\n");
    policy(dir.path(), 4, "4-7\n");
    let e = CpuFreq::new(dir.path()).residency_snapshot().unwrap_err();
    match &e {
        EnergyError::NoStats { policy, path } => {
            assert_eq!(*policy, 4);
            assert!(path.ends_with("cpufreq/policy4/stats"), "{}", path.display());
        }
        other => panic!("expected NoStats, got {other:?}"),
    }
    assert!(e.is_not_measured());
    let msg = e.to_string();
    assert!(
        msg.contains("policy4") && msg.contains("CONFIG_CPU_FREQ_STAT"),
        "{msg}"
    );
    assert!(
        msg.ends_with("frequency residency and energy not measured"),
        "{msg}"
    );
    // A stats directory without time_in_state names the file.
    fs::create_dir_all(dir.path().join("cpufreq/policy4/stats")).unwrap();
    match CpuFreq::new(dir.path()).time_in_state(4).unwrap_err() {
        EnergyError::NoStats { path, .. } => assert!(path.ends_with("stats/time_in_state")),
        other => panic!("expected NoStats, got {other:?}"),
    }
}

#[test]
fn malformed_lines_are_errors_naming_the_line() {
    let path = Path::new("/fake/policy0/stats/time_in_state");
    let cases = [
        ("300000 1\n576000 abc\n", 2),
        ("300000\n", 1),
        ("300000 1 2\n", 1),
        ("-300000 1\n", 1),
        ("0 1\n", 1),
        ("300000 -1\n", 1),
        ("3.5e5 1\n", 1),
        ("300000 1\n\n576000 99999999999999999999\n", 3),
        // Fits u64 as ticks but not as ns.
        ("300000 18446744073709551\n", 1),
        ("", 1),
    ];
    for (text, line_no) in cases {
        match parse_time_in_state(0, text, 100, path) {
            Err(EnergyError::TimeInState { path: p, line, .. }) => {
                assert_eq!(p, path, "{text:?}");
                assert_eq!(line, line_no, "{text:?}");
            }
            other => panic!("{text:?}: expected TimeInState, got {other:?}"),
        }
    }
    let e = parse_time_in_state(0, "300000 1\n300000 2\n", 100, path).unwrap_err();
    assert!(e.to_string().contains("300000 kHz listed twice"), "{e}");
    // Through the backend: the error names the sysfs file.
    let dir = tempfile::tempdir().unwrap();
    fake_tree(dir.path(), "300000 1\n", "710400 x\n");
    let e = CpuFreq::new(dir.path()).residency_snapshot().unwrap_err();
    let msg = e.to_string();
    assert!(msg.contains("policy4/stats/time_in_state:1:"), "{msg}");
    assert!(!e.is_not_measured());
}

#[test]
fn two_snapshots_give_the_residency_of_the_run() {
    let dir = tempfile::tempdir().unwrap();
    fake_tree(dir.path(), "300000 5\n1017600 120\n", "710400 300\n2419200 7\n");
    let cf = CpuFreq::new(dir.path());
    let before = cf.residency_snapshot_with(100).unwrap();
    fake_tree(
        dir.path(),
        "300000 105\n1017600 120\n",
        "710400 301\n2419200 57\n",
    );
    let after = cf.residency_snapshot_with(100).unwrap();
    let run = after.since(&before).unwrap();
    assert_eq!(
        states(run.policy(0).unwrap()),
        vec![(300_000, 1_000_000_000), (1_017_600, 0)]
    );
    assert_eq!(
        states(run.policy(4).unwrap()),
        vec![(710_400, 10_000_000), (2_419_200, 500_000_000)]
    );
    // Nothing happened between a snapshot and itself.
    let none = after.since(&after).unwrap();
    assert!(none.policies.iter().all(|p| p.total_ns() == 0));

    // A reset counter is an error, not a huge or negative residency.
    let e = before.since(&after).unwrap_err();
    assert!(
        matches!(
            e,
            EnergyError::CounterWentBack {
                policy: 0,
                khz: 300_000,
                ..
            }
        ),
        "{e:?}"
    );
    // A policy appeared, or a frequency changed: the snapshots cannot be compared.
    let mut other = after.clone();
    other.policies.pop();
    assert!(matches!(
        after.since(&other),
        Err(EnergyError::SnapshotMismatch(_))
    ));
    let mut other = after.clone();
    other.policies[1].states[1].khz = 2_400_000;
    let e = after.since(&other).unwrap_err();
    assert!(e.to_string().contains("policy4 frequencies"), "{e}");
}

const TABLE: &str = r#"
# HiKey960-like big cluster, mW
opps = [
  { freq_khz = 1000000, power = 100 },
  { freq_khz = 2000000, power = 400.0 },
]
"#;

fn residency(policy: usize, states: &[(u32, u64)]) -> PolicyResidency {
    PolicyResidency {
        policy,
        states: states
            .iter()
            .map(|&(khz, ns)| FreqResidency { khz, ns })
            .collect(),
    }
}

#[test]
fn energy_is_residency_times_power() {
    let table = PowerTable::parse(TABLE, Path::new("t.toml")).unwrap();
    assert_eq!(table.opps.len(), 2);
    assert_eq!(table.power_mw(2_000_000), Some(400.0));
    assert_eq!(table.top().freq_khz, 2_000_000);
    // 1 s at 100 mW + 1 s at 400 mW = 0.5 J; the same 2 s at the top OPP: 0.8 J.
    let snap = ResidencySnapshot {
        policies: vec![
            residency(0, &[(1_000_000, 1_000_000_000), (2_000_000, 1_000_000_000)]),
            residency(1, &[(1_000_000, 3_000_000_000), (2_000_000, 0)]),
        ],
    };
    let e = table.energy(&snap).unwrap();
    let close = |a: f64, b: f64| (a - b).abs() < 1e-12;
    assert!(close(e.policies[0].energy_j, 0.5), "{e:?}");
    assert!(close(e.policies[0].top_energy_j, 0.8));
    assert!(close(e.policies[0].normalised, 0.625));
    assert_eq!(e.policies[1].time_ns, 3_000_000_000);
    assert!(close(e.policies[1].energy_j, 0.3));
    assert!(close(e.policies[1].normalised, 0.25));
    assert!(close(e.energy_j, 0.8));
    assert!(close(e.top_energy_j, 2.0));
    assert!(close(e.normalised, 0.4));
    // No time: zero energy, normalised 0 rather than NaN.
    let idle = table.policy_energy(&residency(0, &[(1_000_000, 0)])).unwrap();
    assert_eq!((idle.energy_j, idle.normalised), (0.0, 0.0));
}

#[test]
fn unknown_frequencies_are_errors_when_used() {
    let table = PowerTable::parse(TABLE, Path::new("/etc/pacer/power.toml")).unwrap();
    let r = residency(4, &[(1_000_000, 10), (1_500_000, 20)]);
    let e = table.policy_energy(&r).unwrap_err();
    assert!(
        matches!(
            e,
            EnergyError::UnknownFrequency {
                policy: 4,
                khz: 1_500_000,
                ns: 20,
                ..
            }
        ),
        "{e:?}"
    );
    let msg = e.to_string();
    assert!(
        msg.contains("/etc/pacer/power.toml") && msg.contains("1500000 kHz"),
        "{msg}"
    );
    // An OPP the run never used need not be in the table.
    let r = residency(4, &[(1_000_000, 10), (1_500_000, 0)]);
    assert!(table.policy_energy(&r).is_ok());
}

#[test]
fn power_table_errors_name_the_file_the_entry_and_the_expectation() {
    let cases: &[(&str, &str, &str)] = &[
        ("opps = [", "(file)", "TOML"),
        ("x = 1", "opps", "an array"),
        ("opps = []", "opps", "at least one OPP"),
        ("opps = 3", "opps", "an array of OPP tables, got integer"),
        ("opps = [1]", "opps[0]", "a table"),
        (
            "opps = [{ power = 1 }]",
            "opps[0].freq_khz",
            "an integer frequency in kHz",
        ),
        (
            "opps = [{ freq_khz = -5, power = 1 }]",
            "opps[0].freq_khz",
            "got -5",
        ),
        (
            "opps = [{ freq_khz = 1.5, power = 1 }]",
            "opps[0].freq_khz",
            "an integer",
        ),
        (
            "opps = [{ freq_khz = 5000000000, power = 1 }]",
            "opps[0].freq_khz",
            "1..=",
        ),
        (
            "opps = [{ freq_khz = 2, power = 1 }, { freq_khz = 1, power = 1 }]",
            "opps[1].freq_khz",
            "strictly ascending order, got 1 after 2",
        ),
        (
            "opps = [{ freq_khz = 1, power = -1 }]",
            "opps[0].power",
            "≥ 0, got -1",
        ),
        (
            "opps = [{ freq_khz = 1, power = \"1W\" }]",
            "opps[0].power",
            "a finite power in mW",
        ),
        (
            "opps = [{ freq_khz = 1, power = nan }]",
            "opps[0].power",
            "a finite power",
        ),
        ("opps = [{ freq_khz = 1 }]", "opps[0].power", "got nothing"),
        (
            "opps = [{ freq_khz = 1, power = 1, volt = 2 }]",
            "opps[0].volt",
            "only `freq_khz` and `power`",
        ),
        (
            "opps = [{ freq_khz = 1, power = 1 }]\nunit = \"W\"",
            "unit",
            "only `opps`",
        ),
        (
            "[platform]\nopps = [{ freq_khz = 1, power = -2 }]",
            "platform.opps[0].power",
            "≥ 0",
        ),
    ];
    for (text, entry, expected) in cases {
        match PowerTable::parse(text, Path::new("p.toml")) {
            Err(e @ EnergyError::PowerTable { .. }) => {
                let msg = e.to_string();
                assert!(
                    msg.starts_with(&format!("power table p.toml: {entry}: expected ")),
                    "{text:?}: {msg}"
                );
                assert!(msg.contains(expected), "{text:?}: {msg}");
            }
            other => panic!("{text:?}: expected a PowerTable error, got {other:?}"),
        }
    }
    let e = PowerTable::read("/nonexistent/power.toml").unwrap_err();
    assert!(matches!(e, EnergyError::PowerTableIo { .. }));
    assert!(
        e.to_string().starts_with("power table /nonexistent/power.toml: "),
        "{e}"
    );
}

#[test]
fn one_table_serves_the_simulator_and_the_energy_measurement() {
    // The [platform] table of an audio scenario, read by the simulator and by PowerTable.
    let scenario = "[platform]\nopps = [\n  { freq_khz = 903000, power = 404 },\n  { freq_khz = 2362000, power = 2848.5 },\n]\n";
    let sim = pacer_sim::audio::parse_audio_scenario(scenario, "s.toml").unwrap();
    let sim_opps = sim.platform.opps.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.toml");
    fs::write(&path, scenario).unwrap();
    let table = PowerTable::read(&path).unwrap();
    assert_eq!(table.path, path);
    let ours: Vec<(u32, f64)> = table.opps.iter().map(|o| (o.freq_khz, o.power_mw)).collect();
    let theirs: Vec<(u32, f64)> = sim_opps.iter().map(|o| (o.freq_khz, o.power)).collect();
    assert_eq!(ours, theirs);
    // And a dedicated table file is a valid [platform] body for the simulator.
    let table_file = format!(
        "[platform]\n{}",
        TABLE.replace("# HiKey960-like big cluster, mW\n", "")
    );
    let sim = pacer_sim::audio::parse_audio_scenario(&table_file, "t.toml").unwrap();
    assert_eq!(sim.platform.opps.unwrap().len(), 2);
}

#[test]
fn this_machine_reports_residency_or_says_why_not() {
    let has_policies = fs::read_dir("/sys/devices/system/cpu/cpufreq")
        .map(|d| {
            d.flatten()
                .any(|e| e.file_name().to_string_lossy().starts_with("policy"))
        })
        .unwrap_or(false);
    match CpuFreq::system().residency_snapshot() {
        Ok(snap) => {
            assert!(has_policies);
            assert!(!snap.policies.is_empty());
            assert!(snap.since(&snap).is_ok());
        }
        Err(e) => {
            assert!(e.is_not_measured(), "{e}");
            if !has_policies {
                assert!(matches!(e, EnergyError::NoCpufreq), "{e:?}");
                eprintln!("{e}");
            }
        }
    }
}

mod fuzz {
    use std::collections::BTreeMap;
    use std::path::Path;

    use pacer_linux::cpufreq::{parse_time_in_state, PowerTable};
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn time_in_state_never_panics(text in "\\PC*") {
            let _ = parse_time_in_state(0, &text, 100, Path::new("x"));
        }

        #[test]
        fn time_in_state_round_trips(rows in prop::collection::btree_map(1u32.., 0u64..1u64 << 40, 1..20)) {
            let text: String = rows.iter().rev().map(|(k, t)| format!("{k} {t}\n")).collect();
            let r = parse_time_in_state(3, &text, 100, Path::new("x")).unwrap();
            let back: BTreeMap<u32, u64> = r.states.iter().map(|s| (s.khz, s.ns / 10_000_000)).collect();
            prop_assert_eq!(back, rows);
            prop_assert!(r.states.windows(2).all(|w| w[0].khz < w[1].khz));
        }

        #[test]
        fn power_table_never_panics(text in "\\PC*") {
            let _ = PowerTable::parse(&text, Path::new("x"));
        }

        #[test]
        fn power_table_round_trips(rows in prop::collection::btree_map(1u32.., 0.0f64..1e6, 1..10)) {
            let body: Vec<String> = rows.iter().map(|(k, p)| format!("{{ freq_khz = {k}, power = {p:?} }}")).collect();
            let text = format!("opps = [{}]", body.join(", "));
            let t = PowerTable::parse(&text, Path::new("x")).unwrap();
            let back: BTreeMap<u32, f64> = t.opps.iter().map(|o| (o.freq_khz, o.power_mw)).collect();
            prop_assert_eq!(back, rows);
        }
    }
}
