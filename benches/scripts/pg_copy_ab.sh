#!/bin/bash
# Used by docs/performance.md (issue 18, the copy's text index).
# usage: pg_copy_ab.sh BEFORE AFTER JSON ROUNDS ; two rudder binaries, a throwaway durable
# cluster (as pg_copy_heartbeat.sh), then ROUNDS x (BEFORE, AFTER) `rudder copy JSON` into new databases
set -e
A=$1 B=$2 J=$3 N=${4:-1}
PG="$(dirname "$0")/../../scripts/pg-local.sh"  # as root or not
D=$(mktemp -d /tmp/bench-pg.XXXX); "$PG" own "$D"; PORT=$((20000 + RANDOM % 20000))
"$PG" run initdb -D "$D/data" -U rudder -E UTF8 --no-sync --no-instructions --locale=C --auth=trust >/dev/null
"$PG" run pg_ctl -D "$D/data" -l "$D/log" -w -t 60 -o "-k $D -h 127.0.0.1 -p $PORT -c fsync=on -c max_connections=300 -c shared_buffers=16MB" start >/dev/null
echo "cluster: $D port $PORT (stop it with $PG run pg_ctl -D $D/data stop)"
for r in $(seq "$N"); do for v in before after; do
  db=c_${v}_$r; bin=$A; [ $v = after ] && bin=$B
  psql -q -X -h 127.0.0.1 -p $PORT -U rudder -d postgres -c "CREATE DATABASE $db"
  /usr/bin/time -f "$v $(basename "$J") round $r: %e s, peak %M KiB" "$bin" copy "$J" "postgres://rudder@127.0.0.1:$PORT/$db" >/dev/null
  echo "  load: $(cut -d' ' -f1-3 /proc/loadavg)"
  psql -q -X -h 127.0.0.1 -p $PORT -U rudder -d postgres -c "DROP DATABASE $db"
done; done
