# 1M tasks like benches/common/tasks.rs's task() without `request`, compact JSON.
import json, sys, uuid, datetime
n = int(sys.argv[2]); now = datetime.datetime.now(datetime.timezone.utc)
st = ["working"]*4 + ["input_required"]*3 + ["completed", "failed", "cancelled"]
f = open(sys.argv[1], "w"); f.write("{")
for i in range(n):
    tid = str(uuid.uuid4()); c = now - datetime.timedelta(minutes=n - i)
    ca = c.strftime("%Y-%m-%dT%H:%M:%SZ"); ua = (c + datetime.timedelta(seconds=30)).strftime("%Y-%m-%dT%H:%M:%SZ")
    t = {"task_id": tid, "status": st[i % 10], "input_schema": None, "input_value": None, "result": None,
         "idempotency_key": f"incident-{i}", "created_at": ca, "updated_at": ua,
         "title": f"INC-{1000+i} checkout latency in eu-west-{i%3}",
         "status_message": "correlating deploys with error spikes", "revision": 3,
         "history": [{"status": "working", "at": ca, "note": "created"}]}
    if i: f.write(",")
    f.write(json.dumps(tid)); f.write(":"); f.write(json.dumps(t, separators=(",", ":")))
f.write("}\n")
