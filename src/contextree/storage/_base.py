"""The storage protocol, and the in-memory tree index that the embedded backends share."""

from __future__ import annotations

from collections.abc import Container, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from msgspec import UNSET, UnsetType

from ..entries import (
    AnyEntry,
    BranchSummaryEntry,
    LabelEntry,
    LeafEntry,
    SessionHeader,
    SessionInfoEntry,
    from_dict,
    line_problem,
    to_dict,
)
from ..errors import (
    DuplicateId,
    EntryNotFound,
    InvalidArgument,
    InvalidEntry,
    LeafConflict,
    MissingParent,
    ParentCycle,
)


def unencodable(entry: AnyEntry, location: str, e: Exception) -> InvalidEntry:
    """The error for an entry that has no JSON form (``e``: what encoding it raised), saying
    what to do; a lone surrogate (undecodable bytes, half an emoji) is named."""
    if isinstance(e, UnicodeEncodeError) and "surrogates" in str(e.reason):
        bad = e.object[e.start:e.end] if isinstance(e.object, str) else ""
        return InvalidEntry(
            f"entry {entry.id!r} cannot be stored: its text holds a lone surrogate "
            f"({bad.encode('unicode_escape').decode()} at character {e.start}), which "
            "UTF-8 cannot hold (text decoded with errors='surrogateescape', or half of an "
            "emoji); decode with errors='replace', or clean it with "
            "text.encode('utf-8', 'replace').decode()", path=location)
    return InvalidEntry(f"entry {entry.id!r} cannot be stored: it holds data with no JSON "
                        f"form ({e})", path=location)


# Entries that record a change of bookkeeping rather than of the conversation. They sit in
# the tree like any entry, but ``tree()`` hides leaf moves.
HIDDEN_IN_TREE = (LeafEntry,)
HIDDEN_TYPES = frozenset({"leaf"})  # their type tags


@dataclass(frozen=True)
class StorageHealth:
    """What ``Storage.health()`` reports: how big a session is and what was set aside.

    ``size`` is the bytes the session takes where it is kept (the file; on PostgreSQL the
    bytes of its JSON lines), ``None`` when it is kept nowhere (memory).
    ``quarantined_lines`` counts lines ever moved to the quarantine file, plus a torn last
    line that a read-only open skipped; ``torn_line`` is that line's number, while it is
    still in the file.
    """

    entries: int
    size: int | None
    quarantined_lines: int = 0
    torn_line: int | None = None


@runtime_checkable
class Storage(Protocol):
    """Where a session's entries live. Append-only: entries are never changed or removed."""

    @property
    def header(self) -> SessionHeader:
        """The session's header line (id, cwd, format version, metadata)."""
        ...

    @property
    def leaf_id(self) -> str | None:
        """The current leaf: the last appended entry, or the target of the last leaf move."""
        ...

    @property
    def name(self) -> str | None:
        """The session's display name, or None."""
        ...

    @property
    def location(self) -> str:
        """A human-readable place: a file path, a database URL and id, or ``memory``."""
        ...

    @property
    def readonly(self) -> bool:
        """True when the storage was opened read-only (no lock, no writes)."""
        ...

    def append(self, entry: AnyEntry, *, expected_leaf: str | UnsetType | None = UNSET,
               on_leaf: bool = False) -> None:
        """Validate and durably store one entry; it becomes the leaf (or moves it).

        The leaf is read and the entry stored in one step under the storage's lock, so that
        an acknowledged entry is always on the branch the next context is built from:
        ``on_leaf`` stores the entry under the leaf as it is at that moment (whatever
        parent it was built with, which another thread or handle may have outdated), and
        ``expected_leaf`` refuses with ``LeafConflict`` unless the leaf is that entry then.
        """
        ...

    def get(self, entry_id: str) -> AnyEntry | None:
        """The entry with that id, or None."""
        ...

    def path(self, leaf_id: str | None) -> list[AnyEntry]:
        """Entries from the root down to ``leaf_id`` (empty for ``None``)."""
        ...

    def entries(self) -> Iterator[AnyEntry]:
        """Every entry, in append order."""
        ...

    def children(self, entry_id: str | None) -> Sequence[str]:
        """Ids of the entries whose parent is ``entry_id`` (``None``: the roots)."""
        ...

    def outline(self) -> list[Outline]:
        """Every entry's id, parent id, type tag and (for a leaf move) target, in append
        order: the shape of the tree, without reading the entries where the backend keeps
        it apart (the JSONL index, PostgreSQL's columns)."""
        ...

    def find(self, entry_type: str) -> list[AnyEntry]:
        """Every entry with that type tag (``"compaction"``), in append order."""
        ...

    def label(self, entry_id: str) -> str | None:
        """The label of an entry, or None."""
        ...

    def labels(self) -> dict[str, str]:
        """Every label in force: entry id -> label."""
        ...

    def label_holders(self, label: str) -> list[str]:
        """Every entry that holds ``label``, oldest first. More than one only in files from
        older versions or other tools (``labels()`` keeps the last); see ``LabelBook``."""
        ...

    def ambiguous_labels(self) -> dict[str, list[str]]:
        """Labels more than one entry holds: label -> entry ids, oldest first."""
        ...

    def __len__(self) -> int: ...

    def __contains__(self, entry_id: object) -> bool: ...

    def batch(self) -> AbstractContextManager[None]:
        """Group the appends made inside the block.

        PostgreSQL: one transaction, so they are stored all together or not at all. JSONL: the
        writes are buffered and synced once at the end (a crash inside the block may lose
        them, never what came before). Memory: nothing to group. Batches nest.
        """
        ...

    def delete(self) -> None:
        """Remove the session and everything stored with it (the one exception to
        append-only), then close. Refused on a read-only storage."""
        ...

    def health(self) -> StorageHealth:
        """Entry count, size, and lines set aside; see ``StorageHealth``."""
        ...

    def close(self) -> None:
        """Release the file, lock or connection; further writes are refused."""
        ...


