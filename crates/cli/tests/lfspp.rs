//! The LFS++ §7.2 experiment (lfspp-legacy-multimedia.txt, Table I, Fig. 6) on this machine:
//! three periodic programs (3505 µs, 8220 µs, 100 ms; about 80 % of one CPU) and a CPU hog on one
//! CPU, under the default scheduler and under `pacer exec`. The response-time distribution of the
//! 3.5 ms program and its deadline-miss ratio are printed for both; pacer's miss ratio must be at
//! least `RATIO` times lower (the paper: 43 % → 5 %).
//!
//! Protocol (also `examples/lfspp-7.2/run.sh`, results in docs/experiments/lfspp-7.2.md):
//! - everything runs in a one-CPU exclusive partition (`pacer cpuset --cpus 1`), the paper's
//!   uniprocessor;
//! - the programs start together; the hog starts 4 s later, as the IDE does in §7.1: LFS++ needs
//!   wake-ups to find a period, and a thread that a hog keeps late wakes up irregularly; miss
//!   ratios are counted over jobs released after the hog started (whole-run figures printed too);
//! - both runs use one busy-loop calibration, so they execute the same work;
//! - timing on a VM is noisy: if pacer's run misses the mark it is repeated once, and both
//!   results are printed (a second failure fails the test).
//!
//! Needs root, SCHED_DEADLINE, tracefs, cpusets and CPUs 0 and 1 (`pacer_testkit`: ignored in
//! builds without root or `PACER_REQUIRE_ROOT=1`, failing when a need is missing otherwise).

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use pacer_testkit::{require, Need};
use pacer_workload::jobs::compare::quantile;
use pacer_workload::jobs::csv::read_jobs;

const RUN_S: u64 = 16;
const HOG_DELAY_S: u64 = 4;

fn pacer() -> &'static str {
    env!("CARGO_BIN_EXE_pacer")
}

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/lfspp-7.2")
}

/// The experiments each make the one cpuset partitioning a hierarchy allows: one at a time.
static EXPERIMENT: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    EXPERIMENT.lock().unwrap_or_else(|e| e.into_inner())
}

/// What the experiment needs: `pacer exec` (SCHED_DEADLINE, tracefs) inside `pacer cpuset --cpus
/// 1`, with CPU 0 left for the rest of the machine.
fn require_experiment() {
    require(Need::Root);
    require(Need::SchedDeadline);
    require(Need::Tracefs);
    require(Need::CgroupCpuset);
    require(Need::Cpus(&[0, 1]));
}

/// Runs the trio in a one-CPU partition with the hog arriving after HOG_DELAY_S; `under_pacer`
/// wraps the trio in `pacer exec`. Returns the jobs CSV.
fn run(dir: &Path, cal: &str, under_pacer: bool) -> PathBuf {
    let jobs = dir.join(if under_pacer { "pacer.csv" } else { "default.csv" });
    let ex = examples();
    let trio = format!(
        "{p} run --calibration {cal} --duration {RUN_S}s --jobs {jobs} {trio} > /dev/null",
        p = pacer(),
        jobs = jobs.display(),
        trio = ex.join("trio.json").display()
    );
    let trio = if under_pacer {
        format!(
            "{p} exec --status-every 1s --thread p3505-0 --thread p8220-1 --thread p100ms-2 -- {trio}",
            p = pacer()
        )
    } else {
        trio
    };
    let script = format!(
        "(sleep {HOG_DELAY_S}; exec {p} run --calibration {cal} --duration {d}s {hog} > /dev/null) & {trio}; status=$?; kill $! 2>/dev/null; wait; exit $status",
        p = pacer(),
        d = RUN_S - HOG_DELAY_S + 1,
        hog = ex.join("hog.json").display(),
    );
    let out = common::output_within(
        Command::new(pacer()).args(["cpuset", "--cpus", "1", "--", "sh", "-c", &script]),
        Duration::from_secs(4 * RUN_S),
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "experiment run failed: {err}");
    if under_pacer {
        // pacer's status once a second: detected periods, budgets, saturation.
        eprintln!("{err}");
    }
    jobs
}

