"""``contextree chat`` fed by a pipe (no terminal): a script, a CI job, ``yes n | ...``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from contextree import Session
from fakes.openai_server import OpenAIServer, completion, tool_call
from helpers import chat_env


def piped_chat(tmp_path: Path, server: OpenAIServer, stdin: bytes) -> str:
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    done = subprocess.run([sys.executable, "-m", "contextree", "chat",
                           str(tmp_path / "chat.jsonl")], input=stdin, capture_output=True,
                          cwd=work, env=chat_env(server.base_url, tmp_path), timeout=120)
    assert done.returncode == 0 and b"Traceback" not in done.stderr, done.stderr
    return done.stdout.decode()


def test_a_line_that_is_not_utf8_is_refused_with_what_to_do(oa: OpenAIServer,
                                                             tmp_path: Path) -> None:
    oa.reply(completion("Bonjour."))
    shown = piped_chat(tmp_path, oa, b"caf\xe9 au lait\nhello\n")
    assert "not UTF-8" in shown and "caf\\udce9" in shown
    assert "cannot be stored" not in shown
    assert "Bonjour." in shown  # the chat went on
    with Session.open(tmp_path / "chat.jsonl", readonly=True) as s:
        assert [m.text for m in s.build_context().messages] == ["hello", "Bonjour."]


def test_a_piped_approval_answer_ends_its_line(oa: OpenAIServer, tmp_path: Path) -> None:
    oa.reply(completion(tool_calls=[tool_call("c1", "shell", {"command": "rm -rf ~"})]),
             completion("As you wish."))
    shown = piped_chat(tmp_path, oa, b"clean up\nn\n")
    assert "allow shell: rm -rf ~? [y/N] \n<- error: tool call 'shell' was denied" in shown