def check_session_id(session_id: str) -> str:
    """``session_id`` if it can be stored (text that UTF-8 can encode), else
    ``InvalidArgument``: a lone surrogate (from undecodable bytes or a broken escape) would
    fail later, inside a write, with a raw UnicodeEncodeError."""
    if not isinstance(session_id, str) or not session_id:
        raise InvalidArgument(f"a session id must be a non-empty string, got {session_id!r}")
    try:
        session_id.encode("utf-8")
    except UnicodeEncodeError as e:
        raise InvalidArgument(f"session id {session_id!r} is not valid text (character "
                              f"{e.start} is a lone surrogate, which UTF-8 cannot store); "
                              "use an id made of valid characters") from None
    return session_id


def anchored(entry: AnyEntry) -> bool:
    """A branch summary's parent is its ``from_id`` by definition: never re-parent it."""
    return isinstance(entry, BranchSummaryEntry) and entry.from_id == entry.parent_id


def with_parent(entry: AnyEntry, parent: str | None) -> AnyEntry:
    """A copy of ``entry`` with another parent (unknown fields kept)."""
    data = to_dict(entry)
    data["parent_id"] = parent
    copy = from_dict(data)
    assert not isinstance(copy, SessionHeader)
    return copy


def check_header(header: SessionHeader) -> SessionHeader:
    """``header`` if a session can be created with it; ``InvalidArgument`` naming the field
    otherwise (a wrong-typed field, JSON beyond the limits): every backend writes the header
    as it is, and one its reader refuses is no session."""
    if not isinstance(header, SessionHeader):
        raise InvalidArgument(f"a session is created with a SessionHeader, got "
                              f"{type(header).__name__}")
    if (problem := line_problem(header)) is not None:
        raise InvalidArgument(f"the session header cannot be stored: {problem}")
    return header


def check_refs(eid: str, parent: object, leaf_target: object, location: str,
               line: int | None = None) -> None:
    """``InvalidEntry`` unless the entry's parent and leaf target are ids or None: another
    value would be looked up among the ids (a ``TypeError`` for a list) or written as a
    line no reader takes; the fast path of ``line_problem`` does not look at them."""
    for name, ref in (("parent_id", parent), ("target_id", leaf_target)):
        if ref is not None and not isinstance(ref, str):
            raise InvalidEntry(f"entry {eid!r} cannot be stored: `{name}` must be str or "
                               f"None, got {type(ref).__name__}", path=location, line=line)


