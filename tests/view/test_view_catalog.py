"""``view --serve`` over a catalog of sessions (a directory, a PostgreSQL database): an index
of its sessions with their names redacted, each session's page, all under one random token,
and nothing outside the catalog reachable."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from viewer_sample import SECRET, sample_session
from viewer_serving import Serve, ServeCli, http_get

from contextree import Message, Session
from contextree.storage import open_catalog
from helpers import cli

GITHUB = "ghp_" + "Zq8mT3xYb7Rk2Lw9Vc4Nd6Hf1Jg5Ps0Ua3Ei"  # the shape of a GitHub token


def catalog_dir(root: Path) -> dict[str, str]:
    """Three sessions under ``root`` (one in a subdirectory), one named with a secret;
    returns their ids by file name."""
    ids: dict[str, str] = {}
    sample_session(root / "calc.jsonl")
    (root / "sub").mkdir()
    with Session.create(root / "sub" / "deploy.jsonl") as s:
        s.append_message(Message.user(f"deploy with {GITHUB}"))
        s.set_name(f"deploy {SECRET}")
    with Session.create(root / "notes.jsonl") as s:
        s.append_message(Message.user("take notes"))
        s.set_name("meeting <b>notes</b>")
    (root / "other.jsonl").write_text("not a session\n")
    for path in root.rglob("*.jsonl"):
        if path.name != "other.jsonl":
            with Session.open(path, readonly=True) as s:
                ids[path.name] = s.id
    return ids


def test_the_index_lists_the_catalog_with_names_redacted(tmp_path: Path, serve: Serve) -> None:
    ids = catalog_dir(tmp_path)
    server = serve(open_catalog(tmp_path))
    base = server.url
    assert re.fullmatch(rf"http://127\.0\.0\.1:\d+/{re.escape(server.token)}/", base)
    status, index, headers = http_get(base)
    assert status == 200 and "default-src 'none'" in headers["Content-Security-Policy"]
    assert "<script" not in index and SECRET not in index
    assert "deploy [REDACTED:aws-key:1]" in index
    assert "meeting &lt;b&gt;notes&lt;/b&gt;" in index  # escaped, not markup
    assert "3 sessions" in index and "1 other files not listed" in index
    for sid in ids.values():
        assert f'href="s/{sid}"' in index
    status, page, headers = http_get(base + f"s/{ids['deploy.jsonl']}")
    assert status == 200 and 'id="ct-data"' in page
    assert GITHUB not in page and SECRET not in page and "[REDACTED:" in page
    assert "script-src 'sha256-" in headers["Content-Security-Policy"]
    status, page, _ = http_get(base + f"s/{ids['calc.jsonl']}")
    assert status == 200 and "calc fix" in page


def test_only_the_catalogs_sessions_by_their_exact_id_are_served(tmp_path: Path, serve: Serve) -> None:
    ids = catalog_dir(tmp_path / "cat")
    outside = tmp_path / "outside.jsonl"
    sample_session(outside)
    with Session.open(outside, readonly=True) as s:
        outside_id = s.id
    server = serve(open_catalog(tmp_path / "cat"))
    base = server.url
    sid = ids["calc.jsonl"]
    host = base.split(server.token)[0]
    for wrong in (host, host + "x" + server.token + "/", base + "s/" + sid[:6],
                  base + "s/" + outside_id, base + "0", base + "s/", base + "s/../0",
                  base + "s/%2e%2e%2fcalc", base + "s/" + str(outside),
                  host + server.token + "/s/" + sid + "/../../etc/passwd"):
        assert http_get(wrong)[0] == 404, wrong


def test_a_session_added_while_serving_is_listed_on_reload(tmp_path: Path, serve: Serve) -> None:
    catalog_dir(tmp_path)
    base = serve(open_catalog(tmp_path)).url
    assert "3 sessions" in http_get(base)[1]
    with Session.create(tmp_path / "late.jsonl") as s:
        s.append_message(Message.user("hello"))
        s.set_name("arrived late")
        late = s.id
    status, index, _ = http_get(base)
    assert status == 200 and "4 sessions" in index and "arrived late" in index
    assert http_get(base + f"s/{late}")[0] == 200


def test_no_redact_lists_names_as_stored_and_says_so(tmp_path: Path, serve: Serve) -> None:
    catalog_dir(tmp_path)
    index = http_get(serve(open_catalog(tmp_path), redact=False).url)[1]
    assert f"deploy {SECRET}" in index and "NOT REDACTED" in index


def test_cli_serves_a_directory_and_refuses_it_without_serve(tmp_path: Path,
                                                             serve_cli: ServeCli) -> None:
    ids = catalog_dir(tmp_path)
    r = cli("view", tmp_path)
    assert r.returncode == 2 and "--serve serves them all" in r.stderr
    r = cli("view", "--serve", tmp_path, tmp_path / "calc.jsonl")
    assert r.returncode == 2 and "not both" in r.stderr
    line, url = serve_cli(tmp_path)
    assert "the 3 sessions of" in line, line
    index = http_get(url)[1]
    assert "deploy [REDACTED:aws-key:1]" in index and SECRET not in index
    status, page, _ = http_get(url + f"s/{ids['deploy.jsonl']}")
    assert status == 200 and GITHUB not in page


@pytest.mark.postgres
def test_a_postgresql_catalog_is_served_like_a_directory(tmp_path: Path, serve: Serve) -> None:
    pytest.importorskip("psycopg")
    from conformance import fresh_schema_url
    from helpers import as_url, require_postgres

    conninfo, drop = fresh_schema_url(require_postgres())
    try:
        url = as_url(conninfo)
        assert cli("db", "init", url).returncode == 0
        source = tmp_path / "calc.jsonl"
        sample_session(source)
        with Session.open(source) as stored, Session.create(url) as s:
            for entry in stored.entries():
                s.append(entry)
            s.set_name(f"pg {SECRET}")
            sid = s.id
        base = serve(open_catalog(url)).url
        status, index, _ = http_get(base)
        assert status == 200 and "pg [REDACTED:aws-key:1]" in index and SECRET not in index
        status, page, _ = http_get(base + f"s/{sid}")
        assert status == 200 and "Attempt 7:" in page and SECRET not in page
        assert http_get(base + f"s/{sid[:5]}")[0] == 404
    finally:
        drop()
