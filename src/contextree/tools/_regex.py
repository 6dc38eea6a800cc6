"""The regular-expression engine behind ``grep``: one that cannot run away on a bad pattern.

- With ``google-re2`` installed (``pip install 'contextree[re2]'``), patterns run on RE2,
  whose matching time is linear in the text: ``(a+)+$`` cannot backtrack. RE2 takes Python's
  syntax minus backreferences and lookaround, and its ``\\d \\w \\s \\b`` are ASCII.
- Otherwise, and for a pattern RE2 cannot run (a backreference, a lookaround), Python's
  ``re`` runs in a worker process under a time budget (``TIME_BUDGET`` seconds of matching
  per ``grep`` call); when the budget runs out the worker is killed and ``grep`` returns an
  error that names the cause. ``engine_name()`` says which applies.

Patterns are always checked with Python's ``re`` first, so a syntax error reads the same
whichever engine runs.
"""

from __future__ import annotations

import contextlib
import inspect
import os
import pickle
import re
import select
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from contextree.errors import ToolError

__all__ = ["TIME_BUDGET", "LineSearch", "compile_search", "engine_name", "re2_available"]

TIME_BUDGET = 10.0
"""Seconds of matching one ``grep`` call may use with Python's ``re`` (no limit with RE2)."""

Hit = tuple[int, str]  # (1-based line number, line without its ending)

try:  # the optional linear-time engine
    import re2 as _re2
except ImportError:  # pragma: no cover - depends on the environment
    _re2 = None


def re2_available() -> bool:
    """Whether the linear-time RE2 engine (``google-re2``) is installed."""
    return _re2 is not None


def engine_name() -> str:
    """``"re2"`` when patterns run in linear time, else ``"re"`` (under a time budget)."""
    return "re2" if re2_available() else "re"


class LineSearch(Protocol):
    """A compiled grep pattern: the matching lines of one file's text."""

    engine: str

    def lines(self, text: str, room: int, file: str) -> list[Hit]:
        """Up to ``room`` matching lines of ``text`` (``file`` names it in errors)."""
        ...

    def close(self) -> None:
        """Release what the search holds (a worker process)."""
        ...


def compile_search(pattern: str, ignore_case: bool, *,
                   budget: float | None = None) -> LineSearch:
    """A ``LineSearch`` for ``pattern``; ``ToolError`` for a pattern that is not valid.

    RE2 when it is installed and accepts the pattern; else Python's ``re`` in a worker
    process, with ``budget`` seconds (default ``TIME_BUDGET``) of matching in all.
    """
    flags = re.IGNORECASE if ignore_case else 0
    try:
        re.compile(pattern, flags)
    except (re.error, RecursionError, OverflowError) as e:
        pos = getattr(e, "pos", None)
        where = f" at position {pos}" if pos is not None else ""
        msg = getattr(e, "msg", None) or str(e) or "too deeply nested"
        raise ToolError(
            f"invalid regular expression {pattern!r}: {msg}{where}. Escape characters such "
            "as ( ) [ ] { } . * + ? with a backslash to match them literally"
        ) from None
    if _re2 is not None:
        compiled = _Re2Search.compile(pattern, ignore_case)
        if compiled is not None:
            return compiled
    return _BudgetedSearch(pattern, flags, TIME_BUDGET if budget is None else budget)


def _search_lines(search: Callable[[str], object], whole: Callable[[str], object] | None,
                  text: str, room: int) -> list[Hit]:
    """The lines of ``text`` that ``search`` matches; ``whole`` rules the file out first."""
    if whole is not None and not whole(text):
        return []
    hits: list[Hit] = []
    for n, line in enumerate(text.split("\n"), 1):
        line = line.removesuffix("\r")
        if search(line):
            hits.append((n, line))
            if len(hits) >= room:
                break
    return hits


class _Re2Search:
    """RE2: linear-time matching in this process.

    The whole file is searched in one call per matching line (calls into RE2 cost more than
    the matching): with ``never_nl`` no match can cross a newline, so each match lies in one
    line, and the search goes on from the next line. Patterns anchored to the whole text
    (``\\A``, ``\\Z``) are searched line by line instead.
    """

    engine = "re2"

    def __init__(self, line: Any, whole: Any) -> None:
        self._line = line
        self._whole = whole

    @classmethod
    def compile(cls, pattern: str, ignore_case: bool) -> _Re2Search | None:
        assert _re2 is not None
        options = _re2.Options()
        options.log_errors = False
        options.case_sensitive = not ignore_case
        try:
            line = _re2.compile(pattern, options)
            whole = None
            if "\\A" not in pattern and "\\Z" not in pattern:
                options.never_nl = True
                whole = _re2.compile(("(?m)" + pattern).encode("utf-8"), options)
        except (_re2.error, UnicodeEncodeError):
            return None  # a feature RE2 lacks (backreference, lookaround): use re
        return cls(line, whole)

    def lines(self, text: str, room: int, file: str) -> list[Hit]:
        if self._whole is None:
            return _search_lines(self._line.search, None, text, room)
        if "\r" in text:
            text = text.replace("\r\n", "\n")
        data = text.encode("utf-8", "replace")
        hits: list[Hit] = []
        pos = counted = 0
        number = 1
        while len(hits) < room and pos <= len(data):
            m = self._whole.search(data, pos)
            if m is None:
                break
            start = data.rfind(b"\n", 0, m.start()) + 1
            end = data.find(b"\n", m.start())
            end = len(data) if end == -1 else end
            number += data.count(b"\n", counted, start)
            counted = start
            hits.append((number, data[start:end].decode("utf-8", "replace")))
            pos = end + 1
        return hits

    def close(self) -> None:
        pass


