"""``JsonlStorage.append_encoded``: an entry ``encode_entry`` checked and encoded once (an
import's spooled entries) is written as that line, after the checks that need the session,
and the session reads the same as one made by ``append``."""

from __future__ import annotations

import contextlib
from pathlib import Path

import msgspec
import pytest

import contextree as ct
from contextree.entries import CustomEntry, LabelEntry, LeafEntry, MessageEntry, SessionHeader
from contextree.errors import SessionError
from contextree.storage import JsonlStorage
from contextree.storage._encoded import EncodedEntry, encode_entry

TS = "2026-01-01T00:00:00.000Z"


def _entries() -> list[ct.entries.AnyEntry]:
    tool = ct.Message(role="tool", content="out", tool_call_id="c1", name="read")
    return [
        MessageEntry(id="a", parent_id=None, timestamp=TS, message=ct.Message.user("hi")),
        MessageEntry(id="b", parent_id="a", timestamp=TS,
                     message=ct.Message.assistant("yo")).set_extra({"kept": {"n": [1, 2]}}),
        MessageEntry(id="c", parent_id="b", timestamp=TS, message=tool),
        LabelEntry(id="d", parent_id="c", timestamp=TS, target_id="b", label="here"),
        CustomEntry(id="e", parent_id="d", timestamp=TS, custom_type="x", data={"k": 1}),
        LeafEntry(id="f", parent_id="e", timestamp=TS, target_id="b"),
    ]


def _create(path: Path) -> JsonlStorage:
    return JsonlStorage.create(path, SessionHeader(id="s1", created_at=TS, cwd="/"))


@pytest.mark.parametrize("batched", [False, True])
def test_encoded_appends_write_the_session_append_writes(tmp_path: Path, batched: bool) -> None:
    by_entry, by_line = _create(tmp_path / "a.jsonl"), _create(tmp_path / "b.jsonl")
    for store, encoded in ((by_entry, False), (by_line, True)):
        with store.batch() if batched else contextlib.nullcontext():
            for entry in _entries():
                made = encode_entry(entry)
                assert made is not None
                if encoded:
                    store.append_encoded(made)
                else:
                    store.append(entry)
        assert store.leaf_id == "b" and store.labels() == {"b": "here"}
        assert store.get("c") == _entries()[2]
        store.close()
    assert (tmp_path / "a.jsonl").read_bytes() == (tmp_path / "b.jsonl").read_bytes()
    with ct.Session.open(tmp_path / "b.jsonl", readonly=True) as s:
        assert s.leaf_id == "b" and [e.id for e in s.entries()] == list("abcdef")


def test_the_tree_rules_hold_for_encoded_entries(tmp_path: Path) -> None:
    store = _create(tmp_path / "s.jsonl")
    first = encode_entry(_entries()[0])
    assert first is not None
    store.append_encoded(first)
    size = (tmp_path / "s.jsonl").stat().st_size
    orphan = encode_entry(MessageEntry(id="x", parent_id="nowhere", timestamp=TS,
                                       message=ct.Message.user("lost")))
    leaf = encode_entry(LeafEntry(id="y", parent_id="a", timestamp=TS, target_id="gone"))
    assert orphan is not None and leaf is not None
    for bad, code in ((first, "duplicate_id"), (orphan, "missing_parent"),
                      (leaf, "missing_parent")):
        with pytest.raises(SessionError) as err:
            store.append_encoded(bad)
        assert err.value.code == code
    assert (tmp_path / "s.jsonl").stat().st_size == size
    store.close()


@pytest.mark.parametrize("line", [b'{"type":"message"}', b'{"a":1}\n{"b":2}\n'])
def test_an_encoded_entry_that_is_not_one_line_is_refused(tmp_path: Path, line: bytes) -> None:
    store = _create(tmp_path / "s.jsonl")
    made = encode_entry(_entries()[0])
    assert made is not None
    with pytest.raises(SessionError) as err:
        store.append_encoded(msgspec.structs.replace(made, line=line))
    assert "one JSON line" in str(err.value)
    store.close()
    assert len((tmp_path / "s.jsonl").read_bytes().splitlines()) == 1


def _nested(levels: int) -> object:
    value: object = 1
    for _ in range(levels):
        value = [value]
    return value


@pytest.mark.parametrize("value", [2**70, _nested(250), object()],
                         ids=["beyond 64 bits", "too deep", "no JSON form"])
def test_an_entry_beyond_the_limits_is_not_encoded(value: object, tmp_path: Path) -> None:
    entry = CustomEntry(id="e", parent_id=None, timestamp=TS, custom_type="x",
                        data={"v": value})
    assert encode_entry(entry) is None  # the caller appends the entry: append says why
    store = _create(tmp_path / "s.jsonl")
    with pytest.raises(SessionError) as err:
        store.append(entry)
    assert err.value.code == "invalid_entry"
    store.close()


def test_a_read_only_session_refuses_encoded_entries(tmp_path: Path) -> None:
    _create(tmp_path / "s.jsonl").close()
    made = encode_entry(_entries()[0])
    assert isinstance(made, EncodedEntry)
    store = JsonlStorage.open(tmp_path / "s.jsonl", readonly=True)
    with pytest.raises(SessionError) as err:
        store.append_encoded(made)
    assert err.value.code == "readonly"
    store.close()
