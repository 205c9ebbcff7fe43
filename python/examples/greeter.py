"""A Python worker in ten lines (docs/python.md): it greets, asking a
person how formally first.

Run: ``python python/examples/greeter.py STORE [--once]`` and create work
for it with ``rudder create --kind greet --request '{"name": "Ada"}'``.
"""

from __future__ import annotations

import sys

import rudder


def main(url: str, once: bool = False) -> None:
    store = rudder.Store(url)  # a bad URL raises UsageError here
    worker = store.worker("greeter", lease=30, kinds=["greet"])
    for job in worker:  # blocks on the change feed
        with job:  # the lease is renewed in the background
            name = job.task.request["name"]
            job.progress(1, 2, f"greeting {name}")
            answer = job.ask("How formal?", {"type": "object", "required": ["tone"]}).wait(timeout=3600)
            job.complete({"greeting": f"Hello, {name}", "tone": answer and answer["tone"]})
        if once:
            return


if __name__ == "__main__":
    main(sys.argv[1], once="--once" in sys.argv[2:])
