"""An entry whose fields are not of their declared types is refused at the append, with
``InvalidEntry`` naming the field and the types, and nothing is written: the reader (a
typed msgspec decoder) would refuse its line, and the session could not be opened again.
Every field of ``Message``, ``Usage``, ``ToolCall``, the content parts and each entry type
is set to each wrong value in turn, read from the classes (``msgspec.structs.fields``), so
a field added later is covered without a change here. Wrong-typed references given to the
``Session`` API are ``InvalidArgument``, not a raw ``AttributeError`` or ``TypeError``.

Decided here: an ``int`` is a right ``float`` (JSON reads it back as one), a ``bool`` is no
``int``; an enum member of ``str`` or ``int`` is its value (written and read back as it); a
subclass of ``str`` is refused (msgspec has no JSON form for it), as is a dict where a
struct is declared (``Usage``, ``ToolCall``, ``CompactionReceipt``, a retained message:
its JSON would read back, but code reading the entry in memory reads its fields). A dict
in a content list is taken as the part it is the JSON of, as it always was: content is
read for its parts (which skips other items), and the reader makes it a part.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

import contextree as ct
from contextree.entries import (
    ENTRY_TYPES,
    ActiveToolsChangeEntry,
    BranchSummaryEntry,
    CompactionEntry,
    CompactionReceipt,
    ContextEditEntry,
    CustomEntry,
    CustomMessageEntry,
    Entry,
    LabelEntry,
    LeafEntry,
    MessageEntry,
    ModelChangeEntry,
    RequestEntry,
    SessionHeader,
    SessionInfoEntry,
    ThinkingLevelChangeEntry,
    UnknownEntry,
    checked_line,
)
from contextree.errors import EntryNotFound, InvalidArgument, InvalidEntry
from contextree.storage._encoded import encode_entry

TS = "2026-01-01T00:00:00.000Z"
CANDIDATES: list[Any] = [5, "x", 1.5, True, ["x"], {"k": "v"}, b"x"]
"""Values tried in every field: each one the field's type does not admit is appended."""


def _admits(cls: type[Any], name: str, value: Any) -> bool:
    """Whether field ``name`` of ``cls`` may hold ``value``: msgspec takes it for the
    field's type, and it is no dict where a struct is declared (``value`` itself; a list
    of dicts is a list of parts as JSON)."""
    (field,) = [f for f in msgspec.structs.fields(cls) if f.name == name]
    if isinstance(value, dict) and _declares_struct(field.type):
        return False
    try:
        msgspec.convert(value, field.type)
    except msgspec.ValidationError:
        return False
    return True


def _declares_struct(annotation: Any) -> bool:
    info = msgspec.inspect.type_info(annotation)
    kinds = info.types if isinstance(info, msgspec.inspect.UnionType) else (info,)
    return any(isinstance(k, msgspec.inspect.StructType) for k in kinds)


def _wrong_values(cls: type[Any], name: str) -> list[Any]:
    return [v for v in CANDIDATES if not _admits(cls, name, v)]


# -- a right-typed sample of each entry type, with the fields a test sets ---------------

def _samples(target: str) -> dict[type[Any], dict[str, Any]]:
    """Keyword arguments (besides id, parent and timestamp) of a valid entry of each type;
    ``target`` is an entry of the session."""
    return {
        MessageEntry: {"message": ct.Message.user("hi")},
        ThinkingLevelChangeEntry: {"thinking_level": "high"},
        ModelChangeEntry: {"provider": "p", "model_id": "m"},
        ActiveToolsChangeEntry: {"active_tool_names": ["read"]},
        CompactionEntry: {"summary": "s", "first_kept_entry_id": None, "tokens_before": 10},
        BranchSummaryEntry: {"from_id": target, "summary": "s"},
        CustomEntry: {"custom_type": "app", "data": {"k": 1}},
        CustomMessageEntry: {"custom_type": "app", "content": "shown"},
        LabelEntry: {"target_id": target, "label": "mark"},
        SessionInfoEntry: {"name": "a name"},
        LeafEntry: {"target_id": target},
        ContextEditEntry: {"target_id": target, "content": None},
        RequestEntry: {"sha256": "ab" * 32},
    }


