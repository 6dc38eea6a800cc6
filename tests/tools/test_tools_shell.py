"""The shell tool: output, exit codes, timeouts that kill every child, tail truncation."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import time
from pathlib import Path

import pytest

from contextree import OverflowStore
from contextree.tools import (
    ShellEnvironment,
    ToolContext,
    ToolResult,
    Workspace,
    _shell,
    make_tools,
    read,
    shell,
)


def run(ctx: ToolContext, command: str, **extra: object) -> ToolResult:
    return shell.run({"command": command, **extra}, context=ctx)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is dead for our purposes
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return True


def test_output_and_exit_code(ctx: ToolContext) -> None:
    r = run(ctx, "echo hello")
    assert r.content == "hello\n\n[exit code 0]"
    assert not r.is_error
    assert r.meta == {"command": "echo hello", "exit_code": 0}
    assert shell.truncates_itself


def test_failure_reports_exit_code_and_interleaves_stderr(ctx: ToolContext) -> None:
    r = run(ctx, "echo out; echo err >&2; echo out2; exit 3")
    assert r.is_error
    assert r.content == "out\nerr\nout2\n\n[exit code 3]"
    assert r.meta is not None and r.meta["exit_code"] == 3


def test_runs_in_the_workspace_root(ctx: ToolContext, ws: Path) -> None:
    assert run(ctx, "pwd").content.splitlines()[0] == str(ws.resolve())
    sub = ws / "sub"
    sub.mkdir()
    r = shell.run({"command": "pwd"}, context=ToolContext(workspace=Workspace(ws), cwd=sub))
    assert r.content.splitlines()[0] == str(sub.resolve())


def test_no_output_and_non_utf8_output(ctx: ToolContext) -> None:
    assert run(ctx, "true").content == "(no output)\n\n[exit code 0]"
    r = run(ctx, r"printf 'caf\xe9 ok\n'")
    assert r.content.startswith("caf\ufffd ok")


def test_timeout_kills_the_whole_process_group(ctx: ToolContext, ws: Path) -> None:
    start = time.monotonic()
    r = run(ctx, "echo started; sleep 100 & echo $! > bg.pid; sleep 100", timeout=0.5)
    elapsed = time.monotonic() - start
    assert elapsed < 5
    assert r.is_error
    assert r.content.startswith("started\n")
    assert "timed out after 0.5 s" in r.content
    assert "[exit code 137 (killed by SIGKILL)]" in r.content
    assert r.meta is not None and r.meta["timed_out"] is True and r.meta["exit_code"] == 137
    pid = int((ws / "bg.pid").read_text())
    deadline = time.monotonic() + 3
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not alive(pid)


def test_background_job_holding_the_output_is_part_of_the_command(ctx: ToolContext) -> None:
    start = time.monotonic()
    r = run(ctx, "sleep 100 &", timeout=0.5)
    assert time.monotonic() - start < 5
    assert r.meta is not None and r.meta["timed_out"] is True


def test_background_job_with_redirected_output_is_left_running(ctx: ToolContext, ws: Path) -> None:
    start = time.monotonic()
    r = run(ctx, "sleep 30 > /dev/null 2>&1 & echo $! > bg.pid", timeout=10)
    assert time.monotonic() - start < 5
    assert r.meta is not None and r.meta["exit_code"] == 0 and "timed_out" not in r.meta
    pid = int((ws / "bg.pid").read_text())
    try:
        assert alive(pid)
    finally:
        os.kill(pid, signal.SIGKILL)


def test_large_output_keeps_the_tail_and_saves_everything(ctx: ToolContext) -> None:
    r = run(ctx, "seq 1 100000; echo 'error: it broke' >&2; exit 2")
    assert r.is_error
    lines = r.content.splitlines()
    assert "error: it broke" in lines
    assert "100000" in lines and "1" not in lines[:5]
    assert lines[-1] == "[exit code 2]"  # the exit code comes after the truncation hint
    assert "[Output truncated: showing lines" in r.content
    assert r.meta is not None
    marker = r.meta["truncated"]
    assert marker["direction"] == "tail" and marker["total_lines"] == 100001
    saved = Path(marker["saved_path"])
    assert ctx.store is not None and saved.parent == ctx.store.directory
    expected = "".join(f"{i}\n" for i in range(1, 100001)) + "error: it broke\n"
    assert saved.read_text() == expected
    # The hint's read call works from inside the workspace.
    page = read.run({"path": str(saved), "offset": 1, "limit": 2}, context=ctx)
    assert page.content.startswith("     1\t1\n     2\t2")


def test_output_beyond_the_capture_limit_is_told_with_its_true_size(
        ctx: ToolContext, monkeypatch: pytest.MonkeyPatch) -> None:
    """Only the first and last halves of MAX_CAPTURE are kept: the model reads how much the
    command printed, how much of the middle was dropped, and that the file lacks it."""
    monkeypatch.setattr(_shell, "MAX_CAPTURE", 64 * 1024)
    r = run(ctx, f"seq -f 'line %05g {'x' * 38}' 1 20000")
    printed = 20000 * 50  # "line 00001 ", 38 x, a newline
    assert r.meta is not None
    marker = r.meta["truncated"]
    assert (marker["total_lines"], marker["total_bytes"]) == (20000, printed)
    saved = Path(marker["saved_path"]).read_bytes()
    dropped = printed - 64 * 1024
    assert f"[... {dropped} bytes of output dropped ...]".encode() in saved
    notice = r.content[r.content.index("[Output truncated:"):]
    assert "the output was 20000 lines (976.6 KB)" in notice
    assert f"{dropped} bytes (912.6 KB, " in notice and "in its middle were dropped" in notice
    assert "the saved file is not the full output" in notice
    assert "Full output" not in notice and "Kept output saved to" in notice
    assert f"line 20000 {'x' * 38}\n\n[Output truncated:" in r.content  # the true end
    # The line numbers and the read call are the saved file's: they still work.
    m = re.search(r"Showing lines (\d+)-(\d+) of the (\d+) kept .*offset=1, limit=(\d+)",
                  notice)
    assert m is not None
    first, last, kept, limit = map(int, m.groups())
    assert last == kept == saved.count(b"\n") and limit == first - 1


def test_binary_output_is_capped_as_sent_and_its_hint_is_the_shell(ctx: ToolContext) -> None:
    """Undecodable bytes become U+FFFD (3 bytes each) and still fit the 50 KB cap; read
    refuses a binary file, so the hint offers the shell, and what it offers works."""
    r = run(ctx, "python3 -c \"import sys; sys.stdout.buffer.write(bytes(range(256)) * 1200)\"")
    body, notice = r.content.split("[Output truncated:")
    assert len(body.encode()) <= 50 * 1024
    assert "read(" not in notice and "It is binary" in notice
    command = re.search(r"`(xxd [^`]*)`", notice)
    assert command is not None
    shown = run(ctx, command[1])
    assert shown.content.startswith("00000000: 0001 0203 0405 0607")
    assert r.meta is not None
    saved = r.meta["truncated"]["saved_path"]
    refused = read.run({"path": saved, "offset": 1, "limit": 10}, context=ctx)
    assert refused.is_error and "binary file" in refused.content


def test_session_id_reaches_the_store(ws: Path, tmp_path: Path) -> None:
    store = OverflowStore(tmp_path / "store")
    ctx = ToolContext(workspace=Workspace(ws), store=store, session_id="sess-1")
    r = run(ctx, "seq 1 5000")
    assert r.meta is not None
    assert Path(r.meta["truncated"]["saved_path"]).parent.name == "s-sess-1"


def test_argument_errors(ctx: ToolContext) -> None:
    assert "command is empty" in run(ctx, "  ").content
    assert "timeout must be" in run(ctx, "true", timeout=0).content
    assert "timeout must be" in run(ctx, "true", timeout=10**6).content
    assert "must be a number" in run(ctx, "true", timeout="5").content


def test_arun(ctx: ToolContext) -> None:
    r = asyncio.run(shell.arun({"command": "echo async"}, context=ctx))
    assert r.content.startswith("async\n")


# -- what the shell does not contain, and what it withholds --------------------------------
def test_timeout_kills_children_that_left_the_session(ctx: ToolContext, ws: Path) -> None:
    # setsid puts the child in a new session, out of reach of a process-group kill; a
    # double fork orphans it too. Both hold the output open, so both are part of the command.
    r = run(ctx, "setsid bash -c 'echo $$ > a.pid; exec sleep 300' & "
                 "(setsid bash -c 'echo $$ > b.pid; exec sleep 300' &) ; sleep 300",
            timeout=1)
    assert r.meta is not None and r.meta["timed_out"]
    pids = [int((ws / name).read_text()) for name in ("a.pid", "b.pid")]
    deadline = time.monotonic() + 5
    while any(alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [p for p in pids if alive(p)]


def test_secret_looking_variables_are_withheld(ctx: ToolContext,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")
    monkeypatch.setenv("GITHUB_TOKEN", "ghp-secret")
    monkeypatch.setenv("DB_PASSWORD", "hunter2")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "aws-secret")
    monkeypatch.setenv("PLAIN_SETTING", "visible")
    r = run(ctx, "env")
    assert "visible" in r.content
    for secret in ("sk-secret", "ghp-secret", "hunter2", "aws-secret"):
        assert secret not in r.content
    assert "not passed to the command" in shell.description
    assert "not confined" in shell.description


def test_allowed_and_strict_environments(ws: Path, tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", "ghp-secret")
    monkeypatch.setenv("PLAIN_SETTING", "visible")
    allowed = ShellEnvironment(allow=("GITHUB_TOKEN",))
    tools = {t.name: t for t in make_tools(ws, store=OverflowStore(tmp_path / "s"),
                                           shell_env=allowed)}
    assert "ghp-secret" in tools["shell"].run({"command": "echo $GITHUB_TOKEN"}).content
    strict = ShellEnvironment(only=("PATH", "HOME"), extra={"MODE": "ci"})
    assert strict.withheld({"PATH": "/bin", "PLAIN_SETTING": "x"}) == ["PLAIN_SETTING"]
    ctx = ToolContext(workspace=Workspace(ws), store=OverflowStore(tmp_path / "s"),
                      shell_env=strict)
    out = run(ctx, "echo [$PLAIN_SETTING] [$MODE]; command -v bash").content
    assert "[] [ci]" in out and "bash" in out
