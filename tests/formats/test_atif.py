"""ATIF v1.7 (Harbor RFC 0001) both ways.

The export is checked against the schema of Harbor's own ATIF-v1.7 models (vendored under
``tests/data/formats/atif``, with where it came from) and against the rules those models check
beyond a JSON Schema. contextree -> ATIF -> contextree keeps the messages, tool calls and
results, thinking and usage; a trajectory written by another producer (an agent that acts
through its text, sub-agent references, token ids) imports with nothing lost.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from typer.testing import CliRunner

from contextree import Message, Session, TextPart, ThinkingPart, ToolCall, Usage
from contextree.cli import app
from contextree.errors import SessionError
from contextree.formats import detect_format, export_session, import_session
from helpers import FORMATS_DATA

SCHEMA = json.loads((FORMATS_DATA / "atif" / "atif-v1.7.schema.json").read_text())
_AGENT_ONLY = ("model_name", "reasoning_effort", "reasoning_content", "tool_calls", "metrics")


def check_atif(doc: dict[str, Any]) -> None:
    """``doc`` is a valid ATIF-v1.7 trajectory: the schema, and Harbor's model rules."""
    jsonschema.validate(doc, SCHEMA)
    assert doc["schema_version"] == "ATIF-v1.7"
    for i, step in enumerate(doc["steps"], start=1):
        assert step["step_id"] == i
        if step["source"] != "agent":
            assert not [k for k in _AGENT_ONLY if step.get(k) is not None], step
        calls = {c["tool_call_id"] for c in step.get("tool_calls") or ()}
        for result in (step.get("observation") or {}).get("results", ()):
            assert result.get("source_call_id") is None or result["source_call_id"] in calls


def agent_session(path: Path) -> Session:
    s = Session.create(path, cwd="/work/project", durable=False)
    s.append_message(Message.system("You are a careful coding agent."))
    s.append_message(Message.user("Why does the parser test fail?"))
    s.append_message(Message.assistant(
        [ThinkingPart(thinking="Read both files.", signature="sig-1"),
         TextPart(text="Reading them.")],
        tool_calls=[ToolCall(id="call_1", name="read", arguments={"path": "parser.py"}),
                    ToolCall(id="call_2", name="read", arguments={"path": "test_parser.py"})],
        usage=Usage(input=900, output=40, cache_read=100, cache_write=20, total=1060,
                    cost=0.0123),
        model="claude-sonnet-4-5", provider="anthropic", stop_reason="tool_use"))
    s.append_message(Message.tool("def parse(s):\n    return s[0]\n", tool_call_id="call_1",
                                  name="read"))
    s.append_message(Message.tool("no such file", tool_call_id="call_2", name="read",
                                  is_error=True))
    s.append_message(Message.assistant("`s[0]` fails on empty input.",
                                       usage=Usage(input=1200, output=12, total=1212),
                                       model="claude-sonnet-4-5"))
    return s


def test_export_is_valid_atif_v1_7(tmp_path: Path) -> None:
    s = agent_session(tmp_path / "s.jsonl")
    doc = json.loads(export_session("atif", s, tmp_path / "t.json").read_text())
    check_atif(doc)
    sources = [st["source"] for st in doc["steps"]]
    assert sources == ["system", "user", "agent", "agent"]
    call = doc["steps"][2]
    assert [c["function_name"] for c in call["tool_calls"]] == ["read", "read"]
    assert [r["source_call_id"] for r in call["observation"]["results"]] == ["call_1", "call_2"]
    assert call["reasoning_content"] == "Read both files."
    assert call["metrics"]["prompt_tokens"] == 1020 and call["metrics"]["cached_tokens"] == 100
    assert doc["final_metrics"]["total_completion_tokens"] == 52
    assert doc["agent"]["model_name"] == "claude-sonnet-4-5"


def test_a_bad_export_fails_the_schema_check() -> None:
    """The check can fail: a step without its message, a tool call without a name."""
    with pytest.raises(jsonschema.ValidationError):
        check_atif({"schema_version": "ATIF-v1.7", "agent": {"name": "x", "version": "1"},
                    "steps": [{"step_id": 1, "source": "user"}]})
    with pytest.raises(jsonschema.ValidationError):
        check_atif({"schema_version": "ATIF-v1.7", "agent": {"name": "x", "version": "1"},
                    "steps": [{"step_id": 1, "source": "agent", "message": "",
                               "tool_calls": [{"tool_call_id": "c", "arguments": {}}]}]})


def test_contextree_to_atif_to_contextree_keeps_the_context(tmp_path: Path) -> None:
    s = agent_session(tmp_path / "s.jsonl")
    out = export_session("atif", s, tmp_path / "t.json")
    back = import_session("atif", out, tmp_path / "back.jsonl")
    want = [m.to_dict() for m in s.build_context().messages]
    got = [m.to_dict() for m in back.build_context().messages]
    assert got == want
    assert back.header.id == s.header.id
    assert back.header.metadata["imported_from"]["format"] == "atif"
    # the exported file again is the same file
    again = export_session("atif", back, tmp_path / "t2.json")
    first, second = json.loads(out.read_text()), json.loads(again.read_text())
    assert first["steps"] == second["steps"]


def test_compaction_summary_and_a_lone_tool_result_are_steps(tmp_path: Path) -> None:
    s = agent_session(tmp_path / "s.jsonl")
    last = s.leaf_id
    assert last is not None
    s.append_compaction(summary="The parser fails on empty input.", first_kept_entry_id=last,
                        tokens_before=3000)
    s.append_message(Message.user("Fix it."))
    doc = json.loads(export_session("atif", s, tmp_path / "t.json").read_text())
    check_atif(doc)
    assert doc["steps"][0]["source"] == "system"
    back = import_session("atif", tmp_path / "t.json", tmp_path / "b.jsonl")
    assert [m.to_dict() for m in back.build_context().messages] == \
        [m.to_dict() for m in s.build_context().messages]


