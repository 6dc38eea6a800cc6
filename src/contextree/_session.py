"""``Session``: the user-facing API over a storage backend.

Every ``append_*`` builds one entry whose parent is the current leaf, stores it durably and
returns its id. Navigation (``move_to``) and naming are entries too, so reopening a file
restores exactly where the session was. A call that would change nothing (a label the entry
already has, a move to where the leaf is) writes nothing.

Where a method takes an entry, it takes what the CLI does: an id, a unique id prefix or a
label (``resolve``); ``get_entry`` and ``label_of`` look up exact ids.
"""

from __future__ import annotations

import bisect
import contextlib
import itertools
import operator
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import msgspec
from msgspec import UNSET, UnsetType

from ._context import Projector, SessionContext, build_context
from ._files import storable_path
from ._messages import Message, Part, Usage
from .entries import (
    CALLS_TYPE,
    ActiveToolsChangeEntry,
    AnyEntry,
    BranchSummaryEntry,
    CompactionEntry,
    CompactionReceipt,
    ContextEditEntry,
    CustomEntry,
    CustomMessageEntry,
    Entry,
    LabelEntry,
    LeafEntry,
    MessageEntry,
    ModelChangeEntry,
    RequestEntry,
    SessionHeader,
    SessionInfoEntry,
    ThinkingLevelChangeEntry,
    new_id,
    now,
    recorded_system,
    request_digest,
    wrong_type,
)
from .errors import (
    DuplicateId,
    EntryNotFound,
    InvalidArgument,
    InvalidEntry,
    LeafConflict,
    SessionExists,
    SessionNotFound,
    StorageFailure,
)
from .storage._backends import Target, create_storage, open_storage, resolve
from .storage._base import (
    HIDDEN_IN_TREE,
    HIDDEN_TYPES,
    LabelBook,
    Storage,
    StorageHealth,
    check_session_id,
)
from .storage._filetree import FileTree
from .storage._jsonl import JsonlStorage
from .storage._memory import MemoryStorage
from .tokens import TokenCounter

if TYPE_CHECKING:
    from ._overflow import OverflowStore
    from ._stats import SessionStats
    from .compaction import CompactionLadder, CompactionResult
    from .models._base import Model


E = TypeVar("E")
Matched = Literal["id", "label", "prefix"]

ExpectedLeaf = str | None | UnsetType
"""``expected_leaf=``: the entry the leaf must be for a write to go ahead (``None``: an empty
session or a leaf before the first entry); unset, no check."""


class TreeNode:
    """One entry in ``Session.tree()``, with its label and children (oldest first).

    ``id``, ``parent_id`` and ``type`` are known from the start; ``entry`` is read when it
    is used, and the nodes of ``children`` are made when they are first asked for, so a
    tree of a big session is built from its outline and only what is looked at costs
    anything (a folded ``tree`` of 97,000 entries touches its branch and the branch's
    children)."""

    __slots__ = ("_entry", "_kids", "_load", "_pos", "_shape", "id", "is_leaf", "label",
                 "on_branch", "parent_id", "type")

    def __init__(self, entry: AnyEntry | None = None, label: str | None = None,
                 children: list[TreeNode] | None = None, on_branch: bool = False,
                 is_leaf: bool = False, *, entry_id: str | None = None,
                 parent_id: str | None = None, entry_type: str | None = None,
                 load: Callable[[str], AnyEntry] | None = None) -> None:
        if entry is not None:
            entry_id, parent_id, entry_type = entry.id, entry.parent_id, entry.type
        if entry_id is None or entry_type is None or (entry is None and load is None):
            raise InvalidArgument("a TreeNode needs its entry, or its id, type and a loader")
        self._entry, self._load = entry, load
        self.id, self.parent_id, self.type = entry_id, parent_id, entry_type
        self.label = label
        self._kids: list[TreeNode] | None = [] if children is None else children
        self._shape: _TreeShape | None = None
        self._pos = -1
        self.on_branch = on_branch  # on the path from the root to the current leaf
        self.is_leaf = is_leaf

    @property
    def children(self) -> list[TreeNode]:
        """The nodes directly under this one, oldest first (made on first use)."""
        kids = self._kids
        if kids is None:
            assert self._shape is not None
            kids = self._kids = self._shape.children(self._pos)
        return kids

    @children.setter
    def children(self, value: list[TreeNode]) -> None:
        self._kids = value

    @property
    def size(self) -> int:
        """Entries in this node's subtree, itself included: from the tree's columns when
        ``Session.tree()`` made the node (no node is made for it), else counted."""
        if self._shape is not None:
            return self._shape.size(self._pos)
        count, stack = 0, [self]
        while stack:
            node = stack.pop()
            count += 1
            stack.extend(node.children)
        return count

    @property
    def entry(self) -> AnyEntry:
        """The entry itself, read when asked for and not kept by the node (the storage's
        cache keeps what was read recently): a tree of a big session stays small."""
        if self._entry is not None:
            return self._entry
        assert self._load is not None
        return self._load(self.id)

    def __repr__(self) -> str:
        return (f"TreeNode(id={self.id!r}, type={self.type!r}, label={self.label!r}, "
                f"children={len(self.children)}, on_branch={self.on_branch}, "
                f"is_leaf={self.is_leaf})")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TreeNode):
            return NotImplemented
        return (self.id, self.label, self.on_branch, self.is_leaf, self.children) == (
            other.id, other.label, other.on_branch, other.is_leaf, other.children)

    __hash__ = None  # type: ignore[assignment]  # mutable, like the dataclass it replaces


