"""Retention over many sessions (``du``, ``prune``, ``archive``/``unarchive``), through the
CLI and the API, with the cases that break other tools' cleanups: forks that name their
parent's spills, sessions open for writing, files that are not sessions, crafted archives."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import zipfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

import contextree as ct
from contextree._overflow import OverflowStore
from contextree.entries import LabelEntry, MessageEntry, SessionHeader, new_id
from contextree.errors import InvalidArgument, SessionExists
from contextree.retention import archive, disk_usage, parse_age, plan_prune, prune, unarchive
from helpers import one_line_error, run, run_json

OLD = "2020-01-01T00:00:00.000Z"


def _store(tmp_path: Path) -> OverflowStore:
    return OverflowStore(tmp_path / "store", gc_interval=None)


def _session(path: Path, store: OverflowStore, *, stamp: str = OLD, spill: bool = True,
             name: str | None = None, label: bool = False) -> tuple[str, Path | None]:
    """A session whose entries are dated ``stamp``, with one spilled tool result."""
    with ct.Session.create(path) as s:
        saved = (store.save("the whole output\n" * 50, session_id=s.id, label="shell")
                 if spill else None)
        meta = ({"truncation": {"total_lines": 50, "total_bytes": 850, "shown_lines": 1,
                                "saved_path": str(saved)}} if saved else None)
        s.append_message(ct.Message.user("run it"))
        s.append_message(ct.Message.tool("cut", tool_call_id="c", name="shell", meta=meta))
        if name:
            s.set_name(name)
        if label:
            s.append(LabelEntry(new_id(), s.leaf_id, stamp, target_id=s.leaf_id or "",
                                label="keep"))
        sid = s.id
    _redate(path, stamp)
    return sid, saved


def _redate(path: Path, stamp: str) -> None:
    lines = path.read_bytes().splitlines(keepends=True)
    out = []
    for raw in lines:
        obj = json.loads(raw)
        for key in ("timestamp", "created_at"):
            if key in obj:
                obj[key] = stamp
        out.append(json.dumps(obj, separators=(",", ":")).encode() + b"\n")
    path.write_bytes(b"".join(out))


def test_parse_age() -> None:
    assert parse_age("30d") == timedelta(days=30)
    assert parse_age("12h") == timedelta(hours=12)
    assert parse_age("2w") == timedelta(weeks=2)
    assert parse_age("7") == timedelta(days=7)
    for bad in ("soon", "-3d", "nan", ""):
        with pytest.raises(InvalidArgument, match="30d"):
            parse_age(bad)


def test_du_splits_session_spills_and_sidecars(tmp_path: Path) -> None:
    store = _store(tmp_path)
    where = tmp_path / "sessions"
    where.mkdir()
    sid, saved = _session(where / "a.jsonl", store)
    (where / "a.jsonl.quarantine").write_text("bad line\n")
    assert saved is not None
    report = disk_usage(where, store)
    (used,) = report.sessions
    assert used.session.id == sid
    assert used.session_bytes == (where / "a.jsonl").stat().st_size
    assert used.spill_bytes == saved.stat().st_size and used.spill_files == 1
    assert used.sidecar_bytes == len("bad line\n")
    assert report.totals["total"] == used.total + report.catalog_bytes  # + the search index
    data = run_json("du", where, "--store", tmp_path / "store")
    assert data["totals"]["spills"] == saved.stat().st_size
    assert data["sessions"][0]["id"] == sid
    text = run("du", where, "--store", tmp_path / "store").stdout
    assert "(total)" in text and "1 sessions" in text


def test_prune_deletes_old_sessions_with_their_own_spills_and_keeps_the_rest(
        tmp_path: Path) -> None:
    store = _store(tmp_path)
    where = tmp_path / "sessions"
    where.mkdir()
    _, old_spill = _session(where / "old.jsonl", store)
    _, new_spill = _session(where / "new.jsonl", store, stamp=datetime.now(UTC).isoformat())
    _session(where / "named.jsonl", store, name="keep me")
    _session(where / "labeled.jsonl", store, label=True)
    (where / "notes.txt").write_text("not a session")
    (where / "foreign.jsonl").write_text('{"type":"user"}\n')

    dry = run_json("prune", where, "--older-than", "30d", "--keep-named", "--keep-labeled",
                   "--dry-run", "--store", tmp_path / "store")
    assert dry["would_delete"] == [str(where / "old.jsonl")]
    assert set(dry["kept"].values()) == {"named", "labeled"}
    assert (where / "old.jsonl").exists()  # a dry run deletes nothing

    done = run_json("prune", where, "--older-than", "30d", "--keep-named", "--keep-labeled",
                    "--yes", "--store", tmp_path / "store")
    assert done["deleted"] == [str(where / "old.jsonl")]
    assert done["spills_removed"] == [str(old_spill)]
    assert not (where / "old.jsonl").exists() and old_spill is not None
    assert not old_spill.exists()
    assert new_spill is not None and new_spill.exists()
    assert {p.name for p in where.iterdir()} == {"new.jsonl", "named.jsonl",
                                                 "labeled.jsonl", "notes.txt", "foreign.jsonl",
                                                 ".contextree"}  # the listing's cache stays


def test_prune_keeps_a_spill_that_a_fork_that_stays_still_names(tmp_path: Path) -> None:
    store = _store(tmp_path)
    where = tmp_path / "sessions"
    where.mkdir()
    _, saved = _session(where / "parent.jsonl", store)
    with ct.Session.open(where / "parent.jsonl", readonly=True) as parent, \
            parent.fork(where / "fork.jsonl") as fork:  # active now: it stays
        fork.append_message(ct.Message.user("and on"))
    assert saved is not None
    plan = plan_prune(where, older_than=timedelta(days=30))
    assert [i.target for i in plan.delete] == [str(where / "parent.jsonl")]
    report = prune(plan, store)
    assert saved.exists() and report.spills_kept == [str(saved)]
    with ct.Session.open(where / "fork.jsonl", readonly=True) as fork:
        (tool,) = [e.message for e in fork.branch()
                   if isinstance(e, MessageEntry) and e.message.role == "tool"]
        assert tool.meta is not None and Path(tool.meta["truncation"]["saved_path"]).exists()


def test_prune_skips_a_session_open_for_writing(tmp_path: Path) -> None:
    store = _store(tmp_path)
    where = tmp_path / "sessions"
    where.mkdir()
    _session(where / "busy.jsonl", store)
    writer = ct.Session.open(where / "busy.jsonl")
    try:
        report = prune(plan_prune(where, older_than=timedelta(days=1)), store)
        assert report.deleted == [] and str(where / "busy.jsonl") in report.skipped
        assert (where / "busy.jsonl").exists()
    finally:
        writer.close()


def test_prune_never_follows_a_link_out_of_where(tmp_path: Path) -> None:
    store = _store(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    _session(outside / "precious.jsonl", store)
    where = tmp_path / "sessions"
    where.mkdir()
    (where / "link.jsonl").symlink_to(outside / "precious.jsonl")
    (where / "dirlink").symlink_to(outside)
    done = run_json("prune", where, "--older-than", "1d", "--yes", "--store",
                    tmp_path / "store")
    assert done.get("deleted", done.get("would_delete")) == []
    assert (outside / "precious.jsonl").exists()


def test_prune_bad_age_is_a_usage_error(tmp_path: Path) -> None:
    one_line_error(run("prune", tmp_path, "--older-than", "soon", code=2), "30d")


def test_archive_and_unarchive_restore_every_byte(tmp_path: Path) -> None:
    store = _store(tmp_path)
    where = tmp_path / "sessions"
    where.mkdir()
    path = where / "chat.jsonl"
    sid, saved = _session(path, store)
    (where / "chat.jsonl.quarantine").write_bytes(b"\xff torn\n")
    assert saved is not None
    before = {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in
              (path, where / "chat.jsonl.quarantine", saved)}
    result = run_json("archive", path, "--store", tmp_path / "store")
    archived = Path(result["archive"])
    assert archived.name == "chat.jsonl" + ".archive.zip" and archived.exists()
    assert not path.exists() and not saved.exists()
    assert zipfile.ZipFile(archived).testzip() is None
    assert run_json("ls", where) == []  # an archive is not a live session

    restored = run_json("unarchive", archived, "--store", tmp_path / "store")
    assert restored["session_id"] == sid and not archived.exists()
    for p, (data, mtime) in before.items():
        assert p.read_bytes() == data and p.stat().st_mtime_ns == mtime
    with ct.Session.open(path) as s:  # a working session again
        s.append_message(ct.Message.user("back"))


def test_unarchive_never_overwrites_and_refuses_a_damaged_or_crafted_archive(
        tmp_path: Path) -> None:
    store = _store(tmp_path)
    path = tmp_path / "s.jsonl"
    _session(path, store)
    done = archive(path, store=store)
    path.write_text("someone made a new file here")
    with pytest.raises(SessionExists):
        unarchive(done.path, store=store)
    assert path.read_text() == "someone made a new file here" and done.path.exists()
    path.unlink()

    # A crafted archive that points its files at /etc and ../.. only ever writes base names
    # beside the archive or in the store's folder of the session.
    crafted = tmp_path / "crafted" / "x.archive.zip"
    crafted.parent.mkdir()
    body = b'{"type":"session","id":"evil","created_at":"2020-01-01T00:00:00Z"}\n'
    manifest = {"format": "contextree-archive/1", "session_id": "../../evil", "files": {
        "session.jsonl": {"path": "/etc/../../tmp/pwned.jsonl", "size": len(body),
                          "sha256": hashlib.sha256(body).hexdigest(), "mode": 0o4777,
                          "mtime_ns": 0}}}
    with zipfile.ZipFile(crafted, "w") as z:
        z.writestr("session.jsonl", body)
        z.writestr("manifest.json", json.dumps(manifest))
    out = unarchive(crafted, store=store)
    assert Path(out.files["session.jsonl"]) == crafted.parent / "pwned.jsonl"
    assert not Path("/tmp/pwned.jsonl").exists()
    assert os.stat(crafted.parent / "pwned.jsonl").st_mode & 0o7777 == 0o700  # owner bits only

    damaged = tmp_path / "damaged.archive.zip"
    shutil.copy(done.path, damaged)
    with pytest.warns(UserWarning, match="Duplicate"), zipfile.ZipFile(damaged, "a") as z:
        # a second, different manifest wins on read
        z.writestr("manifest.json", json.dumps({"format": "other"}))
    with pytest.raises(InvalidArgument, match="not a contextree archive"):
        unarchive(damaged, store=store)
    (tmp_path / "junk.archive.zip").write_bytes(b"not a zip")
    one_line_error(run("unarchive", tmp_path / "junk.archive.zip", code=1),
                   "not a contextree archive")


def test_archive_refuses_a_session_open_for_writing(tmp_path: Path) -> None:
    store = _store(tmp_path)
    path = tmp_path / "s.jsonl"
    _session(path, store)
    writer = ct.Session.open(path)
    try:
        from contextree.errors import SessionLocked

        with pytest.raises(SessionLocked):
            archive(path, store=store)
        assert path.exists() and not (tmp_path / "s.jsonl.archive.zip").exists()
    finally:
        writer.close()


def test_prune_on_postgres_deletes_only_old_sessions(tmp_path: Path) -> None:
    from conformance import fresh_schema_url
    from contextree.storage import open_catalog
    from contextree.storage.postgres import create_schema
    from helpers import as_url, require_postgres

    conninfo, drop = fresh_schema_url(require_postgres())
    try:
        create_schema(conninfo)
        url = as_url(conninfo)
        catalog = open_catalog(url)
        header = SessionHeader(id="old-one", created_at=OLD)
        catalog.create(header, [MessageEntry("e1", None, OLD,
                                             message=ct.Message.user("ancient"))]).close()
        with ct.Session.create(url + "#new-one") as s:
            s.append_message(ct.Message.user("fresh"))
        (tmp_path / "store").mkdir()
        done = run_json("prune", url, "--older-than", "30d", "--yes", "--store",
                        tmp_path / "store")
        assert [t.rsplit("#", 1)[-1] for t in done["deleted"]] == ["old-one"]
        assert [i.id for i in catalog.list().sessions] == ["new-one"]
        assert "new-one" in json.dumps(run_json("du", url, "--store", tmp_path / "store"))
    finally:
        drop()


def test_a_session_written_to_after_it_was_chosen_is_kept(tmp_path: Path) -> None:
    store = _store(tmp_path)
    where = tmp_path / "sessions"
    where.mkdir()
    _session(where / "revived.jsonl", store)
    plan = plan_prune(where, older_than=timedelta(days=30))
    with ct.Session.open(where / "revived.jsonl") as s:  # the user comes back meanwhile
        s.append_message(ct.Message.user("still here"))
    report = prune(plan, store)
    assert report.deleted == [] and "changed" in report.skipped[str(where / "revived.jsonl")]
    assert (where / "revived.jsonl").exists()


def test_postgres_sweeps_from_two_machines_at_once_and_a_session_that_came_back(
        tmp_path: Path) -> None:
    from concurrent.futures import ThreadPoolExecutor

    from conformance import fresh_schema_url
    from contextree.entries import MessageEntry
    from contextree.storage import open_catalog
    from contextree.storage.postgres import create_schema
    from helpers import as_url, require_postgres

    conninfo, drop = fresh_schema_url(require_postgres())
    try:
        create_schema(conninfo)
        url = as_url(conninfo)
        catalog = open_catalog(url)
        for i in range(12):
            catalog.create(SessionHeader(id=f"old-{i:02d}", created_at=OLD),
                           [MessageEntry("e1", None, OLD,
                                         message=ct.Message.user("ancient"))]).close()
        plans = [plan_prune(url, older_than=timedelta(days=30)) for _ in range(2)]
        with ct.Session.open(url + "#old-05") as s:  # written to after both plans
            s.append_message(ct.Message.user("back again"))
        with ThreadPoolExecutor(2) as pool:
            reports = list(pool.map(lambda p: prune(p, _store(tmp_path)), plans))
        deleted = [i.id for r in reports for i in r.deleted]
        assert sorted(deleted) == sorted(f"old-{i:02d}" for i in range(12) if i != 5)
        assert len(deleted) == len(set(deleted))  # each deleted by one sweep only
        assert [i.id for i in catalog.list().sessions] == ["old-05"]
    finally:
        drop()


def test_archive_a_database_session_and_restore_it_into_a_database(tmp_path: Path) -> None:
    from conformance import fresh_schema_url
    from contextree.storage import open_catalog
    from contextree.storage.postgres import create_schema
    from helpers import as_url, require_postgres

    conninfo, drop = fresh_schema_url(require_postgres())
    try:
        create_schema(conninfo)
        url = as_url(conninfo)
        store = _store(tmp_path)
        with ct.Session.create(url + "#db-one") as s:
            s.append_message(ct.Message.user("kept in the archive"))
            s.set_name("db session")
            saved = store.save("spilled", session_id=s.id, label="shell")
            lines_before = [e for e in s.entries()]
        out = tmp_path / "db-one.archive.zip"
        done = run_json("archive", url + "#db-one", "-o", out, "--store", tmp_path / "store")
        assert Path(done["archive"]) == out and not saved.exists()
        assert open_catalog(url).list().sessions == []
        one_line_error(run("unarchive", out, "--store", tmp_path / "store", code=1),
                       "--into")
        back = run_json("unarchive", out, "--into", url, "--store", tmp_path / "store")
        assert back["session_id"] == "db-one" and saved.read_text() == "spilled"
        with ct.Session.open(url + "#db-one") as again:
            assert list(again.entries()) == lines_before and again.name == "db session"
    finally:
        drop()


def test_an_archived_session_is_still_found_by_search_and_says_so(tmp_path: Path) -> None:
    """``search`` reads the session inside an archive: its hits say ``archived`` and name
    the archive; once unarchived the same entries are found in the session file again.
    Archive-named files that are not archives are reported, never a failed search."""
    store = _store(tmp_path)
    where = tmp_path / "sessions"
    where.mkdir()
    path = where / "chat.jsonl"
    with ct.Session.create(path) as s:
        old = s.append_message(ct.Message.user("ECONNREFUSED while the server was down"))
    with ct.Session.create(where / "live.jsonl") as live:
        fresh = live.append_message(ct.Message.user("ECONNREFUSED again today"))
    assert {h["entry_id"]: h["archived"] for h in run_json("search", "econnrefused", where)
            } == {old: False, fresh: False}

    done = archive(path, store=store)
    assert not path.exists()
    rows = {h["entry_id"]: h for h in run_json("search", "econnrefused", where)}
    assert rows[old]["archived"] is True and rows[old]["path"] == str(done.path)
    assert rows[fresh]["archived"] is False
    start, end = rows[old]["marks"][0]
    assert rows[old]["snippet"][start:end] == "ECONNREFUSED"
    text = run("search", "econnrefused", where).stdout
    assert "chat.jsonl.archive.zip" in text and "[on branch, archived]" in text
    hits = ct.search(where, "server down", on_branch=True)
    assert [(h.entry_id, h.archived, h.target) for h in hits] == [(old, True, str(done.path))]
    from contextree.tools import session_search_tool

    tool = session_search_tool(where)
    assert "[on branch, archived]" in tool.run({"query": "server"}).content

    (where / "junk.archive.zip").write_bytes(b"not a zip")
    with zipfile.ZipFile(where / "other.archive.zip", "w") as z:
        z.writestr("readme.txt", "an archive of something else")
    damaged = where / "damaged.archive.zip"
    data = bytearray(done.path.read_bytes())
    member = data.find(b"session.jsonl") + 40  # inside the compressed session
    data[member:member + 16] = b"\x00" * 16
    damaged.write_bytes(bytes(data))
    found = ct.search(where, "econnrefused")
    assert {h.entry_id for h in found} >= {old, fresh}
    reasons = {Path(u.where).name: u.reason for u in found.unlisted}
    assert "not a readable zip" in reasons["junk.archive.zip"]
    assert "without session.jsonl" in reasons["other.archive.zip"]
    assert "damaged" in reasons["damaged.archive.zip"]  # its compressed bytes zeroed
    assert not any(h.target == str(damaged) for h in found)
    damaged.unlink()
    (where / "junk.archive.zip").unlink()
    (where / "other.archive.zip").unlink()

    unarchive(done.path, store=store)
    assert {h["entry_id"]: (h["archived"], Path(h["path"]).name)
            for h in run_json("search", "econnrefused", where)} == {
        old: (False, "chat.jsonl"), fresh: (False, "live.jsonl")}


def test_the_index_a_listing_leaves_is_counted_dropped_and_pruned_with_its_sessions(
        tmp_path: Path) -> None:
    """``ls`` keeps its cache in ``<WHERE>/.contextree`` (with the search index): ``du``
    counts it apart as a cache, ``index --drop`` deletes it, ``prune`` takes the deleted
    sessions out of it and deletes it with the last session (nothing else there goes)."""
    store = _store(tmp_path)
    where = tmp_path / "sessions"
    where.mkdir()
    old_sid, _ = _session(where / "old.jsonl", store)
    _session(where / "older.jsonl", store)
    run_json("ls", where)
    hidden = where / ".contextree"
    assert (hidden / "index.sqlite").is_file()
    t = run_json("du", where, "--store", tmp_path / "store")["totals"]
    assert t["index"] == sum(p.stat().st_size for p in hidden.iterdir()) > 0
    assert "a cache: `contextree index --drop` deletes it" in run(
        "du", where, "--store", tmp_path / "store").stdout

    assert "deleted the search index" in run("index", where, "--drop").stdout
    assert not hidden.exists()
    assert run("index", where, "--drop").stdout.startswith(f"{where} has no search index")
    one_line_error(run("index", where, "--drop", "--rebuild", code=2), "choose one")

    # prune of some: the index forgets them (their words are not found, nothing to refresh)
    with ct.Session.create(where / "new.jsonl") as s:
        s.append_message(ct.Message.user("run it again, recently"))
    assert len(run_json("search", "run", where)) == 3
    run("prune", where, "--older-than", "30d", "--yes", "--store", tmp_path / "store")
    from contextree.storage._search_index import SearchIndex

    with SearchIndex.open(where) as index:
        assert index.stats()["sessions"] == 1  # before any refresh
        assert [h.target for h in index.search("run")] == [str(where / "new.jsonl")]
    assert [r["id"] for r in run_json("ls", where)] != [old_sid]

    # prune of all: the cache goes too; a file of the user's in .contextree stays
    (hidden / "notes.txt").write_text("mine")
    _redate(where / "new.jsonl", OLD)
    run("prune", where, "--older-than", "30d", "--yes", "--store", tmp_path / "store")
    assert sorted(p.name for p in hidden.iterdir()) == ["notes.txt"]
    (hidden / "notes.txt").unlink()
    run("ls", where)
    run("prune", where, "--older-than", "30d", "--yes", "--store", tmp_path / "store")
    assert hidden.is_dir()  # nothing was deleted: nothing tidied either


def test_index_drop_refuses_a_database_and_what_is_not_its_file(tmp_path: Path) -> None:
    hidden = tmp_path / ".contextree"
    hidden.mkdir()
    os.mkfifo(hidden / "index.sqlite")
    one_line_error(run("index", tmp_path, "--drop", code=2), "not a regular file")
    assert (hidden / "index.sqlite").exists()
    one_line_error(run("index", "postgresql://nobody@127.0.0.1:1/db", "--drop", code=2),
                   "--no-trigrams")
