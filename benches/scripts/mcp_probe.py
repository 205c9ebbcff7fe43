#!/usr/bin/env python3
# Used by docs/performance.md (issue 20, MCP, 2026-12-03): one keep-alive
# HTTP client against a running `rudder mcp --http` serving the bench's
# catalogue (tool `diagnose`, target/tmp/mcp-bench-tools.toml), timing N
# creates (`tools/call` to CreateTaskResult) and then N `tasks/get`s of one
# task; prints the medians.
# usage: mcp_probe.py HOST PORT N [create|get]
import http.client, json, statistics, sys, time

host, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
what = sys.argv[4] if len(sys.argv) > 4 else "create"
meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "probe", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}}}
conn = http.client.HTTPConnection(host, port)


def call(i, method, name, params):
    params = dict(params, _meta=meta)
    body = json.dumps({"jsonrpc": "2.0", "id": i, "method": method, "params": params})
    headers = {"content-type": "application/json", "accept": "application/json, text/event-stream",
               "mcp-protocol-version": "2026-07-28", "mcp-method": method}
    if name:
        headers["mcp-name"] = name
    conn.request("POST", "/mcp", body, headers)
    text = conn.getresponse().read().decode()
    if not text.lstrip().startswith("{"):
        text = [l[5:] for l in text.splitlines() if l.startswith("data:")][-1]
    return json.loads(text)


def create(i):
    args = {"name": "diagnose", "arguments": {"incident": f"INC-{i}", "service": "payments"}}
    return call(i, "tools/call", "diagnose", args)["result"]["taskId"]


call(0, "server/discover", None, {})
times = []
if what == "create":
    for i in range(n):
        t0 = time.perf_counter(); create(i + 1); times.append(time.perf_counter() - t0)
else:
    task = create(1)
    for i in range(n):
        t0 = time.perf_counter(); call(i + 2, "tasks/get", task, {"taskId": task})
        times.append(time.perf_counter() - t0)
print("%s median %.3f ms" % (what, statistics.median(times) * 1e3))
