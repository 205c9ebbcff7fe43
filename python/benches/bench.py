"""Benchmarks of the Python package (issue 21), medians of several runs:

1. The worker loop (claim, three progress reports, complete) in tasks/s on
   SQLite, in Python on the package's worker API, and (with ``--rust BIN``)
   the same loop in Rust on the worker API, runs interleaved: BIN is the
   worker benchmark's executable (``cargo bench --bench worker --no-run``
   prints it), whose ``--loop URL N`` runs that loop once.
2. The seed's own TaskStore (benches/seed_taskstore.py) at N tasks against
   rudder.seed.TaskStore on SQLite, the same operations in the same run:
   create + provide_input + complete of one more task, per operation.

Build the package in release first (``pip install ./python`` or
``maturin develop --release``); a debug build (``maturin develop``)
measures the debug build. Run:
``python python/benches/bench.py [--tasks 10000] [--loop 200] [--rust BIN]``.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
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
    """Tasks/s of claim + 3 progress + complete on a fresh SQLite store.

    As the Rust loop (benches/worker.rs, ``run_loop_of``) does it: the
    store is filled on one connection; the worker's own is opened, and
    its worker made and the connection warmed, before the clock starts;
    the loop runs until ``next`` finds no task.
    """
    with tempfile.TemporaryDirectory() as d:
        url = f"sqlite:{d}/bench.db"
        filler = rudder.Store(url)
        for _ in range(n):
            filler.create()
        filler.close()
        store = rudder.Store(url)
        worker = store.worker("bench", lease=60)
        store.counts()
        done = 0
        started = time.perf_counter()
        while (job := worker.next(timeout=0)) is not None:
            for i in range(3):
                job.progress(i + 1, 3)
            job.complete(1)
            done += 1
        took = time.perf_counter() - started
        assert done == n, (done, n)
        worker.close()
        store.close()
        return n / took


def rust_loop(binary: str, n: int) -> float:
    """Tasks/s of the same loop in Rust (the worker benchmark's ``--loop``)."""
    with tempfile.TemporaryDirectory() as d:
        out = subprocess.run([binary, "--loop", f"sqlite:{d}/bench.db", str(n)], check=True, capture_output=True, text=True)
        return float(out.stdout.strip().splitlines()[-1])


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
    parser.add_argument("--rust", help="the worker benchmark's executable, for the Rust loop")
    args = parser.parse_args()
    loops, rust = [], []
    for _ in range(args.runs):
        loops.append(worker_loop(args.loop))
        if args.rust:
            rust.append(rust_loop(args.rust, args.loop))
    py = statistics.median(loops)
    print(f"python worker loop on SQLite: median {py:.0f} tasks/s over {args.runs} runs of {args.loop}")
    if rust:
        rs = statistics.median(rust)
        print(f"rust worker loop on SQLite:   median {rs:.0f} tasks/s over {args.runs} runs of {args.loop} (interleaved)")
        print(f"python cost per task / rust: {rs / py:.2f}x (goal <= 1.3x)")
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
