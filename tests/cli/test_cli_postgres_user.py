"""The command line on PostgreSQL as a new user tried it (issue 18): errors in the command
line's words, and ``ls`` saying the same times for a session in a file and in a database."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("psycopg")

import contextree as ct
from conformance import fresh_schema_url, postgres_error, postgres_skip_reason, postgres_url
from helpers import as_url

pytestmark = pytest.mark.postgres

# What a Python caller would type, never a command-line user.
PYTHON_WORDS = re.compile(r"\b\w+\(|\w+=(?:True|False)|\bSession\.|\bStorage\b|\w+Storage\b|"
                          r"\blist_sessions\b|\bcreate_schema\b")


@pytest.fixture
def url() -> Iterator[str]:
    """A URL to a schema of its own, with contextree's tables."""
    base = postgres_url()
    if postgres_error():
        pytest.fail(postgres_error())
    if base is None:
        pytest.skip(f"PostgreSQL backend NOT tested: {postgres_skip_reason()}")
    conninfo, drop = fresh_schema_url(base)
    try:
        yield as_url(conninfo)
    finally:
        drop()


def cli(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "contextree", *map(str, args)],
                          capture_output=True, text=True, timeout=120)


def test_errors_about_a_database_use_command_line_words(url: str, tmp_path: Path) -> None:
    before = cli("ls", url)  # no tables yet
    assert before.returncode == 1 and "`contextree db init URL`" in before.stderr
    assert not PYTHON_WORDS.search(before.stderr), before.stderr
    assert cli("db", "init", url).returncode == 0
    missing = f"{url}#nope"
    for args in (["tree", missing], ["show", missing], ["stats", missing], ["verify", missing],
                 ["label", missing, "x", "y"], ["compact", missing], ["rm", missing, "--yes"],
                 ["export", "openai-chat", missing, "-o", tmp_path / "o.json"],
                 ["fork", missing, "--at", "x", "-o", tmp_path / "f.jsonl"]):
        out = cli(*args)
        assert out.returncode == 1, (args, out.stderr)
        assert "no session 'nope'" in out.stderr and "`contextree ls URL`" in out.stderr
        assert not PYTHON_WORDS.search(out.stderr), (args, out.stderr)


def test_ls_gives_a_session_the_same_times_in_a_file_and_in_a_database(
        url: str, tmp_path: Path) -> None:
    assert cli("db", "init", url).returncode == 0
    path = tmp_path / "s.jsonl"
    with ct.Session.create(path) as s:
        s.append_message(ct.Message.user("hello"))
        s.append_message(ct.Message.assistant("hi"))
    copied = cli("import", "contextree", path, "-o", url)  # stored later than it was written
    assert copied.returncode == 0, copied.stderr
    (in_file,) = json.loads(cli("ls", tmp_path, "--json").stdout)
    (in_db,) = json.loads(cli("ls", url, "--json").stdout)
    assert in_db["id"] == in_file["id"]
    for key in ("created", "last_activity"):
        assert in_db[key] == in_file[key], key
    last = json.loads(path.read_text().splitlines()[-1])["timestamp"]
    assert in_file["last_activity"] == last
    shown = [re.findall(r"\d{4}-\d\d-\d\d \d\d:\d\d", cli("ls", where).stdout)
             for where in (str(tmp_path), url)]
    assert shown[0] == shown[1] and len(shown[0]) == 2
