"""The agent runtime: the middleware stack, persistence, the tool loop and its guards.

Every test is offline and deterministic: a ``ScriptedModel`` plays the provider, and its
replies are often callables that look at the messages the runtime sent.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

import contextree as ct
from contextree import Message, OverflowStore, Session, ToolCall
from contextree._context import INTERRUPTED
from contextree.entries import CompactionEntry, MessageEntry
from contextree.errors import (
    ModelError,
    ModelRateLimited,
    ModelRequestRejected,
    ModelUnavailable,
)
from contextree.models import ScriptedModel
from contextree.runtime import (
    DefaultCompactionPipeline,
    DefaultToolPipeline,
    DoomLoop,
    Env,
    MaxIterations,
    Retry,
    SessionLog,
    SessionTree,
    SystemPrompt,
    ToolResultLoop,
)
from contextree.tools import make_tools
from helpers import calling as call
from helpers import texts

BRUTE_KEYS = {"role", "content", "tool_calls", "tool_call_id"}


def calls(*spec: tuple[str, str, dict[str, Any]]) -> Message:
    return Message.assistant("", tool_calls=[ToolCall(id=i, name=n, arguments=a)
                                             for i, n, a in spec])


@ct.tool
def echo(text: str) -> str:
    """Return the text.

    Args:
        text: What to say back.
    """
    return f"echo: {text}"


@ct.tool
def lines(n: int) -> str:
    """Return ``n`` long lines.

    Args:
        n: How many lines.
    """
    return "\n".join(f"line {i} " + "x" * 60 for i in range(n))


def persistence(kind: str, path: Path) -> tuple[type[Any], dict[str, Any]]:
    if kind == "log":
        return SessionLog, {"path": path}
    return SessionTree, {"path": path}


def build(model: Any, kind: str, path: Path, tools: Sequence[Any] = (echo,),
          **tool_options: Any) -> ct.Agent:
    layer, options = persistence(kind, path)
    return (ct.agent()
            .use(layer, **options)
            .use(SystemPrompt, text="You are a test agent.")
            .use(ToolResultLoop)
            .use(MaxIterations, limit=50)
            .use(DefaultToolPipeline, tools=list(tools), **tool_options)
            .run(model))


def log_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_bytes().splitlines()]


def tree_messages(path: Path) -> list[Message]:
    with Session.open(path) as s:
        return [e.message for e in s.storage.entries() if isinstance(e, MessageEntry)]


# -- multi-turn, in the seed's shape --------------------------------------------------------


@pytest.mark.parametrize("kind", ["log", "tree"])
def test_second_turn_sees_the_first(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "chat.jsonl"

    def answer(messages: Sequence[Message]) -> str:
        said = " ".join(texts(messages))
        return "Your name is Nathan." if "My name is Nathan." in said else "I don't know."

    model = ScriptedModel([call("c1", "echo", text="Nathan"), "Nice to meet you, Nathan.",
                           answer])
    agent = build(model, kind, path)

    first = agent.start("My name is Nathan.")
    assert first.text == "Nice to meet you, Nathan."
    before = path.read_bytes()

    second = agent.start("What's my name?")
    assert second.text == "Your name is Nathan."
    seen = model.calls[2]
    assert seen[0].role == "system" and seen[0].text == "You are a test agent."
    assert [m.role for m in seen] == ["system", "user", "assistant", "tool", "assistant", "user"]
    assert texts(seen)[1] == "My name is Nathan."
    assert seen[3].tool_call_id == "c1" and seen[3].text == "echo: Nathan"
    # The file only grew: the first turn's bytes are untouched.
    assert path.read_bytes().startswith(before)
    assert len(path.read_bytes()) > len(before)

    if kind == "log":
        rows = log_lines(path)
        assert [r["role"] for r in rows] == ["user", "assistant", "tool", "assistant", "user",
                                             "assistant"]  # no system prompt
        assert rows[1]["tool_calls"] == [{"id": "c1", "name": "echo",
                                          "arguments": {"text": "Nathan"}}]
        assert rows[2]["tool_call_id"] == "c1"
        for row in rows:
            assert row["role"] in {"user", "assistant", "tool"}
            assert BRUTE_KEYS & set(row) >= {"role", "content"}
            for c in row.get("tool_calls") or []:
                assert set(c) == {"id", "name", "arguments"}
        assert len(path.read_bytes().splitlines()) == len(rows)  # one message per line
    else:
        persisted = tree_messages(path)
        assert all(m.role != "system" for m in persisted)
        assert texts(persisted)[-2:] == ["What's my name?", "Your name is Nathan."]


def test_session_log_loads_a_brute_file(tmp_path: Path) -> None:
    path = tmp_path / "brute.jsonl"
    path.write_text(
        json.dumps({"role": "user", "content": "hi", "tool_calls": None, "tool_call_id": None})
        + "\n"
        + json.dumps({"role": "assistant", "content": "",
                      "tool_calls": [{"id": "t1", "name": "echo", "arguments": {"text": "a"}}],
                      "tool_call_id": None}) + "\n"
        + json.dumps({"role": "tool", "content": "echo: a", "tool_calls": None,
                      "tool_call_id": "t1"}) + "\n")
    model = ScriptedModel(["ok"])
    build(model, "log", path).start("next")
    assert [m.role for m in model.calls[0]] == ["system", "user", "assistant", "tool", "user"]
    assert model.calls[0][2].tool_calls == [ToolCall(id="t1", name="echo",
                                                     arguments={"text": "a"})]


# -- compaction inside the tool loop ---------------------------------------------------------


def compacting_agent(model: Any, kind: str, path: Path, window: int = 8000) -> ct.Agent:
    layer, options = persistence(kind, path)
    return (ct.agent()
            .use(layer, **options)
            .use(SystemPrompt, text="You are a test agent.")
            .use(ToolResultLoop)
            .use(MaxIterations, limit=50)
            .use(DefaultCompactionPipeline, window=window)
            .use(DefaultToolPipeline, tools=[lines])
            .run(model))


def test_long_tool_run_compacts_mid_turn(tmp_path: Path) -> None:
    path = tmp_path / "tree.jsonl"
    model = ScriptedModel([call(f"c{i}", "lines", n=150) for i in range(8)] + ["done"])
    agent = compacting_agent(model, "tree", path)
    compacted: list[dict[str, Any]] = []
    events: list[str] = []
    agent.on("compacted", lambda env, p: compacted.append(p))
    agent.on("*", lambda env, p: events.append(p["event"]))

    result = agent.start("Read a lot of output.")

    assert result.text == "done" and result.stopped is None
    assert len(model.calls) == 9  # one turn, every model call made
    assert compacted, "the window filled up: compaction must have run"
    first = compacted[0]
    assert first["tokens_before"] > first["tokens_after"]
    assert first["cleared"] or first["dropped"]
    assert first["entry_id"]
    # Compaction happened between model calls of the same turn, not at its end.
    assert events.index("compacted") < len(events) - 1
    assert events[-3:] == ["committed", "model_reply", "turn_end"]
    sizes = [len(c) for c in model.calls]
    assert any(b < a for a, b in itertools.pairwise(sizes))
    # The file still holds every original message; compaction only appended entries.
    persisted = tree_messages(path)
    assert len(persisted) == 1 + 9 + 8
    assert [m.tool_call_id for m in persisted if m.role == "tool"] == [f"c{i}" for i in range(8)]
    with Session.open(path) as s:
        assert sum(isinstance(e, CompactionEntry) for e in s.storage.entries()) == len(compacted)


def test_session_log_is_rewritten_atomically_after_compaction(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    model = ScriptedModel([call(f"c{i}", "lines", n=150) for i in range(8)] + ["done"])
    agent = compacting_agent(model, "log", path)
    compacted: list[dict[str, Any]] = []
    agent.on("compacted", lambda env, p: compacted.append(p))
    replaced: list[tuple[str, str]] = []
    real_replace = os.replace

    def spy(src: Any, dst: Any) -> None:
        replaced.append((str(src), str(dst)))
        real_replace(src, dst)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(os, "replace", spy)
        result = agent.start("Read a lot of output.")

    assert result.text == "done" and compacted
    assert replaced and all(dst == str(path) for _, dst in replaced)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["log.jsonl"]  # no temp file left
    rows = log_lines(path)
    # After the last rewrite, new messages were appended to the new file (nothing lost).
    assert rows[-1] == {"role": "assistant", "content": "done", **{
        k: v for k, v in rows[-1].items() if k not in ("role", "content")}}
    assert [r.get("tool_call_id") for r in rows if r["role"] == "tool"][-1] == "c7"
    # The file is what the model sees next turn (minus the system prompt).
    expected = [m.to_dict() for m in result.messages
                if m.role != "system" or (m.meta or {}).get("kind")]
    assert rows == [json.loads(json.dumps(r)) for r in expected]
    # And the next turn loads it.
    model.add(lambda msgs: f"{len(msgs)} messages")
    again = agent.start("more")
    assert again.text == f"{len(rows) + 2} messages"


def test_compaction_that_cannot_reach_the_target_is_not_rerun(tmp_path: Path) -> None:
    giant = "Here is the task, in full detail. " * 1200  # far bigger than the window
    model = ScriptedModel([call(f"c{i}", "echo", text=str(i)) for i in range(5)] + ["done"])
    agent = (ct.agent()
             .use(SessionTree, path=tmp_path / "s.jsonl")
             .use(ToolResultLoop)
             .use(DefaultCompactionPipeline, window=4000)
             .use(DefaultToolPipeline, tools=[echo])
             .run(model))
    starts: list[dict[str, Any]] = []
    agent.on("compaction_start", lambda env, p: starts.append(p))

    result = agent.start(giant)

    assert result.text == "done"
    assert len(model.calls) == 6
    assert len(starts) == 1  # tried once, not before every one of the six calls


# -- killed mid-turn ------------------------------------------------------------------------

CHILD = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    import contextree as ct
    from contextree import Message, ToolCall
    from contextree.models import ScriptedModel
    from contextree.runtime import SessionTree, ToolResultLoop, DefaultToolPipeline

    path, marker = Path(sys.argv[1]), Path(sys.argv[2])

    @ct.tool
    def note(text: str) -> str:
        '''Take a note.

        Args:
            text: The note.
        '''
        return "noted: " + text

    @ct.tool
    def block() -> str:
        '''Hang forever.'''
        marker.write_text("running")
        time.sleep(600)
        return "never"

    model = ScriptedModel([
        Message.assistant("", tool_calls=[ToolCall(id="c1", name="note",
                                                   arguments={"text": "first"})]),
        Message.assistant("", tool_calls=[ToolCall(id="c2", name="block", arguments={})]),
        "unreachable",
    ])
    agent = (ct.agent().use(SessionTree, path=path).use(ToolResultLoop)
             .use(DefaultToolPipeline, tools=[note, block]).run(model))
    agent.start("Do two things.")
""")


