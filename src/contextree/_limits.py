"""Limits on the JSON a session line may hold: how deeply it nests, how big its integers are.

Fields that take any JSON (custom data, details, header metadata, tool call arguments,
unknown fields and entry types) could otherwise hold values that some reader in the chain
cannot take: msgspec and the ``json`` module stop with ``RecursionError`` near Python's
recursion limit (sooner, deep in a call stack), orjson refuses to write more than 254
levels or an integer beyond 64 bits. A line is therefore held to ``MAX_DEPTH`` levels (the
line's own object is one) and to integers in the 64-bit range, when it is written and when
it is read, so that everything contextree stores can be read, shown and copied by all of it.

This module checks plain JSON data; ``contextree.entries`` knows which fields of each line
can hold arbitrary JSON and walks only those (``line_problem``), without recursion, so a
typical entry costs a few attribute reads. ``parse_json`` is how every other JSON text
(tool call arguments from a model, lines of files to import, JSON kept inside a string) is
read: held to the same depth, and never a ``RecursionError``.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import msgspec
import orjson

from ._messages import to_builtins

__all__ = ["ARGUMENTS_DEPTH", "MAX_DEPTH", "TOO_DEEP", "JSONError", "TooDeep", "data_problem",
           "deeper_than", "parse_json", "plain_data", "surely_shallow", "too_deep"]

MAX_DEPTH = 200
"""Most levels of nesting in one line (``{"a": [1]}`` has two)."""

ARGUMENTS_DEPTH = MAX_DEPTH - 4
"""Most levels a tool call's arguments may nest: a message line holds them four levels down
(the entry, its message, the ``tool_calls`` list, the call)."""

TOO_DEEP = (f"it nests JSON objects and arrays more than {MAX_DEPTH} levels deep (the "
            "most a session line may hold)")
_TOO_BIG = "it holds an integer outside the 64-bit range (which JSON readers cannot take)"
_ANY_JSON = msgspec.json.Decoder()
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
            plain = plain_data(obj)
            if plain is None:
                return TOO_DEEP
            if plain is not obj:
                stack.append((plain, depth))
    return None


def plain_data(obj: Any) -> Any:
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


class JSONError(orjson.JSONDecodeError):
    """JSON text ``parse_json`` cannot read: a ``JSONDecodeError`` (so a ``ValueError``),
    caught wherever orjson's or the standard library's errors already are."""

    def __init__(self, message: str) -> None:
        super().__init__(message, "", 0)

    def __str__(self) -> str:
        return self.msg


class TooDeep(JSONError):
    """JSON text that nests deeper than the limit."""

    def __init__(self, message: str = TOO_DEEP) -> None:
        super().__init__(message)


def parse_json(text: str | bytes, *, exact: bool = False, limit: int = MAX_DEPTH) -> Any:
    """The value of JSON ``text``, nesting at most ``limit`` levels: ``TooDeep`` past them,
    never a ``RecursionError``; ``JSONError`` for text that is not JSON.

    msgspec reads it (a failed allocation is a ``MemoryError``: orjson may crash instead);
    ``exact=True`` uses the standard library, which also takes NaN, Infinity and numbers
    beyond a double's range (a model's or another tool's JSON may hold them)."""
    try:
        value = json.loads(text) if exact else _ANY_JSON.decode(text)
    except RecursionError:
        raise TooDeep() from None
    except msgspec.DecodeError as e:
        raise JSONError(str(e)) from None
    if deeper_than(limit, value, text):
        raise TooDeep()
    return value


_WALK_FROM = 16 << 10


def deeper_than(limit: int, value: Any, text: str | bytes) -> bool:
    """``too_deep(value, limit)`` of ``value``, the JSON ``text`` parsed (or ``text``, it
    written), at the lesser cost of two ways. A text of 16 KiB and more is mostly strings
    (a tool's output): its containers are walked while they hold fewer items than it has
    bytes / 64. Else (or past that) ``[`` and ``{`` are counted in ``text`` (a bound, in
    C), and the whole walk made only when the count passes ``limit``."""
    size = len(text)
    if size <= 2 * limit:  # [[...]]: two bytes a level
        return False
    if size >= _WALK_FROM:  # a short text is counted at once: a walk costs more in calls
        found = _walk(value, limit, size >> 6)
        if found is not None:
            return found
    return _openers(text) > limit and too_deep(value, limit)


def _walk(value: Any, limit: int, budget: int) -> bool | None:
    """``too_deep(value, limit)``, or ``None`` once more than ``budget`` items were seen."""
    stack: list[tuple[Any, int]] = [(value, 1)] if isinstance(value, dict | list) else []
    while stack:
        item, level = stack.pop()
        if level > limit:
            return True
        budget -= len(item)
        if budget < 0:
            return None
        for child in item.values() if isinstance(item, dict) else item:
            if isinstance(child, dict | list):
                stack.append((child, level + 1))
    return False


def surely_shallow(text: str | bytes, limit: int = MAX_DEPTH) -> bool:
    """True when JSON ``text`` cannot nest deeper than ``limit`` levels: it holds no more
    ``[`` and ``{`` than that, counted in C (those inside strings count too, so ``False``
    only means that it might)."""
    return _openers(text) <= limit


def _openers(text: str | bytes) -> int:
    """How many ``[`` and ``{`` ``text`` has: an upper bound of its depth, counted in C.
    Bytes lose both in one ``translate`` pass (1.2-2.3x faster than two ``count`` passes,
    which CPython makes a byte at a time)."""
    if isinstance(text, str):
        return text.count("[") + text.count("{")
    return len(text) - len(text.translate(None, b"[{"))


def too_deep(value: Any, limit: int = MAX_DEPTH) -> bool:
    """Whether ``value`` nests containers more than ``limit`` levels deep (iteratively: no
    recursion limit to hit on hostile input)."""
    return bool(_walk(value, limit, sys.maxsize))
