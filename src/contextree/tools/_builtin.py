"""The built-in tools as one list (``ALL``), and ``make_tools``: them bound to one context."""

from __future__ import annotations

from contextree._overflow import OverflowStore
from contextree.tools._context import ToolContext
from contextree.tools._environment import ShellEnvironment
from contextree.tools._files import edit, read, write
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
