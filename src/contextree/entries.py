"""Entries: the typed lines of a session file, one change of conversation state each.

A session file starts with a ``SessionHeader`` line, then holds entries that form a tree
through ``parent_id``. Eleven entry types are those of the AgentCore.jl session tree;
``ContextEditEntry`` is pi 1.x's edit of what an earlier entry shows the model, and
``RequestEntry`` records what a model call sent besides the messages. A
line of a type this version does not know is kept as an ``UnknownEntry`` and written back
unchanged. Narrow an entry with ``isinstance(e, MessageEntry)``: an ``UnknownEntry``'s
``type`` may be any string, so comparing ``e.type`` cannot narrow the union for a type checker.
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Callable, Sequence
from datetime import UTC, date, datetime, timedelta
from datetime import time as dt_time
from decimal import Decimal
from typing import Any
from uuid import UUID

import msgspec
import orjson

from ._limits import MAX_DEPTH, TOO_DEEP, data_problem, deeper_than, plain_data
from ._messages import (
    NESTED,
    PART_CONTENT,
    ImagePart,
    Message,
    Part,
    TextPart,
    ThinkingPart,
    ToolCall,
    UnknownPart,
    Usage,
    _Extras,
    convert,
    enc_hook,
    has_extras,
    to_builtins,
)
from .errors import CorruptLine, InvalidEntry, SessionError

__all__ = [
    "CALLS_TYPE",
    "ENTRY_TYPES",
    "FORMAT_VERSION",
    "ActiveToolsChangeEntry",
    "AnyEntry",
    "BranchSummaryEntry",
    "CallRecord",
    "CompactionEntry",
    "CompactionReceipt",
    "ContextEditEntry",
    "CustomEntry",
    "CustomMessageEntry",
    "Entry",
    "KnownEntry",
    "LabelEntry",
    "LeafEntry",
    "Line",
    "LineError",
    "MessageEntry",
    "ModelChangeEntry",
    "RequestEntry",
    "SessionHeader",
    "SessionInfoEntry",
    "ThinkingLevelChangeEntry",
    "UnknownEntry",
    "checked_line",
    "decode_line",
    "encode_line",
    "from_dict",
    "line_problem",
    "new_id",
    "now",
    "recorded_system",
    "request_digest",
    "system_texts",
    "to_dict",
]

FORMAT_VERSION = 1

_CFG = dict(tag_field="type", omit_defaults=True, forbid_unknown_fields=True, dict=True)


_second: tuple[int, str] = (-1, "")
_MILLIS = tuple(f".{ms:03d}Z" for ms in range(1000))  # the tail of every timestamp


def now() -> str:
    """An ISO 8601 UTC timestamp with milliseconds, as written in every entry."""
    # Same text as datetime.now(UTC).isoformat(timespec="milliseconds") with a "Z", at a
    # fraction of the cost (it runs on every append): the date part is cached per second,
    # the milliseconds' text is looked up.
    global _second
    sec, ns = divmod(time.time_ns(), 1_000_000_000)
    cached = _second
    if cached[0] != sec:
        cached = _second = (sec, datetime.fromtimestamp(sec, UTC).strftime("%Y-%m-%dT%H:%M:%S"))
    return cached[1] + _MILLIS[ns // 1_000_000]


def new_id() -> str:
    """A short random entry id (8 hex digits); sessions check it is unused before use."""
    # What secrets.token_hex(4) gives, from os.urandom bytes drawn 4 KiB at a time (one
    # system call per 1,024 ids, not per id) and cut into ids at once; ``list.pop`` is
    # atomic, so two threads never take the same id; a child of fork() draws its own.
    while True:
        try:
            return _ids.pop()
        except IndexError:
            with _refill_lock:
                if not _ids:
                    text = os.urandom(_RANDOM_BYTES).hex()
                    _ids.extend([text[k:k + 8] for k in range(0, len(text), 8)])


_RANDOM_BYTES = 4096
_ids: list[str] = []  # ids drawn and not given yet
_refill_lock = threading.Lock()


def _draw_anew() -> None:
    """After fork(): the child must not give the ids its parent will give (and a thread of
    the parent may have held the lock)."""
    global _refill_lock
    _ids.clear()
    _refill_lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_draw_anew)


class SessionHeader(
    msgspec.Struct, _Extras, tag="session", tag_field="type", kw_only=True, forbid_unknown_fields=True, dict=True
):
    """First line of every session file: format version, identity and provenance (all written)."""

    id: str
    created_at: str
    version: int = FORMAT_VERSION
    cwd: str | None = None
    parent_session: str | None = None
    metadata: dict[str, Any] | None = None


class Entry(msgspec.Struct, _Extras, **_CFG):
    """Fields every entry has."""

    id: str
    parent_id: str | None
    timestamp: str

    @property
    def type(self) -> str:
        """The type tag written in the entry's line (``"message"``, ``"compaction"``...)."""
        return str(self.__struct_config__.tag)


