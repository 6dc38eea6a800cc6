"""The format table: a third-party format goes through ``register_format`` as the built-in
ones do, and is then usable from the Python API and from ``contextree import``/``export``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

import contextree as ct
from contextree.cli import app
from contextree.entries import MessageEntry, SessionHeader, new_id, now
from contextree.errors import InvalidArgument, UnknownFormat
from contextree.formats import (
    Format,
    FoundSession,
    Imported,
    Progress,
    SessionHome,
    detect_format,
    export_session,
    get_format,
    import_session,
    list_formats,
    list_tool_sessions,
    register_format,
    unregister_format,
)

runner = CliRunner()
MAGIC = "#lines v1"


# -- a tiny format: "#lines v1", then one "role: text" line a message ------------------------

def read_lines(path: Path, progress: Progress | None = None) -> Imported:
    """Each ``role: text`` line becomes a message, the one before it its parent."""
    entries: list[MessageEntry] = []
    for raw in path.read_text().splitlines()[1:]:
        role, _, text = raw.partition(": ")
        message = ct.Message.user(text) if role == "user" else ct.Message.assistant(text)
        parent = entries[-1].id if entries else None
        entries.append(MessageEntry(new_id(), parent, now(), message=message))
    header = SessionHeader(id=str(uuid.uuid4()), created_at=now(), metadata={"from": "lines"})
    return Imported(header, list(entries))


def write_lines(session: ct.Session, at: str | None) -> bytes:
    """The messages of the context at ``at`` (the leaf by default), one a line."""
    messages = session.build_context(at).messages
    return "".join([MAGIC + "\n", *(f"{m.role}: {m.text}\n" for m in messages)]).encode()


def is_lines(path: Path) -> bool:
    """A ``#lines v1`` first line."""
    with open(path, "rb") as f:
        return f.readline().rstrip() == MAGIC.encode()


LINES = Format("lines", "Plain role: text lines", read_lines, write_lines, ".txt",
               aliases=("plain-lines",), detect=is_lines)


@pytest.fixture
def lines() -> Iterator[Format]:
    register_format(LINES)
    yield LINES
    unregister_format("lines")


def source(tmp_path: Path) -> Path:
    path = tmp_path / "chat.txt"
    path.write_text(f"{MAGIC}\nuser: hello\nassistant: hi there\nuser: bye\n")
    return path


def texts(session: ct.Session) -> list[str]:
    return [m.text for m in session.build_context().messages]


# -- the Python API ---------------------------------------------------------------------------

def test_a_registered_format_imports_exports_and_is_detected(lines: Format,
                                                             tmp_path: Path) -> None:
    assert get_format("LINES") is lines and get_format("plain_lines") is lines
    assert lines in list_formats() and list_formats()[0].name == "brute"  # built-ins first
    src = source(tmp_path)
    with import_session("lines", src, tmp_path / "a.jsonl") as s:
        assert texts(s) == ["hello", "hi there", "bye"]
        out = export_session("plain-lines", s, tmp_path / "back.txt")
    assert out.read_text() == src.read_text()
    assert detect_format(src) == "lines"
    with import_session("auto", src, tmp_path / "b.jsonl") as s:
        assert texts(s) == ["hello", "hi there", "bye"]


def test_unknown_formats_list_the_registered_ones(lines: Format, tmp_path: Path) -> None:
    with pytest.raises(UnknownFormat, match=r"unknown format 'nope'; choose one of: brute, .*"
                                            r"contextree, markdown, html, lines \(or auto for import\)"):
        get_format("nope")
    with ct.Session.create(tmp_path / "s.jsonl") as s, pytest.raises(UnknownFormat):
        export_session("nope", s, tmp_path / "x")
    other = tmp_path / "other.txt"
    other.write_text("not a session\n")
    with pytest.raises(UnknownFormat, match=r"cannot tell .* \(one of: .*, lines\)"):
        import_session("auto", other, tmp_path / "c.jsonl")
    assert isinstance(UnknownFormat("x"), InvalidArgument)  # so also a ValueError


