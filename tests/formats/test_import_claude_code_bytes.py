"""A Claude Code import writes the same bytes as before the importer was made faster.

The digests below are of the session files ``import_session("claude-code", ...)`` wrote at
2e98cc5 (before the import appended its lines already encoded), byte for byte: the ids the
import makes up and the clock are fixed (``new_id`` counts, ``now`` is a constant), and the
only text replaced is the checkout's path (where the fixtures are). They cover every real
Claude Code file under ``tests/data/formats/real`` (2.1.197 and 2.1.332), sub-agent
transcripts imported as roots and as sessions of their own, and a generated file big enough
to be read through the streaming path with an index beside it.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from pathlib import Path

import pytest
from test_import_streaming import claude_file

from contextree.errors import SessionError
from contextree.formats import import_session
from helpers import ROOT

DATA = ROOT / "tests" / "data" / "formats"
REAL = sorted(p.relative_to(DATA).as_posix()
              for p in DATA.glob("real/claude_code*/*/session-*.jsonl"))


def _fixed(monkeypatch: pytest.MonkeyPatch) -> None:
    counter = itertools.count(1)
    monkeypatch.setattr("contextree.formats._base.new_id", lambda: f"made{next(counter):04d}")
    for module in ("contextree.formats._base", "contextree.formats._claude_code"):
        monkeypatch.setattr(f"{module}.now", lambda: "2026-02-03T04:05:06.007Z")


def _digest(*files: Path, where: Path) -> str:
    h = hashlib.sha256()
    for f in files:
        data = f.read_bytes().replace(str(ROOT).encode(), b"ROOT")
        h.update(data.replace(str(where).encode(), b"TMP"))
    return h.hexdigest()


BEFORE = {
    "claude_code.jsonl":
        "88fbb6a08c109c190957827ef4577b673aeeaaced1ca45030c8af8ed5123daba",
    "real/claude_code/compact_auto/session-1.jsonl":
        "42287a4d5220be91abf77a596876c52c326cc687a6ed26ceb9e459b903e5b305",
    "real/claude_code/compact_manual/session-1.jsonl":
        "db38e8e8d20c93e5ca292eb2d795a0fba763f0c95425c423b8eb7720bedaea20",
    "real/claude_code/compact_reactive/session-1.jsonl":
        "0edfaf2c0c89ae577250d2eb3d5f42961e65226890810a31484592cba69544ce",
    "real/claude_code/resume/session-1.jsonl":
        "1fa273b342022a0d7444562bdbcd3f05100390688c21479bea31d29f3d0a90fe",
    "real/claude_code/resume/session-2.jsonl":
        "b5b7c7b655b3c270f1df4959d13ef5580b68d150213201fe33536831f8513b12",
    "real/claude_code/simple/session-1.jsonl":
        "3923b9435b5bffc6328428e42737df71b5a0b8528d289f960dedce696cdbb3d9",
    "real/claude_code/subagent/session-1.jsonl":
        "816af962db117138d3c1fd6455443d7a2752b19d6a2c8ff5fc7f9052213acedf",
    "real/claude_code/tools/session-1.jsonl":
        "063d0c334ea258bc69b34262a09b78d523bb1dd8b44b9c0711b93be71b04968d",
    "real/claude_code_2.1.332/attachments/session-1.jsonl":
        "206a644b34ea6085d1b77ebd25bf2d0f4993e5707822d043511b8d59146b0e3f",
    "real/claude_code_2.1.332/compact_auto/session-1.jsonl":
        "29d3c9b3a56b50bbe3990d7855dd64e35e0e4fcb36d79fe20b467786fb12c64b",
    "real/claude_code_2.1.332/compact_manual/session-1.jsonl":
        "3a65ef80de7e1b4b9110a2268537d49436306f7e7c49a2edee46073605b7c64c",
    "real/claude_code_2.1.332/resume/session-1.jsonl":
        "4f92ce7d9eb7e364b4aa8ba9031f124382126732e3ed377689aeb3fea789c531",
    "real/claude_code_2.1.332/resume/session-2.jsonl":
        "8c37020f32a9000550e99249c5fcf298d4c1f31396c55378892f964fdda51915",
    "real/claude_code_2.1.332/simple/session-1.jsonl":
        "d0c1a132833aa45f5eda06f893e6635541cd699bb310341e5648041e93743b83",
    "real/claude_code_2.1.332/subagent/session-1.jsonl":
        "df65510e8c39db8f7c2bb722cf2c229370ee7227ed845c7947a9bca6f0377450",
    "real/claude_code_2.1.332/tools/session-1.jsonl":
        "d3b59725a7caa3b1a8a94444cb5d5c44fdea7c56a215002fbbc25950b919c4f5",
    "claude_code with sub-agents":
        "2d3cd49ad7ad8129377cdb257d6ccc87e256fde5d55c346c480d8f168e6aaa87",
    "claude_code_2.1.332 with sub-agents":
        "788f4d011db145e638697e1550564491db5d98cfc4d25b12591f0a559a60bd9e",
    "generated":
        "b76c590dfe7c756d02be0049e3cbaf4645a26bc98a574870469c0c1aab327eb4",
}


@pytest.mark.parametrize("name", ["claude_code.jsonl", *REAL])
def test_the_import_writes_the_bytes_it_wrote_before(name: str, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    _fixed(monkeypatch)
    out = tmp_path / "s.jsonl"
    import_session("claude-code", DATA / name, out, durable=False).close()
    assert _digest(out, where=tmp_path) == BEFORE[name]


@pytest.mark.parametrize("version", ["claude_code", "claude_code_2.1.332"])
def test_sub_agents_as_sessions_write_the_bytes_they_wrote_before(
        version: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fixed(monkeypatch)
    src = DATA / "real" / version / "subagent" / "session-1.jsonl"
    out = tmp_path / "s.jsonl"
    import_session("claude-code", src, out, durable=False, with_subagents=True).close()
    files = sorted(tmp_path.glob("s*.jsonl"))
    assert len(files) == 2
    assert _digest(*files, where=tmp_path) == BEFORE[f"{version} with sub-agents"]


def test_a_big_generated_import_writes_the_bytes_it_wrote_before(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fixed(monkeypatch)
    src = claude_file(tmp_path / "big.jsonl", 3_000_000)
    out = tmp_path / "s.jsonl"
    import_session("claude-code", src, out, durable=False).close()
    assert (tmp_path / "s.jsonl.index").exists()  # big enough for the streaming path's index
    assert _digest(out, where=tmp_path) == BEFORE["generated"]


def test_a_line_the_storage_refuses_still_fails_the_import_by_name(tmp_path: Path) -> None:
    lines = (DATA / "real" / "claude_code" / "simple" / "session-1.jsonl").read_text().splitlines()
    last = json.loads(lines[-1])
    last["huge"] = 2**70  # kept in the entry's records: no session line may hold it
    src = tmp_path / "src.jsonl"
    src.write_text("\n".join([*lines[:-1], json.dumps(last)]) + "\n")
    dest = tmp_path / "out" / "s.jsonl"
    with pytest.raises(SessionError) as err:
        import_session("claude-code", src, dest)
    assert err.value.path == str(dest) and "outside the 64-bit range" in str(err.value)
    assert list(dest.parent.iterdir()) == []