class MessageEntry(Entry, tag="message", kw_only=True):
    """A user, assistant, tool or system message."""

    message: Message


class ThinkingLevelChangeEntry(Entry, tag="thinking_level_change", kw_only=True):
    """The model's thinking level changed ("off", "minimal", "low", "medium", "high", ...)."""

    thinking_level: str


class ModelChangeEntry(Entry, tag="model_change", kw_only=True):
    """The model (and provider) used from here on changed."""

    provider: str
    model_id: str


class ActiveToolsChangeEntry(Entry, tag="active_tools_change", kw_only=True):
    """The set of tools offered to the model changed."""

    active_tool_names: list[str]


class CompactionReceipt(msgspec.Struct, kw_only=True, omit_defaults=False,
                        forbid_unknown_fields=False):
    """What one compaction did, entry by entry, as data (``CompactionEntry.receipt``).

    ``kept``: the entries of the view it made that are shown as they were written;
    ``folded``: entries whose content went into the summary; ``cleared``: tool results in
    view shown as a placeholder; ``dropped``: entries that left the view without being
    folded (nothing of them is in the summary); ``pinned``: entries from before the kept
    range kept in view all the same (the system prompt, the current task);
    ``identifiers``: the identifiers (shas, ids, paths) the summary copies verbatim. Entry
    ids, in branch order.
    """

    kept: list[str] = msgspec.field(default_factory=list)
    folded: list[str] = msgspec.field(default_factory=list)
    cleared: list[str] = msgspec.field(default_factory=list)
    dropped: list[str] = msgspec.field(default_factory=list)
    pinned: list[str] = msgspec.field(default_factory=list)
    identifiers: list[str] = msgspec.field(default_factory=list)

    def to_dict(self) -> dict[str, list[str]]:
        """The receipt as plain JSON-ready data (every list, empty ones too)."""
        return {"kept": list(self.kept), "folded": list(self.folded),
                "cleared": list(self.cleared), "dropped": list(self.dropped),
                "pinned": list(self.pinned), "identifiers": list(self.identifiers)}

    @classmethod
    def from_dict(cls, data: Any) -> CompactionReceipt | None:
        """The receipt in ``data`` (as ``to_dict`` wrote it), or ``None`` when it is not one."""
        try:
            return msgspec.convert(data, cls)
        except msgspec.ValidationError:
            return None


class CompactionEntry(Entry, tag="compaction", kw_only=True):
    """What the model sees from here on, in place of the history before it.

    The context is: ``summary`` (if any), then the ``pinned`` entries before the kept range
    (a system prompt, the current task), then the path from ``first_kept_entry_id`` (or the
    ``retained_tail`` messages), then everything after this entry. Tool results whose entry
    ids are keys of ``cleared`` are shown as the placeholder text given there. The entries
    before stay in the file: compaction changes the view, never the history. A
    ``retained_tail`` message marked as the compaction summary of this very ``summary`` (an
    imported compaction, kept the way the other tool sent it) stands in for the summary
    message, which is then not added a second time. ``receipt``
    says what the compaction did to each entry (``CompactionReceipt``; ``None`` for one
    written elsewhere or by an older version).
    """

    summary: str
    first_kept_entry_id: str | None
    tokens_before: int
    tokens_after: int | None = None
    retained_tail: list[Message] | None = None
    cleared: dict[str, str] | None = None
    pinned: list[str] | None = None
    details: Any = None
    usage: Usage | None = None
    from_hook: bool = False
    receipt: CompactionReceipt | None = None


class BranchSummaryEntry(Entry, tag="branch_summary", kw_only=True):
    """A summary of the branch that was left when the leaf moved to ``from_id``."""

    from_id: str
    summary: str
    details: Any = None
    usage: Usage | None = None
    from_hook: bool = False


class CustomEntry(Entry, tag="custom", kw_only=True):
    """Application data; not sent to the model unless a projector turns it into messages."""

    custom_type: str
    data: Any = None


class CustomMessageEntry(Entry, tag="custom_message", kw_only=True):
    """An application message that the model sees (as a user message) and a UI may display."""

    custom_type: str
    content: str | list[Part]  # parts (text, images) as in a message
    details: Any = None
    display: bool = True

    @property
    def text(self) -> str:
        """The text of the content: the string, or its text parts joined."""
        if isinstance(self.content, str):
            return self.content
        return "".join(p.text for p in self.content if isinstance(p, TextPart))


PART_CONTENT.add(CustomMessageEntry)


class LabelEntry(Entry, tag="label", kw_only=True):
    """Sets (or with ``label=None`` clears) a label on ``target_id``."""

    target_id: str
    label: str | None


