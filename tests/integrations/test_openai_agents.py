"""contextree's Session for the OpenAI Agents SDK, driven by the SDK's own Runner.

The model is scripted (an implementation of the SDK's ``Model`` interface); everything else
is the real SDK: ``Runner.run``, ``run_sync`` and ``run_streamed`` decide when items are read,
written, popped and compacted. Where it makes sense the same scenario runs against the SDK's
``SQLiteSession`` and the observable results must match.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("agents")

from agents import (
    Agent,
    ModelResponse,
    Runner,
    SQLiteSession,
    Usage,
    function_tool,
    set_tracing_disabled,
)
from agents.memory.session import _session_accepts_wrapper
from agents.models.interface import Model
from openai.types.responses import (
    Response,
    ResponseCompletedEvent,
    ResponseCreatedEvent,
    ResponseFunctionToolCall,
    ResponseOutputItemDoneEvent,
    ResponseOutputMessage,
    ResponseOutputText,
    ResponseReasoningItem,
    ResponseUsage,
)
from openai.types.responses.response_reasoning_item import Summary
from openai.types.responses.response_usage import (
    InputTokensDetails,
    OutputTokensDetails,
)

import contextree as ct
from contextree.entries import CompactionEntry, MessageEntry
from contextree.integrations.openai_agents import ITEMS_KEY, ContextreeSession
from helpers import SRC, as_url, require_postgres

set_tracing_disabled(True)


# -- a scripted model -------------------------------------------------------------------------

def text(t: str, id: str) -> ResponseOutputMessage:
    return ResponseOutputMessage(id=id, type="message", role="assistant", status="completed",
                                 content=[ResponseOutputText(type="output_text", text=t,
                                                             annotations=[])])


def call(name: str, args: dict[str, Any], call_id: str, id: str) -> ResponseFunctionToolCall:
    return ResponseFunctionToolCall(type="function_call", name=name, arguments=json.dumps(args),
                                    call_id=call_id, id=id, status="completed")


def reasoning(id: str, summary: str) -> ResponseReasoningItem:
    return ResponseReasoningItem(id=id, type="reasoning",
                                 summary=[Summary(type="summary_text", text=summary)],
                                 encrypted_content=f"gAAAA{id}==/+\u00e9")


class Scripted(Model):
    """Replies from a script; records every input it was given (as JSON-ready data)."""

    def __init__(self, script: list[list[Any]], *, delay: float = 0.0) -> None:
        self.script = list(script)
        self.inputs: list[list[dict[str, Any]]] = []
        self.delay = delay
        self.calls = 0

    def _next(self, input: Any) -> tuple[list[Any], ResponseUsage]:
        self.inputs.append(json.loads(json.dumps(input)) if not isinstance(input, str)
                           else [{"role": "user", "content": input}])
        self.calls += 1
        out = self.script.pop(0)
        n = len(json.dumps(self.inputs[-1])) // 4 + 100  # about what a provider would count
        usage = ResponseUsage(input_tokens=n, output_tokens=50, total_tokens=n + 50,
                              input_tokens_details=InputTokensDetails(cached_tokens=n // 2,
                                                                          cache_write_tokens=0),
                              output_tokens_details=OutputTokensDetails(reasoning_tokens=0))
        return out, usage

    async def get_response(self, system_instructions: Any, input: Any, model_settings: Any,
                           tools: Any, output_schema: Any, handoffs: Any, tracing: Any, *,
                           previous_response_id: Any, conversation_id: Any,
                           prompt: Any) -> ModelResponse:
        out, usage = self._next(input)
        return ModelResponse(output=out, usage=Usage(requests=1, input_tokens=usage.input_tokens,
                                                     output_tokens=usage.output_tokens,
                                                     total_tokens=usage.total_tokens,
                                                     input_tokens_details=usage.input_tokens_details),
                             response_id=f"resp_{self.calls}")

    async def stream_response(self, system_instructions: Any, input: Any, model_settings: Any,
                              tools: Any, output_schema: Any, handoffs: Any, tracing: Any, *,
                              previous_response_id: Any, conversation_id: Any,
                              prompt: Any) -> AsyncIterator[Any]:
        out, usage = self._next(input)
        response = Response(id=f"resp_{self.calls}", created_at=time.time(), model="scripted",
                            object="response", output=[], parallel_tool_calls=True,
                            tool_choice="auto", tools=[])
        yield ResponseCreatedEvent(type="response.created", response=response, sequence_number=0)
        for i, item in enumerate(out):
            await asyncio.sleep(self.delay)
            yield ResponseOutputItemDoneEvent(type="response.output_item.done", item=item,
                                              output_index=i, sequence_number=i + 1)
        await asyncio.sleep(self.delay)
        done = response.model_copy(update={"output": out, "usage": usage})
        yield ResponseCompletedEvent(type="response.completed", response=done,
                                     sequence_number=len(out) + 1)


@function_tool
def read_file(path: str) -> str:
    """Read a file."""
    return f"contents of {path}: " + "x" * 40


def script(turns: int, *, big: int = 0) -> list[list[Any]]:
    """Each turn: reasoning + two parallel calls, then a final answer."""
    out: list[list[Any]] = []
    for t in range(turns):
        out.append([reasoning(f"rs_{t}", f"plan {t}"),
                    call("read_file", {"path": f"a{t}.py" + "y" * big}, f"call_{t}a", f"fc_{t}a"),
                    call("read_file", {"path": f"b{t}.py"}, f"call_{t}b", f"fc_{t}b")])
        out.append([reasoning(f"rs_{t}z", f"answer {t}"), text(f"done {t}", f"msg_{t}")])
    return out


def agent(model: Model) -> Agent[Any]:
    return Agent(name="coder", instructions="Be brief.", model=model, tools=[read_file])


def assert_valid(items: list[dict[str, Any]]) -> None:
    """What the Responses API requires of an input list."""
    calls: set[str] = set()
    answered: set[str] = set()
    for i, item in enumerate(items):
        t = item.get("type")
        if t == "function_call":
            calls.add(item["call_id"])
        elif t == "function_call_output":
            assert item["call_id"] in calls, f"orphan output at {i}: {item}"
            assert item["call_id"] not in answered, f"answered twice at {i}"
            answered.add(item["call_id"])
        elif t == "reasoning":
            assert i + 1 < len(items), "reasoning at the end"
            nxt = items[i + 1]
            assert nxt.get("type") in ("reasoning", "function_call", "message") and \
                nxt.get("role", "assistant") == "assistant", f"reasoning followed by {nxt}"


def dumps(items: list[Any]) -> str:
    return json.dumps(items)


# -- round trip and the protocol ----------------------------------------------------------------

ODD_ITEMS: list[dict[str, Any]] = [
    {"role": "user", "content": [
        {"type": "input_text", "text": "look at this ünïcødé \u2028 picture"},
        {"type": "input_image", "image_url": "data:image/png;base64,iVBORw0KGgo=",
         "detail": "low"}]},
    {"id": "rs_1", "summary": [{"text": "I should look", "type": "summary_text"},
                               {"text": "then answer", "type": "summary_text"}],
     "type": "reasoning", "encrypted_content": "gAAAAB" + "Zm9v" * 200, "status": None},
    {"arguments": "{\"q\": 1}", "call_id": "call_X", "name": "lookup", "type": "function_call",
     "id": "fc_1", "status": "completed"},
    {"id": "ws_1", "type": "web_search_call", "status": "completed",
     "action": {"type": "search", "query": "weather"}},
    {"call_id": "call_X", "output": [{"type": "input_text", "text": "found"}],
     "type": "function_call_output"},
    {"id": "rs_2", "summary": [], "type": "reasoning", "encrypted_content": "enc2"},
    {"id": "msg_1", "content": [{"annotations": [{"type": "url_citation", "url": "https://x",
                                                  "title": "x", "start_index": 0,
                                                  "end_index": 3}],
                                 "text": "Sunny", "type": "output_text", "logprobs": []}],
     "role": "assistant", "status": "completed", "type": "message"},
    {"role": "developer", "content": "be terse", "type": "message"},
    {"call_id": "c_big", "type": "custom_tool_call", "name": "patch", "input": "*** diff",
     "id": "ctc_1"},
    {"call_id": "c_big", "type": "custom_tool_call_output", "output": "applied"},
    {"role": "user", "content": "numbers", "type": "message",
     "x_big": 123456789012345678901234567890, "x_float": 0.1, "x_nested": {"b": 1, "a": [2.5e-9]}},
]


def test_items_round_trip_byte_for_byte(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"

    async def main() -> None:
        s = ContextreeSession("u1", path)
        await s.add_items(ODD_ITEMS[:5])
        await s.add_items(ODD_ITEMS[5:])
        got = await s.get_items()
        assert dumps(got) == dumps(ODD_ITEMS)
        assert got == ODD_ITEMS
        s.close()
        again = ContextreeSession("u1", path)
        assert dumps(await again.get_items()) == dumps(ODD_ITEMS)
        # the items of one model response are one assistant message, the rest one each
        msgs = [e.message for e in again.session.branch() if isinstance(e, MessageEntry)]
        assert [m.role for m in msgs] == ["user", "assistant", "tool", "assistant", "system",
                                          "assistant", "tool", "user"]
        assert [len(m.extra[ITEMS_KEY]) for m in msgs] == [1, 3, 1, 2, 1, 1, 1, 1]
        assert msgs[1].thinking[0].thinking == "I should look\nthen answer"
        assert [c.id for c in msgs[1].tool_calls or []] == ["call_X"]
        assert msgs[2].tool_call_id == "call_X" and msgs[2].text == "found"
        again.close()

    asyncio.run(main())


def test_protocol_and_wrapper_opt_in() -> None:
    from agents.memory import Session as SessionProtocol
    from agents.memory import is_openai_responses_compaction_aware_session

    s = ContextreeSession("u1")
    assert isinstance(s, SessionProtocol)
    assert _session_accepts_wrapper(s)
    assert s.session_id == "u1" and s.session_settings is not None
    # compaction-aware only with a window: the SDK digests every model input for those
    assert not is_openai_responses_compaction_aware_session(s)
    s.window = 100_000
    assert is_openai_responses_compaction_aware_session(s)
    assert is_openai_responses_compaction_aware_session(ContextreeSession("u2", window=1000))
    s.window = None
    assert not is_openai_responses_compaction_aware_session(s)


@pytest.mark.parametrize("limit", [None, 0, 1, 2, 4, 6, 7, 50, -1])
def test_limit_matches_sqlite(limit: int | None) -> None:
    items: list[dict[str, Any]] = [
        {"role": "user", "content": "hi"},
        {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}", "id": "fc1"},
        {"type": "function_call_output", "call_id": "c1", "output": "r1"},
        {"role": "assistant", "content": "ok", "type": "message"},
        {"role": "user", "content": "again"},
        {"role": "assistant", "content": "fine", "type": "message"},
        {"role": "user", "content": "bye"},
    ]

    async def main() -> None:
        ours, theirs = ContextreeSession("s"), SQLiteSession("s")
        for s in (ours, theirs):
            await s.add_items(items[:4])
            await s.add_items(items[4:])
        assert await ours.get_items(limit) == await theirs.get_items(limit)

    asyncio.run(main())


def test_limit_never_starts_with_an_orphan_output_and_settings_apply() -> None:
    async def main() -> None:
        s = ContextreeSession("s", session_settings={"limit": 2})
        await s.add_items([
            {"role": "user", "content": "hi"},
            {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
            {"type": "function_call", "call_id": "c2", "name": "f", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": "r1"},
            {"type": "function_call_output", "call_id": "c2", "output": "r2"},
            {"role": "assistant", "content": "ok"},
        ])
        # the latest 2 would start with the output of c2, whose call is cut off
        assert await s.get_items() == [{"role": "assistant", "content": "ok"}]
        assert len(await s.get_items(3)) == 1          # both outputs lost their calls
        assert len(await s.get_items(5)) == 5          # calls and outputs kept together
        assert len(await s.get_items(None)) == 1       # None: the settings' limit
        s.session_settings = None
        assert len(await s.get_items()) == 6

    asyncio.run(main())


def test_view_is_pairing_valid() -> None:
    async def main() -> None:
        s = ContextreeSession("s")
        await s.add_items([{"role": "user", "content": "go"}])
        # a reasoning item whose response was cut off, and a call that never got its output
        await s.add_items([{"type": "reasoning", "id": "rs_a", "summary": []}])
        await s.add_items([{"type": "reasoning", "id": "rs_b", "summary": []},
                           {"type": "function_call", "call_id": "c1", "name": "f",
                            "arguments": "{}", "id": "fc_1"}])
        await s.add_items([{"role": "user", "content": "hello?"}])
        await s.add_items([{"type": "function_call_output", "call_id": "zz", "output": "?"}])
        items = await s.get_items()
        assert_valid(items)
        assert [i.get("type", i.get("role")) for i in items] == [
            "user", "reasoning", "function_call", "function_call_output", "user"]
        assert items[3]["call_id"] == "c1" and "interrupted" in items[3]["output"]
        # the stored history is all there
        assert sum(len(e.message.extra[ITEMS_KEY]) for e in s.session.branch()
                   if isinstance(e, MessageEntry)) == 6

    asyncio.run(main())


def test_pop_item_moves_the_leaf_back() -> None:
    async def main() -> None:
        s = ContextreeSession("s")
        batch: list[Any] = [
            {"role": "user", "content": "q"},
            {"type": "reasoning", "id": "rs", "summary": [], "encrypted_content": "e"},
            {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
            {"type": "function_call", "call_id": "c2", "name": "f", "arguments": "{}"},
        ]
        await s.add_items(batch)
        assert await s.get_items() == batch          # open calls at the end stay open
        entries = len(s.session)
        views = []
        for _ in range(5):
            before = await s.get_items()
            # as SQLiteSession's: the item popped is the one get_items showed last
            assert await s.pop_item() == (before[-1] if before else None)
            views.append(await s.get_items())
        # a reasoning item whose response lost its other items is not shown: it goes too
        assert views == [batch[:3], batch[:1], [], [], []]
        assert len(s.session) >= entries           # nothing was deleted
        assert s.session.leaf_id is None
        await s.add_items([{"role": "user", "content": "new"}])
        assert len(s.session.tree()) == 2          # the popped items are a branch

    asyncio.run(main())


def test_clear_session_starts_an_empty_branch_or_deletes(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"

    async def main() -> None:
        s = ContextreeSession("s", path)
        await s.add_items([{"role": "user", "content": "one"}])
        await s.clear_session()
        assert await s.get_items() == []
        assert any(isinstance(e, MessageEntry) for e in s.session.entries())
        await s.add_items([{"role": "user", "content": "two"}])
        assert await s.get_items() == [{"role": "user", "content": "two"}]
        roots = s.session.tree()
        assert len(roots) == 2          # the old history is a branch of its own
        await s.clear_session(delete=True)
        assert len(s.session) == 0 and await s.get_items() == []
        s.close()
        assert "one" not in path.read_text()
        d = ContextreeSession("s", path, delete_on_clear=True)
        await d.add_items([{"role": "user", "content": "three"}])
        await d.clear_session()
        assert len(d.session) == 0
        d.close()

    asyncio.run(main())


def test_writes_survive_cancellation(monkeypatch: pytest.MonkeyPatch) -> None:
    s = ContextreeSession("s")
    real = s.session.append_message
    started = threading.Event()

    def slow(message: Any) -> str:
        started.set()
        time.sleep(0.3)
        return real(message)

    monkeypatch.setattr(s.session, "append_message", slow)

    async def main() -> None:
        task = asyncio.create_task(s.add_items([{"role": "user", "content": "keep me"}]))
        await asyncio.to_thread(started.wait)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert await s.get_items() == [{"role": "user", "content": "keep me"}]

    asyncio.run(main())


# -- through the Runner ----------------------------------------------------------------------

def test_runner_multi_turn_with_tools_matches_sqlite() -> None:
    async def main() -> None:
        results = []
        for session in (ContextreeSession("chat"), SQLiteSession("chat")):
            model = Scripted(script(3))
            a = agent(model)
            for t in range(3):
                r = await Runner.run(a, f"task {t}", session=session)
                assert r.final_output == f"done {t}"
            results.append((await session.get_items(), model.inputs))
        (ours, ours_inputs), (theirs, their_inputs) = results
        assert dumps(ours) == dumps(theirs)
        assert ours_inputs == their_inputs          # the model saw exactly the same inputs
        assert_valid(ours)

    asyncio.run(main())


def test_usage_from_the_run_context_is_kept() -> None:
    async def main() -> None:
        s = ContextreeSession("chat")
        await Runner.run(agent(Scripted(script(1))), "task", session=s)
        replies = [e.message for e in s.session.branch()
                   if isinstance(e, MessageEntry) and e.message.role == "assistant"]
        assert len(replies) == 2 and all(m.usage for m in replies)
        first, second = (m.usage for m in replies)
        assert first and second and second.input + second.cache_read > first.input
        assert second.cache_read == (second.input + second.cache_read) // 2 and second.output == 50

    asyncio.run(main())


def test_run_sync(tmp_path: Path) -> None:
    s = ContextreeSession("chat", tmp_path / "chat.jsonl")
    model = Scripted(script(2))
    a = agent(model)
    assert Runner.run_sync(a, "first", session=s).final_output == "done 0"
    assert Runner.run_sync(a, "second", session=s).final_output == "done 1"
    assert model.inputs[-1][0] == {"content": "first", "role": "user"}
    assert len(asyncio.run(s.get_items())) == 2 * 8
    s.close()


def test_run_streamed_and_a_cancelled_stream(tmp_path: Path) -> None:
    async def main() -> None:
        s = ContextreeSession("chat", tmp_path / "chat.jsonl")
        model = Scripted(script(3), delay=0.01)
        a = agent(model)
        r = Runner.run_streamed(a, "first", session=s)
        async for _ in r.stream_events():
            pass
        assert r.final_output == "done 0"
        # the second run is cancelled while the model streams its final answer
        r = Runner.run_streamed(a, "second", session=s)
        async for event in r.stream_events():
            if event.type == "raw_response_event" and model.calls == 4 and \
                    event.data.type == "response.created":
                r.cancel()
        items = await s.get_items()
        assert_valid(items)
        kinds = [i.get("type", i.get("role")) for i in items[8:]]
        assert kinds[0] == "user" and "msg_1" not in dumps(items)
        # the next run continues from what was saved
        model.script.insert(0, [text("resumed", "msg_r")])
        r = Runner.run_streamed(a, "third", session=s)
        async for _ in r.stream_events():
            pass
        assert r.final_output == "resumed"
        assert_valid(model.inputs[-1])
        s.close()

    asyncio.run(main())


@pytest.mark.slow
def test_compaction_through_the_runner(tmp_path: Path) -> None:
    path = tmp_path / "chat.jsonl"

    async def main() -> None:
        s = ContextreeSession("chat", path, window=2_000)
        model = Scripted(script(8, big=600))
        a = agent(model)
        for t in range(8):
            await Runner.run(a, f"task {t} " + "please " * 50, session=s)
        compactions = s.session.find(CompactionEntry)
        assert compactions, "the runner's run_compaction call compacted"
        assert s.last_compaction is not None and s.last_compaction.entry_id
        items = await s.get_items()
        assert_valid(items)
        assert len(items) < 8 * 8
        # the model's latest input is the compacted view plus the new turn
        assert_valid(model.inputs[-1])
        assert any("compacted" in str(i.get("content", "")) or
                   i.get("output", "").startswith("[") for i in model.inputs[-1])
        # the history is all still there
        stored = sum(len(e.message.extra[ITEMS_KEY]) for e in s.session.entries()
                     if isinstance(e, MessageEntry))
        assert stored == 8 * 8
        view = dumps(items)
        s.close()
        # reopen in another process: the same compacted view
        code = (
            "import asyncio, json, sys\n"
            "from contextree.integrations.openai_agents import ContextreeSession\n"
            f"s = ContextreeSession('chat', {str(path)!r})\n"
            "print(json.dumps(asyncio.run(s.get_items())))\n"
        )
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             env={"PYTHONPATH": str(SRC)}, check=True).stdout
        assert out.strip() == view

    asyncio.run(main())


def test_run_compaction_needs_a_window_and_respects_the_trigger() -> None:
    async def main() -> None:
        s = ContextreeSession("chat")
        await s.add_items([{"role": "user", "content": "hi " * 100}])
        assert s.compact(force=True) is None       # no window: nothing to compact to
        s.window = 100_000
        await s.run_compaction({"response_id": "r"})
        assert s.last_compaction is None           # far under the trigger
        for i in range(20):
            await s.add_items([{"role": "user", "content": f"{i} " + "word " * 300},
                               {"role": "assistant", "content": "ok"}])
        await s.run_compaction({"force": True})
        assert s.last_compaction is not None and s.last_compaction.entry_id
        assert_valid(await s.get_items())

    asyncio.run(main())


def test_pop_after_compaction_keeps_the_compacted_view() -> None:
    async def main() -> None:
        s = ContextreeSession("chat")  # no window yet: add_items does not compact
        for i in range(30):
            await s.add_items([{"role": "user", "content": f"{i} " + "word " * 100}])
            await s.add_items([{"role": "assistant", "content": f"answer {i}"}])
        s.window = 3_000
        await s.run_compaction()
        assert s.session.find(CompactionEntry)
        before = await s.get_items()
        popped = await s.pop_item()
        assert popped == {"role": "assistant", "content": "answer 29"}
        assert await s.get_items() == before[:-1]
        assert isinstance(s.session.branch()[-1], CompactionEntry)

    asyncio.run(main())


def test_missing_extra_names_it() -> None:
    code = (
        "import sys\n"
        "sys.modules['agents'] = None\n"
        "try:\n"
        "    import contextree.integrations.openai_agents\n"
        "except ImportError as e:\n"
        "    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={"PYTHONPATH": str(SRC)}, check=True).stdout
    assert "contextree[openai-agents]" in out


def test_a_contextree_session_can_be_handed_over() -> None:
    base = ct.Session.in_memory()
    base.append_message(ct.Message.user("from contextree"))
    base.append_message(ct.Message.assistant("", tool_calls=[
        ct.ToolCall(id="c1", name="f", arguments={"x": 1})]))
    base.append_message(ct.Message.tool("result", tool_call_id="c1"))
    s = ContextreeSession("x", base)
    items = asyncio.run(s.get_items())
    assert items == [{"role": "user", "content": "from contextree"},
                     {"type": "function_call", "call_id": "c1", "name": "f",
                      "arguments": '{"x":1}'},
                     {"type": "function_call_output", "call_id": "c1", "output": "result"}]


def test_the_view_kept_up_to_date_equals_a_rebuild() -> None:
    """``add_items`` extends the cached view; it must be what a rebuild from the session
    gives, whatever the items (orphans, cut-off reasoning, calls moved past...)."""
    import random

    def batch(rng: random.Random, n: int) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for _ in range(rng.randint(1, 5)):
            r = rng.random()
            cid = f"c{rng.randint(0, n + 3)}"
            if r < 0.2:
                out.append({"role": "user", "content": f"u{n}"})
            elif r < 0.35:
                out.append({"type": "reasoning", "id": f"rs{n}{len(out)}", "summary": []})
            elif r < 0.55:
                out.append({"type": "function_call", "call_id": cid, "name": "f",
                            "arguments": "{}"})
            elif r < 0.6:
                out.append({"type": "custom_tool_call", "call_id": cid, "name": "p",
                            "input": "x"})
            elif r < 0.8:
                out.append({"type": "function_call_output", "call_id": cid, "output": "r"})
            else:
                out.append({"type": "message", "role": "assistant", "content": f"a{n}"})
        return out

    async def main() -> None:
        for seed in range(40):
            rng = random.Random(seed)
            s = ContextreeSession("s", window=10_000_000)
            for n in range(12):
                await s.add_items(batch(rng, n))
                kept = s.view()
                tokens = s._current().tokens
                s._v = None                       # force a rebuild
                assert s.view() == kept, f"seed {seed}, batch {n}"
                assert s._current().tokens == tokens

    asyncio.run(main())


@pytest.mark.postgres
def test_on_postgresql_items_round_trip_and_compaction_persists() -> None:
    url = as_url(require_postgres())

    async def main() -> None:
        s = ContextreeSession("pg-chat", url, window=2_000)
        assert s.session.location.startswith("postgresql://")
        await s.add_items(ODD_ITEMS[:5])
        await s.add_items(ODD_ITEMS[5:])
        assert dumps(await s.get_items()) == dumps(ODD_ITEMS)   # key order kept (not jsonb)
        model = Scripted(script(4, big=600))
        for t in range(4):
            await Runner.run(agent(model), f"task {t} " + "please " * 50, session=s)
        assert s.session.find(CompactionEntry)
        view = dumps(await s.get_items())
        s.close()
        again = ContextreeSession("pg-chat", url, window=2_000)
        assert dumps(await again.get_items()) == view
        await again.clear_session(delete=True)
        assert await again.get_items() == []
        again.close()

    asyncio.run(main())
