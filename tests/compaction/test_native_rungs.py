"""Provider-native compaction rungs: Anthropic's server-side compaction, on demand (the
``compaction`` parameter, beta ``compact-2026-09-04``) or at a threshold (the
``compact_20260112`` edit, beta ``compact-2026-01-12``), and OpenAI's
``POST /responses/compact``, through the real SDKs against fake servers on 127.0.0.1 that
speak the documented wire formats.

What the provider returns is stored in the compaction entry (``details["native"]``) and sent
back to that provider in place of the summary; every other provider gets the readable
summary; the history stays in the file; a refusal, a missing endpoint or a conversation under
the provider's minimum falls back to the next rung, and says so."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import contextree as ct
from contextree import Message
from contextree.compaction import (
    CompactionLadder,
    Digest,
    ProviderCompaction,
    SlidingWindow,
    ToolResults,
    default_ladder,
)
from contextree.errors import CompactionError
from contextree.markers import Kind
from contextree.models import AnthropicMessages, NativeCompaction, OpenAIResponses, ScriptedModel
from contextree.models._wire_openai import to_openai_chat
from contextree.runtime import Event
from contextree.runtime._compaction import compaction_events
from fakes.anthropic_server import error, message, text
from fakes.native_compaction import (
    BETA,
    EDIT,
    ON_DEMAND_BETA,
    CompactingAnthropicServer,
    ResponsesServer,
    response,
)

WINDOW = 120_000


def _long_session(path: Path | None = None, turns: int = 24, size: int = 18_000,
                  *, prose: bool = False) -> ct.Session:
    """A coding session of about ``turns * size / 4`` tokens: user asks, tool output (or,
    with ``prose``, the assistant's long answers, which clearing tool results cannot
    shrink)."""
    s = ct.Session.create(path) if path is not None else ct.Session.in_memory()
    s.append_message(Message.system("You are a coding agent."))
    for i in range(turns):
        s.append_message(Message.user(f"Task {i}: fix module m{i}.py; keep the API stable."))
        call = ct.ToolCall(id=f"c{i}", name="read", arguments={"path": f"src/m{i}.py"})
        s.append_message(Message.assistant(f"Reading m{i}.", tool_calls=[call]))
        out = f"def f{i}():\n    return {i}\n" * (size // 28)
        s.append_message(Message.tool("ok" if prose else out, tool_call_id=f"c{i}", name="read"))
        s.append_message(Message.assistant(f"Fixed m{i}.py." + (" Details: " + "word " * (
            size // 5) if prose else "")))
    s.append_message(Message.user("Now run the whole test suite."))
    return s


FORMS = ["on_demand", "threshold"]
BETAS = {"on_demand": ON_DEMAND_BETA, "threshold": BETA}


def _anthropic(server: CompactingAnthropicServer, form: Any = "on_demand",
               **options: Any) -> AnthropicMessages:
    return AnthropicMessages("claude-opus-4-6", base_url=server.url, api_key="k",
                             native_compaction=form, **options)


def _ladder(model: Any) -> CompactionLadder:
    return CompactionLadder([ProviderCompaction(model), SlidingWindow(), Digest()])


@pytest.mark.parametrize("form", FORMS)
def test_anthropic_compacts_on_its_side_and_the_block_goes_back_first(tmp_path: Path,
                                                                      form: str) -> None:
    path = tmp_path / "s.jsonl"
    s = _long_session(path)
    before = [e.id for e in s.branch()]
    with CompactingAnthropicServer() as server:
        model = _anthropic(server, form)
        result = s.compact(WINDOW, compact_to=0.3, ladder=_ladder(model))
        assert result.applied == ["provider"], result.stages
        req = server.requests[0]
        assert req.path.startswith("/v1/messages")
        assert req.headers["anthropic-beta"] == BETAS[form]
        if form == "on_demand":
            assert req.body["compaction"] == {"type": "summarize"}
            assert "context_management" not in req.body
        else:
            edit = req.body["context_management"]["edits"][0]
            assert edit == {"type": EDIT, "trigger": {"type": "input_tokens", "value": 50_000},
                            "pause_after_compaction": True}
            assert "compaction" not in req.body
        # What the provider compacted: the turns the cut drops, the system prompt apart.
        assert req.body["system"][0]["text"] == "You are a coding agent."
        sent = " ".join(str(m["content"]) for m in req.body["messages"])
        assert "Task 0:" in sent and "Now run the whole test suite." not in sent

        entry = s.get_entry(result.entry_id)
        native = entry.details["native"]
        block = native["items"][0]
        assert native["api"] == "messages" and native["provider"] == "anthropic"
        assert native["beta"] == BETAS[form]
        assert block["type"] == "compaction" and block["signature"].startswith("sig-")
        assert ("encrypted_content" in block) == (form == "threshold")
        assert block["content"].startswith("The user asked: Task 0:")
        # The readable summary holds the provider's, and the user's words around it.
        assert block["content"] in entry.summary
        assert "Task 0: fix module m0.py; keep the API stable." in entry.summary
        assert entry.receipt is not None and entry.receipt.folded
        calls = entry.details["calls"]
        assert calls[0]["outcome"] == "summary" and calls[0]["usage"]["input"] > 50_000

        # The next request to Anthropic sends the block back, first, with its form's beta.
        server.reply(message(text("Running the suite.")))
        reply = model.complete(s.build_context().request_messages())
        assert reply.text == "Running the suite."
        nxt = server.requests[-1]
        assert nxt.headers["anthropic-beta"] == BETAS[form]
        assert "compaction" not in nxt.body and "context_management" not in nxt.body
        first = nxt.body["messages"][0]
        assert first["role"] == "assistant"
        assert {k: v for k, v in first["content"][0].items() if k != "cache_control"} == block
        assert block["content"] not in str(nxt.body.get("system"))
        assert nxt.body["messages"][-1]["content"][-1]["text"] == "Now run the whole test suite."

    # Any other provider reads the summary as text.
    chat = to_openai_chat(s.build_context().messages)
    assert chat[0]["role"] == "system" and block["content"] in chat[0]["content"]
    # The history is all still in the file.
    again = ct.Session.open(path)
    assert [e.id for e in again.branch()][: len(before)] == before


@pytest.mark.parametrize("form", FORMS)
def test_a_second_compaction_sends_the_previous_block_and_clearing_keeps_it(form: str) -> None:
    s = _long_session()
    with CompactingAnthropicServer() as server:
        model = _anthropic(server, form)
        first = s.compact(WINDOW, compact_to=0.3, ladder=_ladder(model))
        block = s.get_entry(first.entry_id).details["native"]["items"][0]
        # Only tool results to clear: the block stays in force.
        for i in range(3):
            call = ct.ToolCall(id=f"d{i}", name="read", arguments={"path": f"big{i}.txt"})
            s.append_message(Message.assistant("", tool_calls=[call]))
            s.append_message(Message.tool("x = 1\n" * 16_000, tool_call_id=f"d{i}", name="read"))
        for i in range(3):
            call = ct.ToolCall(id=f"e{i}", name="read", arguments={"path": f"s{i}.txt"})
            s.append_message(Message.assistant("", tool_calls=[call]))
            s.append_message(Message.tool("ok", tool_call_id=f"e{i}", name="read"))
        cleared = s.compact(WINDOW, ladder=CompactionLadder([ToolResults(), Digest()]),
                            force=True)
        assert cleared.applied == ["tool_results"], cleared.stages
        assert s.get_entry(cleared.entry_id).details["native"]["items"][0] == block
        # A later native compaction sends the earlier block first, for the provider to fold.
        for i in range(16):
            s.append_message(Message.user(f"Step {i}: go on."))
            s.append_message(Message.assistant("word " * 20_000))
        second = s.compact(WINDOW, compact_to=0.3, ladder=_ladder(model))
        assert second.applied == ["provider"], second.stages
        sent = server.requests[-1].body["messages"]
        assert sent[0]["content"][0]["signature"] == block["signature"]
        assert [b for m in sent for b in m["content"] if isinstance(m["content"], list)
                and b.get("type") == "compaction"] == [sent[0]["content"][0]]
        newer = s.get_entry(second.entry_id).details["native"]["items"][0]
        assert newer["content"].startswith("The user asked: (earlier: The user asked: Task 0")


@pytest.mark.parametrize("form", FORMS)
def test_anthropic_refusing_falls_back_to_the_next_rung_with_an_event(form: str) -> None:
    s = _long_session()
    with CompactingAnthropicServer() as server:
        server.refuse = error(400, "compaction is not supported for this model")
        result = s.compact(WINDOW, compact_to=0.3, ladder=_ladder(_anthropic(server, form)))
    provider = result.stages[0]
    assert provider.name == "provider" and not provider.applied and provider.failed
    assert "not supported for this model" in provider.note
    assert result.applied == ["sliding_window"]
    entry = s.get_entry(result.entry_id)
    assert "native" not in entry.details
    assert entry.details["calls"][0]["outcome"] == "summarizer_failed"
    events = compaction_events(result)
    assert events[0].event is Event.COMPACTION_FAILED and events[0].stage == "provider"
    assert "not supported for this model" in events[0].reason
    assert events[-1].event is Event.COMPACTED


def test_an_answer_that_is_no_compaction_falls_back() -> None:
    """Under its trigger the API samples an ordinary reply: that is not a compaction."""
    s = _long_session()
    with CompactingAnthropicServer() as server:
        server.chars_per_token = 40  # it counts the conversation under its trigger
        server.reply(message(text("Sure, what next?")))
        result = s.compact(WINDOW, compact_to=0.3,
                           ladder=_ladder(_anthropic(server, "threshold")))
        assert len(server.requests) == 1
    provider = result.stages[0]
    assert provider.failed and "did not compact" in provider.note
    assert "'end_turn'" in provider.note
    assert result.applied == ["sliding_window"] and result.reached_target


def test_under_the_providers_minimum_the_rung_steps_aside_without_a_call() -> None:
    s = _long_session(turns=12, size=2_000)
    with CompactingAnthropicServer() as server:
        result = s.compact(6_000, ladder=_ladder(_anthropic(server, "threshold")))
        assert server.requests == []
    assert "50000" in result.stages[0].note and not result.stages[0].applied
    assert result.applied and "provider" not in result.applied


def test_on_demand_compaction_has_no_minimum_and_takes_instructions() -> None:
    s = _long_session(turns=12, size=2_000)
    with CompactingAnthropicServer() as server:
        model = _anthropic(server)
        ladder = CompactionLadder([ProviderCompaction(model, instructions="Keep file names."),
                                   Digest()])
        result = s.compact(6_000, ladder=ladder)
        assert result.applied == ["provider"], result.stages
        (req,) = server.requests
    assert req.body["compaction"] == {"type": "summarize", "instructions": "Keep file names."}
    entry = s.get_entry(result.entry_id)
    assert entry.details["native"]["items"][0]["content"].startswith("[Keep file names.] ")
    # The call is counted from usage.iterations: the top-level counts are zero.
    (call,) = entry.details["calls"]
    assert call["usage"]["input"] > 2_000 and call["usage"]["output"] == 40


@pytest.mark.parametrize(("stop", "why"), [
    ("max_tokens", "give the model a larger max_tokens"),
    ("tool_use", "say not to call tools"),
    ("refusal", "the request was declined"),
])
def test_an_on_demand_answer_without_a_summary_falls_back_saying_why(stop: str,
                                                                     why: str) -> None:
    """The API answers 200 with no content and the summarization call's stop reason."""
    s = _long_session()
    with CompactingAnthropicServer() as server:
        server.no_summary = stop
        result = s.compact(WINDOW, compact_to=0.3, ladder=_ladder(_anthropic(server)))
        assert len(server.requests) == 1
    provider = result.stages[0]
    assert provider.failed and "did not compact" in provider.note
    assert repr(stop) in provider.note and why in provider.note
    assert result.applied == ["sliding_window"] and result.reached_target
    assert "native" not in s.get_entry(result.entry_id).details


