"""Built-in tools (``read``, ``write``, ``edit``, ``shell``, ``grep``, ``glob``) and ``@tool``;
``session_search_tool(where)`` makes a read-only ``session_search`` over past sessions.

Each tool takes a ``ToolContext`` (workspace, overflow store, session, cwd). Pass one to
``Tool.run(arguments, context=...)``, or get tools bound to one with ``make_tools``::

    tools = make_tools(workspace="/path/to/project")
    result = tools[0].run({"path": "README.md"})

A tool declares its ``kind`` (``ToolKind``) and which end of a long result to keep
(``truncate_from``); ``kind_of_tool_name`` maps other agents' tool names to kinds.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from contextree._public import publish

if TYPE_CHECKING:  # imported on first use (PEP 562), from the modules _LAZY names
    from contextree.tools._builtin import ALL, ALL_TOOLS, make_tools
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
    from contextree.tools._session_search import session_search_tool
    from contextree.tools._shell import shell
    from contextree.tools._tool import Tool
    from contextree.tools._workspace import Workspace

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
    "session_search_tool",
    "shell",
    "tool",
    "write",
]

_LAZY = {
    "._builtin": ("ALL", "ALL_TOOLS", "make_tools"),
    "._context": ("ToolContext",),
    "._decorator": ("as_tools", "build_tool", "tool"),
    "._docstrings": ("parse_docstring",),
    "._environment": ("SECRET_NAMES", "ShellEnvironment", "looks_secret", "protect_process"),
    "._files": ("edit", "read", "write"),
    "._kinds": ("ToolKind", "TruncateFrom", "kind_of_tool_name"),
    "._result": ("ToolResult",),
    "._schema": ("schema_for",),
    "._search": ("glob", "grep"),
    "._session_search": ("session_search_tool",),
    "._shell": ("shell",),
    "._tool": ("Tool",),
    "._workspace": ("Workspace",),
}

if not TYPE_CHECKING:  # type checkers see the imports above, not a catch-all __getattr__
    __getattr__, __dir__ = publish(globals(), _LAZY)
