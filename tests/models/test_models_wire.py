"""Round trips through the pure wire conversions (OpenAI Chat, OpenAI Responses, Anthropic).

Property tests generate conversations in each format's canonical form (what survives exactly);
example tests pin down each documented normalization.
"""

from __future__ import annotations

import ast
import base64
import inspect
import json
import subprocess
import sys
import textwrap
from collections.abc import Callable
from types import ModuleType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextree import (
    ImagePart,
    Message,
    TextPart,
    ThinkingPart,
    ToolCall,
    UnknownPart,
    Usage,
)
from contextree.models._wire_anthropic import (
    assistant_from_anthropic,
    from_anthropic,
    to_anthropic,
    usage_from_anthropic,
)
from contextree.models._wire_common import (
    RAW_ARGUMENTS_KEY,
    arguments_from_json,
    arguments_to_json,
    parse_data_url,
)
from contextree.models._wire_openai import (
    from_openai_chat,
    from_openai_responses,
    to_openai_chat,
    to_openai_responses,
    tools_to_openai_chat,
    tools_to_openai_responses,
    usage_from_openai_chat,
)

# -- strategies ------------------------------------------------------------------------------

text = st.text(max_size=20)
nonempty = st.text(min_size=1, max_size=20)
b64 = st.binary(min_size=1, max_size=12).map(lambda b: base64.b64encode(b).decode())
image_data = st.builds(
    ImagePart, data=b64, mime_type=st.sampled_from(["image/png", "image/jpeg", "image/webp"])
)
image_url = st.builds(
    ImagePart, url=st.from_regex(r"https://img\.example/[a-z]{1,8}\.png", fullmatch=True)
)
images = image_data | image_url
json_scalar = st.none() | st.booleans() | st.integers(-1000, 1000) | text
json_value = st.recursive(
    json_scalar,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text, inner, max_size=3),
    max_leaves=6,
)
arguments = st.dictionaries(st.from_regex(r"[a-z]{1,6}", fullmatch=True), json_value, max_size=3)


@st.composite
def conversation(
    draw: st.DrawFn,
    *,
    user_content: st.SearchStrategy[Any],
    assistant_content: Callable[[bool], st.SearchStrategy[Any]],
    tool_content: st.SearchStrategy[Any],
    system: st.SearchStrategy[Any] | None,
    errors: bool = False,
) -> list[Message]:
    """system?, then turns of user -> assistant [-> tool results -> assistant]*."""
    msgs: list[Message] = []
    if system is not None and draw(st.booleans()):
        msgs.append(Message(role="system", content=draw(system)))
    counter = 0
    for _ in range(draw(st.integers(1, 3))):
        msgs.append(Message(role="user", content=draw(user_content)))
        for _ in range(draw(st.integers(0, 2))):
            calls = []
            for _ in range(draw(st.integers(1, 2))):
                counter += 1
                calls.append(
                    ToolCall(
                        id=f"call_{counter}",
                        name=draw(st.sampled_from(["ls", "cat"])),
                        arguments=draw(arguments),
                    )
                )
            msgs.append(
                Message(role="assistant", content=draw(assistant_content(True)), tool_calls=calls)
            )
            for call in calls:
                is_error = draw(st.booleans()) if errors else False
                msgs.append(
                    Message(
                        role="tool",
                        content=draw(tool_content),
                        tool_call_id=call.id,
                        name=call.name,
                        is_error=is_error,
                    )
                )
        if draw(st.booleans()):
            msgs.append(Message(role="assistant", content=draw(assistant_content(False))))
    return msgs


# OpenAI Chat: thinking only as one unsigned part, first.
chat_parts = st.lists(
    st.builds(TextPart, text=text)
    | images
    | st.just(
        UnknownPart({"type": "input_audio", "input_audio": {"data": "AAA=", "format": "wav"}})
    ),
    max_size=3,
)


def chat_assistant(with_calls: bool) -> st.SearchStrategy[Any]:
    texts = st.lists(st.builds(TextPart, text=text), max_size=2)
    thought = st.builds(ThinkingPart, thinking=nonempty)
    with_thinking = st.tuples(thought, texts).map(lambda t: [t[0], *t[1]])
    return st.none() | text | texts | with_thinking


