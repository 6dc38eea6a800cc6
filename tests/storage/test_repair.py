"""Corrupt session files: each case raises ``SessionError`` with its code and line, and
``repair`` quarantines what is bad (after a backup) so the file opens again."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import orjson
import pytest

import contextree as ct
from helpers import TS, raw_header
from helpers import raw_message as msg
from helpers import write_lines as write

HEADER = raw_header("/")
CHAIN = [msg("e1", None), msg("e2", "e1"), msg("e3", "e2"), msg("e4", "e3"), msg("e5", "e4")]


@dataclass
class Case:
    lines: list[bytes]
    code: str
    line: int | None
    kept: list[str]  # entry ids that survive repair
    quarantined: int  # lines repair moves to the quarantine file
    force: bool = False  # not a session at all: repair refuses it unless forced


def with_line(at: int, bad: bytes) -> list[bytes]:
    """The good chain with ``bad`` inserted so that it becomes file line ``at``."""
    body = list(CHAIN)
    body.insert(at - 2, bad)
    return [HEADER, *body]


CASES: dict[str, Case] = {
    "corrupt_json_in_the_middle": Case(
        with_line(3, b'{"type":"message","id":"zz","parent_'), "corrupt_line", 3,
        ["e1", "e2", "e3", "e4", "e5"], 1),
    "non_utf8_bytes": Case(
        # decided: invalid UTF-8 makes the line corrupt (it cannot be a valid JSON text)
        with_line(4, msg("zz", "e2", "ok")[:-10] + b"\xff\xfe\x80" + b'"}}'),
        "corrupt_line", 4, ["e1", "e2", "e3", "e4", "e5"], 1),
    "json_but_missing_field": Case(
        with_line(3, b'{"type":"message","id":"zz","parent_id":"e1","timestamp":"t"}'),
        "invalid_entry", 3, ["e1", "e2", "e3", "e4", "e5"], 1),
    "json_but_wrong_type": Case(
        with_line(5, orjson.dumps({"type": "label", "id": "zz", "parent_id": "e2",
                                   "timestamp": 7, "target_id": "e1", "label": "l"})),
        "invalid_entry", 5, ["e1", "e2", "e3", "e4", "e5"], 1),
    "json_but_not_an_object": Case(
        with_line(3, b'[1, 2, 3]'), "invalid_entry", 3, ["e1", "e2", "e3", "e4", "e5"], 1),
    "duplicate_id": Case(
        with_line(5, msg("e1", "e2", "impostor")), "duplicate_id", 5,
        ["e1", "e2", "e3", "e4", "e5"], 1),
    "exact_duplicate_line": Case(
        with_line(6, msg("e2", "e1")), "duplicate_id", 6, ["e1", "e2", "e3", "e4", "e5"], 1),
    "missing_parent": Case(
        # e3 points at a parent that is nowhere: it and its descendants e4, e5 go
        [HEADER, CHAIN[0], CHAIN[1], msg("e3", "ghost"), CHAIN[3], CHAIN[4]],
        "missing_parent", 4, ["e1", "e2"], 3),
    "parent_cycle_with_forward_references": Case(
        [HEADER, CHAIN[0], msg("x", "z"), msg("y", "x"), msg("z", "y"), CHAIN[1],
         msg("below", "y")],
        "cycle", 3, ["e1", "e2"], 4),
    "leaf_move_to_missing_entry": Case(
        [HEADER, *CHAIN[:3], orjson.dumps({"type": "leaf", "id": "lf", "parent_id": "e3",
                                           "timestamp": TS, "target_id": "ghost"}), CHAIN[3]],
        "missing_parent", 5, ["e1", "e2", "e3", "e4"], 1),
    "second_header": Case(
        with_line(4, HEADER), "invalid_session", 4, ["e1", "e2", "e3", "e4", "e5"], 1),
    "first_line_not_a_header": Case(
        list(CHAIN), "invalid_session", 1, ["e1", "e2", "e3", "e4", "e5"], 0),
    "not_json_at_all": Case(
        [b"hello, this is a text file", b"with two lines"], "invalid_session", 1, [], 2,
        force=True),
}


@pytest.mark.parametrize("name", list(CASES))
def test_corrupt_file_raises_with_code_and_line(tmp_path: Path, name: str) -> None:
    case = CASES[name]
    path = tmp_path / "s.jsonl"
    write(path, case.lines)
    for readonly in (True, False):
        with pytest.raises(ct.SessionError) as info:
            ct.Session.open(path, readonly=readonly)
        err = info.value
        assert err.code == case.code, str(err)
        assert err.line == case.line, str(err)
        assert err.path == str(path)
        assert str(err).startswith(f"{path}:{case.line}: ")
    # a failed writable open releases its lock
    with pytest.raises(ct.SessionError) as info:
        ct.Session.open(path)
    assert info.value.code != "locked"


@pytest.mark.parametrize("name", list(CASES))
def test_repair_quarantines_bad_lines_and_the_file_opens(tmp_path: Path, name: str) -> None:
    case = CASES[name]
    path = tmp_path / "s.jsonl"
    write(path, case.lines)
    original = path.read_bytes()
    if case.force:  # not a session: refused (dry run or not) unless forced, and untouched
        for dry_run in (True, False):
            with pytest.raises(ct.errors.InvalidHeader, match="--force"):
                ct.repair(path, dry_run=dry_run)
        assert path.read_bytes() == original
        assert sorted(p.name for p in tmp_path.iterdir()) == ["s.jsonl"]

    dry = ct.repair(path, dry_run=True, force=case.force)
    assert path.read_bytes() == original
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.jsonl"]
    assert dry.changed and dry.backup is None

    report = ct.repair(path, force=case.force)
    assert [n for n, _ in report.quarantined] == [n for n, _ in dry.quarantined]
    assert report.backup is not None and Path(report.backup).read_bytes() == original
    records = [orjson.loads(x) for x in Path(f"{path}.quarantine").read_bytes().splitlines()]
    real = [r for r in records if r["text"]]
    assert len(real) == case.quarantined
    assert all(r["reason"] for r in records)
    assert {r["text"].encode() for r in real if b"\xff" not in original} <= set(case.lines)
    # good lines are kept byte for byte, in order (after a new header if there was none)
    bad_lines = {n for n, _ in report.quarantined}
    expected = [x for n, x in enumerate(case.lines, start=1) if n not in bad_lines]
    kept_lines = path.read_bytes().splitlines()
    assert (kept_lines[1:] if 0 in bad_lines else kept_lines) == expected

    with ct.Session.open(path) as s:
        assert [e.id for e in s.storage.entries()] == case.kept
        assert s.stats().quarantined_lines == len(records)
        s.append_message(ct.Message.user("writable again"))
    assert not ct.repair(path).changed


def test_repair_names_the_reason_for_each_line(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    write(path, CASES["missing_parent"].lines)
    report = ct.repair(path)
    reasons = dict(report.quarantined)
    assert "'ghost' does not exist" in reasons[4]
    assert "ancestor" in reasons[5] and "ancestor" in reasons[6]
    write(path, CASES["parent_cycle_with_forward_references"].lines)
    reasons = dict(ct.repair(path).quarantined)
    assert all("cycle" in reasons[n] for n in (3, 4, 5))
    assert "cycle" in reasons[7] or "ancestor" in reasons[7]


def test_repair_of_a_healthy_file_changes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    write(path, [HEADER, *CHAIN])
    before = path.read_bytes()
    report = ct.repair(path)
    assert not report.changed and report.kept == 6 and report.backup is None
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.jsonl"]


def test_repair_of_an_empty_file_writes_a_header(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(b"")
    with pytest.raises(ct.SessionError) as info:
        ct.Session.open(path)
    assert info.value.code == "invalid_session"
    assert ct.repair(path, dry_run=True).changed
    assert path.read_bytes() == b""
    report = ct.repair(path)
    assert report.backup is not None
    with ct.Session.open(path) as s:
        assert len(s.storage) == 0
        s.append_message(ct.Message.user("a"))


def test_repair_refuses_a_session_open_for_writing(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    with ct.Session.create(path, cwd="/") as s:
        s.append_message(ct.Message.user("a"))
        with pytest.raises(ct.SessionError) as info:
            ct.repair(path)
        assert info.value.code == "locked"


def test_repair_of_missing_file_is_not_found(tmp_path: Path) -> None:
    with pytest.raises(ct.SessionError) as info:
        ct.repair(tmp_path / "nope.jsonl")
    assert info.value.code == "not_found"


def test_repair_leaves_no_lock_file_behind(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    write(path, CASES["duplicate_id"].lines)
    ct.repair(path)
    assert not Path(f"{path}.lock").exists()


def test_repair_of_a_torn_tail_quarantines_it(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(b"".join(x + b"\n" for x in [HEADER, *CHAIN]) + CHAIN[0][:20])
    report = ct.repair(path)
    assert [n for n, _ in report.quarantined] == [7]
    with ct.Session.open(path) as s:
        assert s.leaf_id == "e5"

