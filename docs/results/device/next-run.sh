#!/bin/bash
# What the next lent many-core machine should run first (prepared 2026-11-26, after the second
# lease; about 5 minutes of run time). The second lease (2026-11-26b/) found the best fixed
# limit on 16 CPUs at 48, past `auto`'s resting floor of 2 per CPU, with repetitions that
# spread 13 %: this settles where the best limit lies on 16 and 8 CPUs with 5 repetitions.
#
# Usage (from the repository root, on the device): next-run.sh BINARY OUTDIR
#   BINARY: a stripped release `turnstile` built on the development machine.
# A call brings back at most 8 files: everything goes into OUTDIR/results.tgz after each step.
set -u
BIN=${1:?binary}
ARCH=${2:?output folder}
OUT=/tmp/ts-out
DATA=/tmp/ts-data
mkdir -p "$OUT" "$DATA" "$ARCH"
T0=$(date +%s)
step() {
    local name=$1 limit=$2
    shift 2
    echo "start $name at $(($(date +%s) - T0))s"
    timeout "$limit" "$@" >"$OUT/$name.json" 2>"$OUT/$name.err"
    echo "end $name rc=$? at $(($(date +%s) - T0))s"
    tail -n 2 "$OUT/$name.err"
    tar czf "$ARCH/results.tgz" -C "$OUT" . 2>/dev/null
}
{ uname -a; nproc; lscpu; } >"$OUT/env.txt" 2>&1
step limits-16 150 "$BIN" repro oltp --data-dir "$DATA" \
    --policies auto,auto@32,auto@48,auto@64 --threads 1024 --reps 5 --json --out "$OUT/limits-16"
step limits-8 150 taskset -c 0-7 "$BIN" repro oltp --data-dir "$DATA" \
    --policies auto,auto@8,auto@16,auto@24,auto@32 --threads 1024 --reps 5 --json \
    --out "$OUT/limits-8"
echo "done at $(($(date +%s) - T0))s"
