"""The small process that runs a ``shell`` command and can kill everything it started.

A process group is not enough: a command can start a child in a new session (``setsid``,
a daemon's double fork), and ``killpg`` never reaches it. So the command runs under a
*reaper*: a short Python program that makes itself a child subreaper (Linux
``PR_SET_CHILD_SUBREAPER``), so every orphaned descendant, new session or not, becomes its
child instead of init's. The reaper is not bash's parent: a second process in between is
(the *decoy*), so ``kill -9 $PPID`` kills only the decoy, and bash is adopted by the reaper.
Then:

- ``SIGTERM`` to the reaper kills every descendant (kill the children, adopt their
  orphans, repeat until none is left) and exits 137;
- when bash has exited, the reaper waits for its standard input to close (the tool's
  signal that the command is over) and exits with bash's status, leaving alone a
  background job that redirected its output (it is then reparented as usual).

A command that walks up ``/proc`` can still find and kill the reaper itself (it runs as
the same user). For that case the tool kills, at the timeout, every process that still
holds the command's output pipe (``kill_pipe_writers``): what keeps the pipe open is part of
the command. A job that both left the reaper's reach *and* redirected its output away is
then out of reach.

With ``--protect`` the reaper also drops, from itself and so from every command, the
capabilities that read another process's memory or environment whatever its
``PR_SET_DUMPABLE`` (``PROTECTED_CAPABILITIES``): this matters only when the agent runs as
root, which otherwise holds them.

Where the subreaper call is not available the reaper still runs the command; the tool's
``killpg`` of the command's process group and the pipe sweep are then the only kills.
"""

from __future__ import annotations

import contextlib
import os
import signal

__all__ = ["PROTECTED_CAPABILITIES", "REAPER", "kill_pipe_writers", "reaper_argv"]

PROTECTED_CAPABILITIES: dict[str, int] = {
    "CAP_SYS_MODULE": 16,  # load a kernel module: anything
    "CAP_SYS_RAWIO": 17,  # /proc/kcore, /dev/mem
    "CAP_SYS_PTRACE": 19,  # /proc/<pid>/environ and mem of a non-dumpable process, ptrace
    "CAP_SYS_ADMIN": 21,  # BPF and perf tracing (and the rest of "admin")
    "CAP_PERFMON": 38,  # perf events that sample another process's memory
    "CAP_BPF": 39,  # BPF programs that read user memory
}
"""Capabilities a ``--protect`` reaper drops from the command (bounding set and all sets)."""

REAPER = r'''
import ctypes, os, signal, sys

PR_SET_CHILD_SUBREAPER = 36
PR_CAPBSET_DROP = 24
try:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
except Exception:
    libc = None

args = sys.argv[1:]
drop = []
while args and args[0].startswith("--drop="):
    drop = [int(c) for c in args.pop(0)[7:].split(",") if c]

def drop_capabilities(caps):
    """Out of the bounding set (needs CAP_SETPCAP: root has it) and the inheritable,
    permitted and effective sets, so that no exec, not even a setuid one, gets them back."""
    if libc is None or not caps:
        return
    for cap in caps:
        libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)
    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]
    class Data(ctypes.Structure):
        _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                    ("inheritable", ctypes.c_uint32)]
    header = Header(0x20080522, 0)
    data = (Data * 2)()
    try:
        if libc.capget(ctypes.byref(header), data) != 0:
            return
        for cap in caps:
            mask = ~(1 << (cap % 32)) & 0xFFFFFFFF
            part = data[cap // 32]
            part.effective &= mask
            part.permitted &= mask
            part.inheritable &= mask
        libc.capset(ctypes.byref(header), data)
    except Exception:
        pass

drop_capabilities(drop)
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

def exit_code(status):
    code = os.waitstatus_to_exitcode(status)
    return 128 - code if code < 0 else code

signal.signal(signal.SIGTERM, kill_all)
devnull = os.open(os.devnull, os.O_RDWR)
told, tell = os.pipe()
decoy = os.fork()
if decoy == 0:  # the decoy: bash's parent, so that kill $PPID does not reach the reaper
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.close(told)
    pid = os.fork()
    if pid == 0:  # bash: tells the reaper who it is before it runs anything
        os.write(tell, str(os.getpid()).encode())
        os.close(tell)
        os.dup2(devnull, 0)
        os.execv(args[0], args)
    os.close(tell)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    # Wait without reaping (WNOWAIT): if the decoy is killed right after bash exits, bash
    # is still there for the reaper to reap, with its own status.
    try:
        info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)
    except ChildProcessError:
        os._exit(0)
    if info is None or info.si_code == os.CLD_EXITED:
        os._exit(info.si_status if info is not None else 0)
    os._exit(128 + info.si_status)
os.close(tell)
os.dup2(devnull, 1)  # the output pipe is left to the command alone, so it closes when they do
os.dup2(devnull, 2)
said = b""
while chunk := os.read(told, 32):
    said += chunk
os.close(told)
shell = int(said) if said else None
code = None
while code is None:
    try:
        done, status = os.waitpid(-1, 0)
    except ChildProcessError:
        code = 0
        break
    if done == decoy:
        if not os.WIFSIGNALED(status) or shell is None:
            code = exit_code(status)
        # else the decoy was killed: bash is adopted, and its own status is the answer
    elif done == shell:
        code = exit_code(status)
while sys.stdin.buffer.read(65536):  # until the tool closes it: the command is over
    pass
reap()
os._exit(code)
'''


