"""Truncation: cap one tool result before it enters the context, losing nothing.

A result longer than ``max_lines`` lines or ``max_bytes`` UTF-8 bytes (whichever is hit
first) is cut to a preview; lines wider than ``max_line_chars`` characters are shortened.
The original is saved in an :class:`~contextree._overflow.OverflowStore` and the preview ends
with a hint giving the ``read`` call for the first piece not shown: the next lines, or the rest
of a shortened line (``char_offset``, the characters of it already shown). For binary output,
which ``read`` refuses, the hint says how to look at it with the shell. That a result was
truncated is recorded in :meth:`Truncation.meta` (for ``Message.meta``), never guessed from
its text.

The work is done on bytes with ``count``/``find``/``rfind`` and slicing, so a 100 MB output
costs a few passes at memory speed; only the shown lines are looked at one by one.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass, field
from typing import Any, Literal

from contextree._overflow import OverflowStore
from contextree.markers import TRUNCATION_KEY, TruncationRecord

__all__ = [
    "DEFAULT_MAX_BYTES",
    "DEFAULT_MAX_LINES",
    "DEFAULT_MAX_LINE_CHARS",
    "LIMITS",
    "Direction",
    "Truncation",
    "TruncationLimits",
    "cut_marker",
    "is_truncated",
    "read_call",
    "truncate",
]

Direction = Literal["head", "tail", "middle"]
DIRECTIONS: frozenset[str] = frozenset(("head", "tail", "middle"))


@dataclass(frozen=True, slots=True)
class TruncationLimits:
    """The caps on one tool result: ``max_lines`` lines or ``max_bytes`` UTF-8 bytes,
    whichever comes first, and ``max_line_chars`` characters per line (the seed's figures)."""

    max_lines: int = 2000
    max_bytes: int = 50 * 1024
    max_line_chars: int = 2000


LIMITS = TruncationLimits()
DEFAULT_MAX_LINES = LIMITS.max_lines
DEFAULT_MAX_BYTES = LIMITS.max_bytes
DEFAULT_MAX_LINE_CHARS = LIMITS.max_line_chars
BINARY_SNIFF = 8192  # the bytes looked at to call a file binary

META_KEY = TRUNCATION_KEY
_NL = 0x0A


@dataclass(frozen=True, slots=True)
class Truncation:
    """The outcome of :func:`truncate`.

    ``text`` is what the model sees: the original when nothing was cut, else the preview
    followed by a hint. ``shown_lines`` counts lines of the original that appear in the
    preview, whole or shortened.
    """

    text: str
    truncated: bool
    saved_path: str | None
    total_lines: int
    total_bytes: int
    shown_lines: int
    direction: Direction = "head"

    def record(self) -> TruncationRecord:
        """What was cut, as the marker vocabulary records it."""
        return TruncationRecord(
            total_lines=self.total_lines, total_bytes=self.total_bytes,
            shown_lines=self.shown_lines, direction=self.direction, saved_path=self.saved_path,
        )

    def meta(self) -> dict[str, Any]:
        """The marker to merge into ``Message.meta`` so the result is not truncated again."""
        return self.record().to_meta()


def is_binary(head: bytes) -> bool:
    """True when the first bytes of a file contain a NUL byte (the usual binary test)."""
    return b"\0" in head[:BINARY_SNIFF]


@dataclass(frozen=True, slots=True)
class Dropped:
    """Output that never reached :func:`truncate`: ``size`` bytes holding ``newlines``
    newlines, left out of its middle, with :meth:`marker` standing in their place."""

    size: int
    newlines: int | None = None

    def marker(self) -> bytes:
        """What the text holds where the bytes were dropped (the saved file keeps it too)."""
        return f"\n[... {self.size} bytes of output dropped ...]\n".encode()

    def total_bytes(self, kept: int) -> int:
        """Bytes of the whole output, from those of the kept text (which holds the marker)."""
        return kept - len(self.marker()) + self.size

    def total_lines(self, kept: int) -> int | None:
        """Lines of the whole output (None: not counted), from those of the kept text."""
        if self.newlines is None:
            return None
        return kept - self.marker().count(b"\n") + self.newlines


def is_truncated(meta: dict[str, Any] | None) -> bool:
    """True when ``meta`` (a ``Message.meta``) marks the result as already truncated."""
    return isinstance(meta, dict) and bool(meta.get(META_KEY))


# -- scanning -----------------------------------------------------------------------------


@dataclass(slots=True)
class _Side:
    """Lines kept from one end of the output: ``data[start:end]`` (modulo line cuts)."""

    start: int
    end: int
    pieces: list[bytes] = field(default_factory=list)
    lines: int = 0
    partial: bool = False  # the innermost line is shown only in part (byte cap)
    cuts: int = 0  # lines shortened to max_line_chars
    first_cut: int | None = None  # byte offset where the first shortened line starts

    def note_cut(self, pos: int) -> None:
        self.cuts += 1
        if self.first_cut is None or pos < self.first_cut:
            self.first_cut = pos


_CONT_TABLE = bytes(0x80 if 0x80 <= b < 0xC0 else 0 for b in range(256))


def _is_cont(byte: int) -> bool:
    return byte & 0xC0 == 0x80


def _align_back(data: bytes, pos: int, lo: int) -> int:
    """The last character start at or before ``pos`` (not before ``lo``): a safe end cut."""
    for q in range(pos, max(lo, pos - 3) - 1, -1):
        if q <= lo or q >= len(data) or not _is_cont(data[q]):
            return q
    return pos  # not UTF-8 here; any cut is as good


def _align_forward(data: bytes, pos: int, hi: int) -> int:
    """The first character start at or after ``pos`` (not after ``hi``): a safe start cut."""
    for q in range(pos, min(hi, pos + 3) + 1):
        if q >= hi or not _is_cont(data[q]):
            return q
    return pos


def _char_count(data: bytes, start: int, end: int) -> int:
    """Characters in ``data[start:end]``: bytes that are not UTF-8 continuation bytes."""
    seg = data[start:end]
    if seg.isascii():
        return len(seg)
    return len(seg) - seg.translate(_CONT_TABLE).count(0x80)


def cut_marker(chars: int, *, keep_end: bool = False) -> str:
    """What stands where a line of ``chars`` characters was cut (before the kept end, or
    after the kept start): the same words wherever a line is cut."""
    if keep_end:
        return f"[line truncated, {chars} chars] …"
    return f"… [line truncated, {chars} chars]"


def _cut_line(data: bytes, start: int, end: int, limit: int, keep_end: bool) -> tuple[bytes, bytes]:
    """The kept part of the line ``data[start:end]`` and its cut marker (b"" if it fits)."""
    if end - start <= limit:
        return data[start:end], b""
    chars = _char_count(data, start, end)
    if chars <= limit:
        return data[start:end], b""
    if keep_end:
        region = data[_align_forward(data, max(start, end - 4 * limit), end) : end]
        kept = region[-limit:] if region.isascii() else _decode(region)[-limit:].encode()
    else:
        region = data[start : _align_back(data, min(end, start + 4 * limit), start)]
        kept = region[:limit] if region.isascii() else _decode(region)[:limit].encode()
    return kept, cut_marker(chars, keep_end=keep_end).encode()


def _sent_size(seg: bytes) -> int:
    """UTF-8 bytes of ``seg`` as the model gets it: an undecodable byte becomes U+FFFD, which
    takes 3, so the caps hold for the text sent, not for the bytes the tool wrote."""
    if seg.isascii():
        return len(seg)
    try:
        seg.decode("utf-8")
    except UnicodeDecodeError:
        return len(_decode(seg).encode())
    return len(seg)


def _fit(data: bytes, start: int, end: int, budget: int, from_end: bool) -> int:
    """Where to cut ``data[start:end]`` so its outer part (the start, or with ``from_end``
    the end) takes at most ``budget`` bytes as sent, in whole characters."""
    keep = min(budget, end - start)
    while True:
        if from_end:
            cut = _align_forward(data, end - keep, end)
            excess = _sent_size(data[cut:end]) - budget
        else:
            cut = _align_back(data, start + keep, start)
            excess = _sent_size(data[start:cut]) - budget
        if excess <= 0 or keep == 0:
            return cut
        keep = max(0, keep - max(1, -(-excess // 3)))  # a byte takes at most 3 as sent


def _scan(data: bytes, lo: int, max_lines: int, budget: int, limit: int, from_end: bool) -> _Side:
    """Whole lines from one end of ``data[lo:]`` while both caps allow: from the start, or
    with ``from_end`` from the true end back to ``lo``; a part of the outermost line if none
    fits.

    One loop serves both ends because they mirror each other: the window ``data[lo:hi]``
    still unread shrinks from the end being read, a shortened line keeps the part on the
    outer side with its cut marker on the inner side, and a newline travels with its line.
    The direction is a few branches per shown line, never a pass over the whole output.
    """
    hi = len(data)
    side = _Side(hi, hi) if from_end else _Side(lo, lo)
    used = 0
    while lo < hi and side.lines < max_lines:
        if from_end:
            content_end = hi - 1 if data[hi - 1] == _NL else hi
            nl = data.rfind(b"\n", lo, content_end)
            start, end = (lo if nl < 0 else nl + 1), hi
        else:
            nl = data.find(b"\n", lo, hi)
            start, content_end, end = lo, (hi if nl < 0 else nl), (hi if nl < 0 else nl + 1)
        if content_end - start <= limit:  # the common case, a line that fits: one slice
            kept_len, marker = content_end - start, b""
            piece = data[start:end]
        else:
            kept, marker = _cut_line(data, start, content_end, limit, keep_end=from_end)
            kept_len, newline = len(kept), data[content_end:end]
            piece = marker + kept + newline if from_end else kept + marker + newline
        size = _sent_size(piece)
        if used + size > budget:
            if side.lines == 0:  # not one line fits: its outer part, in whole characters
                if from_end:  # what lies outside the marker: the kept end and the newline
                    hi = _fit(data, end - (kept_len + end - content_end), end, budget, True)
                    part = data[hi:end]
                else:  # the kept start (the newline lies past the marker)
                    lo = _fit(data, start, start + kept_len, budget, False)
                    part = data[start:lo]
                if part:
                    side.pieces.append(part)
                    side.lines, side.partial = 1, True
            break
        if marker:
            side.note_cut(start)
        side.pieces.append(piece)
        side.lines += 1
        used += size
        if from_end:
            hi = start
        else:
            lo = end
    if from_end:
        side.pieces.reverse()
        side.start = hi
    else:
        side.end = lo
    return side


def _plan(
    data: bytes, total_lines: int, max_lines: int, max_bytes: int, limit: int, direction: str
) -> tuple[_Side, _Side]:
    """The head and tail parts to show; the bytes between them are left out."""
    n = len(data)
    if direction == "head":
        return _scan(data, 0, max_lines, max_bytes, limit, False), _Side(n, n)
    if direction == "tail":
        return _Side(0, 0), _scan(data, 0, max_lines, max_bytes, limit, True)
    if total_lines <= max_lines:
        whole = _scan(data, 0, max_lines, max_bytes, limit, False)
        if whole.end == n:
            return whole, _Side(n, n)
    head = _scan(data, 0, max_lines - max_lines // 2, max_bytes - max_bytes // 2, limit, False)
    tail = _scan(data, head.end, max_lines // 2, max_bytes // 2, limit, True)
    return head, tail


# -- the preview --------------------------------------------------------------------------


def _decode(data: bytes) -> str:
    return data.decode("utf-8", "replace")


def _count_lines(data: bytes) -> int:
    if not data:
        return 0
    return data.count(b"\n") + (0 if data[-1] == _NL else 1)


def human_size(n: int) -> str:
    """A byte count for people: ``812 bytes``, ``50.0 KB``, ``3.1 MB``."""
    if n < 1024:
        return f"{n} bytes"
    size = float(n)
    for unit in ("KB", "MB", "GB"):
        size /= 1024
        if size < 1024 or unit == "GB":
            break
    return f"{size:.1f} {unit}"


def _span(first: int, last: int) -> str:
    return str(first) if first == last else f"{first}-{last}"


@dataclass(frozen=True, slots=True)
class _Layout:
    """Line numbers (1-based) of what is shown and what is left out."""

    head: _Side
    tail: _Side
    total_lines: int
    total_bytes: int

    @property
    def tail_first(self) -> int:
        return self.total_lines - self.tail.lines + 1

    @property
    def omitted_bytes(self) -> int:
        return self.tail.start - self.head.end

    @property
    def omitted_first(self) -> int:
        return max(1, self.head.lines if self.head.partial else self.head.lines + 1)

    @property
    def omitted_last(self) -> int:
        return self.tail_first if self.tail.partial else self.tail_first - 1

    def shown(self) -> str:
        spans = []
        if self.head.lines:
            spans.append((1, self.head.lines))
        if self.tail.lines:
            spans.append((self.tail_first, self.total_lines))
        if not spans:
            return "nothing"
        noun = "line" if len(spans) == 1 and spans[0][0] == spans[0][1] else "lines"
        return noun + " " + " and ".join(_span(a, b) for a, b in spans)


def _separator(layout: _Layout) -> str:
    count = layout.omitted_last - layout.omitted_first + 1
    noun = "line" if count == 1 else "lines"
    size = layout.omitted_bytes
    return f"[… {count} {noun} ({size} bytes, {human_size(size)}) omitted …]\n"


def _body(layout: _Layout, direction: str) -> str:
    head = _decode(b"".join(layout.head.pieces))
    tail = _decode(b"".join(layout.tail.pieces))
    if direction != "middle" or layout.omitted_bytes == 0:
        return head + tail
    gap = "\n" if head and not head.endswith("\n") else ""
    return head + gap + _separator(layout) + tail


def read_call(path: str, offset: int, limit: int, char_offset: int = 0) -> str:
    """The ``read`` call that shows ``limit`` lines of ``path`` from line ``offset``, the
    first of them from its character ``char_offset`` (counted from 0) when that is not 0."""
    within = f", char_offset={char_offset}" if char_offset else ""
    return f"read(path={json.dumps(path)}, offset={offset}, limit={limit}{within})"


Window = tuple[int, int, int]  # read's (offset, limit, char_offset)


def _read_window(data: bytes, layout: _Layout, direction: str, max_lines: int,
                 limit: int) -> Window:
    """The ``read`` call's ``(offset, limit, char_offset)`` for the first piece the model has
    not seen: the next lines, or the rest of a line shown in part."""
    if layout.omitted_bytes == 0:  # only over-long lines were cut: the first one's rest
        return _cut_window(data, layout, limit) or (1, 1, 0)  # (truncate saw a cut)
    first, last = layout.omitted_first, max(layout.omitted_first, layout.omitted_last)
    if direction == "tail":
        first = max(first, last - max_lines + 1)
    within = 0
    if layout.head.partial and first == layout.head.lines:  # the start of it is shown
        within = len(_decode(b"".join(layout.head.pieces)))
    return first, min(max_lines, last - first + 1), within


def _cut_window(data: bytes, layout: _Layout, limit: int) -> Window | None:
    """The ``read`` call for the part not shown of the first line cut to ``limit``
    characters: after its kept start, or (its end kept) from its start; None if none was."""
    cuts = [(pos, keep_end) for pos, keep_end in ((layout.head.first_cut, False),
                                                  (layout.tail.first_cut, True))
            if pos is not None]
    if not cuts:
        return None
    pos, keep_end = min(cuts)
    return data.count(b"\n", 0, pos) + 1, 1, 0 if keep_end else limit


def _hint(layout: _Layout, window: Window, cut: Window | None, saved: str | None,
          error: str | None, limit: int, binary: bool, dropped: Dropped | None) -> str:
    """The line ending a preview: what is shown of how much, where the rest is, how to see
    it."""
    shown = layout.shown()
    notes = []
    if layout.head.partial or layout.tail.partial:
        notes.append("a line longer than the byte cap is shown in part")
    cuts = layout.head.cuts + layout.tail.cuts
    if cuts:
        notes.append(f"{cuts} {'line' if cuts == 1 else 'lines'} longer than {limit} chars cut")
    extra = f"; {'; '.join(notes)}" if notes else ""
    size = human_size(layout.total_bytes)
    if dropped is None:
        head = f"[Output truncated: showing {shown} of {layout.total_lines} ({size}){extra}."
        what = "full output"
    else:
        head = (f"[Output truncated: {_dropped_note(layout, dropped)}. Showing {shown} of the "
                f"{layout.total_lines} kept ({size}){extra}.")
        what = "kept output"
    if saved is None:
        return f"{head} The {what} could not be saved: {error}]"
    gap = " (the gap marked)" if dropped is not None else ""
    follow = _follow(layout, window, cut, saved, limit, binary)
    return f"{head} {what.capitalize()} saved to {saved}{gap}. {follow}]"


def _dropped_note(layout: _Layout, dropped: Dropped) -> str:
    """The true size of an output whose middle was dropped before truncation, and what
    was lost: the saved file is not all of it."""
    total = dropped.total_bytes(layout.total_bytes)
    lines = dropped.total_lines(layout.total_lines)
    whole = human_size(total) if lines is None else f"{lines} lines ({human_size(total)})"
    lost = human_size(dropped.size)
    if dropped.newlines is not None:
        lost += f", {dropped.newlines} {'line' if dropped.newlines == 1 else 'lines'}"
    return (f"the output was {whole}, more than could be kept: {dropped.size} bytes ({lost}) "
            "in its middle were dropped, so the saved file is not the full output")


def _follow(layout: _Layout, window: Window, cut: Window | None, saved: str, limit: int,
            binary: bool) -> str:
    """How to see the rest: a ``read`` call (with, when lines were left out and others
    shortened, the call for the first shortened one's rest), or for binary output (which
    ``read`` refuses, as it shows text only) the shell commands its refusal suggests."""
    if not binary:
        more = f"Read more with {read_call(saved, *window)}"
        if layout.omitted_bytes == 0 and layout.head.cuts + layout.tail.cuts > 1:
            more += (f" (line {window[0]}, the first line cut; the others likewise, "
                     "with their own offset)")
        if cut is None or layout.omitted_bytes == 0:
            return more
        line, _, within = cut
        what = (f"the rest of line {line} (cut at {limit} chars)" if within else
                f"the start of line {line} (cut to its last {limit} chars)")
        return f"{more}; {what} with {read_call(saved, *cut)}"
    quoted = shlex.quote(saved)
    return (f"It is binary (it contains NUL bytes), which read does not show: inspect it with "
            f"shell instead, e.g. `xxd -s {_first_unseen(layout)} -l 1024 {quoted}` or "
            f"`file {quoted}`")


def _first_unseen(layout: _Layout) -> int:
    """The byte offset of the first byte left out of the preview (or of the first cut line)."""
    if layout.omitted_bytes:
        return layout.head.end
    cuts = [p for p in (layout.head.first_cut, layout.tail.first_cut) if p is not None]
    return min(cuts, default=0)


# -- entry point --------------------------------------------------------------------------


def _check_cap(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive integer (1 or more), got {value!r}")
    return value


def _as_bytes(text: str | bytes) -> bytes:
    if isinstance(text, str):
        return text.encode("utf-8", "surrogatepass")
    if isinstance(text, bytes):
        return text
    if isinstance(text, bytearray | memoryview):
        return bytes(text)
    raise TypeError(f"truncate() needs str or bytes, got {type(text).__name__}")


def truncate(
    text: str | bytes,
    *,
    max_lines: int = DEFAULT_MAX_LINES,
    max_bytes: int = DEFAULT_MAX_BYTES,
    max_line_chars: int = DEFAULT_MAX_LINE_CHARS,
    direction: Direction = "head",
    store: OverflowStore | None = None,
    session_id: str | None = None,
    label: str = "output",
    dropped: Dropped | None = None,
) -> Truncation:
    """Cap ``text`` at ``max_lines`` lines or ``max_bytes`` UTF-8 bytes, whichever hits first.

    ``direction`` picks what survives: ``head`` the start, ``tail`` the true end (errors and
    summaries live there), ``middle`` both ends with a line saying what was left out. When
    anything is cut the original is saved to ``store`` (default: ``OverflowStore.default()``)
    and the preview ends with a hint giving the file and the ``read`` call for the rest.
    Text that fits is returned unchanged and nothing is written. The byte cap holds for the
    text sent: an undecodable byte counts as the U+FFFD it becomes. Binary output (a NUL
    byte near the start), which ``read`` refuses, gets a hint to inspect it with the shell.

    ``dropped`` says the caller already left out part of the middle (``text`` holds its
    marker): the hint gives the whole output's size, says what was lost and that the saved
    file is not all of it, and ``total_lines``/``total_bytes`` are the whole output's.
    """
    max_lines = _check_cap("max_lines", max_lines)
    max_bytes = _check_cap("max_bytes", max_bytes)
    max_line_chars = _check_cap("max_line_chars", max_line_chars)
    if direction not in DIRECTIONS:
        raise ValueError(f"direction must be 'head', 'tail' or 'middle', got {direction!r}")
    data = _as_bytes(text)
    total_lines = _count_lines(data)
    n = len(data)
    if (n <= max_bytes and total_lines <= max_lines and n <= max_line_chars
            and _sent_size(data) <= max_bytes):
        return _untouched(text, data, total_lines, direction)
    head, tail = _plan(data, total_lines, max_lines, max_bytes, max_line_chars, direction)
    layout = _Layout(head, tail, total_lines, n)
    if layout.omitted_bytes == 0 and head.cuts + tail.cuts == 0:
        return _untouched(text, data, total_lines, direction)
    saved, error = _spill(data, store, session_id, label)
    window = _read_window(data, layout, direction, max_lines, max_line_chars)
    cut = _cut_window(data, layout, max_line_chars)
    hint = _hint(layout, window, cut, saved, error, max_line_chars, is_binary(data), dropped)
    body = _body(layout, direction)
    if body:
        body += "\n\n" if not body.endswith("\n") else "\n"
    if dropped is not None:
        n = dropped.total_bytes(n)
        whole_lines = dropped.total_lines(total_lines)
        total_lines = total_lines if whole_lines is None else whole_lines
    return Truncation(
        text=body + hint,
        truncated=True,
        saved_path=saved,
        total_lines=total_lines,
        total_bytes=n,
        shown_lines=head.lines + tail.lines,
        direction=direction,
    )


def _untouched(
    text: str | bytes, data: bytes, total_lines: int, direction: Direction
) -> Truncation:
    out = text if isinstance(text, str) else _decode(data)
    return Truncation(out, False, None, total_lines, len(data), total_lines, direction)


def _spill(
    data: bytes, store: OverflowStore | None, session_id: str | None, label: str
) -> tuple[str | None, str | None]:
    """Save the original; ``(path, None)``, or ``(None, reason)`` if the disk refused."""
    try:
        target = store if store is not None else OverflowStore.default()
        return str(target.save(data, session_id=session_id, label=label)), None
    except OSError as exc:
        return None, f"{type(exc).__name__}: {exc}"
