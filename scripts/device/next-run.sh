#!/bin/bash
# Not run yet: the run prepared 2026-11-27 for the next lent many-core machine (see docs/results/device/2026-11-26/README.md, "Next").
# What the next lent many-core machine should run first (prepared 2026-11-27, after the third
# lease; about 5 minutes of run time). The third lease (2026-11-27/) put `auto` at 0.946,
# 0.974 and 1.003 x the best fixed limit at 1024 OLTP clients on 16 CPUs (a flat optimum from
# 32 to 96) and measured the drain rule's change on one undeclared-wait load with one run a
# binary. This repeats both with the binary that ships, and runs `repro mixed` at full size,
# which the quick size cannot show on 16 CPUs.
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
    tail -n 1 "$OUT/$name.err"
    tar czf "$ARCH/results.tgz" -C "$OUT" . 2>/dev/null
}
# CONFIG_HZ: the scheduler tick, the process CPU clock's lag per other CPU (`CPU_CLOCK_LAG`
# assumes 4 ms, HZ=250, as on the development VM's kernel of the same family).
{ uname -a; nproc; lscpu; grep -h '^CONFIG_HZ' "/boot/config-$(uname -r)"; } >"$OUT/env.txt" 2>&1
step limits-16 120 "$BIN" repro oltp --data-dir "$DATA" \
    --policies auto,auto@32,auto@48,auto@64,auto@96 --threads 1024 --reps 5 --json \
    --out "$OUT/limits-16"
for i in 1 2 3 4; do
    step blocking-512-$i 25 "$BIN" bench gate --policies polling,auto --threads 512 --limit 512 \
        --duration-ms 3000 --reps 1 --work-us 10 --block-us 200 --calls 10 --json
done
step mixed-16 120 "$BIN" repro mixed --data-dir "$DATA" --json --out "$OUT/mixed-16"
echo "done at $(($(date +%s) - T0))s"
