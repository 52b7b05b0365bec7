//! Tests of the simulator's output layer (CSV, summary, Chrome trace) on hand-made job records and
//! event sequences, checking exact values.

use std::io::{self, Write};

use pacer_sim::output::summary::Percentiles;
use pacer_sim::output::{render_text, ChromeTrace, JobCsv, Summary};
use pacer_sim::record::{Fanout, JobRecord, Observer, PrevState, ThreadStats, TraceEvent};
use serde_json::Value;

const MS: u64 = 1_000_000;

/// A writer that accepts `budget` bytes, then fails every write.
#[derive(Debug)]
struct FailAfter {
    budget: usize,
    writes_after_failure: usize,
}

impl Write for FailAfter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.budget == 0 {
            self.writes_after_failure += 1;
            return Err(io::Error::other("disk full"));
        }
        let n = buf.len().min(self.budget);
        self.budget -= n;
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[allow(clippy::too_many_arguments)]
fn job(
    thread: u32,
    job: u64,
    release: u64,
    start: u64,
    finish: u64,
    deadline: u64,
    period: u64,
    exec: u64,
) -> JobRecord {
    JobRecord {
        thread,
        job,
        release,
        start,
        finish,
        deadline,
        period,
        exec,
        preemptions: 0,
        migrations: 0,
        cpu: 0,
    }
}

// ---------------------------------------------------------------------------------------------
// CSV

#[test]
fn csv_round_trips_exact_values() {
    let names = vec!["video".to_string(), "audio, left".to_string()];
    let records = [
        JobRecord {
            thread: 0,
            job: 0,
            release: 0,
            start: 1_500,
            finish: 3_000_001,
            deadline: 10 * MS,
            period: 10 * MS,
            exec: 2_999_999,
            preemptions: 2,
            migrations: 1,
            cpu: 3,
        },
        JobRecord {
            thread: 1,
            job: 41,
            release: 123_456_789_012,
            start: 123_456_789_012,
            finish: 123_456_789_012 + 7 * MS,
            deadline: 123_456_789_012 + 5 * MS,
            period: 6 * MS,
            exec: 4 * MS,
            preemptions: 0,
            migrations: 0,
            cpu: 0,
        },
        // A thread without a name.
        job(2, u64::MAX / 2, 5, 5, 6, 7, 3, 1),
    ];
    let mut csv = JobCsv::new(Vec::new(), names);
    for r in &records {
        csv.job(r);
    }
    let bytes = csv.finish().unwrap();

    let mut reader = csv::Reader::from_reader(bytes.as_slice());
    let header: Vec<String> = reader.headers().unwrap().iter().map(String::from).collect();
    assert_eq!(
        header,
        [
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
            "cpu"
        ]
    );
    let rows: Vec<csv::StringRecord> = reader.records().map(Result::unwrap).collect();
    assert_eq!(rows.len(), records.len());
    let expect_names = ["video", "audio, left", "t2"];
    for ((row, r), name) in rows.iter().zip(&records).zip(expect_names) {
        assert_eq!(row.len(), 13);
        assert_eq!(&row[0], name);
        let int = |i: usize| row[i].parse::<u64>().unwrap();
        assert_eq!(int(1), r.job);
        assert_eq!(int(2), r.release);
        assert_eq!(int(3), r.start);
        assert_eq!(int(4), r.finish);
        assert_eq!(int(5), r.deadline);
        assert_eq!(int(6), r.finish - r.release);
        // Shortest round-trip formatting: the parsed value is bit-for-bit the computed one.
        assert_eq!(
            row[7].parse::<f64>().unwrap().to_bits(),
            r.normalised_laxity().to_bits()
        );
        assert_eq!(&row[8], if r.finish > r.deadline { "1" } else { "0" });
        assert_eq!(int(9), r.exec);
        assert_eq!(int(10), u64::from(r.preemptions));
        assert_eq!(int(11), u64::from(r.migrations));
        assert_eq!(int(12), u64::from(r.cpu));
    }
    assert_eq!(&rows[1][7], "-0.3333333333333333");
    assert_eq!(&rows[1][8], "1");
}

