"""rudder.Store: the whole API on every backend, the JSON crossing, the
exceptions, threads, close and fork."""

from __future__ import annotations

import _thread
import json
import os
import subprocess
import threading
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

import rudder

SCHEMA = {"type": "object", "required": ["service"], "properties": {"service": {"type": "string"}}}


def cli(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    """The Rust CLI on the same store."""
    binary = os.environ.get("RUDDER_BIN", "rudder")
    return subprocess.run([binary, "--store", url, *args], capture_output=True, text=True)


def test_a_bad_url_fails_at_once() -> None:
    with pytest.raises(rudder.UsageError) as bad:
        rudder.Store("sqlite:")
    assert isinstance(bad.value, ValueError)
    assert bad.value.kind == "usage" and bad.value.exit_code == 2
    with pytest.raises(ValueError, match="not a PostgreSQL URL"):
        rudder.Store("postgres://u:secret@host:notaport/db")
    with pytest.raises(ValueError) as redacted:
        rudder.Store("postgres://u:secret@host:notaport/db")
    assert "secret" not in str(redacted.value)


def test_create_takes_every_field_and_the_task_has_every_field(store: rudder.Store) -> None:
    before = datetime.now(timezone.utc)
    outcome = store.create(
        title="INC-1042 checkout latency",
        idempotency_key="incident-1042",
        input_schema=SCHEMA,
        request={"service": "checkout", "window": [1, 2]},
        message="which service?",
        ttl=timedelta(hours=1),
        poll_interval=2.5,
    )
    assert outcome.change == "applied" and outcome.applied
    t = outcome.task
    assert t.status == "input_required"
    assert t.title == "INC-1042 checkout latency"
    assert t.idempotency_key == "incident-1042"
    assert t.input_schema == SCHEMA
    assert t.request == {"service": "checkout", "window": [1, 2]}
    assert t.status_message == "which service?"
    assert t.ttl_ms == 3_600_000 and t.poll_interval_ms == 2500
    assert t.revision == 1
    assert t.created_at is not None and t.created_at >= before and t.created_at.tzinfo is not None
    assert t.updated_at == t.created_at
    assert [(h.status, h.note) for h in t.history] == [("input_required", "created")]
    assert t.input_value is None and t.result is None and t.error is None and t.progress is None
    assert t.claimed_by is None and t.lease_expires_at is None and t.extra == {}
    assert not t.is_terminal
    assert store.get(t.task_id) == t
    assert store.get(t.task_id[:8]) == t  # a unique prefix
    again = store.create(idempotency_key="incident-1042", input_schema=SCHEMA, request={"service": "checkout", "window": [1, 2]})
    assert again.change == "unchanged" and again.task == t
    with pytest.raises(rudder.IdempotencyConflictError) as conflict:
        store.create(idempotency_key="incident-1042")
    assert isinstance(conflict.value, rudder.RefusedError)
    assert conflict.value.task == t and conflict.value.field == "input_schema"


def test_json_values_cross_losslessly(store: rudder.Store) -> None:
    value: dict[str, Any] = {
        "big": 2**200,
        "negative": -(2**100),
        "u64": 2**64 - 1,
        "floats": [0.1, 1e300, 5e-324, -0.0, 1.0],
        "text": "naïve ☃ \"quoted\" \t\n",
        "flags": [True, False, None],
        "tuple": (1, 2),
        "order": {"z": 1, "a": 2, "m": 3},
    }
    task = store.create(request=value).task
    back = store.get(task.task_id).request
    assert back["big"] == 2**200 and isinstance(back["big"], int)
    assert back["negative"] == -(2**100) and back["u64"] == 2**64 - 1
    assert back["floats"] == [0.1, 1e300, 5e-324, -0.0, 1.0]
    assert all(isinstance(f, float) for f in back["floats"])
    assert back["text"] == value["text"]
    assert back["flags"] == [True, False, None] and back["flags"][0] is True
    assert back["tuple"] == [1, 2]
    assert list(back["order"]) == ["z", "a", "m"]
    # The CLI reads the very same numbers.
    shown = json.loads(cli(store.url, "get", task.task_id, "--json").stdout)
    assert shown["request"]["big"] == 2**200


@pytest.mark.parametrize(
    ("value", "error", "where"),
    [
        ({"a": {1, 2}}, TypeError, "request at /a: a value of type set"),
        ({"a": [b"x"]}, TypeError, "request at /a/0: a value of type bytes"),
        ({"a": float("nan")}, ValueError, "request at /a: NaN is not a JSON value"),
        ([1, float("inf")], ValueError, "request at /1: inf"),
        ({1: "x"}, TypeError, "request: a key of type int"),
        ({"a/b": object()}, TypeError, "request at /a~1b: a value of type object"),
    ],
)
def test_what_json_cannot_express_is_refused_naming_the_path(
    store: rudder.Store, value: Any, error: type[Exception], where: str
) -> None:
    with pytest.raises(error) as refused:
        store.create(request=value)
    assert str(refused.value).startswith(where), str(refused.value)
    assert "nothing was written" in str(refused.value)
    assert store.list() == []


def test_cycles_are_refused_naming_the_path(store: rudder.Store) -> None:
    d: dict[str, Any] = {"x": []}
    d["x"].append(d)
    with pytest.raises(ValueError, match=r"^request at /x/0: the value contains itself"):
        store.create(request=d)
    task = store.create().task
    loop: list[Any] = []
    loop.append(loop)
    with pytest.raises(ValueError, match="contains itself"):
        store.complete(task.task_id, loop)
    assert store.get(task.task_id) == task
    # The same object twice, side by side, is no cycle.
    shared = {"k": 1}
    assert store.complete(task.task_id, [shared, shared]).task.result == [{"k": 1}, {"k": 1}]


def test_too_deep_a_value_is_refused_without_exhausting_the_stack(store: rudder.Store) -> None:
    deep: list[Any] = []
    for _ in range(100_000):
        deep = [deep]
    with pytest.raises(rudder.TooDeepError) as refused:
        store.create(request=deep)
    assert isinstance(refused.value, ValueError) and refused.value.field == "request"
    assert store.list() == []


def test_list_filters_orders_and_pages(store: rudder.Store) -> None:
    ids = [store.create(title=t).task.task_id for t in ["c", "a", "b", "e", "d"]]
    store.complete(ids[0], {"ok": True})
    store.fail(ids[1], "broken")
    assert [t.task_id for t in store.list()] == ids
    assert [t.title for t in store.list(status="working")] == ["b", "e", "d"]
    assert {t.title for t in store.list(status=["completed", "failed"])} == {"c", "a"}
    assert [t.title for t in store.list(sort="title")] == ["a", "b", "c", "d", "e"]
    assert [t.title for t in store.list(sort="title", descending=True)] == ["e", "d", "c", "b", "a"]
    first = store.list(sort="title", limit=2)
    assert [t.title for t in first] == ["a", "b"]
    rest = store.list(sort="title", limit=2, after=first[-1].task_id)
    assert [t.title for t in rest] == ["c", "d"]
    assert [t.title for t in store.list(text=ids[3][:13].upper())] == ["e"]
    assert store.counts() == {"working": 3, "input_required": 0, "completed": 1, "failed": 1, "cancelled": 0}
    with pytest.raises(rudder.UsageError, match="sort"):
        store.list(sort="size")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="status"):
        store.list(status="done")  # type: ignore[arg-type]