def test_every_entry_type_has_a_sample() -> None:
    """A new entry type must get a sample here, so that its fields are tried too."""
    assert set(_samples("x")) == set(ENTRY_TYPES.values())


# Fields checked by the tree's rules before their types (an id, a parent and a leaf move's
# target must be known ids): refused, by a message of the tree's own.
TREE_FIELDS = {(Entry, "id"), (Entry, "parent_id"), (LeafEntry, "target_id")}


def _entry_cases() -> Iterator[tuple[type[Any], str]]:
    for cls in ENTRY_TYPES.values():
        for f in msgspec.structs.fields(cls):
            yield cls, f.name


def _with_message(**fields: Any) -> Callable[[str], MessageEntry]:
    return lambda parent: MessageEntry(ct.entries.new_id(), parent, TS,
                                       message=ct.Message(role="user", content="hi", **fields))


def _nested_cases() -> Iterator[tuple[str, type[Any], str]]:
    """(the path a message names the field by, the struct, the field) of every field of a
    message and of the structs in it."""
    for f in msgspec.structs.fields(ct.Message):
        yield "message.", ct.Message, f.name
    for f in msgspec.structs.fields(ct.Usage):
        yield "message.usage.", ct.Usage, f.name
    for f in msgspec.structs.fields(ct.ToolCall):
        yield "message.tool_calls[0].", ct.ToolCall, f.name
    for part in (ct.TextPart, ct.ImagePart, ct.ThinkingPart):
        for f in msgspec.structs.fields(part):
            yield "message.content[0].", part, f.name


def _nested_entry(cls: type[Any], name: str, value: Any, parent: str) -> MessageEntry:
    """A message entry whose ``cls`` (the message, its usage, a tool call or a part) holds
    ``value`` in field ``name``, all else right."""
    right: dict[type[Any], Any] = {
        ct.Message: ct.Message(role="user", content="hi"),
        ct.Usage: ct.Usage(input=1, output=2),
        ct.ToolCall: ct.ToolCall(id="call_1", name="read"),
        ct.TextPart: ct.TextPart(text="t"),
        ct.ImagePart: ct.ImagePart(url="https://x/y.png"),
        ct.ThinkingPart: ct.ThinkingPart(thinking="hm"),
    }
    inner = msgspec.structs.replace(right[cls], **{name: value})
    if cls is ct.Message:
        message = inner
    elif cls is ct.Usage:
        message = ct.Message.assistant("hi", usage=inner)
    elif cls is ct.ToolCall:
        message = ct.Message.assistant("", tool_calls=[inner])
    else:
        message = ct.Message(role="assistant", content=[inner])
    return MessageEntry(ct.entries.new_id(), parent, ct.entries.now(), message=message)


def _reopens_with(path: Path, ids: list[str]) -> None:
    """The file opens again and holds exactly the entries ``ids``."""
    with ct.Session.open(path) as again:
        assert [e.id for e in again.entries()] == ids


@pytest.mark.parametrize(("at", "cls", "name"), list(_nested_cases()),
                         ids=lambda v: v if isinstance(v, str) else getattr(v, "__name__", v))
def test_a_wrong_type_in_a_message_is_refused_and_the_file_opens(
        tmp_path: Path, at: str, cls: type[Any], name: str) -> None:
    wrong = _wrong_values(cls, name)
    assert wrong, f"no wrong value tried for {cls.__name__}.{name}"
    path = tmp_path / "s.jsonl"
    s = ct.Session.create(path, durable=False)
    first = s.append_message(ct.Message.user("before"))
    for value in wrong:
        with pytest.raises(InvalidEntry) as caught:
            s.append(_nested_entry(cls, name, value, first))
        text = str(caught.value)
        assert f"`{at}{name}" in text and "must be" in text and " got " in text, (value, text)
        assert s.leaf_id == first
    s.close()
    _reopens_with(path, [first])


