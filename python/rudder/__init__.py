"""rudder for Python: durable tasks on rudder's store.

``rudder.Store(url)`` opens a store (a JSON file, ``sqlite:PATH``, or
``postgres://...``) with every operation of the ``rudder`` CLI;
``rudder.seed.TaskStore(path)`` is the seed chapter's interface on top of it.
The exceptions are in :mod:`rudder.errors` (re-exported here).
"""

from __future__ import annotations

from . import errors
from ._native import (
    DEFAULT_LEASE_SECONDS,
    Answer,
    Job,
    Worker,
    MAX_VALUE_DEPTH,
    HistoryEntry,
    Outcome,
    Pruned,
    PruneReport,
    Reclaimed,
    ReclaimReport,
    Skipped,
    Store,
    Task,
)
from .errors import *  # noqa: F403

#: The statuses a task can have; the last three are terminal.
STATUSES = ("working", "input_required", "completed", "failed", "cancelled")
#: The statuses a task never leaves.
TERMINAL_STATUSES = frozenset({"completed", "failed", "cancelled"})

__all__ = [
    "DEFAULT_LEASE_SECONDS",
    "MAX_VALUE_DEPTH",
    "STATUSES",
    "TERMINAL_STATUSES",
    "HistoryEntry",
    "Outcome",
    "Pruned",
    "PruneReport",
    "Reclaimed",
    "ReclaimReport",
    "Skipped",
    "Store",
    "Task",
    "Worker",
    "Job",
    "Answer",
    "errors",
    *errors.__all__,
]
