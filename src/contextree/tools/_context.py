"""``ToolContext``: where a tool runs (workspace, overflow store, session, working directory)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from contextree._overflow import OverflowStore
from contextree._truncation import LIMITS, Direction, Truncation, TruncationLimits, truncate
from contextree.tools._workspace import StrPath, Workspace, is_under, real

__all__ = ["ToolContext"]


@dataclass
class ToolContext:
    """Where a tool runs: the workspace (or none), the overflow store, the session and cwd.

    Without a workspace paths resolve against ``cwd`` (default: the process's working
    directory) and are not confined. With one, ``cwd`` defaults to the workspace root and
    files in the overflow store's directory stay readable, so truncation hints work.
    """

    workspace: Workspace | None = None
    store: OverflowStore | None = None
    session_id: str | None = None
    cwd: StrPath | None = None

    @property
    def base(self) -> Path:
        """The directory relative paths and shell commands start from."""
        if self.cwd is not None:
            return real(self.cwd)
        if self.workspace is not None:
            return self.workspace.root
        return real(os.getcwd())

    def readable_dirs(self) -> tuple[Path, ...]:
        """Directories outside the workspace that stay readable: the overflow store's.

        Without a store that is ``OverflowStore.default()``, where truncation then saves.
        """
        store = self.store if self.store is not None else OverflowStore.default()
        return (real(store.directory),)

    def resolve(self, path: StrPath, *, write: bool = False) -> Path:
        """The real absolute path for ``path``; ``ToolError`` when confinement refuses it."""
        if self.workspace is None:
            return real(self.base / os.path.expanduser(os.fspath(path)))
        return self.workspace.resolve(
            path, write=write, cwd=self.base, extra_readable=self.readable_dirs()
        )

    def display(self, path: Path) -> str:
        """``path`` as shown to the model: relative to ``base`` when under it, else absolute.

        Shown paths resolve back to the same file when the model passes them to a tool.
        """
        root = self.base
        if path == root:
            return "."
        if is_under(path, root):
            return path.relative_to(root).as_posix()
        return str(path)

    def truncate(self, text: str | bytes, *, direction: Direction = "head",
                 label: str = "output", limits: TruncationLimits | None = None) -> Truncation:
        """``contextree._truncation.truncate`` with this context's store and session."""
        caps = LIMITS if limits is None else limits
        return truncate(text, max_lines=caps.max_lines, max_bytes=caps.max_bytes,
                        max_line_chars=caps.max_line_chars, direction=direction,
                        store=self.store, session_id=self.session_id, label=label)
