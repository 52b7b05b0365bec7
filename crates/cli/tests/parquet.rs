//! `--jobs FILE.parquet`: the same records as the CSV, read back by `pacer compare`.

use std::process::Command;

use serde_json::Value;

fn pacer(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_pacer"))
        .args(args)
        .output()
        .expect("pacer runs")
}

#[test]
fn sim_writes_parquet_that_compare_reads_as_the_csv() {
    let set = format!("{}/../../examples/textbook.json", env!("CARGO_MANIFEST_DIR"));
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("jobs.csv");
    let pq = dir.path().join("jobs.parquet");
    for out in [&csv, &pq] {
        let o = pacer(&[
            "sim",
            &set,
            "--cpus",
            "1",
            "--policy",
            "g-rm",
            "--duration",
            "2s",
            "--jobs",
            out.to_str().unwrap(),
        ]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    assert_eq!(&std::fs::read(&pq).unwrap()[..4], b"PAR1", "a Parquet file");
    let o = pacer(&["compare", csv.to_str().unwrap(), pq.to_str().unwrap(), "--json"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let tasks = v["tasks"].as_array().unwrap();
    assert_eq!(tasks.len(), 3);
    for t in tasks {
        assert_eq!(t["a"], t["b"], "the same jobs through both formats: {t}");
        assert!(t["a"]["jobs"].as_u64().unwrap() > 0);
    }
    // Not Parquet inside: the error names the file.
    std::fs::write(&pq, "task,job\n").unwrap();
    let o = pacer(&["compare", csv.to_str().unwrap(), pq.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("jobs.parquet"));
}
