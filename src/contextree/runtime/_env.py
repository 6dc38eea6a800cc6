"""The env every middleware receives: the conversation so far, the tools, and the turn's state.

``Env`` changes only through its methods: ``add`` (and ``replace`` after a compaction) tell
the persistence listeners, so nothing can slip a message past them. Everything else is read
through properties; ``messages`` is a snapshot that changes only when the env does.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from .._messages import Message, Usage
from .._session import Session
from ..models._base import ToolSpec
from ..tokens import usage_anchor
from ..tools._tool import Tool
from ._events import ALL_EVENTS, Event, Payload, event_named

log = logging.getLogger("contextree.agent")

Handler = Callable[["Env", Any], object]
"""``handler(env, payload)``; ``payload`` is the event's ``TypedDict`` (see ``PAYLOADS``)."""
Listener = Callable[[Message], None]
ReplaceListener = Callable[[Sequence[Message]], None]


class Events:
    """Named events with handlers ``handler(env, payload)``; a failing handler never breaks
    the turn: its exception is logged and recorded in ``env.handler_errors``."""

    def __init__(self) -> None:
        self._handlers: dict[str, list[Handler]] = {}

    def on(self, event: Event | str, handler: Handler) -> None:
        """Call ``handler`` on ``event`` (an ``Event``, its name, or ``"*"`` for every one);
        an unknown name is refused at once with ``InvalidArgument``."""
        key = ALL_EVENTS if event == ALL_EVENTS else event_named(event).value
        self._handlers.setdefault(key, []).append(handler)

    def emit(self, env: Env, payload: Payload) -> None:
        """Hand ``payload`` (a copy each) to the event's handlers, then to ``"*"``'s."""
        event = event_named(payload["event"])
        for handler in [*self._handlers.get(event.value, []), *self._handlers.get(ALL_EVENTS, [])]:
            try:
                handler(env, dict(payload))
            except Exception as e:
                log.exception("handler for %r raised; the turn goes on", event.value)
                env._handler_failed(event.value, e)


class Env:
    """State passed down the stack: the conversation, what the turn runs with, how it goes."""

    def __init__(self, messages: Iterable[Message] = (), *,
                 metadata: Mapping[str, Any] | None = None,
                 events: Events | None = None) -> None:
        # The conversation: what the model is sent next.
        self._messages: list[Message] = list(messages)
        self._snapshot: tuple[Message, ...] | None = None
        self._turn_start = 0  # index of this turn's first new message
        self._fresh_from = 0  # index of the first message produced after the latest replace()
        # What the turn runs with.
        self._tools: tuple[Tool | ToolSpec, ...] = ()
        self._metadata: Mapping[str, Any] = MappingProxyType(dict(metadata or {}))
        self._session: Session | None = None
        # How the turn goes.
        self._iteration = 0
        self._stopped: str | None = None
        self._notices: list[str] = []
        self._handler_errors: list[tuple[str, Exception]] = []
        # Who is told.
        self._events = events if events is not None else Events()
        self._added: list[Listener] = []
        self._replaced: list[ReplaceListener] = []

    # -- the conversation --------------------------------------------------------------------
    @property
    def messages(self) -> tuple[Message, ...]:
        """The conversation, oldest first (a snapshot: change it with ``add``/``replace``)."""
        if self._snapshot is None:
            self._snapshot = tuple(self._messages)
        return self._snapshot

    @property
    def last(self) -> Message | None:
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
        """Append a message to the conversation and hand it to every persistence listener."""
        self._change()
        self._messages.append(message)
        for listener in self._added:
            listener(message)

    def replace(self, messages: Sequence[Message]) -> None:
        """Replace the conversation (after compaction); listeners decide how to persist it.
        None of the usage reported so far describes the new conversation."""
        self._change()
        self._messages[:] = list(messages)
        self._turn_start = 0
        self._fresh_from = len(self._messages)
        for listener in self._replaced:
            listener(self.messages)

    def load_history(self, history: Sequence[Message], *, fresh_from: int = 0) -> None:
        """Put the persisted ``history`` before this turn's messages (persistence middleware
        does this, and listeners are not told). ``fresh_from`` is the index in ``history`` of
        the first message whose reported usage may anchor a token count (``len(history)``:
        none, since the history is a compacted view)."""
        self._change()
        self._messages[:0] = history
        self._turn_start += len(history)
        self._fresh_from = (self._fresh_from + len(history) if self._fresh_from
                            else min(max(fresh_from, 0), len(history)))

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
    def stopped(self) -> str | None:
        """Why the turn stopped early, if it did."""
        return self._stopped

    def stop(self, reason: str, notice: str) -> None:
        """End the turn early with a notice for the user (not sent to the model, not saved)."""
        self._stopped = reason
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

    # -- who is told ---------------------------------------------------------------------------
    @property
    def events(self) -> Events:
        return self._events

    def emit(self, payload: Payload) -> None:
        """Emit the event ``payload`` names (``payload["event"]``) to its handlers."""
        self._events.emit(self, payload)

    def _handler_failed(self, event: str, error: Exception) -> None:
        self._handler_errors.append((event, error))


@dataclass
class TurnResult:
    """What ``agent.start`` returns: the conversation, the final reply and the turn's usage."""

    messages: list[Message]
    reply: Message | None
    usage: Usage
    iterations: int
    stopped: str | None = None
    notices: list[str] = field(default_factory=list)
    handler_errors: list[tuple[str, Exception]] = field(default_factory=list)

    @property
    def text(self) -> str:
        return self.reply.text if self.reply is not None else ""
