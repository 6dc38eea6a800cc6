"""The ``Redactor`` API: placeholders, values, entries of every type, the stored session kept."""

from __future__ import annotations

import copy

import pytest
from shapes import anthropic_key, aws_key, aws_secret, github_token, password, stripe_key

from contextree import Message, Session
from contextree.entries import (
    ActiveToolsChangeEntry,
    BranchSummaryEntry,
    CompactionEntry,
    CustomEntry,
    CustomMessageEntry,
    LabelEntry,
    LeafEntry,
    MessageEntry,
    ModelChangeEntry,
    SessionInfoEntry,
    ThinkingLevelChangeEntry,
    UnknownEntry,
    encode_line,
    from_dict,
    to_dict,
)
from contextree.errors import InvalidArgument
from contextree.redaction import Redactor


def test_each_secret_gets_a_stable_tag_across_calls() -> None:
    r = Redactor()
    key, other, gh = aws_key(), aws_key(), github_token()
    first = r.text(f"id={key} and {gh}")
    assert key not in first and gh not in first
    assert "[REDACTED:aws-key:1]" in first and "[REDACTED:github-token:1]" in first
    second = r.text(f"again {key}, then {other}, then {key}")
    assert second == "again [REDACTED:aws-key:1], then [REDACTED:aws-key:2], then [REDACTED:aws-key:1]"
    assert r.found == {"aws-key": 2, "github-token": 1}


def test_two_redactors_number_on_their_own() -> None:
    key = aws_key()
    a, b = Redactor(), Redactor()
    a.text(aws_key())
    assert a.text(key) == "[REDACTED:aws-key:2]"
    assert b.text(key) == "[REDACTED:aws-key:1]"


def test_redacting_twice_changes_nothing_more() -> None:
    r = Redactor()
    once = r.text(f"AWS_SECRET_ACCESS_KEY={aws_secret()}\npassword: {password()}\n")
    assert r.text(once) == once
    assert sum(r.found.values()) == 2


def test_disabled_returns_inputs_unchanged() -> None:
    r = Redactor(enabled=False)
    assert r.enabled is False
    text = f"token {github_token()}"
    assert r.text(text) is text
    value = {"password": password()}
    assert r.value(value) is value
    assert r.found == {}


def test_user_patterns_are_kind_custom() -> None:
    r = Redactor(patterns=[r"acme-[0-9a-f]{16}", r"ref=(?P<secret>\d{6})"])
    assert r.patterns == [r"acme-[0-9a-f]{16}", r"ref=(?P<secret>\d{6})"]
    out = r.text("key acme-0123456789abcdef and ref=123456 here")
    assert out == "key [REDACTED:custom:1] and ref=[REDACTED:custom:2] here"


@pytest.mark.parametrize("pattern", ["acme-[0-9", "(unclosed", "*start", ""])
def test_an_invalid_user_pattern_says_what_is_wrong(pattern: str) -> None:
    with pytest.raises(InvalidArgument, match="pattern"):
        Redactor(patterns=[pattern])


def test_value_keeps_shape_and_redacts_keys_and_named_secrets() -> None:
    r = Redactor()
    key, gh, pw = aws_key(), github_token(), password()
    value = {"db": {"password": pw, "port": 5432, "ok": True, "none": None},
             "tokens": [gh, 1.5], key: "a key used as a key", "max_tokens": 100,
             "token_type": "bearer", "raw": b"x " + key.encode(), "pair": (gh,)}
    before = copy.deepcopy(value)
    out = r.value(value)
    assert value == before  # the input is not changed
    assert out["db"] == {"password": "[REDACTED:password:1]", "port": 5432, "ok": True,
                         "none": None}
    assert out["tokens"] == ["[REDACTED:github-token:1]", 1.5]
    assert "[REDACTED:aws-key:1]" in out and key not in out
    assert out["max_tokens"] == 100 and out["token_type"] == "bearer"
    assert out["raw"] == b"x [REDACTED:aws-key:1]"
    assert out["pair"] == ("[REDACTED:github-token:1]",)


