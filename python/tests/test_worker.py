"""The worker API in Python: next, iteration, jobs renewing their lease,
progress, ask/wait, complete/fail, stops, Ctrl-C, SIGKILL of a worker
process, and interpreter shutdown with a live job."""

from __future__ import annotations

import _thread
import os
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

import rudder

SCHEMA = {"type": "object", "required": ["service"], "properties": {"service": {"type": "string"}}}


def test_next_claims_a_task_of_its_kinds_and_times_out_otherwise(store: rudder.Store) -> None:
    worker = store.worker("py-worker", lease=30, kinds=["diagnose"])
    assert worker.name == "py-worker" and worker.holder.startswith("py-worker#")
    assert worker.next(timeout=0.1) is None
    store.create(kind="backup")
    wanted = store.create(kind="diagnose", title="INC-1").task
    job = worker.next(timeout=10)
    assert job is not None and job.task_id == wanted.task_id
    assert job.task.kind == "diagnose" and job.task.claimed_by == worker.holder
    assert store.get(wanted.task_id).claimed_by == worker.holder
    with job:
        job.progress(1, 3)
        job.progress(2, 3, "reading traces")
        assert store.get(wanted.task_id).progress == (2, 3)
        assert store.get(wanted.task_id).status_message == "reading traces"
        done = job.complete({"cause": "deploy 42"})
    assert done.status == "completed" and done.result == {"cause": "deploy 42"}
    assert job.closed
    with pytest.raises(rudder.StoreClosedError):
        job.progress(3, 3)
    assert [t.kind for t in store.list(kind="backup")] == ["backup"]


def test_next_wakes_when_a_task_is_created(store: rudder.Store) -> None:
    worker = store.worker("waker")
    got: list[rudder.Job | None] = []
    thread = threading.Thread(target=lambda: got.append(worker.next(timeout=30)))
    thread.start()
    task = store.create().task
    thread.join(timeout=30)
    job = got[0]
    assert job is not None and job.task_id == task.task_id
    job.close()
    assert store.get(task.task_id).claimed_by is None  # the lease given back


def test_iteration_and_leaving_the_block_gives_the_lease_back(store: rudder.Store) -> None:
    first = store.create().task
    worker = store.worker("iter", lease=60)
    for job in worker:
        with pytest.raises(RuntimeError):
            with job:
                raise RuntimeError("the worker's own bug")
        break
    # The exception propagated, and the task is free again at once.
    again = store.worker("other").next(timeout=10)
    assert again is not None and again.task_id == first.task_id
    again.fail("gave up")
    assert store.get(first.task_id).error_message == "gave up"


def test_a_cancelled_task_stops_the_job_and_the_block_obeys(store: rudder.Store) -> None:
    task = store.create().task
    worker = store.worker("stopper")
    job = worker.next(timeout=10)
    assert job is not None
    store.cancel(task.task_id, "not needed")
    with job:
        with pytest.raises(rudder.JobStopped) as stopped:
            job.progress(1, 2)
        assert stopped.value.reason == "cancelled"
        assert stopped.value.task is not None and stopped.value.task.status == "cancelled"
        job.progress(2, 2)  # raises again; leaving the block swallows it
    assert store.get(task.task_id).status == "cancelled"


def test_ask_waits_for_the_answer_and_the_same_worker_continues(store: rudder.Store) -> None:
    task = store.create(title="needs a person").task
    worker = store.worker("asker")
    job = worker.next(timeout=10)
    assert job is not None
    with job:
        answer = job.ask("which service?", SCHEMA)
        waiting = store.get(task.task_id)
        assert waiting.status == "input_required" and waiting.status_message == "which service?"
        assert waiting.claimed_by == worker.holder
        assert answer.wait(timeout=0.1) is None
        threading.Timer(0.1, lambda: store.provide_input(task.task_id, {"service": "db"})).start()
        assert answer.wait(timeout=30) == {"service": "db"}
        assert job.task.status == "working"
        job.complete({"service": "db"})
    assert store.get(task.task_id).status == "completed"


