#!/usr/bin/env python3
"""Fig. 2 of rm-vs-edf-multicore-linux.txt in simulation: job execution time relative to the
task's WCET, grouped by the number of CPU changes the job saw: its migrations (`migrations`,
resumes on another CPU within the job) plus 1 when it started on another CPU than the one the
task's previous job finished on. The start CPU is known only for a job that never migrated
(it is the `cpu` it finished on), so for the others the count is a lower bound.

Usage: fig2_table.py F SET.json JOBS.csv [JOBS.csv ...]   (one column per jobs file)

The set's jobs run F times their WCET (`pacer sim --exec normal:F,0`; F = 1 without --exec), so
exec − F·C is what the cache model charged the job. Prints a Markdown table: per count of CPU
changes, the number of jobs, the mean exec/C and the mean time charged per job, µs.
"""
import csv
import json
import re
import statistics
import sys

UNITS = {"ns": 1, "us": 1e3, "µs": 1e3, "ms": 1e6, "s": 1e9}


def ns(v):
    if isinstance(v, (int, float)):
        return float(v)
    m = re.fullmatch(r"([0-9.]+)\s*(ns|us|µs|ms|s)", v.strip())
    if not m:
        sys.exit(f"{v!r}: not a duration")
    return float(m.group(1)) * UNITS[m.group(2)]


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    frac = float(sys.argv[1])
    tasks = json.load(open(sys.argv[2]))["tasks"]
    wcet = {t.get("name", f"t{i}"): ns(t["wcet"]) for i, t in enumerate(tasks)}
    cols = []
    for path in sys.argv[3:]:
        by = {}
        rows = sorted(csv.DictReader(open(path)), key=lambda r: (r["task"], int(r["job"])))
        prev = {}
        for row in rows:
            task, mig, cpu = row["task"], int(row["migrations"]), row["cpu"]
            moves = mig + (1 if mig == 0 and prev.get(task, cpu) != cpu else 0)
            prev[task] = cpu
            by.setdefault(min(moves, 5), []).append((int(row["exec_ns"]), wcet[task]))
        cols.append(by)
    keys = sorted(set().union(*cols))
    head = "| CPU changes of the job | " + " | ".join(
        f"{p}: jobs | exec/C | charged µs" for p in sys.argv[3:]) + " |"
    print(head)
    print("|---|" + "---|---|---|" * len(cols))
    for k in keys:
        cells = []
        for by in cols:
            v = by.get(k, [])
            if not v:
                cells.append("0 | – | –")
                continue
            ratio = statistics.mean(e / c for e, c in v)
            extra = statistics.mean(e - frac * c for e, c in v) / 1000
            cells.append(f"{len(v)} | {ratio:.4f} | {extra:.1f}")
        print(f"| {k if k < 5 else '5 or more'} | " + " | ".join(cells) + " |")


main()
