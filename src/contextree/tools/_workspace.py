"""Path confinement: keep a tool's file access under one root directory.

Confinement guards against a model's mistakes (``../../etc/passwd``, a symlink that leads out
of the project); it is not a sandbox. The ``shell`` tool runs in the root but is not confined.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from contextree.errors import ToolError

StrPath = str | os.PathLike[str]


def real(path: StrPath) -> Path:
    """``path`` made absolute with every symlink and ``..`` resolved (it need not exist)."""
    try:
        return Path(os.path.realpath(os.path.expanduser(os.fspath(path))))
    except ValueError as e:  # embedded NUL byte
        raise ToolError(f"invalid path {os.fspath(path)!r}: {e}") from None


def is_under(path: Path, directory: Path) -> bool:
    """True when ``path`` is ``directory`` or inside it (both already resolved)."""
    return path == directory or path.is_relative_to(directory)


class Workspace:
    """A root directory that file tools may not leave.

    Relative paths resolve against the root (or a ``cwd`` under it); absolute paths are
    allowed only inside it. ``..`` and symlinks are resolved before the check, so neither can
    lead out. ``extra_readable`` directories (such as the overflow store that truncation hints
    point to) may be read but not written.
    """

    def __init__(self, root: StrPath, *, extra_readable: Iterable[StrPath] = ()) -> None:
        self.root = real(root)
        self.extra_readable: tuple[Path, ...] = tuple(real(d) for d in extra_readable)

    def __repr__(self) -> str:
        return f"Workspace({str(self.root)!r})"

    def contains(self, path: StrPath) -> bool:
        """True when ``path`` (after resolving symlinks) is under the root."""
        return is_under(real(path), self.root)

    def readable(self, path: StrPath) -> bool:
        """True when ``path`` is under the root or an extra readable directory."""
        p = real(path)
        return is_under(p, self.root) or any(is_under(p, d) for d in self.extra_readable)

    def resolve(
        self,
        path: StrPath,
        *,
        write: bool = False,
        cwd: StrPath | None = None,
        extra_readable: Iterable[StrPath] = (),
    ) -> Path:
        """The real absolute path for ``path``, or ``ToolError`` when it is outside.

        ``write=True`` allows only the root; reads may also use ``extra_readable``
        directories (given here or to the constructor).
        """
        raw = os.fspath(path)
        base = real(cwd) if cwd is not None else self.root
        target = real(base / os.path.expanduser(raw))
        if is_under(target, self.root):
            return target
        if not write:
            allowed = (*self.extra_readable, *(real(d) for d in extra_readable))
            if any(is_under(target, d) for d in allowed):
                return target
        raise ToolError(self._outside_message(raw, base, target))

    def _outside_message(self, raw: str, base: Path, target: Path) -> str:
        lexical = Path(os.path.normpath(base / os.path.expanduser(raw)))
        how = ""
        if is_under(lexical, self.root):
            how = f" (a symlink leads to {target})"
        elif target != lexical:
            how = f" (it resolves to {target})"
        return (
            f"path {raw!r} is outside the workspace root {self.root}{how}; "
            f"use a path under {self.root}, or one relative to it"
        )
