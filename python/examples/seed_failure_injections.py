"""The seed chapter's failure injections A-E on ``rudder.seed.TaskStore``.

Prints what the chapter says they print::

    8A. idempotent create -> same task: True | status: input_required
    8B. provide_input on working -> task is not waiting for input: working
    8C. complete twice -> status: completed | result unchanged: True
    8D. cancel after completed -> status: completed
    8E. unknown task -> 'unknown task: no-such-task'

Run: ``python python/examples/seed_failure_injections.py [STORE]``.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from rudder.seed import TaskStore


def main(path: str | Path) -> None:
    store = TaskStore(path)

    # A: the same idempotency key returns the same task.
    first = store.create({"type": "object", "required": ["service"]}, idempotency_key="incident-1")
    again = store.create({"type": "object", "required": ["service"]}, idempotency_key="incident-1")
    print("8A. idempotent create -> same task:", first.task_id == again.task_id, "| status:", again.status)

    # B: input for a task that is not waiting for it.
    working = store.create()
    try:
        store.provide_input(working.task_id, {"service": "payments"})
    except ValueError as exc:
        print("8B. provide_input on working ->", exc)

    # C: completing twice keeps the first result.
    task_id = working.task_id
    done = store.complete(task_id, {"summary": "no active incident"})
    second = store.complete(task_id, {"summary": "rewritten!"})
    print("8C. complete twice -> status:", second.status, "| result unchanged:", second.result == done.result)

    # D: cancel after completed.
    after = store.cancel(task_id)
    print("8D. cancel after completed -> status:", after.status)

    # E: an unknown handle.
    try:
        store.get("no-such-task")
    except KeyError as exc:
        print("8E. unknown task ->", exc)


if __name__ == "__main__":
    if len(sys.argv) > 1:
        main(sys.argv[1])
    else:
        with tempfile.TemporaryDirectory() as d:
            main(Path(d) / "tasks.json")