@pytest.mark.parametrize(("cls", "name"), list(_entry_cases()),
                         ids=lambda v: v if isinstance(v, str) else v.__name__)
def test_a_wrong_type_in_an_entry_is_refused_and_the_file_opens(
        tmp_path: Path, cls: type[Any], name: str) -> None:
    wrong = _wrong_values(cls, name)
    (field,) = [f for f in msgspec.structs.fields(cls) if f.name == name]
    if field.type is Any:
        assert not wrong  # any JSON: beyond the limits is test_checked_line's
        return
    assert wrong, f"no wrong value tried for {cls.__name__}.{name}"
    path = tmp_path / "s.jsonl"
    s = ct.Session.create(path, durable=False)
    first = s.append_message(ct.Message.user("before"))
    base = {"id": ct.entries.new_id(), "parent_id": first, "timestamp": TS,
            **_samples(first)[cls]}
    s.append(cls(**base))  # the sample itself is right
    kept = [first, base["id"]]
    by_tree = any(issubclass(cls, owner) and name == f for owner, f in TREE_FIELDS)
    for value in wrong:
        entry = cls(**{**base, "id": ct.entries.new_id(), name: value})
        with pytest.raises(InvalidEntry) as caught:
            s.append(entry)
        text = str(caught.value)
        if not by_tree:
            assert f"`{name}" in text and "must be" in text and " got " in text, (value, text)
    s.close()
    _reopens_with(path, kept)


# -- every write path -------------------------------------------------------------------

BAD = [
    ("name", _with_message(name=5), "`message.name` must be str or None, got int"),
    ("usage", _with_message(usage=ct.Usage(input="7")), "`message.usage.input` must be int, got str"),
    ("usage dict", _with_message(usage={"input": 7}), "`message.usage` must be Usage or None, got dict"),
    ("tool call dict", _with_message(tool_calls=[{"id": "c", "name": "t"}]),
     "`message.tool_calls[0]` must be ToolCall, got dict"),
    ("label", lambda p: LabelEntry(ct.entries.new_id(), p, TS, target_id=p, label=3),
     "`label` must be str or None, got int"),
    ("timestamp", lambda p: MessageEntry(ct.entries.new_id(), p, 1767225600,  # type: ignore[arg-type]
                                         message=ct.Message.user("hi")),
     "`timestamp` must be str, got int"),
    ("tokens_before", lambda p: CompactionEntry(ct.entries.new_id(), p, TS, summary="s",
                                                first_kept_entry_id=None, tokens_before="x"),
     "`tokens_before` must be int, got str"),
    ("custom_type", lambda p: CustomEntry(ct.entries.new_id(), p, TS, custom_type=5),
     "`custom_type` must be str, got int"),
    ("receipt dict", lambda p: CompactionEntry(ct.entries.new_id(), p, TS, summary="s",
                                               first_kept_entry_id=None, tokens_before=1,
                                               receipt={"kept": []}),
     "`receipt` must be CompactionReceipt or None, got dict"),
]


@pytest.mark.parametrize(("make", "said"), [(m, s) for _, m, s in BAD], ids=[n for n, _, _ in BAD])
@pytest.mark.parametrize("durable", [True, False])
def test_a_file_session_refuses_and_opens_again(tmp_path: Path, make: Callable[[str], Any],
                                                said: str, durable: bool) -> None:
    path = tmp_path / "s.jsonl"
    with ct.Session.create(path, durable=durable) as s:
        first = s.append_message(ct.Message.user("before"))
        size = path.stat().st_size
        with pytest.raises(InvalidEntry, match=f"cannot be stored: {_escaped(said)}"):
            s.append(make(first))
        assert path.stat().st_size == size  # nothing written
        later = s.append_message(ct.Message.user("after"))  # still usable
    _reopens_with(path, [first, later])


