# Reproduces docs/results/device/2026-11-26/ (fourth call): auto and polling fast paths, two binaries alternated 4 times (the locked swap removed in 84f6f7f).
for i in 1 2 3 4; do for b in turnstile turnstile-new; do ./.dev/$b bench gate --policies auto,polling --threads 1 --duration-ms 50 --async-tasks 0 --json 2>/dev/null > $OUT/$b-$i.json; python3 -c "
import json,sys; d=json.load(open('$OUT/$b-$i.json')); print('$b', ' '.join('%s %.2f/%.2f'%(f['policy'],f['admission_ns'],f['ticket_reentry_ns']) for f in d['fast_path']))"; done; done
