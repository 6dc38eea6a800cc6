"""Finding pi's own sessions: ``~/.pi/agent/sessions/--<cwd>--/<time>_<id>.jsonl``.

pi keeps its sessions under ``<agent dir>/sessions`` (the agent dir is ``~/.pi/agent``, or
``$PI_CODING_AGENT_DIR``), one folder per working directory; ``$PI_CODING_AGENT_SESSION_DIR``
names another sessions folder. The same layout for pi 0.73 and 1.x.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import orjson

from ..._limits import parse_json
from .._base import find_by_id, text_of_blocks

__all__ = ["PiSession", "find_session", "list_sessions", "pi_sessions_dir"]

_HEAD_LINES = 200  # lines read for the first prompt of a session


@dataclass(frozen=True)
class PiSession:
    """A pi session file found in pi's sessions folder."""

    id: str
    path: Path
    cwd: str | None
    modified: float
    first_prompt: str | None


def pi_sessions_dir(home: str | os.PathLike[str] | None = None) -> Path:
    """Where pi keeps its sessions: ``home`` (an agent dir, or its ``sessions`` folder), else
    ``$PI_CODING_AGENT_SESSION_DIR``, else ``$PI_CODING_AGENT_DIR/sessions``, else
    ``~/.pi/agent/sessions``."""
    if home is not None:
        base = Path(home).expanduser()
        return base if base.name == "sessions" else base / "sessions"
    if os.environ.get("PI_CODING_AGENT_SESSION_DIR"):
        return Path(os.environ["PI_CODING_AGENT_SESSION_DIR"]).expanduser()
    if os.environ.get("PI_CODING_AGENT_DIR"):
        return Path(os.environ["PI_CODING_AGENT_DIR"]).expanduser() / "sessions"
    return Path.home() / ".pi" / "agent" / "sessions"


def list_sessions(home: str | os.PathLike[str] | None = None) -> list[PiSession]:
    """The pi session files in pi's sessions folder (and its per-cwd folders), newest first."""
    root = pi_sessions_dir(home)
    if not root.is_dir():
        return []
    files = {p for pattern in ("*.jsonl", "*/*.jsonl") for p in root.glob(pattern) if p.is_file()}
    rows = [row for p in files if (row := _row(p)) is not None]
    return sorted(rows, key=lambda r: r.modified, reverse=True)


def _row(path: Path) -> PiSession | None:
    """The session's id, cwd and first prompt, from its first lines; ``None`` for a file
    that is not a pi session (its first line is no pi header)."""
    try:
        with open(path, "rb") as f:
            head = _parse(f.readline())
            if head is None or head.get("type") != "session" or not isinstance(head.get("id"), str):
                return None
            first: str | None = None
            for _, raw in zip(range(_HEAD_LINES), f, strict=False):
                obj = _parse(raw)
                message = obj.get("message") if obj is not None else None
                if isinstance(message, dict) and message.get("role") == "user":
                    first = text_of_blocks(message.get("content")) or None
                    break
            modified = path.stat().st_mtime
    except OSError:
        return None
    cwd = head.get("cwd")
    return PiSession(str(head["id"]), path, cwd if isinstance(cwd, str) else None, modified,
                     first)


def _parse(raw: bytes) -> dict[str, object] | None:
    try:
        obj = parse_json(raw)
    except orjson.JSONDecodeError:
        return None
    return obj if isinstance(obj, dict) else None


def find_session(key: str, home: str | os.PathLike[str] | None = None) -> Path:
    """The session file whose id is ``key`` or starts with it (a path is returned as is)."""
    return find_by_id(key, lambda: list_sessions(home), "pi session", pi_sessions_dir(home))
