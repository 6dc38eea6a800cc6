"""Hostile input to the built-in tools: every bad argument is an error result the model can act
on (never a raw exception), grep and glob cannot hang on a pattern, read pages a huge line in
bounded memory, and the overflow store keeps to private directories and to this session."""

from __future__ import annotations

import os
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from contextree import OverflowStore
from contextree.errors import StorageFailure
from contextree.tools import ToolContext, Workspace, _regex, edit, glob, grep, read, shell, write
from contextree.tools import _files as files_module
from contextree.tools._tool import Tool

LONG_NAME = "x" * 300  # over the usual 255-byte limit of one name
DEEP = "/".join(["d"] * 3000)  # over PATH_MAX

BAD: list[tuple[Tool, dict[str, Any]]] = [
    (read, {"path": "a\0b"}),
    (read, {"path": LONG_NAME}),
    (read, {"path": DEEP}),
    (read, {"path": "\ud800"}),
    (read, {"path": "fifo"}),
    (read, {"path": "a.txt", "offset": 10**30}),
    (read, {"path": "a.txt/x"}),
    (read, {"path": "/proc/self/mem"}),
    (read, {"path": "bin"}),
    (write, {"path": "a\0", "content": "x"}),
    (write, {"path": LONG_NAME, "content": "x"}),
    (write, {"path": DEEP, "content": "x"}),
    (write, {"path": "dir", "content": "x"}),
    (write, {"path": "a.txt/b", "content": "x"}),
    (write, {"path": "\ud800", "content": "x"}),
    (write, {"path": ".", "content": "x"}),
    (write, {"path": "fifo", "content": "x"}),
    (write, {"path": "../out.txt", "content": "x"}),
    (edit, {"path": "a.txt", "old_string": "hello", "new_string": "\ud800"}),
    (edit, {"path": "a.txt", "old_string": "\ud800", "new_string": "x"}),
    (edit, {"path": LONG_NAME, "old_string": "a", "new_string": "b"}),
    (edit, {"path": "fifo", "old_string": "a", "new_string": "b"}),
    (edit, {"path": "a\0", "old_string": "a", "new_string": "b"}),
    (edit, {"path": "bin", "old_string": "a", "new_string": "b"}),
    (edit, {"path": "dir", "old_string": "a", "new_string": "b"}),
    (shell, {"command": "echo a\0b"}),
    (shell, {"command": "echo \ud800"}),
    (shell, {"command": "true", "timeout": float("nan")}),
    (shell, {"command": "true", "timeout": float("inf")}),
    (shell, {"command": "true", "timeout": -1}),
    (grep, {"pattern": "("}),
    (grep, {"pattern": "[z-a]"}),
    (grep, {"pattern": "a{99999999999}"}),
    (grep, {"pattern": "(" * 2000 + ")" * 2000}),
    (grep, {"pattern": "a", "path": "a\0"}),
    (grep, {"pattern": "a", "glob": "[z-a]"}),
    (grep, {"pattern": "a", "path": LONG_NAME}),
    (grep, {"pattern": "a", "max_results": 0}),
    (glob, {"pattern": "[z-a]"}),
    (glob, {"pattern": "x/[z-a]"}),
    (glob, {"pattern": "\0"}),
    (glob, {"pattern": LONG_NAME + "/*"}),
    (glob, {"pattern": "{a,b}" * 20}),
    (glob, {"pattern": "*", "path": "a.txt"}),
    (glob, {"pattern": "../*"}),
    (glob, {"pattern": "*", "path": "fifo"}),
    (glob, {"pattern": "*", "path": "missing"}),
]


@pytest.fixture
def ctx(tmp_path: Path) -> ToolContext:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.txt").write_text("hello\n")
    (ws / "bin").write_bytes(b"\0\1\2")
    (ws / "dir").mkdir()
    os.mkfifo(ws / "fifo")
    return ToolContext(workspace=Workspace(ws), store=OverflowStore(tmp_path / "store"))


@pytest.mark.parametrize(("tool", "arguments"), BAD,
                         ids=[f"{t.name}-{i}" for i, (t, _) in enumerate(BAD)])
def test_bad_input_is_an_error_result(ctx: ToolContext, tool: Tool,
                                      arguments: dict[str, Any]) -> None:
    result = tool.run(arguments, context=ctx)
    assert result.is_error, result.content
    assert len(result.content) > 20
    result.content.encode("utf-8")  # valid text, storable as it is
    assert "Traceback" not in result.content