class SessionInfoEntry(Entry, tag="session_info", kw_only=True):
    """Session metadata, such as its display name."""

    name: str | None = None


class LeafEntry(Entry, tag="leaf", kw_only=True):
    """The current leaf moved to ``target_id`` (``None``: before the first entry)."""

    target_id: str | None


class ContextEditEntry(Entry, tag="context_edit", kw_only=True):
    """Changes what one earlier entry on this path shows the model from here on, without
    touching the entry itself (pi 1.x's ``context_edit``).

    ``content=None`` leaves ``target_id``'s messages out of the context; otherwise their
    content is replaced by ``content`` (role and other fields stay). The latest edit of a
    target on the path wins, and an edit only counts on the path it is on: a sibling branch,
    or the path up to a point before the edit, still shows the original. The history stays as
    it was; ``tree`` and exports still hold the target unchanged.
    """

    target_id: str
    content: str | list[Part] | None = None


PART_CONTENT.add(ContextEditEntry)


class RequestEntry(Entry, tag="request", kw_only=True):
    """What the model calls from here on send besides the messages: the system prompt, the
    tools with their schemas, and the request parameters (temperature, max tokens, reasoning
    effort, response format...), as given to the adapter.

    ``sha256`` is ``request_digest`` of the three: a turn whose request has the digest of
    the one in force appends nothing, so an unchanged prompt costs nothing per turn. A
    request equal to an earlier one on the same branch is written as ``same_as`` (that
    entry's id) with the content left out. ``stream``: the calls were streamed (the body
    then asks for a stream). ``system`` holds the leading system messages as they were sent:
    the text of the one, or the list of their texts when there were several (an entry
    written before lists were recorded holds several joined by a blank line; read it with
    ``system_texts``). The messages themselves come from the branch.
    """

    sha256: str
    system: str | list[str] | None = None
    tools: list[dict[str, Any]] | None = None
    params: dict[str, Any] | None = None
    stream: bool = False
    same_as: str | None = None


CALLS_TYPE = "contextree.calls"
"""The ``custom_type`` of a custom entry that records model calls no message stands for
(``{"calls": [CallRecord...]}``): a summarizer's calls when no compaction was written, a
call interrupted before anything of its reply arrived. The statistics count them."""


class CallRecord(msgspec.Struct, kw_only=True, omit_defaults=True):
    """One model call that no assistant message records: who answered (``provider``,
    ``model``), what it used (``usage``; ``estimated`` when the provider reported none and
    the input was counted here), and how it ended (``outcome``: ``"summary"``,
    ``"summary_rejected"``, ``"summarizer_failed"``, ``"interrupted"``)."""

    provider: str | None = None
    model: str | None = None
    usage: Usage = msgspec.field(default_factory=Usage)
    estimated: bool = False
    outcome: str = ""

    def to_dict(self) -> dict[str, Any]:
        """The record as JSON-ready data (as stored in an entry)."""
        return to_builtins(self)  # type: ignore[no-any-return]


def system_texts(system: str | Sequence[str] | None) -> list[str]:
    """The system messages a recorded ``system`` (``RequestEntry.system``) stands for, as
    texts in order: none, the one, or each of a list."""
    if system is None:
        return []
    return [system] if isinstance(system, str) else list(system)


def recorded_system(texts: str | Sequence[str] | None) -> str | list[str] | None:
    """How ``RequestEntry.system`` records the leading system messages ``texts``: ``None``
    for none, the text of one, the list of several (so the digest of one prompt is the
    same as before lists were recorded)."""
    found = system_texts(texts)
    if not found:
        return None
    return found[0] if len(found) == 1 else found


def request_digest(system: str | Sequence[str] | None, tools: list[dict[str, Any]] | None,
                   params: dict[str, Any] | None, stream: bool = False) -> str:
    """The sha256 (hex) of a request's content, the same whatever order the keys of a
    schema or of the parameters were given in (the order of the tools counts)."""
    data = {"system": recorded_system(system), "tools": tools or [], "params": params or {},
            "stream": stream}
    import hashlib  # here, not at start-up: OpenSSL's loading is most of a short command's wait

    return hashlib.sha256(orjson.dumps(data, option=orjson.OPT_SORT_KEYS)).hexdigest()


class UnknownEntry:
    """A line whose ``type`` this version does not know: kept and written back unchanged."""

    __slots__ = ("data", "id", "parent_id", "timestamp", "type")

    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data
        self.type = str(data.get("type"))
        self.id = data["id"]
        self.parent_id = data.get("parent_id")
        self.timestamp = str(data.get("timestamp", ""))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, UnknownEntry) and other.data == self.data

    def __repr__(self) -> str:
        return f"UnknownEntry({self.data!r})"

    __hash__ = None  # type: ignore[assignment]


