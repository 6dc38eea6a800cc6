"""``ContextreeHistory``: the model sees contextree's compacted view; the history keeps all.

pydantic-ai's own ``ProcessHistory`` rewrites the run's history (``ctx.messages``) with what
its processor returns, so what was trimmed is gone for the rest of the run. This capability
only replaces the messages of the request being sent (``request_context.messages``): the run's
history, ``result.all_messages()`` and the stored conversation keep every message.

Per conversation it keeps a working contextree session mirroring the messages (seeded from a
``ContextreeConversationStore`` when the conversation is stored there, with the compactions
persisted in it). Before each model request it runs contextree's compaction ladder once the
context reaches ``compact_at`` of ``window``, builds the view (the latest compaction's summary,
the kept turns, cleared tool results as placeholders, every tool call paired with exactly one
result) and maps it back to pydantic-ai messages: untouched messages are the original objects,
a request that lost parts (a dropped or cleared tool result) is a copy with what is left.

Every tool result the model is shown is valid UTF-8 (a lone surrogate becomes U+FFFD) and
within ``limits``, as the runtime's tool pipeline makes its own: a longer one is cut to a
preview ending with a hint, the whole of it saved to the overflow store once (the cut is
cached by tool call and content, and a bound store keeps it). Like the runtime, the working
session and a bound store's session hold the cut text with its truncation record in
``Message.meta`` (a compaction that clears the result then names the saved file); the
pydantic-ai messages (``result.all_messages()``, what ``store.load`` returns) keep the whole
result, since pydantic-ai's contract is that a conversation loads as it was saved.

Bound to a store, each compaction is saved with the messages it follows on the next
``store.save(...)``, as a ``compaction`` entry of the conversation's session: the view is the
same after a reopen, in another process, and the prompt prefix stays byte-stable.
"""

from __future__ import annotations

import dataclasses
import hashlib
import uuid
import weakref
from collections import OrderedDict
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from pydantic_ai import messages as pm
from pydantic_ai.capabilities import ProcessHistory
from pydantic_ai.conversation_store import ConversationEntry
from pydantic_ai.tools import AgentDepsT, RunContext

from ..._context import SessionContext
from ..._messages import Message
from ..._overflow import OverflowStore
from ..._session import Session
from ..._truncation import LIMITS, Truncation, TruncationLimits, is_truncated
from ...compaction import CompactionLadder, CompactionPolicy
from ...entries import AnyEntry, CompactionEntry, MessageEntry
from ...markers import Kind
from ...models._base import Model
from ...storage import key_to_session_id
from ...tokens import TokenCounter
from .._compaction import CompactionOptions
from .._results import bounded_result
from . import _mapping as mp
from ._store import ContextreeConversationStore

if TYPE_CHECKING:
    from pydantic_ai.models import ModelRequestContext

_TEMP = "t-"
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_CUTS = 256  # truncated results whose cut is remembered

Bound = Callable[[AnyEntry, pm.ModelMessage], tuple[AnyEntry, str | None]]
"""An entry as it is kept, and the text its tool result is shown as (``None``: as it is)."""


def _time(stamp: str) -> datetime:
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return _EPOCH


def _showing(message: pm.ModelMessage, texts: dict[int, str]) -> pm.ModelMessage:
    """A copy of ``message`` whose tool results at the indices of ``texts`` show those texts
    (files they carry are kept)."""
    parts = list(message.parts)
    for i, text in texts.items():
        part = parts[i]
        files = part.files if isinstance(part, pm.BaseToolReturnPart) else []
        parts[i] = dataclasses.replace(part, content=[text, *files] if files else text)  # type: ignore[arg-type]
    return dataclasses.replace(message, parts=parts)  # type: ignore[arg-type]


