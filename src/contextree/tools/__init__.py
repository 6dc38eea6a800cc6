"""Built-in tools (``read``, ``write``, ``edit``, ``shell``, ``grep``, ``glob``) and ``@tool``.

Each tool takes a ``ToolContext`` (workspace, overflow store, session, cwd). Pass one to
``Tool.run(arguments, context=...)``, or get tools bound to one with ``make_tools``::

    tools = make_tools(workspace="/path/to/project")
    result = tools[0].run({"path": "README.md"})

A tool declares its ``kind`` (``ToolKind``) and which end of a long result to keep
(``truncate_from``); ``kind_of_tool_name`` maps other agents' tool names to kinds.
"""

from __future__ import annotations

from contextree._overflow import OverflowStore
from contextree._public import publish
from contextree.tools._context import ToolContext
from contextree.tools._decorator import as_tools, build_tool, tool
from contextree.tools._docstrings import parse_docstring
from contextree.tools._environment import (
    SECRET_NAMES,
    ShellEnvironment,
    looks_secret,
    protect_process,
)
from contextree.tools._files import edit, read, write
from contextree.tools._kinds import ToolKind, TruncateFrom, kind_of_tool_name
from contextree.tools._result import ToolResult
from contextree.tools._schema import schema_for
from contextree.tools._search import glob, grep
from contextree.tools._shell import shell
from contextree.tools._tool import Tool
from contextree.tools._workspace import StrPath, Workspace

ALL: list[Tool] = [read, write, edit, shell, grep, glob]
"""The built-in tools, unbound (each call gets the context given to ``run``, or none)."""
ALL_TOOLS = ALL


def make_tools(
    workspace: Workspace | StrPath | None = None,
    *,
    store: OverflowStore | None = None,
    session_id: str | None = None,
    cwd: StrPath | None = None,
    tools: list[Tool] | None = None,
    shell_env: ShellEnvironment | None = None,
) -> list[Tool]:
    """The built-in tools (or ``tools``) bound to one ``ToolContext``.

    ``workspace`` confines the file tools to a directory (a path or a ``Workspace``; the
    shell is never confined); ``store`` and ``session_id`` say where truncated output is
    saved; ``shell_env`` which environment variables commands get (default: all but those
    that look like secrets).
    """
    if workspace is not None and not isinstance(workspace, Workspace):
        workspace = Workspace(workspace)
    context = ToolContext(workspace=workspace, store=store, session_id=session_id, cwd=cwd,
                          shell_env=shell_env)
    return [t.with_context(context) for t in (ALL if tools is None else tools)]


__all__ = [
    "ALL",
    "ALL_TOOLS",
    "SECRET_NAMES",
    "ShellEnvironment",
    "Tool",
    "ToolContext",
    "ToolKind",
    "ToolResult",
    "TruncateFrom",
    "Workspace",
    "as_tools",
    "build_tool",
    "edit",
    "glob",
    "grep",
    "kind_of_tool_name",
    "looks_secret",
    "make_tools",
    "parse_docstring",
    "protect_process",
    "read",
    "schema_for",
    "shell",
    "tool",
    "write",
]

publish(globals())
