"""What the user typed survives compaction: the Nathan test, the original task and rules
behind an "ok, continue", stacked compactions, corrections in order."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

import contextree as ct
from contextree import Message, ToolCall
from contextree.compaction import CompactionLadder, Digest, SlidingWindow, ToolResults
from contextree.models import ScriptedModel
from contextree.tokens import EstimateCounter

COUNTER = EstimateCounter()
TASK = ("Please port the billing exporter to the new queue API. Rules for this whole session: "
        "never push to main; keep every public function signature unchanged.")


def output(i: int, lines: int = 120) -> str:
    return "\n".join(f"src/mod_{i}.py:{j}: def handler_{i}_{j}(event): return event" for j in
                     range(lines))


def working_turn(session: ct.Session, user: str, i: int, steps: int = 3,
                 lines: int = 120) -> None:
    """A user message and a few read steps with results of ``lines`` lines."""
    session.append_message(Message.user(user))
    for k in range(steps):
        call = ToolCall(id=f"c{i}_{k}", name="read", arguments={"path": f"src/mod_{i}_{k}.py"})
        session.append_message(Message.assistant(
            f"Reading module {i}.{k}: " + "it registers handlers for the events. " * 8,
            tool_calls=[call]))
        session.append_message(Message.tool(output(i, lines), tool_call_id=call.id,
                                            name="read"))
    session.append_message(Message.assistant(f"Module {i} is done."))


def summary_text(session: ct.Session) -> str:
    first = session.build_context().messages[0]
    assert first.kind is not None and first.role == "system"
    return first.text


def visible(messages: Sequence[Message]) -> str:
    return "\n".join(m.text for m in messages)


# -- the Nathan test ------------------------------------------------------------------------


def nathan_session() -> ct.Session:
    s = ct.Session.in_memory()
    s.append_message(Message.system("You are a helpful coding agent."))
    working_turn(s, "Hi! My name is Nathan. Help me tidy this repository.", 0)
    for i in range(1, 12):
        working_turn(s, "ok, continue", i)
    s.append_message(Message.user("What's my name?"))
    return s


@pytest.mark.parametrize("summarizer", [None, "## Objective\nTidy the repository."])
def test_nathan_through_session_compact(summarizer: str | None) -> None:
    """A summary written by a model that leaves out the name still cannot lose it: what the
    user typed is kept verbatim around it."""
    s = nathan_session()
    model = ScriptedModel([summarizer]) if summarizer else None
    r = s.compact(8_000, model=model)
    assert r.entry_id is not None and r.reached_target and r.dropped
    assert not any(m.text.startswith("Hi! My name") for m in s.build_context().messages
                   if m.role == "user")  # the first turn left the view...
    assert "My name is Nathan." in summary_text(s)  # ...but not the summary
    if model is not None:
        assert len(model.calls) == 1 and "Tidy the repository." in summary_text(s)


def big_tool() -> ct.Tool:
    @ct.tool(name="read", kind=ct.ToolKind.READ)
    def read(path: str) -> str:
        """Read a file."""
        return output(len(path), 40)

    return read


@pytest.mark.parametrize("with_summarizer", [False, True])
def test_nathan_through_the_runtime(tmp_path: Path, with_summarizer: bool) -> None:
    """Many turns, compactions on the way, then "What's my name?": the model sees Nathan."""
    replies: list[ct.models.Reply] = []
    for i in range(10):
        for k in range(2):
            replies.append(Message.assistant(f"Reading {i}.{k}.", tool_calls=[
                ToolCall(id=f"r{i}_{k}", name="read", arguments={"path": f"src/m{i}{k}.py"})]))
        replies.append(Message.assistant(f"Turn {i} done."))
    replies.append("Your name is Nathan.")
    model = ScriptedModel(replies)
    summarizer = ScriptedModel(["## Objective\nTidy the repository."] * 20)
    compacted: list[dict[str, object]] = []
    agent = (
        ct.agent()
        .use(ct.runtime.SessionTree, path=tmp_path / "s.jsonl")
        .use(ct.runtime.SystemPrompt, text="You are a helpful coding agent.")
        .use(ct.runtime.ToolResultLoop)
        .use(ct.runtime.DefaultCompactionPipeline, window=6_000,
             summarizer=summarizer if with_summarizer else None)
        .use(ct.runtime.DefaultToolPipeline, tools=[big_tool()])
        .run(model)
    )
    agent.on("compacted", lambda env, p: compacted.append(dict(p)))
    agent.start("Hi! My name is Nathan. Help me tidy this repository.")
    for _ in range(9):
        agent.start("ok, continue")
    turn = agent.start("What's my name?")
    assert turn.text == "Your name is Nathan."
    assert compacted and any(p["dropped"] for p in compacted)
    seen = model.calls[-1]
    assert not any(m.role == "user" and "Nathan" in m.text for m in seen)  # out of view...
    assert "My name is Nathan." in visible(seen)  # ...but in the summary the model reads
    if with_summarizer:
        assert summarizer.calls  # the dropped turns were summarized by the model


# -- the task and the rules -------------------------------------------------------------------


@pytest.mark.parametrize("ratio", [0.5, 0.2, 0.1])
def test_ok_continue_keeps_the_original_task_and_rules(ratio: float) -> None:
    s = ct.Session.in_memory()
    s.append_message(Message.system("You are a coding agent."))
    working_turn(s, TASK, 0, lines=10)
    for i in range(1, 40):
        working_turn(s, "ok, continue", i, lines=10)
    s.append_message(Message.user("ok, continue"))
    total = COUNTER.count_messages(s.build_context().messages)
    r = s.compact(total, compact_at=0.95, compact_to=ratio, force=True)
    assert r.reached_target and r.dropped
    text = visible(s.build_context().messages)
    assert TASK in text  # verbatim, whole


def test_stacked_compactions_keep_the_first_task_and_rules_verbatim() -> None:
    s = ct.Session.in_memory()
    s.append_message(Message.system("You are a coding agent."))
    working_turn(s, TASK, 0)
    compactions = 0
    for i in range(1, 60):
        working_turn(s, "ok, continue" if i % 3 else f"now do part {i}", i, lines=10)
        if COUNTER.count_messages(s.build_context().messages) > 7_000:
            r = s.compact(10_000)
            assert r.entry_id is not None
            compactions += 1
    assert compactions >= 5
    text = summary_text(s)
    assert TASK in text
    # what the user said is merged across compactions, in order
    said = [line[2:] for line in text.split("## What the user said")[1].splitlines()
            if line.startswith("- ") and "now do part" in line]
    assert said == sorted(said, key=lambda x: int(x.split()[-1])) and len(said) >= 5


def test_a_correction_is_kept_after_what_it_corrects() -> None:
    s = ct.Session.in_memory()
    s.append_message(Message.system("You are a coding agent."))
    working_turn(s, TASK, 0)
    working_turn(s, "the service listens on port 8080", 1)
    working_turn(s, "ok, continue", 2)
    working_turn(s, "actually the port is 8443, not 8080", 3)
    for i in range(4, 10):
        working_turn(s, "ok, continue", i)
    s.append_message(Message.user("ok, continue"))
    r = s.compact(6_000, ladder=CompactionLadder([ToolResults(), SlidingWindow(), Digest()]))
    assert r.reached_target
    text = summary_text(s)
    old = text.index("the service listens on port 8080")
    new = text.index("actually the port is 8443, not 8080")
    assert old < new  # both, in order, the newest last
    assert "8080" not in text[new + len("actually the port is 8443, not 8080"):]