def test_ctrl_c_in_next_returns_promptly(store: rudder.Store) -> None:
    worker = store.worker("interrupted")
    threading.Timer(0.2, _thread.interrupt_main).start()
    with pytest.raises(KeyboardInterrupt):
        worker.next(timeout=60)
    store.create()
    job = worker.next(timeout=10)  # still usable
    assert job is not None
    job.close()


def test_ctrl_c_in_wait_gives_the_lease_back(store: rudder.Store) -> None:
    task = store.create().task
    job = store.worker("asking", lease=60).next(timeout=10)
    assert job is not None
    answer = job.ask("which service?", SCHEMA)
    threading.Timer(0.2, _thread.interrupt_main).start()
    with pytest.raises(KeyboardInterrupt):
        answer.wait(timeout=60)
    assert job.closed
    assert store.get(task.task_id).claimed_by is None


def test_a_worker_name_that_is_not_one_is_refused(store: rudder.Store) -> None:
    with pytest.raises(ValueError, match="name"):
        store.worker("")
    with pytest.raises(rudder.UsageError):
        store.worker("w", kinds=["not a kind!"])


WORKER = textwrap.dedent(
    """
    import sys, rudder
    store = rudder.Store(sys.argv[1])
    worker = store.worker("doomed", lease=float(sys.argv[2]))
    job = worker.next(timeout=30)
    job.progress(1, 2, "half way")
    print(job.task_id, flush=True)
    if sys.argv[3] == "hang":
        sys.stdin.read()
    """
)


def test_a_python_worker_killed_mid_job_is_resumed_by_another(store: rudder.Store) -> None:
    task = store.create().task
    proc = subprocess.Popen(
        [sys.executable, "-c", WORKER, store.url, "1", "hang"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == task.task_id
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert store.get(task.task_id).status_message == "half way"
    # Once the dead worker's lease lapses, another worker takes the task.
    job = store.worker("heir", lease=30).next(timeout=30)
    assert job is not None and job.task_id == task.task_id
    job.complete("resumed")
    assert store.get(task.task_id).result == "resumed"
    if proc.stdin:
        proc.stdin.close()
    if proc.stdout:
        proc.stdout.close()


def test_the_interpreter_exits_cleanly_with_a_live_job(store: rudder.Store, tmp_path: Path) -> None:
    task = store.create().task
    run = subprocess.run(
        [sys.executable, "-c", WORKER, store.url, "30", "exit"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == task.task_id
    assert run.stderr == ""
    # The job was dropped at exit (its lease given back) or left to lapse;
    # either way the task is intact and still working.
    assert store.get(task.task_id).status == "working"


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork")
def test_a_forked_child_cannot_use_its_parents_worker(store: rudder.Store, tmp_path: Path) -> None:
    worker = store.worker("parent")
    report = tmp_path / "child.txt"
    pid = os.fork()
    if pid == 0:
        try:
            try:
                worker.next(timeout=0)
                report.write_text("no error")
            except rudder.ForkedStoreError as e:
                report.write_text(str(e))
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    assert "forked" in report.read_text()


def test_the_readme_worker_greets(store: rudder.Store) -> None:
    examples = Path(__file__).resolve().parent.parent / "examples"
    task = store.create(kind="greet", request={"name": "Ada"}).task
    proc = subprocess.Popen([sys.executable, str(examples / "greeter.py"), store.url, "--once"])
    try:
        asked = store.wait(task.task_id, timeout=60)
        assert asked.status == "input_required" and asked.status_message == "How formal?"
        store.provide_input(task.task_id, {"tone": "warm"})
        assert proc.wait(timeout=60) == 0
    finally:
        proc.kill()
    done = store.get(task.task_id)
    assert done.status == "completed"
    assert done.result == {"greeting": "Hello, Ada", "tone": "warm"}
