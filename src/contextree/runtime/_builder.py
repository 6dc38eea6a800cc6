"""``agent()``: a Rack-style stack of middleware around one model call.

Each middleware is a class constructed as ``Middleware(app, **options)`` whose ``__call__``
takes the ``Env``, may act before and after calling ``self.app(env)``, and returns the env.
The order of ``use`` calls is the policy: the first is outermost. ``use`` checks the options
against the middleware's constructor and builds the layer once around a placeholder, so a
misspelt option or a value the constructor refuses fails where it is written, not at the first
``start()``. (The stack is built again for every turn; a constructor only stores its options.)
"""

from __future__ import annotations

import asyncio
import difflib
import inspect
from collections.abc import Callable
from typing import Any, Concatenate, ParamSpec, TypeVar, overload

from .._messages import Message
from .._text import shorten
from ..errors import InvalidArgument, UnknownOption
from ..models._base import Model
from ._call import ModelCall
from ._env import App, Env, Events, Handler, TurnResult, TypedHandler
from ._events import Event, EventPayload
from ._run import AgentStream, AsyncAgentStream

__all__ = ["Agent", "App", "Middleware", "ModelCall", "agent"]

Middleware = App
"""A middleware is an ``App`` that wraps another (``Middleware(app, **options)``)."""
P = ParamSpec("P")
E = TypeVar("E", bound=EventPayload)


class Agent:
    """A built agent: ``start`` runs one turn, ``stream`` runs one while you watch its
    events; ``on`` subscribes to events."""

    def __init__(self) -> None:
        self._layers: list[tuple[Callable[..., App], tuple[Any, ...], dict[str, Any]]] = []
        self._model: Model | None = None
        self._streaming = True
        self.events = Events()

    def use(self, middleware: Callable[Concatenate[App, P], Middleware], /,
            *args: P.args, **kwargs: P.kwargs) -> Agent:
        """Add a layer built as ``middleware(app, *args, **kwargs)``; layers added first wrap
        those added later. Options the middleware does not take, or required ones left out,
        are refused here with ``InvalidArgument`` naming the options it accepts; so are values
        the constructor refuses (the layer is built once here around a placeholder app)."""
        check_options(middleware, args, kwargs)
        middleware(_placeholder, *args, **kwargs)
        self._layers.append((middleware, args, kwargs))
        return self

    def run(self, model: Model, *, stream: bool = True) -> Agent:
        """Set the model the innermost layer calls. ``stream=False`` asks it for completed
        replies (for a server that cannot stream); the events are the same, the text
        arriving in one delta."""
        if not any(callable(getattr(model, m, None)) for m in ("complete", "acomplete",
                                                                "stream")):
            hint = (f" such as contextree.models.OpenAIChat({model!r})"
                    if isinstance(model, str) else "")
            raise InvalidArgument(f"run() takes a model object{hint} (one with complete() or "
                                  f"acomplete()), got {type(model).__name__} {model!r:.80}")
        self._model = model
        self._streaming = stream
        return self

    @property
    def model(self) -> Model | None:
        """The model set with ``run``."""
        return self._model

    @overload
    def on(self, event: type[E], handler: TypedHandler[E]) -> Agent: ...
    @overload
    def on(self, event: Event | str, handler: Handler) -> Agent: ...
    def on(self, event: Event | str | type[EventPayload],
           handler: Callable[[Env, Any], object]) -> Agent:
        """Call ``handler(env, payload)`` on ``event`` (``"*"`` for every event, or a payload
        class such as ``CompactedPayload`` to have the payload typed as it); an unknown event
        is refused with ``InvalidArgument``."""
        self.events.on(event, handler)
        return self

    def _stack(self, loop: asyncio.AbstractEventLoop | None = None) -> App:
        if self._model is None:
            raise InvalidArgument("no model: call .run(model) before .start(...)")
        app: App = ModelCall(self._model, loop, stream=self._streaming)
        for middleware, args, kwargs in reversed(self._layers):
            app = middleware(app, *args, **kwargs)
        return app

    def stream(self, input: str | Message | None = None, **metadata: Any) -> AgentStream:
        """Run one turn on ``input`` (``None``: answer the persisted conversation) and
        return its events as they happen: ``turn_start``, ``model_start``, ``text_delta`` /
        ``thinking_delta``, ``tool_call``, ``committed``, ``tool_start`` / ``tool_end``,
        compaction events, ..., ``turn_end``. Read it in a ``with`` block: leaving early
        (an exception, Ctrl-C, ``close()``) interrupts the turn and saves the partial reply.
        ``result`` is the ``TurnResult`` at the end."""
        self._check_ready(input)
        return AgentStream(self._stack, self.events, self._model, input, metadata)

    def astream(self, input: str | Message | None = None,
                **metadata: Any) -> AsyncAgentStream:
        """``stream`` for async code (``async for event in agent.astream(...)``):
        cancelling the reading task interrupts the turn as Ctrl-C does."""
        self._check_ready(input)
        return AsyncAgentStream(self._stack, self.events, self._model, input, metadata)

    def start(self, input: str | Message | None = None, **metadata: Any) -> TurnResult:
        """Run one turn on ``input`` (``None``: answer the persisted conversation; when it
        ends with the assistant's reply there is nothing to answer, and the result says so:
        ``stopped == "nothing_to_answer"``). It reads ``stream(...)`` to its end."""
        with self.stream(input, **metadata) as events:
            for _ in events:
                pass
        return events.result

    async def astart(self, input: str | Message | None = None, **metadata: Any) -> TurnResult:
        """``start`` for async code: the same stack runs in a worker thread, so behaviour is
        identical; async models are awaited on the caller's loop, async tools in the thread."""
        async with self.astream(input, **metadata) as events:
            async for _ in events:
                pass
        return events.result

    def _check_ready(self, input: object) -> None:
        if self._model is None:
            raise InvalidArgument("no model: call .run(model) before .start(...)")
        if input is not None and not isinstance(input, str | Message):
            raise InvalidArgument(f"a turn's input is a str or a Message (or None to answer "
                                  f"the conversation as it is), got {type(input).__name__} "
                                  f"{input!r:.80}")


