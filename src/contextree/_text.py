"""Shortening text for display and for placeholders, in one way everywhere."""

from __future__ import annotations

import re
from typing import Literal

__all__ = ["controls_visible", "count_lines", "escape_control", "first_line", "shorten"]

ELLIPSIS = "…"

# Everything a terminal may act on instead of showing: C0 controls, DEL, C1 controls, the
# bidirectional embeddings/overrides/isolates (they reorder what follows), the Unicode line
# and paragraph separators, and lone surrogates (undecodable bytes kept by surrogateescape).
# Then what no terminal draws and no ordinary text needs, which could hide words inside
# what looks like other words: zero-width spaces, word joiners and invisible operators, the
# byte order mark, the Mongolian vowel separator, interlinear annotations, and the tag
# characters (U+E0000-E007F: an invisible copy of ASCII, "ASCII smuggling"). The joiners
# that scripts and emoji need (U+200C, U+200D) are kept; ``HIDDEN`` escapes them too.
_BIDI = "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
_INVISIBLE = ("\u180e\u200b\u2060-\u2064\u206a-\u206f\ufeff\ufff9-\ufffb"
              "\U000e0000-\U000e007f")
_SEPARATORS_AND_SURROGATES = "\u2028\u2029\ud800-\udfff"
UNSAFE = f"\x00-\x08\x0a-\x1f\x7f-\x9f{_BIDI}{_INVISIBLE}{_SEPARATORS_AND_SURROGATES}"
# the same but newlines, tabs and the carriage return of a CRLF: lines stay lines
_UNSAFE_IN_LINES = re.compile("\r(?!\n)|[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f"
                              f"{_BIDI}{_INVISIBLE}{_SEPARATORS_AND_SURROGATES}]")
HIDDEN = ("\u00ad\u034f\u0600-\u0605\u06dd\u070f\u0890\u0891\u08e2\u115f\u1160"
          "\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u2060-\u2064\u206a-\u206f"
          "\u3164\ufe00-\ufe0f\uffa0\U000110bd\U000110cd\U00013430-\U0001343f"
          "\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0000-\U000e0fff")
"""What is invisible beyond ``UNSAFE``, for text a person approves (a command, a file
written): every format character (Unicode category Cf: soft hyphen, joiners...), the
variation selectors, the Hangul fillers and the combining grapheme joiner. Escaped, a
command that would run as ``rm -rf ./bu<U+200B>ild`` cannot look like ``rm -rf ./build``."""
INVISIBLE = f"{_BIDI}{_INVISIBLE}{HIDDEN}"
"""Every character that takes no room on a terminal and is no control: what ``UNSAFE``
and ``HIDDEN`` escape beyond the controls."""


def escape_control(match: re.Match[str]) -> str:
    """The readable escape of a matched character (``\\x1b``, ``\\n``, ``\\u202e``,
    ``\\U000e0041``), as Python writes it in a string."""
    code = ord(match.group())
    if code == 0x0A:
        return "\\n"
    if code == 0x09:
        return "\\t"
    if code == 0x0D:
        return "\\r"
    if code <= 0xFF:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def controls_visible(text: str) -> str:
    """``text`` with every character a terminal may act on written as a readable escape
    (``\\x1b``), its lines and tabs kept: for a file a person may ``cat`` (a Markdown export),
    where an escape sequence from a tool output must not set a title or the clipboard."""
    if _UNSAFE_IN_LINES.search(text) is None:
        return text
    return _UNSAFE_IN_LINES.sub(escape_control, text)


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


_URL_PASSWORD = re.compile(r"(postgres(?:ql)?://[^\s:/@\"']*):[^\s@\"']*@", re.IGNORECASE)
_PARAM_PASSWORD = re.compile(r"(password\s*=\s*)('(?:\\.|[^'\\])*'|[^\s&\"']+)",
                             re.IGNORECASE)


def without_passwords(text: str) -> str:
    """``text`` with the passwords of connection URLs and ``password=`` parameters
    replaced by ``***``."""
    return _PARAM_PASSWORD.sub(r"\1***", _URL_PASSWORD.sub(r"\1:***@", text))