def test_a_directory_removed_under_write_is_an_error_result(
    ctx: ToolContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert ctx.workspace is not None
    sub = ctx.workspace.root / "sub"
    sub.mkdir()
    real_write = files_module.write_whole

    def vanishing(name: str, data: bytes, **kw: Any) -> Path:
        sub.rmdir()  # the directory goes away between the open and the write
        return real_write(name, data, **kw)

    monkeypatch.setattr(files_module, "write_whole", vanishing)
    result = write.run({"path": "sub/f.txt", "content": "x"}, context=ctx)
    assert result.is_error and "removed" in result.content


def test_result_text_is_always_valid_unicode(ctx: ToolContext) -> None:
    result = glob.run({"pattern": "\ud800*"}, context=ctx)
    result.content.encode("utf-8")


# -- patterns that backtrack ---------------------------------------------------------------
CATASTROPHIC = "(a+)+$"


@pytest.fixture
def redos(ctx: ToolContext) -> ToolContext:
    assert ctx.workspace is not None
    (ctx.workspace.root / "evil.txt").write_text("a" * 40 + "!\n")
    return ctx


@pytest.mark.skipif(not _regex.re2_available(), reason="google-re2 is not installed")
def test_grep_on_re2_runs_a_catastrophic_pattern_in_linear_time(redos: ToolContext) -> None:
    result = grep.run({"pattern": CATASTROPHIC}, context=redos)
    assert not result.is_error and result.content.startswith("No matches")
    assert result.meta is not None and result.meta["engine"] == "re2"
    assert "RE2" in grep.description


def test_grep_without_re2_stops_a_catastrophic_pattern_at_its_budget(
    redos: ToolContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_regex, "_re2", None)
    monkeypatch.setattr(_regex, "TIME_BUDGET", 0.5)
    result = grep.run({"pattern": CATASTROPHIC}, context=redos)
    assert result.is_error
    assert "time budget" in result.content and "contextree[re2]" in result.content
    # the worker that was stuck is gone; the next search works
    ok = grep.run({"pattern": "a+!"}, context=redos)
    assert not ok.is_error and "evil.txt:1:" in ok.content
    assert ok.meta is not None and ok.meta["engine"] == "re"


def test_patterns_re2_cannot_run_fall_back_to_python_re(redos: ToolContext) -> None:
    result = grep.run({"pattern": r"(a)\1+!"}, context=redos)  # a backreference
    assert not result.is_error and "evil.txt:1:" in result.content
    assert result.meta is not None and result.meta["engine"] == "re"


def test_glob_patterns_cannot_backtrack(ctx: ToolContext) -> None:
    assert ctx.workspace is not None
    (ctx.workspace.root / ("a" * 200)).write_text("x")
    for pattern in ("*a*a*a*a*a*a*a*a*a*a*b", "**/*a*a*a*a*a*a*a*a*b", "**/" * 50 + "b"):
        result = glob.run({"pattern": pattern}, context=ctx)
        assert not result.is_error and result.content.startswith("No files match")
        result = grep.run({"pattern": "x", "glob": pattern}, context=ctx)
        assert not result.is_error and result.content.startswith("No matches")


# -- bounded memory ------------------------------------------------------------------------
def test_read_of_a_huge_single_line_uses_bounded_memory(ctx: ToolContext) -> None:
    assert ctx.workspace is not None
    size = 64 * 2**20
    with open(ctx.workspace.root / "one-line.txt", "wb") as f:
        for _ in range(64):
            f.write(b"\xc3\xa9" * (2**19))  # "é" * 2**19: 1 MiB of two-byte characters
        f.write(b"\nsecond line\n")
    tracemalloc.start()
    try:
        result = read.run({"path": "one-line.txt"}, context=ctx)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert not result.is_error
    assert peak < 8 * 2**20, f"peak {peak / 2**20:.1f} MiB to read a {size >> 20} MiB line"
    first = result.content.splitlines()[0]
    assert first.startswith("     1\t" + "é" * 100)
    assert first.endswith(f"[line truncated, {size // 2} chars]")  # counted, not held
    assert "     2\tsecond line" in result.content
    assert result.meta is not None and result.meta["total_lines"] == 2


def test_read_skips_huge_lines_before_the_offset_in_bounded_memory(ctx: ToolContext) -> None:
    assert ctx.workspace is not None
    with open(ctx.workspace.root / "big.txt", "wb") as f:
        f.write(b"x" * (32 * 2**20) + b"\nwanted\n")
    tracemalloc.start()
    try:
        result = read.run({"path": "big.txt", "offset": 2}, context=ctx)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert result.content.startswith("     2\twanted")
    assert peak < 8 * 2**20


# -- the overflow store --------------------------------------------------------------------
def test_overflow_store_refuses_a_symlinked_directory(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    (tmp_path / "store").symlink_to(elsewhere)
    with pytest.raises(StorageFailure, match="symlink"):
        OverflowStore(tmp_path / "store").save("data")
    assert list(elsewhere.iterdir()) == []


def test_overflow_store_refuses_a_world_writable_directory(tmp_path: Path) -> None:
    shared = tmp_path / "store"
    shared.mkdir()
    shared.chmod(0o777)
    with pytest.raises(StorageFailure, match="writable by every user"):
        OverflowStore(shared).save("data")
    with pytest.raises(StorageFailure, match="writable by every user"):
        OverflowStore(shared).gc()
    # a session folder someone else made world-writable is refused as well
    shared.chmod(0o700)
    store = OverflowStore(shared)
    store.save("x", session_id="s1")
    store.session_directory("s1").chmod(0o777)
    with pytest.raises(StorageFailure, match="writable by every user"):
        store.save("y", session_id="s1")


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0,
                    reason="making a directory of another user needs root")
def test_overflow_store_refuses_another_users_directory(tmp_path: Path) -> None:
    theirs = tmp_path / "store"
    theirs.mkdir(mode=0o700)
    os.chown(theirs, 65534, 65534)
    with pytest.raises(StorageFailure, match="another user"):
        OverflowStore(theirs).save("data")


def test_truncation_reports_a_refused_store_instead_of_failing(tmp_path: Path) -> None:
    (tmp_path / "store").symlink_to(tmp_path)
    ws = tmp_path / "ws"
    ws.mkdir()
    ctx = ToolContext(workspace=Workspace(ws), store=OverflowStore(tmp_path / "store"))
    result = shell.run({"command": "seq 1 5000"}, context=ctx)
    assert not result.is_error and "symlink" in result.content


def test_read_opens_only_this_sessions_saved_outputs(tmp_path: Path) -> None:
    store = OverflowStore(tmp_path / "store")
    mine = store.save("mine", session_id="me")
    theirs = store.save("theirs", session_id="other")
    loose = store.save("no session")
    ws = tmp_path / "ws"
    ws.mkdir()
    ctx = ToolContext(workspace=Workspace(ws), store=store, session_id="me")
    assert "mine" in read.run({"path": str(mine)}, context=ctx).content
    refused = read.run({"path": str(theirs)}, context=ctx)
    assert refused.is_error and "theirs" not in refused.content
    assert read.run({"path": str(loose)}, context=ctx).is_error
    # without a session: the store's own top level only, no session's folder
    anon = ToolContext(workspace=Workspace(ws), store=store)
    assert "no session" in read.run({"path": str(loose)}, context=anon).content
    refused = read.run({"path": str(theirs)}, context=anon)
    assert refused.is_error and "another session" in refused.content
    assert read.run({"path": str(mine)}, context=anon).is_error


ENGINE_TEXT = "alpha beta\r\ndef f(x):\n\n  return x\nBETA\nend a\nb\n"


@pytest.mark.skipif(not _regex.re2_available(), reason="google-re2 is not installed")
@pytest.mark.parametrize("pattern", [r"beta", r"^\s*return", r"x\)?:?$", r"a\s*b", r"^$", r"",
                                     r"\bend\b", r"(?i)beta", r"a.b", r"\Aalpha", r"b\Z"])
def test_re2_and_re_find_the_same_lines(pattern: str) -> None:
    on_re2 = _regex.compile_search(pattern, False)
    assert on_re2.engine == ("re" if "\\Z" in pattern else "re2")  # RE2 spells it \z
    on_re = _regex._BudgetedSearch(pattern, 0, 10.0)
    try:
        assert on_re2.lines(ENGINE_TEXT, 100, "f") == on_re.lines(ENGINE_TEXT, 100, "f")
        assert on_re2.lines(ENGINE_TEXT, 1, "f") == on_re.lines(ENGINE_TEXT, 1, "f")
    finally:
        on_re.close()