def test_options_a_compaction_request_refuses_are_left_out_of_it_and_kept_on_turns() -> None:
    s = _long_session()
    options = {"stop_sequences": ["STOP"], "tool_choice": {"type": "any"},
               "context_management": {"edits": [{"type": "clear_tool_uses_20250919"}]}}
    with CompactingAnthropicServer() as server:
        model = _anthropic(server, **options)
        result = s.compact(WINDOW, compact_to=0.3, ladder=_ladder(model))
        assert result.applied == ["provider"], result.stages
        body = server.requests[0].body
        assert not set(options) & set(body) and body["compaction"] == {"type": "summarize"}
        server.reply(message(text("Running the suite.")))
        model.complete(s.build_context().request_messages())
        turn = server.requests[-1].body
    assert {k: turn[k] for k in options} == options


def test_threshold_compaction_steps_aside_from_a_conversation_with_an_on_demand_block() -> None:
    """The API refuses the threshold edit on a request that carries a signed block: the
    rung steps aside saying so, without a call (none is recorded), and the next rung
    compacts; ``compact_native`` called on its own refuses the same way."""
    s = _long_session()
    with CompactingAnthropicServer() as server:
        first = s.compact(WINDOW, compact_to=0.3, ladder=_ladder(_anthropic(server)))
        assert first.applied == ["provider"]
        for i in range(16):
            s.append_message(Message.user(f"Step {i}: go on."))
            s.append_message(Message.assistant("word " * 20_000))
        calls = len(server.requests)
        carrying = s.build_context().request_messages()  # the on-demand block first
        second = s.compact(WINDOW, compact_to=0.3,
                           ladder=_ladder(_anthropic(server, "threshold")))
        assert len(server.requests) == calls
        with pytest.raises(CompactionError, match="native_compaction='on_demand'"):
            _anthropic(server, "threshold").compact_native(carrying)
        assert len(server.requests) == calls
    provider = second.stages[0]
    assert not provider.failed and not provider.applied
    assert "native_compaction='on_demand'" in provider.note
    assert second.applied == ["sliding_window"]
    recorded = s.get_entry(second.entry_id).details.get("calls") or []
    assert all(c["outcome"] != "summarizer_failed" for c in recorded), recorded


