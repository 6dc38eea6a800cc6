"""The compaction ladder: policy, each stage, the ladder's guards, history and events."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

import contextree as ct
from contextree import Message, ToolCall, Usage
from contextree._context import SUMMARY_PREFIX
from contextree.compaction import (
    CompactionLadder,
    CompactionPolicy,
    CompactionState,
    Digest,
    Plan,
    SlidingWindow,
    Summarize,
    ToolResults,
    default_ladder,
)
from contextree.compaction._summarize import SYSTEM_PROMPT
from contextree.entries import CompactionEntry, MessageEntry
from contextree.errors import ModelUnavailable
from contextree.markers import TruncationRecord
from contextree.models import ScriptedModel
from contextree.runtime._compaction import compaction_events
from contextree.runtime._events import CompactionFailedPayload, Event
from contextree.tokens import EstimateCounter
from helpers import check_pairing, interrupted

COUNTER = EstimateCounter()
SYSTEM = "You are a careful coding agent."


# -- building conversations ---------------------------------------------------------------


class Convo:
    """Appends a coding-agent conversation to a session and remembers the entry ids."""

    def __init__(self, session: ct.Session, system: str | None = SYSTEM) -> None:
        self.s = session
        self.n = 0
        self.users: list[str] = []
        self.results: list[str] = []  # tool-result entry ids, oldest first
        self.calls: list[ToolCall] = []
        self.system_id = session.append_message(Message.system(system)) if system else None

    def user(self, text: str) -> str:
        eid = self.s.append_message(Message.user(text))
        self.users.append(eid)
        return eid

    def step(self, text: str = "", *, tools: Sequence[tuple[str, dict[str, Any], str]] = (),
             usage: Usage | None = None, **result_kw: Any) -> list[str]:
        """An assistant message calling ``tools`` (name, args, output), then the results."""
        calls = []
        for name, args, _ in tools:
            self.n += 1
            calls.append(ToolCall(id=f"call_{self.n}", name=name, arguments=args))
        self.s.append_message(Message.assistant(text, tool_calls=calls, usage=usage))
        ids = []
        for call, (_, _, out) in zip(calls, tools, strict=True):
            ids.append(self.s.append_message(
                Message.tool(out, tool_call_id=call.id, name=call.name, **result_kw)))
            self.calls.append(call)
        self.results.extend(ids)
        return ids

    def reads(self, k: int, size: int = 60) -> list[str]:
        """``k`` steps each reading a file with a ``size``-line result."""
        ids = []
        for _ in range(k):
            i = self.n + 1
            ids += self.step(f"Reading module {i}.",
                             tools=[("read", {"path": f"src/mod_{i}.py"}, big(size, i))])
        return ids

    def turn(self, task: str, steps: int = 3, size: int = 60) -> None:
        self.user(task)
        self.reads(steps, size)
        self.step(f"Done with: {task}")


def big(lines: int, seed: int = 0) -> str:
    return "\n".join(f"line {seed}.{i}: value = compute({i}, {seed})" for i in range(lines))


def tokens(messages: Sequence[Message]) -> int:
    return COUNTER.count_messages(messages)


def context(session: ct.Session) -> ct.SessionContext:
    return session.build_context()


def ctx_ids(session: ct.Session) -> list[str | None]:
    return list(session.build_context().entry_ids)


def ladder_of(*stages: Any) -> CompactionLadder:
    return CompactionLadder(list(stages))


def long_session(session: ct.Session | None = None, turns: int = 8) -> tuple[ct.Session, Convo]:
    s = session or ct.Session.in_memory()
    c = Convo(s)
    for t in range(turns):
        c.turn(f"Task {t}: refactor module {t} and keep the public API stable.")
    return s, c


def long_task(session: ct.Session | None = None, steps: int = 20) -> tuple[ct.Session, Convo]:
    """Two short old turns, then one current task that runs for many steps."""
    s = session or ct.Session.in_memory()
    c = Convo(s)
    c.turn("Old task A: rename the config loader.", steps=1)
    c.turn("Old task B: update the changelog.", steps=1)
    c.user("Current task: migrate every module to the new logging API.")
    c.reads(steps, size=60)
    return s, c


# -- policy -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"window": 0}, "window"),
        ({"window": -100}, "window"),
        ({"window": 1.5}, "window"),
        ({"window": True}, "window"),
        ({"window": 1000, "compact_at": 0.4, "compact_to": 0.4}, "compact_to"),
        ({"window": 1000, "compact_at": 0.3, "compact_to": 0.5}, "compact_to"),
        ({"window": 1000, "compact_at": 1.5}, "compact_at"),
        ({"window": 1000, "compact_to": 0}, "compact_to"),
        ({"window": 1000, "compact_to": -0.1}, "compact_to"),
        ({"window": 1000, "compact_at": float("nan")}, "compact_at"),
    ],
)
def test_invalid_policy_raises_with_a_clear_message(kwargs: dict[str, Any], words: str) -> None:
    with pytest.raises(ValueError, match=words):
        CompactionPolicy(**kwargs)


def test_policy_trigger_and_target() -> None:
    p = CompactionPolicy(200_000)
    assert (p.trigger, p.target) == (140_000, 80_000)
    assert CompactionPolicy(1000, compact_at=1.0, compact_to=0.9).target == 900


def test_invalid_stage_options_raise() -> None:
    with pytest.raises(ValueError, match="keep_recent"):
        ToolResults(keep_recent=-1)
    with pytest.raises(ValueError, match="keep_ratio"):
        Digest(keep_ratio=0)
    with pytest.raises(ValueError, match="keep_ratio"):
        Summarize(ScriptedModel([]), keep_ratio=1.5)
    with pytest.raises(ValueError, match="max_input_tokens"):
        Summarize(ScriptedModel([]), max_input_tokens=0)
    with pytest.raises(TypeError, match="complete"):
        Summarize(object())
    with pytest.raises(ValueError, match="at least one stage"):
        CompactionLadder([])


def test_session_compact_validates_the_policy() -> None:
    s, _ = long_session(turns=1)
    with pytest.raises(ValueError, match="compact_to"):
        s.compact(10_000, compact_at=0.5, compact_to=0.6)


def test_empty_session_cannot_be_compacted() -> None:
    with pytest.raises(ct.errors.CompactionError, match="empty"):
        ct.Session.in_memory().compact(1000)


def test_nothing_happens_under_the_target() -> None:
    s, _ = long_session(turns=1)
    before = s.branch()
    r = s.compact(1_000_000)
    assert r.entry_id is None and r.stages == [] and "under the target" in r.reason
    assert r.tokens_before == r.tokens_after == tokens(context(s).messages)
    assert s.branch() == before


def test_a_forced_compaction_under_the_target_compacts_as_the_trigger_would() -> None:
    s, _ = long_session(turns=8)
    total = tokens(context(s).messages)
    r = s.compact(total * 10, force=True)
    assert r.entry_id is not None and r.target == int(int(total / 0.7) * 0.4)
    assert r.reached_target and r.cleared and r.tokens_after < total
    # without tool results to clear, the oldest turns are folded (the user's words kept)
    s2 = ct.Session.in_memory()
    for t in range(20):
        s2.append_message(Message.user(f"Request {t}: " + "explained at length " * 60))
        s2.append_message(Message.assistant(f"Answer {t}: " + "in some detail " * 60))
    total = tokens(context(s2).messages)
    r = s2.compact(total * 10, force=True)
    assert r.entry_id is not None and r.reached_target and r.dropped
    assert "- Request 0: explained at length" in r.summary


# -- ToolResults --------------------------------------------------------------------------


def test_tool_results_clears_oldest_first_until_the_target() -> None:
    s = ct.Session.in_memory()
    c = Convo(s)
    c.user("Read all the modules.")
    ids = c.reads(8, size=200)
    c.step("All read.")
    one = tokens([context(s).messages[3]])  # each result costs about the same
    total = tokens(context(s).messages)
    window = int((total - 2.5 * one) / 0.4) + 1  # target needs about three results cleared
    r = s.compact(window, ladder=ladder_of(ToolResults(keep_recent=2)))
    assert r.applied == ["tool_results"] and r.reached_target
    assert r.cleared == ids[: len(r.cleared)]  # a prefix: oldest first
    assert 3 <= len(r.cleared) <= 4
    ctx = context(s)
    shown = dict(zip(ctx.entry_ids, ctx.messages, strict=True))
    for eid in ids:
        kind = (shown[eid].meta or {}).get("kind")
        assert (kind == "cleared_tool_result") == (eid in r.cleared)
    assert r.dropped == [] and r.summary == ""


def test_tool_results_never_clears_the_newest_steps() -> None:
    s = ct.Session.in_memory()
    c = Convo(s)
    c.user("Read all the modules.")
    ids = []
    for i in range(6):  # six steps, the third calls two tools
        tools = [("read", {"path": f"a{i}.py"}, big(200, i))]
        if i == 2:
            tools.append(("grep", {"pattern": "x"}, big(200, 99)))
        ids.append(c.step(tools=tools))
    r = s.compact(100, ladder=ladder_of(ToolResults(keep_recent=3)))
    assert not r.reached_target and r.reason
    assert r.cleared == [*ids[0], *ids[1], *ids[2]]
    kept = {m.tool_call_id for m in context(s).messages
            if m.role == "tool" and not (m.meta or {}).get("kind")}
    assert kept == {"call_5", "call_6", "call_7"}
    assert ToolResults(keep_recent=0)  # zero keeps nothing back
    r0 = s.compact(100, ladder=ladder_of(ToolResults(keep_recent=0)))
    assert r0.cleared == [*ids[3], *ids[4], *ids[5]]


def test_placeholder_names_the_tool_its_arguments_and_how_to_rerun() -> None:
    s = ct.Session.in_memory()
    c = Convo(s)
    c.user("Look around.")
    c.step(tools=[("grep", {"pattern": "def load", "path": "src"}, big(300))])
    c.step(tools=[("read", {"path": "x.py"}, "short")])
    s.compact(100, ladder=ladder_of(ToolResults(keep_recent=1)))
    text = context(s).messages[3].text
    assert 'grep({"pattern":"def load","path":"src"})' in text
    assert "300 lines" in text and "Run the tool again with the same arguments" in text
    assert "value = compute" not in text


def test_placeholder_of_a_truncated_result_points_to_the_overflow_file() -> None:
    s = ct.Session.in_memory()
    c = Convo(s)
    c.user("Run the tests.")
    saved = '/data/tool-output/2024 "x"/shell-abc.txt'
    c.step(tools=[("shell", {"command": "pytest -x"}, big(400))],
           meta=TruncationRecord(total_lines=90_000, total_bytes=4_000_000, shown_lines=400,
                                 saved_path=saved).to_meta())
    c.step(tools=[("read", {"path": "x.py"}, "short")])
    s.compact(100, ladder=ladder_of(ToolResults(keep_recent=1)))
    text = context(s).messages[3].text
    assert 'shell({"command":"pytest -x"})' in text
    assert saved in text
    assert 'read(path="/data/tool-output/2024 \\"x\\"/shell-abc.txt", offset=1, limit=2000)' in text


def test_placeholders_do_not_tell_to_repeat_side_effects() -> None:
    s = ct.Session.in_memory()
    c = Convo(s)
    c.user("Change things.")
    c.step(tools=[("edit", {"path": "src/a.py", "old": "x", "new": "y"}, "Edited " * 200)])
    c.step(tools=[("shell", {"command": "git commit -am wip"}, "done " * 200)])
    c.step(tools=[("read", {"path": "x.py"}, "short")])
    s.compact(100, ladder=ladder_of(ToolResults(keep_recent=1)))
    edit, shell = context(s).messages[3].text, context(s).messages[5].text
    assert "do not run it again; read src/a.py" in edit and "Run the tool again" not in edit
    assert "safe to repeat" in shell


def test_placeholder_of_a_failed_command_keeps_the_error() -> None:
    s = ct.Session.in_memory()
    c = Convo(s)
    c.user("Run the tests.")
    c.step(tools=[("shell", {"command": "pytest"}, big(300) + "\nE   KeyError: 'tz'\n1 failed")],
           meta={"exit_code": 1}, is_error=True)
    c.step(tools=[("read", {"path": "x.py"}, "short")])
    s.compact(100, ladder=ladder_of(ToolResults(keep_recent=1)))
    text = context(s).messages[3].text
    assert "exit code 1" in text and "KeyError: 'tz'" in text and len(text) < 800


def test_tool_results_counts_each_placeholder_on_its_own() -> None:
    """Regression: counts were cached by ``id()`` of short-lived messages, so a placeholder
    or the summary could be given the count of another message that had died at the same
    address, and ``tokens_after`` did not match the context that was built."""
    s = ct.Session.in_memory()
    c = Convo(s)
    c.user("Read everything.")
    for i in range(12):  # results and placeholders of very different sizes
        c.step(tools=[("read", {"path": "p" * (i * 40)}, big(20 + 60 * i, i))])
    for window in (20_000, 8_000, 3_000):
        r = s.compact(window, dry_run=True, force=True)
        fresh = ct.Session.in_memory()
        for e in s.branch():
            fresh.append(e)
        real = fresh.compact(window, force=True)
        assert real.tokens_after == r.tokens_after == tokens(context(fresh).messages)


def test_tool_results_has_nothing_to_do_without_old_results() -> None:
    s = ct.Session.in_memory()
    c = Convo(s)
    c.user("x " * 2000)
    c.step(tools=[("read", {"path": "a"}, big(50))])
    r = s.compact(100, ladder=ladder_of(ToolResults(keep_recent=1)))
    assert r.stages[0].note == "nothing to do" and not r.stages[0].applied
    assert r.entry_id is None and r.reason


# -- SlidingWindow ------------------------------------------------------------------------


def test_sliding_window_drops_whole_oldest_turns_with_a_note() -> None:
    s, c = long_session(turns=8)
    before = context(s)
    r = s.compact(int(tokens(before.messages) * 0.5 / 0.4),
                  ladder=ladder_of(SlidingWindow()))
    assert r.applied == ["sliding_window"] and r.reached_target
    after = context(s)
    check_pairing(after.messages)
    assert not interrupted(after.messages)
    # summary note, the system prompt, then a whole turn starting with its user message
    assert after.messages[0].meta is not None
    assert after.messages[0].meta["kind"] == "compaction_summary"
    assert after.messages[0].role == "system"
    assert after.entry_ids[1] == c.system_id
    assert after.messages[2].role == "user"
    first = before.entry_ids.index(after.entry_ids[2])
    assert after.entry_ids[2:] == before.entry_ids[first:]  # a suffix, nothing else lost
    assert r.dropped == [i for i in before.entry_ids[1:first] if i is not None]
    note = after.messages[0].text
    dropped_tokens = tokens([m for m, i in zip(before.messages, before.entry_ids, strict=True)
                             if i in r.dropped])
    assert f"{len(r.dropped)} earlier messages" in note
    import re

    about = int(re.search(r"about (\d+) tokens", note).group(1))  # type: ignore[union-attr]
    assert abs(about - dropped_tokens) <= 0.05 * dropped_tokens


def test_sliding_window_pins_system_prompt_and_task_when_one_turn_is_huge() -> None:
    s = ct.Session.in_memory()
    c = Convo(s)
    c.turn("Old task.", steps=2)
    task = c.user("Current task: port the parser to the new API.")
    c.reads(10, size=300)
    window = 3000
    r = s.compact(window, ladder=ladder_of(SlidingWindow(within_turn=True)))
    assert r.applied == ["sliding_window"]
    after = context(s)
    check_pairing(after.messages)
    assert not interrupted(after.messages)
    assert c.system_id in after.entry_ids and task in after.entry_ids
    assert after.entry_ids.index(c.system_id) < after.entry_ids.index(task)
    # the cut fell inside the current turn, before an assistant step
    i = after.entry_ids.index(task)
    assert after.messages[i + 1].role == "assistant"
    assert task not in r.dropped and c.system_id not in r.dropped


def test_sliding_window_never_separates_calls_from_results() -> None:
    s = ct.Session.in_memory()
    c = Convo(s)
    c.user("Do everything in one turn.")
    for i in range(12):
        c.step(f"step {i}", tools=[("read", {"path": f"{i}.{k}"}, big(40 + 10 * k, i))
                                   for k in range(3)])
    total = tokens(context(s).messages)
    within = ladder_of(SlidingWindow(within_turn=True))
    for fraction in (0.9, 0.6, 0.3, 0.1, 0.01):
        r = s.compact(int(total * fraction / 0.4) + 1, ladder=within, dry_run=True)
        assert r.applied == ["sliding_window"]
    r = s.compact(int(total * 0.5 / 0.4), ladder=within)
    after = context(s).messages
    check_pairing(after)
    assert not interrupted(after)
    assert sum(1 for m in after if m.role == "tool") % 3 == 0


def test_sliding_window_keeps_the_current_turn_whole_by_default() -> None:
    s, c = long_task(steps=12)
    before = context(s)
    r = s.compact(2000, ladder=ladder_of(SlidingWindow()))
    assert r.applied == ["sliding_window"] and not r.reached_target
    after = context(s)
    task = c.users[-1]
    # every old turn went, the current one is untouched and starts the kept part
    assert after.entry_ids[2] == task
    assert after.entry_ids[2:] == before.entry_ids[before.entry_ids.index(task):]
    # nothing more to drop: it declines instead of dropping steps of the current task
    again = s.compact(2000, ladder=ladder_of(SlidingWindow()))
    assert again.stages[0].note == "nothing to do" and again.entry_id is None


def test_a_later_window_keeps_earlier_pins_and_counts_them_as_kept() -> None:
    """Regression: entries pinned by an earlier compaction (an old task) were counted as
    dropped when choosing the next cut, so the note and the cut were wrong."""
    s = ct.Session.in_memory()
    c = Convo(s)
    c.turn("Old turn.")
    first_task = c.user("First task: " + "details " * 300)
    c.reads(8)
    one = s.compact(2000, ladder=ladder_of(SlidingWindow(within_turn=True)))
    assert one.entry_id is not None
    assert first_task in ctx_ids(s)
    c.user("Second task.")
    c.reads(6)
    two = s.compact(2500, ladder=ladder_of(SlidingWindow()))
    assert two.applied == ["sliding_window"]
    ids = ctx_ids(s)
    assert first_task in ids and first_task not in two.dropped
    # the summary stands for everything folded so far: both compactions' dropped messages
    note = two.summary.split("\n\n")[0]
    folded = [*one.dropped, *two.dropped]
    assert note.startswith(f"{len(folded)} earlier messages")
    dropped_tokens = sum(
        tokens([e.message]) for e in s.branch()
        if isinstance(e, MessageEntry) and e.id in folded)
    about = int(note.split("about ")[1].split(" tokens")[0])
    assert abs(about - dropped_tokens) <= 0.1 * dropped_tokens + 20
    assert "Old turn." in two.summary  # folded by the first, carried by the second


def test_sliding_window_with_nothing_to_drop_declines() -> None:
    """Regression: with one turn it cut before the task, dropped nothing, and offered a plan
    with only a "0 earlier messages" note (then rejected as not smaller)."""
    s = ct.Session.in_memory()
    c = Convo(s)
    c.user("The only task.")
    c.reads(6)
    r = s.compact(500, ladder=ladder_of(SlidingWindow()))
    assert r.stages[0].note == "nothing to do" and r.entry_id is None


# -- Digest -------------------------------------------------------------------------------


def coding_history(s: ct.Session) -> Convo:
    c = Convo(s)
    c.user("Fix the failing date parser; do not touch the public API of dates.py.")
    c.step("Let me look at the parser.",
           tools=[("read", {"path": "src/dates.py"}, big(120, 1))])
    c.step("I will switch to datetime.fromisoformat instead of the regex.",
           tools=[("edit", {"path": "src/dates.py", "old": "re.match", "new": "fromisoformat"},
                   "Edited src/dates.py (1 replacement)")])
    c.step(tools=[("shell", {"command": "pytest tests/test_dates.py -q"},
                   "F.\nE   ValueError: Invalid isoformat string: '2024-13-01'\n"
                   "1 failed, 1 passed")], meta={"exit_code": 1}, is_error=True)
    c.step(tools=[("write", {"path": "tests/test_dates.py", "content": "..."}, "Wrote 40 lines")])
    c.step(tools=[("shell", {"command": "ruff check src"}, "All checks passed!\n[exit code 0]")])
    c.step("Plan: 1) validate the month range first, 2) rerun the tests, 3) update CHANGELOG.")
    c.user("Also add a regression test for month 13.")
    c.reads(6, size=200)
    c.step("Done.")
    return c


def section(text: str, title: str) -> str:
    """The body of the Markdown section whose title starts with ``title``."""
    return text.split(f"\n## {title}")[1].split("\n\n")[0]


def test_digest_keeps_requests_files_commands_errors_and_notes() -> None:
    s = ct.Session.in_memory()
    c = coding_history(s)
    r = s.compact(1500, ladder=ladder_of(Digest()))
    assert r.applied == ["digest"]
    summary = context(s).messages[0]
    assert summary.role == "system" and summary.meta
    assert summary.meta["kind"] == "compaction_summary"
    text = summary.text
    assert "Fix the failing date parser; do not touch the public API of dates.py." in \
        section(text, "What the user said")
    changed = section(text, "Files changed")
    assert "src/dates.py: edit 're.match' -> 'fromisoformat'" in changed
    assert "tests/test_dates.py: write" in changed
    # the failure was not followed by a passing run of the same command: still open
    assert "`pytest tests/test_dates.py -q` ended with exit code 1" in section(text, "Open errors")
    assert "Invalid isoformat string: '2024-13-01'" in section(text, "Open errors")
    assert "`ruff check src` -> exit code 0" in section(text, "Commands run")
    said = section(text, "What the assistant said")
    assert "I will switch to datetime.fromisoformat instead of the regex." in said
    assert "Plan: 1) validate the month range first, 2) rerun the tests, 3) update" in said
    assert set(r.summarized) <= set(r.dropped) | {c.users[0]}
    assert c.users[1] in context(s).entry_ids  # the current task is kept
    # the state is stored for the next compaction to merge
    entry = s.get_entry(r.entry_id or "")
    assert isinstance(entry, CompactionEntry) and entry.details["digest"]["users"] == [
        "Fix the failing date parser; do not touch the public API of dates.py."]


def test_digest_lists_repeats_once_and_fits_its_budget() -> None:
    from contextree.compaction import digest_messages

    items: list[tuple[Message, str | None]] = []
    for t in range(200):
        items.append((Message.user(f"Request {t}: " + "please keep going " * 20), None))
        call = ToolCall(id=f"c{t}", name="shell", arguments={"command": "make test"})
        items.append((Message.assistant("", tool_calls=[call]), None))
        items.append((Message.tool("ok", tool_call_id=f"c{t}", meta={"exit_code": 0}), None))
    full = digest_messages("", items)
    assert full.count("`make test` -> exit code 0") == 1
    small = digest_messages("PREVIOUS", items, max_chars=12_000)
    assert len(small) <= 12_500
    # the previous summary is carried verbatim, never cut
    assert "## Earlier summary (carried verbatim)\nPREVIOUS" in small
    users = section(small, "What the user said")
    assert "Request 0: please keep going" in users  # the first request is always whole
    assert "- Request 199: please keep going please keep going" in users  # the newest whole
    assert "- (shortened) Request 190: please keep going" in users  # older ones shortened
    assert "older messages of the user not shown" in users  # the oldest past twice the share
    assert "`make test` -> exit code 0" in small


def test_digest_stage_fits_the_room_under_the_target() -> None:
    s = ct.Session.in_memory()
    c = Convo(s)
    for t in range(60):
        c.user(f"Request {t}: " + "with a long explanation " * 40)
        c.step(f"I decided to handle request {t} with approach {t}.",
               tools=[("edit", {"path": f"src/file_{t}.py"}, "ok")])
    r = s.compact(6000, ladder=ladder_of(Digest()))
    assert r.applied == ["digest"] and r.reached_target
    assert 0.85 * r.target <= r.tokens_after <= r.target  # it uses the room it is given
    text = context(s).messages[0].text
    kept = context(s).entry_ids
    last = max(t for t in range(60) if c.users[t] not in kept)  # the newest one dropped
    assert "Request 0:" in text and f"Request {last}:" in text
    assert f"src/file_{last}.py" in text and f"approach {last}." in text


def test_digest_is_deterministic() -> None:
    a, b = ct.Session.in_memory(), ct.Session.in_memory()
    coding_history(a), coding_history(b)
    ra, rb = (x.compact(1500, ladder=ladder_of(Digest()), dry_run=True) for x in (a, b))
    assert ra.summary == rb.summary and ra.tokens_after == rb.tokens_after


# -- Summarize ----------------------------------------------------------------------------


def test_summarize_sends_a_structured_prompt_and_marks_the_summary() -> None:
    s, _ = long_session(turns=6)
    model = ScriptedModel(["## Objective\nRefactor modules 0-5."])
    r = s.compact(4000, ladder=ladder_of(Summarize(model)))
    assert r.applied == ["summarize"] and len(model.calls) == 1
    sent = model.calls[0]
    assert [m.role for m in sent] == ["system", "user"]
    assert sent[0].text == SYSTEM_PROMPT
    for section in ("Objective", "Decisions", "Identifiers", "Outstanding work", "verbatim"):
        assert section in sent[0].text
    assert "<conversation>" in sent[1].text and "<previous-summary>" not in sent[1].text
    assert "Task 0: refactor module 0" in sent[1].text
    assert "src/mod_1.py" in sent[1].text  # tool call arguments are in the transcript
    after = context(s)
    summary = after.messages[0]
    entry = s.get_entry(r.entry_id or "")
    assert isinstance(entry, CompactionEntry)
    assert summary.role == "system" and summary.meta == {
        "kind": "compaction_summary", "entry_id": r.entry_id, "tokens_before": r.tokens_before,
        "tokens_after": r.tokens_after, "summary": r.summary, "digest": entry.details["digest"]}  # the raw summary and state
    # the model's summary, and what the user typed verbatim around it
    assert "## Summary written by the summarizer\n## Objective\nRefactor modules 0-5." \
        in r.summary
    assert "- Task 0: refactor module 0 and keep the public API stable." in r.summary
    assert entry.details["digest"]["model"] == "## Objective\nRefactor modules 0-5."
    assert not any("Refactor modules 0-5." in m.text for m in after.messages if m.role == "user")
    entry = s.get_entry(r.entry_id or "")
    assert isinstance(entry, CompactionEntry) and entry.usage is not None
    assert entry.usage.input > 0  # the summarizer's usage is recorded
    assert set(r.summarized) == set(r.dropped)


def test_a_second_summary_updates_the_first() -> None:
    s, c = long_session(turns=6)
    model = ScriptedModel(["FIRST SUMMARY: modules 0-4 refactored.", "SECOND SUMMARY"])
    s.compact(4000, ladder=ladder_of(Summarize(model)))
    for t in range(6, 10):
        c.turn(f"Task {t}: more work")
    r = s.compact(4000, ladder=ladder_of(Summarize(model)))
    assert r.applied == ["summarize"] and len(model.calls) == 2
    request = model.calls[1][1].text
    previous = request.split("<previous-summary>\n")[1].split("\n</previous-summary>")[0]
    assert "FIRST SUMMARY: modules 0-4 refactored." in previous
    assert "Update the previous summary" in request
    assert "<conversation>" in request and "Task 0: refactor" not in request.split(
        "<conversation>")[1]  # already summarized: not sent again
    assert "Task 6: more work" in request
    text = context(s).messages[0].text
    assert "SECOND SUMMARY" in text and "FIRST SUMMARY" not in text  # updated, not piled up
    assert "Task 0: refactor module 0" in text  # the user's words stay whatever the model says


def test_summarize_chunks_input_larger_than_its_own_window() -> None:
    s, c = long_session(turns=8)
    seen: list[str] = []

    def reply(msgs: Sequence[Message]) -> str:
        seen.append(msgs[1].text)
        return f"summary after chunk {len(seen)}"

    model = ScriptedModel([reply] * 50)
    r = s.compact(3000, ladder=ladder_of(Summarize(model, max_input_tokens=2500)))
    assert r.applied == ["summarize"]
    assert len(model.calls) >= 3
    assert "<previous-summary>" not in seen[0]
    for k in range(1, len(seen)):  # each chunk updates the summary so far
        assert f"<previous-summary>\nsummary after chunk {k}\n</previous-summary>" in seen[k]
    assert f"## Summary written by the summarizer\nsummary after chunk {len(seen)}\n" in r.summary
    for call in model.calls:  # each request fits the summarizer's own window
        assert tokens(call) <= 2500
    # every dropped message went to the summarizer exactly once
    for t in range(8):
        n = sum(f"[user]\nTask {t}: refactor module {t} " in x for x in seen)
        assert n == (1 if c.users[t] in r.summarized else 0)


def test_summarize_packs_chunks_by_what_is_sent() -> None:
    """Long outputs are shortened in the transcript, so chunks are sized by the transcript,
    not by the full messages (which took more calls than needed)."""
    s = ct.Session.in_memory()
    c = Convo(s)
    c.user("Read the logs.")
    c.reads(12, size=2000)  # ~25k tokens each, ~2k once shortened for the transcript
    model = ScriptedModel(["summary"] * 50)
    s.compact(20_000, ladder=ladder_of(Summarize(model, max_input_tokens=40_000)))
    assert len(model.calls) == 1 and tokens(model.calls[0]) <= 40_000


def test_summarize_passes_options_to_the_model() -> None:
    s, _ = long_session(turns=4)
    model = ScriptedModel(["s"])
    s.compact(3000, ladder=ladder_of(Summarize(model, max_tokens=500)))
    assert model.options[0] == {"max_tokens": 500}


# -- the ladder ---------------------------------------------------------------------------


def test_the_ladder_stops_at_the_first_stage_that_reaches_the_target() -> None:
    s, _ = long_session(turns=8)
    model = ScriptedModel(["## Objective\nRefactor the modules."])
    cleared = s.compact(1000, ladder=ladder_of(ToolResults()), dry_run=True).tokens_after
    r = s.compact(int(cleared * 0.7 / 0.4), model=model)
    assert r.reached_target
    assert [x.name for x in r.stages] == ["tool_results", "sliding_window"]
    assert r.applied == ["tool_results", "sliding_window"]
    # the turns the sliding window dropped were summarized by the model, not just dropped
    assert len(model.calls) == 1 and "Refactor the modules." in r.summary
    # with a generous target, tool results alone are enough
    fresh, _ = long_session(turns=8)
    r2 = fresh.compact(int(tokens(context(fresh).messages) * 0.9 / 0.4), model=model)
    assert [x.name for x in r2.stages] == ["tool_results"] and r2.reached_target
    assert len(model.calls) == 1  # clearing is reversible: no summary, no model call


def test_default_ladder_order() -> None:
    names = [st.name for st in default_ladder().stages]
    assert names == ["tool_results", "sliding_window", "digest"]
    names = [st.name for st in default_ladder(ScriptedModel([])).stages]
    assert names == ["tool_results", "sliding_window", "summarize", "digest"]


def test_stage_reports_chain_their_before_and_after() -> None:
    s, _ = long_session(turns=10)
    r = s.compact(1200, model=ScriptedModel(["short summary"]))
    assert len(r.stages) >= 2
    for a, b in zip(r.stages, r.stages[1:], strict=False):
        assert b.tokens_before == (a.tokens_after if a.applied else a.tokens_before)
    for st in r.stages:
        assert (st.tokens_after < st.tokens_before) == st.applied
    assert r.tokens_after == r.stages[-1].tokens_after


def snapshot(path: Path) -> bytes:
    return path.read_bytes()


def test_a_raising_summarizer_falls_back_to_digest_and_keeps_history(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    s = ct.Session.create(path)
    long_session(s, turns=8)
    original = [e for e in s.branch()]
    on_disk = snapshot(path)
    model = ScriptedModel([ModelUnavailable("provider down")])
    r = s.compact(2000, ladder=ladder_of(SlidingWindow(), Summarize(model), Digest()))
    events = compaction_events(r)
    assert len(model.calls) == 1
    # the stage that called the summarizer folded with the digest when it failed
    summ = next(x for x in r.stages if x.error is not None)
    assert summ.name == "summarize" and summ.applied
    assert "provider down" in summ.note and "digest was used" in summ.note
    assert r.reached_target and "Task 0: refactor module 0" in r.summary
    assert {"event": Event.COMPACTION_FAILED, "reason": f"stage summarize {summ.note}",
            "tokens": summ.tokens_before, "stage": "summarize",
            "error": repr(ModelUnavailable("provider down"))} in events
    assert [e["event"] for e in events] == ["compaction_failed", "compacted"]
    # history untouched: the old entries unchanged, one compaction entry appended
    branch = s.branch()
    assert branch[: len(original)] == original
    assert len(branch) == len(original) + 1 and isinstance(branch[-1], CompactionEntry)
    assert snapshot(path).startswith(on_disk)
    s.close()
    again = ct.Session.open(path)
    assert again.branch()[: len(original)] == original


class Boom:
    """A stage that raises."""

    name = "boom"

    def __call__(self, state: CompactionState, plan: Plan) -> Plan | None:
        raise RuntimeError("boom")


def test_a_failing_ladder_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    s = ct.Session.create(path)
    long_session(s, turns=6)
    on_disk = snapshot(path)
    original = s.branch()
    r = s.compact(2000, ladder=ladder_of(Boom()))
    events = compaction_events(r)
    assert r.entry_id is None and r.applied == [] and not r.reached_target and r.reason
    assert snapshot(path) == on_disk and s.branch() == original
    assert [e["event"] for e in events] == ["compaction_failed", "compaction_failed"]
    first = events[0]
    assert first["stage"] == "boom" and "boom" in (first.get("error") or "")
    assert events[1] == {"event": "compaction_failed", "reason": r.reason,
                         "tokens": r.tokens_before, "stage": None, "error": None}


def test_compaction_failed_has_one_payload_shape() -> None:
    """A failing stage and a failing ladder report through the same payload type."""
    s, _ = long_session(turns=6)
    r = s.compact(2000, ladder=ladder_of(Boom()))
    failed = [p for p in compaction_events(r) if p["event"] == Event.COMPACTION_FAILED]
    assert len(failed) == 2 and {p.get("stage") for p in failed} == {"boom", None}
    # a summarizer that fails inside a stage that applied is reported the same way
    r = s.compact(2000, ladder=ladder_of(Summarize(ScriptedModel([RuntimeError("down")]))))
    assert r.entry_id is not None and r.applied == ["summarize"]
    failed += [p for p in compaction_events(r) if p["event"] == Event.COMPACTION_FAILED]
    assert len(failed) == 3 and failed[-1]["stage"] == "summarize"
    shape = set(CompactionFailedPayload.__annotations__) | {"event"}
    assert all(set(p) == shape for p in failed)
    assert all(isinstance(p["reason"], str) and p["reason"] for p in failed)
    assert all(isinstance(p["tokens"], int) for p in failed)


def test_an_empty_summary_is_rejected_for_the_digest() -> None:
    s, _ = long_session(turns=6)
    r = s.compact(2000, model=ScriptedModel(["   "]), ladder=ladder_of(
        Summarize(ScriptedModel(["  "])), Digest()))
    assert r.applied == ["summarize"] and r.reached_target
    assert "empty summary" in r.stages[0].note and "digest was used" in r.stages[0].note
    assert "Task 0: refactor module 0" in r.summary  # the digest stood in


class Bigger:
    """A misbehaving stage: returns a plan that is larger than the one it got."""

    name = "bigger"

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, state: CompactionState, plan: Plan) -> Plan | None:
        self.calls += 1
        return replace(plan, summary=plan.summary + "padding " * 5000)


def test_a_stage_that_does_not_shrink_is_rejected() -> None:
    s, _ = long_session(turns=6)
    bigger = Bigger()
    r = s.compact(3000, ladder=ladder_of(bigger, SlidingWindow()))
    assert bigger.calls == 1
    assert r.stages[0].name == "bigger" and not r.stages[0].applied
    assert "rejected" in r.stages[0].note and r.stages[0].tokens_after > r.stages[0].tokens_before
    assert r.applied == ["sliding_window"]
    assert "padding" not in context(s).messages[0].text
    only = s.compact(3000, ladder=ladder_of(Bigger()), force=True)
    assert only.entry_id is None and only.applied == []


def test_an_unreachable_target_says_why() -> None:
    s = ct.Session.in_memory()
    c = Convo(s)
    c.turn("Old task.")
    c.user("Current task: " + "very long instructions " * 2000)  # ~10k tokens on its own
    c.step("ok")
    r = s.compact(5000)
    assert not r.reached_target and r.tokens_after > r.target
    assert "above the target" in r.reason and str(r.target) in r.reason
    assert r.entry_id is not None  # what could be done was done
    ctx = context(s)
    assert c.users[-1] in ctx.entry_ids and c.system_id in ctx.entry_ids


def test_no_model_call_when_a_summary_cannot_help() -> None:
    s = ct.Session.in_memory()
    c = Convo(s)
    for t in range(4):
        c.turn(f"Task {t}")
    c.user("Current task: " + "very long instructions " * 2000)
    c.step("ok")
    model = ScriptedModel(["summary one", "summary two"])
    first = s.compact(5000, model=model)
    # dropping every old turn is all that can be done; a summary of them would only add
    assert not first.reached_target and first.entry_id is not None
    assert model.calls == []
    assert next(x for x in first.stages if x.name == "summarize").note == "nothing to do"
    second = s.compact(5000, model=model)
    assert model.calls == [] and second.entry_id is None and second.reason


def test_the_ladder_summarizes_a_long_current_task_once() -> None:
    s, c = long_task(steps=20)
    model = ScriptedModel(["## Objective\nMigrate logging.", "never used"])
    first = s.compact(3000, model=model)
    assert first.applied == ["tool_results", "sliding_window", "summarize"]
    assert first.reached_target and len(model.calls) == 1
    sent = model.calls[0][1].text
    assert "Old task A" in sent and "Current task: migrate" not in sent  # the task is pinned
    assert "Keep the summary under about" in sent
    ctx = context(s)
    assert "## Summary written by the summarizer\n## Objective\nMigrate logging." in \
        ctx.messages[0].text
    assert c.users[-1] in ctx.entry_ids and c.system_id in ctx.entry_ids
    check_pairing(ctx.messages)
    again = s.compact(3000, model=model)
    assert again.entry_id is None and len(model.calls) == 1


# -- history, reopening and composition ---------------------------------------------------


def test_history_is_preserved_and_reopening_rebuilds_the_same_context(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    s = ct.Session.create(path)
    long_session(s, turns=8)
    original = s.branch()
    r = s.compact(3000)
    assert r.entry_id is not None
    right_after = context(s)
    # no reported usage: the ladder's count is exactly the estimate of what is built
    assert tokens(right_after.messages) == r.tokens_after
    s.close()
    with ct.Session.open(path) as again:
        branch = again.branch()
        assert branch[: len(original)] == original
        assert all(isinstance(e, MessageEntry) for e in branch[: len(original)])
        reopened = again.build_context()
        assert [m.to_dict() for m in reopened.messages] == \
            [m.to_dict() for m in right_after.messages]
        assert reopened.entry_ids == right_after.entry_ids


def test_dry_run_predicts_the_real_run_and_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    s = ct.Session.create(path)
    long_session(s, turns=8)
    on_disk = snapshot(path)
    dry = s.compact(10_000, dry_run=True)
    assert dry.entry_id is None and snapshot(path) == on_disk
    p = dry.payload()
    assert set(p) >= {"tokens_before", "tokens_after", "target", "stages", "cleared",
                      "dropped", "summarized", "summary", "entry_id", "reason"}
    assert p["stages"] and set(p["stages"][0]) >= {"name", "tokens_before", "tokens_after",
                                                    "applied"}
    assert p["cleared"] and p["dropped"] and p["summary"]
    real = s.compact(10_000)
    assert real.entry_id is not None
    assert {**real.payload(), "entry_id": None} == p
    assert tokens(context(s).messages) == real.tokens_after


def test_repeated_compactions_compose() -> None:
    s, c = long_session(turns=6)

    def ladder() -> CompactionLadder:
        return ladder_of(ToolResults(keep_recent=1), SlidingWindow(), Digest(keep_ratio=0.9))

    first = s.compact(5000, ladder=ladder())
    assert first.applied == ["tool_results", "sliding_window"]
    ctx1 = context(s)
    ids1 = [i for i in ctx1.entry_ids if i is not None]
    cleared1 = {i: m.text for m, i in zip(ctx1.messages, ctx1.entry_ids, strict=True)
                if (m.meta or {}).get("kind") == "cleared_tool_result"}
    summary1 = s.get_entry(first.entry_id or "").summary  # type: ignore[union-attr]
    assert cleared1 and summary1
    for t in range(6, 9):
        c.turn(f"Task {t}: follow-up work")
    second = s.compact(6000, ladder=ladder())
    assert second.entry_id is not None and second.dropped
    ctx2 = context(s)
    check_pairing(ctx2.messages)
    ids2 = set(ctx2.entry_ids)
    # what the first kept is still there unless the second dropped it
    for i in ids1:
        if i != first.entry_id:  # its summary is carried by the second one
            assert i in ids2 or i in second.dropped, i
    # cleared placeholders persist for the results that are still kept
    shown = dict(zip(ctx2.entry_ids, ctx2.messages, strict=True))
    still = [i for i in cleared1 if i in ids2]
    assert still
    for i in still:
        assert shown[i].text == cleared1[i] and shown[i].meta
        assert shown[i].meta["kind"] == "cleared_tool_result"
    # the first summary's state carries forward into the second: what the user said
    entry1 = s.get_entry(first.entry_id or "")
    assert isinstance(entry1, CompactionEntry)
    for said in entry1.details["digest"]["users"]:
        assert said in ctx2.messages[0].text
    assert c.users[-1] in ids2 and c.system_id in ids2


def test_repeated_sliding_windows_merge_their_summaries() -> None:
    s, c = long_session(turns=6)
    one = s.compact(4000, ladder=ladder_of(SlidingWindow()))
    for t in range(6, 12):
        c.turn(f"Task {t}")
    two = s.compact(4000, ladder=ladder_of(SlidingWindow()))
    text = context(s).messages[0].text
    # one summary, merged: the header counts everything folded, each user message once
    assert text.count("earlier messages") == 1
    assert text.startswith(SUMMARY_PREFIX + f"{len(one.dropped) + len(two.dropped)} earlier")
    folded = [e.message.text for e in s.branch() if isinstance(e, MessageEntry)
              and e.message.role == "user" and e.id in {*one.dropped, *two.dropped}]
    assert folded and all(text.count(f"- {u}\n") + text.endswith(f"- {u}") == 1
                          for u in folded)


def test_compaction_only_uses_the_current_branch() -> None:
    s, c = long_session(turns=4)
    fork_at = s.leaf_id
    for t in range(3):
        c.turn(f"Branch A task {t}")
    s.move_to(fork_at)
    c.turn("Branch B task")
    r = s.compact(3000, ladder=ladder_of(Digest()))
    assert "Branch A" not in r.summary
    ctx = context(s)
    assert not any("Branch A" in m.text for m in ctx.messages)
    check_pairing(ctx.messages)


def test_a_retained_tail_compaction_is_counted_as_shown_then_digested() -> None:
    """Imported sessions (Codex) hold compactions that carry their kept messages inline."""
    s = ct.Session.in_memory()
    c = Convo(s)
    c.turn("Imported task.")
    tail = [Message.user("Retained request: keep the CLI flags."),
            Message.assistant("Retained answer " + "with detail " * 300)]
    s.append_compaction(summary="Imported summary.", first_kept_entry_id=None, tokens_before=50_000, retained_tail=tail)
    c.turn("New task after the import.", steps=6)
    before = context(s)
    assert "Retained answer" in before.messages[1].text + before.messages[2].text
    r = s.compact(4000, ladder=ladder_of(SlidingWindow(), Digest()))
    assert r.tokens_before == tokens(before.messages)
    after = context(s)
    check_pairing(after.messages)
    assert tokens(after.messages) == r.tokens_after
    summary = after.messages[0].text
    assert "Imported summary." in summary and "Retained request: keep the CLI flags." in summary
    assert not any(m.text.startswith("Retained answer") for m in after.messages)


def test_projected_custom_entries_are_counted() -> None:
    def project(entry: Any, index: int, entries: Any) -> list[Message]:
        return [Message.user(f"[note] {entry.data['text']}")]

    s = ct.Session(ct.storage.MemoryStorage(ct.entries.SessionHeader(id="p", created_at="2024-01-01")),
                   projectors={"note": project})
    c = Convo(s)
    c.turn("First task.")
    s.append_custom("note", {"text": "remember this " * 500})
    c.turn("Second task.")
    shown = context(s)
    assert any(m.text.startswith("[note]") for m in shown.messages)
    r = s.compact(1_000_000, dry_run=True, force=True)
    assert r.tokens_before == tokens(shown.messages)  # the projected note is counted
    r = s.compact(3000)
    assert tokens(context(s).messages) == r.tokens_after


# -- token anchoring ----------------------------------------------------------------------


def test_reported_usage_anchors_the_count() -> None:
    s = ct.Session.in_memory()
    c = Convo(s)
    c.user("Hello")
    c.step("Hi", usage=Usage(input=150_000, output=100))
    c.user("Next question")
    estimate_after = tokens([Message.user("Next question")])
    r = s.compact(1_000_000, dry_run=True, force=True)
    assert r.tokens_before == 150_100 + estimate_after


def test_usage_from_before_a_compaction_is_not_used() -> None:
    s = ct.Session.in_memory()
    c = Convo(s)
    for t in range(4):
        c.turn(f"Task {t}")
    c.step("checked", usage=Usage(input=900_000, output=10))  # a huge report
    r = s.compact(1_200_000, compact_to=0.5)
    assert r.tokens_before > 900_000 and r.entry_id is not None
    estimate = tokens(context(s).messages)
    assert estimate < 20_000
    again = s.compact(1_200_000, dry_run=True, force=True)
    # the report itself no longer counts, but its scale does: the count carries on from
    # the compaction's own count of the view it made, not from the plain estimate
    assert again.tokens_before == r.tokens_after != estimate
    c.user("Between")
    between = s.compact(1_200_000, dry_run=True, force=True)
    assert between.tokens_before == r.tokens_after + tokens([Message.user("Between")])
    c.user("New question")
    c.step("Answer", usage=Usage(input=50_000, cache_read=5_000, output=20))
    c.user("And another")
    later = s.compact(1_200_000, dry_run=True, force=True)
    assert later.tokens_before == 55_020 + tokens([Message.user("And another")])


@pytest.mark.parametrize("factor", [1.25, 0.8])
def test_reported_usage_scales_the_estimate(factor: float) -> None:
    """The provider's count is taken as a ratio to the estimate, above or below it: a plan
    lands where the provider will count it, inside 0.85-1.0 of the target."""
    s, c = long_session(turns=8)
    estimate = tokens(context(s).messages)
    c.step("checked", usage=Usage(input=round(estimate * factor), output=0))
    before = tokens(context(s).messages)
    r = s.compact(60_000, compact_to=0.05)
    assert r.tokens_before == round(estimate * factor)  # the report anchors the count
    assert r.reached_target and 0.85 * r.target <= r.tokens_after <= r.target
    after = tokens(context(s).messages)
    assert r.tokens_after == pytest.approx(after * r.tokens_before / before, abs=2)


def test_usage_below_the_estimate_scales_it_down() -> None:
    s, c = long_session(turns=8)
    estimate = tokens(context(s).messages)
    c.step("checked", usage=Usage(input=estimate // 2, output=0))
    before = tokens(context(s).messages)
    r = s.compact(10_000, dry_run=True)
    assert r.tokens_before == estimate // 2
    assert r.stages[0].tokens_before == r.tokens_before  # the ladder starts from the report
    full = s.compact(10_000)
    assert full.tokens_after == pytest.approx(
        tokens(context(s).messages) * r.tokens_before / before, abs=2)


# -- events -------------------------------------------------------------------------------


def test_compacted_event_payload() -> None:
    s, _ = long_task(steps=20)
    model = ScriptedModel(["THE SUMMARY"])
    r = s.compact(3000, ladder=ladder_of(ToolResults(keep_recent=1), SlidingWindow(),
                                          Summarize(model, keep_ratio=0.9), Digest()))
    events = compaction_events(r)
    names = [e["event"] for e in events]
    assert names == ["compacted"]
    p = dict(events[0])
    assert p.pop("event") == "compacted"
    assert {**p, "stages": [vars(st) for st in p["stages"]]} == r.payload()
    assert p["entry_id"] == s.leaf_id
    assert "## Summary written by the summarizer\nTHE SUMMARY\n" in p["summary"]
    assert [st.name for st in p["stages"]] == ["tool_results", "sliding_window", "summarize"]
    for st in p["stages"]:
        assert st.tokens_after < st.tokens_before
    assert p["tokens_before"] > p["tokens_after"]
    assert p["cleared"] and p["dropped"] and p["summarized"]
    assert p["reached_target"] is True and p["reason"] == ""
    branch_ids = {e.id for e in s.branch()}
    assert set(p["cleared"]) <= branch_ids and set(p["dropped"]) <= branch_ids
    assert set(p["summarized"]) <= branch_ids
    # cleared ids are still in the context (as placeholders); dropped ones are not
    ctx_ids_now = set(context(s).entry_ids)
    assert set(p["cleared"]) <= ctx_ids_now
    assert not set(p["dropped"]) & ctx_ids_now
    import orjson

    orjson.dumps(p)  # JSON-ready for archiving


def test_no_compacted_event_on_dry_run() -> None:
    s, _ = long_session(turns=6)
    before = s.branch()
    r = s.compact(2000, ladder=default_ladder(), dry_run=True)
    assert r.entry is not None and r.entry_id is None and s.branch() == before
    assert compaction_events(r) == []
