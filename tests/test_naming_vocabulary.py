"""One word per idea: the compaction ladder is a ladder, "pipeline" names only the two
ready-made middleware, and the compaction middleware takes ``summarizer=`` and ``ladder=``
(the seed's ``summariser=`` and ``compactor=`` are refused, naming the right option)."""

from __future__ import annotations

import io
import re
import tokenize
from pathlib import Path

import pytest

import contextree as ct
import contextree.compaction as compaction
from contextree.compaction import CompactionLadder, Digest, default_ladder
from contextree.errors import InvalidArgument, UnknownOption
from contextree.models import ScriptedModel
from contextree.runtime import DefaultCompactionPipeline, SessionTree, ToolResultLoop

SRC = Path(__file__).resolve().parent.parent / "src" / "contextree"
DOCS = Path(__file__).resolve().parent.parent / "docs"


def names_in_source() -> set[str]:
    """Every identifier in the package's code (not its strings or comments)."""
    names: set[str] = set()
    for path in SRC.rglob("*.py"):
        tokens = tokenize.generate_tokens(io.StringIO(path.read_text()).readline)
        names.update(t.string for t in tokens if t.type == tokenize.NAME)
    return names


def test_pipeline_names_only_the_two_ready_made_middleware() -> None:
    names = names_in_source()
    assert {n for n in names if "pipeline" in n.lower()} == {"DefaultCompactionPipeline",
                                                             "DefaultToolPipeline"}
    assert not {n for n in names if re.search("summaris|compactor", n, re.IGNORECASE)}
    assert not (SRC / "compaction" / "_pipeline.py").exists()
    assert {"CompactionLadder", "default_ladder"} <= set(compaction.__all__)


@pytest.mark.parametrize(("wrong", "right"), [("summariser", "summarizer"),
                                              ("compactor", "ladder")])
def test_the_other_spelling_is_a_type_error_naming_the_right_one(wrong: str, right: str) -> None:
    with pytest.raises(TypeError) as info:
        ct.agent().use(DefaultCompactionPipeline, window=1000, **{wrong: None})
    assert isinstance(info.value, UnknownOption) and isinstance(info.value, InvalidArgument)
    assert str(info.value).startswith(
        f"DefaultCompactionPipeline: unknown option {wrong!r} (use {right}=). It accepts "
        "window (required), summarizer=None, ladder=None,")


def test_a_misspelt_option_is_named_by_its_closest_spelling() -> None:
    with pytest.raises(UnknownOption, match=r"unknown option 'compact_a' \(use compact_at=\)"):
        ct.agent().use(DefaultCompactionPipeline, window=1000, compact_a=0.5)  # type: ignore[call-arg]
    with pytest.raises(UnknownOption, match=r"unknown option 'colour'\. It accepts"):
        ct.agent().use(DefaultCompactionPipeline, window=1000, colour=1)  # type: ignore[call-arg]


def test_the_ladder_option_is_the_ladder_the_middleware_climbs(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    agent = (ct.agent().use(SessionTree, path=str(path)).use(ToolResultLoop)
             .use(DefaultCompactionPipeline, window=400, ladder=CompactionLadder([Digest()]))
             .run(ScriptedModel(["ok"] * 4)))
    for turn in range(4):
        agent.start(f"question {turn}: " + "words " * 60)
    with ct.Session.open(path, readonly=True) as s:
        compactions = [e for e in s.entries() if e.type == "compaction"]
        assert compactions
        assert all(e.details and e.details["stages"] == ["digest"] for e in compactions)
    assert [type(s).__name__ for s in default_ladder().stages] == [
        "ToolResults", "SlidingWindow", "Digest"]


def test_the_vocabulary_is_written_down() -> None:
    text = (DOCS / "architecture.md").read_text()
    assert "\n## Vocabulary\n" in text
    vocabulary = text.split("\n## Vocabulary\n", 1)[1]
    for word in ("middleware", "pipeline", "ladder", "stage", "summarizer", "overflow store",
                 "spill", "flat log", "format", "backend"):
        assert f"**{word}**" in vocabulary, word