def reaper_argv(python: str, argv: list[str], *, protect: bool) -> list[str]:
    """The command line that runs ``argv`` under the reaper; ``protect`` drops
    ``PROTECTED_CAPABILITIES`` from it."""
    drop = ",".join(str(c) for c in PROTECTED_CAPABILITIES.values()) if protect else ""
    return [python, "-I", "-S", "-c", REAPER, f"--drop={drop}", *argv]


def _writer_fds(pid: str, link: str) -> bool:
    """Whether process ``pid`` holds the pipe ``link`` (``pipe:[inode]``) open for writing."""
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    for fd in fds:
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") != link:
                continue
            with open(f"/proc/{pid}/fdinfo/{fd}") as f:
                flags = next((line.split()[1] for line in f if line.startswith("flags:")), "0")
        except (OSError, IndexError):
            continue
        if int(flags, 8) & os.O_ACCMODE != os.O_RDONLY:
            return True
    return False


def _stop(pid: int, link: str) -> int | None:
    """Stop ``pid`` if it still holds ``link``; a pidfd of it to kill it by (-1 where pidfds
    are missing), or None if it is gone or holds the pipe no more. The pidfd is opened
    before the check, so a pid reused meanwhile by another process is never signalled."""
    pidfd = -1
    with contextlib.suppress(OSError, AttributeError):
        pidfd = os.pidfd_open(pid)
    try:
        if _writer_fds(str(pid), link):
            _send(pid, pidfd, signal.SIGSTOP)
            return pidfd
    except OSError:
        pass
    if pidfd >= 0:
        os.close(pidfd)
    return None


def _send(pid: int, pidfd: int, signum: int) -> None:
    if pidfd >= 0:
        signal.pidfd_send_signal(pidfd, signum)
    else:
        os.kill(pid, signum)


def kill_pipe_writers(inode: int, *, rounds: int = 100) -> int:
    """SIGKILL every process (but this one) that holds the pipe ``inode`` open for writing;
    the number killed. Each is stopped first, until no new one appears, so that none can fork
    a new holder between the scan and the kill. Processes whose ``/proc/<pid>/fd`` this
    process may not read (another user's, or a non-dumpable one) are not seen."""
    link = f"pipe:[{inode}]"
    me = os.getpid()
    stopped: dict[int, int] = {}
    try:
        for _ in range(rounds):
            try:
                pids = [int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) != me]
            except OSError:
                break
            new = [p for p in pids if p not in stopped and _writer_fds(str(p), link)]
            if not new:
                break
            for pid in new:
                if (pidfd := _stop(pid, link)) is not None:
                    stopped[pid] = pidfd
        for pid, pidfd in stopped.items():
            with contextlib.suppress(OSError):
                _send(pid, pidfd, signal.SIGKILL)
    finally:
        for pidfd in stopped.values():
            if pidfd >= 0:
                os.close(pidfd)
    return len(stopped)
