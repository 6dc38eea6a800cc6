"""Hostile nesting in files to import (100,000 levels, as an attacker would write them):
a one-line error naming the file, never a raw RecursionError traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from contextree import Session
from contextree._messages import to_builtins
from contextree.cli import app

runner = CliRunner()
DEPTH = [100_000]  # set per test: 100,000 levels, and 1,000 (under orjson's own limit)


def _deep() -> str:
    return "[" * DEPTH[0] + "]" * DEPTH[0]


CASES = {
    "openai-chat": lambda: '[{"role": "user", "content": "hi"}, {"role": "assistant", '
                           '"content": null, "tool_calls": [{"id": "c", "type": "function", '
                           '"function": {"name": "x", "arguments": ' + _deep() + '}}]}]',
    "anthropic": lambda: '{"messages": [{"role": "user", "content": [{"type": "tool_result",'
                         ' "tool_use_id": "t", "content": ' + _deep() + '}]}]}',
    "codex": lambda: '{"type":"session_meta","payload":{"id":"t1"}}\n'
                     '{"type":"response_item","payload":{"type":"message","role":"user",'
                     '"content":' + _deep() + '}}\n',
    "brute": lambda: '{"role":"user","content":' + _deep() + '}\n',
}


@pytest.mark.parametrize("depth", [1_000, 100_000])
@pytest.mark.parametrize("fmt", list(CASES))
def test_deep_nesting_in_an_import_is_a_clear_error(tmp_path: Path, fmt: str,
                                                    depth: int) -> None:
    DEPTH[0] = depth
    src = tmp_path / ("in.jsonl" if fmt in ("codex", "brute") else "in.json")
    src.write_text(CASES[fmt]())
    result = runner.invoke(app, ["import", fmt, str(src), "-o", str(tmp_path / "out.jsonl")])
    assert result.exit_code in (1, 2), result.stderr
    assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1, result.stderr
    assert "levels deep" in result.stderr or "deep" in result.stderr
    assert not isinstance(result.exception, RecursionError)
    assert not (tmp_path / "out.jsonl").exists()


STRING_ARGUMENTS = {  # arguments a model sent as a JSON string, nested 100,000 levels inside
    "openai-chat": lambda deep: json.dumps([
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c", "type": "function", "function": {"name": "x", "arguments": deep}}]}]),
    "codex": lambda deep: json.dumps({"type": "session_meta", "payload": {"id": "t1"}}) + "\n"
    + json.dumps({"type": "response_item", "payload": {
        "type": "function_call", "name": "shell", "call_id": "c1", "arguments": deep}}) + "\n",
}


@pytest.mark.parametrize("fmt", list(STRING_ARGUMENTS))
def test_deep_arguments_inside_a_string_are_kept_as_text(tmp_path: Path, fmt: str) -> None:
    """The line itself is shallow: the import goes through and the call keeps the text."""
    deep = '{"a": ' + "[" * 100_000 + "]" * 100_000 + "}"
    src = tmp_path / ("in.jsonl" if fmt == "codex" else "in.json")
    src.write_text(STRING_ARGUMENTS[fmt](deep))
    out = tmp_path / "out.jsonl"
    result = runner.invoke(app, ["import", fmt, str(src), "-o", str(out)])
    assert result.exit_code == 0, (result.stderr, result.exception)
    with Session.open(out, readonly=True) as s:
        call = next(m for m in s.build_context().messages if m.tool_calls)
    assert deep in str(to_builtins(call))  # the exact text, wherever the format keeps it


def test_a_codex_config_nested_100k_deep_is_ignored_not_a_crash(tmp_path: Path) -> None:
    from contextree.formats._codex_export import configured_provider

    deep = "[" * 100_000 + "]" * 100_000
    (tmp_path / "config.toml").write_text(f'a = {deep}\nmodel_provider = "x"\n')
    assert configured_provider(tmp_path) is None  # as for any unreadable config
