"""The grep and glob tools, and the glob pattern language they share."""

from __future__ import annotations

from pathlib import Path

import pytest

from contextree.errors import ToolError
from contextree.tools import ToolContext, ToolResult, Workspace, glob, grep
from contextree.tools._search import compile_glob, expand_braces


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "src" / "pkg").mkdir(parents=True)
    (root / "docs").mkdir()
    (root / ".git").mkdir()
    (root / "node_modules" / "dep").mkdir(parents=True)
    (root / "src" / "main.py").write_text("import os\n\ndef main():\n    return TODO\n")
    (root / "src" / "pkg" / "util.py").write_text("# todo: tidy\nVALUE = 1\n")
    (root / "src" / "pkg" / "app.ts").write_text("const todo = 1;\n")
    (root / "docs" / "readme.md").write_text("Nothing to do here.\nTODO: write docs\n")
    (root / "setup.py").write_text("TODO = []\n")
    (root / ".git" / "config").write_text("TODO in git\n")
    (root / "node_modules" / "dep" / "index.js").write_text("TODO in deps\n")
    (root / "data.bin").write_bytes(b"TODO\0binary")
    return root


@pytest.fixture
def ctx(ws: Path) -> ToolContext:
    return ToolContext(workspace=Workspace(ws))


def run_grep(ctx: ToolContext, **arguments: object) -> ToolResult:
    return grep.run(arguments, context=ctx)


def run_glob(ctx: ToolContext, **arguments: object) -> ToolResult:
    return glob.run(arguments, context=ctx)


# -- grep ----------------------------------------------------------------------------------
def test_grep_prints_path_line_text(ctx: ToolContext) -> None:
    r = run_grep(ctx, pattern="TODO")
    assert r.content.splitlines() == [
        "docs/readme.md:2:TODO: write docs",
        "setup.py:1:TODO = []",
        "src/main.py:4:    return TODO",
    ]
    assert r.meta is not None and r.meta["matches"] == 3 and r.meta["files"] == 3
    assert not r.is_error


def test_grep_options(ctx: ToolContext) -> None:
    r = run_grep(ctx, pattern="todo", ignore_case=True, glob="*.py")
    assert r.content.splitlines() == [
        "setup.py:1:TODO = []",
        "src/main.py:4:    return TODO",
        "src/pkg/util.py:1:# todo: tidy",
    ]
    r = run_grep(ctx, pattern="todo", path="src", glob="src/**/*.{ts,py}")
    assert r.content.splitlines() == [
        "src/pkg/app.ts:1:const todo = 1;",
        "src/pkg/util.py:1:# todo: tidy",
    ]
    r = run_grep(ctx, pattern=r"^def \w+\(\):$", path="src/main.py")
    assert r.content == "src/main.py:3:def main():"


def test_grep_caps_results(ws: Path, ctx: ToolContext) -> None:
    (ws / "many.txt").write_text("hit\n" * 50)
    r = run_grep(ctx, pattern="hit", max_results=10)
    assert len([x for x in r.content.splitlines() if x.startswith("many.txt:")]) == 10
    assert "[stopped at 10 matches;" in r.content
    assert r.meta is not None and r.meta["capped"] is True


def test_grep_no_match_and_errors(ctx: ToolContext) -> None:
    r = run_grep(ctx, pattern="zzz")
    assert not r.is_error and r.content == "No matches for 'zzz' in .."
    r = run_grep(ctx, pattern="foo(")
    assert r.is_error
    assert "invalid regular expression 'foo('" in r.content and "position 3" in r.content
    assert run_grep(ctx, pattern="x", max_results=0).is_error
    assert "file not found" in run_grep(ctx, pattern="x", path="nope").content
    assert "outside the workspace" in run_grep(ctx, pattern="x", path="..").content


def test_grep_skips_symlinks_leading_out(ws: Path, ctx: ToolContext, tmp_path: Path) -> None:
    (tmp_path / "outside.txt").write_text("TODO outside\n")
    (ws / "out.txt").symlink_to(tmp_path / "outside.txt")
    assert "outside" not in run_grep(ctx, pattern="TODO").content


def test_grep_cuts_long_lines(ws: Path, ctx: ToolContext) -> None:
    (ws / "min.js").write_text("x" * 3000 + "NEEDLE\n")
    r = run_grep(ctx, pattern="NEEDLE")
    assert len(r.content) < 700 and "more characters" in r.content


# -- glob ----------------------------------------------------------------------------------
def test_glob_recursive_sorted_and_pruned(ctx: ToolContext) -> None:
    r = run_glob(ctx, pattern="**/*.py")
    assert r.content.splitlines() == ["setup.py", "src/main.py", "src/pkg/util.py"]
    r = run_glob(ctx, pattern="**/*.js")
    assert "No files match" in r.content  # node_modules is skipped
    r = run_glob(ctx, pattern="node_modules/**/*.js")
    assert r.content == "node_modules/dep/index.js"  # unless the pattern goes there


def test_glob_forms(ctx: ToolContext) -> None:
    assert run_glob(ctx, pattern="*.py").content == "setup.py"
    assert run_glob(ctx, pattern="src/*").content.splitlines() == ["src/main.py", "src/pkg/"]
    assert run_glob(ctx, pattern="**/*.{ts,md}").content.splitlines() == [
        "docs/readme.md",
        "src/pkg/app.ts",
    ]
    assert run_glob(ctx, pattern="src/pkg/util.py").content == "src/pkg/util.py"
    assert run_glob(ctx, pattern="*.py", path="src").content == "src/main.py"
    assert run_glob(ctx, pattern="s?tup.[pq]y").content == "setup.py"


def test_glob_hints_and_errors(ctx: ToolContext) -> None:
    r = run_glob(ctx, pattern="*.ts")
    assert not r.is_error and 'use "**/*.ts"' in r.content
    assert "outside the workspace" in run_glob(ctx, pattern="../*").content
    assert "not a directory" in run_glob(ctx, pattern="*", path="setup.py").content
    assert "pattern is empty" in run_glob(ctx, pattern=" ").content


@pytest.mark.parametrize(
    ("pattern", "matches", "misses"),
    [
        ("*.py", ["a.py", ".hidden.py"], ["d/a.py", "a.pyc"]),
        ("**/*.py", ["a.py", "d/a.py", "d/e/a.py"], ["a.txt"]),
        ("d/**", ["d/a", "d/e/f"], ["x/a"]),
        ("d/**/f", ["d/f", "d/e/f", "d/e/g/f"], ["df", "x/d/f"]),
        ("[!a]?.txt", ["bc.txt"], ["ab.txt", "b.txt"]),
        ("a+b(1).txt", ["a+b(1).txt"], ["aab1.txt"]),
    ],
)
def test_glob_matching(pattern: str, matches: list[str], misses: list[str]) -> None:
    compiled = compile_glob(pattern)
    for path in matches:
        assert compiled.fullmatch(path), path
    for path in misses:
        assert not compiled.fullmatch(path), path


def test_expand_braces() -> None:
    assert expand_braces("a{b,c}d") == ["abd", "acd"]
    assert expand_braces("{x,y{1,2}}") == ["x", "y1", "y2"]
    assert expand_braces("no{brace") == ["no{brace"]
    assert expand_braces("{single}") == ["{single}"]
    with pytest.raises(ToolError, match="too many"):
        expand_braces("{a,b}" * 9)