def test_the_lifecycle_and_the_one_policy(store: rudder.Store) -> None:
    task = store.create(input_schema=SCHEMA).task
    with pytest.raises(rudder.InvalidInputError) as invalid:
        store.provide_input(task.task_id, {"service": 3})
    assert isinstance(invalid.value, ValueError)
    assert invalid.value.violations[0].pointer == "/service"
    assert invalid.value.exit_code == 5 and invalid.value.task_id == task.task_id
    with pytest.raises(rudder.StaleRevisionError) as stale:
        store.provide_input(task.task_id, {"service": "db"}, expected_revision=7)
    assert stale.value.task == task and stale.value.expected_revision == 7
    given = store.provide_input(task.task_id, {"service": "db"}, expected_revision=1)
    assert given.task.status == "working" and given.task.input_value == {"service": "db"}
    assert store.provide_input(task.task_id, {"service": "db"}).change == "unchanged"
    asked = store.request_input(task.task_id, {"type": "object", "required": ["ok"]}, message="sure?")
    assert asked.task.status == "input_required" and asked.task.status_message == "sure?"
    store.provide_input(task.task_id, {"ok": True})
    beat = store.heartbeat(task.task_id, message="step 2", progress=(2, 3))
    assert beat.task.progress == (2, 3) and beat.task.status_message == "step 2"
    done = store.complete(task.task_id, {"summary": "fine"})
    assert done.task.status == "completed" and done.task.is_terminal
    with pytest.raises(rudder.RefusedError) as refused:
        store.fail(task.task_id, "late")
    assert refused.value.op == "fail" and refused.value.task == done.task
    assert refused.value.kind == "refused" and refused.value.exit_code == 4
    other = store.create().task
    assert store.cancel(other.task_id, "not needed").task.status == "cancelled"
    assert store.cancel(other.task_id).change == "unchanged"


