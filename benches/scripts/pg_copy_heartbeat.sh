#!/bin/bash
# Used by docs/performance.md (issue 18).
# usage: pg_copy_heartbeat.sh RUDDER JSON100K ; throwaway durable cluster, copy, then 20 interleaved heartbeats vs psql over TCP
set -e
R=$1 J=$2
PG="$(dirname "$0")/../../scripts/pg-local.sh"  # as root or not
D=$(mktemp -d /tmp/bench-pg.XXXX); "$PG" own "$D"; PORT=$((20000 + RANDOM % 20000))
"$PG" run initdb -D "$D/data" -U rudder -E UTF8 --no-sync --no-instructions --locale=C --auth=trust >/dev/null
"$PG" run pg_ctl -D "$D/data" -l "$D/log" -w -t 60 -o "-k $D -h 127.0.0.1 -p $PORT -c fsync=on -c max_connections=300 -c shared_buffers=16MB" start >/dev/null
psql -q -X -h 127.0.0.1 -p $PORT -U rudder -d postgres -c "CREATE DATABASE c1" -c "CREATE DATABASE c2"
echo "cluster: $D port $PORT (stop it with $PG run pg_ctl -D $D/data stop)"
for db in c1 c2; do
  uptime
  /usr/bin/time -f "copy into $db: %e s, peak %M KiB" "$R" copy "$J" "postgres://rudder@127.0.0.1:$PORT/$db" >/dev/null
done
ID=$(head -c 40 "$J" | cut -d'"' -f2)
URL="postgres://rudder@127.0.0.1:$PORT/c1"
UPD="UPDATE rudder_tasks SET revision = revision + 1, updated_at = now()::text WHERE task_id = '$ID'"
uptime
for i in $(seq 20); do
  a=$(date +%s%N); psql -q -X -d "$URL" -c "$UPD" >/dev/null; b=$(date +%s%N)
  "$R" --store "$URL" heartbeat "$ID" >/dev/null || echo FAIL; c=$(date +%s%N)
  echo "$(( (b-a)/1000 )) $(( (c-b)/1000 ))"
done > ${TMPDIR:-/tmp}/bench-pg.out
uptime
python3 - <<PY
import statistics
rows=[tuple(map(int,l.split())) for l in open('${TMPDIR:-/tmp}/bench-pg.out')]
p=statistics.median(r[0] for r in rows)/1000; r=statistics.median(r[1] for r in rows)/1000
print(f"psql -c UPDATE median {p:.1f} ms, rudder heartbeat median {r:.1f} ms, ratio {r/p:.2f}x")
print("rudder ms:", sorted(round(x[1]/1000,1) for x in rows)); print("psql ms:", sorted(round(x[0]/1000,1) for x in rows))
PY
