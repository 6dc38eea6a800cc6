"""Entries: every type round-trips through a session file; unknown fields and types survive."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

import contextree as ct
from contextree.entries import ENTRY_TYPES, encode_line
from contextree.errors import InvalidArgument

TS = "2026-01-02T03:04:05.678Z"


def file_lines(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines(keepends=True)


def build_every_entry_type(s: ct.Session) -> dict[str, str]:
    """Append one entry of each of the 12 types; return type -> id."""
    ids: dict[str, str] = {}
    ids["message"] = s.append_message(ct.Message.user("hello"))
    a = s.append_message(
        ct.Message.assistant(
            [ct.ThinkingPart(thinking="hmm", signature="sig"), ct.TextPart(text="reading")],
            tool_calls=[ct.ToolCall(id="c1", name="read", arguments={"path": "a.py"})],
            usage=ct.Usage(input=100, output=20, cache_read=5, cache_write=1, total=126,
                           cost=0.01),
            model="claude-x",
            provider="anthropic",
        )
    )
    tool = s.append_message(ct.Message.tool("print('x')\n", tool_call_id="c1", name="read"))
    ids["context_edit"] = s.append_context_edit(
        tool, [ct.TextPart(text="[cleared]"), ct.ImagePart(data="iVBO", mime_type="image/png")])
    s.append_context_edit(ids["message"])
    ids["thinking_level_change"] = s.append_thinking_level_change("medium")
    ids["model_change"] = s.append_model_change("openai", "gpt-4")
    ids["active_tools_change"] = s.append_active_tools_change(["bash", "read"])
    request = s.append_request("You are terse.", [{"name": "read", "parameters": {
        "type": "object", "properties": {"path": {"type": "string"}}}}], {"temperature": 0.5})
    assert request is not None
    ids["request"] = request
    ids["compaction"] = s.append_compaction(
        summary="summary of earlier", first_kept_entry_id=a, tokens_before=100_000,
        details={"k": [1, {"2": None}]},
        usage=ct.Usage(input=1, output=2, total=3, cost=0.5),
        retained_tail=[ct.Message.user("kept")],
        from_hook=True,
        tokens_after=5000,
    )
    ids["custom"] = s.append_custom("ext.state", {"counter": 3, "nested": {"a": [1]}})
    ids["custom_message"] = s.append_custom_message("ext.note", "note text", {"d": 1},
                                                    display=False)
    ids["label"] = s.set_label(ids["message"], "start")
    ids["session_info"] = s.set_name("my session")
    ids["branch_summary"] = s.move_to(ids["message"], {"summary": "left a branch",
                                                       "details": {"why": "x"},
                                                       "usage": {"input": 3, "output": 4},
                                                       "from_hook": True})  # type: ignore[assignment]
    s.move_to(ids["compaction"])  # a leaf entry
    return ids


def test_every_entry_type_round_trips_through_the_file(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    with ct.Session.create(path, cwd="/work") as s:
        build_every_entry_type(s)
        before = {e.id: e for e in s.storage.entries()}
        types = {e.type for e in before.values()}
    assert types == set(ENTRY_TYPES), "the fixture must cover all 13 entry types"
    assert len(ENTRY_TYPES) == 13
    lines = file_lines(path)
    with ct.Session.open(path, readonly=True) as again:
        after = list(again.storage.entries())
        assert [e.id for e in after] == list(before)
        for entry, line in zip(after, lines[1:], strict=True):
            assert entry == before[entry.id]
            assert type(entry) is type(before[entry.id])
            assert encode_line(entry) == line
            assert encode_line(before[entry.id]) == line
        assert encode_line(again.header) == lines[0]


def test_header_has_version_id_created_at_cwd(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    with ct.Session.create(path, cwd="/w", session_id="sid-1", metadata={"k": "v"}) as s:
        assert s.id == "sid-1"
    head = orjson.loads(file_lines(path)[0])
    assert head["type"] == "session" and head["version"] == 1
    assert head["id"] == "sid-1" and head["cwd"] == "/w" and head["metadata"] == {"k": "v"}
    assert head["created_at"].endswith("Z")
    assert "parent_session" in head


def test_entry_lines_have_common_fields_in_snake_case(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    with ct.Session.create(path, cwd="/") as s:
        ids = build_every_entry_type(s)
    for line in file_lines(path)[1:]:
        d = orjson.loads(line)
        assert {"type", "id", "parent_id", "timestamp"} <= set(d)
        assert all(k == k.lower() for k in d)
    comp = next(orjson.loads(x) for x in file_lines(path) if b'"compaction"' in x)
    assert comp["first_kept_entry_id"] and comp["tokens_before"] == 100_000
    assert comp["retained_tail"] == [{"role": "user", "content": "kept"}]
    assert comp["from_hook"] is True
    bs = next(orjson.loads(x) for x in file_lines(path) if b'"branch_summary"' in x)
    assert bs["from_id"] == ids["message"] == bs["parent_id"]
    assert bs["usage"] == {"input": 3, "output": 4, "cache_read": 0, "cache_write": 0,
                           "total": 0, "cost": None}


# -- unknown fields and types, byte for byte -------------------------------------------------

HEADER = {"type": "session", "id": "sid", "created_at": TS, "version": 1, "cwd": "/w",
          "parent_session": None, "metadata": None, "x_header": {"a": 1}}

UNKNOWN_LINES: list[dict[str, object]] = [
    {   # unknown at message, part, tool call, usage and entry level
        "type": "message", "id": "e1", "parent_id": None, "timestamp": TS,
        "message": {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "hi \"q\" é 🎉\n", "x_part": [1, 2]},
                {"type": "thinking", "thinking": "t", "signature": "sig", "x_t": None},
                {"type": "image", "url": "https://x/y.png", "x_img": 1},
                {"type": "video", "src": "v.mp4"},
            ],
            "tool_calls": [{"id": "c1", "name": "edit",
                            "arguments": {"1": {"2": [3, {"4": "5"}]}, "path": "a"},
                            "x_call": "yes"}],
            "usage": {"input": 1, "output": 2, "cache_read": 3, "cache_write": 4, "total": 10,
                      "cost": 0.25, "x_usage": 9},
            "model": "m",
            "x_msg": {"deep": [True]},
        },
        "x_entry": "entry-level",
    },
    {
        "type": "message", "id": "e2", "parent_id": "e1", "timestamp": TS,
        "message": {"role": "tool", "content": "result", "tool_call_id": "c1"},
    },
    {   # an entry type from a future version
        "type": "bookmark_v9", "id": "e3", "parent_id": "e2", "timestamp": TS,
        "payload": {"z": 1, "a": [None, "é"]},
    },
    {
        "type": "compaction", "id": "e4", "parent_id": "e3", "timestamp": TS,
        "summary": "s", "first_kept_entry_id": "e2", "tokens_before": 10,
        "retained_tail": [{"role": "user", "content": "r", "x_tail": 1}],
        "usage": {"input": 1, "output": 1, "cache_read": 0, "cache_write": 0, "total": 2,
                  "cost": 0.5, "x_cu": 1},
        "x_comp": [],
    },
    {
        "type": "branch_summary", "id": "e5", "parent_id": "e4", "timestamp": TS,
        "from_id": "e4", "summary": "bs", "x_bs": {"k": "v"},
    },
]


def write_file(path: Path, header: dict[str, object], lines: list[dict[str, object]]) -> None:
    path.write_bytes(b"".join(orjson.dumps(d) + b"\n" for d in [header, *lines]))


def test_unknown_fields_and_types_are_kept_byte_for_byte(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    write_file(path, HEADER, UNKNOWN_LINES)
    original = file_lines(path)
    with ct.Session.open(path) as s:
        e1 = s.get_entry("e1")
        assert isinstance(e1, ct.entries.MessageEntry) and e1.extra == {"x_entry": "entry-level"}
        e3 = s.get_entry("e3")
        assert isinstance(e3, ct.entries.UnknownEntry) and e3.type == "bookmark_v9"
        assert s.header.extra == {"x_header": {"a": 1}}
        s.append_message(ct.Message.user("after"))  # the file is appended to, never rewritten
    now_lines = file_lines(path)
    assert now_lines[: len(original)] == original
    with ct.Session.open(path, readonly=True) as s:
        for line, d in zip(original[1:], UNKNOWN_LINES, strict=True):
            entry = s.get_entry(str(d["id"]))
            assert entry is not None
            assert encode_line(entry) == line
        assert encode_line(s.header) == original[0]
        # fork re-encodes every entry of the path: the copies are the same bytes
        forked = s.fork(tmp_path / "f.jsonl", at="e5")
        forked.close()
    assert file_lines(tmp_path / "f.jsonl")[1:] == original[1:]


def test_unknown_fields_in_any_key_order_survive_semantically(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    shuffled = {"x_first": 1, "timestamp": TS, "message": {"x_m": [], "content": "c",
                "role": "user"}, "parent_id": None, "id": "e1", "type": "message"}
    write_file(path, HEADER, [shuffled])
    with ct.Session.open(path) as s:
        s.fork(tmp_path / "f.jsonl", at="e1").close()
    copied = orjson.loads(file_lines(tmp_path / "f.jsonl")[1])
    assert copied == shuffled


def test_unknown_entry_type_takes_part_in_the_tree(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    write_file(path, HEADER, UNKNOWN_LINES[:3])
    with ct.Session.open(path) as s:
        assert s.leaf_id == "e3"
        child = s.append_message(ct.Message.user("next"))
        assert s.get_entry(child).parent_id == "e3"  # type: ignore[union-attr]
        assert [e.id for e in s.branch()] == ["e1", "e2", "e3", child]
        # unknown entries produce no messages
        roles = [m.role for m in s.build_context().messages]
        assert roles == ["assistant", "tool", "user"]


@pytest.mark.parametrize(
    "line, code",
    [
        ({"type": "bookmark_v9", "parent_id": None, "timestamp": TS}, "invalid_entry"),
        ({"type": "bookmark_v9", "id": "u", "parent_id": 5, "timestamp": TS}, "invalid_entry"),
        ({"id": "u", "parent_id": None, "timestamp": TS}, "invalid_entry"),
        ({"type": "label", "id": "u", "parent_id": None, "timestamp": TS}, "invalid_entry"),
        ({"type": "model_change", "id": "u", "parent_id": None, "timestamp": TS,
          "provider": 1, "model_id": "m"}, "invalid_entry"),
    ],
)
def test_malformed_entries_in_the_middle_raise_invalid_entry(
    tmp_path: Path, line: dict[str, object], code: str
) -> None:
    path = tmp_path / "s.jsonl"
    ok = {"type": "session_info", "id": "ok", "parent_id": None, "timestamp": TS, "name": "n"}
    write_file(path, HEADER, [line, ok])
    with pytest.raises(ct.SessionError) as info:
        ct.Session.open(path, readonly=True)
    assert info.value.code == code
    assert info.value.line == 2
    assert f"{path}:2:" in str(info.value)


def test_a_context_edit_hides_or_replaces_its_target_on_its_own_branch(tmp_path: Path) -> None:
    with ct.Session.create(tmp_path / "s.jsonl") as s:
        ask = s.append_message(ct.Message.user("list the files"))
        s.append_message(ct.Message.assistant("", tool_calls=[
            ct.ToolCall(id="c1", name="bash", arguments={"command": "ls"})]))
        out = s.append_message(ct.Message.tool("a.txt\n" * 100, tool_call_id="c1"))
        fork = s.append_message(ct.Message.assistant("one file"))
        s.append_context_edit(out, "[long listing cleared]")
        wrong = s.append_message(ct.Message.assistant("a failed attempt", stop_reason="error"))
        s.append_context_edit(wrong)
        texts = [m.text for m in s.build_context().messages]
        assert texts == ["list the files", "", "[long listing cleared]", "one file"]
        # the history is unchanged, and a sibling branch sees the original
        assert s.get_entry(out).message.text == "a.txt\n" * 100  # type: ignore[union-attr]
        s.move_to(fork)
        s.append_message(ct.Message.user("and then?"))
        assert [m.text for m in s.build_context().messages][2] == "a.txt\n" * 100
        with pytest.raises(InvalidArgument, match="not on the current path"):
            s.append_context_edit(wrong)
        assert s.get_entry(ask) is not None


def test_the_latest_context_edit_of_a_target_wins(tmp_path: Path) -> None:
    with ct.Session.create(tmp_path / "s.jsonl") as s:
        ask = s.append_message(ct.Message.user("first"))
        s.append_context_edit(ask)
        s.append_context_edit(ask, "second")
        assert [m.text for m in s.build_context().messages] == ["second"]
        s.append_context_edit(ask)
        assert s.build_context().messages == []
