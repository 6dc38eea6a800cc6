"""Retention against what breaks it: spills an archived or live fork still names (``prune``,
``archive``), archives that are damaged or crafted (a member that inflates past its
manifest, places that collide, metadata out of range, flipped bytes, absent members), and
ages beyond the calendar. A failing command writes nothing and says so in one line."""

from __future__ import annotations

import hashlib
import json
import tracemalloc
import zipfile
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

import contextree as ct
from contextree._overflow import OverflowStore
from contextree._spills import referenced_spills
from contextree.errors import InvalidArgument, SessionExists
from contextree.retention import archive, parse_age, plan_prune, prune, unarchive
from helpers import one_line_error, run
from test_retention import OLD, _redate, _session

HEADER = (b'{"type":"session","id":"evil-1","created_at":"2026-12-03T15:20:01.071Z",'
          b'"version":1,"cwd":"/x","parent_session":null,"metadata":null}\n')


def _store(tmp_path: Path) -> OverflowStore:
    (tmp_path / "store").mkdir(exist_ok=True)  # ``--store`` names one that exists
    return OverflowStore(tmp_path / "store", gc_interval=None)


def _named(path: Path) -> list[Path]:
    """The spills the session file names (its tool results' ``saved_path``)."""
    return sorted(Path(p) for p in referenced_spills(path))


def _spill_into(path: Path, store: OverflowStore, text: str) -> Path:
    """Append to the session at ``path`` a tool result whose whole output is spilled."""
    with ct.Session.open(path) as s:
        saved = store.save(text, session_id=s.id, label="shell")
        s.append_message(ct.Message.tool("cut", tool_call_id="d", name="shell", meta={
            "truncation": {"total_lines": 1, "total_bytes": len(text), "shown_lines": 1,
                           "saved_path": str(saved)}}))
    return saved


def _meta(path: str, data: bytes, **extra: Any) -> dict[str, Any]:
    return {"path": path, "mode": 0o600, "mtime_ns": 1_700_000_000_000_000_000,
            "size": len(data), "sha256": hashlib.sha256(data).hexdigest(), **extra}


def _crafted(path: Path, members: dict[str, bytes], files: dict[str, Any],
             compression: int = zipfile.ZIP_STORED) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w", compression=compression) as z:
        for name, data in members.items():
            z.writestr(name, data)
        z.writestr("manifest.json", json.dumps({"format": "contextree-archive/1",
                                                "session_id": "evil-1", "origin": "file",
                                                "files": files}))
    return path


