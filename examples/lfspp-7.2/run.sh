#!/bin/sh
# LFS++ §7.2 (lfspp-legacy-multimedia.txt, Table I / Fig. 6) on this machine: three periodic
# programs (3505 µs, 8220 µs, 100 ms; ~80 % of one CPU) plus a CPU hog that starts 3 s later, in a
# one-CPU partition, first under the default scheduler, then under `pacer exec`.
# Usage (root): examples/lfspp-7.2/run.sh [OUTDIR] [SECONDS]   (PACER=path/to/pacer to override)
set -eu
P=${PACER:-pacer}
OUT=${1:-lfspp-7.2-out}
SECS=${2:-20}
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$OUT"
# One calibration for both runs, so that they execute the same work.
echo '{"global":{"duration":1},"tasks":{"c":{"loop":1,"run":10}}}' > "$OUT/cal.json"
CAL=$("$P" run --json "$OUT/cal.json" | tr -d ' \n' | grep -o '"calibration_ns_per_loop":[0-9.]*' | cut -d: -f2)
echo "busy loop: $CAL ns/loop"
HOG="(sleep 3; exec $P run --calibration $CAL --duration $((SECS - 2))s $HERE/hog.json > /dev/null) &"
TRIO="$P run --calibration $CAL --duration ${SECS}s $HERE/trio.json"
"$P" cpuset --cpus 1 -- sh -c "$HOG $TRIO --jobs $OUT/default.csv > $OUT/default.txt; kill \$! 2>/dev/null; wait"
"$P" cpuset --cpus 1 -- sh -c "$HOG $P exec -q --thread p3505-0 --thread p8220-1 --thread p100ms-2 -- $TRIO --jobs $OUT/pacer.csv > $OUT/pacer.txt; kill \$! 2>/dev/null; wait"
echo "== default scheduler"; sed -n '3,6p' "$OUT/default.txt"
echo "== pacer exec";        sed -n '3,6p' "$OUT/pacer.txt"
echo "== default vs pacer (response times, all jobs)"
"$P" compare "$OUT/default.csv" "$OUT/pacer.csv" || true
