"""A big index build writes SQLite from a thread of its own (``_write_behind``) while the
sessions are read: it must index exactly what the one-thread build does, raise what a write
raised, and leave the index as it was when it fails or is interrupted.
"""

from __future__ import annotations

import shutil
import sqlite3
import threading
from pathlib import Path

import pytest

from contextree import Message, Session, ToolCall
from contextree.storage import _search_index
from contextree.storage._search_index import SearchIndex

QUERIES = ["alpha", "beta", "test_parse_header", "ECONNREFUSED", '"connection refused"',
           "shell", "omega*", "branch"]


def _sessions(root: Path, count: int = 12) -> None:
    """Sessions of every shape a build meets: long and short, branched, labelled, named,
    compacted, with tool calls, and one file that is not a session."""
    for k in range(count):
        with Session.create(root / f"s{k}.jsonl", cwd=f"/p{k % 3}") as s:
            first = s.append_message(Message.user(f"alpha {k} test_parse_header"))
            for n in range(k * 5):
                s.append_message(Message.assistant(f"beta {k}-{n} omega{n} " + "x " * n,
                                                   model=f"model-{k % 2}"))
            if k % 3 == 0:
                s.branch(first)
                s.append_message(Message.user(f"a branch {k}: ECONNREFUSED, connection "
                                              "refused"))
            if k % 4 == 1:
                s.set_label(first, "start")
                s.set_name(f"name {k}")
            if k % 5 == 2:
                s.append_message(Message.assistant("", tool_calls=[ToolCall(
                    id="c", name="shell", arguments={"command": "ls"})]))
                kept = s.append_message(Message(role="tool", content="shell output",
                                                name="shell", tool_call_id="c"))
                s.append_compaction(summary="omega summary", first_kept_entry_id=kept,
                                    tokens_before=100)
    (root / "junk.jsonl").write_bytes(b"not a session\n")


def _found(index: SearchIndex) -> dict[str, list[tuple[str, str, bool, bool]]]:
    return {q: sorted((Path(h.target).name, h.entry_id, h.on_branch, h.compacted)
                      for h in index.search(q, limit=None)) for q in QUERIES}


def _files(index: SearchIndex) -> list[tuple[object, ...]]:
    return sorted(index.con.execute(
        "SELECT path, indexed_bytes, problem, session_id, name, entries, cwd, labels, "
        "models, leaf, branch, compactions FROM files").fetchall(), key=repr)


def _build(root: Path, monkeypatch: pytest.MonkeyPatch, *, threaded: bool,
           rows: int = 13, limit: int | None = None) -> SearchIndex:
    monkeypatch.setattr(_search_index, "THREADED_BYTES", 0 if threaded else 1 << 62)
    monkeypatch.setattr(_search_index, "FLUSH_ROWS", rows)  # many batches of odd sizes
    index = SearchIndex.open(root)
    if limit is not None:  # statements of few parameters: each batch in many statements
        index.con.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, limit)
    index.refresh()
    return index


def _writer_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "contextree-index-writer"]


@pytest.mark.parametrize("limit", [None, 50])
def test_a_threaded_build_indexes_what_a_one_thread_build_does(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, limit: int | None) -> None:
    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir()
    _sessions(one)
    shutil.copytree(one, two)
    with _build(one, monkeypatch, threaded=False) as plain, \
            _build(two, monkeypatch, threaded=True, limit=limit) as threaded:
        assert _found(threaded) == _found(plain)
        assert all(_found(plain)[q] for q in QUERIES)  # every query finds something
        assert [r[1:] for r in _files(threaded)] == [r[1:] for r in _files(plain)]
        assert threaded.stats()["texts"] == plain.stats()["texts"]
    assert not _writer_threads()


def test_a_threaded_refresh_after_appends_reads_only_what_is_new(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _sessions(tmp_path, 4)
    _build(tmp_path, monkeypatch, threaded=True).close()
    with Session.open(tmp_path / "s1.jsonl") as s:
        s.append_message(Message.user("a later zeta word"))
    with _build(tmp_path, monkeypatch, threaded=True) as index:
        assert [Path(h.target).name for h in index.search("zeta")] == ["s1.jsonl"]
        assert len(index.search("alpha", limit=None)) == 4


def test_a_write_that_fails_in_the_writer_is_raised_and_nothing_is_kept(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _sessions(tmp_path, 6)
    calls = []
    real = _search_index._TEXTS.statements

    def failing(rows: list[tuple[object, ...]], most: int) -> list[tuple[str, list[object]]]:
        calls.append(len(rows))
        if len(calls) == 3:  # a later batch: earlier ones are written, not committed
            return [("INSERT INTO no_such_table VALUES (?)", [1])]
        return real(rows, most)

    monkeypatch.setattr(_search_index._TEXTS, "statements", failing)
    with pytest.raises(sqlite3.OperationalError, match="no_such_table"):
        _build(tmp_path, monkeypatch, threaded=True, rows=5)
    assert not _writer_threads()
    monkeypatch.setattr(_search_index._TEXTS, "statements", real)
    with SearchIndex.open(tmp_path) as index:
        assert index.stats()["sessions"] == 0  # rolled back: the index is as it was
        index.refresh()
        assert len(index.search("alpha", limit=None)) == 6


def test_an_interrupt_mid_build_stops_the_writer_and_keeps_the_index_as_it_was(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _sessions(tmp_path, 8)
    monkeypatch.setattr(_search_index, "THREADED_BYTES", 0)
    monkeypatch.setattr(_search_index, "FLUSH_ROWS", 3)
    seen = []

    def progress(done: int, total: int) -> None:
        seen.append(done)
        if len(seen) == 5:
            raise KeyboardInterrupt

    with SearchIndex.open(tmp_path) as index:
        with pytest.raises(KeyboardInterrupt):
            index.refresh(progress)
        assert not _writer_threads()
        assert index.stats()["sessions"] == 0
        index.refresh()
        assert len(index.search("alpha", limit=None)) == 8