class _Working:
    """The working session of one conversation and how its entries map to messages."""

    def __init__(self, bound: Bound) -> None:
        self.session = Session.in_memory()
        self.bound = bound
        self.messages: list[pm.ModelMessage] = []  # as the run has them
        self.ids: list[str] = []  # the final entry id of each mirrored message
        self.by_id: dict[str, pm.ModelMessage] = {}  # as the model is shown them
        self.mapped: dict[str, set[int]] = {}  # final id -> indices of parts with a shape
        self.stored = 0  # how many of ``messages`` the store has (their ids are the store's)
        self.alias: dict[str, str] = {}  # temporary final id -> the store's entry id
        self.unflushed: list[CompactionEntry] = []
        self.staged: tuple[dict[str, str], int, list[pm.ModelMessage], list[str]] | None = None
        self.failed_at: int | None = None
        self.invalid = False

    def add(self, entries: Sequence[AnyEntry], messages: Sequence[pm.ModelMessage],
            ids: Sequence[str]) -> None:
        originals = dict(zip(ids, messages, strict=True))
        shown: dict[str, dict[int, str]] = {}
        for entry in entries:
            data = mp.info(entry)
            if data is not None:
                pid = mp.group_of(entry.id, data)
                self.mapped.setdefault(pid, set()).update(data.get("parts") or ())
                if pid in originals:
                    entry, text = self.bound(entry, originals[pid])
                    if text is not None:
                        shown.setdefault(pid, {})[data["parts"][0]] = text
            self.session.append(entry)
        for message, pid in zip(messages, ids, strict=True):
            self.messages.append(message)
            self.ids.append(pid)
            valid = mp.valid_message(message)  # what a provider can send: UTF-8
            self.by_id[pid] = _showing(valid, shown[pid]) if pid in shown else valid

    def append(self, messages: Sequence[pm.ModelMessage]) -> None:
        ids = [f"{_TEMP}{uuid.uuid4().hex[:16]}" for _ in messages]
        entries = mp.group_entries(((i, m, None) for i, m in zip(ids, messages, strict=True)),
                                   self.session.leaf_id)
        self.add(entries, messages, ids)

    def store_id(self, entry_id: str) -> str | None:
        """The id an entry of this session has (or will have) in the store, if known."""
        if not entry_id.startswith(_TEMP):
            return entry_id
        base, sep, suffix = entry_id.partition("~")
        stored = self.alias.get(base)
        return None if stored is None else stored + sep + suffix

    def stored_head(self) -> str | None:
        return self.store_id(self.ids[self.stored - 1]) if self.stored else None


