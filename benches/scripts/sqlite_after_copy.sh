#!/bin/bash
# Used by docs/performance.md (issue 18).
# usage: sqlite_after_copy.sh RUDDER DB ID PYDB PYID ; 20 interleaved runs, medians (ms)
R=$1 DB=$2 ID=$3 PYDB=$4 PYID=$5
PYU='import sqlite3,sys
c=sqlite3.connect(sys.argv[1]); c.execute("UPDATE tasks SET revision = revision + 1 WHERE task_id = ?", (sys.argv[2],)); c.commit()'
uptime
for i in $(seq 20); do
  a=$(date +%s%N); ${PYTHON:-python3} -c "$PYU" "$PYDB" "$PYID"; b=$(date +%s%N)
  "$R" --store "sqlite:$DB" heartbeat "$ID" >/dev/null || echo FAIL; c=$(date +%s%N)
  echo "$(( (b-a)/1000 )) $(( (c-b)/1000 ))"
done > ${TMPDIR:-/tmp}/bench-hb.out
uptime
python3 - <<PY
import statistics
rows=[tuple(map(int,l.split())) for l in open('${TMPDIR:-/tmp}/bench-hb.out')]
p=statistics.median(r[0] for r in rows)/1000; r=statistics.median(r[1] for r in rows)/1000
print(f"python UPDATE median {p:.1f} ms, rudder heartbeat median {r:.1f} ms, ratio {r/p:.2f}x")
print("rudder runs ms:", sorted(round(x[1]/1000,1) for x in rows))
print("python runs ms:", sorted(round(x[0]/1000,1) for x in rows))
PY
