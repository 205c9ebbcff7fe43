#!/bin/bash
# Used by docs/performance.md (issue 19, the file store and the TUI
# against the code before the workspace).
# usage: criterion_ab.sh BEFORE_DIR AFTER_DIR BENCH ROUNDS [FILTER]
#   BEFORE_DIR, AFTER_DIR: two checkouts (say `git worktree add ../pre 6693fc5`);
#   BENCH: store or tui. Builds `cargo bench --bench BENCH` in each (each its
#   own target directory), then runs them in turns ROUNDS times
#   (`--warm-up-time=1 --measurement-time=3`, criterion's FILTER if given)
#   and prints each benchmark's median over the rounds, before and after.
set -e
A=$(cd "$1" && pwd) B=$(cd "$2" && pwd) BENCH=$3 N=${4:-4} FILTER=${5:-}
OUT=$(mktemp -d /tmp/criterion-ab.XXXX)
exe() { (cd "$1" && cargo bench --bench "$BENCH" --no-run 2>&1 | sed -n "s/.*Executable benches\/$BENCH.rs (\(.*\))/\1/p" | tail -1); }
EA=$(cd "$A" && realpath "$(exe "$A")") EB=$(cd "$B" && realpath "$(exe "$B")")
for r in $(seq "$N"); do for side in before after; do
  dir=$A bin=$EA; [ $side = after ] && dir=$B bin=$EB
  (cd "$dir" && "$bin" --bench --warm-up-time=1 --measurement-time=3 --noplot $FILTER) > "$OUT/$side-$r.txt" 2>&1
done; done
python3 - "$OUT" "$N" <<'PY'
import re, statistics, sys
out, n = sys.argv[1], int(sys.argv[2])
unit = {'ns': 1e-6, 'µs': 1e-3, 'us': 1e-3, 'ms': 1.0, 's': 1e3}
def medians(path):
    got, name = {}, None
    for line in open(path):
        head = re.match(r'^(\S+/\S+)', line)
        if head: name = head.group(1)
        t = re.search(r'time:\s+\[\S+ \S+ (\S+) (\S+) \S+ \S+\]', line)
        if t and name: got[name] = float(t.group(1)) * unit[t.group(2)]
    return got
runs = {s: [medians(f'{out}/{s}-{r}.txt') for r in range(1, n + 1)] for s in ('before', 'after')}
for k in runs['before'][0]:
    a = [d[k] for d in runs['before'] if k in d]; b = [d[k] for d in runs['after'] if k in d]
    if a and b:
        ma, mb = statistics.median(a), statistics.median(b)
        print(f"{k:40s} before {ma:9.3f} ms  after {mb:9.3f} ms  {mb/ma:5.2f}x")
PY
echo "raw criterion output: $OUT"
