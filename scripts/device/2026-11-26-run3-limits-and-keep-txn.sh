#!/bin/bash
# Reproduces docs/results/device/2026-11-26/ (third call): auto against fixed limits on 8 and 16 CPUs, and the keep-slot-in-transaction variant (needs a second binary built with that patch).
set -u
N=$PWD/.dev/turnstile; K=$PWD/.dev/turnstile-keeptxn; R=/tmp/r3; D=/tmp/d3; mkdir -p $R $D; T0=$(date +%s)
pack(){ tar czf $OUT/r3.tgz -C $R . ; }
s(){ n=$1; l=$2; shift 2; echo "start $n $(( $(date +%s)-T0 ))"; timeout $l "$@" > $R/$n.json 2>$R/$n.err; echo "end $n rc=$? $(( $(date +%s)-T0 ))"; tail -n 1 $R/$n.err; pack; }
s a8-fixed 90 taskset -c 0-7 $N repro oltp --data-dir $D --policies auto,auto@4,auto@8,auto@12,auto@16 --threads 32,1024 --reps 2 --json --out /tmp/x
for rep in 1 2; do
  s b8-normal-$rep 30 taskset -c 0-7 $N repro oltp --data-dir $D --policies auto --threads 32,256,1024 --json --out /tmp/x
  s b8-keep-$rep 30 env TS_KEEP_TXN=1 taskset -c 0-7 $K repro oltp --data-dir $D --policies auto --threads 32,256,1024 --json --out /tmp/x
done
s c16-fixed 45 $N repro oltp --data-dir $D --policies auto,auto@8,auto@16,auto@24,auto@32 --threads 1024 --reps 2 --json --out /tmp/x
s c16-keep 20 env TS_KEEP_TXN=1 $K repro oltp --data-dir $D --policies auto --threads 32,1024 --json --out /tmp/x
s d16-gate 40 $N bench gate --policies auto,polling --threads 32,256,1024 --duration-ms 1000 --json
echo done $(( $(date +%s)-T0 ))
