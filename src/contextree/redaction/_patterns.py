"""User patterns: regular expressions a user adds (``--redact-pattern``), kind ``custom``.

A pattern is checked with Python's ``re`` first, so a mistake reads the same everywhere and
raises ``InvalidArgument`` (exit code 2 on the command line) with the position and what to
do. It then runs on RE2 when ``google-re2`` is installed (``pip install 'contextree[re2]'``):
linear time, so no pattern can hang on any text. Without RE2, or for a pattern RE2 cannot
run (a backreference, a look-around), it runs on Python's ``re``, which can backtrack: a
nested repetition such as ``(a+)+$`` is refused there with a message that says so.

A pattern with a group named ``secret`` redacts only that group: ``token=(?P<secret>\\w+)``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from ..errors import InvalidArgument
from ._detectors import Hit
from ._prefilter import encoded, needles_of

__all__ = ["UserPattern", "compile_pattern", "re2_matches"]

try:  # the optional linear-time engine
    import re2 as _re2
except ImportError:  # pragma: no cover - depends on the environment
    _re2 = None

# a repeated group that itself ends in a repetition: (a+)+ (a*)* (a|b+){2,}; the classic
# shape of exponential backtracking
_NESTED = re.compile(r"[+*}]\)[+*{]|[+*}]\)\?[+*{]")




def re2_matches(compiled: Any, text: str) -> list[Any]:
    """The matches of an RE2 pattern in ``text``, their spans in characters of ``text``.

    RE2 reads UTF-8: the text is encoded once for all the patterns run on it in a row (the
    last text is kept), a lone surrogate (an undecodable byte of a tool output, kept by
    ``surrogateescape``) as U+FFFD, one character for one. An ASCII text's byte offsets are
    its character offsets; in another, the spans of the (rare) matches are converted."""
    data, ascii_only = encoded(text)
    found = list(compiled.finditer(data))
    if ascii_only or not found:
        return found
    groups = compiled.groups
    byte_spans = [[m.span(g) for g in range(groups + 1)] for m in found]
    offsets = sorted({o for spans in byte_spans for span in spans for o in span if o >= 0})
    chars: dict[int, int] = {-1: -1}
    prev = count = 0
    for o in offsets:  # one walk over the bytes, however many matches
        count += len(data[prev:o].decode("utf-8", "replace"))
        chars[o] = count
        prev = o
    return [_CharSpans([(chars[a], chars[b]) for a, b in spans]) for spans in byte_spans]


class _CharSpans:
    """A match's spans (by group), in characters."""

    __slots__ = ("_spans",)

    def __init__(self, spans: list[tuple[int, int]]) -> None:
        self._spans = spans

    def span(self, group: int = 0) -> tuple[int, int]:
        return self._spans[group]

    def start(self, group: int = 0) -> int:
        return self._spans[group][0]

    def end(self, group: int = 0) -> int:
        return self._spans[group][1]


class UserPattern:
    """One compiled user pattern."""

    kind = "custom"

    def __init__(self, source: str, compiled: Any, group: int, engine: str) -> None:
        self.source = source
        self.needles = needles_of(source)
        self.engine = engine
        self._compiled = compiled
        self._group = group

    def find(self, text: str) -> Iterator[Hit]:
        """Each non-empty match (or its ``secret`` group)."""
        matches = re2_matches(self._compiled, text) if self.engine == "re2" \
            else self._compiled.finditer(text)
        for m in matches:
            start, end = m.span(self._group)
            if end > start:
                yield start, end, self.kind

    def __repr__(self) -> str:
        return f"UserPattern({self.source!r}, engine={self.engine!r})"


def compile_pattern(source: str) -> UserPattern:
    """``source`` compiled for redaction; ``InvalidArgument`` says what is wrong with it."""
    if not isinstance(source, str) or not source:
        raise InvalidArgument(f"a redaction pattern must be a non-empty regular expression, "
                              f"got {source!r:.60}")
    try:
        checked = re.compile(source)
    except (re.error, RecursionError, OverflowError) as e:
        pos = getattr(e, "pos", None)
        where = f" at position {pos}" if pos is not None else ""
        msg = getattr(e, "msg", None) or str(e) or "too deeply nested"
        raise InvalidArgument(
            f"invalid redaction pattern {source!r}: {msg}{where}. Escape characters such as "
            "( ) [ ] { } . * + ? with a backslash to match them literally") from None
    group = checked.groupindex.get("secret", 0)
    if _re2 is not None:
        options = _re2.Options()
        options.log_errors = False
        try:
            return UserPattern(source, _re2.compile(source, options), group, "re2")
        except (_re2.error, UnicodeEncodeError):
            pass  # a feature RE2 lacks: Python's re below
    if _NESTED.search(source):
        raise InvalidArgument(
            f"redaction pattern {source!r} repeats a group that ends in a repetition, which "
            "Python's regular expressions can take exponential time on; rewrite it without "
            "the nested repetition, or install 'contextree[re2]' (linear-time matching)")
    return UserPattern(source, checked, group, "re")