class ContextreeHistory(ProcessHistory[AgentDepsT], CompactionOptions):
    """Send the model contextree's compacted, pairing-valid view; keep the history whole.

    ``window`` is the model's context window in tokens; compaction starts at ``compact_at``
    of it and goes down to ``compact_to``. ``ladder`` is the stages it climbs (default: clear old
    tool results, drop the oldest turns, offline digest; pass ``summarizer=`` a contextree
    model to summarize with it). ``store`` persists the compactions with the conversation.
    Each tool result the model is shown is cut to ``limits``, the whole of it saved to
    ``overflow`` (default: the per-user overflow store).
    """

    def __init__(
        self,
        window: int,
        *,
        store: ContextreeConversationStore | None = None,
        compact_at: float = 0.7,
        compact_to: float = 0.4,
        ladder: CompactionLadder | None = None,
        summarizer: Model | None = None,
        counter: TokenCounter | None = None,
        max_conversations: int = 32,
        limits: TruncationLimits = LIMITS,
        overflow: OverflowStore | None = None,
    ) -> None:
        # Nothing the history holds refers back to it (a reference cycle would keep it, and
        # a bound store's sessions and their JSONL writer locks, until the cyclic garbage
        # collector runs): the processor and each working session's ``bound`` hold it
        # weakly, and a store holds the bound methods it registers weakly.
        ref = weakref.ref(self)

        def process(messages: list[pm.ModelMessage]) -> list[pm.ModelMessage]:
            history = ref()
            return messages if history is None else history.view(None, messages)

        self.processor = process
        CompactionPolicy(window, compact_at, compact_to)  # the options are checked here
        self._set_compaction_options(window, compact_at, compact_to, ladder, counter)
        self.store = store
        self.summarizer = summarizer
        self.max_conversations = max_conversations
        self.limits = limits
        self.overflow = overflow
        self._working: OrderedDict[str, _Working] = OrderedDict()
        self._cuts: OrderedDict[tuple[str | None, str | None, bytes], Truncation] = OrderedDict()
        self.compactions = 0
        if store is not None:
            # weakly: the history holds the store, so strong hooks would make a cycle
            store.add_pending_hook(self._flush, weak=True)
            store.add_saved_hook(self._saved, weak=True)
            store.add_shape_hook(self._shape, weak=True)

    @property
    def policy(self) -> CompactionPolicy:
        """When to compact and how far down, as one value."""
        assert self.window is not None  # always given here
        return CompactionPolicy(self.window, self.compact_at, self.compact_to)

    def __repr__(self) -> str:
        return f"ContextreeHistory(window={self.window})"

    @classmethod
    def get_serialization_name(cls) -> str | None:
        return None

    async def before_model_request(self, ctx: RunContext[AgentDepsT],
                                   request_context: ModelRequestContext) -> ModelRequestContext:
        # Only the request is changed: ``ctx.messages`` (the run's history) keeps everything.
        request_context.messages = self.view(ctx.conversation_id, list(request_context.messages))
        return request_context


    # -- the view ---------------------------------------------------------------------------------
    def view(self, conversation_id: str | None, messages: list[pm.ModelMessage]
             ) -> list[pm.ModelMessage]:
        """What the model is sent for ``messages``: compacted when over the trigger."""
        if not messages:
            return messages
        ws = self._sync(conversation_id or "", messages)
        ctx = ws.session.build_context()
        tokens = ctx.measure(self.counter).tokens
        result = (self._compact(ws.session, self.summarizer)
                  if self._compaction_due(tokens, ws.failed_at) else None)
        if result is not None:
            if result.entry_id is None:
                ws.failed_at = tokens
            else:
                ws.failed_at = None if result.reached_target else result.tokens_after
                entry = ws.session.get_entry(result.entry_id)
                assert isinstance(entry, CompactionEntry)
                ws.unflushed.append(entry)
                self.compactions += 1
                ctx = ws.session.build_context()
        return self._to_pydantic(ws, ctx)

    def _sync(self, key: str, messages: list[pm.ModelMessage]) -> _Working:
        ws = self._working.get(key)
        if ws is not None and not ws.invalid:
            n = len(ws.messages)
            if len(messages) >= n:
                if all(a is b for a, b in zip(ws.messages, messages, strict=False)):
                    ws.append(messages[n:])
                    self._working.move_to_end(key)
                    return ws
                if ws.messages == messages[:n]:
                    for i in range(n):  # the same messages as new objects: follow them
                        if ws.by_id[ws.ids[i]] is ws.messages[i]:  # (not a shown copy)
                            ws.by_id[ws.ids[i]] = messages[i]
                        ws.messages[i] = messages[i]
                    ws.append(messages[n:])
                    self._working.move_to_end(key)
                    return ws
        ws = self._seeded(key, messages)
        self._working[key] = ws
        while len(self._working) > self.max_conversations:
            self._working.popitem(last=False)
        return ws

    def _seeded(self, key: str, messages: list[pm.ModelMessage]) -> _Working:
        """A working session: the stored history (with its compactions) when ``messages``
        continue it, then the rest of ``messages``."""
        ref = weakref.ref(self)

        def bound(entry: AnyEntry, message: pm.ModelMessage) -> tuple[AnyEntry, str | None]:
            history = ref()
            return (entry, None) if history is None else history._bounded(key, entry, message)

        ws = _Working(bound)
        entries = self.store.branch_entries(key) if self.store is not None and key else None
        if entries:
            finals = [e for e in entries if mp.is_final(e)]
            if len(finals) <= len(messages):
                stored = mp.load([mp.info(e)["json"] for e in finals])  # type: ignore[index]
                head = messages[: len(finals)]
                if stored == head or stored == [mp.valid_message(m) for m in head]:
                    ws.add(entries, messages[: len(finals)], [e.id for e in finals])
                    ws.stored = len(finals)
        ws.append(messages[len(ws.messages):])
        return ws

    def _shape(self, cid: str, entry: AnyEntry, message: pm.ModelMessage) -> AnyEntry:
        return self._bounded(cid, entry, message)[0]

    def _bounded(self, cid: str, entry: AnyEntry, message: pm.ModelMessage
                 ) -> tuple[AnyEntry, str | None]:
        """``entry`` as it is kept and, for a tool result, the text the model is shown when it
        is not the result's own: valid UTF-8, cut to ``limits``. A result is cut (and saved)
        once: the cut is remembered by conversation, tool call and content, and an entry that
        holds one (a stored conversation's) is shown as it is."""
        data = mp.info(entry)
        if data is None or not isinstance(entry, MessageEntry) or entry.message.role != "tool":
            return entry, None
        kept = entry.message
        if is_truncated(kept.meta):
            return entry, kept.text
        part = message.parts[data["parts"][0]]
        text = mp.result_text(part)
        sid = key_to_session_id(cid) if cid else None
        digest = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()
        key = (sid, kept.tool_call_id, digest)
        cut = self._cuts.get(key)
        if cut is not None:
            self._cuts.move_to_end(key)
        else:
            cut = bounded_result(text, store=self.overflow, session_id=sid,
                                 label=kept.name or "output", limits=self.limits)
            if cut.truncated:
                self._cuts[key] = cut
                while len(self._cuts) > _CUTS:
                    self._cuts.popitem(last=False)
        if cut.text == text:
            return entry, None
        meta = {**(kept.meta or {}), **cut.meta()} if cut.truncated else kept.meta
        return entry.replace(message=kept.replace(content=cut.text, meta=meta)), cut.text

    def _to_pydantic(self, ws: _Working, ctx: SessionContext) -> list[pm.ModelMessage]:
        out: list[pm.ModelMessage] = []
        group: str | None = None
        present: dict[int, Message] = {}
        changed = False
        extra: list[pm.ModelRequestPart] = []

        def finish() -> None:
            nonlocal group, changed
            if group is not None:
                out.append(self._rebuilt(ws, group, present, changed, extra))
            group, changed = None, False
            present.clear()
            extra.clear()

        # Parts contextree adds are stamped with the time of the entry they stand for (or the
        # one before), so the same view is the same messages, after a reopen too.
        stamp = _EPOCH
        for m, eid in zip(ctx.messages, ctx.entry_ids, strict=True):
            entry = ws.session.get_entry(eid) if eid is not None else None
            if entry is not None:
                stamp = _time(entry.timestamp)
            data = mp.info(entry)
            if data is not None and eid is not None:
                assert isinstance(entry, MessageEntry)
                pid = mp.group_of(eid, data)
                if pid != group:
                    finish()
                    group = pid
                for i in data.get("parts") or ():
                    present[i] = m
                changed = changed or m is not entry.message
                continue
            if m.role == "tool":  # a result contextree stands in for (an interrupted call)
                part = pm.ToolReturnPart(tool_name=m.name or "", content=m.text,
                                         tool_call_id=m.tool_call_id or "",
                                         outcome="interrupted" if m.kind == Kind.INTERRUPTED
                                         else "success", timestamp=stamp)
                if group is not None and isinstance(ws.by_id.get(group), pm.ModelRequest):
                    extra.append(part)
                else:
                    finish()
                    out.append(pm.ModelRequest(parts=[part]))
                continue
            finish()
            if m.role == "assistant":
                out.append(pm.ModelResponse(parts=[pm.TextPart(m.text)], timestamp=stamp))
            elif m.role == "user":
                out.append(pm.ModelRequest(parts=[pm.UserPromptPart(m.text, timestamp=stamp)]))
            else:  # a compaction or branch summary
                out.append(pm.ModelRequest(parts=[pm.SystemPromptPart(m.text, timestamp=stamp)]))
        finish()
        return out

    @staticmethod
    def _rebuilt(ws: _Working, pid: str, present: dict[int, Message], changed: bool,
                 extra: list[pm.ModelRequestPart]) -> pm.ModelMessage:
        original = ws.by_id[pid]
        mapped = ws.mapped.get(pid, set())
        if isinstance(original, pm.ModelResponse) or (
                not changed and not extra and set(present) == mapped):
            return original
        returns: list[pm.ModelRequestPart] = []
        others: list[pm.ModelRequestPart] = []
        for i, part in enumerate(original.parts):
            if i in present:
                m = present[i]
                if m.kind == Kind.CLEARED_TOOL_RESULT and isinstance(part, pm.BaseToolReturnPart):
                    part = dataclasses.replace(part, content=m.text)  # type: ignore[arg-type]
                (returns if isinstance(part, pm.BaseToolReturnPart) else others).append(part)
            elif i not in mapped:
                others.append(part)  # bookkeeping parts travel with their message
        return dataclasses.replace(original, parts=[*returns, *extra, *others])

    # -- persisting compactions with a save -------------------------------------------------------
    def _flush(self, cid: str, new: Sequence[ConversationEntry]
               ) -> list[tuple[str | None, AnyEntry]]:
        ws = self._working.get(cid)
        if ws is None:
            return []
        ws.staged = None
        if ws.invalid or not new:
            return []
        if new[0].parent_id != ws.stored_head():
            ws.invalid = True  # the store moved on without this copy: start again next time
            return []
        alias: dict[str, str] = {}
        unsaved = ws.messages[ws.stored:]
        matched = 0
        for entry, message in zip(new, unsaved, strict=False):
            if entry.message is not message and entry.message != message:
                break
            alias[ws.ids[ws.stored + matched]] = entry.id
            matched += 1
        rest = [e for e in new[matched:]] if matched == len(unsaved) else []
        ws.staged = (alias, matched, [e.message for e in rest], [e.id for e in rest])
        names = {**ws.alias, **alias}

        def store_id(entry_id: str | None) -> str | None:
            if entry_id is None or not entry_id.startswith(_TEMP):
                return entry_id
            base, sep, suffix = entry_id.partition("~")
            stored = names.get(base)
            return None if stored is None else stored + sep + suffix

        head = ws.stored_head()
        out: list[tuple[str | None, AnyEntry]] = []
        for comp in ws.unflushed:
            anchor = mp.nearest_final(ws.session, comp.parent_id)
            after = store_id(anchor) if anchor is not None else None
            if anchor is None or after is None:
                continue
            refs = [comp.first_kept_entry_id, *(comp.cleared or {}), *(comp.pinned or ())]
            if any(r is not None and store_id(r) is None for r in refs):
                continue
            moved = comp.replace(
                first_kept_entry_id=store_id(comp.first_kept_entry_id),
                cleared={store_id(k) or k: v for k, v in comp.cleared.items()}
                if comp.cleared else None,
                pinned=[store_id(p) or p for p in comp.pinned] if comp.pinned else None,
            )
            out.append((None if after == head else after, moved))
        return out

    def _saved(self, cid: str) -> None:
        ws = self._working.get(cid)
        if ws is None:
            return
        staged, ws.staged = ws.staged, None
        if staged is None:
            ws.invalid = True  # a branch or delete, or a save this copy had no part in
            return
        alias, matched, messages, ids = staged
        ws.alias.update(alias)
        ws.stored += matched
        ws.unflushed.clear()
        if messages:  # the rest of the save (the run's last response): mirror it as stored
            entries = mp.group_entries(((i, m, None) for i, m in zip(ids, messages, strict=True)),
                                       ws.session.leaf_id)
            ws.add(entries, messages, ids)
            ws.stored += len(messages)
