"""The seed chapter's own TaskStore, as the chapter shows it (the methods it
does not print are written the way the chapter describes them): the
baseline of bench.py. Not part of the package."""

from __future__ import annotations

import json
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

TERMINAL_STATES = {"completed", "failed", "cancelled"}


@dataclass
class TaskSnapshot:
    task_id: str
    status: str = "working"
    input_schema: dict[str, Any] | None = None
    input_value: dict[str, Any] | None = None
    result: dict[str, Any] | None = None
    idempotency_key: str | None = None


class TaskStore:
    def __init__(self, path: str | Path | None = None) -> None:
        self.path = Path(path) if path else None
        self.tasks: dict[str, TaskSnapshot] = {}
        if self.path and self.path.exists():
            payload = json.loads(self.path.read_text(encoding="utf-8"))
            self.tasks = {key: TaskSnapshot(**value) for key, value in payload.items()}

    def create(self, input_schema: dict[str, Any] | None = None, idempotency_key: str | None = None) -> TaskSnapshot:
        if idempotency_key:
            for task in self.tasks.values():
                if task.idempotency_key == idempotency_key:
                    return task
        task = TaskSnapshot(
            str(uuid.uuid4()), "input_required" if input_schema else "working", input_schema, idempotency_key=idempotency_key
        )
        self.tasks[task.task_id] = task
        self._save()
        return task

    def get(self, task_id: str) -> TaskSnapshot:
        try:
            return self.tasks[task_id]
        except KeyError:
            raise KeyError(f"unknown task: {task_id}") from None

    def provide_input(self, task_id: str, value: dict[str, Any]) -> TaskSnapshot:
        task = self.get(task_id)
        if task.status != "input_required":
            raise ValueError(f"task is not waiting for input: {task.status}")
        task.input_value = value
        task.status = "working"
        self._save()
        return task

    def complete(self, task_id: str, result: dict[str, Any]) -> TaskSnapshot:
        task = self.get(task_id)
        if task.status in TERMINAL_STATES:
            return task
        task.result = result
        task.status = "completed"
        self._save()
        return task

    def cancel(self, task_id: str) -> TaskSnapshot:
        task = self.get(task_id)
        if task.status in TERMINAL_STATES:
            return task
        task.status = "cancelled"
        self._save()
        return task

    def _save(self) -> None:
        if not self.path:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text(
            json.dumps({key: asdict(value) for key, value in self.tasks.items()}, ensure_ascii=False, indent=2),
            encoding="utf-8",
        )
