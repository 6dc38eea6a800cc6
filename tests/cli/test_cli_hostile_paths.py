"""Paths a careless user or a hostile directory hands the CLI: file names with bytes that are
not UTF-8 (every ``--json`` output stays valid JSON, the bytes escaped as the text output
escapes them) and a FIFO or a device given where a directory belongs (a usage error, exit 2,
said at once)."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from contextree import Message, Session
from helpers import cli, one_line_error, run, run_json

BAD = os.fsdecode(b"a\xffb")  # the byte 0xff, kept by surrogateescape
SHOWN = "a\\udcffb"  # how the text output writes it (``visible``)


def _bad_session(tmp_path: Path) -> Path:
    """A session named with an undecodable byte, in a folder named likewise."""
    folder = tmp_path / BAD
    folder.mkdir()
    path = folder / f"{BAD}.jsonl"
    with Session.create(path, durable=False) as s:
        s.append_message(Message.user("hi"))
        s.append_message(Message.assistant("hello"))
    return path


def _has_bad_name(value: object) -> bool:
    """Somewhere in ``value`` the escaped name appears (the output names the file)."""
    if isinstance(value, dict):
        return any(_has_bad_name(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_bad_name(v) for v in value)
    return isinstance(value, str) and SHOWN in value


def test_json_of_ls_names_an_undecodable_file_escaped(tmp_path: Path) -> None:
    path = _bad_session(tmp_path)
    listed = run_json("ls", tmp_path)
    assert [Path(x["path"]).name for x in listed] == [f"{SHOWN}.jsonl"]
    assert run("ls", tmp_path).stdout.count(SHOWN) == 2  # the text output: the same escape
    # in a new process too: what a script reading stdout as UTF-8 gets
    out = cli("ls", path.parent, "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)[0]["path"].endswith(f"{SHOWN}.jsonl")


def test_every_json_report_that_names_the_file_is_valid(tmp_path: Path) -> None:
    path = _bad_session(tmp_path)
    leaf = Session.open(path, readonly=True).leaf_id
    assert leaf is not None
    store = tmp_path / f"store{BAD}"
    for args in (["verify", path], ["repair", path, "--dry-run"], ["name", path, "n"],
                 ["label", path, leaf, "here"], ["checkout", path, leaf],
                 ["fork", path, "--at", leaf, "-o", path.parent / f"f{BAD}.jsonl"],
                 ["import", "contextree", path, "-o", path.parent / f"i{BAD}.jsonl"],
                 ["gc", "--dir", store, "--dry-run"], ["tree", path], ["stats", path],
                 ["show", path]):
        if args[0] == "gc":
            store.mkdir(mode=0o700)
        report = run_json(*args)  # exit 0, nothing on stderr, and it parses
        if args[0] not in ("tree", "stats", "show"):  # those report ids, not paths
            assert _has_bad_name(report), (args, report)
    assert _has_bad_name(run_json("rm", "-y", path))
    assert not path.exists()


def test_json_of_gc_lists_undecodable_spills(tmp_path: Path) -> None:
    store = tmp_path / "store"
    folder = store / f"s-{BAD}"
    folder.mkdir(parents=True, mode=0o700)
    store.chmod(0o700)
    spill = folder / f"{BAD}.txt"
    spill.write_text("old output")
    os.utime(spill, (0, 0))
    report = run_json("gc", "--dir", store, "--max-age-days", "1", "--dry-run")
    assert report["removed"] == 1
    assert report["paths"] == [str(store / f"s-{SHOWN}" / f"{SHOWN}.txt")]
    assert spill.exists()


def _not_directories(tmp_path: Path) -> list[Path]:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    nodes = [fifo]
    if os.geteuid() == 0:  # a device node needs root: /dev/null's numbers
        null = tmp_path / "null"
        os.mknod(null, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
        nodes.append(null)
    return nodes


@pytest.mark.timeout(60)
def test_a_fifo_or_a_device_where_a_directory_belongs_is_a_usage_error(tmp_path: Path) -> None:
    session = tmp_path / "s.jsonl"
    with Session.create(session, durable=False) as s:
        s.append_message(Message.user("hi"))
    for node in _not_directories(tmp_path):
        kind = "FIFO" if stat.S_ISFIFO(os.stat(node).st_mode) else "character device"
        for args in (["ls", node], ["ls", node, "--json"], ["gc", "--dir", node],
                     ["rm", "-y", "--dir", node, session],
                     ["import", "--list", "claude-code", "--home", node],
                     ["import", "codex", "abc", "--home", node], ["demo", "--dir", node]):
            one_line_error(run(*args, code=2), str(node), kind, "not a directory")
    assert session.exists()  # the refused rm left the session alone


@pytest.mark.timeout(120)
def test_ls_of_a_fifo_exits_2_in_a_new_process_without_waiting(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    out = cli("ls", fifo)
    assert out.returncode == 2, out.stderr
    assert out.stderr.startswith("error: ") and "not a directory" in out.stderr


def test_a_session_made_in_an_undecodable_directory_records_it_escaped(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / BAD
    folder.mkdir()
    monkeypatch.chdir(folder)
    with Session.create("s.jsonl", durable=False) as s:  # the cwd is recorded in the header
        s.append_message(Message.user("hi"))
    header = json.loads((folder / "s.jsonl").read_bytes().splitlines()[0])
    assert header["cwd"] == str(tmp_path / "a\\xffb")
    assert run_json("stats", folder / "s.jsonl")["entry_count"] == 1
