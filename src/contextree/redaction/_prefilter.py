"""The cheap pass before the detectors: which of them can match a text at all.

Most detectors look for a shape that holds a literal (``AKIA``, ``ghp_``, ``://``,
``-----BEGIN``); a text without any of a detector's literals (its ``needles``) cannot hold
its secret, so the detector is not run on it. ``needles_of`` reads those literals from a
regular expression's parsed form; ``Prefilter`` looks for all of them in one pass over the
text: an RE2 set of plain literals (a DFA, hundreds of MB/s, whatever the number of
detectors) when ``google-re2`` is installed, else one substring search per literal for the
detectors that have few.

A detector without needles (``None``: the high-entropy one, a pattern whose literals
cannot be read) always runs. The needles are a necessary condition only: a detector that is
run still decides what matches, so the prefilter changes the time a text takes, never what
is found.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from itertools import product
from typing import Any, Generic, TypeVar

__all__ = ["IGNORE_CASE", "MIN_NEEDLE", "Prefilter", "anchored", "encoded", "needles_of"]

IGNORE_CASE = "(?i)"
"""The first of a detector's needles when they are to be found in any case."""

MIN_NEEDLE = 3
"""The shortest needle worth a search: one or two characters occur in any text."""
_MAX_NEEDLES = 64  # more alternatives than this and the literals are not worth tracking
_MAX_CLASS = 16  # a character class of more characters ends a literal run
_PLAIN_SEARCHES = 6  # without RE2: substring searches per detector, at most

D = TypeVar("D")

try:  # the parser of Python's own re (3.11+): what a pattern is made of
    from re import _constants as _c  # type: ignore[attr-defined]
    from re import _parser  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - a Python without the parser module
    _parser = None


def needles_of(pattern: re.Pattern[str] | str) -> tuple[str, ...] | None:
    """Literals at least one of which is in every match of ``pattern``, or ``None`` when
    the pattern has no run of literals of ``MIN_NEEDLE`` characters or more. A case
    insensitive pattern's needles start with ``(?i)`` (the prefilter then ignores case)."""
    if _parser is None:
        return None
    compiled = re.compile(pattern) if isinstance(pattern, str) else pattern
    try:
        items = _parser.parse(compiled.pattern, compiled.flags).data
    except Exception:  # an unreadable pattern: run it on every text
        return None
    best: set[str] | None = None
    for run in _runs(items):
        if best is None or min(map(len, run)) > min(map(len, best)):
            best = run
    if best is None or min(map(len, best)) < MIN_NEEDLE:
        return None
    if compiled.flags & re.IGNORECASE:
        return (IGNORE_CASE, *sorted({n.lower() for n in best}))
    return tuple(sorted(best))


def anchored(pattern: str) -> bool:
    """True when ``pattern`` holds ``^``, ``$``, ``\\A`` or ``\\Z`` outside multi-line mode:
    it matches at the start or end of the whole text only, so it must see each text alone
    (not a batch of texts joined)."""
    if _parser is None:
        return True
    try:
        items = _parser.parse(pattern).data
    except Exception:
        return True
    ends = (_c.AT_BEGINNING, _c.AT_BEGINNING_STRING, _c.AT_END, _c.AT_END_STRING)

    def walk(seq: Any) -> bool:
        for op, av in seq:
            if op is _c.AT and av in ends:
                return True
            if op is _c.SUBPATTERN and walk(av[3]):
                return True
            if op is _c.BRANCH and any(walk(alt) for alt in av[1]):
                return True
            if op in (_c.MAX_REPEAT, _c.MIN_REPEAT, _c.POSSESSIVE_REPEAT) and walk(av[2]):
                return True
            if op in (_c.ASSERT, _c.ASSERT_NOT) and walk(av[1]):
                return True
        return False

    return walk(items)


def _runs(items: list[Any]) -> list[set[str]]:
    """The runs of consecutive items of a sequence that match literals only, each as the
    set of strings it can match."""
    runs: list[set[str]] = []
    cur: set[str] | None = None
    for item in items:
        lits = _literals(item)
        if lits is None and item[0] in (_c.MAX_REPEAT, _c.MIN_REPEAT, _c.POSSESSIVE_REPEAT):
            lo, _, body = item[1]
            one = _seq_literals(body) if lo >= 1 else None
            if one is not None and cur is not None and len(cur) * len(one) <= _MAX_NEEDLES:
                runs.append({a + b for a, b in product(cur, one)})  # one repetition, then a break
            elif one is not None:
                runs.append(one)
            if cur is not None:
                runs.append(cur)
            cur = None
            continue
        if lits is None or (cur is not None and len(cur) * len(lits) > _MAX_NEEDLES):
            if cur is not None:
                runs.append(cur)
            cur = lits if lits is not None and len(lits) <= _MAX_NEEDLES else None
            continue
        cur = lits if cur is None else {a + b for a, b in product(cur, lits)}
    if cur is not None:
        runs.append(cur)
    return runs


def _seq_literals(items: Any) -> set[str] | None:
    """Every string a whole sequence can match, if it matches literals only."""
    out = {""}
    for item in items:
        lits = _literals(item)
        if lits is None or len(out) * len(lits) > _MAX_NEEDLES:
            return None
        out = {a + b for a, b in product(out, lits)}
    return out


