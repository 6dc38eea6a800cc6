"""Entries named as the CLI names them (id, unique id prefix, label) through the Python API,
with typed errors that say what to pass; and label / checkout calls that would change
nothing write nothing and say so, in the API, the CLI and the chat."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from contextree import Message, Session
from contextree.cli import app
from contextree.cli.chat import Chat
from contextree.entries import BranchSummaryEntry, LabelEntry, LeafEntry
from contextree.errors import EntryNotFound
from contextree.models import ScriptedModel


def build(path: Path, turns: int = 12) -> tuple[Session, list[str]]:
    """A session of ``turns`` question/answer pairs, the first answer labelled "first"."""
    s = Session.create(path, durable=False)
    ids = []
    for i in range(turns):
        ids.append(s.append_message(Message.user(f"q{i}")))
        ids.append(s.append_message(Message.assistant(f"a{i}")))
    s.set_label(ids[1], "first")
    return s, ids


def shared_prefix(ids: list[str]) -> tuple[str, list[str]]:
    """A one-character prefix that starts several of ``ids`` (24 ids, 16 hex digits)."""
    for c in "0123456789abcdef":
        hits = [i for i in ids if i.startswith(c)]
        if len(hits) > 1:
            return c, hits
    raise AssertionError("no two ids share a first character")


def unique_prefix(ids: list[str], entry: str, everything: list[str]) -> str:
    """A prefix of ``entry`` that no other id starts with, of 6 characters at least: the
    test appends more entries (random ids) after choosing it, and a shorter one would
    become ambiguous 1 time in 16 or so."""
    for n in range(6, len(entry) + 1):
        if sum(e.startswith(entry[:n]) for e in everything) == 1:
            return entry[:n]
    return entry


def test_every_entry_taking_method_accepts_a_prefix_or_a_label(tmp_path: Path) -> None:
    s, ids = build(tmp_path / "s.jsonl")
    everything = [e.id for e in s.entries()]
    answer = ids[5]
    short = unique_prefix(ids, answer, everything)
    assert len(short) < len(answer)

    assert s.resolve(short) == answer and s.resolve("first") == ids[1]
    assert s.resolve(answer + "…") == answer  # as the CLI shows a shortened id
    assert s.branch(short)[-1].id == answer
    assert [m.text for m in s.build_context(leaf_id="first").messages] == ["q0", "a0"]
    assert [e.id for e in s.children(short)] == [ids[6]]

    label_entry = s.set_label(short, "middle")
    assert label_entry is not None and s.label_of(answer) == "middle"
    s.move_to("first")
    assert s.leaf_id == ids[1]
    summary = s.move_to(short, "left the first answer")
    summary_entry = s.get_entry(summary or "")
    assert isinstance(summary_entry, BranchSummaryEntry) and summary_entry.parent_id == answer
    branched = s.append_branch_summary("first", "back again")
    assert s.get_entry(branched).parent_id == ids[1]  # type: ignore[union-attr]
    with s.fork(tmp_path / "f.jsonl", at=short) as f:
        assert [m.text for m in f.build_context().messages][-1] == "a2"
    s.close()


def test_an_entry_that_cannot_be_found_is_a_typed_error_saying_what_to_pass(
        tmp_path: Path) -> None:
    s, ids = build(tmp_path / "s.jsonl")
    prefix, hits = shared_prefix(ids)
    with pytest.raises(EntryNotFound) as ambiguous:
        s.set_label(prefix, "x")
    assert f"start of {len([e for e in s.entries() if e.id.startswith(prefix)])}" in str(
        ambiguous.value)
    assert all(h in str(ambiguous.value) for h in hits[:5]) and "full id" in str(
        ambiguous.value)
    calls = [lambda: s.move_to("nothing-like-it"), lambda: s.branch("nothing-like-it"),
             lambda: s.build_context(leaf_id="nothing-like-it"),
             lambda: s.fork(tmp_path / "g.jsonl", at="nothing-like-it"),
             lambda: s.children("nothing-like-it")]
    for call in calls:
        with pytest.raises(EntryNotFound, match=r"no entry 'nothing-like-it'.*a label"):
            call()
    assert isinstance(ambiguous.value, LookupError)
    assert not (tmp_path / "g.jsonl").exists()
    s.close()


def test_label_and_move_calls_that_change_nothing_write_nothing(tmp_path: Path) -> None:
    s, ids = build(tmp_path / "s.jsonl")
    before = len(s)
    assert s.set_label(ids[1], "first") is None  # already so
    assert s.set_label("first", "first") is None
    assert s.set_label(ids[3], None) is None  # no label to clear
    leaf = s.leaf_id
    assert s.move_to(leaf) is None
    assert s.move_to(leaf, "a summary of nothing left") is None
    assert len(s) == before and s.leaf_id == leaf
    # A real change still writes.
    assert s.set_label(ids[1], None) is not None and s.label_of(ids[1]) is None
    assert len(s) == before + 1
    s.close()


def cli(*args: str | Path, code: int = 0) -> str:
    result = CliRunner().invoke(app, [str(a) for a in args])
    assert result.exit_code == code, result.output
    return result.output


def test_the_cli_says_nothing_changed_and_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    s, ids = build(path)
    leaf = s.leaf_id
    s.close()
    data = path.read_bytes()

    assert "already labelled 'first'; nothing changed" in cli("label", path, ids[1], "first")
    assert "has no label; nothing changed" in cli("label", path, ids[3], "--clear")
    assert f"the leaf is already {leaf}; nothing changed" in cli("checkout", path, leaf or "")
    assert "no summary is recorded" in cli("checkout", path, leaf or "", "--summary", "x")
    out = json.loads(cli("label", path, "first", "first", "--json"))
    assert out["changed"] is False and out["label_entry_id"] is None
    out = json.loads(cli("checkout", path, leaf or "", "--json"))
    assert out["changed"] is False and out["entry_id"] is None
    assert path.read_bytes() == data

    assert "label cleared" in cli("label", path, "first", "--clear")
    moved = json.loads(cli("checkout", path, ids[5][:8], "--json"))
    assert moved["changed"] is True and moved["leaf_id"] == ids[5]


def test_chat_label_and_checkout_no_ops(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "chat.jsonl"
    out = io.StringIO()
    commands = ["Hello", "/label first", "/label first", "/checkout first", "/checkout first",
                "/label --clear", "/label --clear", "/exit"]
    with Session.open_or_create(path) as session:
        Chat(session, ScriptedModel(["Hi there."]), target=str(path), window=100_000,
             approve_all=True,
             system=None, stream=False, stdin=io.StringIO("\n".join(commands) + "\n"),
             stdout=out).run()
    lines = [line.removeprefix("> ") for line in out.getvalue().splitlines()]
    said = [line for line in lines if "label" in line or "at " in line]
    assert any(line.startswith("labelled ") for line in said)
    assert any(line.endswith("is already labelled 'first'; nothing changed") for line in said)
    assert any(line.startswith("now at ") for line in said)
    assert any(line.startswith("already at ") and line.endswith("nothing changed")
               for line in said)
    assert any(line.endswith("cleared") for line in said)
    assert any(line.endswith("has no label; nothing changed") for line in said)
    with Session.open(path, readonly=True) as s:
        labels = [e for e in s.entries() if isinstance(e, LabelEntry)]
        reply = [e.id for e in s.entries() if getattr(e, "message", None) is not None][-1]
        # One label and one clear, both of the reply (not of the label entry that became
        # the leaf); the repeated /label, /checkout and /label --clear wrote nothing.
        assert [(e.target_id, e.label) for e in labels] == [(reply, "first"), (reply, None)]
        assert len([e for e in s.entries() if isinstance(e, LeafEntry)]) == 1
