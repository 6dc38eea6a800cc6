"""An entry's words as PostgreSQL stores them for search, made by the client that appends.

``PostgresStorage`` already has the entry's JSON line in hand, so the words are split here,
the same way the query's words are (``_search_text.parse_query``: runs of letters and
digits, case-folded), and sent with the append as a ``tsvector`` in PostgreSQL's binary
form: the entry's distinct words, which the server copies and sorts (no JSON parse, no text
search parser, no literal to parse in the append's statement; parsing the literal was about
a third of what search cost the server's part of an append, measured by a server-side loop
of appends). A term therefore matches in the database exactly when it matches in the
directory index.

- ``search_columns(line)``: ``(vector, words)`` of one entry line: the vector in binary
  (``encoding=``: for a query) or as its text literal (for ``COPY``), and the words in
  order joined by spaces (for the trigram index, when it is on); ``(None, None)`` for an
  entry with no text.

The vector has no positions: reading positions doubled the server's share of an append
(measured in ``bench/bench_search.py``). A phrase (``"connection refused"``, the parts of
``test_parse_header``) is therefore found as all its words by the index, then checked
against the entry's text by the search (``_search``), which reads that text for the
snippet anyway.

PostgreSQL's limits are kept here so that an append never fails for its text: a word
longer than ``MAX_WORD`` bytes is left out, and the distinct words of one entry stop at
``MAX_LEXEMES`` bytes (a text of random tokens bigger than that is found by its first
megabyte of words).
"""

from __future__ import annotations

import codecs
import string
import struct
from collections.abc import Iterable
from typing import Any

from ...entries import MessageEntry
from .._search_text import MAX_TEXT, WORD, entry_text, parse_line
from ._driver import Dumper, Format, psycopg

__all__ = ["MAX_LEXEMES", "MAX_WORD", "BinaryVector", "client_encoding", "search_columns",
           "words_of"]

MAX_WORD = 2046  # bytes of one lexeme (PostgreSQL refuses longer words)
MAX_LEXEMES = 900_000  # bytes of distinct words in one tsvector (PostgreSQL's limit: 1 MB)

_KEEP = set(string.ascii_lowercase + string.digits)
_ASCII_WORDS = bytes(c if chr(c) in _KEEP else 32 for c in range(256))  # the rest: spaces
# the same, but the bytes of non-ASCII characters are kept (the regex decides on them)
_ASCII_SEPARATORS = bytes(c if c >= 0x80 or chr(c) in _KEEP else 32 for c in range(256))


def words_of(text: str) -> list[bytes]:
    """The words of ``text`` in order, case-folded, as UTF-8 (letters and digits; every other
    character separates words). ASCII separators are found by one byte translation; only
    the pieces that hold other characters go through the rule as a regular expression (a
    Unicode regex over a whole text cost ~60 us per 1.5 KB, most of a search append)."""
    folded = text.casefold()
    if folded.isascii():
        return folded.encode().translate(_ASCII_WORDS).split()
    out: list[bytes] = []
    for piece in folded.encode("utf-8", "surrogatepass").translate(_ASCII_SEPARATORS).split():
        if piece.isascii():
            out.append(piece)
        else:  # a lone surrogate is no letter: the regex leaves it out
            out += [w.encode() for w in WORD.findall(piece.decode("utf-8", "surrogatepass"))]
    return out


TSVECTOR_OID = 3614  # PostgreSQL's type oid of tsvector (fixed in its catalog)


class BinaryVector(bytes):
    """A ``tsvector`` in PostgreSQL's binary form, as a query parameter (its type is told
    to the server, so the append function's ``tsvector`` parameter takes it as it is)."""

    __slots__ = ()


class _BinaryVectorDumper(Dumper):
    format = Format.BINARY
    oid = TSVECTOR_OID

    def dump(self, obj: BinaryVector) -> BinaryVector:
        return obj


# every connection's, whenever made (only this class is concerned)
psycopg.adapters.register_dumper(BinaryVector, _BinaryVectorDumper)


def client_encoding(conn: Any) -> str:
    """The Python codec of ``conn``'s client encoding, in which the server reads a string
    sent in binary (``"utf-8"`` as the usual case)."""
    name = conn.info.encoding
    return "utf-8" if name in ("utf-8", "utf8") else codecs.lookup(name).name


def search_columns(line: str, *, words: bool = True, entry: object = None,
                   encoding: str | None = None) -> tuple[BinaryVector | str | None, str | None]:
    """``(vector, words)`` of one entry's JSON line; ``(None, None)`` when the entry has no
    searchable text (see ``_search_text.entry_text``). The vector is the entry's distinct
    words: in binary for a connection whose client ``encoding`` is given (a query
    parameter; the server sorts them, in C, and merges nothing: they are distinct), else
    as the ``tsvector`` text literal (for ``COPY``; a word needs no quoting).
    ``words=False``: the words are not joined (``None``), for a database without the
    trigram index. ``entry``: the entry the line encodes; a message of plain text is read
    from it, not parsed back from the line."""
    text = _plain_text(entry)
    if text is None:
        found = entry_text(parse_line(line))
        if found is None:
            return None, None
        text = found[2]
    found_words = words_of(text)
    if not found_words:
        return None, None
    # a word can be too long only in a text that long (in bytes: up to 4 a character), and
    # so can the distinct words be
    most = len(text) * (1 if text.isascii() else 4)
    if most > MAX_WORD and max(map(len, found_words)) > MAX_WORD:
        found_words = [w for w in found_words if len(w) <= MAX_WORD]
    distinct = set(found_words)
    if most > MAX_LEXEMES and sum(map(len, distinct)) + len(distinct) > MAX_LEXEMES:
        distinct = _first_distinct(found_words)
    joined = b" ".join(found_words).decode() if words else None
    if encoding is None:
        return b" ".join(distinct).decode(), joined
    lexemes: Iterable[bytes] = distinct
    if encoding != "utf-8":
        lexemes = [w.decode().encode(encoding) for w in distinct]
    # the count, then each lexeme ended by a NUL and followed by its number of positions
    return BinaryVector(struct.pack("!i", len(distinct)) + b"\0\0\0".join(lexemes)
                        + b"\0\0\0"), joined


def _plain_text(entry: object) -> str | None:
    """The text of a message entry whose content is a string and that calls no tool (most
    messages): what ``entry_text`` reads from its line, without parsing the line."""
    if not isinstance(entry, MessageEntry):
        return None
    message = entry.message
    content = message.content
    if not isinstance(content, str) or not content or message.tool_calls:
        return None
    return content[:MAX_TEXT]


def _first_distinct(words: list[bytes]) -> set[bytes]:
    """The distinct words of a long text, in the order met, until their bytes reach
    ``MAX_LEXEMES``."""
    out: set[bytes] = set()
    size = 0
    for word in words:
        if word not in out:
            size += len(word) + 1
            if size > MAX_LEXEMES:
                break
            out.add(word)
    return out