KnownEntry = (
    MessageEntry
    | ThinkingLevelChangeEntry
    | ModelChangeEntry
    | ActiveToolsChangeEntry
    | CompactionEntry
    | BranchSummaryEntry
    | CustomEntry
    | CustomMessageEntry
    | LabelEntry
    | SessionInfoEntry
    | LeafEntry
    | ContextEditEntry
    | RequestEntry
)
AnyEntry = KnownEntry | UnknownEntry
Line = SessionHeader | AnyEntry

ENTRY_TYPES: dict[str, type[Entry]] = {
    cls.__struct_config__.tag: cls  # type: ignore[misc]
    for cls in (
        MessageEntry,
        ThinkingLevelChangeEntry,
        ModelChangeEntry,
        ActiveToolsChangeEntry,
        CompactionEntry,
        BranchSummaryEntry,
        CustomEntry,
        CustomMessageEntry,
        LabelEntry,
        SessionInfoEntry,
        LeafEntry,
        ContextEditEntry,
        RequestEntry,
    )
}

NESTED[MessageEntry] = {"message": (False, Message)}
NESTED[CompactionEntry] = {"retained_tail": (True, Message), "usage": (False, Usage)}
NESTED[BranchSummaryEntry] = {"usage": (False, Usage)}

# -- limits -------------------------------------------------------------------------
# Which fields of each line may hold arbitrary JSON, walked by ``contextree._limits``.

def _plain(entry: MessageEntry) -> bool:
    """A message entry with text content and no tool calls, meta or unknown fields, every
    field of the type it is declared with: within the limits and of the right types by
    construction, and encoded as it is (most appends are one). The common case (a text
    with none of the optional fields) is a few attribute reads; a reply or a tool result
    has its optional fields' types looked at (``_typed_plain``)."""
    m = entry.message
    return (type(m) is Message and type(m.content) is str and type(m.role) is str
            and m.tool_calls is None and m.meta is None and type(entry.timestamp) is str
            and getattr(entry, "_extra", None) is None and getattr(m, "_extra", None) is None
            and ((m.usage is None and m.tool_call_id is None and m.name is None
                  and m.model is None and m.provider is None and m.stop_reason is None
                  and m.is_error is False) or _typed_plain(m)))


_TEXT_OR_NONE = ("tool_call_id", "name", "model", "provider", "stop_reason")
_COUNTS = ("input", "output", "cache_read", "cache_write", "total")


def _typed_plain(m: Message) -> bool:
    """The optional fields of a message that ``_plain`` lets through (every field of
    ``Message`` but content, role, tool calls and meta) hold what they are declared to:
    text or ``None``, a bool, a ``Usage`` of integers and a cost (``tests/
    test_wrong_types.py`` sets each field of ``Message`` and ``Usage`` to a wrong type, so a
    field added to either cannot slip past here)."""
    for name in _TEXT_OR_NONE:
        value = getattr(m, name)
        if value is not None and type(value) is not str:
            return False
    if type(m.is_error) is not bool:
        return False
    u = m.usage
    if u is None:
        return True
    if type(u) is not Usage or getattr(u, "_extra", None) is not None:
        return False
    for name in _COUNTS:
        if type(getattr(u, name)) is not int:
            return False
    return u.cost is None or type(u.cost) is float or type(u.cost) is int


def plain_message_line(entry: Any) -> bytes | None:
    """The line of a plain message entry (see ``_plain``), which needs no ``line_problem``
    check; ``None`` for any other entry. The append's fast path: one test, one encode."""
    if type(entry) is MessageEntry and _plain(entry):
        return _ENCODER.encode(entry) + b"\n"
    return None


def line_problem(line: Any) -> str | None:
    """What keeps a header or entry from being written: a field that is not of the type it
    is declared with (``_type_problem``: the reader would refuse the line), or JSON beyond
    the limits; ``None`` if nothing does."""
    if type(line) is MessageEntry and _plain(line):  # the common case first
        return None
    return _type_problem(line) or _limits_problem(line)


def _limits_problem(line: Any) -> str | None:
    """What breaks the limits in a header or entry, or ``None``: ``line_problem`` for what
    a typed decoder made (its fields are of their types already)."""
    if type(line) is MessageEntry and _plain(line):
        return None
    check = _FIELDS.get(type(line))
    if check is None:
        if isinstance(line, UnknownEntry):
            return data_problem(line.data)
        if not isinstance(line, msgspec.Struct):
            return None
        plain = plain_data(line)
        return TOO_DEEP if plain is None else data_problem(plain)
    extra = getattr(line, "_extra", None)  # unknown fields, kept to be written back
    if extra and (p := data_problem(extra)):
        return p
    return check(line)


