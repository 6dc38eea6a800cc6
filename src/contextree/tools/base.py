"""Tools a model can call: the ``@tool`` decorator, ``Tool``, ``ToolResult``, ``ToolContext``.

``@tool`` turns a typed, documented function into a ``Tool``: the JSON schema comes from the
type hints and defaults, the descriptions from the docstring (first paragraph for the tool,
a Google-style ``Args:`` section for the parameters). ``Tool.validate`` checks a model's
arguments against that schema and says, in words the model can act on, what is wrong.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import copy
import dataclasses
import inspect
import json
import os
import re
import types
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import (
    TYPE_CHECKING,
    Annotated,
    Any,
    Literal,
    Union,
    get_args,
    get_origin,
    get_type_hints,
    overload,
)

from contextree.errors import ToolError
from contextree.tools.workspace import StrPath, Workspace, is_under, real

if TYPE_CHECKING:
    from contextree.overflow import OverflowStore
    from contextree.truncation import Truncation


# -- results and context -----------------------------------------------------------------
@dataclass
class ToolResult:
    """What a tool returns: text for the model, an error flag, and metadata for the runtime.

    ``meta`` holds ``{"truncated": {...}}`` when the tool already truncated its output (so it
    is not truncated twice), plus tool facts such as ``path``, ``command`` and ``exit_code``.
    """

    content: str
    is_error: bool = False
    meta: dict[str, Any] | None = None


@dataclass
class ToolContext:
    """Where a tool runs: the workspace (or none), the overflow store, the session and cwd.

    Without a workspace paths resolve against ``cwd`` (default: the process's working
    directory) and are not confined. With one, ``cwd`` defaults to the workspace root and
    files in the overflow store's directory stay readable, so truncation hints work.
    """

    workspace: Workspace | None = None
    store: OverflowStore | None = None
    session_id: str | None = None
    cwd: StrPath | None = None

    @property
    def base(self) -> Path:
        """The directory relative paths and shell commands start from."""
        if self.cwd is not None:
            return real(self.cwd)
        if self.workspace is not None:
            return self.workspace.root
        return real(os.getcwd())

    def readable_dirs(self) -> tuple[Path, ...]:
        """Directories outside the workspace that stay readable: the overflow store's.

        Without a store that is ``OverflowStore.default()``, where truncation then saves.
        """
        from contextree.overflow import OverflowStore

        store = self.store if self.store is not None else OverflowStore.default()
        return (real(store.directory),)

    def resolve(self, path: StrPath, *, write: bool = False) -> Path:
        """The real absolute path for ``path``; ``ToolError`` when confinement refuses it."""
        if self.workspace is None:
            return real(self.base / os.path.expanduser(os.fspath(path)))
        return self.workspace.resolve(
            path, write=write, cwd=self.base, extra_readable=self.readable_dirs()
        )

    def display(self, path: Path) -> str:
        """``path`` as shown to the model: relative to ``base`` when under it, else absolute.

        Shown paths resolve back to the same file when the model passes them to a tool.
        """
        root = self.base
        if path == root:
            return "."
        if is_under(path, root):
            return path.relative_to(root).as_posix()
        return str(path)

    def truncate(self, text: str | bytes, **options: Any) -> Truncation:
        """``contextree.truncation.truncate`` with this context's store and session."""
        from contextree.truncation import truncate

        return truncate(text, store=self.store, session_id=self.session_id, **options)


