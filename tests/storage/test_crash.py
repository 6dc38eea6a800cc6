"""Crash safety: a writer killed with SIGKILL mid-loop loses nothing it acknowledged, and a
torn last line is quarantined (writable open) or skipped untouched (read-only open)."""

from __future__ import annotations

import base64
import random
import signal
import subprocess
import sys
import textwrap
import threading
import time
import warnings
from pathlib import Path

import orjson
import pytest

import contextree as ct
from helpers import cli, user_session

WRITER = textwrap.dedent("""
    import random, sys
    import contextree as ct
    path, seed = sys.argv[1], int(sys.argv[2])
    rng = random.Random(seed)
    s = ct.Session.open(path)  # durable: each append is synced before it returns
    print("ready", flush=True)
    while True:
        # mostly small entries, some large ones so that a kill can land mid-write
        size = rng.choice([10, 100, 1000, 200_000, 2_000_000])
        eid = s.append_message(ct.Message.user("é" + "x" * size))
        print(eid, flush=True)
""")


def run_and_kill(path: Path, seed: int) -> list[str]:
    """Start the writer, SIGKILL it after a short random delay; return acknowledged ids."""
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(path), str(seed)],
                            stdout=subprocess.PIPE)
    assert proc.stdout is not None
    assert proc.stdout.readline() == b"ready\n"
    out = [proc.stdout.readline()]  # one acknowledged entry first (a loaded machine is slow)
    reader = threading.Thread(target=lambda: out.append(proc.stdout.read()))  # type: ignore[union-attr]
    reader.start()
    time.sleep(random.Random(seed).uniform(0.05, 0.4))
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    reader.join()
    data = b"".join(out)
    # only whole lines were acknowledged; a last line without newline was not
    return [x.decode() for x in data.split(b"\n")[:-1]]


@pytest.mark.parametrize("seed", range(5))
def test_sigkilled_writer_loses_no_acknowledged_entry(tmp_path: Path, seed: int) -> None:
    path = tmp_path / "s.jsonl"
    with ct.Session.create(path, cwd="/") as s:
        first = s.append_message(ct.Message.user("before"))
    acked = run_and_kill(path, seed)
    assert acked, "the writer acknowledged nothing before it was killed"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ct.storage.TornLineWarning)
        s = ct.Session.open(path)
    with s:
        present = {e.id for e in s.storage.entries()}
        assert set(acked) <= present
        assert first in present
        # at most the entry being written is lost: one unacknowledged entry at most
        assert len(present - set(acked) - {first}) <= 1
        quarantine = Path(f"{path}.quarantine")
        records = quarantine.read_bytes().splitlines() if quarantine.exists() else []
        assert len(records) <= 1
        assert s.stats().quarantined_lines == len(records)
        after = s.append_message(ct.Message.user("after the crash"))
        assert s.get_entry(after).parent_id in present  # type: ignore[union-attr]
    with warnings.catch_warnings():
        warnings.simplefilter("error", ct.storage.TornLineWarning)  # nothing torn is left
        with ct.Session.open(path, readonly=True) as again:
            assert again.leaf_id == after
            assert set(acked) <= {e.id for e in again.storage.entries()}


# -- simulated torn tails ----------------------------------------------------------------------

TAILS = {
    "partial_line": b'{"type":"message","id":"torn","parent_id":null,"timest',
    "nul_filled": b"\0" * 4096,
    "partial_then_nuls": b'{"type":"mess' + b"\0" * 1000,
    "nuls_then_newline": b"\0" * 100 + b"\n",
    "partial_utf8": '{"type":"message","message":{"content":"é'.encode()[:-1],
}


@pytest.mark.parametrize("tail", list(TAILS))
def test_readonly_open_skips_torn_tail_without_touching_the_file(
    tmp_path: Path, tail: str
) -> None:
    path = tmp_path / "s.jsonl"
    ids = user_session(path)
    with open(path, "ab") as f:
        f.write(TAILS[tail])
    before = path.read_bytes()
    with pytest.warns(ct.storage.TornLineWarning, match=r"s\.jsonl:5"):
        s = ct.Session.open(path, readonly=True)
    with s:
        assert [e.id for e in s.branch()] == ids
        assert s.stats().quarantined_lines == 1  # reported, though nothing was moved
    assert path.read_bytes() == before
    assert not Path(f"{path}.quarantine").exists()


