"""The ``shell`` tool: run a bash command, capture its output, kill it all on timeout.

The command runs as ``/bin/bash -c`` in its own session (process group), under a reaper
(``contextree.tools._reaper``) that adopts every orphaned descendant, with stdout and
stderr interleaved in one pipe and stdin closed. It is finished when bash has exited *and*
the pipe has closed: a background job that keeps the pipe open (``server &``) counts as part
of the command, and is killed with it at the timeout, together with every process it
started, even one in a new session (``setsid``). Redirect a job's output
(``server > log 2>&1 &``) to leave it running. Output keeps its end (tail truncation), where
errors and summaries are. At most ``MAX_CAPTURE`` bytes are kept in memory, the first and last
halves: the model is told how much of the middle was dropped, and that the saved file lacks it.

The shell confines nothing: the command can read and write any file the user can, anywhere,
and reach the network. The workspace is only its working directory. What it does not get
is the agent's secrets: environment variables whose names look like secrets are withheld
(``ShellEnvironment``), unless the context allows them.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import IO

from contextree._truncation import Dropped
from contextree.errors import ToolError
from contextree.markers import ShellMeta
from contextree.tools._context import ToolContext
from contextree.tools._decorator import tool
from contextree.tools._environment import ShellEnvironment, protect_process
from contextree.tools._kinds import ToolKind
from contextree.tools._reaper import kill_pipe_writers, reaper_argv
from contextree.tools._result import ToolResult

DEFAULT_TIMEOUT = 120.0
MAX_TIMEOUT = 3600.0
MAX_CAPTURE = 32 * 2**20  # bytes kept in memory (first and last halves beyond this)
KILL_GRACE = 2.0  # seconds to wait for the pipe to close after killing the group
SHELL = "/bin/bash"


class _Capture(threading.Thread):
    """Reads a pipe to its end; beyond ``limit`` bytes it keeps the first and last halves."""

    def __init__(self, stream: IO[bytes], limit: int) -> None:
        super().__init__(daemon=True, name="contextree-shell-capture")
        self._fd = stream.fileno()
        self._stream = stream
        self._half = max(1, limit // 2)
        self._head = bytearray()
        self._tail = bytearray()
        self._dropped = 0
        self._dropped_lines = 0
        self._lock = threading.Lock()

    def run(self) -> None:
        try:
            while chunk := os.read(self._fd, 65536):
                with self._lock:
                    self._add(chunk)
        except OSError:
            pass
        finally:
            self._stream.close()

    def _add(self, chunk: bytes) -> None:
        room = self._half - len(self._head)
        if room > 0:
            self._head += chunk[:room]
            chunk = chunk[room:]
        self._tail += chunk
        excess = len(self._tail) - self._half
        if excess > self._half:  # trim in large steps, not on every chunk
            self._dropped_lines += self._tail.count(b"\n", 0, excess)
            del self._tail[:excess]
            self._dropped += excess

    def data(self) -> tuple[bytes, Dropped | None]:
        """Everything read so far (with a marker where the middle was dropped), and what
        was dropped (None: nothing)."""
        with self._lock:
            excess = max(0, len(self._tail) - self._half) if self._dropped else 0
            if not self._dropped + excess:
                return bytes(self._head + self._tail), None
            dropped = Dropped(self._dropped + excess,
                              self._dropped_lines + self._tail.count(b"\n", 0, excess))
            return bytes(self._head) + dropped.marker() + bytes(self._tail[excess:]), dropped


@dataclass
class Completed:
    """How a command ended: its output, exit code and whether it was killed at the timeout."""

    output: bytes
    exit_code: int
    timed_out: bool
    lingering: bool  # a process outside the group still held the output open
    dropped: Dropped | None = None  # the middle of the output, beyond MAX_CAPTURE


def run_command(command: str, *, cwd: str, timeout: float,
                env: Mapping[str, str] | None = None, protect: bool = False) -> Completed:
    """Run ``command`` with bash in ``cwd`` (environment ``env``, default this process's);
    after ``timeout`` kill it and every process it started, new sessions included.
    ``protect`` drops the capabilities that read other processes' memory (``_reaper``)."""
    deadline = time.monotonic() + timeout
    proc = subprocess.Popen(
        reaper_argv(sys.executable or "python3", [SHELL, "-c", command], protect=protect),
        cwd=cwd,
        env=None if env is None else dict(env),
        stdin=subprocess.PIPE,  # the reaper's: closed when the command is over
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    assert proc.stdout is not None and proc.stdin is not None
    pipe = os.fstat(proc.stdout.fileno()).st_ino  # what holds it open is part of the command
    capture = _Capture(proc.stdout, MAX_CAPTURE)
    capture.start()
    timed_out = True
    try:
        capture.join(max(0.0, deadline - time.monotonic()))
        if not capture.is_alive():  # the output closed: bash has exited (or closed it)
            proc.stdin.close()
            proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            timed_out = False
    except subprocess.TimeoutExpired:
        pass
    finally:
        if timed_out or proc.poll() is None:
            _kill_all(proc, pipe)
        if not proc.stdin.closed:
            proc.stdin.close()
    capture.join(KILL_GRACE)
    code = proc.returncode
    exit_code = 128 - code if code < 0 else code
    output, dropped = capture.data()
    return Completed(output, exit_code, timed_out, capture.is_alive(), dropped)


def _kill_all(proc: subprocess.Popen[bytes], pipe: int) -> None:
    """Have the reaper kill every descendant, then kill the process group (anything the
    reaper could not adopt, or the reaper itself if it does not answer), then every process
    still holding the output ``pipe`` (the command may have killed its reaper)."""
    try:
        proc.terminate()  # SIGTERM: the reaper kills its whole tree and exits
        proc.wait(timeout=KILL_GRACE)
    except subprocess.TimeoutExpired:
        pass
    _kill_group(proc.pid)
    kill_pipe_writers(pipe)
    proc.wait()


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _signal_name(exit_code: int) -> str:
    if exit_code <= 128:
        return ""
    try:
        return f" (killed by {signal.Signals(exit_code - 128).name})"
    except ValueError:
        return ""


@tool(truncates_itself=True, kind=ToolKind.SHELL)
def shell(
    command: str, timeout: float = DEFAULT_TIMEOUT, context: ToolContext | None = None
) -> ToolResult:
    """Run a bash command in the working directory and return its output (stdout and stderr together) and exit code. Long output keeps its last lines and the full text is saved to a file you can read. Commands time out, and then every process they started is killed; a background job must redirect its output (cmd > log 2>&1 &) or it is waited for. The shell is not confined to the workspace: it can read and change any file, so take care. Environment variables that look like secrets (*_KEY, *_TOKEN, *_SECRET, *PASS*, database URLs, URLs with a password...) are not passed to the command, and the agent's own environment and memory cannot be read back through /proc; but other places stay readable: files that hold secrets, the environments of other processes (such as the shell that started the agent), and the agent's command line.

    Args:
        command: The bash command line to run.
        timeout: Seconds before the command and every process it started are killed.
    """
    ctx = context or ToolContext()
    if not command.strip():
        raise ToolError("command is empty; give a bash command line to run")
    if "\0" in command:
        raise ToolError("command contains a NUL character, which no command line can hold; "
                        "remove it (to produce one, write printf '\\0')")
    if not _encodable(command):
        raise ToolError("command contains a lone surrogate character, which is not valid "
                        "text; remove it or write the character it stands for")
    if not 0 < timeout <= MAX_TIMEOUT:
        raise ToolError(f"timeout must be more than 0 and at most {MAX_TIMEOUT:g} seconds")
    cwd = ctx.base
    if not cwd.is_dir():
        raise ToolError(f"the working directory {cwd} does not exist")
    policy = ctx.shell_env if ctx.shell_env is not None else ShellEnvironment()
    if policy.protect_process:
        protect_process()  # /proc/<agent>/environ: the keys withheld from env are there
    try:
        done = run_command(command, cwd=str(cwd), timeout=timeout, env=policy.build(),
                           protect=policy.protect_process)
    except OSError as e:
        raise ToolError(f"cannot start {SHELL}: {e.strerror or e}") from None
    return _result(command, timeout, done, ctx)


def _result(command: str, timeout: float, done: Completed, ctx: ToolContext) -> ToolResult:
    meta = ShellMeta(command=command, exit_code=done.exit_code,
                     timed_out=done.timed_out).to_meta()
    if done.output:
        cut = ctx.truncate(done.output, direction="tail", label="shell", dropped=done.dropped)
        body = cut.text.rstrip("\n")
        if cut.truncated:
            meta.update(cut.meta())
    else:
        body = "(no output)"
    notes = []
    if done.timed_out:
        notes.append(
            f"[timed out after {timeout:g} s; the command and every process it started were "
            "killed. Raise timeout, or run long jobs in the background with their output "
            "redirected: cmd > log 2>&1 &]"
        )
    if done.lingering:
        notes.append("[a process that left the command's session still holds its output]")
    notes.append(f"[exit code {done.exit_code}{_signal_name(done.exit_code)}]")
    text = body + "\n\n" + "\n".join(notes)
    return ToolResult(text, is_error=done.exit_code != 0 or done.timed_out, meta=meta)
