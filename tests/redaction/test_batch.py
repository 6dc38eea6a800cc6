"""``Redactor.texts`` (many texts in one pass) and the prefilter that skips detectors whose
literals a text lacks: both change the time redaction takes, never what it finds."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from shapes import aws_key, github_token, password

import contextree as ct
from contextree.entries import MessageEntry, to_dict
from contextree.redaction import Redactor
from contextree.redaction._prefilter import IGNORE_CASE, needles_of
from contextree.redaction._redactor import SEPARATOR

ROOT = Path(__file__).resolve().parents[2]


def _untagged(t: str) -> str:
    """A text with its tags' numbers dropped (the order secrets are met in numbers them)."""
    return re.sub(r"\[REDACTED:([a-z-]+):\d+\]", r"[REDACTED:\1]", t)


def test_texts_give_what_text_gives_for_each_one() -> None:
    key = aws_key()
    texts = [f"line {i}" for i in range(9000)]
    texts[10] = f"key {key} here"
    texts[5000] = f"again {key}"
    texts[7000] = f"holds the separator {SEPARATOR} and {key}"
    texts[8000] = "-----BEGIN RSA PRIVATE KEY-----"  # a block that runs on into the next
    texts[8001] = "MIIEowIBAAKCAQEA7" + "x" * 40 + "\n-----END RSA PRIVATE KEY-----"
    texts[8500] = ""
    batched = Redactor().texts(texts)
    one_by_one = Redactor()
    assert [_untagged(t) for t in batched] == [_untagged(one_by_one.text(t)) for t in texts]
    assert key not in "".join(batched)
    assert batched[10].split()[1] == batched[5000].split()[1]  # one secret, one tag
    assert Redactor(enabled=False).texts(texts) == texts


def test_a_pattern_anchored_at_the_start_sees_each_text_alone() -> None:
    texts = ["ticket-1234 opened", "ticket-5678 closed", "see ticket-9999"]
    for pattern in (r"^ticket-\d+", r"\Aticket-\d+", r"ticket-\d+ closed$"):
        batched = Redactor([pattern]).texts(texts)
        one = Redactor([pattern])
        assert batched == [one.text(t) for t in texts], pattern
    assert Redactor([r"^ticket-\d+"]).texts(texts)[1:] == ["[REDACTED:custom:2] closed",
                                                          "see ticket-9999"]


def test_a_secret_found_by_its_key_is_also_replaced_where_it_came_before() -> None:
    secret = password()
    out = Redactor().texts([f"mysql -p{secret} -e 'select 1'", "", f"DB_PASSWORD={secret}"])
    assert secret not in "".join(out)
    out = Redactor().text(f"ran mysql -p{secret}\nDB_PASSWORD={secret}")
    assert secret not in out and out.count("[REDACTED:password:1]") == 2


def test_entries_and_messages_in_one_call_are_each_redacted_as_alone() -> None:
    token = github_token()
    entries = [MessageEntry(f"e{i}", None, "2026-01-01T00:00:00Z",
                            message=ct.Message.user(f"turn {i}" + (f" {token}" if i % 7 == 0
                                                                   else "")))
               for i in range(50)]
    entries.append(MessageEntry("t", None, "2026-01-01T00:00:00Z", message=ct.Message.assistant(
        "calling", tool_calls=[ct.ToolCall(id="c1", name="shell", arguments={
            "command": f"curl -H 'Authorization: token {token}'", "api_key": "hunter2-xyz!",
            token: "a token as a key"})])))
    batched = Redactor().entries(entries)
    alone = [Redactor().entry(e) for e in entries]
    assert [_untagged(str(to_dict(b))) for b in batched] == \
        [_untagged(str(to_dict(a))) for a in alone]
    text = str(batched)
    assert token not in text and "hunter2-xyz!" not in text
    assert entries[0].message.text.endswith(token)  # the entries given are not changed
    messages = Redactor().messages([e.message for e in entries])
    assert token not in str(messages) and len(messages) == len(entries)


def test_needles_are_the_literals_every_match_holds() -> None:
    assert needles_of(r"ghp_[A-Za-z0-9]{36}") == ("ghp_",)
    assert needles_of(r"(?:sk|rk)_(?:live|test)_[0-9A-Za-z]{10,}") == (
        "rk_live_", "rk_test_", "sk_live_", "sk_test_")
    assert needles_of(r"(?:\s|=|:|\"|^)AKC[a-zA-Z0-9]{10,}") == ("AKC",)
    assert needles_of(re.compile(r"xox[ab]-\d+", re.IGNORECASE)) == (IGNORE_CASE, "xoxa-", "xoxb-")
    assert needles_of(r"[A-Za-z0-9+/]{40}") is None  # nothing to look for: always run
    assert needles_of(r"ab[^x]") is None  # too short to be worth a search


_SAME = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
if sys.argv[2] == "no-re2":
    sys.modules["re2"] = None  # as without google-re2 installed
from bench_redaction import corpus, held_out
from contextree.redaction import Redactor
docs, keep = corpus(23, 4)
more, more_keep = held_out(23)
texts = [d.text for d in docs] + [t for t, _ in keep] + [d.text for d in more] + [
    t for t, _ in more_keep]
fast = Redactor()
every = Redactor()
every._prefilter.select = lambda text: every._prefilter.detectors  # no prefilter
a = [fast.text(t) for t in texts]
b = [every.text(t) for t in texts]
print(json.dumps([a == b, sum(x != t for x, t in zip(a, texts)), len(texts)]))
"""


def test_the_prefilter_finds_what_running_every_detector_finds() -> None:
    # the bench's planted secrets and non-secrets and its held-out set, with and without
    # RE2 (each path of the prefilter and of the detectors that use RE2)
    for mode in ("re2", "no-re2"):
        out = subprocess.run([sys.executable, "-c", _SAME, str(ROOT / "bench"), mode],
                             capture_output=True, text=True, check=True)
        same, changed, total = __import__("json").loads(out.stdout)
        assert same, mode
        assert changed > 100 and total > 1000  # the secrets were found, in both
