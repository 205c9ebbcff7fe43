"""The seed chapter's example (07_task_recovery.py) on rudder's store.

Two ``TaskStore`` objects on one store stand for a process restart: the
second restores the first's waiting task, gives it its input and completes
it. Prints::

    restored: <task id> input_required
    input: working
    completed: completed

Run: ``python python/examples/seed_task_recovery.py [STORE]`` (a path or a
store URL; a temporary JSON file by default).
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from rudder.seed import TaskStore


def main(path: str | Path) -> None:
    first = TaskStore(path)
    task = first.create({"type": "object", "required": ["service"]}, idempotency_key="incident-1")
    second = TaskStore(path)  # a new process: it knows nothing of `first`
    restored = second.get(task.task_id)
    print("restored:", restored.task_id, restored.status)
    given = second.provide_input(task.task_id, {"service": "payments"})
    print("input:", given.status)
    done = second.complete(task.task_id, {"summary": "no active incident"})
    print("completed:", done.status)


if __name__ == "__main__":
    if len(sys.argv) > 1:
        main(sys.argv[1])
    else:
        with tempfile.TemporaryDirectory() as d:
            main(Path(d) / "tasks.json")
