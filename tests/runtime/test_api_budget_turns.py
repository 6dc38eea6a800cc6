"""A turn the ``Budget`` stops says so: its result carries this turn's reply (none when the
model was never asked), a refused input is taken back instead of piling up unanswered, and
the notice gives small amounts in figures that add up."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import contextree as ct
from contextree import Message, Session, Usage
from contextree.entries import MessageEntry
from contextree.models import ScriptedModel
from contextree.runtime import Budget, Event, SessionLog, SessionTree
from contextree.runtime._flatlog import FlatLog


def answer(text: str, cost: float = 0.0001) -> Message:
    return Message.assistant(text, usage=Usage(input=400, output=100, total=500, cost=cost))


def tree_agent(model: ScriptedModel, path: Path, **budget: Any) -> ct.Agent:
    return ct.agent().use(SessionTree, path=path).use(Budget, **budget).run(model)


def context(path: Path) -> list[tuple[str, str]]:
    with Session.open(path, readonly=True) as s:
        return [(m.role, m.text) for m in s.build_context().messages]


def test_a_refused_turn_has_no_reply_and_keeps_no_unanswered_input(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    model = ScriptedModel([answer("first answer"), answer("second answer")])
    first = tree_agent(model, path, max_tokens=600, per="session").start("hello")
    assert first.text == "first answer" and first.stopped is None

    ended: list[Any] = []
    for question in ["again", "again", "third", "fourth"]:
        refused = tree_agent(model, path, max_tokens=600, per="session").on(
            Event.TURN_END, lambda env, p: ended.append(p)).start(question)
        assert refused.stopped == "budget"
        assert refused.reply is None and refused.text == ""  # not "first answer"
        assert any("raise the budget and ask again" in n for n in refused.notices)
        assert ended[-1]["stopped"] == "budget"
        # The session is as the last answer left it: no user messages piling up.
        assert context(path) == [("user", "hello"), ("assistant", "first answer")]
    assert len(model.calls) == 1

    # Nothing said is lost: each refused message stays in the tree, off the branch.
    with Session.open(path, readonly=True) as s:
        said = [e.message.text for e in s.find(MessageEntry) if e.message.role == "user"]
    assert said == ["hello", "again", "again", "third", "fourth"]

    # With room in the budget, asking again asks once and is answered.
    retried = tree_agent(model, path, max_tokens=5000, per="session").start("fourth")
    assert retried.text == "second answer"
    assert context(path) == [("user", "hello"), ("assistant", "first answer"),
                             ("user", "fourth"), ("assistant", "second answer")]
    assert [m.text for m in model.calls[1]] == ["hello", "first answer", "fourth"]


def test_start_with_no_input_after_a_refusal_has_nothing_to_answer(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    model = ScriptedModel([answer("one")])
    tree_agent(model, path, max_tokens=600, per="session").start("a")
    assert tree_agent(model, path, max_tokens=600, per="session").start("b").stopped == "budget"
    again = tree_agent(model, path, max_tokens=5000).start()
    assert again.stopped == "nothing_to_answer" and again.reply is None
    assert len(model.calls) == 1


def test_a_refused_first_turn_leaves_an_empty_session_valid(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    turn = tree_agent(ScriptedModel([]), path, max_tokens=1).start("too big for the budget")
    assert turn.stopped == "budget" and turn.reply is None
    assert context(path) == []
    with Session.open(path, readonly=True) as s:
        assert s.leaf_id is None


def test_the_flat_log_takes_a_refused_input_back_too(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    model = ScriptedModel([answer("first answer")])

    def run(question: str) -> ct.TurnResult:
        return (ct.agent().use(SessionLog, path=path)
                .use(Budget, max_tokens=600, per="session").run(model).start(question))

    assert run("hello").text == "first answer"
    for question in ["again", "other"]:
        refused = run(question)
        assert refused.stopped == "budget" and refused.text == ""
    assert [(m.role, m.text) for m in FlatLog(path).load(writable=False)] == [
        ("user", "hello"), ("assistant", "first answer")]


def test_the_cost_notice_gives_small_amounts_in_figures_that_add_up(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    model = ScriptedModel([answer("one", cost=0.0001)])
    tree_agent(model, path, max_tokens=10_000).start("a")
    turn = tree_agent(model, path, max_cost=0.00015, per="session").start("b")
    assert turn.stopped == "budget"
    (notice,) = turn.notices
    spent, nxt, total, limit = (float(x) for x in re.findall(r"\$([0-9.]+)", notice))
    assert (spent, limit) == (0.0001, 0.00015)
    assert spent + nxt > limit and abs(spent + nxt - total) < 1e-6
    assert "past max_cost=$0.00015" in notice and "$0.0001 spent" in notice
    assert not re.search(r"\$0\.0+\b(?!\d)", notice)  # never "$0.0000"
