"""The viewer and the readable exports without a browser: the page's safety (escaped data,
the policy's hashes), redaction on by default, one branch or the whole tree, the command
line (``view``, ``view --serve``, ``export markdown|html``) and its errors."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
from pathlib import Path

import pytest
from viewer_sample import HOSTILE, RETRIES, SECRET, hostile_session, sample_session
from viewer_serving import Serve, ServeCli, http_get

from contextree import Message, Session
from contextree.formats import export_session
from contextree.view import export_html, export_markdown, read_view, view_html
from contextree.view._page import script_json
from helpers import cli


@pytest.fixture
def sample(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    path = tmp_path / "calc.jsonl"
    return path, sample_session(path)


def _scripts(page: str) -> list[str]:
    return re.findall(r"<script[^>]*>(.*?)</script>", page, re.S)


def test_the_data_block_cannot_be_closed_by_the_session() -> None:
    data = {"s": "</script><!-- <script> & \u2028\u2029 '\"", "k": ["<b>"]}
    text = script_json(data)
    assert not set(text) & {"<", ">", "&", "\u2028", "\u2029"}
    assert json.loads(text) == data


def test_the_policy_allows_exactly_the_page_script_and_style(sample: tuple[Path, dict[str, str]]) -> None:
    path, _ = sample
    with Session.open(path) as s:
        page = view_html(s)
    csp = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', page)
    assert csp is not None
    policy = csp.group(1).replace("&#x27;", "'")
    script = _scripts(page)[-1]
    style = re.search(r"<style>(.*?)</style>", page, re.S)
    assert style is not None

    def digest(text: str) -> str:
        return base64.b64encode(hashlib.sha256(text.encode()).digest()).decode()

    assert policy.startswith("default-src 'none';")
    assert f"script-src 'sha256-{digest(script)}';" in policy
    assert f"style-src 'sha256-{digest(style.group(1))}';" in policy
    assert "img-src data:;" in policy and "unsafe" not in policy
    assert "http://" not in page.replace("http://www.w3.org/2000/svg", "") and "//cdn" not in page


def test_a_hostile_session_stays_inside_the_data_block(tmp_path: Path) -> None:
    path = tmp_path / "hostile.jsonl"
    hostile_session(path)
    with Session.open(path) as s:
        page = view_html(s)
        md = export_markdown(s)
        static = export_html(s, whole=True)
    head = page.split('id="ct-data">')[0]
    assert page.count("<script") == 2 and "<img" not in head and "&lt;img src=x" in head
    data = page.split('id="ct-data">', 1)[1].split("</script>", 1)[0]
    assert "<" not in data and json.loads(data)["entries"][0]["c"][0]["s"] == HOSTILE[0]
    assert "<script" not in static and "<img src=x" not in static and "javascript:" not in \
        static.replace("(javascript:alert", "")
    assert "onerror=\"alert" not in static
    assert "</script><script>" in md  # markdown keeps text as written; GitHub sanitizes it


def test_images_only_as_safe_data_urls(tmp_path: Path) -> None:
    path = tmp_path / "hostile.jsonl"
    hostile_session(path)
    with Session.open(path) as s:
        view = read_view(s)
    parts = [p for r in view.data["entries"] for p in r.get("c", ())]
    assert [p for p in parts if p["k"] == "img"] == []  # svg, a URL, data that is not base64
    assert sum("image not shown" in p.get("s", "") for p in parts) == 3


def test_redaction_is_on_by_default_and_off_says_so(sample: tuple[Path, dict[str, str]]) -> None:
    path, _ = sample
    with Session.open(path) as s:
        red, raw = view_html(s), view_html(s, redact=False)
        md, md_raw = export_markdown(s), export_markdown(s, redact=False)
    assert SECRET not in red and "[REDACTED:" in red and "Redacted: 1 secret" in red
    assert SECRET in raw and "NOT REDACTED" in raw
    assert SECRET not in md and "[REDACTED:" in md
    assert SECRET in md_raw and "NOT REDACTED" in md_raw
    assert SECRET in path.read_text()  # the stored session is never changed


def test_one_branch_or_the_whole_tree(sample: tuple[Path, dict[str, str]]) -> None:
    path, ids = sample
    with Session.open(path) as s:
        one = export_markdown(s)
        whole = export_markdown(s, whole=True)
        third = export_markdown(s, at=s.children(ids["ask"])[3].id)
    assert one.count("Attempt ") == 1 and f"Attempt {RETRIES - 1}:" in one
    assert all(f"Attempt {i}:" in whole for i in range(RETRIES))
    assert f"branch 2 of {RETRIES}" in whole
    assert "Attempt 3:" in third and f"Attempt {RETRIES - 1}:" not in third
    assert "Done: `add()` fixed" in one and "Done: `add()` fixed" not in third


def test_the_readable_formats_are_in_the_format_table(sample: tuple[Path, dict[str, str]],
                                                       tmp_path: Path) -> None:
    path, _ = sample
    with Session.open(path) as s:
        md = export_session("markdown", s, tmp_path / "out.md")
        page = export_session("html", s, tmp_path / "out.html")
    assert md.read_text().startswith("# calc fix") and SECRET not in md.read_text()
    text = page.read_text()
    assert "<script" not in text and "script-src" not in text
    assert "default-src &#x27;none&#x27;" in text
    assert '<span class="k">def</span>' in text or "def</span>" in text  # pygments ran
    assert 'rel="noopener noreferrer nofollow"' in text


def test_cli_view_writes_one_file_beside_the_session(sample: tuple[Path, dict[str, str]]) -> None:
    path, _ = sample
    r = cli("view", path)
    assert r.returncode == 0, r.stderr
    page = path.with_suffix(".html")
    assert f"wrote {page}" in r.stdout and "redacted 1 secret (aws-key 1)" in r.stdout
    assert SECRET not in page.read_text()
    again = cli("view", path)
    assert again.returncode != 0 and "--force" in again.stderr
    raw = cli("view", path, "--no-redact", "--force", "-o", path.with_name("raw.html"))
    assert raw.returncode == 0 and "not redacted" in raw.stderr
    assert "NOT REDACTED" in path.with_name("raw.html").read_text()
    assert SECRET in path.with_name("raw.html").read_text()


def test_a_file_name_that_is_not_utf8_is_shown_escaped(tmp_path: Path, serve: Serve) -> None:
    """A name with the byte 0xff (kept by surrogateescape) is in the page and the server's
    index as the command line shows it, ``\\udcff``."""
    path = tmp_path / os.fsdecode(b"a\xffb.jsonl")
    with Session.create(path, durable=False) as s:
        s.append_message(Message.user("hi"))
    out = tmp_path / "page.html"
    r = cli("view", path, "-o", out)
    assert r.returncode == 0, r.stderr
    data = json.loads(_scripts(out.read_text())[0])
    assert data["session"]["location"] == str(tmp_path / "a\\udcffb.jsonl")
    beside = cli("view", path)  # the default page, beside the session, named likewise
    assert beside.returncode == 0 and (tmp_path / os.fsdecode(b"a\xffb.html")).is_file()
    server = serve([str(path)])
    status, index, _ = http_get(server.url.removesuffix("0"))
    assert status == 200 and "a\\udcffb.jsonl" in index
    assert http_get(server.url)[0] == 200


@pytest.mark.parametrize(("args", "says"), [
    (["view", "postgresql://127.0.0.1/db#abc"], "-o FILE"),
    (["view", "{a}", "{a}", "-o", "{dir}/x.html"], "-o names one file"),
    (["view", "{a}", "--serve", "-o", "{dir}/x.html"], "give one"),
    (["view", "{dir}/missing.jsonl"], "missing.jsonl"),
    (["export", "pi", "{a}", "--all"], "keeps the whole tree anyway"),
    (["export", "openai", "{a}", "--all"], "holds one branch"),
    (["view", "{a}", "--no-redact", "--redact-pattern", "x"], "contradict"),
    (["export", "markdown", "{a}", "--all", "--branch", "diagnosis"], "give one of them"),
    (["export", "markdown", "{a}", "--branch", "nosuchentry"], "no entry"),
])
def test_cli_errors_say_what_to_do(sample: tuple[Path, dict[str, str]], args: list[str],
                                   says: str) -> None:
    path, _ = sample
    argv = [a.format(a=path, dir=path.parent) for a in args]
    r = cli(*argv)
    assert r.returncode != 0 and says in r.stderr, r.stderr
    assert not path.with_suffix(".html").exists()


def test_cli_export_markdown_and_html(sample: tuple[Path, dict[str, str]]) -> None:
    path, _ = sample
    r = cli("export", "markdown", path, "--all")
    assert r.returncode == 0, r.stderr
    out = path.with_name("calc.md")
    assert f"-> {out}; redacted 1 secret" in r.stdout and "Redacted: 1 secret" in out.read_text()
    assert f"Attempt {RETRIES - 1}:" in out.read_text() and "Attempt 0:" in out.read_text()
    one = cli("export", "html", path, "--branch", "diagnosis", "-o", "-")
    assert one.returncode == 0 and "Found it" in one.stdout and "Now run" not in one.stdout
    assert SECRET not in one.stdout
    raw = cli("export", "md", path, "--no-redact", "-o", "-")
    assert SECRET in raw.stdout and "NOT REDACTED" in raw.stdout and "not redacted" in raw.stderr
    custom = cli("export", "md", path, "--redact-pattern", r"Attempt \d+", "-o", "-")
    assert "Attempt 3" not in custom.stdout and "[REDACTED:custom:" in custom.stdout


def test_a_markdown_export_holds_no_escape_sequence_a_terminal_would_run(tmp_path: Path) -> None:
    """``cat`` of an exported Markdown file shows a tool output's OSC 52 (clipboard), title
    and clear-screen sequences as text, and keeps the lines and tabs as they were."""
    from contextree import Message

    path = tmp_path / "esc.jsonl"
    with Session.create(path) as s:
        s.append_message(Message.user("look:\x1b]52;c;ZWNobyBoaQ==\x07 done"))
        s.append_message(Message.assistant("title\x1b]0;pwned\x07\x1b[2J\r\nline two\tcol"))
    out = tmp_path / "esc.md"
    r = cli("export", "markdown", path, "-o", out)
    assert r.returncode == 0, r.stderr
    text = out.read_bytes().decode()  # as written: no newline translation
    assert "\x1b" not in text and "\x07" not in text
    assert "look:\\x1b]52;c;ZWNobyBoaQ==\\x07 done" in text
    assert "\\x1b[2J\r\nline two\tcol" in text  # a CRLF and a tab stay as they are


def test_the_server_serves_only_its_sessions_under_its_token(
        sample: tuple[Path, dict[str, str]], serve: Serve) -> None:
    path, _ = sample
    other = path.with_name("other.jsonl")
    sample_session(other)
    server = serve([str(path), str(other)])
    host, port = server.httpd.server_address[:2]
    assert host == "127.0.0.1"
    base = f"http://127.0.0.1:{port}/{server.token}/"
    status, index, _ = http_get(base)
    assert status == 200 and str(other) in index and "<script" not in index
    status, page, _ = http_get(base + "1")
    assert status == 200 and 'id="ct-data"' in page and SECRET not in page
    for wrong in (f"http://127.0.0.1:{port}/", f"http://127.0.0.1:{port}/x{server.token}/0",
                  base + "2", base + "../0", base + "0/../../etc/passwd"):
        assert http_get(wrong)[0] == 404, wrong


def test_cli_view_serve_prints_a_url_that_works(sample: tuple[Path, dict[str, str]],
                                                serve_cli: ServeCli) -> None:
    path, _ = sample
    _, url = serve_cli(path)
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+/[\w-]+/0", url), url
    status, page, _ = http_get(url)
    assert status == 200 and "calc fix" in page and SECRET not in page


@pytest.mark.postgres
def test_cli_view_and_serve_a_postgresql_session(tmp_path: Path, serve: Serve) -> None:
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
            target = s.location
        out = tmp_path / "pg.html"
        r = cli("view", target, "-o", out)
        assert r.returncode == 0, r.stderr
        page = out.read_text()
        assert "calc fix" in page and SECRET not in page and "Attempt 7:" in page
        status, served, _ = http_get(serve([target]).url)
        assert status == 200 and "Attempt 7:" in served and SECRET not in served
    finally:
        drop()


def test_texts_redacted_many_at_a_time_come_back_each_in_its_place() -> None:
    from contextree.redaction import Redactor
    from contextree.redaction._redactor import SEPARATOR as _SEP
    from contextree.view._model import Slots, redact_slots

    texts = [f"line {i}" for i in range(9000)]
    texts[10] = f"key {SECRET} here"
    texts[5000] = f"again {SECRET}"
    texts[7000] = f"holds the separator {_SEP} and {SECRET}"
    texts[8000] = "-----BEGIN RSA PRIVATE KEY-----"  # a block that runs on into the next
    texts[8001] = "MIIEowIBAAKCAQEA7" + "x" * 40 + "\n-----END RSA PRIVATE KEY-----"
    boxes = [{"s": t} for t in texts]
    slots = Slots()
    for b in boxes:
        slots.add(b, "s")
    redact_slots(slots, Redactor())
    one_by_one = Redactor()

    def untagged(t: str) -> str:  # a batch redone text by text numbers its tags on
        return re.sub(r"\[REDACTED:([a-z-]+):\d+\]", r"[REDACTED:\1]", t)

    assert [untagged(b["s"]) for b in boxes] == [untagged(one_by_one.text(t)) for t in texts]
    assert SECRET not in "".join(b["s"] for b in boxes)
    assert boxes[10]["s"].split()[1] == boxes[5000]["s"].split()[1]  # one secret, one tag


def test_a_compaction_receipt_is_the_one_the_compaction_recorded(tmp_path: Path) -> None:
    # Session.compact writes a receipt (kept, folded, cleared, dropped, identifiers); the
    # viewer shows that one, not a guess from the path.
    import contextree as ct

    path = tmp_path / "s.jsonl"
    with Session.create(path) as s:
        for i in range(12):
            s.append_message(ct.Message.user(f"step {i}: fix commit a1b2c3d{i}"))
            s.append_message(ct.Message.assistant(f"done with step {i} " + "x" * 400))
        result = s.compact(3000, force=True)
        assert result is not None and result.receipt is not None
        recorded = result.receipt
    with Session.open(path, readonly=True) as s:
        view = read_view(s, redact=False)
    (comp,) = view.data["compactions"].values()
    rc = comp["receipt"]
    ids = [e.id for e in view.entries]
    assert rc["recorded"] is True
    assert [ids[k] for k in rc["folded"]] == recorded.folded
    assert [ids[k] for k in rc["kept"]] == recorded.kept
    assert rc["identifiers"] == recorded.identifiers
