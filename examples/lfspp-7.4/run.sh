#!/usr/bin/env bash
# LFS++ §7.4 at 85 % SCHED_FIFO load on the real kernel: does `pacer exec` find the period of a
# player that the load makes late at most expiries? Everything runs in a one-CPU exclusive
# partition. Two shapes of the same player (3.5 ms of work per job): cyclic.c, which sleeps on its
# timer even when late, and player.json under `pacer run`, which skips the sleep when late.
# pacer exec runs the program itself (not through a shell, whose name `--thread` would not match).
# Prints, per run, the first period pacer adopted, the records it came from and when.
# HOG=1 adds a SCHED_OTHER CPU hog to the partition (deep starvation: the player shares the
# load's gaps with it).
# usage: [HOG=1] examples/lfspp-7.4/run.sh [PACER] [REPEATS]   (root; docs/BENCHMARKS.md)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
pacer=${1:-$here/../../target/release/pacer}
reps=${2:-2}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cc -O2 -o "$tmp/cyclic" "$here/cyclic.c"
cal=$("$pacer" run --json <(echo '{"global":{"duration":1},"tasks":{"c":{"loop":1,"run":10}}}') |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["run"]["calibration_ns_per_loop"])')
first() { # $1 = true period ns; stdin = pacer exec --json
  python3 -c '
import json, sys
P = int(sys.argv[1]); first = None; note = None
for line in sys.stdin:
    if not line.startswith("{"):
        continue  # the rt-app shape: the summary of pacer run
    d = json.loads(line)
    for t in d.get("status", {}).get("threads", []):
        c = t.get("control") or {}
        note = c.get("detection_note") or note
        if first is None and c.get("period_ns"):
            first = (c["period_ns"], c.get("detection_source"), d["status"]["elapsed_ns"] / 1e9)
if first:
    print(f"adopted {first[0]} ns ({abs(first[0] - P) / P * 100:.4f} % off) from {first[1]} after {first[2]:.2f} s")
else:
    print(f"nothing adopted; last note: {note}")' "$1"
}
for rep in $(seq "$reps"); do
  for p in 10000000 16683350 23219955 33366700 41666667; do
    sed "s/PERIOD_US/$((p / 1000))/" "$here/player.json" > "$tmp/player.json"
    for shape in cyclic rt-app; do
      if [ $shape = cyclic ]; then
        prog="$tmp/cyclic $p 5 3500000" thread=cyclic
      else
        prog="$pacer run --calibration $cal $tmp/player.json" thread=player-0
      fi
      printf '%-7s P=%-9s ' $shape $p
      hog_start='' hog_stop=''
      if [ "${HOG:-0}" = 1 ]; then
        hog_start='(while :; do :; done) & hog=$!;' hog_stop='kill $hog;'
      fi
      "$pacer" cpuset --cpus 1 -- sh -c "$hog_start $pacer run --calibration $cal $here/load.json > /dev/null & sleep 0.5;
        $pacer exec --json --status-every 250ms --duration 7s --thread $thread -- $prog; s=\$?; $hog_stop wait; exit \$s" |
        first $p
    done
  done
done
