#!/usr/bin/env python3
"""The root cpuset's count of SCHED_DEADLINE tasks (cgroup v1, root), found by trial, and put
right. docs/linux.md, "Demoting a dead SCHED_DEADLINE thread corrupts its cpuset's count".

The kernel keeps `nr_deadline_tasks` per cpuset and, when it rebuilds the root domains'
`total_bw`, skips a cpuset whose count is 0. A count taken below the truth (a zombie demoted
from SCHED_DEADLINE: cgroup_exit() and switched_from_dl() both take it out) shows as reserved
threads missing from `total_bw` after a rebuild, when their number equals the deficit.

    sudo ./nr-deadline-tasks.py probe [MAX]   # n = 1..MAX reserved sleepers: counted by a rebuild?
    sudo ./nr-deadline-tasks.py repair N      # raise the count by N (SCHED_DEADLINE on N zombies)

Root, cgroup v1 with the cpuset controller at /sys/fs/cgroup/cpuset, debugfs mounted. Every
reservation it makes is 0.1 ms / 10 ms on a child it kills and reaps; each step ends with a
rebuild, so `total_bw` is left at the kernel's own count.
"""
import ctypes
import os
import signal
import struct
import subprocess
import sys
import time

ROOT = "/sys/fs/cgroup/cpuset/cpuset.sched_load_balance"
DEBUG = "/sys/kernel/debug/sched/debug"
SCHED_OTHER, SCHED_DEADLINE = 0, 6
libc = ctypes.CDLL(None, use_errno=True)
SYS_sched_setattr = {"x86_64": 314, "aarch64": 274}[os.uname().machine]


def setattr_(pid, policy, runtime=0, period=0):
    attr = struct.pack("IIQiIQQQ", 48, policy, 0, 0, 0, runtime, period, period)
    if libc.syscall(SYS_sched_setattr, pid, ctypes.create_string_buffer(attr), 0) != 0:
        raise OSError(ctypes.get_errno(), f"sched_setattr({pid})")


def rebuild():
    for v in ("0", "1"):
        with open(ROOT, "w") as f:
            f.write(v)
    time.sleep(0.2)


def total_bw():
    with open(DEBUG) as f:
        return next(int(l.split(":")[1]) for l in f if "dl_bw->total_bw" in l)


def state(pid):
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0]


def probe(most):
    rebuild()
    base = total_bw()
    deficit = None
    for n in range(1, most + 1):
        kids = [subprocess.Popen(["sleep", "100"]) for _ in range(n)]
        time.sleep(0.1)
        for k in kids:
            setattr_(k.pid, SCHED_DEADLINE, 100_000, 10_000_000)
        rebuild()
        counted = total_bw() != base
        for k in kids:
            setattr_(k.pid, SCHED_OTHER)
            k.kill()
            k.wait()
        rebuild()
        print(f"{n} reserved sleeper(s): {'counted' if counted else 'NOT counted'} by a rebuild")
        if not counted and deficit is None:
            deficit = n
    if deficit is None:
        print(f"no deficit between 1 and {most}: the count is right (or off by more than {most})")
    else:
        print(f"the root cpuset's count is {deficit} below the truth: `repair {deficit}` puts it right")


def repair(n):
    for _ in range(n):
        kid = subprocess.Popen(["sleep", "100"])
        time.sleep(0.05)
        os.kill(kid.pid, signal.SIGKILL)
        while state(kid.pid) != "Z":
            time.sleep(0.01)
        # Counted in by switched_to_dl(); cgroup_exit() is behind it, so nothing takes it out.
        setattr_(kid.pid, SCHED_DEADLINE, 100_000, 10_000_000)
        kid.wait()
    # The zombies' bandwidth stays in total_bw: the rebuild recounts it from live threads.
    rebuild()
    print(f"count raised by {n}; total_bw {total_bw()}")


if __name__ == "__main__":
    if len(sys.argv) >= 2 and sys.argv[1] == "probe":
        probe(int(sys.argv[2]) if len(sys.argv) > 2 else 8)
    elif len(sys.argv) == 3 and sys.argv[1] == "repair":
        repair(int(sys.argv[2]))
    else:
        sys.exit(__doc__)