def decoded_problem(entry: Any) -> str | None:
    """``line_problem`` for what the typed line decoder returned: it admits no unknown
    fields or content parts, and its fields are of their types, so a message can only go
    wrong in its tool calls or meta."""
    if type(entry) is MessageEntry:
        m = entry.message
        if m.meta is not None and (p := data_problem(m.meta, 2)):
            return p
        for call in m.tool_calls or ():
            if call.arguments and (p := data_problem(call.arguments, 4)):
                return p
        return None
    return _limits_problem(entry)


# -- types ------------------------------------------------------------------------------
# A line is written only if its reader takes it back as it is: each field of the type it
# is declared with. Checked against the very classes the reader decodes into, so the two
# cannot drift: first what only Python objects can get wrong (``_nesting``: a dict where a
# struct is declared, which its JSON would hide), then the line's data as ``to_builtins``
# gives it (values that JSON would turn into text, such as bytes or a datetime, kept as
# they are, so that a text field refuses them) converted to its class, in C. A content
# part this version does not know stands in as an empty text part: the reader keeps it (a
# part given as a dict takes the reader's lenient path, ``_messages.convert``, if need be).

_KEPT = (bytes, bytearray, memoryview, datetime, date, dt_time, timedelta, UUID, Decimal)
_EXPECTED = re.compile(r"Expected `([^`]+)`, got `([^`]+)`(?: - at `\$\.?([^`]*)`)?")
_WORDS = {"null": "None", "array": "list", "object": "dict"}
_PARTS = (TextPart, ImagePart, ThinkingPart)
_PART_TAGS = frozenset(str(c.__struct_config__.tag) for c in _PARTS)
_STAND_IN = {"type": "text", "text": ""}


def _type_problem(line: Any) -> str | None:
    """The first field of a header or entry that is not of its declared type, said as
    ``line_problem`` says a problem (``None``: every field is). A line of an unknown type
    keeps any JSON but must not claim a known type (the reader would take it as one).
    Data with no JSON form is left to the encoding, which refuses it, and data nested too
    deeply for the conversion to the limits check."""
    if isinstance(line, UnknownEntry):
        kind = line.data.get("type")
        if not isinstance(kind, str):
            return f"`type` must be str, got {type(kind).__name__}"
        if kind == "session" or kind in ENTRY_TYPES:
            return (f"an UnknownEntry cannot have the type {kind!r}, which this version "
                    "knows: make the entry with entries.from_dict(data)")
        return None
    if not isinstance(line, Entry | SessionHeader):
        return None
    if type(line) is MessageEntry and _typed_message(line):
        return None
    problem, shadowed = _nesting(line, "")
    if problem is not None:
        return problem
    try:
        data = msgspec.to_builtins(line, builtin_types=_KEPT, str_keys=True,
                                   enc_hook=_stand_in)
        msgspec.convert(data, type(line))
    except msgspec.ValidationError as e:
        try:  # a part given as a dict of a type this version does not know, say
            convert(data, type(line))
        except msgspec.ValidationError:
            return wrong_type(e)
        except NO_JSON_FORM:
            return None
    except NO_JSON_FORM:
        return None
    if shadowed:  # an unknown field is written in place of a field left out: as read?
        try:
            convert(to_builtins(line), type(line))
        except msgspec.ValidationError as e:
            return f"an unknown field (set_extra) is written in place of a field: {wrong_type(e)}"
        except NO_JSON_FORM:
            return None
    return None


_PART_FIELDS: dict[type[Any], tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]] = {
    TextPart: (("text",), (), ()),
    ThinkingPart: (("thinking",), ("signature",), ("redacted",)),
    ImagePart: ((), ("data", "mime_type", "url"), ()),
}
"""Of each content part: its fields of text, of text or ``None``, and of bools."""


def _typed_message(entry: MessageEntry) -> bool:
    """True when every field of a message entry, of its message and of the structs in it
    holds exactly the type it is declared with (no subclass, no dict for a struct, no
    unknown part) and no unknown field stands where a field may be left out: what
    ``_type_problem``'s conversion would find, found by reading the fields (an import's
    entries, with their unknown fields, are all such). ``False`` leaves it to the
    conversion, which says what is wrong, if anything."""
    m = entry.message
    parent = entry.parent_id
    if (type(entry.id) is not str or type(entry.timestamp) is not str
            or (parent is not None and type(parent) is not str)
            or type(m) is not Message or type(m.role) is not str
            or (m.meta is not None and type(m.meta) is not dict)
            or _shadows(entry) or _shadows(m) or not _typed_plain(m)):
        return False
    content = m.content
    if content is not None and type(content) is not str:
        if type(content) is not list:
            return False
        for part in content:
            if not _typed_part(part):
                return False
    calls = m.tool_calls
    if calls is not None:
        if type(calls) is not list:
            return False
        for call in calls:
            if (type(call) is not ToolCall or type(call.id) is not str
                    or type(call.name) is not str or type(call.arguments) is not dict
                    or _shadows(call)):
                return False
    return True


