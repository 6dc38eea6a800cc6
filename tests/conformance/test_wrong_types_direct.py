"""The storage API called directly (as a backend's user or an importer does, without
``Session``) refuses wrong types as ``Session`` does, on every backend: a header whose
fields are not of their types creates nothing (``InvalidArgument`` naming the field), an
entry whose parent or leaf target is no string is ``InvalidEntry`` (not a raw
``TypeError`` from looking a list up among the ids), and an ``expected_leaf`` that is no
entry id is ``InvalidArgument`` (not a ``LeafConflict`` no retry could settle)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import contextree as ct
from contextree.entries import LeafEntry, MessageEntry, SessionHeader, new_id, now
from contextree.errors import InvalidArgument, InvalidEntry
from contextree.storage import JsonlStorage, MemoryStorage

from .conftest import Backend, new_header


@pytest.mark.parametrize(("field", "value", "said"), [
    ("metadata", "x", "`metadata` must be dict or None, got str"),
    ("cwd", 5, "`cwd` must be str or None, got int"),
    ("created_at", 5, "`created_at` must be str, got int"),
])
def test_a_wrong_typed_header_creates_no_session(backend: Backend, field: str, value: Any,
                                                 said: str) -> None:
    fields = {"id": new_header().id, "created_at": now(), "cwd": "/w", field: value}
    header = SessionHeader(**fields)
    with pytest.raises(InvalidArgument, match=said):
        backend.make(header)
    assert isinstance(backend.make(), ct.storage.Storage)  # the backend is still usable


def test_what_is_no_header_creates_no_session(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgument, match="SessionHeader, got dict"):
        MemoryStorage({"id": "x"})  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument, match="SessionHeader, got dict"):
        JsonlStorage.create(tmp_path / "s.jsonl", {"id": "x"})  # type: ignore[arg-type]
    assert not (tmp_path / "s.jsonl").exists()


@pytest.mark.parametrize("parent", [["p"], 5, {"k": "v"}])
def test_a_parent_that_is_no_string_is_an_invalid_entry(backend: Backend, parent: Any) -> None:
    storage = backend.make()
    first = MessageEntry(new_id(), None, now(), message=ct.Message.user("hi"))
    storage.append(first)
    bad = MessageEntry(new_id(), parent, now(), message=ct.Message.user("again"))
    with pytest.raises(InvalidEntry, match="`parent_id` must be str or None, got"):
        storage.append(bad)
    assert storage.leaf_id == first.id
    assert [e.id for e in backend.reopen(storage).entries()] == [first.id]


def test_a_leaf_target_that_is_no_string_is_an_invalid_entry(backend: Backend) -> None:
    storage = backend.make()
    first = MessageEntry(new_id(), None, now(), message=ct.Message.user("hi"))
    storage.append(first)
    bad = LeafEntry(new_id(), first.id, now(), target_id=[first.id])  # type: ignore[arg-type]
    with pytest.raises(InvalidEntry, match="`target_id` must be str or None, got list"):
        storage.append(bad)
    assert [e.id for e in backend.reopen(storage).entries()] == [first.id]


@pytest.mark.parametrize("expected", [5, ["x"], b"id"])
def test_an_expected_leaf_that_is_no_id_is_an_invalid_argument(backend: Backend,
                                                               expected: Any) -> None:
    storage = backend.make()
    entry = MessageEntry(new_id(), None, now(), message=ct.Message.user("hi"))
    with pytest.raises(InvalidArgument, match="expected_leaf must be an entry id"):
        storage.append(entry, expected_leaf=expected)
    storage.append(entry, expected_leaf=None)  # nothing was written: the same entry goes in
    assert storage.leaf_id == entry.id


def test_header_check_keeps_a_right_header(backend: Backend) -> None:
    """Guards against refusing too much: extras and metadata of JSON types are fine."""
    header = SessionHeader(id=new_header().id, created_at=now(), cwd="/w",
                           metadata={"k": [1, 2.5, None, {"x": True}]})
    storage = backend.make(header)
    assert backend.reopen(storage).header.metadata == header.metadata
