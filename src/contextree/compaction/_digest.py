"""``digest_messages``: a deterministic, offline summary of a run of messages.

The ``Digest`` stage (``contextree.compaction._stages``) writes it for the history it drops.
It keeps what an agent needs to carry on: the user's requests verbatim, files read and
changed, commands run with their exit codes, errors seen, the decisions the assistant
announced and its last plan. It is the default when no model is configured and the fallback
when one fails.

The digest fills a character budget (the room the cut leaves under the target): repeated
commands, paths and errors are listed once, and when everything does not fit each section
gets a share of the budget by weight (user requests the most, then errors and decisions,
changed files, failed commands; files only read, commands that succeeded and other remarks
the least) and drops its oldest items first (the user's first request is always kept).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

import orjson

from .._messages import Message, ToolCall
from ._evidence import READ_TOOLS, SHELL_TOOLS, WRITE_TOOLS, cap, error_excerpt, exit_code

__all__ = ["DEFAULT_MAX_CHARS", "digest_messages"]

_DECISION = re.compile(
    r"\b(?:decid\w*|decision|instead of|going with|go with|chose|choose|opt(?:ed)? for|"
    r"switch(?:ed|ing)? to|will use|won't|will not|must not|should not|prefer\w*|"
    r"plan(?:ned)?\b|next step|from now on|approach)",
    re.IGNORECASE,
)
_PLAN = re.compile(
    r"\b(?:plan|next steps?|todo|remaining|then I(?:'ll| will)|I(?:'ll| will) now)\b"
    r"|^\s*(?:\d+[.)]|[-*])\s+\S",
    re.IGNORECASE | re.MULTILINE,
)
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")

DEFAULT_MAX_CHARS = 200_000


def _path_of(call: ToolCall) -> str | None:
    for key in ("path", "file_path", "filename", "file", "target"):
        v = call.arguments.get(key)
        if isinstance(v, str):
            return v
    return None


def _decision_excerpt(text: str, n: int = 600) -> str:
    """The sentences of an assistant message that announce a decision."""
    if not _DECISION.search(text):
        return ""
    sentences = [s.strip() for s in _SENTENCE.split(text) if s.strip()]
    return cap(" ".join(s for s in sentences if _DECISION.search(s)), n)


@dataclass
class _Section:
    title: str
    weight: int  # its share of the budget when everything does not fit
    items: list[str] = field(default_factory=list)
    keep_first: bool = False  # trim after the first item (the user's first request)
    omitted: int = 0

    def size(self) -> int:
        return len(self.title) + 2 + sum(len(i) + 3 for i in self.items) + (
            80 if self.omitted else 0)

    def trim(self, budget: int) -> None:
        """Drop the oldest items until the section fits; the first one (if ``keep_first``)
        and the newest one stay, shortened if even they do not fit."""
        size = self.size()
        start = 1 if self.keep_first else 0
        drop = 0
        while size > budget and len(self.items) - drop > start + 1:
            size -= len(self.items[start + drop]) + 3
            if not self.omitted and not drop:
                size += 80
            drop += 1
        if drop:
            del self.items[start : start + drop]
            self.omitted += drop
        if size > budget:
            each = max(200, (budget - len(self.title) - 90) // max(1, len(self.items)) - 3)
            self.items = [cap(i, each) for i in self.items]

    def render(self) -> str:
        if not self.items:
            return ""
        more = (f"\n- … {self.omitted} earlier items not shown (the full history is in the "
                "session file)" if self.omitted else "")
        if self.keep_first and self.items:
            return (f"{self.title}:\n- {self.items[0]}" + more
                    + "".join(f"\n- {i}" for i in self.items[1:]))
        return f"{self.title}:" + more + "".join(f"\n- {i}" for i in self.items)


def _ordered(d: dict[str, str]) -> list[str]:
    return list(d.values())


def digest_messages(
    previous: str,
    items: Sequence[tuple[Message, str | None]],
    *,
    max_items: int | None = None,
    max_chars: int = DEFAULT_MAX_CHARS,
) -> str:
    """A structured digest of ``items`` (message, entry id), after the ``previous`` summary.

    At most ``max_chars`` characters (about; never less than the previous summary, which is
    kept, shortened in the middle if it alone takes more than half) and at most
    ``max_items`` items a section.
    """
    requests: list[str] = []
    reads: dict[str, str] = {}
    changes: dict[str, str] = {}
    failed: dict[str, str] = {}
    succeeded: dict[str, str] = {}
    errors: dict[str, str] = {}
    decisions: list[str] = []
    notes: list[str] = []
    calls: dict[str, ToolCall] = {}
    texts: list[str] = []
    for m, _ in items:
        if m.role == "user" and m.kind is None:
            if m.text.strip():
                requests.append(cap(m.text, 2000))
        elif m.role == "assistant":
            text = m.text.strip()
            if text:
                texts.append(text)
                decision = _decision_excerpt(text)
                if decision:
                    decisions.append(decision)
                else:
                    notes.append(cap(text, 300))
            for c in m.tool_calls or ():
                calls[c.id] = c
                path = _path_of(c)
                if path and c.name in WRITE_TOOLS:
                    changes.pop(path, None)
                    changes[path] = f"{path} ({c.name})"
                    reads.pop(path, None)
                elif path and c.name in READ_TOOLS and path not in changes:
                    reads.pop(path, None)
                    reads[path] = path
        elif m.role == "tool":
            call = calls.get(m.tool_call_id or "")
            name = call.name if call else (m.name or "tool")
            code = exit_code(m, scan_text=call is None or call.name in SHELL_TOOLS)
            failing = m.is_error or (code is not None and code != 0)
            if call is not None and call.name in SHELL_TOOLS:
                cmd = call.arguments.get("command")
                cmd_text = cap(cmd if isinstance(cmd, str)
                                else orjson.dumps(call.arguments).decode(), 300)
                line = f"`{cmd_text}` -> exit code {code if code is not None else '?'}"
                for d in (failed, succeeded):
                    d.pop(cmd_text, None)
                (failed if failing else succeeded)[cmd_text] = line
            if failing:
                excerpt = error_excerpt(m.text)
                if excerpt:
                    args = ""
                    if call is not None and call.name not in SHELL_TOOLS:
                        args = cap(orjson.dumps(call.arguments).decode(), 120)
                    key = f"{name}{args}: {excerpt}"
                    errors.pop(key, None)
                    errors[key] = key
    last_plan = next((t for t in reversed(texts) if _PLAN.search(t)), texts[-1] if texts else "")
    sections = [
        _Section("User requests (verbatim)", 30, requests, keep_first=True),
        _Section("Files changed", 12, _ordered(changes)),
        _Section("Errors seen", 15, _ordered(errors)),
        _Section("Commands that failed", 10, _ordered(failed)),
        _Section("Assistant decisions", 15, decisions),
        _Section("Commands that succeeded", 6, _ordered(succeeded)),
        _Section("Files read", 6, _ordered(reads)),
        _Section("Other assistant notes", 6, notes),
    ]
    if max_items is not None:
        for s in sections:
            if len(s.items) > max_items:
                s.omitted += len(s.items) - max_items
                del s.items[: len(s.items) - max_items]
    plan = f"Last assistant plan:\n{cap(last_plan, 1500)}" if last_plan else ""
    prev = previous.strip()
    if len(prev) > max_chars // 2:
        prev = cap(prev, max_chars // 2)
    _fit(sections, max_chars - len(prev) - len(plan) - 4)
    parts = [prev, *(s.render() for s in sections), plan]
    return "\n\n".join(p for p in parts if p)


def _fit(sections: list[_Section], budget: int) -> None:
    """Share ``budget`` among the sections by weight (what one does not need goes to the
    others), then trim each to its share, oldest items first."""
    sizes = {id(s): s.size() for s in sections}
    if sum(sizes.values()) <= budget:
        return
    active = [s for s in sections if s.items]
    remaining = float(max(budget, 0))
    while active:
        weights = sum(s.weight for s in active)
        fits = [s for s in active if sizes[id(s)] <= remaining * s.weight / weights]
        if not fits:
            for s in active:
                s.trim(int(remaining * s.weight / weights))
            return
        for s in fits:
            remaining -= sizes[id(s)]
            active.remove(s)