struct Stats {
    jobs: usize,
    miss_ratio: f64,
    all_miss_ratio: f64,
    quantiles: Vec<(f64, u64)>,
}

fn stats(csv: &Path) -> Stats {
    let rows = read_jobs(csv).unwrap();
    let all: Vec<_> = rows.iter().filter(|r| r.task == "p3505").collect();
    let loaded: Vec<_> = all
        .iter()
        .filter(|r| r.release_ns >= HOG_DELAY_S * 1_000_000_000)
        .collect();
    assert!(
        loaded.len() > 1000,
        "{}: only {} jobs of p3505 under load",
        csv.display(),
        loaded.len()
    );
    let mut rt: Vec<u64> = loaded.iter().map(|r| r.response_ns).collect();
    rt.sort_unstable();
    let q = |p: f64| quantile(&rt, p);
    let ratio = |v: &[&&pacer_workload::jobs::csv::JobRow]| {
        v.iter().filter(|r| r.missed).count() as f64 / v.len() as f64
    };
    let all_refs: Vec<&&pacer_workload::jobs::csv::JobRow> = all.iter().collect();
    Stats {
        jobs: loaded.len(),
        miss_ratio: ratio(&loaded),
        all_miss_ratio: ratio(&all_refs),
        quantiles: [0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 0.999, 1.0]
            .iter()
            .map(|&p| (p, q(p)))
            .collect(),
    }
}

/// How many times fewer misses pacer must have than the default scheduler. It was lowered to 2
/// on 2026-11-25, when the 3.5 ms thread's period was often found as 99–100 ms on this VM
/// (2.6–7.5× over 8 runs). The starvation probe fixed that: the trio's threads wait 29–43 % of
/// their first window and are probed, then reserved at their exact periods; a debug build gave
/// 0.03–0.18 % against 39–43 % in 3 runs (docs/experiments/lfspp-7.2.md, "2026-11-26").
const RATIO: f64 = 5.0;

#[test]
#[cfg_attr(
    not(pacer_privileged),
    ignore = "needs root: run as root or set PACER_REQUIRE_ROOT=1"
)]
fn lfspp_7_2_pacer_at_least_halves_deadline_misses() {
    let test = "lfspp_7_2_pacer_at_least_halves_deadline_misses";
    let _one = one_at_a_time();
    require_experiment();
    let dir = tempfile::tempdir().unwrap();
    let cal = common::calibration();
    let default = stats(&run(dir.path(), &cal, false));
    let mut pacer = stats(&run(dir.path(), &cal, true));
    // Timing on a shared VM is noisy: another process's burst during detection, or the 3.5 ms
    // thread's relative-timer grid restarting whenever the 100 ms program delays it, can make
    // pacer adopt a wrong period (seen: 99–100 ms at confidence 0.51–0.54 for p3505, which then
    // keeps a ~30 % reservation). Up to two more tries, each reported; the assertion is on the
    // last.
    for attempt in 2..=3 {
        if pacer.miss_ratio * RATIO <= default.miss_ratio {
            break;
        }
        eprintln!(
            "{test}: pacer run {} missed {:.2} % (default {:.2} %); running it again",
            attempt - 1,
            pacer.miss_ratio * 100.0,
            default.miss_ratio * 100.0
        );
        pacer = stats(&run(dir.path(), &cal, true));
    }
    eprintln!("{test}: busy loop {cal} ns/loop; p3505 response time after the hog started (µs):");
    eprintln!("{:>8} {:>12} {:>12}", "CDF", "default", "pacer exec");
    for ((p, a), (_, b)) in default.quantiles.iter().zip(&pacer.quantiles) {
        eprintln!(
            "{:>7.1}% {:>12.1} {:>12.1}",
            p * 100.0,
            *a as f64 / 1e3,
            *b as f64 / 1e3
        );
    }
    eprintln!(
        "{test}: deadline misses (3505 µs): default {:.2} % of {} jobs, pacer {:.2} % of {} jobs; whole run incl. detection: {:.2} % vs {:.2} %",
        default.miss_ratio * 100.0,
        default.jobs,
        pacer.miss_ratio * 100.0,
        pacer.jobs,
        default.all_miss_ratio * 100.0,
        pacer.all_miss_ratio * 100.0
    );
    assert!(
        default.miss_ratio > 0.05,
        "the hog should hurt the default scheduler"
    );
    assert!(
        pacer.miss_ratio * RATIO <= default.miss_ratio,
        "pacer's miss ratio {:.4} is not {RATIO}× below the default's {:.4}",
        pacer.miss_ratio,
        default.miss_ratio
    );
}

