"""What a person sees when ``contextree chat`` asks before a command: the question stays the
last thing on the screen, a key typed before it cannot answer it, and invisible characters in
what would run are shown. Run under a pseudo-terminal against the fake OpenAI server."""

from __future__ import annotations

import re
import sys
import time
import unicodedata
from pathlib import Path

from contextree._messages import ToolCall
from contextree._text import HIDDEN, UNSAFE
from contextree.cli.chat import _approval_question
from contextree.cli.terminal import visible
from fakes.openai_server import OpenAIServer, completion, tool_call
from helpers import open_chat


def test_what_other_calls_print_waits_until_the_question_is_answered(
        oa: OpenAIServer, tmp_path: Path) -> None:
    """Calls that fail before asking (bad arguments) print while the shell call waits for an
    answer: under the question, they could scroll it away or end the screen with a line that
    looks like another question."""
    fake = "x" * 60 + "allow shell: ls? [y/N] "
    oa.reply(completion(tool_calls=[tool_call("c1", "shell", {"command": "touch PWNED"}),
                                    tool_call("c2", "read", {"nope": fake}),
                                    tool_call("c3", "read", {"nope": 1})]),
             completion("Stopped."))
    term = open_chat(tmp_path, oa.base_url)
    term.ask("Go", re.escape("allow shell: touch PWNED? [y/N] "))
    deadline = time.monotonic() + 1.5  # the failed calls end at once: give them time
    while time.monotonic() < deadline:
        term.read(0.1)
    assert term.seen.endswith("allow shell: touch PWNED? [y/N] "), term.seen[-400:]
    term.say("n", r"<- error: ", r"<- error: ", r"Stopped\.")
    assert term.exit() == 0
    assert not (tmp_path / "work" / "PWNED").exists()


def test_a_line_typed_before_the_question_does_not_answer_it(oa: OpenAIServer,
                                                             tmp_path: Path) -> None:
    oa.reply(completion("Type y to go on.",
                        tool_calls=[tool_call("c1", "shell", {"command": "touch PWNED"})]),
             completion("Stopped."))
    term = open_chat(tmp_path, oa.base_url)
    term.expect(r"> ")
    term.send("Go\ry\r")  # the y is typed before any question is on the screen
    term.expect(r"what was typed before this question was ignored")
    term.expect(re.escape("allow shell: touch PWNED? [y/N] "))
    assert not (tmp_path / "work" / "PWNED").exists()
    term.say("n", r"denied: the user said no", r"Stopped\.")
    assert term.exit() == 0
    assert not (tmp_path / "work" / "PWNED").exists()


def test_invisible_characters_in_a_command_are_shown_and_counted() -> None:
    plain = _approval_question(ToolCall(id="a", name="shell",
                                        arguments={"command": "rm -rf ./build"}))
    hidden = _approval_question(ToolCall(id="b", name="shell",
                                         arguments={"command": "rm -rf ./bu\u200bild"}))
    assert plain == "allow shell: rm -rf ./build? [y/N] "
    assert hidden == ("note: 1 invisible character is shown above as escapes (\\u...): it "
                      "runs with them\nallow shell: rm -rf ./bu\\u200bild? [y/N] ")


def test_a_file_written_with_hidden_tag_characters_shows_them() -> None:
    """ASCII smuggled as tag characters (U+E0000-E007F) draws as nothing at all."""
    smuggled = "".join(chr(0xE0000 + ord(c)) for c in "rm -rf ~")
    question = _approval_question(ToolCall(id="w", name="write", arguments={
        "path": "AGENTS.md", "content": f"Be nice.{smuggled}\n"}))
    assert "\\U000e0072\\U000e006d" in question  # "rm", escaped
    assert "note: 8 invisible characters are shown above" in question
    assert all(ord(c) < 0xE0000 for c in question)


def test_every_format_character_is_escaped_in_what_a_person_approves() -> None:
    pattern = re.compile(f"[{UNSAFE}{HIDDEN}]")
    formats = [chr(c) for c in range(sys.maxunicode + 1)
               if unicodedata.category(chr(c)) == "Cf"]
    assert formats and all(pattern.fullmatch(c) for c in formats)
    for c in formats:
        assert visible(f"a{c}b", hidden=True).isascii()


def test_everywhere_else_zero_width_spaces_are_escaped_and_emoji_joiners_kept() -> None:
    assert visible("bu\u200bild") == "bu\\u200bild"
    assert visible("x\U000e0041") == "x\\U000e0041"
    family = "\U0001f468\u200d\U0001f469\u200d\U0001f467"
    assert visible(family) == family
