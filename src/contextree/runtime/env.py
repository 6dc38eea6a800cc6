"""The env every middleware receives: the conversation so far, the tools, and the turn's state."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..messages import Message, Usage
from ..tokens import usage_anchor

log = logging.getLogger("contextree.agent")

Handler = Callable[["Env", dict[str, Any]], Any]
Listener = Callable[[Message], None]


class Events:
    """Named events with handlers ``handler(env, payload)``; a failing handler never breaks
    the turn: its exception is logged and recorded in ``env.handler_errors``."""

    def __init__(self) -> None:
        self._handlers: dict[str, list[Handler]] = {}

    def on(self, event: str, handler: Handler) -> None:
        self._handlers.setdefault(event, []).append(handler)

    def emit(self, env: Env, event: str, payload: dict[str, Any]) -> None:
        for handler in [*self._handlers.get(event, []), *self._handlers.get("*", [])]:
            try:
                handler(env, {"event": event, **payload})
            except Exception as e:
                log.exception("handler for %r raised; the turn goes on", event)
                env.handler_errors.append((event, e))


@dataclass
class Env:
    """State passed down the stack. Add messages with ``add`` so persistence sees them."""

    messages: list[Message]
    tools: list[Any] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)
    iteration: int = 0
    events: Events = field(default_factory=Events)
    stopped: str | None = None  # why the turn stopped early, if it did
    notices: list[str] = field(default_factory=list)  # shown to the user, never persisted
    handler_errors: list[tuple[str, Exception]] = field(default_factory=list)
    session: Any = None  # the Session, when SessionTree is in the stack
    turn_start: int = 0  # index in ``messages`` where this turn's new messages begin
    # Index in ``messages`` of the first message produced since the latest compaction: the
    # usage of those before describes a context that no longer exists.
    fresh_from: int = 0
    _listeners: list[Listener] = field(default_factory=list, repr=False)
    _replace_listeners: list[Callable[[Sequence[Message]], None]] = field(
        default_factory=list, repr=False)

    def add(self, message: Message) -> None:
        """Append a message to the conversation and hand it to every persistence listener."""
        self.messages.append(message)
        for listener in self._listeners:
            listener(message)

    def replace(self, messages: Sequence[Message]) -> None:
        """Replace the conversation (after compaction); listeners decide how to persist it."""
        self.messages[:] = list(messages)
        self.turn_start = 0
        self.fresh_from = len(self.messages)
        for listener in self._replace_listeners:
            listener(self.messages)

    def on_add(self, listener: Listener) -> None:
        self._listeners.append(listener)

    def on_replace(self, listener: Callable[[Sequence[Message]], None]) -> None:
        self._replace_listeners.append(listener)

    def emit(self, event: str, **payload: Any) -> None:
        self.events.emit(self, event, payload)

    def stop(self, reason: str, notice: str) -> None:
        """End the turn early with a notice for the user (not sent to the model, not saved)."""
        self.stopped = reason
        self.notices.append(notice)

    def usage_anchor(self) -> int | None:
        """Index of the last assistant message whose reported usage describes this very
        conversation (it was produced after the latest compaction), or ``None``."""
        return usage_anchor(self.messages, self.fresh_from)

    @property
    def last(self) -> Message | None:
        return self.messages[-1] if self.messages else None


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
