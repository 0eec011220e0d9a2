#!/bin/bash
# Reproduces docs/results/device/2026-11-27/ (call 3): the drain rule (queue up to twice the limit) against the build before, alternated.
# The lent 16-core machine, 2026-11-27, third call (about 3 minutes): the drain rule admitting
# a queue up to twice the limit (NEW) against up to the limit (BASE, 42d34e6), alternated:
#   1. slot holders that sleep undeclared, 512 threads: polling at 512 beside auto, in one
#      command, BASE NEW NEW BASE;
#   2. OLTP at 96 and 1024 clients, auto beside auto@48, 3 repetitions, BASE then NEW: the
#      rule must not move OLTP (its queue is 30 times the limit at 1024; at 96 up to twice).
# Usage (repository root, on the device): 2026-11-27-run3.sh BASE NEW OUTDIR
set -u
BASE=${1:?}; NEW=${2:?}; ARCH=${3:?}
OUT=/tmp/ts-out; DATA=/tmp/ts-data
mkdir -p "$OUT" "$DATA" "$ARCH"
T0=$(date +%s)
step() {
    local name=$1 limit=$2
    shift 2
    echo "start $name at $(($(date +%s) - T0))s"
    timeout "$limit" "$@" >"$OUT/$name.json" 2>"$OUT/$name.err"
    echo "end $name rc=$? at $(($(date +%s) - T0))s"
    tar czf "$ARCH/results.tgz" -C "$OUT" . 2>/dev/null
}
i=0
for b in base new new base; do
    i=$((i + 1))
    bin=$BASE; [ $b = new ] && bin=$NEW
    step blocking-512-$i-$b 25 "$bin" bench gate --policies polling,auto --threads 512 \
        --limit 512 --duration-ms 3000 --reps 1 --work-us 10 --block-us 200 --calls 10 --json
done
for b in base new; do
    bin=$BASE; [ $b = new ] && bin=$NEW
    step oltp-$b 80 "$bin" repro oltp --data-dir "$DATA" --policies auto,auto@48 \
        --threads 96,1024 --reps 3 --json --out "$OUT/oltp-$b"
done
echo "done at $(($(date +%s) - T0))s"
