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
from ._later import Later
from ._registry import FoundSession, Home, SessionHome, get_format, list_formats

__all__ = ["CLAUDE_CODE_HOME", "CODEX_HOME", "COPILOT_HOME", "GEMINI_CLI_HOME",
           "OPENCODE_HOME", "PI_HOME", "find_tool_session", "list_tool_sessions"]


def _tool_home(fmt: str, module: str, finder: str) -> SessionHome:
    """A tool's home, listed by ``module.list_sessions`` and searched by ``module.finder``
    (the module imported when one is first used)."""
    rows = Later(f"{__package__}.{module}", "list_sessions")
    return SessionHome(
        lambda home: [FoundSession(fmt, r.id, r.path, r.modified, r.cwd, r.first_prompt)
                      for r in rows(home)],
        Later(f"{__package__}.{module}", finder))


CLAUDE_CODE_HOME = _tool_home("claude-code", "_claude_code", "find_session")
"""Claude Code's sessions: ``~/.claude/projects/*/*.jsonl`` (or ``$CLAUDE_CONFIG_DIR``)."""

CODEX_HOME = _tool_home("codex", "_codex", "find_thread")
"""Codex's rollouts: ``$CODEX_HOME/sessions`` (``~/.codex/sessions``)."""

PI_HOME = _tool_home("pi", "_pi.home", "find_session")
"""pi's sessions (0.73 and 1.x alike): ``~/.pi/agent/sessions/*/*.jsonl`` (or
``$PI_CODING_AGENT_DIR``, ``$PI_CODING_AGENT_SESSION_DIR``)."""

GEMINI_CLI_HOME = _tool_home("gemini-cli", "_gemini_cli", "find_session")
"""Gemini CLI's chats: ``~/.gemini/tmp/*/chats/`` (or ``$GEMINI_CLI_HOME/.gemini``)."""

OPENCODE_HOME = _tool_home("opencode", "_opencode", "find_session")
"""opencode's sessions: its database ``$XDG_DATA_HOME/opencode/opencode.db``
(``~/.local/share/opencode``); each is ``opencode.db#SESSION_ID``."""

COPILOT_HOME = _tool_home("copilot", "_copilot", "find_session")
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