def test_a_block_stored_without_its_beta_is_sent_with_the_threshold_beta() -> None:
    """Payloads written before the on-demand form name no beta: they came from the
    threshold edit, and go back with its beta."""

    class Stored:
        provider, name, min_native_tokens = "anthropic", "claude-opus-4-6", 0

        def compact_native(self, messages: Any, *, tools: Any = (),
                           instructions: Any = None) -> NativeCompaction:
            block = {"type": "compaction", "content": "The user asked for m0.",
                     "encrypted_content": "opaque", "signature": "sig-old"}
            return NativeCompaction("anthropic", "messages", self.name, [block],
                                    block["content"])

    s = _long_session()
    result = s.compact(WINDOW, compact_to=0.3, ladder=_ladder(Stored()))
    assert "beta" not in s.get_entry(result.entry_id).details["native"]
    with CompactingAnthropicServer() as server:
        server.issued["sig-old"] = (BETA, "The user asked for m0.")
        server.reply(message(text("ok")))
        assert _anthropic(server).complete(s.build_context().request_messages()).text == "ok"
        assert server.requests[-1].headers["anthropic-beta"] == BETA


def test_an_unknown_form_is_refused_with_the_accepted_ones() -> None:
    with pytest.raises(ct.errors.InvalidArgument, match="'on_demand' or 'threshold'"):
        AnthropicMessages("claude-opus-4-6", api_key="k", native_compaction="later")  # type: ignore[arg-type]


