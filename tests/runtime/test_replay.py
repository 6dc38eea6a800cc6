"""``replay`` re-sends the request recorded at a reply (byte for byte on the same model),
writes each answer as a branch labelled with the model, serves the recorded tool results
while the calls match, stops where they diverge, adds a baseline lane on the recorded model
when the model changes, and reports how each branch compares; through the API and the CLI,
on Chat Completions and Anthropic against fake servers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import contextree as ct
from contextree import Message, Session
from contextree.errors import InvalidArgument, ModelUnavailable
from contextree.models import AnthropicMessages, OpenAIChat, ScriptedModel
from contextree.runtime import DefaultToolPipeline, SessionTree, SystemPrompt, ToolResultLoop
from fakes.anthropic_server import AnthropicServer, message, text, tool_use
from fakes.openai_server import OpenAIServer, completion, tool_call
from helpers import run

PROMPT = "You are terse."


@ct.tool
def lookup(city: str) -> str:
    """The weather in a city.

    Args:
        city: Which city.
    """
    return f"sunny in {city} (live)"


def _record(path: Path, model: ct.Model) -> None:
    (ct.agent().use(SessionTree, path=path).use(SystemPrompt, text=PROMPT).use(ToolResultLoop)
     .use(DefaultToolPipeline, tools=[lookup]).run(model)).start("Weather in Oslo?")


def _first_reply(path: Path) -> str:
    with Session.open(path, readonly=True) as s:
        return next(e.id for e in s.branch() if isinstance(e, ct.entries.MessageEntry)
                    and e.message.role == "assistant")


def _openai_session(tmp_path: Path, server: OpenAIServer) -> Path:
    path = tmp_path / "s.jsonl"
    server.reply(completion(tool_calls=[tool_call("call_1", "lookup", {"city": "Oslo"})]),
                 completion("Sunny."))
    _record(path, OpenAIChat("gpt-test", base_url=server.base_url, api_key="k",
                             temperature=0.3))
    return path


def test_api_replay_on_the_same_model_resends_the_recorded_bytes_and_serves_tools(
        tmp_path: Path) -> None:
    with OpenAIServer() as server:
        path = _openai_session(tmp_path, server)
        at = _first_reply(path)
        server.reply(completion(tool_calls=[tool_call("call_9", "lookup", {"city": "Oslo"})]),
                     completion("Sunny."))
        model = OpenAIChat("gpt-test", base_url=server.base_url, api_key="k")
        with Session.open(path) as s:
            leaf = s.leaf_id
            report = ct.replay(s, at, model)
            assert s.leaf_id == leaf  # the session's own leaf stays put
            (lane,) = report.lanes
            branch = s.branch(lane.tip_id)
            assert s.label_of(lane.tip_id or "") == lane.label
        sent = server.requests
    assert sent[2].raw == sent[0].raw  # the same request: system prompt, tools, temperature
    assert json.loads(sent[3].raw)["messages"][-1]["content"] == "sunny in Oslo (live)"
    assert not lane.baseline and lane.diverged_at is None
    assert lane.same_tool_calls and lane.same_final_text and lane.final_text == "Sunny."
    assert lane.calls == 2 and lane.usage.input == 24 and lane.label is not None
    assert "gpt-test" in lane.label
    # The branch leaves from the recorded reply's parent (the recorded model change): the
    # model is the same, so no new model change or request entry is written.
    assert [e.type for e in branch][-5:] == ["request", "model_change"] + ["message"] * 3
    tool_result = branch[-2]
    assert isinstance(tool_result, ct.entries.MessageEntry)
    assert tool_result.message.tool_call_id == "call_9"  # the served result answers the new call


def test_cli_replay_on_another_model_adds_a_baseline_lane_and_reports_divergence(
        tmp_path: Path) -> None:
    with OpenAIServer() as server:
        path = _openai_session(tmp_path, server)
        at = _first_reply(path)
        server.reply(
            completion(tool_calls=[tool_call("c1", "lookup", {"city": "Bergen"})]),  # other
            completion(tool_calls=[tool_call("c2", "lookup", {"city": "Oslo"})]),  # baseline
            completion("Sunny."))
        data = json.loads(run("replay", path, "--at", at[:6], "--model", "openai:gpt-other",
                              "--base-url", server.base_url, "--json").stdout)
        bodies = server.bodies
    other, base = data["lanes"]
    assert data["recorded"]["model"] == "openai/gpt-test"
    assert data["recorded"]["tool_calls"] == [["lookup", {"city": "Oslo"}]]
    assert other["model"] == "openai/gpt-other" and not other["baseline"]
    assert other["diverged_at"] == 0 and not other["same_tool_calls"]
    assert other["final_text"] is None
    assert base["baseline"] and base["model"] == "openai/gpt-test"
    assert base["same_tool_calls"] and base["same_final_text"] and base["diverged_at"] is None
    assert bodies[2]["model"] == "gpt-other" and bodies[3]["model"] == "gpt-test"
    assert bodies[2]["messages"] == bodies[0]["messages"]  # the recorded context
    assert bodies[2]["temperature"] == 0.3  # the recorded parameters (same provider)
    tree = run("tree", path).stdout
    assert "gpt-other #1" in tree and "gpt-test baseline #1" in tree
    shown = run("replay", path, "--at", at, "--model", "openai:gpt-other", "--base-url",
                "http://127.0.0.1:9/v1", "--n", "0", code=2)
    assert "--n" in shown.stderr
    # a slip of the keyboard is not a million paid calls: refused before any is made
    shown = run("replay", path, "--at", at, "--n", "1000000", code=2)
    assert "from 1 to 100" in shown.stderr
    with Session.open(path) as s, pytest.raises(InvalidArgument, match="from 1 to 100"):
        ct.replay(s, at, n=101)


def test_replay_with_n_samples_runs_n_lanes_per_model(tmp_path: Path) -> None:
    with OpenAIServer() as server:
        path = _openai_session(tmp_path, server)
        at = _first_reply(path)
        server.reply(*[completion("It is sunny.")] * 4)
        data = json.loads(run("replay", path, "--at", at, "--model", "openai:gpt-other",
                              "--base-url", server.base_url, "--n", "2", "--json").stdout)
    lanes = data["lanes"]
    assert [(lane["model"], lane["baseline"], lane["sample"]) for lane in lanes] == [
        ("openai/gpt-other", False, 1), ("openai/gpt-other", False, 2),
        ("openai/gpt-test", True, 1), ("openai/gpt-test", True, 2)]
    assert all(lane["tool_calls"] == [] and not lane["same_tool_calls"] for lane in lanes)


def test_replay_into_a_fork_leaves_the_file_alone(tmp_path: Path) -> None:
    with OpenAIServer() as server:
        path = _openai_session(tmp_path, server)
        at = _first_reply(path)
        before = path.read_bytes()
        server.reply(completion("Sunny."))
        data = json.loads(run("replay", path, "--at", at, "--base-url", server.base_url,
                              "--fork", tmp_path / "f.jsonl", "--json").stdout)
    assert path.read_bytes() == before
    assert data["session"].endswith("f.jsonl")
    with Session.open(tmp_path / "f.jsonl", readonly=True) as fork:
        assert data["lanes"][0]["tip_id"] in fork


def test_replay_on_anthropic_through_api_and_cli(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    with AnthropicServer() as server:
        server.reply(message(tool_use("tu_1", "lookup", {"city": "Oslo"})),
                     message(text("Sunny.")))
        _record(path, AnthropicMessages("claude-test", base_url=server.url, api_key="k",
                                        max_tokens=300))
        at = _first_reply(path)
        # API: the same model, the same bytes; the recorded result is served.
        server.reply(message(tool_use("tu_7", "lookup", {"city": "Oslo"})),
                     message(text("Sunny.")))
        with Session.open(path) as s:
            report = ct.replay(s, at, AnthropicMessages("claude-test", base_url=server.url,
                                                        api_key="k"))
        assert server.requests[2].raw == server.requests[0].raw
        (lane,) = report.lanes
        assert lane.same_tool_calls and lane.same_final_text
        # CLI: another Claude diverges; the baseline repeats the recording.
        server.reply(message(tool_use("tu_8", "lookup", {"city": "Paris"})),
                     message(text("Rainy.")))
        data = json.loads(run("replay", path, "--at", at, "--model", "anthropic:claude-other",
                              "--base-url", server.url, "--json").stdout)
        assert json.loads(server.requests[4].raw)["max_tokens"] == 300  # recorded params
    other, base = data["lanes"]
    assert other["diverged_at"] == 0 and other["tool_calls"] == [["lookup", {"city": "Paris"}]]
    assert base["baseline"] and base["tool_calls"] == [] and base["final_text"] == "Rainy."
    assert not base["same_tool_calls"] and not base["same_final_text"]
    text_report = run("replay", path, "--at", at, "--model", "anthropic:claude-other",
                      "--base-url", "http://127.0.0.1:9", "--n", "1", code=1)
    assert text_report.stderr.startswith("error: ") and "127.0.0.1:9" in text_report.stderr


def test_replay_at_an_entry_that_is_not_a_reply_names_the_nearest(tmp_path: Path) -> None:
    with OpenAIServer() as server:
        path = _openai_session(tmp_path, server)
    with Session.open(path, readonly=True) as s:
        user = next(e.id for e in s.branch() if isinstance(e, ct.entries.MessageEntry)
                    and e.message.role == "user")
    reply = _first_reply(path)
    with Session.open(path) as s, pytest.raises(InvalidArgument) as caught:
        ct.replay(s, user, ScriptedModel(["x"]))
    assert "a user message" in str(caught.value) and reply in str(caught.value)
    result = run("replay", path, "--at", user, "--model", "openai:gpt-test", "--base-url",
                 "http://127.0.0.1:9/v1", code=2)
    assert f"the nearest assistant reply is {reply}" in result.stderr


def test_replay_of_a_provider_that_is_not_configured_says_what_is_missing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with OpenAIServer() as server:
        path = _openai_session(tmp_path, server)
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "CONTEXTREE_BASE_URL", "CONTEXTREE_MODEL"):
        monkeypatch.delenv(name, raising=False)
    at = _first_reply(path)
    with Session.open(path) as s, pytest.raises(ModelUnavailable) as caught:
        ct.replay(s, at)
    assert "openai/gpt-test" in str(caught.value) and "OPENAI_API_KEY" in str(caught.value)
    result = run("replay", path, "--at", at, code=1)
    assert "OPENAI_API_KEY" in result.stderr
    # A model of a provider contextree does not call itself.
    scripted = tmp_path / "scripted.jsonl"
    _record(scripted, ScriptedModel([Message.assistant("hi")]))
    with Session.open(scripted) as s, pytest.raises(ModelUnavailable) as caught:
        ct.replay(s, _first_reply(scripted))
    assert "scripted/scripted" in str(caught.value) and "--model" in str(caught.value)


def test_replay_on_a_model_of_choice_when_the_recorded_one_cannot_be_called(
        tmp_path: Path) -> None:
    """A session recorded on a model contextree does not call (here the scripted one, in
    practice a provider it has no adapter for): ``--model`` with ``--no-baseline`` replays
    there alone; without it the error says what to pass (``--model`` was passed already),
    and a failed replay leaves no ``--fork`` file behind."""
    scripted = tmp_path / "scripted.jsonl"
    _record(scripted, ScriptedModel([Message.assistant("hi")]))
    at = _first_reply(scripted)
    with OpenAIServer() as server:
        failed = run("replay", scripted, "--at", at, "--model", "openai:gpt-test",
                     "--base-url", server.base_url, "--fork", tmp_path / "f.jsonl", code=1)
        assert "--no-baseline" in failed.stderr and "baseline" in failed.stderr
        assert not (tmp_path / "f.jsonl").exists() and server.requests == []
        server.reply(completion("Hello."))
        data = json.loads(run("replay", scripted, "--at", at, "--model", "openai:gpt-test",
                              "--base-url", server.base_url, "--no-baseline",
                              "--json").stdout)
    (lane,) = data["lanes"]
    assert lane["model"] == "openai/gpt-test" and not lane["baseline"]
    assert lane["final_text"] == "Hello."
    with Session.open(scripted) as s:
        report = ct.replay(s, at, ScriptedModel(["hi"], name="other"), baseline=False)
    assert [lane.baseline for lane in report.lanes] == [False]
