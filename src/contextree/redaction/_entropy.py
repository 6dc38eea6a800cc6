"""High-entropy strings: random-looking tokens with no known shape (a bare AWS secret key,
an API key of a provider no detector knows).

A token is a run of base64 or base64url characters of at least ``MIN_LENGTH``. It counts as a
secret when it mixes upper case, lower case and digits and its Shannon entropy is close to
that of random text of its length. Random-looking strings that are not secrets are left:

- hexadecimal of any length (git shas, digests, UUIDs, Twilio-style hex is found by key);
- a lockfile integrity hash (``sha512-...``, ``sha256-...``), a labelled hash (go.sum's
  ``h1:...``, ``sha256:...``), an SSH public key after its type (``ssh-ed25519 AAAA...``),
  and anything after ``base64,`` (a ``data:`` URL);
- a blob: a token longer than ``MAX_LENGTH`` (an inline image, a wrapped certificate), or a
  line of a wrapped base64 block (two or more lines of the same length, 60 characters or
  more, one above the other);
- words: paths, identifiers and prose split into parts none of which looks random.

The token pattern has a single unbounded run and nothing after it, so finding tokens is one
pass without backtracking; the tests per token are linear in its length.
"""

from __future__ import annotations

import functools
import math
import re
from collections import Counter
from collections.abc import Iterator
from typing import Any

from ._detectors import Hit
from ._prefilter import encoded

__all__ = ["MAX_LENGTH", "MIN_LENGTH", "HighEntropy", "entropy", "looks_random"]

MIN_LENGTH = 20
MAX_LENGTH = 512
_TOKEN = re.compile(r"[A-Za-z0-9+/=_-]{20,}+")
_HEX = re.compile(r"[0-9a-fA-F-]*+")
_INTEGRITY = re.compile(r"(?:sha1|sha256|sha384|sha512|md5)-", re.IGNORECASE)
# what a hash or a public key is written after: go.sum's "h1:", "sha256:", an SSH key type
_LABELLED = re.compile(r"(?:\b(?:h1|sha1|sha224|sha256|sha384|sha512|md5|blake2b|blake3|"
                       r"xxh64|crc32|etag):|(?:ssh-(?:rsa|dss|ed25519|ed448)|ecdsa-sha2-nistp"
                       r"(?:256|384|521)|sk-ssh-ed25519@openssh\.com|sk-ecdsa-sha2-nistp256@"
                       r"openssh\.com)[ \t]+)\Z", re.IGNORECASE)
_UPPER = re.compile(r"[A-Z]")
_LOWER = re.compile(r"[a-z]")
_DIGIT = re.compile(r"[0-9]")
_WORDY = re.compile(r"(?:[A-Z]?[a-z]{2,}|[A-Z]{2,}(?![a-z]))")


@functools.cache
def _gate() -> Any:
    """The token pattern on RE2, to tell whether a text holds any token at all (a DFA reads
    each character once, where Python's ``re`` starts an attempt at every letter of every
    word; but Python's is faster at handing out many matches), or ``None`` without
    ``google-re2``."""
    try:
        import re2
    except ImportError:
        return None
    options = re2.Options()
    options.log_errors = False
    return re2.compile(r"[A-Za-z0-9+/=_-]{20,}", options)


def entropy(s: str) -> float:
    """Shannon entropy of ``s`` in bits per character."""
    n = len(s)
    return -sum(c / n * math.log2(c / n) for c in Counter(s).values())


def _threshold(n: int) -> float:
    """The entropy below which a token of length ``n`` is not random enough: about 85% of
    what uniformly random base64 of that length reaches (log2 n for short ones, 6 bits max)."""
    return 0.85 * min(math.log2(n), 5.6)


def looks_random(token: str) -> bool:
    """True when ``token`` reads as a random secret rather than a word, path or digest."""
    if _HEX.fullmatch(token) or not _mixed(token):
        return False
    if entropy(token) < _threshold(len(token)):
        return False
    # split on separators; a path or identifier made of words (and numbers, and stamps such
    # as 20261202T045655123) is not random
    parts = [p for p in re.split(r"[/_.-]+", token) if p]
    if len(parts) > 1 and max(len(p) for p in parts) < MIN_LENGTH:
        return any(_mixed(p) and _random_part(p) for p in parts if len(p) >= 12)
    return _random_part(token)


def _mixed(s: str) -> bool:
    """Upper case, lower case and digits all in ``s``: what random base64 always has."""
    return bool(_UPPER.search(s) and _LOWER.search(s) and _DIGIT.search(s))


def _random_part(part: str) -> bool:
    """True unless most of ``part`` is made of word-like runs (``TestHTTP2Handler``)."""
    worded = sum(len(m.group(0)) for m in _WORDY.finditer(part))
    return worded < 0.6 * len(part) or entropy(part) >= _threshold(len(part)) + 0.4


class HighEntropy:
    """Random-looking tokens no shaped detector claimed."""

    def find(self, text: str) -> Iterator[Hit]:
        """Each high-entropy token of ``text`` (see the module for what is left alone)."""
        prev_len = 0  # the length of the last token, when it was a line of a wrapped block
        prev_end = -1
        gate = _gate()
        if gate is not None and gate.search(encoded(text)[0]) is None:
            return  # no token at all: what most batches of prose and logs are
        for m in _TOKEN.finditer(text):
            start, end = m.span()
            n = end - start
            if n > MAX_LENGTH:
                prev_len = 0
                continue
            if _wrapped(text, start, end, prev_len, prev_end):
                prev_len, prev_end = max(n, prev_len), end
                continue
            prev_len = 0
            token = m.group(0)
            if looks_random(token) and not (
                    _INTEGRITY.match(token) or text.endswith("base64,", 0, start)
                    or _LABELLED.search(text, max(0, start - 40), start)):
                yield start, end, "high-entropy"


_WRAP_WIDTH = 60  # base64 tools wrap at 64 or 76


def _on_own_line(text: str, start: int, end: int) -> bool:
    before = start == 0 or text[start - 1] in "\n\r \t"
    after = end == len(text) or text[end] in "\n\r"
    return before and after


def _wrapped(text: str, start: int, end: int, prev_len: int, prev_end: int) -> bool:
    """True when the token is a line of a wrapped base64 block: it follows a full line of
    the block (on the next line, no longer), or it is a full line and the next line is one
    of the same length."""
    if not _on_own_line(text, start, end):
        return False
    n = end - start
    if prev_len and n <= prev_len and text[prev_end:start].strip(" \t\r\n") == "":
        return True
    if n < _WRAP_WIDTH:
        return False
    nxt = end + 1 if text.startswith("\n", end) else end + 2 if text.startswith("\r\n", end) \
        else -1
    if nxt < 0:
        return False
    following = _TOKEN.match(text, nxt)
    return following is not None and following.end() - following.start() == n
