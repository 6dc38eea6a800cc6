"""Entries encoded once, for writers that make many lines themselves (imports).

``JsonlStorage.append`` checks an entry against the limits of a session line, encodes it and
writes it. An import makes tens of thousands of entries, keeps them in a temporary file until
the session's header is known (``formats._claude_code``), and appends them afterwards: held
as objects, each would be encoded for the temporary file, decoded again and encoded a second
time by the storage. ``encode_entry`` does the entry's share of ``append``'s work once (the
limits, the line, what the tree's bookkeeping needs of it) and ``JsonlStorage.
append_encoded`` writes the line after the checks that need the session (unique id, known
parent, leaf target): the session gets the same line, checked the same way.
"""

from __future__ import annotations

import msgspec

from ..entries import AnyEntry, SessionHeader, checked_line, from_dict
from ..errors import InvalidEntry
from ._base import bookkeeping
from ._filetree import fact_code

__all__ = ["EncodedEntry", "encode_entry"]


class EncodedEntry(msgspec.Struct, array_like=True, gc=False, frozen=True):
    """An entry as its session line, with what appending it needs to know of it: made only
    by ``encode_entry`` (which checked the entry against the limits of a line), so that the
    line is written as it is."""

    id: str
    parent_id: str | None
    timestamp: str
    type: str  # the type tag the tree keeps (``bookkeeping``)
    target: str | None  # a label's or leaf move's target
    text: str | None  # a label's text or a session name
    fact: int  # ``fact_code``
    line: bytes  # the JSON line, with its newline

    @property
    def leaf_target(self) -> str | None:
        """The entry a leaf move points at (``None`` for any other entry)."""
        return self.target if self.type == "leaf" else None

    def entry(self) -> AnyEntry:
        """The entry, decoded from its line (for a store that takes entries, not lines)."""
        entry = from_dict(msgspec.json.decode(self.line))
        assert not isinstance(entry, SessionHeader)
        return entry

    def check_line(self, location: str) -> None:
        """``InvalidEntry`` unless ``line`` is one line with its newline (the one thing a
        storage checks of the bytes: a line made elsewhere must not split in two)."""
        line = self.line
        if not line.endswith(b"\n") or line.find(b"\n") != len(line) - 1:
            raise InvalidEntry(f"entry {self.id!r}: an encoded entry must be one JSON line "
                               "ending in a newline", path=location)


def encode_entry(entry: AnyEntry) -> EncodedEntry | None:
    """The entry encoded, or ``None`` if it breaks the limits of a line or has no JSON form
    (append the entry itself then: ``append`` says what is wrong with it)."""
    line = checked_line(entry)
    if line is None:
        return None
    kind, target, text = bookkeeping(entry)
    return EncodedEntry(entry.id, entry.parent_id, entry.timestamp, kind, target, text,
                        fact_code(entry), line)
