#!/usr/bin/env python3
"""Runs rt-app files under rt-app, `pacer run` and `pacer sim` for the same duration and compares
the number of passes each thread makes (rt-app: rows of its per-thread log; pacer: jobs per
thread, which for these files are passes).

Usage: tests/rtapp/compare.py [--duration S] [--pacer PATH] [--rtapp PATH] [--skip-run] FILE.json...
Prints a Markdown table (file, thread, rt-app, pacer run, pacer sim, differences) on stdout.
Needs root for the real-time policies of the files; rt-app must be on PATH (Debian: rt-app).
"""
import argparse
import csv
import json
import glob
import os
import re
import subprocess
import sys
import tempfile


def with_settings(text, duration, logdir):
    """The file's text with global.duration and global.logdir replaced (or added)."""
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
    # A base name without a dash, so that the task is what lies between the first and the last
    # dash of `<basename>-<task>-<index>.log`.
    text = setkey(text, "log_basename", '"rtapp"')
    # rt-app's default log_size for these files is the file system; keep logging on.
    return text


def rtapp_passes(rtapp, path, duration):
    """Passes per task that rt-app starts within `duration` s of its threads' common start.

    rt-app's `duration` counts from before it creates its threads, and creating them (with
    `lock_pages`, mlockall) took about 0.23 s here: the first pass of every thread starts at a
    `rel_st` of ~232 ms. pacer counts from its threads' common start. So rt-app runs a second
    longer, and only the passes that start within `duration` of its earliest pass are counted.
    """
    d = tempfile.mkdtemp(prefix="rtapp-")
    f = os.path.join(d, "w.json")
    with open(path) as src, open(f, "w") as dst:
        dst.write(with_settings(src.read(), duration + 1, d))
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
            rel = [int(l.split()[6]) for l in fh if l.strip() and not l.startswith("#")]
        starts.setdefault(m.group(1), []).extend(rel)
    if not starts:
        return None, "rt-app wrote no logs"
    t0 = min(min(v) for v in starts.values() if v)
    end = t0 + duration * 1_000_000
    return {task: sum(1 for x in v if x < end) for task, v in starts.items()}, None


def pacer_passes(pacer, cmd, path, duration, extra=()):
    d = tempfile.mkdtemp(prefix="pacer-")
    jobs = os.path.join(d, "jobs.csv")
    args = [pacer, cmd, path, "--duration", "%ds" % duration, "--jobs", jobs]
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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--duration", type=int, default=3)
    ap.add_argument("--pacer", default="target/release/pacer")
    ap.add_argument("--skip-run", action="store_true")
    ap.add_argument("--rtapp", default="rt-app", help="the rt-app binary (current sources recommended)")
    ap.add_argument("--write-expected", metavar="JSON",
                    help="also record rt-app's counts for the conformance test (crates/cli/tests/rtapp_conformance.rs)")
    ap.add_argument("files", nargs="+")
    a = ap.parse_args()
    record = {}
    # Per-file simulator options kept from an earlier record (a machine's measured overheads).
    sim_args = {}
    if a.write_expected and os.path.exists(a.write_expected):
        with open(a.write_expected) as fh:
            for f, e in json.load(fh).get("files", {}).items():
                if e.get("sim_args"):
                    sim_args[f] = e["sim_args"]
    print("| file | thread | rt-app | pacer run | pacer sim | run vs rt-app | sim vs rt-app |")
    print("|---|---|---|---|---|---|---|")
    for path in a.files:
        name = os.path.relpath(path)
        ra, ra_err = rtapp_passes(a.rtapp, path, a.duration)
        pr, pr_err = (None, "skipped") if a.skip_run else pacer_passes(a.pacer, "run", path, a.duration)
        extra = sim_args.get(os.path.basename(path), [])
        ps, ps_err = pacer_passes(a.pacer, "sim", path, a.duration, extra)
        if ra is None:
            print("| %s | | rt-app: %s | | | | |" % (name, ra_err))
            continue
        record[os.path.basename(path)] = {"duration_s": a.duration, "rtapp_passes": ra}
        if extra:
            record[os.path.basename(path)]["sim_args"] = extra
        def rel(x, ref):
            return "%+.1f %%" % (100.0 * (x - ref) / ref) if ref else ("0" if x == 0 else "∞")
        for task in sorted(ra):
            def pick(c):
                if c is None:
                    return None
                return sum(v for k, v in c.items() if k == task or re.fullmatch(re.escape(task) + r"(-\d+)+", k))
            r, s = pick(pr), pick(ps)
            print("| %s | %s | %d | %s | %s | %s | %s |" % (
                name, task, ra[task],
                r if r is not None else pr_err, s if s is not None else ps_err,
                rel(r, ra[task]) if r is not None else "", rel(s, ra[task]) if s is not None else ""))
        sys.stdout.flush()
    if a.write_expected:
        # Never replace an existing record in place: write beside it, then rename.
        tmp = a.write_expected + ".tmp"
        with open(tmp, "w") as fh:
            json.dump({"command": " ".join(sys.argv), "files": record}, fh, indent=2, sort_keys=True)
            fh.write("\n")
        os.replace(tmp, a.write_expected)


if __name__ == "__main__":
    main()
