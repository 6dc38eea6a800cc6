"""A redacted copy of a whole session, in memory: what every export writes from.

``redacted_copy(session, redactor)`` gives a ``Session`` on a ``MemoryStorage`` that holds a
redacted copy (``Redactor.entry``) of every entry of ``session``, in the same order, with
the same ids and parents, so it has the same tree, branches, labels and leaf, and builds the
same context with the secrets replaced. Writers read it as they read any session, and never
see a secret; the stored session is only read. ``as_redactor`` turns what the API takes
(``redact=True``, ``False`` or a ``Redactor``) into one redactor.
"""

from __future__ import annotations

from .._session import Session
from ..entries import AnyEntry
from ..redaction import Redactor
from ..storage._memory import MemoryStorage

__all__ = ["as_redactor", "redacted_copy"]

_BATCH = 2000  # entries redacted together (their texts in one pass, the memory bounded)


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
    return Session(storage, projectors=session.projectors)
