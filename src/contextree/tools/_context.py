"""``ToolContext``: where a tool runs (workspace, overflow store, session, working directory)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from contextree._overflow import OverflowStore
from contextree._truncation import (
    LIMITS,
    Direction,
    Dropped,
    Truncation,
    TruncationLimits,
    truncate,
)
from contextree.errors import ToolError
from contextree.tools._beneath import (
    OutsideRoot,
    open_beneath,
    open_dir_beneath,
    relative_to_root,
)
from contextree.tools._environment import ShellEnvironment
from contextree.tools._workspace import StrPath, Workspace, is_under, real

__all__ = ["ToolContext"]

_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


@dataclass
class ToolContext:
    """Where a tool runs: the workspace (or none), the overflow store, the session and cwd.

    Without a workspace paths resolve against ``cwd`` (default: the process's working
    directory) and are not confined. With one, ``cwd`` defaults to the workspace root, every
    open starts from the root's descriptor (``open``, ``open_dir``, ``open_parent``), and the
    outputs this session saved to the overflow store stay readable, so truncation hints work
    (other sessions' saved outputs do not). ``shell_env`` says which environment variables
    the ``shell`` tool passes on (default ``ShellEnvironment()``: all but those that look
    like secrets).
    """

    workspace: Workspace | None = None
    store: OverflowStore | None = None
    session_id: str | None = None
    cwd: StrPath | None = None
    shell_env: ShellEnvironment | None = None

    @property
    def base(self) -> Path:
        """The directory relative paths and shell commands start from."""
        if self.cwd is not None:
            return real(self.cwd)
        if self.workspace is not None:
            return self.workspace.root
        return real(os.getcwd())

    def overflow_store(self) -> OverflowStore:
        """The store truncation saves to: the one given, else ``OverflowStore.default()``."""
        return self.store if self.store is not None else OverflowStore.default()

    def readable_dirs(self) -> tuple[Path, ...]:
        """Directories outside the workspace that stay readable: the folder of the overflow
        store where this session's outputs are saved (the store's own for no session)."""
        return (real(self.overflow_store().session_directory(self.session_id)),)

    def resolve(self, path: StrPath, *, write: bool = False) -> Path:
        """The real absolute path for ``path``; ``ToolError`` when confinement refuses it."""
        if self.workspace is None:
            return real(self.base / os.path.expanduser(os.fspath(path)))
        target = self.workspace.resolve(
            path, write=write, cwd=self.base, extra_readable=self.readable_dirs()
        )
        if not write:
            self._check_spill(path, target)
        return target

    def _check_spill(self, raw: StrPath, target: Path) -> None:
        """Refuse a saved output of another session (its folder is inside the readable one
        only when this context has no session: the store's top level)."""
        assert self.workspace is not None
        if is_under(target, self.workspace.root):
            return
        folder = self.readable_dirs()[0]
        if is_under(target, folder) and target != folder and target.parent != folder:
            raise ToolError(
                f"{os.fspath(raw)!r} is an output saved by another session; read can open "
                f"only this session's saved outputs (in {folder})"
            )

    # -- opening, always from the root's descriptor when there is a workspace ---------------
    def _anchor(self, path: Path, write: bool) -> tuple[Path, str] | None:
        """(root to open from, path relative to it), or None without a workspace."""
        if self.workspace is None:
            return None
        if is_under(path, self.workspace.root):  # the usual case: no store lookup needed
            return self.workspace.root, relative_to_root(path, self.workspace.root)
        root = self.workspace.root_for(path, write=write, extra_readable=self.readable_dirs())
        if root is None:
            raise ToolError(self.workspace._outside_message(str(path), self.base, path))
        return root, relative_to_root(path, root)

    def _outside(self, path: Path, root: Path) -> ToolError:
        return ToolError(
            f"path {self.display(path)!r} leads outside {root} (a symlink on the way points "
            f"out of it, or the directory tree changed while it was being opened); use a "
            f"path under {root}"
        )

    def open(self, path: Path, flags: int = os.O_RDONLY, *, write: bool = False) -> int:
        """A descriptor of ``path`` (from ``resolve``, or lexically under what it returned).

        With a workspace the open starts from the root's descriptor and follows no link out
        of it (``ToolError`` if one leads out); other failures are ``OSError``.
        """
        anchor = self._anchor(path, write)
        if anchor is None:
            return os.open(path, flags | _CLOEXEC)
        root, rel = anchor
        try:
            return open_beneath(root, rel, flags)
        except OutsideRoot:
            raise self._outside(path, root) from None

    def open_dir(self, path: Path, *, create: bool = False, write: bool = False) -> int:
        """A descriptor of the directory ``path``; ``create`` makes missing ones on the way."""
        anchor = self._anchor(path, write or create)
        if anchor is None:
            if create:
                os.makedirs(path, exist_ok=True)
            return os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | _CLOEXEC)
        root, rel = anchor
        try:
            return open_dir_beneath(root, rel, create=create)
        except OutsideRoot:
            raise self._outside(path, root) from None

    def open_parent(self, path: Path, *, create: bool = False) -> tuple[int, str]:
        """A descriptor of the directory holding ``path`` (to write in), and its name there."""
        if path.name in ("", ".", ".."):
            raise ToolError(f"{self.display(path)} is a directory; give the path of a file")
        return self.open_dir(path.parent, create=create, write=True), path.name

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
                 label: str = "output", limits: TruncationLimits | None = None,
                 dropped: Dropped | None = None) -> Truncation:
        """``contextree._truncation.truncate`` with this context's store and session."""
        caps = LIMITS if limits is None else limits
        return truncate(text, max_lines=caps.max_lines, max_bytes=caps.max_bytes,
                        max_line_chars=caps.max_line_chars, direction=direction,
                        store=self.store, session_id=self.session_id, label=label,
                        dropped=dropped)