#[test]
fn csv_reports_io_error_from_finish_without_panicking() {
    // Fails mid-stream: the buffer fills several times before the sink gives up.
    let mut csv = JobCsv::new(
        FailAfter {
            budget: 100_000,
            writes_after_failure: 0,
        },
        vec!["a".into()],
    );
    for j in 0..100_000 {
        csv.job(&job(
            0,
            j,
            j * 10 * MS,
            j * 10 * MS,
            j * 10 * MS + MS,
            (j + 1) * 10 * MS,
            10 * MS,
            MS,
        ));
    }
    assert!(
        csv.error().is_some(),
        "the error is remembered as soon as it happens"
    );
    let err = csv.finish().unwrap_err();
    assert_eq!(err.to_string(), "disk full");

    // Fails only at the final flush.
    let mut csv = JobCsv::new(
        FailAfter {
            budget: 0,
            writes_after_failure: 0,
        },
        vec!["a".into()],
    );
    csv.job(&job(0, 0, 0, 0, MS, 2 * MS, 2 * MS, MS));
    assert!(csv.error().is_none());
    assert_eq!(csv.finish().unwrap_err().to_string(), "disk full");
}

#[test]
fn writers_stop_writing_after_the_first_error() {
    let mut sink = FailAfter {
        budget: 70_000,
        writes_after_failure: 0,
    };
    let mut csv = JobCsv::new(&mut sink, vec!["a".into()]);
    for j in 0..200_000 {
        csv.job(&job(0, j, 0, 0, MS, 2 * MS, 2 * MS, MS));
    }
    assert!(csv.finish().is_err());
    // One failed write; nothing was attempted after it (not even by the flush on drop).
    assert_eq!(sink.writes_after_failure, 1);

    let mut sink = FailAfter {
        budget: 70_000,
        writes_after_failure: 0,
    };
    let mut trace = ChromeTrace::new(&mut sink, vec!["a".into()], 1);
    for k in 0..20_000u64 {
        trace.event(&TraceEvent::Switch {
            t: 2 * k,
            cpu: 0,
            prev: None,
            next: Some(0),
            prev_state: PrevState::Runnable,
        });
        trace.event(&TraceEvent::Switch {
            t: 2 * k + 1,
            cpu: 0,
            prev: Some(0),
            next: None,
            prev_state: PrevState::Runnable,
        });
    }
    assert!(trace.finish(40_000).is_err());
    assert_eq!(sink.writes_after_failure, 1);
}

// ---------------------------------------------------------------------------------------------
// Summary

#[test]
fn summary_percentiles_miss_ratio_and_laxity() {
    let mut s = Summary::new(1);
    // Responses of 1..=1000 ms, deadline 700 ms, period 1 s, exec 100 ms, in shuffled order.
    for k in 0..1000u64 {
        let j = (k * 379) % 1000 + 1; // 379 is coprime with 1000: a permutation of 1..=1000
        let release = k * 1000 * MS;
        s.job(&job(
            0,
            k,
            release,
            release,
            release + j * MS,
            release + 700 * MS,
            1000 * MS,
            100 * MS,
        ));
    }
    let r = s.report(&["t".into()], &[ThreadStats::default()], 1000 * 1000 * MS, 1);
    let t = &r.per_task[0];
    assert_eq!(t.jobs, 1000);
    assert_eq!(t.misses, 300);
    assert_eq!(t.miss_ratio, Some(0.3));
    assert_eq!(r.miss_ratio, Some(0.3));
    let p = t.response_ns.unwrap();
    let close = |got: u64, want_ms: u64| {
        let want = want_ms * MS;
        assert!(
            got.abs_diff(want) as f64 <= want as f64 * 1e-3,
            "got {got}, want {want} ± 0.1%"
        );
    };
    close(p.p50, 500);
    close(p.p90, 900);
    close(p.p99, 990);
    close(p.p999, 999);
    assert_eq!(p.max, 1000 * MS, "max is exact");
    // Mean of (700 − j)/1000 over j = 1..=1000.
    assert!((t.normalised_laxity_mean.unwrap() - 0.1995).abs() < 1e-12);
    assert!((t.normalised_laxity_min.unwrap() + 0.3).abs() < 1e-12);
    assert!((t.utilisation.unwrap() - 0.1).abs() < 1e-12);
    assert_eq!(t.max_tardiness_ns, 300 * MS);
}

