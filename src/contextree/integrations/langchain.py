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
- **Pairing and thinking stay intact**: a tool call always reaches the model with exactly one
  result (an explicit "interrupted" one if it never got one; orphaned results are left out).
  Messages the view keeps are the state's own message objects, with their thinking /
  reasoning blocks and signatures untouched.

With ``session=`` every thread writes to one contextree session; with ``directory=`` each
LangGraph thread (``config["configurable"]["thread_id"]``) gets its own JSONL file there;
with neither, each thread gets an in-memory session.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
import urllib.parse
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, Literal, cast

from .._messages import ImagePart, Message, TextPart, ThinkingPart, ToolCall, Usage
from .._session import Session
from ..compaction import CompactionLadder, CompactionResult
from ..entries import MessageEntry
from ..errors import InvalidArgument, missing_extra
from ..markers import Kind
from ..models._base import Model
from ..tokens import EstimateCounter, TokenCounter, count_context

try:
    from langchain.agents.middleware import (
        AgentMiddleware,
        AgentState,
        ModelRequest,
        ModelResponse,
    )
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
except ImportError as e:  # pragma: no cover - exercised without the extra installed
    raise missing_extra("langchain", "langchain") from e

__all__ = ["LC_KEY", "ContextreeMiddleware", "from_langchain", "to_langchain"]

LC_KEY = "langchain_message"
"""The ``Message`` extra field holding the LangChain message as JSON (``message_to_dict``)."""
_ID_KEY = "langchain_id"

ModelCallResult = Any  # ModelResponse | AIMessage | ExtendedModelResponse


# -- LangChain messages <-> contextree messages ----------------------------------------------

def _dump(message: BaseMessage) -> str:
    return json.dumps(message_to_dict(message), ensure_ascii=False, separators=(",", ":"),
                      default=str)


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


def _fingerprint(message: BaseMessage) -> tuple[Any, ...]:
    """What a message says to the model (type, content, tool calls, the call it answers): two
    messages with the same id and fingerprint are the same message."""
    calls = message.tool_calls if isinstance(message, AIMessage) else None
    return (message.type, message.content, calls, getattr(message, "tool_call_id", None))


def _stored_fingerprint(text: str) -> tuple[Any, ...]:
    data = json.loads(text)
    d = data.get("data", {})
    calls = d.get("tool_calls") if data.get("type") == "ai" else None
    return (data.get("type"), d.get("content"), calls, d.get("tool_call_id"))


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
        out = Message(role="tool", content=content, tool_call_id=message.tool_call_id,
                      name=message.name, is_error=message.status == "error")
    elif isinstance(message, SystemMessage):
        out = Message(role="system", content=content)
    else:
        out = Message(role="user", content=content)
    return out.set_extra({LC_KEY: _dump(message), _ID_KEY: message.id})


def to_langchain(message: Message) -> BaseMessage:
    """The LangChain message for a contextree message: the kept one if it has one, else
    the message converted (one that contextree or another tool wrote)."""
    stored = message.extra.get(LC_KEY)
    if isinstance(stored, str):
        return messages_from_dict([json.loads(stored)])[0]
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


class _Summarizer:
    """A LangChain chat model as contextree's summarizer (``Summarize`` calls ``complete``)."""

    def __init__(self, model: BaseChatModel) -> None:
        self.model = model
        self.name = getattr(model, "model_name", None) or type(model).__name__
        self.provider = "langchain"

    def complete(self, messages: Sequence[Message], **options: Any) -> Message:
        reply = self.model.invoke([to_langchain(m) for m in messages])
        usage = _usage(reply) if isinstance(reply, AIMessage) else None
        return Message.assistant(reply.text, usage=usage)

    async def acomplete(self, messages: Sequence[Message], **options: Any) -> Message:
        return await asyncio.to_thread(self.complete, messages, **options)


# -- one conversation ------------------------------------------------------------------------

