"""Messages: what a model reads and writes, in one provider-neutral shape.

A ``Message`` has a role, content (a plain string, as Brute writes it, or a list of typed
parts, as AgentCore.jl writes it), tool calls, and optional usage and provenance. It
round-trips exactly through JSON: fields this version does not know are kept and written back.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Literal, Self

import msgspec

from .markers import (
    Kind,
    Marker,
    ResultViews,
    kind_of,
    marker_for,
    marker_of,
)

Role = Literal["system", "user", "assistant", "tool"]
ROLES: frozenset[str] = frozenset(("system", "user", "assistant", "tool"))

_STRUCT = dict(kw_only=True, omit_defaults=True, forbid_unknown_fields=True, dict=True)


class _Extras:
    """Mixin: fields unknown to this version, kept so they are written back unchanged."""

    __slots__ = ()

    @property
    def extra(self) -> dict[str, Any]:
        """Unknown fields read from JSON (empty when there were none)."""
        # getattr, not self.__dict__: reading __dict__ would allocate one per struct
        d: dict[str, Any] | None = getattr(self, "_extra", None)
        return d if d is not None else {}

    def set_extra(self, extra: Mapping[str, Any]) -> Self:
        """Add fields to write back unchanged (importers keep another tool's fields so);
        returns ``self``."""
        if extra:
            setattr(self, "_extra", {**self.extra, **extra})  # noqa: B010 (a dict=True struct)
        return self

    def replace(self, **changes: Any) -> Self:
        """A copy with ``changes`` applied; unknown fields carry over (``msgspec.structs.
        replace`` alone would drop them)."""
        copy = msgspec.structs.replace(self, **changes)  # type: ignore[type-var]
        extra = getattr(self, "_extra", None)
        if extra:
            setattr(copy, "_extra", dict(extra))  # noqa: B010
        return copy


class TextPart(msgspec.Struct, _Extras, tag="text", tag_field="type", **_STRUCT):
    """Plain text."""

    text: str


class ImagePart(msgspec.Struct, _Extras, tag="image", tag_field="type", **_STRUCT):
    """An image, inline as base64 ``data`` or by ``url``."""

    data: str | None = None
    mime_type: str | None = None
    url: str | None = None


class ThinkingPart(msgspec.Struct, _Extras, tag="thinking", tag_field="type", **_STRUCT):
    """Model reasoning. ``signature`` must be sent back verbatim for providers that sign it."""

    thinking: str = ""
    signature: str | None = None
    redacted: bool = False


class UnknownPart:
    """A content part of a type this version does not know; written back exactly as read."""

    __slots__ = ("data",)

    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data

    @property
    def type(self) -> str:
        """The part's ``type`` as read."""
        return str(self.data.get("type", ""))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, UnknownPart) and other.data == self.data

    def __repr__(self) -> str:
        return f"UnknownPart({self.data!r})"

    __hash__ = None  # type: ignore[assignment]


Part = TextPart | ImagePart | ThinkingPart
AnyPart = TextPart | ImagePart | ThinkingPart | UnknownPart


class ToolCall(msgspec.Struct, _Extras, **_STRUCT):
    """A model's request to run a tool. ``arguments`` is a JSON object with string keys."""

    id: str
    name: str
    arguments: dict[str, Any] = msgspec.field(default_factory=dict)


class Usage(msgspec.Struct, _Extras, kw_only=True, forbid_unknown_fields=True, dict=True):
    """Tokens a provider reported for one call, and its cost in USD (all six always written).

    ``cost`` is None when nobody has said what the call cost (the provider did not report it
    and no price table knows the model); ``0.0`` is a call that cost nothing (OpenRouter's
    ``usage.cost: 0``). Added up, known costs are summed; the sum is None only when no part
    is known.
    """

    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0
    total: int = 0
    cost: float | None = None

    def __add__(self, other: Usage) -> Usage:
        """Every field summed (``cost`` as the class says)."""
        cost = (None if self.cost is None and other.cost is None
                else (self.cost or 0.0) + (other.cost or 0.0))
        return Usage(
            input=self.input + other.input,
            output=self.output + other.output,
            cache_read=self.cache_read + other.cache_read,
            cache_write=self.cache_write + other.cache_write,
            total=self.total + other.total,
            cost=cost,
        )

    @property
    def context_tokens(self) -> int:
        """Tokens of prompt the call read: input plus cached reads and writes."""
        return self.input + self.cache_read + self.cache_write


