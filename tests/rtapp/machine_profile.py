#!/usr/bin/env python3
"""Measures the machine figures `pacer sim` needs to make the passes rt-app makes on this machine,
with rt-app itself, and prints them as `pacer sim` options (docs/rtapp.md, "The machine profile").

Usage: tests/rtapp/machine_profile.py [--rtapp PATH] [--duration S] [--repeat N] [--write JSON]
Needs root (SCHED_FIFO probes). Every probe waits for a quiet machine and is run again if other
processes loaded it meanwhile (compare.py's --quiet); it is repeated --repeat times and the median
of the per-run figures is kept.

What it measures, each with a small rt-app file given one calibration (below); the first two with
SCHED_FIFO threads, so that neither timer slack nor the fair class is in their figures:

- rt-app's calibration: rt-app times its loop at every start and keeps whole ns per loop (pLoad),
  which differs by one (7-8 %) from one start to the next here. The median pLoad of several starts
  is recorded and given to every probe and, by compare.py, to rt-app and `pacer run`, so that a
  `run` does the same work in every run: `rtapp_ns_per_loop`.
- work scale: with P ns per loop, rt-app's `run` of d µs spins d · 1000 / P loops of a loop that
  takes a little more or less than P here, so it lasts F · d. F is the median over
  passes of the log's `run` column (measured µs) over `c_duration` (asked µs): `--work-scale F`.
- timer wake-up onto an idle CPU, and onto a busy one: a periodic thread's `wu_lat` column (µs
  from its timer's expiry until it runs again), alone (its CPU idles while it sleeps) and pinned
  beside a SCHED_OTHER hog that it preempts;
- newidle balancing: Linux 6.18 lets a CPU that goes idle pull a waiting fair thread only by
  NI_RANDOM's dice, with probability (1 + ratio) / 1024, where ratio follows the share of recent
  tries that pulled: the machine's history, not the workload's. Three SCHED_OTHER threads
  (6 ms of `run`, 6 ms of `sleep`: 1.5 CPUs of load) run under a scheduler trace (tracefs:
  sched_switch, sched_wakeup, sched_migrate_task); a chance is a thread blocking on a CPU left
  with nothing of the probe while another CPU has two of its threads, a pull is a migration to
  that CPU made just before in that thread's context: `--newidle-ratio` = 1024 · pulls / chances.
  Needs tracefs (mounted at /sys/kernel/tracing).

The simulator's model has two latencies: every wake-up takes `--wakeup-latency` (the busy-CPU
figure), and a CPU that was idle takes `--idle-exit-latency` more to run what it is given (idle
minus busy). A wake-up by another thread (futex, IPI) is taken to cost what a timer's does:
crates/sim/tools/wakelat.c measures both outside rt-app, and they agreed within a few µs here
(docs/rtapp.md). rt-app's logs cannot time it: the waker logs its pass only after unlocking the
mutex the woken thread is about to take.
"""
import argparse
import datetime
import glob
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare import Quiet, write_json  # noqa: E402

HOG = {"policy": "SCHED_OTHER", "cpus": [1], "loop": -1, "run": 100000}


def probes():
    fifo = {"policy": "SCHED_FIFO", "priority": 50}
    return {
        "work": {"w": dict(fifo, loop=-1, run=20000, timer={"ref": "tw", "period": 25000})},
        "timer_idle": {"t": dict(fifo, cpus=[1], loop=-1, run=200, timer={"ref": "tt", "period": 5000})},
        "balance": {
            "nib%d" % k: {"policy": "SCHED_OTHER", "loop": -1, "run": 6000, "sleep": 6000} for k in range(3)
        },
        "timer_busy": {
            "t": dict(fifo, cpus=[1], loop=-1, run=200, timer={"ref": "tt", "period": 5000}),
            "hog": HOG,
        },
    }


