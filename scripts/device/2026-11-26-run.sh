#!/bin/bash
# Reproduces docs/results/device/2026-11-26/ (first call): calibration, repro oltp on 16 and 8 CPUs, gate sweep, quick repro mixed.
# The many-core run of 2026-11-26 on the lent 16-core device, as one script: the machine's
# calibration, `repro oltp` on all 16 CPUs and on 8 (seed 001's scale, `taskset -c 0-7`), the gate
# sweep with `auto`, and a quick `repro mixed`. Each step has its own time limit, and the whole run
# stops adding steps past DEADLINE seconds, so whatever finished comes back.
#
# Usage: 2026-11-26-run.sh BINARY OUTDIR   (BINARY: a stripped release `turnstile`; a folder
# `lib/` beside it with the build machine's glibc is used if the binary does not start as is)
set -u
BIN=${1:?binary}
OUTDIR=${2:?output folder}
DEADLINE=${DEADLINE:-470}
R=/tmp/ts-results
DATA=/tmp/ts-data
mkdir -p "$R" "$DATA" "$OUTDIR"
T0=$(date +%s)
pack() { tar czf "$OUTDIR/results.tgz" -C "$R" . 2>/dev/null; cp "$R/steps.txt" "$OUTDIR/" 2>/dev/null; }
# step NAME LIMIT_S CMD...: runs CMD with a limit unless the deadline would pass; stdout to NAME.out.
step() {
    local name=$1 limit=$2
    shift 2
    local now=$(($(date +%s) - T0))
    if ((now + limit > DEADLINE)); then
        echo "skip $name at ${now}s (needs ${limit}s)" | tee -a "$R/steps.txt"
        return
    fi
    echo "start $name at ${now}s" | tee -a "$R/steps.txt"
    timeout "$limit" "$@" >"$R/$name.out" 2>"$R/$name.err"
    local rc=$?
    echo "end $name rc=$rc at $(($(date +%s) - T0))s" | tee -a "$R/steps.txt"
    tail -n 3 "$R/$name.err"
    pack
}

{
    date -u
    uname -a
    nproc
    lscpu
    free -g
    cat /proc/sys/kernel/sched_autogroup_enabled 2>&1
    cat /sys/kernel/mm/transparent_hugepage/enabled 2>&1
    command -v taskset
} >"$R/env.txt" 2>&1
head -n 3 "$R/env.txt"
nproc

T=("$BIN")
if ! "$BIN" --version; then
    LIB=$(dirname "$BIN")/lib
    T=("$LIB/ld-linux-x86-64.so.2" --library-path "$LIB" "$BIN")
    "${T[@]}" --version || exit 3
fi
TH=1,2,4,8,16,32,64,128,256,512,1024

# 1. The machine (all 16 CPUs) and the engine's own costs, for `sim oltp --machine --config`.
step calibrate-16 120 "${T[@]}" calibrate --out "$R/machine-16.toml" --oltp "$R/oltp-costs-16.toml" --data-dir "$DATA"
# 2. repro oltp on 16 CPUs: the faithful policies as seed 001 ran them, and auto untuned.
step oltp-16 170 "${T[@]}" repro oltp --data-dir "$DATA" --policies classic,flifo,polling,auto --threads $TH --json --out "$R/oltp-16"
# 3. The same at seed 001's scale: 8 CPUs (the mask is what available_parallelism, auto's L0 and
#    the CPU figures read).
if command -v taskset >/dev/null; then
    step oltp-8 130 taskset -c 0-7 "${T[@]}" repro oltp --data-dir "$DATA" --policies classic,flifo,auto --threads $TH --json --out "$R/oltp-8"
fi
# 4. The gate sweep to 1024 threads, auto beside the policies it is measured against.
step gate-16 90 "${T[@]}" bench gate --policies auto,polling,classic,flifo,mutex-condvar --threads $TH --duration-ms 300 --json
# 5. repro mixed, quick: two scans beside 16 point-select sessions.
step mixed-16 75 "${T[@]}" repro mixed --quick --policies auto,classic-500,polling --json --data-dir "$DATA"
# 6. The machine as 8 CPUs, for the simulator at seed 001's scale.
if command -v taskset >/dev/null; then
    step calibrate-8 60 taskset -c 0-7 "${T[@]}" calibrate --quick --out "$R/machine-8.toml"
fi
echo "done at $(($(date +%s) - T0))s" | tee -a "$R/steps.txt"
pack
