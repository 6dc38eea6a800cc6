"""What a probe of the command line found: ``archive`` of a file named with a byte that is not
UTF-8 (a traceback; now archived and restored under its own name), ``view --serve --port``
out of range (a traceback; now a usage error), and ``search`` filters it could not read
(``--since yesterday``, ``--role usr``: "no entries match", exit 0; now a usage error)."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import zipfile
from pathlib import Path
from typing import Any

import pytest

from contextree import Message, OverflowStore, Session
from contextree.errors import InvalidArgument
from contextree.storage._describe import parse_utc_stamp, utc_stamp
from helpers import cli, one_line_error, run, run_json

BAD = os.fsdecode(b"a\xffb")  # the byte 0xff, kept by surrogateescape


# -- archive: a file name with a byte that is not UTF-8 ------------------------------------

def _bad_session(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A session named with an undecodable byte, its quarantine file, and a tool output it
    spilled into a store whose folder is named likewise: (session, store, spill)."""
    path = tmp_path / f"{BAD}.jsonl"
    store_dir = tmp_path / f"store{BAD}"
    store_dir.mkdir(mode=0o700)
    with Session.create(path, durable=False) as s:
        s.append_message(Message.user("hi"))
        s.append_message(Message.assistant("hello"))
        spill = OverflowStore(store_dir, gc_interval=None).save("a long output\n",
                                                                 session_id=s.id)
    Path(f"{os.fspath(path)}.quarantine").write_bytes(b"a line that was set aside\n")
    return path, store_dir, spill


def test_archive_of_an_undecodable_file_name_round_trips(tmp_path: Path) -> None:
    path, store, spill = _bad_session(tmp_path)
    quarantine = Path(f"{os.fspath(path)}.quarantine")
    before = {p: p.read_bytes() for p in (path, quarantine, spill)}
    packed = Path(f"{os.fspath(path)}.archive.zip")

    done = cli("archive", path, "--store", store)  # a new process, as a shell runs it
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr and done.stderr == ""
    assert "a\\udcffb.jsonl" in done.stdout  # the name shown as every command shows it
    assert packed.is_file() and not any(p.exists() for p in before)

    with zipfile.ZipFile(packed) as z:
        manifest = json.loads(z.read("manifest.json"))
    assert manifest["where"] == str(tmp_path / "a\\xffb.jsonl")  # as a session line writes it
    files = manifest["files"]
    assert files["session.jsonl"]["path"] == str(tmp_path / "a\\xffb.jsonl")
    exact = {name: base64.b64decode(meta["path_bytes"]) for name, meta in files.items()}
    assert exact["session.jsonl"] == os.fsencode(path)
    assert exact["quarantine"] == os.fsencode(quarantine)
    [spilled] = [name for name in files if name.startswith("spills/")]
    assert exact[spilled] == os.fsencode(spill)

    back = run_json("unarchive", packed, "--store", store)
    assert back["files"]["session.jsonl"] == str(tmp_path / "a\\udcffb.jsonl")
    assert {p: p.read_bytes() for p in before} == before  # every byte, under its own name
    assert not packed.exists()
    assert run_json("verify", path)["ok"]


def test_archive_in_process_names_the_undecodable_files_it_packed(tmp_path: Path) -> None:
    path, store, spill = _bad_session(tmp_path)
    report = run_json("archive", path, "--store", store)
    assert report["archive"] == str(tmp_path / "a\\udcffb.jsonl.archive.zip")
    assert report["files"]["session.jsonl"] == str(tmp_path / "a\\udcffb.jsonl")
    assert report["files"]["quarantine"] == str(tmp_path / "a\\udcffb.jsonl.quarantine")
    assert len(report["files"]) == 3 and not spill.exists()
    run("unarchive", f"{os.fspath(path)}.archive.zip", "--store", store)
    assert path.is_file() and spill.is_file()


def _meta(data: bytes, **extra: Any) -> dict[str, Any]:
    return {"path": "/x/s.jsonl", "mode": 0o600, "mtime_ns": 1_700_000_000_000_000_000,
            "size": len(data), "sha256": hashlib.sha256(data).hexdigest(), **extra}


@pytest.mark.parametrize("path_bytes", ["not base64!", base64.b64encode(b"/x/a\0b").decode(),
                                        base64.b64encode(b"/x/..").decode(), 7])
def test_unarchive_refuses_exact_bytes_that_name_no_file(tmp_path: Path,
                                                         path_bytes: object) -> None:
    header = (b'{"type":"session","id":"evil-1","created_at":"2026-12-03T15:20:01.071Z",'
              b'"version":1,"cwd":"/x","parent_session":null,"metadata":null}\n')
    packed = tmp_path / "s.jsonl.archive.zip"
    with zipfile.ZipFile(packed, "w") as z:
        z.writestr("session.jsonl", header)
        z.writestr("manifest.json", json.dumps({
            "format": "contextree-archive/1", "session_id": "evil-1", "origin": "file",
            "files": {"session.jsonl": _meta(header, path_bytes=path_bytes)}}))
    one_line_error(run("unarchive", packed, code=1), "no usable file name")
    assert packed.exists() and os.listdir(tmp_path) == ["s.jsonl.archive.zip"]


