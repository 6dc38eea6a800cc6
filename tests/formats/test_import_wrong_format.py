"""Importing a provider message list under the wrong provider's name is refused with a
message that names the right one, instead of succeeding and silently dropping content."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from contextree import Session
from contextree.cli import app

runner = CliRunner()

CHAT = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "List the files."},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function",
         "function": {"name": "shell", "arguments": "{\"command\": \"ls\"}"}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "a.py\nb.py"},
    {"role": "assistant", "content": "Two files."},
]
ANTHROPIC = {"system": "Be brief.", "messages": [
    {"role": "user", "content": "Hello"},
    {"role": "assistant", "content": "Hi."},
]}


def _import(fmt: str, src: Path, out: Path) -> tuple[int, str]:
    result = runner.invoke(app, ["import", fmt, str(src), "-o", str(out)])
    return result.exit_code, result.stderr


def test_an_openai_chat_file_imported_as_anthropic_is_refused(tmp_path: Path) -> None:
    src = tmp_path / "chat.json"
    src.write_text(json.dumps(CHAT))
    code, err = _import("anthropic", src, tmp_path / "out.jsonl")
    assert code == 1 and "looks like openai-chat" in err and "import it as openai-chat" in err
    assert not (tmp_path / "out.jsonl").exists()
    code, err = _import("openai-chat", src, tmp_path / "ok.jsonl")
    assert code == 0, err
    with Session.open(tmp_path / "ok.jsonl", readonly=True) as s:
        roles = [m.role for m in s.build_context().messages]
    assert roles == ["system", "user", "assistant", "tool", "assistant"]


def test_an_anthropic_file_imported_as_openai_chat_is_refused(tmp_path: Path) -> None:
    src = tmp_path / "anthropic.json"
    src.write_text(json.dumps(ANTHROPIC))
    code, err = _import("openai-chat", src, tmp_path / "out.jsonl")
    assert code == 1 and "looks like anthropic" in err and "`system` prompt" in err
    code, err = _import("anthropic", src, tmp_path / "ok.jsonl")
    assert code == 0, err
    with Session.open(tmp_path / "ok.jsonl", readonly=True) as s:
        assert s.build_context().messages[0].role == "system"


REAL = Path(__file__).parent.parent / "data" / "formats" / "real"
AGENT_FILES = {"claude-code": REAL / "claude_code" / "tools" / "session-1.jsonl",
               "codex": REAL / "codex" / "tools" / "rollout-1.jsonl"}


def test_an_agents_session_imported_as_a_provider_list_is_refused(tmp_path: Path) -> None:
    """A Claude Code session or a Codex rollout (files their CLIs wrote) named as a
    provider's message list is refused naming its format: as openai-responses, every line
    would become an unknown part of one assistant message."""
    for right, src in AGENT_FILES.items():
        for wrong in ("openai-responses", "openai-chat", "anthropic", "brute", "pi"):
            code, err = _import(wrong, src, tmp_path / "out.jsonl")
            assert code == 1 and f"looks like {right}" in err, (wrong, err)
            assert not (tmp_path / "out.jsonl").exists()
        code, err = _import(right, src, tmp_path / f"{right}.jsonl")
        assert code == 0, err