def _every_entry_type(secret: str) -> list[object]:
    """One entry of each type, each holding ``secret`` in a content field."""
    ids = iter(f"{i:08x}" for i in range(1, 100))
    ts = "2026-01-01T00:00:00.000Z"

    def base() -> dict[str, object]:
        return {"id": next(ids), "parent_id": None, "timestamp": ts}

    msg = Message.assistant(f"using {secret}")
    tool_msg = {"role": "assistant", "content": [
        {"type": "thinking", "thinking": f"the key is {secret}", "signature": "c2lnbmF0dXJl"},
        {"type": "text", "text": f"text {secret}"},
        {"type": "image", "data": "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk",
         "mime_type": "image/png"},
        {"type": "mystery", "payload": f"unknown part {secret}"}],
        "tool_calls": [{"id": "call_1", "name": "shell",
                        "arguments": {"command": f"curl -H 'x-key: {secret}'", "token": "plainword"}}]}
    return [
        from_dict({"type": "message", **base(), "message": to_dict(MessageEntry(
            "x", None, ts, message=msg))["message"]}),
        from_dict({"type": "message", **base(), "message": tool_msg}),
        from_dict({"type": "message", **base(), "message": {
            "role": "tool", "tool_call_id": "call_1", "content": f"output: {secret}",
            "meta": {"note": secret}}}),
        ThinkingLevelChangeEntry(**base(), thinking_level="high"),
        ModelChangeEntry(**base(), provider="anthropic", model_id="claude"),
        ActiveToolsChangeEntry(**base(), active_tool_names=["shell"]),
        CompactionEntry(**base(), summary=f"summary with {secret}", first_kept_entry_id=None,
                        tokens_before=10, retained_tail=[Message.user(f"kept {secret}")],
                        details={"files": [f"/tmp/{secret}"]}),
        BranchSummaryEntry(**base(), from_id="00000001", summary=f"branch {secret}",
                           details={"note": secret}),
        CustomEntry(**base(), custom_type="env", data={"env": f"X={secret}", "n": 1}),
        CustomMessageEntry(**base(), custom_type="note", content=f"note {secret}",
                           details=[secret]),
        LabelEntry(**base(), target_id="00000001", label=f"label {secret}"),
        SessionInfoEntry(**base(), name=f"name {secret}"),
        LeafEntry(**base(), target_id="00000001"),
        UnknownEntry({"type": "future_thing", **base(), "blob": {"deep": [f"u {secret}"]}}),
    ]


def test_entry_redacts_every_entry_type_and_changes_no_original() -> None:
    secret = anthropic_key()
    entries = _every_entry_type(secret)
    lines = [encode_line(e) for e in entries]  # type: ignore[arg-type]
    r = Redactor()
    for entry, line in zip(entries, lines, strict=True):
        red = r.entry(entry)  # type: ignore[arg-type]
        assert red is not entry
        assert type(red) is type(entry)
        assert red.id == entry.id and red.parent_id == entry.parent_id  # type: ignore[union-attr]
        out = encode_line(red).decode()
        assert secret not in out, out
        assert encode_line(entry) == line  # type: ignore[arg-type]
    assert r.found == {"anthropic-key": 1, "token": 1}  # the tool call's "token" argument
    tool = r.entry(entries[1])  # type: ignore[arg-type]
    assert isinstance(tool, MessageEntry)
    parts = tool.message.content
    assert isinstance(parts, list)
    assert parts[0].signature == "c2lnbmF0dXJl"  # type: ignore[union-attr]
    assert parts[2].data.startswith("iVBORw0KGgo")  # type: ignore[union-attr]
    call = tool.message.tool_calls[0]  # type: ignore[index]
    assert call.id == "call_1" and call.name == "shell"
    assert call.arguments["token"] == "[REDACTED:token:1]"


def test_an_entry_without_secrets_comes_back_equal_but_a_copy() -> None:
    e = MessageEntry("00000001", None, "2026-01-01T00:00:00.000Z",
                     message=Message.user("nothing to hide in 3f786850e387550fdab836ed7e6dc881de23001b"))
    red = Redactor().entry(e)
    assert red == e and red is not e
    assert red.message is not e.message  # type: ignore[union-attr]


