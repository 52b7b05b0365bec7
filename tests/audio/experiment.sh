#!/usr/bin/env bash
# The real-kernel audio experiment of issue 17 (docs/experiments/audio-real.md), run as root:
#   60 s of the paper's random workUnits pattern at 2 bursts of 64 frames (48 kHz), the callback
#   and a SCHED_FIFO noise thread (50 % of CPU 1, 10 ms period, priority 51, above the audio's
#   FIFO 50) both on CPU 1;
#   - adaptive SCHED_DEADLINE through `pacer daemon`, the benchmark running as an unprivileged user;
#   - SCHED_FIFO (root), pinned to CPU 1 beside the noise, and unpinned;
#   - SCHED_OTHER and the fixed reservation, for reference.
# Usage: [LOAD_SCALE=F] [CPU_LATENCY=US] [ADAPTIVE_ONLY=1] tests/audio/experiment.sh OUT_DIR [DURATION] [USER]
# LOAD_SCALE (default 1: the paper's 88 % of a CPU at 185 voices) scales every step's voices.
# CPU_LATENCY holds a PM QoS request (/dev/cpu_dma_latency) of that many µs for the whole
# experiment (idle CPUs poll at 0; on a VM held to a CPU quota that costs stalls, see
# docs/linux.md). ADAPTIVE_ONLY=1 runs only the adaptive configuration through the daemon.
# Writes OUT_DIR/{voicemark,adaptive-daemon,root}.json and the daemon's log; prints the tables.
set -euo pipefail
out=${1:?usage: experiment.sh OUT_DIR [DURATION] [USER]}
dur=${2:-60s}
user=${3:-nobody}
pacer=${PACER:-$(dirname "$0")/../../target/release/pacer}
[ "$(id -u)" = 0 ] || { echo "experiment.sh: run as root (the noise is SCHED_FIFO, the daemon needs root)" >&2; exit 1; }
mkdir -p "$out"
if [ -n "${CPU_LATENCY:-}" ]; then
  # Held while fd 3 is open (this script and its children); the kernel reads a hex string.
  exec 3> /dev/cpu_dma_latency
  printf '%08x' "$CPU_LATENCY" >&3
fi
work=$(mktemp -d)
chmod 755 "$work"
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"' EXIT

# The voices one CPU renders here, measured once, quietly, and shared by every run below.
"$pacer" audio voicemark --runs 5 --cpu 1 --json > "$out/voicemark.json"
cp "$out/voicemark.json" "$work/voicemark.json"
chmod 644 "$work/voicemark.json"
scale=${LOAD_SCALE:-1}
common=(--bursts 2 -d "$dur" --cpu 1 --cost-from "$work/voicemark.json" --pattern random --seed 1 --load-scale "$scale")
mkdir -p "$out/csv-daemon" "$out/csv-root" "$out/csv-unpinned"; chmod 777 "$out/csv-daemon"

# The daemon: the user may hold one 0.95-CPU reservation.
printf '[default]\nbandwidth = 0.95\nthread_bandwidth = 0.95\n' > "$work/pacerd.toml"
"$pacer" daemon --socket "$work/pacer.sock" --config "$work/pacerd.toml" 2> "$out/daemon.log" &
for _ in $(seq 100); do [ -S "$work/pacer.sock" ] && break; sleep 0.1; done

noise() { "$pacer" audio load --noise 0.5 --noise-priority 51 --cpu 1 -d 1000s > /dev/null 2>&1 & echo $!; }
stop() { kill -TERM "$1"; while kill -0 "$1" 2> /dev/null; do sleep 0.1; done; }

# Adaptive through the daemon, as the user, beside the noise.
n=$(noise)
setpriv --reuid="$user" --regid="$(id -g "$user")" --clear-groups \
  "$pacer" audio --config adaptive --via daemon --socket "$work/pacer.sock" "${common[@]}" --json \
  --csv "$out/csv-daemon" > "$out/adaptive-daemon.json"
stop "$n"

if [ -z "${ADAPTIVE_ONLY:-}" ]; then
# Root: SCHED_FIFO pinned beside the noise, SCHED_OTHER, the fixed reservation (same noise, one
# process: --noise runs it for every configuration).
"$pacer" audio --config fifo,other,deadline "${common[@]}" --noise 0.5 --noise-priority 51 \
  --json --csv "$out/csv-root" > "$out/root.json"
# SCHED_FIFO unpinned (the noise still on CPU 1): the kernel's RT balancing may move it away.
n=$(noise)
"$pacer" audio --config fifo --bursts 2 -d "$dur" --cost-from "$work/voicemark.json" \
  --pattern random --seed 1 --load-scale "$scale" --json --csv "$out/csv-unpinned" > "$out/fifo-unpinned.json"
stop "$n"
fi
python3 - "$out" <<'PY'
import json, sys, os
out = sys.argv[1]
vm = json.load(open(os.path.join(out, "voicemark.json")))
print(f"VoiceMark: {vm['voices_per_cpu']:.0f} voices per CPU (min {vm['voices_per_cpu_min']:.0f}, max {vm['voices_per_cpu_max']:.0f}, 5 runs)")
for f, label in [("adaptive-daemon.json", "through the daemon, unprivileged"), ("root.json", "root, pinned to CPU 1"), ("fifo-unpinned.json", "root, unpinned")]:
    if not os.path.exists(os.path.join(out, f)):
        continue  # ADAPTIVE_ONLY
    v = json.load(open(os.path.join(out, f)))
    for c in v["configurations"]:
        r = c["run"]
        if r is None:
            print(f"{c['configuration']:9} ({label}): not run: {c['not_run']}")
            continue
        res = r["reserved_bandwidth"]
        ratio = r["reserved_over_used"]
        print(f"{c['configuration']:9} ({label}): {r['callbacks']} callbacks, underruns {r['underruns']}, late {r['soft_misses']}, "
              f"used {r['used_bandwidth']:.3f}, reserved {res if res is None else round(res, 3)}, reserved/used {ratio if ratio is None else round(ratio, 2)}")
PY
