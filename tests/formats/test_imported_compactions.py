"""Compactions imported from Claude Code, Codex, Copilot CLI, opencode and Gemini CLI hold the
summary the model wrote.

The fixtures are the real CLIs' files (``tests/data/formats/real``, made by
``scripts/fixtures/make_fixtures.py`` against a fake model server whose scripted summary
replies are quoted here). For each compacted file: the compaction entry's ``summary`` is that
reply's summary; the context sends it once, the way the CLI sent it (Claude Code's user
message, Codex's replacement history); and a contextree compaction on top carries it on.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from contextree import Message, Session
from contextree.entries import CompactionEntry
from contextree.formats import import_session
from helpers import FORMATS_DATA, ROOT

REAL = FORMATS_DATA / "real"
SCRIPT = ROOT / "scripts" / "fixtures" / "make_fixtures.py"
# What the fake server answered to the summarization requests (make_fixtures.py, `default`):
# Claude Code drops the <analysis> part and the <summary> tags of the reply.
CLAUDE_SUMMARY = ("1. Primary Request and Intent: list the files in the working directory.\n"
                  "2. Files: a.txt exists (contains 'hello').\n"
                  "3. Pending Tasks: none.")
CODEX_SUMMARY = "Summary: the user asked to list files; a.txt exists. Nothing pending."

COMPACTED = [
    ("claude-code", REAL / "claude_code" / "compact_manual" / "session-1.jsonl", CLAUDE_SUMMARY),
    ("claude-code", REAL / "claude_code" / "compact_auto" / "session-1.jsonl", CLAUDE_SUMMARY),
    ("claude-code", REAL / "claude_code" / "compact_reactive" / "session-1.jsonl",
     CLAUDE_SUMMARY),
    ("claude-code", REAL / "claude_code_2.1.332" / "compact_manual" / "session-1.jsonl",
     CLAUDE_SUMMARY),
    ("claude-code", REAL / "claude_code_2.1.332" / "compact_auto" / "session-1.jsonl",
     CLAUDE_SUMMARY),
    ("codex", REAL / "codex" / "compact" / "rollout-1.jsonl", CODEX_SUMMARY),
]


def test_the_quoted_summaries_are_what_the_fake_server_replied() -> None:
    script = SCRIPT.read_text()
    for line in CLAUDE_SUMMARY.splitlines():
        assert line.replace("'", "\\'") in script or line in script
    assert CODEX_SUMMARY in script


def _imported(fmt: str, src: Path, tmp_path: Path) -> Session:
    return import_session(fmt, src, tmp_path / "imported.jsonl", durable=False)


def _mentions(messages: list[Message], text: str) -> int:
    return sum(text in m.text for m in messages)


@pytest.mark.parametrize(("fmt", "src", "summary"), COMPACTED,
                         ids=[f"{p.parent.parent.name}/{p.parent.name}" for _, p, _ in COMPACTED])
def test_an_imported_compaction_holds_the_model_summary(fmt: str, src: Path, summary: str,
                                                        tmp_path: Path) -> None:
    with _imported(fmt, src, tmp_path) as s:
        (comp,) = s.find(CompactionEntry)
        assert comp.summary == summary
        ctx = s.build_context()
        assert ctx.compaction is not None and ctx.compaction.id == comp.id
        # Sent once, as the tool sent it: a user message marked as the summary.
        assert _mentions(ctx.messages, summary) == 1
        (sent,) = [m for m in ctx.messages if summary in m.text]
        assert sent.role == "user" and sent.kind == "compaction_summary"
        assert ctx.entry_ids[ctx.messages.index(sent)] == comp.id


@pytest.mark.parametrize(("fmt", "src", "summary"), COMPACTED,
                         ids=[f"{p.parent.parent.name}/{p.parent.name}" for _, p, _ in COMPACTED])
def test_a_contextree_compaction_on_top_carries_the_imported_summary(
        fmt: str, src: Path, summary: str, tmp_path: Path) -> None:
    with _imported(fmt, src, tmp_path) as s:
        for i in range(8):  # enough new turns that folding them pays off
            s.append_message(Message.user(f"Step {i}: describe a.txt again, at length."))
            s.append_message(Message.assistant(f"Step {i}: a.txt holds one line. " * 60))
        result = s.compact(window=200_000, force=True)
        assert result.entry is not None, result
        new = result.entry
        assert isinstance(new, CompactionEntry)
        assert "a.txt exists" in new.summary  # the old summary's facts, carried whole
        assert summary in new.summary
        ctx = s.build_context()
        assert ctx.compaction is not None and ctx.compaction.id == new.id
        # The old summary is in the new one, and nowhere else in the context.
        assert _mentions(ctx.messages, summary) == 1
        assert ctx.messages[0].kind == "compaction_summary"


# -- Copilot CLI, opencode, Gemini CLI: the summary is sent as a message entry of its own --

SENT_AS_MESSAGE = [
    ("copilot", REAL / "copilot" / "compact" / "session-1" / "events.jsonl"),
    ("copilot", REAL / "copilot" / "compact_long" / "session-1" / "events.jsonl"),
    ("copilot", REAL / "copilot" / "compact_twice" / "session-1" / "events.jsonl"),
    ("opencode", REAL / "opencode" / "compact" / "opencode.db"),
    ("gemini-cli", REAL / "gemini_cli" / "compress" / "session-1.jsonl"),
]


each_sent_as_message = pytest.mark.parametrize(
    ("fmt", "src"), SENT_AS_MESSAGE,
    ids=[f"{fmt}/{p.parts[-3 if fmt == 'copilot' else -2]}" for fmt, p in SENT_AS_MESSAGE])


def _replied_summaries(src: Path) -> list[str]:
    """What the fake server answered to each summarization request (requests.json notes the
    role; the reply is the next text the CLI recorded: Copilot's ``summaryContent``,
    opencode's summary reply)."""
    import json
    import sqlite3

    if src.suffix == ".db":
        con = sqlite3.connect(src)
        rows = [json.loads(d) for (d,) in con.execute(
            "select p.data from part p join message m on p.message_id = m.id "
            "where json_extract(m.data, '$.summary') = 1 order by p.id")]
        con.close()
        return ["".join(p["text"] for p in rows if p.get("type") == "text")]
    if fmt_of(src) == "gemini-cli":  # the user record the CLI's compression wrote, once
        records = [json.loads(x) for x in src.read_text().splitlines()]
        found = {r["id"]: r["content"][0]["text"] for r in _gemini_records(records)
                 if r.get("type") == "user" and r["content"][0].get("text", "").startswith(
                     "<state_snapshot>")}
        return list(found.values())
    return [json.loads(x)["data"]["summaryContent"] for x in src.read_text().splitlines()
            if '"session.compaction_complete"' in x]


@each_sent_as_message
def test_the_summary_is_held_and_sent_once_as_the_tool_sent_it(fmt: str, src: Path,
                                                              tmp_path: Path) -> None:
    with _imported(fmt, src, tmp_path) as s:
        comps = s.find(CompactionEntry)
        assert [c.summary for c in comps] == _replied_summaries(src)
        ctx = s.build_context()
        latest = comps[-1]
        assert ctx.compaction is not None and ctx.compaction.id == latest.id
        # sent once: the message the tool sent it in, not contextree's rendering of it
        assert _mentions(ctx.messages, latest.summary) == 1
        (sent,) = [m for m in ctx.messages if latest.summary in m.text]
        assert sent.kind == "compaction_summary"
        assert ctx.entry_ids[ctx.messages.index(sent)] == latest.details["summary_entry"]
        assert f"compaction: {latest.tokens_before}" in "".join(
            line for line in _tree(s) if latest.summary.splitlines()[0][:30] in line)


def fmt_of(src: Path) -> str:
    return next(fmt for fmt, p in SENT_AS_MESSAGE if p == src)


def _gemini_records(records: list[Any]) -> list[Any]:
    """Every message record of a Gemini CLI log, those its ``$set.messages`` rewrite too."""
    out = []
    for r in records:
        out += r.get("$set", {}).get("messages", []) if "$set" in r else [r] if "id" in r else []
    return out


def test_gemini_cli_summary_is_what_the_fake_server_replied() -> None:
    (summary,) = _replied_summaries(REAL / "gemini_cli" / "compress" / "session-1.jsonl")
    script = (ROOT / "scripts" / "fixtures" / "make_fixtures_new.py").read_text()
    # the fake's scripted `compact` reply (make_fixtures_new.py, GeminiScript.default)
    assert summary.splitlines() == [
        "<state_snapshot>", "<overall_goal>List the files, then show a.txt.</overall_goal>",
        "<key_knowledge>The directory holds a.txt.</key_knowledge>", "</state_snapshot>"]
    assert '"holds a.txt.</key_knowledge>\\n</state_snapshot>"' in script


def _tree(s: Session) -> list[str]:
    from helpers import run

    return run("tree", s.location).stdout.splitlines()


@each_sent_as_message
def test_a_contextree_compaction_on_top_of_it_carries_the_summary(fmt: str, src: Path,
                                                                 tmp_path: Path) -> None:
    with _imported(fmt, src, tmp_path) as s:
        summary = s.find(CompactionEntry)[-1].summary
        for i in range(8):
            s.append_message(Message.user(f"Step {i}: describe a.txt again, at length."))
            s.append_message(Message.assistant(f"Step {i}: a.txt holds one line. " * 60))
        result = s.compact(window=200_000, force=True)
        assert isinstance(result.entry, CompactionEntry), result
        assert summary in result.entry.summary
        ctx = s.build_context()
        assert _mentions(ctx.messages, summary) == 1
        assert ctx.messages[0].kind == "compaction_summary"
