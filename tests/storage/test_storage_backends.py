"""The scheme table: which backend a target goes to, and the targets that are refused."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest
from typer.testing import CliRunner

import contextree as ct
from contextree.cli import app
from contextree.entries import AnyEntry, SessionHeader
from contextree.errors import InvalidArgument, SessionNotFound
from contextree.storage import Address, MemoryStorage, Storage, resolve
from contextree.storage import _backends as backends

CONNINFO = ["user=x dbname=y", "host=localhost port=5432 dbname=app",
            "dbname='my db' user=me password=s3cret"]


@pytest.fixture
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize("text", CONNINFO)
def test_a_conninfo_string_is_refused_and_creates_no_file(in_tmp: Path, text: str) -> None:
    for call in (ct.Session.create, ct.Session.open, ct.Session.open_or_create,
                 ct.Session.delete):
        with pytest.raises(InvalidArgument) as e:
            call(text)
        message = str(e.value)
        assert "conninfo" in message
        for form in ("path", "postgresql://", "#SESSION_ID", "Storage"):  # the accepted forms
            assert form in message
        assert "s3cret" not in message  # the password is not repeated
    assert list(in_tmp.iterdir()) == []


@pytest.mark.parametrize("target", ["foo://x", "FILE:///tmp/s.jsonl", "s3://bucket/key"])
def test_an_unknown_scheme_is_refused(in_tmp: Path, target: str) -> None:
    with pytest.raises(InvalidArgument) as e:
        ct.Session.create(target)
    scheme = target.partition("://")[0].lower()
    assert f"'{scheme}://'" in str(e.value) and "postgresql://" in str(e.value)
    assert "Storage" in str(e.value)
    assert list(in_tmp.iterdir()) == []


def test_paths_and_plain_names_are_files(in_tmp: Path) -> None:
    # A Path is a file whatever its name; a name with '=' that is no conninfo is one too.
    with ct.Session.create(in_tmp / "user=x dbname=y") as s:
        s.append_message(ct.Message.user("hi"))
    with ct.Session.create("notes=1.jsonl") as s:
        assert s.location == "notes=1.jsonl"
    assert sorted(p.name for p in in_tmp.iterdir()) == ["notes=1.jsonl", "user=x dbname=y"]
    assert resolve(in_tmp / "a").is_file and resolve("a.jsonl").is_file
    url = resolve("postgresql://u@h:5/db?sslmode=off#abc")
    assert (url.scheme, url.where, url.session_id) == ("postgresql", "postgresql://u@h:5/db"
                                                       "?sslmode=off", "abc")
    assert resolve("POSTGRES://h/db").session_id is None


def test_a_registered_scheme_is_routed_like_the_built_ins(
    in_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kept: dict[str, MemoryStorage] = {}

    class Named:
        """``mem://NAME``: process-wide in-memory sessions by name."""

        def address(self, target: str, scheme: str | None) -> Address:
            return Address(self, target.partition("://")[2], None, scheme)

        def open(self, address: Address, *, readonly: bool, durable: bool) -> Storage:
            if address.where not in kept:
                raise SessionNotFound("no such session", path=address.where)
            return kept[address.where]

        def create(self, address: Address, header: SessionHeader,
                   entries: Sequence[AnyEntry], *, durable: bool) -> Storage:
            kept[address.where] = MemoryStorage(header)
            return kept[address.where]

    monkeypatch.setattr(backends, "_BACKENDS", dict(backends._BACKENDS))
    backends.register_backend("mem", Named())
    first = ct.Session.open_or_create("mem://chat")
    first.append_message(ct.Message.user("hi"))
    again = ct.Session.open_or_create("mem://chat")
    assert again.storage is first.storage and len(again) == 1
    assert "mem://" in backends.accepted_forms()
    with pytest.raises(InvalidArgument):
        backends.register_backend("not a scheme", Named())


def test_the_cli_refuses_targets_of_no_accepted_form(in_tmp: Path) -> None:
    runner = CliRunner()
    for target in ("user=x dbname=y", "foo://x"):
        result = runner.invoke(app, ["tree", target])
        assert result.exit_code == 2, result.output
        assert "postgresql://" in result.output and "Traceback" not in result.output
    assert list(in_tmp.iterdir()) == []


def test_without_psycopg_files_work_and_postgres_names_the_extra(tmp_path: Path) -> None:
    code = (
        "import sys; sys.modules['psycopg'] = None\n"
        "import contextree.storage\n"
        "from contextree import Session\n"
        f"s = Session.create({str(tmp_path / 's.jsonl')!r}); s.close()\n"
        "try:\n    Session.open('postgresql://h/db#x')\n"
        "except ImportError as e:\n    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert "contextree[postgres]" in out
    assert (tmp_path / "s.jsonl").is_file()


MALFORMED_WITH_PASSWORDS = ["postgresql://admin:hunter2@[::1/db#s",
                            "postgresql://admin@[::1/app?password=hunter2#s",
                            "postgres://admin:hunter2@db.example/app?bogus=1#s"]


@pytest.mark.parametrize("url", MALFORMED_WITH_PASSWORDS)
def test_a_url_libpq_cannot_parse_is_never_quoted_with_its_password(url: str) -> None:
    """libpq quotes a URL it cannot parse whole; the error says what is wrong with it,
    with the password masked, from the library and from the command line."""
    pytest.importorskip("psycopg")
    for call in (ct.Session.open, ct.Session.create):
        with pytest.raises(ct.SessionError) as e:
            call(url)
        assert "hunter2" not in str(e.value) and "PostgreSQL" in str(e.value)
    runner = CliRunner()
    for args in (["ls", url.partition("#")[0]], ["tree", url], ["rm", url],
                 ["view", url.partition("#")[0], "-o", "page.html"]):
        out = runner.invoke(app, args, input="n\n")
        assert out.exit_code != 0 and "hunter2" not in out.output, out.output
