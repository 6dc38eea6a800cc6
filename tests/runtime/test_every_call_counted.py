"""Every model call is in the statistics, under its model: the turns' replies, each
summarizer call (accepted or rejected), a compaction that wrote nothing but called the
summarizer, a reply cut short before the provider sent usage (estimated, and said to be),
and a call interrupted before anything arrived. ``stats --by-model`` adds up to the totals,
and an estimate is priced by the table or "unknown", never $0."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

import contextree as ct
from contextree import Message, Session, ToolCall, Usage
from contextree._pricing import table_cost
from contextree._stats import tally
from contextree.compaction import CompactionLadder, SlidingWindow, ToolResults
from contextree.entries import CALLS_TYPE, CallRecord, CompactionEntry, CustomEntry
from contextree.markers import Kind
from contextree.models import OpenAIChat, ScriptedModel
from contextree.runtime import Event, SessionTree
from fakes import Recorded
from fakes.openai_server import OpenAIServer, completion
from helpers import run

SHA = "9a41f0c2d3"
SUMMARY_USAGE = Usage(input=1206, output=13, total=1219, cost=0.0002)


def _fill(s: Session, start: int) -> None:
    s.append_message(Message.user(f"Find the commit that broke the build ({SHA}); port 8443."))
    for t in range(start, start + 8):
        call = ToolCall(id=f"r{t}", name="read", arguments={"path": f"src/m{t}.py"})
        s.append_message(Message.assistant(f"Reading module {t}.", tool_calls=[call]))
        s.append_message(Message.tool("x = compute()\n" * 150, tool_call_id=call.id,
                                      name="read"))
    s.append_message(Message.user("ok, continue"))


def _ladder(model: ScriptedModel) -> CompactionLadder:
    return CompactionLadder([ToolResults(), SlidingWindow()], summarizer=model)


def _interrupt_when(server: OpenAIServer, agent: ct.Agent, text: str, *,
                    after_text: bool) -> Any:
    """Run a turn and leave it: after its first text (``after_text``), else as soon as the
    server has the request (nothing of the reply has arrived)."""
    seen = len(server.requests)
    with agent.stream(text) as stream:
        for event in stream:
            if after_text and event["event"] == Event.TEXT_DELTA:
                break
            if not after_text and event["event"] == Event.MODEL_START:
                deadline = time.monotonic() + 10
                while len(server.requests) == seen and time.monotonic() < deadline:
                    time.sleep(0.01)
                break
    return stream.result


def _held(server: OpenAIServer, body: dict[str, Any], after: int) -> Any:
    sse = server.to_stream(body, Recorded("POST", "", {}, {"stream_options":
                                                          {"include_usage": True}}))
    sse.hold_after = after
    server.reply(sse)
    return sse


@pytest.fixture
def prices() -> None:
    if table_cost(Usage(input=1000), "openai", "gpt-4o-mini") is None:
        pytest.skip("no price table installed (pip install 'contextree[prices]')")


def test_every_call_is_counted_under_its_model_and_the_models_add_up(
        tmp_path: Path, prices: None) -> None:
    path = tmp_path / "s.jsonl"
    rejected = ScriptedModel([Message.assistant(f"## Identifiers\n{SHA} 8443\n"
                                                + "padding " * 20_000, usage=SUMMARY_USAGE)],
                             name="summarizer-x")
    accepted = ScriptedModel([Message.assistant(f"## Objective\nFind it.\n## Identifiers\n"
                                                f"{SHA}, 8443", usage=SUMMARY_USAGE)],
                             name="summarizer-x")
    with Session.create(path) as s:
        _fill(s, 0)
        first = s.compact(4_000, ladder=_ladder(rejected))
        assert "not smaller than what it replaces" in "; ".join(x.note for x in first.stages)
        _fill(s, 8)
        second = s.compact(4_000, ladder=_ladder(accepted))
        assert second.entry_id is not None
    with Session.open(path, readonly=True) as s:
        outcomes = [c["outcome"] for e in s.find(CompactionEntry)
                    for c in (e.details or {}).get("calls", [])]
    assert outcomes == ["summary_rejected", "summary"]

    with OpenAIServer() as server:
        priced = OpenAIChat("gpt-4o-mini", base_url=server.base_url, api_key="k")
        unknown = OpenAIChat("gpt-test", base_url=server.base_url, api_key="k")
        server.reply(completion("Done.", model="gpt-4o-mini"))
        ct.agent().use(SessionTree, path=path).run(priced).start("Say done.")
        # Cut short after some text, before the usage chunk: the usage is estimated.
        sse = _held(server, completion("The weather in Paris is sunny today.",
                                       model="gpt-4o-mini"), after=4)
        cut = _interrupt_when(server, ct.agent().use(SessionTree, path=path).run(priced),
                              "Weather?", after_text=True)
        sse.release.set()
        # Interrupted before anything arrived: a call record, input estimated.
        sse = _held(server, completion("Never seen.", model="gpt-test"), after=0)
        lost = _interrupt_when(server, ct.agent().use(SessionTree, path=path).run(unknown),
                               "Again?", after_text=False)
        sse.release.set()
    assert cut.stopped == "interrupted" and lost.stopped == "interrupted"
    assert cut.usage.input > 0 and cut.cost is not None and cut.cost > 0  # priced estimate
    assert lost.usage.input > 0 and lost.cost is None  # gpt-test has no price: unknown

    with Session.open(path, readonly=True) as s:
        partial = next(e.message for e in s.entries() if getattr(e, "message", None)
                       is not None and e.message.kind is Kind.INTERRUPTED_REPLY)
        assert partial.meta is not None and partial.meta["usage_estimated"] is True
        assert partial.usage is not None and partial.usage.input > 0
        records = [e for e in s.find(CustomEntry) if e.custom_type == CALLS_TYPE]
        stats = s.stats()
        whole = tally(s.entries())  # from decoded entries, not the file's lines
    assert (whole.calls_by_model, whole.by_model) == (stats.file.calls_by_model,
                                                      stats.file.by_model)
    assert [r.data["calls"][0]["outcome"] for r in records] == ["interrupted"]
    f = stats.file
    assert f.calls == 2 + 1 + 1 + 1  # two summarizer calls, a reply, a cut one, a lost one
    assert f.estimated == 2
    assert f.calls_by_model["scripted/summarizer-x"] == 2
    assert f.by_model["scripted/summarizer-x"].input == 2 * SUMMARY_USAGE.input
    total = sum(f.by_model.values(), Usage())
    assert (total.input, total.output) == (f.usage.input, f.usage.output)
    assert total.cost == pytest.approx(f.cost_known)
    assert sum(f.calls_by_model.values()) == f.calls
    assert f.model_cost_text("openai/gpt-test") == "unknown"  # never $0
    assert f.cost is None  # one call's price is unknown, so the total is unknown

    data = json.loads(run("stats", path, "--by-model", "--json").stdout)
    rows = data["by_model"].values()
    assert sum(r["input"] for r in rows) == data["total"]["input"]
    assert sum(r["output"] for r in rows) == data["total"]["output"]
    assert sum(r["calls"] for r in rows) == data["total"]["calls"] == 5
    assert sum(r["cost_known"] for r in rows) == pytest.approx(data["total"]["cost_known"])
    text = run("stats", path, "--by-model").stdout
    assert "scripted/summarizer-x" in text and "total" in text and "estimated" in text
    assert "$0.0000" not in text.split("openai/gpt-test")[1].split("\n")[0]


class _CallsButFails:
    """A stage that calls a model (recorded as the summarizer records its calls) and then
    finds nothing to do: no compaction is written, but the call was made and billed."""

    name = "calls_but_fails"

    def __call__(self, state: Any, plan: Any) -> None:
        state.calls.append(CallRecord(provider="openai", model="gpt-test", usage=Usage(
            input=500, output=20), outcome="summary_rejected"))
        return None


def test_a_compaction_that_writes_nothing_still_records_its_calls(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    with Session.create(path) as s:
        _fill(s, 0)
        result = s.compact(4_000, ladder=CompactionLadder([_CallsButFails()]))
        assert result.entry_id is None and len(result.calls) == 1
        assert s.compact(4_000, ladder=CompactionLadder([_CallsButFails()]),
                         dry_run=True).entry is None  # a dry run writes nothing
        (record,) = [e for e in s.find(CustomEntry) if e.custom_type == CALLS_TYPE]
        stats = s.stats()
    assert record.data["calls"][0]["model"] == "gpt-test"
    assert stats.file.calls_by_model["openai/gpt-test"] == 1
    assert stats.file.by_model["openai/gpt-test"].input == 500
    assert stats.file.usage.input == 500
