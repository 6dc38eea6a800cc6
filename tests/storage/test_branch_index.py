"""The index beside a JSONL session (``<file>.index``): opening through it reads the branch,
not the file; a stale, foreign or hostile index is caught and rebuilt, never trusted over
the session, never followed through a link, never waited on."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import warnings
from array import array
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import contextree as ct
from contextree.storage import _index, _jsonl
from helpers import make_session, raw_message

INDEX_OF = _index.index_path


@pytest.fixture(autouse=True)
def every_session_indexed(monkeypatch: pytest.MonkeyPatch) -> None:
    """Index sessions of any size (by default only those of 2 MiB and more get one)."""
    monkeypatch.setattr(_index, "INDEX_MIN_BYTES", 0)


def seen(path: Path) -> dict[str, Any]:
    """What a user sees of a session: its branch, context, labels, name, leaf and size."""
    with _quiet():
        s = ct.Session.open(path, readonly=True)
    try:
        return {
            "branch": [ct.entries.to_dict(e) for e in s.branch()],
            "context": [m.to_dict() for m in s.build_context().messages],
            "labels": s.labels(), "name": s.name, "leaf": s.leaf_id, "count": len(s.storage),
            "entries": [e.id for e in s.entries()],
            "children": {e.id: list(s.storage.children(e.id)) for e in s.entries()},
        }
    finally:
        s.close()


def seen_without_index(path: Path) -> dict[str, Any]:
    saved = INDEX_OF(path).read_bytes() if INDEX_OF(path).exists() else None
    INDEX_OF(path).unlink(missing_ok=True)
    try:
        return seen(path)
    finally:
        INDEX_OF(path).unlink(missing_ok=True)
        if saved is not None:
            INDEX_OF(path).write_bytes(saved)


def no_full_read(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make any full read of a session file fail the test: the index must serve."""
    def refuse(*args: object, **kwargs: object) -> object:
        raise AssertionError("the session file was read whole")
    monkeypatch.setattr(_jsonl, "load", refuse)


def test_a_session_gets_an_index_and_opens_through_it(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "s.jsonl"
    make_session(path)
    assert INDEX_OF(path).is_file()
    expected = seen_without_index(path)
    no_full_read(monkeypatch)
    assert seen(path) == expected
    with ct.Session.open(path) as s:  # a writer too
        s.append_message(ct.Message.user("one more"))
    assert seen(path)["context"][-1]["content"] == "one more"


def test_small_sessions_have_no_index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_index, "INDEX_MIN_BYTES", 2 << 20)
    path = tmp_path / "s.jsonl"
    make_session(path)
    assert not INDEX_OF(path).exists()


def test_a_session_gets_its_index_when_it_grows_big_enough(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_index, "INDEX_MIN_BYTES", 20_000)
    path = tmp_path / "s.jsonl"
    with ct.Session.create(path, durable=False) as s:
        for i in range(40):
            s.append_message(ct.Message.user(f"{i} " + "x" * 1000))
            if i == 5:
                assert not INDEX_OF(path).exists()
    assert INDEX_OF(path).is_file()
    expected = seen_without_index(path)
    no_full_read(monkeypatch)
    assert seen(path) == expected


