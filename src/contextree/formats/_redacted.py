"""A redacted copy of a whole session, in memory: what every export writes from.

``redacted_copy(session, redactor)`` gives a ``Session`` on a ``MemoryStorage`` that holds a
redacted copy (``Redactor.entry``) of every entry of ``session``, in the same order, with
the same ids and parents, so it has the same tree, branches, labels and leaf, and builds the
same context with the secrets replaced. Writers read it as they read any session, and never
see a secret; the stored session is only read. ``as_redactor`` turns what the API takes
(``redact=True``, ``False`` or a ``Redactor``) into one redactor. ``redactor_for`` is the
redactor that made a copy, for a writer that reads another session the copy links to (a
sub-agent's), so that one is redacted the same way even when the copy was made earlier (by
the command line) and handed on with ``redact=False``.
"""

from __future__ import annotations

from weakref import WeakKeyDictionary

from .._session import Session
from ..entries import AnyEntry
from ..redaction import Redactor
from ..storage._memory import MemoryStorage

__all__ = ["as_redactor", "redacted_copy", "redactor_for"]

_BATCH = 2000  # entries redacted together (their texts in one pass, the memory bounded)
_MADE_BY: WeakKeyDictionary[Session, Redactor] = WeakKeyDictionary()


def as_redactor(redact: bool | Redactor) -> Redactor:
    """``True``: the default redactor; ``False``: one that changes nothing; a ``Redactor``:
    itself (its tags and counts carry on)."""
    if isinstance(redact, Redactor):
        return redact
    if not isinstance(redact, bool):
        from ..errors import InvalidArgument
        raise InvalidArgument(f"redact must be True, False or a Redactor, got {redact!r:.60}")
    return Redactor(enabled=redact)


def redacted_copy(session: Session, redactor: Redactor) -> Session:
    """``session`` with every entry (and the header's metadata) redacted, in memory; the
    session itself when the redactor is disabled."""
    if not redactor.enabled:
        return session
    storage = MemoryStorage(redactor.entry(session.header))
    batch: list[AnyEntry] = []
    for entry in session.entries():  # many entries to one Redactor.entries call, not one each
        batch.append(entry)
        if len(batch) == _BATCH:
            for done in redactor.entries(batch):
                storage.append(done)
            batch = []
    for done in redactor.entries(batch):
        storage.append(done)
    # the leaf is the last entry appended or the target of the last leaf move: the same
    copy = Session(storage, projectors=session.projectors)
    _MADE_BY[copy] = redactor
    return copy


def redactor_for(session: Session, redactor: Redactor) -> Redactor:
    """The redactor for what ``session`` links to: ``redactor`` if it redacts, else the one
    that made ``session`` a redacted copy, if one did."""
    return redactor if redactor.enabled else _MADE_BY.get(session, redactor)
