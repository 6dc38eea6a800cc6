"""Redaction at the exits, through the CLI and the API the way a user runs them: every
export format, ``redact FILE -o NEW``, ``show``; and the stored session never changes."""

from __future__ import annotations

from pathlib import Path

import pytest
from shapes import anthropic_key, aws_key, aws_secret, github_token, password, stripe_key

from contextree import Message, Session, ToolCall
from contextree.cli.app import app
from contextree.entries import encode_line
from contextree.formats import export_session, list_formats
from contextree.redaction import Redactor
from helpers import run, runner

EXPORTABLE = sorted(f.name for f in list_formats() if f.can_export)


@pytest.fixture
def planted(tmp_path: Path) -> tuple[Path, list[str]]:
    """A session with a secret in each place one lands: a system prompt, a user message, a
    tool call's arguments, its result, thinking, a compaction summary, a second branch,
    a label."""
    path = tmp_path / "s.jsonl"
    secrets = [aws_key(), github_token(), anthropic_key(), password(), aws_secret(),
               stripe_key()]
    aws, gh, ant, pw, aws_sec, stripe = secrets
    with Session.create(path) as s:
        s.append_message(Message.system(f"You deploy. The key is {ant}."))
        first = s.append_message(Message.user(f"deploy with {aws}"))
        s.append_message(Message.assistant("", tool_calls=[ToolCall(
            id="call_1", name="shell", arguments={"command": f"psql postgres://app:{pw}@db/app"})]))
        s.append_message(Message.tool(f"AWS_SECRET_ACCESS_KEY={aws_sec}\nok", tool_call_id="call_1"))
        s.append_message(Message.assistant([{"type": "thinking", "thinking": f"token {gh}"},
                                            {"type": "text", "text": "done"}]))
        s.append_compaction(summary=f"deployed with {aws}", first_kept_entry_id=s.leaf_id,
                            tokens_before=100)
        s.append_message(Message.user("again"))
        s.set_label(first, "start")
        s.move_to(first)
        s.append_message(Message.assistant(f"other branch: {stripe}"))
    return path, secrets


def _out_of(tmp_path: Path, fmt: str) -> Path:
    return tmp_path / f"out.{fmt}"


def _all_text(path: Path) -> str:
    if path.is_dir():
        return "".join(p.read_text(errors="replace") for p in sorted(path.rglob("*")) if p.is_file())
    return path.read_text(encoding="utf-8", errors="replace")


@pytest.mark.parametrize("fmt", EXPORTABLE)
def test_export_is_redacted_by_default_in_every_format(planted, tmp_path: Path, fmt: str) -> None:  # type: ignore[no-untyped-def]
    path, secrets = planted
    before = path.read_bytes()
    out = _out_of(tmp_path, fmt)
    result = run("export", fmt, path, "-o", out)
    assert "redacted" in result.stdout
    text = _all_text(out)
    assert "[REDACTED:" in text
    for secret in secrets:
        assert secret not in text, (fmt, secret)
    assert path.read_bytes() == before  # the stored session is not changed


@pytest.mark.parametrize("fmt", EXPORTABLE)
def test_no_redact_exports_as_stored_and_says_so(planted, tmp_path: Path, fmt: str) -> None:  # type: ignore[no-untyped-def]
    path, secrets = planted
    out = _out_of(tmp_path, fmt)
    result = runner.invoke(app, ["export", fmt, str(path), "-o", str(out), "--no-redact"])
    assert result.exit_code == 0, result.stderr
    assert result.stderr.startswith("not redacted: ")
    text = _all_text(out)
    assert "[REDACTED:" not in text
    # every format holds the branch at the leaf: the first user message and the other
    # branch's reply, as stored (Brute's log, and the files of the CLIs that bring their own
    # system prompt, have no place for it)
    aws, _, ant, _, _, stripe = secrets
    assert aws in text and stripe in text
    assert ant in text or fmt in ("brute", "copilot", "gemini-cli", "opencode")