# -- a trajectory another producer wrote --------------------------------------------------

FOREIGN: dict[str, Any] = {
    "schema_version": "ATIF-v1.5",
    "session_id": "run-42",
    "agent": {"name": "terminus-2", "version": "2.0.0", "model_name": "gpt-5",
              "extra": {"temperature": 0.7}},
    "notes": "two tasks",
    "steps": [
        {"step_id": 1, "timestamp": "2026-10-01T10:00:00Z", "source": "user",
         "message": "List the files."},
        {"step_id": 2, "timestamp": "2026-10-01T10:00:02Z", "source": "agent",
         "message": "Running ls.", "reasoning_content": "Start simple.",
         "tool_calls": [{"tool_call_id": "t1", "function_name": "bash",
                         "arguments": {"cmd": "ls"}}],
         "observation": {"results": [
             {"source_call_id": "t1", "content": "a.py\nb.py"},
             {"content": "terminal is idle",
              "subagent_trajectory_ref": [{"session_id": "sub-1",
                                           "trajectory_path": "sub-1.json"}]}]},
         "metrics": {"prompt_tokens": 500, "completion_tokens": 20, "cached_tokens": 200,
                     "cost_usd": 0.002, "logprobs": [-0.1, -0.2],
                     "completion_token_ids": [1, 2]},
         "extra": {"episode": 3}},
        {"step_id": 3, "source": "agent", "message": "Two files.", "model_name": "gpt-5-mini",
         "is_copied_context": True},
    ],
    "final_metrics": {"total_prompt_tokens": 500, "total_completion_tokens": 20,
                      "total_steps": 3},
}


def test_a_foreign_trajectory_imports_with_nothing_lost(tmp_path: Path) -> None:
    src = tmp_path / "trajectory.json"
    src.write_text(json.dumps(FOREIGN))
    assert detect_format(src) == "atif"
    s = import_session("auto", src, tmp_path / "s.jsonl")
    msgs = s.build_context().messages
    assert [(m.role, m.text) for m in msgs] == [
        ("user", "List the files."), ("assistant", "Running ls."), ("tool", "a.py\nb.py"),
        ("user", "terminal is idle"), ("assistant", "Two files.")]
    call = msgs[1]
    assert call.thinking[0].thinking == "Start simple."
    assert call.tool_calls is not None and call.tool_calls[0].arguments == {"cmd": "ls"}
    assert call.usage == Usage(input=300, output=20, cache_read=200, total=520, cost=0.002)
    assert call.model == "gpt-5"  # the agent's model: the step names none
    assert call.extra["atif_metrics"] == {"logprobs": [-0.1, -0.2],
                                          "completion_token_ids": [1, 2]}
    assert call.extra["episode"] == 3
    assert msgs[2].tool_call_id == "t1" and msgs[2].name == "bash"
    assert msgs[3].extra["atif_observation"] is True
    assert msgs[3].extra["atif_subagent_trajectory_ref"][0]["trajectory_path"] == "sub-1.json"
    assert msgs[4].model == "gpt-5-mini" and msgs[4].extra["atif_is_copied_context"] is True
    root = s.header.metadata["atif"]
    assert root["notes"] == "two tasks" and root["agent"]["extra"] == {"temperature": 0.7}
    assert root["final_metrics"]["total_steps"] == 3
    assert s.header.id == "run-42"
    entries = [e for e in s.entries() if e.type == "message"]
    assert entries[0].timestamp == "2026-10-01T10:00:00Z"
    # exported again, it is valid v1.7
    check_atif(json.loads(export_session("atif", s, tmp_path / "again.json").read_text()))


def test_a_newer_version_is_refused_saying_what_to_do(tmp_path: Path) -> None:
    src = tmp_path / "t.json"
    src.write_text(json.dumps({**FOREIGN, "schema_version": "ATIF-v1.9"}))
    with pytest.raises(SessionError, match=r"reads ATIF-v1\.0 to ATIF-v1\.7; upgrade"):
        import_session("atif", src, tmp_path / "s.jsonl")
    assert not (tmp_path / "s.jsonl").exists()


def test_a_bad_step_names_it(tmp_path: Path) -> None:
    src = tmp_path / "t.json"
    src.write_text(json.dumps({**FOREIGN, "steps": [{"step_id": 1, "source": "robot",
                                                     "message": "hi"}]}))
    with pytest.raises(SessionError, match=r"steps\[0\]: `source` must be"):
        import_session("atif", src, tmp_path / "s.jsonl")


def test_wrong_formats_are_refused_naming_the_right_one(tmp_path: Path) -> None:
    runner = CliRunner()
    chat = tmp_path / "chat.json"
    chat.write_text(json.dumps([{"role": "user", "content": "hi"}]))
    result = runner.invoke(app, ["import", "atif", str(chat), "-o", str(tmp_path / "a.jsonl")])
    assert result.exit_code == 1 and "looks like openai-chat" in result.stderr
    traj = tmp_path / "t.json"
    traj.write_text(json.dumps(FOREIGN))
    result = runner.invoke(app, ["import", "openai-chat", str(traj), "-o",
                                 str(tmp_path / "b.jsonl")])
    assert result.exit_code == 1 and "looks like atif" in result.stderr, result.stderr
    assert not (tmp_path / "b.jsonl").exists()