_HIDDEN = -3  # the parent of a hidden entry in ``_TreeShape``: neither a root nor a child


class _TreeShape:
    """The entries of a session as flat columns: position ``k`` (the entry's place in
    append order) has an id, a type and the position of its parent (-1: a root, also when
    the parent is hidden or missing; leaf moves are hidden, in no one's children).
    ``TreeNode``s are made from it only when reached; subtree sizes come from one pass
    over the columns."""

    def __init__(self, ids: Sequence[str], types: Sequence[str], parents: list[int],
                 parent_id: Callable[[int], str | None], labels: Mapping[str, str],
                 on_branch: set[str], leaf: str | None, load: Callable[[str], AnyEntry]) -> None:
        """``parents``: each entry's parent as a position (-1: none, or not in the session);
        ``parent_id``: the parent id a position's entry names."""
        hidden = [k for k, t in enumerate(types) if t in HIDDEN_TYPES]
        if hidden:
            gone = set(hidden)
            parents = [-1 if p in gone else p for p in parents]
            for k in hidden:
                parents[k] = _HIDDEN
        self.ids, self.types, self.parents, self.parent_id = ids, types, parents, parent_id
        # Positions grouped by parent, each group in append order (the sort is stable):
        # the children of ``p`` are ``by_parent[bisect_left(sorted_parents, p):...]``.
        self.by_parent = sorted(range(len(ids)), key=parents.__getitem__)
        self.sorted_parents = list(map(parents.__getitem__, self.by_parent))
        self.roots = self.kids(-1)
        self.labels, self.on_branch, self.leaf, self.load = labels, on_branch, leaf, load
        self._sizes: list[int] | None = None

    @classmethod
    def of(cls, storage: Storage, labels: Mapping[str, str], on_branch: set[str],
           leaf: str | None, load: Callable[[str], AnyEntry]) -> _TreeShape:
        """The shape of ``storage``'s tree: from a session file's columns as they are (its
        parents are entry numbers already), else from the outline (whole-column operations:
        no Python loop an entry but the few above)."""
        tree = FileTree.of(storage)
        if tree is not None:
            with tree.lock:
                ids, types, numbers = list(tree.ids), list(tree.types), tree.parents.tolist()
            if min(numbers, default=-1) >= -1:  # every parent resolved (a loaded tree)

                def parent_of(k: int) -> str | None:
                    p = numbers[k]
                    return None if p < 0 else ids[p]

                return cls(ids, types, list(numbers), parent_of, labels, on_branch, leaf, load)
        outline = storage.outline()
        ids, parent_ids, types = (list(map(operator.itemgetter(c), outline)) for c in range(3))
        pos = dict(zip(ids, range(len(ids)), strict=True))
        parents: list[int] = list(map(pos.get, parent_ids, itertools.repeat(-1)))
        return cls(ids, types, parents, parent_ids.__getitem__, labels, on_branch, leaf, load)

    def kids(self, k: int) -> list[int]:
        """The positions whose parent is ``k`` (-1: the roots), oldest first."""
        lo = bisect.bisect_left(self.sorted_parents, k)
        hi = bisect.bisect_right(self.sorted_parents, k, lo)
        return self.by_parent[lo:hi]

    def node(self, k: int) -> TreeNode:
        eid = self.ids[k]
        node = TreeNode(label=self.labels.get(eid), on_branch=eid in self.on_branch,
                        is_leaf=eid == self.leaf, entry_id=eid, parent_id=self.parent_id(k),
                        entry_type=self.types[k], load=self.load)
        node._shape, node._pos, node._kids = self, k, None
        return node

    def children(self, k: int) -> list[TreeNode]:
        return [self.node(c) for c in self.kids(k)]

    def size(self, k: int) -> int:
        sizes = self._sizes
        if sizes is None:
            sizes = self._sizes = self._subtree_sizes()
        return sizes[k]

    def _subtree_sizes(self) -> list[int]:
        """Entries under each position, itself included: children before their parents, in
        reverse append order when every parent comes first (as writers write), else in the
        reverse of a walk from the roots (a parent later in the file)."""
        parents = self.parents
        n = len(parents)
        order: Iterable[int]
        if any(map(operator.ge, parents, range(n))):
            walk, stack = [], list(self.roots)
            while stack:
                k = stack.pop()
                walk.append(k)
                stack.extend(self.kids(k))
            order = reversed(walk)
        else:
            order = range(n - 1, -1, -1)
        sizes = [1] * n
        for k in order:
            p = parents[k]
            if p >= 0:
                sizes[p] += sizes[k]
        return sizes


