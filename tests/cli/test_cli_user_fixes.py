"""The command line as a new user tried it (issue 18): ``demo --dir``, the counts of
``repair`` and ``verify``, the ``compact`` summary line, ``ls`` times, the model options of
``compact`` and ``chat``, and what ``export --help`` says each format holds."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from contextree import Message, Session
from contextree.cli import app
from contextree.formats import list_formats
from fakes.openai_server import OpenAIServer, completion
from helpers import big_session

runner = CliRunner()


def cli(*args: str | Path, cwd: Path | None = None,
        env: dict[str, str] | None = None, stdin: str | None = None
        ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "contextree", *map(str, args)],
                          capture_output=True, text=True, timeout=180, cwd=cwd, env=env,
                          input=stdin)


def one_error(out: subprocess.CompletedProcess[str], code: int) -> str:
    assert out.returncode == code, (out.stdout, out.stderr)
    lines = out.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), out.stderr
    return lines[0]


# -- demo --------------------------------------------------------------------------------

def test_demo_refuses_a_dir_whose_parent_is_missing(tmp_path: Path) -> None:
    line = one_error(cli("demo", "--dir", "a/b", cwd=tmp_path), 1)
    assert line == ("error: a/b: the directory a does not exist; create it first or give "
                    "--dir a new directory in one that exists")
    assert list(tmp_path.iterdir()) == []


def test_demo_header_and_session_record_absolute_paths(tmp_path: Path) -> None:
    out = cli("demo", "--dir", "run", cwd=tmp_path,  # relative, made by the demo itself
              env={**os.environ, "COLUMNS": "500"})
    assert out.returncode == 0, out.stderr
    workspace = tmp_path / "run" / "workspace"
    session = tmp_path / "run" / "session.jsonl"
    lines = out.stdout.splitlines()
    assert f"workspace: {workspace}" in lines and f"session:   {session}" in lines
    assert "\\n" not in out.stdout.split("user ")[0]  # no escaped newline in the header
    header = json.loads(session.read_text().splitlines()[0])
    assert header["cwd"] == str(workspace)


# -- repair and verify -----------------------------------------------------------------

def test_repair_and_verify_count_the_same_entries(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    with Session.create(path) as s:
        for i in range(3):
            s.append_message(Message.user(f"question {i}"))
            s.append_message(Message.assistant(f"answer {i}"))
    with open(path, "ab") as f:
        f.write(b"not json\n")
    repaired = runner.invoke(app, ["repair", str(path)])
    assert repaired.exit_code == 0, repaired.stderr
    assert f"{path}: quarantined 1 line, kept 6 entries and the header" in repaired.stdout
    verified = runner.invoke(app, ["verify", str(path)])
    assert f"OK {path}: 6 entries" in verified.stdout
    again = runner.invoke(app, ["repair", str(path)])
    assert f"OK {path}: nothing to repair (6 entries)" in again.stdout
    kept = json.loads(runner.invoke(app, ["repair", str(path), "--json"]).stdout)["kept"]
    entries = json.loads(runner.invoke(app, ["verify", str(path), "--json"]).stdout)["entries"]
    assert kept == entries == 6


# -- compact ---------------------------------------------------------------------------

def test_compact_summary_line_reads_as_a_sentence(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CONTEXTREE_MODEL", raising=False)
    path = tmp_path / "c.jsonl"
    big_session(path)
    text = runner.invoke(app, ["compact", str(path), "--window", "3000"]).stdout
    (line,) = [x for x in text.splitlines() if " tokens: " in x]
    assert re.fullmatch(
        r"\d+ -> \d+ tokens: 24 entries dropped from the view \(24 summarized\), 0 tool "
        r"results cleared in what is kept \(results cleared by tool_results in entries that "
        r"digest then dropped are counted as dropped\)", line), line


# -- ls ----------------------------------------------------------------------------------

def test_ls_last_activity_is_the_last_entry_time_in_utc(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    with Session.create(path) as s:
        s.append_message(Message.user("hello"))
        time.sleep(0.005)  # two entries in one millisecond would share a timestamp
        s.append_message(Message.assistant("x" * 200_000))  # longer than the tail read
    header, first, last = (json.loads(x) for x in path.read_text().splitlines())
    # A header written elsewhere, with an offset: shown in UTC like every other time.
    lines = path.read_text().splitlines()
    lines[0] = lines[0].replace(header["created_at"], "2024-05-01T12:30:00+02:00")
    path.write_text("\n".join(lines) + "\n")
    (row,) = json.loads(runner.invoke(app, ["ls", str(tmp_path), "--json"]).stdout)
    assert row["created"] == "2024-05-01T10:30:00.000Z"
    assert row["last_activity"] == last["timestamp"] != first["timestamp"]
    table = runner.invoke(app, ["ls", str(tmp_path)]).stdout
    assert "2024-05-01 10:30" in table and last["timestamp"][:16].replace("T", " ") in table


# -- the model options -------------------------------------------------------------------

def option_help(command: str, option: str) -> str:
    """The help of one option, as ``--help`` prints it (joined across lines)."""
    text = runner.invoke(app, [command, "--help"], terminal_width=200).stdout
    block = re.search(rf"^ *(?:-\w, )?{option} .*?(?=^ *-)", text, re.M | re.S)
    assert block is not None, text
    return " ".join(block.group(0).split())


def test_compact_and_chat_take_the_model_the_same_way() -> None:
    for option in ("--model", "--base-url"):
        assert option_help("compact", option) == option_help("chat", option)
    assert "[env var: CONTEXTREE_MODEL]" in option_help("chat", "--model")
    assert "[PROVIDER:]MODEL" in option_help("chat", "--model")
    assert "[env var: CONTEXTREE_BASE_URL]" in option_help("compact", "--base-url")
    assert "--provider" not in runner.invoke(app, ["chat", "--help"]).stdout


def test_documented_model_options_match_the_commands() -> None:
    doc = (Path(__file__).parents[2] / "docs" / "command-line.md").read_text()
    assert "--model [PROVIDER:]MODEL" in doc and "CONTEXTREE_BASE_URL" in doc
    assert "`chat [FILE]" in doc


def model_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    src = str(Path(__file__).resolve().parents[2] / "src")
    return {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": src, "HOME": str(tmp_path),
            "CONTEXTREE_HOME": str(tmp_path / "ct"), "OPENAI_API_KEY": "sk-test", **extra}


@pytest.mark.parametrize("by", ["flags", "environment"])
def test_compact_and_chat_reach_the_model_by_flags_or_environment(tmp_path: Path,
                                                                  by: str) -> None:
    with OpenAIServer() as server:
        server.reply(completion("A summary written by the model."),
                     completion("Hello from the chat."))
        spec, url = "openai:gpt-test", server.base_url
        flags = ["--model", spec, "--base-url", url] if by == "flags" else []
        env = model_env(tmp_path, **({} if by == "flags" else
                                     {"CONTEXTREE_MODEL": spec, "CONTEXTREE_BASE_URL": url}))
        path = tmp_path / "c.jsonl"
        big_session(path)
        out = cli("compact", path, "--window", "3000", *flags, env=env)
        assert out.returncode == 0, out.stderr
        chat = cli("chat", tmp_path / "chat.jsonl", *flags, env=env, cwd=tmp_path,
                   stdin="Hi\n/exit\n")
        assert chat.returncode == 0, chat.stderr
        assert "contextree chat: openai/gpt-test" in chat.stdout
        assert "Hello from the chat." in chat.stdout
        assert [b["model"] for b in server.bodies] == ["gpt-test", "gpt-test"]
    with Session.open(path, readonly=True) as s:
        assert "A summary written by the model." in s.build_context().messages[0].text


def test_a_model_name_with_a_colon_is_explained(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    big_session(path)
    out = runner.invoke(app, ["compact", str(path), "--model", "llama3:8b"])
    assert out.exit_code == 2
    assert "unknown provider 'llama3'" in out.stderr and "openai:llama3:8b" in out.stderr


# -- export --help -----------------------------------------------------------------------

def test_export_help_says_which_formats_hold_every_branch(tmp_path: Path) -> None:
    path = tmp_path / "b.jsonl"
    with Session.create(path) as s:
        first = s.append_message(Message.user("first question"))
        s.append_message(Message.assistant("the ABANDONED answer"))
        s.move_to(first)
        s.append_message(Message.assistant("the current answer"))
    text = " ".join(runner.invoke(app, ["export", "--help"], terminal_width=200)
                    .stdout.split())
    claimed = re.search(r"(\S+) and (\S+) keep the whole tree \(every branch\); the other "
                        r"formats hold the current branch only", text)
    assert claimed is not None, text
    whole = set(claimed.groups())
    for spec in list_formats():
        if spec.writer is None and not spec.copy:
            continue
        out = runner.invoke(app, ["export", spec.name, str(path), "-o", "-"])
        assert out.exit_code == 0, (spec.name, out.stderr)
        assert "current answer" in out.stdout
        assert ("ABANDONED" in out.stdout) == (spec.name in whole), spec.name


def test_repair_of_a_file_that_is_no_session_names_the_command_not_python(
        tmp_path: Path) -> None:
    path = tmp_path / "notes.jsonl"
    path.write_text("hello world\nnot a session\n")
    out = runner.invoke(app, ["repair", str(path)])
    assert out.exit_code == 1
    assert "`contextree repair --force FILE`" in out.stderr
    assert "in Python" not in out.stderr and "force=True" not in out.stderr
