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

from ._messages import Message, to_builtins
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

__all__ = ["MAX_DEPTH", "TOO_DEEP", "data_problem", "decoded_problem", "line_problem"]

MAX_DEPTH = 200
"""Most levels of nesting in one line (``{"a": [1]}`` has two)."""

TOO_DEEP = (f"it nests JSON objects and arrays more than {MAX_DEPTH} levels deep (the "
            "most a session line may hold)")
_TOO_BIG = "it holds an integer outside the 64-bit range (which JSON readers cannot take)"
_MIN_INT = -(2**63)
_MAX_INT = 2**64 - 1
_SCALARS = (str, float, bool, type(None))
_FLAT = frozenset(_SCALARS)


def data_problem(value: Any, level: int = 0) -> str | None:
    """What breaks the limits in ``value``, plain JSON data inside ``level`` containers of
    its line; ``None`` if nothing does."""
    kind = type(value)
    if kind is dict or kind is list:  # the common case first: one flat object or array
        if level >= MAX_DEPTH:
            return TOO_DEEP
        for item in value.values() if kind is dict else value:
            sub = type(item)
            if sub not in _FLAT and (sub is not int or item < _MIN_INT or item > _MAX_INT):
                break
        else:
            return None
    elif kind in _FLAT:
        return None
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
                elif sub not in _FLAT:
                    stack.append((item, depth + 1))
        elif kind is int:
            if obj < _MIN_INT or obj > _MAX_INT:
                return _TOO_BIG
        elif kind not in _FLAT:
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
        if isinstance(obj, list | tuple | set | frozenset):
            return list(obj)
        if isinstance(obj, msgspec.Struct):
            return to_builtins(obj)
        data = getattr(obj, "data", None)  # an unknown content part
        return data if type(data) is dict else obj
    except RecursionError:
        return None


def line_problem(line: Any) -> str | None:
    """What breaks the limits in a header or entry, or ``None``."""
    if type(line) is MessageEntry:  # the common case first: a plain message
        m = line.message
        if (type(m.content) is str and not m.tool_calls and m.meta is None
                and getattr(line, "_extra", None) is None
                and getattr(m, "_extra", None) is None
                and (m.usage is None or getattr(m.usage, "_extra", None) is None)):
            return None
    check = _FIELDS.get(type(line))
    if check is None:
        if isinstance(line, UnknownEntry):
            return data_problem(line.data)
        if not isinstance(line, msgspec.Struct):
            return None
        plain = _plain(line)
        return TOO_DEEP if plain is None else data_problem(plain)
    extra = getattr(line, "_extra", None)  # unknown fields, kept to be written back
    if extra and (p := data_problem(extra)):
        return p
    return check(line)


def decoded_problem(entry: Any) -> str | None:
    """``line_problem`` for what the typed line decoder returned: it admits no unknown
    fields or content parts, so a message can only go wrong in its tool calls or meta."""
    if type(entry) is MessageEntry:
        m = entry.message
        if m.meta is not None and (p := data_problem(m.meta, 2)):
            return p
        for call in m.tool_calls or ():
            if call.arguments and (p := data_problem(call.arguments, 4)):
                return p
        return None
    return line_problem(entry)


def _extras(obj: Any, level: int) -> str | None:
    """The unknown fields of a struct ``level`` containers deep, if any."""
    extra = getattr(obj, "_extra", None)
    return data_problem(extra, level) if extra else None


def _message(m: Message, level: int) -> str | None:
    """A message ``level`` containers deep in its line (its fields are one deeper)."""
    if (p := _extras(m, level)) or (m.meta is not None and (p := data_problem(m.meta,
                                                                              level + 1))):
        return p
    content = m.content
    if type(content) is list:
        for part in content:
            if isinstance(part, msgspec.Struct):
                p = _extras(part, level + 2)
            else:  # an unknown part: its data is the part
                p = data_problem(getattr(part, "data", None), level + 2)
            if p:
                return p
    for call in m.tool_calls or ():
        if (p := _extras(call, level + 2)) or (
                call.arguments and (p := data_problem(call.arguments, level + 3))):
            return p
    if m.usage is not None and (p := _extras(m.usage, level + 1)):
        return p
    return None


def _field(name: str) -> Callable[[Any], str | None]:
    def check(line: Any) -> str | None:
        value = getattr(line, name)
        if value is not None and (p := data_problem(value, 1)):
            return p
        usage = getattr(line, "usage", None)
        return _extras(usage, 1) if usage is not None else None
    return check


def _compaction(line: CompactionEntry) -> str | None:
    if line.details is not None and (p := data_problem(line.details, 1)):
        return p
    for m in line.retained_tail or ():
        if p := _message(m, 2):
            return p
    return _extras(line.usage, 1) if line.usage is not None else None


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
