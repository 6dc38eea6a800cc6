"""contextree under LangChain 1.x agents: an ``AgentMiddleware`` (``contextree[langchain]``).

``ContextreeMiddleware`` goes in ``create_agent(..., middleware=[...])``. Before every model
call it mirrors the graph state's messages into a contextree session and hands the model
contextree's compacted view instead of the full list; the graph state itself is never
touched, so it keeps the whole history (a UI can still show everything).

- **Mirroring is keyed by message id**: a message already in the session is not written
  again, so replays, retries and resumed runs never duplicate it. When the state forks off
  what the session holds (a time-travel resume, an edited message), the session branches at
  the last message they share, instead of piling up copies.
- **Compaction is an entry**: once the context reaches ``compact_at`` of ``window``,
  contextree's ladder runs and appends a compaction entry. Until the next one, every call
  sees the same summary and the same kept messages, so the prompt's prefix stays byte-stable
  (provider prompt caches keep hitting).
- **The work of a call is what is new**: the mirrored messages and the view are kept, so a
  call appends the new messages and extends the view; the context is built again from the
  session only after a compaction, a fork, or another writer (see ``_Conversation``).
- **Tool results are cut** to ``limits`` in ``wrap_tool_call``, the whole saved to the
  overflow store, as the runtime's tool pipeline does (``_within_limits``); one that came in
  the state otherwise is cut in the session and the view (the state keeps it whole).
- **Pairing and thinking stay intact**: a tool call always reaches the model with exactly one
  result (an explicit "interrupted" one if it never got one; orphaned results are left out).
  Messages the view keeps are the state's own message objects, with their thinking /
  reasoning blocks and signatures untouched.

With ``session=`` every thread writes to one contextree session, on a branch of its own (see
``_Shared``: a turn moves the leaf back to its thread's tip, then appends what is new); with
``directory=`` (a directory, made if missing, never a file; or any catalog URL such as
``postgresql://host/db``) each LangGraph thread (``config["configurable"]["thread_id"]``)
gets its own session there, found by the thread id as every catalog finds sessions; with
neither, each thread gets an in-memory session. With ``directory=`` at most ``max_open``
threads are kept (the least recently used one no turn is using is closed, and read again from
its session on its next turn), and with a folder a thread's session is closed ``hold_for``
seconds after each run, so several processes may serve one directory, one turn of a thread
at a time.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import hashlib
import itertools
import json
import operator
import os
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Literal, cast

from .._context import INTERRUPTED, interrupted_result, take_open
from .._limits import parse_json
from .._messages import (
    ImagePart,
    Message,
    TextPart,
    ThinkingPart,
    ToolCall,
    Usage,
    storable,
    valid_text,
)
from .._overflow import OverflowStore
from .._session import Session
from .._truncation import LIMITS, TruncationLimits, is_truncated
from ..compaction import CompactionLadder, CompactionResult
from ..entries import MessageEntry
from ..errors import InvalidArgument, SessionLocked, missing_extra
from ..markers import Kind
from ..models._base import Model, ToolSpec
from ..storage import DirectoryCatalog, MemoryCatalog, key_to_session_id
from ..tokens import TokenCounter, count_context
from ._compaction import CompactionOptions
from ._ids import catalog_in, checked_id
from ._results import bounded_result

try:
    from langchain.agents.middleware import (
        AgentMiddleware,
        AgentState,
        ModelRequest,
        ModelResponse,
    )
    from langchain.agents.middleware.types import ModelCallResult, ToolCallRequest
    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import (
        AIMessage,
        AnyMessage,
        BaseMessage,
        HumanMessage,
        SystemMessage,
        ToolMessage,
        message_to_dict,
        messages_from_dict,
    )
    from langgraph.runtime import Runtime
    from langgraph.types import Command
except ImportError as e:  # pragma: no cover - exercised without the extra installed
    raise missing_extra("langchain", "langchain") from e

__all__ = ["LC_KEY", "LOCK_WAIT", "ContextreeMiddleware", "from_langchain", "to_langchain"]

LC_KEY = "langchain_message"
"""The ``Message`` extra field holding the LangChain message as JSON (``message_to_dict``)."""
_ID_KEY = "langchain_id"
_CUT_KEY = "langchain_cut"  # the SHA-256 of the whole message the state holds (cut here)
_META_KEY = "contextree"
"""The ``response_metadata`` key of a ToolMessage holding contextree's meta for it (the
truncation record of a cut result), which ``from_langchain`` makes the ``Message.meta``."""
_UNSYNCED = object()  # a conversation that has not read its session yet
LOCK_WAIT = 5.0
"""How long (seconds) a turn waits for its thread's session while another process has it
open for writing (``directory=`` a folder: that process is in a turn of the thread)."""
_LOCK_POLL = 0.01


# -- LangChain messages <-> contextree messages ----------------------------------------------

_SURROGATE = re.compile("[\ud800-\udfff]")


def _dump(message: BaseMessage) -> str:
    """The message as JSON; a lone surrogate (a file name ``os.listdir`` could not decode) is
    written as its ``\\u`` escape, so the text is valid UTF-8 and reads back exactly."""
    text = json.dumps(message_to_dict(message), ensure_ascii=False, separators=(",", ":"),
                      default=str)
    if _SURROGATE.search(text) is None:
        return text
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def _fingerprint(dump: str) -> str:
    return hashlib.sha256(dump.encode()).hexdigest()


def _block_text(block: Any) -> str | None:
    """The text of a content block (a string or a text block), None for any other."""
    if isinstance(block, str):
        return block
    if isinstance(block, dict) and block.get("type") == "text":
        text = block.get("text")
        return text if isinstance(text, str) else None
    return None


def _valid_block(block: Any) -> Any:
    """A text block with its lone surrogates replaced by U+FFFD; any other as it is."""
    text = _block_text(block)
    if text is None:
        return block
    return valid_text(text) if isinstance(block, str) else {**block, "text": valid_text(text)}


def _within_limits(message: ToolMessage, *, store: OverflowStore | None = None,
                   session_id: str | None = None, limits: TruncationLimits = LIMITS
                   ) -> ToolMessage:
    """A tool result as the model and the session should get it, as the runtime's tool
    pipeline makes its own: lone surrogates replaced by U+FFFD, and the text cut to
    ``limits`` with the whole saved to ``store`` and a hint to read it (the truncation record
    in ``response_metadata["contextree"]``). Text blocks are cut as one text, the other
    blocks kept. ``message`` itself when it fits or was cut already."""
    if is_truncated((message.response_metadata or {}).get(_META_KEY)):
        return message
    content = message.content
    texts = [content] if isinstance(content, str) else [
        t for t in map(_block_text, content) if t is not None]
    whole = "\n".join(texts)
    cut = bounded_result(whole, store=store, session_id=session_id,
                         label=message.name or "output", limits=limits)
    if cut.text == whole:
        return message
    new: str | list[Any]
    if isinstance(content, str):
        new = cut.text
    elif cut.truncated:  # one text block with the preview, where the first text was
        first = next(i for i, b in enumerate(content) if _block_text(b) is not None)
        rest = [b for b in content if _block_text(b) is None]
        new = [*rest[:first], {"type": "text", "text": cut.text}, *rest[first:]]
    else:  # only surrogates replaced: each block on its own
        new = [_valid_block(b) for b in content]
    meta = dict(message.response_metadata or {})
    if cut.truncated:
        meta[_META_KEY] = {**(meta.get(_META_KEY) or {}), **cut.meta()}
    return message.model_copy(update={"content": new, "response_metadata": meta})


def _parts(content: Any) -> str | list[TextPart | ImagePart | ThinkingPart]:
    if isinstance(content, str):
        return content
    parts: list[TextPart | ImagePart | ThinkingPart] = []
    for block in content or ():
        if isinstance(block, str):
            parts.append(TextPart(text=block))
            continue
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text":
            parts.append(TextPart(text=str(block.get("text", ""))))
        elif kind in ("thinking", "reasoning"):
            thought = block.get("thinking", block.get("reasoning", ""))
            parts.append(ThinkingPart(thinking=thought if isinstance(thought, str) else "",
                                      signature=block.get("signature")))
        elif kind == "redacted_thinking":
            parts.append(ThinkingPart(redacted=True))
        elif kind in ("image", "image_url"):
            parts.append(ImagePart(mime_type=block.get("mime_type") or "image/*"))
        elif kind in ("tool_use", "tool_call", "server_tool_call", "function_call"):
            continue  # the calls are in ``tool_calls``
        else:
            parts.append(TextPart(text=json.dumps(block, ensure_ascii=False, default=str)))
    return parts


_FIELDS = operator.attrgetter("__dict__")
_HEAD = operator.itemgetter("id", "type", "content")
Key = tuple[tuple[Any, Any, Any], Any, Any]
"""What a message says to the model: ((id, type, content), tool calls, the call it answers).
Two messages with the same key are the same message."""


def _keys(messages: Sequence[BaseMessage]) -> list[Key]:
    """The key of each message, read from the fields in C: attribute access on LangChain
    messages costs about a microsecond each, which adds up over a long conversation."""
    fields = list(map(_FIELDS, messages))
    return list(zip(map(_HEAD, fields), map(dict.get, fields, itertools.repeat("tool_calls")),
                    map(dict.get, fields, itertools.repeat("tool_call_id")), strict=True))


def _stored_key(text: str) -> Key:
    """The key of a message kept as JSON (``message_to_dict``)."""
    d = parse_json(text, exact=True).get("data", {})
    return (d.get("id"), d.get("type"), d.get("content")), d.get("tool_calls"), d.get(
        "tool_call_id")


def _common(a: Sequence[Any], b: Sequence[Any], start: int,
            same: Callable[[Any, Any], bool] = operator.eq) -> int:
    """How many items ``a`` and ``b[start:]`` share from the start (``same`` tells)."""
    if all(map(same, a, itertools.islice(b, start, None))):  # the usual case, allocating nothing
        return min(len(a), len(b) - start)
    return len(list(itertools.takewhile(bool, map(same, a, itertools.islice(b, start, None)))))


def _usage(message: AIMessage) -> Usage | None:
    meta = message.usage_metadata
    if not meta:
        return None
    details = cast(dict[str, Any], meta.get("input_token_details") or {})
    cache_read = int(details.get("cache_read") or 0)
    cache_write = int(details.get("cache_creation") or 0)
    total_in = int(meta.get("input_tokens") or 0)
    return Usage(input=max(total_in - cache_read - cache_write, 0), cache_read=cache_read,
                 cache_write=cache_write, output=int(meta.get("output_tokens") or 0),
                 total=int(meta.get("total_tokens") or 0))


def from_langchain(message: BaseMessage) -> Message:
    """The contextree message for a LangChain message; the LangChain message itself is kept
    exactly (as JSON, in the ``langchain_message`` extra field)."""
    content = _parts(message.content)
    if isinstance(message, AIMessage):
        calls = [ToolCall(id=str(c.get("id") or ""), name=c["name"],
                          arguments=dict(c.get("args") or {})) for c in message.tool_calls]
        out = Message(role="assistant", content=content, tool_calls=calls or None,
                      usage=_usage(message),
                      model=(message.response_metadata or {}).get("model_name"))
    elif isinstance(message, ToolMessage):
        meta = (message.response_metadata or {}).get(_META_KEY)
        out = Message(role="tool", content=content, tool_call_id=message.tool_call_id,
                      name=message.name, is_error=message.status == "error",
                      meta=dict(meta) if isinstance(meta, dict) and meta else None)
    elif isinstance(message, SystemMessage):
        out = Message(role="system", content=content)
    else:
        out = Message(role="user", content=content)
    dump = _dump(message)
    out = out.set_extra({LC_KEY: dump, _ID_KEY: message.id})
    # A lone surrogate is escaped in the JSON; in the contextree fields it becomes U+FFFD.
    return storable(out) if "\\ud" in dump else out


def to_langchain(message: Message) -> BaseMessage:
    """The LangChain message for a contextree message: the kept one if it has one, else
    the message converted (one that contextree or another tool wrote)."""
    stored = message.extra.get(LC_KEY)
    if isinstance(stored, str):
        return messages_from_dict([parse_json(stored, exact=True)])[0]
    text = message.text
    if message.role == "assistant":
        return AIMessage(content=text, tool_calls=[
            {"id": c.id, "name": c.name, "args": c.arguments, "type": "tool_call"}
            for c in message.tool_calls or ()])
    if message.role == "tool":
        return ToolMessage(content=text, tool_call_id=message.tool_call_id or "",
                           name=message.name, status="error" if message.is_error else "success")
    if message.role == "system":
        return SystemMessage(content=text)
    return HumanMessage(content=text)


class _Summarizer(Model):
    """A LangChain chat model as contextree's summarizer (``Summarize`` calls ``complete``)."""

    def __init__(self, model: BaseChatModel) -> None:
        self.model = model
        self.name = getattr(model, "model_name", None) or type(model).__name__
        self.provider = "langchain"

    def complete(self, messages: Sequence[Message], *, tools: Sequence[ToolSpec] = (),
                 **options: Any) -> Message:
        """The chat model's reply to ``messages`` (tools are not offered to a summarizer)."""
        reply = self.model.invoke([to_langchain(m) for m in messages])
        usage = _usage(reply) if isinstance(reply, AIMessage) else None
        return Message.assistant(reply.text, usage=usage)

    async def acomplete(self, messages: Sequence[Message], *, tools: Sequence[ToolSpec] = (),
                        **options: Any) -> Message:
        """``complete`` in a worker thread."""
        return await asyncio.to_thread(self.complete, messages, tools=tools, **options)


