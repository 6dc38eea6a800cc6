"""Cost: every call priced from its usage by the installed price table (cache reads and writes
at their own rates), the provider's figure first; an unknown price is unknown, never $0."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import genai_prices
import pytest

import contextree as ct
from contextree import Message, Session, Usage
from contextree.models import AnthropicMessages, OpenAIChat, cost_of, table_cost
from fakes.anthropic_server import AnthropicServer, message, text
from fakes.openai_server import OpenAIServer, completion
from helpers import SRC, reply_of


def table_price(body: dict[str, Any], provider: str, flavor: str = "default") -> float:
    """The price table's own reading of a raw response body."""
    extracted = genai_prices.extract_usage(body, provider_id=provider, api_flavor=flavor)
    return float(extracted.calc_price().total_price)


@pytest.mark.parametrize("streamed", [False, True])
def test_openai_cost_matches_the_price_table_cache_included(oa: OpenAIServer,
                                                            streamed: bool) -> None:
    body = completion("ok", prompt_tokens=12_000, cached_tokens=8_000, completion_tokens=700,
                      model="gpt-4o-mini")
    oa.reply(body)
    model = OpenAIChat("gpt-4o-mini", base_url=oa.base_url, api_key="k")
    reply = reply_of(model, [Message.user("q")], streamed=streamed)
    assert reply.usage is not None and reply.usage.cache_read == 8_000
    expected = table_price(body, "openai", "chat")
    assert reply.usage.cost == pytest.approx(expected)
    # 4,000 fresh tokens at $0.15/M, 8,000 cached at $0.075/M, 700 out at $0.60/M
    assert expected == pytest.approx(4000 * 0.15e-6 + 8000 * 0.075e-6 + 700 * 0.6e-6)


@pytest.mark.parametrize("streamed", [False, True])
def test_anthropic_cost_matches_the_price_table_cache_included(an: AnthropicServer,
                                                               streamed: bool) -> None:
    body = message(text("ok"), input_tokens=3_000, output_tokens=500, cache_read=20_000,
                   cache_write=4_000, model="claude-sonnet-4-6")
    an.reply(body)
    model = AnthropicMessages("claude-sonnet-4-6", base_url=an.url, api_key="k")
    reply = reply_of(model, [Message.user("q")], streamed=streamed)
    expected = table_price(body, "anthropic")
    assert reply.usage is not None and reply.usage.cost == pytest.approx(expected)
    # $3/M input, $0.30/M cache reads, $3.75/M cache writes, $15/M output
    assert expected == pytest.approx(3000 * 3e-6 + 20000 * 0.3e-6 + 4000 * 3.75e-6
                                     + 500 * 15e-6)


def test_the_providers_reported_cost_wins(oa: OpenAIServer) -> None:
    body = completion("ok", prompt_tokens=1000, completion_tokens=10, model="gpt-4o-mini")
    body["usage"]["cost"] = 0.123  # OpenRouter reports what it charged
    oa.reply(body)
    model = OpenAIChat("gpt-4o-mini", base_url=oa.base_url, api_key="k", provider="openrouter")
    reply = model.complete([Message.user("q")])
    assert reply.usage is not None and reply.usage.cost == 0.123


def test_an_unknown_model_has_no_price_not_a_zero_one(oa: OpenAIServer) -> None:
    oa.reply(completion("ok", model="my-local-llama"))
    reply = OpenAIChat("my-local-llama", base_url=oa.base_url, api_key="k").complete(
        [Message.user("q")])
    assert reply.usage is not None and reply.usage.cost is None  # not known, not free
    assert cost_of(reply) is None
    assert table_cost(Usage(input=10), "scripted", "scripted") is None
    assert cost_of(Message.assistant("no usage")) == 0.0


