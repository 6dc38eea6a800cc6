"""The first pass of a Claude Code import decodes only the head of each line (what placing
it needs, its content skipped). A line it cannot read that way is parsed whole, so that bad
input gets the errors it always got, with the file and the line, and odd but valid lines
import as before."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from contextree import Session
from contextree._limits import MAX_DEPTH
from contextree.errors import SessionError
from contextree.formats import import_session

SID = "9c1f0e1e-0000-4000-8000-000000000001"
TS = "2026-01-01T00:00:00.000Z"


def _user(uuid: str, parent: str | None, content: object = "hi", **more: object) -> str:
    return json.dumps({"parentUuid": parent, "isSidechain": False, "type": "user",
                       "message": {"role": "user", "content": content}, "uuid": uuid,
                       "timestamp": TS, "sessionId": SID, "cwd": "/w", "version": "2.1.197",
                       **more})


def _assistant(uuid: str, parent: str, mid: str, text: str) -> str:
    return json.dumps({"parentUuid": parent, "isSidechain": False, "type": "assistant",
                       "message": {"id": mid, "type": "message", "role": "assistant",
                                   "model": "claude-opus-4-8",
                                   "content": [{"type": "text", "text": text}]},
                       "uuid": uuid, "timestamp": TS, "sessionId": SID})


GOOD = [_user("u1", None), _assistant("a1", "u1", "m1", "one")]
DEEP = json.dumps({"type": "mode", "x": json.loads("[" * MAX_DEPTH + "]" * MAX_DEPTH)})
# Past the decoder's own recursion guard too (the first pass falls back to a whole parse).
DEEPER = '{"type": "mode", "x": ' + "[" * 5000 + "]" * 5000 + "}"


@pytest.mark.parametrize(("line", "message"), [
    ('{"type": "user", oops', "not valid JSON"),
    ("[1, 2]", "expected a JSON object with a string `type`"),
    ('"text"', "expected a JSON object with a string `type`"),
    ('{"type": 7, "uuid": "x"}', "expected a JSON object with a string `type`"),
    ('{"uuid": "x"}', "expected a JSON object with a string `type`"),
    ('{"type": "user", "uuid": "u9", "message": "hi"}', "needs a `message` object"),
    ('{"type": "assistant", "uuid": "u9", "message": null}', "needs a `message` object"),
    ('{"type": "assistant", "uuid": "u9"}', "needs a `message` object"),
    ('{"type": "user", "uuid": 5, "message": {}}', "no string `uuid`"),
    ('{"type": "user", "uuid": "u9", "parentUuid": 3, "message": {}}',
     "`parentUuid` must be a string or null"),
    (DEEP, "levels deep"),
    (DEEPER, "levels deep"),
])
def test_a_bad_line_is_named_as_before(line: str, message: str, tmp_path: Path) -> None:
    src = tmp_path / "c.jsonl"
    src.write_text("\n".join([*GOOD, line, _user("u2", "a1")]) + "\n")
    with pytest.raises(SessionError) as err:
        import_session("claude-code", src, tmp_path / "out.jsonl")
    assert err.value.line == 3 and str(err.value).startswith(f"{src}:3: ")
    assert message in str(err.value)
    assert not (tmp_path / "out.jsonl").exists()


def test_lines_read_whole_import_like_the_others(tmp_path: Path) -> None:
    code = "if (a) { b[0] = {c: [1]}; }\n" * 100  # brackets enough to be read whole
    src = tmp_path / "c.jsonl"
    src.write_text("\n".join([
        *GOOD,
        _user("u2", "a1", code),
        json.dumps({"type": "mode", "mode": "normal", "message": "not an object"}),
        _user("u3", "u2", "again", message_extra=1),
    ]) + "\n")
    with import_session("claude-code", src, tmp_path / "out.jsonl") as s:
        texts = [m.text for m in s.build_context().messages]
        assert texts == ["hi", "one", code, "again"]
        mode = [e for e in s.entries() if getattr(e, "custom_type", "") == "claude-code/mode"]
        assert len(mode) == 1 and mode[0].data["message"] == "not an object"  # type: ignore[attr-defined]


def test_a_line_written_twice_keeps_what_changed(tmp_path: Path) -> None:
    src = tmp_path / "c.jsonl"
    again = json.loads(GOOD[1])
    again["message"]["content"][0]["text"] = "one, again"
    src.write_text("\n".join([*GOOD, json.dumps(again)]) + "\n")
    with import_session("claude-code", src, tmp_path / "out.jsonl") as s:
        entry = s.get_entry("a1")
        assert entry is not None
        rewritten = entry.extra["claude_code"]["rewritten"]
        assert rewritten[0]["uuid"] == "a1"
        assert rewritten[0]["changed"]["message"]["content"][0]["text"] == "one, again"
    with Session.open(tmp_path / "out.jsonl", readonly=True) as s:
        assert s.header.metadata["imported_from"]["report"]["files"][0]["duplicates"] == 1
