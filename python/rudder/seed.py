"""The seed chapter's ``TaskStore`` on rudder's store: a drop-in.

Code written for the seed's ``TaskStore`` (``create``, ``get``,
``provide_input``, ``complete``, ``cancel``, the chapter's ``reclaim``
exercise, snapshots with ``task_id``, ``status``, ``input_schema``,
``input_value``, ``result``, ``idempotency_key``) runs on this class unchanged
but for the import::

    from rudder.seed import TaskStore

    store = TaskStore("tasks.json")          # or "sqlite:tasks.db", "postgres://..."

The store is rudder's: every write is atomic and durable, concurrent writers
never lose each other's updates, only the task at hand is written (SQLite and
PostgreSQL), and files the seed wrote load unchanged. The TUI (``rudder
watch``) and the CLI see the same tasks.

Where the seed answers differently from rudder's one policy (which
:class:`rudder.Store` follows), this class answers as the seed does, because
code written for the seed relies on it:

* ``complete`` or ``cancel`` on a finished task returns the task unchanged
  (the seed's silent answer, injections C and D). :class:`rudder.Store`
  returns ``"unchanged"`` only for a true repeat (the same result, a cancel of
  a cancelled task) and raises :class:`rudder.RefusedError` with the current
  snapshot for anything else: a silent success that did nothing is the
  inconsistency the chapter points out, and a conflict should be loud.
* ``provide_input`` on a task that is not waiting raises ``ValueError`` with
  the seed's message (injection B), also when the same input is sent again;
  :class:`rudder.Store` answers a resubmission of the input a task already
  took with ``"unchanged"``, so that retrying after a lost response is safe.
* ``create`` with an idempotency key already used returns that task, even
  when the schema differs; :class:`rudder.Store` raises
  :class:`rudder.IdempotencyConflictError` then, as the same key for a
  different request is a bug in the caller.
* An unknown id raises ``KeyError('unknown task: ID')`` as the seed does
  (injection E), a :class:`rudder.UnknownTaskError`. Unlike the seed, a unique
  prefix of an id is accepted, as everywhere in rudder.
* ``TaskStore()`` without a path is refused: an in-memory store is what lost
  every waiting task in the chapter's incident.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from . import errors
from ._native import Reclaimed, Store, Task

__all__ = [
    "TERMINAL_STATES",
    "NotWaitingForInputError",
    "TaskSnapshot",
    "TaskStore",
    "UnknownTaskError",
]

TERMINAL_STATES = {"completed", "failed", "cancelled"}


@dataclass
class TaskSnapshot:
    """The seed's snapshot of a task (a copy: changing it writes nothing).

    ``updated_at`` is the field the chapter's ``reclaim`` exercise adds (an
    RFC 3339 UTC string, as in the store file).
    """

    task_id: str
    status: str = "working"
    input_schema: dict[str, Any] | None = None
    input_value: dict[str, Any] | None = None
    result: dict[str, Any] | None = None
    idempotency_key: str | None = None
    updated_at: str | None = None

    @classmethod
    def of(cls, task: Task) -> TaskSnapshot:
        updated = task.updated_at
        return cls(
            task_id=task.task_id,
            status=task.status,
            input_schema=task.input_schema,
            input_value=task.input_value,
            result=task.result,
            idempotency_key=task.idempotency_key,
            updated_at=updated.isoformat().replace("+00:00", "Z") if updated else None,
        )


class UnknownTaskError(errors.UnknownTaskError):
    """The seed's ``KeyError('unknown task: ID')``; ``str()`` shows it quoted,
    as a ``KeyError`` does."""

    def __str__(self) -> str:
        return KeyError.__str__(self)


class NotWaitingForInputError(errors.RefusedError, ValueError):
    """The seed's ``ValueError('task is not waiting for input: STATUS')``;
    ``task`` is the task as it is now."""

    kind = "refused"


class TaskStore:
    """The seed's ``TaskStore(path)`` over any rudder store URL or path."""

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        if path is None:
            raise TypeError(
                "rudder.seed.TaskStore needs a store: a path or a store URL "
                "(the seed's in-memory store loses every task when the process restarts)"
            )
        self.path = path
        self.store = Store(path)

    def __repr__(self) -> str:
        return f"TaskStore({self.store.url!r})"

    @property
    def tasks(self) -> dict[str, TaskSnapshot]:
        """Every task, read from the store now, by id, in store order."""
        return {t.task_id: TaskSnapshot.of(t) for t in self.store.list()}

    def create(
        self,
        input_schema: dict[str, Any] | None = None,
        idempotency_key: str | None = None,
    ) -> TaskSnapshot:
        """A new task: ``input_required`` with a schema, else ``working``.
        An idempotency key already used returns that task."""
        try:
            outcome = self.store.create(input_schema=input_schema, idempotency_key=idempotency_key)
        except errors.IdempotencyConflictError as e:
            assert e.task is not None
            return TaskSnapshot.of(e.task)
        return TaskSnapshot.of(outcome.task)

    def get(self, task_id: str) -> TaskSnapshot:
        """The task; ``KeyError('unknown task: ID')`` if there is none."""
        return TaskSnapshot.of(self._call(task_id, self.store.get, task_id))

    def provide_input(self, task_id: str, value: dict[str, Any]) -> TaskSnapshot:
        """Give a waiting task its input (validated against its schema: a
        ``rudder.InvalidInputError``, a ``ValueError``, if it does not fit);
        ``ValueError('task is not waiting for input: STATUS')`` otherwise."""
        try:
            outcome = self._call(task_id, self.store.provide_input, task_id, value)
        except errors.RefusedError as e:
            assert e.task is not None
            raise self._not_waiting(e.task) from None
        if not outcome.applied:
            # A resubmission: the seed refuses it like any other.
            raise self._not_waiting(outcome.task)
        return TaskSnapshot.of(outcome.task)

    def complete(self, task_id: str, result: dict[str, Any]) -> TaskSnapshot:
        """Complete the task; a finished task is returned unchanged."""
        return self._finish(task_id, lambda: self.store.complete(task_id, result))

    def cancel(self, task_id: str) -> TaskSnapshot:
        """Cancel the task; a finished task is returned unchanged."""
        return self._finish(task_id, lambda: self.store.cancel(task_id))

    def reclaim(self, timeout_seconds: float) -> list[Reclaimed]:
        """The chapter's exercise: fail every unfinished task not updated for
        ``timeout_seconds`` (finished tasks are never touched), and return
        what was reclaimed: each entry's ``task_id``, ``status_before``,
        ``idle_ms`` and ``last_update`` explain it. Tasks a live worker lease
        holds are left alone (rudder's reclaim; see ``Store.reclaim`` for the
        full report)."""
        return self.store.reclaim(timeout_seconds).reclaimed

    def _finish(self, task_id: str, op: Any) -> TaskSnapshot:
        try:
            outcome = self._call(task_id, op)
        except errors.RefusedError as e:
            if e.task is not None and e.task.status in TERMINAL_STATES:
                return TaskSnapshot.of(e.task)
            raise
        return TaskSnapshot.of(outcome.task)

    @staticmethod
    def _not_waiting(task: Task) -> NotWaitingForInputError:
        e = NotWaitingForInputError(f"task is not waiting for input: {task.status}")
        e.task = task
        e.op = "provide_input"
        return e

    @staticmethod
    def _call(task_id: str, op: Any, *args: Any) -> Any:
        try:
            return op(*args)
        except errors.UnknownTaskError:
            e = UnknownTaskError(f"unknown task: {task_id}")
            e.task_id = task_id
            raise e from None
