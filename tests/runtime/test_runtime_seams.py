"""The runtime's typed seams: events from one enum with one payload each, middleware options
checked at ``use()``, an ``Env`` that changes only through its methods, and truncation chosen
by a tool's kind rather than its name."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

import contextree as ct
from contextree import Message, OverflowStore, ThinkingPart, Usage
from contextree.errors import InvalidArgument, ModelUnavailable
from contextree.models import ScriptedModel
from contextree.runtime import (
    PAYLOADS,
    Budget,
    DefaultCompactionPipeline,
    DefaultToolPipeline,
    DoomLoop,
    Env,
    Event,
    MaxIterations,
    Retry,
    SessionLog,
    SessionTree,
    StopReason,
    SystemPrompt,
    ToolResultLoop,
)
from contextree.tools import ToolKind
from fakes.models import HeldModel
from helpers import calling as call


def numbered(n: int) -> str:
    return "\n".join(f"line {i}" for i in range(n))


# -- use() checks options at once -----------------------------------------------------------


def test_use_refuses_an_unknown_option_naming_the_accepted_ones() -> None:
    agent = ct.agent()
    with pytest.raises(InvalidArgument) as info:
        agent.use(SystemPrompt, txt="hi")  # type: ignore[call-arg]
    message = str(info.value)
    assert message.startswith("SystemPrompt: unknown option 'txt'")
    assert "It accepts text='You are a helpful assistant.'" in message
    assert agent._layers == []  # nothing was added


def test_use_reports_missing_required_options() -> None:
    with pytest.raises(InvalidArgument) as info:
        ct.agent().use(DefaultCompactionPipeline, windw=1000)  # type: ignore[call-arg]
    message = str(info.value)
    assert "unknown option 'windw'" in message
    assert "missing required option 'window'" in message
    assert "window (required)" in message and "compact_at=0.7" in message
    with pytest.raises(InvalidArgument, match="SessionLog: missing required option 'path'"):
        ct.agent().use(SessionLog)  # type: ignore[call-arg]
    with pytest.raises(InvalidArgument, match="unknown option 'durabel'"):
        ct.agent().use(SessionTree, path="s.jsonl", durabel=False)  # type: ignore[call-arg]


def test_use_accepts_what_the_constructor_accepts(tmp_path: Path) -> None:
    agent = (ct.agent()
             .use(SessionTree, path=tmp_path / "s.jsonl", durable=False)
             .use(SystemPrompt, "positional text")
             .use(ToolResultLoop)
             .use(MaxIterations, limit=5)
             .run(ScriptedModel(["ok"])))
    assert agent.start("hi").text == "ok"


# -- on() knows the events -----------------------------------------------------------------


def test_on_refuses_an_unknown_event_listing_the_events() -> None:
    agent = ct.agent()
    with pytest.raises(InvalidArgument) as info:
        agent.on("compactd", lambda env, p: None)
    message = str(info.value)
    assert "unknown event 'compactd'" in message
    for event in Event:
        assert event.value in message
    agent.on(Event.COMPACTED, lambda env, p: None).on("compacted", lambda env, p: None)
    agent.on("*", lambda env, p: None)


def test_on_accepts_an_event_member_and_its_name_alike() -> None:
    seen: list[str] = []
    agent = ct.agent().run(ScriptedModel(["a"]))
    agent.on(Event.MODEL_REPLY, lambda env, p: seen.append("member"))
    agent.on("model_reply", lambda env, p: seen.append("name"))
    agent.start("hi")
    assert seen == ["member", "name"]


# -- every payload has exactly its TypedDict's keys ------------------------------------------


@ct.tool
def lines(n: int) -> str:
    """Return ``n`` lines.

    Args:
        n: How many.
    """
    return numbered(n)


def _collect(agent: ct.Agent, into: list[dict[str, Any]]) -> ct.Agent:
    return agent.on("*", lambda env, p: into.append(p))


def _all_events(tmp_path: Path) -> list[dict[str, Any]]:
    """Run agents that between them emit every event the runtime has."""
    seen: list[dict[str, Any]] = []
    store = OverflowStore(tmp_path / "overflow", gc_interval=None)
    # model_reply, tool_start, tool_end, truncated, compaction_start, compacted, max_iterations
    model = ScriptedModel([call(f"c{i}", "lines", n=2500) for i in range(6)])
    _collect(ct.agent().use(SessionTree, path=tmp_path / "a.jsonl").use(ToolResultLoop)
             .use(MaxIterations, limit=4).use(DefaultCompactionPipeline, window=12_000)
             .use(DefaultToolPipeline, tools=[lines], store=store).run(model), seen).start("go")
    # compaction_failed: the task alone is bigger than the window
    giant = "The whole task, in detail. " * 1500
    _collect(ct.agent().use(SessionTree, path=tmp_path / "b.jsonl")
             .use(DefaultCompactionPipeline, window=4000).run(ScriptedModel(["ok"])),
             seen).start(giant)
    # retry
    flaky = ScriptedModel([ModelUnavailable("503", status=503), "ok"])
    _collect(ct.agent().use(Retry, sleep=lambda s: None).run(flaky), seen).start("hi")
    # doom_loop
    same = ScriptedModel([call(f"d{i}", "lines", n=1) for i in range(5)])
    _collect(ct.agent().use(ToolResultLoop).use(DoomLoop, threshold=2)
             .use(DefaultToolPipeline, tools=[lines]).run(same), seen).start("go")
    # thinking_delta; budget
    thinks = ScriptedModel([ct.Message.assistant([ThinkingPart(thinking="hmm"),
                                                  ct.TextPart(text="ok")])])
    _collect(ct.agent().run(thinks), seen).start("think")
    _collect(ct.agent().use(Budget, max_tokens=1).run(ScriptedModel(["x"])), seen).start("hi")
    # interrupted: the stream is closed mid-reply
    held = HeldModel(["a long reply " * 20], chunk=2)
    with _collect(ct.agent().run(held), seen).stream("talk") as stream:
        for payload in stream:
            if payload["event"] == Event.TEXT_DELTA:
                break
    return seen


def test_every_runtime_event_payload_has_exactly_its_keys(tmp_path: Path) -> None:
    seen = _all_events(tmp_path)
    assert {p["event"] for p in seen} == set(Event)
    for payload in seen:
        event = Event(payload["event"])
        assert isinstance(payload["event"], Event)
        assert set(payload) == {f.name for f in dataclasses.fields(PAYLOADS[event])}, event
        assert isinstance(payload, PAYLOADS[event])


# -- Env changes only through its methods ---------------------------------------------------


def test_env_state_cannot_be_changed_behind_its_methods() -> None:
    env = Env([Message.user("hi")])
    added: list[Message] = []
    env.on_add(added.append)
    with pytest.raises(AttributeError):
        env.messages.append(Message.user("sneaked in"))  # type: ignore[attr-defined]
    for name, value in [("messages", []), ("iteration", 3), ("stopped", "x"),
                        ("turn_start", 1), ("fresh_from", 0), ("session", None),
                        ("tools", []), ("notices", [])]:
        with pytest.raises(AttributeError):
            setattr(env, name, value)
    with pytest.raises(TypeError):
        env.metadata["model_options"] = {}  # type: ignore[index]
    snapshot = env.messages
    env.add(Message.assistant("hello"))
    assert [m.text for m in snapshot] == ["hi"]  # a snapshot, not a live list
    assert [m.text for m in env.messages] == ["hi", "hello"]
    assert added == [env.messages[-1]]  # add() told the listener
    assert env.next_iteration() == 1 == env.iteration
    env.stop(StopReason.MIDDLEWARE, "a notice")
    assert env.stopped == "middleware" and env.notices == ("a notice",)
    with pytest.raises(InvalidArgument, match="unknown stop reason 'why'"):
        env.stop("why", "a notice")  # type: ignore[arg-type]


def test_a_middleware_cannot_slip_a_message_past_persistence(tmp_path: Path) -> None:
    class Sneaky:
        def __init__(self, app: Any, /) -> None:
            self.app = app

        def __call__(self, env: Env) -> Env:
            env.messages.append(Message.user("unrecorded"))  # type: ignore[attr-defined]
            return self.app(env)

    agent = (ct.agent().use(SessionLog, path=tmp_path / "log.jsonl").use(Sneaky)
             .run(ScriptedModel(["ok"])))
    with pytest.raises(AttributeError):
        agent.start("hi")


def test_fresh_from_follows_replace_history_and_the_system_prompt() -> None:
    used = Message.assistant("old", usage=Usage(input=100, output=5, total=105))
    env = Env([Message.user("new")])
    env.load_history([Message.user("q"), used], fresh_from=0)
    assert env.turn_start == 2 and env.usage_anchor() == 1
    env.put_first(Message.system("sys"))
    assert env.turn_start == 3 and env.usage_anchor() == 2
    env.replace(env.messages)  # after a compaction no reported usage describes the view
    assert env.fresh_from == 4 and env.turn_start == 0 and env.usage_anchor() is None
    env.add(Message.assistant("fresh", usage=Usage(input=50, output=5, total=55)))
    assert env.usage_anchor() == 4
    env.put_first(Message.system("another"))
    assert env.fresh_from == 5 and env.usage_anchor() == 5

    stale = Env()
    stale.load_history([Message.user("q"), used], fresh_from=2)  # a compacted history
    assert stale.usage_anchor() is None


# -- the tool's kind decides which end truncation keeps --------------------------------------


def _turn(tmp_path: Path, tool: ct.Tool) -> Message:
    store = OverflowStore(tmp_path / "overflow", gc_interval=None)
    model = ScriptedModel([call("c1", tool.name), "ok"])
    result = (ct.agent().use(ToolResultLoop)
              .use(DefaultToolPipeline, tools=[tool], store=store).run(model)).start("go")
    return next(m for m in result.messages if m.role == "tool")


def test_a_tool_named_shell_that_is_no_shell_is_head_truncated(tmp_path: Path) -> None:
    @ct.tool(name="shell")
    def not_a_shell() -> str:
        """Return many lines."""
        return numbered(5000)

    assert not_a_shell.kind is ToolKind.OTHER and not_a_shell.truncate_from == "head"
    message = _turn(tmp_path, not_a_shell)
    assert message.text.startswith("line 0\n")
    assert message.truncation is not None and message.truncation.direction == "head"


def test_a_shell_kind_tool_with_another_name_is_tail_truncated(tmp_path: Path) -> None:
    @ct.tool(kind=ToolKind.SHELL)
    def run_tests() -> str:
        """Return many lines."""
        return numbered(5000)

    assert run_tests.truncate_from == "tail"
    message = _turn(tmp_path, run_tests)
    assert not message.text.startswith("line 0\n")
    assert "line 4999\n" in message.text
    assert message.truncation is not None and message.truncation.direction == "tail"


def test_truncate_from_overrides_the_kind(tmp_path: Path) -> None:
    @ct.tool(kind=ToolKind.READ, truncate_from="tail")
    def log() -> str:
        """Return many lines."""
        return numbered(5000)

    assert "line 4999\n" in _turn(tmp_path, log).text


def test_pipeline_limits_come_from_one_object(tmp_path: Path) -> None:
    store = OverflowStore(tmp_path / "overflow", gc_interval=None)
    limits = ct.TruncationLimits(max_lines=10)
    model = ScriptedModel([call("c1", "lines", n=50), "ok"])
    events: list[dict[str, Any]] = []
    agent = (ct.agent().use(ToolResultLoop)
             .use(DefaultToolPipeline, tools=[lines], store=store, limits=limits).run(model))
    result = agent.on(Event.TRUNCATED, lambda env, p: events.append(p)).start("go")
    message = next(m for m in result.messages if m.role == "tool")
    assert message.truncation is not None and message.truncation.shown_lines == 10
    assert [(e["total_lines"], e["saved_path"] is not None) for e in events] == [(50, True)]


def test_tool_events_carry_typed_payloads(tmp_path: Path) -> None:
    ends: list[dict[str, Any]] = []
    model = ScriptedModel([call("c1", "lines", n=2), "ok"])
    agent = (ct.agent().use(ToolResultLoop).use(DefaultToolPipeline, tools=[lines])
             .run(model).on(Event.TOOL_END, lambda env, p: ends.append(p)))
    agent.start("go")
    assert [(e["event"], e["call"].id, e["result"].content) for e in ends] == [
        (Event.TOOL_END, "c1", "line 0\nline 1")]
