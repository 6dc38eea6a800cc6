"""Every backend has every member of the ``Storage`` protocol, the label queries included,
and ``Session`` asks a storage for nothing the protocol does not have."""

from __future__ import annotations

import ast
from pathlib import Path

from contextree import Message, Session
from contextree.entries import LabelEntry, MessageEntry
from contextree.storage import Storage

from .conftest import Backend

TS = "2025-01-01T00:00:00.000Z"
SRC = next(p for p in Path(__file__).resolve().parents if (p / "pyproject.toml").is_file()) \
    / "src" / "contextree"


def _protocol_members() -> set[str]:
    """The names the ``Storage`` protocol declares, read from its source."""
    tree = ast.parse((SRC / "storage" / "_base.py").read_text(encoding="utf-8"))
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Storage")
    return {n.name for n in cls.body if isinstance(n, ast.FunctionDef)}


def msg(eid: str, parent: str | None) -> MessageEntry:
    return MessageEntry(eid, parent, TS, message=Message(role="user", content=eid))


def test_every_backend_has_every_protocol_member(backend: Backend) -> None:
    storage = backend.make(entries=[msg("a", None)])
    assert isinstance(storage, Storage)
    members = _protocol_members()
    assert {"label_holders", "ambiguous_labels", "append", "health"} <= members
    missing = sorted(m for m in members if not hasattr(storage, m))
    assert not missing, f"{backend.name} lacks {missing}"


def test_label_holders_and_ambiguous_labels_on_every_backend(backend: Backend) -> None:
    storage = backend.make(entries=[
        msg("a", None), msg("b", "a"), msg("c", "b"),
        LabelEntry("l1", "c", TS, target_id="a", label="x"),  # two holders: an old file
        LabelEntry("l2", "l1", TS, target_id="b", label="x"),
        LabelEntry("l3", "l2", TS, target_id="c", label="y"),
    ])
    for readonly in (False, True):
        assert storage.label_holders("x") == ["a", "b"]
        assert storage.label_holders("y") == ["c"]
        assert storage.label_holders("nothing") == []
        assert storage.ambiguous_labels() == {"x": ["a", "b"]}
        storage = backend.reopen(storage, readonly=readonly)
    if storage.readonly:
        storage = backend.reopen(storage)
    s = Session(storage)  # the session answers from the same two queries
    assert s.ambiguous_labels() == {"x": ["a", "b"]}
    s.set_label("a", "x")  # every other holder is cleared first
    assert storage.label_holders("x") == ["a"] and storage.ambiguous_labels() == {}


def test_session_asks_a_storage_only_for_protocol_members() -> None:
    tree = ast.parse((SRC / "_session.py").read_text(encoding="utf-8"))
    members = _protocol_members()
    narrowed: set[int] = set()  # nodes under ``if isinstance(self.storage, SomeBackend):``
    for node in ast.walk(tree):
        if (isinstance(node, ast.If) and isinstance(node.test, ast.Call)
                and isinstance(node.test.func, ast.Name) and node.test.func.id == "isinstance"
                and ast.unparse(node.test.args[0]) == "self.storage"):
            narrowed.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    probes, unknown = [], []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id in ("getattr", "hasattr") and node.args
                and "storage" in ast.unparse(node.args[0])):
            probes.append(f"_session.py:{node.lineno}: {ast.unparse(node)}")
        if (isinstance(node, ast.Attribute) and ast.unparse(node.value) == "self.storage"
                and node.attr not in members and id(node) not in narrowed):
            unknown.append(f"_session.py:{node.lineno}: self.storage.{node.attr}")
    assert not probes, f"Session probes its storage: {probes}"
    assert not unknown, f"Session uses storage members the protocol lacks: {unknown}"