#[test]
fn summary_table2_set_metrics() {
    let mut s = Summary::new(2);
    // Task a: period 10 ms, deadline 10 ms; laxities 0.5 and 0.3, utilisations 0.2 and 0.4.
    s.job(&job(0, 0, 0, 0, 5 * MS, 10 * MS, 10 * MS, 2 * MS));
    s.job(&job(0, 1, 10 * MS, 10 * MS, 17 * MS, 20 * MS, 10 * MS, 4 * MS));
    // Task b: period 20 ms, deadline 20 ms; misses by 4 ms: laxity −0.2, utilisation 0.5.
    s.job(&job(1, 0, 0, 0, 24 * MS, 20 * MS, 20 * MS, 10 * MS));
    let stats = [
        ThreadStats {
            switches: 10,
            involuntary_switches: 3,
            migrations: 4,
            ..Default::default()
        },
        ThreadStats {
            switches: 6,
            involuntary_switches: 1,
            migrations: 0,
            ..Default::default()
        },
    ];
    let r = s.report(&["a".into(), "b".into()], &stats, 2_000 * MS, 2);
    let near = |got: Option<f64>, want: f64| {
        let got = got.unwrap();
        assert!((got - want).abs() < 1e-12, "got {got}, want {want}");
    };
    assert_eq!(r.tasks, 2);
    assert_eq!(
        (r.jobs, r.misses, r.migrations, r.context_switches),
        (3, 1, 4, 16)
    );
    near(r.miss_ratio, 1.0 / 3.0);
    near(r.migration_rate, 2.0); // 4 migrations / 2 tasks
    near(r.migration_rate_per_s, 1.0); // … over 2 s
    near(r.context_switch_rate, 8.0); // 16 switches / 2 tasks
    near(r.context_switch_rate_per_s, 4.0);
    near(r.involuntary_switch_rate, 2.0);
    near(r.involuntary_switch_rate_per_s, 1.0);
    near(r.per_task[0].normalised_laxity_mean, 0.4);
    near(r.per_task[1].normalised_laxity_mean, -0.2);
    near(r.normalised_laxity, 0.1); // mean of the per-task means
    near(r.per_task[0].utilisation, 0.3);
    near(r.per_task[1].utilisation, 0.5);
    near(Some(r.utilisation), 0.8); // sum of the per-task means
    near(r.utilisation_per_cpu, 0.4);
    assert_eq!(r.per_task[1].max_tardiness_ns, 4 * MS);
    assert_eq!(r.per_task[0].switches, 10);

    // Serializes, with the documented field names.
    let v = serde_json::to_value(&r).unwrap();
    assert_eq!(v["per_task"][1]["name"], "b");
    assert_eq!(v["per_task"][1]["response_ns"]["max"], 24 * MS);
    assert!(v["context_switch_rate_per_s"].is_number());
}

#[test]
fn summary_of_tasks_without_jobs_and_zero_horizon() {
    let s = Summary::new(0);
    let r = s.report(&["idle".into()], &[], 0, 4);
    assert_eq!(r.tasks, 1);
    assert_eq!(r.per_task[0].jobs, 0);
    assert_eq!(r.per_task[0].response_ns, None::<Percentiles>);
    assert_eq!(r.miss_ratio, None);
    assert_eq!(r.migration_rate, Some(0.0));
    assert_eq!(r.migration_rate_per_s, None);
    assert_eq!(r.normalised_laxity, None);
    assert_eq!(r.utilisation, 0.0);
    let text = render_text(&r);
    assert!(text.contains("idle"));
}