def test_a_holders_write_renews_the_lease_for_the_length_it_was_claimed_with(
    store: rudder.Store,
) -> None:
    """A claim's lease length is recorded with the claim: a heartbeat by
    its holder that names no lease renews for that length (2 s), not for
    the default 30 s; one that names a length keeps it from then on."""
    task = store.create().task
    claimed = store.claim_next("worker-a", lease=2)
    assert claimed is not None and claimed.task_id == task.task_id

    def lease_of(t: rudder.Task) -> timedelta:
        # The lease runs from the write that renewed it (no clock read
        # here, so a slow machine cannot move it).
        assert t.lease_expires_at is not None and t.updated_at is not None
        return t.lease_expires_at - t.updated_at

    assert lease_of(store.heartbeat(task.task_id, holder="worker-a").task) == timedelta(seconds=2)
    store.heartbeat(task.task_id, holder="worker-a", lease=120)
    again = store.heartbeat(task.task_id, holder="worker-a").task
    assert lease_of(again) == timedelta(seconds=120)


def test_leases_refuse_a_worker_that_lost_its_claim(store: rudder.Store) -> None:
    task = store.create().task
    claimed = store.claim_next("worker-a", lease=60)
    assert claimed is not None and claimed.task_id == task.task_id
    assert claimed.claimed_by == "worker-a" and claimed.lease_expires_at is not None
    assert store.claim_next("worker-b", lease=60) is None
    with pytest.raises(rudder.LeaseLostError) as lost:
        store.heartbeat(task.task_id, holder="worker-b")
    assert lost.value.task is not None and lost.value.task.claimed_by == "worker-a"
    store.heartbeat(task.task_id, holder="worker-a", lease=60, progress=(1, 2))
    released = store.release(task.task_id, "worker-a")
    assert released.task.claimed_by is None
    assert store.claim(task.task_id, "worker-b").task.claimed_by == "worker-b"
    assert store.complete(task.task_id, 42, holder="worker-b").task.result == 42


def test_reclaim_reports_and_prune_removes(store: rudder.Store) -> None:
    idle = store.create(title="idle").task
    done = store.create(ttl=0).task
    store.complete(done.task_id)
    dry = store.reclaim(0, dry_run=True)
    assert dry.dry_run and [r.task_id for r in dry.reclaimed] == [idle.task_id]
    assert store.get(idle.task_id).status == "working"
    report = store.reclaim(timedelta(0))
    assert not report.dry_run and report.reclaimed[0].status_before == "working"
    assert report.reclaimed[0].title == "idle" and isinstance(report.reclaimed[0].last_update, datetime)
    failed = store.get(idle.task_id)
    assert failed.status == "failed" and failed.error_message is not None
    pruned = store.prune(timedelta(days=1))
    assert [(p.task_id, p.rule) for p in pruned.removed] == [(done.task_id, "ttl")]
    with pytest.raises(rudder.UnknownTaskError):
        store.get(done.task_id)
    with pytest.raises(ValueError, match="older_than"):
        store.prune(-1)


