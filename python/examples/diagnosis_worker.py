"""The demo's diagnosis worker in Python, on the worker API.

A port of ``rudder worker`` (src/demo/worker.rs and diagnosis.rs): it claims
the demo's incidents (tasks whose idempotency key starts with ``demo:``;
nothing else is touched), runs the four-step simulated root-cause diagnosis
on the scenario data in ``assets/scenarios.json``, up to three at a time,
and completes each with a conclusion and its citations. Everything a step
needs is in the task (``request``, ``input_value``, ``progress``), so a
worker started after another was killed resumes each task at the step it
reached, once the dead worker's lease has lapsed.

Run: ``python python/examples/diagnosis_worker.py --store STORE [--speed N]
[--name NAME] [--once]``. SIGTERM or SIGINT gives every lease back and
exits; SIGKILL leaves the leases to lapse, which is what the demo's K key
shows.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import rudder

ASSETS = Path(__file__).resolve().parent.parent.parent / "assets"
SCENARIOS: dict[str, Any] = json.loads((ASSETS / "scenarios.json").read_text())
SERVICE_SCHEMA: dict[str, Any] = json.loads((ASSETS / "schemas" / "service.json").read_text())
#: The demo sets this to its pid: a worker whose parent is another process
#: was orphaned and exits.
PARENT_ENV = "RUDDER_DEMO_PARENT"
#: (what the step does, seconds at speed 1)
STEPS = [
    ("querying the incident store", 8.0),
    ("following call traces", 20.0),
    ("reading deployment records", 15.0),
    ("writing the conclusion", 12.0),
]
TOTAL = len(STEPS)
TRACES, DEPLOYS = 1, 2
SLOTS = 3
TICK = 0.5


class Stop(Exception):
    """The diagnosis cannot go on by itself: ask a person, or fail."""

    def __init__(self, message: str, ask: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.ask = ask


def log(holder: str, text: str) -> None:
    stamp = datetime.now().astimezone().strftime("%H:%M:%S")
    print(f"{stamp} {holder}: {text}", flush=True)


def when(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def clock(at: datetime) -> str:
    return at.strftime("%Y-%m-%d %H:%M UTC")


def fnv1a(data: bytes) -> int:
    h = 0xCBF29CE484222325
    for b in data:
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


class Plan:
    """What a diagnosis works from, read from the task."""

    def __init__(self, task: rudder.Task) -> None:
        request = task.request if isinstance(task.request, dict) else {}
        given = task.input_value if isinstance(task.input_value, dict) else {}

        def field(name: str) -> Any:
            return given.get(name, request.get(name))

        incident = request.get("incident")
        self.incident: str | None = incident if isinstance(incident, str) else None
        service = field("service")
        self.service: str | None = service if isinstance(service, str) else None
        window = field("window_minutes")
        if not isinstance(window, int) or isinstance(window, bool):
            window = SCENARIOS["default_window_minutes"]
        self.window = min(max(window, 1), 7 * 24 * 60)

    def label(self) -> str:
        return self.incident or "this task"

    def find_incident(self) -> dict[str, Any]:
        known = ", ".join(i["id"] for i in SCENARIOS["incidents"])
        if self.incident is None:
            raise Stop(f'the request names no incident: a diagnosis needs {{"incident": "INC-…"}} (the incident store has {known})')
        for i in SCENARIOS["incidents"]:
            if i["id"] == self.incident:
                return dict(i)
        raise Stop(f"incident {self.incident} is not in the incident store (it has {known})")

    def check_service(self) -> None:
        if self.service is None:
            try:
                i = self.find_incident()
                what = f"{i['id']} ({i['title']})"
            except Stop:
                what = self.label()
            raise Stop(f"Which service should the diagnosis follow? {what} names none.", ask=True)
        if self.service not in SCENARIOS["services"]:
            raise Stop(f"Which service should the diagnosis follow? The trace store knows no service {json.dumps(self.service)}.", ask=True)

    def trace(self) -> dict[str, Any]:
        incident = self.find_incident()
        self.check_service()
        data = SCENARIOS["services"][self.service]
        if not data["traces"]:
            start = when(incident["opened_at"]) - timedelta(minutes=self.window)
            reason = data.get("no_traces_reason") or "the trace store holds none, so there is nothing to follow or cite"
            raise Stop(
                f"no call traces of service {self.service} between {clock(start)} and "
                f"{clock(when(incident['opened_at']))} for {incident['id']}: {reason}"
            )
        traces: list[dict[str, Any]] = data["traces"]
        return traces[fnv1a(incident["id"].encode()) % len(traces)]

    def deploy(self) -> dict[str, Any] | None:
        try:
            incident = self.find_incident()
            self.check_service()
        except Stop:
            return None
        opened = when(incident["opened_at"])
        start = opened - timedelta(minutes=self.window)
        found = [d for d in SCENARIOS["services"][self.service]["deploys"] if start <= when(d["at"]) <= opened]
        return max(found, key=lambda d: when(d["at"])) if found else None

    def step_message(self, step: int, fraction: float) -> str:
        doing = STEPS[step][0]
        if step in (TRACES, DEPLOYS):
            subject = f" of {self.service}" if self.service else ""
        else:
            subject = f" for {self.label()}"
        return f"step {step + 1}/{TOTAL}: {doing}{subject} ({round(min(max(fraction, 0), 1) * 100)}%)"

    def step_done(self, step: int) -> str:
        if step == 0:
            try:
                i = self.find_incident()
                text = f"read {i['id']}: {i['symptom']}"
            except Stop:
                text = f"read {self.label()}"
        elif step == TRACES:
            try:
                t = self.trace()
                text = f"followed trace {t['id']}: {t['summary']}"
            except Stop:
                text = "followed call traces"
        elif step == DEPLOYS:
            d = self.deploy()
            text = f"found {d['id']} ({d['version']}) before the incident" if d else f"no deploy in the {self.window} minutes before"
        else:
            text = "conclusion written"
        return f"step {step + 1}/{TOTAL} done: {text}"

    def conclusion(self, worker: str, resumed_after: int) -> dict[str, Any]:
        incident, trace, deploy = self.find_incident(), self.trace(), self.deploy()
        opened = when(incident["opened_at"])
        citations = [
            {"kind": "incident", "id": incident["id"], "source": "incident store", "detail": f"opened {clock(opened)}: {incident['symptom']}"},
            {"kind": "trace", "id": trace["id"], "source": "call traces", "detail": f"{trace['span']} (p99 {trace['p99_ms']} ms)"},
        ]
        if deploy:
            citations.append(
                {"kind": "deploy", "id": deploy["id"], "source": "deployment records", "detail": f"{deploy['version']} at {clock(when(deploy['at']))}: {deploy['change']}"}
            )
            before = int((opened - when(deploy["at"])).total_seconds() // 60)
            summary = f"{incident['id']} ({incident['title']}): caused by the {deploy['version']} deploy, {deploy['summary']}"
            cause = (
                f"{deploy['version']} ({deploy['id']}), deployed {before} minutes before {incident['id']} was opened, "
                f"{deploy['change']}. Trace {trace['id']} shows {trace['finding']}."
            )
        else:
            summary = f"{incident['id']} ({incident['title']}): {trace['summary']} (no {self.service} deploy in the {self.window} minutes before)"
            cause = (
                f"No deploy of {self.service} in the {self.window} minutes before {incident['id']} was opened, "
                f"so the cause is not a release. Trace {trace['id']} shows {trace['finding']}."
            )
        return {
            "incident": incident["id"],
            "service": self.service,
            "window_minutes": self.window,
            "summary": summary,
            "root_cause": cause,
            "citations": citations,
            "worker": {"name": worker, "resumed_after_step": resumed_after},
        }


def diagnose(job: rudder.Job, name: str, speed: float, stop: threading.Event) -> str:
    """Run one diagnosis; say how it ended."""
    task = job.task
    plan = Plan(task)
    done = min(task.progress[0], TOTAL) if task.progress and task.progress[1] == TOTAL else 0
    interrupted = done > 0 and (task.status_message or "").startswith("step ")
    suffix = f" · resumed by {name}" if interrupted else ""
    at = "at the start"
    with job:
        try:
            for step in range(done, TOTAL):
                at = f"before step {step + 1}/{TOTAL}"
                if step >= TRACES:
                    plan.check_service()
                job.progress(step, TOTAL, plan.step_message(step, 0) + suffix)
                seconds = STEPS[step][1] / speed
                ticks = max(1, int(-(-seconds // TICK)))
                for tick in range(1, ticks + 1):
                    time.sleep(seconds / ticks)
                    if stop.is_set():
                        job.release()
                        return f"stopped during step {step + 1}/{TOTAL}: lease given back, this worker is exiting"
                    if tick < ticks:
                        job.message(plan.step_message(step, tick / ticks) + suffix)
                at = f"after step {step + 1}/{TOTAL}"
                if step == 0:
                    plan.find_incident()
                elif step == TRACES:
                    plan.trace()
                if step + 1 < TOTAL:
                    job.progress(step + 1, TOTAL, plan.step_done(step) + suffix)
            at = "at the conclusion"
            result = plan.conclusion(name, done)
            job.progress(TOTAL, TOTAL, f"diagnosed: {result['summary']}")
            job.complete(result)
            return "completed"
        except Stop as s:
            if s.ask:
                job.hand_over(s.message, SERVICE_SCHEMA)
                return "asked a person for the service; the lease is given back"
            job.message(f"failed {at}: {s.message}")
            job.fail(s.message)
            return f"failed: {s.message}"
        except rudder.JobStopped as e:
            return f"stopped: the store refused the write ({e.reason})"
    return "stopped"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--store", default=os.environ.get("RUDDER_STORE", "tasks.json"))
    parser.add_argument("--speed", type=float, default=1.0)
    parser.add_argument("--name", default=f"py-worker-{os.getpid()}")
    parser.add_argument("--once", action="store_true", help="exit once no diagnosis runs and none is claimable")
    args = parser.parse_args(argv)
    if not 0.01 <= args.speed <= 10_000:
        parser.error("the speed must be a number from 0.01 to 10000")
    store = rudder.Store(args.store)
    lease = min(max(8.0 / args.speed, 3.0), 8.0)
    worker = store.worker(args.name, lease=lease, key_prefix="demo:")
    stop = threading.Event()

    def on_signal(signum: int, _frame: object) -> None:
        log(worker.holder, f"{signal.Signals(signum).name}: giving the leases back and exiting")
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    parent = os.environ.get(PARENT_ENV)
    log(worker.holder, f"started on the store {store.url} at speed {args.speed} (lease {lease:.1f}s, up to {SLOTS} diagnoses at once, in Python)")
    running: dict[str, threading.Thread] = {}
    while not stop.is_set():
        if parent and str(os.getppid()) != parent:
            log(worker.holder, "the demo that started this worker is gone: giving the leases back and exiting")
            stop.set()
            break
        running = {k: t for k, t in running.items() if t.is_alive()}
        if len(running) >= SLOTS:
            time.sleep(0.25)
            continue
        try:
            job = worker.next(timeout=0.25)
        except rudder.StoreUnavailableError as e:
            log(worker.holder, f"cannot claim a task: {e}")
            time.sleep(0.25)
            continue
        if job is None:
            if args.once and not running:
                break
            continue
        if job.task_id in running:
            job.release()  # our own thread for it is winding down
            continue
        label = f"{Plan(job.task).label()} ({job.task_id[:8]})"
        log(worker.holder, f"claimed {label}")

        def run(job: rudder.Job = job, label: str = label) -> None:
            log(worker.holder, f"{label}: {diagnose(job, args.name, args.speed, stop)}")

        thread = threading.Thread(target=run, name=f"diagnose-{job.task_id[:8]}")
        running[job.task_id] = thread
        thread.start()
    for thread in running.values():
        thread.join()
    log(worker.holder, "exited")
    return 0


if __name__ == "__main__":
    sys.exit(main())
