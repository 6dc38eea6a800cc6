"""The leftovers of issue 18: one flat-log probe for the runtime and the CLI, the CLI's
replacing writes through ``atomic_write``, and PostgreSQL's ``expected_leaf`` default is
``msgspec.UNSET``."""

from __future__ import annotations

import inspect
import json
import os
import stat
import uuid
from pathlib import Path

import msgspec
import pytest
from typer.testing import CliRunner

import contextree as ct
from contextree.cli import app
from contextree.entries import MessageEntry, SessionHeader, now
from contextree.errors import LeafConflict
from contextree.models import ScriptedModel
from contextree.runtime import SessionLog, is_flat_log
from contextree.storage import postgres as pg
from contextree.storage.postgres import PostgresStorage

runner = CliRunner()


def brute_source(path: Path, *texts: str) -> Path:
    path.write_text("".join(json.dumps({"role": "user", "content": t}) + "\n" for t in texts))
    return path


def entry(eid: str, parent: str | None) -> MessageEntry:
    return MessageEntry(eid, parent, now(), message=ct.Message.user(eid))


# -- the flat log: one probe, in the runtime, that the CLI uses ------------------------------

def test_is_flat_log_tells_a_session_log_from_a_session_file(tmp_path: Path) -> None:
    log = tmp_path / "brute.jsonl"
    agent = ct.agent().use(SessionLog, path=str(log)).run(ScriptedModel(["hello"]))
    agent.start("hi")
    assert is_flat_log(log)
    with ct.Session.create(tmp_path / "s.jsonl") as s:
        s.append_message(ct.Message.user("hi"))
    assert not is_flat_log(tmp_path / "s.jsonl")
    torn = tmp_path / "torn.jsonl"
    torn.write_text('not json\n{"role": "user", "content": "x"}\n')
    assert is_flat_log(torn)  # a bad first line does not hide the messages after it
    (tmp_path / "empty.jsonl").write_text("")
    assert not is_flat_log(tmp_path / "empty.jsonl")
    assert not is_flat_log(tmp_path / "missing.jsonl")
    # The command line takes the same decision: a flat log is checked as one.
    shown = runner.invoke(app, ["verify", str(log)])
    assert shown.exit_code == 0 and "flat message log, 2 messages" in shown.stdout
    assert "flat message log" not in runner.invoke(app, ["verify", str(tmp_path / "s.jsonl")]
                                                   ).stdout


# -- replacing a file with --force: the library's file, put in place by atomic_write ----------

def test_force_replaces_the_file_whole_and_leaves_nothing_beside_it(tmp_path: Path) -> None:
    out = tmp_path / "out" / "s.jsonl"
    out.parent.mkdir()
    first = runner.invoke(app, ["import", "brute", str(brute_source(tmp_path / "a.jsonl", "a")),
                                "-o", str(out)])
    assert first.exit_code == 0, first.output
    mode = stat.S_IMODE(out.stat().st_mode)
    again = runner.invoke(app, ["import", "brute", str(brute_source(tmp_path / "b.jsonl", "b1",
                                                                      "b2")),
                                "-o", str(out), "--force"])
    assert again.exit_code == 0, again.output
    with ct.Session.open(out, readonly=True) as s:
        assert [m.text for m in s.build_context().messages] == ["b1", "b2"]
    assert stat.S_IMODE(out.stat().st_mode) == mode
    assert sorted(os.listdir(out.parent)) == ["s.jsonl"]  # no temp file, no sidecar left


def test_a_failed_replacement_leaves_the_old_file_as_it_was(tmp_path: Path) -> None:
    out = tmp_path / "out" / "s.jsonl"
    out.parent.mkdir()
    assert runner.invoke(app, ["import", "brute", str(brute_source(tmp_path / "a.jsonl", "a")),
                               "-o", str(out)]).exit_code == 0
    before = out.read_bytes()
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"role": "user", "content": "ok"}\n{"role": \n')
    failed = runner.invoke(app, ["import", "brute", str(bad), "-o", str(out), "--force"])
    assert failed.exit_code == 1 and f"{bad}:2:" in failed.stderr
    assert out.read_bytes() == before
    assert sorted(os.listdir(out.parent)) == ["s.jsonl"]


# -- PostgreSQL: msgspec's UNSET, not a sentinel of its own ----------------------------------

def test_postgres_append_leaves_expected_leaf_unset_with_msgspec_unset() -> None:
    default = inspect.signature(PostgresStorage.append).parameters["expected_leaf"].default
    assert default is msgspec.UNSET
    assert not hasattr(pg, "UNSET")  # one UNSET, msgspec's


@pytest.mark.postgres
def test_postgres_append_with_unset_checks_nothing_and_follows_the_leaf() -> None:
    from conformance import postgres_error, postgres_skip_reason, postgres_url

    url = postgres_url()
    if postgres_error():
        pytest.fail(postgres_error() or "")
    if url is None:
        pytest.skip(f"PostgreSQL backend NOT tested: {postgres_skip_reason()}")
    a = PostgresStorage.create(url, SessionHeader(id=str(uuid.uuid4()), created_at=now()), [])
    b = PostgresStorage.open(url, a.session_id)
    try:
        a.append(entry("r", None))
        b.append(entry("s", "r"), expected_leaf=msgspec.UNSET)
        a.append(entry("t", "r"))  # a saw r as the leaf; s came meanwhile
        assert a.get("t").parent_id == "s"  # type: ignore[union-attr]  # re-parented, no check
        with pytest.raises(LeafConflict):
            b.append(entry("u", "s"), expected_leaf="s")  # a check, and the leaf is t
    finally:
        b.close()
        a.close()
