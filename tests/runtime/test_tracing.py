"""OpenTelemetry spans from the agent's events, checked with the SDK's in-memory exporter:
a turn span, a span per model call, tool call and compaction, with the session id, the
entry ids, tokens and cost, and no message content unless asked for."""

from __future__ import annotations

import asyncio
import builtins
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

import contextree as ct
from contextree import Message, Session, ToolCall, Usage
from contextree.models import OpenAIChat, ScriptedModel
from contextree.runtime import (
    DefaultCompactionPipeline,
    DefaultToolPipeline,
    Event,
    SessionTree,
    SystemPrompt,
    ToolResultLoop,
    Tracing,
)
from fakes.models import HeldModel
from fakes.openai_server import OpenAIServer, completion, tool_call
from fakes.tools import lookup
from helpers import SRC

otel = pytest.importorskip("opentelemetry.sdk.trace")
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import (  # noqa: E402
    BatchSpanProcessor,
    SimpleSpanProcessor,
)
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: E402
    InMemorySpanExporter,
)
from opentelemetry.trace import SpanKind, StatusCode  # noqa: E402


def _tracing(*processors: SpanProcessor, **options: Any) -> tuple[Tracing, InMemorySpanExporter]:
    """A ``Tracing`` whose spans reach an in-memory exporter (and ``processors``)."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    for processor in processors:
        provider.add_span_processor(processor)
    return Tracing(tracer_provider=provider, **options), exporter


def _spans(tracing: Tracing, exporter: InMemorySpanExporter) -> tuple[Any, ...]:
    """The spans exported once ``tracing`` made those of the turns that ended."""
    assert tracing.flush()
    return exporter.get_finished_spans()


def _by_name(tracing: Tracing, exporter: InMemorySpanExporter) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    for span in _spans(tracing, exporter):
        out.setdefault(span.name, []).append(span)
    return out


def _turn(path: Path, server: OpenAIServer, tracing: Tracing) -> None:
    server.reply(completion(tool_calls=[tool_call("call_1", "lookup", {"city": "Oslo"})]),
                 completion("Sunny."))
    model = OpenAIChat("gpt-test", base_url=server.base_url, api_key="k", temperature=0.2)
    agent = (ct.agent().use(SessionTree, path=path).use(SystemPrompt, text="Secret prompt.")
             .use(ToolResultLoop).use(DefaultToolPipeline, tools=[lookup]).run(model))
    agent.on("*", tracing)
    assert agent.start("Weather in Oslo?").text == "Sunny."


def test_a_turn_gives_genai_spans_with_session_and_entry_ids(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    tracing, exporter = _tracing()
    with OpenAIServer() as server:
        _turn(path, server, tracing)
    spans = _by_name(tracing, exporter)
    (turn,) = spans["invoke_agent contextree"]
    chats = spans["chat gpt-test"]
    (tool,) = spans["execute_tool lookup"]
    assert len(chats) == 2
    with Session.open(path, readonly=True) as s:
        session_id = s.id
        replies = [e.id for e in s.branch() if isinstance(e, ct.entries.MessageEntry)
                   and e.message.role == "assistant"]
        (result,) = [e.id for e in s.branch() if isinstance(e, ct.entries.MessageEntry)
                     and e.message.role == "tool"]
        leaf = s.leaf_id
    assert turn.attributes["gen_ai.conversation.id"] == session_id
    assert turn.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert turn.attributes["gen_ai.usage.input_tokens"] == 24
    assert turn.attributes["gen_ai.usage.output_tokens"] == 10
    assert turn.attributes["contextree.leaf_id"] == leaf
    for chat, entry_id in zip(chats, replies, strict=True):
        assert chat.kind is SpanKind.CLIENT and chat.parent.span_id == turn.context.span_id
        a = chat.attributes
        assert a["gen_ai.operation.name"] == "chat" and a["gen_ai.provider.name"] == "openai"
        assert a["gen_ai.request.model"] == "gpt-test" and a["gen_ai.request.temperature"] == 0.2
        assert a["gen_ai.usage.input_tokens"] == 12 and a["gen_ai.usage.output_tokens"] == 5
        assert a["contextree.entry_id"] == entry_id and a["gen_ai.conversation.id"] == session_id
        assert "contextree.cost_usd" in a or a["contextree.cost_unknown"] is True
    assert tool.parent.span_id == turn.context.span_id
    assert tool.attributes["gen_ai.tool.call.id"] == "call_1"
    assert tool.attributes["contextree.entry_id"] == result
    # Content is off by default: no prompt, message or tool output in any attribute.
    for span in _spans(tracing, exporter):
        for value in span.attributes.values():
            assert "Secret prompt" not in str(value) and "Oslo" not in str(value)


def test_the_spans_keep_the_times_and_order_the_turn_ran_in(tmp_path: Path) -> None:
    # The spans are handed to the SDK when the turn ends, with the times recorded as it ran.
    tracing, exporter = _tracing()
    with OpenAIServer() as server:
        _turn(tmp_path / "s.jsonl", server, tracing)
    spans = _by_name(tracing, exporter)
    (turn,) = spans["invoke_agent contextree"]
    first, second = spans["chat gpt-test"]
    (tool,) = spans["execute_tool lookup"]
    assert turn.start_time <= first.start_time < first.end_time <= tool.start_time
    assert tool.start_time < tool.end_time <= second.start_time < second.end_time
    assert second.end_time <= turn.end_time
    # Children are exported before their parent, as when each ended on its own.
    names = [s.name for s in _spans(tracing, exporter)]
    assert names[-1] == "invoke_agent contextree"


def test_capture_content_records_messages_and_tool_io(tmp_path: Path) -> None:
    tracing, exporter = _tracing(capture_content=True)
    with OpenAIServer() as server:
        _turn(tmp_path / "s.jsonl", server, tracing)
    spans = _by_name(tracing, exporter)
    first = spans["chat gpt-test"][0].attributes
    assert first["gen_ai.system_instructions"] == "Secret prompt."
    assert "Weather in Oslo?" in first["gen_ai.input.messages"]
    tool = spans["execute_tool lookup"][0].attributes
    assert "Oslo" in tool["gen_ai.tool.call.arguments"]
    assert tool["gen_ai.tool.call.result"] == "sunny in Oslo"


def test_several_system_messages_are_the_system_instructions_in_order(tmp_path: Path) -> None:
    tracing, exporter = _tracing(capture_content=True)

    def preamble(app: ct.runtime.App) -> ct.runtime.App:
        def call(env: ct.runtime.Env) -> ct.runtime.Env:
            env.put_first(Message.system("Rules first."))
            return app(env)
        return call

    agent = (ct.agent().use(SessionTree, path=tmp_path / "s.jsonl")
             .use(SystemPrompt, text="Secret prompt.").use(preamble).run(ScriptedModel(["ok"])))
    agent.on("*", tracing)
    agent.start("Hi")
    (chat,) = _by_name(tracing, exporter)["chat scripted"]
    assert chat.attributes["gen_ai.system_instructions"] == ("Rules first.", "Secret prompt.")


def test_captured_content_is_redacted_unless_redact_false(tmp_path: Path) -> None:
    import random
    import string
    rng = random.Random(22)
    key = "AKIA" + "".join(rng.choice(string.ascii_uppercase + string.digits) for _ in range(16))
    token = "ghp_" + "".join(rng.choice(string.ascii_letters + string.digits) for _ in range(36))
    for redact in (True, False):
        tracing, exporter = _tracing(capture_content=True, redact=redact)
        with OpenAIServer() as server:
            server.reply(completion(tool_calls=[tool_call("call_1", "lookup", {"city": key})]),
                         completion(f"Deployed with {token}."))
            model = OpenAIChat("gpt-test", base_url=server.base_url, api_key="k")
            agent = (ct.agent().use(SessionTree, path=tmp_path / f"{redact}.jsonl")
                     .use(SystemPrompt, text=f"You deploy with {token}.").use(ToolResultLoop)
                     .use(DefaultToolPipeline, tools=[lookup]).run(model))
            agent.on("*", tracing)
            agent.start(f"Weather with {key}?")
        recorded = " ".join(str(v) for span in _spans(tracing, exporter)
                            for v in span.attributes.values())
        spans = _by_name(tracing, exporter)
        tool = spans["execute_tool lookup"][0].attributes
        last = spans["chat gpt-test"][-1].attributes
        if redact:  # the system prompt, the messages in and out, the tool's input and output
            assert key not in recorded and token not in recorded
            assert "[REDACTED:aws-key:1]" in tool["gen_ai.tool.call.arguments"]
            assert tool["gen_ai.tool.call.result"] == "sunny in [REDACTED:aws-key:1]"
            assert "[REDACTED:github-token:1]" in last["gen_ai.system_instructions"]
            assert "[REDACTED:github-token:1]" in last["gen_ai.output.messages"]
            assert "Weather with [REDACTED:aws-key:1]?" in last["gen_ai.input.messages"]
        else:
            assert key in tool["gen_ai.tool.call.result"] and token in last["gen_ai.output.messages"]
        with Session.open(tmp_path / f"{redact}.jsonl", readonly=True) as s:  # stored as it was
            assert key in str([e for e in s.entries()])


def test_a_compaction_and_an_interruption_have_their_spans(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    tracing, exporter = _tracing()
    with Session.create(path) as s:
        for i in range(12):
            s.append_message(Message.user(f"Task {i}: refactor module {i} " + "word " * 300))
            s.append_message(Message.assistant(f"Done with module {i}."))
    summarizer = ScriptedModel([Message.assistant("## Objective\nRefactor modules.",
                                                  usage=Usage(input=900, output=20,
                                                              cost=0.001))] * 3,
                               name="summarizer-x")
    model = ScriptedModel(["All done."])
    agent = (ct.agent().use(SessionTree, path=path).use(ToolResultLoop)
             .use(DefaultCompactionPipeline, window=4000, summarizer=summarizer).run(model))
    agent.on("*", tracing)
    agent.start("And now?")
    (compaction,) = _by_name(tracing, exporter)["contextree.compaction"]
    a = compaction.attributes
    with Session.open(path, readonly=True) as s:
        (entry,) = s.find(ct.entries.CompactionEntry)
    assert a["contextree.entry_id"] == entry.id
    assert a["contextree.tokens_before"] > a["contextree.tokens_after"]
    assert a["gen_ai.usage.input_tokens"] == sum(
        c["usage"]["input"] for c in entry.details["calls"])

    held = HeldModel(["Some words that arrive slowly."], chunk=3, hold_after=2)
    agent = ct.agent().use(SessionTree, path=path).run(held)
    agent.on("*", tracing)
    stream = agent.stream("More?")
    for event in stream:
        if event["event"] == Event.TEXT_DELTA:
            break
    threading.Timer(0.2, held.release.set).start()
    stream.close()
    cut = [s for s in _spans(tracing, exporter) if s.name == "chat scripted"][-1]
    assert cut.status.status_code is StatusCode.ERROR
    assert cut.attributes["error.type"] == "interrupted"
    assert cut.attributes["gen_ai.usage.input_tokens"] > 0  # estimated, as the stats count it
    with Session.open(path, readonly=True) as s:
        assert cut.attributes["contextree.entry_id"] == s.leaf_id  # the partial reply
    turns = _by_name(tracing, exporter)["invoke_agent contextree"]
    assert turns[-1].attributes["contextree.stopped"] == "interrupted"


def test_without_the_extra_the_error_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    real_import = builtins.__import__

    def no_otel(name: str, *args: Any, **kwargs: Any) -> Any:
        if name.startswith("opentelemetry"):
            raise ImportError(f"No module named {name!r}")
        return real_import(name, *args, **kwargs)

    for name in [m for m in sys.modules if m.startswith("opentelemetry")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setattr(builtins, "__import__", no_otel)
    with pytest.raises(ImportError, match=r"pip install 'contextree\[otel\]'"):
        Tracing()


def test_tracing_never_breaks_a_turn_it_cannot_follow(tmp_path: Path) -> None:
    # Events of a turn that started before the handler was added are ignored.
    tracing, exporter = _tracing()
    model = ScriptedModel([Message.assistant("", tool_calls=[ToolCall(id="c", name="lookup",
                                                                      arguments={"city": "X"})]),
                           "ok"])
    agent = (ct.agent().use(SessionTree, path=tmp_path / "s.jsonl").use(ToolResultLoop)
             .use(DefaultToolPipeline, tools=[lookup]).run(model))
    late: list[bool] = []

    def add_late(env: ct.runtime.Env, payload: Any) -> None:
        if not late:
            late.append(True)
            agent.on("*", tracing)

    agent.on(Event.MODEL_START, add_late)
    turn = agent.start("go")
    assert turn.text == "ok" and not turn.handler_errors
    assert _spans(tracing, exporter) == ()



class _Threads(SpanProcessor):
    """Records the name of the thread each span ended on."""

    def __init__(self) -> None:
        self.names: list[str] = []

    def on_end(self, span: ReadableSpan) -> None:
        self.names.append(threading.current_thread().name)


def test_the_spans_are_made_off_the_turns_thread_once_it_ended(tmp_path: Path) -> None:
    threads = _Threads()
    tracing, exporter = _tracing(threads)
    turn_thread: list[str] = []
    agent = ct.agent().use(SessionTree, path=tmp_path / "s.jsonl").run(ScriptedModel(["ok"]))
    agent.on(Event.TURN_END, lambda env, p: turn_thread.append(threading.current_thread().name))
    agent.on("*", tracing)
    agent.start("Hi")
    deadline = time.monotonic() + 60  # no flush: the daemon thread makes them, in a while
    while len(exporter.get_finished_spans()) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert sorted(s.name for s in exporter.get_finished_spans()) == [
        "chat scripted", "invoke_agent contextree"]
    assert threads.names == ["contextree-tracing"] * 2
    assert turn_thread and turn_thread[0] != "contextree-tracing"


def test_flush_and_close_have_the_provider_export_every_span(tmp_path: Path) -> None:
    # A batch processor that would wait a minute exports them once flushed.
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(exporter, schedule_delay_millis=60_000))
    with Tracing(tracer_provider=provider) as tracing:
        agent = ct.agent().use(SessionTree, path=tmp_path / "s.jsonl").run(
            ScriptedModel(["one", "two"]))
        agent.on("*", tracing)
        agent.start("Hi")
        assert tracing.flush()
        assert len(exporter.get_finished_spans()) == 2
        agent.start("Again")
    assert len(exporter.get_finished_spans()) == 4  # leaving the block closed it: flushed
    provider.shutdown()


_EXITS_WITHOUT_CLOSE = """
import sys
from pathlib import Path