def test_prices_are_read_offline(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_network(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("pricing tried to reach the network")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    cost = table_cost(Usage(input=1000, output=1000), "anthropic", "claude-3-5-haiku-latest")
    assert cost is not None and cost > 0


# -- stats -----------------------------------------------------------------------------------


def priced_session(path: Path) -> dict[str, str]:
    """Two branches, two priced models, one unpriced model."""
    with Session.create(path) as s:
        root = s.append_message(Message.user("q"))
        a = s.append_message(Message.assistant(
            "a", usage=Usage(input=1000, output=100, cache_read=2000), model="gpt-4o-mini",
            provider="openai"))
        s.move_to(root)
        b = s.append_message(Message.assistant(
            "b", usage=Usage(input=500, output=50, cache_write=1000), model="claude-sonnet-4-6",
            provider="anthropic"))
        c = s.append_message(Message.user("more"))
        d = s.append_message(Message.assistant("d", usage=Usage(input=10, output=5),
                                               model="llama", provider="local"))
        return {"root": root, "a": a, "b": b, "c": c, "d": d}


def test_stats_cost_per_model_and_per_branch(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    ids = priced_session(path)
    cost_a = table_cost(Usage(input=1000, output=100, cache_read=2000), "openai", "gpt-4o-mini")
    cost_b = table_cost(Usage(input=500, output=50, cache_write=1000), "anthropic",
                        "claude-sonnet-4-6")
    assert cost_a and cost_b
    with Session.open(path, readonly=True) as s:
        stats = s.stats()
    f = stats.file
    assert f.by_model["openai/gpt-4o-mini"].cost == pytest.approx(cost_a)
    assert f.by_model["anthropic/claude-sonnet-4-6"].cost == pytest.approx(cost_b)
    assert f.unpriced_by_model == {"local/llama": 1}
    assert f.model_cost_text("local/llama") == "unknown"
    assert f.cost is None and f.cost_total is None  # a total with an unknown part
    assert f.cost_known == pytest.approx(cost_a + cost_b)
    assert f.cost_text == f"${cost_a + cost_b:.4f} + unknown (1 call)"
    branches = {b.tip_id: b for b in stats.branches}
    assert set(branches) == {ids["a"], ids["d"]}
    assert branches[ids["a"]].cost == pytest.approx(cost_a)
    assert branches[ids["d"]].cost is None and branches[ids["d"]].usage.cost == pytest.approx(
        cost_b)
    assert branches[ids["d"]].current and not branches[ids["a"]].current
    data = stats.to_dict()
    assert data["file"]["by_model"]["local/llama"]["cost"] is None
    assert data["branches"][0]["cost"] == pytest.approx(cost_a)
    assert data["prices"].startswith("genai-prices")


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "contextree", *args], capture_output=True,
                          text=True, timeout=60)


def test_stats_command_shows_unknown_never_zero(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    ids = priced_session(path)
    out = run_cli("stats", str(path))
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    model_line = next(line for line in lines if line.startswith("local/llama"))
    assert "unknown" in model_line and "$0.0000" not in model_line
    assert any(line.lstrip("* ").startswith(ids["a"]) and "$" in line for line in lines)
    assert "+ unknown (1 call)" in out.stdout
    data = json.loads(run_cli("stats", str(path), "--json").stdout)
    assert data["cost"] is None and data["file"]["unpriced_calls"] == 1


def test_a_scripted_session_costs_unknown(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    ct.agent().use(ct.runtime.SessionTree, path=path).run(
        ct.models.ScriptedModel(["hi"])).start("hello")
    out = run_cli("stats", str(path))
    cost_row = next(line for line in out.stdout.splitlines() if line.startswith("cost"))
    assert "unknown" in cost_row and "$0" not in cost_row


def test_without_a_price_table_costs_are_unknown_and_the_hint_names_the_extra(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from contextree import _pricing

    monkeypatch.setattr(_pricing, "_table", lambda: None)
    monkeypatch.setitem(sys.modules, "genai_prices", None)  # not importable: not installed
    _pricing._known.cache_clear()
    try:
        path = tmp_path / "s.jsonl"
        priced_session(path)
        with Session.open(path, readonly=True) as s:
            stats = s.stats()
        assert stats.file.cost_text == "unknown" and stats.prices is None
        assert stats.prices_hint is not None and "contextree[prices]" in stats.prices_hint
    finally:
        _pricing._known.cache_clear()


def test_the_price_source_is_named_without_importing_the_table() -> None:
    # Importing genai_prices takes longer than `stats` of a big session: its version is
    # read from the package's dist-info, and is the version the package itself gives.
    code = ("import sys; from contextree._pricing import price_source; s = price_source(); "
            "loaded = 'genai_prices' in sys.modules; import genai_prices; "
            "print(s == f'genai-prices {genai_prices.__version__}', loaded)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(SRC)}, check=True)
    assert out.stdout.split() == ["True", "False"]