chat_conversations = conversation(
    user_content=text | chat_parts,
    assistant_content=chat_assistant,
    tool_content=text | st.lists(st.builds(TextPart, text=text), max_size=2),
    system=text | st.lists(st.builds(TextPart, text=text), max_size=2),
)


# OpenAI Responses: no None content; assistant lists non-empty and not text-only-then-merge.
def responses_assistant(with_calls: bool) -> st.SearchStrategy[Any]:
    part = st.builds(TextPart, text=text) | st.builds(
        ThinkingPart, thinking=text, signature=st.none() | nonempty
    )
    return text | st.lists(part, min_size=1, max_size=3)


responses_conversations = conversation(
    user_content=text | st.lists(st.builds(TextPart, text=text) | images, max_size=3),
    assistant_content=responses_assistant,
    tool_content=text | st.lists(st.builds(TextPart, text=text) | images, max_size=2),
    system=text,
)


# Anthropic: non-empty text, signed thinking, no assistant images, one leading system message.
def anthropic_assistant(with_calls: bool) -> st.SearchStrategy[Any]:
    thought = st.builds(ThinkingPart, thinking=text, signature=nonempty) | st.builds(
        ThinkingPart, signature=nonempty, redacted=st.just(True)
    )
    parts = st.lists(st.builds(TextPart, text=nonempty) | thought, min_size=1, max_size=3).filter(
        lambda ps: len(ps) > 1 or not isinstance(ps[0], TextPart)
    )
    return (text if with_calls else nonempty) | parts


anthropic_conversations = conversation(
    user_content=nonempty
    | st.lists(st.builds(TextPart, text=nonempty) | images, min_size=1, max_size=3),
    assistant_content=anthropic_assistant,
    tool_content=text | st.lists(st.builds(TextPart, text=nonempty) | images, max_size=2),
    system=nonempty,
    errors=True,
)


def _decorated(msgs: list[Message]) -> list[Message]:
    """The same messages with contextree-only fields set, which must never reach the wire."""
    return [
        m.replace(
            meta={"kind": "x"}, usage=Usage(input=1), model="m", provider="p", stop_reason="s"
        )
        for m in msgs
    ]


def _no_internal_fields(wire: Any) -> None:
    """No object anywhere in the wire data has a contextree-only key (text may say anything)."""
    stack = [wire]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            assert not {"meta", "usage", "provider", "stop_reason"} & item.keys(), item
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)


# -- property round trips ----------------------------------------------------------------------


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(chat_conversations)
def test_openai_chat_round_trip(msgs: list[Message]) -> None:
    wire = to_openai_chat(_decorated(msgs))
    _no_internal_fields(wire)
    json.dumps(wire)
    assert from_openai_chat(json.loads(json.dumps(wire))) == msgs


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(responses_conversations)
def test_openai_responses_round_trip(msgs: list[Message]) -> None:
    wire = to_openai_responses(_decorated(msgs))
    _no_internal_fields(wire)
    assert from_openai_responses(json.loads(json.dumps(wire))) == msgs


@settings(max_examples=200, deadline=None)
@given(anthropic_conversations)
def test_anthropic_round_trip(msgs: list[Message]) -> None:
    system, wire = to_anthropic(_decorated(msgs))
    _no_internal_fields(wire)
    assert from_anthropic(system, json.loads(json.dumps(wire))) == msgs


# -- shared helpers ----------------------------------------------------------------------------


def test_arguments_json() -> None:
    assert arguments_from_json('{"a": 1}') == {"a": 1}
    assert arguments_from_json("") == {}
    assert arguments_from_json(None) == {}
    assert arguments_from_json('{"a": ') == {RAW_ARGUMENTS_KEY: '{"a": '}
    assert arguments_from_json("[1, 2]") == {RAW_ARGUMENTS_KEY: "[1, 2]"}
    assert arguments_to_json({RAW_ARGUMENTS_KEY: '{"a": '}) == '{"a": '
    assert arguments_to_json({RAW_ARGUMENTS_KEY: "x", "b": 1}) == '{"_raw": "x", "b": 1}'
    assert arguments_to_json({"city": "Zürich"}) == '{"city": "Zürich"}'


def test_parse_data_url() -> None:
    assert parse_data_url("data:image/png;base64,AAAA") == ("image/png", "AAAA")
    assert parse_data_url("data:image/svg+xml,<svg/>") is None
    assert parse_data_url("https://x/y.png") is None