def check_expected_leaf(expected_leaf: object) -> None:
    """``InvalidArgument`` unless ``expected_leaf`` is an entry id, None (an empty session)
    or left out: any other value would never equal the leaf, a ``LeafConflict`` that no
    retry could settle."""
    if not isinstance(expected_leaf, UnsetType | str | None):
        raise InvalidArgument(f"expected_leaf must be an entry id (str) or None, got "
                              f"{type(expected_leaf).__name__}")


def settle_parent(entry: AnyEntry, leaf: str | None, *, location: str,
                  expected_leaf: str | UnsetType | None, on_leaf: bool) -> AnyEntry:
    """The entry as it is to be stored under the current ``leaf``; call with the storage's
    lock held, so that the leaf cannot move between this check and the append.

    ``LeafConflict`` unless the leaf is ``expected_leaf`` (when given); with ``on_leaf``,
    a copy under ``leaf`` if the entry was built under an older one.
    """
    check_expected_leaf(expected_leaf)
    if not isinstance(expected_leaf, UnsetType) and leaf != expected_leaf:
        raise LeafConflict(f"the leaf is {leaf!r}, not the expected {expected_leaf!r}: "
                           "another write came first; read the new leaf and retry",
                           path=location)
    if on_leaf and entry.parent_id != leaf and not anchored(entry):
        return with_parent(entry, leaf)
    return entry


class LabelBook:
    """The labels in force, from a session's label entries in append order.

    A label names one entry. ``Session.set_label`` moves a label by first clearing it on the
    entry that holds it, so a file written this way never has two holders of one label.
    Files from older versions or other tools may: there the entry that got the label last
    keeps it (``current``), and ``ambiguous()`` lists every entry that holds it.
    """

    def __init__(self) -> None:
        self.current: dict[str, str] = {}  # entry id -> label, one entry per label
        self._label_of: dict[str, str] = {}  # entry id -> label, as its label entries say
        self._holders: dict[str, dict[str, None]] = {}  # label -> entry ids, oldest first

    def apply(self, target: str, label: str | None) -> None:
        """A label entry: ``label`` on ``target`` (``None`` or ``""`` clears its label)."""
        old = self._label_of.pop(target, None)
        if old is not None:
            holders = self._holders[old]
            del holders[target]
            if self.current.get(target) == old:
                del self.current[target]
                if holders:  # the holder before it still has the label
                    self.current[next(reversed(holders))] = old
            if not holders:
                del self._holders[old]
        if label:
            self._label_of[target] = label
            holders = self._holders.setdefault(label, {})
            if holders:
                self.current.pop(next(reversed(holders)), None)
            holders[target] = None
            self.current[target] = label

    def copy(self) -> LabelBook:
        """An independent copy (to restore after a rolled-back batch)."""
        other = LabelBook()
        other.current = dict(self.current)
        other._label_of = dict(self._label_of)
        other._holders = {label: dict(h) for label, h in self._holders.items()}
        return other

    def assigned(self) -> dict[str, str]:
        """Every entry's label as its label entries say (an ambiguous label on several)."""
        return dict(self._label_of)

    def holders(self, label: str) -> list[str]:
        """Every entry that holds ``label``, oldest first (more than one: ambiguous)."""
        return list(self._holders.get(label, ()))

    def ambiguous(self) -> dict[str, list[str]]:
        """Labels held by more than one entry: label -> entry ids, oldest first (the last
        is the one ``current`` keeps)."""
        return {label: list(h) for label, h in self._holders.items() if len(h) > 1}


def bookkeeping(entry: AnyEntry) -> tuple[str, str | None, str | None]:
    """What the tree's bookkeeping needs of an entry: its type tag, the entry a label or
    leaf move points at, and a label's text or a session name."""
    if isinstance(entry, LeafEntry):
        return "leaf", entry.target_id, None
    if isinstance(entry, LabelEntry):
        return "label", entry.target_id, entry.label
    if isinstance(entry, SessionInfoEntry):
        return "session_info", None, entry.name
    return entry.type, None, None


Outline = tuple[str, str | None, str, str | None]
"""An entry's place in the tree: its id, parent id, type tag, and a leaf move's target."""

Span = tuple[int, int, int]  # where an entry's line is in its file: offset, length, CRC-32