#[test]
fn render_text_aligns_columns() {
    let mut s = Summary::new(2);
    s.job(&job(0, 0, 0, 0, 5 * MS, 10 * MS, 10 * MS, 2 * MS));
    s.job(&job(1, 0, 0, 0, 24 * MS, 20 * MS, 20 * MS, 10 * MS));
    let r = s.report(&["ü-task".into(), "b".into()], &[], 1_000 * MS, 2);
    let text = render_text(&r);
    let table: Vec<&str> = text.lines().take_while(|l| !l.is_empty()).collect();
    assert_eq!(table.len(), 3, "{text}");
    assert!(table[0].starts_with("task"));
    // Right-aligned last column: every line has the same width in characters.
    let widths: Vec<usize> = table.iter().map(|l| l.chars().count()).collect();
    assert!(widths.iter().all(|&w| w == widths[0]), "{text}");
    // Columns line up: the "jobs" header ends where the job counts end.
    let end_of = |line: &str, needle: &str| line.find(needle).unwrap() + needle.len();
    let jobs_end = end_of(table[0], "jobs");
    assert_eq!(
        table[2].chars().nth(table[0][..jobs_end].chars().count() - 1),
        Some('1')
    );
    assert!(table[1].contains("5000.000"), "p50 in µs: {text}");
    assert!(text.contains("miss ratio:"), "{text}");
    assert!(text.contains("0.500000"), "{text}");
}

// ---------------------------------------------------------------------------------------------
// Chrome trace

/// Two CPUs, threads "hi" (0) and "lo" (1): hi preempts lo on CPU 0, lo migrates to CPU 1 and
/// misses its deadline, hi is throttled and replenished, and hi's second job is still running at
/// the end.
fn trace_scenario<O: Observer>(o: &mut O) {
    use TraceEvent::*;
    let lo_job = JobRecord {
        thread: 1,
        job: 0,
        release: 0,
        start: 0,
        finish: 6 * MS,
        deadline: 5 * MS,
        period: 10 * MS,
        exec: 5_799_750,
        preemptions: 1,
        migrations: 1,
        cpu: 1,
    };
    let hi_job = JobRecord {
        thread: 0,
        job: 0,
        release: 1_000_500,
        start: 1_000_500,
        finish: 3_000_250,
        deadline: 4_000_500,
        period: 5 * MS,
        exec: 1_999_750,
        preemptions: 0,
        migrations: 0,
        cpu: 0,
    };
    let events = [
        Release {
            t: 0,
            thread: 1,
            job: 0,
        },
        Switch {
            t: 0,
            cpu: 0,
            prev: None,
            next: Some(1),
            prev_state: PrevState::Runnable,
        },
        Release {
            t: 1_000_500,
            thread: 0,
            job: 0,
        },
        Switch {
            t: 1_000_500,
            cpu: 0,
            prev: Some(1),
            next: Some(0),
            prev_state: PrevState::Runnable,
        },
        Migrate {
            t: 1_200_000,
            thread: 1,
            from: 0,
            to: 1,
        },
        Switch {
            t: 1_200_000,
            cpu: 1,
            prev: None,
            next: Some(1),
            prev_state: PrevState::Runnable,
        },
        Finish {
            t: 3_000_250,
            thread: 0,
            job: 0,
            missed: false,
        },
    ];
    for e in &events {
        o.event(e);
    }
    o.job(&hi_job);
    o.event(&Switch {
        t: 3_000_250,
        cpu: 0,
        prev: Some(0),
        next: None,
        prev_state: PrevState::Runnable,
    });
    o.event(&Finish {
        t: 6 * MS,
        thread: 1,
        job: 0,
        missed: true,
    });
    o.job(&lo_job);
    for e in [
        Switch {
            t: 6 * MS,
            cpu: 1,
            prev: Some(1),
            next: None,
            prev_state: PrevState::Runnable,
        },
        Release {
            t: 7 * MS,
            thread: 0,
            job: 1,
        },
        Switch {
            t: 7 * MS,
            cpu: 0,
            prev: None,
            next: Some(0),
            prev_state: PrevState::Runnable,
        },
        Throttle {
            t: 7_500_000,
            thread: 0,
            until: 8 * MS,
        },
        Switch {
            t: 7_500_000,
            cpu: 0,
            prev: Some(0),
            next: None,
            prev_state: PrevState::Runnable,
        },
        Replenish { t: 8 * MS, thread: 0 },
        Switch {
            t: 8 * MS,
            cpu: 0,
            prev: None,
            next: Some(0),
            prev_state: PrevState::Runnable,
        },
    ] {
        o.event(&e);
    }
}