# -- the Tool ----------------------------------------------------------------------------
@dataclass
class Tool:
    """A function a model can call, with its JSON schema.

    ``fn`` may be sync or async. ``context_param`` names the parameter that receives the
    ``ToolContext`` (never advertised to the model); ``context`` is the default one used when
    ``run`` is given none. ``truncates_itself`` tells the runtime not to truncate again.
    """

    name: str
    description: str
    parameters: dict[str, Any]
    fn: Callable[..., Any] = field(repr=False)
    truncates_itself: bool = False
    context_param: str | None = field(default=None, repr=False)
    context: ToolContext | None = field(default=None, repr=False)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Call the underlying function directly (no validation, no context injection)."""
        return self.fn(*args, **kwargs)

    def spec(self) -> dict[str, Any]:
        """``{"name", "description", "parameters"}``: what a model adapter sends."""
        return {"name": self.name, "description": self.description, "parameters": self.parameters}

    def with_context(self, context: ToolContext) -> Tool:
        """A copy that uses ``context`` when ``run``/``arun`` are given none."""
        return dataclasses.replace(self, context=context)

    def validate(self, arguments: Any) -> dict[str, Any]:
        """Check ``arguments`` against the schema; return them with defaults applied.

        Raises ``ToolError`` for a missing or unknown parameter or a value of the wrong type.
        """
        if not isinstance(arguments, dict):
            raise self._invalid(f"arguments must be a JSON object, got {_show(arguments)}")
        props: dict[str, Any] = self.parameters.get("properties", {})
        required = set(self.parameters.get("required", ()))
        unknown = [k for k in arguments if k not in props]
        if unknown and self.parameters.get("additionalProperties", True) is False:
            names = ", ".join(repr(k) for k in unknown)
            raise self._invalid(f"unknown parameter {names}")
        out: dict[str, Any] = {k: v for k, v in arguments.items() if k not in props}
        for key, schema in props.items():
            value = arguments.get(key)
            if value is None and not _accepts(None, schema):
                if key in required:
                    raise self._invalid(f"missing required parameter {key!r}")
                if "default" in schema:
                    out[key] = copy.deepcopy(schema["default"])
                continue
            try:
                out[key] = check(value, schema, key)
            except _Invalid as e:
                raise self._invalid(str(e)) from None
        return out

    def run(self, arguments: Any = None, *, context: ToolContext | None = None) -> ToolResult:
        """Validate and call; a ``ToolError`` becomes an error result the model can read."""
        try:
            kwargs = self._prepare(arguments, context)
            value = self.fn(**kwargs)
            if inspect.isawaitable(value):
                value = _run_awaitable(value)
        except ToolError as e:
            return ToolResult(str(e), is_error=True)
        return to_result(value)

    async def arun(
        self, arguments: Any = None, *, context: ToolContext | None = None
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
            return ToolResult(str(e), is_error=True)
        return to_result(value)

    def signature(self) -> str:
        """The call form shown in validation errors, e.g. ``read(path: string, offset = 1)``."""
        props: dict[str, Any] = self.parameters.get("properties", {})
        required = set(self.parameters.get("required", ()))
        parts = []
        for key, schema in props.items():
            part = f"{key}: {_short_type(schema)}"
            if key not in required and "default" in schema:
                part += f" = {json.dumps(schema['default'])}"
            elif key not in required:
                part += " (optional)"
            parts.append(part)
        return f"{self.name}({', '.join(parts)})"

    def _prepare(self, arguments: Any, context: ToolContext | None) -> dict[str, Any]:
        kwargs = self.validate({} if arguments is None else arguments)
        if self.context_param is not None:
            kwargs[self.context_param] = context or self.context or ToolContext()
        return kwargs

    def _invalid(self, problem: str) -> ToolError:
        return ToolError(
            f"invalid arguments for tool {self.name!r}: {problem}. Call it as {self.signature()}"
        )


def to_result(value: Any) -> ToolResult:
    """A tool function's return value as a ``ToolResult`` (str, None, or JSON data)."""
    if isinstance(value, ToolResult):
        return value
    if isinstance(value, str):
        return ToolResult(value)
    if value is None:
        return ToolResult("")
    return ToolResult(json.dumps(value, ensure_ascii=False, default=str))


def _run_awaitable(awaitable: Any) -> Any:
    """Run an awaitable to completion from sync code, even inside a running event loop."""

    async def wait() -> Any:
        return await awaitable

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(wait())
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, wait()).result()


