# Used by docs/performance.md (issue 18): the TUI over a store, another process's heartbeat --message to it drawn.
# rudder watch in a pty over STORE; time from a `rudder heartbeat ID --message M` process's start to M in the pty output.
import os, pty, sys, time, select, subprocess, statistics
R, store, tid = sys.argv[1], sys.argv[2], sys.argv[3]
pid, fd = pty.fork()
if pid == 0:
    os.environ["TERM"] = "xterm-256color"; os.environ["COLUMNS"]="120"; os.environ["LINES"]="35"
    os.execv(R, [R, "--store", store, "watch"])
import fcntl, termios, struct
fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 35, 120, 0, 0))
def drain(t):
    end = time.time() + t; buf = b""
    while time.time() < end:
        r,_,_ = select.select([fd],[],[],0.05)
        if r:
            try: buf += os.read(fd, 65536)
            except OSError: break
    return buf
first = drain(8); os.write(fd, b"g2"); drain(2)
print("startup bytes", len(first), file=sys.stderr)
times = []
for k in range(7):
    m = chr(66 + k) * 12
    t0 = time.perf_counter()
    p = subprocess.Popen([R, "--store", store, "heartbeat", tid, "--message", m], stdout=subprocess.DEVNULL)
    buf = b""; got = None
    while time.perf_counter() - t0 < 10:
        r,_,_ = select.select([fd],[],[],0.01)
        if r:
            buf += os.read(fd, 65536)
            if m.encode() in buf: got = time.perf_counter() - t0; break
    p.wait(); times.append(got); drain(0.5)
print("runs ms:", [None if t is None else round(t*1000,1) for t in times])
ok = [t for t in times if t is not None]
if ok: print(f"median {statistics.median(ok)*1000:.1f} ms of {len(ok)}, max {max(ok)*1000:.1f} ms")
os.kill(pid, 15)
