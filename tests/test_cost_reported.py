"""A cost the provider reports is kept, a reported ``0`` included; an unknown cost is ``None``
everywhere (``Usage.cost``, ``TurnResult.cost``, ``stats`` and ``stats --json``), never a
``0.0`` beside a ``null``; session files written with ``cost: 0.0`` still load."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

import contextree as ct
from contextree import Message, Session, Usage
from contextree.formats import export_session, import_session
from contextree.models import OpenAIChat, ScriptedModel, cost_of, table_cost
from contextree.runtime import Budget, SessionTree
from fakes.openai_server import OpenAIServer, completion
from helpers import reply_of

MODEL = "openai/gpt-4o-mini"  # as OpenRouter names it; the price table knows it there


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "contextree", *args], capture_output=True,
                          text=True, timeout=60)


def openrouter(server: OpenAIServer) -> OpenAIChat:
    return OpenAIChat(MODEL, base_url=server.base_url, api_key="k", provider="openrouter")


def free_reply(cost: Any = 0) -> dict[str, Any]:
    body = completion("Free answer.", prompt_tokens=1000, completion_tokens=10, model=MODEL)
    body["usage"]["cost"] = cost  # what OpenRouter charged: nothing
    return body


def test_the_table_would_price_the_model() -> None:
    """Otherwise the tests below could not tell a kept zero from a table price."""
    price = table_cost(Usage(input=1000, output=10), "openrouter", MODEL)
    assert price is not None and price > 0


@pytest.mark.parametrize("streamed", [False, True])
def test_a_reported_zero_cost_stays_zero(oa: OpenAIServer, streamed: bool) -> None:
    oa.reply(free_reply())
    model = openrouter(oa)
    reply = reply_of(model, [Message.user("q")], streamed=streamed)
    assert reply.usage is not None and reply.usage.cost == 0.0
    assert cost_of(reply) == 0.0


def test_a_reported_zero_is_zero_in_the_turn_the_session_and_the_cli(
        oa: OpenAIServer, tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    oa.reply(free_reply())
    turn = ct.agent().use(SessionTree, path=path).run(openrouter(oa)).start("q")
    assert turn.cost == 0.0
    assert turn.reply is not None and turn.reply.usage is not None
    assert turn.reply.usage.cost == 0.0
    stored = [orjson.loads(line) for line in path.read_bytes().splitlines()]
    assert [e["message"]["usage"]["cost"] for e in stored if e.get("type") == "message"
            and e["message"]["role"] == "assistant"] == [0.0]
    with Session.open(path, readonly=True) as s:
        stats = s.stats()
    assert stats.cost_total == 0.0 and stats.file.cost == 0.0 and stats.file.unpriced == 0
    out = run_cli("stats", str(path))
    assert out.returncode == 0, out.stderr
    cost_row = next(line for line in out.stdout.splitlines() if line.startswith("cost"))
    assert cost_row.split()[1:] == ["$0.0000", "$0.0000"]
    data = json.loads(run_cli("stats", str(path), "--json").stdout)
    assert data["cost_total"] == 0.0 and data["cost"] == 0.0
    assert data["file"]["by_model"][f"openrouter/{MODEL}"]["cost"] == 0.0


def test_a_budget_counts_a_free_call_as_free(tmp_path: Path) -> None:
    """A reported zero is a known price: the budget goes on (an unknown one stops it)."""
    free = [Message.assistant(text, usage=Usage(input=500, output=20, cost=0.0))
            for text in ("one", "two")]
    agent = (ct.agent().use(SessionTree, path=tmp_path / "s.jsonl")
             .use(Budget, max_cost=0.01, per="session").run(ScriptedModel(free)))
    assert agent.start("first").stopped is None
    turn = agent.start("second")
    assert turn.stopped is None and turn.text == "two" and turn.cost == 0.0


def test_a_cost_nobody_knows_is_none(oa: OpenAIServer) -> None:
    oa.reply(completion("ok", model="my-local-llama"))
    reply = OpenAIChat("my-local-llama", base_url=oa.base_url, api_key="k").complete(
        [Message.user("q")])
    assert reply.usage is not None and reply.usage.cost is None and cost_of(reply) is None
    assert Usage().cost is None
    assert (Usage() + Usage()).cost is None
    assert (Usage(cost=None) + Usage(cost=0.5)).cost == 0.5
    assert (Usage(cost=0.0) + Usage()).cost == 0.0


def unpriced_session(path: Path) -> None:
    ct.agent().use(SessionTree, path=path).run(ScriptedModel(["hi", "again"])).start("hello")


def test_stats_json_has_null_totals_when_prices_are_unknown(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    unpriced_session(path)
    data = json.loads(run_cli("stats", str(path), "--json").stdout)
    assert data["cost_total"] is None and data["cost"] is None
    assert data["cost_known"] == 0.0
    for part in (data["file"], data["branch"]):
        assert part["cost_total"] is None and part["cost"] is None
        assert part["usage"]["cost"] is None and part["unpriced_calls"] == 1
    for usage in data["file"]["by_model"].values():
        assert usage["cost"] is None
    for branch in data["branches"]:
        assert branch["cost"] is None and branch["usage"]["cost"] is None
    text = run_cli("stats", str(path)).stdout
    cost_row = next(line for line in text.splitlines() if line.startswith("cost"))
    assert cost_row.split()[1:] == ["unknown", "unknown"]


def test_stats_json_total_is_null_when_part_is_unknown(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    priced = table_cost(Usage(input=1000, output=100), "openai", "gpt-4o-mini")
    assert priced
    with Session.create(path) as s:
        s.append_message(Message.user("q"))
        s.append_message(Message.assistant("a", usage=Usage(input=1000, output=100),
                                           model="gpt-4o-mini", provider="openai"))
        s.append_message(Message.user("more"))
        s.append_message(Message.assistant("b", usage=Usage(input=10, output=5),
                                           model="llama", provider="local"))
    data = json.loads(run_cli("stats", str(path), "--json").stdout)
    assert data["cost_total"] is None and data["cost"] is None
    assert data["cost_known"] == pytest.approx(priced)
    assert data["file"]["by_model"]["openai/gpt-4o-mini"]["cost"] == pytest.approx(priced)
    text = run_cli("stats", str(path)).stdout
    assert f"${priced:.4f} + unknown (1 call)" in text


def test_a_session_with_no_calls_costs_nothing(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    with Session.create(path) as s:
        s.append_message(Message.user("q"))
    data = json.loads(run_cli("stats", str(path), "--json").stdout)
    assert data["cost_total"] == 0.0 and data["cost"] == 0.0


def test_old_session_files_with_cost_zero_written_still_load(tmp_path: Path) -> None:
    """Before ``cost`` could be null, an unknown cost was written as ``0.0``."""
    path = tmp_path / "old.jsonl"
    lines = [
        {"type": "session", "id": "old", "created_at": "2025-01-01T00:00:00Z", "version": 1,
         "cwd": "/w"},
        {"type": "message", "id": "u1", "parent_id": None, "timestamp": "2025-01-01T00:00:01Z",
         "message": {"role": "user", "content": "q"}},
        {"type": "message", "id": "a1", "parent_id": "u1", "timestamp": "2025-01-01T00:00:02Z",
         "message": {"role": "assistant", "content": "a", "model": "llama",
                     "provider": "local",
                     "usage": {"input": 10, "output": 5, "cache_read": 0, "cache_write": 0,
                               "total": 15, "cost": 0.0}}},
    ]
    path.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in lines))
    assert run_cli("verify", str(path)).returncode == 0
    with Session.open(path, readonly=True) as s:
        (_, reply) = s.build_context().messages
        stats = s.stats()
    assert reply.usage == Usage(input=10, output=5, total=15, cost=0.0)
    assert stats.cost_total == 0.0  # a cost written down is taken as written
    # and it keeps going: a new, unknown cost is written as null beside it
    with Session.open(path) as s:
        s.append_message(Message.user("more"))
        s.append_message(Message.assistant("b", usage=Usage(input=3, output=2),
                                           model="llama", provider="local"))
    costs = [orjson.loads(line)["message"].get("usage", {}).get("cost", "-")
             for line in path.read_bytes().splitlines()[1:]]
    assert costs == ["-", 0.0, "-", None]
    assert run_cli("verify", str(path)).returncode == 0


def test_an_unknown_cost_survives_the_pi_format(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    with Session.create(path) as s:
        s.append_message(Message.user("q"))
        s.append_message(Message.assistant("a", usage=Usage(input=10, output=5, total=15),
                                           model="llama", provider="local"))
    with Session.open(path, readonly=True) as s:
        out = export_session("pi", s, tmp_path / "pi.jsonl")
    pi_costs = [orjson.loads(line)["message"]["usage"]["cost"]["total"]
                for line in out.read_bytes().splitlines()
                if b'"assistant"' in line]
    assert pi_costs == [0]  # pi's own way of saying it has no price
    back = import_session("pi", out, tmp_path / "back.jsonl")
    try:
        reply = back.build_context().messages[-1]
    finally:
        back.close()
    assert reply.usage is not None and reply.usage.cost is None
