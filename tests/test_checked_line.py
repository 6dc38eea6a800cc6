"""``checked_line`` gives what ``line_problem`` and ``encode_line`` give together: the line of
an entry within the limits, ``None`` for one beyond them, at the very edge of each limit and
for every field that holds arbitrary JSON (it skips the walk for lines orjson wrote with few
brackets, so the edges are where it could differ)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import contextree as ct
from contextree._limits import MAX_DEPTH
from contextree.entries import (
    AnyEntry,
    CompactionEntry,
    CustomEntry,
    MessageEntry,
    UnknownEntry,
    checked_line,
    encode_line,
    line_problem,
)

TS = "2026-01-01T00:00:00.000Z"


def _nested(levels: int) -> Any:
    value: Any = 1
    for _ in range(levels):
        value = [value]
    return value


def _message(m: ct.Message) -> MessageEntry:
    return MessageEntry(id="e", parent_id=None, timestamp=TS, message=m)


MAKERS: dict[str, Callable[[Any], AnyEntry]] = {
    "custom data": lambda v: CustomEntry(id="e", parent_id=None, timestamp=TS,
                                         custom_type="x", data={"v": v}),
    "entry extra": lambda v: _message(ct.Message.user("x")).set_extra({"k": v}),
    "message extra": lambda v: _message(ct.Message.user("x").set_extra({"k": v})),
    "part extra": lambda v: _message(ct.Message.user([ct.TextPart(text="x").set_extra(
        {"k": v})])),
    "tool arguments": lambda v: _message(ct.Message.assistant(
        "x", tool_calls=[ct.ToolCall(id="c", name="n", arguments={"a": v})])),
    "tool arguments, extras": lambda v: _message(ct.Message.assistant(
        "x", tool_calls=[ct.ToolCall(id="c", name="n", arguments={"a": v})])).set_extra(
        {"k": 1}),
    "meta": lambda v: _message(ct.Message(role="user", content="x", meta={"a": v})),
    "retained tail": lambda v: CompactionEntry(
        id="e", parent_id=None, timestamp=TS, summary="s", first_kept_entry_id=None,
        tokens_before=1, retained_tail=[ct.Message.user("x").set_extra({"k": v})]),
    "unknown entry": lambda v: UnknownEntry({"type": "someday", "id": "e", "v": v}),
}


def _expected(entry: AnyEntry) -> bytes | None:
    if line_problem(entry) is not None:
        return None
    try:
        return encode_line(entry)
    except (TypeError, ValueError, OverflowError):
        return None


@pytest.mark.parametrize("kind", sorted(MAKERS))
def test_it_agrees_with_the_walk_at_the_depth_limit(kind: str) -> None:
    results = []
    for levels in range(MAX_DEPTH - 12, MAX_DEPTH + 4):
        entry = MAKERS[kind](_nested(levels))
        assert checked_line(entry) == _expected(entry), levels
        results.append(checked_line(entry) is not None)
    assert results[0] and not results[-1]  # both sides of the limit were met


@pytest.mark.parametrize("kind", sorted(MAKERS))
@pytest.mark.parametrize("number", [2**64 - 1, 2**64, -(2**63), -(2**63) - 1, 2**70])
def test_it_agrees_with_the_walk_at_the_integer_limits(kind: str, number: int) -> None:
    entry = MAKERS[kind]({"n": [number]})
    assert checked_line(entry) == _expected(entry)
    assert (checked_line(entry) is None) == (number >= 2**64 or number < -(2**63))


def test_brackets_inside_strings_are_only_a_reason_to_walk() -> None:
    code = "function f() { return [1, {a: [2]}]; }\n" * 200  # 800 brackets, no depth
    entry = MAKERS["entry extra"](code)
    assert checked_line(entry) == encode_line(entry)
    deep = MAKERS["entry extra"]([code, _nested(MAX_DEPTH)])
    assert checked_line(deep) is None and line_problem(deep) is not None


def test_data_with_no_json_form_gives_none() -> None:
    entry = MAKERS["custom data"](object())
    assert line_problem(entry) is None and checked_line(entry) is None