class Message(msgspec.Struct, _Extras, ResultViews, **_STRUCT):
    """One message of a conversation.

    ``meta`` holds contextree's own markers (a compaction summary, a truncated tool result);
    model adapters never send it to a provider.
    """

    role: str
    content: str | list[Part] | None
    tool_calls: list[ToolCall] | None = None
    tool_call_id: str | None = None
    name: str | None = None
    is_error: bool = False
    usage: Usage | None = None
    model: str | None = None
    provider: str | None = None
    stop_reason: str | None = None
    meta: dict[str, Any] | None = None


    # -- constructors --------------------------------------------------------------------
    @classmethod
    def system(cls, content: str) -> Message:
        """A system message (instructions for the model)."""
        return cls(role="system", content=content)

    @classmethod
    def user(cls, content: str | list[AnyPart]) -> Message:
        """A message from the user: text, or parts (text and images)."""
        return cls(role="user", content=content)  # type: ignore[arg-type]

    @classmethod
    def assistant(
        cls,
        content: str | list[AnyPart] = "",
        *,
        tool_calls: list[ToolCall] | None = None,
        usage: Usage | None = None,
        model: str | None = None,
        provider: str | None = None,
        stop_reason: str | None = None,
    ) -> Message:
        """A model's reply: text or parts (thinking, text), tool calls, usage, provenance."""
        return cls(
            role="assistant",
            content=content,  # type: ignore[arg-type]
            tool_calls=tool_calls or None,
            usage=usage,
            model=model,
            provider=provider,
            stop_reason=stop_reason,
        )

    @classmethod
    def tool(
        cls,
        content: str | list[AnyPart],
        *,
        tool_call_id: str,
        name: str | None = None,
        is_error: bool = False,
        meta: dict[str, Any] | None = None,
    ) -> Message:
        """The result of the tool call ``tool_call_id`` (``is_error`` when it failed)."""
        return cls(
            role="tool",
            content=content,  # type: ignore[arg-type]
            tool_call_id=tool_call_id,
            name=name,
            is_error=is_error,
            meta=meta,
        )

    # -- views ---------------------------------------------------------------------------
    @property
    def text(self) -> str:
        """The text of the message: the string content, or its text parts joined."""
        c = self.content
        if c is None:
            return ""
        if isinstance(c, str):
            return c
        return "".join(p.text for p in c if isinstance(p, TextPart))

    @property
    def thinking(self) -> list[ThinkingPart]:
        """The thinking parts of the content (empty for string content)."""
        c = self.content
        if not isinstance(c, list):
            return []
        return [p for p in c if isinstance(p, ThinkingPart)]

    @property
    def kind(self) -> Kind | None:
        """What synthetic message this is (see ``contextree.markers``), or ``None`` for one
        that a person or a model wrote."""
        return kind_of(self.meta)

    @property
    def marker(self) -> Marker | None:
        """The decoded marker of a synthetic message (``CompactionSummaryMarker``...), or
        ``None`` for one that a person or a model wrote."""
        return marker_of(self.meta)

    def marked(self, marker: Marker | Kind, *, content: str | None = None) -> Message:
        """A copy marked as a synthetic message (``marker``, or a bare marker of a ``Kind``),
        optionally with new content; the other keys of ``meta`` are kept."""
        typed = marker if isinstance(marker, Marker) else marker_for(marker)
        meta = {**(self.meta or {}), **typed.to_meta()}
        if content is None:
            return self.replace(meta=meta)
        return self.replace(content=content, meta=meta)

    # -- JSON ----------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict; ``Message.from_dict`` of it gives back an equal message."""
        return to_builtins(self)  # type: ignore[no-any-return]

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Message:
        """Build a message from a dict (parsed JSON); unknown fields are kept in ``extra``."""
        return convert(data, cls)  # type: ignore[no-any-return]




def storable(message: Message) -> Message:
    """``message`` as it can be stored: a provider may send a lone surrogate (JSON's
    ``"\\ud800"``, half of a cut emoji) that no UTF-8 file can hold; each becomes U+FFFD,
    wherever it is (text, thinking, tool arguments). A valid message is returned as it is."""
    try:
        msgspec.json.encode(message, enc_hook=enc_hook)
    except UnicodeEncodeError:
        return Message.from_dict(_replace_surrogates(message.to_dict()))
    return message


_SURROGATE = re.compile("[\ud800-\udfff]")


def valid_text(text: str) -> str:
    """``text`` with each lone surrogate (which UTF-8 cannot hold) replaced by U+FFFD."""
    return _SURROGATE.sub("\ufffd", text)