def test_a_model_without_native_compaction_steps_aside_saying_so() -> None:
    s = _long_session(turns=12, size=2_000)
    result = s.compact(6_000, ladder=default_ladder(ScriptedModel(["x"]), native=True))
    provider = next(r for r in result.stages if r.name == "provider")
    assert "cannot ask its provider to compact" in provider.note and not provider.applied
    assert result.reached_target


def test_openai_responses_compact_endpoint_and_the_encrypted_item_goes_back() -> None:
    s = _long_session(turns=12, size=4_000)
    with ResponsesServer() as server:
        model = OpenAIResponses("gpt-5.5", base_url=server.base_url, api_key="k")
        result = s.compact(20_000, ladder=_ladder(model))
        assert result.applied == ["provider"], result.stages
        req = server.requests[0]
        assert req.path == "/v1/responses/compact"
        assert req.body["instructions"] == "You are a coding agent."
        assert req.body["input"][0] == {"type": "message", "role": "user",
                                        "content": "Task 0: fix module m0.py; keep the API stable."}
        entry = s.get_entry(result.entry_id)
        items = entry.details["native"]["items"]
        assert items[-1]["type"] == "compaction" and items[-1]["encrypted_content"]
        # No readable summary from OpenAI: the digest wrote it.
        assert "Task 0: fix module m0.py; keep the API stable." in entry.summary
        assert "digest" in entry.details

        server.reply(response("Running the suite."))
        reply = model.complete(s.build_context().request_messages())
        assert reply.text == "Running the suite." and reply.usage is not None
        sent = server.requests[-1].body["input"]
        # The compacted items in place of the summary, as they came; the rest after them.
        assert sent[: len(items)] == items
        assert {"type": "message", "role": "system",
                "content": "You are a coding agent."} in sent
        assert [i for i in sent if i["type"] == "compaction"] == [items[-1]]
        assert not any("compacted to fit" in str(i) for i in sent)
    chat = to_openai_chat(s.build_context().messages)
    assert any("compacted to fit" in str(m.get("content")) for m in chat)