def test_export_to_stdout_is_redacted_and_counts_go_to_stderr(planted) -> None:  # type: ignore[no-untyped-def]
    path, secrets = planted
    result = runner.invoke(app, ["export", "contextree", str(path), "-o", "-"])
    assert result.exit_code == 0, result.stderr
    assert all(s not in result.stdout for s in secrets)
    assert result.stderr.startswith("redacted ") and "aws-key 1" in result.stderr


def test_a_user_pattern_is_redacted_too(planted, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    path, _ = planted
    out = tmp_path / "o.json"
    run("export", "openai-chat", path, "-o", out, "--redact-pattern", r"other\s+branch",
        "--redact-pattern", r"dep(?P<secret>loy)")
    text = out.read_text()
    assert "[REDACTED:custom:1]" in text and "other branch" not in text


@pytest.mark.parametrize("pattern", ["(", "a{2,1}", "[z-a]"])
def test_an_invalid_pattern_is_exit_code_2_with_what_to_do(planted, tmp_path: Path, pattern: str) -> None:  # type: ignore[no-untyped-def]
    path, _ = planted
    for args in (["export", "pi", str(path), "-o", str(tmp_path / "x")],
                 ["show", str(path)], ["redact", str(path), "-o", str(tmp_path / "y")]):
        result = run(*args, "--redact-pattern", pattern, code=2)
        assert "invalid redaction pattern" in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "x").exists() and not (tmp_path / "y").exists()


