"""Middleware that shapes the turn: system prompt, the tool loop and its guards, retries."""

from __future__ import annotations

import random
from collections.abc import Callable

import orjson

from .._messages import Message
from ..errors import InvalidArgument, ModelError
from ._builder import App, require_non_negative
from ._call import INTERRUPTED_NOTICE
from ._env import Env
from ._events import DoomLoopPayload, Event, MaxIterationsPayload, RetryPayload, StopReason


class SystemPrompt:
    """Put ``text`` first in the conversation on every turn (it is never persisted)."""

    def __init__(self, app: App, /, text: str = "You are a helpful assistant.") -> None:
        if not isinstance(text, str):
            raise InvalidArgument(f"SystemPrompt: text must be a string, got {text!r}")
        self.app = app
        self.text = text

    def __call__(self, env: Env) -> Env:
        first = env.messages[0] if env.messages else None
        if first is None or first.role != "system" or first.kind is not None:
            env.put_first(Message.system(self.text))
        return self.app(env)


class ToolResultLoop:
    """Call the inner stack again while the last message is a tool result."""

    def __init__(self, app: App, /) -> None:
        self.app = app

    def __call__(self, env: Env) -> Env:
        env = self.app(env)
        while env.stopped is None and env.last is not None and env.last.role == "tool":
            env.next_iteration()
            env = self.app(env)
        return env


class MaxIterations:
    """Stop the turn after ``limit`` model calls, with a notice and a ``max_iterations`` event."""

    def __init__(self, app: App, /, limit: int = 100) -> None:
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise InvalidArgument("MaxIterations: limit must be a whole number of at least 1 "
                                  f"(model calls per turn), got {limit!r}")
        self.app = app
        self.limit = limit

    def __call__(self, env: Env) -> Env:
        if env.iteration >= self.limit:
            env.stop(StopReason.MAX_ITERATIONS, f"Stopped after {self.limit} model calls in one turn "
                     "(MaxIterations); start another turn to continue.")
            env.emit(MaxIterationsPayload(event=Event.MAX_ITERATIONS, limit=self.limit))
            return env
        return self.app(env)


class DoomLoop:
    """Stop when the model makes the same tool call with the same arguments ``threshold``
    times in a row, with a notice and a ``doom_loop`` event."""

    def __init__(self, app: App, /, threshold: int = 3) -> None:
        if isinstance(threshold, bool) or not isinstance(threshold, int) or threshold < 2:
            raise InvalidArgument("DoomLoop: threshold must be a whole number of at least 2 "
                                  f"(the same call in a row), got {threshold!r}")
        self.app = app
        self.threshold = threshold

    def __call__(self, env: Env) -> Env:
        env = self.app(env)
        signatures: list[bytes] = []
        for m in reversed(env.messages[env.turn_start:]):
            if m.role != "assistant":
                continue
            if not m.tool_calls:
                break
            signatures.append(orjson.dumps([(c.name, c.arguments) for c in m.tool_calls],
                                           option=orjson.OPT_SORT_KEYS))
            if len(signatures) >= self.threshold:
                break
        if len(signatures) >= self.threshold and len(set(signatures)) == 1:
            env.stop(StopReason.DOOM_LOOP, f"Stopped: the model repeated the same tool call "
                     f"{self.threshold} times in a row.")
            env.emit(DoomLoopPayload(event=Event.DOOM_LOOP, calls=orjson.loads(signatures[0]),
                                     times=self.threshold))
        return env


class Retry:
    """Retry model calls that failed with a retryable ``ModelError`` (rate limits, server
    errors, a stream cut off), waiting as the provider asked (retry-after) or with jittered
    exponential backoff. The wait ends early when the turn is interrupted (unless a ``sleep``
    function of your own is given)."""

    def __init__(self, app: App, /, attempts: int = 4, base_delay: float = 1.0,
                 max_delay: float = 60.0, sleep: Callable[[float], object] | None = None) -> None:
        if attempts < 1:
            raise InvalidArgument(f"Retry: attempts must be at least 1, got {attempts}")
        require_non_negative("Retry", " seconds", base_delay=base_delay, max_delay=max_delay)
        self.app = app
        self.attempts = attempts
        self.base_delay = base_delay
        self.max_delay = max_delay
        self.sleep = sleep

    def __call__(self, env: Env) -> Env:
        for attempt in range(1, self.attempts + 1):
            try:
                return self.app(env)
            except ModelError as e:
                if not e.retryable or attempt == self.attempts:
                    raise
                delay = e.retry_after if e.retry_after is not None else min(
                    self.max_delay, self.base_delay * 2 ** (attempt - 1)) * random.uniform(0.8, 1.2)
                delay = min(delay, self.max_delay)
                env.emit(RetryPayload(event=Event.RETRY, attempt=attempt, delay=delay,
                                      error=str(e), status=e.status))
                if self.sleep is not None:
                    self.sleep(delay)
                elif env.wait(delay):
                    env.stop(StopReason.INTERRUPTED, INTERRUPTED_NOTICE)
                    return env
        raise AssertionError("unreachable")  # pragma: no cover
