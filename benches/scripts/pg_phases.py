#!/usr/bin/env python3
"""Where a short-lived process's milliseconds go against PostgreSQL.

    python3 benches/scripts/pg_phases.py URL ID [RUNS]

Runs `rudder --store URL heartbeat ID` and `psql -c "UPDATE ..."` (the
equivalent one-row update) RUNS times each (default 15), in turns, each
under `strace --seccomp-bpf` tracing only exec, connect, sendto and
exit_group (so the untraced system calls run at full speed), and prints
the median time of each phase: from exec to the TCP connect, then from
each request the client sends to the next (the server's answer and the
client's work on it), then from the last request to the process's exit.
`rudder` and `psql` are looked for in $RUDDER_BIN (default
target/release/rudder) and $PSQL (default: psql of the cluster's bindir,
scripts/pg-local.sh bindir, else PATH). The URL reaches rudder as
$RUDDER_STORE and psql without its password (as $PGPASSWORD), so that no
password shows on a command line (`ps`, or strace's trace of exec).
"""
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from datetime import datetime
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit


def without_password(url):
    """`url` without its password (in the user part or `?password=`), and
    the password (or None)."""
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    password = next((v for k, v in query if k == "password"), None)
    query = [(k, v) for k, v in query if k != "password"]
    netloc = parts.netloc
    if parts.password is not None:
        password = unquote(parts.password)
        host = parts.hostname or ""
        if ":" in host:
            host = f"[{host}]"
        netloc = f"{parts.username or ''}@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc, query=urlencode(query))), password


def phases(cmd, env):
    """The phases of one run of `cmd`: a list of (label, milliseconds)."""
    with tempfile.NamedTemporaryFile("r", suffix=".trace") as trace:
        subprocess.run(
            ["strace", "--seccomp-bpf", "-f", "-tt", "-e",
             "trace=execve,connect,sendto,exit_group", "-o", trace.name] + cmd,
            check=True, stdout=subprocess.DEVNULL, env=env)
        lines = [l for l in trace if "resumed>" not in l and "+++" not in l]
    events = []
    for line in lines:
        at = datetime.strptime(line.split()[1], "%H:%M:%S.%f")
        call = re.search(r"\b(execve|connect|sendto|exit_group)\((.*)", line)
        if not call:
            continue
        name, args = call.groups()
        if name == "connect" and "AF_INET" not in args:
            continue  # name service sockets, not the server
        if name == "sendto":
            text = re.search(r'"((?:[^"\\]|\\.)*)"', args)
            name = request_name(text.group(1) if text else "")
        events.append((name, at))
    out = []
    for (name, at), (_, following) in zip(events, events[1:]):
        out.append((name, (following - at).total_seconds() * 1000))
    return out


def request_name(text):
    """A request's name from its first bytes as strace prints them."""
    if text.startswith("\\0\\0\\0\\10\\4\\322\\26/"):
        return "TLS question"
    if text.startswith("\\0\\0\\0"):
        return "start-up and authentication"
    kind = text[:1]
    sql = re.search(r"(SELECT|START|UPDATE|WITH|COMMIT|BEGIN|INSERT)[A-Za-z_ ]{0,18}", text)
    label = sql.group(0).strip() if sql else ""
    return {"Q": "query ", "P": "statement ", "X": "goodbye"}.get(kind, kind) + label


def median_phases(runs):
    """Median milliseconds of each phase, by position (runs of one command
    send the same requests in the same order)."""
    names = [name for name, _ in runs[0]]
    return [(name, statistics.median(r[i][1] for r in runs if len(r) > i))
            for i, name in enumerate(names)]


def main():
    url, task = sys.argv[1], sys.argv[2]
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 15
    rudder = os.environ.get("RUDDER_BIN", "target/release/rudder")
    psql = os.environ.get("PSQL")
    if not psql:
        try:
            bindir = subprocess.check_output(
                ["scripts/pg-local.sh", "bindir"], text=True).strip()
            psql = os.path.join(bindir, "psql")
        except (OSError, subprocess.CalledProcessError):
            psql = shutil.which("psql") or "psql"
    update = ("UPDATE rudder_tasks SET revision = revision + 1, "
              f"updated_at = now()::text WHERE task_id = '{task}'")
    bare, password = without_password(url)
    psql_env = dict(os.environ)
    if password is not None:
        psql_env["PGPASSWORD"] = password
    commands = {
        "rudder heartbeat": ([rudder, "heartbeat", task],
                             dict(os.environ, RUDDER_STORE=url)),
        "psql -c UPDATE": ([psql, "-q", "-X", "-d", bare, "-c", update], psql_env),
    }
    runs = {name: [] for name in commands}
    for _ in range(n):
        for name, (cmd, env) in commands.items():
            runs[name].append(phases(cmd, env))
    for name in commands:
        rows = median_phases(runs[name])
        total = statistics.median(sum(ms for _, ms in r) for r in runs[name])
        print(f"{name}: {total:.2f} ms from exec to exit (median of {n}, under strace)")
        for label, ms in rows:
            label = "exec to the TCP connect" if label == "execve" else label
            label = "the TCP connect" if label == "connect" else label
            print(f"  {ms:6.2f} ms  {label}")


if __name__ == "__main__":
    main()