def test_patterns_and_no_redact_contradict(planted, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    path, _ = planted
    result = run("export", "pi", path, "-o", tmp_path / "x", "--no-redact",
                 "--redact-pattern", "x", code=2)
    assert "contradict" in result.stderr


def test_export_session_api_redact_argument(planted, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    path, secrets = planted
    with Session.open(path, readonly=True) as s:
        default = export_session("openai-chat", s, tmp_path / "a.json")
        raw = export_session("openai-chat", s, tmp_path / "b.json", redact=False)
        r = Redactor(patterns=[r"You deploy"])
        mine = export_session("openai-chat", s, tmp_path / "c.json", redact=r)
    assert secrets[5] not in default.read_text() and "[REDACTED:stripe-key:1]" in default.read_text()
    assert secrets[5] in raw.read_text()
    assert r.found["stripe-key"] == 1 and r.found["custom"] == 1
    assert "[REDACTED:custom:1]" in mine.read_text()


def test_redact_writes_a_valid_copy_of_the_whole_tree(planted, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    path, secrets = planted
    before = path.read_bytes()
    new = tmp_path / "red.jsonl"
    result = run("redact", path, "-o", new)
    assert "aws-key" in result.stdout and "github-token" in result.stdout
    assert path.read_bytes() == before
    text = new.read_text()
    assert all(s not in text for s in secrets)
    with Session.open(path, readonly=True) as a, Session.open(new, readonly=True) as b:
        ea, eb = list(a.entries()), list(b.entries())
        assert [(e.id, e.parent_id, e.type) for e in ea] == [(e.id, e.parent_id, e.type) for e in eb]
        assert a.leaf_id == b.leaf_id and a.labels() == b.labels() and a.id == b.id
        for entry in ea:  # every entry's context: the same messages, secrets replaced
            ca, cb = a.build_context(entry.id), b.build_context(entry.id)
            assert [(m.role, m.tool_call_id) for m in ca.messages] == \
                [(m.role, m.tool_call_id) for m in cb.messages]
            assert cb.entry_ids == ca.entry_ids
    run("verify", new)


def test_redact_never_writes_over_a_file(planted, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    path, _ = planted
    there = tmp_path / "there.jsonl"
    there.write_text("keep me")
    result = run("redact", path, "-o", there, code=1)
    assert "never replaces" in result.stderr
    assert there.read_text() == "keep me"
    result = run("redact", path, "-o", path, code=1)
    assert path.read_bytes().startswith(b'{"type":"session"')


def test_redact_json_counts(planted, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    import json
    path, _ = planted
    out = json.loads(run("redact", path, "-o", tmp_path / "r.jsonl", "--json").stdout)
    assert out["found"]["aws-key"] == 1 and out["found"]["github-token"] == 1
    assert out["entries"] == len(list(Session.open(path, readonly=True).entries()))


def test_show_redacts_unless_raw(planted) -> None:  # type: ignore[no-untyped-def]
    path, secrets = planted
    with Session.open(path, readonly=True) as s:
        tip = s.leaf_id
        main_leaf = next(e.id for e in s.entries() if getattr(e, "message", None) is not None
                         and getattr(e.message, "text", "") == "again")  # type: ignore[attr-defined]
    assert tip
    for args in (["show", str(path), "--at", main_leaf], ["show", str(path), "--context", "--at", main_leaf],
                 ["show", str(path), "--json", "--at", main_leaf]):
        shown = run(*args).stdout
        assert "[REDACTED:" in shown
        assert all(s not in shown for s in secrets), args
    raw = runner.invoke(app, ["show", str(path), "--raw", "--context", "--at", main_leaf])
    assert raw.exit_code == 0
    assert secrets[0] in raw.stdout and raw.stderr.startswith("not redacted: ")


def test_redacted_lines_are_still_valid_entries(planted) -> None:  # type: ignore[no-untyped-def]
    path, _ = planted
    r = Redactor()
    with Session.open(path, readonly=True) as s:
        for e in s.entries():
            assert encode_line(r.entry(e))


def test_exports_into_claude_code_and_codex_homes_are_redacted(planted, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from contextree.formats import export_to_claude_code_home, export_to_codex_home
    path, secrets = planted
    with Session.open(path, readonly=True) as s:
        _, cc = export_to_claude_code_home(s, home=tmp_path / "claude", cwd=str(tmp_path))
        _, cx = export_to_codex_home(s, home=tmp_path / "codex")
        _, raw = export_to_codex_home(s, home=tmp_path / "codex-raw", redact=False)
    for out in (cc, cx):
        text = out.read_text()
        assert "[REDACTED:" in text and all(secret not in text for secret in secrets)
    assert secrets[5] in raw.read_text()


def test_tree_redacts_its_lines_unless_raw(planted) -> None:  # type: ignore[no-untyped-def]
    import json
    path, secrets = planted
    shown = run("tree", path, "--all").stdout
    assert "[REDACTED:" in shown and all(s not in shown for s in secrets)
    as_json = json.loads(run("tree", path, "--json").stdout)
    assert all(s not in json.dumps(as_json) for s in secrets)
    raw = runner.invoke(app, ["tree", str(path), "--all", "--raw"])
    assert raw.exit_code == 0 and secrets[0] in raw.stdout
    assert raw.stderr.startswith("not redacted: ")


def test_ls_redacts_names_and_directories_unless_raw(tmp_path: Path) -> None:
    import json
    key, token = aws_key(), github_token()
    with Session.create(tmp_path / "a.jsonl", cwd=f"/home/me/{token}") as s:
        s.append_message(Message.user("hi"))
        s.set_name(f"deploy with {key}")
    with Session.create(tmp_path / "b.jsonl") as s:
        s.set_name("plain name")
    shown = run("ls", tmp_path).stdout
    assert "[REDACTED:aws-key:1]" in shown and key not in shown and "plain name" in shown
    rows = json.loads(run("ls", tmp_path, "--json").stdout)
    text = json.dumps(rows)
    assert key not in text and token not in text and "[REDACTED:github-token:1]" in text
    raw = runner.invoke(app, ["ls", str(tmp_path), "--raw", "--json"])
    assert raw.exit_code == 0 and key in raw.stdout and token in raw.stdout
    assert raw.stderr.startswith("not redacted: ")