# -- one conversation ------------------------------------------------------------------------

_Run = tuple[int, int]
"""Positions ``start`` to ``end`` (exclusive) of the mirrored messages, in a row."""


_MAX_CANDIDATES = 16  # branches read to find a thread's branch again in a shared session


class _Shared:
    """One session every LangGraph thread writes to (``session=``): each thread has its own
    branch there (its own tip), continued by moving the leaf back to it. The lock is every
    thread's, so that a turn's leaf move and appends are never interleaved with another's.
    """

    def __init__(self, session: Session) -> None:
        self.session = session
        self.lock = threading.RLock()
        self.left: object = _UNSYNCED  # the leaf as this middleware's threads left it
        self.gen = 0  # counts the writes seen from outside this middleware
        self._index: dict[str, list[str]] | None = None  # LangChain id -> entry ids

    def changed(self, leaf: str | None) -> None:
        """Someone else wrote to the session: every thread finds its branch again."""
        self.gen += 1
        self.left = leaf
        self._index = None

    def index(self) -> dict[str, list[str]]:
        """The mirrored messages' entries by LangChain id, in append order (read once)."""
        if self._index is None:
            index: dict[str, list[str]] = {}
            for e in self.session.find(MessageEntry):
                lc_id = e.message.extra.get(_ID_KEY)
                if isinstance(lc_id, str) and LC_KEY in e.message.extra:
                    index.setdefault(lc_id, []).append(e.id)
            self._index = index
        return self._index

    def indexed(self, messages: Sequence[BaseMessage], eids: Sequence[str]) -> None:
        """Add newly mirrored messages to the index (when it was read)."""
        if self._index is not None:
            for msg, eid in zip(messages, eids, strict=True):
                if msg.id is not None:
                    self._index.setdefault(msg.id, []).append(eid)


