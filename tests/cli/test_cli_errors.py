"""Errors on the command line: exit 2 for every wrong usage and 1 for failures, one line in
the command line's words (no Python advice), and the messages a new user hit."""

from __future__ import annotations

import errno
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from contextree import Message, Session
from contextree.cli import app
from contextree.entries import MessageEntry, now
from helpers import FORMATS_DATA as DATA
from helpers import one_line_error, run, runner

PYTHON_ADVICE = re.compile(r"Session\.\w+\(|readonly=|overwrite=|create_schema|PostgresStorage"
                           r"|\w+\(\w+=|\(\)")


def test_wrong_usage_exits_2(sess: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    path, ids = sess
    cases = [
        (["verify", tmp_path], "is a directory"),
        (["tree", tmp_path], "is a directory"),
        (["compact", path, "--window", "-5"], "--window"),
        (["compact", path, "--window", "0"], "--window"),
        (["compact", path, "--compact-at", "nan"], "--compact-at"),
        (["compact", path, "--compact-to", "inf"], "--compact-to"),
        (["compact", path, "--compact-at", "0.3", "--compact-to", "0.5"], "below --compact-at"),
        (["gc", "--max-age-days", "-1"], "--max-age-days"),
        (["gc", "--max-total-mb", "nan"], "--max-total-mb"),
        (["ls", path], "not a directory"),
        (["import", "pi", tmp_path], "is a directory"),
        (["label", path, ids["task"]], "--clear"),
        (["label", path, ids["task"], "x", "--clear"], "not both"),
        (["show", path, "--at", ""], "name an entry"),
        (["export", "nope", path], "unknown format"),
        (["repair", "postgresql://u@h/db#abc"], "postgresql://u@h/db#abc"),
        (["fork", path, "--at", ids["task"], "-o", tmp_path], "is a directory"),
    ]
    for args, needle in cases:
        one_line_error(run(*args, code=2), needle)


def test_failures_exit_1(sess: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    path, _ = sess
    one_line_error(run("verify", tmp_path / "missing.jsonl", code=1), "no such session file")
    one_line_error(run("gc", "--dir", tmp_path / "nonexistent", code=1), "no such directory")
    assert not (tmp_path / "nonexistent").exists()
    one_line_error(run("show", path, "--at", "zzzz", code=1), "no entry 'zzzz'")


def test_version_and_short_help() -> None:
    from contextree.cli.app import package_version

    version = run("--version").stdout.strip()
    assert version == f"contextree {package_version()}"
    assert run("-h").stdout.startswith("Usage: contextree [OPTIONS] COMMAND")
    assert "-h, --help" in run("tree", "-h").stdout


def test_usage_lines_have_no_braces() -> None:
    from contextree.cli.app import COMMANDS  # every command, imported or not yet

    names = [*COMMANDS, "db init"]
    for name in names:
        text = run(*str(name).split(), "--help").stdout
        usage = text.splitlines()[0]
        assert usage.startswith(f"Usage: contextree {name} ") and "{" not in usage, usage
    assert run("tree", "--help").stdout.splitlines()[0] == "Usage: contextree tree [OPTIONS] FILE"
    assert run("label", "--help").stdout.splitlines()[0] == \
        "Usage: contextree label [OPTIONS] FILE ENTRY [TEXT]"


def test_help_lists_the_formats_each_direction_has() -> None:
    from contextree.formats import list_formats

    export_help = run("export", "--help").stdout
    import_help = run("import", "--help").stdout
    for fmt in list_formats():
        assert (f"\n  {fmt.name} " in export_help) == fmt.can_export
        assert (f"\n  {fmt.name} " in import_help) == fmt.can_import
    assert "required for the contextree format" in " ".join(import_help.split())


def test_export_help_leaves_out_import_only_formats(monkeypatch: pytest.MonkeyPatch) -> None:
    code = ("from contextree.formats import Format, register_format\n"
            "from contextree.formats import _brute as brute\n"
            "register_format(Format('import-only', 'x', brute.read))\n"
            "from contextree.cli import main\nmain()\n")
    out = subprocess.run([sys.executable, "-c", code, "export", "--help"], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0 and "import-only" not in out.stdout and "brute" in out.stdout


def test_entry_references(tmp_path: Path) -> None:
    path = tmp_path / "ids.jsonl"
    with Session.create(path) as s:
        for eid, parent in (("ab12cd34", None), ("ab98ef01", "ab12cd34"),
                            ("c0ffee00", "ab98ef01")):
            s.append(MessageEntry(eid, parent, now(), message=Message.user(eid)))
    assert run("show", path, "--at", "c0").stdout.rstrip().endswith("c0ffee00")  # 2 chars
    assert "ab98ef01" in run("show", path, "--at", "ab9").stdout
    one_line_error(run("show", path, "--at", "ab", code=2),
                   "'ab' is the start of 2 entry ids (ab12cd34, ab98ef01)", "type more")


def test_a_label_on_two_entries_is_reported_with_both_ids(tmp_path: Path) -> None:
    path = tmp_path / "dup.jsonl"
    with Session.create(path) as s:
        a = s.append_message(Message.user("a"))
        b = s.append_message(Message.user("b"))
    with open(path, "ab") as f:  # as an imported file may have it
        for target, eid, parent in ((a, "l1", b), (b, "l2", "l1")):
            f.write(json.dumps({"type": "label", "id": eid, "parent_id": parent,
                                "timestamp": now(), "target_id": target,
                                "label": "same"}).encode() + b"\n")
    with Session.open(path, readonly=True) as s:
        on = s.ambiguous_labels()["same"]  # labels() keeps the latest: b
        assert on == [a, b] and s.labels() == {b: "same"}
    result = run("checkout", path, "same", code=2)
    one_line_error(result, "'same' is on 2 entries", on[0], on[1])


def test_messages_a_new_user_hit(tmp_path: Path) -> None:
    foo = tmp_path / "foo.json"
    foo.write_text('{"foo": 1}')
    result = run("import", "openai-chat", foo, code=1)
    one_line_error(result, "without a `messages` key", "`foo`")
    assert "NoneType" not in result.stderr
    one_line_error(run("import", "brute", tmp_path / "missing.jsonl", code=1), "no such file")


def test_no_python_advice_in_cli_errors(sess: tuple[Path, dict[str, str]],
                                        tmp_path: Path) -> None:
    path, ids = sess
    taken = tmp_path / "taken.json"
    taken.write_text("x")
    # Another process holds the lock while the commands below run (within one process,
    # writers of one file share it).
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, contextree as ct\n"
         "s = ct.Session.open(sys.argv[1])\nprint('ready', flush=True)\nsys.stdin.read()",
         str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "ready\n"
        locked = [run("label", path, ids["task"], "x", code=1),
                  run("checkout", path, ids["task"], code=1),
                  run("compact", path, "--window", "100", code=1),
                  run("rm", "--yes", path, code=1)]
    finally:
        holder.kill()
        holder.wait()
    for result in locked:
        one_line_error(result, "open for writing", "`contextree show`")
    others = [run("tree", tmp_path / "missing.jsonl", code=1),
              run("export", "openai-chat", path, "-o", taken, code=1),
              run("tree", "host=localhost dbname=x", code=2),
              run("stats", "mysql://h/db#x", code=2)]
    for result in [*locked, *others]:
        assert not PYTHON_ADVICE.search(result.stderr), result.stderr


def test_an_unwritable_directory_is_named(sess: tuple[Path, dict[str, str]], tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    path, _ = sess
    locked = tmp_path / "ro"
    locked.mkdir()
    real_open = os.open

    def refuse(name: object, flags: int, *args: object, **kw: object) -> int:
        if str(name).startswith(str(locked)):
            raise PermissionError(errno.EACCES, "Permission denied", str(name))
        return real_open(name, flags, *args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "open", refuse)
    for args in (["fork", path, "--at", "diagnosis", "-o", locked / "x.jsonl"],
                 ["export", "openai-chat", path, "-o", locked / "x.json"]):
        result = run(*args, code=1)
        one_line_error(result, str(locked), "Permission denied")
        assert ".tmp" not in result.stderr


@pytest.mark.slow
def test_a_named_pipe_is_refused_without_waiting(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.jsonl"
    os.mkfifo(fifo)
    for args in (["tree", str(fifo)], ["verify", str(fifo)], ["import", "pi", str(fifo)],
                 ["repair", str(fifo)]):
        out = subprocess.run([sys.executable, "-m", "contextree", *args], capture_output=True,
                             text=True, timeout=60)
        assert out.returncode == 2 and "named pipe" in out.stderr, (args, out.stderr)


def test_import_contextree_needs_o_and_says_so(sess: tuple[Path, dict[str, str]]) -> None:
    path, _ = sess
    one_line_error(run("import", "contextree", path, code=2), "-o FILE")


def test_usage_errors_from_typer_exit_2() -> None:
    for args in (["tree"], ["show", "x", "--bogus"], ["nope"], ["compact", "f", "--window",
                                                                 "many"]):
        result = runner.invoke(app, args)
        assert result.exit_code == 2 and "Traceback" not in result.output


def test_usage_errors_show_what_was_typed_with_its_controls_visible() -> None:
    """Click quotes the argument it refuses; a right-to-left override in it (which would
    show ``x\u202egpj.exe`` as ``xexe.jpg``) or a C1 control is shown as an escape."""
    for args, shown in ((["tree", "a.jsonl", "x\u202egpj.exe"], "(x\\u202egpj.exe)"),
                        (["tree", "--x\u202e"], "--x\\u202e"),
                        (["db", "init", "u", "\x9b2J\u2066"], "(\\x9b2J\\u2066)")):
        result = runner.invoke(app, args)
        assert result.exit_code == 2, result.output
        assert shown in result.stderr and "Error: " in result.stderr, result.stderr
        assert not re.search("[\x80-\x9f\u202a-\u202e\u2066-\u2069]", result.stderr)


def test_brute_import_error_names_the_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"role": "user", "content": "hi"}\n{"role": \n')
    one_line_error(run("import", "brute", bad, code=1), f"{bad}:2:")
    assert (DATA / "brute.jsonl").exists()


def test_verify_and_repair_a_flat_message_log(tmp_path: Path) -> None:
    log = tmp_path / "brute.jsonl"
    log.write_text('{"role": "user", "content": "hi"}\n'
                   '{"role": "assistant", "content": "hello"}\n'
                   'not json\n'
                   '{"role": "user", "content": "again"}\n')
    bad = run("verify", log, code=1)
    assert f"{log}:3:" in bad.stdout and "contextree repair" in bad.stdout
    report = json.loads(run("verify", log, "--json", code=1).stdout)
    assert report["kind"] == "flat_log" and report["messages"] == 3 and report["line"] == 3
    dry = run("repair", log, "--dry-run").stdout
    assert "would quarantine 1 line," in dry and "not json" in log.read_text()
    fixed = json.loads(run("repair", log, "--json").stdout)
    assert fixed["quarantined"] == 1 and fixed["kept"] == 3 and Path(fixed["backup"]).exists()
    assert run("verify", log).stdout.startswith(f"OK {log}: flat message log, 3 messages")
