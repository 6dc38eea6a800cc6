"""A summarizer's reply is checked before it is accepted; the digest stands in otherwise."""

from __future__ import annotations

from collections.abc import Sequence

import contextree as ct
from contextree import Message, ToolCall
from contextree.compaction import CompactionLadder, SlidingWindow, Summarize, ToolResults
from contextree.compaction._summarize import SYSTEM_PROMPT
from contextree.models import ScriptedModel

SHA = "9a41f0c2d3"
LOG = "\n".join(f"commit {SHA if i == 3 else f'{i:x}' * 10}{'0' * 30}\n    change {i}"
                for i in range(8))


def session() -> ct.Session:
    s = ct.Session.in_memory()
    s.append_message(Message.system("You are a coding agent."))
    s.append_message(Message.user("Find the commit that broke the build; use port 8443."))
    for i, (cmd, out) in enumerate([("git log -n 8", LOG), (f"git show {SHA}", "diff ...")]):
        call = ToolCall(id=f"c{i}", name="shell", arguments={"command": cmd})
        s.append_message(Message.assistant("", tool_calls=[call]))
        s.append_message(Message.tool(out, tool_call_id=call.id, name="shell"))
    for t in range(8):
        s.append_message(Message.user("ok, continue"))
        call = ToolCall(id=f"r{t}", name="read", arguments={"path": f"src/m{t}.py"})
        s.append_message(Message.assistant(f"Reading module {t}.", tool_calls=[call]))
        s.append_message(Message.tool("x = compute()\n" * 150, tool_call_id=call.id,
                                      name="read"))
    s.append_message(Message.user("ok, continue"))
    return s


def ladder(model: ScriptedModel) -> CompactionLadder:
    return CompactionLadder([ToolResults(), SlidingWindow()], summarizer=model)


def folding_note(r: ct.compaction.CompactionResult) -> str:
    return next(x.note for x in r.stages if x.name == "sliding_window")


def test_a_reply_that_drops_an_identifier_is_rejected_for_the_digest() -> None:
    s = session()
    model = ScriptedModel(["## Objective\nFind the bad commit. Port 8443."])
    r = s.compact(4_000, ladder=ladder(model))
    assert len(model.calls) == 1 and r.reached_target
    note = folding_note(r)
    assert "rejected" in note and SHA in note and "digest was used" in note
    assert "Find the bad commit" not in r.summary and SHA in r.summary  # the digest's


def test_a_reply_larger_than_what_it_replaces_is_rejected() -> None:
    s = session()
    model = ScriptedModel([f"## Identifiers\n{SHA} 8443\n" + "padding " * 20_000])
    r = s.compact(4_000, ladder=ladder(model))
    assert "not smaller than what it replaces" in folding_note(r)
    assert "padding" not in r.summary


def test_an_accepted_reply_is_kept_with_the_user_messages_verbatim() -> None:
    s = session()
    model = ScriptedModel([f"## Objective\nFind the bad commit.\n## Identifiers\n{SHA}, 8443"])
    r = s.compact(4_000, ladder=ladder(model))
    assert folding_note(r) == "" and r.reached_target
    assert "## Summary written by the summarizer\n## Objective\nFind the bad commit." in r.summary
    assert "- Find the commit that broke the build; use port 8443." in r.summary
    entry = s.get_entry(r.entry_id or "")
    assert isinstance(entry, ct.entries.CompactionEntry) and entry.usage is not None


def test_the_prompt_asks_for_fixed_sections_and_names_what_to_copy() -> None:
    s = session()
    seen: list[Sequence[Message]] = []

    def reply(messages: Sequence[Message]) -> str:
        seen.append(messages)
        return f"## Objective\nFind the bad commit.\n## Identifiers\n{SHA}, 8443"

    model = ScriptedModel([reply, reply])
    s.compact(4_000, ladder=ladder(model))
    system, request = seen[0][0].text, seen[0][1].text
    assert system == SYSTEM_PROMPT
    for section in ("## Objective", "## User requirements and constraints", "## Decisions",
                    "## Work done", "## Identifiers", "## Outstanding work"):
        assert section in system
    assert "corrected" in system and "verbatim" in system
    assert f"Copy these identifiers verbatim into the Identifiers section: {SHA}" in request
    # a second compaction hands the first summary over, to be updated
    for t in range(8):
        s.append_message(Message.user(f"more {t}"))
        call = ToolCall(id=f"z{t}", name="read", arguments={"path": f"lib/z{t}.py"})
        s.append_message(Message.assistant("Reading.", tool_calls=[call]))
        s.append_message(Message.tool("y = 2\n" * 150, tool_call_id=call.id, name="read"))
    s.append_message(Message.user("ok, continue"))
    r = s.compact(4_000, ladder=ladder(model))
    assert len(seen) == 2 and r.entry_id is not None
    previous = seen[1][1].text.split("<previous-summary>\n")[1].split("</previous-summary>")[0]
    assert "Find the bad commit." in previous and "Find the commit that broke" in previous
    assert "Update the previous summary" in seen[1][1].text


def test_the_summarize_stage_checks_its_reply_too() -> None:
    s = session()
    model = ScriptedModel([""])
    r = s.compact(4_000, ladder=CompactionLadder([Summarize(model)]))
    assert r.applied == ["summarize"]
    assert "empty summary" in r.stages[0].note and SHA in r.summary