class _Conversation:
    """A contextree session mirroring one LangGraph thread, with its lock and caches (with
    ``shared``: the thread's branch of a session every thread writes to, and its lock).

    The work of a call is in proportion to what is new. The mirrored messages of the
    session's branch are kept in order (entry id, JSON, the state object last matched, its
    ``Key``), so a call compares the state with them (by identity first: within a run the
    state keeps its objects) and appends only what follows. The view is kept too: as
    runs of positions in the state, contextree's own messages (a summary, an "interrupted"
    result...), and the tool calls still waiting for their results; new messages extend it.
    It is built again from the session only after a compaction, when the state forked off
    (an edited or removed message, a time-travel resume), or when someone else wrote to the
    session.
    """

    def __init__(self, session: Session | None, summary_role: str = "system",
                 shared: _Shared | None = None, store: OverflowStore | None = None,
                 limits: TruncationLimits = LIMITS, sid: str | None = None) -> None:
        self._session = session  # None: closed between turns, opened again on the next use
        assert session is not None or sid is not None
        self.sid = session.id if sid is None and session is not None else sid
        """The session's id (known when the session is not open)."""
        self.uses = 0  # the hooks using it now (a model or tool call in them included)
        self.release = False  # close the session when the last use ends
        self.summary_role = summary_role
        self.store, self.limits = store, limits  # for the tool results the state holds whole
        self.shared = shared  # the session is one several threads write to (``session=``)
        self.lock = shared.lock if shared is not None else threading.RLock()
        self._gen = -1  # the shared session's generation the branch was found in
        self.rebuilt: dict[str, BaseMessage] = {}  # entry id -> message rebuilt from JSON
        self.failed_at: int | None = None
        self._leaf: object = _UNSYNCED  # the leaf (an id or None) after our last write
        # The mirrored messages on the branch, by position (the state's index).
        self._eids: list[str] = []
        self._dumps: list[str] = []
        self._objs: list[BaseMessage | None] = []
        self._keys: list[Key | None] = []
        self._pos: dict[str, int] = {}
        # The positions of the tool results the state holds whole and the session cut (a
        # result that came in the state, not from a tool call): their fingerprints.
        self._cuts: dict[int, str] = {}
        # The view: runs of positions and contextree's own messages, and in step with it
        # the contextree messages (for counting tokens); the calls still open at its end.
        self._items: list[_Run | BaseMessage] | None = None
        self._ctx: list[Message] = []
        self._fresh_from = 0
        self._pending: list[tuple[str, str | None]] = []  # (call id, tool name)

    @property
    def session(self) -> Session:
        """The session (open: the caller uses the conversation, which the middleware opened)."""
        session = self._session
        assert session is not None, "the conversation's session is not open"
        return session

    @property
    def is_open(self) -> bool:
        return self._session is not None

    def reopened(self, session: Session) -> None:
        """The session opened again (closed between turns): the mirrored messages and the
        view kept stay valid if the leaf is the one this conversation left (nobody else wrote
        meanwhile); else ``_sync`` reads them again."""
        self._session = session

    def closed(self) -> None:
        """Close the session (no one uses the conversation); its caches are kept."""
        session, self._session = self._session, None
        self.release = False
        if session is not None:
            session.close()

    # -- keeping up with the session -------------------------------------------------------
    def unplaced(self, messages: Sequence[BaseMessage]) -> bool:
        """A thread of a shared session that this middleware has not seen yet, with an
        empty state: nothing tells which branch is its own (a thread's branch is found by
        the messages it mirrored), and the leaf is another thread's tip. Its view is empty,
        never that thread's conversation."""
        return self.shared is not None and not messages and self._leaf is _UNSYNCED

    def _sync(self, messages: Sequence[BaseMessage] = ()) -> None:
        """Keep up with the session: read the mirrored messages of the branch again on first
        use or after another writer. On a shared session the leaf is first moved back to
        this thread's tip when another thread moved it (the kept messages stay valid), and
        on first use (or after a write from outside this middleware) the thread's branch is
        found by the LangChain messages it mirrored (``messages``: the state's)."""
        s = self.session
        sh = self.shared
        leaf = s.leaf_id
        if sh is None:
            if self._leaf is _UNSYNCED or leaf != self._leaf:
                self._read(leaf)
            return
        if sh.left is not _UNSYNCED and leaf != sh.left:  # written outside this middleware
            sh.changed(leaf)
        if self._leaf is not _UNSYNCED and self._gen == sh.gen:
            if leaf != self._leaf:  # another thread ran last: back to this thread's tip
                self._go(cast("str | None", self._leaf))
            return
        self._gen = sh.gen
        tip = self._locate(messages, leaf)  # read, too
        if tip != leaf:
            self._go(tip)

    def _read(self, leaf: str | None) -> None:
        """Read the mirrored messages of the branch up to ``leaf``."""
        self._eids, self._dumps, self._objs, self._keys = [], [], [], []
        self._pos, self._cuts = {}, {}
        for e in self.session.storage.path(leaf):
            if isinstance(e, MessageEntry):
                dump = e.message.extra.get(LC_KEY)
                if isinstance(dump, str):
                    cut = e.message.extra.get(_CUT_KEY)
                    self._add(e.id, dump, None, None, cut if isinstance(cut, str) else None)
        self._leaf = leaf
        self._items = None

    def _go(self, tip: str | None) -> None:
        """Move the shared session's leaf to ``tip`` (this thread's branch)."""
        self.session.move_to(tip)
        self._wrote()

    def _wrote(self) -> None:
        """Note the leaf this conversation left (on a shared session, for every thread)."""
        self._leaf = leaf = self.session.leaf_id
        if self.shared is not None:
            self.shared.left = leaf

    def _locate(self, messages: Sequence[BaseMessage], leaf: str | None) -> str | None:
        """The tip of this thread's branch of the shared session: of the current leaf, this
        thread's last tip and the entries holding the state's messages (found by their
        LangChain ids), the branch that shares the most messages with the state, a branch
        that holds nothing else first; this thread's tip, else the current leaf, when there
        is no state to compare. The mirrored messages of the branch found are read."""
        assert self.shared is not None
        known = self._leaf
        candidates: list[str | None] = [leaf]
        if known is not _UNSYNCED and known != leaf and (known is None or known in self.session):
            candidates.append(cast("str | None", known))
        if not messages:
            self._read(candidates[-1])
            return candidates[-1]
        best: tuple[int, bool] = (-1, False)
        tip = leaf

        def score(candidate: str | None) -> None:
            nonlocal best, tip
            self._read(candidate)
            k = self._shared(messages)
            mark = (k, k == len(self._eids))
            if mark > best:
                best, tip = mark, candidate

        for c in candidates:
            score(c)
        index = self.shared.index()
        for p in range(len(messages) - 1, -1, -1):
            if best[0] > p or len(candidates) >= _MAX_CANDIDATES:  # none can share more
                break
            lc_id = messages[p].id
            for eid in reversed(index.get(lc_id, ()) if lc_id is not None else ()):
                if eid not in candidates and len(candidates) < _MAX_CANDIDATES:
                    candidates.append(eid)
                    score(eid)
        if self._leaf != tip:  # the last branch read is not the one found
            self._read(tip)
        return tip

    def _add(self, eid: str, dump: str, obj: BaseMessage | None, key: Key | None,
             cut: str | None = None) -> None:
        if cut is not None:
            self._cuts[len(self._eids)] = cut
        self._pos[eid] = len(self._eids)
        self._eids.append(eid)
        self._dumps.append(dump)
        self._objs.append(obj)
        self._keys.append(key)

    def _truncate(self, k: int) -> None:
        for eid in self._eids[k:]:
            self._pos.pop(eid, None)
        self._cuts = {p: f for p, f in self._cuts.items() if p < k}
        for column in (self._eids, self._dumps, self._objs, self._keys):
            del column[k:]

    def _shared(self, messages: Sequence[BaseMessage]) -> int:
        """How many of ``messages``, from the start, are the messages mirrored there (same
        id, and they say the same to the model)."""
        limit = min(len(messages), len(self._eids))
        # Within a run the state keeps its objects: the same objects are the same messages.
        start = _common(messages, self._objs, 0, operator.is_)
        if start >= limit:
            return limit
        # A run restored from a checkpoint has new objects: compare what they say, in C.
        keys = _keys(messages[start:limit])
        k = start + _common(keys, self._keys, start)
        self._objs[start:k], self._keys[start:k] = messages[start:k], keys[:k - start]
        # The rest one by one (read from a file, or written differently): by their JSON.
        for i in range(k, limit):
            key = keys[i - start]
            if key != (self._keys[i] or _stored_key(self._dumps[i])) and (
                    _dump(messages[i]) != self._dumps[i]) and (
                    self._cuts.get(i) != _fingerprint(_dump(messages[i]))):
                return i  # another message there, or the same one edited (or cut)
            self._objs[i], self._keys[i] = messages[i], key
        return limit

    def mirror(self, messages: Sequence[BaseMessage]) -> int:
        """Write the messages the session does not have yet; returns how many. The session
        follows the state: when the state forked off (a time-travel resume, an edited
        message), the session's leaf moves back to the last message both hold (nothing is
        deleted) and the state's messages from there on are appended as a new branch. An
        empty state changes nothing. On a shared session the thread's branch is continued
        (the leaf moved back to its tip first, in the same batch of writes)."""
        if not messages:
            return 0
        s = self.session
        moving = self.shared is not None and s.leaf_id != self._leaf
        with s.batch() if moving else contextlib.nullcontext():
            self._sync(messages)
            k = self._shared(messages)
            new = messages[k:]
            if k < len(self._eids):  # the state forked off what the session holds
                s.move_to(self._eids[k - 1] if k else None)
                self._truncate(k)
                self._items = None
            if new:
                kept = [self._bounded(msg) for msg in new]
                stored = [from_langchain(b) if b is msg else
                          from_langchain(b).set_extra({_CUT_KEY: _fingerprint(_dump(msg))})
                          for msg, b in zip(new, kept, strict=True)]
                with s.batch():
                    eids = [s.append_message(m) for m in stored]
                first = len(self._eids)
                for msg, b, m, eid, key in zip(new, kept, stored, eids, _keys(new), strict=True):
                    self._add(eid, m.extra[LC_KEY], msg, key, m.extra.get(_CUT_KEY))
                    if b is not msg:
                        self.rebuilt[eid] = b  # what the view sends in its place
                if self.shared is not None:
                    self.shared.indexed(new, eids)
                if self._items is not None:
                    self._extend(stored, first)
        self._wrote()
        return len(new)

    def _bounded(self, message: BaseMessage) -> BaseMessage:
        """A tool result as the session keeps it and the model sees it (one that came in the
        state, not through ``wrap_tool_call``, may be cut here); any other message as it is."""
        if not isinstance(message, ToolMessage):
            return message
        return _within_limits(message, store=self.store, session_id=self.sid,
                              limits=self.limits)

    def let_go(self) -> None:
        """Drop the references to the state's objects (a run ended; the next one restores
        new ones from its checkpoint), so they are freed with the state."""
        self._objs = [None] * len(self._objs)

    def compacted(self) -> None:
        """The session got a compaction entry: the view is built again."""
        self._wrote()
        self._items = None

    # -- the view -------------------------------------------------------------------------
    def context(self) -> tuple[list[Message], int]:
        """The context as contextree messages, and its ``fresh_from`` (for counting)."""
        self._sync()
        if self._items is None:
            self._rebuild()
        closers = [interrupted_result(c, n) for c, n in self._pending]
        return self._ctx + closers, self._fresh_from

    def view(self, state: Sequence[BaseMessage]) -> list[BaseMessage]:
        """The compacted context as LangChain messages; kept messages are the state's own
        objects when the state has them."""
        self._sync()
        if self._items is None:
            self._rebuild()
        assert self._items is not None
        n = len(state)
        out: list[BaseMessage] = []
        for item in self._items:
            if isinstance(item, tuple):
                start, end = item
                if end <= n:
                    out += state[start:end]
                else:
                    out += [state[i] if i < n else self._rebuilt_at(i) for i in range(start, end)]
            else:
                out.append(item)
        out += [_interrupted(call_id, name) for call_id, name in self._pending]
        return out

    def _rebuilt_at(self, position: int) -> BaseMessage:
        """The message at ``position`` rebuilt from the session (the state does not have it)."""
        eid = self._eids[position]
        lc = self.rebuilt.get(eid)
        if lc is None:
            lc = self.rebuilt[eid] = messages_from_dict([parse_json(self._dumps[position], exact=True)])[0]
        return lc

    def _rebuild(self) -> None:
        """The view from ``build_context``: positions for the mirrored messages, LangChain
        messages for contextree's own and for messages another writer added."""
        ctx = self.session.build_context()
        messages, eids = ctx.messages, ctx.entry_ids
        end = len(messages)
        while end and eids[end - 1] is None:  # the calls still open at the end
            end -= 1
        self._pending = [(m.tool_call_id or "", m.name) for m in messages[end:]]
        self._items, self._ctx, self._fresh_from = [], [], ctx.fresh_from
        for m, eid in zip(messages[:end], eids[:end], strict=True):
            self._put(m, eid)

    def _put(self, m: Message, eid: str | None, position: int | None = None) -> None:
        """Add one context message to the view."""
        assert self._items is not None
        self._ctx.append(m)
        kind = m.kind
        if position is None and kind is None and eid is not None:
            position = self._pos.get(eid)
        if position is not None and position in self._cuts:  # the state's is whole
            self._items.append(self._rebuilt_at(position))
            return
        if position is not None:
            last = self._items[-1] if self._items else None
            if isinstance(last, tuple) and last[1] == position:
                self._items[-1] = (last[0], position + 1)
            else:
                self._items.append((position, position + 1))
            return
        self._items.append(self._own(m, eid))

    def _own(self, m: Message, eid: str | None) -> BaseMessage:
        """A context message that is not one of the state's, as a LangChain message."""
        kind = m.kind
        if kind in (Kind.COMPACTION_SUMMARY, Kind.BRANCH_SUMMARY):
            cls = SystemMessage if self.summary_role == "system" else HumanMessage
            return cls(content=m.text, id=f"contextree-{kind.value}-{eid}")
        if kind == Kind.INTERRUPTED:
            return _interrupted(m.tool_call_id or "", m.name, m.text)
        if kind == Kind.CUSTOM_MESSAGE:
            return HumanMessage(content=m.text, id=f"contextree-custom-{eid}")
        position = self._pos.get(eid) if eid is not None else None
        if position is not None:  # a mirrored message shown otherwise (a cleared result)
            lc = self._rebuilt_at(position)
        else:  # written by another tool: converted once
            key = eid or ""
            lc = self.rebuilt.get(key) or to_langchain(m)
            if eid is not None:
                self.rebuilt[key] = lc
        if kind == Kind.CLEARED_TOOL_RESULT:
            lc = lc.model_copy(update={"content": m.text})
        return lc

    def _extend(self, stored: Sequence[Message], first: int) -> None:
        """Add newly mirrored messages (at positions ``first``...) to the view, pairing
        calls and results as ``build_context`` does: a result answers an open call of the
        assistant message before it, or is left out; calls still open when another message
        comes get an "interrupted" result."""
        pending = self._pending
        for position, m in enumerate(stored, start=first):
            if m.role == "tool":
                if take_open(pending, m.tool_call_id) is not None:
                    self._put(m, None, position)
                continue
            for call_id, name in pending:
                closer = interrupted_result(call_id, name)
                self._ctx.append(closer)
                assert self._items is not None
                self._items.append(_interrupted(call_id, name))
            pending.clear()
            self._put(m, None, position)
            pending.extend((call.id, call.name)
                           for call in (m.tool_calls or () if m.role == "assistant" else ()))


