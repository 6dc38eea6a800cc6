"""Search over a directory of sessions: the index beside them, through ``contextree.search``.

What is found (words, identifiers, sha prefixes, phrases, off-branch and compacted entries),
the filters, the incremental refresh, and an index that is a cache: corrupt, locked,
unwritable, or stale, it is rebuilt or bypassed with a note and never stands in the way of a
session or of a writer.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from pathlib import Path

import orjson
import pytest

import contextree as ct
from contextree import Message, Session, ToolCall
from contextree.entries import SessionHeader, encode_line, now
from contextree.errors import InvalidArgument
from contextree.storage import MemoryCatalog, SearchFilters, open_catalog
from contextree.storage._search_index import INDEX_DIR, SearchIndex, index_path


def _session(root: Path, name: str = "a", *, cwd: str = "/proj") -> Session:
    return Session.create(root / f"{name}.jsonl", cwd=cwd)


def _texts(hits: list[ct.SearchHit]) -> list[str]:
    return [h.snippet for h in hits]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    with _session(tmp_path) as s:
        s.append_message(Message.user("please run test_parse_header; it fails with "
                                      "ECONNREFUSED on port 5432"))
        s.append_message(Message.assistant("commit 3f9a2b1c4d fixes the header parser",
                                           model="model-a"))
    with _session(tmp_path, "b", cwd="/elsewhere") as s:
        s.append_message(Message.user("the weather is nice today"))
        s.append_message(Message.assistant("", tool_calls=[ToolCall(
            id="c1", name="shell", arguments={"command": "pytest -k test_parse_header"})],
            model="model-b"))
        s.append_message(Message(role="tool", content="1 passed", tool_call_id="c1",
                                 name="shell"))
    return tmp_path


def test_words_identifiers_sha_prefixes_and_phrases_are_found(project: Path) -> None:
    def found(query: str) -> set[str]:
        return {h.snippet for h in ct.search(project, query)}

    assert found("ECONNREFUSED") == found("econnrefused") != set()
    ids = found("test_parse_header")
    assert len(ids) == 2 and all("test_parse_header" in t for t in ids)
    assert found("3f9a2") == {"commit 3f9a2b1c4d fixes the header parser"}
    assert found('"header parser"') == {"commit 3f9a2b1c4d fixes the header parser"}
    assert found('"parser header"') == set()  # a phrase keeps its order
    assert found("weather nice") == {"the weather is nice today"}
    assert found("weath") == set() and found("weath*") == {"the weather is nice today"}
    assert found("econn*") == found("ECONNREFUSED")
    assert found("weather ECONNREFUSED") == set()  # every term is required
    assert found("zzzunknown") == set()


def test_every_hit_says_where_it_is_and_marks_the_match(project: Path) -> None:
    hits = ct.search(project, "ECONNREFUSED")
    assert len(hits) == 1
    hit = hits[0]
    assert hit.target == str(project / "a.jsonl") and hit.role == "user"
    with Session.open(hit.target) as s:
        assert hit.entry_id in {e.id for e in s.entries()}
    assert hit.on_branch and not hit.compacted and hit.timestamp.endswith("Z")
    (start, end), = hit.marks
    assert hit.snippet[start:end] == "ECONNREFUSED"
    assert hit.to_dict()["marks"] == [[start, end]]


def test_filters(project: Path) -> None:
    assert {h.role for h in ct.search(project, "test_parse_header", role="tool")} == set()
    assert {h.tool for h in ct.search(project, "test_parse_header", tool="shell")} == {"shell"}
    assert [h.role for h in ct.search(project, "passed", tool="shell")] == ["tool"]
    assert {Path(h.target).name for h in ct.search(project, "test_parse_header",
                                                   cwd="/proj")} == {"a.jsonl"}
    assert {Path(h.target).name for h in ct.search(project, "test_parse_header",
                                                   model="model-b")} == {"b.jsonl"}
    assert ct.search(project, "weather", since="2999-01-01") == []
    assert len(ct.search(project, "weather", until="2999-01-01T00:00:00+02:00")) == 1
    assert len(ct.search(project, "test_parse_header", limit=1)) == 1


def test_off_branch_and_compacted_entries_are_found_and_marked(tmp_path: Path) -> None:
    with _session(tmp_path) as s:
        old = s.append_message(Message.user("an early remark about a zebra"))
        noted = s.append_message(Message.assistant("noted"))
        kept = s.append_message(Message.user("keep this part"))
        s.append_compaction(summary="we talked about animals", first_kept_entry_id=kept,
                            tokens_before=100)
        after = s.append_message(Message.user("a zebra question after the compaction"))
        s.move_to(noted)
        side = s.append_message(Message.user("a zebra on a side branch"))
        s.move_to(after)
    hits = {h.entry_id: h for h in ct.search(tmp_path, "zebra")}
    assert set(hits) == {old, after, side}
    assert hits[old].on_branch and hits[old].compacted  # on the branch, out of view
    assert hits[after].on_branch and not hits[after].compacted
    assert not hits[side].on_branch and not hits[side].compacted
    assert {h.entry_id for h in ct.search(tmp_path, "zebra", on_branch=True)} == {old, after}
    assert [h.role for h in ct.search(tmp_path, "animals")] == ["compaction"]


def test_an_append_is_indexed_alone_and_a_leaf_move_changes_the_branch(
        tmp_path: Path) -> None:
    with _session(tmp_path) as s:
        first = s.append_message(Message.user("alpha one"))
        s.append_message(Message.user("alpha two"))
    path = tmp_path / "a.jsonl"
    with SearchIndex.open(tmp_path) as index:
        assert index.refresh().files == 1
        assert index.refresh().files == 0  # nothing changed: nothing read
        size = path.stat().st_size
        with Session.open(path) as s:
            s.move_to(first)
            s.append_message(Message.user("alpha three"))
        report = index.refresh()
        assert report.files == 1 and report.read_bytes == path.stat().st_size - size
        on = {h.snippet: h.on_branch for h in index.search("alpha")}
        assert on == {"alpha one": True, "alpha two": False, "alpha three": True}


def test_a_file_rewritten_or_deleted_is_reindexed_or_dropped(tmp_path: Path) -> None:
    with _session(tmp_path) as s:
        s.append_message(Message.user("original words"))
    with _session(tmp_path, "b") as s:
        s.append_message(Message.user("doomed words"))
    assert len(ct.search(tmp_path, "words")) == 2
    path = tmp_path / "a.jsonl"
    data = path.read_bytes().replace(b"original", b"replaced")
    path.write_bytes(data)  # same size, same inode, other bytes
    (tmp_path / "b.jsonl").unlink()
    assert _texts(ct.search(tmp_path, "words")) == ["replaced words"]
    assert ct.search(tmp_path, "original") == []


def test_a_line_being_written_is_indexed_once_complete(tmp_path: Path) -> None:
    path = tmp_path / "w.jsonl"
    line = orjson.dumps({"type": "message", "id": "e1", "parent_id": None, "timestamp": now(),
                         "message": {"role": "user", "content": "halfway written"}}) + b"\n"
    with open(path, "wb") as f:
        f.write(encode_line(SessionHeader(id="w", created_at=now())))
        f.write(line[:20])
        f.flush()
        assert ct.search(tmp_path, "halfway") == []
        f.write(line[20:])
    assert _texts(ct.search(tmp_path, "halfway")) == ["halfway written"]


def test_a_writer_never_waits_for_the_index_and_the_index_catches_up(tmp_path: Path) -> None:
    done = threading.Event()
    with _session(tmp_path) as s:
        s.append_message(Message.user("start"))

        def write() -> None:
            for i in range(300):
                s.append_message(Message.user(f"busy line {i}"))
            done.set()

        ct.search(tmp_path, "start")
        blocker = sqlite3.connect(index_path(tmp_path))
        writer = threading.Thread(target=write)
        writer.start()
        while not done.is_set():
            ct.search(tmp_path, "busy")  # refreshes while the session grows
        writer.join()
        blocker.execute("BEGIN EXCLUSIVE")  # another process holds the index: still appends
        s.append_message(Message.user("busy while locked"))
        blocker.rollback()
        blocker.close()
    assert len(ct.search(tmp_path, "busy", limit=None)) == 301


def test_a_corrupt_index_is_rebuilt_with_a_note(project: Path) -> None:
    ct.search(project, "weather")
    path = index_path(project)
    for suffix in ("-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    path.write_bytes(os.urandom(8192))
    found = ct.search(project, "weather")
    assert _texts(found) == ["the weather is nice today"]
    assert any("unusable" in n and "rebuilt" in n for n in found.notes)
    assert ct.search(project, "weather").notes == []  # rebuilt for good


def test_a_locked_index_is_searched_as_it_is(project: Path) -> None:
    ct.search(project, "weather")
    with _session(project, "c") as s:
        s.append_message(Message.user("weather again"))
    holder = sqlite3.connect(index_path(project), timeout=0)
    holder.execute("BEGIN IMMEDIATE")  # another process refreshing
    try:
        found = ct.search(project, "weather")
        assert _texts(found) == ["the weather is nice today"]
        assert any("another process" in n for n in found.notes)
    finally:
        holder.rollback()
        holder.close()
    assert len(ct.search(project, "weather")) == 2


def test_an_index_that_cannot_be_kept_is_temporary(project: Path) -> None:
    (project / INDEX_DIR).write_text("a file where the index folder would be")
    found = ct.search(project, "weather")
    assert _texts(found) == ["the weather is nice today"]
    assert any("temporary" in n for n in found.notes)


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a read-only directory")
def test_a_read_only_directory_gets_a_temporary_index(project: Path) -> None:
    project.chmod(0o555)
    try:
        found = ct.search(project, "weather")
    finally:
        project.chmod(0o755)
    assert _texts(found) == ["the weather is nice today"] and found.notes


def test_queries_are_taken_literally_and_fts_syntax_is_checked(project: Path) -> None:
    for query in ('a AND (', '"unbalanced', "NEAR(x", "x*", "-x", "col:weather", "^weather",
                  "weather OR", "'; DROP TABLE files; --"):
        ct.search(project, query)  # never a raw sqlite3 error
    assert _texts(ct.search(project, "weather:")) == ["the weather is nice today"]
    assert len(ct.search(project, "weather OR ECONNREFUSED", fts=True)) == 2
    with pytest.raises(InvalidArgument, match="not a valid FTS5 query"):
        ct.search(project, "a AND (", fts=True)
    with pytest.raises(InvalidArgument, match="nothing to search for"):
        ct.search(project, "!!!")


def test_bytes_that_are_not_utf8_do_not_hide_the_rest(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    line = orjson.dumps({"type": "message", "id": "e1", "parent_id": None, "timestamp": now(),
                         "message": {"role": "user", "content": "caf\u00e9 XBADX rest"}})
    line = line.replace(b"XBADX", b"\xff\xfe broken")
    path.write_bytes(encode_line(SessionHeader(id="bad", created_at=now())) + line + b"\n")
    hits = ct.search(tmp_path, "rest")
    assert len(hits) == 1 and "\ufffd" in hits[0].snippet
    assert len(ct.search(tmp_path, "cafe")) == 1  # accents folded


def test_any_other_catalog_is_searched_by_reading_it() -> None:
    catalog = MemoryCatalog("search-test")
    with Session.open(catalog.create(SessionHeader(id="m1", created_at=now()))) as s:
        s.append_message(Message.user("memory holds ECONNREFUSED too"))
    hits = ct.search(catalog, "econnrefused")
    assert [h.session_id for h in hits] == ["m1"] and hits[0].marks
    with pytest.raises(InvalidArgument, match="FTS5"):
        ct.search(catalog, "x", fts=True)


def test_a_directory_catalog_searches_through_its_method(project: Path) -> None:
    catalog = open_catalog(project)
    hits = catalog.search("weather", SearchFilters(role="user"))  # type: ignore[attr-defined]
    assert _texts(hits) == ["the weather is nice today"]


def test_a_refresh_of_named_files_reads_only_those(tmp_path: Path) -> None:
    for name in ("a", "b"):
        with _session(tmp_path, name) as s:
            s.append_message(Message.user(f"first {name}"))
    with SearchIndex.open(tmp_path) as index:
        index.refresh()
        for name in ("a", "b"):
            with Session.open(tmp_path / f"{name}.jsonl") as s:
                s.append_message(Message.user(f"second {name}"))
        assert index.refresh(files=[tmp_path / "a.jsonl"]).files == 1
        assert _texts(index.search("second")) == ["second a"]
        (tmp_path / "a.jsonl").unlink()
        assert index.refresh(files=[tmp_path / "a.jsonl"]).dropped == 1
        assert _texts(index.search("first")) == ["first b"]


def test_a_listing_reads_again_only_the_files_that_changed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from contextree.storage import DirectoryCatalog, _listing_cache

    for name in ("a", "b"):
        with Session.create(tmp_path / f"{name}.jsonl", metadata={"k": name}) as s:
            s.append_message(Message.user("hello"))
    catalog = DirectoryCatalog(tmp_path)
    first = catalog.list().sessions
    read: list[Path] = []
    plain = _listing_cache.describe
    monkeypatch.setattr(_listing_cache, "describe", lambda p: read.append(p) or plain(p))
    assert catalog.list().sessions == first and read == []  # all from the cache
    with Session.open(tmp_path / "a.jsonl") as s:
        s.set_name("renamed")
    again = {i.target: i for i in catalog.list().sessions}
    assert read == [tmp_path / "a.jsonl"]
    assert again[str(tmp_path / "a.jsonl")].name == "renamed"
    assert again[str(tmp_path / "b.jsonl")].metadata == {"k": "b"}
    assert DirectoryCatalog(tmp_path, cache=False).list().sessions == catalog.list().sessions
    index_path(tmp_path).write_bytes(b"garbage")  # an unusable cache: files are read
    for suffix in ("-wal", "-shm"):
        Path(f"{index_path(tmp_path)}{suffix}").unlink(missing_ok=True)
    assert len(catalog.list().sessions) == 2


def test_an_index_with_more_dead_rows_than_live_ones_is_rebuilt(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from contextree.storage import _search_index

    monkeypatch.setattr(_search_index, "MIN_DEAD", 1)
    with _session(tmp_path) as s:
        s.append_message(Message.user("first words"))
    ct.search(tmp_path, "words")
    path = tmp_path / "a.jsonl"
    path.write_bytes(path.read_bytes().replace(b"first", b"other"))  # rewritten: rows die
    with SearchIndex.open(tmp_path) as index:
        report = index.refresh()
        assert any("rebuilt" in n for n in report.notes)
        assert index._meta("dead") == "0"
        assert _texts(index.search("words")) == ["other words"]


def test_a_sqlite_without_fts5_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    from contextree.storage import _search_index

    class NoFts5:
        def execute(self, sql: str, *args: object) -> None:
            raise sqlite3.OperationalError("no such module: fts5")

        def close(self) -> None:
            pass

    monkeypatch.setattr(_search_index.sqlite3, "connect", lambda *a, **k: NoFts5())
    with pytest.raises(InvalidArgument, match="no FTS5 full-text search"):
        _search_index.require_fts5()


@pytest.mark.timeout(60)
def test_an_index_path_that_is_a_fifo_or_a_link_is_never_opened(project: Path) -> None:
    from contextree.storage import DirectoryCatalog

    folder = project / INDEX_DIR
    folder.mkdir()
    os.mkfifo(folder / "index.sqlite")
    found = ct.search(project, "weather")
    assert _texts(found) == ["the weather is nice today"]
    assert any("temporary" in n for n in found.notes)
    assert len(DirectoryCatalog(project).list().sessions) == 2
    (folder / "index.sqlite").unlink()
    (folder / "index.sqlite").symlink_to(project / "elsewhere.sqlite")
    assert _texts(ct.search(project, "weather")) == ["the weather is nice today"]
    assert not (project / "elsewhere.sqlite").exists()


def test_an_index_folder_that_is_a_link_is_never_followed(project: Path,
                                                          tmp_path: Path) -> None:
    """``.contextree`` linked to another folder: search and ls use a temporary index and
    write nothing there; a drop refuses, and SQLite never rolls back a journal found there."""
    from contextree.storage import DirectoryCatalog
    from contextree.storage._search_index import drop_index

    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "index.sqlite-journal").write_bytes(b"precious")
    (project / INDEX_DIR).symlink_to(victim)
    found = ct.search(project, "weather")
    assert _texts(found) == ["the weather is nice today"]
    assert any("temporary" in n for n in found.notes)
    assert len(DirectoryCatalog(project).list().sessions) == 2
    with pytest.raises(ct.errors.InvalidArgument, match="link"):
        drop_index(project)
    assert sorted(p.name for p in victim.iterdir()) == ["index.sqlite-journal"]
    assert (victim / "index.sqlite-journal").read_bytes() == b"precious"


def test_a_file_name_that_is_not_utf8_is_indexed_and_opened(tmp_path: Path) -> None:
    name = os.fsdecode(b"bad\xff.jsonl")
    with Session.create(tmp_path / name) as s:
        s.append_message(Message.user("undecodable name words"))
    for _ in range(2):  # built, then refreshed from the stored rows
        hits = ct.search(tmp_path, "undecodable")
        assert [h.target for h in hits] == [str(tmp_path / name)]
