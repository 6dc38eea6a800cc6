"""PostgreSQL URLs wherever a session file is accepted: Session, fork, the CLI, import/export."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("psycopg")

import contextree as ct
from contextree.storage.postgres import create_schema
from helpers import as_url, cli, require_postgres

pytestmark = pytest.mark.postgres


@pytest.fixture(scope="module")
def url() -> str:
    u = require_postgres()
    create_schema(u)
    return as_url(u)


def test_session_create_open_and_fork_by_url(url: str, tmp_path: Path) -> None:
    with ct.Session.create(url, cwd="/w") as s:
        first = s.append_message(ct.Message.user("hi"))
        s.append_message(ct.Message.assistant("hello"))
        s.set_label(first, "start")
        s.move_to(first, summary="went elsewhere")
        where, leaf = s.location, s.leaf_id
    assert "#" in where
    with ct.Session.open(where) as again:
        assert again.leaf_id == leaf and again.label_of(first) == "start"
        copy = again.fork(tmp_path / "fork.jsonl", at=first)
        assert next(e.id for e in copy.branch()) == first
        copy.close()


def test_a_url_without_a_session_id_is_a_clear_error(url: str) -> None:
    with pytest.raises(ct.errors.InvalidArgument, match="#SESSION_ID"):
        ct.Session.open(url)
    out = cli("stats", url)
    assert out.returncode == 2 and "#SESSION_ID" in out.stderr


@pytest.mark.slow
def test_jsonl_to_postgres_and_back_is_byte_identical(url: str, tmp_path: Path) -> None:
    assert cli("demo", "--dir", str(tmp_path / "demo")).returncode == 0
    original = tmp_path / "demo" / "session.jsonl"
    session_id = json.loads(original.read_text().splitlines()[0])["id"]
    copied = cli("import", "contextree", str(original), "-o", url)
    assert copied.returncode == 0, copied.stderr
    target = f"{url}#{session_id}"
    assert session_id in cli("ls", url).stdout
    assert cli("verify", target).returncode == 0
    tree = cli("tree", target, "--json")
    assert tree.returncode == 0, tree.stderr
    stats = cli("stats", target)
    assert stats.returncode == 0, stats.stderr
    size = original.stat().st_size  # the same JSON lines, in the database
    assert any(line.split() == ["size:", *human(size).split()] for line in stats.stdout.splitlines())
    back = tmp_path / "back.jsonl"
    exported = cli("export", "contextree", target, "-o", str(back), "--no-redact")  # as stored
    assert exported.returncode == 0, exported.stderr
    assert back.read_bytes() == original.read_bytes()
    gone = cli("rm", "--yes", target)
    assert gone.returncode == 0, gone.stderr
    assert session_id not in cli("ls", url).stdout
    assert cli("verify", target).returncode == 1


def human(n: int) -> str:
    from contextree.cli.output import human_size

    return human_size(n)


def test_session_tree_on_a_url_resumes_the_same_session(url: str) -> None:
    from contextree.models import ScriptedModel

    target = f"{url}#tree-{id(url)}"
    model = ScriptedModel(["Nice to meet you.", "Your name is Nathan."])
    agent = ct.agent().use(ct.runtime.SessionTree, path=target).run(model)
    agent.start("My name is Nathan.")
    agent.start("What's my name?")
    assert "My name is Nathan." in [m.text for m in model.calls[1]]
    with pytest.raises(ct.errors.InvalidArgument, match="#SESSION_ID"):
        ct.Session.open_or_create(url)
