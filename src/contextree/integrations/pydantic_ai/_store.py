"""``ContextreeConversationStore``: pydantic-ai's ``ConversationStore`` on contextree sessions.

A conversation is a session, an entry is a message entry (a short group of them, see
``_mapping``), and the head is the leaf. What a ``ConversationRecord`` carries beyond the
messages (usage, deferred tool requests, scope, fork origin, branches left, the revision) is a
``custom`` entry of type ``pydantic_ai.conversation`` whose id *is* the revision. Every save
or branch appends one, then the new message entries after it, so a record always precedes the
messages it describes and the leaf ends up at the head (after a branch, which stores no
messages, at its record right under the head):

    record(r1) -> m1 -> m2 -> record(r2) -> m3 -> m4        (head m4, revision r2)

A record is complete when its head is stored; one whose save was cut short (a crash, or a
concurrent writer on PostgreSQL that lost) is skipped for the record it replaced (``prev``),
so a torn save never loses or half-shows a conversation. The revision is compared with the
current record under the conversation's lock (JSONL and memory: this process holds the
session's writer lock and a lock per conversation) or, on PostgreSQL, by appending the record
with ``expected_leaf=`` the leaf it was checked at, every following entry with the one before
it: a concurrent writer gets ``ConversationConflict`` and never interleaves.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import os
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import pydantic
from pydantic_ai import messages as pm
from pydantic_ai.conversation_store import (
    ConversationConflict,
    ConversationEntry,
    ConversationRecord,
    ConversationStore,
)

from ..._session import Session
from ...entries import AnyEntry, CompactionEntry, CustomEntry, MessageEntry, now
from ...errors import InvalidArgument, LeafConflict, SessionExists
from .._ids import checked_id
from . import _mapping as mp
from ._backends import CatalogBackend, backend_for

if TYPE_CHECKING:
    from ...storage.postgres._driver import Pool

RECORD = "pydantic_ai.conversation"
DELETED = "pydantic_ai.deleted"
_RECORD = pydantic.TypeAdapter(ConversationRecord)
T = TypeVar("T")


class _Retry(Exception):
    """The leaf moved between the check and the first append: check again."""


class _Conv:
    """An open conversation: its session, and the record in force at a known leaf."""

    __slots__ = ("cid", "leaf", "record", "session", "valid", "writable")

    def __init__(self, cid: str, session: Session, writable: bool) -> None:
        self.cid = cid
        self.session = session
        self.writable = writable
        self.leaf: str | None = None
        self.record: CustomEntry | None = None
        self.valid = False


PendingHook = Callable[[str, Sequence[ConversationEntry]], list[tuple[str | None, AnyEntry]]]
ShapeHook = Callable[[str, AnyEntry, pm.ModelMessage], AnyEntry]
H = TypeVar("H", bound=Callable[..., Any])


class _Hooks(list[Callable[[], H | None]]):
    """Hooks, each kept as a function giving it back (``None`` once it is gone). A hook is
    held for good unless added ``weak`` (a bound method, then called while its object
    lives): an object that registers its own methods on a store it holds (the history
    capability) then makes no reference cycle, so dropping both frees the store's sessions
    (and JSONL writer locks) at once."""

    def add(self, hook: H, *, weak: bool = False) -> None:
        if weak:
            if not inspect.ismethod(hook):
                raise InvalidArgument("weak=True holds a bound method weakly; pass a bound "
                                      f"method, or weak=False for {hook!r}")
            try:
                self.append(weakref.WeakMethod(hook))
            except TypeError:  # an object without __weakref__ (__slots__)
                raise InvalidArgument(f"weak=True: {type(hook.__self__).__name__} objects "
                                      "cannot be referenced weakly; pass weak=False") from None
        else:
            self.append(lambda: hook)

    def live(self) -> list[H]:
        """The hooks whose objects live, in order (the others are dropped)."""
        out = []
        for ref in list(self):
            hook = ref()
            if hook is None:
                with contextlib.suppress(ValueError):
                    self.remove(ref)
            else:
                out.append(hook)
        return out


class ContextreeConversationStore(ConversationStore):
    """A pydantic-ai ``ConversationStore`` that keeps each conversation as a contextree session.

    ``location`` picks the storage: a directory (one JSONL file per conversation, durable on
    every save), a ``postgresql://`` URL or a ``psycopg_pool.ConnectionPool`` (the schema must
    exist: ``contextree.storage.create_schema(url)``), ``None`` for memory, or any catalog
    (``contextree.storage.open_catalog(...)``, a registered backend's included).

    The sessions are ordinary contextree sessions: ``session(conversation_id)`` opens one for
    ``tree()``, ``stats()``, ``build_context()`` or the ``contextree`` command line.

    JSONL: this process holds the writer lock of each conversation it saved to, until it is
    evicted (more than ``max_open`` open) or the store is closed; other processes can read it
    meanwhile, and get ``SessionLocked`` if they try to save it. ``delete`` removes the file.
    PostgreSQL: any number of processes may save; ``delete`` removes the session's rows.

    ``branch(cid, at=n)`` and ``fork(cid, at=n)`` count pydantic-ai messages (the
    ``ModelRequest`` and ``ModelResponse`` items of ``conversation.messages``), not turns or
    contextree entries: the first ``n`` are kept and the ``n``-th becomes the head.
    """

    def __init__(
        self,
        location: str | os.PathLike[str] | Pool | None = None,
        *,
        durable: bool = True,
        max_open: int = 64,
        offload: bool | None = None,
    ) -> None:
        self._backend: CatalogBackend = backend_for(location, durable=durable)
        self._convs: OrderedDict[str, _Conv] = OrderedDict()
        self._locks: dict[str, threading.RLock] = {}
        self._guard = threading.RLock()
        self._homes: dict[str, str] = {}  # pydantic-ai entry id -> a conversation holding it
        self._listing: dict[str, tuple[tuple[int, int] | None, dict[str, Any] | None]] = {}
        self._max_open = max(1, max_open)
        self._offload = self._backend.shared if offload is None else offload
        self._pending: _Hooks[PendingHook] = _Hooks()
        self._shapes: _Hooks[ShapeHook] = _Hooks()
        self._saved: _Hooks[Callable[[str], None]] = _Hooks()
        self._closed = False

    @classmethod
    def in_memory(cls) -> ContextreeConversationStore:
        return cls(None)

    # -- lifecycle ------------------------------------------------------------------------------
    def close(self) -> None:
        """Close every open session (releasing JSONL writer locks) and owned connections."""
        with self._guard:
            if self._closed:
                return
            self._closed = True
            for conv in self._convs.values():
                if not self._ct_is_memory():
                    conv.session.close()
            self._convs.clear()
            self._backend.close()

    def __enter__(self) -> ContextreeConversationStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> ContextreeConversationStore:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()

    def _ct_is_memory(self) -> bool:
        return self._backend.is_memory

    # -- contextree access ----------------------------------------------------------------------
    def session(self, conversation_id: str) -> Session | None:
        """The conversation's contextree session (owned by the store: do not close it), or
        ``None``. Read it freely; appending to it directly is not a pydantic-ai save."""
        with self._ct_conversation_lock(conversation_id):
            conv = self._ct_get(conversation_id, write=False)
            return None if conv is None else conv.session

    def message_count(self, conversation_id: str) -> int | None:
        """How many pydantic-ai messages the conversation's current history holds."""
        with self._ct_conversation_lock(conversation_id):
            found = self._ct_current_head(conversation_id)
            if found is None:
                return None
            conv, head = found
            return sum(1 for e in conv.session.branch(head) if mp.is_final(e)) if head else 0

    def branch_entries(self, conversation_id: str) -> list[AnyEntry] | None:
        """The contextree entries of the conversation's current history: root to the leaf,
        records and compactions included (``None`` if it is not stored)."""
        with self._ct_conversation_lock(conversation_id):
            found = self._ct_current_head(conversation_id)
            if found is None:
                return None
            conv, head = found
            s = conv.session
            leaf = conv.leaf
            if leaf is not None and mp.nearest_final(s, leaf) == head:
                return s.branch(leaf)
            return s.branch(head) if head is not None else []

    def add_pending_hook(self, hook: PendingHook, *, weak: bool = False) -> None:
        """Called on each save with the entries being stored; returns extra entries (with the
        pydantic-ai entry id each follows, ``None`` for right after the record) to store with
        them. The history capability uses it to persist its compactions. Held for good;
        ``weak``: a bound method held weakly (called while its object lives)."""
        with self._guard:
            self._pending.add(hook, weak=weak)

    def add_shape_hook(self, hook: ShapeHook, *, weak: bool = False) -> None:
        """Called on each save with each message entry to store and the pydantic-ai message it
        shows; returns the entry to store instead. The history capability uses it to keep tool
        results as the model was shown them (cut, with the truncation record). Held for good;
        ``weak``: a bound method held weakly (called while its object lives)."""
        with self._guard:
            self._shapes.add(hook, weak=weak)

    def add_saved_hook(self, hook: Callable[[str], None], *, weak: bool = False) -> None:
        """Called with the conversation id after each save, branch or delete. Held for good;
        ``weak``: a bound method held weakly (called while its object lives)."""
        with self._guard:
            self._saved.add(hook, weak=weak)

    # -- the five primitives (and read_history in one read) --------------------------------------
    async def read_record(self, conversation_id: str) -> ConversationRecord | None:
        return await self._ct_call(self._sync_read_record, conversation_id)

    async def read_records(
        self, *, scope: str | None = None, limit: int | None = None
    ) -> Sequence[ConversationRecord]:
        return await self._ct_call(self._sync_read_records, scope, limit)

    async def write_record(
        self,
        record: ConversationRecord,
        *,
        new_entries: Sequence[ConversationEntry] = (),
        expected_revision: str | None,
    ) -> None:
        await self._ct_call(self._sync_write_record, record, list(new_entries), expected_revision)

    async def delete_record(self, conversation_id: str, *, expected_revision: str) -> None:
        await self._ct_call(self._sync_delete_record, conversation_id, expected_revision)

    async def read_entry(self, entry_id: str) -> ConversationEntry:
        return await self._ct_call(self._sync_read_entry, entry_id)

    async def read_history(
        self, head_id: str | None, *, limit: int | None = None
    ) -> list[ConversationEntry]:
        if head_id is None or limit == 0:
            return []
        return await self._ct_call(self._sync_read_history, head_id, limit)

    # -- sync implementations -------------------------------------------------------------------
    async def _ct_call(self, fn: Callable[..., T], *args: Any) -> T:
        if self._closed:
            raise RuntimeError("the conversation store is closed")
        if self._offload:
            return await asyncio.to_thread(fn, *args)
        return fn(*args)

    def _sync_read_record(self, cid: str) -> ConversationRecord | None:
        with self._ct_conversation_lock(cid):
            conv = self._ct_get(cid, write=False)
            rec = None if conv is None else self._ct_current(conv)
            if rec is None:
                return None
            record = _RECORD.validate_python(rec.data["record"])
            self._ct_remember(record, cid)
            return record

    def _sync_read_records(self, scope: str | None, limit: int | None) -> list[ConversationRecord]:
        records = []
        for cid in self._backend.ids():
            record = self._ct_listed(cid)
            if record is not None and (scope is None or record.scope == scope):
                records.append(record)
        records.sort(key=lambda r: r.updated_at, reverse=True)
        return records[:limit]

    def _ct_listed(self, cid: str) -> ConversationRecord | None:
        """The record of a conversation for a listing, without keeping its session open."""
        with self._ct_conversation_lock(cid):
            if cid in self._convs or self._backend.files is None:
                return self._sync_read_record(cid)
            stamp = self._backend.record_stamp(cid)
            hit = self._listing.get(cid)
            if hit is None or hit[0] != stamp or stamp is None:
                opened = self._backend.open(cid, write=False)
                if opened is None:
                    return None
                conv = _Conv(cid, opened[0], False)
                try:
                    rec = self._ct_current(conv)
                finally:
                    conv.session.close()
                hit = self._listing[cid] = (stamp, None if rec is None else rec.data["record"])
            return None if hit[1] is None else _RECORD.validate_python(hit[1])

    def _sync_write_record(self, record: ConversationRecord, new: list[ConversationEntry],
                      expected: str | None) -> None:
        cid = record.conversation_id
        for _ in range(16):
            with self._ct_conversation_lock(cid):
                conv = self._ct_get(cid, write=True)
                rec = None if conv is None else self._ct_current(conv)
                if (rec.id if rec is not None else None) != expected:
                    raise ConversationConflict(cid)
                try:
                    if conv is None or rec is None:
                        self._ct_create(cid, conv, record, new)
                    else:
                        self._ct_extend(conv, rec, record, new)
                except _Retry:
                    continue
            self._ct_remember(record, cid)
            for hook in self._ct_hooks(self._saved):
                hook(cid)
            return
        raise ConversationConflict(cid)  # pragma: no cover - the leaf kept moving

    def _ct_record_entry(self, record: ConversationRecord, parent: str | None,
                      prev: str | None) -> CustomEntry:
        data = {"record": _RECORD.dump_python(record, mode="json"), "prev": prev}
        return CustomEntry(record.revision, parent, now(), custom_type=RECORD, data=data)

    def _ct_messages(self, cid: str, new: list[ConversationEntry],
                  parent: str) -> list[AnyEntry]:
        """The entries of ``new`` chained after ``parent``, with what the pending hooks add."""
        datas = mp.dump([e.message for e in new])
        extra: dict[str | None, list[AnyEntry]] = {}
        for hook in self._ct_hooks(self._pending):
            for after, added in hook(cid, new):
                extra.setdefault(after, []).append(added)
        shapes = self._ct_hooks(self._shapes)
        out: list[AnyEntry] = []
        last = parent

        def chain(entries: list[AnyEntry]) -> None:
            nonlocal last
            for item in entries:
                moved = _reparented(item, last)
                out.append(moved)
                last = moved.id

        chain(extra.pop(None, []))
        for entry, data in zip(new, datas, strict=True):
            for shaped in mp.group_entries([(entry.id, entry.message, data)], last):
                stored: AnyEntry = shaped
                for shape in shapes:
                    stored = shape(cid, stored, entry.message)
                out.append(stored)
                last = stored.id
            chain(extra.pop(entry.id, []))
        return out

    def _ct_create(self, cid: str, conv: _Conv | None, record: ConversationRecord,
                new: list[ConversationEntry]) -> None:
        base: list[AnyEntry] = []
        head = record.head_id
        new_ids = {e.id for e in new}
        if record.forked_from is not None and head is not None and head not in new_ids:
            source = self._ct_get(record.forked_from, write=False)
            if source is None or not mp.is_final(source.session.get_entry(head)):
                raise ConversationConflict(cid)
            base = source.session.branch(head)
        known = {e.id for e in base}
        attach = new[0].parent_id if new else head
        if attach is not None and attach not in known:
            raise ConversationConflict(cid)
        if head is not None and head not in known and head not in new_ids:
            raise ConversationConflict(cid)
        rec = self._ct_record_entry(record, attach, None)
        entries = [*base, rec, *self._ct_messages(cid, new, rec.id)]
        if conv is not None:  # a session with no complete record: a torn create, or deleted
            self._ct_drop(cid)
            self._backend.remove(cid, conv.session, conv.leaf)
        try:
            session = self._backend.create(cid, entries)
        except SessionExists:
            taken = self._backend.occupant(cid)  # not this conversation's: a retry cannot help
            if taken is not None:
                raise taken from None
            raise ConversationConflict(cid) from None
        created = self._ct_adopt(cid, session, True)
        created.leaf, created.record, created.valid = entries[-1].id, rec, True

    def _ct_extend(self, conv: _Conv, rec: CustomEntry, record: ConversationRecord,
                new: list[ConversationEntry]) -> None:
        s = conv.session
        attach = new[0].parent_id if new else record.head_id
        if attach is not None and not mp.is_final(s.get_entry(attach)):
            raise ConversationConflict(conv.cid)
        leaf = conv.leaf
        parent = leaf if mp.nearest_final(s, leaf) == attach else attach
        entry = self._ct_record_entry(record, parent, rec.id)
        entries = [entry, *self._ct_messages(conv.cid, new, entry.id)]
        try:
            self._backend.append(s, entries, leaf)
        except LeafConflict:
            conv.valid = False
            if entry.id not in s:
                raise _Retry() from None  # the record did not go in: check again
            raise ConversationConflict(conv.cid) from None
        except BaseException:
            conv.valid = False
            raise
        conv.leaf, conv.record, conv.valid = entries[-1].id, entry, True

    def _sync_delete_record(self, cid: str, expected: str) -> None:
        with self._ct_conversation_lock(cid):
            conv = self._ct_get(cid, write=True)
            rec = None if conv is None else self._ct_current(conv)
            if conv is None or rec is None or rec.id != expected:
                raise ConversationConflict(cid)
            self._ct_drop(cid)
            try:
                self._backend.remove(cid, conv.session, conv.leaf)
            except LeafConflict:
                raise ConversationConflict(cid) from None
            self._listing.pop(cid, None)
        for hook in self._ct_hooks(self._saved):
            hook(cid)

    def _sync_read_entry(self, entry_id: str) -> ConversationEntry:
        cid = self._ct_locate(entry_id)
        with self._ct_conversation_lock(cid):
            conv = self._ct_get(cid, write=False)
            entry = None if conv is None else conv.session.get_entry(entry_id)
            if conv is None or entry is None or not mp.is_final(entry):
                raise KeyError(entry_id)
            data = mp.info(entry)
            assert data is not None
            parent = mp.nearest_final(conv.session, entry.parent_id)
            (message,) = mp.load([data["json"]])
            return ConversationEntry(id=entry_id, parent_id=parent, message=message)

    def _sync_read_history(self, head_id: str, limit: int | None) -> list[ConversationEntry]:
        cid = self._ct_locate(head_id)
        with self._ct_conversation_lock(cid):
            conv = self._ct_get(cid, write=False)
            if conv is None:
                raise KeyError(head_id)
            finals = [e for e in conv.session.branch(head_id) if mp.is_final(e)]
        chosen = finals if limit is None else finals[max(len(finals) - limit, 0):]
        parent = finals[len(finals) - len(chosen) - 1].id if len(chosen) < len(finals) else None
        messages = mp.load([mp.info(e)["json"] for e in chosen])  # type: ignore[index]
        out = []
        for entry, message in zip(chosen, messages, strict=True):
            out.append(ConversationEntry(id=entry.id, parent_id=parent, message=message))
            parent = entry.id
        return out

    # -- helpers --------------------------------------------------------------------------------
    @contextlib.contextmanager
    def _ct_conversation_lock(self, cid: str) -> Iterator[None]:
        checked_id(cid, "pydantic-ai conversation id")  # every use of an id passes here
        with self._guard:
            lock = self._locks.get(cid)
            if lock is None:
                lock = self._locks[cid] = threading.RLock()
        with lock:
            yield

    def _ct_get(self, cid: str, *, write: bool) -> _Conv | None:
        """The open conversation (opened on demand), or ``None`` if there is none."""
        with self._guard:
            conv = self._convs.get(cid)
            if conv is not None:
                if (write and not conv.writable) or (
                        not conv.writable and self._backend.stale(cid, conv.session)):
                    self._ct_drop(cid)
                    conv.session.close()
                else:
                    self._convs.move_to_end(cid)
                    return conv
        opened = self._backend.open(cid, write=write)
        if opened is None:
            return None
        return self._ct_adopt(cid, *opened)

    def _ct_adopt(self, cid: str, session: Session, writable: bool) -> _Conv:
        conv = _Conv(cid, session, writable)
        with self._guard:
            self._convs[cid] = conv
            self._convs.move_to_end(cid)
            while len(self._convs) > self._max_open and not self._ct_is_memory():
                old_cid, old = next(iter(self._convs.items()))
                if old_cid == cid:
                    break
                del self._convs[old_cid]
                old.session.close()
        return conv

    def _ct_hooks(self, hooks: _Hooks[H]) -> list[H]:
        with self._guard:
            return hooks.live()

    def _ct_drop(self, cid: str) -> None:
        with self._guard:
            self._convs.pop(cid, None)

    def _ct_current_head(self, cid: str) -> tuple[_Conv, str | None] | None:
        """The conversation and the head of its record in force (``None``: not stored, or
        deleted); the caller holds the conversation's lock."""
        conv = self._ct_get(cid, write=False)
        rec = None if conv is None else self._ct_current(conv)
        if conv is None or rec is None:
            return None
        return conv, rec.data["record"]["head_id"]

    def _ct_current(self, conv: _Conv) -> CustomEntry | None:
        """The complete record in force (``None``: no conversation, or deleted)."""
        s = conv.session
        leaf = s.leaf_id
        if conv.valid and leaf == conv.leaf:
            return conv.record
        found: AnyEntry | None = None
        for entry in reversed(s.branch(leaf)) if leaf is not None else ():
            if isinstance(entry, CustomEntry) and entry.custom_type in (RECORD, DELETED):
                found = entry
                break
        while isinstance(found, CustomEntry) and found.custom_type == RECORD:
            head = found.data["record"]["head_id"]
            if head is None or mp.is_final(s.get_entry(head)):
                break
            prev = found.data.get("prev")  # a torn save: the record it replaced is in force
            found = s.get_entry(prev) if isinstance(prev, str) else None
        rec = found if isinstance(found, CustomEntry) and found.custom_type == RECORD else None
        conv.leaf, conv.record, conv.valid = leaf, rec, True
        return rec

    def _ct_remember(self, record: ConversationRecord, cid: str) -> None:
        homes = self._homes
        if len(homes) > 100_000:
            homes.clear()
        for entry_id in (record.head_id, *record.branches):
            if entry_id is not None:
                homes[entry_id] = cid

    def _ct_locate(self, entry_id: str) -> str:
        """A conversation whose session holds the pydantic-ai entry ``entry_id``: the one it
        was last seen in, an open one, else any stored one."""
        tried: set[str] = set()

        def holds(cid: str) -> bool:
            tried.add(cid)
            with self._ct_conversation_lock(cid):
                conv = self._ct_get(cid, write=False)
                return conv is not None and mp.is_final(conv.session.get_entry(entry_id))

        home = self._homes.get(entry_id)
        if home is not None and holds(home):
            return home
        for cid in [*self._convs, *self._backend.ids()]:
            if cid not in tried and holds(cid):
                self._homes[entry_id] = cid
                return cid
        raise KeyError(entry_id)


def _reparented(entry: AnyEntry, parent: str | None) -> AnyEntry:
    if entry.parent_id == parent or not isinstance(entry, CompactionEntry | CustomEntry |
                                                   MessageEntry):
        return entry
    return entry.replace(parent_id=parent)