def test_a_server_without_the_compact_endpoint_falls_back() -> None:
    s = _long_session(turns=12, size=4_000)
    with ResponsesServer(compact_endpoint=False) as server:
        model = OpenAIResponses("local-model", base_url=server.base_url, api_key="k")
        result = s.compact(20_000, ladder=_ladder(model))
    provider = result.stages[0]
    assert provider.failed and "404" in provider.note
    assert result.applied == ["sliding_window"] and result.reached_target
    assert "native" not in s.get_entry(result.entry_id).details


def test_the_summary_marker_carries_the_items_for_plain_message_lists() -> None:
    """A message list compacted natively (the runtime without a session, the
    integrations) keeps the items in its summary message's marker."""
    s = _long_session(turns=12, size=4_000)
    messages = s.build_context().messages
    with ResponsesServer() as server:
        model = OpenAIResponses("gpt-5.5", base_url=server.base_url, api_key="k")
        result = ct.compaction.plan_compaction(messages, ct.compaction.CompactionPolicy(20_000),
                                               _ladder(model))
    compacted = result.context().messages
    summary = compacted[0]
    assert summary.kind is Kind.COMPACTION_SUMMARY
    assert summary.marker.native["items"][-1]["type"] == "compaction"


def test_the_agent_runtime_compacts_natively_and_sends_the_block(tmp_path: Path) -> None:
    """In the agent loop: the trigger fires, the provider compacts, the turn's request
    sends the block back; a refusal on the next turn is a ``compaction_failed`` event and
    the offline rungs compact."""
    from contextree.runtime import DefaultCompactionPipeline, SessionTree, ToolResultLoop

    path = tmp_path / "s.jsonl"
    _long_session(path, prose=True).close()
    with CompactingAnthropicServer() as server:
        model = _anthropic(server)
        events: list[tuple[str, Any]] = []
        agent = (ct.agent().use(SessionTree, path=path).use(ToolResultLoop)
                 .use(DefaultCompactionPipeline, window=WINDOW, compact_to=0.3,
                      ladder=default_ladder(model, native=True))
                 .run(model))
        agent.on("compacted", lambda env, p: events.append(("compacted", p)))
        agent.on("compaction_failed", lambda env, p: events.append(("failed", p)))
        server.reply(message(text("All 24 modules pass.")))
        assert agent.start("Go on.").text == "All 24 modules pass."
        assert [e for e, _ in events] == ["compacted"]
        provider = events[0][1].stages[1]
        assert provider.name == "provider" and provider.applied, events[0][1].stages
        turn = server.requests[-1]
        assert turn.headers["anthropic-beta"] == ON_DEMAND_BETA and turn.body["stream"] is True
        assert turn.body["messages"][0]["content"][0]["type"] == "compaction"

        # The next compaction is refused: the event says so, the digest compacts.
        s = ct.Session.open(path)
        for i in range(14):
            s.append_message(Message.user(f"More {i}."))
            s.append_message(Message.assistant("word " * 20_000))
        s.close()
        server.refuse = error(529, "Overloaded", kind="overloaded_error")
        # (the ladder's summarizer is the same model: its summary, then the turn's reply)
        server.reply(message(text("## Objective\nFinish the modules.")), message(text("Done.")))
        events.clear()
        assert agent.start("Finish.").text == "Done."
        assert [e for e, _ in events] == ["failed", "compacted"]
        assert events[0][1].stage == "provider" and "Overloaded" in events[0][1].reason
        last = server.requests[-1].body["messages"]
        assert not any(b.get("type") == "compaction" for m in last
                       for b in (m["content"] if isinstance(m["content"], list) else []))


