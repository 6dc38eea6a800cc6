"""Helpers shared by the test modules; fixtures shared by many live in conftest.py.

Grouped by what they help with: paths, sessions and raw session lines, the command line,
messages and tool calls, PostgreSQL. Anything used by one test module only stays there.
"""

from __future__ import annotations

import gc
import json
import os
import pty
import re
import select
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson
import pytest
from typer.testing import CliRunner, Result

import contextree as ct
from contextree import Message, Session, ToolCall, Usage
from contextree.cli import app
from contextree.entries import MessageEntry

# -- paths ---------------------------------------------------------------------------------

TESTS = Path(__file__).resolve().parent
"""The tests folder."""
ROOT = TESTS.parent
"""The repository."""
SRC = ROOT / "src"
DOCS = ROOT / "docs"
DATA = TESTS / "data"
"""Test data (``tests/data``)."""
FORMATS_DATA = DATA / "formats"
"""Sample files of every session format."""


# -- sessions --------------------------------------------------------------------------------

def make_session(path: Path, *, turns: int = 3) -> dict[str, str]:
    """A session with a tool call, a label, a compaction, a branch and a leaf off the tip.
    Returns the ids of interesting entries."""
    ids: dict[str, str] = {}
    with Session.create(path, cwd="/work/app", durable=False) as s:
        s.append_message(Message.system("You are a coding agent."))
        ids["task"] = s.append_message(Message.user("Fix the bug in calc.py"))
        ids["call"] = s.append_message(Message.assistant(
            "Reading calc.py.", tool_calls=[ToolCall(id="c1", name="read",
                                                     arguments={"path": "calc.py"})],
            usage=Usage(input=500, output=20, total=520, cost=0.002), model="m1",
            provider="openai"))
        ids["result"] = s.append_message(Message.tool("def add(a, b):\n    return a - b\n",
                                                      tool_call_id="c1", name="read"))
        ids["found"] = s.append_message(Message.assistant("add() subtracts; fixing it."))
        s.set_label(ids["found"], "diagnosis")
        for i in range(turns):
            s.append_message(Message.user(f"step {i}"))
            s.append_message(Message.assistant(f"done {i}"))
        ids["compaction"] = s.append_compaction(summary="Fixed add() in calc.py.", first_kept_entry_id=ids["found"], tokens_before=900,
                                                tokens_after=300)
        ids["tip_a"] = s.append_message(Message.user("Now try approach A."))
        ids["summary"] = s.move_to(ids["found"], "Approach A was abandoned.") or ""
        ids["tip_b"] = s.append_message(Message.user("Approach B instead."))
        s.set_name("calc fix")
    return ids


def big_session(path: Path) -> None:
    """A session of 12 shell calls with 150-line outputs: enough to compact."""
    with Session.create(path, durable=False) as s:
        s.append_message(Message.system("You are a coding agent."))
        s.append_message(Message.user("Find the slow test."))
        for i in range(12):
            s.append_message(Message.assistant(f"Running part {i}.", tool_calls=[
                ToolCall(id=f"c{i}", name="shell", arguments={"command": f"pytest part{i}"})]))
            s.append_message(Message.tool(f"part {i} output line\n" * 150,
                                          tool_call_id=f"c{i}", name="shell"))
        s.append_message(Message.assistant("Part 7 is slow."))


def user_session(path: Path, n: int = 3, *, repeat: int = 1) -> list[str]:
    """A durable session of ``n`` user messages ``m0``, ``m1``... (each ``repeat`` times
    over); returns their ids."""
    with ct.Session.create(path, cwd="/") as s:
        return [s.append_message(ct.Message.user(f"m{i}" * repeat)) for i in range(n)]


def open_fds() -> int:
    """How many file descriptors this process has open, once what earlier tests dropped is
    collected (a session left in a reference cycle closes its descriptors only then)."""
    gc.collect()
    return len(os.listdir("/proc/self/fd"))


# -- entries and raw session lines -------------------------------------------------------------

TS = "2026-01-01T00:00:00.000Z"
"""A fixed timestamp for hand-made entries."""


def message_entry(eid: str, parent: str | None, text: str | None = None,
                  role: str = "user") -> MessageEntry:
    """A message entry with id ``eid``; its text is ``text``, else the id."""
    return MessageEntry(eid, parent, TS, message=Message(role=role, content=eid if text is None
                                                         else text))


def raw_header(cwd: str = "/") -> bytes:
    """The header line of a session file with id ``sid``."""
    return orjson.dumps({"type": "session", "id": "sid", "created_at": TS, "version": 1,
                         "cwd": cwd})


def raw_message(eid: str, parent: str | None, text: str = "x") -> bytes:
    """The line of a user message entry."""
    return orjson.dumps({"type": "message", "id": eid, "parent_id": parent, "timestamp": TS,
                         "message": {"role": "user", "content": text}})


def write_lines(path: Path, lines: Sequence[bytes]) -> None:
    """Write ``lines`` to ``path``, each ending in a newline."""
    path.write_bytes(b"".join(x + b"\n" for x in lines))


