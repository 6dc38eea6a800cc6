"""JSON schemas for tool parameters, from type hints, by ``msgspec.json.schema``.

msgspec knows the types (str, int, float, bool, lists, dicts, ``Literal``, unions, enums,
dataclasses, structs, ``Annotated[T, msgspec.Meta(...)]`` constraints...). On top of it this
module adds what a tool schema needs: a parameter typed ``X | None`` is an optional ``X``
(default ``null``), a plain-string ``Annotated`` note is the parameter's description, an
``enum`` says its JSON type, and fixed-length tuples are refused (models handle them badly).
"""

from __future__ import annotations

import json
import types
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Union, get_args, get_origin

import msgspec

__all__ = ["Param", "object_schema", "schema_for"]

REF_TEMPLATE = "#/$defs/{name}"


@dataclass(frozen=True, slots=True)
class Param:
    """One parameter as the model sees it: its type hint, description and default."""

    name: str
    annotation: Any
    description: str | None = None
    default: Any = msgspec.NODEFAULT  # NODEFAULT: required (unless the type allows None)


def schema_for(annotation: Any, where: str = "parameter") -> dict[str, Any]:
    """The JSON schema for a type hint; ``TypeError`` for types a model cannot send."""
    schema, defs = _component(annotation, where)
    return {**schema, "$defs": defs} if defs else schema


def object_schema(params: Sequence[Param], where: str) -> dict[str, Any]:
    """The ``parameters`` object schema of a tool taking ``params``."""
    props: dict[str, Any] = {}
    required: list[str] = []
    defs: dict[str, Any] = {}
    for p in params:
        inner, nullable = _strip_none(p.annotation)
        schema, more = _component(inner, f"{where}({p.name})")
        defs.update(more)
        notes = _notes(p.annotation)
        if p.description or notes:
            schema["description"] = p.description or notes
        if p.default is not msgspec.NODEFAULT:
            default = _as_json(p.default)
            if default is not msgspec.NODEFAULT:
                schema["default"] = default
        elif nullable:
            schema["default"] = None
        else:
            required.append(p.name)
        props[p.name] = schema
    out: dict[str, Any] = {
        "type": "object",
        "properties": props,
        "required": required,
        "additionalProperties": False,
    }
    if defs:
        out["$defs"] = defs
    return out


def _component(annotation: Any, where: str) -> tuple[dict[str, Any], dict[str, Any]]:
    try:
        (schema,), defs = msgspec.json.schema_components([annotation], ref_template=REF_TEMPLATE)
    except (TypeError, ValueError):
        raise TypeError(f"@tool {where}: unsupported parameter type {annotation!r}") from None
    if _has(schema, "prefixItems") or _has(defs, "prefixItems"):
        raise TypeError(f"@tool {where}: fixed-length tuples are not supported; use list[T]")
    return _typed_enums(schema), {k: _typed_enums(v) for k, v in defs.items()}


def _strip_none(annotation: Any) -> tuple[Any, bool]:
    """``X | None`` -> ``(X, True)``; anything else -> ``(annotation, False)``."""
    if get_origin(annotation) in (Union, types.UnionType):
        args = get_args(annotation)
        members = [a for a in args if a is not type(None)]
        if len(members) < len(args):
            return (members[0] if len(members) == 1 else Union[tuple(members)]), True  # noqa: UP007
    return annotation, False


def _notes(annotation: Any) -> str:
    """The plain-string notes of ``Annotated[T, "note", ...]`` (msgspec reads only ``Meta``)."""
    if get_origin(annotation) is not Annotated:
        return ""
    return " ".join(a for a in get_args(annotation)[1:] if isinstance(a, str))


_JSON_TYPE = {str: "string", bool: "boolean", int: "integer", float: "number"}


def _typed_enums(schema: Any) -> Any:
    """``{"enum": [...]}`` gains ``"type"`` when every value has the same JSON type."""
    if isinstance(schema, list):
        return [_typed_enums(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: _typed_enums(v) for k, v in schema.items()}
    if "enum" in out and "type" not in out:
        kinds = {_JSON_TYPE.get(type(v)) for v in out["enum"]}
        if len(kinds) == 1 and None not in kinds:
            out = {"type": kinds.pop(), **out}
    return out


def _has(schema: Any, key: str) -> bool:
    if isinstance(schema, dict):
        return key in schema or any(_has(v, key) for v in schema.values())
    if isinstance(schema, list):
        return any(_has(v, key) for v in schema)
    return False


def _as_json(value: Any) -> Any:
    """``value`` as the JSON the schema shows (an enum member as its value, a tuple as a
    list), or ``NODEFAULT`` when it has no JSON form."""
    try:
        data = msgspec.to_builtins(value)
        json.dumps(data)
    except (TypeError, ValueError):
        return msgspec.NODEFAULT
    return data
