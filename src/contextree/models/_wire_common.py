"""What the provider wire conversions share: tool call arguments as JSON, data URLs, and
reading untyped wire data into ``Message`` objects.

``wire_openai`` and ``wire_anthropic`` both build on this module and never on each other;
the format importers (``contextree.formats``) use it for the same jobs.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, cast

from contextree._limits import ARGUMENTS_DEPTH, parse_json, too_deep
from contextree._messages import AnyPart, Message, TextPart, ToolCall, UnknownPart
from contextree._text import shorten
from contextree.models._base import ToolSpec, tool_spec

__all__ = [
    "RAW_ARGUMENTS_KEY",
    "Json",
    "ToolNames",
    "arguments_from_json",
    "arguments_to_json",
    "bounded_arguments",
    "make_message",
    "opt_str",
    "parse_data_url",
    "parts_of",
    "role_of",
    "tool_definition",
    "unknown_part",
]

Json = dict[str, Any]
"""A JSON object as the wire carries it."""

RAW_ARGUMENTS_KEY = "_raw"
"""Key under which tool call arguments that are not a JSON object are kept, as a string."""


def tool_definition(tool: ToolSpec, schema_key: str = "parameters") -> Json:
    """``{"name", <schema_key>: JSON schema, "description"?}``: the core of a tool definition
    in every provider's format (``input_schema`` for Anthropic)."""
    name, description, parameters = tool_spec(tool)
    out: Json = {"name": name, schema_key: parameters}
    if description:
        out["description"] = description
    return out


def arguments_to_json(arguments: Mapping[str, Any]) -> str:
    """Tool call arguments as the JSON string providers expect (raw strings go back as-is)."""
    raw = arguments.get(RAW_ARGUMENTS_KEY)
    if len(arguments) == 1 and isinstance(raw, str):
        return raw
    return json.dumps(arguments, ensure_ascii=False)


def bounded_arguments(value: Mapping[str, Any]) -> dict[str, Any]:
    """Arguments a provider's SDK already parsed, as a dict; kept as their text instead
    (``{RAW_ARGUMENTS_KEY: text}``) when they nest deeper than a session line can hold them,
    so the reply can be stored and the tool says what is wrong."""
    if not too_deep(value, ARGUMENTS_DEPTH):
        return dict(value)
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (RecursionError, TypeError, ValueError):
        text = f"(arguments nested more than {ARGUMENTS_DEPTH} levels deep)"
    return {RAW_ARGUMENTS_KEY: text}


def arguments_from_json(text: str | Mapping[str, Any] | None) -> dict[str, Any]:
    """Parse a tool call's JSON arguments; an empty string is ``{}``, and anything but a JSON
    object (a model's malformed output) is kept as ``{RAW_ARGUMENTS_KEY: text}``."""
    if text is None or text == "":
        return {}
    if isinstance(text, Mapping):
        return bounded_arguments(text)
    try:
        value = parse_json(text, exact=True, limit=ARGUMENTS_DEPTH)
    except ValueError:
        return {RAW_ARGUMENTS_KEY: text}
    return value if isinstance(value, dict) else {RAW_ARGUMENTS_KEY: text}


def parse_data_url(url: str) -> tuple[str, str] | None:
    """``(mime_type, base64 data)`` of a base64 ``data:`` URL, or None for any other URL."""
    if not url.startswith("data:"):
        return None
    header, sep, data = url[5:].partition(",")
    if not sep or not header.endswith(";base64"):
        return None
    return header[: -len(";base64")] or "application/octet-stream", data


def opt_str(value: object) -> str | None:
    """``value`` as a string, None staying None (wire data is not trusted to be typed)."""
    return None if value is None else str(value)


def role_of(d: Mapping[str, Any]) -> str:
    """A wire message's role, which must be a non-empty string."""
    role = d.get("role")
    if not isinstance(role, str) or not role:
        raise ValueError(f"a message needs a string `role`, got {shorten(repr(dict(d)), 120)}")
    return role


def unknown_part(data: Mapping[str, Any]) -> UnknownPart:
    """An ``UnknownPart`` for a wire part or item of a type contextree does not model."""
    if not isinstance(data.get("type"), str):
        raise ValueError(f"expected an object with a string `type`, got {shorten(repr(dict(data)), 120)}")
    return UnknownPart(dict(data))


def make_message(role: str, content: str | list[AnyPart] | None, **fields: Any) -> Message:
    """A ``Message``; content may hold ``UnknownPart`` items, which the type hint omits."""
    return Message(role=role, content=cast(Any, content), **fields)


def parts_of(content: str | Sequence[AnyPart] | None) -> list[AnyPart]:
    """Content as a list of parts (a string becomes one text part, empty content none)."""
    if content is None or content == "":
        return []
    if isinstance(content, str):
        return [TextPart(text=content)]
    return list(content)


class ToolNames:
    """Remembers tool call names by id, so tool results can get their ``name`` back."""

    def __init__(self) -> None:
        self._names: dict[str, str] = {}

    def add(self, calls: Iterable[ToolCall]) -> None:
        """Remember the name of each call."""
        for call in calls:
            self._names[call.id] = call.name

    def get(self, call_id: str | None) -> str | None:
        """The name of the call with that id, if one was seen."""
        return self._names.get(call_id or "")