/// The first period `pacer exec --json` reserved a thread at: (period ns, source, elapsed ns),
/// with the detection notes seen on the way.
fn first_adopted(stdout: &str) -> (Option<(u64, serde_json::Value, u64)>, Vec<String>) {
    let mut found = None;
    let mut notes = Vec::new();
    for line in stdout.lines().filter(|l| l.starts_with('{')) {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
            continue; // the summary of a controlled `pacer run` shares the stream
        };
        let Some(threads) = v["status"]["threads"].as_array() else {
            continue;
        };
        for t in threads {
            let c = &t["control"];
            if let Some(n) = c["detection_note"].as_str() {
                if notes.last().is_none_or(|l| l != n) {
                    notes.push(n.to_string());
                }
            }
            if found.is_none() && c["phase"] == "controlled" {
                if let Some(p) = c["period_ns"].as_u64() {
                    found = Some((
                        p,
                        c["detection_source"].clone(),
                        v["status"]["elapsed_ns"].as_u64().unwrap_or(0),
                    ));
                }
            }
        }
    }
    (found, notes)
}

/// Runs `program` (whose thread is named `thread`) under `pacer exec` for `control_s` seconds
/// beside the 85 % SCHED_FIFO load of `examples/lfspp-7.4/load.json`, and a SCHED_OTHER CPU hog
/// if `hog`, all in a one-CPU partition; pacer's `--json` output.
fn under_fifo_load(program: &str, thread: &str, control_s: u64, extra: &str, hog: bool) -> String {
    let ex = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/lfspp-7.4");
    let cal = common::calibration();
    // The hog ends with the shell's last job: killed once pacer exec is done.
    let (hog_start, hog_stop) = match hog {
        true => ("(while :; do :; done) & hog=$!; ", "kill $hog; "),
        false => ("", ""),
    };
    let script = format!(
        "{hog_start}{p} run --calibration {cal} {load} > /dev/null & sleep 0.5; \
         {p} exec --json --status-every 250ms --duration {control_s}s {extra} --thread {thread} -- \
         {program}; status=$?; {hog_stop}wait; exit $status",
        p = pacer(),
        load = ex.join("load.json").display(),
    );
    let out = common::output_within(
        Command::new(pacer()).args(["cpuset", "--cpus", "1", "--", "sh", "-c", &script]),
        Duration::from_secs(60),
    );
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "experiment failed: {}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// The LFS++ §7.4 load experiment on this kernel, at the load where wake-ups no longer tell the
/// period: a player in the cyclic-loop idiom (`examples/lfspp-7.4/cyclic.c`: 3.5 ms of work and
/// two relative "I/O" sleeps per job, then clock_nanosleep to an absolute 10 ms grid) beside 85 %
/// of SCHED_FIFO load (`load.json`) in a one-CPU partition is late at every expiry. `pacer exec`
/// must still find its period exactly, from the expiries its timer is set to (docs/linux.md,
/// "Timers the thread sets"). The program is selected by name with `--thread`, a name it only
/// gets once the forked child has exec'd. The analysis needs a 1 s window; the 6 s also cover
/// pacer's own start, which runs as SCHED_OTHER in the 15 % the load leaves (the first control
/// step took 1.9 s in a debug build before the /proc/kallsyms scan was made cheap).
#[test]
#[cfg_attr(
    not(pacer_privileged),
    ignore = "needs root: run as root or set PACER_REQUIRE_ROOT=1"
)]
fn exec_finds_the_period_of_a_late_program_under_85_percent_fifo_load() {
    let _one = one_at_a_time();
    require_experiment();
    require(Need::Program("cc"));
    let dir = tempfile::tempdir().unwrap();
    let ex = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/lfspp-7.4");
    let cyclic = dir.path().join("cyclic");
    let cc = Command::new("cc")
        .arg("-O2")
        .arg("-o")
        .arg(&cyclic)
        .arg(ex.join("cyclic.c"))
        .output()
        .unwrap();
    assert!(cc.status.success(), "cc: {}", String::from_utf8_lossy(&cc.stderr));
    let stdout = under_fifo_load(
        &format!("{} 10000000 8 3500000", cyclic.display()),
        "cyclic",
        6,
        "",
        false,
    );
    let (found, notes) = first_adopted(&stdout);
    eprintln!("cyclic player under 85 % FIFO load: first period adopted {found:?}; notes {notes:?}");
    let (p, source, _) = found.unwrap_or_else(|| panic!("no period adopted in 6 s:\n{stdout}"));
    assert!(
        (p as f64 - 10e6).abs() <= 10e3,
        "period {p} ns is more than 0.1 % off 10 ms"
    );
    assert_eq!(source, "timer_expiry");
}

