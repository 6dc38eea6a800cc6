"""Hostile brace patterns: ``glob`` (and ``grep``'s ``glob`` filter) parse braces once, in
linear time, and refuse an expansion past its bounds with an error that says what to do.
(Timings are in ``bench/bench_glob_braces.py``; here the bounds themselves are checked.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from contextree.errors import ToolError
from contextree.tools import ToolContext, Workspace, _search, glob, grep
from contextree.tools._search import (
    MAX_BRACE_ALTERNATIVES,
    MAX_BRACE_CHARS,
    MAX_BRACE_DEPTH,
    expand_braces,
)


@pytest.fixture
def ctx(tmp_path: Path) -> ToolContext:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.py").write_text("x = 1\n")
    return ToolContext(workspace=Workspace(ws))


def test_8000_nested_groups_are_refused_with_a_clear_message(ctx: ToolContext) -> None:
    hostile = "{a," * 8000 + "b" + "}" * 8000
    for result in (glob.run({"pattern": hostile}, context=ctx),
                   grep.run({"pattern": "x", "glob": hostile}, context=ctx)):
        assert result.is_error
        assert f"nests {{a,b}} groups 8000 deep; at most {MAX_BRACE_DEPTH}" in result.content
        assert "(32001 characters)" in result.content  # the pattern is not echoed whole
        assert len(result.content) < 400


def test_8000_nested_groups_without_commas_are_literal_and_parsed_once(
        ctx: ToolContext, monkeypatch: pytest.MonkeyPatch) -> None:
    scans: list[str] = []
    real = _search._brace_groups

    def counting(pattern: str) -> dict[int, tuple[int, list[int]]]:
        scans.append(pattern)
        return real(pattern)

    monkeypatch.setattr(_search, "_brace_groups", counting)
    hostile = "{" * 8000 + "a,b" + "}" * 8000
    assert expand_braces(hostile) == ["{" * 7999 + "a" + "}" * 7999,
                                      "{" * 7999 + "b" + "}" * 7999]
    assert expand_braces("{" * 8000 + "}" * 8000) == ["{" * 8000 + "}" * 8000]
    assert len(scans) == 2  # one scan of each pattern, not one per brace
    r = glob.run({"pattern": "{" * 8000 + "}" * 8000}, context=ctx)
    assert not r.is_error and r.content.startswith("No files match")


def test_the_number_of_alternatives_is_capped(ctx: ToolContext) -> None:
    assert len(expand_braces("{a,b}" * 8)) == 256 == MAX_BRACE_ALTERNATIVES
    with pytest.raises(ToolError, match="too many alternatives, more than 256"):
        expand_braces("{a,b}" * 9)
    with pytest.raises(ToolError, match="too many alternatives, more than 256"):
        expand_braces("{" + ",".join(str(i) for i in range(257)) + "}")
    r = glob.run({"pattern": "{a,b}" * 40}, context=ctx)  # 2**40 if it were expanded
    assert r.is_error and "split it into several calls" in r.content


def test_the_expanded_size_is_capped() -> None:
    long = "x" * (MAX_BRACE_CHARS // 2 - 10)
    assert len(expand_braces("{a,b}" + long)) == 2
    with pytest.raises(ToolError, match="characters of patterns"):
        expand_braces("{a,b,c}" + long)


def test_expansion_keeps_its_meaning() -> None:
    assert expand_braces("src/*.{js,ts}") == ["src/*.js", "src/*.ts"]
    assert expand_braces("{a,{b,c}}x{1,2}") == ["ax1", "ax2", "bx1", "bx2", "cx1", "cx2"]
    assert expand_braces("{x{a,b}}") == ["{xa}", "{xb}"]  # a group without a comma is literal
    assert expand_braces("{a,b") == ["{a,b"] and expand_braces("a}b") == ["a}b"]
    assert expand_braces("{a,b{c,d}") == ["{a,bc", "{a,bd"]
    assert expand_braces("{,.}x") == ["x", ".x"]
    depth = MAX_BRACE_DEPTH
    assert len(expand_braces("{a," * depth + "b" + "}" * depth)) == depth + 1
    with pytest.raises(ToolError, match=f"{depth + 1} deep"):
        expand_braces("{a," * (depth + 1) + "b" + "}" * (depth + 1))