import contextree as ct
from contextree.models import ScriptedModel
from contextree.runtime import SessionTree, Tracing, _tracing
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

out = Path(sys.argv[1])
_tracing._MAKER.delay = 3600  # the daemon thread would make them in an hour: exit does


class ToFile(SpanExporter):
    def export(self, spans):
        with out.open("a") as f:
            f.writelines(span.name + "\\n" for span in spans)
        return SpanExportResult.SUCCESS


tracing = Tracing()  # the global provider, set afterwards: it shuts down at exit first
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(ToFile()))
trace.set_tracer_provider(provider)
agent = ct.agent().use(SessionTree, path=out.with_suffix(".jsonl")).run(ScriptedModel(["ok"]))
agent.on("*", tracing)
agent.start("Hi")
out.write_text("")  # the turn ended; its spans are still queued: exit now, no close()
"""


def test_spans_still_queued_when_the_process_exits_are_exported(tmp_path: Path) -> None:
    out = tmp_path / "spans.txt"
    subprocess.run([sys.executable, "-c", _EXITS_WITHOUT_CLOSE, str(out)], check=True,
                   env={"PYTHONPATH": str(SRC), "PATH": "/usr/bin:/bin"}, timeout=120)
    assert sorted(out.read_text().splitlines()) == ["chat scripted", "invoke_agent contextree"]


def _meeting(n: int) -> Any:
    """A tool every one of ``n`` turns must be inside at once before any returns."""
    barrier = threading.Barrier(n, timeout=60)

    @ct.tool
    def meet(city: str) -> str:
        """Wait for the other turns.

        Args:
            city: Which city.
        """
        barrier.wait()
        return f"met in {city}"

    return meet


def _meeting_agent(path: Path, meet: Any, tracing: Tracing, i: int) -> ct.runtime.Agent:
    call = ToolCall(id=f"call_{i}", name="meet", arguments={"city": f"C{i}"})
    agent = (ct.agent().use(SessionTree, path=path).use(ToolResultLoop)
             .use(DefaultToolPipeline, tools=[meet])
             .run(ScriptedModel([Message.assistant("", tool_calls=[call]), f"done {i}"])))
    agent.on("*", tracing)
    return agent


def _check_each_turn_has_its_spans(tracing: Tracing, exporter: InMemorySpanExporter,
                                   paths: list[Path]) -> None:
    spans = _spans(tracing, exporter)
    turns = {s.attributes["gen_ai.conversation.id"]: s for s in spans
             if s.name == "invoke_agent contextree"}
    assert len(turns) == len(paths)
    for i, path in enumerate(paths):
        with Session.open(path, readonly=True) as s:
            turn = turns[s.id]
            entries = {e.id for e in s.entries()}
        children = [c for c in spans if c.parent is not None
                    and c.parent.span_id == turn.context.span_id]
        assert sorted(c.name for c in children) == ["chat scripted", "chat scripted",
                                                    "execute_tool meet"]
        for child in children:
            assert child.context.trace_id == turn.context.trace_id
            assert child.attributes["contextree.entry_id"] in entries
            if child.name == "execute_tool meet":
                assert child.attributes["gen_ai.tool.call.id"] == f"call_{i}"
            else:
                assert child.attributes["gen_ai.conversation.id"] == s.id


def test_turns_in_several_threads_at_once_keep_their_own_spans(tmp_path: Path) -> None:
    tracing, exporter = _tracing()
    meet = _meeting(4)
    paths = [tmp_path / f"s{i}.jsonl" for i in range(4)]
    agents = [_meeting_agent(path, meet, tracing, i) for i, path in enumerate(paths)]
    results: list[Any] = [None] * 4

    def run(i: int) -> None:
        results[i] = agents[i].start("Go")

    threads = [threading.Thread(target=run, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert [r.text for r in results] == [f"done {i}" for i in range(4)]
    _check_each_turn_has_its_spans(tracing, exporter, paths)


def test_turns_in_several_asyncio_tasks_keep_their_own_spans(tmp_path: Path) -> None:
    tracing, exporter = _tracing()
    meet = _meeting(3)
    paths = [tmp_path / f"s{i}.jsonl" for i in range(3)]
    agents = [_meeting_agent(path, meet, tracing, i) for i, path in enumerate(paths)]

    async def all_at_once() -> list[Any]:
        return await asyncio.gather(*(agent.astart("Go") for agent in agents))

    results = asyncio.run(all_at_once())
    assert [r.text for r in results] == [f"done {i}" for i in range(3)]
    _check_each_turn_has_its_spans(tracing, exporter, paths)
