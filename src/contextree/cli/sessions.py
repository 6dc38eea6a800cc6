"""Opening sessions and finding entries from what the user typed; checking where output goes."""

from __future__ import annotations

import os
import warnings
from collections.abc import Sequence
from pathlib import Path

from .._session import Session, entry_matches
from ..errors import EntryNotFound, InvalidArgument, SessionExists
from ..storage import Storage, open_storage
from ..storage._jsonl import TornLineWarning
from .output import CommandFailed, UsageProblem, warn
from .places import address_of, require_directory, require_regular_file

__all__ = ["STDOUT", "address_of", "check_output", "open_session", "open_storage_of",
           "require_directory", "require_parent", "require_regular_file", "resolve_entry"]

STDOUT = "-"  # ``-o -``: write to stdout
SHOWN_MATCHES = 5


def open_storage_of(target: str, *, readonly: bool = False) -> Storage:
    """The storage ``target`` names (a session file, ``postgresql://...#SESSION_ID``...),
    chosen by the scheme table.

    Every command opens sessions through here. A target of the wrong form (a directory, a
    pipe, a URL without a session id, an unknown scheme) is a usage error; a torn last line
    is reported as a warning on stderr.
    """
    address = address_of(target)
    if address.is_file:
        require_regular_file(address.where)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", TornLineWarning)
        try:
            storage = open_storage(target, readonly=readonly)
        except InvalidArgument as e:
            raise UsageProblem(str(e)) from None
    for w in caught:
        if issubclass(w.category, TornLineWarning):
            warn(str(w.message))
    return storage


def open_session(target: str, *, readonly: bool = False) -> Session:
    """The session ``target`` names (see ``open_storage_of``)."""
    return Session.open(open_storage_of(target, readonly=readonly))


def resolve_entry(session: Session, ref: str) -> str:
    """The id of the entry ``ref`` names: an id, a label, or a prefix of one id (the lookup
    of ``Session.resolve``, said in CLI words).

    A label on several entries (possible in files from elsewhere) and a prefix of several
    ids are usage errors that list the candidates.
    """
    how, ids = entry_matches(session, ref)
    if len(ids) == 1:
        return ids[0]
    if not ref.strip().rstrip("…"):
        raise UsageProblem("name an entry: an id, an id prefix or a label "
                           f"(`contextree tree {session.location}` shows them)")
    if how == "label":
        raise UsageProblem(f"the label {ref!r} is on {len(ids)} entries "
                           f"({', '.join(ids)}); give the id of the one you mean")
    if ids:
        shown = ", ".join(ids[:SHOWN_MATCHES])
        more = ", ..." if len(ids) > SHOWN_MATCHES else ""
        raise UsageProblem(f"{ref!r} is the start of {len(ids)} entry ids ({shown}{more}); "
                           "type more of the id")
    raise EntryNotFound(f"no entry {ref!r} in {session.location} (give an id, "
                        f"an id prefix or a label; `contextree tree {session.location}` "
                        "shows them)")


def check_output(output: str, *, force: bool, inputs: Sequence[str] = ()) -> None:
    """Refuse an output file the command must not write: one in a directory that does not
    exist (nothing is created silently), a directory, one of the command's own inputs
    (also through a symlink or a hard link, even with ``--force``), or an existing file
    without ``--force``. URLs are left to their backend."""
    if output == STDOUT or not address_of(output).is_file:
        return
    path = Path(output)
    require_parent(output, "choose another -o path")
    if not os.path.lexists(path):
        return
    if path.is_dir():
        raise UsageProblem(f"{path}: this is a directory; -o takes a file path")
    for source in inputs:
        if _same_file(path, source):
            raise UsageProblem(f"{path}: -o names the input {source} itself; write to "
                               "another file")
    if not force:
        raise SessionExists("a file is already there; pass --force to replace it, or "
                            "choose another -o path", path=str(path))


def require_parent(path: str, otherwise: str) -> None:
    """Refuse a new file in a directory that does not exist: no command creates one
    (``otherwise`` says what else the user can do)."""
    parent = Path(path).parent
    if not parent.is_dir():
        what = "is not a directory" if parent.exists() else "does not exist"
        raise CommandFailed(f"{path}: the directory {parent} {what}; create it first or "
                            f"{otherwise}")


def _same_file(a: Path, b: str) -> bool:
    if not address_of(b).is_file:
        return False
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False