class TreeIndex:
    """Entries by id with parent links, labels, name and leaf: the state every backend derives.

    ``add`` is the single place where the tree's rules are checked: unique ids, parents that
    exist, leaf moves to entries that exist. This one keeps the entries in memory;
    ``FileTree`` (JSONL) keeps only where they are in the file.
    """

    wants_spans = False  # whether ``add`` needs each entry's place in its file

    def __init__(self, header: SessionHeader, location: str) -> None:
        self.header = header
        self.location = location
        self._stored: dict[str, AnyEntry] = {}
        self.by_id: Mapping[str, AnyEntry] = self._stored
        self.label_book = LabelBook()
        self.labels: dict[str, str] = self.label_book.current
        self.name: str | None = None
        self.leaf_id: str | None = None
        self._children: dict[str | None, list[str]] | None = None

    def check(self, entry: AnyEntry, line: int | None = None, *,
              forward_parent_ok: bool = False) -> None:
        """Raise ``SessionError`` if ``entry`` cannot be appended to this tree.

        ``forward_parent_ok`` lets a loader accept a parent that appears later in the file;
        ``verify_links`` checks those at the end.
        """
        self.check_place(entry.id, entry.parent_id,
                         entry.target_id if isinstance(entry, LeafEntry) else None, line,
                         forward_parent_ok=forward_parent_ok)
        problem = line_problem(entry)
        if problem is not None:
            raise InvalidEntry(f"entry {entry.id!r} cannot be stored: {problem}",
                               path=self.location, line=line)

    def check_place(self, eid: str, parent: str | None, leaf_target: str | None,
                    line: int | None = None, *, forward_parent_ok: bool = False) -> None:
        """``check``'s rules of the tree, for an entry known by its id, its parent and (a
        leaf move) its target: the id is new, the parent and the target exist."""
        if not isinstance(eid, str) or not eid:
            raise InvalidEntry("entry id must be a non-empty string",
                               path=self.location, line=line)
        check_refs(eid, parent, leaf_target, self.location, line)  # looked up next
        known = self.known_ids()
        if eid in known:
            raise DuplicateId(
                f"entry id {eid!r} is already used in this session; every id must be unique "
                "(run `contextree repair` to quarantine the duplicate)",
                path=self.location, line=line,
            )
        if parent is not None and parent not in known and not forward_parent_ok:
            raise MissingParent(
                f"entry {eid!r} has parent {parent!r}, which is not an earlier entry of this "
                "session (run `contextree repair` to quarantine entries with no parent)",
                path=self.location, line=line,
            )
        if leaf_target is not None and leaf_target not in known:
            raise MissingParent(
                f"leaf entry {eid!r} moves to {leaf_target!r}, which does not exist",
                path=self.location, line=line,
            )

    def known_ids(self) -> Container[str]:
        """The ids in the tree, as fast a container as the tree has (for ``check``)."""
        return self._stored

    def add(self, entry: AnyEntry, span: Span | None = None) -> None:
        """Index an entry that ``check`` accepted (or that a trusted loader verified);
        ``span`` is where its line is, for trees that read entries from a file."""
        kind, target, text = bookkeeping(entry)
        self._store(entry, span, kind, target, text)
        self._account(entry.id, entry.parent_id, kind, target, text)

    def _store(self, entry: AnyEntry, span: Span | None, kind: str, target: str | None,
               text: str | None) -> None:
        self._stored[entry.id] = entry

    def _account(self, entry_id: str, parent_id: str | None, kind: str, target: str | None,
                 text: str | None) -> None:
        if kind == "leaf":
            self.leaf_id = target
        else:
            self.leaf_id = entry_id
            if kind == "label":
                assert target is not None
                self.label_book.apply(target, text)
            elif kind == "session_info" and text is not None:
                self.name = text
        if self._children is not None:
            self._children.setdefault(parent_id, []).append(entry_id)

    def path(self, leaf_id: str | None) -> list[AnyEntry]:
        """Entries from the root down to ``leaf_id``; refuses missing entries and cycles."""
        out: list[AnyEntry] = []
        by_id = self.by_id
        current = leaf_id
        limit = len(by_id)
        while current is not None:
            entry = by_id.get(current)
            if entry is None:
                raise EntryNotFound(f"entry {current!r} is not in this session",
                                   path=self.location)
            out.append(entry)
            current = entry.parent_id
            if len(out) > limit:
                raise ParentCycle(f"parent links from {leaf_id!r} form a cycle",
                                   path=self.location)
        out.reverse()
        return out

    def children(self, entry_id: str | None) -> list[str]:
        """Ids of the children of ``entry_id`` (built on first use)."""
        if self._children is None:
            kids: dict[str | None, list[str]] = {}
            for eid, parent in self.links():
                kids.setdefault(parent, []).append(eid)
            self._children = kids
        return self._children.get(entry_id, [])

    def iter_entries(self) -> Iterator[AnyEntry]:
        """Every entry in append order (of the entries there when this is called)."""
        return iter(list(self._stored.values()))

    def links(self) -> Iterator[tuple[str, str | None]]:
        """Every entry's id and parent id, in append order."""
        return ((e.id, e.parent_id) for e in self._stored.values())

    def outline(self) -> list[Outline]:
        """Every entry's id, parent id, type tag and leaf-move target, in append order."""
        return [(e.id, e.parent_id, e.type, e.target_id if isinstance(e, LeafEntry) else None)
                for e in list(self._stored.values())]

    def parent_of(self, entry_id: str) -> str | None:
        """The parent id of an indexed entry."""
        return self.by_id[entry_id].parent_id

    def find(self, entry_type: str) -> list[AnyEntry]:
        """Every indexed entry with that type tag."""
        return [e for e in self.by_id.values() if e.type == entry_type]


