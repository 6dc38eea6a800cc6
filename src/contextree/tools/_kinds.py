"""What a tool does, as a kind the runtime and compaction can act on instead of its name.

A tool declares its kind (``Tool.kind``) and which end of a long result to keep
(``Tool.truncate_from``). Sessions imported from other agents name their tools their own way;
:func:`kind_of_tool_name` maps those names (Claude Code, Codex, pi, Brute, contextree) to kinds.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

__all__ = ["ToolKind", "TruncateFrom", "default_truncation", "kind_of_tool_name"]

TruncateFrom = Literal["head", "tail"]
"""Which end of a long result truncation keeps, as ``truncate(direction=...)`` says it:
``"head"`` keeps the start, ``"tail"`` the end (where a command's errors and summary are)."""


class ToolKind(StrEnum):
    """What a tool does to the workspace."""

    READ = "read"
    """Reads a file or lists a directory."""
    WRITE = "write"
    """Writes a whole file."""
    EDIT = "edit"
    """Changes part of a file (replace, patch)."""
    SHELL = "shell"
    """Runs a command; its output keeps its end when cut."""
    SEARCH = "search"
    """Finds files or text (grep, glob, find)."""
    OTHER = "other"
    """Anything else."""


def default_truncation(kind: ToolKind) -> TruncateFrom:
    """The end a tool of ``kind`` keeps when its result is cut: the tail for shell output,
    the head for everything else."""
    return "tail" if kind is ToolKind.SHELL else "head"


# Lower-cased tool names of other agents (and contextree's own), by kind.
_NAMES: dict[ToolKind, tuple[str, ...]] = {
    ToolKind.SHELL: (
        "shell", "bash", "bashoutput",  # contextree, Brute, Claude Code, pi
        "exec_command", "local_shell", "container.exec", "write_stdin",  # Codex
    ),
    ToolKind.READ: ("read", "fs_read", "read_file", "ls", "list_dir"),
    ToolKind.WRITE: ("write", "fs_write", "write_file"),
    ToolKind.EDIT: ("edit", "multiedit", "notebookedit", "apply_patch", "patch", "fs_patch"),
    ToolKind.SEARCH: ("grep", "glob", "find", "fs_search", "grep_files"),
}
_BY_NAME: dict[str, ToolKind] = {name: kind for kind, names in _NAMES.items() for name in names}


def kind_of_tool_name(name: str) -> ToolKind:
    """The kind of a tool known by ``name`` in contextree or another agent's sessions
    (case-insensitive: ``Bash`` -> shell, ``apply_patch`` -> edit); ``OTHER`` when unknown."""
    return _BY_NAME.get(name.strip().lower(), ToolKind.OTHER)
