"""Smoke test of the fidelity bench's session generator (bench/bench_fidelity.py).

Only the structure of the generated sessions is checked (deterministic, facts planted where
they should be, valid pairing); compaction quality is the bench's job, not a test's.
"""

from __future__ import annotations

import importlib.util
import sys

import pytest

from helpers import ROOT

PATH = ROOT / "bench" / "bench_fidelity.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_fidelity", PATH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_fidelity"] = module  # dataclasses resolve annotations through it
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop("bench_fidelity", None)


@pytest.fixture(scope="module")
def plan(bench):
    return bench.make_plan(3, 30_000)


def test_deterministic(bench, plan):
    again = bench.make_plan(3, 30_000)
    assert [m.to_dict() for m in bench.render(plan)] == [m.to_dict() for m in bench.render(again)]
    other = bench.make_plan(4, 30_000)
    assert [m.to_dict() for m in bench.render(other)] != [m.to_dict() for m in bench.render(plan)]


def test_size_near_budget(bench):
    for budget in (30_000, 120_000):
        tokens = bench.COUNTER.count_messages(bench.render(bench.make_plan(5, budget)))
        assert 0.85 * budget <= tokens <= 1.2 * budget


def test_facts_planted(bench, plan):
    assert len(plan.facts) == 22
    kinds = {f.kind for f in plan.facts}
    assert kinds == {k for k, _ in bench.KINDS}
    msgs = bench.render(plan)
    s = bench.score(msgs, plan.facts)
    assert s.total == (22, 22), s.missing
    assert s.stale == 0  # the uncompacted session never shows a retracted value as current
    first_user = next(m for m in msgs if m.role == "user").text.lower()
    for f in plan.facts:
        if f.kind in ("task", "rule"):
            assert f.key.lower() in first_user
    last_user = [m for m in msgs if m.role == "user"][-1].text.lower()
    assert "from before" in last_user
    assert not any(f.key.lower() in last_user for f in plan.facts)  # refers back, unnamed


def test_tool_output_facts_only_in_tools(bench, plan):
    """Identifiers of kind tool_id are found in a tool result and used in a tool call,
    never typed by the user or written in the assistant's prose."""
    msgs = bench.render(plan)
    for f in plan.facts:
        if f.kind != "tool_id":
            continue
        key = f.key.lower()
        assert any(m.role == "tool" and key in m.text.lower() for m in msgs)
        assert any(key in str(c.arguments).lower() for m in msgs for c in m.tool_calls or ())
        assert not any(m.role in ("user", "assistant") and key in m.text.lower() for m in msgs)


def test_correction_order(bench, plan):
    msgs = bench.render(plan)
    users = [m.text for m in msgs if m.role == "user"]
    for f in plan.facts:
        if f.stale:
            first_stale = next(i for i, u in enumerate(users) if f.stale in u)
            first_new = next(i for i, u in enumerate(users) if f.key in u)
            assert first_stale < first_new
            assert f.stale in users[first_new]  # "actually X, not Y"


def test_filler_turns_and_vocabularies(bench, plan):
    msgs = bench.render(plan)
    users = [m.text for m in msgs if m.role == "user"]
    assert sum(u in bench.FILLER_USER for u in users) >= 3
    for vocab in bench.VOCABS:
        for style in ("unique", "reused"):
            rendered = bench.render(plan, vocab, id_style=style)
            ok, why = bench.pairing_ok(rendered)
            assert ok, (vocab, style, why)
            assert bench.score(rendered, plan.facts).total == (22, 22)
    names = {c.name for m in bench.render(plan, "claude") for c in m.tool_calls or ()}
    assert names <= {"Bash", "Edit", "Write", "Read", "Grep"} and {"Bash", "Read"} <= names
    names = {c.name for m in bench.render(plan, "codex") for c in m.tool_calls or ()}
    assert names == {"shell", "apply_patch"}
    names = {c.name for m in bench.render(plan, "pi") for c in m.tool_calls or ()}
    assert {"bash", "edit"} <= names <= {"bash", "edit", "read", "write"}
    reused = [c.id for m in bench.render(plan, id_style="reused") for c in m.tool_calls or ()]
    assert len(set(reused)) < len(reused) / 5


def test_usage_scaled(bench, plan):
    base = bench.render(plan)
    for factor in (0.8, 1.25):
        msgs = bench.render(plan, usage=factor)
        assistants = [m for m in msgs if m.role == "assistant"]
        assert all(m.usage is not None for m in assistants)
        last = max(i for i, m in enumerate(msgs) if m.role == "assistant")
        est = bench.COUNTER.count_messages(base[:last])
        assert abs(msgs[last].usage.input - factor * est) <= 1


def test_pairing_check_catches_breakage(bench, plan):
    msgs = bench.render(plan)
    i = next(i for i, m in enumerate(msgs) if m.role == "tool")
    assert not bench.pairing_ok(msgs[:i] + msgs[i + 1:])[0]  # a call without its result
    assert not bench.pairing_ok(msgs[: i - 1] + msgs[i:])[0]  # an orphan result


def test_replay_tools_cover_the_plan(bench, plan):
    tools = {t.name: t for t in bench.replay_tools(plan)}
    assert set(tools) == {"read", "grep", "shell", "edit", "write"}
    actions = [a for t in plan.turns for s in t.steps for a in s.actions]
    assert actions and all(bench.render_action(a, "native")[0] in tools for a in actions)


def test_category_probes_planted(bench, plan):
    """The five probes besides the 22 facts: one a category, each present uncompacted,
    counted apart from the facts."""
    assert [p.kind for p in plan.probes] == [k for k, _ in bench.PROBE_KINDS]
    assert all(p.probe for p in plan.probes)
    covered = {k for _, kinds in bench.CATEGORIES for k in kinds}
    assert {p.kind for p in plan.probes} <= covered
    s = bench.score(bench.render(plan), plan.scored)
    assert s.total == (22, 22)
    assert all(all(flags) for flags in s.probes.values()) and len(s.probes) == 5
    msgs = bench.render(plan)
    read = next(p for p in plan.probes if p.kind == "file_read").key
    assert not any(read in str(c.arguments) for m in msgs for c in m.tool_calls or ()
                   if c.name in ("edit", "write"))  # read, never changed
