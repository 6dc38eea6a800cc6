"""Labels name one entry, and lines stay within the JSON limits, on every backend."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from contextree import Session
from contextree.entries import CustomEntry, LabelEntry
from contextree.errors import InvalidEntry
from helpers import TS
from helpers import message_entry as msg

from .conftest import Backend


def nested(depth: int) -> Any:
    value: Any = 0
    for _ in range(depth):
        value = [value]
    return value


def test_setting_a_label_on_another_entry_moves_it(backend: Backend) -> None:
    storage = backend.make(entries=[msg("a", None), msg("b", "a")])
    s = Session(storage)
    s.set_label("a", "here")
    s.set_label("b", "here")
    for _ in range(2):
        assert s.labels() == {"b": "here"}
        assert s.label_of("a") is None and s.label_of("b") == "here"
        assert s.ambiguous_labels() == {}
        s = Session(backend.reopen(s.storage))
    s.set_label("b", "there")  # a new label on the same entry replaces its old one
    assert s.labels() == {"b": "there"}
    s.set_label("a", "here")
    assert s.labels() == {"b": "there", "a": "here"}


def test_a_label_held_twice_in_an_old_file_is_reported_with_both_ids(
        backend: Backend) -> None:
    # Older versions (and other tools) let two entries carry one label.
    storage = backend.make(entries=[
        msg("a", None), msg("b", "a"), msg("c", "b"),
        LabelEntry("l1", "c", TS, target_id="a", label="x"),
        LabelEntry("l2", "l1", TS, target_id="b", label="x"),
    ])
    s = Session(storage)
    for _ in range(2):
        assert s.labels() == {"b": "x"}  # the latest keeps it
        assert s.ambiguous_labels() == {"x": ["a", "b"]}
        s = Session(backend.reopen(s.storage))
    s.set_label("c", "x")  # setting it again resolves it: every other holder is cleared
    for _ in range(2):
        assert s.labels() == {"c": "x"} and s.ambiguous_labels() == {}
        s = Session(backend.reopen(s.storage))


def test_clearing_the_latest_holder_leaves_the_earlier_one(backend: Backend) -> None:
    storage = backend.make(entries=[
        msg("a", None), msg("b", "a"),
        LabelEntry("l1", "b", TS, target_id="a", label="x"),
        LabelEntry("l2", "l1", TS, target_id="b", label="x"),
    ])
    s = Session(storage)
    s.set_label("b", None)
    assert s.labels() == {"a": "x"} and s.ambiguous_labels() == {}


@pytest.mark.parametrize("depth", [200, 1_000, 5_000])
def test_data_nested_too_deeply_is_refused_and_nothing_is_stored(
        backend: Backend, depth: int) -> None:
    storage = backend.make(entries=[msg("a", None)])
    s = Session(storage)
    with pytest.raises(InvalidEntry, match="levels deep"):
        s.append_custom("deep", nested(depth))
    with pytest.raises(InvalidEntry, match="64-bit"):
        s.append_custom("big", {"n": 2**64})
    assert len(s) == 1 and s.leaf_id == "a"
    ok = s.append_custom("fine", nested(199))  # the line object and 199 lists: 200 levels
    s = Session(backend.reopen(s.storage))
    entry = s.get_entry(ok)
    assert isinstance(entry, CustomEntry) and entry.data == nested(199)


def test_a_fork_carries_the_labels_in_force_and_no_ambiguity(
        backend: Backend, tmp_path: Path) -> None:
    storage = backend.make(entries=[msg("a", None), msg("b", "a")])
    s = Session(storage)
    first = s.set_label("a", "x")
    s.set_label("b", "x")  # moved: a clear of a, then x on b
    with s.fork(tmp_path / "leaf.jsonl") as f:
        assert f.labels() == {"b": "x"} and f.ambiguous_labels() == {}
    with s.fork(tmp_path / "early.jsonl", at=first) as f:  # the path still says x is on a
        assert f.labels() == {"b": "x"} and f.ambiguous_labels() == {}
