# The Python baseline table of docs/performance.md (issue 18): N rows, prints the middle row's task_id.
import sqlite3, sys, uuid
c = sqlite3.connect(sys.argv[1])
c.execute("CREATE TABLE tasks (seq INTEGER PRIMARY KEY, task_id TEXT NOT NULL UNIQUE, revision INTEGER NOT NULL, doc TEXT NOT NULL)")
n = int(sys.argv[2])
doc = "x" * 500
c.executemany("INSERT INTO tasks (task_id, revision, doc) VALUES (?, 3, ?)", ((str(uuid.uuid4()), doc) for _ in range(n)))
c.commit()
print(c.execute("SELECT task_id FROM tasks WHERE seq = ?", (n // 2,)).fetchone()[0])
