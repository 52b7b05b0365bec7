#!/usr/bin/env python3
"""Runs rt-app files under rt-app, `pacer run` and `pacer sim` for the same duration and compares
the number of passes each thread makes (rt-app: rows of its per-thread log; pacer: jobs per
thread, which for these files are passes).

Usage: tests/rtapp/compare.py [--duration S] [--repeat N] [--machine JSON] [--pacer PATH]
                               [--rtapp PATH] [--skip-run] [--write-expected JSON] FILE.json...
Prints a Markdown table (file, thread, rt-app, pacer run, pacer sim, differences) on stdout.
Needs root for the real-time policies of the files; rt-app must be on PATH (Debian: rt-app).

Real runs are noisy: with --repeat N, rt-app and `pacer run` run N times each, alternately, and
the table shows each thread's median, and rt-app's smallest and largest count when they differ. With --quiet, a real run starts only once the other
processes of the machine have used less than 0.1 CPU for 3 s, and is run again (up to 10 times)
if they used more while it ran (a build on a shared machine), from /proc/stat's busy time less
what this script and its children used. `pacer sim` is deterministic and runs once, with the
options of the machine profile given by --machine (tests/rtapp/machine_profile.py writes it), the
same for every file; with --rescale, the work scale is measured again beside each file's rt-app
runs (the VM's speed drifts by a few per cent over minutes) and shown after the file's name.

rt-app calibrates its `run` loop afresh at every start and keeps whole nanoseconds per loop: on this
VM it finds 12, 13 or 14 ns (`pLoad`) from one start to the next, so the same file's `run` events
last up to 16 % longer in one run than in another, which no simulator can follow. With --machine,
rt-app and `pacer run` (which then runs rt-app's loop, docs/linux.md) are given the profile's
calibration (`global.calibration`, the median pLoad the profile found), and the simulator its
work scale measured with that calibration: every executor then does the same work for a `run`.
"""
import argparse
import csv
import json
import glob
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time