def test_tools() -> None:
    tools = [
        {"name": "ls", "description": "List.", "parameters": {"type": "object"}},
        {"name": "now"},
    ]
    assert tools_to_openai_chat(tools) == [
        {
            "type": "function",
            "function": {"name": "ls", "parameters": {"type": "object"}, "description": "List."},
        },
        {
            "type": "function",
            "function": {"name": "now", "parameters": {"type": "object", "properties": {}}},
        },
    ]
    assert tools_to_openai_responses(tools)[0] == {
        "type": "function",
        "name": "ls",
        "parameters": {"type": "object"},
        "description": "List.",
    }
    with pytest.raises(ValueError, match="name"):
        tools_to_openai_chat([{"description": "nameless"}])


def test_usage() -> None:
    assert usage_from_openai_chat(
        {
            "prompt_tokens": 100,
            "completion_tokens": 10,
            "total_tokens": 110,
            "prompt_tokens_details": {"cached_tokens": 60, "cache_write_tokens": 30},
        }
    ) == Usage(input=10, output=10, cache_read=60, cache_write=30, total=110)
    assert usage_from_openai_chat(None) == Usage()
    assert usage_from_anthropic(
        {"input_tokens": 5, "output_tokens": 3, "cache_read_input_tokens": None}
    ) == Usage(input=5, output=3, total=8)


# -- OpenAI Chat normalizations ----------------------------------------------------------------


def _call(i: str = "c1", name: str = "ls", **args: Any) -> ToolCall:
    return ToolCall(id=i, name=name, arguments=args)


def test_chat_tool_name_restored_and_is_error_dropped() -> None:
    msgs = [
        Message.user("x"),
        Message.assistant("", tool_calls=[_call("c1", "ls", path=".")]),
        Message.tool("denied", tool_call_id="c1", name="ls", is_error=True),
    ]
    wire = to_openai_chat(msgs)
    assert wire[2] == {"role": "tool", "tool_call_id": "c1", "content": "denied"}
    assert from_openai_chat(wire)[2] == Message.tool("denied", tool_call_id="c1", name="ls")


def test_chat_developer_reads_as_system() -> None:
    assert from_openai_chat([{"role": "developer", "content": "rules"}]) == [
        Message.system("rules")
    ]


def test_chat_tool_images_move_to_a_user_message_after_the_run() -> None:
    img = ImagePart(data="AAAA", mime_type="image/png")
    msgs = [
        Message.user("x"),
        Message.assistant("", tool_calls=[_call("c1"), _call("c2")]),
        Message.tool([TextPart(text="shot 1"), img], tool_call_id="c1"),
        Message.tool([img], tool_call_id="c2"),
        Message.user("next"),
    ]
    wire = to_openai_chat(msgs)
    assert [m["role"] for m in wire] == ["user", "assistant", "tool", "tool", "user", "user"]
    assert wire[2]["content"] == [{"type": "text", "text": "shot 1"}]
    assert wire[3]["content"] == "(see attached image)"
    url = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
    assert wire[4]["content"] == [
        {"type": "text", "text": "Attached image(s) from tool result:"},
        url,
        url,
    ]


def test_chat_thinking_signatures_and_redactions_dropped() -> None:
    msg = Message.assistant(
        [
            ThinkingPart(thinking="a", signature="sig"),
            ThinkingPart(signature="enc", redacted=True),
            ThinkingPart(thinking="b"),
            TextPart(text="answer"),
        ]
    )
    (wire,) = to_openai_chat([msg])
    assert wire == {
        "role": "assistant",
        "content": [{"type": "text", "text": "answer"}],
        "reasoning_content": "ab",
    }
    assert from_openai_chat([wire])[0].content == [
        ThinkingPart(thinking="ab"),
        TextPart(text="answer"),
    ]
    (plain,) = to_openai_chat([msg], reasoning_field=None)
    assert "reasoning_content" not in plain


def test_chat_only_thinking_leaves_empty_content() -> None:
    msg = Message.assistant([ThinkingPart(thinking="t")], tool_calls=[_call()])
    (wire,) = to_openai_chat([msg], reasoning_field=None)
    assert wire["content"] is None