@pytest.mark.parametrize("resume_input", [None, "Go on."])
def test_killed_mid_turn_resumes_from_what_was_persisted(
        tmp_path: Path, resume_input: str | None) -> None:
    path, marker = tmp_path / "s.jsonl", tmp_path / "marker"
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    proc = subprocess.Popen([sys.executable, str(script), str(path), str(marker)])
    try:
        deadline = time.monotonic() + 60  # a guard against a hang, not a timing assertion
        while not marker.exists():
            assert proc.poll() is None, "the child agent exited before blocking"
            assert time.monotonic() < deadline, "the child agent never reached the tool"
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait()
    assert proc.returncode == -signal.SIGKILL

    def check(messages: Sequence[Message]) -> str:
        roles = [m.role for m in messages]
        assert roles[:5] == ["user", "assistant", "tool", "assistant", "tool"]
        assert messages[2].text == "noted: first"
        assert messages[3].tool_calls is not None and messages[3].tool_calls[0].id == "c2"
        assert messages[4].tool_call_id == "c2" and messages[4].text == INTERRUPTED
        assert messages[4].is_error
        return f"resumed with {len(messages)} messages"

    model = ScriptedModel([check])
    agent = (ct.agent().use(SessionTree, path=path).use(ToolResultLoop)
             .use(DefaultToolPipeline, tools=[echo]).run(model))
    result = agent.start(resume_input)

    expected = 5 if resume_input is None else 6
    assert result.text == f"resumed with {expected} messages"
    if resume_input is not None:
        assert model.calls[0][-1].text == resume_input
    persisted = tree_messages(path)
    assert persisted[-1].text == result.text