@pytest.mark.parametrize("tail", list(TAILS))
def test_writable_open_quarantines_torn_tail_and_continues(tmp_path: Path, tail: str) -> None:
    path = tmp_path / "s.jsonl"
    ids = user_session(path)
    good = path.read_bytes()
    with open(path, "ab") as f:
        f.write(TAILS[tail])
    with pytest.warns(ct.storage.TornLineWarning, match="quarantine"):
        s = ct.Session.open(path)
    with s:
        assert path.read_bytes() == good  # cut back to the last whole line
        assert [e.id for e in s.branch()] == ids
        records = [orjson.loads(x) for x in Path(f"{path}.quarantine").read_bytes().splitlines()]
        assert len(records) == 1
        assert records[0]["line"] == 5 and "torn" in records[0]["reason"]
        assert records[0]["text"].encode("utf-8", "replace").rstrip(b"\n")[:5] == (
            TAILS[tail].decode("utf-8", "replace").encode()[:5])
        assert s.stats().quarantined_lines == 1
        new = s.append_message(ct.Message.user("next"))
    with ct.Session.open(path) as s:
        assert [e.id for e in s.branch()] == [*ids, new]
        assert s.stats().quarantined_lines == 1


def test_corrupt_line_before_the_last_is_not_treated_as_torn(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    user_session(path)
    with open(path, "ab") as f:
        f.write(b'{"broken\n')
        f.write(orjson.dumps({"type": "session_info", "id": "z", "parent_id": None,
                              "timestamp": "t", "name": "n"}) + b"\n")
    with pytest.raises(ct.SessionError) as info:
        ct.Session.open(path, readonly=True)
    assert (info.value.code, info.value.line) == ("corrupt_line", 5)


def test_valid_last_line_without_newline_is_kept_and_the_next_append_ends_it(
    tmp_path: Path,
) -> None:
    path = tmp_path / "s.jsonl"
    ids = user_session(path)
    data = path.read_bytes()
    path.write_bytes(data[:-1])  # the last entry lost only its newline
    with warnings.catch_warnings():
        warnings.simplefilter("error", ct.storage.TornLineWarning)  # nothing is torn
        with ct.Session.open(path, readonly=True) as r:
            assert [e.id for e in r.branch()] == ids and r.health().torn_line is None
        assert path.read_bytes() == data[:-1]  # read-only: untouched
        with ct.Session.open(path) as s:
            assert [e.id for e in s.branch()] == ids
            assert path.read_bytes() == data[:-1]  # opening writes nothing
            new = s.append_message(ct.Message.user("next"))
            assert path.read_bytes().startswith(data)  # the newline came first
        with ct.Session.open(path) as s:
            assert [e.id for e in s.branch()] == [*ids, new]
    assert not Path(f"{path}.quarantine").exists()


@pytest.mark.parametrize(("last", "code"), [
    (b'{"type":"message","id":"zz","parent_id":null,"timestamp":"t"}', "invalid_entry"),
    (b'{"type":"custom","id":"zz","parent_id":"ghost","timestamp":"t","custom_type":"c"}',
     "missing_parent"),
    (b'[1, 2]', "invalid_entry"),
])
@pytest.mark.parametrize("newline", [True, False])
def test_complete_but_invalid_last_line_is_reported_as_what_it_is(
    tmp_path: Path, last: bytes, code: str, newline: bool
) -> None:
    path = tmp_path / "s.jsonl"
    user_session(path)
    with open(path, "ab") as f:
        f.write(last + (b"\n" if newline else b""))
    before = path.read_bytes()
    for readonly in (True, False):
        with pytest.raises(ct.SessionError) as info:
            ct.Session.open(path, readonly=readonly)
        assert (info.value.code, info.value.line) == (code, 5)
        assert "incomplete" not in str(info.value) and "torn" not in str(info.value)
    assert path.read_bytes() == before  # nothing was quarantined as if torn
    assert not Path(f"{path}.quarantine").exists()
    report = ct.repair(path)
    assert [n for n, _ in report.quarantined] == [5]
    with ct.Session.open(path) as s:
        assert len(s) == 3


WHOLE_BUT_NOT_JSON = {
    "latin1_byte": b'{"type":"message","id":"zz","parent_id":null,"timestamp":"t",'
                   b'"message":{"role":"user","content":"caf\xe9"}}',
    "nan": b'{"type":"custom","id":"zz","parent_id":null,"timestamp":"t",'
           b'"custom_type":"c","data":NaN}',
    "lone_surrogate": b'{"type":"message","id":"zz","parent_id":null,"timestamp":"t",'
                      b'"message":{"role":"user","content":"\\ud800"}}',
}


@pytest.mark.parametrize("last", list(WHOLE_BUT_NOT_JSON))
def test_a_whole_last_line_that_is_not_json_is_damage_not_a_torn_write(
        tmp_path: Path, last: str) -> None:
    """A last line with its newline and no zeros was written whole: it is reported as the
    corrupt line it is; a command that fails moves nothing out of the file; ``repair``
    keeps its exact bytes."""
    path = tmp_path / "s.jsonl"
    user_session(path)
    with open(path, "ab") as f:
        f.write(WHOLE_BUT_NOT_JSON[last] + b"\n")
    before = path.read_bytes()
    with warnings.catch_warnings():
        warnings.simplefilter("error", ct.storage.TornLineWarning)
        for readonly in (True, False):
            with pytest.raises(ct.SessionError) as info:
                ct.Session.open(path, readonly=readonly)
            assert (info.value.code, info.value.line) == ("corrupt_line", 5)
            assert "repair" in str(info.value) and "incomplete" not in str(info.value)
    failed = cli("label", path, "nosuch", "L")
    assert failed.returncode != 0 and "incomplete" not in failed.stderr
    assert path.read_bytes() == before and not Path(f"{path}.quarantine").exists()
    ct.repair(path)
    records = [orjson.loads(x) for x in Path(f"{path}.quarantine").read_bytes().splitlines()]
    kept = records[0].get("base64")
    raw = base64.b64decode(kept) if kept else records[0]["text"].encode()
    assert raw.rstrip(b"\n") == WHOLE_BUT_NOT_JSON[last]


def test_a_torn_line_that_is_not_utf8_is_quarantined_byte_for_byte(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    user_session(path)
    torn = b'{"type":"message","message":{"content":"caf\xe9 \xff'
    with open(path, "ab") as f:
        f.write(torn)
    with pytest.warns(ct.storage.TornLineWarning):
        ct.Session.open(path).close()
    (record,) = [orjson.loads(x) for x in Path(f"{path}.quarantine").read_bytes().splitlines()]
    assert base64.b64decode(record["base64"]) == torn and "\ufffd" in record["text"]


# -- a repair killed midway ------------------------------------------------------------------

REPAIRER = textwrap.dedent("""
    import sys
    import contextree as ct
    print("ready", flush=True)
    ct.repair(sys.argv[1])
    print("done", flush=True)
""")


@pytest.mark.parametrize("seed", range(6))
def test_sigkilled_repair_loses_nothing_and_leaves_no_partial_backup(
        tmp_path: Path, seed: int) -> None:
    path = tmp_path / "s.jsonl"
    with ct.Session.create(path, cwd="/") as s, s.batch():
        ids = [s.append_message(ct.Message.user(f"{i}" + "x" * 300_000)) for i in range(20)]
    lines = path.read_bytes().splitlines(keepends=True)
    lines.insert(5, lines[3])  # a duplicate: something for repair to quarantine
    original = b"".join(lines)
    path.write_bytes(original)
    proc = subprocess.Popen([sys.executable, "-c", REPAIRER, str(path)], stdout=subprocess.PIPE)
    assert proc.stdout is not None and proc.stdout.readline() == b"ready\n"
    time.sleep(random.Random(seed).uniform(0.0, 0.15))
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    now = path.read_bytes()
    for backup in tmp_path.glob("s.jsonl.bak-*"):  # a backup is whole, or not there at all
        assert backup.read_bytes() == original
    if now != original:
        with ct.Session.open(path, readonly=True) as r:  # replaced only by the whole repair
            assert [e.id for e in r.entries()] == ids
    ct.repair(path)  # finish (or redo) the job; it also clears the killed repair's temp file
    with ct.Session.open(path) as s:
        assert [e.id for e in s.entries()] == ids
    assert list(tmp_path.glob(".*.tmp")) == []


@pytest.mark.parametrize("whole", [False, True])
def test_a_huge_last_line_without_its_newline_is_read_where_it_lies(tmp_path: Path,
                                                                    whole: bool) -> None:
    # A last line of 16 MB without its newline, torn or whole: read in the load's own
    # buffer, not copied again and again (a 200 MB one took 1 GB to open read-only).
    import tracemalloc

    path = tmp_path / "s.jsonl"
    ids = user_session(path)
    text = "x" * 16_000_000
    line = orjson.dumps({"type": "message", "id": "big", "parent_id": ids[-1],
                         "timestamp": "2026-01-01T00:00:00Z",
                         "message": {"role": "user", "content": text}})
    with open(path, "ab") as f:
        f.write(line if whole else line[:-3])
    tracemalloc.start()
    try:
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            s = ct.Session.open(path, readonly=True)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    with s:
        branch = [e.id for e in s.branch()]
        assert branch == ([*ids, "big"] if whole else ids)
        assert any(issubclass(w.category, ct.storage.TornLineWarning) for w in seen) != whole
    # about 2x: the load's buffer (grown by doubling, to 32 MB) and what is made of the
    # line; before, 5x (four more copies of it)
    assert peak < 3.2 * len(line), f"{peak:,} bytes at the peak for a line of {len(line):,}"