def test_compact_native_on_the_command_line(tmp_path: Path) -> None:
    from helpers import run, run_json

    path = tmp_path / "s.jsonl"
    _long_session(path, prose=True).close()
    with CompactingAnthropicServer() as server:
        out = run_json("compact", path, "--window", str(WINDOW), "--compact-to", "0.3",
                       "--model", "anthropic:claude-opus-4-6", "--base-url", server.url,
                       "--native")
        assert out["stages"][1]["name"] == "provider" and out["stages"][1]["applied"]
        entry = ct.Session.open(path).get_entry(out["entry_id"])
        assert entry.details["native"]["items"][0]["type"] == "compaction"
        # A refusal: the table says why and the digest compacted.
        _long_session(tmp_path / "t.jsonl", prose=True).close()
        server.refuse = error(400, "compaction is not available for this model")
        text_out = run("compact", tmp_path / "t.jsonl", "--window", str(WINDOW),
                       "--compact-to", "0.3", "--model", "anthropic:claude-opus-4-6",
                       "--base-url", server.url, "--native").stdout
        assert "compaction is not available for this model" in text_out
        assert "wrote compaction entry" in text_out
    with ResponsesServer(compact_endpoint=False) as server:
        _long_session(tmp_path / "u.jsonl", turns=12, size=4_000, prose=True).close()
        out = run_json("compact", tmp_path / "u.jsonl", "--window", "14000",
                       "--model", "responses:local", "--base-url", server.base_url, "--native")
        provider = next(s for s in out["stages"] if s["name"] == "provider")
        assert provider["error"] and "404" in provider["note"] and out["entry_id"]
    bad = run("compact", path, "--native", code=2)
    assert "--native needs the model" in bad.stderr


def test_the_recorded_system_prompt_and_tools_go_with_the_compaction_request() -> None:
    """A session the runtime wrote records its system prompt and tool schemas in a request
    entry (not as messages): the provider compacts with them, as the conversation ran."""
    s = ct.Session.in_memory()
    spec = {"name": "read", "description": "Read a file.",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}
    s.append_request("You are a careful agent.", [spec], {"max_tokens": 4096})
    for e in _long_session().branch()[1:]:  # (all but its system message)
        s.append_message(e.message)
    with CompactingAnthropicServer() as server:
        result = s.compact(WINDOW, compact_to=0.3, ladder=_ladder(_anthropic(server)))
        assert result.applied == ["provider"], result.stages
        body = server.requests[0].body
    assert body["system"][0]["text"] == "You are a careful agent."
    assert [t["name"] for t in body["tools"]] == ["read"]
    assert body["tools"][0]["input_schema"] == spec["parameters"]