# -- persisting when the turn raises --------------------------------------------------------


@pytest.mark.parametrize("kind", ["log", "tree"])
def test_turn_that_raises_keeps_what_it_produced(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "s.jsonl"
    model = ScriptedModel([call("c1", "echo", text="saved"),
                           ModelRequestRejected("HTTP 400: bad request", status=400)])
    layer, options = persistence(kind, path)
    agent = (ct.agent().use(layer, **options).use(SystemPrompt, text="sys")
             .use(ToolResultLoop).use(Retry, sleep=lambda s: None)
             .use(DefaultToolPipeline, tools=[echo]).run(model))

    with pytest.raises(ModelError, match="bad request"):
        agent.start("Save this.")

    assert len(model.calls) == 2  # not retried
    if kind == "log":
        rows = log_lines(path)
        assert [r["role"] for r in rows] == ["user", "assistant", "tool"]
        assert rows[2] == {"role": "tool", "content": "echo: saved", "tool_call_id": "c1",
                           **{k: v for k, v in rows[2].items()
                              if k not in ("role", "content", "tool_call_id")}}
    else:
        persisted = tree_messages(path)
        assert [m.role for m in persisted] == ["user", "assistant", "tool"]
        assert persisted[2].text == "echo: saved"


# -- guards: MaxIterations, DoomLoop, Retry, failing handlers --------------------------------


def test_max_iterations_stops_with_a_notice_and_an_event(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    counter = iter(range(100))
    model = ScriptedModel([lambda m: call(f"c{next(counter)}", "echo", text=str(len(m)))
                           for _ in range(10)])
    agent = (ct.agent().use(SessionLog, path=path).use(ToolResultLoop)
             .use(MaxIterations, limit=3).use(DefaultToolPipeline, tools=[echo]).run(model))
    events: list[dict[str, Any]] = []
    agent.on("max_iterations", lambda env, p: events.append(p))

    result = agent.start("loop forever")

    assert result.stopped == "max_iterations"
    assert len(model.calls) == 3
    assert events == [{"event": "max_iterations", "limit": 3}]
    assert result.notices and "3 model calls" in result.notices[0]
    assert all("MaxIterations" not in json.dumps(r) for r in log_lines(path))
    assert all("MaxIterations" not in m.text for m in result.messages)


def test_doom_loop_stops_after_identical_calls(tmp_path: Path) -> None:
    ids = iter(range(100))
    model = ScriptedModel([lambda m: call(f"c{next(ids)}", "echo", text="same")
                           for _ in range(10)])
    agent = (ct.agent().use(SessionTree, path=tmp_path / "s.jsonl").use(ToolResultLoop)
             .use(MaxIterations, limit=20).use(DoomLoop, threshold=3)
             .use(DefaultToolPipeline, tools=[echo]).run(model))
    events: list[dict[str, Any]] = []
    agent.on("doom_loop", lambda env, p: events.append(p))

    result = agent.start("go")

    assert result.stopped == "doom_loop"
    assert len(model.calls) == 3
    assert len(events) == 1 and events[0]["times"] == 3
    assert events[0]["calls"] == [["echo", {"text": "same"}]]
    assert result.notices


def test_doom_loop_ignores_varied_calls(tmp_path: Path) -> None:
    model = ScriptedModel([call(f"c{i}", "echo", text=str(i % 2)) for i in range(5)] + ["ok"])
    agent = (ct.agent().use(SessionTree, path=tmp_path / "s.jsonl").use(ToolResultLoop)
             .use(DoomLoop, threshold=3).use(DefaultToolPipeline, tools=[echo]).run(model))
    assert agent.start("go").text == "ok"


def retry_agent(model: Any, sleeps: list[float], attempts: int = 4) -> ct.Agent:
    return (ct.agent().use(Retry, attempts=attempts, base_delay=1.0, sleep=sleeps.append)
            .run(model))


def test_retry_honours_retry_after_then_backs_off() -> None:
    model = ScriptedModel([
        ModelRateLimited("429", status=429, retry_after=2.5),
        ModelUnavailable("503", status=503),
        "ok",
    ])
    sleeps: list[float] = []
    events: list[dict[str, Any]] = []
    agent = retry_agent(model, sleeps).on("retry", lambda env, p: events.append(p))
    assert agent.start("hi").text == "ok"
    assert sleeps[0] == 2.5
    assert 1.6 <= sleeps[1] <= 2.4  # base * 2, with jitter
    assert [e["status"] for e in events] == [429, 503]
    assert len(model.calls) == 3


def test_retry_gives_up_on_non_retryable_and_after_attempts() -> None:
    sleeps: list[float] = []
    model = ScriptedModel([ModelRequestRejected("401", status=401), "never"])
    with pytest.raises(ModelError, match="401"):
        retry_agent(model, sleeps).start("hi")
    assert sleeps == [] and len(model.calls) == 1

    model = ScriptedModel([ModelUnavailable("500", status=500)] * 3)
    with pytest.raises(ModelError, match="500"):
        retry_agent(model, sleeps, attempts=2).start("hi")
    assert len(sleeps) == 1 and len(model.calls) == 2


def test_failing_handler_is_reported_and_the_turn_completes(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    model = ScriptedModel([call("c1", "echo", text="x"), "finished"])
    agent = build(model, "tree", tmp_path / "s.jsonl")
    seen: list[Env] = []

    def broken(env: Env, payload: dict[str, Any]) -> None:
        raise RuntimeError("handler bug")

    agent.on("tool_end", broken)
    agent.on("model_reply", lambda env, p: seen.append(env))
    with caplog.at_level(logging.ERROR, logger="contextree.agent"):
        result = agent.start("go")

    assert result.text == "finished"
    assert [(e, str(x)) for e, x in seen[-1].handler_errors] == [("tool_end", "handler bug")]
    assert "handler bug" in caplog.text


# -- the tool pipeline -----------------------------------------------------------------------


def tool_turn(tmp_path: Path, reply: Message, tools: Sequence[Any], **options: Any,
              ) -> tuple[list[Message], list[dict[str, Any]]]:
    model = ScriptedModel([reply, "ok"])
    agent = build(model, "tree", tmp_path / "s.jsonl", tools=tools, **options)
    events: list[dict[str, Any]] = []
    agent.on("*", lambda env, p: events.append(p))
    result = agent.start("use tools")
    assert result.text == "ok"
    return [m for m in result.messages if m.role == "tool"], events


def test_concurrent_tools_return_results_in_call_order(tmp_path: Path) -> None:
    barrier = threading.Barrier(3, timeout=30)

    @ct.tool
    def wait(name: str, delay: float) -> str:
        """Wait for the others, then sleep.

        Args:
            name: A label.
            delay: Seconds to sleep.
        """
        barrier.wait()  # breaks (an error result) unless all three run at the same time
        time.sleep(delay)
        return f"done {name}"

    reply = calls(("a", "wait", {"name": "a", "delay": 0.2}),
                  ("b", "wait", {"name": "b", "delay": 0.0}),
                  ("c", "wait", {"name": "c", "delay": 0.1}))
    results, _ = tool_turn(tmp_path, reply, [wait], concurrency=3)
    assert [(m.tool_call_id, m.text, m.is_error) for m in results] == [
        ("a", "done a", False), ("b", "done b", False), ("c", "done c", False)]


def test_tool_failures_become_error_results(tmp_path: Path) -> None:
    @ct.tool
    def explode() -> str:
        """Always fails."""
        raise ValueError("kaboom")

    reply = calls(("u", "nope", {}), ("v", "echo", {"text": 3, "extra": True}),
                  ("w", "explode", {}), ("x", "echo", {"text": "fine"}))
    results, _ = tool_turn(tmp_path, reply, [echo, explode])
    by_id = {m.tool_call_id: m for m in results}
    assert [m.tool_call_id for m in results] == ["u", "v", "w", "x"]
    assert by_id["u"].is_error and "unknown tool 'nope'" in by_id["u"].text
    assert "echo" in by_id["u"].text  # names the tools that exist
    assert by_id["v"].is_error
    assert by_id["w"].is_error and "kaboom" in by_id["w"].text
    assert not by_id["x"].is_error and by_id["x"].text == "echo: fine"


def test_tool_hooks(tmp_path: Path) -> None:
    ran: list[str] = []

    @ct.tool
    def record(text: str) -> str:
        """Record a call.

        Args:
            text: What to record.
        """
        ran.append(text)
        return f"recorded {text}"

    def start(c: ToolCall, env: Env) -> Any:
        if c.id == "rewrite":
            return {"text": "rewritten"}
        if c.id == "answer":
            return "answered by the hook"
        return None

    def approve(c: ToolCall, env: Env) -> bool | str:
        return "not this one" if c.id == "deny" else True

    def end(c: ToolCall, result: ct.ToolResult, env: Env) -> ct.ToolResult | None:
        return ct.ToolResult(result.content.upper()) if c.id == "shout" else None

    reply = calls(("rewrite", "record", {"text": "original"}),
                  ("answer", "record", {"text": "skipped"}),
                  ("deny", "record", {"text": "denied"}),
                  ("shout", "record", {"text": "loud"}))
    results, _ = tool_turn(tmp_path, reply, [record], tool_start=start, tool_approve=approve,
                           tool_end=end, concurrency=1)
    assert texts(results) == ["recorded rewritten", "answered by the hook",
                              "tool call 'record' was denied: not this one", "RECORDED LOUD"]
    assert results[2].is_error
    assert ran == ["rewritten", "loud"]


def test_approvals_are_asked_one_at_a_time_in_call_order_while_approved_calls_run(
        tmp_path: Path) -> None:
    """With four calls running at once, ``tool_approve`` still sees one call at a time, in
    the order of the calls (a person answers the question shown); an approved call runs
    while the next is asked (the first call waits for the last one's approval)."""
    last_asked = threading.Event()
    asking: list[str] = []
    overlaps: list[str] = []
    lock = threading.Lock()

    @ct.tool
    def step(name: str) -> str:
        """Run a step.

        Args:
            name: Which.
        """
        if name == "s0" and not last_asked.wait(30):
            return "s0 ran only after every approval"
        return f"ran {name}"

    def approve(c: ToolCall, env: Env) -> bool | str:
        with lock:
            if asking:
                overlaps.append(c.id)
            asking.append(c.id)
        time.sleep(0.05)  # long enough for a second question to overlap, if one could
        with lock:
            asking.remove(c.id)
            order.append(c.id)
        if c.id == "s3":
            last_asked.set()
        return "no" if c.id == "s2" else True

    order: list[str] = []
    reply = calls(*((f"s{i}", "step", {"name": f"s{i}"}) for i in range(4)))
    results, _ = tool_turn(tmp_path, reply, [step], tool_approve=approve, concurrency=4)
    assert order == ["s0", "s1", "s2", "s3"] and not overlaps
    assert texts(results) == ["ran s0", "ran s1", "tool call 'step' was denied: no", "ran s3"]


def test_large_output_is_truncated_and_saved(tmp_path: Path) -> None:
    store = OverflowStore(tmp_path / "overflow", gc_interval=None)
    results, events = tool_turn(tmp_path, call("big", "lines", n=5000), [lines], store=store)
    truncated = [e for e in events if e["event"] == "truncated"]
    assert len(truncated) == 1
    saved = Path(truncated[0]["saved_path"])
    assert saved.is_file() and saved.is_relative_to(tmp_path / "overflow")
    assert saved.read_text().count("\n") >= 4999  # the full output
    assert truncated[0]["total_lines"] == 5000
    msg = results[0]
    assert len(msg.text) < 51200 + 1000
    assert msg.text.startswith("line 0 ")  # head kept
    assert (msg.meta or {}).get("truncated")


def test_shell_output_is_not_truncated_twice(tmp_path: Path) -> None:
    store = OverflowStore(tmp_path / "overflow", gc_interval=None)
    work = tmp_path / "work"
    work.mkdir()
    tools = make_tools(work, store=store)
    results, events = tool_turn(tmp_path, call("sh", "shell", command="seq 1 5000"), tools,
                                store=store)
    truncated = [e for e in events if e["event"] == "truncated"]
    assert len(truncated) == 1
    text = results[0].text
    assert "5000" in text  # the tail is kept
    assert Path(truncated[0]["saved_path"]).read_text().startswith("1\n2\n")
    # Exactly one truncation notice: the pipeline did not cut the shell's own result again.
    assert text.count("[Output truncated") == 1
    assert text.rstrip().endswith("[exit code 0]")


# -- async ----------------------------------------------------------------------------------


@ct.tool
async def add(a: int, b: int) -> str:
    """Add two numbers.

    Args:
        a: The first.
        b: The second.
    """
    await asyncio.sleep(0)
    return str(a + b)


class AsyncOnly:
    """A model with only ``acomplete`` (like an async-first adapter)."""

    provider = "scripted"

    def __init__(self, inner: ScriptedModel) -> None:
        self.inner = inner
        self.name = inner.name
        self.awaited = 0

    async def acomplete(self, messages: Sequence[Message], **kw: Any) -> Message:
        self.awaited += 1
        await asyncio.sleep(0)
        return self.inner.complete(messages, **kw)


def async_script() -> list[Any]:
    return [call("c1", "add", a=2, b=3),
            lambda msgs: f"The sum is {msgs[-1].text}."]


def test_astart_matches_start(tmp_path: Path) -> None:
    sync_model = ScriptedModel(async_script())
    sync = build(sync_model, "tree", tmp_path / "a.jsonl", tools=[add]).start("2+3?")

    async_model = AsyncOnly(ScriptedModel(async_script()))
    agent = build(async_model, "tree", tmp_path / "b.jsonl", tools=[add])
    result = asyncio.run(agent.astart("2+3?"))

    assert async_model.awaited == 2
    assert result.text == sync.text == "The sum is 5."
    assert [m.to_dict() for m in result.messages] == [m.to_dict() for m in sync.messages]
    assert result.usage == sync.usage
    assert [m.to_dict() for m in tree_messages(tmp_path / "b.jsonl")] == [
        m.to_dict() for m in tree_messages(tmp_path / "a.jsonl")]