def _literals(item: tuple[Any, Any]) -> set[str] | None:
    """Every string one parsed item can match, when it matches only a few literals."""
    op, av = item
    if op is _c.LITERAL:
        return {chr(av)}
    if op is _c.IN:
        chars: set[str] = set()
        for sub_op, sub_av in av:
            if sub_op is _c.LITERAL:
                chars.add(chr(sub_av))
            elif sub_op is _c.RANGE and sub_av[1] - sub_av[0] < _MAX_CLASS:
                chars.update(chr(c) for c in range(sub_av[0], sub_av[1] + 1))
            else:
                return None  # a negation, a category, a wide range
        return chars if 0 < len(chars) <= _MAX_CLASS else None
    if op is _c.SUBPATTERN:
        return _seq_literals(av[3])
    if op is _c.BRANCH:
        out: set[str] = set()
        for alt in av[1]:
            lits = _seq_literals(alt)
            if lits is None:
                return None
            out |= lits
        return out if len(out) <= _MAX_NEEDLES else None
    if op in (_c.MAX_REPEAT, _c.MIN_REPEAT, _c.POSSESSIVE_REPEAT) and av[0] == av[1] <= 4:
        body = _seq_literals(av[2])
        if body is None:
            return None
        out = {""}
        for _ in range(av[0]):
            out = {a + b for a, b in product(out, body)}
            if len(out) > _MAX_NEEDLES:
                return None
        return out
    return None


_SURROGATE = re.compile("[\ud800-\udfff]")
_last: tuple[str | None, bytes, bool] = (None, b"", True)  # a text, its bytes, if ASCII


def encoded(text: str) -> tuple[bytes, bool]:
    """``text`` in UTF-8 as RE2 reads it, and whether it is ASCII (kept for the next call:
    the patterns run on one text in a row)."""
    global _last
    last = _last  # one read: another thread may replace it
    if last[0] is text:
        return last[1], last[2]
    try:
        data = text.encode()
    except UnicodeEncodeError:
        data = _SURROGATE.sub("\ufffd", text).encode()
    _last = (text, data, len(data) == len(text))
    return data, len(data) == len(text)


class Prefilter(Generic[D]):
    """Which of ``detectors`` (in their order) can match a text, from their ``needles``."""

    def __init__(self, detectors: Sequence[D]) -> None:
        self.detectors = list(detectors)
        self._needles: list[tuple[str, ...] | None] = [
            getattr(d, "needles", None) or None for d in self.detectors]
        self._set: Any = None
        self._set_index: list[int] = []  # the detector of each pattern of the set
        self._set = self._compile()
        # a detector's ``shape``: a pattern that selects it where its needles are absent
        # (looked for in any case, however many needles it has: it is a gate, see _plugins)
        self._shapes = [(k, _shape(d.shape)) for k, d in enumerate(self.detectors)  # type: ignore[attr-defined]
                        if getattr(d, "shape", None)]
        self._gated = {k for k, _ in self._shapes}

    def _compile(self) -> Any:
        try:
            import re2
        except ImportError:
            return None
        options = re2.Options()
        options.log_errors = False
        found = re2.Set.SearchSet(options)
        for k, needles in enumerate(self._needles):
            if needles is not None:
                fold = needles[0] == IGNORE_CASE
                words = "|".join(re2.escape(n) for n in needles[fold:])
                try:
                    found.Add(f"(?i:{words})" if fold else words)
                except Exception:  # a needle RE2 cannot take: that detector always runs
                    self._needles[k] = None
                    continue
                self._set_index.append(k)
        try:
            found.Compile()
        except Exception:  # pragma: no cover - a set of literals always compiles
            return None
        return found

    def select(self, text: str) -> list[D]:
        """The detectors to run on ``text``: those without needles and those whose needles
        (or shape) occur in it."""
        if self._set is not None:
            hits = self._set.Match(encoded(text)[0]) or ()
            on = {self._set_index[i] for i in hits}
        else:
            on = self._plain(text)
        for k, shape in self._shapes:
            if k not in on and shape(text):
                on.add(k)
        return [d for k, d in enumerate(self.detectors)
                if k in on or (self._needles[k] is None and k not in self._gated)]

    def _plain(self, text: str) -> set[int]:
        """Without RE2: the detectors whose needles are in ``text`` (or that have too many
        needles to look for: they run)."""
        lower: str | None = None
        on: set[int] = set()
        for k, needles in enumerate(self._needles):
            if needles is None or (len(needles) > _PLAIN_SEARCHES and k not in self._gated):
                on.add(k)
            elif needles[0] == IGNORE_CASE:
                lower = text.lower() if lower is None else lower
                if any(n in lower for n in needles[1:]):
                    on.add(k)
            elif any(n in text for n in needles):
                on.add(k)
        return on


def _shape(pattern: str) -> Callable[[str], bool]:
    """Whether ``pattern`` matches somewhere in a text: on RE2 when installed (linear time,
    the text encoded once for all), else on Python's ``re``."""
    try:
        import re2
    except ImportError:
        slow = re.compile(pattern)
        return lambda text: slow.search(text) is not None
    options = re2.Options()
    options.log_errors = False
    fast = re2.compile(pattern, options)
    return lambda text: fast.search(encoded(text)[0]) is not None
