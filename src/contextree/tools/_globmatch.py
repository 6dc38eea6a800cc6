"""Glob matching without backtracking: ``*a*a*a*b`` on a long name takes time proportional to
the name times the pattern, never exponential time (a translated regex would backtrack).

A pattern is split at ``/``; a ``**`` segment matches any number of path segments (at least
one when it ends the pattern, as ``d/**`` lists what is under ``d``). Within a segment, ``*``
matches any run of characters, ``?`` one, and ``[...]`` one of a set (``[!...]`` or
``[^...]`` negated). Both levels use the classic greedy wildcard match that remembers only
its last star.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from contextree.errors import ToolError

__all__ = ["GlobPattern", "compile_segments"]

T = TypeVar("T")
_STAR = object()  # `*` in a segment, `**` among segments


@dataclass(frozen=True)
class _Segment:
    """One pattern segment: literal characters, ``?`` (None), ``[...]`` sets and stars."""

    tokens: tuple[object, ...]

    def matches(self, name: str) -> bool:
        return _wildcard(self.tokens, name, _char_matches)


def _char_matches(token: object, char: str) -> bool:
    if token is None:
        return True
    if isinstance(token, str):
        return token == char
    assert isinstance(token, re.Pattern)
    return token.fullmatch(char) is not None


def _wildcard(tokens: Sequence[object], items: Sequence[T],
              one: Callable[[object, T], bool]) -> bool:
    """Greedy wildcard match of ``items`` by ``tokens`` (``_STAR`` matches any run)."""
    ti = si = 0
    star_ti, star_si = -1, 0
    while si < len(items):
        if ti < len(tokens) and tokens[ti] is _STAR:
            star_ti, star_si = ti, si
            ti += 1
        elif ti < len(tokens) and one(tokens[ti], items[si]):
            ti += 1
            si += 1
        elif star_ti != -1:
            ti = star_ti + 1
            star_si += 1
            si = star_si
        else:
            return False
    while ti < len(tokens) and tokens[ti] is _STAR:
        ti += 1
    return ti == len(tokens)


def _parse_segment(seg: str, pattern: str) -> _Segment:
    tokens: list[object] = []
    i = 0
    while i < len(seg):
        c = seg[i]
        if c == "*":
            if not tokens or tokens[-1] is not _STAR:  # ** inside a segment is one *
                tokens.append(_STAR)
        elif c == "?":
            tokens.append(None)
        elif c == "[" and (end := seg.find("]", i + 2)) != -1:
            body = seg[i + 1 : end]
            neg = body[:1] in ("!", "^")
            body = body[1:] if neg else body
            try:
                tokens.append(re.compile("[" + ("^" if neg else "") + body.replace("\\", "\\\\")
                                         + "]", re.DOTALL))
            except re.error as e:
                raise ToolError(
                    f"invalid glob pattern {pattern!r}: the set [{seg[i + 1:end]}] is not "
                    f"valid ({e}); write a range low to high (e.g. [a-z]), and put [] around "
                    "a literal * ? [ or { to match it"
                ) from None
            i = end
        else:
            tokens.append(c)
        i += 1
    return _Segment(tuple(tokens))


def compile_segments(pattern: str) -> list[object]:
    """The segments of one brace-free pattern: ``_Segment``s and ``_STAR`` for ``**``."""
    parts = pattern.split("/")
    out: list[object] = []
    for i, seg in enumerate(parts):
        if seg == "**":
            if i == len(parts) - 1:
                out.append(_Segment((_STAR,)))  # at the end: at least one more segment
            if not out or out[-1] is not _STAR:
                out.append(_STAR)
        else:
            out.append(_parse_segment(seg, pattern))
    return out


def _segment_matches(token: object, name: str) -> bool:
    assert isinstance(token, _Segment)
    return token.matches(name)


class GlobPattern:
    """A compiled glob (its brace alternatives) matched against whole ``/``-separated paths."""

    def __init__(self, alternatives: Sequence[str]) -> None:
        self.alternatives = tuple(alternatives)
        self._compiled = [compile_segments(a) for a in alternatives]

    def fullmatch(self, path: str) -> bool:
        """Whether ``path`` (relative, ``/``-separated) matches one of the alternatives."""
        names = path.split("/")
        return any(_wildcard(c, names, _segment_matches) for c in self._compiled)
