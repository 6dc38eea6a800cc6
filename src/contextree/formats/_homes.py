"""Finding other agents' sessions where they keep them, without a path.

``list_tool_sessions("claude-code")`` lists ``~/.claude/projects/*/*.jsonl`` (or
``$CLAUDE_CONFIG_DIR``), ``list_tool_sessions("codex")`` the rollouts under
``$CODEX_HOME/sessions`` (``~/.codex/sessions``), newest first, each with its first prompt;
``find_tool_session(fmt, key)`` picks one by its id or a prefix of it (a path is taken as is).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..errors import UnknownFormat
from . import _claude_code as claude_code
from . import _codex as codex

__all__ = ["HOME_FORMATS", "FoundSession", "find_tool_session", "list_tool_sessions"]

HOME_FORMATS = ("claude-code", "codex")


@dataclass(frozen=True)
class FoundSession:
    """A session of another agent, found under its home directory."""

    format: str
    id: str
    path: Path
    modified: float
    cwd: str | None
    first_prompt: str | None

    def to_dict(self) -> dict[str, Any]:
        """The row as JSON-ready data (``contextree import FMT --list --json``)."""
        return {"format": self.format, "id": self.id, "path": str(self.path),
                "modified": datetime.fromtimestamp(self.modified, UTC).isoformat(
                    timespec="seconds").replace("+00:00", "Z"),
                "cwd": self.cwd, "first_prompt": self.first_prompt}


def _check(fmt: str) -> str:
    key = fmt.strip().lower().replace("_", "-")
    key = {"claude": "claude-code"}.get(key, key)
    if key not in HOME_FORMATS:
        raise UnknownFormat(f"format {fmt!r} has no sessions folder to list; choose one "
                                 f"of: {', '.join(HOME_FORMATS)}")
    return key


def list_tool_sessions(fmt: str, home: str | os.PathLike[str] | None = None) -> list[FoundSession]:
    """The sessions of ``fmt`` under ``home`` (default: the tool's own), newest first."""
    if _check(fmt) == "claude-code":
        return [FoundSession("claude-code", r.id, r.path, r.modified, r.cwd, r.first_prompt)
                for r in claude_code.list_sessions(home)]
    return [FoundSession("codex", r.id, r.path, r.modified, r.cwd, r.first_prompt)
            for r in codex.list_sessions(home)]


def find_tool_session(fmt: str, key: str, home: str | os.PathLike[str] | None = None) -> Path:
    """The file of the session whose id is ``key`` or starts with it."""
    if _check(fmt) == "claude-code":
        return claude_code.find_session(key, home)
    return codex.find_thread(key, home)