def rtapp_pload(rtapp):
    """The ns per loop rt-app's own calibration finds at one start (its `pLoad = Nns` notice)."""
    d = tempfile.mkdtemp(prefix="profile-")
    f = os.path.join(d, "c.json")
    doc = {"global": {"duration": 1, "calibration": "CPU0", "logdir": d, "ftrace": "none"},
           "tasks": {"c": {"loop": 1, "run": 1000}}}
    with open(f, "w") as fh:
        json.dump(doc, fh)
    r = subprocess.run([rtapp, f], cwd=d, capture_output=True, text=True, timeout=60)
    m = re.search(r"pLoad = (\d+)ns", r.stdout + r.stderr)
    if r.returncode != 0 or not m:
        sys.exit("rt-app printed no calibration (pLoad): %s" % r.stderr.strip().splitlines()[-1:])
    return int(m.group(1))


def run_rtapp(rtapp, tasks, duration, calibration, pacer_loop_ns=None):
    """Runs one probe under rt-app, or under `pacer run` (the `pacer` binary given as `rtapp`)
    with pacer's own busy loop at `pacer_loop_ns` ns per loop when that is given; returns
    {task: [rows]}, each row the log's numeric columns by name."""
    d = tempfile.mkdtemp(prefix="profile-")
    f = os.path.join(d, "p.json")
    doc = {
        "global": {"duration": duration, "calibration": calibration, "logdir": d, "log_basename": "p",
                   "default_policy": "SCHED_OTHER", "lock_pages": True, "ftrace": "none"},
        "tasks": tasks,
    }
    with open(f, "w") as fh:
        json.dump(doc, fh)
    cmd = [rtapp, f]
    if pacer_loop_ns is not None:
        cmd = [rtapp, "run", f, "--calibration", str(pacer_loop_ns)]
    r = subprocess.run(cmd, cwd=d, capture_output=True, text=True, timeout=duration + 60)
    if r.returncode != 0:
        sys.exit("%s failed on a probe: %s" % (cmd[0], r.stderr.strip().splitlines()[-1:]))
    out = {}
    for log in glob.glob(os.path.join(d, "p-*.log")):
        task = os.path.basename(log)[2:].rsplit("-", 1)[0]
        rows, cols = [], None
        with open(log) as fh:
            for line in fh:
                if line.startswith("#"):
                    cols = line[1:].split()
                    continue
                if len(line.split()) == len(cols or ()):
                    rows.append(dict(zip(cols, map(int, line.split()))))
        out[task] = rows[1:]  # the first pass starts the timers and the calibration's aftermath
    return out


TRACEFS = "/sys/kernel/tracing"
EVENTS = ("sched/sched_switch", "sched/sched_wakeup", "sched/sched_migrate_task")


def traced(fn):
    """Runs fn() with the scheduler events of EVENTS traced in a tracefs instance of our own;
    returns (fn's result, the trace text)."""
    inst = os.path.join(TRACEFS, "instances", "pacer-profile-%d" % os.getpid())
    os.mkdir(inst)
    try:
        def put(path, value):
            with open(os.path.join(inst, path), "w") as fh:
                fh.write(value)
        put("trace_clock", "mono")
        put("buffer_size_kb", "8192")
        for e in EVENTS:
            put("events/%s/enable" % e, "1")
        put("tracing_on", "1")
        try:
            result = fn()
        finally:
            put("tracing_on", "0")
        with open(os.path.join(inst, "trace")) as fh:
            text = fh.read()
        for e in EVENTS:
            put("events/%s/enable" % e, "0")
    finally:
        os.rmdir(inst)
    return result, text


