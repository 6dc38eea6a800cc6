"""Opening sessions and finding entries from what the user typed."""

from __future__ import annotations

import warnings

from .._session import Session
from ..errors import EntryNotFound, InvalidArgument
from ..storage import Address, Storage, open_storage, resolve
from ..storage._jsonl import TornLineWarning
from .output import UsageProblem, warn

MIN_PREFIX = 4


def address_of(target: str) -> Address:
    """Where ``target`` points, by the scheme table; a target of no accepted form is a
    usage error."""
    try:
        return resolve(target)
    except InvalidArgument as e:
        raise UsageProblem(str(e)) from None


def open_storage_of(target: str, *, readonly: bool = False) -> Storage:
    """The storage ``target`` names (a session file, ``postgresql://...#SESSION_ID``...),
    chosen by the scheme table.

    Every command opens sessions through here. A target of the wrong form (a directory, a
    URL without a session id, an unknown scheme) is a usage error; a torn last line is
    reported as a warning on stderr.
    """
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
    """The id of the entry ``ref`` names: an id, a unique id prefix, or a label."""
    ref = ref.strip().rstrip("…")
    if ref in session:
        return ref
    labelled = [target for target, text in session.labels().items() if text == ref]
    if len(labelled) == 1:
        return labelled[0]
    if len(ref) >= MIN_PREFIX:
        matches = [e.id for e in session.entries() if e.id.startswith(ref)]
        if len(matches) == 1:
            return matches[0]
        if matches:
            shown = ", ".join(matches[:5])
            raise UsageProblem(f"{ref!r} matches {len(matches)} entries ({shown}...); "
                               "type more of the id")
    raise EntryNotFound(f"no entry {ref!r} in {session.location} (give an id, "
                       f"an id prefix or a label; `contextree tree {session.location}` "
                       "shows them)")
