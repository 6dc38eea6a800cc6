"""Checking a model's tool arguments, by ``msgspec.convert``, in words the model can act on.

msgspec does the checking and the converting (to the parameter's type hint, or, for a tool
made from a bare JSON schema, to the type that schema describes). This module adds only
the wording: which parameter (``tags[1]``, ``weights.a``), what it must be (from the JSON
schema the model was shown), and what it got. ``null`` for a parameter that does not take it
means "use the default"; an integral float where an integer is expected is that integer.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from types import GenericAlias
from typing import Any, Literal, Union

import msgspec

from contextree._limits import MAX_DEPTH
from contextree._text import shorten
from contextree.models._wire_common import RAW_ARGUMENTS_KEY

__all__ = ["ArgumentError", "Checker", "call_form", "describe", "show", "type_for"]


def _unparsed(arguments: Mapping[str, Any]) -> bool:
    """Whether ``arguments`` is a model's text that was not a JSON object, kept as it came
    (``{RAW_ARGUMENTS_KEY: text}``, see ``arguments_from_json``)."""
    return len(arguments) == 1 and isinstance(arguments.get(RAW_ARGUMENTS_KEY), str)


class ArgumentError(ValueError):
    """Arguments that do not fit the schema; the message says which one and how."""


@dataclass(frozen=True, slots=True)
class _Param:
    name: str
    schema: dict[str, Any]  # what the model was shown for it
    target: Any  # what msgspec converts its value to
    required: bool
    takes_none: bool


class Checker:
    """Checks arguments against a tool's ``parameters`` schema; ``types`` (the function's
    type hints, by parameter) say what to convert each value to, else the schema does."""

    def __init__(self, parameters: Mapping[str, Any],
                 types: Mapping[str, Any] | None = None) -> None:
        self.defs: dict[str, Any] = dict(parameters.get("$defs") or {})
        self.extra_allowed = parameters.get("additionalProperties", True) is not False
        required = set(parameters.get("required", ()))
        self.params: dict[str, _Param] = {}
        for name, schema in (parameters.get("properties") or {}).items():
            target = types[name] if types is not None and name in types else type_for(schema)
            takes_none = _converts(None, target)
            if takes_none is None:  # msgspec cannot check this type: let any value through
                target, takes_none = Any, True
            self.params[name] = _Param(name, schema, target, name in required, takes_none)

    def __call__(self, arguments: object) -> dict[str, Any]:
        """``arguments`` checked and converted, with defaults applied; ``ArgumentError``."""
        if not isinstance(arguments, dict):
            raise ArgumentError(f"arguments must be a JSON object, got {show(arguments)}")
        if _unparsed(arguments) and RAW_ARGUMENTS_KEY not in self.params:
            raise ArgumentError(
                f"arguments must be a JSON object (valid JSON, nested at most {MAX_DEPTH} "
                f"levels deep), got the text {show(arguments[RAW_ARGUMENTS_KEY])}")
        unknown = [k for k in arguments if k not in self.params]
        if unknown and not self.extra_allowed:
            raise ArgumentError("unknown parameter " + ", ".join(repr(k) for k in unknown))
        out: dict[str, Any] = {k: v for k, v in arguments.items() if k not in self.params}
        for p in self.params.values():
            value = arguments.get(p.name)
            if value is None and not p.takes_none:
                if p.required:
                    raise ArgumentError(f"missing required parameter {p.name!r}")
                if "default" in p.schema:
                    out[p.name] = self._default(p)
                continue
            try:
                out[p.name] = _convert(value, p.target)
            except _Failed as e:
                raise ArgumentError(self._explain(p, e.value, e.error)) from None
        return out

    @staticmethod
    def _default(p: _Param) -> Any:
        """The schema's default, as the parameter's type (``"fast"`` -> ``Speed.FAST``)."""
        value = copy.deepcopy(p.schema["default"])
        try:
            return _convert(value, p.target)
        except (_Failed, TypeError):
            return value

    def _explain(self, p: _Param, value: Any, error: msgspec.ValidationError) -> str:
        text, _, path = str(error).partition(" - at `")
        where, value, schema = self._locate(p, value, path.rstrip("`"))
        if _MISMATCH.match(text) or text.startswith("Invalid enum value"):
            return f"parameter {where!r} must be {describe(schema, self.defs)}, got {show(value)}"
        return f"parameter {where!r}: {text[:1].lower()}{text[1:]}, got {show(value)}"

    def _locate(self, p: _Param, value: Any, path: str) -> tuple[str, Any, dict[str, Any]]:
        """Follow msgspec's error path (``$[1]``, ``$.field``, ``$[...]``) to the value at
        fault, its name as the model would write it, and its schema."""
        where, schema = p.name, p.schema
        for field, index in _SEGMENT.findall(path.removeprefix("$")):
            schema = self._pick(schema, value)
            if field and isinstance(value, dict) and field in value:
                where, value = f"{where}.{field}", value[field]
                schema = (schema.get("properties") or {}).get(field) or {}
            elif index.isdigit() and isinstance(value, list) and int(index) < len(value):
                where, value = f"{where}[{index}]", value[int(index)]
                items = schema.get("items")
                schema = items if isinstance(items, dict) else {}
            elif index == "..." and isinstance(value, dict):
                entry = schema.get("additionalProperties")
                entry = entry if isinstance(entry, dict) else {}
                key = _failing_key(value, type_for(entry, self.defs))
                if key is None:
                    return f"{where}[...]", value, schema
                where, value, schema = f"{where}.{key}", value[key], entry
            else:
                break
        return where, value, self._pick(schema, value)

    def _pick(self, schema: dict[str, Any], value: Any) -> dict[str, Any]:
        """``schema`` with a ``$ref`` resolved, and the ``anyOf`` member a container fits."""
        ref = schema.get("$ref")
        if isinstance(ref, str):
            schema = self.defs.get(ref.rsplit("/", 1)[-1], {})
        kind = "object" if isinstance(value, dict) else "array" if isinstance(value, list) else None
        for member in schema.get("anyOf", ()) if kind else ():
            if isinstance(member, dict) and self._pick(member, None).get("type") == kind:
                return self._pick(member, value)
        return schema


_MISMATCH = re.compile(r"^Expected `[^`]*`, got `[^`]*`$")
_SEGMENT = re.compile(r"\.(\w+)|\[(\d+|\.\.\.)\]")


class _Failed(Exception):
    def __init__(self, value: Any, error: msgspec.ValidationError) -> None:
        self.value, self.error = value, error


def _convert(value: Any, target: Any) -> Any:
    """``msgspec.convert`` (strict: ``"3"`` is no integer), taking ``2.0`` for ``2``."""
    try:
        return msgspec.convert(value, target)
    except msgspec.ValidationError as e:
        first = e
    whole, changed = _integral(value)
    if not changed:
        raise _Failed(value, first)
    try:
        return msgspec.convert(whole, target)
    except msgspec.ValidationError as e:
        raise _Failed(whole, e) from None


def _integral(value: Any) -> tuple[Any, bool]:
    """``value`` with every float that is a whole number made an int, and whether any was."""
    if isinstance(value, float) and value.is_integer():
        return int(value), True
    if isinstance(value, list):
        pairs = [_integral(v) for v in value]
        return [v for v, _ in pairs], any(c for _, c in pairs)
    if isinstance(value, dict):
        fixed = {k: _integral(v) for k, v in value.items()}
        return {k: v for k, (v, _) in fixed.items()}, any(c for _, c in fixed.values())
    return value, False


def _converts(value: Any, target: Any) -> bool | None:
    """Whether ``value`` converts to ``target`` (``None``: msgspec does not know the type)."""
    try:
        msgspec.convert(value, target)
    except msgspec.ValidationError:
        return False
    except TypeError:
        return None
    return True


def _failing_key(entries: dict[str, Any], value_type: Any) -> str | None:
    """The first key whose value does not convert to ``value_type`` (msgspec's error path
    says only ``[...]`` for a dict entry)."""
    for key, v in entries.items():
        try:
            _convert(v, value_type)
        except _Failed:
            return key
        except TypeError:
            return None
    return None


# -- a JSON schema as a type, for tools made from a schema ---------------------------------
_SIMPLE: dict[str, Any] = {
    "string": str, "integer": int, "number": float, "boolean": bool, "null": type(None),
}


def type_for(schema: Any, defs: Mapping[str, Any] | None = None) -> Any:
    """The type msgspec should convert to for the JSON ``schema`` (``Any`` for what it does
    not say): the types, ``enum``, ``anyOf``, ``items``, ``additionalProperties``."""
    if not isinstance(schema, dict):
        return Any
    ref = schema.get("$ref")
    if isinstance(ref, str):
        return type_for((defs or {}).get(ref.rsplit("/", 1)[-1]), defs)
    if isinstance(schema.get("anyOf"), list):
        return _union([type_for(s, defs) for s in schema["anyOf"]])
    if isinstance(schema.get("enum"), list):
        values = schema["enum"]
        plain = all(v is None or (isinstance(v, str | int) and not isinstance(v, bool))
                    for v in values)
        return Literal[tuple(values)] if values and plain else Any
    kind = schema.get("type")
    kinds = kind if isinstance(kind, list) else [kind] if kind else []
    members: list[Any] = []
    for k in kinds:
        if k == "array":
            items = schema.get("items")
            members.append(GenericAlias(list, (type_for(items, defs),))
                           if isinstance(items, dict) else list)
        elif k == "object":
            extra = schema.get("additionalProperties")
            members.append(GenericAlias(dict, (str, type_for(extra, defs)))
                           if isinstance(extra, dict) else dict)
        elif k in _SIMPLE:
            members.append(_SIMPLE[k])
        else:
            return Any
    return _union(members)


def _union(members: list[Any]) -> Any:
    if not members or Any in members:
        return Any
    return members[0] if len(members) == 1 else Union[tuple(members)]  # noqa: UP007


# -- wording ---------------------------------------------------------------------------------
_NAMES = {
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "true or false",
    "array": "a list",
    "object": "an object",
    "null": "null",
}


def describe(schema: dict[str, Any], defs: Mapping[str, Any] | None = None) -> str:
    """What a value of ``schema`` is, for an error message: ``a list of a string``."""
    ref = schema.get("$ref")
    if isinstance(ref, str):
        schema = (defs or {}).get(ref.rsplit("/", 1)[-1]) or {}
    if "anyOf" in schema:
        return " or ".join(describe(s, defs) for s in schema["anyOf"])
    if "enum" in schema:
        return "one of " + ", ".join(json.dumps(e) for e in schema["enum"])
    kinds = _kinds(schema)
    text = " or ".join(_NAMES.get(k, k) for k in kinds) or "any value"
    items = schema.get("items")
    if kinds == ["array"] and isinstance(items, dict) and items:
        text = f"a list of {describe(items, defs)}"
    return text


def call_form(name: str, parameters: Mapping[str, Any]) -> str:
    """How to call the tool, for error messages: ``read(path: string, offset = 1)``."""
    props: dict[str, Any] = parameters.get("properties") or {}
    required = set(parameters.get("required", ()))
    parts = []
    for key, schema in props.items():
        part = f"{key}: {_short_type(schema)}"
        if key not in required and "default" in schema:
            part += f" = {json.dumps(schema['default'])}"
        elif key not in required:
            part += " (optional)"
        parts.append(part)
    return f"{name}({', '.join(parts)})"


def _short_type(schema: dict[str, Any]) -> str:
    if "anyOf" in schema:
        return " | ".join(_short_type(s) for s in schema["anyOf"])
    if "enum" in schema:
        return " | ".join(json.dumps(e) for e in schema["enum"])
    if "$ref" in schema:
        return str(schema["$ref"]).rsplit("/", 1)[-1]
    kind = schema.get("type")
    if isinstance(kind, list):
        return " | ".join(kind)
    if kind == "array" and isinstance(schema.get("items"), dict) and schema["items"]:
        return f"array of {_short_type(schema['items'])}"
    return str(kind or "any")


def _kinds(schema: dict[str, Any]) -> list[str]:
    kind = schema.get("type")
    return kind if isinstance(kind, list) else [kind] if kind else []


_JSON_NAMES: dict[type, str] = {
    str: "string", bool: "boolean", int: "integer", float: "number", list: "list",
    dict: "object", type(None): "null",
}


def show(value: Any) -> str:
    """A value as the model sent it, with its JSON type: ``string "abc"``."""
    if value is None:
        return "null"
    kind = _JSON_NAMES.get(type(value), type(value).__name__)
    return f"{kind} {shorten(json.dumps(value, default=repr, ensure_ascii=False), 60)}"