def newidle_share(text, prefix="nib"):
    """Share of newidle chances that pulled, from a trace of the balance probe."""
    line = re.compile(r"^\s*(.+?)-(\d+)\s+\[(\d+)\]\s(\S{5})\s+([\d.]+): (\w+): (.*)$")
    ours = lambda comm: comm.startswith(prefix)
    rq = {}
    pulled_at = {}
    chances = pulls = 0
    for l in text.splitlines():
        m = line.match(l)
        if not m:
            continue
        comm, _pid, cpu, flags, ts, name, rest = m.groups()
        cpu, t = int(cpu), float(ts)
        f = dict(re.findall(r"(\w+)=(\S+)", rest))
        if name == "sched_wakeup" and ours(f["comm"]):
            rq.setdefault(int(f["target_cpu"]), set()).add(int(f["pid"]))
        elif name == "sched_migrate_task" and ours(f["comm"]):
            p = int(f["pid"])
            runnable = any(p in s for s in rq.values())
            for s in rq.values():
                s.discard(p)
            if runnable:
                rq.setdefault(int(f["dest_cpu"]), set()).add(p)
            # A pull by the CPU going idle: process context (neither hardirq nor softirq).
            if flags[2] == "." and ours(comm) and int(f["dest_cpu"]) == cpu:
                pulled_at[cpu] = t
        elif name == "sched_switch" and ours(f["prev_comm"]) and not f["prev_state"].startswith("R"):
            mine = rq.setdefault(cpu, set())
            mine.discard(int(f["prev_pid"]))
            if cpu in pulled_at and t - pulled_at.pop(cpu) < 1e-4:
                chances += 1
                pulls += 1
            elif not mine and any(len(s) >= 2 for c, s in rq.items() if c != cpu):
                chances += 1
    return pulls / chances if chances else 0.0


def work_scale(logs):
    return statistics.median(r["run"] / r["c_duration"] for r in logs["w"] if r["c_duration"])


def timer_latency(logs):
    return statistics.median(r["wu_lat"] for r in logs["t"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rtapp", default="rt-app")
    ap.add_argument("--duration", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--write", metavar="JSON", help="also record the figures and the options here")
    a = ap.parse_args()
    p = probes()
    quiet = Quiet()
    ploads = [quiet.run(lambda: rtapp_pload(a.rtapp)) for _ in range(max(5, a.repeat))]
    calib = int(statistics.median_low(ploads))
    print(json.dumps({"rtapp_ns_per_loop": ploads}), file=sys.stderr, flush=True)
    runs = {k: [] for k in ("work_scale", "timer_idle_us", "timer_busy_us", "newidle_share")}
    for _ in range(a.repeat):
        probe = lambda name, d=a.duration: quiet.run(lambda: run_rtapp(a.rtapp, p[name], d, calib))
        runs["work_scale"].append(work_scale(probe("work")))
        runs["timer_idle_us"].append(timer_latency(probe("timer_idle")))
        runs["timer_busy_us"].append(timer_latency(probe("timer_busy")))
        # Chances come a few dozen a second: four times as long.
        _, trace = quiet.run(lambda: traced(lambda: run_rtapp(a.rtapp, p["balance"], 4 * a.duration, calib)))
        runs["newidle_share"].append(newidle_share(trace))
        print(json.dumps({k: v[-1] for k, v in runs.items()}), file=sys.stderr, flush=True)
    m = {k: statistics.median(v) for k, v in runs.items()}
    m["rtapp_ns_per_loop"] = calib
    runs["rtapp_ns_per_loop"] = ploads
    wake = m["timer_busy_us"]
    idle = max(0.0, m["timer_idle_us"] - m["timer_busy_us"])
    args = ["--work-scale", "%.3f" % m["work_scale"], "--wakeup-latency", "%dus" % round(wake),
            "--idle-exit-latency", "%dus" % round(idle), "--newidle-ratio", str(round(1024 * m["newidle_share"]))]
    print(" ".join(args))
    if a.write:
        rec = {
            "command": " ".join(sys.argv),
            "date": datetime.date.today().isoformat(),
            "measured": {k: round(v, 4) for k, v in m.items()},
            "runs": runs,
            "sim_args": args,
        }
        write_json(a.write, rec)


if __name__ == "__main__":
    main()
