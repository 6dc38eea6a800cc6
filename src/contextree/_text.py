"""Shortening text for display and for placeholders, in one way everywhere."""

from __future__ import annotations

from typing import Literal

__all__ = ["count_lines", "first_line", "shorten"]

ELLIPSIS = "…"


def count_lines(text: str) -> int:
    """Lines in ``text``, counting a last line without a newline (``"a\nb\n"`` is 2)."""
    return text.count("\n") + (1 if text and not text.endswith("\n") else 0)


def shorten(text: str, limit: int, *, keep: Literal["head", "middle"] = "head",
            counted: bool = False) -> str:
    """``text`` cut to at most ``limit`` characters, marked with ``…``.

    ``keep="head"`` keeps the start; ``"middle"`` keeps the start and the end around the cut.
    ``counted`` says how many characters were left out (``… [1234 chars omitted] …``), which a
    model can act on, at the price of a few characters of the limit.
    """
    if len(text) <= limit:
        return text
    limit = max(limit, 1)
    if not counted:
        if keep == "head":
            return text[: limit - 1] + ELLIPSIS
        head = (limit - 1) // 2 + (limit - 1) % 2
        return text[:head] + ELLIPSIS + text[len(text) - (limit - 1 - head):]
    note = f" {ELLIPSIS} [{len(text) - limit} chars omitted] {ELLIPSIS} "
    room = max(limit - len(note), 0)
    if keep == "head":
        return text[:room] + note.rstrip()
    head = room // 2 + room % 2
    return text[:head] + note + text[len(text) - (room - head):]


def first_line(text: str, limit: int | None = None) -> str:
    """The first line of ``text`` (`` …`` when more lines follow), optionally shortened."""
    lines = text.splitlines() or [""]
    line = lines[0] + (f" {ELLIPSIS}" if len(lines) > 1 else "")
    return line if limit is None else shorten(line, limit)
