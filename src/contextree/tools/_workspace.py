"""Path confinement: keep a tool's file access under one root directory.

Confinement guards against a model's mistakes (``../../etc/passwd``, a symlink that leads out
of the project) and against the tree changing under a tool: ``resolve`` checks a path, and
every open then starts again from a descriptor of the root without following a link out of
it (``contextree.tools._beneath``), so a directory swapped for a symlink between the check
and the open cannot lead outside. It is not a sandbox: a hard link inside the root to a file
outside it is a name of that file like any other and cannot be told apart by any path check,
and the ``shell`` tool runs in the root but is not confined at all.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from contextree.errors import ToolError

StrPath = str | os.PathLike[str]
_RESOLVE_TRIES = 3


def real(path: StrPath) -> Path:
    """``path`` made absolute with every symlink and ``..`` resolved (it need not exist)."""
    raw = os.fspath(path)
    for _ in range(_RESOLVE_TRIES):
        try:
            return Path(os.path.realpath(os.path.expanduser(raw)))
        except UnicodeEncodeError:
            raise ToolError(f"invalid path {raw!r}: it contains a lone surrogate character, "
                            "which no file name can hold; give the path as plain text") from None
        except ValueError as e:  # embedded NUL byte
            raise ToolError(f"invalid path {raw!r}: {e}") from None
        except OSError as e:  # a link changed while realpath read it: try again
            failure = e
    raise ToolError(f"cannot resolve the path {raw!r}: {failure.strerror or failure} (it "
                    "kept changing while it was resolved); try again") from None


def is_under(path: Path, directory: Path) -> bool:
    """True when ``path`` is ``directory`` or inside it (both already resolved)."""
    return path == directory or path.is_relative_to(directory)


class Workspace:
    """A root directory that file tools may not leave.

    Relative paths resolve against the root (or a ``cwd`` under it); absolute paths are
    allowed only inside it. ``..`` and symlinks are resolved before the check, so neither can
    lead out, and the open that follows starts from the root's descriptor (``root_for``), so
    neither can a change made after the check. ``extra_readable`` directories (such as the
    overflow store that truncation hints point to) may be read but not written. Hard links
    are not detected (see the module notes).
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

    def root_for(
        self, path: Path, *, write: bool = False, extra_readable: Iterable[StrPath] = ()
    ) -> Path | None:
        """The directory an open of ``path`` (as ``resolve`` returned it) starts from: the
        root, or for a read the extra readable directory that holds it; None if neither."""
        if is_under(path, self.root):
            return self.root
        if not write:
            for d in (*self.extra_readable, *(real(d) for d in extra_readable)):
                if is_under(path, d):
                    return d
        return None

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
