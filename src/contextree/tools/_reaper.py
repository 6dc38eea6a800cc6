"""The small process that runs a ``shell`` command and can kill everything it started.

A process group is not enough: a command can start a child in a new session (``setsid``,
a daemon's double fork), and ``killpg`` never reaches it. So the command runs under a
*reaper*: a short Python program that makes itself a child subreaper (Linux
``PR_SET_CHILD_SUBREAPER``), so every orphaned descendant, new session or not, becomes its
child instead of init's. Then:

- ``SIGTERM`` to the reaper kills every descendant (kill the children, adopt their
  orphans, repeat until none is left) and exits 137;
- when bash has exited, the reaper waits for its standard input to close (the tool's
  signal that the command is over) and exits with bash's status, leaving alone a
  background job that redirected its output (it is then reparented as usual).

Where the subreaper call is not available the reaper still runs the command; the tool's
``killpg`` of the command's process group is then the only kill.
"""

from __future__ import annotations

__all__ = ["REAPER"]

REAPER = r'''
import ctypes, os, signal, sys

PR_SET_CHILD_SUBREAPER = 36
try:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
except Exception:
    pass

me = os.getpid()

def children():
    kids = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % name, "rb") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat.rsplit(b")", 1)[-1].split()
        if len(fields) > 1 and int(fields[1]) == me and fields[0] != b"Z":
            kids.append(int(name))
    return kids

def reap():
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return

def kill_all(signum, frame):
    for _ in range(10000):
        kids = children()
        if not kids:
            break
        for pid in kids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        for pid in kids:
            try:
                os.waitpid(pid, 0)
            except OSError:
                pass
        reap()
    os._exit(137)

signal.signal(signal.SIGTERM, kill_all)
devnull = os.open(os.devnull, os.O_RDONLY)
pid = os.fork()
if pid == 0:
    os.dup2(devnull, 0)
    os.execv(sys.argv[1], sys.argv[1:])
os.close(devnull)
out = os.open(os.devnull, os.O_WRONLY)
os.dup2(out, 1)  # the output pipe is left to the command alone, so it closes when they do
os.dup2(out, 2)
while True:
    try:
        done, status = os.waitpid(-1, 0)
    except ChildProcessError:
        code = 0
        break
    if done == pid:
        code = os.waitstatus_to_exitcode(status)
        code = 128 - code if code < 0 else code
        break
while sys.stdin.buffer.read(65536):  # until the tool closes it: the command is over
    pass
reap()
os._exit(code)
'''
