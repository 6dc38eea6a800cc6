"""One turn as a stream of events: ``agent.stream(input)`` and ``agent.astream(input)``.

The stack runs in a worker thread; every event it emits goes to the ``on()`` handlers (in
that thread) and then into the stream's queue, which the caller reads. ``start()`` and
``astart()`` read the same stream to its end, so the watched path and the plain one are one
path.

Interruption: Ctrl-C while the caller waits for the next event, leaving a ``with`` block by an
exception, ``close()``, or cancelling the task of ``astream`` asks the turn to stop
(``Env.interrupt``) and waits until it has: the partial reply and the "interrupted" tool
results are written before the exception goes on. The events of that ending (``committed``,
``interrupted``, ``turn_end``) are kept: iterate again to read them. A second Ctrl-C while
waiting stops the wait.
"""

from __future__ import annotations

import asyncio
import queue
import threading
from collections import deque
from collections.abc import Callable
from types import TracebackType
from typing import Any, Self

from .._messages import Message
from ..errors import InvalidArgument
from ..models._base import Model
from ._env import App, Env, Events, TurnResult
from ._events import Event, Payload, StopReason, TurnEndPayload, TurnStartPayload

StackBuilder = Callable[[asyncio.AbstractEventLoop | None], App]
"""Builds an agent's middleware stack for one turn (given the caller's event loop, if any)."""

__all__ = ["AgentStream", "AsyncAgentStream"]


class _Done:
    __slots__ = ("result",)

    def __init__(self, result: TurnResult) -> None:
        self.result = result


class _Failed:
    __slots__ = ("error",)

    def __init__(self, error: BaseException) -> None:
        self.error = error


def _first(input: str | Message | None) -> list[Message]:
    if input is None:
        return []
    return [Message.user(input) if isinstance(input, str) else input]


def result_of(env: Env) -> TurnResult:
    """The ``TurnResult`` of a finished turn: ``reply`` is this turn's (never an earlier
    turn's answer, so a turn stopped before its first model call has none)."""
    return TurnResult(list(env.messages), env.reply, env.turn_usage, env.iteration, env.stopped,
                      list(env.notices), list(env.handler_errors), cost=env.turn_cost)


def run_turn(stack: App, env: Env, put: Callable[[Any], object]) -> None:
    """Run one turn on ``env`` and hand its end (``_Done`` or ``_Failed``) to ``put``,
    after the ``turn_end`` event."""
    try:
        env.emit(TurnStartPayload(event=Event.TURN_START, input=env.last))
        env = stack(env)
        result = result_of(env)
        env.emit(TurnEndPayload(event=Event.TURN_END, usage=result.usage, cost=result.cost,
                                iterations=result.iterations, stopped=result.stopped,
                                error=None))
        end: _Done | _Failed = _Done(result)
    except BaseException as e:  # the caller's thread raises it
        env.emit(TurnEndPayload(event=Event.TURN_END, usage=env.turn_usage,
                                cost=env.turn_cost, iterations=env.iteration,
                                stopped=StopReason.ERROR, error=f"{type(e).__name__}: {e}"))
        end = _Failed(e)
    finally:
        env.close()
    put(end)


class _TurnStream:
    """What the sync and async streams share: the env, the buffer, the end."""

    def __init__(self, build: StackBuilder, events: Events, model: Model | None,
                 input: str | Message | None, metadata: dict[str, Any]) -> None:
        self._build = build
        self._events = events
        self._model = model
        self._input = input
        self._metadata = metadata
        self._env: Env | None = None
        self._buffer: deque[Payload] = deque()
        self._result: TurnResult | None = None
        self._error: BaseException | None = None
        self._done = False
        self._raised = False
        self._cancel_before_start = False

    @property
    def result(self) -> TurnResult:
        """The turn's result, once the stream has been read to its end."""
        if self._result is None:
            if self._error is not None:
                raise self._error
            raise InvalidArgument("the turn has not ended: read the stream to its end first")
        return self._result

    @property
    def env(self) -> Env | None:
        """The turn's env (None until the stream is first read)."""
        return self._env

    def _env_for(self, sink: Callable[[Payload], None]) -> Env:
        env = Env(_first(self._input), metadata=self._metadata, events=self._events,
                  sink=sink, model=self._model)
        self._env = env
        return env

    def __del__(self) -> None:
        """A stream dropped before its end (``break`` out of a loop without ``with``)
        interrupts its turn, as leaving a ``with`` block does, without waiting for it."""
        env = self._env
        if env is not None and not self._done:
            env.interrupt()

    def _take(self, item: Any) -> Payload | None:
        """A payload to yield, or None once the turn's end has been taken."""
        if isinstance(item, _Done):
            self._result, self._done = item.result, True
            return None
        if isinstance(item, _Failed):
            self._error, self._done = item.error, True
            return None
        payload: Payload = item
        return payload

    def _raise_end(self) -> None:
        """Raise the turn's failure, once."""
        if self._error is not None and not self._raised:
            self._raised = True
            raise self._error


