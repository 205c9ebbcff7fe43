#!/usr/bin/env python3
"""Two rudder binaries side by side, as a user runs them: each command a
process, in turns (before, after, before, ...), on stores of N tasks as
rudder writes them (benches/scripts/seed_json.py), each binary on a copy of
its own (a write changes the store; an older binary may not open a newer
SQLite schema, so each makes its own database with its own `copy`).

usage: cli_ab.py BEFORE_BIN AFTER_BIN [TASKS [ROUNDS]]
Prints each operation's median wall time (ms) for both and their ratio.
Used by docs/performance.md and issue 31's closing note (the workspace
split: no operation more than 5 % slower).
"""
import json, os, statistics, subprocess, sys, tempfile, time

before, after = sys.argv[1], sys.argv[2]
tasks = int(sys.argv[3]) if len(sys.argv) > 3 else 10_000
rounds = int(sys.argv[4]) if len(sys.argv) > 4 else 15
here = os.path.dirname(os.path.abspath(__file__))
env = dict(os.environ, RUDDER_ACTOR="bench", NO_COLOR="1")
work = tempfile.mkdtemp(prefix="rudder-cli-ab-")
seed = os.path.join(work, "seed.json")
subprocess.run([sys.executable, os.path.join(here, "seed_json.py"), seed, str(tasks)], check=True)
ids = list(json.load(open(seed)).keys())
working = next(i for i, t in json.load(open(seed)).items() if t["status"] == "working")
some = ids[len(ids) // 2]


def run(binary, args):
    start = time.perf_counter()
    subprocess.run([binary, *args], env=env, check=True, stdout=subprocess.DEVNULL)
    return (time.perf_counter() - start) * 1000


stores = {}
for side, binary in (("before", before), ("after", after)):
    f = os.path.join(work, f"{side}.json")
    with open(seed) as src, open(f, "w") as dst:
        dst.write(src.read())
    db = os.path.join(work, f"{side}.db")
    subprocess.run([binary, "copy", f, f"sqlite:{db}"], env=env, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    stores[side] = {"file": f, "sqlite": f"sqlite:{db}"}

ops = [
    ("get ID", lambda s: ["--store", s, "get", some]),
    ("list --json", lambda s: ["--store", s, "list", "--json"]),
    ("create --key EXISTING", lambda s: ["--store", s, "create", "--key", "incident-5",
                                          "--title", "INC-1005 checkout latency in eu-west-2"]),
    ("heartbeat ID --message", lambda s: ["--store", s, "heartbeat", working, "--message", "still at it"]),
]
times = {}
for kind in ("file", "sqlite"):
    for name, args in ops:
        for _ in range(rounds):
            for side, binary in (("before", before), ("after", after)):
                times.setdefault((kind, name, side), []).append(run(binary, args(stores[side][kind])))
print(f"{tasks} tasks, {rounds} rounds in turns; medians in ms")
print("| store | operation | before | after | after / before |")
print("|---|---|---|---|---|")
for kind in ("file", "sqlite"):
    for name, _ in ops:
        b = statistics.median(times[(kind, name, "before")])
        a = statistics.median(times[(kind, name, "after")])
        print(f"| {kind} | `{name}` | {b:.1f} | {a:.1f} | {a / b:.2f} |")
