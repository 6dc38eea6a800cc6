"""Receipts: each compaction records, as data, what it did to each entry (kept verbatim,
folded into the summary, cleared, dropped, pinned) and the identifiers its summary copies;
``compact`` and ``show`` print it and ``--json`` includes it."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import contextree as ct
from contextree import Message, ToolCall
from contextree.compaction import CompactionResult
from contextree.entries import CompactionEntry, CompactionReceipt
from contextree.markers import Kind
from contextree.tokens import EstimateCounter
from helpers import big_session, run, run_json

PROFILE = settings(max_examples=40, deadline=None, derandomize=True, database=None,
                   suppress_health_check=[HealthCheck.too_slow])


def coding_session(turns: int, result: int = 1500) -> ct.Session:
    s = ct.Session.in_memory()
    s.append_message(Message.system("You are a coding agent."))
    for i in range(turns):
        s.append_message(Message.user(f"task {i}: fix src/m{i}.py"))
        call = ToolCall(id=f"c{i}", name="shell", arguments={"command": f"git log -1 m{i}"})
        s.append_message(Message.assistant(f"checking {i}", tool_calls=[call]))
        sha = f"{i:02d}" + "a3f9c2e1b7d4" * 3
        s.append_message(Message.tool(f"commit {sha[:40]}\n" + "log line\n" * (result // 9),
                                      tool_call_id=f"c{i}", name="shell"))
        s.append_message(Message.assistant(f"reverting {sha[:12]} in src/m{i}.py"))
    return s


def check(s: ct.Session, r: CompactionResult) -> None:
    """The receipt partitions the branch as the view shows it."""
    receipt = r.receipt
    assert isinstance(receipt, CompactionReceipt)
    entry = s.get_entry(r.entry_id or "")
    assert isinstance(entry, CompactionEntry) and entry.receipt == receipt
    ctx = s.build_context()
    view = [i for i in dict.fromkeys(ctx.entry_ids) if i is not None and i != entry.id]
    assert receipt.kept + receipt.cleared == [i for i in view if i in receipt.kept] + [
        i for i in view if i in receipt.cleared]
    assert set(receipt.kept) | set(receipt.cleared) == set(view)
    assert not set(receipt.kept) & set(receipt.cleared)
    for m, eid in zip(ctx.messages, ctx.entry_ids, strict=True):
        if eid in receipt.kept:
            original = s.get_entry(eid)
            assert not m.kind and original is not None
        if eid in receipt.cleared:
            assert m.kind is Kind.CLEARED_TOOL_RESULT
    assert not set(receipt.folded) & set(view)
    assert not set(receipt.dropped) & set(view) and not set(receipt.dropped) & set(
        receipt.folded)
    assert set(receipt.folded) | set(receipt.dropped) == set(r.dropped)
    assert set(receipt.pinned) <= set(view)
    for ident in receipt.identifiers:
        assert ident in entry.summary


@PROFILE
@given(st.integers(3, 14), st.integers(200, 4000), st.floats(0.2, 0.9))
def test_the_receipt_accounts_for_every_entry(turns: int, result: int, fill: float) -> None:
    s = coding_session(turns, result)
    tokens = s.build_context().measure(EstimateCounter()).tokens
    r = s.compact(max(10, int(tokens / max(fill, 0.71))))
    if r.entry_id is not None:
        check(s, r)
        s.append_message(Message.user("and now the tests"))
        again = s.compact(max(10, int(tokens / 0.9)), force=True)
        if again.entry_id is not None:
            check(s, again)


def test_the_receipt_names_the_identifiers_the_summary_copies() -> None:
    s = coding_session(10)
    r = s.compact(3000)
    assert r.receipt is not None and r.receipt.folded and r.receipt.pinned
    assert any(len(i) >= 12 for i in r.receipt.identifiers), r.receipt
    assert r.payload()["receipt"] == r.receipt.to_dict()
    assert CompactionReceipt.from_dict(r.receipt.to_dict()) == r.receipt
    assert CompactionReceipt.from_dict({"kept": "not a list"}) is None


@pytest.mark.parametrize("stored", ["jsonl", "pi-export"])
def test_compact_and_show_print_the_receipt_and_json_has_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stored: str) -> None:
    monkeypatch.delenv("CONTEXTREE_MODEL", raising=False)
    path = tmp_path / "c.jsonl"
    big_session(path)
    text = run("compact", path, "--window", "8000", "--dry-run").stdout
    assert "receipt: " in text and " kept, " in text and " folded, " in text
    data = run_json("compact", path, "--window", "8000")
    receipt = data["receipt"]
    assert set(receipt) == {"kept", "folded", "cleared", "dropped", "pinned", "identifiers"}
    assert receipt["kept"] and receipt["cleared"]
    if stored == "pi-export":  # the receipt survives an export to pi's format and back
        pi = tmp_path / "pi.jsonl"
        run("export", "pi", path, "-o", pi)
        path = tmp_path / "back.jsonl"
        run("import", "pi", pi, "-o", path)
    shown = run_json("show", path, "--context")
    assert shown["receipt"] == receipt
    path_json = run_json("show", path)
    assert [e for e in path_json if e["type"] == "compaction"][-1]["receipt"] == receipt
    assert "receipt: " in run("show", path).stdout
    assert "receipt: " in run("show", path, "--context").stdout