def test_errors_are_the_clis_kinds(store: rudder.Store) -> None:
    task = store.create().task
    store.complete(task.task_id)
    cases: list[tuple[type[rudder.RudderError], tuple[str, ...], Any]] = [
        (rudder.UnknownTaskError, ("get", "no-such-task"), lambda: store.get("no-such-task")),
        (rudder.RefusedError, ("fail", task.task_id, "--error", "x"), lambda: store.fail(task.task_id, "x")),
    ]
    for cls, args, call in cases:
        run = cli(store.url, *args, "--json")
        shown = json.loads(run.stdout or run.stderr)
        with pytest.raises(cls) as raised:
            call()
        assert raised.value.kind == shown["error"] == cls.kind
        assert raised.value.exit_code == shown["exit_code"] == run.returncode
        assert str(raised.value) == shown["message"]


def test_unknown_and_ambiguous_ids_are_key_errors(store: rudder.Store) -> None:
    with pytest.raises(KeyError) as unknown:
        store.get("nope")
    assert isinstance(unknown.value, rudder.UnknownTaskError) and unknown.value.task_id == "nope"
    for _ in range(40):
        store.create()
    with pytest.raises(KeyError) as ambiguous:
        store.get("")
    assert isinstance(ambiguous.value, rudder.UnknownTaskError)
    prefixes: dict[str, int] = {}
    for t in store.list():
        prefixes[t.task_id[0]] = prefixes.get(t.task_id[0], 0) + 1
    shared = next(p for p, n in prefixes.items() if n > 1)
    with pytest.raises(rudder.AmbiguousIdError) as many:
        store.get(shared)
    assert len(many.value.candidates) == prefixes[shared]


def test_earlier_answers_are_left_out_of_to_dict_and_masked_by_the_cli(store: rudder.Store) -> None:
    secret = {"type": "object", "properties": {"token": {"type": "string", "writeOnly": True}}}
    task = store.create(input_schema=secret, message="Which token?").task
    store.provide_input(task.task_id, {"token": "tok-py-1"})
    store.request_input(task.task_id, {"type": "object"}, message="Anything else?")
    got = store.get(task.task_id)
    assert "answered" not in got.to_dict()
    assert "tok-py-1" not in repr(got)
    shown = json.loads(cli(store.url, "get", task.task_id, "--json").stdout)
    assert shown["answered"] == [
        {"message": "Which token?", "input_schema": secret, "input_value": {"token": "••••"}}
    ]


def test_the_cli_and_python_share_one_store(store: rudder.Store) -> None:
    task = store.create(title="from python").task
    shown = json.loads(cli(store.url, "get", task.task_id, "--json").stdout)
    assert shown == task.to_dict()
    run = cli(store.url, "complete", task.task_id, "--result", '{"by": "cli"}')
    assert run.returncode == 0, run.stderr
    assert store.get(task.task_id).result == {"by": "cli"}


def test_wait_follows_the_change_feed_with_the_gil_released(store: rudder.Store) -> None:
    task = store.create().task
    seen: list[str] = []

    def waiter() -> None:
        seen.append(store.wait(task.task_id, timeout=30).status)

    thread = threading.Thread(target=waiter)
    thread.start()
    # This thread keeps running Python while the other waits in the store.
    store.request_input(task.task_id, SCHEMA)
    thread.join(timeout=30)
    assert seen == ["input_required"]
    done = threading.Thread(target=lambda: seen.append(store.wait(task.task_id, terminal=True).status))
    done.start()
    store.provide_input(task.task_id, {"service": "db"})
    store.complete(task.task_id)
    done.join(timeout=30)
    assert seen == ["input_required", "completed"]
    # A finished task answers at once.
    assert store.wait(task.task_id).status == "completed"


def test_wait_times_out_as_a_timeout_error(store: rudder.Store) -> None:
    task = store.create().task
    with pytest.raises(TimeoutError) as timed_out:
        store.wait(task.task_id, timeout=0.2)
    assert isinstance(timed_out.value, rudder.WaitTimeoutError)
    assert timed_out.value.exit_code == 124 and timed_out.value.task == task