def test_duplicate_and_malformed_registrations_are_refused(lines: Format) -> None:
    with pytest.raises(InvalidArgument, match=r"format name 'lines' is already registered "
                                              r"\(by format 'lines': Plain role: text lines\);"
                                              r" choose another name, or pass replace=True"):
        register_format(Format("lines", "again", read_lines))
    with pytest.raises(InvalidArgument, match="'codex' is already registered"):
        register_format(Format("codex2", "x", read_lines, aliases=("codex",)))
    assert "codex2" not in {f.name for f in list_formats()}  # nothing half-registered
    with pytest.raises(InvalidArgument, match="'claude' is already registered"):
        register_format(Format("claude", "x", read_lines))  # an alias of claude-code
    for name in ("auto", "Lines2", "my format", ""):
        with pytest.raises(InvalidArgument, match="cannot name a format"):
            register_format(Format(name, "x", read_lines))
    with pytest.raises(InvalidArgument, match="neither be imported nor exported"):
        register_format(Format("nothing", "x"))
    with pytest.raises(InvalidArgument, match=r"takes a contextree\.formats\.Format"):
        register_format("lines")  # type: ignore[arg-type]
    newer = Format("lines", "Lines, replaced", read_lines, write_lines)
    assert register_format(newer, replace=True) is newer
    assert get_format("lines") is newer
    with pytest.raises(UnknownFormat):
        get_format("plain-lines")  # the replaced format's alias went with it
    with pytest.raises(UnknownFormat, match="unknown format 'gone'"):
        unregister_format("gone")


# -- the command line -------------------------------------------------------------------------

def test_a_registered_format_works_through_import_and_export(lines: Format,
                                                             tmp_path: Path) -> None:
    src = source(tmp_path)
    done = runner.invoke(app, ["import", "lines", str(src), "-o", str(tmp_path / "s.jsonl"),
                               "--json"])
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout)["format"] == "lines"
    with ct.Session.open(tmp_path / "s.jsonl", readonly=True) as s:
        assert texts(s) == ["hello", "hi there", "bye"]
    auto = runner.invoke(app, ["import", "auto", str(src), "-o", str(tmp_path / "t.jsonl")])
    assert auto.exit_code == 0 and "(lines)" in auto.stdout
    out = runner.invoke(app, ["export", "lines", str(tmp_path / "s.jsonl")])
    assert out.exit_code == 0, out.output
    assert (tmp_path / "s.lines.txt").read_text() == src.read_text()  # the format's suffix
    for command in ("import", "export"):
        shown = runner.invoke(app, [command, "--help"]).stdout
        assert "\n  lines             Plain role: text lines\n" in shown


def test_unknown_format_on_the_command_line_lists_the_registered_ones(
        lines: Format, tmp_path: Path) -> None:
    for args in (["import", "nope", str(source(tmp_path))], ["export", "nope", "x.jsonl"]):
        result = runner.invoke(app, args)
        assert result.exit_code == 2
        assert result.stderr.startswith("error: unknown format 'nope'; choose one of: brute")
        assert ", lines (or auto for import)" in result.stderr and "Traceback" not in result.stderr


def test_an_import_only_format_is_not_offered_for_export(tmp_path: Path) -> None:
    register_format(Format("read-only-lines", "Lines, read only", read_lines))
    try:
        assert "read-only-lines" in runner.invoke(app, ["import", "--help"]).stdout
        assert "read-only-lines" not in runner.invoke(app, ["export", "--help"]).stdout
    finally:
        unregister_format("read-only-lines")