def test_chat_tool_call_extra_content_kept() -> None:
    wire_call = {
        "id": "c1",
        "type": "function",
        "function": {"name": "ls", "arguments": "{}"},
        "extra_content": {"google": {"thought_signature": "SIG"}},
    }
    (msg,) = from_openai_chat([{"role": "assistant", "content": None, "tool_calls": [wire_call]}])
    assert msg.tool_calls is not None
    assert msg.tool_calls[0].extra == {"extra_content": {"google": {"thought_signature": "SIG"}}}
    assert to_openai_chat([msg])[0]["tool_calls"] == [wire_call]
    # and the extra survives contextree's own JSON
    assert Message.from_dict(msg.to_dict()).tool_calls[0].extra == msg.tool_calls[0].extra  # type: ignore[index]


def test_chat_images_and_unknown_parts() -> None:
    wire = [
        {
            "role": "user",
            "content": [
                {
                    "type": "image_url",
                    "image_url": {"url": "data:image/jpeg;base64,QUJD", "detail": "high"},
                },
                {"type": "image_url", "image_url": {"url": "https://x/y.png"}},
                {"type": "file", "file": {"file_id": "f1"}},
            ],
        }
    ]
    (msg,) = from_openai_chat(wire)
    assert msg.content == [
        ImagePart(data="QUJD", mime_type="image/jpeg"),
        ImagePart(url="https://x/y.png"),
        UnknownPart({"type": "file", "file": {"file_id": "f1"}}),
    ]
    assert to_openai_chat([msg])[0]["content"][2] == {"type": "file", "file": {"file_id": "f1"}}


def test_chat_refusal_and_legacy_function_call() -> None:
    (msg,) = from_openai_chat([{"role": "assistant", "content": None, "refusal": "I can't."}])
    assert msg.content == "I can't."
    msgs = from_openai_chat(
        [
            {
                "role": "assistant",
                "content": None,
                "function_call": {"name": "ls", "arguments": "{}"},
            },
            {"role": "function", "name": "ls", "content": "a b"},
        ]
    )
    assert msgs[0].tool_calls == [ToolCall(id="", name="ls")]
    assert msgs[1] == Message.tool("a b", tool_call_id="", name="ls")


# -- OpenAI Responses normalizations -----------------------------------------------------------


def test_responses_items() -> None:
    items = [
        {"role": "developer", "content": "rules"},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]},
        {
            "type": "reasoning",
            "id": "rs_1",
            "summary": [
                {"type": "summary_text", "text": "a"},
                {"type": "summary_text", "text": "b"},
            ],
            "encrypted_content": "ENC",
        },
        {"type": "web_search_call", "id": "ws_1", "status": "completed"},
        {
            "type": "function_call",
            "id": "fc_1",
            "call_id": "call_1",
            "name": "ls",
            "arguments": "{}",
        },
        {"type": "function_call_output", "call_id": "call_1", "output": "a.txt"},
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "done", "annotations": []}],
        },
    ]
    msgs = from_openai_responses(items)
    assert msgs[0] == Message.system("rules")
    assert msgs[1] == Message.user([TextPart(text="hi")])
    assistant = msgs[2]
    assert assistant.content == [
        ThinkingPart(thinking="a\n\nb", signature="ENC"),
        UnknownPart({"type": "web_search_call", "id": "ws_1", "status": "completed"}),
    ]
    assert assistant.thinking[0].extra == {"id": "rs_1"}
    assert assistant.tool_calls == [ToolCall(id="call_1", name="ls")]
    assert assistant.tool_calls[0].extra == {"item_id": "fc_1"}
    assert msgs[3] == Message.tool("a.txt", tool_call_id="call_1", name="ls")
    assert msgs[4] == Message.assistant([TextPart(text="done")])

    again = to_openai_responses(msgs)
    assert again[2] == {
        "type": "reasoning",
        "id": "rs_1",
        "summary": [{"type": "summary_text", "text": "a\n\nb"}],
        "encrypted_content": "ENC",
    }
    assert again[3] == items[3]
    assert again[4] == {
        "type": "function_call",
        "call_id": "call_1",
        "name": "ls",
        "arguments": "{}",
        "id": "fc_1",
    }


def test_responses_string_input_and_merging() -> None:
    assert from_openai_responses("hello") == [Message.user("hello")]
    merged = from_openai_responses(
        to_openai_responses([Message.assistant("a"), Message.assistant("b")])
    )
    assert merged == [Message.assistant([TextPart(text="a"), TextPart(text="b")])]