# -- the command line ----------------------------------------------------------------------------

runner = CliRunner()


def run(*args: str | Path, code: int = 0) -> Result:
    """Run the CLI in this process; it must exit with ``code`` (and say nothing on stderr
    when it succeeds)."""
    result = runner.invoke(app, [str(a) for a in args])
    assert result.exit_code == code, (result.stdout, result.stderr, result.exception)
    if code == 0:  # nothing on stderr but the notice that --raw / --no-redact asked for
        unredacted = {"--raw", "--no-redact"} & {str(a) for a in args}
        assert result.stderr == "" or (unredacted and all(
            line.startswith("not redacted: ") for line in result.stderr.splitlines()))
    return result


def run_json(*args: str | Path) -> Any:
    """Run the CLI with ``--json`` and parse what it printed."""
    return json.loads(run(*args, "--json").stdout)


def one_line_error(result: Result, *needles: str) -> None:
    """The failure is a single ``error:`` line on stderr, naming ``needles``."""
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "Traceback" not in result.stderr
    for needle in needles:
        assert needle in lines[0]


def cli(*args: str | Path, **env: str) -> subprocess.CompletedProcess[str]:
    """Run ``python -m contextree ARGS`` in a new process (``env`` added to the environment)."""
    return subprocess.run([sys.executable, "-m", "contextree", *map(str, args)],
                          capture_output=True, text=True, timeout=180,
                          env={**os.environ, **env})


def cli_bytes(*args: str | Path) -> subprocess.CompletedProcess[bytes]:
    """``cli`` with the output as bytes, exactly as written."""
    return subprocess.run([sys.executable, "-m", "contextree", *map(str, args)],
                          capture_output=True, timeout=180)


SGR = re.compile(rb"\x1b\[[0-9;]*m")
"""Colours and bold: the only escape sequences the CLI sends itself."""


def run_on_terminal(args: list[str], columns: int = 100, *,
                    stderr_too: bool = False) -> tuple[bytes, int]:
    """Run the CLI with stdout on a pseudo-terminal (rich styles it); return what it wrote.
    ``stderr_too``: stderr on the terminal as well (where a progress bar is drawn)."""
    master, slave = pty.openpty()
    env = dict(os.environ, TERM="xterm-256color", COLUMNS=str(columns), LINES="50")
    env.pop("NO_COLOR", None)
    proc = subprocess.Popen([sys.executable, "-m", "contextree", *args], stdout=slave,
                            stderr=slave if stderr_too else subprocess.DEVNULL,
                            stdin=subprocess.DEVNULL, env=env)
    os.close(slave)
    out = b""
    while True:
        ready, _, _ = select.select([master], [], [], 60)
        if not ready:
            break
        try:
            chunk = os.read(master, 1 << 16)
        except OSError:  # the other side closed
            break
        if not chunk:
            break
        out += chunk
    os.close(master)
    return out.replace(b"\r\n", b"\n"), proc.wait(timeout=60)  # the tty's own newlines


# -- the chat on a pseudo-terminal ----------------------------------------------------------

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


class Term:
    """A process on a pseudo-terminal: ``send`` keys, ``expect`` what the screen shows."""

    def __init__(self, args: list[str], cwd: Path, env: dict[str, str]) -> None:
        import fcntl
        import termios

        master, slave = pty.openpty()
        self.fd = master
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "contextree", *args], cwd=cwd, env=env,
            stdin=slave, stdout=slave, stderr=slave, start_new_session=True,
            preexec_fn=lambda: fcntl.ioctl(0, termios.TIOCSCTTY, 0))
        os.close(slave)
        self.seen = ""
        self.raw = b""  # every byte the program wrote, escapes and all
        self._pos = 0

    def read(self, timeout: float) -> None:
        ready, _, _ = select.select([self.fd], [], [], timeout)
        if ready:
            try:
                data = os.read(self.fd, 65536)
            except OSError:  # the process ended
                data = b""
            self.raw += data
            self.seen += ANSI.sub("", data.decode("utf-8", "replace")).replace("\r", "")

    def expect(self, pattern: str, timeout: float = 20) -> str:
        """Wait for ``pattern`` (a regex) after what was matched before; returns the match."""
        deadline = time.monotonic() + timeout
        rx = re.compile(pattern)
        while True:
            m = rx.search(self.seen, self._pos)
            if m:
                self._pos = m.end()
                return m.group(0)
            left = deadline - time.monotonic()
            if left <= 0 or (self.proc.poll() is not None and not select.select(
                    [self.fd], [], [], 0)[0]):
                raise AssertionError(f"never saw {pattern!r}; the screen:\n{self.seen}")
            self.read(min(left, 0.2))

    def send(self, keys: str) -> None:
        os.write(self.fd, keys.encode())

    def line(self, text: str) -> None:
        self.send(text + "\r")

    def say(self, text: str, *answers: str) -> None:
        """Type ``text`` (and Enter), then wait for each of ``answers`` (regexes) in turn."""
        self.line(text)
        for answer in answers:
            self.expect(answer)

    def ask(self, text: str, *answers: str) -> None:
        """``say`` at the prompt: wait for ``> `` first."""
        self.expect(r"> ")
        self.say(text, *answers)

    def exit(self) -> int:
        """Type ``/exit``; the exit code once the program ended."""
        self.line("/exit")
        return self.close()

    def close(self) -> int:
        try:
            code = self.proc.wait(timeout=20)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
            os.close(self.fd)
        return code


