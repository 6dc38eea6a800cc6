"""``expected_leaf=`` on every Session write: refused with ``LeafConflict`` unless the leaf
is that entry, on every backend (PostgreSQL checks it in the appending transaction)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from contextree import Message, Session
from contextree.errors import LeafConflict

from .conftest import Backend

Write = Callable[[Session, str, Any], object]

WRITES: dict[str, Write] = {
    "append_message": lambda s, a, leaf: s.append_message(Message.user("x"),
                                                          expected_leaf=leaf),
    "append_model_change": lambda s, a, leaf: s.append_model_change("p", "m",
                                                                    expected_leaf=leaf),
    "append_thinking_level_change": lambda s, a, leaf: s.append_thinking_level_change(
        "high", expected_leaf=leaf),
    "append_active_tools_change": lambda s, a, leaf: s.append_active_tools_change(
        ["read"], expected_leaf=leaf),
    "append_compaction": lambda s, a, leaf: s.append_compaction(
        summary="s", first_kept_entry_id=a, tokens_before=1, expected_leaf=leaf),
    "append_branch_summary": lambda s, a, leaf: s.append_branch_summary(
        a, "left", expected_leaf=leaf),
    "append_custom": lambda s, a, leaf: s.append_custom("t", {"n": 1}, expected_leaf=leaf),
    "append_custom_message": lambda s, a, leaf: s.append_custom_message(
        "t", "hi", expected_leaf=leaf),
    "set_label": lambda s, a, leaf: s.set_label(a, "x", expected_leaf=leaf),
    "set_name": lambda s, a, leaf: s.set_name("n", expected_leaf=leaf),
    "move_to": lambda s, a, leaf: s.move_to(a, expected_leaf=leaf),
    "move_to with a summary": lambda s, a, leaf: s.move_to(a, "left", expected_leaf=leaf),
}


@pytest.mark.parametrize("write", list(WRITES))
def test_a_write_goes_ahead_only_on_the_expected_leaf(backend: Backend, write: str) -> None:
    s = Session(backend.make())
    a = s.append_message(Message.user("a"))
    b = s.append_message(Message.assistant("b"))
    count = len(s)
    with pytest.raises(LeafConflict):
        WRITES[write](s, a, a)  # the leaf is b
    with pytest.raises(LeafConflict):
        WRITES[write](s, a, None)
    assert len(s) == count and s.leaf_id == b
    WRITES[write](s, a, b)
    assert len(s) == count + 1


def test_without_expected_leaf_nothing_is_checked(backend: Backend) -> None:
    s = Session(backend.make())
    assert s.append_message(Message.user("a"), expected_leaf=None)
    s.append_message(Message.user("b"))
    assert len(s) == 2


def test_compact_checks_the_expected_leaf(backend: Backend) -> None:
    s = Session(backend.make())
    s.append_message(Message.system("sys"))
    for i in range(6):
        s.append_message(Message.user(f"task {i}: " + "words " * 300))
        s.append_message(Message.assistant(f"done {i}: " + "words " * 300))
    leaf, count = s.leaf_id, len(s)
    with pytest.raises(LeafConflict):
        s.compact(3000, expected_leaf="elsewhere")
    assert len(s) == count
    result = s.compact(3000, expected_leaf=leaf)
    assert result.entry_id == s.leaf_id and len(s) == count + 1


def test_another_writer_moving_the_leaf_is_a_conflict(backend: Backend,
                                                      request: pytest.FixtureRequest) -> None:
    """On PostgreSQL the check runs in the appending transaction, against the leaf another
    process may have moved (the local backends admit one writer, so this cannot happen)."""
    if backend.name != "postgres":
        pytest.skip("only PostgreSQL admits a second writer on one session")
    from contextree.storage.postgres import PostgresStorage

    s = Session(backend.make())
    a = s.append_message(Message.user("a"))
    other = PostgresStorage.open(request.getfixturevalue("pg_url"), s.id)
    backend.opened.append(other)
    Session(other).append_message(Message.user("from elsewhere"))
    with pytest.raises(LeafConflict):
        s.append_message(Message.user("mine"), expected_leaf=a)
    assert len(s) == 2
    s.append_message(Message.user("mine"), expected_leaf=s.leaf_id)
    assert len(s) == 3
