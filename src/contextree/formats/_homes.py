"""Finding other agents' sessions where they keep them, without a path.

``list_tool_sessions("claude-code")`` lists ``~/.claude/projects/*/*.jsonl`` (or
``$CLAUDE_CONFIG_DIR``), ``list_tool_sessions("codex")`` the rollouts under
``$CODEX_HOME/sessions`` (``~/.codex/sessions``), newest first, each with its first prompt;
``find_tool_session(fmt, key)`` picks one by its id or a prefix of it (a path is taken as is).
Any registered format with a ``home`` can be asked the same.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import InvalidArgument
from . import _claude_code as claude_code
from . import _codex as codex
from . import _copilot as copilot
from . import _gemini_cli as gemini_cli
from . import _opencode as opencode
from ._pi import home as pi_home
from ._registry import FoundSession, Home, SessionHome, get_format, list_formats

__all__ = ["CLAUDE_CODE_HOME", "CODEX_HOME", "COPILOT_HOME", "GEMINI_CLI_HOME",
           "OPENCODE_HOME", "PI_HOME", "find_tool_session", "list_tool_sessions"]

CLAUDE_CODE_HOME = SessionHome(
    lambda home: [FoundSession("claude-code", r.id, r.path, r.modified, r.cwd, r.first_prompt)
                  for r in claude_code.list_sessions(home)],
    claude_code.find_session)
"""Claude Code's sessions: ``~/.claude/projects/*/*.jsonl`` (or ``$CLAUDE_CONFIG_DIR``)."""

CODEX_HOME = SessionHome(
    lambda home: [FoundSession("codex", r.id, r.path, r.modified, r.cwd, r.first_prompt)
                  for r in codex.list_sessions(home)],
    codex.find_thread)
"""Codex's rollouts: ``$CODEX_HOME/sessions`` (``~/.codex/sessions``)."""


PI_HOME = SessionHome(
    lambda home: [FoundSession("pi", r.id, r.path, r.modified, r.cwd, r.first_prompt)
                  for r in pi_home.list_sessions(home)],
    pi_home.find_session)
"""pi's sessions (0.73 and 1.x alike): ``~/.pi/agent/sessions/*/*.jsonl`` (or
``$PI_CODING_AGENT_DIR``, ``$PI_CODING_AGENT_SESSION_DIR``)."""


GEMINI_CLI_HOME = SessionHome(
    lambda home: [FoundSession("gemini-cli", r.id, r.path, r.modified, r.cwd, r.first_prompt)
                  for r in gemini_cli.list_sessions(home)],
    gemini_cli.find_session)
"""Gemini CLI's chats: ``~/.gemini/tmp/*/chats/`` (or ``$GEMINI_CLI_HOME/.gemini``)."""


OPENCODE_HOME = SessionHome(
    lambda home: [FoundSession("opencode", r.id, r.path, r.modified, r.cwd, r.first_prompt)
                  for r in opencode.list_sessions(home)],
    opencode.find_session)
"""opencode's sessions: its database ``$XDG_DATA_HOME/opencode/opencode.db``
(``~/.local/share/opencode``); each is ``opencode.db#SESSION_ID``."""


COPILOT_HOME = SessionHome(
    lambda home: [FoundSession("copilot", r.id, r.path, r.modified, r.cwd, r.first_prompt)
                  for r in copilot.list_sessions(home)],
    copilot.find_session)
"""Copilot CLI's sessions: ``~/.copilot/session-state/*/events.jsonl`` (or
``$COPILOT_HOME``)."""


def _home(fmt: str) -> SessionHome:
    home = get_format(fmt).home
    if home is None:
        names = ", ".join(f.name for f in list_formats() if f.home is not None)
        raise InvalidArgument(f"format {fmt!r} has no sessions folder to list; choose one "
                            f"of: {names}")
    return home


def list_tool_sessions(fmt: str, home: Home = None) -> list[FoundSession]:
    """The sessions of ``fmt`` under ``home`` (default: the tool's own), newest first."""
    return _home(fmt).sessions(home)


def find_tool_session(fmt: str, key: str, home: Home = None) -> Path:
    """The file of the session whose id is ``key`` or starts with it."""
    return _home(fmt).find(key, home)
