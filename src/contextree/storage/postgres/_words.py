"""An entry's words as PostgreSQL stores them for search, made by the client that appends.

``PostgresStorage`` already has the entry's JSON line in hand, so the words are split here,
the same way the query's words are (``_search_text.parse_query``: runs of letters and
digits, case-folded), and sent with the append as a ``tsvector`` literal: the server only
reads the literal (no JSON parse, no text search parser in the append's statement), which
keeps an append with search about as cheap as one without. A term therefore matches in the
database exactly when it matches in the directory index.

- ``search_columns(line)``: ``(vector, words)`` of one entry line: the ``tsvector`` literal
  (each word with its position, so phrases match word after word) and the words joined by
  spaces (stored for the trigram index only when that is turned on), or ``(None, None)``
  for an entry with no text.

PostgreSQL's limits are kept here so that an append never fails for its text: a word
longer than ``MAX_WORD`` bytes is left out, positions stop at ``MAX_POSITION`` (later words
are still found, not as part of a phrase), and the distinct words of one entry stop at
``MAX_LEXEMES`` bytes.
"""

from __future__ import annotations

import re
import string
from itertools import repeat

from .._search_text import entry_text, parse_line

__all__ = ["MAX_LEXEMES", "MAX_POSITION", "MAX_WORD", "search_columns", "words_of"]

MAX_WORD = 2046  # bytes of one lexeme (PostgreSQL refuses longer words)
MAX_POSITION = 16383  # the last position a tsvector keeps
MAX_LEXEMES = 900_000  # bytes of distinct words in one tsvector (PostgreSQL's limit: 1 MB)

_WORD = re.compile(r"[^\W_]+")  # as _search_text splits a query: letters and digits
_KEEP = set(string.ascii_lowercase + string.digits)
_ASCII_WORDS = bytes(c if chr(c) in _KEEP else 32 for c in range(256))  # the rest: spaces
_POSITIONS = [b"':%d" % i for i in range(1, MAX_POSITION + 1)]


def words_of(text: str) -> list[bytes]:
    """The words of ``text`` in order, case-folded, as UTF-8 (letters and digits; every other
    character separates words). ASCII text is split by one byte translation, the rest by
    the same rule as a regular expression."""
    folded = text.casefold()
    if folded.isascii():
        return folded.encode().translate(_ASCII_WORDS).split()
    return [w.encode() for w in _WORD.findall(folded)]


def search_columns(line: str) -> tuple[str | None, str | None]:
    """``(tsvector literal, words)`` of one entry's JSON line; ``(None, None)`` when the entry
    has no searchable text (see ``_search_text.entry_text``)."""
    found = entry_text(parse_line(line))
    if found is None:
        return None, None
    words = words_of(found[2])
    if not words:
        return None, None
    if max(map(len, words)) > MAX_WORD:
        words = [w for w in words if len(w) <= MAX_WORD]
    placed = words[:MAX_POSITION]
    # 'word':position for each word in order; the server merges a word's positions
    vector = b" ".join(map(b"".join, zip(repeat(b"'"), placed, _POSITIONS)))
    if len(words) > MAX_POSITION or len(vector) > MAX_LEXEMES:
        vector = _bounded(words)
    return vector.decode(), b" ".join(words).decode()


def _bounded(words: list[bytes]) -> bytes:
    """The literal of a long text: positions for the first ``MAX_POSITION`` words, the other
    distinct words without one, until their bytes reach ``MAX_LEXEMES``."""
    seen: dict[bytes, bytes] = {}
    size = 0
    for i, word in enumerate(words):
        if word in seen:
            if i < MAX_POSITION:
                seen[word] += b",%d" % (i + 1)
            continue
        size += len(word)
        if size > MAX_LEXEMES:
            break
        seen[word] = b"'" + word + (b"':%d" % (i + 1) if i < MAX_POSITION else b"'")
    return b" ".join(seen.values())