def verify_links(index: TreeIndex, pending: list[tuple[AnyEntry, int | None]]) -> None:
    """Check entries whose parent came later in the file: the parent must exist, no cycles.

    Entries whose parent precedes them (the normal case) cannot be part of a cycle, so only
    these few need a walk.
    """
    by_id = index.by_id
    for entry, line in pending:
        if entry.parent_id not in by_id:
            raise MissingParent(
                f"entry {entry.id!r} has parent {entry.parent_id!r}, which does not exist "
                "(run `contextree repair` to quarantine entries with no parent)",
                path=index.location, line=line,
            )
        seen = {entry.id}
        current = entry.parent_id
        while current is not None:
            if current in seen:
                raise ParentCycle(
                    f"entry {entry.id!r} is its own ancestor (parent links form a cycle); "
                    "run `contextree repair` to quarantine the cycle",
                    path=index.location, line=line,
                )
            seen.add(current)
            current = index.parent_of(current) if current in by_id else None


class IndexedStorage:
    """Read side shared by the backends that keep a ``TreeIndex`` in memory."""

    _readonly = False

    def __init__(self, index: TreeIndex) -> None:
        self._index = index

    @property
    def header(self) -> SessionHeader:
        return self._index.header

    @property
    def leaf_id(self) -> str | None:
        return self._index.leaf_id

    @property
    def name(self) -> str | None:
        return self._index.name

    @property
    def location(self) -> str:
        return self._index.location

    @property
    def readonly(self) -> bool:
        return self._readonly

    def get(self, entry_id: str) -> AnyEntry | None:
        return self._index.by_id.get(entry_id)

    def path(self, leaf_id: str | None) -> list[AnyEntry]:
        return self._index.path(leaf_id)

    def entries(self) -> Iterator[AnyEntry]:
        return self._index.iter_entries()

    def children(self, entry_id: str | None) -> Sequence[str]:
        return tuple(self._index.children(entry_id))

    def outline(self) -> list[Outline]:
        return self._index.outline()

    def find(self, entry_type: str) -> list[AnyEntry]:
        return self._index.find(entry_type)

    def label(self, entry_id: str) -> str | None:
        return self._index.labels.get(entry_id)

    def labels(self) -> dict[str, str]:
        return dict(self._index.labels)

    def label_holders(self, label: str) -> list[str]:
        """Every entry that holds ``label``, oldest first (more than one only in files
        from older versions or other tools; ``labels()`` keeps the last)."""
        return self._index.label_book.holders(label)

    def ambiguous_labels(self) -> dict[str, list[str]]:
        """Labels more than one entry holds: label -> entry ids, oldest first."""
        return self._index.label_book.ambiguous()

    def __len__(self) -> int:
        return len(self._index.by_id)

    def __contains__(self, entry_id: object) -> bool:
        return entry_id in self._index.by_id

    def close(self) -> None:
        pass