def chat_env(base_url: str, tmp_path: Path, **extra: str) -> dict[str, str]:
    """The environment of a chat against the fake OpenAI server at ``base_url``."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": str(SRC),
           "HOME": str(tmp_path / "home"), "TERM": "dumb", "NO_COLOR": "1",
           "OPENAI_BASE_URL": base_url, "OPENAI_API_KEY": "sk-test",
           "CONTEXTREE_MODEL": "gpt-test", **extra}
    return env


def open_chat(tmp_path: Path, server_url: str, *args: str, **env: str) -> Term:
    """``contextree chat tmp_path/chat.jsonl`` on a terminal, run in ``tmp_path/work``."""
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    return Term(["chat", str(tmp_path / "chat.jsonl"), *args], work,
                chat_env(server_url, tmp_path, **env))


# -- messages and tool calls ---------------------------------------------------------------------

def calling(call_id: str, name: str, **arguments: Any) -> Message:
    """An assistant message that calls one tool and says nothing."""
    return Message.assistant("", tool_calls=[ToolCall(id=call_id, name=name,
                                                      arguments=arguments)])


def texts(messages: Sequence[Message]) -> list[str]:
    """The text of each message."""
    return [m.text for m in messages]


def check_pairing(messages: Sequence[Message]) -> None:
    """Each tool result directly follows the assistant message that called it (after other
    results of that message), each call has exactly one result, and no result is orphaned."""
    pending: list[str] = []
    for m in messages:
        if m.role == "tool":
            assert m.tool_call_id in pending, f"orphan or misplaced result {m.tool_call_id}"
            pending.remove(m.tool_call_id)
            continue
        assert not pending, f"calls without results: {pending}"
        if m.role == "assistant" and m.tool_calls:
            ids = [c.id for c in m.tool_calls]
            assert len(set(ids)) == len(ids)
            pending = ids
    assert not pending, f"calls without results: {pending}"


def interrupted(messages: Sequence[Message]) -> set[str | None]:
    """The call ids whose result is the placeholder for an interrupted call."""
    return {m.tool_call_id for m in messages if (m.meta or {}).get("kind") == "interrupted"}


@ct.tool(name="big")
def big(n: int = 100) -> str:
    """Return n lines of output."""
    return ("x" * 59 + "\n") * n


def reply_of(model: Any, messages: Sequence[Message], *, streamed: bool) -> Message:
    """The reply of ``model`` to ``messages``: its stream read to the end, or ``complete``."""
    if not streamed:
        message: Message = model.complete(messages)
        return message
    with model.stream(messages) as stream:
        list(stream)
    result: Message = stream.message
    return result


# -- PostgreSQL ----------------------------------------------------------------------------------

def require_postgres() -> str:
    """The conninfo of this run's scratch schema; fails the test when a configured server is
    unusable, and skips it (loudly, see conformance) when there is none."""
    pytest.importorskip("psycopg")
    from conformance import postgres_error, postgres_skip_reason, postgres_url

    url = postgres_url()
    error = postgres_error()
    if error:
        pytest.fail(error)
    if url is None:
        pytest.skip(f"PostgreSQL backend NOT tested: {postgres_skip_reason()}")
    return url


def as_url(conninfo: str) -> str:
    """A conninfo (``host=... options=...``) as a ``postgresql://`` URL."""
    from urllib.parse import quote

    from psycopg.conninfo import conninfo_to_dict

    d = conninfo_to_dict(conninfo)
    user = quote(str(d.pop("user", "postgres")))
    host, port = d.pop("host", "127.0.0.1"), d.pop("port", "5432")
    db = d.pop("dbname", "postgres")
    query = "&".join(f"{k}={quote(str(v), safe='')}" for k, v in d.items())
    return f"postgresql://{user}@{host}:{port}/{db}" + (f"?{query}" if query else "")


def ctrl_c_on_first_delta(agent: Any) -> None:
    """Have ``agent`` send this process SIGINT (Ctrl-C) at its first text delta, once: the
    signal arrives in the main thread, which is waiting on the stream."""
    import signal
    import threading

    from contextree.runtime import Event

    sent = threading.Event()

    def press_ctrl_c(env: Any, payload: Any) -> None:
        if not sent.is_set():
            sent.set()
            os.kill(os.getpid(), signal.SIGINT)

    agent.on(Event.TEXT_DELTA, press_ctrl_c)
