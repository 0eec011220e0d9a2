#!/bin/bash
# Reproduces docs/results/device/2026-11-26b/ ("cpu-read"): auto's CPU reading under the queue lock against before it, at 1024 threads, binaries alternated.
# A/B on the lent 16-core machine: `auto`'s controller reading the process CPU clock under the
# queue lock (BASE, e9395cc) or before it (NEW), at 1024 threads, beside a fixed limit of 32 in
# the same run; the binaries alternated BASE NEW NEW BASE (then ORDER="new base base new" FIRST=4).
# Usage: 2026-11-26b-cpu-read.sh BASE NEW OUTDIR
set -u
BASE=${1:?}; NEW=${2:?}; ARCH=${3:?}
OUT=/tmp/ts-out; DATA=/tmp/ts-data
mkdir -p "$OUT" "$DATA" "$ARCH"
T0=$(date +%s)
i=${FIRST:-0}
for b in ${ORDER:-base new new base}; do
    i=$((i + 1))
    bin=$BASE; [ $b = new ] && bin=$NEW
    echo "start $i $b at $(($(date +%s) - T0))s"
    timeout 60 "$bin" repro oltp --data-dir "$DATA" --policies auto,auto@32 --threads 1024 \
        --reps 3 --json --out "$OUT/chart" >"$OUT/$i-$b.json" 2>"$OUT/$i-$b.err"
    echo "end $i rc=$? at $(($(date +%s) - T0))s"
    rm -rf "$OUT/chart"
    tar czf "$ARCH/results.tgz" -C "$OUT" . 2>/dev/null
done