class _Conversation:
    """A contextree session mirroring one LangGraph thread, with its lock and caches."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.lock = threading.RLock()
        self.seen: dict[str, BaseMessage] = {}   # message id -> the object last checked
        self.rebuilt: dict[str, BaseMessage] = {}  # entry id -> message rebuilt from JSON
        self.prints: dict[str, tuple[Any, ...]] = {}  # entry id -> fingerprint
        self.failed_at: int | None = None

    def mirror(self, messages: Sequence[BaseMessage]) -> int:
        """Write the messages the session does not have yet; returns how many. The session
        follows the state: when the state forked off (a time-travel resume, an edited
        message), the session's leaf moves back to the last message both hold (nothing is
        deleted) and the state's messages from there on are appended as a new branch. An
        empty state changes nothing."""
        if not messages:
            return 0
        s = self.session
        mirrored = [(e, e.message.extra.get(_ID_KEY)) for e in s.branch()
                    if isinstance(e, MessageEntry) and LC_KEY in e.message.extra]
        k = 0
        while k < len(mirrored) and k < len(messages):
            msg = messages[k]
            entry, mid = mirrored[k]
            if msg.id is None or msg.id != mid:
                break
            if self.seen.get(msg.id) is not msg:
                known = self.prints.get(entry.id)
                if known is None:
                    known = self.prints[entry.id] = _stored_fingerprint(
                        entry.message.extra[LC_KEY])
                if _fingerprint(msg) != known and _dump(msg) != entry.message.extra[LC_KEY]:
                    break  # the same message, edited: the session branches here
                self.seen[msg.id] = msg
            k += 1
        new = messages[k:]
        if k < len(mirrored):  # the state forked off what the session holds
            s.move_to(mirrored[k - 1][0].id if k else None)
        if new:
            with s.batch():
                for msg in new:
                    stored = from_langchain(msg)
                    eid = s.append_message(stored)
                    self.prints[eid] = _stored_fingerprint(stored.extra[LC_KEY])
                    if msg.id is not None:
                        self.seen[msg.id] = msg
        return len(new)

    def view(self, state: Sequence[BaseMessage], summary_role: str) -> list[BaseMessage]:
        """The compacted context as LangChain messages; kept messages are the state's own
        objects when the state has them."""
        by_id = {m.id: m for m in state if m.id is not None}
        ctx = self.session.build_context()
        out: list[BaseMessage] = []
        for m, eid in zip(ctx.messages, ctx.entry_ids, strict=True):
            kind = m.kind
            if kind in (Kind.COMPACTION_SUMMARY, Kind.BRANCH_SUMMARY):
                cls = SystemMessage if summary_role == "system" else HumanMessage
                out.append(cls(content=m.text, id=f"contextree-{kind.value}-{eid}"))
            elif kind == Kind.INTERRUPTED:
                out.append(ToolMessage(content=m.text, tool_call_id=m.tool_call_id or "",
                                       name=m.name, status="error",
                                       id=f"contextree-interrupted-{m.tool_call_id}"))
            elif kind == Kind.CUSTOM_MESSAGE:
                out.append(HumanMessage(content=m.text, id=f"contextree-custom-{eid}"))
            else:
                mid = m.extra.get(_ID_KEY)
                lc = by_id.get(mid) if isinstance(mid, str) else None
                if lc is None:
                    key = eid or ""
                    lc = self.rebuilt.get(key)
                    if lc is None:
                        lc = to_langchain(m)
                        if eid is not None:
                            self.rebuilt[key] = lc
                if kind == Kind.CLEARED_TOOL_RESULT:
                    lc = lc.model_copy(update={"content": m.text})
                out.append(lc)
        return out


# -- the middleware --------------------------------------------------------------------------

class ContextreeMiddleware(AgentMiddleware[AgentState[Any], Any, Any]):
    """Mirror the agent's messages into contextree and give the model its compacted view.

    ``window`` (tokens) turns on compaction: once the context reaches ``compact_at`` of it,
    the ladder compacts it down to ``compact_to`` with ``ladder`` (default: clear old tool
    results, drop old turns, then a summary by ``model`` if given, a LangChain chat model or
    a contextree model, then the offline digest). ``summary_role`` is the role the compaction
    summary is sent as (``"system"``, or ``"user"`` for providers that take system text only
    at the start).
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
    ) -> None:
        super().__init__()
        if session is not None and directory is not None:
            raise InvalidArgument("pass session= (one conversation) or directory= (one "
                                  "session file per thread), not both")
        self.window = window
        self.compact_at = compact_at
        self.compact_to = compact_to
        self.ladder = ladder
        self.summarizer = _Summarizer(model) if isinstance(model, BaseChatModel) else model
        self.counter = counter or EstimateCounter()
        self.summary_role = summary_role
        self.directory = Path(directory) if directory is not None else None
        self.last_compaction: CompactionResult | None = None
        """What the latest compaction run did."""
        self._lock = threading.Lock()
        self._single: _Conversation | None = None
        self._threads: dict[str, _Conversation] = {}
        if isinstance(session, Session):
            self._single = _Conversation(session)
        elif session is not None:
            self._single = _Conversation(Session.open_or_create(session))

    # -- sessions ----------------------------------------------------------------------------
    def session_for(self, thread_id: str | None = None) -> Session:
        """The contextree session that mirrors ``thread_id`` (the only one with ``session=``)."""
        return self._conversation(thread_id).session

    def close(self) -> None:
        """Close every session this middleware opened."""
        with self._lock:
            convs = [self._single] if self._single is not None else []
            convs += list(self._threads.values())
            self._threads.clear()
        for c in convs:
            with c.lock:
                c.session.close()

    def _conversation(self, thread_id: str | None) -> _Conversation:
        if self._single is not None:
            return self._single
        key = thread_id or "default"
        with self._lock:
            conv = self._threads.get(key)
            if conv is None:
                if self.directory is not None:
                    name = urllib.parse.quote(key, safe="") + ".jsonl"
                    session = Session.open_or_create(self.directory / name)
                else:
                    session = Session.in_memory()
                conv = self._threads[key] = _Conversation(session)
            return conv

    @staticmethod
    def _thread_id(runtime: Runtime[Any] | None) -> str | None:
        info = getattr(runtime, "execution_info", None)
        thread_id = getattr(info, "thread_id", None)
        return thread_id if isinstance(thread_id, str) else None

    # -- the work ------------------------------------------------------------------------------
    def prepare(self, messages: Sequence[BaseMessage], thread_id: str | None = None
                ) -> list[BaseMessage]:
        """Mirror ``messages`` (the graph state's), compact if due, and return the view the
        model gets (what ``wrap_model_call`` does, callable on its own)."""
        conv = self._conversation(thread_id)
        with conv.lock:
            conv.mirror(messages)
            self._maybe_compact(conv)
            return conv.view(messages, self.summary_role)

    def _maybe_compact(self, conv: _Conversation) -> None:
        if self.window is None or conv.session.leaf_id is None:
            return
        ctx = conv.session.build_context()
        tokens = count_context(ctx.messages, self.counter, fresh_from=ctx.fresh_from)
        if tokens < int(self.window * self.compact_at):
            return
        if conv.failed_at is not None and tokens < conv.failed_at + self.window // 10:
            return  # the ladder could not get under the target: wait for more growth
        result = conv.session.compact(self.window, ladder=self.ladder,
                                      counter=self.counter, model=self.summarizer,
                                      compact_at=self.compact_at, compact_to=self.compact_to)
        self.last_compaction = result
        if result.entry_id is None:
            conv.failed_at = result.tokens_before
        else:
            conv.failed_at = None if result.reached_target else result.tokens_after

    def _request(self, request: ModelRequest[Any]) -> ModelRequest[Any]:
        state = cast(Sequence[BaseMessage], (request.state or {}).get("messages")
                     or request.messages)
        view = self.prepare(state, self._thread_id(request.runtime))
        known = {m.id for m in state if m.id is not None}
        added = [m for m in request.messages if m.id is None or m.id not in known]
        return request.override(messages=cast(list[AnyMessage], view + added))

    def _record(self, state: AgentState[Any], runtime: Runtime[Any]) -> None:
        messages = state.get("messages") or []
        if messages:
            conv = self._conversation(self._thread_id(runtime))
            with conv.lock:
                conv.mirror(messages)

    # -- hooks ---------------------------------------------------------------------------------
    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ModelCallResult:
        return handler(self._request(request))

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelCallResult:
        return await handler(await asyncio.to_thread(self._request, request))

    def after_model(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        self._record(state, runtime)
        return None

    async def aafter_model(self, state: AgentState[Any], runtime: Runtime[Any]
                           ) -> dict[str, Any] | None:
        await asyncio.to_thread(self._record, state, runtime)
        return None

    def after_agent(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        self._record(state, runtime)
        return None

    async def aafter_agent(self, state: AgentState[Any], runtime: Runtime[Any]
                           ) -> dict[str, Any] | None:
        await asyncio.to_thread(self._record, state, runtime)
        return None