# -- Python's re in a worker process that can be killed -----------------------------------

# The worker: stdlib only, so it starts fast. Frames are a 4-byte length and a pickle. It
# matches lines with the same ``_search_lines`` as this process (its source is put first).
_WORKER = "from __future__ import annotations\n" + inspect.getsource(_search_lines) + r"""
import pickle, re, struct, sys
inp, out = sys.stdin.buffer, sys.stdout.buffer
def frame():
    head = inp.read(4)
    if len(head) < 4:
        sys.exit(0)
    return pickle.loads(inp.read(struct.unpack("<I", head)[0]))
cache = {}
while True:
    pattern, flags, text, room = frame()
    key = (pattern, flags)
    if key not in cache:
        whole = None
        if "\\A" not in pattern and "\\Z" not in pattern:
            whole = re.compile(pattern, flags | re.MULTILINE).search
        cache.clear()
        cache[key] = (re.compile(pattern, flags).search, whole)
    search, whole = cache[key]
    hits = _search_lines(search, whole, text, room)
    data = pickle.dumps(hits, protocol=pickle.HIGHEST_PROTOCOL)
    out.write(struct.pack("<I", len(data)) + data)
    out.flush()
"""


_WORKER_ENV = {k: v for k, v in os.environ.items() if k in ("SYSTEMROOT", "LANG", "LC_ALL")}


class _Worker:
    """One worker process; ``ask`` sends a file and waits at most ``timeout`` seconds."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-I", "-S", "-c", _WORKER],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            env=_WORKER_ENV,  # none of the agent's: a shell command can read its environ
        )

    def ask(self, request: tuple[str, int, str, int], timeout: float) -> list[Hit] | None:
        """The worker's hits, or None when ``timeout`` ran out first (the worker is then
        killed)."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        data = pickle.dumps(request, protocol=pickle.HIGHEST_PROTOCOL)
        self.proc.stdin.write(struct.pack("<I", len(data)) + data)
        self.proc.stdin.flush()
        out = self.proc.stdout.fileno()
        deadline = time.monotonic() + timeout
        chunks = bytearray()
        need = 4
        have_head = False
        while len(chunks) < need:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([out], [], [], left)[0]:
                self.kill()
                return None
            chunk = os.read(out, max(65536, need - len(chunks)))
            if not chunk:
                raise OSError("the grep worker process exited unexpectedly")
            chunks += chunk
            if not have_head and len(chunks) >= 4:
                need = 4 + struct.unpack("<I", chunks[:4])[0]
                have_head = True
        hits: list[Hit] = pickle.loads(bytes(chunks[4:need]))
        return hits

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        with contextlib.suppress(OSError):
            self.proc.kill()
        self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout):
            with contextlib.suppress(OSError):
                if stream is not None:
                    stream.close()


_idle: list[_Worker] = []
_idle_lock = threading.Lock()


def _take_worker() -> _Worker:
    with _idle_lock:
        while _idle:
            worker = _idle.pop()
            if worker.alive():
                return worker
    return _Worker()


def _give_back(worker: _Worker) -> None:
    if worker.alive():
        with _idle_lock:
            _idle.append(worker)


class _BudgetedSearch:
    """Python's ``re`` in a worker process, killed when the time budget runs out."""

    engine = "re"

    def __init__(self, pattern: str, flags: int, budget: float) -> None:
        self.pattern = pattern
        self.flags = flags
        self.budget = budget
        self._spent = 0.0
        self._worker: _Worker | None = None

    def lines(self, text: str, room: int, file: str) -> list[Hit]:
        if not sys.executable:  # pragma: no cover - an embedded interpreter: no worker
            compiled = re.compile(self.pattern, self.flags)
            return _search_lines(compiled.search, None, text, room)
        if self._worker is None:
            self._worker = _take_worker()
        started = time.monotonic()
        try:
            hits = self._worker.ask((self.pattern, self.flags, text, room),
                                    self.budget - self._spent)
        except OSError as e:
            self._worker.kill()
            self._worker = None
            raise ToolError(f"grep could not run the pattern {self.pattern!r}: {e}") from None
        self._spent += time.monotonic() - started
        if hits is None:
            self._worker = None
            raise ToolError(
                f"grep stopped: the pattern {self.pattern!r} used up its {self.budget:g} s "
                f"time budget (while searching {file}). It probably backtracks "
                "catastrophically (nested repetition such as (a+)+ or (.*)*): simplify it, "
                "e.g. remove the nested repetition or anchor it, or install "
                "'contextree[re2]' for linear-time matching"
            )
        return hits

    def close(self) -> None:
        if self._worker is not None:
            _give_back(self._worker)
            self._worker = None