def _placeholder(env: Env) -> Env:
    """The app a layer built only to check its options wraps (never called in a turn)."""
    raise InvalidArgument("a layer built by use() to check its options was called; build "
                          "the stack with agent.start()")


def require_non_negative(owner: str, unit: str = "", **values: float | None) -> None:
    """Refuse any of ``values`` below 0, or NaN (``None``: not given), naming ``owner`` and
    the option (``"Retry: max_delay must be 0 or more seconds, got -1"``): the one check
    that the middleware taking amounts (``Budget``, ``Retry``) share."""
    for name, value in values.items():
        if value is not None and not value >= 0:
            raise InvalidArgument(f"{owner}: {name} must be 0 or more{unit}, got {value!r}")


def check_options(middleware: Callable[..., Any], args: tuple[Any, ...],
                  kwargs: dict[str, Any]) -> None:
    """Refuse options ``middleware(app, *args, **kwargs)`` would not accept, naming those it
    does (``InvalidArgument``; an unknown keyword is ``UnknownOption``, also a ``TypeError``,
    and names the option meant: the one its ``renamed_options`` class attribute maps it to,
    or the closest spelling); a middleware whose signature cannot be read is let through."""
    try:
        signature = inspect.signature(middleware)
    except (TypeError, ValueError):
        return
    try:
        signature.bind(None, *args, **kwargs)  # None stands in for the app
    except TypeError as e:
        name = getattr(middleware, "__qualname__", None) or repr(middleware)
        error = UnknownOption if _unknown(signature, kwargs) else InvalidArgument
        renamed = getattr(middleware, "renamed_options", {})
        raise error(
            f"{name}: {_problem(signature, args, kwargs, renamed) or e}. "
            f"It accepts {_accepted(signature)}"
        ) from None


def _options(signature: inspect.Signature) -> list[inspect.Parameter]:
    return list(signature.parameters.values())[1:]  # the first is the app


def _problem(signature: inspect.Signature, args: tuple[Any, ...],
             kwargs: dict[str, Any], renamed: dict[str, str]) -> str:
    options = _options(signature)
    named = {p.name for p in options if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)}
    problems = []
    unknown = _unknown(signature, kwargs)
    if unknown:
        problems.append("unknown option " + ", ".join(
            repr(k) + "".join(f" (use {m}=)" for m in _meant(k, named, renamed))
            for k in unknown))
    positional = [p for p in options if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    given = {p.name for p in positional[:len(args)]} | set(kwargs)
    missing = [p.name for p in options if p.default is p.empty and p.name not in given
               and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    if missing:
        problems.append("missing required option " + ", ".join(repr(k) for k in missing))
    return "; ".join(problems)


def _meant(option: str, named: set[str], renamed: dict[str, str]) -> list[str]:
    """The option that ``option`` stands for: a declared renaming, else the closest name."""
    if renamed.get(option) in named:
        return [renamed[option]]
    return difflib.get_close_matches(option, sorted(named), n=1, cutoff=0.8)


def _unknown(signature: inspect.Signature, kwargs: dict[str, Any]) -> list[str]:
    """The keywords in ``kwargs`` the signature has no parameter for."""
    options = _options(signature)
    if any(p.kind is p.VAR_KEYWORD for p in options):
        return []
    named = {p.name for p in options if p.kind not in (p.VAR_POSITIONAL, p.POSITIONAL_ONLY)}
    return [k for k in kwargs if k not in named]


def _accepted(signature: inspect.Signature) -> str:
    shown = []
    for p in _options(signature):
        if p.kind is p.VAR_KEYWORD:
            shown.append(f"**{p.name}")
        elif p.kind is p.VAR_POSITIONAL:
            shown.append(f"*{p.name}")
        elif p.default is p.empty:
            shown.append(f"{p.name} (required)")
        else:
            shown.append(f"{p.name}={shorten(repr(p.default), 40)}")
    return ", ".join(shown) if shown else "no options"


def agent() -> Agent:
    """A new agent builder: ``agent().use(...).use(...).run(model)``."""
    return Agent()