/// The same player in rt-app's shape (`examples/lfspp-7.4/player.json` under `pacer run`), which
/// skips its sleep when the expiry is past: under 85 % FIFO load it is late at most activations
/// and its trace holds no period. `pacer exec` must see that it is starved (its run delay),
/// probe it, and reserve it at its exact period once it runs on time. A SCHED_OTHER CPU hog
/// shares the load's gaps with it: starved that deeply (about 90 % of its window), its
/// wake-ups show only the load's rhythm, and pacer's own loop must not starve with it
/// (`--rt-priority`, docs/exec.md). A VM's timing can ruin one run; a second is allowed and
/// both are reported.
#[test]
#[cfg_attr(
    not(pacer_privileged),
    ignore = "needs root: run as root or set PACER_REQUIRE_ROOT=1"
)]
fn exec_probes_a_starved_rtapp_player_and_finds_its_period() {
    let _one = one_at_a_time();
    require_experiment();
    let dir = tempfile::tempdir().unwrap();
    let ex = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/lfspp-7.4");
    let player = std::fs::read_to_string(ex.join("player.json"))
        .unwrap()
        .replace("PERIOD_US", "10000");
    let file = dir.path().join("player.json");
    std::fs::write(&file, player).unwrap();
    let program = format!(
        "{} run --calibration {} {}",
        pacer(),
        common::calibration(),
        file.display()
    );
    let mut tries = Vec::new();
    for _ in 0..2 {
        let stdout = under_fifo_load(&program, "player-0", 7, "", true);
        let (found, notes) = first_adopted(&stdout);
        let probed = stdout.contains("\"phase\":\"probing\"");
        eprintln!(
            "rt-app player under 85 % FIFO load: probed {probed}, first period {found:?}; notes {notes:?}"
        );
        let exact = found
            .as_ref()
            .is_some_and(|(p, _, _)| (*p as f64 - 10e6).abs() <= 10e3);
        tries.push((probed, found));
        if exact && probed {
            return;
        }
    }
    panic!("the starved rt-app player was not probed and reserved at 10 ms in two runs: {tries:?}");
}
