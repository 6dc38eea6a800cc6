"""The env every middleware receives: the conversation so far, the tools, and the turn's state.

``Env`` changes only through its methods: ``add`` (and ``replace`` after a compaction) tell
the persistence listeners, so nothing can slip a message past them. Everything else is read
through properties; ``messages`` is a snapshot that changes only when the env does.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, TypeVar, overload

from .._messages import Message, Usage
from .._session import Session
from ..entries import CallRecord, recorded_system, request_digest
from ..models._base import Model, ToolSpec, request_params, tool_spec
from ..tokens import usage_anchor
from ..tools._tool import Tool
from ._events import (
    ALL_EVENTS,
    CommittedPayload,
    Event,
    EventPayload,
    Payload,
    StopReason,
    event_key,
    stop_reason,
)

log = logging.getLogger("contextree.agent")

Handler = Callable[["Env", Payload], object]
"""``handler(env, payload)`` for an event given by name: ``payload`` is one of the payload
classes (``PAYLOADS``), narrowed with ``isinstance`` or on ``payload.event``."""
P = TypeVar("P", bound=EventPayload)
TypedHandler = Callable[["Env", P], object]
"""``handler(env, payload)`` for an event given by its payload class ``P``."""
Listener = Callable[[Message], "str | None"]
"""A persistence listener: stores the message, returns its entry id (None: no ids)."""
ReplaceListener = Callable[[Sequence[Message]], None]
RequestListener = Callable[["SentRequest"], None]
CallListener = Callable[[CallRecord], None]
"""A listener told of a model call no message records (``Env.on_call``)."""
"""A listener told what a model call sends besides the messages (``Env.on_request``)."""
Sink = Callable[[Payload], None]
"""Where an env sends every event after the handlers (the stream being read)."""


class Events:
    """Named events with handlers ``handler(env, payload)``; a failing handler never breaks
    the turn: its exception is logged and recorded in ``env.handler_errors``."""

    def __init__(self) -> None:
        self._handlers: dict[str, list[Callable[[Env, Any], object]]] = {}

    @overload
    def on(self, event: type[P], handler: TypedHandler[P]) -> None: ...
    @overload
    def on(self, event: Event | str, handler: Handler) -> None: ...
    def on(self, event: Event | str | type[EventPayload],
           handler: Callable[[Env, Any], object]) -> None:
        """Call ``handler`` on ``event``: an ``Event``, its name, ``"*"`` for every one, or
        a payload class (``CompactedPayload``: the handler's payload is typed as it). An
        unknown event is refused at once with ``InvalidArgument``."""
        self._handlers.setdefault(event_key(event), []).append(handler)

    def emit(self, env: Env, payload: Payload) -> None:
        """Hand ``payload`` (frozen: every handler sees the same) to the event's handlers,
        then to ``"*"``'s."""
        event = payload.event
        for handler in [*self._handlers.get(event.value, []), *self._handlers.get(ALL_EVENTS, [])]:
            try:
                handler(env, payload)
            except Exception as e:
                log.exception("handler for %r raised; the turn goes on", event.value)
                env._handler_failed(event.value, e)


class Env:
    """State passed down the stack: the conversation, what the turn runs with, how it goes."""

    def __init__(self, messages: Iterable[Message] = (), *,
                 metadata: Mapping[str, Any] | None = None,
                 events: Events | None = None, sink: Sink | None = None,
                 model: Model | None = None) -> None:
        # The conversation: what the model is sent next.
        self._messages: list[Message] = list(messages)
        self._snapshot: tuple[Message, ...] | None = None
        self._turn_start = 0  # index of this turn's first new message
        self._reply: Message | None = None  # the last assistant message this turn added
        self._fresh_from = 0  # index of the first message produced after the latest replace()
        # What the turn runs with.
        self._tools: tuple[Tool | ToolSpec, ...] = ()
        self._metadata: Mapping[str, Any] = MappingProxyType(dict(metadata or {}))
        self._session: Session | None = None
        self._model = model
        # How the turn goes.
        self._iteration = 0
        self._stopped: StopReason | None = None
        self._notices: list[str] = []
        self._handler_errors: list[tuple[str, Exception]] = []
        self._cancel = threading.Event()
        self._on_cancel: list[Callable[[], object]] = []
        self._lock = threading.Lock()
        self._failed_reply: tuple[BaseException, Message] | None = None
        # What the turn spent.
        self._usage = Usage(cost=0.0)  # the known costs summed; ``_unpriced`` the others
        self._unpriced = 0
        # Who is told.
        self._events = events if events is not None else Events()
        self._sink = sink
        self._closed = False
        self._added: list[Listener] = []
        self._replaced: list[ReplaceListener] = []
        self._requested: list[RequestListener] = []
        self._calls: list[CallListener] = []

    # -- the conversation --------------------------------------------------------------------
    @property
    def messages(self) -> tuple[Message, ...]:
        """The conversation, oldest first (a snapshot: change it with ``add``/``replace``)."""
        if self._snapshot is None:
            self._snapshot = tuple(self._messages)
        return self._snapshot

    @property
    def last(self) -> Message | None:
        """The newest message of the conversation, or ``None``."""
        return self._messages[-1] if self._messages else None

    @property
    def turn_start(self) -> int:
        """Index in ``messages`` of this turn's first new message."""
        return self._turn_start

    @property
    def fresh_from(self) -> int:
        """Index of the first message produced after the latest compaction: usage reported
        before it describes a context that no longer exists."""
        return self._fresh_from

    def add(self, message: Message) -> None:
        """Append a message to the conversation and hand it to every persistence listener;
        then ``committed`` is emitted with the entry id the listener stored it as."""
        self._change()
        self._messages.append(message)
        if message.role == "assistant":
            self._reply = message
        entry_id: str | None = None
        for listener in self._added:
            stored = listener(message)
            if entry_id is None and isinstance(stored, str):
                entry_id = stored
        self.committed(message, entry_id)

    @property
    def reply(self) -> Message | None:
        """The last assistant message this turn added (``None``: the model has not answered
        in this turn, e.g. the turn stopped before its first call)."""
        return self._reply

    def committed(self, message: Message, entry_id: str | None) -> None:
        """Say ``message`` is stored as ``entry_id`` (persistence middleware calls this for
        the messages it writes itself, such as the turn's input)."""
        self.emit(CommittedPayload(event=Event.COMMITTED, message=message, entry_id=entry_id))

    def replace(self, messages: Sequence[Message]) -> None:
        """Replace the conversation (after compaction); listeners decide how to persist it.
        None of the usage reported so far describes the new conversation."""
        self._change()
        self._messages[:] = list(messages)
        self._turn_start = 0
        self._fresh_from = len(self._messages)
        for listener in self._replaced:
            listener(self.messages)

    def load_history(self, history: Sequence[Message], *,
                     fresh_from: int = 0) -> list[Message]:
        """Put the persisted ``history`` before this turn's messages (persistence middleware
        does this, and listeners are not told); returns the turn's messages that are not
        already there, which the middleware persists.

        ``fresh_from`` is the index in ``history`` of the first message whose reported usage
        may anchor a token count (``len(history)``: none, since the history is a compacted
        view). A turn whose input is the user message the history ends with, unanswered (a
        retry after a failed turn), answers that message instead of repeating it.
        """
        self._change()
        new = self._messages[self._turn_start:]
        reused = 0
        if (history and new and history[-1].role == "user" and new[0].role == "user"
                and history[-1].content == new[0].content):
            del self._messages[self._turn_start]
            reused = 1
        self._messages[:0] = history
        self._turn_start += len(history) - reused
        self._fresh_from = (self._fresh_from + len(history) - reused if self._fresh_from
                            else min(max(fresh_from, 0), len(history)))
        return list(self._messages[len(history):]) if reused else list(new)

    def put_first(self, message: Message) -> None:
        """Put ``message`` (a system prompt) in front; it is not persisted nor part of the
        turn's new messages."""
        self._change()
        self._messages.insert(0, message)
        self._turn_start += 1
        if self._fresh_from:
            self._fresh_from += 1

    def usage_anchor(self) -> int | None:
        """Index of the last assistant message whose reported usage describes this very
        conversation (it was produced after the latest compaction), or ``None``."""
        return usage_anchor(self._messages, self._fresh_from)

    def on_add(self, listener: Listener) -> None:
        """Call ``listener(message)`` for every message ``add`` appends."""
        self._added.append(listener)

    def on_replace(self, listener: ReplaceListener) -> None:
        """Call ``listener(messages)`` after every ``replace``."""
        self._replaced.append(listener)

    def on_request(self, listener: RequestListener) -> None:
        """Call ``listener(request)`` before every model call with what it sends besides
        the messages (``SessionTree`` records it as a request entry when it changed)."""
        self._requested.append(listener)

    def request_sent(self, request: SentRequest) -> None:
        """Say a model call is about to send ``request`` (``ModelCall`` does)."""
        for listener in self._requested:
            listener(request)

    def on_call(self, listener: CallListener) -> None:
        """Call ``listener(record)`` for every model call that no message records (one
        interrupted before anything of its reply arrived); ``SessionTree`` stores it."""
        self._calls.append(listener)

    def call_made(self, record: CallRecord) -> None:
        """Count a model call that no message records: its usage goes to the turn's and
        every ``on_call`` listener is told."""
        self.count(record.usage, record.usage.cost)
        for listener in self._calls:
            listener(record)

    def _change(self) -> None:
        self._snapshot = None

    # -- what the turn runs with ---------------------------------------------------------------
    @property
    def tools(self) -> tuple[Tool | ToolSpec, ...]:
        """The tools advertised to the model (set by the tool pipeline)."""
        return self._tools

    def offer_tools(self, tools: Iterable[Tool | ToolSpec]) -> None:
        """Advertise ``tools`` to the model on the next call."""
        self._tools = tuple(tools)

    @property
    def metadata(self) -> Mapping[str, Any]:
        """What ``agent.start(..., **metadata)`` was given (read-only)."""
        return self._metadata

    @property
    def model(self) -> Model | None:
        """The model the turn calls (``agent.run(model)``)."""
        return self._model

    @property
    def session(self) -> Session | None:
        """The session, when ``SessionTree`` is in the stack."""
        return self._session

    def attach_session(self, session: Session) -> None:
        """Record the session the conversation lives in (``SessionTree`` does)."""
        self._session = session

    # -- how the turn goes ---------------------------------------------------------------------
    @property
    def iteration(self) -> int:
        """How many times the tool loop went round (0 on the first model call)."""
        return self._iteration

    def next_iteration(self) -> int:
        """Count one more time round the tool loop; returns the new count."""
        self._iteration += 1
        return self._iteration

    @property
    def stopped(self) -> StopReason | None:
        """Why the turn stopped early, if it did."""
        return self._stopped

    def stop(self, reason: StopReason, notice: str) -> None:
        """End the turn early for ``reason`` with a notice for the user (not sent to the
        model, not saved); a middleware of yours stops with ``StopReason.MIDDLEWARE``."""
        self._stopped = stop_reason(reason)
        self.notice(notice)

    @property
    def notices(self) -> tuple[str, ...]:
        """Notes for the user: never sent to the model, never persisted."""
        return tuple(self._notices)

    def notice(self, text: str) -> None:
        """Add a note for the user."""
        self._notices.append(text)

    @property
    def handler_errors(self) -> tuple[tuple[str, Exception], ...]:
        """``(event, exception)`` for every event handler that raised."""
        return tuple(self._handler_errors)

    # -- interruption --------------------------------------------------------------------------
    @property
    def cancelled(self) -> bool:
        """True once the turn was asked to stop (Ctrl-C, cancellation, ``stream.close()``)."""
        return self._cancel.is_set()

    def interrupt(self) -> None:
        """Ask the turn to stop at the next point it can: a reply being streamed is kept as
        far as it arrived, tool calls still running get an "interrupted" result."""
        with self._lock:
            if self._cancel.is_set():
                return
            self._cancel.set()
            callbacks = list(self._on_cancel)
        for callback in callbacks:
            callback()

    def on_interrupt(self, callback: Callable[[], object]) -> Callable[[], None]:
        """Call ``callback()`` (from the interrupting thread) when the turn is interrupted,
        at once if it already was; returns a function that unregisters it."""
        with self._lock:
            self._on_cancel.append(callback)
            already = self._cancel.is_set()
        if already:
            callback()

        def remove() -> None:
            with self._lock:
                if callback in self._on_cancel:
                    self._on_cancel.remove(callback)

        return remove

    def wait(self, seconds: float) -> bool:
        """Sleep ``seconds`` unless interrupted; True when the turn was interrupted."""
        return self._cancel.wait(max(seconds, 0.0))

    def hold_failed_reply(self, error: BaseException, partial: Message) -> None:
        """Remember ``partial``, what had arrived of a reply when ``error`` ended its model
        call (a stream cut off or garbled): if ``error`` ends the turn, the persistence
        middleware keeps it, as an interruption keeps a reply; if a retry follows, the
        retry's reply takes its place."""
        self._failed_reply = (error, partial)

    def take_failed_reply(self, error: BaseException) -> Message | None:
        """The reply cut short by ``error`` (or by an error it was raised from), once."""
        held, self._failed_reply = self._failed_reply, None
        seen: BaseException | None = error
        while held is not None and seen is not None:
            if seen is held[0]:
                return held[1]
            seen = seen.__cause__ or seen.__context__
        return None

    # -- what the turn spent --------------------------------------------------------------------
    def count(self, usage: Usage | None, cost: float | None) -> None:
        """Add one model call's usage and cost (``None``: its price is unknown) to the turn."""
        if usage is None:
            return
        with self._lock:
            known = cost is not None
            self._usage = self._usage + usage.replace(cost=cost)
            if not known and (usage.input or usage.output or usage.cache_read
                              or usage.cache_write):
                self._unpriced += 1

    @property
    def turn_usage(self) -> Usage:
        """The sum of this turn's model calls (compaction summaries included)."""
        return self._usage

    @property
    def turn_cost(self) -> float | None:
        """What this turn's calls cost in USD; None when one of them has no known price."""
        return None if self._unpriced else self._usage.cost

    # -- who is told ---------------------------------------------------------------------------
    @property
    def events(self) -> Events:
        """The handlers registered with ``agent.on``."""
        return self._events

    def emit(self, payload: Payload) -> None:
        """Emit the event ``payload`` names (``payload.event``) to its handlers, then to
        the stream being read; nothing is emitted once the turn has ended."""
        if self._closed:
            return
        self._events.emit(self, payload)
        if self._sink is not None:
            self._sink(payload)

    def close(self) -> None:
        """End the turn's events (what a tool abandoned at an interruption emits later is
        dropped)."""
        self._closed = True

    def _handler_failed(self, event: str, error: Exception) -> None:
        self._handler_errors.append((event, error))


@dataclass(frozen=True)
class SentRequest:
    """What one model call sends besides the conversation: the system prompt (the text of
    the leading system message, or the list of their texts when there are several, as
    ``RequestEntry.system`` records it), the tool schemas (``{"name", "description",
    "parameters"}``), the request parameters as the adapter merges them, and whether the
    reply is streamed. ``digest`` is the ``RequestEntry.sha256`` it is recorded under."""

    system: str | list[str] | None
    tools: list[dict[str, Any]] | None
    params: dict[str, Any] | None
    stream: bool = False

    @property
    def digest(self) -> str:
        """The sha256 of the content (``contextree.entries.request_digest``)."""
        return request_digest(self.system, self.tools, self.params, self.stream)

    @classmethod
    def of(cls, model: Model, messages: Sequence[Message], tools: Sequence[ToolSpec],
           options: Mapping[str, Any], *, stream: bool) -> SentRequest:
        """The request a call of ``model`` on ``messages`` with ``tools`` and per-call
        ``options`` sends."""
        prompts: list[str] = []
        for m in messages:
            if m.role != "system" or m.kind is not None:
                break
            prompts.append(m.text)
        specs = [_spec_dict(t) for t in tools]
        params = request_params(model, options)
        return cls(recorded_system(prompts), specs or None, params or None, stream)


def _spec_dict(tool: ToolSpec) -> dict[str, Any]:
    name, description, parameters = tool_spec(tool)
    spec: dict[str, Any] = {"name": name}
    if description is not None:
        spec["description"] = description
    spec["parameters"] = parameters
    return spec


@dataclass
class TurnResult:
    """What ``agent.start`` returns: the conversation, this turn's final reply and usage.

    ``reply`` (and ``text``) come from this turn only: a turn that stopped before the model
    answered (``stopped == "budget"`` before the first call, ``"nothing_to_answer"``) has
    ``reply is None`` and ``text == ""``, never the previous turn's answer.

    ``usage`` is the sum of this turn's model calls (compaction summaries included), and
    ``cost`` their cost in USD: ``None`` when a call's price is unknown (never a made-up
    ``0``). ``stopped`` says why the turn ended early (a ``StopReason``: ``"max_iterations"``,
    ``"doom_loop"``, ``"budget"``, ``"interrupted"``, ``"nothing_to_answer"``...); ``notices``
    say it in words.
    """

    messages: list[Message]
    reply: Message | None
    usage: Usage
    iterations: int
    stopped: StopReason | None = None
    notices: list[str] = field(default_factory=list)
    handler_errors: list[tuple[str, Exception]] = field(default_factory=list)
    cost: float | None = None

    @property
    def text(self) -> str:
        """The text of the final reply (empty when the turn ended without one)."""
        return self.reply.text if self.reply is not None else ""


App = Callable[[Env], Env]
"""What a middleware wraps, and what it is: ``env -> env``."""
