#!/bin/bash
# Reproduces docs/results/device/2026-11-27/ (call 2): call 1 again with the start line fixed, unlimited added.
# The lent 16-core machine, 2026-11-27: `auto` (with the CPU share and the unqueued rule,
# 6b70210) against fixed limits, one call of about 5–6 minutes. In order of need:
#   1. 16 CPUs, 1024 OLTP clients: auto against fixed limits 8…96, 5 repetitions (issue 13:
#      >= 95 % of the best fixed limit; the second lease of 11-26 found 48 best, 64 untried);
#   2. 16 CPUs, slot holders that sleep undeclared (10 µs of CPU, then 200 µs asleep inside the
#      slot, 10 calls a statement, 512 threads): polling at fixed limits 16…512 beside auto,
#      one command per limit so auto runs five times;
#   3. 8 CPUs (taskset -c 0-7), 1024 OLTP clients: auto against fixed limits 8…32, 5 reps;
#   (the second call: the start line fixed, unlimited beside the sweep, no mixed)
# Usage (repository root, on the device): 2026-11-27-run2.sh BINARY OUTDIR
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
    tail -n 1 "$OUT/$name.err"
    tar czf "$ARCH/results.tgz" -C "$OUT" . 2>/dev/null
}
{ uname -a; nproc; lscpu; cat /etc/os-release; } >"$OUT/env.txt" 2>&1
step limits-16 170 "$BIN" repro oltp --data-dir "$DATA" \
    --policies auto,auto@8,auto@16,auto@32,auto@48,auto@64,auto@96,unlimited --threads 1024 --reps 5 \
    --json --out "$OUT/limits-16"
for L in 16 64 128 256 512; do
    step blocking-16-at-$L 25 "$BIN" bench gate --policies polling,auto --threads 512 --limit $L \
        --duration-ms 2000 --reps 1 --work-us 10 --block-us 200 --calls 10 --json
done
step limits-8 150 taskset -c 0-7 "$BIN" repro oltp --data-dir "$DATA" \
    --policies auto,auto@8,auto@12,auto@16,auto@24,auto@32 --threads 1024 --reps 5 --json \
    --out "$OUT/limits-8"
echo "done at $(($(date +%s) - T0))s"