def machine_busy_s():
    """CPU time the whole machine spent busy so far (s): /proc/stat's first line, all but idle
    and iowait."""
    with open("/proc/stat") as fh:
        fields = [int(x) for x in fh.readline().split()[1:9]]
    return (sum(fields) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")


def own_s():
    """CPU time of this script and of its finished children (s)."""
    s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime


class Quiet:
    """Keeps real runs away from other load: waits for a quiet machine, reruns disturbed runs."""

    def __init__(self, limit_cpus=0.1, tries=10, window_s=3.0):
        self.limit, self.tries, self.window = limit_cpus, tries, window_s

    def foreign(self, fn):
        """(fn's result, CPUs the other processes used on average while it ran)."""
        b0, o0, t0 = machine_busy_s(), own_s(), time.monotonic()
        result = fn()
        b1, o1, t1 = machine_busy_s(), own_s(), time.monotonic()
        return result, max(0.0, (b1 - b0) - (o1 - o0)) / max(t1 - t0, 1e-3)

    def wait(self):
        while self.foreign(lambda: time.sleep(self.window))[1] > self.limit:
            pass

    def run(self, fn):
        for attempt in range(self.tries):
            self.wait()
            result, load = self.foreign(fn)
            if load <= self.limit:
                return result
            print("other processes used %.2f CPUs during a run: running it again" % load,
                  file=sys.stderr, flush=True)
        return result


# ns per loop `pacer run` is told its own loop takes in the --rescale probe: any value does, as
# the probe measures how long a `run` then really lasts.
PACER_PROBE_NS = 10.0


def with_settings(text, duration, logdir, calibration=None):
    """The file's text with global.duration and global.logdir replaced (or added), and
    global.calibration when one is given (ns per loop of rt-app's loop)."""
    def setkey(t, key, value):
        pat = re.compile(r'("%s"\s*:\s*)("[^"]*"|-?\d+)' % key)
        if pat.search(t):
            return pat.sub(lambda m: m.group(1) + value, t, count=1)
        g = re.search(r'"global"\s*:\s*\{', t)
        if g:
            return t[: g.end()] + '"%s": %s, ' % (key, value) + t[g.end():]
        first = t.index("{") + 1
        return t[:first] + '"global": {"%s": %s}, ' % (key, value) + t[first:]
    text = setkey(text, "duration", str(duration))
    text = setkey(text, "logdir", '"%s"' % logdir)
    if calibration is not None:
        text = setkey(text, "calibration", str(calibration))
    # A base name without a dash, so that the task is what lies between the first and the last
    # dash of `<basename>-<task>-<index>.log`.
    text = setkey(text, "log_basename", '"rtapp"')
    # rt-app's default log_size for these files is the file system; keep logging on.
    return text


def rtapp_passes(rtapp, path, duration, calibration=None):
    """Passes per task that rt-app starts within `duration` s of its threads' common start.

    rt-app's `duration` counts from before it creates its threads, and creating them (with
    `lock_pages`, mlockall) took about 0.23 s here: the first pass of every thread starts at a
    `rel_st` of ~232 ms. pacer counts from its threads' common start. So rt-app runs a second
    longer, and only the passes that start within `duration` of its earliest pass are counted.
    """
    d = tempfile.mkdtemp(prefix="rtapp-")
    f = os.path.join(d, "w.json")
    with open(path) as src, open(f, "w") as dst:
        dst.write(with_settings(src.read(), duration + 1, d, calibration))
    r = subprocess.run([rtapp, f], cwd=d, capture_output=True, text=True, timeout=duration + 60)
    if r.returncode != 0 or "<crit>" in r.stderr or "<error> [json]" in r.stderr:
        bad = [l for l in r.stderr.splitlines() if "<crit>" in l or "<error>" in l]
        return None, (bad or ["rt-app failed"])[0][:160]
    starts = {}
    for log in glob.glob(os.path.join(d, "*.log")):
        # rtapp-<task>-<index>.log, and rtapp-<task>-<index>-<nfork>.log for forked threads.
        m = re.fullmatch(r"rtapp-(.+?)-\d+(-\d{4})?\.log", os.path.basename(log))
        if not m:
            continue
        with open(log) as fh:
            # Columns: idx perf run period start end rel_st …; rel_st in µs.
            # A log cut at its size limit may end in a partial line.
            rel = [int(l.split()[6]) for l in fh if len(l.split()) > 6 and not l.startswith("#")]
        starts.setdefault(m.group(1), []).extend(rel)
    if not starts:
        return None, "rt-app wrote no logs"
    t0 = min(min(v) for v in starts.values() if v)
    end = t0 + duration * 1_000_000
    return {task: sum(1 for x in v if x < end) for task, v in starts.items()}, None


def pacer_passes(pacer, cmd, path, duration, extra=(), calibration=None, loop_ns=None):
    """Passes per task under `pacer run` or `pacer sim`. For `run`, `calibration` (ns per loop)
    makes `run` events rt-app's loop with that calibration; `loop_ns` instead makes them pacer's
    own loop, taken to last `loop_ns` per iteration."""
    d = tempfile.mkdtemp(prefix="pacer-")
    jobs = os.path.join(d, "jobs.csv")
    if cmd == "run" and (calibration is not None or loop_ns is not None):
        f = os.path.join(d, "w.json")
        with open(path) as src, open(f, "w") as dst:
            value = '"CPU0"' if loop_ns is not None else calibration
            dst.write(with_settings(src.read(), duration, os.path.join(d, "logs"), value))
        path = f
    args = [pacer, cmd, path, "--duration", "%ds" % duration, "--jobs", jobs]
    if loop_ns is not None:
        args += ["--calibration", "%.4f" % loop_ns]
    if cmd == "run":
        # The file's own logdir is often "./": keep its logs out of the current directory.
        os.mkdir(os.path.join(d, "logs"))
        args += ["--log-dir", os.path.join(d, "logs")]
    if cmd == "sim":
        args += ["--cpus", str(os.cpu_count())] + list(extra)
    r = subprocess.run(args, capture_output=True, text=True, timeout=duration + 120)
    if r.returncode != 0:
        errors = [l for l in r.stderr.splitlines() if "error" in l] or r.stderr.strip().splitlines()
        return None, (errors or ["failed"])[0][:160]
    counts = {}
    with open(jobs) as fh:
        for row in csv.DictReader(fh):
            # Instances are labelled task-i; rt-app's counts are per task.
            t = row["task"]
            counts[t] = counts.get(t, 0) + 1
    return counts, None


def write_json(path, obj):
    """Writes obj as JSON beside `path`, then renames: an existing record is never cut short."""
    tmp = path + ".tmp"
    with open(tmp, "w") as fh:
        json.dump(obj, fh, indent=2, sort_keys=True)
        fh.write("\n")
    os.replace(tmp, path)


def medians(runs):
    """Per task, the median of its counts over runs (a task missing from a run counts 0)."""
    tasks = sorted({t for r in runs for t in r})
    return {t: int(statistics.median(r.get(t, 0) for r in runs)) for t in tasks}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--duration", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=1, help="real runs per file; medians are reported")
    ap.add_argument("--quiet", action="store_true",
                    help="wait for a quiet machine before each real run, and rerun disturbed ones")
    ap.add_argument("--machine", metavar="JSON",
                    help="machine profile (tests/rtapp/machine_profile.py --write): its `pacer sim` options")
    ap.add_argument("--rescale", action="store_true",
                    help="with --machine: measure the work scale again (machine_profile.py's work probe) "
                         "before each rt-app run, and simulate each file with the median of its file's")
    ap.add_argument("--pacer", default="target/release/pacer")
    ap.add_argument("--skip-run", action="store_true")
    ap.add_argument("--rtapp", default="rt-app", help="the rt-app binary (current sources recommended)")
    ap.add_argument("--write-expected", metavar="JSON",
                    help="also record rt-app's counts for the conformance test (crates/cli/tests/rtapp_conformance.rs)")
    ap.add_argument("files", nargs="+")
    a = ap.parse_args()
    # The probes run in directories of their own.
    a.pacer = os.path.abspath(a.pacer) if os.sep in a.pacer else a.pacer
    a.rtapp = os.path.abspath(a.rtapp) if os.sep in a.rtapp else a.rtapp
    record = {}
    machine = None
    sim_args = []
    calibration = None
    if a.machine:
        with open(a.machine) as fh:
            machine = json.load(fh)
        sim_args = machine["sim_args"]
        calibration = machine["measured"].get("rtapp_ns_per_loop")
    print("| file | thread | rt-app | pacer run | pacer sim | run vs rt-app | sim vs rt-app |")
    print("|---|---|---|---|---|---|---|")
    if a.rescale and not a.machine:
        sys.exit("--rescale needs --machine")
    for path in a.files:
        name = os.path.relpath(path)
        guard = Quiet().run if a.quiet else (lambda fn: fn())
        scales, pacer_scales = [], []

        def rtapp_run():
            if a.rescale:
                # The VM's speed drifts by a few per cent over minutes (the host's load): the
                # work scale the simulator is given is measured beside the runs it is compared to.
                import machine_profile
                work = machine_profile.probes()["work"]
                logs = guard(lambda: machine_profile.run_rtapp(a.rtapp, work, 3, calibration))
                scales.append(machine_profile.work_scale(logs))
                if not a.skip_run:
                    # And how long pacer's own loop takes, run at PACER_PROBE_NS per loop.
                    logs = guard(lambda: machine_profile.run_rtapp(
                        a.pacer, work, 3, "CPU0", PACER_PROBE_NS))
                    pacer_scales.append(machine_profile.work_scale(logs))
            return guard(lambda: rtapp_passes(a.rtapp, path, a.duration, calibration))

        def pacer_run():
            # With --rescale pacer's loop follows the probes measured so far (see below).
            loop_ns = None
            if scales and pacer_scales:
                loop_ns = PACER_PROBE_NS * statistics.median(pacer_scales) / statistics.median(scales)
            return guard(lambda: pacer_passes(
                a.pacer, "run", path, a.duration, calibration=calibration, loop_ns=loop_ns))

        # rt-app and `pacer run` alternate, so a slow stretch of the host falls on both alike
        # (the VM's speed drifts over minutes; run one after the other, N runs of one executor
        # met a different machine than the other's).
        ra_runs, pr_runs, ra_err, pr_err = [], [], None, None
        for _ in range(a.repeat):
            counts, err = rtapp_run()
            if counts is None:
                ra_err = err
                break
            ra_runs.append(counts)
            if a.skip_run:
                pr_err = "skipped"
            elif pr_err is None:
                counts, pr_err = pacer_run()
                if counts is not None:
                    pr_runs.append(counts)
        ra = medians(ra_runs) if ra_err is None else None
        pr = medians(pr_runs) if pr_err is None and pr_runs else None
        file_args = list(sim_args)
        if scales:
            i = file_args.index("--work-scale")
            file_args[i + 1] = "%.3f" % statistics.median(scales)
            name += " (F %s)" % file_args[i + 1]
        # With --rescale `pacer run` does rt-app's measured work with its own loop: rt-app's loop
        # does not take the same time in pacer's process as in rt-app's (5-7 % less here, the
        # same instructions and libm: their addresses differ), pacer's own loop is steady.
        ps, ps_err = pacer_passes(a.pacer, "sim", path, a.duration, file_args)
        if ra is None:
            print("| %s | | rt-app: %s | | | | |" % (name, ra_err))
            continue
        record[os.path.basename(path)] = {"duration_s": a.duration, "rtapp_passes": ra}
        if len(ra_runs) > 1:
            record[os.path.basename(path)]["rtapp_runs"] = ra_runs
        def rel(x, ref):
            return "%+.1f %%" % (100.0 * (x - ref) / ref) if ref else ("0" if x == 0 else "∞")
        for task in sorted(ra):
            def pick(c):
                if c is None:
                    return None
                return sum(v for k, v in c.items() if k == task or re.fullmatch(re.escape(task) + r"(-\d+)+", k))
            r, s = pick(pr), pick(ps)
            # rt-app's own spread over its runs: a difference inside it is noise.
            counts = [run.get(task, 0) for run in ra_runs]
            spread = " (%d–%d)" % (min(counts), max(counts)) if len(counts) > 1 and min(counts) != max(counts) else ""
            print("| %s | %s | %d%s | %s | %s | %s | %s |" % (
                name, task, ra[task], spread,
                r if r is not None else pr_err, s if s is not None else ps_err,
                rel(r, ra[task]) if r is not None else "", rel(s, ra[task]) if s is not None else ""))
        sys.stdout.flush()
    if a.write_expected:
        out = {"command": " ".join(sys.argv), "files": record, "sim_args": sim_args}
        if machine is not None:
            out["machine"] = {k: machine[k] for k in ("command", "date", "measured") if k in machine}
        write_json(a.write_expected, out)


if __name__ == "__main__":
    main()