class AgentStream(_TurnStream):
    """The events of one turn, as they happen (``agent.stream(input)``).

    Iterate it (ideally in a ``with`` block); each item is the event's payload (a
    ``TypedDict`` whose ``"event"`` names it); ``result`` is the ``TurnResult`` once the
    stream ended. A failure of the turn is raised from the iteration, after ``turn_end``.
    """

    def __init__(self, build: StackBuilder, events: Events, model: Model | None,
                 input: str | Message | None, metadata: dict[str, Any]) -> None:
        super().__init__(build, events, model, input, metadata)
        self._queue: queue.Queue[Any] = queue.Queue()
        self._thread: threading.Thread | None = None

    def _begin(self) -> None:
        stack = self._build(None)
        env = self._env_for(self._queue.put)
        self._thread = threading.Thread(target=run_turn, args=(stack, env, self._queue.put),
                                        name="contextree-turn", daemon=True)
        self._thread.start()

    def __iter__(self) -> Self:
        return self

    def __next__(self) -> Payload:
        if self._buffer:
            return self._buffer.popleft()
        if self._done or self._cancel_before_start:
            self._raise_end()
            raise StopIteration
        if self._thread is None:
            self._begin()
        try:
            item = self._queue.get()
        except BaseException:  # Ctrl-C while waiting: stop the turn, then go on raising
            self._interrupt_and_wait()
            raise
        payload = self._take(item)
        if payload is None:
            self._raise_end()
            raise StopIteration
        return payload

    def _interrupt_and_wait(self) -> None:
        if self._env is None:
            self._cancel_before_start = True
            return
        self._env.interrupt()
        while not self._done:
            payload = self._take(self._queue.get())
            if payload is not None:
                self._buffer.append(payload)

    def close(self) -> None:
        """Interrupt the turn if it is still running and wait until it has stopped (the
        partial reply is saved); the remaining events are dropped."""
        if not self._done:
            self._interrupt_and_wait()
        self._buffer.clear()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if not self._done:
            self._interrupt_and_wait()


class AsyncAgentStream(_TurnStream):
    """The async ``AgentStream`` (``agent.astream(input)``): ``async for`` the events.
    Cancelling the task that reads it interrupts the turn, as Ctrl-C does."""

    def __init__(self, build: StackBuilder, events: Events, model: Model | None,
                 input: str | Message | None, metadata: dict[str, Any]) -> None:
        super().__init__(build, events, model, input, metadata)
        self._queue: asyncio.Queue[Any] | None = None

    def _begin(self) -> asyncio.Queue[Any]:
        loop = asyncio.get_running_loop()
        q: asyncio.Queue[Any] = asyncio.Queue()
        self._queue = q

        def put(item: Any) -> None:
            loop.call_soon_threadsafe(q.put_nowait, item)

        stack = self._build(loop)
        env = self._env_for(put)
        threading.Thread(target=run_turn, args=(stack, env, put), name="contextree-turn",
                         daemon=True).start()
        return q

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> Payload:
        if self._buffer:
            return self._buffer.popleft()
        if self._done or self._cancel_before_start:
            self._raise_end()
            raise StopAsyncIteration
        q = self._queue if self._queue is not None else self._begin()
        try:
            item = await q.get()
        except BaseException:  # the task was cancelled: stop the turn, then go on raising
            await self._interrupt_and_wait()
            raise
        payload = self._take(item)
        if payload is None:
            self._raise_end()
            raise StopAsyncIteration
        return payload

    async def _interrupt_and_wait(self) -> None:
        if self._env is None or self._queue is None:
            self._cancel_before_start = True
            return
        self._env.interrupt()
        while not self._done:
            payload = self._take(await self._queue.get())
            if payload is not None:
                self._buffer.append(payload)

    async def aclose(self) -> None:
        """Interrupt the turn if it is still running and wait until it has stopped."""
        if not self._done:
            await self._interrupt_and_wait()
        self._buffer.clear()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        if not self._done:
            await self._interrupt_and_wait()
