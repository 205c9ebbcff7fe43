"""Benchmarks of the Python package (issue 21), medians of several runs:

1. The worker loop (claim, three progress reports, complete) in tasks/s on
   SQLite, in Python on the package's worker API.
2. The seed's own TaskStore (benches/seed_taskstore.py) at N tasks against
   rudder.seed.TaskStore on SQLite, the same operations in the same run:
   create + provide_input + complete of one more task, per operation.

Build the package in release first (``pip install ./python``); a debug
build (``maturin develop``) measures the debug build. Run:
``python python/benches/bench.py [--tasks 10000] [--loop 200]``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import rudder  # noqa: E402
import seed_taskstore  # noqa: E402
from rudder.seed import TaskStore  # noqa: E402

SCHEMA = {"type": "object", "required": ["service"]}


def worker_loop(n: int) -> float:
    """Tasks/s of claim + 3 progress + complete on a fresh SQLite store."""
    with tempfile.TemporaryDirectory() as d:
        store = rudder.Store(f"sqlite:{d}/bench.db")
        for _ in range(n):
            store.create()
        worker = store.worker("bench", lease=60)
        started = time.perf_counter()
        for _ in range(n):
            job = worker.next(timeout=5)
            assert job is not None
            for i in range(3):
                job.progress(i + 1, 3)
            job.complete({"ok": True})
        return n / (time.perf_counter() - started)


def per_op(store: object, ops: int) -> float:
    """Seconds per create + provide_input + complete of one task."""
    started = time.perf_counter()
    for _ in range(ops):
        t = store.create(SCHEMA)  # type: ignore[attr-defined]
        store.provide_input(t.task_id, {"service": "db"})  # type: ignore[attr-defined]
        store.complete(t.task_id, {"ok": True})  # type: ignore[attr-defined]
    return (time.perf_counter() - started) / ops


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tasks", type=int, default=10_000)
    parser.add_argument("--loop", type=int, default=200)
    parser.add_argument("--ops", type=int, default=20)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    loops = [worker_loop(args.loop) for _ in range(args.runs)]
    print(f"python worker loop on SQLite: median {statistics.median(loops):.0f} tasks/s over {args.runs} runs of {args.loop}")
    with tempfile.TemporaryDirectory() as d:
        seed = seed_taskstore.TaskStore(Path(d) / "seed.json")
        ours = TaskStore(f"sqlite:{d}/ours.db")
        for _ in range(args.tasks):
            seed.tasks[str(len(seed.tasks))] = seed_taskstore.TaskSnapshot(str(len(seed.tasks)))
        seed._save()
        for _ in range(args.tasks):
            ours.store.create()
        seed_runs = [per_op(seed, args.ops) for _ in range(args.runs)]
        our_runs = [per_op(ours, args.ops) for _ in range(args.runs)]
    s, o = statistics.median(seed_runs), statistics.median(our_runs)
    print(f"at {args.tasks} tasks, create+provide_input+complete: seed {s * 1000:.2f} ms, rudder.seed on SQLite {o * 1000:.2f} ms (seed/rudder {s / o:.1f}x)")


if __name__ == "__main__":
    main()
