#!/bin/sh
# A shell worker (docs/workers.md): claims tasks of kind `greet`, reports
# three steps, completes each with a greeting. Needs jq.
#
#   RUDDER_STORE=sqlite:tasks.db examples/worker.sh          # until stopped
#   RUDDER_STORE=sqlite:tasks.db ONCE=1 examples/worker.sh   # one task
#
# Every write carries --holder: once another worker took the task over
# (this script stalled past its lease), the write is refused with exit 4
# and the script drops the task.
set -eu
rudder=${RUDDER:-rudder}

while :; do
    # Exit 10: nothing was claimable within --wait.
    if claimed=$("$rudder" claim --kind greet --lease 30s --wait "${WAIT:-60s}" --json); then
        :
    else
        code=$?
        [ "$code" -eq 10 ] && { [ -n "${ONCE:-}" ] && exit 0; continue; }
        exit "$code"
    fi
    id=$(printf '%s' "$claimed" | jq -r .task.task_id)
    holder=$(printf '%s' "$claimed" | jq -r .holder)
    name=$(printf '%s' "$claimed" | jq -r '.task.request.name // "stranger"')

    ok=1
    for step in 1 2 3; do
        # Each heartbeat renews the lease (--lease) and says how far it is.
        "$rudder" heartbeat "$id" --holder "$holder" --lease 30s \
            --message "step $step/3: greeting $name" >/dev/null || { ok=0; break; }
    done
    if [ "$ok" -eq 1 ]; then
        result=$(jq -cn --arg name "$name" '{greeting: ("hello, " + $name)}')
        "$rudder" complete "$id" --holder "$holder" --result "$result" >/dev/null || ok=0
    fi
    [ "$ok" -eq 1 ] || echo "worker.sh: task $id was taken over or cancelled: dropped" >&2
    [ -n "${ONCE:-}" ] && exit 0
done
