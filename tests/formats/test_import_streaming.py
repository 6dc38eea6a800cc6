"""Imports of big files stream: the same session as the whole-file import made, in bounded
memory.

The digests below are of sessions imported before the readers streamed (at 41a03f5, the real Claude Code files and pi's fixtures too), with
what differs from run to run (the import time and path, ids the import makes up) replaced by
placeholders. The memory test imports a file several times larger than the address space it
is allowed above the interpreter's, so a reader that held the file would fail.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from contextree.errors import SessionError
from contextree.formats import import_session
from helpers import ROOT

DATA = ROOT / "tests" / "data" / "formats"
REAL = DATA / "real" / "claude_code"


def _bench() -> Any:
    spec = importlib.util.spec_from_file_location("bench_imports",
                                                  ROOT / "bench" / "bench_imports.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_imports"] = module
    spec.loader.exec_module(module)
    return module


def pi_file(path: Path, size: int) -> Path:
    """A generated pi session with the odd cases too: an entry before its parent, an orphan,
    a branch and an entry of an unknown type."""
    bench = _bench()
    lines = [json.dumps(obj) for obj in bench.pi_lines(size, 3)]
    lines += [
        json.dumps({"type": "message", "id": "late-child", "parentId": "late-parent",
                    "timestamp": bench.TS, "message": {"role": "user", "content": "child"}}),
        json.dumps({"type": "message", "id": "late-parent", "parentId": "00000002",
                    "timestamp": bench.TS, "message": {"role": "user", "content": "parent"}}),
        json.dumps({"type": "message", "id": "orphan", "parentId": "nowhere",
                    "timestamp": bench.TS, "message": {"role": "user", "content": "lost"}}),
        json.dumps({"type": "someday", "id": "odd", "parentId": "orphan", "timestamp": bench.TS,
                    "x": [1, 2]}),
        json.dumps({"type": "message", "id": "back", "parentId": "00000004",
                    "timestamp": bench.TS, "message": {"role": "user", "content": "again"}}),
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


def claude_file(path: Path, size: int) -> Path:
    """A generated Claude Code session, with a title, a summary and a mode record."""
    bench = _bench()
    lines = [json.dumps(obj) for obj in bench.claude_code_lines(size, 3)]
    lines += [json.dumps({"type": "custom-title", "customTitle": "big one", "sessionId": "s"}),
              json.dumps({"type": "mode", "mode": "normal"})]
    path.write_text("\n".join(lines) + "\n")
    return path


def digest(session_file: Path, source: bytes) -> str:
    """The session file's lines with the import time, the source path and the ids that are
    not in the source replaced by placeholders, hashed."""
    rows = [json.loads(line) for line in session_file.read_text().splitlines()]
    origin = rows[0]["metadata"]["imported_from"]
    origin["imported_at"] = origin["path"] = "-"
    text = json.dumps(rows, sort_keys=True)
    made_up = [r["id"] for r in rows[1:] if r["id"].encode() not in source]
    for n, eid in enumerate(made_up):
        text = text.replace(json.dumps(eid), f'"made-up-{n}"')
    text = re.sub(r'"(path|file)": "[^"]*"', r'"\1": "-"', text)
    return hashlib.sha256(text.encode()).hexdigest()


def imported_digest(fmt: str, src: Path, tmp_path: Path) -> str:
    out = tmp_path / f"{src.parent.name}-{src.name}.contextree.jsonl"
    import_session(fmt, src, out, durable=False).close()
    return digest(out, src.read_bytes())


# pi: since issue 25 the header also says which pi wrote the file (`imported_from.pi`); with
# that key left out the digests are those of before (checked when they were updated).
BEFORE = {
    "pi": "79c8d6b6b040ae95c4a6dd154f748403d703d19d4cec446cbc08476d8888ad53",
    "claude-code": "f8120467d0adac759c4ba7e2e57798923ba425cf6a71c4aaa062fc93c8f9f677",
}
# Updated for issue 25 (the compactions hold the model's summary): compact_auto,
# compact_manual and compact_reactive.
BEFORE_FIXTURES = {
    ("pi", "pi_v1.jsonl"): "c806e291c375f42c02163af04bbfd1acb440d20bedd21e0a43f32934b37d2bcd",
    ("pi", "pi_v3.jsonl"): "dcf2b9083edf7c2130fb532e76f7349fbee583953c45a6a9fe6b214bfdc0f925",
    ("pi", "pi_written_by_pi.jsonl"):
        "866bd27b1c91f42b6dc07ce124509473369fb5d8acfefcdaa19811f9ce6cbbbf",
    ("claude-code", "real/claude_code/compact_auto/session-1.jsonl"):
        "5dcc94521657236d9b2a9d66d3165acd7f753a4c8582c0cc03863216e18bf26d",
    ("claude-code", "real/claude_code/compact_manual/session-1.jsonl"):
        "02f94e5a3ad89a52c33a80ca7a4a88c747121a64ca965a243cb248faf01082ea",
    ("claude-code", "real/claude_code/compact_reactive/session-1.jsonl"):
        "3a00c79c3396a5d66f0ba0ca6e374a284d536a94db8b424a779c770b6b178d1f",
    ("claude-code", "real/claude_code/resume/session-1.jsonl"):
        "7c3fc3c40fa678e44be6b748860235bbcdcdb78ae3475b9ee3dfcb30dab34226",
    ("claude-code", "real/claude_code/resume/session-2.jsonl"):
        "9d21958819c7ddb44789e17c510b3c2110784bd10eaf6cd617a7c80239c131bc",
    ("claude-code", "real/claude_code/simple/session-1.jsonl"):
        "f2e22305a75afb2c57e878b8ea0491c854357cb23af08731752ecf0170c76b75",
    ("claude-code", "real/claude_code/subagent/session-1.jsonl"):
        "c2730680cb9af3a12b14fed8762453a944b9f504d0652b1229024ef7efadf6a8",
    ("claude-code", "real/claude_code/tools/session-1.jsonl"):
        "bdaaac7b91725c0a5edbfd05eefe0eb3d5d96f8f68fd6d016538a59ffff1c571",
}


@pytest.mark.parametrize("fmt", ["pi", "claude-code"])
def test_a_big_import_is_the_session_the_whole_file_import_made(fmt: str,
                                                                  tmp_path: Path) -> None:
    make = pi_file if fmt == "pi" else claude_file
    src = make(tmp_path / f"{fmt}.jsonl", 3_000_000)
    assert src.stat().st_size > 2_500_000
    assert imported_digest(fmt, src, tmp_path) == BEFORE[fmt]


@pytest.mark.parametrize(("fmt", "name"), sorted(BEFORE_FIXTURES))
def test_fixtures_import_as_before(fmt: str, name: str, tmp_path: Path) -> None:
    assert imported_digest(fmt, DATA / name, tmp_path) == BEFORE_FIXTURES[fmt, name]


def test_every_fixture_is_compared() -> None:
    found = {("pi", p.name) for p in DATA.glob("pi_*.jsonl")}
    found |= {("claude-code", str(p.relative_to(DATA))) for p in REAL.glob("*/session-*.jsonl")}
    assert found == set(BEFORE_FIXTURES)


CHILD = r"""
import resource, sys
from contextree.formats import import_session, get_format
get_format(sys.argv[1])  # the format modules are loaded before the limit
soft, hard = resource.getrlimit(resource.RLIMIT_AS)
with open("/proc/self/statm") as f:
    mapped = int(f.read().split()[0]) * resource.getpagesize()