def _typed_part(part: Any) -> bool:
    """``_typed_message`` for one content part."""
    fields = _PART_FIELDS.get(type(part))
    if fields is None or _shadows(part):
        return False
    text, text_or_none, flags = fields
    for name in text:
        if type(getattr(part, name)) is not str:
            return False
    for name in text_or_none:
        value = getattr(part, name)
        if value is not None and type(value) is not str:
            return False
    return all(type(getattr(part, name)) is bool for name in flags)


def _shadows(obj: Any) -> bool:
    """Whether an unknown field of struct ``obj`` has the name of a field its line may
    leave out (``_nesting``'s ``shadowed``, for one struct)."""
    extra = getattr(obj, "_extra", None)
    if not extra:
        return False
    found = _SLOTS.get(type(obj))
    return not (found or _slots(type(obj)))[0].isdisjoint(extra)


def _stand_in(obj: Any) -> Any:
    """``enc_hook`` of the type check: a content part of a type this version does not know
    as a valid part (the reader keeps whatever it holds), one that claims a known type as
    its data (read as that part, so checked as one)."""
    if isinstance(obj, UnknownPart):
        data = obj.data
        kind = data.get("type") if isinstance(data, dict) else None
        return _STAND_IN if isinstance(kind, str) and kind not in _PART_TAGS else data
    return enc_hook(obj)


_Slot = tuple[str, str, tuple[type[Any], ...], bool, tuple[type[Any], ...]]
_SLOTS: dict[type[Any], tuple[frozenset[str], tuple[_Slot, ...]]] = {}


def _slots(cls: type[Any]) -> tuple[frozenset[str], tuple[_Slot, ...]]:
    """Of struct ``cls``, as msgspec sees it (worked out once): the fields its line may
    leave out (a default, with ``omit_defaults``: an unknown field of the name would be
    written in their place), and the fields declared to hold structs, each as (attribute,
    name in the line, the structs it may be, whether it may be nothing else but ``None``,
    the structs a list of it holds when that list holds structs only). An unknown content
    part is a part too, and so is a dict (what callers have long given: ``content`` is read
    for its parts, which skips other items, where a usage or a tool call is read for its
    fields)."""
    found = _SLOTS.get(cls)
    if found is not None:
        return found
    inspect = msgspec.inspect
    info = inspect.type_info(cls)
    assert isinstance(info, inspect.StructType)
    slots: list[_Slot] = []
    for f in info.fields:
        kinds = f.type.types if isinstance(f.type, inspect.UnionType) else (f.type,)
        alone: tuple[type[Any], ...] = tuple(k.cls for k in kinds
                                             if isinstance(k, inspect.StructType))
        only = bool(alone) and all(isinstance(k, inspect.StructType | inspect.NoneType)
                                   for k in kinds)
        items = [i for k in kinds if isinstance(k, inspect.ListType)
                 for i in (k.item_type.types if isinstance(k.item_type, inspect.UnionType)
                           else (k.item_type,))]
        listed: tuple[type[Any], ...] = tuple(i.cls for i in items
                                              if isinstance(i, inspect.StructType))
        if len(listed) != len(items):
            listed = ()  # a list that may hold other things: msgspec's check says it
        elif set(listed) & set(_PARTS):
            listed += (UnknownPart, dict)  # a dict: a part as JSON, which is read as one
        if alone or listed:
            if only and any(isinstance(k, inspect.NoneType) for k in kinds):
                alone += (type(None),)
            slots.append((f.name, f.encode_name, alone, only, listed))
    omitted = (frozenset(f.encode_name for f in info.fields if not f.required)
               if cls.__struct_config__.omit_defaults else frozenset())
    found = _SLOTS[cls] = (omitted, tuple(slots))
    return found


def _nesting(obj: Any, at: str) -> tuple[str | None, bool]:
    """The first field of struct ``obj`` (``at`` its place in the line) declared as a
    struct that holds something else (a dict, say: ``to_builtins`` would make both the
    same JSON, but the entry in memory is not what a reopen reads), and whether an unknown
    field of it or of a struct in it has the name of a field that its line may leave out."""
    omitted, slots = _slots(type(obj))
    extra = getattr(obj, "_extra", None)
    shadowed = extra is not None and not omitted.isdisjoint(extra)
    for name, key, alone, only, listed in slots:
        value = getattr(obj, name)
        if value is None:
            continue
        if listed and type(value) in (list, tuple):
            for k, item in enumerate(value):
                if not isinstance(item, listed):
                    return _not_of(f"{at}{key}[{k}]", listed, item), shadowed
                if isinstance(item, msgspec.Struct):
                    problem, inner = _nesting(item, f"{at}{key}[{k}].")
                    if problem is not None:
                        return problem, shadowed
                    shadowed = shadowed or inner
        elif alone and isinstance(value, alone):
            problem, inner = _nesting(value, f"{at}{key}.")
            if problem is not None:
                return problem, shadowed
            shadowed = shadowed or inner
        elif only:
            return _not_of(f"{at}{key}", alone, value), shadowed
    return None, shadowed


