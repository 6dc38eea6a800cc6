"""Limits on the JSON a session line may hold: how deeply it nests, how big its integers are.

Fields that take any JSON (custom data, details, header metadata, tool call arguments,
unknown fields and entry types) could otherwise hold values that some reader in the chain
cannot take: msgspec and the ``json`` module stop with ``RecursionError`` near Python's
recursion limit (sooner, deep in a call stack), orjson refuses to write more than 254
levels or an integer beyond 64 bits. A line is therefore held to ``MAX_DEPTH`` levels (the
line's own object is one) and to integers in the 64-bit range, when it is written and when
it is read, so that everything contextree stores can be read, shown and copied by all of it.

Only the fields that can hold arbitrary JSON are walked, without recursion, so a typical
entry costs a few attribute reads.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec

from ._messages import Message, has_extras, to_builtins
from .entries import (
    ActiveToolsChangeEntry,
    BranchSummaryEntry,
    CompactionEntry,
    CustomEntry,
    CustomMessageEntry,
    LabelEntry,
    LeafEntry,
    MessageEntry,
    ModelChangeEntry,
    SessionHeader,
    SessionInfoEntry,
    ThinkingLevelChangeEntry,
    UnknownEntry,
)

__all__ = ["MAX_DEPTH", "TOO_DEEP", "data_problem", "line_problem"]

MAX_DEPTH = 200
"""Most levels of nesting in one line (``{"a": [1]}`` has two)."""

TOO_DEEP = (f"it nests JSON objects and arrays more than {MAX_DEPTH} levels deep (the "
            "most a session line may hold)")
_TOO_BIG = "it holds an integer outside the 64-bit range (which JSON readers cannot take)"
_MIN_INT = -(2**63)
_MAX_INT = 2**64 - 1
_SCALARS = (str, float, bool, type(None))


def data_problem(value: Any, level: int = 0) -> str | None:
    """What breaks the limits in ``value``, plain JSON data inside ``level`` containers of
    its line; ``None`` if nothing does."""
    stack: list[tuple[Any, int]] = [(value, level)]
    while stack:
        obj, depth = stack.pop()
        kind = type(obj)
        if kind is dict or kind is list or kind is tuple:
            if depth >= MAX_DEPTH:
                return TOO_DEEP
            for item in obj.values() if kind is dict else obj:
                sub = type(item)
                if sub is int:
                    if item < _MIN_INT or item > _MAX_INT:
                        return _TOO_BIG
                elif sub not in _SCALARS:
                    stack.append((item, depth + 1))
        elif kind is int:
            if obj < _MIN_INT or obj > _MAX_INT:
                return _TOO_BIG
        elif kind not in _SCALARS:
            plain = _plain(obj)
            if plain is None:
                return TOO_DEEP
            if plain is not obj:
                stack.append((plain, depth))
    return None


def _plain(obj: Any) -> Any:
    """``obj`` as plain JSON data (a struct or subclass given as custom data); ``None`` if it
    nests too deeply even to convert."""
    try:
        if isinstance(obj, bool):
            return bool(obj)
        if isinstance(obj, int):
            return int(obj)
        if isinstance(obj, dict):
            return dict(obj)
        if isinstance(obj, list | tuple):
            return list(obj)
        if isinstance(obj, msgspec.Struct):
            return to_builtins(obj)
        data = getattr(obj, "data", None)  # an unknown content part
        return data if type(data) is dict else obj
    except RecursionError:
        return None


def line_problem(line: Any) -> str | None:
    """What breaks the limits in a header or entry, or ``None``."""
    check = _FIELDS.get(type(line))
    if check is not None and not has_extras(line):
        return check(line)
    if isinstance(line, UnknownEntry):
        return data_problem(line.data)
    if not isinstance(line, msgspec.Struct):
        return None
    plain = _plain(line)
    return TOO_DEEP if plain is None else data_problem(plain)


def _message(m: Message, level: int) -> str | None:
    """A message ``level`` containers deep in its line (its fields are one deeper)."""
    if m.meta is not None and (p := data_problem(m.meta, level + 1)):
        return p
    content = m.content
    if type(content) is list:
        for part in content:
            if not isinstance(part, msgspec.Struct) and (
                    p := data_problem(getattr(part, "data", None), level + 2)):
                return p
    for call in m.tool_calls or ():
        if call.arguments and (p := data_problem(call.arguments, level + 3)):
            return p
    return None


def _field(name: str) -> Callable[[Any], str | None]:
    def check(line: Any) -> str | None:
        value = getattr(line, name)
        return None if value is None else data_problem(value, 1)
    return check


def _compaction(line: CompactionEntry) -> str | None:
    if line.details is not None and (p := data_problem(line.details, 1)):
        return p
    for m in line.retained_tail or ():
        if p := _message(m, 2):
            return p
    return None


def _nothing(line: Any) -> None:
    return None


_FIELDS: dict[type[Any], Callable[[Any], str | None]] = {
    MessageEntry: lambda e: _message(e.message, 1),
    CompactionEntry: _compaction,
    BranchSummaryEntry: _field("details"),
    CustomEntry: _field("data"),
    CustomMessageEntry: _field("details"),
    SessionHeader: _field("metadata"),
    ThinkingLevelChangeEntry: _nothing,
    ModelChangeEntry: _nothing,
    ActiveToolsChangeEntry: _nothing,
    LabelEntry: _nothing,
    SessionInfoEntry: _nothing,
    LeafEntry: _nothing,
}
