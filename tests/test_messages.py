"""Messages: constructors, both content shapes, and exact JSON round-trips (unknowns kept)."""

from __future__ import annotations

import orjson
import pytest

import contextree as ct


def roundtrip(msg: ct.Message) -> ct.Message:
    """Through JSON bytes and back, as a session file does."""
    return ct.Message.from_dict(orjson.loads(orjson.dumps(msg.to_dict())))


def test_constructors_set_role_and_fields() -> None:
    assert ct.Message.system("be brief").role == "system"
    u = ct.Message.user("hello")
    assert (u.role, u.content, u.text) == ("user", "hello", "hello")
    a = ct.Message.assistant(
        "on it",
        tool_calls=[ct.ToolCall(id="c1", name="read", arguments={"path": "a.py"})],
        model="m1",
        provider="p1",
        stop_reason="tool_use",
    )
    assert a.role == "assistant" and a.tool_calls is not None
    assert a.tool_calls[0].arguments == {"path": "a.py"}
    t = ct.Message.tool("file body", tool_call_id="c1", name="read", is_error=True)
    assert (t.role, t.tool_call_id, t.name, t.is_error) == ("tool", "c1", "read", True)


def test_assistant_without_tool_calls_writes_no_tool_calls_field() -> None:
    d = ct.Message.assistant("done", tool_calls=[]).to_dict()
    assert "tool_calls" not in d
    assert d == {"role": "assistant", "content": "done"}


def test_string_content_round_trips() -> None:
    m = ct.Message.user('quotes " and \\ back\\slash, newline\n, tab\t, unicode é → 🎉')
    assert roundtrip(m) == m
    assert roundtrip(m).to_dict() == m.to_dict()


def test_typed_parts_round_trip_with_thinking_signature() -> None:
    m = ct.Message.assistant(
        [
            ct.ThinkingPart(thinking="let me think", signature="sig-abc=="),
            ct.ThinkingPart(thinking="", signature="opaque", redacted=True),
            ct.TextPart(text="answer"),
            ct.ImagePart(data="aGVsbG8=", mime_type="image/png"),
            ct.ImagePart(url="https://example.com/x.png"),
        ]
    )
    d = m.to_dict()
    assert [p["type"] for p in d["content"]] == ["thinking", "thinking", "text", "image", "image"]
    assert d["content"][0] == {"type": "thinking", "thinking": "let me think",
                               "signature": "sig-abc=="}
    back = roundtrip(m)
    assert back == m
    assert back.to_dict() == d
    assert back.text == "answer"
    assert [p.signature for p in back.thinking] == ["sig-abc==", "opaque"]


def test_list_content_from_seed_shape_is_accepted() -> None:
    d = {"role": "user", "content": [{"type": "text", "text": "Hello"}]}
    m = ct.Message.from_dict(d)
    assert m.content == [ct.TextPart(text="Hello")]
    assert m.to_dict() == d


def test_tool_call_arguments_keep_string_keys_and_nesting() -> None:
    args = {
        "1": "numeric-looking key",
        "": "empty key",
        "true": None,
        "nested": {"2": [1, 2.5, {"3": {"deep": [True, False, None]}}], "x y": "z"},
        "list": [[], {}, ""],
    }
    m = ct.Message.assistant("", tool_calls=[ct.ToolCall(id="c1", name="edit", arguments=args)])
    back = roundtrip(m)
    assert back.tool_calls is not None
    assert back.tool_calls[0].arguments == args
    keys = list(back.tool_calls[0].arguments)
    assert all(isinstance(k, str) for k in keys)
    assert keys == ["1", "", "true", "nested", "list"]
    assert orjson.dumps(back.to_dict()) == orjson.dumps(m.to_dict())


def test_usage_writes_all_six_fields_with_cost_as_number_or_null() -> None:
    u = ct.Usage(input=10, output=5, cache_read=3, cache_write=2, total=20, cost=0.0125)
    m = ct.Message.assistant("x", usage=u)
    d = m.to_dict()
    assert d["usage"] == {"input": 10, "output": 5, "cache_read": 3, "cache_write": 2,
                          "total": 20, "cost": 0.0125}
    assert ct.Message.assistant("x", usage=ct.Usage()).to_dict()["usage"] == {
        "input": 0, "output": 0, "cache_read": 0, "cache_write": 0, "total": 0, "cost": None}
    assert roundtrip(m).usage == u