class Session:
    """A conversation as a tree of entries, with a current leaf."""

    def __init__(self, storage: Storage, *, projectors: Mapping[str, Projector] | None = None):
        self.storage = storage
        self.projectors: dict[str, Projector] = dict(projectors or {})

    # -- opening -------------------------------------------------------------------------
    @classmethod
    def create(
        cls,
        target: Target | Storage,
        *,
        cwd: str | None = None,
        session_id: str | None = None,
        metadata: dict[str, Any] | None = None,
        durable: bool = True,
    ) -> Session:
        """Create a new session: a JSONL file (``SessionExists`` if there is one), or in
        PostgreSQL for a ``postgresql://host/db`` URL (its ``#SESSION_ID``, if any, is the id).

        A ready ``Storage`` already holds a session: ``Session.open(storage)`` uses it, and
        here it is refused with ``SessionExists``.
        """
        if not isinstance(target, str | os.PathLike):
            storage = open_storage(target)  # refuses what is not a storage
            raise SessionExists(f"this storage already holds session {storage.header.id!r}; "
                                "use it with Session.open(storage)", path=storage.location)
        address = resolve(target)
        if cwd is not None and not isinstance(cwd, str | os.PathLike):
            raise InvalidArgument(f"cwd must be a path (str or os.PathLike) or None, got "
                                  f"{type(cwd).__name__}")
        header = SessionHeader(
            id=check_session_id(session_id) if session_id is not None
            else address.session_id or new_session_id(),
            created_at=now(),
            cwd=storable_path(cwd if cwd is not None else os.getcwd()),
            metadata=metadata,
        )
        return cls(create_storage(address, header, durable=durable))

    @classmethod
    def open(
        cls,
        target: Target | Storage,
        *,
        readonly: bool = False,
        durable: bool = True,
    ) -> Session:
        """Open a session file, a ``postgresql://host/db#SESSION_ID`` URL, or wrap a ready
        ``Storage`` (say a ``PostgresStorage`` on the application's own pool). Read-only
        sessions need no lock and change nothing."""
        return cls(open_storage(target, readonly=readonly, durable=durable))

    @classmethod
    def open_or_create(
        cls,
        target: Target | Storage,
        *,
        cwd: str | None = None,
        session_id: str | None = None,
        metadata: dict[str, Any] | None = None,
        durable: bool = True,
    ) -> Session:
        """Open the session at ``target`` (a file, a URL with ``#SESSION_ID``, or a ready
        ``Storage``), creating it first if there is none; safe when several processes race
        to create it. ``cwd``, ``session_id`` and ``metadata`` apply only when it is created."""
        try:
            return cls.open(target, durable=durable)
        except SessionNotFound:
            pass
        try:
            return cls.create(target, cwd=cwd, session_id=session_id, metadata=metadata,
                              durable=durable)
        except SessionExists:
            return cls.open(target, durable=durable)  # another process created it first

    @staticmethod
    def delete(target: Target | Storage, *, store: OverflowStore | None = None) -> int:
        """Delete a session (a file with its quarantine file, a URL, or a ready ``Storage``)
        and the tool outputs it spilled to the overflow store (``store``, default the
        user's); returns how many spill files went. A file open for writing elsewhere is
        not deleted (``SessionLocked``)."""
        from ._overflow import OverflowStore

        storage = open_storage(target)  # a file takes the writer's lock: nobody writes
        session_id = storage.header.id
        try:
            storage.delete()
        finally:
            if storage is not target:
                storage.close()
        return (store or OverflowStore.default()).delete_session(session_id)

    @classmethod
    def in_memory(cls, *, cwd: str | None = None, session_id: str | None = None) -> Session:
        """A session that lives only in this process."""
        header = SessionHeader(id=session_id or new_session_id(), created_at=now(), cwd=cwd)
        return cls(MemoryStorage(header))

    def close(self) -> None:
        """Close the storage (a file's writer lock is released); the session is then unusable."""
        self.storage.close()

    def __enter__(self) -> Session:
        """``with Session.open(...) as s:`` closes the session at the end of the block."""
        return self

    def __exit__(self, *exc: object) -> None:
        """Close the session."""
        self.close()

    @contextlib.contextmanager
    def batch(self) -> Iterator[Session]:
        """Group appends (see ``Storage.batch``): on PostgreSQL one transaction, all or
        nothing; on JSONL one sync to disk at the end."""
        with self.storage.batch():
            yield self

    # -- identity ------------------------------------------------------------------------
    @property
    def id(self) -> str:
        """The session's id (from its header)."""
        return self.storage.header.id

    @property
    def header(self) -> SessionHeader:
        """The header line: id, creation time, working directory, metadata, fork origin."""
        return self.storage.header

    @property
    def leaf_id(self) -> str | None:
        """The current leaf: the entry new appends go under (``None``: before the first)."""
        return self.storage.leaf_id

    @property
    def name(self) -> str | None:
        """The display name set with ``set_name``, or ``None``."""
        return self.storage.name or None

    @property
    def location(self) -> str:
        """Where the session is stored: a file path, a URL, or ``"memory"``."""
        return self.storage.location

    # -- appending -----------------------------------------------------------------------
    def _append(self, cls: type[Any], parent_id: str | None = None, *,
                expected_leaf: ExpectedLeaf = UNSET, **fields: Any) -> str:
        """Build an entry under the leaf (or ``parent_id``) with a fresh id and store it."""
        on_leaf = parent_id is None
        parent = self.storage.leaf_id if on_leaf else parent_id
        return self._store_new(cls(new_id(), parent, now(), **fields), expected_leaf, on_leaf)

    def _store_new(self, entry: AnyEntry, expected_leaf: ExpectedLeaf, on_leaf: bool) -> str:
        """Store an entry made with a fresh id; returns the id.

        Every backend refuses a duplicate id, so a random id that happens to be taken is
        replaced and tried again rather than checked beforehand (one round trip fewer on a
        database).
        """
        tries = 8
        while True:
            try:
                self.storage.append(entry, expected_leaf=expected_leaf, on_leaf=on_leaf)
            except DuplicateId:
                tries -= 1
                if not tries:  # pragma: no cover - 2**-256 odds
                    raise StorageFailure("could not find an unused entry id after 8 tries",
                                         path=self.location) from None
                assert isinstance(entry, Entry)  # made by this session: a known type
                entry = entry.replace(id=new_id())
                continue
            return entry.id

    def _check_leaf(self, expected_leaf: ExpectedLeaf) -> None:
        if not isinstance(expected_leaf, UnsetType) and self.leaf_id != expected_leaf:
            raise LeafConflict(f"the leaf is {self.leaf_id!r}, not the expected "
                               f"{expected_leaf!r}: another write came first; read the new "
                               "leaf and retry", path=self.location)

    def append(self, entry: AnyEntry, *, expected_leaf: ExpectedLeaf = UNSET) -> str:
        """Append a ready-made entry (its id, parent and timestamp are used as given)."""
        self.storage.append(entry, expected_leaf=expected_leaf)
        return entry.id

    def append_message(self, message: Message | Mapping[str, Any], *,
                       expected_leaf: ExpectedLeaf = UNSET) -> str:
        """Append a message (a ``Message`` or its dict form) under the leaf; returns its id."""
        if not isinstance(message, Message):
            try:
                message = Message.from_dict(dict(message))
            except msgspec.ValidationError as e:  # what the entry's check says, in its words
                raise InvalidEntry(f"the message cannot be stored: {wrong_type(e)}",
                                   path=self.location) from None
        entry = MessageEntry(new_id(), self.storage.leaf_id, now(), message=message)
        return self._store_new(entry, expected_leaf, True)

    def append_thinking_level_change(self, thinking_level: str, *,
                                     expected_leaf: ExpectedLeaf = UNSET) -> str:
        """Record a new thinking level (in force from here on in ``build_context``)."""
        return self._append(ThinkingLevelChangeEntry, thinking_level=thinking_level,
                            expected_leaf=expected_leaf)

    def append_model_change(self, provider: str, model_id: str, *,
                            expected_leaf: ExpectedLeaf = UNSET) -> str:
        """Record a switch to another model (in force from here on)."""
        return self._append(ModelChangeEntry, provider=provider, model_id=model_id,
                            expected_leaf=expected_leaf)

    def append_active_tools_change(self, active_tool_names: Sequence[str], *,
                                   expected_leaf: ExpectedLeaf = UNSET) -> str:
        """Record the set of tools offered to the model from here on."""
        return self._append(ActiveToolsChangeEntry, active_tool_names=list(active_tool_names),
                            expected_leaf=expected_leaf)

    def append_request(
        self, system: str | Sequence[str] | None = None,
        tools: Sequence[Mapping[str, Any]] | None = None,
        params: Mapping[str, Any] | None = None, *, stream: bool = False,
        expected_leaf: ExpectedLeaf = UNSET,
    ) -> str | None:
        """Record what model calls send from here on besides the messages: the system
        prompt (the text of the leading system message, or the texts of several, kept as a
        list), the tool schemas, the request parameters. When the request in force on the
        branch has the same content nothing is written and ``None`` is returned; a request
        equal to an earlier one on the branch is written as a reference to it
        (``RequestEntry.same_as``)."""
        system = recorded_system(system)
        tool_list = [dict(t) for t in tools] if tools else None
        param_map = dict(params) if params else None
        digest = request_digest(system, tool_list, param_map, stream)
        earlier: str | None = None
        in_force: str | None = None
        for entry in reversed(self.branch()):
            if not isinstance(entry, RequestEntry):
                continue
            if in_force is None:
                in_force = entry.sha256
            if entry.sha256 == digest and entry.same_as is None:
                earlier = entry.id
                break
        if in_force == digest:
            self._check_leaf(expected_leaf)  # nothing to write, but the caller's view is checked
            return None
        if earlier is not None:
            return self._append(RequestEntry, sha256=digest, same_as=earlier,
                                expected_leaf=expected_leaf)
        return self._append(RequestEntry, sha256=digest, system=system, tools=tool_list,
                            params=param_map, stream=stream, expected_leaf=expected_leaf)

    def append_compaction(
        self,
        *,
        summary: str,
        first_kept_entry_id: str | None,
        tokens_before: int,
        tokens_after: int | None = None,
        retained_tail: Sequence[Message] | None = None,
        cleared: Mapping[str, str] | None = None,
        pinned: Sequence[str] | None = None,
        details: Any = None,
        usage: Usage | None = None,
        from_hook: bool = False,
        receipt: CompactionReceipt | None = None,
        expected_leaf: ExpectedLeaf = UNSET,
    ) -> str:
        """Record a compaction: from here on the model sees ``summary`` and the kept entries.

        ``first_kept_entry_id`` must be on the current branch; ``cleared`` maps tool-result
        entry ids to the placeholder text shown instead of their content. ``Session.compact``
        plans one and calls this.
        """
        given = [*(cleared or ()), *(pinned or ())]
        for eid in [first_kept_entry_id, *given] if first_kept_entry_id is not None else given:
            if not isinstance(eid, str):
                raise InvalidArgument(f"the entries a compaction keeps, clears or pins are "
                                      f"given by their ids (str), got {_shown(eid)}",
                                      path=self.location)
        branch_ids = {e.id for e in self.branch()}
        if first_kept_entry_id is not None and first_kept_entry_id not in branch_ids:
            raise InvalidArgument(
                f"first_kept_entry_id {first_kept_entry_id!r} is not on the current branch; "
                "pass an entry from branch() (or None to keep nothing before the compaction)",
                path=self.location,
            )
        for eid in [*(cleared or ()), *(pinned or ())]:
            if eid not in branch_ids:
                raise InvalidArgument(f"cleared or pinned entry {eid!r} is not "
                                   "on the current branch", path=self.location)
        return self._append(
            CompactionEntry,
            summary=summary,
            first_kept_entry_id=first_kept_entry_id,
            tokens_before=tokens_before,
            tokens_after=tokens_after,
            retained_tail=list(retained_tail) if retained_tail is not None else None,
            cleared=dict(cleared) if cleared else None,
            pinned=list(pinned) if pinned else None,
            details=details,
            usage=usage,
            from_hook=from_hook,
            receipt=receipt,
            expected_leaf=expected_leaf,
        )

    def append_branch_summary(
        self,
        from_id: str,
        summary: str,
        details: Any = None,
        usage: Usage | None = None,
        from_hook: bool = False,
        *,
        expected_leaf: ExpectedLeaf = UNSET,
    ) -> str:
        """A branch summary as a child of ``from_id`` (id, unique id prefix or label); it
        becomes the leaf."""
        from_id = self.resolve(from_id)
        return self._append(BranchSummaryEntry, parent_id=from_id, from_id=from_id,
                            summary=summary, details=details, usage=usage, from_hook=from_hook,
                            expected_leaf=expected_leaf)

    def append_custom(self, custom_type: str, data: Any = None, *,
                      expected_leaf: ExpectedLeaf = UNSET) -> str:
        """Append application data the model does not see (unless a projector shows it)."""
        return self._append(CustomEntry, custom_type=custom_type, data=data,
                            expected_leaf=expected_leaf)

    def append_custom_message(
        self, custom_type: str, content: str, details: Any = None, display: bool = True, *,
        expected_leaf: ExpectedLeaf = UNSET,
    ) -> str:
        """Append an application message the model sees (as a user message)."""
        return self._append(CustomMessageEntry, custom_type=custom_type, content=content,
                            details=details, display=display, expected_leaf=expected_leaf)

    def append_context_edit(
        self, target_id: str, content: str | list[Part] | None = None, *,
        expected_leaf: ExpectedLeaf = UNSET,
    ) -> str:
        """Change what an entry on the current path shows the model from here on: leave it
        out (``content=None``) or replace its content. The entry itself stays as it was, and
        other branches still see it (pi 1.x's ``context_edit``)."""
        target_id = self.resolve(target_id)
        if target_id not in {e.id for e in self.branch()}:
            raise InvalidArgument(f"entry {target_id} is not on the current path; move_to() a leaf "
                             "below it first")
        return self._append(ContextEditEntry, target_id=target_id, content=content,
                            expected_leaf=expected_leaf)

    def set_label(self, target_id: str, label: str | None, *,
                  expected_leaf: ExpectedLeaf = UNSET) -> str | None:
        """Set (or with ``None`` clear) the label of an entry (id, unique id prefix or
        label); returns the label entry's id, or ``None`` when nothing changed (the entry
        already has that label, or has none to clear) and nothing was written.

        A label names one entry: if another entry holds it, the label moves (a label entry
        clearing it there is written first, in the same batch).
        """
        if label is not None and not isinstance(label, str):
            raise InvalidArgument(f"a label must be a str (or None to clear it), got "
                                  f"{_shown(label)}", path=self.location)
        target_id = self.resolve(target_id)
        others = ([eid for eid in self.storage.label_holders(label) if eid != target_id]
                  if label else [])
        if not others and self.label_of(target_id) == label:
            self._check_leaf(expected_leaf)  # nothing to write, but the caller's view is checked
            return None
        if not others:
            return self._append(LabelEntry, target_id=target_id, label=label,
                                expected_leaf=expected_leaf)
        with self.batch():
            expected = expected_leaf
            for eid in others:
                cleared = self._append(LabelEntry, target_id=eid, label=None,
                                       expected_leaf=expected)
                expected = cleared if not isinstance(expected, UnsetType) else UNSET
            return self._append(LabelEntry, target_id=target_id, label=label,
                                expected_leaf=expected)

    def ambiguous_labels(self) -> dict[str, list[str]]:
        """Labels that more than one entry holds: label -> entry ids, oldest first.

        Only files written by older versions or other tools can have them (``set_label``
        moves a label); ``labels()``, ``label_of()`` and the CLI use the last of the ids.
        """
        return self.storage.ambiguous_labels()

    def set_name(self, name: str | None, *, expected_leaf: ExpectedLeaf = UNSET) -> str:
        """Set the session's display name; ``None`` (or ``""``) clears it.

        A clear is written as an empty name, as pi does: a ``session_info`` entry without a
        name only records other metadata and leaves the name alone.
        """
        return self._append(SessionInfoEntry, name=name or "", expected_leaf=expected_leaf)

    # -- reading entries ---------------------------------------------------------------
    def get_entry(self, entry_id: str | None) -> AnyEntry | None:
        """The entry with that id, or ``None`` (also for ``None``: a root's parent);
        ``InvalidArgument`` for an id that is not a str."""
        if entry_id is None:
            return None
        return self.storage.get(_entry_id(entry_id, self.location))

    def label_of(self, entry_id: str | None) -> str | None:
        """The label of an entry, or ``None`` (also for ``None``); ``InvalidArgument`` for
        an id that is not a str."""
        if entry_id is None:
            return None
        return self.storage.label(_entry_id(entry_id, self.location))

    def labels(self) -> dict[str, str]:
        """Every label in force: entry id -> label."""
        return self.storage.labels()

    def entries(self) -> Iterator[AnyEntry]:
        """Every entry of every branch, in append order."""
        return self.storage.entries()

    def find(self, entry_type: type[E]) -> list[E]:
        """Every entry of one type (``session.find(CompactionEntry)``), in append order."""
        config = getattr(entry_type, "__struct_config__", None)
        tag = getattr(config, "tag", None)
        if not isinstance(tag, str):
            return [e for e in self.storage.entries() if isinstance(e, entry_type)]
        return [e for e in self.storage.find(tag) if isinstance(e, entry_type)]

    def __len__(self) -> int:
        """How many entries the session holds (all branches; the header not counted)."""
        return len(self.storage)

    def __contains__(self, entry_id: object) -> bool:
        """True when an entry with that id is in the session (on any branch)."""
        return entry_id in self.storage

    def __bool__(self) -> bool:
        """Always true, also when empty: ``session or default`` must not drop a new session."""
        return True

    def health(self) -> StorageHealth:
        """How many entries, how big where it is kept, and what lines were set aside."""
        return self.storage.health()

    # -- navigation ----------------------------------------------------------------------

    def _require(self, entry_id: str) -> AnyEntry:
        entry = self.storage.get(entry_id)
        if entry is None:
            raise EntryNotFound(f"no entry {entry_id!r} in this session",
                               path=self.location)
        return entry

    def resolve(self, ref: str) -> str:
        """The id of the entry ``ref`` names: an id, a label, or the start of one id (as
        the CLI takes them). ``EntryNotFound`` when none does, or when a prefix or a label
        fits several entries (the message lists their ids)."""
        how, ids = entry_matches(self, ref)
        if len(ids) == 1:
            return ids[0]
        where = self.location
        if not ids:
            raise EntryNotFound(f"no entry {ref!r} in this session: give an entry id, the "
                                "start of one, or a label (session.tree() lists them)",
                                path=where)
        shown = ", ".join(ids[:_SHOWN_MATCHES]) + (", ..." if len(ids) > _SHOWN_MATCHES else "")
        if how == "label":
            raise EntryNotFound(f"the label {ref!r} is on {len(ids)} entries ({shown}); "
                                "pass the full id of the one you mean", path=where)
        raise EntryNotFound(f"{ref!r} is the start of {len(ids)} entry ids ({shown}); pass "
                            "more of the id, or the full id", path=where)

    def move_to(
        self, entry_id: str | None, summary: str | Mapping[str, Any] | None = None, *,
        expected_leaf: ExpectedLeaf = UNSET,
    ) -> str | None:
        """Move the leaf to ``entry_id`` (id, unique id prefix or label; ``None``: before
        the first entry). When the leaf is already there nothing is written (also with a
        ``summary``: no branch is left) and ``None`` is returned.

        With a ``summary`` (text, or a dict with ``summary``, ``details``, ``usage``,
        ``from_hook``) a branch summary entry is appended as a child of ``entry_id`` and
        becomes the leaf, in one write; its id is returned.
        """
        if entry_id is not None:
            entry_id = self.resolve(entry_id)
        if entry_id == self.leaf_id:
            self._check_leaf(expected_leaf)  # nothing to write, but the caller's view is checked
            return None
        if entry_id is not None and isinstance(self._require(entry_id), LeafEntry):
            raise InvalidArgument(f"{entry_id!r} is a leaf move, not a "
                               "point in the conversation; move to the entry it points at",
                               path=self.location)
        if summary is not None:
            if entry_id is None:
                raise InvalidArgument("a branch summary needs an entry to "
                                   "branch from; pass an entry id", path=self.location)
            if isinstance(summary, str):
                return self.append_branch_summary(entry_id, summary,
                                                  expected_leaf=expected_leaf)
            usage = summary.get("usage")
            if isinstance(usage, Mapping):
                usage = Usage(**usage)
            return self.append_branch_summary(
                entry_id,
                str(summary["summary"]),
                details=summary.get("details"),
                usage=usage,
                from_hook=bool(summary.get("from_hook", False)),
                expected_leaf=expected_leaf,
            )
        self._append(LeafEntry, target_id=entry_id, expected_leaf=expected_leaf)
        return None

    def branch(self, leaf_id: str | None = None) -> list[AnyEntry]:
        """Entries from the root to ``leaf_id`` (id, unique id prefix or label; default:
        the current leaf)."""
        return self.storage.path(self.leaf_id if leaf_id is None else self.resolve(leaf_id))

    def children(self, entry_id: str | None) -> list[AnyEntry]:
        """The entries directly under ``entry_id`` (id, unique id prefix or label; ``None``:
        the roots), oldest first; leaf moves and other entries hidden in the tree are left
        out."""
        if entry_id is not None:
            entry_id = self.resolve(entry_id)
        out: list[AnyEntry] = []
        for cid in self.storage.children(entry_id):
            e = self.storage.get(cid)
            if e is not None and not isinstance(e, HIDDEN_IN_TREE):
                out.append(e)
        return out

    def tree(self) -> list[TreeNode]:
        """The whole entry tree (roots first), without recursion; leaf moves hidden. Nodes
        below the roots are made as they are reached (``TreeNode.children``)."""
        leaf = self.leaf_id
        on_branch = {e.id for e in self.branch()} if leaf is not None else set()
        shape = _TreeShape.of(self.storage, self.storage.labels(), on_branch, leaf,
                              self._entry_for_tree)
        return [shape.node(k) for k in shape.roots]

    def _entry_for_tree(self, entry_id: str) -> AnyEntry:
        entry = self.storage.get(entry_id)
        if entry is None:
            raise EntryNotFound(f"entry {entry_id!r} of the tree is not in the session",
                                path=self.location)
        return entry

    def fork(self, new_path: str | os.PathLike[str], at: str | None = None) -> Session:
        """A new session file holding the path from the root to ``at`` (id, unique id prefix
        or label; default: the leaf).

        The new header links back to this session; labels of copied entries come along. The
        file appears complete or not at all.
        """
        at = self.leaf_id if at is None else self.resolve(at)
        if at is None:
            raise InvalidArgument("the session is empty; there is nothing "
                               "to fork", path=self.location)
        path = [e for e in self.branch(at) if not isinstance(e, LeafEntry)]
        # A leaf move on the path would point outside the copy; they are not copied, and the
        # last copied entry is `at` itself or the label entries below.
        kept = {e.id for e in path}
        # The copy's labels are this session's labels of the copied entries: label entries
        # below the path clear what the path's own label entries say otherwise.
        book = LabelBook()
        for e in path:
            if isinstance(e, LabelEntry):
                book.apply(e.target_id, e.label)
        wanted = {t: text for t, text in self.storage.labels().items() if t in kept}
        changes: list[tuple[str, str | None]] = [
            (t, None) for t in book.assigned() if t not in wanted]
        for t, _ in changes:
            book.apply(t, None)
        changes += [(t, text) for t, text in wanted.items() if book.current.get(t) != text]
        extra: list[AnyEntry] = []
        parent = path[-1].id
        for target, text in changes:
            label_id = new_id()
            while label_id in kept:
                label_id = new_id()
            extra.append(LabelEntry(label_id, parent, now(), target_id=target, label=text))
            kept.add(label_id)
            parent = label_id
        header = SessionHeader(
            id=new_session_id(),
            created_at=now(),
            cwd=self.header.cwd,
            parent_session=self._parent_link(),
            metadata={"forked_from": {"session_id": self.id, "entry_id": at}},
        )
        return Session(create_storage(new_path, header, [*path, *extra]),
                       projectors=self.projectors)

    def _parent_link(self) -> str:
        """How a fork's header names this session: a file by its absolute path (so it
        resolves from wherever the fork is opened), a URL as it is, a session in memory by
        its id."""
        if isinstance(self.storage, MemoryStorage):
            return self.id
        if isinstance(self.storage, JsonlStorage):
            return storable_path(os.path.abspath(self.storage.file))
        return self.location

    # -- reading -------------------------------------------------------------------------
    def build_context(
        self,
        leaf_id: str | None = None,
        *,
        projectors: Mapping[str, Projector] | None = None,
    ) -> SessionContext:
        """What the model sees at ``leaf_id`` (id, unique id prefix or label; default: the
        current leaf)."""
        return build_context(self.branch(leaf_id),
                             projectors={**self.projectors, **(projectors or {})})

    def compact(
        self,
        window: int,
        *,
        ladder: CompactionLadder | None = None,
        counter: TokenCounter | None = None,
        model: Model | None = None,
        compact_at: float = 0.7,
        compact_to: float = 0.4,
        dry_run: bool = False,
        force: bool = False,
        expected_leaf: ExpectedLeaf = UNSET,
    ) -> CompactionResult:
        """Run the compaction ladder on the current branch (see ``contextree.compaction``).

        Plans with ``plan_compaction`` (``ladder``, default ``default_ladder(model)``),
        then appends the planned compaction entry; the entries before it stay in the file.
        ``dry_run`` returns the plan and writes nothing.
        """
        from .compaction import CompactionPolicy, default_ladder, plan_compaction  # on use

        policy = CompactionPolicy(window, compact_at, compact_to)
        result = plan_compaction(self.branch(), policy, ladder or default_ladder(model),
                                 counter, force=force, projectors=self.projectors)
        planned = result.entry
        if planned is None and result.calls and not dry_run:
            # No compaction, but the summarizer was called (and billed): say so.
            self.append_custom(CALLS_TYPE, {"calls": [c.to_dict() for c in result.calls]},
                               expected_leaf=expected_leaf)
        if dry_run or planned is None:
            return result
        entry_id = self.append_compaction(
            summary=planned.summary,
            first_kept_entry_id=planned.first_kept_entry_id,
            tokens_before=planned.tokens_before,
            tokens_after=planned.tokens_after,
            cleared=planned.cleared,
            pinned=planned.pinned,
            details=planned.details,
            usage=planned.usage,
            receipt=planned.receipt,
            expected_leaf=expected_leaf,
        )
        stored = self.get_entry(entry_id)
        assert isinstance(stored, CompactionEntry)
        result.entry, result.entry_id = stored, entry_id
        return result

    def stats(self) -> SessionStats:
        """Message, token and cost totals for the current branch and the whole session."""
        from ._stats import compute_stats  # on use: opening a session needs none of it

        return compute_stats(self)

    def __repr__(self) -> str:
        return f"Session(id={self.id!r}, location={self.location!r}, leaf={self.leaf_id!r})"


