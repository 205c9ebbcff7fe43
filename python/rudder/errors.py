"""rudder's exceptions: one class per error kind of the CLI.

Every exception rudder raises is a :class:`RudderError` with ``kind`` (the
name ``rudder --json`` prints in ``"error"``) and ``exit_code`` (the CLI's
exit code for it), and its message is the CLI's. Where a Python built-in
means the same, the class is that too, so ``except KeyError`` and ``except
ValueError`` work as a Python programmer expects:

========================  ======================  ====  ===========================
class                     kind                    exit  also a
========================  ======================  ====  ===========================
UsageError                usage                   2     ValueError
InvalidSchemaError        invalid_schema          2     ValueError
TooDeepError              too_deep                2     ValueError
ReservedKeyError          reserved_key            2     ValueError
InvalidKindError          invalid_kind            2     ValueError
UnknownTaskError          unknown_task            3     KeyError
AmbiguousIdError          ambiguous_id            3     KeyError
VanishedError             vanished                3     KeyError
RefusedError              refused                 4
IdempotencyConflictError  idempotency_conflict    4     RefusedError
StaleRevisionError        stale_revision          4     RefusedError
LeaseLostError            lease_lost              4     RefusedError
RevisionExhaustedError    revision_exhausted      4     RefusedError
CopyRefusedError          copy_refused            4     RefusedError
JobStopped                refused, lease_lost...  4     RefusedError
InvalidInputError         invalid_input           5     ValueError
StoreUnavailableError     (base of the next six)  6
CorruptStoreError         corrupt_store           6     StoreUnavailableError
NotAStoreError            not_a_store             6     StoreUnavailableError
DatabaseError             database                6     StoreUnavailableError
StoreUnreachableError     database                6     DatabaseError
TooLargeError             too_large               6     StoreUnavailableError
StoreIOError              io                      6     StoreUnavailableError, OSError
LockTimeoutError          lock_timeout            6     StoreUnavailableError
WaitTimeoutError          timeout                 124   TimeoutError
StoreClosedError          closed                  -     ValueError
ForkedStoreError          forked                  -     RuntimeError
========================  ======================  ====  ===========================

Refusals carry the task's current snapshot in ``task`` (read the real state
from it, never assume the write won); ``InvalidInputError.violations`` lists
every violation with its JSON pointer. Values Python cannot express in JSON
(a set, bytes, NaN, a cycle) raise the built-in ``TypeError``/``ValueError``
naming the field and the JSON pointer, before anything is written.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from ._native import Task

__all__ = [
    "RudderError",
    "UsageError",
    "InvalidSchemaError",
    "TooDeepError",
    "ReservedKeyError",
    "InvalidKindError",
    "UnknownTaskError",
    "AmbiguousIdError",
    "VanishedError",
    "RefusedError",
    "IdempotencyConflictError",
    "StaleRevisionError",
    "LeaseLostError",
    "RevisionExhaustedError",
    "CopyRefusedError",
    "JobStopped",
    "InvalidInputError",
    "Violation",
    "StoreUnavailableError",
    "CorruptStoreError",
    "NotAStoreError",
    "DatabaseError",
    "StoreUnreachableError",
    "TooLargeError",
    "StoreIOError",
    "LockTimeoutError",
    "WaitTimeoutError",
    "StoreClosedError",
    "ForkedStoreError",
]


class RudderError(Exception):
    """Base of every rudder error: ``kind``, ``exit_code``, ``message``."""

    kind: str = "error"
    exit_code: int = 1
    #: The task's current snapshot, for refusals (and the last one seen, for
    #: a wait that ended without an answer); ``None`` otherwise.
    task: Task | None = None
    #: The store as messages show it, for errors about the store itself.
    store: str | None = None

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        # KeyError's own __str__ would show the message quoted.
        return self.message


class UsageError(RudderError, ValueError):
    """A bad argument: a store URL rudder cannot open, an unknown status."""

    kind = "usage"
    exit_code = 2


class InvalidSchemaError(RudderError, ValueError):
    """The given JSON Schema is not valid."""

    kind = "invalid_schema"
    exit_code = 2


class TooDeepError(RudderError, ValueError):
    """A value nests deeper than a store may hold (``field``, ``limit``)."""

    kind = "too_deep"
    exit_code = 2
    field: str
    limit: int


class ReservedKeyError(RudderError, ValueError):
    """A value holds an object whose first key is serde_json's private number
    marker, which every reader would take for a number."""

    kind = "reserved_key"
    exit_code = 2
    field: str
    pointer: str


class InvalidKindError(RudderError, ValueError):
    """A task kind that is not one (``value``): empty, too long, or with
    characters a kind may not have."""

    kind = "invalid_kind"
    exit_code = 2
    value: str


class UnknownTaskError(RudderError, KeyError):
    """No task has this id (``task_id``)."""

    kind = "unknown_task"
    exit_code = 3
    task_id: str


class AmbiguousIdError(RudderError, KeyError):
    """The id prefix ``task_id`` starts several task ids (``candidates``)."""

    kind = "ambiguous_id"
    exit_code = 3
    task_id: str
    candidates: list[str]


class VanishedError(RudderError, KeyError):
    """``wait``: the task disappeared while last seen unfinished (``task``)."""

    kind = "vanished"
    exit_code = 3


class RefusedError(RudderError):
    """The state machine or a finished task refuses the operation; nothing
    was written. ``task`` is the task as it is now, ``op`` the operation."""

    kind = "refused"
    exit_code = 4
    op: str


class IdempotencyConflictError(RefusedError):
    """The key (``key``) belongs to a task created with a different
    ``field`` (``input_schema`` or ``request``)."""

    kind = "idempotency_conflict"
    key: str
    field: str


class StaleRevisionError(RefusedError):
    """The task changed since ``expected_revision``."""

    kind = "stale_revision"
    expected_revision: int


class LeaseLostError(RefusedError):
    """Another worker holds the task's lease (or this one's lapsed)."""

    kind = "lease_lost"


class RevisionExhaustedError(RefusedError):
    """The task's revision can grow no further."""

    kind = "revision_exhausted"


