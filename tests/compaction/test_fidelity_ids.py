"""Reused tool-call ids (llama.cpp, Kimi, some Grok endpoints): each result belongs to the
call of the nearest preceding assistant message with its id, in compaction and on the wire;
and a branch with no user message still makes a valid Anthropic request."""

from __future__ import annotations

import contextree as ct
from contextree import Message, ToolCall
from contextree.compaction import CompactionLadder, ToolResults, placeholder
from contextree.compaction._summarize import render_transcript
from contextree.models import to_anthropic, to_openai_chat, to_openai_responses


def reused() -> list[Message]:
    """Two steps that both call ``call_0``: a failing test run, then a push."""
    return [
        Message.user("Run the tests, then push."),
        Message.assistant("", tool_calls=[ToolCall(id="call_0", name="shell",
                                                   arguments={"command": "pytest -q"})]),
        Message.tool("F\n" + "tests/test_a.py F\n" * 200 + "FAILED tests/test_a.py::test_x",
                     tool_call_id="call_0", name="shell", is_error=True, meta={"exit_code": 1}),
        Message.assistant("", tool_calls=[ToolCall(id="call_0", name="shell",
                                                   arguments={"command": "git push"})]),
        Message.tool("Everything up-to-date\n" * 200, tool_call_id="call_0", name="shell",
                     meta={"exit_code": 0}),
        Message.assistant("Pushed."),
        Message.user("ok, continue"),
    ]


def session_of(messages: list[Message]) -> ct.Session:
    s = ct.Session.in_memory()
    for m in messages:
        s.append_message(m)
    return s


def test_cleared_results_are_attributed_to_their_own_call() -> None:
    s = session_of(reused())
    r = s.compact(200, ladder=CompactionLadder([ToolResults(keep_recent=0)]), force=True)
    assert len(r.cleared) == 2
    results = [m.text for m in s.build_context().messages if m.role == "tool"]
    assert 'shell({"command":"pytest -q"})' in results[0] and "git push" not in results[0]
    assert "exit code 1" in results[0]
    assert 'shell({"command":"git push"})' in results[1] and "pytest" not in results[1]


def test_the_digest_attributes_results_to_their_own_call() -> None:
    messages = reused()
    for i in range(12):
        messages += [Message.assistant("Reading.", tool_calls=[ToolCall(
            id="call_0", name="read", arguments={"path": f"src/m{i}.py"})]),
                     Message.tool("x = 1\n" * 100, tool_call_id="call_0", name="read"),
                     Message.user("ok, continue")]
    s = session_of(messages)
    r = s.compact(3_000, compact_to=0.3)
    assert r.reached_target and r.dropped
    text = s.build_context().messages[0].text
    errors = text.split("## Open errors")[1].split("\n\n")[0]
    assert "`pytest -q` ended with exit code 1" in errors and "git push" not in errors
    assert "`git push` -> exit code 0" in text


def test_the_summarizer_transcript_attributes_results_to_their_own_call() -> None:
    text = render_transcript([(m, None) for m in reused()])
    first, second = text.split('[tool result of shell({"command":')[1:3]
    assert first.startswith('"pytest -q"})]\nF') and second.startswith('"git push"})]\nEvery')


def test_placeholder_takes_the_call_it_is_given() -> None:
    call = ToolCall(id="call_0", name="Edit", arguments={"file_path": "/r/a.py"})
    text = placeholder(Message.tool("ok", tool_call_id="call_0"), call)
    assert "do not run it again; read /r/a.py" in text


def wire_pairs(calls: list[str], results: list[str]) -> list[tuple[str, str]]:
    return list(zip(calls, results, strict=True))


def test_reused_ids_are_made_unique_on_the_openai_wire() -> None:
    messages = reused()
    chat = to_openai_chat(messages)
    call_ids = [c["id"] for m in chat if m["role"] == "assistant" for c in m.get("tool_calls", [])]
    result_ids = [m["tool_call_id"] for m in chat if m["role"] == "tool"]
    assert call_ids == ["call_0", "call_0_2"] and result_ids == call_ids
    items = to_openai_responses(messages)
    calls = [i["call_id"] for i in items if i["type"] == "function_call"]
    outputs = [i["call_id"] for i in items if i["type"] == "function_call_output"]
    assert calls == outputs == ["call_0", "call_0_2"]
    # the messages (and the session) keep the ids the provider gave
    assert [c.id for m in messages for c in m.tool_calls or ()] == ["call_0", "call_0"]


def test_reused_ids_are_made_unique_on_the_anthropic_wire() -> None:
    _, wire = to_anthropic(reused())
    uses = [b["id"] for m in wire if m["role"] == "assistant" and isinstance(m["content"], list)
            for b in m["content"] if b["type"] == "tool_use"]
    results = [b["tool_use_id"] for m in wire if m["role"] == "user"
               and isinstance(m["content"], list) for b in m["content"]
               if b["type"] == "tool_result"]
    assert uses == results == ["call_0", "call_0_2"]
    assert len(set(uses)) == len(uses)


def test_duplicate_ids_in_one_reply_are_answered_in_order() -> None:
    messages = [
        Message.user("Two reads."),
        Message.assistant("", tool_calls=[ToolCall(id="c", name="read", arguments={"path": "a"}),
                                          ToolCall(id="c", name="read", arguments={"path": "b"})]),
        Message.tool("A", tool_call_id="c"),
        Message.tool("B", tool_call_id="c"),
    ]
    _, wire = to_anthropic(messages)
    uses = [(b["id"], b["input"]["path"]) for b in wire[1]["content"]]
    results = [(b["tool_use_id"], b["content"]) for b in wire[2]["content"]]
    assert uses == [("c", "a"), ("c_2", "b")] and results == [("c", "A"), ("c_2", "B")]


def test_a_branch_with_no_user_message_is_valid_for_anthropic() -> None:
    s = ct.Session.in_memory()
    root = s.append_message(Message.system("You are a coding agent."))
    s.append_message(Message.user("Try the risky refactor."))
    s.append_message(Message.assistant("It did not work out."))
    s.move_to(root, summary="The refactor was tried on a branch and abandoned.")
    s.append_message(Message.assistant("Back on the main line; what next?"))
    messages = s.build_context().messages
    assert not any(m.role == "user" for m in messages)
    system, wire = to_anthropic(messages)
    assert system is not None and "abandoned" in system
    assert wire[0]["role"] == "user" and wire[0]["content"] == "[continuing the conversation]"
    assert [m["role"] for m in wire] == ["user", "assistant"]
