"""What search reads and shows: an entry's searchable text, a query's terms, a hit.

Shared by every search backend (the SQLite index beside a directory of sessions, PostgreSQL,
a plain scan of any other catalog), so that an entry has the same text, a query the same
terms and a hit the same fields wherever the sessions are kept.

- ``entry_text``: the role, tool and text of one entry's JSON object: a message's text and
  thinking parts, its tool calls (name and arguments), a tool result; a compaction's or
  branch summary's summary; an application message's content. Other entries have none.
- ``parse_query``: the user's words, taken literally: each word is a term matched as a whole
  word, ``word*`` as the start of one, and a term that looks like the start of a hex id (a
  sha prefix) as a start too; a ``"quoted phrase"`` matches those words in that order.
  Punctuation inside a term splits it the way the text is split (``test_parse_header`` is
  the phrase test, parse, header), so an identifier matches itself and its parts match it
  too. Whole words keep a search fast: FTS5 reads a word's matches newest first and stops at
  the limit, where a prefix merges the matches of every word that starts with it.
- ``snippet``: a window of the text around the first match, with the matched spans.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any

import orjson

from .._limits import JSONError, parse_json
from ..errors import InvalidArgument

__all__ = ["WORD", "SearchFilters", "SearchHit", "SearchResults", "Terms", "entry_text",
           "parse_line", "parse_query", "query_terms", "snippet"]

MAX_TEXT = 8 << 20  # characters of one entry that are indexed (a bigger one is cut)
SNIPPET_CHARS = 160
WORD = re.compile(r"[^\W_]+")  # what the tokenizer calls a word: letters and digits


@dataclass(frozen=True)
class SearchHit:
    """One entry that matched a search.

    ``target`` opens the session (``Session.open``); ``snippet`` is the entry's text around
    the first match, on one line, and ``marks`` the ``(start, end)`` character spans of the
    matches in it. ``on_branch`` says whether the entry is on the session's current branch;
    ``compacted`` whether it is, but a compaction took it out of what the model sees (its
    summary stands for it). ``role`` is a message's role, or ``compaction``,
    ``branch_summary``, ``custom`` for those entries; ``tool`` the tool called or answered.
    ``archived``: the session is inside an archive (``target`` is the archive's path;
    ``contextree unarchive`` restores it).
    """

    session_id: str
    target: str
    entry_id: str
    role: str
    timestamp: str
    snippet: str
    marks: list[tuple[int, int]] = field(default_factory=list)
    on_branch: bool = True
    compacted: bool = False
    tool: str | None = None
    session_name: str | None = None
    archived: bool = False

    def to_dict(self) -> dict[str, Any]:
        """The fields as plain JSON values (``--json`` output)."""
        out = asdict(self)
        out["marks"] = [list(m) for m in self.marks]
        return out


class SearchResults(list[SearchHit]):
    """The hits of a search, newest first, with what the search has to say besides:
    ``notes`` (the index was rebuilt, bypassed or temporary...) and ``unlisted`` (files
    under the directory that are not sessions or could not be read)."""

    def __init__(self, hits: list[SearchHit] | None = None, *, notes: list[str] | None = None,
                 unlisted: list[Any] | None = None) -> None:
        super().__init__(hits or ())
        self.notes: list[str] = list(notes or ())
        self.unlisted: list[Any] = list(unlisted or ())


@dataclass(frozen=True)
class SearchFilters:
    """Which entries a search keeps (``None``: any). ``since``/``until`` are UTC ISO stamps
    (inclusive, on the entry's time); ``cwd`` the session's working directory or one above
    it; ``model`` a model that answered in the session; ``tool`` a tool called or answered;
    ``on_branch`` only entries on the current branch."""

    role: str | None = None
    since: str | None = None
    until: str | None = None
    cwd: str | None = None
    model: str | None = None
    tool: str | None = None
    on_branch: bool = False

    def matches_entry(self, role: str, tool: str | None, timestamp: str) -> bool:
        """Whether an entry passes the filters that its own fields answer."""
        if self.role is not None and role != self.role:
            return False
        if self.tool is not None and (tool is None or self.tool not in tool.split(" ")):
            return False
        if self.since is not None and timestamp < self.since:
            return False
        return not (self.until is not None and timestamp > self.until)

    def matches_cwd(self, cwd: str | None) -> bool:
        """Whether a session run in ``cwd`` passes ``--cwd`` (that directory or below)."""
        if self.cwd is None:
            return True
        have = (cwd or "").rstrip("/")
        want = self.cwd.rstrip("/") or "/"
        return have == want or have.startswith(want if want.endswith("/") else want + "/")


def entry_text(obj: Any) -> tuple[str, str | None, str] | None:
    """``(role, tool, text)`` of one entry's JSON object, or ``None`` if it has no text."""
    if not isinstance(obj, dict):
        return None
    kind = obj.get("type")
    if kind == "message":
        message = obj.get("message")
        if not isinstance(message, dict):
            return None
        role = message.get("role")
        role = role if isinstance(role, str) else "message"
        pieces = _content_text(message.get("content"))
        tools: list[str] = []
        for call in message.get("tool_calls") or ():
            if isinstance(call, dict):
                name = call.get("name")
                if isinstance(name, str):
                    tools.append(name)
                    pieces.append(name)
                args = call.get("arguments")
                if args:
                    pieces.append(_plain(args))
        name = message.get("name")
        if role == "tool" and isinstance(name, str):
            tools.append(name)
        text = "\n".join(p for p in pieces if p)
        tool = " ".join(tools) or None
        return (role, tool, text[:MAX_TEXT]) if text or tool else None
    if kind in ("compaction", "branch_summary"):
        summary = obj.get("summary")
        return (kind, None, summary[:MAX_TEXT]) if isinstance(summary, str) and summary else None
    if kind == "custom_message":
        text = "\n".join(_content_text(obj.get("content")))
        return ("custom", None, text[:MAX_TEXT]) if text else None
    return None


def parse_line(raw: bytes | str) -> Any:
    """A session line's JSON value, or ``None``; bytes that are not UTF-8 are read as
    U+FFFD (a damaged line still has its other words found)."""
    try:
        return parse_json(raw)
    except JSONError:
        pass
    if isinstance(raw, str):
        return None
    try:
        return parse_json(raw.decode("utf-8", "replace"))
    except JSONError:
        return None


def _content_text(content: Any) -> list[str]:
    if isinstance(content, str):
        return [content]
    out: list[str] = []
    if isinstance(content, list):
        for part in content:
            if isinstance(part, dict):
                for key in ("text", "thinking"):
                    value = part.get(key)
                    if isinstance(value, str) and value:
                        out.append(value)
    return out


def _plain(value: Any) -> str:
    """Tool-call arguments as text: the values of an object, a string as it is (a shell
    command reads as itself), anything else as compact JSON (as PostgreSQL reads them)."""
    items = value.values() if isinstance(value, dict) else [value]
    return "\n".join(v if isinstance(v, str) else _json(v) for v in items)


def _json(value: Any) -> str:
    try:
        return orjson.dumps(value).decode()
    except TypeError:
        return str(value)


@dataclass(frozen=True)
class Terms:
    """A query taken literally: each item of ``phrases`` is a phrase of words (one word: a
    plain term), all of them required; ``prefix`` says, for each, whether its last word is
    matched as the start of a word (a term written with a trailing ``*``, or one that looks
    like the start of a hex id: a sha prefix) rather than whole."""

    phrases: tuple[tuple[str, ...], ...]
    prefix: tuple[bool, ...]

    @property
    def empty(self) -> bool:
        """True when the query has no word to look for."""
        return not self.phrases

    def fts5(self) -> str:
        """The query in SQLite FTS5 syntax: every phrase quoted (nothing the user typed is
        read as an operator), all of them required."""
        parts = []
        for words, prefix in zip(self.phrases, self.prefix, strict=True):
            phrase = '"' + " ".join(words) + '"'
            parts.append(phrase + " *" if prefix else phrase)
        return " AND ".join(parts)

    def pattern(self) -> re.Pattern[str]:
        """A regular expression that finds each phrase in text (for snippets and scans)."""
        alternatives = []
        for words, prefix in zip(self.phrases, self.prefix, strict=True):
            body = r"[\W_]+".join(re.escape(w) for w in words)
            alternatives.append(r"(?<![^\W_])" + body + ("" if prefix else r"(?![^\W_])"))
        return re.compile("|".join(alternatives) or r"(?!)", re.IGNORECASE)

    def found_in(self, text: str) -> bool:
        """Whether every phrase occurs in ``text`` (the scan of a catalog with no index)."""
        for words, prefix in zip(self.phrases, self.prefix, strict=True):
            if Terms((words,), (prefix,)).pattern().search(text) is None:
                return False
        return True


_HEX_START = re.compile(r"[0-9a-f]{4,}")


def parse_query(query: str) -> Terms:
    """The user's words as terms and ``"phrases"`` (see the module's docstring); an
    unbalanced quote runs to the end. Every character that is not a letter or a digit
    separates words, as it does in the text; ``word*`` is a prefix, and so is a term that
    looks like the start of a hex id (four hex digits or more, a digit among them)."""
    phrases: list[tuple[str, ...]] = []
    prefix: list[bool] = []
    for i, piece in enumerate(query.split('"')):
        inside = i % 2 == 1
        chunks = [piece] if inside else piece.split()
        for chunk in chunks:
            words = tuple(w.casefold() for w in WORD.findall(chunk))
            if words:
                phrases.append(words)
                hexlike = (len(words) == 1 and _HEX_START.fullmatch(words[0]) is not None
                           and any(c.isdigit() for c in words[0]))
                prefix.append(not inside and (chunk.endswith("*") or hexlike))
    return Terms(tuple(phrases), tuple(prefix))


def query_terms(query: object) -> Terms:
    """``parse_query`` of a search query, which must be text holding a word (letters or
    digits): ``InvalidArgument`` otherwise, worded alike for every backend."""
    if not isinstance(query, str):
        raise InvalidArgument(f"a search query is text; got {type(query).__name__}")
    terms = parse_query(query)
    if terms.empty:
        raise InvalidArgument(f"nothing to search for in {query!r}: a query needs a word "
                              "(letters or digits)")
    return terms


def snippet(text: str, pattern: re.Pattern[str],
            width: int = SNIPPET_CHARS) -> tuple[str, list[tuple[int, int]]]:
    """A one-line window of ``text`` around its first match of ``pattern``, and the spans of
    the matches inside it (whitespace runs become one space first)."""
    flat = " ".join(text.split())
    first = pattern.search(flat)
    if first is None:
        return flat[:width], []
    start = max(0, first.start() - width // 3)
    end = min(len(flat), start + width)
    start = max(0, min(start, end - width))
    window = flat[start:end]
    marks = [(m.start() - start, m.end() - start) for m in pattern.finditer(flat, start, end)
             if m.end() > m.start()]
    prefix = "…" if start > 0 else ""
    suffix = "…" if end < len(flat) else ""
    shift = len(prefix)
    return prefix + window + suffix, [(a + shift, b + shift) for a, b in marks]