class JobStopped(RefusedError):
    """The store refused a job's write or lease renewal: stop working the
    task. ``reason`` says why: ``"cancelled"``, ``"finished"`` (by someone
    else, or reclaimed), ``"lease_lost"`` (another worker holds it now),
    ``"unknown"`` (the task is gone) or ``"refused"``; ``task`` is the task as
    it is now. Leaving a ``with job:`` block with it swallows it: the worker
    obeys and goes on with its next job."""

    reason: str


class CopyRefusedError(RefusedError):
    """``copy``: the destination holds other data."""

    kind = "copy_refused"


class Violation(NamedTuple):
    """One way an input fails its schema: where (a JSON pointer, ``""`` for
    the whole input) and why."""

    pointer: str
    message: str


class InvalidInputError(RudderError, ValueError):
    """The input does not validate against the task's schema; nothing was
    written. ``violations`` lists every violation."""

    kind = "invalid_input"
    exit_code = 5
    task_id: str
    violations: list[Violation]


class StoreUnavailableError(RudderError):
    """The store cannot be read or written now: unreadable, corrupt, not a
    store, its server unreachable, its lock held too long. ``store`` names it
    (a password redacted)."""

    kind = "store"
    exit_code = 6


class CorruptStoreError(StoreUnavailableError):
    """The store does not read back (``line``, ``column`` for a file); it
    was left untouched."""

    kind = "corrupt_store"
    line: int | None
    column: int | None


class NotAStoreError(StoreUnavailableError):
    """A readable store rudder may not use (another application's, newer)."""

    kind = "not_a_store"


class DatabaseError(StoreUnavailableError):
    """The database reported an error."""

    kind = "database"


class StoreUnreachableError(DatabaseError):
    """The store's database server cannot be reached now (down, restarting,
    the connection cut): worth retrying."""


class TooLargeError(StoreUnavailableError):
    """The write would grow the store past its limit (``size``, ``limit``)."""

    kind = "too_large"
    size: int
    limit: int


class StoreIOError(StoreUnavailableError, OSError):
    """A file-system call on the store's files failed."""

    kind = "io"

    def __init__(self, message: str) -> None:
        StoreUnavailableError.__init__(self, message)

    def __str__(self) -> str:
        return self.message


class LockTimeoutError(StoreUnavailableError):
    """Another writer held the store's lock longer than the lock timeout."""

    kind = "lock_timeout"


class WaitTimeoutError(RudderError, TimeoutError):
    """``wait`` timed out; ``task`` is the task as last seen."""

    kind = "timeout"
    exit_code = 124

    def __init__(self, message: str) -> None:
        RudderError.__init__(self, message)

    def __str__(self) -> str:
        return self.message


class StoreClosedError(RudderError, ValueError):
    """The ``Store`` (or a worker or job of it) was closed."""

    kind = "closed"


class ForkedStoreError(RudderError, RuntimeError):
    """The ``Store`` was opened by the parent of this forked process: open
    the store again in the child."""

    kind = "forked"

