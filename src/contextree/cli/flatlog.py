"""``verify`` and ``repair`` of Brute's flat message log (``runtime.SessionLog``): one message
per line, no header.

A file is taken for a flat log when its first line is not a session header and one of its
first lines is a message object. The checks themselves are the runtime's
(``contextree.runtime.verify_log`` / ``repair_log``); they are looked up when used, so this
module works with a runtime that does not have them yet and says so.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol, cast

import orjson

from .output import CommandFailed

PROBE_LINES = 8
LINE_LIMIT = 1 << 20


class LogHealth(Protocol):
    """What ``verify_log`` reports."""

    path: str
    messages: int
    bad_lines: tuple[tuple[int, str], ...]
    torn_tail: bool
    size: int

    @property
    def ok(self) -> bool: ...


class LogRepair(Protocol):
    """What ``repair_log`` reports."""

    path: str
    kept: int
    quarantined: int
    backup: str | None
    dry_run: bool


def is_flat_log(path: Path) -> bool:
    """Whether ``path`` holds a flat message log rather than a session file."""
    try:
        with open(path, "rb") as f:
            lines = [f.readline(LINE_LIMIT) for _ in range(PROBE_LINES)]
    except OSError:
        return False
    parsed = [_parse(raw) for raw in lines if raw.strip()]
    if not parsed or (isinstance(parsed[0], dict) and parsed[0].get("type") == "session"):
        return False
    return any(isinstance(p, dict) and isinstance(p.get("role"), str) for p in parsed)


def _parse(raw: bytes) -> Any:
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None


def _runtime(name: str) -> Callable[..., Any]:
    fn = getattr(importlib.import_module("contextree.runtime"), name, None)
    if fn is None:
        raise CommandFailed("this is a flat message log (one message per line, as "
                            "runtime.SessionLog writes); this version of contextree cannot "
                            "check or repair one")
    return cast(Callable[..., Any], fn)


def verify_log(path: Path) -> LogHealth:
    """The runtime's check of a flat log (changes nothing)."""
    return cast(LogHealth, _runtime("verify_log")(path))


def repair_log(path: Path, *, dry_run: bool, force: bool) -> LogRepair:
    """The runtime's repair of a flat log (a backup first)."""
    return cast(LogRepair, _runtime("repair_log")(path, dry_run=dry_run, force=force))