def test_ctrl_c_ends_a_wait_promptly(store: rudder.Store) -> None:
    task = store.create().task
    timer = threading.Timer(0.2, _thread.interrupt_main)
    timer.start()
    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        store.wait(task.task_id, timeout=60)
    assert time.monotonic() - started < 30
    timer.join()


def test_many_threads_share_one_store(store: rudder.Store) -> None:
    errors: list[BaseException] = []

    def work(n: int) -> None:
        try:
            for i in range(5):
                t = store.create(title=f"{n}-{i}").task
                store.complete(t.task_id, {"n": n, "i": i})
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert store.counts()["completed"] == 40


def test_a_closed_store_says_so(url: str) -> None:
    with rudder.Store(url) as store:
        task = store.create().task
    assert store.closed
    with pytest.raises(rudder.StoreClosedError, match="closed"):
        store.get(task.task_id)
    store.close()  # again: fine
    assert "closed" in repr(store)
    # Another thread closing it while this one works: each call either
    # completes or says the store is closed.
    other = rudder.Store(url)
    outcomes: list[str] = []

    def hammer() -> None:
        for _ in range(50):
            try:
                other.get(task.task_id)
                outcomes.append("ok")
            except rudder.StoreClosedError:
                outcomes.append("closed")

    thread = threading.Thread(target=hammer)
    thread.start()
    other.close()
    thread.join()
    assert set(outcomes) <= {"ok", "closed"} and len(outcomes) == 50


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork")
def test_a_forked_child_is_told_to_open_its_own_store(url: str, tmp_path: Path) -> None:
    store = rudder.Store(url)
    task = store.create().task
    report = tmp_path / "child.txt"
    pid = os.fork()
    if pid == 0:  # the child
        try:
            try:
                store.get(task.task_id)
                said = "no error"
            except rudder.ForkedStoreError as e:
                said = str(e)
            own = rudder.Store(url)
            said += "\n" + own.complete(task.task_id).task.status
            report.write_text(said)
        finally:
            os._exit(0)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    said, status_line = report.read_text().split("\n")
    assert "forked" in said and "open the store again in the child" in said
    assert status_line == "completed"
    assert store.get(task.task_id).status == "completed"


def test_every_change_records_who_made_it(url: str) -> None:
    with rudder.Store(url, actor="ana") as ana:
        made = ana.create(title="db slow", input_schema=SCHEMA)
        task_id = made.task.task_id
        ana.provide_input(task_id, {"service": "db"})
        out = ana.cancel(task_id, "duplicate of INC-4411")
    history = out.task.history
    assert [h.actor for h in history] == ["ana", "ana", "ana"]
    assert {h.face for h in history} == {"python"}
    assert history[1].fields == ["service"]
    assert history[-1].status == "cancelled"
    assert history[-1].reason == "duplicate of INC-4411"
    # The CLI's trail reads what Python wrote.
    log = cli(url, "log", task_id, "--json")
    assert log.returncode == 0, log.stderr
    lines = [json.loads(line) for line in log.stdout.splitlines()]
    assert [e["actor"] for e in lines] == ["ana", "ana", "ana"]
    assert lines[-1]["reason"] == "duplicate of INC-4411"


def test_an_actor_that_is_no_name_is_refused_and_nothing_written(url: str) -> None:
    with pytest.raises(rudder.UsageError, match="actor"):
        rudder.Store(url, actor="ana\x1b[31m")
    with pytest.raises(rudder.UsageError, match="actor"):
        rudder.Store(url, actor="")
    with rudder.Store(url) as anyone:
        assert anyone.list() == []
        made = anyone.create(title="who")
    actor = made.task.history[0].actor
    assert actor is not None and "@" in actor, actor


def test_a_reclaim_records_its_reason(url: str) -> None:
    with rudder.Store(url, actor="ops") as s:
        task_id = s.create(title="stale").task.task_id
        report = s.reclaim(0, reason="worker host died")
    assert [r.task_id for r in report.reclaimed] == [task_id]
    with rudder.Store(url) as s:
        last = s.get(task_id).history[-1]
    assert (last.status, last.actor, last.reason) == ("failed", "ops", "worker host died")
