"""Hostile and odd files: deep nesting, huge numbers, a BOM, files that are not sessions;
repair keeps every valid entry, always yields a file that opens, needs no lock for a dry run,
and writes unique, whole backups."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

import contextree as ct
from helpers import TS, cli, raw_header
from helpers import raw_message as msg
from helpers import write_lines as write

HEADER = raw_header("/w")


def label(eid: str, parent: str | None, target: str, text: str | None = "l") -> bytes:
    return orjson.dumps({"type": "label", "id": eid, "parent_id": parent, "timestamp": TS,
                         "target_id": target, "label": text})


def leaf(eid: str, parent: str | None, target: str | None) -> bytes:
    return orjson.dumps({"type": "leaf", "id": eid, "parent_id": parent, "timestamp": TS,
                         "target_id": target})


def deep_json(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


def ids(path: Path) -> list[str]:
    with ct.Session.open(path, readonly=True) as s:
        return [e.id for e in s.entries()]


# -- deep nesting and huge numbers ------------------------------------------------------------

DEEP = {
    "custom_data": lambda depth: (b'{"type":"custom","id":"deep","parent_id":"e2","timestamp":"t",'
                                  b'"custom_type":"c","data":' + deep_json(depth) + b"}"),
    "tool_arguments": lambda depth: (
        b'{"type":"message","id":"deep","parent_id":"e2","timestamp":"t","message":{"role":'
        b'"assistant","content":"","tool_calls":[{"id":"c","name":"read","arguments":{"a":'
        + deep_json(depth) + b"}}]}}"),
    "unknown_type": lambda depth: (b'{"type":"future","id":"deep","parent_id":"e2","x":'
                                   + deep_json(depth) + b"}"),
    "unknown_field": lambda depth: (b'{"type":"custom","id":"deep","parent_id":"e2",'
                                    b'"timestamp":"t","custom_type":"c","extra":'
                                    + deep_json(depth) + b"}"),
}


@pytest.mark.slow
@pytest.mark.parametrize("depth", [250, 1_000, 100_000])
@pytest.mark.parametrize("where", list(DEEP))
def test_deeply_nested_json_is_a_clear_error_and_repair_quarantines_it(
        tmp_path: Path, where: str, depth: int) -> None:
    path = tmp_path / "s.jsonl"
    write(path, [HEADER, msg("e1", None), msg("e2", "e1"), DEEP[where](depth),
                 msg("e4", "deep")])
    for readonly in (True, False):
        with pytest.raises(ct.errors.InvalidEntry, match="levels deep") as info:
            ct.Session.open(path, readonly=readonly)
        assert (info.value.path, info.value.line) == (str(path), 4)
    commands = [["verify", str(path)], ["show", str(path)], ["repair", "--dry-run", str(path)]]
    for command in commands if where == "custom_data" else ():
        done = cli(*command)
        assert "Traceback" not in done.stderr and "RecursionError" not in done.stderr, done
        assert done.returncode in (0, 1), done
    report = ct.repair(path)
    assert [n for n, _ in report.quarantined] == [4]
    assert [n for n, _ in report.fixed] == [5]  # e4 is kept, under e2
    assert ids(path) == ["e1", "e2", "e4"]
    assert not ct.repair(path).changed


@pytest.mark.parametrize("depth", [1_000, 50_000])
def test_deeply_nested_header_metadata_is_a_clear_error(tmp_path: Path, depth: int) -> None:
    path = tmp_path / "s.jsonl"
    header = HEADER[:-1] + b',"metadata":{"m":' + deep_json(depth) + b"}}"
    write(path, [header, msg("e1", None)])
    with pytest.raises(ct.errors.InvalidHeader, match="levels deep") as info:
        ct.Session.open(path, readonly=True)
    assert info.value.line == 1
    done = cli("verify", str(path))
    assert done.returncode == 1 and "Traceback" not in done.stderr
    report = ct.repair(path)  # the header goes; a new one is written, the entry is kept
    assert [n for n, _ in report.quarantined] == [0, 1]
    assert ids(path) == ["e1"]


def test_integers_beyond_64_bits_are_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    big = (b'{"type":"custom","id":"big","parent_id":"e1","timestamp":"t","custom_type":"c",'
           b'"data":{"n":' + b"9" * 30 + b"}}")
    write(path, [HEADER, msg("e1", None), big])
    with pytest.raises(ct.errors.InvalidEntry, match="64-bit") as info:
        ct.Session.open(path, readonly=True)
    assert info.value.line == 3
    assert [n for n, _ in ct.repair(path).quarantined] == [3]
    assert ids(path) == ["e1"]


def test_data_too_deep_to_store_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    with ct.Session.create(path, cwd="/") as s:
        before = path.read_bytes()
        value: Any = 1
        for _ in range(5_000):
            value = {"k": value}
        with pytest.raises(ct.errors.InvalidEntry, match="levels deep"):
            s.append_custom("c", value)
        with pytest.raises(ct.errors.InvalidEntry, match="levels deep"):
            s.append_message(ct.Message.assistant("", tool_calls=[
                ct.ToolCall(id="c", name="read", arguments={"a": value})]))
        assert path.read_bytes() == before


# -- repair keeps every valid entry ------------------------------------------------------------

CHAIN = [HEADER, msg("e1", None), msg("e2", "e1")]


@pytest.mark.parametrize(("bad", "reason"), [
    (label("lab", "e2", "ghost"), "missing"),
    (leaf("lf", "e2", "ghost"), "missing"),
    (leaf("lf", "e2", "e4"), "comes after"),
    (b'{"type":"message","id":"inv","parent_id":"e2","timestamp":"t"}', "invalid"),
])
def test_quarantining_a_line_in_the_middle_keeps_the_entries_below_it(
        tmp_path: Path, bad: bytes, reason: str) -> None:
    path = tmp_path / "s.jsonl"
    bad_id = orjson.loads(bad)["id"]
    write(path, [*CHAIN, bad, msg("e4", bad_id), msg("e5", "e4"), label("l2", "e5", "e4")])
    report = ct.repair(path)
    assert [n for n, _ in report.quarantined] == [4]
    assert reason in report.quarantined[0][1]
    assert report.fixed == [(5, f"its parent {bad_id!r} was quarantined: now a child of 'e2'")]
    with ct.Session.open(path) as s:  # it opens, and keeps every valid entry
        assert [e.id for e in s.branch()] == ["e1", "e2", "e4", "e5", "l2"]
        assert s.labels() == {"e4": "l"}
        s.append_message(ct.Message.user("writable"))
    second = ct.repair(path)
    assert not second.changed and second.kept == 7


def test_labels_pointing_at_each_other_or_at_quarantined_entries(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    write(path, [*CHAIN, label("la", "e2", "lb"), label("lb", "la", "la"),
                 msg("gone", "ghost"), label("lc", "lb", "gone"), msg("e6", "lc")])
    report = ct.repair(path)
    assert [n for n, _ in report.quarantined] == [4, 5, 6, 7]
    assert ids(path) == ["e1", "e2", "e6"]
    with ct.Session.open(path) as s:
        assert s.get_entry("e6").parent_id == "e2"  # type: ignore[union-attr]
    assert not ct.repair(path).changed


def test_a_second_repair_keeps_a_linear_session(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    chain = [msg(f"m{i}", f"m{i - 1}" if i else None) for i in range(20)]
    chain.insert(5, label("bad", "m4", "ghost"))
    chain[6] = msg("m5", "bad")
    write(path, [HEADER, *chain])
    ct.repair(path)
    first = ids(path)
    assert first == [f"m{i}" for i in range(20)]
    assert not ct.repair(path).changed and ids(path) == first


def test_an_entry_with_an_empty_id_is_quarantined_and_the_file_opens(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    write(path, [*CHAIN, msg("", "e2"), msg("e4", "e2")])
    with pytest.raises(ct.errors.InvalidEntry):
        ct.Session.open(path, readonly=True)
    assert [n for n, _ in ct.repair(path).quarantined] == [4]
    assert ids(path) == ["e1", "e2", "e4"]


# -- files that are not sessions -------------------------------------------------------------

@pytest.mark.parametrize("content", [
    b"just some notes\nin a text file\n",
    bytes(range(256)) * 8,
    b"\xef\xbb\xbfa text file that starts with a BOM\n",
    b'{"json": "but not a session"}\n',
])
def test_repair_refuses_a_file_that_is_not_a_session_unless_forced(
        tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "notes.jsonl"
    path.write_bytes(content)
    for dry_run in (True, False):
        with pytest.raises(ct.errors.InvalidHeader, match="does not look like a session"):
            ct.repair(path, dry_run=dry_run)
    assert path.read_bytes() == content
    assert [p.name for p in tmp_path.iterdir()] == ["notes.jsonl"]
    done = cli("repair", str(path))
    assert done.returncode != 0 and "--force" in done.stderr + done.stdout
    assert path.read_bytes() == content
    report = ct.repair(path, force=True)
    assert report.backup is not None and Path(report.backup).read_bytes() == content
    assert ids(path) == []


def test_repair_of_a_bom_prefixed_session_keeps_its_id_and_cwd(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    write(path, [b"\xef\xbb\xbf" + HEADER, msg("e1", None), msg("e2", "e1")])
    with pytest.raises(ct.errors.InvalidHeader, match="byte order mark"):
        ct.Session.open(path, readonly=True)
    dry = ct.repair(path, dry_run=True)
    assert dry.changed and dry.fixed == [(1, "a UTF-8 byte order mark was removed")]
    report = ct.repair(path)
    assert report.quarantined == [] and report.backup is not None
    with ct.Session.open(path) as s:
        assert (s.id, s.header.cwd) == ("sid", "/w")
        assert [e.id for e in s.branch()] == ["e1", "e2"]
    assert path.read_bytes().startswith(HEADER + b"\n")


def test_repair_refuses_a_newer_format_rather_than_rewriting_it(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    newer = HEADER.replace(b'"version":1', b'"version":99')
    write(path, [newer, msg("e1", None)])
    before = path.read_bytes()
    for force in (False, True):
        with pytest.raises(ct.errors.InvalidHeader, match="upgrade contextree"):
            ct.repair(path, force=force)
    assert path.read_bytes() == before


# -- dry runs and backups ---------------------------------------------------------------------

def test_a_dry_run_needs_neither_write_access_nor_the_lock(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "s.jsonl"
    write(path, [*CHAIN, msg("e2", "e1")])  # a duplicate to report
    real_open = os.open

    def read_only_open(p: Any, flags: int, *args: Any, **kw: Any) -> int:
        if os.fspath(p) == str(path) and flags & (os.O_WRONLY | os.O_RDWR):
            raise PermissionError(13, "Permission denied", os.fspath(p))
        return real_open(p, flags, *args, **kw)

    def no_lock(fd: int, op: int) -> None:
        raise AssertionError("a dry run took a lock")

    monkeypatch.setattr(os, "open", read_only_open)
    monkeypatch.setattr(fcntl, "flock", no_lock)
    report = ct.repair(path, dry_run=True)
    assert [n for n, _ in report.quarantined] == [4]
    monkeypatch.undo()
    holder = subprocess.Popen(  # and while another process holds the writer's lock
        [sys.executable, "-c", "import sys, fcntl\nf = open(sys.argv[1])\n"
         "fcntl.flock(f, fcntl.LOCK_EX)\nprint('ready', flush=True)\nsys.stdin.read()",
         str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "ready\n"
        assert ct.repair(path, dry_run=True).changed
        with pytest.raises(ct.errors.SessionLocked):
            ct.repair(path)
    finally:
        holder.kill()
        holder.wait()


def test_backups_have_unique_names_and_are_whole_or_absent(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "s.jsonl"
    backups = []
    for _ in range(3):  # three repairs within the same second
        write(path, [*CHAIN, msg("e2", "e1")])
        report = ct.repair(path)
        assert report.backup is not None
        backups.append(report.backup)
    assert len(set(backups)) == 3
    assert all(Path(b).read_bytes() == b"".join(x + b"\n" for x in [*CHAIN, msg("e2", "e1")])
               for b in backups)
    assert all(Path(b).stat().st_mode & 0o777 == path.stat().st_mode & 0o777 for b in backups)
    # A crash while the backup is written leaves no backup that looks whole.
    write(path, [*CHAIN, msg("e2", "e1")])
    before = path.read_bytes()
    real_write = os.write

    def crash_midway(fd: int, data: Any) -> int:
        if len(data) > 100:
            real_write(fd, bytes(data)[:50])
            raise OSError(28, "No space left on device")
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", crash_midway)
    with pytest.raises(ct.errors.StorageFailure, match="backup"):
        ct.repair(path)
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert sorted(str(p) for p in tmp_path.glob("s.jsonl.bak-*")) == sorted(backups)
    assert list(tmp_path.glob(".*.tmp")) == []