def test_responses_empty_assistant_kept() -> None:
    assert from_openai_responses(to_openai_responses([Message.assistant("")])) == [
        Message.assistant("")
    ]


# -- Anthropic normalizations ------------------------------------------------------------------


def test_anthropic_system_messages_joined_in_order() -> None:
    msgs = [
        Message.system("one"),
        Message.user("u"),
        Message.assistant("a"),
        Message.system("two"),
        Message.system(""),
        Message(role="system", content=[TextPart(text="three")]),
        Message.user("v"),
    ]
    system, wire = to_anthropic(msgs)
    assert system == "one\n\ntwo\n\nthree"
    assert [m["role"] for m in wire] == ["user", "assistant", "user"]
    assert to_anthropic([Message.user("x")])[0] is None
    blocks = [{"type": "text", "text": "s1"}, {"type": "text", "text": "s2"}]
    assert from_anthropic(blocks, [])[:2] == [Message.system("s1"), Message.system("s2")]


def test_anthropic_tool_results_merge_and_split_back() -> None:
    msgs = [
        Message.user("x"),
        Message.assistant("", tool_calls=[_call("t1"), _call("t2")]),
        Message.tool("r1", tool_call_id="t1", name="ls"),
        Message.tool(
            [TextPart(text="r2"), ImagePart(data="AA==", mime_type="image/gif")],
            tool_call_id="t2",
            name="ls",
            is_error=True,
        ),
        Message.user("more"),
    ]
    _, wire = to_anthropic(msgs)
    assert wire[1] == {
        "role": "assistant",
        "content": [
            {"type": "tool_use", "id": "t1", "name": "ls", "input": {}},
            {"type": "tool_use", "id": "t2", "name": "ls", "input": {}},
        ],
    }
    assert wire[2] == {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": "r1"},
            {
                "type": "tool_result",
                "tool_use_id": "t2",
                "content": [
                    {"type": "text", "text": "r2"},
                    {
                        "type": "image",
                        "source": {"type": "base64", "media_type": "image/gif", "data": "AA=="},
                    },
                ],
                "is_error": True,
            },
        ],
    }
    assert wire[3] == {"role": "user", "content": "more"}
    assert from_anthropic(None, wire) == msgs
    # one user turn mixing results and text reads back as tool messages, then a user message
    mixed = [
        wire[0],
        wire[1],
        {"role": "user", "content": [*wire[2]["content"], {"type": "text", "text": "more"}]},
    ]
    assert from_anthropic(None, mixed) == [*msgs[:4], Message.user([TextPart(text="more")])]


def test_anthropic_drops_what_the_api_rejects() -> None:
    msgs = [
        Message.user("x"),
        Message.assistant(
            [ThinkingPart(thinking="unsigned"), TextPart(text=""), ImagePart(url="https://x/y.png")]
        ),
        Message.assistant(""),
        Message.assistant([ThinkingPart(thinking="unsigned"), TextPart(text="kept")]),
    ]
    _, wire = to_anthropic(msgs)
    assert wire == [
        {"role": "user", "content": "x"},
        {"role": "assistant", "content": [{"type": "text", "text": "kept"}]},
    ]


def test_anthropic_response_blocks() -> None:
    blocks = [
        {"type": "thinking", "thinking": "hm", "signature": "S"},
        {"type": "redacted_thinking", "data": "D"},
        {"type": "server_tool_use", "id": "srv_1", "name": "web_search", "input": {"query": "q"}},
        {"type": "text", "text": "answer", "citations": None},
        {"type": "tool_use", "id": "t1", "name": "ls", "input": {"p": 1}},
    ]
    msg = assistant_from_anthropic(blocks)
    assert msg.content == [
        ThinkingPart(thinking="hm", signature="S"),
        ThinkingPart(signature="D", redacted=True),
        UnknownPart(blocks[2]),
        TextPart(text="answer"),
    ]
    assert msg.tool_calls == [ToolCall(id="t1", name="ls", arguments={"p": 1})]
    _, wire = to_anthropic([Message.user("q"), msg])
    assert wire[1]["content"] == [
        blocks[0],
        blocks[1],
        blocks[2],
        {"type": "text", "text": "answer"},
        blocks[4],
    ]
    assert assistant_from_anthropic([{"type": "text", "text": "hi"}]).content == "hi"
    assert assistant_from_anthropic([]).content == ""