def test_usage_addition_sums_every_field() -> None:
    a = ct.Usage(input=1, output=2, cache_read=3, cache_write=4, total=10, cost=0.5)
    b = ct.Usage(input=10, output=20, cache_read=30, cache_write=40, total=100, cost=0.25)
    assert a + b == ct.Usage(input=11, output=22, cache_read=33, cache_write=44, total=110,
                             cost=0.75)


UNKNOWN_EVERYWHERE = {
    "role": "assistant",
    "content": [
        {"type": "text", "text": "hi", "x_part": {"k": [1, 2]}},
        {"type": "thinking", "thinking": "t", "signature": "s", "x_sig_meta": "v"},
        {"type": "audio", "data": "AAAA", "format": "wav"},  # a part type nobody knows yet
    ],
    "tool_calls": [
        {"id": "c1", "name": "shell", "arguments": {"cmd": "ls", "2": {"3": 4}},
         "x_call": True},
    ],
    "usage": {"input": 1, "output": 2, "cache_read": 0, "cache_write": 0, "total": 3,
              "cost": 0.5, "x_reasoning_tokens": 7},
    "model": "m",
    "x_message": {"nested": ["a", None]},
}


def test_unknown_fields_at_every_level_survive_round_trip() -> None:
    m = ct.Message.from_dict(UNKNOWN_EVERYWHERE)
    assert m.extra == {"x_message": {"nested": ["a", None]}}
    assert m.tool_calls is not None and m.tool_calls[0].extra == {"x_call": True}
    assert m.usage is not None and m.usage.extra == {"x_reasoning_tokens": 7}
    assert isinstance(m.content, list)
    assert m.content[0].extra == {"x_part": {"k": [1, 2]}}  # type: ignore[union-attr]
    assert isinstance(m.content[2], ct.UnknownPart) and m.content[2].type == "audio"
    assert m.to_dict() == UNKNOWN_EVERYWHERE
    assert roundtrip(m).to_dict() == UNKNOWN_EVERYWHERE


def test_with_content_keeps_unknown_fields() -> None:
    m = ct.Message.from_dict({"role": "tool", "content": "long", "tool_call_id": "c",
                              "x_keep": 1})
    short = m.marked(ct.markers.Kind.CLEARED_TOOL_RESULT, content="short")
    assert short.to_dict() == {"role": "tool", "content": "short", "tool_call_id": "c",
                               "meta": {"kind": "cleared_tool_result"}, "x_keep": 1}


def test_replace_keeps_unknown_fields() -> None:
    m = ct.Message.from_dict({"role": "user", "content": "hi", "x_vendor": {"a": 1}})
    copy = m.replace(content="bye")
    assert copy.extra == {"x_vendor": {"a": 1}}
    assert copy.to_dict() == {"role": "user", "content": "bye", "x_vendor": {"a": 1}}
    call = ct.ToolCall.from_dict({"id": "c", "name": "n", "x": 2}) if hasattr(
        ct.ToolCall, "from_dict") else ct._messages.convert({"id": "c", "name": "n", "x": 2},
                                                           ct.ToolCall)
    assert call.replace(name="m").extra == {"x": 2}


@pytest.mark.parametrize(
    "bad",
    [
        {"content": "no role"},
        {"role": "user"},  # content is required (it may be null)
        {"role": 3, "content": "x"},
        {"role": "user", "content": 5},
        {"role": "assistant", "content": "", "tool_calls": {"id": "c"}},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "c"}]},
        {"role": "user", "content": ["not an object"]},
    ],
)
def test_invalid_message_dicts_are_rejected(bad: dict[str, object]) -> None:
    import msgspec

    with pytest.raises(msgspec.ValidationError):
        ct.Message.from_dict(bad)


def test_null_content_round_trips() -> None:
    d = {"role": "assistant", "content": None, "tool_calls": [{"id": "c", "name": "n"}]}
    m = ct.Message.from_dict(d)
    assert m.text == ""
    assert m.tool_calls is not None and m.tool_calls[0].arguments == {}
    assert m.to_dict() == d


def test_explicit_default_values_are_normalized_away() -> None:
    # Documented behaviour: fields equal to their default are not written, so an explicit
    # default in the input does not come back; the message itself is unchanged.
    d = {"role": "tool", "content": "x", "tool_call_id": "c", "is_error": False,
         "tool_calls": [{"id": "c2", "name": "n", "arguments": {}}]}
    m = ct.Message.from_dict(d)
    assert m.to_dict() == {"role": "tool", "content": "x", "tool_call_id": "c",
                           "tool_calls": [{"id": "c2", "name": "n"}]}
    assert ct.Message.from_dict(m.to_dict()) == m
