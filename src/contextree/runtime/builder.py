"""``agent()``: a Rack-style stack of middleware around one model call.

Each middleware is a class constructed as ``Middleware(app, **options)`` whose ``__call__``
takes the ``Env``, may act before and after calling ``self.app(env)``, and returns the env.
The order of ``use`` calls is the policy: the first is outermost.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from typing import Any

from ..messages import Message, Usage
from .env import Env, Events, Handler, TurnResult

App = Callable[[Env], Env]


class ModelCall:
    """The innermost app: send the conversation and tool schemas, add the reply."""

    def __init__(self, model: Any, loop: asyncio.AbstractEventLoop | None = None) -> None:
        self.model = model
        self.loop = loop

    def __call__(self, env: Env) -> Env:
        specs = [t.spec() if hasattr(t, "spec") else t for t in env.tools]
        options = env.metadata.get("model_options", {})
        if self.loop is not None and _is_async_only(self.model):
            future = asyncio.run_coroutine_threadsafe(
                self.model.acomplete(env.messages, tools=specs, **options), self.loop)
            reply = future.result()
        else:
            reply = self.model.complete(env.messages, tools=specs, **options)
        env.add(reply)
        env.emit("model_reply", message=reply)
        return env


def _is_async_only(model: Any) -> bool:
    complete = getattr(model, "complete", None)
    return complete is None or inspect.iscoroutinefunction(complete)


class Agent:
    """A built agent: ``start`` runs one turn; ``on`` subscribes to events."""

    def __init__(self) -> None:
        self._layers: list[tuple[type[Any] | Callable[..., App], dict[str, Any]]] = []
        self._model: Any = None
        self.events = Events()

    def use(self, middleware: type[Any] | Callable[..., App], **options: Any) -> Agent:
        """Add a layer; layers added first wrap those added later."""
        self._layers.append((middleware, options))
        return self

    def run(self, model: Any) -> Agent:
        """Set the model the innermost layer calls."""
        self._model = model
        return self

    def on(self, event: str, handler: Handler) -> Agent:
        """Call ``handler(env, payload)`` on ``event`` (``"*"`` for every event)."""
        self.events.on(event, handler)
        return self

    def _stack(self, loop: asyncio.AbstractEventLoop | None = None) -> App:
        if self._model is None:
            raise ValueError("no model: call .run(model) before .start(...)")
        app: App = ModelCall(self._model, loop)
        for middleware, options in reversed(self._layers):
            app = middleware(app, **options)
        return app

    def start(self, input: str | Message | None = None, **metadata: Any) -> TurnResult:
        """Run one turn on ``input`` (``None``: resume the persisted conversation)."""
        return self._run(self._stack(), input, metadata)

    async def astart(self, input: str | Message | None = None, **metadata: Any) -> TurnResult:
        """``start`` for async code: the same stack runs in a worker thread, so behaviour is
        identical; async models are awaited on the caller's loop, async tools in the thread."""
        loop = asyncio.get_running_loop()
        stack = self._stack(loop)
        return await asyncio.to_thread(self._run, stack, input, metadata)

    def _run(self, stack: App, input: str | Message | None,
             metadata: dict[str, Any]) -> TurnResult:
        env = Env(messages=[], metadata=dict(metadata), events=self.events)
        if input is not None:
            env.messages.append(Message.user(input) if isinstance(input, str) else input)
        env = stack(env)
        turn = env.messages[env.turn_start:]
        usage = Usage()
        for m in turn:
            if m.role == "assistant" and m.usage is not None:
                usage = usage + m.usage
        reply = next((m for m in reversed(env.messages) if m.role == "assistant"), None)
        return TurnResult(list(env.messages), reply, usage, env.iteration, env.stopped,
                          list(env.notices), list(env.handler_errors))


def agent() -> Agent:
    """A new agent builder: ``agent().use(...).use(...).run(model)``."""
    return Agent()