def _replace_surrogates(value: Any) -> Any:
    if isinstance(value, str):
        return valid_text(value)
    if isinstance(value, dict):
        return {_replace_surrogates(k): _replace_surrogates(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_replace_surrogates(v) for v in value]
    return value


# -- lossless conversion between structs and plain data ---------------------------------
#
# msgspec decodes and encodes the common case at C speed. Data with fields this version
# does not know takes the slow path below: unknown keys are stripped before validation and
# re-attached afterwards as ``_extra``, and ``to_builtins`` merges them back on the way out.

# Structs whose ``content`` is a string or a list of parts (Message, and entries that hold
# content a model sees, which register themselves): their parts need the lenient conversion.
PART_CONTENT: set[type[Any]] = set()

# For each struct with nested structs: field -> (is_list, nested struct type).
NESTED: dict[type[Any], dict[str, tuple[bool, type[Any]]]] = {
    Message: {"tool_calls": (True, ToolCall), "usage": (False, Usage)},
}
PART_CONTENT.add(Message)

_PART_TYPES: dict[str, type[msgspec.Struct]] = {
    "text": TextPart,
    "image": ImagePart,
    "thinking": ThinkingPart,
}


def enc_hook(obj: Any) -> Any:
    """msgspec encoder hook: unknown content parts are written back as they were read."""
    if isinstance(obj, UnknownPart):
        return obj.data
    raise TypeError(f"cannot encode {type(obj).__name__} as JSON")


def has_extras(obj: Any) -> bool:
    """True when ``obj`` or anything nested in it carries unknown fields.

    This runs on every append, so it is kept lean: ``getattr`` with a default (which neither
    raises nor allocates an instance ``__dict__``) and no calls for absent values.
    """
    if isinstance(obj, msgspec.Struct):
        if getattr(obj, "_extra", None):
            return True
        nested = NESTED.get(type(obj))
        if nested is not None:
            for name in nested:
                value = getattr(obj, name)
                if value is not None and has_extras(value):
                    return True
        content = getattr(obj, "content", None) if type(obj) in PART_CONTENT else None
        if isinstance(content, list):
            for part in content:
                if has_extras(part):
                    return True
        return False
    if isinstance(obj, list):
        for value in obj:
            if has_extras(value):
                return True
    return False


def to_builtins(obj: Any) -> Any:
    """Structs to plain JSON data, merging back any unknown fields they carried."""
    if isinstance(obj, UnknownPart):
        return dict(obj.data)
    if isinstance(obj, msgspec.Struct):
        out: dict[str, Any] = msgspec.to_builtins(obj, enc_hook=enc_hook)
        _merge_extras(obj, out)
        return out
    if isinstance(obj, list):
        return [to_builtins(v) for v in obj]
    return obj


def _merge_extras(obj: msgspec.Struct, out: dict[str, Any]) -> None:
    """Put the unknown fields of ``obj`` and of the structs nested in it back into ``out``,
    what ``msgspec.to_builtins`` made of ``obj`` (converted once, in C: the nested structs
    are merged in place, not converted again). Unknown content parts are put back as they
    were read."""
    cls = type(obj)
    nested = NESTED.get(cls)
    if nested is not None:
        for name in nested:
            value = getattr(obj, name)
            if value is not None and name in out:
                made = out[name]
                if type(made) is dict and isinstance(value, msgspec.Struct):
                    _merge_extras(value, made)  # _merge_value's first case, one call less
                else:
                    _merge_value(value, made, out, name)
    if cls in PART_CONTENT:
        content = getattr(obj, "content", None)
        if isinstance(content, list) and content and "content" in out:
            _merge_value(content, out["content"], out, "content")
    extra = getattr(obj, "_extra", None)
    if extra:
        for k, v in extra.items():
            out.setdefault(k, v)


def _merge_value(value: Any, made: Any, into: Any, key: Any) -> None:
    """``_merge_extras`` for one nested value, ``made`` its conversion at ``into[key]``."""
    if isinstance(value, msgspec.Struct) and type(made) is dict:
        _merge_extras(value, made)
    elif isinstance(value, list) and type(made) is list and len(made) == len(value):
        for i, item in enumerate(value):
            _merge_value(item, made[i], made, i)
    else:
        into[key] = to_builtins(value)


def convert(data: Any, cls: type[Any]) -> Any:
    """Plain data to a struct, keeping fields the struct does not know in ``_extra``.

    Raises ``msgspec.ValidationError`` when a known field is missing or has the wrong type.
    """
    if not isinstance(data, dict):
        raise msgspec.ValidationError(f"expected an object for {cls.__name__}, got {data!r:.80}")
    known = cls.__struct_encode_fields__
    tag_field = cls.__struct_config__.tag_field
    flat: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    for k, v in data.items():
        if k == tag_field or k in known:
            flat[k] = v
        else:
            extra[k] = v
    nested_values: dict[str, Any] = {}
    for name, (is_list, sub) in NESTED.get(cls, {}).items():
        v = flat.pop(name, None)
        if v is None:
            continue
        if is_list:
            if not isinstance(v, list):
                raise msgspec.ValidationError(f"`{name}` must be a list, got {v!r:.80}")
            nested_values[name] = [convert(x, sub) for x in v]
        else:
            nested_values[name] = convert(v, sub)
    flat.update(nested_values)  # converted structs pass through msgspec.convert as they are
    parts = None
    if cls in PART_CONTENT and isinstance(flat.get("content"), list):
        parts = [_convert_part(p) for p in flat.pop("content")]
        flat["content"] = ""  # a placeholder of a valid type; the parts are set below
    obj = msgspec.convert(flat, cls)
    if parts is not None:
        obj.content = parts
    if extra:
        obj._extra = extra
    return obj


def _convert_part(p: Any) -> Any:
    if isinstance(p, dict):
        kind = p.get("type")
        if not isinstance(kind, str):
            raise msgspec.ValidationError(f"a content part needs a string `type`, got {kind!r:.40}")
        cls = _PART_TYPES.get(kind)
        if cls is None:
            return UnknownPart(p)
        return convert(p, cls)
    raise msgspec.ValidationError(f"a content part must be an object, got {p!r:.80}")
