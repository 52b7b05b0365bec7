"""Throughput of the Python package against the `pacer` command on the same simulation
(docs/BENCHMARKS.md, "Python package"). Prints what it measured: medians of N runs each.

    python3 python/benches/simulate.py [--pacer target/release/pacer] [--runs 5]

Case: the RM-vs-EDF scale of `cargo bench -p pacer-sim --bench sim` case (b) — 48 CPUs, 192 tasks,
U = 0.8·48 (rm-vs-edf recipe, seed 1), G-EDF, 60 s of model time.
"""
import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

import pacer


def timed(f):
    t = time.perf_counter()
    out = f()
    return time.perf_counter() - t, out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pacer", default="target/release/pacer", help="the pacer binary to compare with")
    ap.add_argument("--runs", type=int, default=5)
    a = ap.parse_args()
    ts = pacer.generate(seed=1, recipe="rm-vs-edf", cpus=48, x=4, r=0.8)[0]
    sim = dict(cpus=48, policy="g-edf", duration="60s", seed=1)
    rows = {}

    def record(name, f):
        times = []
        for _ in range(a.runs):
            dt, out = timed(f)
            times.append(dt)
        rows[name] = statistics.median(times)
        return out

    r = record("python: simulate(jobs=False)", lambda: pacer.simulate(ts, jobs=False, **sim))
    jobs = r.summary["jobs"]
    r = record("python: simulate() with the job table", lambda: pacer.simulate(ts, **sim))
    assert r.jobs.num_rows == jobs
    record("python: job table to pandas (ArrowDtype)", lambda: r.jobs_df("pandas"))
    record("python: job table to polars", lambda: r.jobs_df("polars"))
    with ThreadPoolExecutor(2) as pool:
        record(
            "python: 2 simulations on 2 threads (jobs=False)",
            lambda: list(pool.map(lambda _: pacer.simulate(ts, jobs=False, **sim), range(2))),
        )
    if os.path.exists(a.pacer):
        with tempfile.TemporaryDirectory() as d:
            f = os.path.join(d, "set.json")
            with open(f, "w") as fh:
                fh.write(ts.to_json())
            cmd = [a.pacer, "sim", f, "--cpus", "48", "--policy", "g-edf", "--duration", "60s", "--json"]
            out = record("command: pacer sim --json", lambda: subprocess.run(cmd, check=True, capture_output=True).stdout)
            assert json.loads(out)["summary"]["jobs"] == jobs
            csv = os.path.join(d, "jobs.csv")
            record("command: pacer sim --jobs FILE.csv", lambda: subprocess.run(cmd + ["--jobs", csv], check=True, capture_output=True))
            import pandas as pd

            record("pandas.read_csv of that file", lambda: pd.read_csv(csv))
    else:
        print(f"({a.pacer} not found: the command's figures were not measured)")
    print(f"{jobs} jobs per run; medians of {a.runs} runs on {os.cpu_count()} CPUs")
    width = max(map(len, rows))
    for name, t in rows.items():
        print(f"{name:<{width}}  {t * 1000:9.1f} ms")


if __name__ == "__main__":
    main()
