"""What the user typed as a place: a target of the scheme table, a file, a directory.

Light on purpose (no session code): ``ls`` and the other catalog commands start with it.
"""

from __future__ import annotations

import os
import stat

from .._files import node_kind
from ..errors import InvalidArgument, SessionNotFound
from ..storage import Address, resolve
from .output import UsageProblem


def address_of(target: str) -> Address:
    """Where ``target`` points, by the scheme table; a target of no accepted form is a
    usage error."""
    try:
        return resolve(target)
    except InvalidArgument as e:
        raise UsageProblem(str(e)) from None


def require_regular_file(path: str | os.PathLike[str], what: str = "session file") -> None:
    """Refuse a directory, a named pipe or a device *before* opening it (opening a pipe
    would wait for a writer forever). A missing path is left to the caller's open."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return
    except NotADirectoryError:
        raise SessionNotFound(f"no such {what}", path=os.fspath(path)) from None
    if stat.S_ISDIR(mode):
        raise UsageProblem(f"{os.fspath(path)}: this is a directory, not a {what} "
                           "(`contextree ls DIR` lists the sessions in it)")
    if not stat.S_ISREG(mode):
        raise UsageProblem(f"{os.fspath(path)}: this is {node_kind(mode)}, not a {what}")


def require_directory(path: str | os.PathLike[str], what: str) -> None:
    """Refuse a regular file, a named pipe or a device given where a directory belongs: a
    usage error (exit 2), said before anything opens it. A missing path is the caller's."""
    try:
        mode = os.stat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return
    if not stat.S_ISDIR(mode):
        raise UsageProblem(f"{os.fspath(path)}: this is {node_kind(mode)}, not a directory "
                           f"({what})")