def test_a_format_with_a_home_lists_and_finds_its_sessions(tmp_path: Path) -> None:
    """``import FMT --list`` and ``import FMT ID`` ask the format's ``home``."""
    home = tmp_path / "lines-home"
    home.mkdir()
    src = source(home)

    def sessions(where: str | os.PathLike[str] | None) -> list[FoundSession]:
        assert where is None or Path(where) == home
        return [FoundSession("homed-lines", "abc123", src, src.stat().st_mtime, None, "hello")]

    def find(key: str, where: str | os.PathLike[str] | None) -> Path:
        match = [r.path for r in sessions(where) if r.id.startswith(key)]
        if not match:
            raise ct.SessionNotFound(f"no lines session {key!r}")
        return match[0]

    register_format(Format("homed-lines", "Lines kept in a home", read_lines,
                           home=SessionHome(sessions, find)))
    try:
        assert [r.id for r in list_tool_sessions("homed-lines")] == ["abc123"]
        listed = runner.invoke(app, ["import", "homed-lines", "--list", "--json",
                                     "--home", str(home)])
        assert listed.exit_code == 0, listed.output
        assert json.loads(listed.stdout)[0]["first_prompt"] == "hello"
        out = tmp_path / "found.jsonl"
        found = runner.invoke(app, ["import", "homed-lines", "abc", "-o", str(out)])
        assert found.exit_code == 0, found.output
        with ct.Session.open(out, readonly=True) as s:
            assert texts(s) == ["hello", "hi there", "bye"]
        with pytest.raises(InvalidArgument, match="no sessions folder to list; choose one of: "
                                                  "pi, claude-code, codex, gemini-cli, opencode, copilot, homed-lines"):
            list_tool_sessions("brute")
    finally:
        unregister_format("homed-lines")


# -- an installed plugin: an entry point in the group contextree.formats -----------------------

def _install_plugin(site: Path, module: str, body: str) -> None:
    """A distribution on ``site`` whose entry point ``lines`` names ``module:LINES``."""
    (site / f"{module}.py").write_text(textwrap.dedent(body))
    info = site / f"{module}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {module}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[contextree.formats]\nlines = {module}:LINES\n")


def _contextree(site: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), *sys.path])}
    return subprocess.run([sys.executable, "-m", "contextree", *args], capture_output=True,
                          text=True, env=env, timeout=120)


def test_an_installed_plugin_format_reaches_the_command_line(tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    _install_plugin(site, "ctx_lines_plugin", """
        from pathlib import Path
        from contextree.formats import Format, Imported
        from contextree.entries import MessageEntry, SessionHeader, new_id, now
        import contextree as ct

        def read(path, progress=None):
            header = SessionHeader(id="plugin-session", created_at=now())
            entries = []
            for raw in Path(path).read_text().splitlines()[1:]:
                parent = entries[-1].id if entries else None
                entries.append(MessageEntry(new_id(), parent, now(),
                                            message=ct.Message.user(raw.partition(": ")[2])))
            return Imported(header, entries)

        LINES = Format("lines", "Plain role: text lines (plugin)", read)
        """)
    shown = _contextree(site, "import", "--help")
    assert shown.returncode == 0, shown.stderr
    assert "lines             Plain role: text lines (plugin)" in shown.stdout
    out = tmp_path / "s.jsonl"
    done = _contextree(site, "import", "lines", str(source(tmp_path)), "-o", str(out))
    assert done.returncode == 0, done.stderr
    with ct.Session.open(out, readonly=True) as s:
        assert s.id == "plugin-session" and texts(s) == ["hello", "hi there", "bye"]
    refused = _contextree(site, "export", "lines", str(out))
    assert refused.returncode == 2
    assert refused.stderr.strip() == "error: format 'lines' can be imported, not exported"


def test_a_broken_plugin_is_left_out_with_a_warning(tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    _install_plugin(site, "ctx_broken_plugin", "LINES = 'not a Format'\n")
    shown = _contextree(site, "import", "--help")
    assert shown.returncode == 0
    assert "brute" in shown.stdout and "\n  lines " not in shown.stdout
    assert ("the contextree format plugin 'lines' (ctx_broken_plugin:LINES) was left out: "
            "register_format takes a contextree.formats.Format; got a str") in shown.stderr
