"""The seed chapter's example, failure injections A-E and reclaim exercise,
run on rudder.seed.TaskStore over every backend."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

import rudder
import seed_failure_injections
import seed_task_recovery
from rudder.seed import TaskSnapshot, TaskStore


def test_the_chapter_example_restores_the_waiting_task(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    seed_task_recovery.main(url)
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 3
    assert re.fullmatch(r"restored: [0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[0-9a-f]{4}-[0-9a-f]{12} input_required", lines[0])
    assert lines[1:] == ["input: working", "completed: completed"]


def test_the_failure_injections_print_what_the_chapter_says(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    seed_failure_injections.main(url)
    assert capsys.readouterr().out.splitlines() == [
        "8A. idempotent create -> same task: True | status: input_required",
        "8B. provide_input on working -> task is not waiting for input: working",
        "8C. complete twice -> status: completed | result unchanged: True",
        "8D. cancel after completed -> status: completed",
        "8E. unknown task -> 'unknown task: no-such-task'",
    ]


def test_the_native_api_answers_the_injections_by_the_one_policy(url: str) -> None:
    store = rudder.Store(url)
    task = store.create().task
    with pytest.raises(rudder.RefusedError) as refused:
        store.provide_input(task.task_id, {"service": "payments"})
    assert refused.value.task is not None and refused.value.task.status == "working"
    store.complete(task.task_id, {"summary": "no active incident"})
    # The same result again: a safe repeat. Another one: a loud conflict.
    assert store.complete(task.task_id, {"summary": "no active incident"}).change == "unchanged"
    with pytest.raises(rudder.RefusedError) as conflict:
        store.complete(task.task_id, {"summary": "rewritten!"})
    assert conflict.value.task is not None
    assert conflict.value.task.result == {"summary": "no active incident"}
    with pytest.raises(rudder.RefusedError):
        store.cancel(task.task_id)
    with pytest.raises(KeyError) as unknown:
        store.get("no-such-task")
    assert str(unknown.value) == "unknown task: no-such-task"


def test_a_file_the_seed_wrote_loads_unchanged(tmp_path: Path) -> None:
    # Exactly what the seed's _save() writes: asdict() of its six fields.
    path = tmp_path / "tasks.json"
    seed_task = {
        "task_id": "34df0ab7-eac3-429b-902f-efa8ea132d2f",
        "status": "input_required",
        "input_schema": {"type": "object", "required": ["service"]},
        "input_value": None,
        "result": None,
        "idempotency_key": "incident-1",
    }
    path.write_text(json.dumps({seed_task["task_id"]: seed_task}, ensure_ascii=False, indent=2))
    store = TaskStore(path)
    assert store.get("34df0ab7-eac3-429b-902f-efa8ea132d2f") == TaskSnapshot(
        task_id="34df0ab7-eac3-429b-902f-efa8ea132d2f",
        status="input_required",
        input_schema={"type": "object", "required": ["service"]},
        idempotency_key="incident-1",
    )
    assert store.provide_input("34df0ab7-eac3-429b-902f-efa8ea132d2f", {"service": "payments"}).status == "working"
    assert list(store.tasks) == ["34df0ab7-eac3-429b-902f-efa8ea132d2f"]


def test_the_in_memory_store_is_refused() -> None:
    with pytest.raises(TypeError, match="needs a store"):
        TaskStore()


def test_invalid_input_is_a_value_error_with_every_violation(url: str) -> None:
    store = TaskStore(url)
    task = store.create({"type": "object", "required": ["service", "region"]})
    with pytest.raises(ValueError) as invalid:
        store.provide_input(task.task_id, {})
    assert isinstance(invalid.value, rudder.InvalidInputError)
    assert sorted(v.pointer for v in invalid.value.violations) == ["/region", "/service"]
    assert store.get(task.task_id).status == "input_required"


def test_the_reclaim_exercise(url: str) -> None:
    # The chapter's acceptance test: a task idle past the timeout becomes
    # failed; a completed task is untouched (the terminal check works).
    store = TaskStore(url)
    stale = store.create()
    done = store.complete(store.create().task_id, {"summary": "ok"})
    time.sleep(0.05)  # the exercise's "sleep past the timeout" (of 10 ms)
    reclaimed = store.reclaim(0.01)
    assert [r.task_id for r in reclaimed] == [stale.task_id]
    assert reclaimed[0].status_before == "working" and reclaimed[0].idle_ms >= 10
    assert store.get(stale.task_id).status == "failed"
    assert store.get(done.task_id) == done
    assert store.get(stale.task_id).updated_at is not None