def _added(request: ModelRequest[Any], state: Sequence[BaseMessage]) -> list[BaseMessage]:
    """The request's messages that the state does not hold (another middleware's)."""
    messages = request.messages
    if len(messages) == len(state) and all(map(operator.is_, messages, state)):
        return []
    known = {m.id for m in state if m.id is not None}
    return [m for m in messages if m.id is None or m.id not in known]


def _interrupted(call_id: str, name: str | None, text: str = INTERRUPTED) -> ToolMessage:
    """The "interrupted" result of a call that has none, as LangChain sends it."""
    return ToolMessage(content=text, tool_call_id=call_id, name=name, status="error",
                       id=f"contextree-interrupted-{call_id}")


# -- the middleware --------------------------------------------------------------------------

# The key of the runs that have no thread id (no checkpointer: the caller sends the history).
# It is no printable text, which an application names its threads with, and the session it
# names has a hash for its id (``key_to_session_id``): a thread named "default" (the key of
# these runs before) is a thread like any other.
_NO_THREAD = "\0no thread id"


class ContextreeMiddleware(AgentMiddleware[AgentState[Any], Any, Any], CompactionOptions):
    """Mirror the agent's messages into contextree and give the model its compacted view.

    ``window`` (tokens) turns on compaction: once the context reaches ``compact_at`` of it,
    the ladder compacts it down to ``compact_to`` with ``ladder`` (default: clear old tool
    results, drop old turns, then a summary by ``model`` if given, a LangChain chat model or
    a contextree model, then the offline digest). ``summary_role`` is the role the compaction
    summary is sent as (``"system"``, or ``"user"`` for providers that take system text only
    at the start).

    ``durable`` (the sessions this middleware opens from a path or ``directory=``): every write
    is synced to the disk (``fdatasync``) before the hook returns, so a crash loses nothing the
    agent went on from. ``False`` leaves the flushing to the operating system, as an
    in-memory checkpointer does, and spares each new message the device's sync time; a crash
    of the machine may then lose the last messages (never the file's consistency).

    Every tool result is cut to ``limits`` (``TruncationLimits``: lines, bytes, characters a
    line) as the runtime's tool pipeline cuts its own, the whole saved to ``store`` (an
    ``OverflowStore``, default the per-user one) with a hint to read it: in ``wrap_tool_call``,
    so the state holds the cut result, and for a result that came in the state, in the
    session and the view (the state keeps it whole).

    ``max_open`` (with ``directory=``): the most threads kept at once, their session and what
    was mirrored from it. Beyond it the least recently used thread that no hook is using (no
    model or tool call of it under way, in any thread or task) is let go: its session is
    closed, and read again on its next turn. ``hold_for`` (``directory=`` a folder): how long
    (seconds) a thread's session, and its file's writer lock, stay open after a run ends, for
    a next turn soon after; then it is closed, so that another process (a worker of the same
    server) can serve the thread's next turn. ``0`` closes it at the end of each run, ``None``
    keeps it open (up to ``max_open``: this process alone serves its threads). A turn that
    finds its thread's session open in another process waits for it up to ``LOCK_WAIT``
    seconds, then raises ``SessionLocked``.
    """

    def __init__(
        self,
        session: Session | str | os.PathLike[str] | None = None,
        *,
        directory: str | os.PathLike[str] | None = None,
        window: int | None = None,
        compact_at: float = 0.7,
        compact_to: float = 0.4,
        ladder: CompactionLadder | None = None,
        model: Model | BaseChatModel | None = None,
        counter: TokenCounter | None = None,
        summary_role: Literal["system", "user"] = "system",
        durable: bool = True,
        limits: TruncationLimits = LIMITS,
        store: OverflowStore | None = None,
        max_open: int = 64,
        hold_for: float | None = 1.0,
    ) -> None:
        super().__init__()
        if session is not None and directory is not None:
            raise InvalidArgument("pass session= (one conversation) or directory= (one "
                                  "session file per thread), not both")
        self._set_compaction_options(window, compact_at, compact_to, ladder, counter)
        self.summarizer: Model | None = (_Summarizer(model) if isinstance(model, BaseChatModel)
                                         else model)
        self.summary_role = summary_role
        self.directory = directory
        self.durable = durable
        self.limits = limits
        self.store = store
        self.last_compaction: CompactionResult | None = None
        """What the latest compaction run did."""
        self._lock = threading.Lock()  # held briefly: the threads kept, their uses
        self._single: _Shared | None = None  # one session for every thread, a branch each
        # The threads' conversations, the least recently used first.
        self._threads: OrderedDict[str, _Conversation] = OrderedDict()
        self._max_open = max(1, max_open)
        # directory= is always a catalog: a missing folder is made, never one file for all
        self._catalog = None if directory is None else catalog_in(directory, "session=")
        # A catalog of memory sessions loses what it closes: never closed before close().
        self._closes = self._catalog is not None and not isinstance(self._catalog,
                                                                    MemoryCatalog)
        # Files are locked by their writer: let a thread's go after each run.
        self._releases = isinstance(self._catalog, DirectoryCatalog) and hold_for is not None
        self._hold_for = max(0.0, hold_for or 0.0)
        self._idle: dict[_Conversation, float] = {}  # conversation -> when it is closed
        self._wake = threading.Condition(self._lock)
        self._reaper: threading.Thread | None = None
        if isinstance(session, Session):
            self._single = _Shared(session)
        elif session is not None:
            self._single = _Shared(Session.open_or_create(session, durable=durable))

    # -- sessions ----------------------------------------------------------------------------
    def session_for(self, thread_id: str | None = None) -> Session:
        """The contextree session that mirrors ``thread_id`` (the only one with ``session=``,
        where each thread has its own branch; its leaf is at the tip of the thread that
        wrote last). With ``directory=`` it is the middleware's: it is closed ``hold_for``
        after the thread's next run (or when the thread is let go, see ``max_open``); call
        ``session_for`` again then."""
        if self._single is not None:
            return self._single.session
        conv = self._pin(thread_id)
        try:
            return self._ready(conv)
        finally:
            self._unpin(conv)

    def close(self) -> None:
        """Close every session this middleware opened."""
        with self._lock:
            convs = [] if self._single is not None else list(self._threads.values())
            self._threads.clear()
            self._idle.clear()
            self._wake.notify()
        if self._single is not None:
            with self._single.lock:
                self._single.session.close()
        for c in convs:
            with c.lock:
                c.closed()

    def _key(self, thread_id: str | None) -> str:
        if self._single is not None:  # a branch of the one session (no name to check)
            return thread_id or _NO_THREAD
        return checked_id(thread_id, "LangGraph thread id") if thread_id else _NO_THREAD

    def _pin(self, thread_id: str | None) -> _Conversation:
        """The thread's conversation, marked in use (its session is not closed until
        ``_unpin``); not opened yet if it was closed (``_ready`` opens it). Memory only: an
        event loop may call it."""
        key = self._key(thread_id)
        with self._lock:
            conv = self._threads.get(key)
            if conv is None:
                conv = self._threads[key] = self._new(key)
            else:
                self._threads.move_to_end(key)
            conv.uses += 1
            conv.release = False  # a new use: kept open until it ends
            return conv

    def _new(self, key: str) -> _Conversation:
        if self._single is not None:
            return _Conversation(self._single.session, self.summary_role, self._single,
                                 self.store, self.limits)
        if self._catalog is not None:  # opened by ``_ready``
            return _Conversation(None, self.summary_role, store=self.store,
                                 limits=self.limits, sid=key_to_session_id(key))
        return _Conversation(Session.in_memory(), self.summary_role, store=self.store,
                             limits=self.limits)

    def _unpin(self, conv: _Conversation, *, release: bool = False) -> None:
        """The end of a use of ``conv``; ``release``: the thread's run ended (or stopped on
        an error), its session is closed ``hold_for`` seconds after no one uses it
        (``directory=`` a folder)."""
        with self._lock:
            conv.uses -= 1
            if release and self._releases:
                conv.release = True
            if conv.uses == 0:  # no one holds its lock: only a user takes it
                if conv.release:
                    self._later(conv)
                if len(self._threads) > self._max_open:
                    self._trim()

    def _later(self, conv: _Conversation) -> None:
        """Close ``conv``'s session ``hold_for`` seconds from now, unless it is used again
        before (the caller holds ``_lock``)."""
        if not self._hold_for:
            conv.closed()
            return
        self._idle[conv] = time.monotonic() + self._hold_for
        if self._reaper is None:
            self._reaper = threading.Thread(target=self._reap, daemon=True,
                                            name="contextree-langchain-release")
            self._reaper.start()

    def _reap(self) -> None:
        """Close the sessions whose ``hold_for`` is over; ends when none is waiting."""
        with self._wake:
            while True:
                now = time.monotonic()
                due: float | None = None
                for conv, at in list(self._idle.items()):
                    if conv.uses or not conv.release or not conv.is_open:
                        del self._idle[conv]  # used again, or closed already
                    elif at <= now:
                        del self._idle[conv]
                        conv.closed()
                    else:
                        due = at if due is None else min(due, at)
                if due is None:
                    self._reaper = None
                    return
                self._wake.wait(due - now)

    def _closes_at(self, conv: _Conversation, release: bool = False) -> bool:
        """Whether ``_unpin`` may close sessions (a guess: then an event loop calls it in a
        worker thread)."""
        return conv.uses <= 1 and (
            ((conv.release or (release and self._releases)) and not self._hold_for)
            or len(self._threads) > self._max_open)

    async def _aunpin(self, conv: _Conversation, *, release: bool = False) -> None:
        """``_unpin`` from an event loop: the closing in a worker thread."""
        if self._closes_at(conv, release):
            await asyncio.to_thread(functools.partial(self._unpin, conv, release=release))
        else:
            self._unpin(conv, release=release)

    def _ready(self, conv: _Conversation) -> Session:
        """The session of a conversation the caller uses (``_pin``), opened if it was closed;
        then the threads beyond ``max_open`` are let go."""
        if not conv.is_open:
            with conv.lock:
                if not conv.is_open:
                    conv.reopened(self._open(conv))
            with self._lock:
                self._trim()
        return conv.session

    def _open(self, conv: _Conversation) -> Session:
        """Open (or create) a thread's session in the catalog; while another process has it
        open for writing (its turn of the thread), wait up to ``LOCK_WAIT`` seconds."""
        assert self._catalog is not None and conv.sid is not None
        target = self._catalog.target(conv.sid)
        deadline = time.monotonic() + LOCK_WAIT
        while True:
            try:
                return Session.open_or_create(target, session_id=conv.sid,
                                              durable=self.durable)
            except SessionLocked as e:
                if time.monotonic() >= deadline:
                    raise SessionLocked(
                        f"{e.reason} (waited {LOCK_WAIT:g} s: several processes may serve "
                        f"the threads of one directory=, one turn of a thread at a time)",
                        path=e.path) from None
            time.sleep(_LOCK_POLL)

    def _trim(self) -> None:
        """Let go of the least recently used threads no one uses, beyond ``max_open``: their
        sessions closed, their caches dropped (the caller holds ``_lock``)."""
        excess = len(self._threads) - self._max_open
        if excess <= 0 or not self._closes:
            return
        for key, c in list(self._threads.items()):
            if c.uses == 0:
                del self._threads[key]
                c.closed()
                excess -= 1
                if excess == 0:
                    return

    @staticmethod
    def _thread_id(runtime: object) -> str | None:
        """The LangGraph thread id of a run (a ``Runtime`` or a tool call's ``ToolRuntime``)."""
        info = getattr(runtime, "execution_info", None)
        thread_id = getattr(info, "thread_id", None)
        return thread_id if isinstance(thread_id, str) else None

    # -- the work ------------------------------------------------------------------------------
    def prepare(self, messages: Sequence[BaseMessage], thread_id: str | None = None
                ) -> list[BaseMessage]:
        """Mirror ``messages`` (the graph state's), compact if due, and return the view the
        model gets (what ``wrap_model_call`` does, callable on its own). On a shared session
        (``session=``), a thread this middleware has not seen whose state is empty gets an
        empty view: its branch is found by its messages, and the leaf is another thread's."""
        conv = self._pin(thread_id)
        try:
            self._ready(conv)
            with conv.lock:
                if conv.unplaced(messages):
                    return []  # its branch cannot be told: never another thread's
                conv.mirror(messages)
                self._maybe_compact(conv)
                return conv.view(messages)
        finally:
            self._unpin(conv)

    def _maybe_compact(self, conv: _Conversation) -> None:
        if self.window is None or conv.session.leaf_id is None:
            return
        messages, fresh_from = conv.context()
        tokens = count_context(messages, self.counter, fresh_from=fresh_from)
        if not self._compaction_due(tokens, conv.failed_at):
            return
        result = self._compact(conv.session, self.summarizer)
        if result is None:
            return
        self.last_compaction = result
        if result.entry_id is None:
            conv.failed_at = result.tokens_before
        else:
            conv.compacted()
            conv.failed_at = None if result.reached_target else result.tokens_after

    def _request(self, request: ModelRequest[Any]) -> ModelRequest[Any]:
        state = cast(Sequence[BaseMessage], (request.state or {}).get("messages")
                     or request.messages)
        view = self.prepare(state, self._thread_id(request.runtime))
        return request.override(messages=cast(list[AnyMessage], view + _added(request, state)))

    def _record(self, state: AgentState[Any], runtime: Runtime[Any], *, last: bool = False
                ) -> None:
        """Mirror the state's messages; ``last``: the run ends, its objects are let go."""
        messages = state.get("messages") or []
        if not messages and not last:
            return
        conv = self._pin(self._thread_id(runtime))
        try:
            if messages:
                self._ready(conv)
                with conv.lock:
                    conv.mirror(messages)
                    if last:
                        conv.let_go()
        finally:
            self._unpin(conv, release=last)

    def _bounded_result(self, sid: str | None,
                        result: ToolMessage | Command[Any]) -> ToolMessage | Command[Any]:
        """The tool's result (a ToolMessage, or the ones a Command adds) cut to ``limits``,
        its whole saved in the overflow store under the thread's session."""
        cut = functools.partial(_within_limits, store=self.store, session_id=sid,
                                limits=self.limits)
        if isinstance(result, ToolMessage):
            return cut(result)
        update = result.update
        if isinstance(update, dict) and isinstance(update.get("messages"), list):
            messages = [cut(m) if isinstance(m, ToolMessage) else m for m in update["messages"]]
            return dataclasses.replace(result, update={**update, "messages": messages})
        return result

    # -- hooks ---------------------------------------------------------------------------------
    # A model or tool call keeps its thread's conversation in use from before it starts to
    # its end, so that ``max_open`` never closes a session a turn is using; one that ends in
    # an exception (an error, an interrupt, a cancelled task) ends the run here: with a
    # folder, its session is let go as at the end of a run (opened again if the run goes on).
    def wrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], ToolMessage | Command[Any]],
    ) -> ToolMessage | Command[Any]:
        conv = self._pin(self._thread_id(request.runtime))
        try:
            result = handler(request)
        except BaseException:
            self._unpin(conv, release=True)
            raise
        try:
            return self._bounded_result(conv.sid, result)
        finally:
            self._unpin(conv)

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]],
    ) -> ToolMessage | Command[Any]:
        conv = self._pin(self._thread_id(request.runtime))
        try:
            result = await handler(request)
        except BaseException:
            await self._aunpin(conv, release=True)
            raise
        try:
            return await asyncio.to_thread(self._bounded_result, conv.sid, result)
        finally:
            await self._aunpin(conv)

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ModelCallResult[Any]:
        conv = self._pin(self._thread_id(request.runtime))
        try:
            response = handler(self._request(request))
        except BaseException:
            self._unpin(conv, release=True)
            raise
        self._unpin(conv)
        return response

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelCallResult[Any]:
        conv = self._pin(self._thread_id(request.runtime))
        try:
            response = await handler(await asyncio.to_thread(self._request, request))
        except BaseException:
            await self._aunpin(conv, release=True)
            raise
        await self._aunpin(conv)
        return response

    def after_model(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        self._record(state, runtime)
        return None

    async def aafter_model(self, state: AgentState[Any], runtime: Runtime[Any]
                           ) -> dict[str, Any] | None:
        await asyncio.to_thread(self._record, state, runtime)
        return None

    def after_agent(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        self._record(state, runtime, last=True)
        return None

    async def aafter_agent(self, state: AgentState[Any], runtime: Runtime[Any]
                           ) -> dict[str, Any] | None:
        await asyncio.to_thread(functools.partial(self._record, state, runtime, last=True))
        return None
