"""Redaction time grows with the text, never faster: pathological inputs for every detector,
a 50 MB tool output, text that is not UTF-8.

Each detector is built to read each character a bounded number of times (see the modules of
``contextree.redaction``). There is no timing threshold here (the machine is shared): a
detector that backtracks catastrophically on one of these inputs runs for hours, and the
test's timeout fails it; the bench measures the speed.
"""

from __future__ import annotations

import pytest
from shapes import aws_key, github_token

from contextree import Message
from contextree.entries import MessageEntry
from contextree.redaction import Redactor

N = 400_000  # characters of each pathological input: seconds when linear, hours when not

PATHOLOGICAL = {
    "begin-no-end": "-----BEGIN RSA PRIVATE KEY-----\n" * (N // 32),
    "begin-garbage": ("-----BEGIN PRIVATE KEY-----" + "!" * 40) * (N // 67),
    "jwt-no-dot": "eyJ" * (N // 3),
    "jwt-dots": "eyJhbGciOiJIUzI1.eyJ." * (N // 21),
    "token-runs": "a" * N,
    "base64-run": "Ab3+" * (N // 4),
    "aws-prefixes": "AKIA" * (N // 4),
    "openai-prefixes": "sk-" * (N // 3),
    "slack-prefixes": "xoxb-" * (N // 5),
    "url-no-at": "://a:" * (N // 5),
    "url-long-user": "https://" + "u" * N + ":" + "p" * N,
    "keywords": "password" * (N // 8),
    "keyword-ops": "token=" * (N // 6),
    "keyword-quotes": 'password="' + "\\\\" * N,
    "json-escapes": '{"api_key": "' + '\\"' * N,
    "auth-headers": "Authorization: Bearer " * (N // 22),
    "digits-colons": "1234567890:AA" * (N // 13),
    "hex-us": ("0" * 32 + "-us") * (N // 35),
    "q-tilde": "abc1Q~" * (N // 6),
    "wrapped-lines": ("A" * 76 + "\n") * (N // 77),
    "newlines": "\n" * N,
    "colon-ports": ":1:" * (N // 3),
    "colon-ports-lines": "a:1:b:c\n" * (N // 8),
    "netrc-words": "password x " * (N // 11),
    "xml-values": '"password" value="' * (N // 18),
}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("name", sorted(PATHOLOGICAL))
def test_pathological_input_runs_in_bounded_time(name: str) -> None:
    text = PATHOLOGICAL[name]
    out = Redactor(detect_secrets=False).text(text)
    assert isinstance(out, str)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("name", ["begin-no-end", "jwt-no-dot", "keywords", "url-no-at",
                                  "token-runs"])
def test_pathological_input_with_detect_secrets_plugins(name: str) -> None:
    pytest.importorskip("detect_secrets", reason="the `secrets` extra is not installed")
    Redactor(detect_secrets=True).text(PATHOLOGICAL[name])


@pytest.mark.timeout(300)
def test_a_50_mb_tool_output_is_redacted_whole(tmp_path) -> None:  # type: ignore[no-untyped-def]
    key, gh = aws_key(), github_token()
    block = "".join(f"line {i}: build ok, artefact sha 3f786850e387550fdab836ed7e6dc881de23001b\n"
                    for i in range(1000))
    head = f"AWS_ACCESS_KEY_ID={key}\n"
    body = block * (50_000_000 // len(block))
    tail = f"\npush with {gh}\n"
    entry = MessageEntry("00000001", None, "2026-01-01T00:00:00.000Z",
                         message=Message.tool(head + body + tail, tool_call_id="call_1"))
    red = Redactor(detect_secrets=False).entry(entry)
    text = red.message.text
    assert key not in text and gh not in text
    assert text == ("AWS_ACCESS_KEY_ID=[REDACTED:aws-key:1]\n" + body
                    + "\npush with [REDACTED:github-token:1]\n")  # the rest is unchanged


def test_text_that_is_not_utf8_is_redacted_and_kept() -> None:
    key = aws_key()
    raw = b"\xff\xfe binary \x80 " + key.encode() + b" \xc3"
    text = raw.decode("utf-8", "surrogateescape")  # how undecodable tool output is held
    r = Redactor()
    out = r.text(text)
    assert key not in out and "[REDACTED:aws-key:1]" in out
    assert out.encode("utf-8", "surrogateescape").startswith(b"\xff\xfe binary \x80 ")
    assert r.value(raw) == b"\xff\xfe binary \x80 [REDACTED:aws-key:1] \xc3"
    assert r.text("\ud800 lone surrogate " + key) == "\ud800 lone surrogate [REDACTED:aws-key:1]"


def test_a_user_pattern_that_would_backtrack_is_refused_or_linear() -> None:
    from contextree.errors import InvalidArgument
    from contextree.redaction._patterns import compile_pattern
    try:
        pattern = compile_pattern(r"(a+)+$")
    except InvalidArgument as e:  # Python's re: refused, with the way out
        assert "contextree[re2]" in str(e)
    else:  # RE2: linear, so it runs
        assert pattern.engine == "re2"
        assert list(pattern.find("a" * 100_000 + "b")) == []


def test_user_patterns_take_text_that_is_not_utf8() -> None:
    r = Redactor(patterns=[r"acme-[0-9a-f]{8}"])
    text = b"\xff acme-0123abcd \xfe".decode("utf-8", "surrogateescape")
    assert r.text(text) == "\udcff [REDACTED:custom:1] \udcfe"
