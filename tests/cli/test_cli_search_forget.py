"""``rm``, ``archive`` and ``unarchive`` take the file they delete out of the search index of
every folder above it at once, so that a search without a refresh finds nothing of it; an
index that is locked or corrupt is noted on stderr and the command still succeeds."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from contextree import Message, Session
from contextree.cli import app
from helpers import run, run_json, runner


def _two_sessions(root: Path) -> tuple[Path, Path]:
    (root / "sub").mkdir()
    kept, going = root / "kept.jsonl", root / "sub" / "going.jsonl"
    with Session.create(kept) as s:
        s.append_message(Message.user("ECONNREFUSED in the kept one"))
    with Session.create(going) as s:
        s.append_message(Message.user("ECONNREFUSED from test_parse_header, going"))
    return kept, going


def _paths(root: Path, query: str = "econnrefused") -> set[str]:
    return {hit["path"] for hit in run_json("search", query, root, "--no-refresh")}


def test_rm_takes_the_session_out_of_every_index_above_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    kept, going = _two_sessions(tmp_path)
    run("index", tmp_path)  # built from the absolute path...
    run("index", tmp_path / "sub")  # ...and a second index nearer the file
    assert _paths(tmp_path) == {str(kept), str(going)}
    monkeypatch.chdir(tmp_path)
    run("rm", "sub/going.jsonl", "--yes")  # ...rm by another name
    assert not going.exists()
    assert _paths(tmp_path) == {str(kept)}
    assert _paths(tmp_path, "test_parse_header") == set()
    assert _paths(tmp_path / "sub") == set()
    for root in (tmp_path, tmp_path / "sub"):  # nothing of it was left for a refresh
        assert "dropped 0" in run("index", root).stdout


def test_rm_of_an_index_built_from_a_relative_path(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _, going = _two_sessions(tmp_path)
    monkeypatch.chdir(tmp_path)
    run("index", ".")
    assert len(_paths(Path("."))) == 2
    run("rm", going, "--yes")
    assert _paths(Path(".")) == {"kept.jsonl"}
    assert "dropped 0" in run("index", ".").stdout


def test_rm_succeeds_when_the_index_is_locked_or_corrupt(tmp_path: Path) -> None:
    kept, going = _two_sessions(tmp_path)
    run("index", tmp_path)
    index = tmp_path / ".contextree" / "index.sqlite"
    holder = sqlite3.connect(index, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another process refreshing it
    try:
        result = runner.invoke(app, ["rm", str(going), "--yes"])
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert result.exit_code == 0, result.stderr
    assert not going.exists()
    assert "another process is refreshing" in result.stderr
    assert "dropped 1" in run("index", tmp_path).stdout  # left to the next refresh

    for name in ("index.sqlite-wal", "index.sqlite-shm"):
        (index.parent / name).unlink(missing_ok=True)
    index.write_bytes(b"not a database " * 100)
    result = runner.invoke(app, ["rm", str(kept), "--yes"])
    assert result.exit_code == 0, result.stderr
    assert not kept.exists()
    assert "not a usable search index" in result.stderr
    assert "Traceback" not in result.stderr


def test_rm_without_an_index_makes_none(tmp_path: Path) -> None:
    _, going = _two_sessions(tmp_path)
    run("rm", going, "--yes")
    assert not (tmp_path / ".contextree").exists()


def test_archive_and_unarchive_update_the_index(tmp_path: Path) -> None:
    kept, going = _two_sessions(tmp_path)
    run("index", tmp_path)
    run("archive", going)
    assert _paths(tmp_path) == {str(kept)}  # the file is gone from the index at once
    archived = str(going) + ".archive.zip"
    assert "indexed 1 changed session files" in (out := run("index", tmp_path).stdout)
    assert "dropped 0" in out
    assert _paths(tmp_path) == {str(kept), archived}  # the archive is found once indexed
    run("unarchive", archived)
    assert _paths(tmp_path) == {str(kept)}
    assert "dropped 0" in run("index", tmp_path).stdout
    assert {h["path"] for h in run_json("search", "econnrefused", tmp_path)} == {
        str(kept), str(going)}
