"""``ls`` on big files: bounded memory, a close entry count, rows that survive any name."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import orjson

from contextree import Message, Session
from contextree.cli.output import PLAIN_WIDTH
from contextree.cli.terminal import width_of
from contextree.entries import SessionHeader, encode_line, now
from contextree.storage._describe import COUNT_WHOLE, SCAN_BYTES
from helpers import run, run_json


def write_big(path: Path, megabytes: int, *, name_at_start: str | None = None,
              line_bytes: int = 48 * 1024) -> int:
    """A session of big message lines written directly (fast); returns its entry count."""
    text = ("log line with some words in it\n" * (line_bytes // 31))[:line_bytes]
    count = 0
    with open(path, "wb") as f:
        f.write(encode_line(SessionHeader(id="big", created_at=now(), cwd="/w")))
        parent = None
        if name_at_start is not None:
            f.write(orjson.dumps({"type": "session_info", "id": "n0", "parent_id": None,
                                  "timestamp": now(), "name": name_at_start}) + b"\n")
            parent, count = "n0", 1
        while f.tell() < megabytes << 20:
            eid = f"e{count}"
            f.write(orjson.dumps({"type": "message", "id": eid, "parent_id": parent,
                                  "timestamp": now(),
                                  "message": {"role": "tool", "content": text,
                                              "tool_call_id": "c"}}) + b"\n")
            parent, count = eid, count + 1
    return count


PEAK = textwrap.dedent("""
    import json, resource, sys
    from pathlib import Path
    from contextree.storage._describe import describe
    describe(Path(sys.argv[1] + ".small"))  # warm up: imports and first allocations
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    listing = describe(Path(sys.argv[1]))
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"growth_kb": after - before, "entries": listing.entries}))
""")


def test_ls_reads_a_big_file_in_bounded_memory(tmp_path: Path) -> None:
    path = tmp_path / "big.jsonl"
    count = write_big(path, 96, line_bytes=8192)
    write_big(Path(str(path) + ".small"), 1)
    out = subprocess.run([sys.executable, "-c", PEAK, str(path)], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    figures = json.loads(out.stdout)
    # Reading a 96 MB file whole (or mapping it) would grow the peak by about that much.
    assert figures["growth_kb"] < 24 * 1024, figures
    assert abs(figures["entries"] - count) <= count * 0.1, (figures, count)


def test_ls_counts_exactly_what_it_reads_and_estimates_the_rest(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    count = write_big(path, (SCAN_BYTES + COUNT_WHOLE >> 20) + 8, name_at_start="set long ago",
                      line_bytes=2048)
    [listed] = run_json("ls", tmp_path)
    assert not listed["entries_exact"]
    assert abs(listed["entries"] - count) <= count * 0.05
    assert listed["name"] is None and listed["name_exact"] is False  # not searched that far
    row = run("ls", tmp_path).stdout.splitlines()[1].split()
    assert "?" in row and f"≈{listed['entries']}" in row
    small = tmp_path / "small"
    small.mkdir()
    exact = write_big(small / "s.jsonl", (SCAN_BYTES + COUNT_WHOLE >> 20) - 4,
                      name_at_start="early name")
    [listed] = run_json("ls", small)
    assert listed["entries_exact"] and listed["entries"] == exact
    assert listed["name"] == "early name" and listed["name_exact"]


def test_ls_rows_survive_any_name(tmp_path: Path) -> None:
    names = {"nl.jsonl": "first line\nsecond line\r\nthird", "long.jsonl": "n" * 5000,
             "wide.jsonl": "中文" * 100}
    for file, name in names.items():
        with Session.create(tmp_path / file) as s:
            s.append_message(Message.user("hi"))
            s.set_name(name)
    text = run("ls", tmp_path).stdout
    lines = text.splitlines()
    assert len(lines) == 1 + len(names)  # one row per session
    assert all(width_of(line) <= PLAIN_WIDTH + 60 for line in lines)
    assert "first line\\nsecond line\\r\\nthird" in text
    listed = {Path(x["path"]).name: x["name"] for x in run_json("ls", tmp_path)}
    assert listed == names  # --json keeps the names whole


def test_ls_of_a_file_is_a_usage_error(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    with Session.create(path) as s:
        s.append_message(Message.user("hi"))
    result = run("ls", path, code=2)
    assert "not a directory" in result.stderr and "no such directory" not in result.stderr