# -- the decorator -----------------------------------------------------------------------
@overload
def tool(fn: Callable[..., Any], /) -> Tool: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    truncates_itself: bool = False,
) -> Callable[[Callable[..., Any]], Tool]: ...


def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    truncates_itself: bool = False,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Make a ``Tool`` from a function: ``@tool`` or ``@tool(name=..., truncates_itself=True)``.

    Parameter types may be str, int, float, bool, list[T], dict, Literal[...], unions and
    ``X | None``; a parameter annotated ``ToolContext`` receives the context instead.
    """

    def build(f: Callable[..., Any]) -> Tool:
        return build_tool(f, name=name, description=description, truncates_itself=truncates_itself)

    return build(fn) if fn is not None else build


def build_tool(
    fn: Callable[..., Any],
    *,
    name: str | None = None,
    description: str | None = None,
    truncates_itself: bool = False,
) -> Tool:
    """The ``Tool`` for ``fn`` (what ``@tool`` does)."""
    where = getattr(fn, "__qualname__", repr(fn))
    try:
        hints = get_type_hints(fn, include_extras=True)
    except Exception as e:
        raise TypeError(f"@tool {where}: cannot resolve type hints: {e}") from e
    summary, arg_docs = parse_docstring(inspect.getdoc(fn) or "")
    props: dict[str, Any] = {}
    required: list[str] = []
    context_param = None
    for p in inspect.signature(fn).parameters.values():
        annotation = hints.get(p.name, Any)
        if _is_context(annotation):
            context_param = p.name
            continue
        if p.kind not in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY):
            raise TypeError(f"@tool {where}: parameter {p.name!r} must be passable by keyword")
        schema, nullable = _top_schema(annotation, f"{where}({p.name})")
        if p.name in arg_docs:
            schema["description"] = arg_docs[p.name]
        if p.default is not p.empty:
            if _jsonable(p.default):
                schema["default"] = p.default
        elif nullable:
            schema["default"] = None
        else:
            required.append(p.name)
        props[p.name] = schema
    parameters = {
        "type": "object",
        "properties": props,
        "required": required,
        "additionalProperties": False,
    }
    return Tool(
        name=name if name is not None else str(getattr(fn, "__name__", "tool")),
        description=description if description is not None else summary,
        parameters=parameters,
        fn=fn,
        truncates_itself=truncates_itself,
        context_param=context_param,
    )


def _is_context(annotation: Any) -> bool:
    if annotation is ToolContext:
        return True
    if get_origin(annotation) in (Union, types.UnionType):
        members = [a for a in get_args(annotation) if a is not type(None)]
        return members == [ToolContext]
    return False


def _jsonable(value: Any) -> bool:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False
    return True


# -- type hints to JSON schema -------------------------------------------------------------
_SIMPLE: dict[Any, str] = {str: "string", int: "integer", float: "number", bool: "boolean"}


def _top_schema(annotation: Any, where: str) -> tuple[dict[str, Any], bool]:
    """The schema of a parameter, and whether it accepts None (``X | None``)."""
    if get_origin(annotation) in (Union, types.UnionType):
        args = get_args(annotation)
        members = [a for a in args if a is not type(None)]
        if len(members) < len(args):
            inner = members[0] if len(members) == 1 else Union[tuple(members)]  # noqa: UP007
            return schema_for(inner, where), True
    return schema_for(annotation, where), False


def schema_for(annotation: Any, where: str = "parameter") -> dict[str, Any]:
    """The JSON schema for a type hint; ``TypeError`` for types a model cannot send."""
    if annotation is Any or annotation is inspect.Parameter.empty:
        return {}
    if annotation in _SIMPLE:
        return {"type": _SIMPLE[annotation]}
    origin, args = get_origin(annotation), get_args(annotation)
    if annotation in (list, tuple, set, frozenset) or origin in (list, tuple, set, frozenset):
        return _array_schema(args, where)
    if annotation is dict or origin is dict:
        if len(args) == 2 and args[1] is not Any:
            return {"type": "object", "additionalProperties": schema_for(args[1], where)}
        return {"type": "object"}
    if origin is Literal:
        return _enum_schema(args)
    if origin is Annotated:
        schema = schema_for(args[0], where)
        notes = [a for a in args[1:] if isinstance(a, str)]
        if notes:
            schema["description"] = " ".join(notes)
        return schema
    if origin in (Union, types.UnionType):
        return {"anyOf": [_member_schema(a, where) for a in args]}
    raise TypeError(f"@tool {where}: unsupported parameter type {annotation!r}")


def _member_schema(annotation: Any, where: str) -> dict[str, Any]:
    return {"type": "null"} if annotation is type(None) else schema_for(annotation, where)


def _array_schema(args: tuple[Any, ...], where: str) -> dict[str, Any]:
    if not args or (len(args) == 2 and args[1] is Ellipsis and args[0] is Any):
        return {"type": "array"}
    if len(args) == 2 and args[1] is Ellipsis:
        return {"type": "array", "items": schema_for(args[0], where)}
    if len(args) == 1:
        items = schema_for(args[0], where)
        return {"type": "array", "items": items} if items else {"type": "array"}
    raise TypeError(f"@tool {where}: fixed-length tuples are not supported; use list[T]")


def _enum_schema(values: tuple[Any, ...]) -> dict[str, Any]:
    kinds = {_SIMPLE.get(type(v)) for v in values}
    schema: dict[str, Any] = {"enum": list(values)}
    if len(kinds) == 1 and None not in kinds:
        schema = {"type": kinds.pop(), **schema}
    return schema


# -- validation ----------------------------------------------------------------------------
class _Invalid(ValueError):
    """A value does not match its schema (message names the parameter)."""


def _accepts(value: Any, schema: dict[str, Any]) -> bool:
    try:
        check(value, schema, "")
    except _Invalid:
        return False
    return True


def check(value: Any, schema: dict[str, Any], where: str) -> Any:
    """``value`` checked against ``schema`` (integral floats become ints, ints floats)."""
    if "anyOf" in schema:
        for sub in schema["anyOf"]:
            try:
                return check(value, sub, where)
            except _Invalid:
                continue
        raise _mismatch(value, schema, where)
    if "enum" in schema:
        if not any(_same(value, e) for e in schema["enum"]):
            raise _mismatch(value, schema, where)
        return value
    kind = schema.get("type")
    kinds: list[str] = kind if isinstance(kind, list) else [kind] if kind else []
    if not kinds:
        return value
    for k in kinds:
        ok, converted = _convert(value, k)
        if ok:
            return _check_nested(converted, schema, where)
    raise _mismatch(value, schema, where)


def _same(a: Any, b: Any) -> bool:
    return bool(a == b) and isinstance(a, bool) == isinstance(b, bool)


def _convert(value: Any, kind: str) -> tuple[bool, Any]:
    if kind == "string":
        return isinstance(value, str), value
    if kind == "boolean":
        return isinstance(value, bool), value
    if kind == "null":
        return value is None, value
    if isinstance(value, bool):
        return False, value
    if kind == "integer":
        if isinstance(value, float) and value.is_integer():
            return True, int(value)
        return isinstance(value, int), value
    if kind == "number":
        return isinstance(value, int | float), float(value) if isinstance(value, int) else value
    if kind == "array":
        return isinstance(value, list), value
    if kind == "object":
        return isinstance(value, dict), value
    return True, value


def _check_nested(value: Any, schema: dict[str, Any], where: str) -> Any:
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [check(v, schema["items"], f"{where}[{i}]") for i, v in enumerate(value)]
    extra = schema.get("additionalProperties")
    if isinstance(value, dict) and isinstance(extra, dict):
        return {k: check(v, extra, f"{where}.{k}") for k, v in value.items()}
    return value


def _mismatch(value: Any, schema: dict[str, Any], where: str) -> _Invalid:
    return _Invalid(f"parameter {where!r} must be {_describe(schema)}, got {_show(value)}")


_NAMES = {
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "true or false",
    "array": "a list",
    "object": "an object",
    "null": "null",
}


def _describe(schema: dict[str, Any]) -> str:
    if "anyOf" in schema:
        return " or ".join(_describe(s) for s in schema["anyOf"])
    if "enum" in schema:
        return "one of " + ", ".join(json.dumps(e) for e in schema["enum"])
    kind = schema.get("type")
    kinds: list[str] = kind if isinstance(kind, list) else [kind] if kind else []
    text = " or ".join(_NAMES.get(k, k) for k in kinds) or "any value"
    items = schema.get("items")
    if kinds == ["array"] and isinstance(items, dict) and items:
        text = f"a list of {_describe(items)}"
    return text


def _short_type(schema: dict[str, Any]) -> str:
    if "anyOf" in schema:
        return " | ".join(_short_type(s) for s in schema["anyOf"])
    if "enum" in schema:
        return " | ".join(json.dumps(e) for e in schema["enum"])
    kind = schema.get("type")
    if isinstance(kind, list):
        return " | ".join(kind)
    if kind == "array" and isinstance(schema.get("items"), dict) and schema["items"]:
        return f"array of {_short_type(schema['items'])}"
    return str(kind or "any")


def _show(value: Any) -> str:
    """A value as the model sent it, with its JSON type: ``string "abc"``."""
    kind = {
        str: "string",
        bool: "boolean",
        int: "integer",
        float: "number",
        list: "list",
        dict: "object",
        type(None): "null",
    }.get(type(value), type(value).__name__)
    if value is None:
        return "null"
    text = json.dumps(value, default=repr, ensure_ascii=False)
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{kind} {text}"


# -- docstrings ----------------------------------------------------------------------------
_SECTION = re.compile(r"^(\s*)(Args|Arguments|Parameters|Params|Keyword Args):\s*$")
_OTHER_SECTION = re.compile(r"^\s*[A-Z][A-Za-z ]*:\s*$")
_ENTRY = re.compile(r"^\s*\**(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")


def parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """The first paragraph (joined into one line) and the ``Args:`` descriptions."""
    if _SECTION.match(doc.lstrip(" ").split("\n", 1)[0]):
        doc = "\n" + doc  # keep the header's indentation relative to its entries
    lines = inspect.cleandoc(doc).splitlines()
    summary: list[str] = []
    for line in lines:
        if not line.strip() or _SECTION.match(line) or _OTHER_SECTION.match(line):
            break
        summary.append(line.strip())
    return " ".join(summary), _arg_docs(lines)


def _arg_docs(lines: list[str]) -> dict[str, str]:
    docs: dict[str, list[str]] = {}
    header_indent: int | None = None
    entry_indent: int | None = None
    current: str | None = None
    for line in lines:
        m = _SECTION.match(line)
        if header_indent is None:
            if m:
                header_indent = len(m.group(1))
            continue
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        if indent <= header_indent:
            break
        entry = _ENTRY.match(line)
        if entry and (entry_indent is None or indent <= entry_indent):
            entry_indent = indent
            current = entry.group(1)
            docs[current] = [entry.group(2).strip()]
        elif current is not None:
            docs[current].append(line.strip())
    return {k: " ".join(x for x in v if x) for k, v in docs.items()}


def as_tools(items: Iterable[Tool | Callable[..., Any]]) -> list[Tool]:
    """Tools from a mix of ``Tool`` objects and plain functions (decorated on the fly)."""
    return [t if isinstance(t, Tool) else build_tool(t) for t in items]
