"""``Tool``: a function a model can call, with its JSON schema, kind and truncation end."""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import functools
import inspect
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from contextree._messages import valid_text
from contextree.errors import ToolError
from contextree.tools._context import ToolContext
from contextree.tools._kinds import ToolKind, TruncateFrom, default_truncation
from contextree.tools._result import ToolResult, to_result
from contextree.tools._validate import ArgumentError, Checker, call_form

__all__ = ["Tool"]


@dataclass
class Tool:
    """A function a model can call, with its JSON schema.

    ``fn`` may be sync or async. ``context_param`` names the parameter that receives the
    ``ToolContext`` (never advertised to the model); ``context`` is the default one used when
    ``run`` is given none. ``truncates_itself`` tells the runtime not to truncate again.
    ``kind`` says what the tool does; ``truncate_from`` which end of a long result the
    runtime keeps (``None``: the kind's, the tail for shell, else the head).
    ``argument_types`` (the function's type hints) say what arguments convert to; without
    them the schema does.
    """

    name: str
    description: str
    parameters: dict[str, Any]
    fn: Callable[..., Any] = field(repr=False)
    truncates_itself: bool = False
    context_param: str | None = field(default=None, repr=False)
    context: ToolContext | None = field(default=None, repr=False)
    kind: ToolKind = ToolKind.OTHER
    truncate_from: TruncateFrom | None = None
    argument_types: Mapping[str, Any] | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.truncate_from is None:
            self.truncate_from = default_truncation(self.kind)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Call the underlying function directly (no validation, no context injection)."""
        return self.fn(*args, **kwargs)

    def spec(self) -> dict[str, Any]:
        """``{"name", "description", "parameters"}``: what a model adapter sends."""
        return {"name": self.name, "description": self.description, "parameters": self.parameters}

    def with_context(self, context: ToolContext) -> Tool:
        """A copy that uses ``context`` when ``run``/``arun`` are given none."""
        return dataclasses.replace(self, context=context)

    def validate(self, arguments: object) -> dict[str, Any]:
        """Check ``arguments`` against the schema; return them converted, defaults applied.

        Raises ``ToolError`` for a missing or unknown parameter or a value of the wrong type.
        """
        try:
            return self._checker(arguments)
        except ArgumentError as e:
            raise ToolError(
                f"invalid arguments for tool {self.name!r}: {e}. Call it as {self.signature()}"
            ) from None

    def run(self, arguments: object = None, *, context: ToolContext | None = None) -> ToolResult:
        """Validate and call; a ``ToolError`` becomes an error result the model can read.

        So does an ``OSError`` (the disk, the network or the file system refused: nothing the
        caller's code did wrong); any other exception is a bug and propagates. The text of
        the result is always valid Unicode (lone surrogates become U+FFFD), so it can be
        stored and sent.
        """
        try:
            kwargs = self._prepare(arguments, context)
            value = self.fn(**kwargs)
            if inspect.isawaitable(value):
                value = _run_awaitable(value)
        except ToolError as e:
            return _error(str(e))
        except OSError as e:
            return _error(self._os_failure(e))
        return _valid(to_result(value))

    async def arun(
        self, arguments: object = None, *, context: ToolContext | None = None
    ) -> ToolResult:
        """``run`` for async callers; a sync function runs in a worker thread."""
        try:
            kwargs = self._prepare(arguments, context)
            if inspect.iscoroutinefunction(self.fn):
                value = await self.fn(**kwargs)
            else:
                value = await asyncio.to_thread(self.fn, **kwargs)
                if inspect.isawaitable(value):
                    value = await value
        except ToolError as e:
            return _error(str(e))
        except OSError as e:
            return _error(self._os_failure(e))
        return _valid(to_result(value))

    def _os_failure(self, e: OSError) -> str:
        where = f" ({e.filename})" if e.filename else ""
        return (f"tool {self.name!r} failed: {e.strerror or e}{where}; check the arguments "
                "and the environment, then try again")

    def signature(self) -> str:
        """The call form shown in validation errors, e.g. ``read(path: string, offset = 1)``."""
        return call_form(self.name, self.parameters)

    @functools.cached_property
    def _checker(self) -> Checker:
        return Checker(self.parameters, self.argument_types)

    def _prepare(self, arguments: object, context: ToolContext | None) -> dict[str, Any]:
        kwargs = self.validate({} if arguments is None else arguments)
        if self.context_param is not None:
            kwargs[self.context_param] = context or self.context or ToolContext()
        return kwargs


def _valid(result: ToolResult) -> ToolResult:
    """``result`` with text that encodes as UTF-8 (lone surrogates replaced)."""
    try:
        result.content.encode("utf-8")
    except UnicodeEncodeError:
        result = dataclasses.replace(result, content=valid_text(result.content))
    return result


def _error(message: str) -> ToolResult:
    return _valid(ToolResult(message, is_error=True))


def _run_awaitable(awaitable: Awaitable[Any]) -> Any:
    """Run an awaitable to completion from sync code, even inside a running event loop."""

    async def wait() -> Any:
        return await awaitable

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(wait())
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, wait()).result()