def test_anthropic_image_urls() -> None:
    _, wire = to_anthropic(
        [
            Message.user(
                [ImagePart(url="data:image/png;base64,QQ=="), ImagePart(url="https://x/y.png")]
            )
        ]
    )
    assert wire[0]["content"] == [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "QQ=="}},
        {"type": "image", "source": {"type": "url", "url": "https://x/y.png"}},
    ]
    unknown_source = {"type": "image", "source": {"type": "file", "file_id": "f"}}
    (msg,) = from_anthropic(None, [{"role": "user", "content": [unknown_source]}])
    assert msg.content == [UnknownPart(unknown_source)]


# -- malformed input -----------------------------------------------------------------------------

WIRE_KEYS = [
    "role",
    "content",
    "type",
    "text",
    "name",
    "tool_calls",
    "tool_call_id",
    "function",
    "arguments",
    "id",
    "call_id",
    "output",
    "summary",
    "encrypted_content",
    "source",
    "image_url",
    "input",
    "tool_use_id",
    "is_error",
    "thinking",
    "signature",
    "data",
    "reasoning_content",
    "refusal",
]
ROLES_AND_TYPES = st.sampled_from(
    [
        "user",
        "assistant",
        "system",
        "tool",
        "developer",
        "message",
        "text",
        "image",
        "image_url",
        "tool_use",
        "tool_result",
        "thinking",
        "redacted_thinking",
        "reasoning",
        "function_call",
        "function_call_output",
        "input_image",
        "base64",
        "url",
    ]
)
wild = st.recursive(
    json_scalar | ROLES_AND_TYPES,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(WIRE_KEYS), inner, max_size=5)
    ),
    max_leaves=12,
)


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(st.lists(st.dictionaries(st.sampled_from(WIRE_KEYS), wild, max_size=6), max_size=4))
def test_malformed_input_fails_cleanly_or_reads_into_valid_messages(items: list[Any]) -> None:
    """Importers rely on this: bad input raises a plain error type, never anything else, and
    whatever reads back is a valid message (it survives contextree's own JSON)."""
    for read in (
        from_openai_chat,
        from_openai_responses,
        lambda xs: from_anthropic(None, xs),
    ):
        try:
            msgs = read(items)
        except (AttributeError, TypeError, ValueError, KeyError):
            continue
        for m in msgs:
            assert Message.from_dict(json.loads(json.dumps(m.to_dict()))) == m


# -- module boundaries -----------------------------------------------------------------------


def _imported_modules(module: ModuleType) -> set[str]:
    """Every module ``module``'s source imports, at any depth (deferred imports too)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(inspect.getsource(module))):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = ("." * node.level) + (node.module or "")
            names.add(base)
            names.update(f"{base}.{a.name}" for a in node.names)
    return names


def test_provider_wire_modules_do_not_import_each_other() -> None:
    """Both build on ``wire_common``; neither reaches into the other."""
    import contextree.models._wire_anthropic as wire_anthropic
    import contextree.models._wire_openai as wire_openai

    for module, other in ((wire_anthropic, "wire_openai"), (wire_openai, "wire_anthropic")):
        imported = _imported_modules(module)
        assert not [n for n in imported if other in n], (module.__name__, imported)
        assert "contextree.models._wire_common" in imported


def test_wire_anthropic_loads_without_wire_openai() -> None:
    """A fresh interpreter, with the package ``__init__`` modules (which import every adapter)
    bypassed, can import ``wire_anthropic`` and use it without ``wire_openai`` ever loading."""
    import contextree
    import contextree.models

    script = textwrap.dedent(f"""
        import sys, types
        for name, path in (("contextree", {contextree.__path__[0]!r}),
                           ("contextree.models", {contextree.models.__path__[0]!r})):
            package = types.ModuleType(name)
            package.__path__ = [path]
            sys.modules[name] = package
        from contextree._messages import Message
        from contextree.models._wire_anthropic import from_anthropic, to_anthropic
        assert from_anthropic(*to_anthropic([Message.user("hi")])) == [Message.user("hi")]
        loaded = sorted(m for m in sys.modules if m.startswith("contextree.models."))
        assert "contextree.models._wire_openai" not in loaded, loaded
        print(" ".join(loaded))
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          check=False)
    assert done.returncode == 0, done.stderr
    assert "contextree.models._wire_common" in done.stdout.split()