def _not_of(at: str, kinds: tuple[type[Any], ...], value: Any) -> str:
    names = ["None" if k is type(None) else k.__name__ for k in kinds]
    return f"`{at}` must be {_either(names)}, got {type(value).__name__}"


def _either(words: list[str]) -> str:
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " or " + words[-1]


def wrong_type(error: msgspec.ValidationError) -> str:
    """msgspec's ``Expected `str | null`, got `int` - at `$.label``` as ``line_problem``
    says it: "`label` must be str or None, got int"."""
    text = str(error)
    found = _EXPECTED.fullmatch(text)
    if found is None:
        return f"it is not valid ({text})"
    want, got, at = found.groups()
    kinds = [_WORDS.get(w, w) for w in want.split(" | ")]
    return f"`{at or 'the line'}` must be {_either(kinds)}, got {_WORDS.get(got, got)}"


def _extras(obj: Any, level: int) -> str | None:
    """The unknown fields of a struct ``level`` containers deep, if any."""
    extra = getattr(obj, "_extra", None)
    return data_problem(extra, level) if extra else None


def _message(m: Message, level: int) -> str | None:
    """A message ``level`` containers deep in its line (its fields are one deeper)."""
    if (p := _extras(m, level)) or (m.meta is not None and (p := data_problem(m.meta,
                                                                              level + 1))):
        return p
    content = m.content
    if type(content) is list:
        for part in content:
            if isinstance(part, msgspec.Struct):
                p = _extras(part, level + 2)
            else:  # an unknown part: its data is the part
                p = data_problem(getattr(part, "data", None), level + 2)
            if p:
                return p
    for call in m.tool_calls or ():
        if (p := _extras(call, level + 2)) or (
                call.arguments and (p := data_problem(call.arguments, level + 3))):
            return p
    if m.usage is not None and (p := _extras(m.usage, level + 1)):
        return p
    return None


def _message_content(content: Any, level: int) -> str | None:
    """The parts of a content ``level`` containers deep (the content list one deeper)."""
    if type(content) is list:
        for part in content:
            if isinstance(part, msgspec.Struct):
                p = _extras(part, level + 2)
            else:
                p = data_problem(getattr(part, "data", None), level + 2)
            if p:
                return p
    return None


def _field(name: str) -> Callable[[Any], str | None]:
    def check(line: Any) -> str | None:
        value = getattr(line, name)
        if value is not None and (p := data_problem(value, 1)):
            return p
        usage = getattr(line, "usage", None)
        return _extras(usage, 1) if usage is not None else None
    return check


def _compaction(line: CompactionEntry) -> str | None:
    if line.details is not None and (p := data_problem(line.details, 1)):
        return p
    for m in line.retained_tail or ():
        if p := _message(m, 2):
            return p
    return _extras(line.usage, 1) if line.usage is not None else None


def _request(line: RequestEntry) -> str | None:
    for value in (line.tools, line.params):
        if value is not None and (p := data_problem(value, 1)):
            return p
    return None


def _nothing(line: Any) -> None:
    return None


_FIELDS: dict[type[Any], Callable[[Any], str | None]] = {
    MessageEntry: lambda e: _message(e.message, 1),
    CompactionEntry: _compaction,
    BranchSummaryEntry: _field("details"),
    CustomEntry: _field("data"),
    CustomMessageEntry: _field("details"),
    SessionHeader: _field("metadata"),
    ThinkingLevelChangeEntry: _nothing,
    ModelChangeEntry: _nothing,
    ActiveToolsChangeEntry: _nothing,
    LabelEntry: _nothing,
    SessionInfoEntry: _nothing,
    LeafEntry: _nothing,
    ContextEditEntry: lambda e: _message_content(e.content, 1),
    RequestEntry: _request,
}


# -- JSON lines ------------------------------------------------------------------------

LINE_DECODER = msgspec.json.Decoder(SessionHeader | KnownEntry)
_ANY_JSON = msgspec.json.Decoder()
_ENCODER = msgspec.json.Encoder(enc_hook=enc_hook)


class LineError(ValueError):
    """A line that is not valid JSON or not a valid entry; ``kind`` is the error to raise
    (``CorruptLine`` or ``InvalidEntry``) once the caller knows the file and line."""

    def __init__(self, kind: type[SessionError], message: str) -> None:
        self.kind = kind
        super().__init__(message)