_SHOWN_MATCHES = 5


def entry_matches(session: Session, ref: str) -> tuple[Matched, list[str]]:
    """The entries ``ref`` could name, and how: its own id, the entries holding it as a
    label (several only in files from elsewhere), or the ids it is the start of. The one
    lookup behind ``Session.resolve`` and the CLI's ENTRY arguments, which phrase the
    outcome in their own words. A trailing "…" (of a shortened id) is ignored;
    ``InvalidArgument`` for a ``ref`` that is not a str."""
    if not isinstance(ref, str):
        raise InvalidArgument(f"an entry is named by its id, the start of one, or a label "
                              f"(a str); got {_shown(ref)}", path=session.location)
    ref = ref.strip().rstrip("…")
    if not ref:
        return "prefix", []
    if ref in session:
        return "id", [ref]
    labelled = session.ambiguous_labels().get(ref) or [
        target for target, text in session.labels().items() if text == ref]
    if labelled:
        return "label", labelled
    return "prefix", [e.id for e in session.entries() if e.id.startswith(ref)]


def _entry_id(value: object, location: str) -> str:
    """``value`` if it is an entry id (a str): a lookup of anything else would raise a raw
    ``TypeError`` (unhashable) or, on a database, fail in the driver."""
    if isinstance(value, str):
        return value
    raise InvalidArgument(f"an entry id is a str, got {_shown(value)}", path=location)


def _shown(value: object) -> str:
    """A wrong value for an error message: its type and the start of its repr."""
    return f"{type(value).__name__} {value!r:.40}"


def new_session_id() -> str:
    """A session id: a UUID4 string, unique across machines."""
    import uuid

    return str(uuid.uuid4())



