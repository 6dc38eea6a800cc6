"""``@tool``: a typed, documented function becomes a ``Tool``.

The JSON schema comes from the type hints and defaults (``contextree.tools._schema``), the
descriptions from the docstring (first paragraph for the tool, a Google-style ``Args:``
section for the parameters). A parameter annotated ``ToolContext`` receives the context.
"""

from __future__ import annotations

import inspect
import types
from collections.abc import Callable, Iterable
from typing import Any, Union, get_args, get_origin, get_type_hints, overload

import msgspec

from contextree.errors import InvalidArgument
from contextree.tools._context import ToolContext
from contextree.tools._docstrings import parse_docstring
from contextree.tools._kinds import ToolKind, TruncateFrom
from contextree.tools._schema import Param, object_schema
from contextree.tools._tool import Tool

__all__ = ["as_tools", "build_tool", "tool"]


@overload
def tool(fn: Callable[..., Any], /) -> Tool: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    truncates_itself: bool = False,
    kind: ToolKind = ToolKind.OTHER,
    truncate_from: TruncateFrom | None = None,
) -> Callable[[Callable[..., Any]], Tool]: ...


def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    truncates_itself: bool = False,
    kind: ToolKind = ToolKind.OTHER,
    truncate_from: TruncateFrom | None = None,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Make a ``Tool`` from a function: ``@tool``, or ``@tool(name=..., kind=ToolKind.SHELL,
    truncates_itself=True)``.

    Parameter types are what msgspec converts: str, int, float, bool, list[T], dict[str, T],
    Literal[...], unions and ``X | None``, enums, dataclasses, structs...; a parameter
    annotated ``ToolContext`` receives the context instead.
    """

    def build(f: Callable[..., Any]) -> Tool:
        return build_tool(f, name=name, description=description,
                          truncates_itself=truncates_itself, kind=kind,
                          truncate_from=truncate_from)

    return build(fn) if fn is not None else build


def build_tool(
    fn: Callable[..., Any],
    *,
    name: str | None = None,
    description: str | None = None,
    truncates_itself: bool = False,
    kind: ToolKind = ToolKind.OTHER,
    truncate_from: TruncateFrom | None = None,
) -> Tool:
    """The ``Tool`` for ``fn`` (what ``@tool`` does)."""
    where = getattr(fn, "__qualname__", repr(fn))
    try:
        hints = get_type_hints(fn, include_extras=True)
    except Exception as e:
        raise TypeError(f"@tool {where}: cannot resolve type hints: {e}") from e
    summary, arg_docs = parse_docstring(inspect.getdoc(fn) or "")
    params: list[Param] = []
    context_param = None
    for p in inspect.signature(fn).parameters.values():
        annotation = hints.get(p.name, Any)
        if _is_context(annotation):
            context_param = p.name
            continue
        if p.kind not in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY):
            raise TypeError(f"@tool {where}: parameter {p.name!r} must be passable by keyword")
        params.append(Param(p.name, annotation, arg_docs.get(p.name), _default(p)))
    return Tool(
        name=name if name is not None else str(getattr(fn, "__name__", "tool")),
        description=description if description is not None else summary,
        parameters=object_schema(params, where),
        fn=fn,
        truncates_itself=truncates_itself,
        context_param=context_param,
        kind=kind,
        truncate_from=truncate_from,
        argument_types={p.name: p.annotation for p in params},
    )


def as_tools(items: Iterable[Tool | Callable[..., Any]]) -> list[Tool]:
    """Tools from a mix of ``Tool`` objects and plain functions (decorated on the fly)."""
    if isinstance(items, str):
        items = [items]
    for t in items:
        if isinstance(t, str):
            raise InvalidArgument(
                f"tools are Tool objects or functions, got the string {t!r}: pick built-in "
                f"tools by name from contextree.make_tools(workspace=...), e.g. "
                f"[t for t in make_tools(workspace='.') if t.name == {t!r}]")
    return [t if isinstance(t, Tool) else build_tool(t) for t in items]


def _default(p: inspect.Parameter) -> Any:
    return msgspec.NODEFAULT if p.default is p.empty else p.default


def _is_context(annotation: Any) -> bool:
    if annotation is ToolContext:
        return True
    if get_origin(annotation) in (Union, types.UnionType):
        members = [a for a in get_args(annotation) if a is not type(None)]
        return members == [ToolContext]
    return False
