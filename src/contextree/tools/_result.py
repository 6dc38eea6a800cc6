"""``ToolResult``: what a tool returns to the model and the runtime."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from contextree.markers import ResultViews

__all__ = ["ToolResult", "to_result"]


@dataclass
class ToolResult(ResultViews):
    """What a tool returns: text for the model, an error flag, and metadata for the runtime.

    ``meta`` holds a truncation record (``TruncationRecord.to_meta()``) when the tool already
    truncated its output (so it is not truncated twice), plus the tool's facts
    (``ShellMeta(...).to_meta()``: ``command``, ``exit_code``...; see ``contextree.markers``).
    It is plain JSON, as stored; ``truncation`` and ``shell`` read it typed.
    """

    content: str
    is_error: bool = False
    meta: dict[str, Any] | None = None


def to_result(value: object) -> ToolResult:
    """A tool function's return value as a ``ToolResult`` (str, bytes, None, or JSON
    data); bytes are read as UTF-8 (a command's output), what does not decode as U+FFFD;
    an iterator or a set gives its items."""
    if isinstance(value, ToolResult):
        return value
    if isinstance(value, str):
        return ToolResult(value)
    if isinstance(value, bytes | bytearray | memoryview):
        return ToolResult(bytes(value).decode("utf-8", "replace"))
    if value is None:
        return ToolResult("")
    return ToolResult(json.dumps(value, ensure_ascii=False, default=_json_default))


def _json_default(value: object) -> object:
    """What JSON has no form for: the items of an iterator or a set (a generator returned
    by a tool), else the value's text."""
    if isinstance(value, Iterator | set | frozenset):
        return list(value)
    return str(value)