fn events_of(json: &Value) -> &Vec<Value> {
    json["traceEvents"].as_array().expect("traceEvents array")
}

/// (ts, dur) in µs of the X slices on track (pid, tid), in file order.
fn slices(json: &Value, pid: u64, tid: u64) -> Vec<(f64, f64, String)> {
    events_of(json)
        .iter()
        .filter(|e| e["ph"] == "X" && e["pid"] == pid && e["tid"] == tid)
        .map(|e| {
            (
                e["ts"].as_f64().unwrap(),
                e["dur"].as_f64().unwrap(),
                e["name"].as_str().unwrap().into(),
            )
        })
        .collect()
}

fn meta_name(json: &Value, kind: &str, pid: u64, tid: Option<u64>) -> Option<String> {
    events_of(json)
        .iter()
        .find(|e| e["ph"] == "M" && e["name"] == kind && e["pid"] == pid && tid.is_none_or(|t| e["tid"] == t))
        .map(|e| e["args"]["name"].as_str().unwrap().to_string())
}

#[test]
fn chrome_trace_scenario() {
    let mut trace = ChromeTrace::new(Vec::new(), vec!["hi".into(), "lo".into()], 2);
    assert!(trace.wants_events());
    trace_scenario(&mut trace);
    let bytes = trace.finish(9 * MS).unwrap();
    let json: Value = serde_json::from_slice(&bytes).expect("valid JSON");
    assert_eq!(json["displayTimeUnit"], "ns");

    // Track names.
    assert_eq!(meta_name(&json, "process_name", 1, None).as_deref(), Some("CPUs"));
    assert_eq!(
        meta_name(&json, "process_name", 2, None).as_deref(),
        Some("tasks")
    );
    assert_eq!(
        meta_name(&json, "thread_name", 1, Some(3)).as_deref(),
        Some("CPU 0")
    );
    assert_eq!(
        meta_name(&json, "thread_name", 1, Some(5)).as_deref(),
        Some("CPU 1")
    );
    assert_eq!(meta_name(&json, "thread_name", 2, Some(4)).as_deref(), Some("hi"));
    assert_eq!(meta_name(&json, "thread_name", 2, Some(6)).as_deref(), Some("lo"));

    // CPU 0: lo until preempted, hi's first job, hi until throttled, hi from replenishment to the
    // end of the trace.
    let s = |ts: f64, dur: f64, name: &str| (ts, dur, name.to_string());
    assert_eq!(
        slices(&json, 1, 3),
        [
            s(0.0, 1000.5, "lo"),
            s(1000.5, 1999.75, "hi"),
            s(7000.0, 500.0, "hi"),
            s(8000.0, 1000.0, "hi"),
        ]
    );
    // CPU 1: lo after migrating.
    assert_eq!(slices(&json, 1, 5), [s(1200.0, 4800.0, "lo")]);

    // Job slices.
    assert_eq!(
        slices(&json, 2, 4),
        [s(1000.5, 1999.75, "job 0"), s(7000.0, 2000.0, "job 1")]
    );
    assert_eq!(slices(&json, 2, 6), [s(0.0, 6000.0, "job 0")]);
    let job_args = |tid: u64, name: &str| {
        events_of(&json)
            .iter()
            .find(|e| e["ph"] == "X" && e["tid"] == tid && e["name"] == name)
            .unwrap()["args"]
            .clone()
    };
    assert_eq!(job_args(6, "job 0")["missed"], true);
    assert_eq!(job_args(6, "job 0")["deadline_us"].as_f64(), Some(5000.0));
    assert_eq!(job_args(4, "job 0")["missed"], false);
    assert_eq!(job_args(4, "job 0")["deadline_us"].as_f64(), Some(4000.5));
    assert_eq!(job_args(4, "job 1")["unfinished"], true);

    // Instant events, thread-scoped, on the task tracks.
    let instants: Vec<(String, u64, f64)> = events_of(&json)
        .iter()
        .filter(|e| e["ph"] == "i")
        .map(|e| {
            assert_eq!(e["s"], "t");
            assert_eq!(e["pid"], 2);
            (
                e["name"].as_str().unwrap().into(),
                e["tid"].as_u64().unwrap(),
                e["ts"].as_f64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        instants,
        [
            ("migrate".to_string(), 6, 1200.0),
            ("deadline miss".to_string(), 6, 5000.0),
            ("throttle".to_string(), 4, 7500.0),
            ("replenish".to_string(), 4, 8000.0),
        ]
    );
    let migrate = events_of(&json).iter().find(|e| e["name"] == "migrate").unwrap();
    assert_eq!(
        (migrate["args"]["from"].as_u64(), migrate["args"]["to"].as_u64()),
        (Some(0), Some(1))
    );
    let throttle = events_of(&json).iter().find(|e| e["name"] == "throttle").unwrap();
    assert_eq!(throttle["args"]["until_us"].as_f64(), Some(8000.0));
}

#[test]
fn chrome_trace_through_fanout_with_the_other_observers() {
    let names: Vec<String> = vec!["hi".into(), "lo".into()];
    let mut trace = ChromeTrace::new(Vec::new(), names.clone(), 2);
    let mut csv = JobCsv::new(Vec::new(), names.clone());
    let mut summary = Summary::new(2);
    {
        let mut fan = Fanout(vec![&mut trace, &mut csv, &mut summary]);
        assert!(fan.wants_events());
        trace_scenario(&mut fan);
    }
    let json: Value = serde_json::from_slice(&trace.finish(9 * MS).unwrap()).unwrap();
    assert_eq!(events_of(&json).iter().filter(|e| e["ph"] == "X").count(), 8);
    let rows = String::from_utf8(csv.finish().unwrap()).unwrap();
    assert_eq!(rows.lines().count(), 3);
    assert_eq!(summary.report(&names, &[], 9 * MS, 2).misses, 1);
}

#[test]
fn chrome_trace_escapes_names_and_adds_tracks_on_demand() {
    let mut trace = ChromeTrace::new(Vec::new(), vec!["a \"quoted\"\\name".into()], 1);
    trace.event(&TraceEvent::Switch {
        t: 0,
        cpu: 3,
        prev: None,
        next: Some(0),
        prev_state: PrevState::Runnable,
    });
    trace.event(&TraceEvent::Switch {
        t: 1_001,
        cpu: 3,
        prev: Some(0),
        next: Some(7),
        prev_state: PrevState::Runnable,
    });
    let json: Value = serde_json::from_slice(&trace.finish(2_000).unwrap()).unwrap();
    assert_eq!(
        slices(&json, 1, 9),
        [
            (0.0, 1.001, "a \"quoted\"\\name".into()),
            (1.001, 0.999, "t7".into())
        ]
    );
    assert_eq!(
        meta_name(&json, "thread_name", 1, Some(9)).as_deref(),
        Some("CPU 3")
    );
    assert_eq!(
        meta_name(&json, "thread_name", 2, Some(18)).as_deref(),
        Some("t7")
    );
}

#[test]
fn chrome_trace_reports_io_error_from_finish() {
    let mut trace = ChromeTrace::new(
        FailAfter {
            budget: 50_000,
            writes_after_failure: 0,
        },
        vec!["a".into()],
        1,
    );
    for k in 0..20_000u64 {
        trace.event(&TraceEvent::Switch {
            t: 2 * k,
            cpu: 0,
            prev: None,
            next: Some(0),
            prev_state: PrevState::Runnable,
        });
        trace.event(&TraceEvent::Switch {
            t: 2 * k + 1,
            cpu: 0,
            prev: Some(0),
            next: None,
            prev_state: PrevState::Runnable,
        });
    }
    assert!(trace.error().is_some());
    assert_eq!(trace.finish(40_000).unwrap_err().to_string(), "disk full");

    // Failing only when the end is written.
    let trace = ChromeTrace::new(
        FailAfter {
            budget: 0,
            writes_after_failure: 0,
        },
        vec![],
        1,
    );
    assert!(trace.finish(0).is_err());
}
