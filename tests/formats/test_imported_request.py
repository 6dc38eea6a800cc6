"""What imported sessions carry of the request: a Codex rollout records its base
instructions (the system prompt), which ``show --context`` then shows and ``--wire`` sends;
a Claude Code session file records no system prompt and no tool schemas, and ``show`` says
that none is stored. Neither file records tool schemas (the fixtures are written by the
real CLIs, tests/data/formats/real)."""

from __future__ import annotations

import json
from pathlib import Path

from contextree.formats import import_session
from helpers import run

REAL = Path(__file__).parent.parent / "data" / "formats" / "real"


def test_a_codex_import_carries_the_base_instructions(tmp_path: Path) -> None:
    rollout = REAL / "codex" / "tools" / "rollout-1.jsonl"
    meta = json.loads(rollout.read_text().splitlines()[0])["payload"]
    instructions = meta["base_instructions"]["text"]
    import_session("codex", rollout, tmp_path / "s.jsonl").close()
    data = json.loads(run("show", tmp_path / "s.jsonl", "--context", "--json").stdout)
    assert data["system_prompt_stored"]
    first = data["messages"][0]["message"]
    assert first["role"] == "system" and first["content"] == instructions
    body = json.loads(run("show", tmp_path / "s.jsonl", "--context", "--wire",
                          "responses").stdout)
    assert body["input"][0]["content"] == instructions
    assert body["model"] == "gpt-5.5"


def test_a_claude_code_import_says_no_system_prompt_is_stored(tmp_path: Path) -> None:
    session = REAL / "claude_code" / "tools" / "session-1.jsonl"
    import_session("claude-code", session, tmp_path / "s.jsonl").close()
    shown = run("show", tmp_path / "s.jsonl", "--context").stdout
    assert "no system prompt is stored" in shown
