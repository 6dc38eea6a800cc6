"""JSONL storage: append-only lines, durability options, the writer lock, read-only access."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

import contextree as ct
from contextree.entries import to_dict


def lines(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines()


@pytest.fixture
def holder(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], Path, str]]:
    """A second process that holds a session open for writing until told to stop."""
    path = tmp_path / "s.jsonl"
    ct.Session.create(path, cwd="/").close()
    code = textwrap.dedent(f"""
        import sys
        import contextree as ct
        s = ct.Session.open({str(path)!r})
        eid = s.append_message(ct.Message.user("from the holder"))
        print(eid, flush=True)
        sys.stdin.readline()
        s.close()
        print("closed", flush=True)
    """)
    proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    eid = proc.stdout.readline().strip()
    try:
        yield proc, path, eid
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


def test_each_append_is_one_line_at_the_end(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    with ct.Session.create(path, cwd="/") as s:
        ids = [s.append_message(ct.Message.user(f"m{i}\nwith newline")) for i in range(5)]
        assert len(lines(path)) == 6  # written before close: appends are not buffered
    assert [orjson.loads(x)["id"] for x in lines(path)[1:]] == ids


def test_batch_writes_everything_at_the_end_of_the_block(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    with ct.Session.create(path, cwd="/") as s:
        with s.batch():
            ids = [s.append_message(ct.Message.user(f"m{i}")) for i in range(100)]
            with s.batch():  # nesting is fine
                ids.append(s.append_message(ct.Message.user("nested")))
            assert s.leaf_id == ids[-1]
            assert len(s.branch()) == 101  # visible in memory before it is written
        assert len(lines(path)) == 102
    with ct.Session.open(path) as s:
        assert [e.id for e in s.branch()] == ids


def test_non_durable_session_still_writes_every_line(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    with ct.Session.create(path, cwd="/", durable=False) as s:
        s.append_message(ct.Message.user("a"))
        assert len(lines(path)) == 2
    with ct.Session.open(path, durable=False) as s:
        assert len(s.branch()) == 1


def test_batch_on_memory_session_is_a_no_op() -> None:
    s = ct.Session.in_memory()
    with s.batch():
        a = s.append_message(ct.Message.user("a"))
    assert s.leaf_id == a


def test_second_writer_process_gets_locked_and_readers_see_entries(
    holder: tuple[subprocess.Popen[str], Path, str],
) -> None:
    proc, path, eid = holder
    with pytest.raises(ct.SessionError) as info:
        ct.Session.open(path)
    assert info.value.code == "locked"
    assert f"pid {proc.pid}" in str(info.value)
    with ct.Session.open(path, readonly=True) as reader:
        assert reader.leaf_id == eid
        assert reader.build_context().messages[0].text == "from the holder"
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write("\n")
    proc.stdin.flush()
    assert proc.stdout.readline().strip() == "closed"
    proc.wait()
    with ct.Session.open(path) as s:
        s.append_message(ct.Message.user("mine now"))


def test_lock_of_a_killed_writer_is_released(
    holder: tuple[subprocess.Popen[str], Path, str],
) -> None:
    proc, path, eid = holder
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    with ct.Session.open(path) as s:  # the stale lock info file does not block anyone
        assert s.leaf_id == eid
        s.append_message(ct.Message.user("after the crash"))


def test_readonly_open_changes_nothing_on_disk(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    with ct.Session.create(path, cwd="/") as s:
        s.append_message(ct.Message.user("a"))
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    with ct.Session.open(path, readonly=True) as r:
        r.build_context()
        r.stats()
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


def test_reader_sees_later_appends_on_reopen(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    with ct.Session.create(path, cwd="/") as w:
        w.append_message(ct.Message.user("a"))
        r1 = ct.Session.open(path, readonly=True)
        b = w.append_message(ct.Message.user("b"))
        r2 = ct.Session.open(path, readonly=True)
        assert len(r1.branch()) == 1  # a snapshot at open time
        assert r2.leaf_id == b
        r1.close()
        r2.close()


def test_blank_lines_are_ignored(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    with ct.Session.create(path, cwd="/") as s:
        a = s.append_message(ct.Message.user("a"))
    with open(path, "ab") as f:
        f.write(b"\n   \n")
    with ct.Session.open(path) as s:
        b = s.append_message(ct.Message.user("b"))
    with ct.Session.open(path, readonly=True) as s:
        assert [e.id for e in s.branch()] == [a, b]


def test_open_or_create(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    with ct.Session.open_or_create(path, cwd="/x") as s:
        a = s.append_message(ct.Message.user("a"))
        assert s.header.cwd == "/x"
    with ct.Session.open_or_create(path, cwd="/ignored") as s:
        assert s.leaf_id == a and s.header.cwd == "/x"


def test_directory_is_not_a_session(tmp_path: Path) -> None:
    with pytest.raises(ct.errors.InvalidArgument) as info:
        ct.Session.open(tmp_path, readonly=True)
    assert info.value.code == "invalid_argument"


def test_appending_a_duplicate_or_parentless_entry_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    with ct.Session.create(path, cwd="/") as s:
        a = s.append_message(ct.Message.user("a"))
        size = path.stat().st_size
        dup = ct.entries.MessageEntry(a, None, "2026-01-01T00:00:00.000Z", message=ct.Message.user("x"))
        with pytest.raises(ct.SessionError) as info:
            s.append(dup)
        assert info.value.code == "duplicate_id"
        orphan = ct.entries.MessageEntry("new", "ghost", "2026-01-01T00:00:00.000Z",
                                 message=ct.Message.user("x"))
        with pytest.raises(ct.SessionError) as info:
            s.append(orphan)
        assert info.value.code == "missing_parent"
        leaf = ct.entries.LeafEntry("lf", a, "2026-01-01T00:00:00.000Z", target_id="ghost")
        with pytest.raises(ct.SessionError) as info:
            s.append(leaf)
        assert info.value.code == "missing_parent"
        assert path.stat().st_size == size  # nothing was written
    mem = ct.Session.in_memory()
    with pytest.raises(ct.SessionError) as info:
        mem.append(orphan)
    assert info.value.code == "missing_parent"


# -- the loader's block boundaries (tiny read blocks force every edge case) -------------------


def build_varied(path: Path) -> list[bytes]:
    with ct.Session.create(path, cwd="/") as s:
        a = s.append_message(ct.Message.user("short"))
        s.append_message(ct.Message.tool("x" * 5000 + "é\n" * 100, tool_call_id="c"))
        s.set_label(a, "lbl")
        s.move_to(a)
        s.append_custom("ext", {"k": ["v"] * 50})
    return path.read_bytes().splitlines(keepends=True)


@pytest.mark.parametrize("chunk", [1, 7, 64, 333, 4096])
def test_tiny_read_blocks_load_the_same_tree(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunk: int
) -> None:
    path = tmp_path / "s.jsonl"
    build_varied(path)
    with ct.Session.open(path, readonly=True) as s:
        expected = [to_dict(e) for e in s.storage.entries()]
        leaf = s.leaf_id
    monkeypatch.setattr("contextree.storage._loading.CHUNK", chunk)
    with ct.Session.open(path) as s:
        assert [to_dict(e) for e in s.storage.entries()] == expected
        assert s.leaf_id == leaf


@pytest.mark.parametrize("chunk", [1, 16, 50, 100, 200, 1000, 1 << 20])
def test_error_lines_are_exact_at_any_block_boundary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunk: int
) -> None:
    path = tmp_path / "s.jsonl"
    good = build_varied(path)
    unknown = orjson.dumps({"type": "future", "id": "u1", "parent_id": None,
                            "timestamp": "t"}) + b"\n"
    # header, 6 entries, a blank line, an unknown type, a corrupt line, then a good one
    body = [*good, b"\n", unknown, b'{"type":"mess\n',
            orjson.dumps({"type": "session_info", "id": "z", "parent_id": None,
                          "timestamp": "t", "name": "n"}) + b"\n"]
    path.write_bytes(b"".join(body))
    monkeypatch.setattr("contextree.storage._loading.CHUNK", chunk)
    with pytest.raises(ct.SessionError) as info:
        ct.Session.open(path, readonly=True)
    assert (info.value.code, info.value.line) == ("corrupt_line", len(good) + 3)


@pytest.mark.parametrize("chunk", [1, 50, 4096])
def test_torn_tail_is_found_at_any_block_size(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunk: int
) -> None:
    path = tmp_path / "s.jsonl"
    good = build_varied(path)
    with open(path, "ab") as f:
        f.write(b'{"type":"message","id":"t')
    monkeypatch.setattr("contextree.storage._loading.CHUNK", chunk)
    with pytest.warns(ct.storage.TornLineWarning, match=rf"s\.jsonl:{len(good) + 1}:"):
        s = ct.Session.open(path)
    with s:
        assert path.read_bytes() == b"".join(good)
        assert len(s.storage) == len(good) - 1


def test_failed_write_leaves_no_partial_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "s.jsonl"
    with ct.Session.create(path, cwd="/") as s:
        a = s.append_message(ct.Message.user("a"))
        before = path.read_bytes()
        real_write = os.write

        def half_then_enospc(fd: int, data: bytes) -> int:
            real_write(fd, bytes(data)[: len(data) // 2])
            raise OSError(28, "No space left on device")

        monkeypatch.setattr("contextree.storage._jsonl.os.write", half_then_enospc)
        with pytest.raises(ct.SessionError) as info:
            s.append_message(ct.Message.user("b" * 1000))
        assert info.value.code == "storage"
        assert path.read_bytes() == before  # cut back to the last whole line
        assert s.leaf_id == a and len(s.storage) == 1
        monkeypatch.undo()
        c = s.append_message(ct.Message.user("c"))
    with ct.Session.open(path) as s:
        assert [e.id for e in s.branch()] == [a, c]
