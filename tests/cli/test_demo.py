"""The offline demo (``contextree demo``) and the runnable OpenAI example."""

from __future__ import annotations

import importlib.util
import io
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from contextree import Session
from contextree.cli.demo import run_demo
from helpers import ROOT


def test_demo_runs_offline_and_reports_facts(tmp_path: Path) -> None:
    out = io.StringIO()
    facts = run_demo(tmp_path, console=Console(file=out, width=100))

    assert facts["session_path"] == str(tmp_path / "session.jsonl")
    assert facts["tests_pass"], facts["replies"]
    assert facts["warning_found"] == "module_42.py"
    assert facts["compactions"] == facts["compacted_events"] == 1
    assert facts["truncations"] == 1
    assert len(facts["overflow_files"]) == 1
    assert Path(facts["overflow_files"][0]).is_relative_to(tmp_path / "overflow")
    assert facts["branches"] == 2
    assert facts["label"] == "tests-fixed"
    assert facts["entries"] > 20
    # The workspace really changed: the bug is fixed and multiply exists (the branch's work).
    core = (tmp_path / "workspace" / "calc" / "core.py").read_text()
    assert "return a + b" in core and "def multiply" in core

    with Session.open(facts["session_path"]) as s:
        assert s.stats().file.compactions == 1
        context = s.build_context().messages
    assert len(context) == facts["context_messages"]
    assert any("returned here from another branch" in m.text for m in context)

    printed = out.getvalue()
    for heading in ("The session tree", "Stats", "What the model would see next",
                    "tests-fixed", "compacted", "truncated"):
        assert heading in printed


def test_openai_example_parses_args_without_network() -> None:
    result = subprocess.run([sys.executable, str(ROOT / "examples" / "openai_agent.py"),
                             "--help"], capture_output=True, text=True, timeout=60,
                            env={"PATH": "/usr/bin:/bin"})
    assert result.returncode == 0, result.stderr
    assert "OPENAI_BASE_URL" in result.stdout


def test_openai_example_runs_a_tool_round_against_a_local_server(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    from fakes.openai_server import OpenAIServer, completion, tool_call

    spec = importlib.util.spec_from_file_location("openai_agent",
                                                  ROOT / "examples" / "openai_agent.py")
    assert spec is not None and spec.loader is not None
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    (tmp_path / "hello.txt").write_text("hello from the workspace\n")
    with OpenAIServer() as server:
        server.reply(completion(tool_calls=[tool_call("c1", "read", {"path": "hello.txt"})]),
                     completion("The file says hello."))
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        monkeypatch.setenv("CONTEXTREE_MODEL", "gpt-test")
        code = example.main(["--session", str(tmp_path / "s.jsonl"), "--workspace",
                             str(tmp_path), "What", "does", "hello.txt", "say?"])
        second = server.bodies[1]["messages"]
    assert code == 0
    assert "The file says hello." in capsys.readouterr().out
    assert any("hello from the workspace" in str(m.get("content")) for m in second
               if m["role"] == "tool")
    with Session.open(tmp_path / "s.jsonl") as s:
        assert s.build_context().messages[-1].text == "The file says hello."


def test_the_demo_command_runs_offline_and_leaves_a_valid_session(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, "-m", "contextree", "demo", "--dir", str(tmp_path)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    verify = subprocess.run([sys.executable, "-m", "contextree", "verify",
                             str(tmp_path / "session.jsonl")],
                            capture_output=True, text=True, timeout=60)
    assert verify.returncode == 0, verify.stdout + verify.stderr