@pytest.mark.parametrize(("make", "said"), [(m, s) for _, m, s in BAD], ids=[n for n, _, _ in BAD])
def test_a_batch_refuses_and_keeps_the_rest(tmp_path: Path, make: Callable[[str], Any],
                                            said: str) -> None:
    path = tmp_path / "s.jsonl"
    with ct.Session.create(path) as s, s.batch():
        first = s.append_message(ct.Message.user("before"))
        with pytest.raises(InvalidEntry, match=_escaped(said)):
            s.append(make(first))
        later = s.append_message(ct.Message.user("after"))
    _reopens_with(path, [first, later])


@pytest.mark.parametrize(("make", "said"), [(m, s) for _, m, s in BAD], ids=[n for n, _, _ in BAD])
def test_a_session_in_memory_refuses(make: Callable[[str], Any], said: str) -> None:
    s = ct.Session.in_memory()
    first = s.append_message(ct.Message.user("before"))
    with pytest.raises(InvalidEntry, match=_escaped(said)):
        s.append(make(first))
    assert [e.id for e in s.entries()] == [first]


@pytest.mark.parametrize(("make", "said"), [(m, s) for _, m, s in BAD], ids=[n for n, _, _ in BAD])
def test_an_encoded_append_refuses(tmp_path: Path, make: Callable[[str], Any],
                                   said: str) -> None:
    """What bulk writers (imports) use: no line for the entry, and the entry itself is
    refused by ``append`` (as ``encode_entry`` tells them to do)."""
    entry = make("p")
    assert checked_line(entry) is None
    assert encode_entry(entry) is None


