"""The incremental digest: what compaction keeps of the messages it folds, with no model.

``DigestState`` is the structured state of a compaction summary. Each compaction adds the
messages it folds (``add``) to the state the previous compaction stored in its entry
(``details["digest"]``), so stacked compactions merge state instead of re-reading text:

- every message the user typed, verbatim and in order (corrections and work the user deferred are
  simply the user's words, newest last);
- errors, open until the same command (or the same tool on the same target) later
  succeeds, then listed as resolved;
- files changed, with their last change (tools of kind EDIT/WRITE: their path argument, or
  the files a patch names);
- identifiers from tool output that the agent then used (a sha printed by ``git log`` and
  passed to ``git show``, a port read from a config file...);
- the assistant's prose (its first sentences), commands run with their exit codes, and
  excerpts of tool output to fill whatever room is left;
- summaries it cannot read as state (a model's, an imported session's), carried verbatim.

``render(budget)`` writes the state as Markdown within a character budget, by priority:
the user's messages (newest first within their share; the opening turn always whole), the
carried summaries, then open errors, files, identifiers, notes, resolved errors, commands
and details sharing what is left by weight. Nothing here matches domain words.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from .._messages import Message, ToolCall
from .._text import count_lines, shorten
from ..tools._kinds import ToolKind
from ._evidence import (
    CallIndex,
    argument_text,
    cap,
    changed_paths,
    command_of,
    error_excerpts,
    exit_code,
    identifiers_in,
    kind_of,
    output_text,
    path_of,
)

__all__ = ["DEFAULT_MAX_CHARS", "USER_CAP", "DigestState", "digest_messages"]

DEFAULT_MAX_CHARS = 200_000
USER_CAP = 4_000  # one user message is kept whole up to this many characters
_OPENING = 5  # at most this many user messages before the first reply form the opening turn
_SHORT_USER = 160  # an old user message past the user budget: its first sentence
_NOTE = 300  # the first sentences of an assistant message
_EXCERPT = 600  # a tool output excerpt in the details
_KEEP = {"identifiers": 500, "candidates": 500, "notes": 400, "commands": 300,
         "errors": 200, "details": 300, "read": 300}
_SENTENCE = re.compile(r"(?<=[.!?])\s+")
_HEX = re.compile(r"[0-9a-f]{7,40}")
_EDIT_ARGS = (("old_string", "new_string"), ("old", "new"), ("oldText", "newText"),
              ("old_str", "new_str"))


def _first_sentences(text: str, n: int, count: int = 2) -> str:
    """The first ``count`` sentences of the first paragraph of ``text``, at most ``n``
    characters."""
    para = text.strip().split("\n\n", 1)[0].replace("\n", " ")
    sentences = _SENTENCE.split(para, maxsplit=count)
    return shorten(" ".join(sentences[:count]).strip(), n)


def _bounded(items: list[Any], n: int) -> list[Any]:
    return items[-n:] if len(items) > n else items


def _newest(items: list[str], n: int, chars: int) -> list[str]:
    """The newest of ``items``: at most ``n`` of them, in about ``chars`` characters."""
    out: list[str] = []
    size = 0
    for item in reversed(items[-n:]):
        size += len(item)
        if size > chars and out:
            break
        out.append(item)
    return out[::-1]


def _bounded_dict(d: dict[str, Any], n: int) -> dict[str, Any]:
    if len(d) <= n:
        return d
    return dict(list(d.items())[-n:])


@dataclass
class DigestState:
    """The state of a digest (see the module docstring). JSON-ready through ``to_json``."""

    users: list[str] = field(default_factory=list)
    opening: int = 0  # the first ``opening`` user messages form the opening turn
    opening_done: bool = False
    earlier: list[str] = field(default_factory=list)  # summaries carried verbatim
    model: str = ""  # the latest summary a model wrote (carried verbatim)
    errors: dict[str, dict[str, Any]] = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)
    read: dict[str, None] = field(default_factory=dict)  # files read, newest last
    identifiers: list[str] = field(default_factory=list)
    candidates: list[str] = field(default_factory=list)  # seen in tool output, not yet used
    notes: list[str] = field(default_factory=list)
    commands: dict[str, str] = field(default_factory=dict)
    details: list[str] = field(default_factory=list)
    folded: int = 0  # messages folded so far
    folded_tokens: int = 0
    # Not stored: every identifier seen in the tool output of this fold.
    _seen: dict[str, None] = field(default_factory=dict, repr=False, compare=False)

    # -- JSON ---------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        """The state as stored in a compaction entry's ``details["digest"]``."""
        return {
            "version": 1,
            "users": list(self.users), "opening": self.opening,
            "opening_done": self.opening_done, "earlier": list(self.earlier),
            "model": self.model,
            "errors": {k: dict(v) for k, v in _bounded_dict(self.errors,
                                                           _KEEP["errors"]).items()},
            "files": dict(self.files),
            "read": _bounded(list(self.read), _KEEP["read"]),
            "identifiers": list(_bounded(self.identifiers, _KEEP["identifiers"])),
            "candidates": self._candidates(),
            "notes": _newest(self.notes, _KEEP["notes"], 40_000),
            "commands": dict(_bounded_dict(self.commands, _KEEP["commands"])),
            "details": _newest(self.details, _KEEP["details"], 40_000),
            "folded": self.folded, "folded_tokens": self.folded_tokens,
        }

    def _candidates(self) -> list[str]:
        """The newest identifiers seen in tool output and not used yet (kept so a later
        use still finds them)."""
        used = set(self.identifiers)
        seen = [c for c in {**dict.fromkeys(self.candidates), **self._seen} if c not in used]
        return _bounded(seen, _KEEP["candidates"])

    @classmethod
    def from_json(cls, data: Any) -> DigestState | None:
        """The state stored by ``to_json``, or ``None`` when ``data`` is not one."""
        if not isinstance(data, Mapping) or data.get("version") != 1:
            return None
        try:
            return cls(
                users=[str(u) for u in data.get("users", [])],
                opening=int(data.get("opening", 0)),
                opening_done=bool(data.get("opening_done", False)),
                earlier=[str(e) for e in data.get("earlier", [])],
                model=str(data.get("model", "")),
                errors={str(k): dict(v) for k, v in dict(data.get("errors", {})).items()},
                files={str(k): str(v) for k, v in dict(data.get("files", {})).items()},
                read=dict.fromkeys(str(r) for r in data.get("read", [])),
                identifiers=[str(i) for i in data.get("identifiers", [])],
                candidates=[str(i) for i in data.get("candidates", [])],
                notes=[str(n) for n in data.get("notes", [])],
                commands={str(k): str(v) for k, v in dict(data.get("commands", {})).items()},
                details=[str(d) for d in data.get("details", [])],
                folded=int(data.get("folded", 0)),
                folded_tokens=int(data.get("folded_tokens", 0)),
            )
        except (TypeError, ValueError):
            return None

    @classmethod
    def from_summary(cls, summary: str) -> DigestState:
        """A state that carries a summary it cannot read (a model's, an imported one)."""
        return cls(earlier=[summary.strip()] if summary.strip() else [])

    def copy(self) -> DigestState:
        """An independent copy (folding more into it leaves this one as it is)."""
        return DigestState(
            users=list(self.users), opening=self.opening, opening_done=self.opening_done,
            earlier=list(self.earlier), model=self.model,
            errors={k: dict(v) for k, v in self.errors.items()}, files=dict(self.files),
            read=dict(self.read),
            identifiers=list(self.identifiers), candidates=list(self.candidates),
            notes=list(self.notes), commands=dict(self.commands), details=list(self.details),
            folded=self.folded, folded_tokens=self.folded_tokens, _seen=dict(self._seen),
        )

    # -- folding ------------------------------------------------------------------------
    def add(self, items: Iterable[tuple[Message, str | None]],
            kinds: Mapping[str, ToolKind] | None = None, *, tokens: int = 0) -> None:
        """Fold ``items`` (message, entry id), oldest first, into the state. ``tokens``:
        what they cost in the context (for the header)."""
        index = CallIndex()
        known = set(self.identifiers)
        seen = self._seen
        for c in self.candidates:
            seen.setdefault(c, None)
        assistant, tool, see = self._assistant, self._tool, index.see
        for m, _ in items:
            self.folded += 1
            role = m.role
            if role == "tool":
                tool(m, see(m), kinds, seen)
            elif role == "assistant":
                if self.users:
                    self.opening_done = True
                see(m)
                assistant(m, kinds, seen, known)
            elif role == "user":
                self._user(m)
            elif m.kind is not None and m.text.strip():  # a branch summary, a custom message
                self.details.append(cap(m.text, _EXCERPT))
        self.folded_tokens += tokens

    def _user(self, m: Message) -> None:
        text = m.text.strip()
        if not text:
            return
        if m.kind is not None:  # not typed by a person (a custom message)
            self.details.append(cap(text, _EXCERPT))
            return
        self.users.append(cap(text, USER_CAP))
        if not self.opening_done:
            self.opening += 1
            self.opening_done = self.opening >= _OPENING

    def _assistant(self, m: Message, kinds: Mapping[str, ToolKind] | None,
                   seen: dict[str, None], known: set[str]) -> None:
        text = m.text.strip()
        if text:
            note = _first_sentences(text, _NOTE)
            self.notes.append(note)
            if len(text) > len(note) + 20:
                self.details.append(cap(text, _EXCERPT * 2))
        used: list[str] = []
        for c in m.tool_calls or ():
            kind = kind_of(c.name, kinds)
            if kind in (ToolKind.EDIT, ToolKind.WRITE):
                for path in changed_paths(c):
                    self.files.pop(path, None)
                    self.files[path] = _change(c, kind, path)
            used.append(argument_text(c))
        if text:
            used.append(text)
        if seen and used:
            self._promote(" ".join(used), seen, known)

    def _promote(self, text: str, seen: Mapping[str, None], known: set[str]) -> None:
        for token in identifiers_in(text):
            if token in known:
                continue
            if token in seen or (len(token) > 7 and _HEX.fullmatch(token) is not None
                                 and any(token[:k] in seen for k in range(7, 13))):
                known.add(token)
                self.identifiers.append(token)

    def _tool(self, m: Message, call: ToolCall | None, kinds: Mapping[str, ToolKind] | None,
              seen: dict[str, None]) -> None:
        name = call.name if call else (m.name or "tool")
        kind = kind_of(name, kinds)
        text = output_text(m)
        shell = kind is ToolKind.SHELL
        code = exit_code(m, scan_text=call is None or shell)
        failing = m.is_error or (code is not None and code != 0)
        if call is not None and shell:
            cmd = cap(command_of(call), 300)
            key, what = cmd, f"`{cmd}`"
            self.commands.pop(cmd, None)
            status = (f"exit code {code}" if code is not None
                      else "failed" if failing else "ok")
            self.commands[cmd] = f"`{cmd}` -> {status}"
        else:
            path = path_of(call) if call is not None else None
            target = (path or cap(orjson.dumps(call.arguments).decode(), 160)
                      if call is not None else "")
            key = what = f"{name}({target})"
            if path and kind is ToolKind.READ:  # the artifact trail: what was read
                self.read.pop(path, None)
                self.read[path] = None
        if failing:
            self.errors.pop(key, None)
            full, brief = error_excerpts(text, 500, 240)
            self.errors[key] = {"what": what, "error": full, "brief": brief, "code": code,
                                "open": True}
        elif key in self.errors and self.errors[key].get("open"):
            entry = self.errors.pop(key)
            entry["open"] = False
            self.errors[key] = entry
        for token in identifiers_in(text):
            seen.pop(token, None)
            seen[token] = None  # newest last
            if len(token) > 7 and _HEX.fullmatch(token):
                for k in range(7, min(len(token), 13)):  # a short sha names the same commit
                    seen.setdefault(token[:k], None)
        if text.strip():
            self.details.append(f"{what}: {_output_excerpt(text)}")

    def promote_used(self, messages: Sequence[Message]) -> None:
        """Keep the identifiers of folded tool output that ``messages`` (the part of the
        context that stays) use in assistant text or tool-call arguments."""
        seen = self._seen
        if not seen and not self.candidates:
            return
        for c in self.candidates:
            seen.setdefault(c, None)
        known = set(self.identifiers)
        for m in messages:
            if m.role != "assistant":
                continue
            parts = [m.text, *(argument_text(c) for c in m.tool_calls or ())]
            self._promote(" ".join(parts), seen, known)

    def pinned_identifiers(self, new_users: Sequence[str] = (), newest: int = 40,
                           paths: int = 10) -> list[str]:
        """The identifiers a summary must copy: the newest ``newest`` opaque ones the agent
        used (shas, ids, ports...), its newest ``paths`` paths (the others can be found
        again with ls or grep), and those in the user messages ``new_users``."""
        opaque = [i for i in self.identifiers if not _is_path(i)]
        found = [i for i in self.identifiers if _is_path(i)]
        out = dict.fromkeys([*opaque[-newest:], *found[-paths:]])
        for u in new_users:
            out.update(dict.fromkeys(identifiers_in(u)))
        return list(out)

    # -- rendering ----------------------------------------------------------------------
    def render(self, max_chars: int = DEFAULT_MAX_CHARS, *, user_chars: int | None = None,
               max_items: int | None = None, hard_only: bool = False,
               essential: bool = False) -> tuple[str, bool]:
        """The state as Markdown in at most about ``max_chars`` characters, and whether
        everything fitted.

        ``user_chars`` is the user messages' share (default: a quarter of ``max_chars``):
        the newest that fit are kept whole, older ones shortened to their first sentence;
        the opening turn is always whole. ``hard_only``: only what is never trimmed (the
        header, the user messages, the carried summaries); ``essential``: without the
        files read, the commands run and the details that fill the room.
        """
        if user_chars is None:
            user_chars = max_chars // 4
        complete = True
        head: list[str] = []
        if self.folded:
            about = f" (about {self.folded_tokens} tokens)" if self.folded_tokens else ""
            head.append(f"{self.folded} earlier messages{about} were folded into this "
                        "summary; the full history is kept in the session file. What the "
                        "user said is at the end, verbatim.")
        users, whole = self._render_users(user_chars, max_chars - 300)
        complete &= whole
        carried = [*("## Earlier summary (carried verbatim)\n" + t for t in self.earlier),
                   *(["## Summary written by the summarizer\n" + self.model] if self.model
                     else [])]
        room = max_chars - sum(len(p) + 2 for p in [*head, users])
        if carried and sum(len(c) + 2 for c in carried) > room:
            # The carried summaries alone overrun the budget: each is shortened (in the
            # middle, the cut counted), never dropped.
            complete = False
            each = max(400, room // len(carried) - 2)
            carried = [cap(c, each) for c in carried]
        parts = [*head, *carried]
        if not hard_only:
            sections = self._sections(max_items)
            if essential:
                sections = sections[:-_FILLERS]
            budget = max_chars - sum(len(p) + 2 for p in [*parts, users])
            complete &= _fit(sections, budget)
            parts += [s.render() for s in sections if s.items]
        # The user's own words come last: nearest the kept messages, after any evidence
        # they correct.
        parts.append(users)
        return "\n\n".join(p for p in parts if p), complete

    def _render_users(self, user_chars: int, max_chars: int) -> tuple[str, bool]:
        """The user section: the opening turn whole, then the newest messages whole within
        ``user_chars``, older ones shortened within a quarter as much again, all within
        ``max_chars`` (only the opening turn may overrun it)."""
        users = self.users
        if not users:
            return "", True
        protected = set(range(max(1, min(self.opening, len(users)))))
        pinned = sum(len(users[i]) + 3 for i in protected)
        user_chars = max(min(user_chars, max_chars - pinned), 0)
        room = user_chars
        full = set(protected)
        i = len(users) - 1
        while i >= 0:
            if i not in protected:
                if len(users[i]) + 3 > room:
                    break
                room -= len(users[i]) + 3
                full.add(i)
            i -= 1
        # Older ones are shortened to their first sentence, newest first, in what is left
        # of the user share plus a quarter as much again; the oldest past that are counted.
        extra = min(max(room, 0) + user_chars // 4, max(max_chars - pinned - user_chars, 0))
        short: dict[int, str] = {}
        omitted = 0
        for j in range(i, -1, -1):
            if j in full:
                continue
            s = _first_sentences(users[j], _SHORT_USER, count=1)
            if len(s) + 3 > extra:
                omitted = sum(1 for k in range(j + 1) if k not in full)
                break
            extra -= len(s) + 3
            short[j] = s
        lines = ["## What the user said (verbatim, oldest first)"]
        noted = False
        for j, u in enumerate(users):
            if j in full:
                lines.append("- " + u.replace("\n", "\n  "))
            elif j in short:
                lines.append("- (shortened) " + short[j])
            elif not noted:
                noted = True
                lines.append(f"- … {omitted} older messages of the user not shown (the full "
                             "history is in the session file)")
        return "\n".join(lines), not short and not omitted

    def _sections(self, max_items: int | None) -> list[_Section]:
        open_errors = [_error_line(e) for e in self.errors.values() if e.get("open")]
        resolved = [_error_line(e) for e in self.errors.values() if not e.get("open")]
        sections = [
            _Section("Open errors (newest last)", 6, open_errors),
            _Section("Files changed (last change)", 5, [f"{v}" for v in self.files.values()]),
            _Section("Identifiers from tool output that were used", 4,
                     [", ".join(i for i in self.identifiers if not _is_path(i))], join=True),
            _Section("Paths from tool output that were used", 2,
                     [", ".join(i for i in self.identifiers if _is_path(i))], join=True),
            _Section("What the assistant said (first sentences, newest last)", 4,
                     list(dict.fromkeys(self.notes))),
            _Section("Errors since resolved", 3, resolved),
            # (from here on: what fills the room the essentials leave, see ``render``)
            _Section("Files read (newest last)", 1,
                     [", ".join(p for p in self.read if p not in self.files)], join=True,
                     noun="files", optional=True),
            _Section("Commands run (last exit code)", 3, list(self.commands.values())),
            _Section("More detail from the folded messages (newest last)", 2,
                     list(dict.fromkeys(reversed(self.details)))[::-1]),
        ]
        for s in sections:
            if s.join and s.items == [""]:
                s.items = []
        if max_items is not None:
            for s in sections:
                if not s.join and len(s.items) > max_items:
                    s.omitted += len(s.items) - max_items
                    del s.items[: len(s.items) - max_items]
        return sections


def _is_path(token: str) -> bool:
    """A path (recoverable with ls or grep), as opposed to an opaque identifier or a URL."""
    return not token.startswith(("http://", "https://")) and ("/" in token or "." in token)


def _error_line(e: Mapping[str, Any]) -> str:
    code = e.get("code")
    status = f"exit code {code}" if code is not None else "an error"
    excerpt = e.get("error") or ""
    if e.get("open"):
        return f"{e.get('what')} ended with {status}: {excerpt}".rstrip(": ")
    brief = e.get("brief") or shorten(excerpt, 240)
    return f"{e.get('what')} ended with {status} ({brief}); a later run of it succeeded"


def _output_excerpt(text: str) -> str:
    """The first two and last three lines of an output (read from its ends only)."""
    n = count_lines(text)
    if n <= 6:
        return cap(" | ".join([s for ln in text.splitlines() if (s := ln.strip())]), _EXCERPT)
    head = " | ".join(ln.strip() for ln in text[:1000].strip().splitlines()[:2])
    tail = " | ".join(ln.strip() for ln in text[-1000:].strip().splitlines()[-3:])
    return cap(f"{head} | … {n - 5} lines … | {tail}", _EXCERPT)


def _lines(n: int) -> str:
    return f"{n} line" if n == 1 else f"{n} lines"


def _change(call: ToolCall, kind: ToolKind, path: str) -> str:
    args = call.arguments
    for old_key, new_key in _EDIT_ARGS:
        old, new = args.get(old_key), args.get(new_key)
        if isinstance(old, str) and isinstance(new, str):
            return (f"{path}: {call.name} {shorten(old.strip(), 80)!r} -> "
                    f"{shorten(new.strip(), 80)!r}")
    content = args.get("content")
    if isinstance(content, str):
        return f"{path}: {call.name} wrote the whole file ({_lines(count_lines(content))})"
    if kind is ToolKind.EDIT and path not in (path_of(call) or ""):
        return f"{path}: {call.name} (a patch)"
    return f"{path}: {call.name}"


_MORE = 80  # the line that says how many older items are not shown
_FILLERS = 3  # the last sections (files read, commands run, details) fill leftover room


@dataclass
class _Section:
    title: str
    weight: int  # its share of the budget when everything does not fit
    items: list[str] = field(default_factory=list)
    join: bool = False  # one item, trimmed by dropping its oldest comma-separated parts
    omitted: int = 0
    noun: str = ""  # what its items are, when it says how many are not shown
    optional: bool = False  # left out, its share given to the others, when too small

    def size(self) -> int:
        return len(self.title) + 5 + sum(map(len, self.items)) + 3 * len(self.items) + (
            _MORE if self.omitted else 0)

    def trim(self, budget: int) -> None:
        """Keep the newest items that fit in ``budget``; the newest one is shortened when
        even it does not fit."""
        if self.join and self.items:
            parts = self.items[0].split(", ")
            keep: list[str] = []
            size = len(self.title) + 5 + _MORE
            for p in reversed(parts):
                if size + len(p) + 2 > budget and keep:
                    break
                keep.append(p)
                size += len(p) + 2
            self.omitted += len(parts) - len(keep)
            self.items = [", ".join(reversed(keep))]
            return
        size = len(self.title) + 5 + (_MORE if len(self.items) > 1 or self.omitted else 0)
        keep_from = len(self.items)
        for k in range(len(self.items) - 1, -1, -1):
            if size + len(self.items[k]) + 3 > budget:
                break
            size += len(self.items[k]) + 3
            keep_from = k
        if keep_from == len(self.items) and self.items:  # not even the newest one fits
            room = max(budget - size - 3, 0)
            keep_from = len(self.items) - 1
            if room < 40:
                self.omitted += len(self.items)
                self.items = []
                return
            self.items[-1] = cap(self.items[-1], room)
        self.omitted += keep_from
        del self.items[:keep_from]

    def render(self) -> str:
        more = ""
        if self.omitted:
            what = self.noun or ("identifiers" if self.join else "items")
            more = (f"\n- … {self.omitted} older {what} not shown (the full history is in the "
                    "session file)")
        return f"## {self.title}" + more + "".join(f"\n- {i}" for i in self.items)


def _fit(sections: list[_Section], budget: int) -> bool:
    """Share ``budget`` among the sections: each first gets what it needs up to its weighted
    share, then what is left goes to those that want more, in priority order; each is
    trimmed to what it got, oldest items first. An ``optional`` section whose share is too
    small to show anything is left out, and its share goes to the others. True when
    nothing was cut."""
    sizes = {id(s): s.size() for s in sections if s.items}
    if sum(sizes.values()) <= budget:
        return True
    active = [s for s in sections if s.items]
    weights = sum(s.weight for s in active) or 1
    remaining = max(budget, 0)
    given: dict[int, int] = {}
    for s in active:
        give = min(sizes[id(s)], int(budget * s.weight / weights), remaining)
        given[id(s)] = give
        remaining -= give
    for s in active:
        if s.optional and given[id(s)] < min(sizes[id(s)], len(s.title) + 5 + _MORE + 60):
            remaining += given[id(s)]
            given[id(s)] = 0
    for s in active:
        if s.optional and not given[id(s)]:
            continue  # (it takes what is left only after the others)
        more = min(sizes[id(s)] - given[id(s)], remaining)
        given[id(s)] += more
        remaining -= more
    for s in active:
        if s.optional and not given[id(s)]:
            given[id(s)] = min(sizes[id(s)], remaining)
            remaining -= given[id(s)]
            if given[id(s)] < min(sizes[id(s)], len(s.title) + 5 + _MORE + 60):
                s.items = []  # no room for it
                continue
        if given[id(s)] < sizes[id(s)]:
            s.trim(given[id(s)])
    return False


def digest_messages(
    previous: str,
    items: Sequence[tuple[Message, str | None]],
    *,
    max_items: int | None = None,
    max_chars: int = DEFAULT_MAX_CHARS,
    kinds: Mapping[str, ToolKind] | None = None,
) -> str:
    """A digest of ``items`` (message, entry id), after the ``previous`` summary (carried
    verbatim), in at most about ``max_chars`` characters and ``max_items`` items a section.

    A convenience over ``DigestState``: the compaction stages keep the state itself, so the
    next compaction merges it instead of reading this text.
    """
    state = DigestState.from_summary(previous)
    state.add(items, kinds)
    return state.render(max_chars, max_items=max_items)[0]