def decode_line(line: bytes | memoryview | str) -> Line:
    """Decode one JSON line: the fast typed path, else a lenient path that keeps unknowns.

    Raises ``LineError`` for invalid JSON, a known type with missing or wrong fields, or a
    line beyond the limits of ``contextree._limits`` (nesting depth, integer range).
    """
    try:
        decoded: Line = LINE_DECODER.decode(line)
    except (msgspec.DecodeError, RecursionError):
        pass  # the lenient path below says what is wrong
    else:
        problem = _limits_problem(decoded)
        if problem is not None:
            raise LineError(InvalidEntry, problem)
        return decoded
    data = _lenient(line)
    problem = data_problem(data)
    if problem is not None:
        raise LineError(InvalidEntry, problem)
    return from_dict(data)


def _lenient(line: bytes | memoryview | str) -> Any:
    """``line`` as plain JSON data, by msgspec: it fails an allocation with ``MemoryError``,
    where orjson segfaults (under an address-space limit, a 40 MB line) or reports a decode
    error. Memory running out says nothing of the line, so it is never a ``LineError`` (a
    torn or corrupt line would be cut off)."""
    try:
        return _ANY_JSON.decode(line)
    except RecursionError:
        raise LineError(InvalidEntry, TOO_DEEP) from None
    except msgspec.DecodeError as e:  # ValidationError too: a number out of range
        raise LineError(CorruptLine, f"not valid JSON ({e})") from None
    except MemoryError:
        raise MemoryError(f"not enough memory to decode a line of {len(line):,} bytes; "
                          "nothing was changed: free memory (or raise the process's "
                          "limit) and open the session again") from None


def from_dict(data: Any) -> Line:
    """A parsed JSON object to a header or entry, keeping unknown fields and types."""
    if not isinstance(data, dict):
        raise LineError(InvalidEntry, f"a line must be a JSON object, got {type(data).__name__}")
    kind = data.get("type")
    if not isinstance(kind, str):
        raise LineError(InvalidEntry, "the line has no string `type` field")
    if not isinstance(data.get("id"), str):
        raise LineError(InvalidEntry, f"the {kind!r} line has no string `id` field")
    cls: type[Any] | None = SessionHeader if kind == "session" else ENTRY_TYPES.get(kind)
    if cls is None:
        parent = data.get("parent_id")
        if parent is not None and not isinstance(parent, str):
            raise LineError(InvalidEntry, f"`parent_id` must be a string or null, got {parent!r:.40}")
        return UnknownEntry(data)
    try:
        return convert(data, cls)  # type: ignore[no-any-return]
    except msgspec.ValidationError as e:
        raise LineError(InvalidEntry, f"invalid {kind!r} entry: {e}") from None


def to_dict(line: Line) -> dict[str, Any]:
    """A header or entry as plain JSON data, unknown fields included."""
    if isinstance(line, UnknownEntry):
        return dict(line.data)
    return to_builtins(line)  # type: ignore[no-any-return]


def encode_line(line: Line) -> bytes:
    """One JSON line (with trailing newline) for a header or entry."""
    if type(line) is MessageEntry and _plain(line):  # the common case first
        return _ENCODER.encode(line) + b"\n"
    if isinstance(line, UnknownEntry):
        return orjson.dumps(line.data) + b"\n"
    if has_extras(line):
        return orjson.dumps(to_builtins(line)) + b"\n"
    return _ENCODER.encode(line) + b"\n"


NO_JSON_FORM = (TypeError, ValueError, OverflowError, RecursionError)
"""What encoding a line raises for data with no JSON form (an arbitrary object, a lone
surrogate, an integer past 64 bits, a cycle)."""


def checked_line(line: Line) -> bytes | None:
    """``encode_line`` of a header or entry within the limits (``line_problem``); ``None``
    for one beyond them or with no JSON form.

    Cheaper than the two one after the other for entries with unknown fields (an import's):
    orjson, which writes those, refuses integers beyond 64 bits, so a line it wrote that
    nests no deeper than ``MAX_DEPTH`` (``deeper_than``: a short walk of the data, or a
    count of brackets) cannot break a limit, and is not checked field by field."""
    try:  # a plain message first (most entries): one test, one encode, no walk
        simple = plain_message_line(line)
    except NO_JSON_FORM:
        return None
    if simple is not None:
        return simple
    by_orjson = isinstance(line, UnknownEntry) or has_extras(line)
    if (line_problem(line) if not by_orjson else _type_problem(line)) is not None:
        return None
    try:
        if not by_orjson:
            return _ENCODER.encode(line) + b"\n"
        plain = line.data if isinstance(line, UnknownEntry) else to_builtins(line)
        data = orjson.dumps(plain, option=orjson.OPT_APPEND_NEWLINE)  # no copy to add it
    except NO_JSON_FORM:
        return None
    if deeper_than(MAX_DEPTH, plain, data) and line_problem(line) is not None:
        return None
    return data
