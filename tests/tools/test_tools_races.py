"""Confinement under races: a directory swapped for a symlink to the outside while the tools
read, write, edit, grep and glob never lets one of them touch the outside.

A second process swaps ``ws/sub`` between a real directory and a symlink to ``outside/`` as
fast as it can, while this process calls each tool on paths under ``sub``. The check before
the open sees the real directory; only the open itself can be lured out, and the opens start
from the root's descriptor, so none is. Both open strategies run: ``openat2`` where the
kernel has it, and the per-component ``O_NOFOLLOW`` walk.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from contextree import OverflowStore
from contextree.tools import ToolContext, Workspace, _beneath, edit, glob, grep, read, write

TRIES = 1500

SWAPPER = textwrap.dedent("""
    import ctypes, os, sys
    ws, outside = sys.argv[1], sys.argv[2]
    sub, link = (ws + "/sub").encode(), (ws + "/.link").encode()
    os.symlink(outside, link)
    libc = ctypes.CDLL(None, use_errno=True)
    print("ready", flush=True)
    while True:  # sub is always there: a real directory or a symlink to the outside
        if libc.renameat2(-100, sub, -100, link, 2) != 0:  # RENAME_EXCHANGE
            raise OSError(ctypes.get_errno(), "renameat2")
""")


@pytest.fixture(params=["openat2", "walk"])
def strategy(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "openat2":
        if not _beneath.openat2_available():
            pytest.skip("this kernel has no openat2")
    else:
        monkeypatch.setattr(_beneath, "_openat2", None)
    return str(request.param)


@pytest.fixture
def racing(tmp_path: Path) -> Iterator[tuple[Path, Path, ToolContext]]:
    ws = tmp_path / "ws"
    outside = tmp_path / "outside"
    (ws / "sub").mkdir(parents=True)
    outside.mkdir()
    (ws / "sub" / "f.txt").write_text("inside\n")
    (ws / "sub" / "g.txt").write_text("visible\n")
    (outside / "f.txt").write_text("SECRET\n")
    (outside / "only-outside.txt").write_text("SECRET\n")
    proc = subprocess.Popen([sys.executable, "-c", SWAPPER, str(ws), str(outside)],
                            stdout=subprocess.PIPE)
    assert proc.stdout is not None and proc.stdout.readline() == b"ready\n"
    ctx = ToolContext(workspace=Workspace(ws), store=OverflowStore(tmp_path / "store"))
    try:
        yield ws, outside, ctx
    finally:
        proc.kill()
        proc.wait()


def test_reads_never_see_the_outside(racing: tuple[Path, Path, ToolContext],
                                     strategy: str) -> None:
    _, _, ctx = racing
    seen = [read.run({"path": "sub/f.txt"}, context=ctx).content for _ in range(TRIES)]
    assert not [c for c in seen if "SECRET" in c]
    assert any("inside" in c for c in seen)  # the race did let some reads through


def test_writes_and_edits_never_land_outside(racing: tuple[Path, Path, ToolContext],
                                             strategy: str) -> None:
    _, outside, ctx = racing
    done = 0
    for i in range(TRIES // 3):
        results = [
            write.run({"path": f"sub/new{i % 7}.txt", "content": "x"}, context=ctx),
            edit.run({"path": "sub/f.txt", "old_string": "inside", "new_string": "INSIDE"},
                     context=ctx),
            edit.run({"path": "sub/f.txt", "old_string": "INSIDE", "new_string": "inside"},
                     context=ctx),
        ]
        done += sum(not r.is_error for r in results)
    assert done  # the race did let some writes through
    assert sorted(os.listdir(outside)) == ["f.txt", "only-outside.txt"]
    assert (outside / "f.txt").read_text() == "SECRET\n"


def test_grep_and_glob_never_list_the_outside(racing: tuple[Path, Path, ToolContext],
                                              strategy: str) -> None:
    _, _, ctx = racing
    seen = 0
    for _ in range(TRIES // 6):
        seen += "sub/g.txt" in glob.run({"pattern": "**/g.txt"}, context=ctx).content
        for result in (grep.run({"pattern": "SECRET", "path": "sub"}, context=ctx),
                       grep.run({"pattern": "SECRET"}, context=ctx),
                       glob.run({"pattern": "sub/*"}, context=ctx),
                       glob.run({"pattern": "**/*.txt"}, context=ctx)):
            assert "SECRET" not in result.content.replace("'SECRET'", "")
            assert "only-outside" not in result.content
    assert seen  # the race did let some searches through


def test_symlinks_inside_the_root_still_work(tmp_path: Path, strategy: str) -> None:
    ws = tmp_path / "ws"
    (ws / "real").mkdir(parents=True)
    (ws / "real" / "a.txt").write_text("hello\n")
    (ws / "rel").symlink_to("real")
    (ws / "abs").symlink_to(ws / "real")  # an absolute link back inside
    (ws / "file-link.txt").symlink_to("real/a.txt")
    (ws / "out").symlink_to(tmp_path)
    ctx = ToolContext(workspace=Workspace(ws), store=OverflowStore(tmp_path / "store"))
    for path in ("rel/a.txt", "abs/a.txt", "file-link.txt", "real/../rel/a.txt"):
        r = read.run({"path": path}, context=ctx)
        assert not r.is_error and "hello" in r.content, (path, r.content)
    r = write.run({"path": "rel/b.txt", "content": "b"}, context=ctx)
    assert not r.is_error and (ws / "real" / "b.txt").read_text() == "b"
    (tmp_path / "secret.txt").write_text("SECRET")
    assert read.run({"path": "out/secret.txt"}, context=ctx).is_error