resource.setrlimit(resource.RLIMIT_AS, (mapped + int(sys.argv[4]), hard))
import_session(sys.argv[1], sys.argv[2], sys.argv[3], durable=False).close()
print("ok")
"""


@pytest.mark.parametrize("fmt", ["pi", "claude-code"])
def test_a_big_import_runs_in_bounded_memory(fmt: str, tmp_path: Path) -> None:
    make = pi_file if fmt == "pi" else claude_file
    src = make(tmp_path / f"{fmt}.jsonl", 60_000_000)
    allowed = 60 << 20  # as much as the file: holding it and the session made of it fails
    env = {"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"}
    run = subprocess.run([sys.executable, "-c", CHILD, fmt, str(src),
                          str(tmp_path / "out.jsonl"), str(allowed)],
                         capture_output=True, text=True, env=env)
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stderr[-2000:]


@pytest.mark.parametrize("fmt", ["pi", "claude-code"])
def test_a_streamed_import_leaves_nothing_else_beside_it(fmt: str, tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    make = pi_file if fmt == "pi" else claude_file
    src = make(tmp_path / "src" / f"{fmt}.jsonl", 3_000_000)
    out = tmp_path / "out"
    import_session(fmt, src, out / "s.jsonl", durable=False).close()
    assert sorted(p.name for p in out.iterdir()) == ["s.jsonl", "s.jsonl.index"]


@pytest.mark.parametrize("fmt", ["pi", "claude-code"])
def test_a_bad_line_late_in_a_big_file_leaves_no_session(fmt: str, tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    make = pi_file if fmt == "pi" else claude_file
    src = make(tmp_path / "src" / f"{fmt}.jsonl", 3_000_000)
    with open(src, "a") as f:
        f.write('{"type": "message", "id": 7}\n' if fmt == "pi" else '{"type": "user"}\n')
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(SessionError) as err:
        import_session(fmt, src, out / "s.jsonl", durable=False)
    lines = len(src.read_text().splitlines())
    assert f":{lines}:" in str(err.value)
    assert list(out.iterdir()) == []


def test_a_streamed_import_never_replaces_a_file(tmp_path: Path) -> None:
    src = pi_file(tmp_path / "pi.jsonl", 100_000)
    dest = tmp_path / "taken.jsonl"
    dest.write_text("precious\n")
    with pytest.raises(SessionError) as err:
        import_session("pi", src, dest)
    assert err.value.code == "exists"
    assert dest.read_text() == "precious\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pi.jsonl", "taken.jsonl"]


def test_an_entry_the_storage_refuses_is_named_in_the_new_file(tmp_path: Path) -> None:
    src = pi_file(tmp_path / "pi.jsonl", 100_000)
    with open(src, "a") as f:
        f.write(json.dumps({"type": "custom", "id": "huge", "parentId": None,
                            "customType": "t", "data": {"n": 2**70}}) + "\n")
    dest = tmp_path / "s.jsonl"
    with pytest.raises(SessionError) as err:
        import_session("pi", src, dest)
    assert err.value.path == str(dest)
    assert "entry 'huge' cannot be stored" in str(err.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pi.jsonl"]


def test_lines_pi_appends_during_an_import_wait_for_the_next(tmp_path: Path) -> None:
    from contextree.formats import _pi

    src = pi_file(tmp_path / "pi.jsonl", 100_000)
    imported = _pi.read(src)
    assert imported.stream is not None
    with open(src, "a") as f:  # pi goes on writing between the two passes
        f.write(json.dumps({"type": "message", "id": "new", "parentId": "newer",
                            "timestamp": "2026-01-01T00:00:00.000Z",
                            "message": {"role": "user", "content": "later"}}) + "\n")
    ids = [e.id for e in imported.stream()]
    assert "new" not in ids and ids[-1] == imported.leaf_id == "back"
