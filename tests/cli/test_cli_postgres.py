"""The command line on PostgreSQL URLs: ``db init``, text output, the errors a new user hit."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from urllib.parse import urlsplit, urlunsplit

import pytest

pytest.importorskip("psycopg")

import contextree as ct
from conformance import fresh_schema_url
from helpers import as_url, cli, require_postgres

pytestmark = pytest.mark.postgres


@pytest.fixture
def empty_url() -> Iterator[str]:
    """A URL to a schema with no contextree tables yet."""
    conninfo, drop = fresh_schema_url(require_postgres())
    try:
        yield as_url(conninfo)
    finally:
        drop()


def one_line(out: subprocess.CompletedProcess[str], code: int) -> str:
    assert out.returncode == code, (out.stdout, out.stderr)
    lines = out.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), out.stderr
    return lines[0]


@pytest.mark.slow
def test_db_init_then_every_read_command_in_text(empty_url: str) -> None:
    before = one_line(cli("ls", empty_url), 1)
    assert "`contextree db init URL`" in before and "create_schema" not in before
    init = cli("db", "init", empty_url)
    assert init.returncode == 0 and "schema version" in init.stdout, init.stderr
    again = json.loads(cli("db", "init", empty_url, "--json").stdout)  # idempotent
    assert again["schema_version"] >= 1
    with ct.Session.create(empty_url) as s:
        first = s.append_message(ct.Message.user("hello \x1b]0;title\x07"))
        s.append_message(ct.Message.assistant("hi"))
        s.set_label(first, "start")
        s.set_name("pg session")
        target = s.location
    for args in (["stats", target], ["tree", target], ["show", target, "--context"],
                 ["verify", target], ["ls", empty_url]):
        out = cli(*args)
        assert out.returncode == 0 and out.stderr == "", (args, out.stderr)
        assert "\x1b" not in out.stdout
    stats = cli("stats", target).stdout
    assert "pg session" in stats and "No such file" not in stats
    assert "\\x1b]0;title\\x07" in cli("show", target).stdout


def test_postgres_errors_are_one_line(empty_url: str) -> None:
    cli("db", "init", empty_url)
    parts = urlsplit(empty_url)
    missing_db = urlunsplit(parts._replace(path="/no_such_database_here")) + "#x"
    line = one_line(cli("tree", missing_db), 1)
    assert "no_such_database_here" in line and "pool" not in line  # psycopg's log line is not printed
    repair = one_line(cli("repair", f"{empty_url}#abc"), 2)
    assert f"{empty_url}#abc" in repair  # the URL as given, not mangled into a path
    assert "postgresql:/" + "/" in repair
    one_line(cli("db", "init", f"{empty_url}#abc"), 2)
    one_line(cli("db", "init", "/tmp/not-a-url"), 2)
    one_line(cli("fork", f"{empty_url}#nope", "--at", "x"), 1)