def test_the_stored_session_is_never_changed(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "s.jsonl"
    s = Session.create(path)
    gh, sk = github_token(), stripe_key()
    s.append_message(Message.user(f"my token is {gh}"))
    s.append_message(Message.assistant(f"and the stripe key {sk}"))
    s.set_label(s.leaf_id, f"label {gh}")  # type: ignore[arg-type]
    before = path.read_bytes()
    r = Redactor()
    red = [r.entry(e) for e in s.entries()]
    assert all(gh not in encode_line(e).decode() and sk not in encode_line(e).decode() for e in red)
    assert path.read_bytes() == before
    assert any(gh in encode_line(e).decode() for e in s.entries())
    s.close()


def test_a_secret_found_by_its_key_is_found_again_where_it_recurs() -> None:
    r = Redactor()
    pw = password()
    assert r.value({"password": pw}) == {"password": "[REDACTED:password:1]"}
    assert r.text(f"mysql -p{pw} -h db") == "mysql -p[REDACTED:password:1] -h db"
    # a value that could be a common word is not hunted for everywhere
    assert r.value({"password": "master"}) == {"password": "[REDACTED:password:2]"}
    assert r.text("on branch master") == "on branch master"


@pytest.mark.parametrize(("text", "kept"), [
    ("machine db.example.com login deploy password {pw}", "machine db.example.com login deploy password "),
    ("db.internal:5432:app:admin:{pw}", "db.internal:5432:app:admin:"),
    ('<property name="password" value="{pw}"/>', '<property name="password" value="'),
    ('<add key="ApiKey" value="{pw}" />', '<add key="ApiKey" value="'),
])
def test_config_file_formats(text: str, kept: str) -> None:
    pw = password()
    out = Redactor().text(text.format(pw=pw))
    assert pw not in out and out.startswith(kept + "[REDACTED:")


@pytest.mark.parametrize("text", ["the password reset link expired", "12:30:00 build ok",
                                  "a:1:b:c:d e", "std::vector<int>::iterator"])
def test_prose_and_code_around_keywords_is_kept(text: str) -> None:
    assert Redactor().text(text) == text


def test_ids_that_look_random_are_kept_where_they_are_ids() -> None:
    call = "toolu_01" + "A09q90qw90lq917835lq9X"  # an Anthropic tool-use id: random-looking
    other = "call_" + "Zq8Kx2LmN9pR4sT7vW1yB3dF"
    entry = from_dict({"type": "compaction", "id": "c0ffee01", "parent_id": None,
                       "timestamp": "2026-01-01T00:00:00.000Z", "summary": "s",
                       "first_kept_entry_id": None, "tokens_before": 1,
                       "cleared": {other: f"cleared {call}"},
                       "retained_tail": [{"role": "assistant", "content": "",
                                          "tool_calls": [{"id": call, "name": "x", "arguments": {}}]},
                                         {"role": "tool", "tool_call_id": call, "content": "ok"}]})
    red = Redactor().entry(entry)
    assert isinstance(red, CompactionEntry) and red.cleared is not None
    assert list(red.cleared) == [other]
    assert red.retained_tail is not None
    assert red.retained_tail[0].tool_calls[0].id == call  # type: ignore[index]
    assert red.retained_tail[1].tool_call_id == call


def test_the_overflow_hint_path_of_a_spilled_output_is_not_a_secret() -> None:
    # The pointer the model follows to a saved output: a long path of words, a uuid and a
    # timestamp. Redacting it would break the hint (found on the demo's session).
    from contextree.redaction import Redactor

    hint = ("Full output saved to /tmp/pytest-of-root/pytest-12345/test_jsonl_to_postgres_and"
            "_back0/demo/overflow/s-6a9001c3-dbca-40cd-aed6-0203ba986aaf/20261202T045655123-"
            "7e7b39eba1-shell.txt. Read more with the read tool.")
    assert Redactor().text(hint) == hint


def test_entry_references_in_details_are_kept() -> None:
    """An imported compaction names its summary's entry (``summary_entry``) and a sub-agent
    link its first and last entries by another tool's ids, which look random: redacting
    them would cut the link (the summary sent twice, the sub-agent left out of an export)."""
    ref = "msg_9f3kQ2xLr7TzB1vWm8YpN4cHd6"
    secret = aws_key()
    entry = CompactionEntry("c1", None, "2026-01-01T00:00:00Z", summary=f"key {secret}",
                            first_kept_entry_id=None, tokens_before=10,
                            details={"summary_entry": ref, "note": secret,
                                     "subagent": {"first_entry_id": ref, "last_entry_id": ref}})
    out = Redactor().entry(entry)
    assert out.details["summary_entry"] == ref
    assert out.details["subagent"] == {"first_entry_id": ref, "last_entry_id": ref}
    assert secret not in out.details["note"] and secret not in out.summary