def test_appends_in_a_batch_are_indexed_when_written(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "s.jsonl"
    with ct.Session.create(path) as s, s.batch():
        for i in range(30):
            s.append_message(ct.Message.user(f"m{i}"))
        s.set_label(s.leaf_id or "", "end")
        s.set_name("batched")
    expected = seen_without_index(path)
    no_full_read(monkeypatch)
    assert seen(path) == expected and expected["labels"] and expected["name"] == "batched"


def index_tail(path: Path) -> int:
    """How many tail records the index of ``path`` holds after its columns."""
    fd = os.open(path, os.O_RDONLY)
    try:
        read = _index.read_index(path, fd)
    finally:
        os.close(fd)
    assert read is not None, "the session has no index that matches it"
    return len(read.tail)


def test_a_big_batch_leaves_an_index_written_anew_not_a_record_per_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Its lines are written many times over (a small buffer), and indexed once, at its end:
    # more lines than an open reads as tail records make the index anew, as columns.
    monkeypatch.setattr(_jsonl, "BATCH_BUFFER", 4096)
    monkeypatch.setattr(_jsonl, "TAIL_REWRITE", 50)
    path = tmp_path / "s.jsonl"
    with ct.Session.create(path) as s:
        s.append_message(ct.Message.user("first"))
        with s.batch():
            for i in range(200):
                s.append_message(ct.Message.user(f"m{i} " + "x" * 100))
            assert index_tail(path) == 0  # nothing of the batch yet, though written
        assert index_tail(path) == 0  # the batch's 200 lines: columns, no tail records
        with s.batch():  # a small batch: its lines as tail records
            for i in range(5):
                s.append_message(ct.Message.user(f"n{i}"))
        assert index_tail(path) == 5
    expected = seen_without_index(path)
    no_full_read(monkeypatch)
    assert seen(path) == expected and expected["count"] == 206


def test_lines_appended_by_an_older_version_are_read_from_the_session(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    ids = make_session(path)
    with open(path, "ab") as f:  # a writer that knows nothing of the index
        f.write(raw_message("foreign1", ids["tip_b"], "from elsewhere") + b"\n")
        f.write(raw_message("foreign2", "foreign1", "and more") + b"\n")
    view = seen(path)
    assert view == seen_without_index(path)
    assert [m["content"] for m in view["context"][-2:]] == ["from elsewhere", "and more"]
    with ct.Session.open(path) as s:  # the writer indexes them, and then its own
        s.append_message(ct.Message.user("mine"))
    assert seen(path) == seen_without_index(path)


def test_a_file_edited_by_hand_is_read_again(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    make_session(path)
    seen(path)
    data = path.read_bytes()
    path.write_bytes(data.replace(b"Fix the bug in calc.py", b"Fix the bugs in calc.py and util.py"))
    view = seen(path)
    assert view == seen_without_index(path)
    assert any("util.py" in str(m["content"]) for m in view["context"])


def test_a_same_length_edit_of_a_parent_is_caught_when_read(tmp_path: Path) -> None:
    # Only the lines change, not their lengths nor the last one: the records still match
    # where they are, but the entry read says another parent than its record.
    path = tmp_path / "s.jsonl"
    with ct.Session.create(path) as s:
        a = s.append_message(ct.Message.user("a"))
        b = s.append_message(ct.Message.user("b"))
        c = s.append_message(ct.Message.user("c"))
        s.move_to(a)
        s.append_message(ct.Message.user("d"))
        s.move_to(c)
        s.append_message(ct.Message.user("e"))
    assert len(a) == len(b)
    lines = path.read_bytes().split(b"\n")
    at = next(i for i, line in enumerate(lines) if f'"id":"{c}"'.encode() in line)
    lines[at] = lines[at].replace(f'"parent_id":"{b}"'.encode(), f'"parent_id":"{a}"'.encode())
    path.write_bytes(b"\n".join(lines))
    view = seen(path)
    assert view == seen_without_index(path)
    assert [m["content"] for m in view["context"]] == ["a", "c", "e"]


_NAMES = ["offsets", "lengths", "parents", "types", "type_names", "ids", "extra", "last_crc",
          "facts"]
_PACKED = ("offsets", "lengths", "parents")


def _parts(path: Path) -> tuple[bytes, dict[str, Any], bytes]:
    """The index's head line, its base (columns as plain lists) and its tail lines."""
    data = INDEX_OF(path).read_bytes()
    head, rest = data.split(b"\n", 1)
    size = orjson.loads(head)["base_bytes"]
    base = dict(zip(_NAMES, msgspec.msgpack.decode(rest[:size]), strict=True))
    for col in _PACKED:
        base[col] = list(array("q", base[col]))
    base["types"] = [base["type_names"][c] for c in base["types"]]
    base["ids"] = base["ids"].split("\0")
    return head, base, rest[size:]


def _joined(head: bytes, base: dict[str, Any], tail: bytes = b"") -> bytes:
    packed = dict(base)
    for col in _PACKED:
        packed[col] = array("q", base[col]).tobytes()
    names = list(dict.fromkeys(base["types"]))
    packed["type_names"] = names
    packed["types"] = bytes(names.index(t) for t in base["types"])
    packed["ids"] = "\0".join(base["ids"])
    encoded = msgspec.msgpack.encode([packed[n] for n in _NAMES])
    meta = orjson.loads(head)
    meta["base_bytes"] = len(encoded)
    return orjson.dumps(meta) + b"\n" + encoded + tail


def _hostile_variants(path: Path) -> dict[str, bytes]:
    head, base, tail = _parts(path)
    size = path.stat().st_size

    def variant(change: Any) -> bytes:
        copy = {k: list(v) if isinstance(v, list) else v for k, v in base.items()}
        change(copy)
        return _joined(head, copy, tail)

    def past_end(b: dict[str, Any]) -> None:
        b["offsets"][3] = size + 100

    def mid_line(b: dict[str, Any]) -> None:
        b["offsets"][3] += 7
        b["lengths"][3] -= 7

    def swapped(b: dict[str, Any]) -> None:
        for col in ("offsets", "lengths"):
            b[col][2], b[col][4] = b[col][4], b[col][2]

    def other_ids(b: dict[str, Any]) -> None:
        b["ids"][2], b["ids"][4] = b["ids"][4], b["ids"][2]

    def dropped(b: dict[str, Any]) -> None:
        for col in ("offsets", "lengths", "parents", "types", "ids"):
            del b[col][3]

    def duplicate(b: dict[str, Any]) -> None:
        b["ids"][3] = b["ids"][2]

    def wrong_label(b: dict[str, Any]) -> None:
        b["extra"] = [[k, t, "forged" if x else x] for k, t, x in b["extra"]]

    def wrong_parent(b: dict[str, Any]) -> None:
        b["parents"][5] = 1

    def cycle(b: dict[str, Any]) -> None:
        b["parents"][1] = len(b["parents"]) - 1

    def huge(b: dict[str, Any]) -> None:
        b["offsets"][1] = 2**62

    def short_ids(b: dict[str, Any]) -> None:
        b["ids"].pop()

    def negative(b: dict[str, Any]) -> None:
        b["parents"][2] = -7

    def short_column(b: dict[str, Any]) -> None:
        b["types"].pop()

    data = INDEX_OF(path).read_bytes()
    return {
        "past_end": variant(past_end), "mid_line": variant(mid_line),
        "swapped": variant(swapped), "other_ids": variant(other_ids),
        "dropped": variant(dropped), "duplicate": variant(duplicate),
        "wrong_label": variant(wrong_label), "wrong_parent": variant(wrong_parent),
        "cycle": variant(cycle), "huge_numbers": variant(huge), "negative": variant(negative),
        "short_column": variant(short_column), "short_ids": variant(short_ids),
        "other_byteorder": data.replace(b'"byteorder":"little"', b'"byteorder":"big"', 1),
        "garbage": b"\x00\xff not json at all\n" * 3, "empty": b"",
        "cut_mid_base": data[: len(data) // 2],
        "other_header": data.replace(b'"header_crc":', b'"header_crc":1', 1),
        "newer_version": data.replace(b'"contextree_index":1', b'"contextree_index":99', 1),
        "base_bytes_too_big": data.replace(b'"base_bytes":', b'"base_bytes":9', 1),
        "tail_garbage": data + b'[1,2,"message","nope",0,5]\n{"x":1}\n',
        "tail_overlaps": data + b'[0,10,"message","ghost",-1,5]\n',
    }


HOSTILE = ["past_end", "mid_line", "swapped", "other_ids", "dropped", "duplicate",
           "wrong_label", "wrong_parent", "cycle", "huge_numbers", "negative", "short_column", "short_ids", "other_byteorder",
           "garbage", "empty", "cut_mid_base", "other_header", "newer_version",
           "base_bytes_too_big", "tail_garbage", "tail_overlaps"]


def test_a_same_length_edit_off_the_branch_is_caught(tmp_path: Path) -> None:
    # An entry the branch does not read, its parent changed in place (same length, the last
    # line untouched): no record check meets it, but the file was written after the index
    # that places all of it, so the index is not trusted. Timestamps are the kernel's coarse
    # clock: the edit is dated a second after the index, as a hand edit would be.
    path = tmp_path / "s.jsonl"
    with ct.Session.create(path) as s:
        a = s.append_message(ct.Message.user("a"))
        b = s.append_message(ct.Message.user("b"))
        s.move_to(a)
        d = s.append_message(ct.Message.user("d"))
        s.move_to(b)
        e = s.append_message(ct.Message.user("e"))
    seen(path)
    data = path.read_bytes()
    old = f'"id":"{d}","parent_id":"{a}"'.encode()
    assert data.count(old) == 1
    with open(path, "r+b") as f:  # in place: the same inode, the same size
        f.seek(data.index(old))
        f.write(f'"id":"{d}","parent_id":"{b}"'.encode())
    later = INDEX_OF(path).stat().st_mtime_ns + 10**9
    os.utime(path, ns=(later, later))
    truth = seen_without_index(path)
    assert d in truth["children"][b] and d not in truth["children"][a]
    with ct.Session.open(path, readonly=True) as s:  # children first: no entry read yet
        assert [list(s.storage.children(x)) for x in (a, b, e)] == [
            truth["children"][x] for x in (a, b, e)]
    assert seen(path) == truth


def test_a_session_touched_after_its_index_opens_the_same(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "s.jsonl"
    make_session(path)
    before = seen(path)
    later = INDEX_OF(path).stat().st_mtime_ns + 10**9
    os.utime(path, ns=(later, later))
    assert seen(path) == before  # read whole (the index is not trusted), nothing lost
    with ct.Session.open(path) as s:  # a writer writes the index anew
        s.append_message(ct.Message.user("more"))
    no_full_read(monkeypatch)
    assert seen(path)["context"][-1]["content"] == "more"


@pytest.mark.parametrize("kind", HOSTILE)
@pytest.mark.parametrize("mode", ["read", "write"])
def test_a_hostile_index_never_gives_a_wrong_session(tmp_path: Path, kind: str,
                                                     mode: str) -> None:
    path = tmp_path / "s.jsonl"
    make_session(path)
    INDEX_OF(path).unlink()
    expected = seen(path)  # which writes the index anew: every entry in its base
    assert _parts(path)[1]["ids"]
    INDEX_OF(path).write_bytes(_hostile_variants(path)[kind])
    if mode == "write":
        with ct.Session.open(path) as s:
            assert [ct.entries.to_dict(e) for e in s.branch()] == expected["branch"]
            s.append_message(ct.Message.user("after"))
        expected = seen_without_index(path)
    assert seen(path) == expected
    assert seen(path) == expected  # and again, through whatever index is there now


@pytest.mark.parametrize("mode", ["read", "write"])
def test_a_lie_found_late_in_an_outgrown_index_is_rebuilt_from_the_first_line(
        tmp_path: Path, mode: str) -> None:
    """The index is accepted at open and the line it lacks is read from the session; the
    lie (two tail records that swap ids) is found only when a line is read, and the tree
    is then read anew from the start of the file, not from where the open's read stopped
    (a stream of a dup() of the descriptor shared its offset, and found the file empty)."""
    path = tmp_path / "s.jsonl"
    with ct.Session.create(path, cwd="/") as s:
        s.append_message(ct.Message.user("big " + "x" * 100_000))
    with ct.Session.open(path) as s:  # the index's base holds the first; these are its tail
        a = s.append_message(ct.Message.user("A"))
        b = s.append_message(ct.Message.user("B, a longer text"))
        s.append_message(ct.Message.user("C0"))
        c = s.append_message(ct.Message.user("C"))
    with path.open("ab") as f:  # a line another tool added: past the index's records
        f.write(raw_message("d0d0d0d0", c, "D") + b"\n")
    lines = INDEX_OF(path).read_bytes().split(b"\n")
    at = {orjson.loads(line)[3]: k for k, line in enumerate(lines) if line.startswith(b"[")}
    ra, rb = orjson.loads(lines[at[a]]), orjson.loads(lines[at[b]])
    ra[3], rb[3] = b, a
    lines[at[a]], lines[at[b]] = orjson.dumps(ra), orjson.dumps(rb)
    INDEX_OF(path).write_bytes(b"\n".join(lines))
    with _quiet(), ct.Session.open(path, readonly=mode == "read") as s:
        texts = [m.text for m in s.build_context().messages]
        assert texts == ["big " + "x" * 100_000, "A", "B, a longer text", "C0", "C", "D"]
        if mode == "write":
            s.append_message(ct.Message.user("E"))
    if mode == "write":
        assert [m["content"] for m in seen(path)["context"]][-2:] == ["D", "E"]


def test_an_index_that_is_a_symlink_is_never_followed(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    make_session(path)
    other = tmp_path / "other.jsonl"
    make_session(other, turns=5)
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    INDEX_OF(path).unlink()
    os.symlink(INDEX_OF(other), INDEX_OF(path))  # a valid index, of another session
    expected_other = seen(other)
    view = seen(path)
    assert view["count"] != expected_other["count"]
    assert view == seen_without_index(path)
    INDEX_OF(path).unlink(missing_ok=True)
    os.symlink(victim, INDEX_OF(path))
    with ct.Session.open(path) as s:
        s.append_message(ct.Message.user("x"))
    assert victim.read_text() == "keep me"
    assert seen(path) == seen_without_index(path)


def test_an_index_that_is_a_fifo_never_hangs(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    make_session(path)
    expected = seen_without_index(path)
    INDEX_OF(path).unlink(missing_ok=True)
    os.mkfifo(INDEX_OF(path))
    code = textwrap.dedent(f"""
        import contextree as ct
        from contextree.storage import _index
        _index.INDEX_MIN_BYTES = 0
        for readonly in (True, False):
            with ct.Session.open({str(path)!r}, readonly=readonly) as s:
                print(len(s.branch()))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, check=True)
    assert out.stdout.split() == [str(len(expected["branch"]))] * 2


def test_a_writer_killed_mid_way_leaves_an_index_the_next_open_catches_up(
        tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    code = textwrap.dedent(f"""
        import os, contextree as ct
        from contextree.storage import _index
        _index.INDEX_MIN_BYTES = 0
        s = ct.Session.create({str(path)!r})
        for i in range(150):  # single appends write their index records 64 at a time
            s.append_message(ct.Message.user(f"m{{i}}"))
        with open({str(INDEX_OF(path))!r}, "r+b") as f:  # as if its last records were lost
            f.truncate(f.seek(0, 2) - 300)
        os.kill(os.getpid(), 9)
    """)
    proc = subprocess.run([sys.executable, "-c", code], timeout=60)
    assert proc.returncode == -signal.SIGKILL
    view = seen(path)
    assert view == seen_without_index(path)
    assert [m["content"] for m in view["context"]] == [f"m{i}" for i in range(150)]


def test_a_reader_beside_a_writer_sees_a_consistent_prefix(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    with ct.Session.create(path, durable=False) as s:
        s.append_message(ct.Message.user("m0"))
    writer = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import contextree as ct
        from contextree.storage import _index
        _index.INDEX_MIN_BYTES = 0
        with ct.Session.open({str(path)!r}, durable=False) as s:
            for i in range(1, 400):
                s.append_message(ct.Message.user(f"m{{i}}" + "x" * (i % 50)))
    """)])
    try:
        views = []
        while writer.poll() is None:
            s = ct.Session.open(path, readonly=True)
            views.append([m.content for m in s.build_context().messages])
            s.close()
    finally:
        writer.wait(timeout=60)
    final = [m["content"] for m in seen(path)["context"]]
    assert len(final) == 400
    for view in views:
        assert view == final[: len(view)]


# -- the property: through the index, exactly what a full read gives ---------------------------

_OPS = st.lists(st.one_of(
    st.tuples(st.just("append"), st.integers(0, 3)),
    st.tuples(st.just("move"), st.integers(0, 1000)),
    st.tuples(st.just("label"), st.integers(0, 1000)),
    st.tuples(st.just("name"), st.integers(0, 5)),
    st.tuples(st.just("foreign"), st.integers(0, 1000)),
    st.tuples(st.just("crash"), st.integers(1, 40)),
    st.tuples(st.just("reopen"), st.just(0)),
    st.tuples(st.just("drop_index"), st.just(0)),
    st.tuples(st.just("repair"), st.just(0)),
), min_size=1, max_size=30)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=_OPS)
def test_the_context_through_the_index_equals_a_full_read(tmp_path_factory: pytest.TempPathFactory,
                                                         ops: list[tuple[str, int]]) -> None:
    path = tmp_path_factory.mktemp("prop") / "s.jsonl"
    s = ct.Session.create(path, durable=False)
    ids = [s.append_message(ct.Message.user("root"))]
    foreign = 0
    try:
        for op, n in ops:
            if op == "append":
                ids.append(s.append_message(ct.Message.user(f"t{len(ids)}" + "y" * n * 7)))
            elif op == "move":
                s.move_to(ids[n % len(ids)])
            elif op == "label":
                s.set_label(ids[n % len(ids)], f"l{n % 3}")
            elif op == "name":
                s.set_name(f"name {n}")
            elif op in ("foreign", "crash", "repair", "drop_index"):
                s.close()
                if op == "foreign":
                    foreign += 1
                    eid = f"f{foreign}"
                    with open(path, "ab") as f:
                        f.write(raw_message(eid, ids[n % len(ids)], eid) + b"\n")
                    ids.append(eid)
                elif op == "crash":
                    with open(path, "ab") as f:
                        f.write(raw_message("torn", ids[-1], "t" * 50)[:n])
                elif op == "repair":
                    with _quiet():
                        ct.repair(path)
                else:
                    INDEX_OF(path).unlink(missing_ok=True)
                with _quiet():
                    s = ct.Session.open(path, durable=False)
            else:
                s.close()
                s = ct.Session.open(path, durable=False)
            assert seen(path) == seen_without_index(path)
    finally:
        s.close()


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """Without the warning a torn last line gives (the property tears some on purpose)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def test_ids_no_index_can_hold_leave_the_session_without_one(tmp_path: Path) -> None:
    # An id with a NUL in it (a hand-made or imported file): the index cannot hold it, so
    # the session is read whole each time, as small sessions are.
    path = tmp_path / "s.jsonl"
    make_session(path)
    with open(path, "ab") as f:
        f.write(raw_message("odd\x00id", None, "root of its own") + b"\n")
    assert seen(path) == seen_without_index(path)
    with ct.Session.open(path) as s:
        s.append_message(ct.Message.user("more"))
    assert seen(path) == seen_without_index(path)
    assert seen(path)["context"][-1]["content"] == "more"
    INDEX_OF(path).unlink(missing_ok=True)
    seen(path)  # a full read, which would write the index anew: it cannot
    assert not INDEX_OF(path).exists()


def test_single_appends_past_many_index_flushes_open_through_the_index(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "s.jsonl"
    with ct.Session.create(path) as s:
        for i in range(3 * _jsonl.TAIL_EVERY + 5):  # records flushed every TAIL_EVERY appends
            s.append_message(ct.Message.user(f"message {i}"))
    expected = seen_without_index(path)
    no_full_read(monkeypatch)
    assert seen(path) == expected and len(expected["context"]) == 3 * _jsonl.TAIL_EVERY + 5


def test_appends_after_a_last_line_without_its_newline_open_through_the_index(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "s.jsonl"
    ids = make_session(path)
    with open(path, "ab") as f:  # a whole last line without its newline: a writer adds one
        f.write(raw_message("foreign1", ids["tip_b"], "no newline after me"))
    with ct.Session.open(path) as s:
        for i in range(_jsonl.TAIL_EVERY + 3):
            s.append_message(ct.Message.user(f"after the gap {i}"))
    expected = seen_without_index(path)
    no_full_read(monkeypatch)
    assert seen(path) == expected
    assert expected["context"][-1]["content"] == f"after the gap {_jsonl.TAIL_EVERY + 2}"
