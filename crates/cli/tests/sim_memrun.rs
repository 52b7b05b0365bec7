//! `pacer sim --memrun-cost FILE`: the `memrun` costs of another machine, read from the output
//! of crates/sim/tools/memrun.c, replace the defaults.

use std::path::Path;

mod common;
use common::pacer;

/// exec_ns of every job of `pacer sim FILE ARGS --jobs`.
fn execs(file: &Path, args: &[&str]) -> Vec<u64> {
    let dir = tempfile::tempdir().unwrap();
    let jobs = dir.path().join("jobs.csv");
    let out = pacer()
        .arg("sim")
        .arg(file)
        .args(args)
        .args(["--duration", "1s", "--jobs"])
        .arg(&jobs)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = std::fs::read_to_string(&jobs).unwrap();
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = header.iter().position(|h| *h == "exec_ns").unwrap();
    lines
        .map(|l| l.split(',').nth(col).unwrap().parse().unwrap())
        .collect()
}

#[test]
fn memrun_costs_come_from_the_tools_output() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("w.json");
    std::fs::write(
        &file,
        r#"{"tasks":{"t":{"policy":"SCHED_FIFO","loop":3,
             "memrun":{"type":"read","size":4096,"count":1000000},
             "memrun1":{"type":"chase","size":65536,"count":1000},
             "sleep":1000}}}"#,
    )
    .unwrap();
    let costs = dir.path().join("memrun.txt");
    // As the tool prints it: ns per byte by size, then ns per hop by footprint.
    std::fs::write(
        &costs,
        "# bytes  read_ns/byte  write_ns/byte\n4096 2.0 3.0\n\
         # chase, stride 64: footprint_bytes  random_ns/hop  sequential_ns/hop\n65536 100.0 1.0\n",
    )
    .unwrap();
    // 10^6 bytes at 2 ns and 1000 hops at 100 ns.
    assert_eq!(
        execs(&file, &["--memrun-cost", costs.to_str().unwrap()]),
        [2_100_000; 3]
    );
    // The defaults (this machine's figures) are another cost.
    let default = execs(&file, &[]);
    assert_eq!(default.len(), 3);
    assert!(default[0] < 1_000_000, "{default:?}");
    // A file that is not the tool's output is an error naming it and the line.
    std::fs::write(&costs, "# bytes read_ns/byte write_ns/byte\n4096 fast 1\n").unwrap();
    let out = pacer()
        .arg("sim")
        .arg(&file)
        .args(["--memrun-cost", costs.to_str().unwrap()])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("memrun.txt") && err.contains("line 2"),
        "{err}"
    );
}
