//! Real-kernel test of the working-set phase (`pacer_wss`, crates/linux/src/run/wss.rs) in
//! `pacer run`: an rt-app file with the extension runs, each job taking CPU time that grows with
//! its passes. SCHED_OTHER threads only: no privilege needed; wide margins for a loaded VM.

use pacer_linux::run::{self, Collect, RunConfig};
use pacer_model::Duration;
use pacer_workload::parse_rtapp;

fn median(mut v: Vec<u64>) -> u64 {
    v.sort_unstable();
    v[(v.len() - 1) / 2]
}

/// Median CPU time of a job of `passes` random passes over 256 KiB (30 jobs).
fn job_exec(passes: u64) -> u64 {
    let file = format!(
        r#"{{ "tasks": {{ "w": {{ "loop": 30, "pacer_wss": {{ "size": 262144, "order": "random", "seed": 5, "passes": {passes} }}, "sleep": 1000 }} }},
              "global": {{ "duration": 20 }} }}"#
    );
    let w = parse_rtapp(&file, "wss.json").unwrap_or_else(|e| panic!("{e}"));
    let cfg = RunConfig {
        duration: Some(Duration::from_secs(20)),
        lock_memory: false,
        ..RunConfig::default()
    };
    let mut sink = Collect::default();
    run::run(&w, &cfg, &mut sink).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(sink.jobs.len(), 30, "one job per pass of the thread");
    median(sink.jobs.iter().map(|j| j.exec).collect())
}

#[test]
fn a_working_set_phase_runs_and_costs_in_proportion_to_its_passes() {
    let one = job_exec(20);
    let four = job_exec(80);
    // 20 passes over 4096 lines are 81,920 accesses: at least ~20 µs on any machine that can
    // run this; four times the passes cost between 2 and 8 times as much.
    assert!(one > 20_000, "20 passes took {one} ns");
    let ratio = four as f64 / one as f64;
    assert!(
        (2.0..8.0).contains(&ratio),
        "20 passes {one} ns, 80 passes {four} ns"
    );
}
