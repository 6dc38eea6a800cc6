"""The terminal is safe from session content (issue 11, "The terminal"): escape sequences and
control characters from a session or a file name are shown, never sent, in every text output,
piped or on a terminal; ``--json`` stays exact."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from contextree import Message, Session, ToolCall
from contextree.cli.output import PROGRESS_MIN_BYTES
from contextree.cli.terminal import fit, visible, width_of
from helpers import SGR, cli_bytes, raw_header, raw_message, run_on_terminal, write_lines

# What a hostile tool output or file could carry: clipboard write (OSC 52), window title,
# a hyperlink, clear screen and cursor home, C1 CSI and OSC, a right-to-left override, and
# carriage return / backspace / bell.
EVIL = ("\x1b]52;c;cHduZWQ=\x07" "\x1b]0;pwned title\x07"
        "\x1b]8;;http://evil.example\x1b\\click\x1b]8;;\x1b\\" "\x1b[2J\x1b[H"
        "\x9b31m" "\x9d0;c1 title\x9c" "\u202egnp.exe" "\r\x08\x07")
# Bytes that must not reach a terminal: ESC, BEL, backspace, CR, C1 in UTF-8, bidi controls.
FORBIDDEN = re.compile(rb"[\x1b\x07\x08\r]|\xc2[\x80-\x9f]|\xe2\x80[\xaa-\xae]")


def hostile_session(path: Path) -> dict[str, str]:
    ids: dict[str, str] = {}
    with Session.create(path, cwd="/w" + EVIL, durable=False) as s:
        s.append_message(Message.system("system " + EVIL))
        ids["user"] = s.append_message(Message.user("hi " + EVIL))
        s.append_message(Message.assistant(
            "ok " + EVIL, model="m" + EVIL, provider="p" + EVIL,
            tool_calls=[ToolCall(id="c" + EVIL, name="shell" + EVIL,
                                 arguments={"command" + EVIL: EVIL})]))
        s.append_message(Message.tool("out " + EVIL + "\n" + EVIL, tool_call_id="c" + EVIL,
                                      name="shell" + EVIL))
        s.set_label(ids["user"], "label" + EVIL)
        s.move_to(ids["user"], summary="summary " + EVIL)
        s.append_message(Message.user("again"))
        s.set_name("name " + EVIL)
    return ids


@pytest.fixture
def hostile(tmp_path: Path) -> Path:
    folder = tmp_path / ("dir" + "\x1b]0;T\x07")
    folder.mkdir()
    path = folder / ("s" + "\x1b[2J" + ".jsonl")
    hostile_session(path)
    return path


def commands(path: Path) -> list[list[str]]:
    """Every human-readable output that shows session content or file names."""
    p = str(path)
    return [
        ["tree", p], ["tree", p, "--all"], ["show", p], ["show", p, "--context"],
        ["show", p, "--at", "label" + EVIL], ["stats", p], ["verify", p],
        ["ls", str(path.parent)], ["show", p, "--at", "nope" + EVIL],
        ["compact", p, "--window", "200", "--dry-run"],
        ["export", "openai-chat", p, "-o", str(path.parent / ("x" + EVIL + ".json"))],
    ]


def test_visible_escapes_every_kind_of_control() -> None:
    assert visible("a\x1b]52;c;x\x07b") == "a\\x1b]52;c;x\\x07b"
    assert visible("\x9b31m\x9d") == "\\x9b31m\\x9d"
    assert visible("\u202eevil\u2066") == "\\u202eevil\\u2066"
    assert visible("a\nb\rc\td") == "a\\nb\\rc\\td"
    assert visible("a\tb", tabs=True) == "a\tb"
    assert visible("\x7f\x00") == "\\x7f\\x00"
    assert visible("plain ünïcødé 中文 ✓") == "plain ünïcødé 中文 ✓"
    assert visible("\udcff") == "\\udcff"  # an undecodable byte kept by surrogateescape
    assert fit("中文中文中文", 7) == "中文中…" and width_of(fit("中文中文中文", 7)) <= 7


@pytest.mark.slow
def test_piped_text_output_carries_no_escape_sequence(hostile: Path) -> None:
    for args in commands(hostile):
        out = cli_bytes(*args)
        assert b"Traceback" not in out.stderr, (args, out.stderr)
        for stream in (out.stdout, out.stderr):
            assert not FORBIDDEN.search(stream), (args, stream[:400])
    # What was escaped is visible, not dropped.
    tree = cli_bytes("tree", str(hostile)).stdout.decode()
    assert "\\x1b]52;c;cHduZWQ=\\x07" in tree


@pytest.mark.slow
def test_terminal_output_sends_only_our_colours(hostile: Path) -> None:
    for args in commands(hostile)[:8]:
        out, code = run_on_terminal(args)
        assert code == 0, (args, out[-400:])
        assert b"\x1b[" in out  # styled: this really is the rich path
        assert not FORBIDDEN.search(SGR.sub(b"", out)), (args, out[:400])


def test_json_stays_exact(hostile: Path) -> None:
    out = cli_bytes("show", str(hostile), "--json")
    assert not FORBIDDEN.search(out.stdout)  # C1 and bidi written as \u escapes
    entries = json.loads(out.stdout)
    with Session.open(hostile, readonly=True) as s:
        branch = s.branch()
        assert [e["id"] for e in entries] == [e.id for e in branch]
        texts = [e["message"]["content"] for e in entries if e["type"] == "message"]
        assert texts[0] == "system " + EVIL and texts[1] == "hi " + EVIL
        assert entries[-1]["name"] == "name " + EVIL
    listed = json.loads(cli_bytes("ls", str(hostile.parent), "--json").stdout)
    assert listed[0]["name"] == "name " + EVIL and listed[0]["path"] == str(hostile)


def test_the_demo_shows_hostile_paths_escaped(tmp_path: Path) -> None:
    where = tmp_path / ("run" + "\x1b]0;T\x07" + "\x9b2J")
    out = cli_bytes("demo", "--dir", str(where))
    assert out.returncode == 0, out.stderr
    assert not FORBIDDEN.search(out.stdout) and not FORBIDDEN.search(out.stderr)
    assert b"\\x1b]0;T\\x07" in out.stdout
    screen, code = run_on_terminal(["demo", "--dir", str(tmp_path / ("tty" + "\x1b]0;T\x07"))])
    assert code == 0
    assert not FORBIDDEN.search(SGR.sub(b"", screen))


@pytest.mark.parametrize("fmt", ["markdown", "html", "openai-chat", "pi"])
def test_export_to_stdout_on_a_terminal_sends_no_escape_sequence(hostile: Path,
                                                                 fmt: str) -> None:
    """``export FMT FILE -o -`` is how one looks at an export: on a terminal the session's
    escapes are shown, not sent; JSON stays the same JSON (C1 and bidi as ``\\u``)."""
    out, code = run_on_terminal(["export", fmt, str(hostile), "-o", "-"])
    assert code == 0, out[-400:]
    assert not FORBIDDEN.search(out.replace(b"\n", b"")), out[:400]
    piped = cli_bytes("export", fmt, str(hostile), "-o", "-").stdout
    if fmt == "openai-chat":
        assert json.loads(out) == json.loads(piped)
    elif fmt == "pi":
        assert [json.loads(line) for line in out.splitlines()] == [
            json.loads(line) for line in piped.splitlines()]
    else:
        assert b"\\x1b]52;c;cHduZWQ=\\x07" in out  # shown, not dropped
        if fmt == "markdown":  # a file a person cats: shown as text there too
            assert b"\\x1b]52;c;cHduZWQ=\\x07" in piped and b"\x1b" not in piped
        else:
            assert b"\x1b]52;c;cHduZWQ=\x07" in piped  # piped into a file: exact


# Names that rich would read as markup: a hyperlink (OSC 8), a closing tag with nothing to
# close (a MarkupError), a style tag that would vanish from the name.
MARKUP_NAMES = ("[link=https://evil.example/]click me[/link]", "[/]", "[notastyle]real")
OSC8 = b"\x1b]8;"


def _marked_up(folder: Path) -> None:
    """Sessions named (and one file named) like rich markup, in ``folder``."""
    folder.mkdir()
    for i, name in enumerate(MARKUP_NAMES):
        with Session.create(folder / f"{i}.jsonl", durable=False) as s:
            s.append_message(Message.user("hi"))
            s.set_name(name)
    with Session.create(folder / "[notastyle]real-name.jsonl", durable=False) as s:
        s.append_message(Message.user("hi"))


@pytest.mark.parametrize("command", ["ls", "du"])
def test_names_like_markup_are_shown_as_they_are_on_a_terminal(tmp_path: Path,
                                                                command: str) -> None:
    _marked_up(tmp_path / "s")
    out, code = run_on_terminal([command, str(tmp_path / "s")], columns=200)
    assert code == 0 and b"Traceback" not in out, out[-400:]
    assert b"\x1b[1m" in out  # the rich path: the headers are still bold
    assert OSC8 not in out
    text = SGR.sub(b"", out).decode()
    assert "[notastyle]real-name.jsonl" in text
    if command == "ls":
        assert "[link=https://evil.example/]" in text and "[/]" in text
        assert "[notastyle]real" in text


def test_a_first_prompt_like_markup_is_listed_as_it_is_on_a_terminal(tmp_path: Path) -> None:
    """``import claude-code --list`` shows each session's first prompt, the tool's text."""
    project = tmp_path / "claude" / "projects" / "-w"
    project.mkdir(parents=True)
    sid = "22222222-2222-2222-2222-222222222222"
    line = {"type": "user", "uuid": "11111111-1111-1111-1111-111111111111", "parentUuid": None,
            "sessionId": sid, "timestamp": "2026-01-01T00:00:00Z", "cwd": "/w",
            "message": {"role": "user", "content": "[/] hello [link=https://evil.example/]x"}}
    (project / f"{sid}.jsonl").write_text(json.dumps(line) + "\n")
    out, code = run_on_terminal(["import", "claude-code", "--list", "--home",
                                 str(tmp_path / "claude")], columns=200)
    assert code == 0 and b"Traceback" not in out, out[-400:]
    assert OSC8 not in out and b"[/] hello [link=https://evil.example/]x" in out


def test_a_progress_bar_shows_a_path_like_markup_as_it_is(tmp_path: Path) -> None:
    """``index`` draws a bar for 8 MB of sessions or more, described by the directory's path
    (here ``.../a[/]b``: a closing tag rich would refuse)."""
    where = tmp_path / "a[" / "]b"
    where.mkdir(parents=True)
    text = "word " * 200_000
    count = PROGRESS_MIN_BYTES // len(text) + 1
    write_lines(where / "big.jsonl", [raw_header(), *(
        raw_message(f"e{i}", f"e{i - 1}" if i else None, text) for i in range(count))])
    out, code = run_on_terminal(["index", str(where)], 200, stderr_too=True)
    assert code == 0 and b"Traceback" not in out, out[-400:]
    assert b"indexing " + str(where).encode() in out  # the bar, drawn before it went
    assert b"indexed 1 changed session files" in out


@pytest.mark.parametrize("api", ["openai", "anthropic", "responses"])
def test_a_wire_body_on_a_terminal_is_the_same_json_without_controls(hostile: Path,
                                                                     api: str) -> None:
    """``show --context --wire API`` on a terminal writes C1 and bidirectional controls as
    ``\\u`` escapes, as ``--json`` does; piped, the body stays the exact bytes."""
    args = ["show", str(hostile), "--context", "--wire", api, "--raw"]
    out, code = run_on_terminal(args)
    assert code == 0, out[-400:]
    assert not FORBIDDEN.search(out.replace(b"\n", b"")), out[:400]
    piped = cli_bytes(*args).stdout
    assert "\u202e".encode() in piped and b"\xc2\x9b" in piped  # exact when piped
    assert json.loads(out) == json.loads(piped)