# -- view --serve --port --------------------------------------------------------------------

def _session(path: Path) -> Path:
    with Session.create(path, durable=False) as s:
        s.append_message(Message.user("hello world"))
        s.append_message(Message.assistant("hi"))
    return path


@pytest.mark.parametrize("port", ["-1", "65536", "99999"])
def test_view_port_out_of_range_is_a_usage_error(tmp_path: Path, port: str) -> None:
    path = _session(tmp_path / "s.jsonl")
    result = run("view", path, "--serve", "--port", port, code=2)
    assert "Traceback" not in result.stderr and result.stdout == ""
    assert "Invalid value for '--port'" in result.stderr
    assert ("65535" in result.stderr) if port != "-1" else ("0" in result.stderr)


@pytest.mark.parametrize("port", [0, 65535])
def test_view_port_takes_both_ends_of_the_range(tmp_path: Path, port: int,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    import contextree.view

    bound: list[int] = []

    class Server:  # records the port; serves nothing
        url = "http://127.0.0.1/x/0"

        def __init__(self, targets: object, render: object, *, port: int,
                     redact: bool) -> None:
            bound.append(port)

        def serve_forever(self) -> None:
            return None

        def close(self) -> None:
            return None

    monkeypatch.setattr(contextree.view, "ViewServer", Server)
    path = _session(tmp_path / "s.jsonl")
    assert "serving 1 session" in run("view", path, "--serve", "--port", str(port)).stdout
    assert bound == [port]


@pytest.mark.parametrize("port", [-1, 65536, 99999, True, "80"])
def test_view_server_refuses_a_port_out_of_range(port: object) -> None:
    from contextree.view import ViewServer

    with pytest.raises(InvalidArgument, match="0 to 65535"):
        ViewServer([], str, port=port)  # type: ignore[arg-type]


# -- search --since / --until / --role ------------------------------------------------------

@pytest.mark.parametrize(("option", "value"), [
    ("--since", "yesterday"), ("--since", "2026-13-45"), ("--since", ""),
    ("--since", "2026-12-01T25:00"), ("--until", "notadate"),
    ("--until", "0001-01-01T00:00+01:00")])
def test_search_refuses_a_time_that_is_not_iso(tmp_path: Path, option: str, value: str) -> None:
    _session(tmp_path / "s.jsonl")
    result = run("search", "hello", tmp_path, option, value, code=2)
    one_line_error(result, option, repr(value), "2026-12-01T09:30:00Z", "UTC")


@pytest.mark.parametrize("value", ["usr", "User", "", "message"])
def test_search_refuses_a_role_it_does_not_know(tmp_path: Path, value: str) -> None:
    _session(tmp_path / "s.jsonl")
    one_line_error(run("search", "hello", tmp_path, "--role", value, code=2),
                   "--role", repr(value), "user, assistant, tool, system, compaction, "
                   "branch_summary, custom")


def test_search_refuses_a_bad_filter_before_opening_anything(tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    one_line_error(run("search", "hello", missing, "--since", "soon", code=2), "--since")
    assert not missing.exists()


def test_search_filters_in_every_iso_form_still_find(tmp_path: Path) -> None:
    _session(tmp_path / "s.jsonl")

    def hits(*args: str) -> list[str]:
        return [h["role"] for h in run_json("search", "hello", tmp_path, *args)]

    assert hits() == ["user"]
    for since in ("2000-01-01", "2000-01-01T09:30", "2000-01-01 09:30:00Z",
                  "2000-01-01T09:30:00+02:00", "20000101"):
        assert hits("--since", since) == ["user"], since
        assert hits("--until", since) == [], since
    assert hits("--since", "9999-12-31") == []
    assert hits("--role", "user") == ["user"] and hits("--role", "assistant") == []


def test_a_stamp_beyond_the_calendar_in_utc_is_kept_as_it_is(tmp_path: Path) -> None:
    stamp = "0001-01-01T00:00+01:00"  # a year 0 in UTC: no datetime holds it
    assert utc_stamp(stamp) == stamp
    with pytest.raises(ValueError, match="outside the years 1-9999"):
        parse_utc_stamp(stamp)
    assert parse_utc_stamp("2026-12-01T10:00+02:00") == "2026-12-01T08:00:00.000Z"
    (tmp_path / "s.jsonl").write_bytes(
        b'{"type":"session","id":"old-1","created_at":"' + stamp.encode() + b'","version":1,'
        b'"cwd":"/x","parent_session":null,"metadata":null}\n'
        b'{"type":"message","id":"m1","parent_id":null,"timestamp":"' + stamp.encode() + b'",'
        b'"message":{"role":"user","content":"hello"}}\n')
    [listed] = run_json("ls", tmp_path)  # a traceback (OverflowError) before
    assert listed["created"] == stamp
    assert [h["entry_id"] for h in run_json("search", "hello", tmp_path)] == ["m1"]
