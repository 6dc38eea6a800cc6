"""Opening sessions and finding entries from what the user typed."""

from __future__ import annotations

import warnings
from pathlib import Path

from ..errors import EntryNotFound, SessionNotFound
from ..session import Session
from ..storage import is_url
from ..storage.jsonl import TornLineWarning
from .output import UsageProblem, warn

MIN_PREFIX = 4


def open_session(target: str, *, readonly: bool = False) -> Session:
    """The session named by ``target``: a session file, or ``postgresql://...#SESSION_ID``.

    Every command opens sessions through this one function. A torn last line is reported as
    a warning on stderr.
    """
    if is_url(target):
        if "#" not in target:
            raise UsageProblem(f"{target!r} names a database, not a session: add #SESSION_ID "
                               f"(`contextree ls {target}` lists them)")
        return Session.open(target, readonly=readonly)
    path = Path(target)
    if path.is_dir():
        raise UsageProblem(f"{target} is a directory; pass a session file "
                           f"(`contextree ls {target}` lists them)")
    if not path.exists():
        raise SessionNotFound("no such session file", path=target)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", TornLineWarning)
        session = Session.open(path, readonly=readonly)
    for w in caught:
        if issubclass(w.category, TornLineWarning):
            warn(str(w.message))
    return session


def resolve_entry(session: Session, ref: str) -> str:
    """The id of the entry ``ref`` names: an id, a unique id prefix, or a label."""
    ref = ref.strip().rstrip("…")
    if ref in session.storage:
        return ref
    labelled = [target for target, text in session.storage.labels().items() if text == ref]
    if len(labelled) == 1:
        return labelled[0]
    if len(ref) >= MIN_PREFIX:
        matches = [e.id for e in session.storage.entries() if e.id.startswith(ref)]
        if len(matches) == 1:
            return matches[0]
        if matches:
            shown = ", ".join(matches[:5])
            raise UsageProblem(f"{ref!r} matches {len(matches)} entries ({shown}...); "
                               "type more of the id")
    raise EntryNotFound(f"no entry {ref!r} in {session.location} (give an id, "
                       f"an id prefix or a label; `contextree tree {session.location}` "
                       "shows them)")
