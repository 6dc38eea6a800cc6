"""Text that is safe to put on a terminal, and fitting it into columns.

Session content comes from models, tools and files nobody vetted: an escape sequence in a tool
output could set the window title, write the clipboard (OSC 52), plant a hyperlink or clear
the screen. Every string from a session or a file name goes through ``visible`` before the
CLI prints it as text: control characters (C0, DEL, C1), the bidirectional overrides and the
line separators become readable escapes (``\\x1b``, ``\\x9b``, ``\\u202e``), so an escape
sequence shows as ``\\x1b]52;c;...`` instead of acting; so do the characters no terminal
draws (zero-width spaces, tag characters), which could hide words in plain sight. What a
person approves (``chat``'s questions) escapes every invisible character (``hidden=True``).
``--json`` output is left exact (JSON escapes C0 characters itself).
"""

from __future__ import annotations

import re

from rich.cells import cell_len, get_character_cell_size

from .._text import ELLIPSIS, HIDDEN, UNSAFE, escape_control

__all__ = ["ELLIPSIS", "fit", "surrogates_escaped", "visible", "width_of"]


_ONE_LINE = re.compile(f"[\t{UNSAFE}]")  # a line of a table: tabs would break the columns
_BLOCK = re.compile(f"[{UNSAFE}]")  # a line of a message body: tabs are kept
_PATTERNS = {(False, False): _ONE_LINE, (True, False): _BLOCK,
             (False, True): re.compile(f"[\t{UNSAFE}{HIDDEN}]"),
             (True, True): re.compile(f"[{UNSAFE}{HIDDEN}]")}
_SURROGATE = re.compile("[\ud800-\udfff]")  # what UTF-8 (and so JSON output) cannot hold


def visible(text: str, *, tabs: bool = False, hidden: bool = False) -> str:
    """``text`` with every control character and terminal escape made visible (``\\x1b``...).

    Newlines become ``\\n`` too, so the result is one line; ``tabs=True`` keeps tabs (for a
    message body, where whitespace is kept as written); ``hidden=True`` also escapes the
    invisible characters ordinary text may hold (joiners, soft hyphens, variation selectors:
    ``HIDDEN``), for what a person is asked to approve.
    """
    pattern = _PATTERNS[tabs, hidden]
    if pattern.search(text) is None:
        return text
    return pattern.sub(escape_control, text)


def surrogates_escaped(text: str) -> str:
    """``text`` with each lone surrogate (an undecodable byte of a file name) written as
    ``visible`` writes it (``\\udcff``), so it can be encoded as UTF-8; the rest is kept."""
    if _SURROGATE.search(text) is None:
        return text
    return _SURROGATE.sub(escape_control, text)


def width_of(text: str) -> int:
    """Terminal columns ``text`` takes (wide characters count two)."""
    return cell_len(text)


def fit(text: str, width: int) -> str:
    """``text`` cut to at most ``width`` terminal columns, ending with ``…`` when cut."""
    if width <= 0:
        return ""
    if text.isascii() and text.isprintable():  # one column a character: no cell count
        return text if len(text) <= width else text[:width - 1] + ELLIPSIS
    if cell_len(text) <= width:
        return text
    room = width - 1  # for the ellipsis
    used = 0
    out: list[str] = []
    for ch in text:
        size = get_character_cell_size(ch)
        if used + size > room:
            break
        out.append(ch)
        used += size
    return "".join(out) + ELLIPSIS