def _bomb(path: Path, inflated: int) -> Path:
    """An archive whose session member inflates to ``inflated`` bytes of spaces after a
    header, while its manifest gives it the size of the header alone."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as z:
        with z.open("session.jsonl", "w") as f:
            f.write(HEADER)
            chunk = b" " * (1 << 20)
            for _ in range(inflated >> 20):
                f.write(chunk)
        z.writestr("manifest.json", json.dumps({
            "format": "contextree-archive/1", "session_id": "evil-1", "origin": "file",
            "files": {"session.jsonl": _meta("s.jsonl", HEADER)}}))
    return path


# -- A, B: spills another session (live or archived) names are kept ------------------------

def test_prune_keeps_the_spills_an_archived_fork_names(tmp_path: Path) -> None:
    store = _store(tmp_path)
    where = tmp_path / "sessions"
    where.mkdir()
    _, saved = _session(where / "parent.jsonl", store)
    assert saved is not None
    with ct.Session.open(where / "parent.jsonl", readonly=True) as parent:
        parent.fork(where / "fork.jsonl").close()
    packed = archive(where / "fork.jsonl", store=store)  # the fork: archived, it stays
    _redate(where / "parent.jsonl", OLD)
    plan = plan_prune(where, older_than=timedelta(days=30))
    assert [i.target for i in plan.delete] == [str(where / "parent.jsonl")]
    report = prune(plan, store)
    assert not (where / "parent.jsonl").exists() and report.spills_kept == [str(saved)]
    assert saved.exists()
    unarchive(packed.path, store=store)
    assert _named(where / "fork.jsonl") == [saved] and saved.exists()


def test_archive_of_a_parent_keeps_the_spills_its_live_fork_names(tmp_path: Path) -> None:
    store = _store(tmp_path)
    where = tmp_path / "sessions"
    where.mkdir()
    path = where / "parent.jsonl"
    _, shared = _session(path, store)
    assert shared is not None
    with ct.Session.open(path, readonly=True) as parent:
        parent.fork(where / "fork.jsonl").close()
    own = _spill_into(path, store, "only the parent names this\n")  # after the fork
    before = {p: p.read_bytes() for p in (path, shared, own)}

    done = run("archive", path, "--store", tmp_path / "store")
    packed = path.with_name(path.name + ".archive.zip")
    assert shared.exists() and _named(where / "fork.jsonl") == [shared]
    assert not path.exists() and not own.exists()  # the parent's own output went into it
    assert "kept 1 saved tool outputs in place" in done.stdout
    names = zipfile.ZipFile(packed).namelist()
    assert sum(n.startswith("spills/") for n in names) == 2  # both are in the archive

    # restored: the kept spill (the same bytes) is left as it is, the rest is put back
    back = unarchive(packed, store=store)
    assert {Path(p) for p in back.files.values()} == {path, shared, own}
    assert {p: p.read_bytes() for p in before} == before
    # a different file where the kept one was is never overwritten
    again = archive(path, store=store)
    shared.write_text("someone else's")
    with pytest.raises(SessionExists):
        unarchive(again.path, store=store)
    assert again.path.exists() and not path.exists()


# -- C: a member that inflates past its manifest -------------------------------------------

def test_unarchive_refuses_a_member_bigger_than_its_manifest_in_bounded_memory(
        tmp_path: Path) -> None:
    store = _store(tmp_path)
    bomb = _bomb(tmp_path / "bomb" / "s.jsonl.archive.zip", 64 << 20)
    assert bomb.stat().st_size < 1 << 20
    tracemalloc.start()
    try:
        with pytest.raises(InvalidArgument, match="inflate to .* where its manifest says "
                           f"{len(HEADER)}; the archive is damaged, nothing was restored"):
            unarchive(bomb, store=store)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 << 20, peak
    assert sorted(p.name for p in bomb.parent.iterdir()) == ["s.jsonl.archive.zip"]
    one_line_error(run("unarchive", bomb, "--store", tmp_path / "store", code=1),
                   "the archive is damaged, nothing was restored")


def test_unarchive_refuses_a_member_over_the_cap_whatever_its_manifest_says(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import contextree.storage._archives as archives

    monkeypatch.setattr(archives, "MAX_MEMBER_BYTES", len(HEADER) - 1)
    crafted = _crafted(tmp_path / "a" / "s.jsonl.archive.zip", {"session.jsonl": HEADER},
                       {"session.jsonl": _meta("s.jsonl", HEADER)})
    with pytest.raises(InvalidArgument, match="no size this version reads"):
        unarchive(crafted, store=_store(tmp_path))
    assert not (crafted.parent / "s.jsonl").exists()


def test_search_reports_and_skips_an_archive_that_inflates_past_its_manifest(
        tmp_path: Path) -> None:
    where = tmp_path / "sessions"
    with_hello = where / "live.jsonl"
    where.mkdir()
    with ct.Session.create(with_hello) as s:
        s.append_message(ct.Message.user("hello there"))
    bomb = _bomb(where / "s.jsonl.archive.zip", 64 << 20)
    tracemalloc.start()
    try:
        found = ct.search(where, "hello")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 32 << 20, peak
    assert [h.target for h in found] == [str(with_hello)]
    reasons = {u.where: u.reason for u in found.unlisted}
    assert "damaged" in reasons[str(bomb)] and "manifest says" in reasons[str(bomb)]
    # prune reads what archives name in bounded memory too, and deletes none of them
    report = prune(plan_prune(where, older_than=timedelta(days=0)), _store(tmp_path))
    assert bomb.exists() and [i.target for i in report.deleted] == [str(with_hello)]


# -- D: a failing unarchive writes nothing --------------------------------------------------

def test_unarchive_refuses_colliding_places_and_bad_times_before_writing(
        tmp_path: Path) -> None:
    store = _store(tmp_path)
    cases = {
        "same_place": ({"session.jsonl": HEADER, "quarantine": b"q\n"},
                       {"session.jsonl": _meta("/p/s.jsonl", HEADER),
                        "quarantine": _meta("/q/s.jsonl", b"q\n")}, "would both be restored"),
        "two_spills": ({"session.jsonl": HEADER, "spills/1": b"a", "spills/2": b"b"},
                       {"session.jsonl": _meta("s.jsonl", HEADER),
                        "spills/1": _meta("/x/out.txt", b"a"),
                        "spills/2": _meta("/y/out.txt", b"b")}, "would both be restored"),
        "huge_mtime": ({"session.jsonl": HEADER},
                       {"session.jsonl": _meta("s.jsonl", HEADER, mtime_ns=10**30)},
                       "modification time out of range"),
        "text_mode": ({"session.jsonl": HEADER},
                      {"session.jsonl": _meta("s.jsonl", HEADER, mode="rwx")}, "a mode"),
    }
    for name, (members, files, needle) in cases.items():
        crafted = _crafted(tmp_path / name / "s.jsonl.archive.zip", members, files)
        one_line_error(run("unarchive", crafted, "--store", tmp_path / "store", code=1),
                       needle, "nothing was restored")
        assert sorted(p.name for p in crafted.parent.iterdir()) == ["s.jsonl.archive.zip"]
        with pytest.raises(InvalidArgument, match=needle):  # a retry: refused the same way
            unarchive(crafted, store=store)
    assert list((tmp_path / "store").iterdir()) == []


def test_unarchive_deletes_what_it_wrote_when_a_later_file_fails(tmp_path: Path) -> None:
    store = _store(tmp_path)
    path = tmp_path / "s.jsonl"
    _, saved = _session(path, store)
    assert saved is not None
    before = path.read_bytes()
    packed = archive(path, store=store)
    assert not saved.parent.exists()
    saved.parent.write_text("a file where the folder of the session's spills goes")
    with pytest.raises(OSError):
        unarchive(packed.path, store=store)
    assert not path.exists() and packed.path.exists()  # the session file is gone again
    saved.parent.unlink()
    unarchive(packed.path, store=store)  # the retry is not refused
    assert path.read_bytes() == before and saved.exists()


# -- E: damaged archives are a one-line error -----------------------------------------------

def test_a_damaged_archive_is_a_one_line_error_and_restores_nothing(tmp_path: Path) -> None:
    store = _store(tmp_path)
    path = tmp_path / "real" / "s.jsonl"
    path.parent.mkdir()
    with ct.Session.create(path) as s:
        for i in range(200):
            s.append_message(ct.Message.user(f"message number {i} " + "lorem ipsum " * 20))
    packed = archive(path, store=store).path
    with zipfile.ZipFile(packed) as z:
        info = z.getinfo("session.jsonl")
    raw = bytearray(packed.read_bytes())
    start = info.header_offset + 30 + len(info.filename.encode()) + len(info.extra)
    raw[start + info.compress_size // 2] ^= 0xFF  # one byte flipped in the compressed data
    packed.write_bytes(bytes(raw))
    one_line_error(run("unarchive", packed, "--store", tmp_path / "store", code=1),
                   "the archive is damaged, nothing was restored")
    assert sorted(p.name for p in path.parent.iterdir()) == ["s.jsonl.archive.zip"]

    absent = _crafted(tmp_path / "absent" / "x.jsonl.archive.zip", {}, {
        "session.jsonl": _meta("x.jsonl", HEADER)})
    one_line_error(run("unarchive", absent, "--store", tmp_path / "store", code=1),
                   "no session.jsonl", "the archive is damaged, nothing was restored")
    no_size = _crafted(tmp_path / "nosize" / "x.jsonl.archive.zip", {}, {
        "session.jsonl": {"path": "x.jsonl", "sha256": "0"}})
    one_line_error(run("unarchive", no_size, "--store", tmp_path / "store", code=1),
                   "the archive is damaged, nothing was restored")
    not_json = tmp_path / "notjson" / "x.jsonl.archive.zip"
    not_json.parent.mkdir()
    with zipfile.ZipFile(not_json, "w") as z:
        z.writestr("session.jsonl", HEADER)
        z.writestr("manifest.json", b"{not json")
    one_line_error(run("unarchive", not_json, "--store", tmp_path / "store", code=1),
                   "the archive is damaged, nothing was restored")
    for case in ("absent", "nosize", "notjson"):
        assert [p.name for p in (tmp_path / case).iterdir()] == ["x.jsonl.archive.zip"]


# -- F: ages beyond the calendar ------------------------------------------------------------

def test_prune_age_beyond_the_calendar_is_a_usage_error(tmp_path: Path) -> None:
    for age in ("inf", "1e300d", "1000000d", "99999999w"):
        one_line_error(run("prune", tmp_path, "--older-than", age, "--dry-run", code=2),
                       repr(age))
        with pytest.raises(InvalidArgument):
            parse_age(age)
    assert parse_age("36500d") == timedelta(days=36500)
    with pytest.raises(InvalidArgument, match="outside the calendar"):
        plan_prune(tmp_path, older_than=timedelta.max)