def test_the_session_api_refuses_wrong_types_in_what_it_builds(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    with ct.Session.create(path) as s:
        first = s.append_message(ct.Message.user("before"))
        tries: list[Callable[[], Any]] = [
            lambda: s.append_message(ct.Message(role="user", content="x", name=5)),
            lambda: s.append_message({"role": "user", "content": "x", "name": 5}),
            lambda: s.append_custom(5),
            lambda: s.set_name(5),
            lambda: s.append_model_change(1, "m"),
            lambda: s.append_thinking_level_change(2),
            lambda: s.append_compaction(summary="s", first_kept_entry_id=None,
                                        tokens_before="x"),
        ]
        for attempt in tries:
            with pytest.raises(InvalidEntry, match=r"must be .*, got"):
                attempt()
    _reopens_with(path, [first])


def test_a_header_of_wrong_types_is_no_session(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    with pytest.raises(InvalidArgument, match="`metadata` must be dict or None, got str"):
        ct.Session.create(path, metadata="x")  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument, match="cwd must be a path"):
        ct.Session.create(path, cwd=5)  # type: ignore[arg-type]
    assert not path.exists()
    with pytest.raises(InvalidArgument, match="`cwd` must be str or None, got int"):
        ct.Session.in_memory(cwd=5)  # type: ignore[arg-type]  # a fork would write it


def test_a_storage_created_with_entries_refuses(tmp_path: Path) -> None:
    header = SessionHeader(id="00000000-0000-4000-8000-000000000000", created_at=TS)
    good = MessageEntry("aaaa0000", None, TS, message=ct.Message.user("hi"))
    bad = LabelEntry("bbbb0000", "aaaa0000", TS, target_id="aaaa0000", label=3)  # type: ignore[arg-type]
    with pytest.raises(InvalidEntry, match="`label` must be str or None, got int"):
        ct.storage.JsonlStorage.create(tmp_path / "s.jsonl", header, [good, bad])
    assert not (tmp_path / "s.jsonl").exists()


# -- what is right stays right -----------------------------------------------------------

class Level(enum.IntEnum):
    ONE = 1


class Role(enum.StrEnum):
    USER = "user"


def test_right_typed_edge_values_append_and_read_back(tmp_path: Path) -> None:
    """Guards against refusing too much (these pass without the fix as well)."""
    path = tmp_path / "s.jsonl"
    unknown = ct.UnknownPart({"type": "audio", "data": "AAAA", "codec": {"x": [1]}})
    messages = [
        ct.Message(role="user", content=None),
        ct.Message(role="tool", content="r", tool_call_id=None, name=None, usage=None),
        ct.Message.assistant("a", usage=ct.Usage(input=1, cost=1)),  # an int cost
        ct.Message.assistant("a", usage=ct.Usage(input=Level.ONE, cost=0.5)),
        ct.Message(role=Role.USER, content="enum role"),
        ct.Message(role="user", content=[ct.TextPart(text="t"), unknown]),
        ct.Message(role="user", content="x").set_extra({"from_elsewhere": {"k": [1, 2]}}),
    ]
    with ct.Session.create(path) as s:
        ids = [s.append_message(m) for m in messages]
        ids.append(s._append(CompactionEntry, summary="s", first_kept_entry_id=None,
                             tokens_before=1, tokens_after=None, retained_tail=[],
                             receipt=CompactionReceipt(kept=[ids[0]])))
        ids.append(s._append(CustomEntry, custom_type="app", data=None))
        ids.append(s.append(UnknownEntry({"type": "from_the_future", "id": "f0f0f0f0",
                                          "parent_id": ids[-1], "timestamp": 5})))
    with ct.Session.open(path) as again:
        read = list(again.entries())
        assert [e.id for e in read] == ids
        parts = read[5].message.content  # type: ignore[union-attr]
        assert isinstance(parts, list) and parts[1] == unknown  # kept as it was
        assert read[2].message.usage.cost == 1.0  # type: ignore[union-attr]
        assert read[4].message.role == "user"  # type: ignore[union-attr]
        assert read[6].message.extra == {"from_elsewhere": {"k": [1, 2]}}  # type: ignore[union-attr]


def test_parts_given_as_dicts_append_as_parts(tmp_path: Path) -> None:
    """A guard too: callers build content from dicts (known and unknown part types)."""
    path = tmp_path / "s.jsonl"
    content = [{"type": "thinking", "thinking": "hm"}, {"type": "text", "text": "done"},
               {"type": "audio", "data": "AAAA"}]
    with ct.Session.create(path) as s:
        eid = s.append_message(ct.Message.assistant(content))  # type: ignore[arg-type]
        with pytest.raises(InvalidEntry, match=re.escape("`message.content[1].text` must be str")):
            s.append_message(ct.Message.assistant([content[0], {"type": "text", "text": 5}]))  # type: ignore[list-item]
    with ct.Session.open(path) as again:
        (entry,) = again.entries()
        assert entry.id == eid
        assert entry.message.content == [ct.ThinkingPart(thinking="hm"), ct.TextPart(text="done"),  # type: ignore[union-attr]
                                         ct.UnknownPart({"type": "audio", "data": "AAAA"})]


def test_a_subclass_of_str_is_refused(tmp_path: Path) -> None:
    class Name(str):
        pass

    with (ct.Session.create(tmp_path / "s.jsonl") as s,
          pytest.raises(InvalidEntry, match="no JSON form")):
        s.append_message(ct.Message(role="user", content="x", name=Name("n")))


def test_an_unknown_part_does_not_hide_a_wrong_field(tmp_path: Path) -> None:
    unknown = ct.UnknownPart({"type": "audio"})
    with ct.Session.create(tmp_path / "s.jsonl") as s:
        with pytest.raises(InvalidEntry, match=r"`message.content\[1\].text` must be str"):
            s.append_message(ct.Message(role="user", content=[unknown, ct.TextPart(text=5)]))
        with pytest.raises(InvalidEntry, match=r"`message\.name` must be str or None"):
            s.append_message(ct.Message(role="user", content=[unknown], name=5))


def test_an_unknown_field_in_place_of_a_field_is_checked(tmp_path: Path) -> None:
    """An unknown field named as a field left out (its default) is written in its place."""
    path = tmp_path / "s.jsonl"
    with ct.Session.create(path) as s:
        first = s.append_message(ct.Message.user("before"))
        with pytest.raises(InvalidEntry, match="`name` must be str or None, got int"):
            s.append_message(ct.Message.user("x").set_extra({"name": 5}))
    _reopens_with(path, [first])


@pytest.mark.parametrize("data", [{"type": 5}, {"type": "label", "target_id": "T", "label": "l"},
                                  {"type": "session", "created_at": TS}])
def test_an_unknown_entry_must_be_of_an_unknown_type(tmp_path: Path, data: dict[str, Any]) -> None:
    path = tmp_path / "s.jsonl"
    with ct.Session.create(path) as s:
        first = s.append_message(ct.Message.user("before"))
        line = {**data, "id": "u0u0u0u0", "parent_id": first, "timestamp": TS}
        if "target_id" in line:
            line["target_id"] = first
        with pytest.raises(InvalidEntry, match=r"`type` must be str|cannot have the type"):
            s.append(UnknownEntry(line))
    _reopens_with(path, [first])


# -- references ----------------------------------------------------------------------------

REFS: list[tuple[str, Callable[[ct.Session, Any], Any], bool]] = [
    # (method, call, whether None is a valid reference there)
    ("resolve", lambda s, v: s.resolve(v), False),
    ("move_to", lambda s, v: s.move_to(v), True),
    ("branch", lambda s, v: s.branch(v), True),
    ("children", lambda s, v: s.children(v), True),
    ("build_context", lambda s, v: s.build_context(v), True),
    ("fork", lambda s, v: s.fork(s.location + ".fork.jsonl", at=v), True),
    ("append_branch_summary", lambda s, v: s.append_branch_summary(v, "s"), False),
    ("append_context_edit", lambda s, v: s.append_context_edit(v), False),
    ("set_label", lambda s, v: s.set_label(v, "mark"), False),
    ("get_entry", lambda s, v: s.get_entry(v), True),
    ("label_of", lambda s, v: s.label_of(v), True),
    ("append_compaction first_kept_entry_id",
     lambda s, v: s.append_compaction(summary="s", first_kept_entry_id=v, tokens_before=1), True),
    ("append_compaction pinned",
     lambda s, v: s.append_compaction(summary="s", first_kept_entry_id=None, tokens_before=1,
                                      pinned=[v]), False),
]


WRONG_REFS = [(None, "None"), (5, "int"), (b"ab", "bytes"), (["ab"], "list"), ({"id": "ab"}, "dict")]


@pytest.mark.parametrize(("call", "value"), [
    pytest.param(call, value, id=f"{name}-{kind}")
    for name, call, none_ok in REFS for value, kind in WRONG_REFS
    if not (value is None and none_ok)  # None names no entry there on purpose: the leaf...
])
def test_a_wrong_typed_reference_is_an_invalid_argument(
        tmp_path: Path, call: Callable[[ct.Session, Any], Any], value: Any) -> None:
    path = tmp_path / "s.jsonl"
    with ct.Session.create(path) as s:
        first = s.append_message(ct.Message.user("before"))
        with pytest.raises(InvalidArgument) as caught:
            call(s, value)
        text = str(caught.value)
        assert type(value).__name__ in text and "str" in text, text
        assert s.leaf_id == first
    _reopens_with(path, [first])


@pytest.mark.parametrize("call", [c for _, c, _ in REFS[:9]], ids=[n for n, _, _ in REFS[:9]])
def test_a_string_that_names_nothing_is_entry_not_found(
        tmp_path: Path, call: Callable[[ct.Session, Any], Any]) -> None:
    with ct.Session.create(tmp_path / "s.jsonl") as s:
        s.append_message(ct.Message.user("before"))
        with pytest.raises(EntryNotFound, match="no entry 'nothing-here'"):
            call(s, "nothing-here")


def test_a_wrong_typed_label_is_an_invalid_argument(tmp_path: Path) -> None:
    with ct.Session.create(tmp_path / "s.jsonl") as s:
        first = s.append_message(ct.Message.user("before"))
        for value in (5, ["l"], b"l"):
            with pytest.raises(InvalidArgument, match="a label must be a str"):
                s.set_label(first, value)  # type: ignore[arg-type]
        assert s.get_entry(None) is None  # a root's parent: no entry, no error


def _escaped(text: str) -> str:
    return re.escape(text)
