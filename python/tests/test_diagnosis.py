"""python/examples/diagnosis_worker.py: the demo's diagnosis in Python
reaches the very conclusion the Rust `rudder worker` reaches, asks for a
missing service, and leaves tasks that are not demo incidents alone."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import rudder

WORKER = Path(__file__).resolve().parent.parent / "examples" / "diagnosis_worker.py"


def demo_task(store: rudder.Store, incident: str, service: str | None) -> rudder.Task:
    request: dict[str, Any] = {"incident": incident}
    if service:
        request["service"] = service
    return store.create(
        idempotency_key=f"demo:{incident}", title=incident, request=request, message="waiting for a worker"
    ).task


def test_the_python_diagnosis_concludes_as_the_rust_one(tmp_path: Path) -> None:
    rust_store = rudder.Store(str(tmp_path / "rust.json"))
    py_store = rudder.Store(str(tmp_path / "py.json"))
    cases = [("INC-1042", "checkout"), ("INC-1047", "inventory"), ("INC-1044", "notifications"), ("INC-1043", None)]
    for incident, service in cases:
        demo_task(rust_store, incident, service)
        demo_task(py_store, incident, service)
    other = py_store.create(title="real work").task
    run = subprocess.run(
        [sys.executable, str(WORKER), "--store", py_store.url, "--speed", "10000", "--once", "--name", "py"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    rust = subprocess.Popen(
        [os.environ.get("RUDDER_BIN", "rudder"), "--store", rust_store.url, "worker", "--speed", "10000", "--name", "py"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        for t in rust_store.list():
            rust_store.wait(t.task_id, timeout=120)
    finally:
        rust.terminate()
        rust.wait(timeout=60)
    by_key = {t.idempotency_key: t for t in rust_store.list()}
    for t in py_store.list():
        if t.task_id == other.task_id:
            continue
        r = by_key[t.idempotency_key]
        assert (t.status, t.result, t.error, t.input_schema) == (r.status, r.result, r.error, r.input_schema), t.title
        assert t.status_message == r.status_message, t.title
    assert {t.title: t.status for t in py_store.list()} == {
        "INC-1042": "completed",
        "INC-1047": "completed",
        "INC-1044": "failed",
        "INC-1043": "input_required",
        "real work": "working",
    }
    assert py_store.get(other.task_id).claimed_by is None
