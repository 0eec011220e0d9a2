#!/bin/bash
# Reproduces docs/results/device/2026-11-26b/: auto at rest against fixed limits at 1024 threads, sysbench on CPUs apart from the server, seed 001 with the seed's row cost on 8 CPUs.
# The second lent 16-core machine of 2026-11-26, one call (about 7 minutes). In order of what
# each open question needs:
#   1. issue 13: auto, which now rests at 2 slots per CPU (32 here), against fixed limits at
#      1024 threads, 3 repetitions;
#   2. issue 15: sysbench on CPUs apart from the server's (server 0-7, sysbench 8-15), the
#      control the 2-core VM could not run: does the client, not the gate, make the gap?
#   3. issue 12: seed 001's settings with seed-like rows on 8 real CPUs, and the engine's costs
#      at those rows for the simulator.
#
# Usage (repository root, on the device): 2026-11-26b-run.sh BINARY SYSBENCH_BUNDLE OUTDIR [STEPS]
#   BINARY: a stripped release `turnstile` built on the development machine;
#   SYSBENCH_BUNDLE: Debian's sysbench 1.0.20 binary, its non-libc libraries and Lua scripts,
#   with the wrapper `sysbench-apart` (taskset -c $SB_CPUS), made on the development machine
#   by sysbench-bundle.sh (beside this script) (the device has no package registry).
#   STEPS: which steps to run (default 1234; the second call ran 235).
#   Results go to /tmp/ts-out and, after each step, into OUTDIR/results.tgz.
set -u
BIN=${1:?binary}
SB=${2:?sysbench bundle}
ARCH=${3:?output folder}
OUT=/tmp/ts-out
STEPS=${4:-1234}
DATA=/tmp/ts-data
mkdir -p "$OUT" "$DATA" "$ARCH"
T0=$(date +%s)
step() {
    local name=$1 limit=$2 n=$3
    shift 3
    case $STEPS in *$n*) ;; *) return ;; esac
    echo "start $name at $(($(date +%s) - T0))s"
    timeout "$limit" "$@" >"$OUT/$name.json" 2>"$OUT/$name.err"
    echo "end $name rc=$? at $(($(date +%s) - T0))s"
    tail -n 2 "$OUT/$name.err"
    # A call brings back at most 8 files: everything travels in one archive, remade per step.
    tar czf "$ARCH/results.tgz" -C "$OUT" . 2>/dev/null
}
{ uname -a; nproc; lscpu; cat /etc/os-release; } >"$OUT/env.txt" 2>&1
# 1. auto's resting floor on 16 CPUs: 48 is there to see whether the best lies past 2 per CPU.
step auto-limits-16 130 1 "$BIN" repro oltp --data-dir "$DATA" \
    --policies auto,auto@16,auto@24,auto@32,auto@48 --threads 1024 --reps 3 --json \
    --out "$OUT/auto-limits-16"
# 2. sysbench apart: the server (and the built-in client it is compared with) on CPUs 0-7,
#    sysbench on 8-15. unlimited is the control: no gate at all.
SB_CPUS=8-15 TURNSTILE_SYSBENCH="$SB/sysbench-apart" step sysbench-apart 180 2 \
    taskset -c 0-7 "$BIN" repro oltp --data-dir "$DATA" --client sysbench \
    --policies unlimited,polling,auto --threads 4,64,256,1024 --seconds 3 --json \
    --out "$OUT/sysbench-apart"
# 3. Seed 001's settings (classic = MySQL 5.0.84 FIFO, flifo; force-exit per row sent) with
#    rows as costly as the seed's on 8 CPUs. 8 s points: at ~700 TPS a transaction's fair
#    share at 1024 threads is ~1.5 s, so the window holds about five.
step oltp-8-rows 170 3 taskset -c 0-7 "$BIN" repro oltp --data-dir "$DATA" \
    --policies classic,flifo --row-work-ns 2350 --threads 1,4,8,16,64,256,1024 \
    --seconds 8 --json --out "$OUT/oltp-8-rows"
# 4. The 8-CPU machine and the engine's costs at those rows, for `sim oltp --compare`.
step calibrate-8 60 4 taskset -c 0-7 "$BIN" calibrate --quick --out "$OUT/machine-8.toml" \
    --oltp "$OUT/costs-8.toml" --row-work-ns 2350 --data-dir "$DATA"
# 5. Every policy on 16 CPUs with auto resting at 32 slots (the 11-26 side-by-side had the
#    old auto): 2 repetitions.
step side-by-side-16 120 5 "$BIN" repro oltp --data-dir "$DATA" \
    --policies classic,flifo,polling,auto --threads 32,256,1024 --reps 2 --json \
    --out "$OUT/side-by-side-16"
echo "done at $(($(date +%s) - T0))s"
