"""A session file that another program changes while a Session writes to it (or reads it):
cut by ``truncate``, appended to by a writer that ignores the lock, saved over by an editor
(a new file renamed onto the path: noticed within a second), or deleted. The writer refuses
to append (it would glue its line to a cut one, follow lines its tree does not know, or
write where nobody reads), says why, writes nothing more, keeps what went to a replaced file
in the quarantine file, and leaves the other program's file as it found it. A file moved
with its folder is written on where it went."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import contextree as ct
from contextree.errors import StorageFailure
from contextree.storage import TornLineWarning, _jsonl
from contextree.storage._sidecars import quarantine_path


def _session(path: Path, *, durable: bool = True) -> ct.Session:
    s = ct.Session.create(path, durable=durable)
    for i in range(4):
        s.append_message(ct.Message.user(f"message {i}"))
    return s


def _texts(path: Path) -> list[str]:
    with ct.Session.open(path, readonly=True) as s:
        return [m.text for m in s.build_context().messages]


@pytest.mark.parametrize("durable", [True, False])
def test_a_file_cut_mid_line_is_not_appended_to(tmp_path: Path, durable: bool) -> None:
    path = tmp_path / "s.jsonl"
    s = _session(path, durable=durable)
    cut = path.stat().st_size - 25
    os.truncate(path, cut)
    with pytest.raises(StorageFailure, match=r"changed by another program.*it is [\d,]+ bytes, "
                                             r"not [\d,]+\); nothing was written") as err:
        s.append_message(ct.Message.user("mine"))
    assert "contextree repair" in str(err.value)
    assert path.stat().st_size == cut  # the other program's file, as it left it
    with pytest.raises(StorageFailure, match="an earlier write failed"):
        s.append_message(ct.Message.user("mine, again"))
    s.close()
    # opened again, the cut line is the torn tail an open already handles
    with pytest.warns(TornLineWarning), ct.Session.open(path) as again:
        again.append_message(ct.Message.user("after reopening"))
    assert _texts(path)[-1] == "after reopening"


def test_lines_another_writer_appended_are_not_followed_blindly(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    s = _session(path)
    foreign = b'{"type":"message","id":"f0f0f0f0","parent_id":null,' \
              b'"timestamp":"2026-01-01T00:00:00.000Z","message":{"role":"user","content":"x"}}\n'
    with open(path, "ab") as f:  # ignores the writer's lock
        f.write(foreign)
    size = path.stat().st_size
    with pytest.raises(StorageFailure, match="changed by another program"):
        s.append_message(ct.Message.user("mine"))
    assert path.stat().st_size == size and path.read_bytes().endswith(foreign)
    s.close()


@pytest.fixture
def look_every_write(monkeypatch: pytest.MonkeyPatch) -> None:
    """The path is looked at before every write (in use: once a second at most)."""
    monkeypatch.setattr(_jsonl, "PATH_CHECK_EVERY", 0.0)


def test_a_file_saved_over_by_an_editor_is_not_written_to(tmp_path: Path,
                                                          look_every_write: None) -> None:
    path = tmp_path / "s.jsonl"
    s = _session(path)
    edited = path.read_bytes().replace(b"message 1", b"message one")
    (tmp_path / "s.jsonl.new").write_bytes(edited)
    os.replace(tmp_path / "s.jsonl.new", path)
    with pytest.raises(StorageFailure, match=r"its path names another file now\); nothing "
                                             "was written"):
        s.append_message(ct.Message.user("mine"))
    assert path.read_bytes() == edited
    assert not quarantine_path(path).exists()
    s.close()
    assert _texts(path) == ["message 0", "message one", "message 2", "message 3"]


def test_what_went_to_the_replaced_file_before_the_look_is_kept(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The path is looked at once a second: the appends made between the editor's save and
    the next look went to the file it replaced; they are kept in the quarantine file."""
    path = tmp_path / "s.jsonl"
    monkeypatch.setattr(_jsonl, "PATH_CHECK_EVERY", 0.0)
    s = _session(path)  # its last write looked at the path
    monkeypatch.setattr(_jsonl, "PATH_CHECK_EVERY", 3600.0)
    edited = path.read_bytes()
    (tmp_path / "s.jsonl.new").write_bytes(edited)
    os.replace(tmp_path / "s.jsonl.new", path)
    s.append_message(ct.Message.user("went to the old file"))
    s.append_message(ct.Message.user("so did this"))
    monkeypatch.setattr(_jsonl, "PATH_CHECK_EVERY", 0.0)  # the second is up
    with pytest.raises(StorageFailure, match=r"the 2 line\(s\) appended since .* are kept in"):
        s.append_message(ct.Message.user("refused"))
    s.close()
    assert path.read_bytes() == edited
    kept = [json.loads(x) for x in quarantine_path(path).read_text().splitlines()]
    assert [json.loads(r["text"])["message"]["content"] for r in kept] == [
        "went to the old file", "so did this"]
    assert all("replaced or deleted" in r["reason"] for r in kept)


def test_a_deleted_file_is_refused_a_moved_one_written_on(tmp_path: Path,
                                                          look_every_write: None) -> None:
    gone = tmp_path / "gone.jsonl"
    s = _session(gone)
    gone.unlink()
    with pytest.raises(StorageFailure, match="it was deleted"):
        s.append_message(ct.Message.user("mine"))
    s.close()
    (tmp_path / "a").mkdir()
    moved = _session(tmp_path / "a" / "s.jsonl")
    (tmp_path / "a").rename(tmp_path / "b")
    moved.append_message(ct.Message.user("written where it went"))
    moved.close()
    assert _texts(tmp_path / "b" / "s.jsonl")[-1] == "written where it went"


def test_a_batch_is_not_written_to_a_file_cut_meanwhile(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    s = _session(path)
    with pytest.raises(StorageFailure, match="changed by another program"), s.batch():
        s.append_message(ct.Message.user("buffered"))
        os.truncate(path, path.stat().st_size - 10)
    assert b"buffered" not in path.read_bytes()
    s.close()


def test_a_reader_whose_file_was_cut_says_so(tmp_path: Path) -> None:
    """A read-only session reads entries from the file as they are needed: cut under it, it
    finds its leaf gone and says the file changed (it said the entry was not in the session),
    and opened again it reads what is there."""
    path = tmp_path / "s.jsonl"
    with ct.Session.create(path) as s, s.batch():  # big enough to be read by its index
        for i in range(2000):
            s.append_message(ct.Message.user(f"message {i} " + "x" * 2000))
    reader = ct.Session.open(path, readonly=True)
    os.truncate(path, path.stat().st_size // 2)
    with pytest.raises(StorageFailure, match=r"changed while it was being read.*no longer in it"):
        reader.build_context()
    reader.close()
    with pytest.warns(TornLineWarning), ct.Session.open(path, readonly=True) as again:
        assert 900 < len(again.build_context().messages) < 1100
