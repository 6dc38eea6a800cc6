"""``ToolResult``: what a tool returns to the model and the runtime."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

__all__ = ["ToolResult", "to_result"]


@dataclass
class ToolResult:
    """What a tool returns: text for the model, an error flag, and metadata for the runtime.

    ``meta`` holds a truncation record (``TruncationRecord.to_meta()``) when the tool already
    truncated its output (so it is not truncated twice), plus tool facts such as ``path``,
    ``command`` and ``exit_code``.
    """

    content: str
    is_error: bool = False
    meta: dict[str, Any] | None = None


def to_result(value: object) -> ToolResult:
    """A tool function's return value as a ``ToolResult`` (str, None, or JSON data)."""
    if isinstance(value, ToolResult):
        return value
    if isinstance(value, str):
        return ToolResult(value)
    if value is None:
        return ToolResult("")
    return ToolResult(json.dumps(value, ensure_ascii=False, default=str))
