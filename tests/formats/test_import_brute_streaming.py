"""A Brute import streams its entries and writes the same bytes as when it held them all.

The digests are of the session files ``import_session("brute", ...)`` wrote at bbf0c3f
(before the reader streamed), with the ids, the session id and the clock fixed and the
source's modification time (the entries' timestamp) set; the only text replaced is the
temporary folder's path.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextree import Session
from contextree.errors import SessionError
from contextree.formats import _brute, import_session
from helpers import ROOT

DATA = ROOT / "tests" / "data" / "formats"

BEFORE = {
    "brute.jsonl": "8b40205074eb4b842b0fa7d90b1b0fefa0b0961070d389a5f6952e32e38e1ae5",
    "generated": "97861cf95cd5a0ad668ba8e63258d363c9755879f96b6482a1f37af6b511d20b",
}


def _fixed(monkeypatch: pytest.MonkeyPatch) -> None:
    counter = itertools.count(1)
    monkeypatch.setattr("contextree.formats._base.new_id", lambda: f"made{next(counter):04d}")
    monkeypatch.setattr("contextree.formats._base.now", lambda: "2026-02-03T04:05:06.007Z")
    monkeypatch.setattr("contextree.formats._base.new_session_id", lambda: "fixed-session")


def _big(path: Path, size: int = 3_000_000) -> Path:
    """A log big enough for the streaming write's index: text, tool calls (arguments as a
    JSON string), tool results and a field contextree does not know."""
    rows = [{"role": "user", "content": "lorem ipsum " * 90},
            {"role": "assistant", "content": "", "tool_calls": [
                {"id": "t1", "name": "read", "arguments": "{\"path\": \"a\"}"}]},
            {"role": "tool", "content": "ok " * 300, "tool_call_id": "t1"},
            {"role": "assistant", "content": "done", "extra_field": [1, 2]}]
    with open(path, "w") as f:
        n = 0
        while n < size:
            for r in rows:
                t = json.dumps(r) + "\n"
                f.write(t)
                n += len(t)
    os.utime(path, (1767225600, 1767225600))
    return path


def _digest(out: Path, where: Path) -> str:
    data = out.read_bytes().replace(str(ROOT).encode(), b"ROOT")
    return hashlib.sha256(data.replace(str(where).encode(), b"TMP")).hexdigest()


def test_the_sample_imports_to_the_bytes_it_did_before(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    _fixed(monkeypatch)
    src = tmp_path / "brute.jsonl"  # the entries' time is the file's: a clone's is its own
    src.write_bytes((DATA / "brute.jsonl").read_bytes())
    os.utime(src, (1767225600, 1767225600))
    out = tmp_path / "s.jsonl"
    import_session("brute", src, out, durable=False).close()
    assert _digest(out, tmp_path) == BEFORE["brute.jsonl"]


def test_a_big_log_streams_to_the_bytes_it_wrote_before(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    src = _big(tmp_path / "big.jsonl")
    imported = _brute.read(src)
    assert imported.entries == [] and imported.stream is not None  # nothing held
    _fixed(monkeypatch)
    out = tmp_path / "s.jsonl"
    import_session("brute", src, out, durable=False).close()
    assert (tmp_path / "s.jsonl.index").exists()
    assert _digest(out, tmp_path) == BEFORE["generated"]
    lines = src.read_text().count("\n")
    with Session.open(out, readonly=True) as s:  # the index written anew reads back whole
        assert len(s) == lines and s.leaf_id == f"made{lines:04d}"
        assert [m.role for m in s.build_context().messages[-4:]] == [
            "user", "assistant", "tool", "assistant"]


def test_a_bad_line_late_in_a_big_log_fails_by_name_and_leaves_nothing(tmp_path: Path) -> None:
    src = _big(tmp_path / "big.jsonl")
    lines = src.read_text().count("\n")
    with open(src, "a") as f:
        f.write('{"content": "no role"}\n')
    dest = tmp_path / "out" / "s.jsonl"
    with pytest.raises(SessionError) as err:
        import_session("brute", src, dest)
    assert err.value.line == lines + 1 and str(err.value).startswith(f"{src}:{lines + 1}: ")
    assert "no string `role`" in str(err.value)
    assert list(dest.parent.iterdir()) == []


_ROLES = st.sampled_from(["user", "assistant", "tool", "system", "developer", "Ünïcode"])
_TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=40)
_LINES = st.fixed_dictionaries(
    {"role": _ROLES},
    optional={
        "content": st.one_of(st.none(), _TEXT, st.just([{"type": "text", "text": "a part"}])),
        "tool_call_id": st.one_of(st.none(), _TEXT),
        "tool_calls": st.just([{"id": "c1", "name": "read", "arguments": "{\"p\": 1}"}]),
        "name": _TEXT,
        "unknown_field": st.one_of(_TEXT, st.lists(st.integers(-(2**63), 2**63), max_size=3)),
    })


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.lists(_LINES, min_size=1, max_size=8))
def test_every_line_imports_as_the_whole_parse_makes_it(tmp_path: Path,
                                                         rows: list[dict[str, object]]) -> None:
    # Lines of the common shape take a typed decode, not the whole parse and conversion:
    # what they become must not differ by a field from what ``message_from_brute`` makes.
    src = tmp_path / "log.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "s.jsonl"
    out.unlink(missing_ok=True)
    with import_session("brute", src, out, durable=False) as s:
        got = [e.message.to_dict() for e in s.entries() if e.type == "message"]
    want = [_brute.message_from_brute(r, src, n).to_dict() for n, r in enumerate(rows, 1)]
    assert got == want
