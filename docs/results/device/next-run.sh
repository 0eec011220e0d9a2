#!/bin/bash
# What the next lent many-core machine should run first (prepared 2026-11-26; about 6 minutes of
# run time, so it fits a 15-minute lease with its start): seed 001's mechanism on 8 real CPUs
# with rows as costly as the seed's, which the 2026-11-26 lease could not run (the setting
# came after it). See docs/results/device/2026-11-26/README.md and docs/SIMULATOR.md.
#
# Usage (from the repository root, on the device): next-run.sh BINARY OUTDIR
#   BINARY: a stripped release `turnstile` built on the development machine.
# Afterwards, on the development machine, the model's prediction from the same calibration:
#   turnstile sim oltp --quick --machine OUTDIR/machine-8.toml --config OUTDIR/costs-8.toml \
#     --cores 8 --policies classic,flifo --compare OUTDIR/oltp-8-rows.json
set -u
BIN=${1:?binary}
OUT=${2:?output folder}
DATA=/tmp/ts-data
mkdir -p "$OUT" "$DATA"
T0=$(date +%s)
step() {
    local name=$1 limit=$2
    shift 2
    echo "start $name at $(($(date +%s) - T0))s"
    timeout "$limit" "$@" >"$OUT/$name.out" 2>"$OUT/$name.err"
    echo "end $name rc=$? at $(($(date +%s) - T0))s"
    tail -n 2 "$OUT/$name.err"
}
{ uname -a; nproc; lscpu; } >"$OUT/env.txt" 2>&1
# 1. The 8-CPU machine and the engine's costs with seed-like rows (2350 ns extra a row, so a
#    row costs ~2.5 µs as the seed's did), for the simulator.
step calibrate-8 90 taskset -c 0-7 "$BIN" calibrate --out "$OUT/machine-8.toml" \
    --oltp "$OUT/costs-8.toml" --row-work-ns 2350 --data-dir "$DATA"
# 2. Seed 001's settings (classic = MySQL 5.0.84 FIFO, flifo), force-exit per row sent, seed-like
#    rows. 10 s points: at ~700 TPS on 8 CPUs a transaction's fair share at 1024 threads is
#    ~1.5 s, so the window holds several.
step oltp-8-rows 260 taskset -c 0-7 "$BIN" repro oltp --data-dir "$DATA" \
    --policies classic,flifo --row-work-ns 2350 --threads 1,2,4,8,16,64,256,1024 \
    --seconds 10 --json --out "$OUT/oltp-8-rows"
mv "$OUT/oltp-8-rows.out" "$OUT/oltp-8-rows.json" 2>/dev/null
# 3. auto against fixed limits on 16 CPUs, 3 repetitions (2026-11-26 had 2, and auto's spread
#    was as wide as the gap to the best fixed limit). auto now rests at 2 slots per CPU (32):
#    48 is there to see whether the best lies past it.
step auto-limits-16 150 "$BIN" repro oltp --data-dir "$DATA" \
    --policies auto,auto@16,auto@24,auto@32,auto@48 --threads 1024 --reps 3 --json --out "$OUT/limits"
echo "done at $(($(date +%s) - T0))s"
