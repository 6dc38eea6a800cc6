"""``Digest``: a deterministic, offline summary of the dropped history.

It keeps what an agent needs to carry on: the user's requests verbatim, files read and
changed, commands run with their exit codes, errors seen, what the assistant said and its
last plan. It is the default when no model is configured and the fallback when one fails.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace

import orjson

from ..messages import Message, ToolCall
from .pipeline import CompactionState, Plan, with_summary
from .stages import choose_cut

READ_TOOLS = frozenset({"read", "grep", "glob", "view", "cat"})
WRITE_TOOLS = frozenset({"write", "edit", "create", "apply_patch", "str_replace"})
SHELL_TOOLS = frozenset({"shell", "bash", "exec", "run"})
_EXIT = re.compile(r"exit code[:= ]+(-?\d+)", re.IGNORECASE)


def _cap(text: str, n: int) -> str:
    text = text.strip()
    return text if len(text) <= n else text[:n] + f"… [{len(text) - n} more chars]"


def _path_of(call: ToolCall) -> str | None:
    for key in ("path", "file_path", "filename", "file"):
        v = call.arguments.get(key)
        if isinstance(v, str):
            return v
    return None


def _exit_code(result: Message) -> int | None:
    meta = result.meta or {}
    code = meta.get("exit_code")
    if isinstance(code, int):
        return code
    m = _EXIT.search(result.text[-400:]) or _EXIT.search(result.text[:400])
    return int(m.group(1)) if m else None


def digest_messages(
    previous: str,
    items: Sequence[tuple[Message, str | None]],
    *,
    max_items: int = 40,
) -> str:
    """A structured digest of ``items`` (message, entry id), after the ``previous`` summary."""
    requests: list[str] = []
    reads: dict[str, None] = {}
    changes: dict[str, None] = {}
    commands: list[str] = []
    errors: list[str] = []
    said: list[str] = []
    calls: dict[str, ToolCall] = {}
    last_plan = ""
    for m, _ in items:
        kind = (m.meta or {}).get("kind")
        if m.role == "user" and kind is None:
            requests.append(_cap(m.text, 1500))
        elif m.role == "assistant":
            if m.text.strip():
                said.append(_cap(m.text, 300))
                last_plan = m.text
            for c in m.tool_calls or ():
                calls[c.id] = c
                path = _path_of(c)
                if path and c.name in READ_TOOLS:
                    reads[path] = None
                elif path and c.name in WRITE_TOOLS:
                    changes[path] = None
        elif m.role == "tool":
            call = calls.get(m.tool_call_id or "")
            name = call.name if call else (m.name or "tool")
            code = _exit_code(m)
            if call is not None and call.name in SHELL_TOOLS:
                cmd = call.arguments.get("command")
                cmd_text = cmd if isinstance(cmd, str) else orjson.dumps(call.arguments).decode()
                commands.append(f"`{_cap(cmd_text, 300)}` -> exit code "
                                f"{code if code is not None else '?'}")
            if m.is_error or (code is not None and code != 0):
                first = "\n".join(line for line in m.text.strip().splitlines()
                                  if line.strip())[-600:]
                errors.append(f"{name}: {_cap(first, 600)}")
    sections = []
    if previous.strip():
        sections.append(previous.strip())
    sections.append(_section("User requests (verbatim)", requests, max_items))
    sections.append(_section("Files read", list(reads), max_items))
    sections.append(_section("Files changed", list(changes), max_items))
    sections.append(_section("Commands run", commands, max_items))
    sections.append(_section("Errors seen", errors, max_items // 2))
    sections.append(_section("Assistant notes and decisions", said, max_items // 2))
    if last_plan:
        sections.append("Last assistant plan:\n" + _cap(last_plan, 1500))
    return "\n\n".join(s for s in sections if s)


def _section(title: str, items: list[str], limit: int) -> str:
    if not items:
        return ""
    shown = items[-limit:]
    more = f"\n- … {len(items) - len(shown)} earlier items not shown" if len(items) > limit else ""
    return f"{title}:" + more + "".join(f"\n- {i}" for i in shown)


def dropped_items(state: CompactionState, first_kept: int,
                  pins: Sequence[str]) -> list[tuple[Message, str | None]]:
    """Messages of the initial view that a cut at ``first_kept`` removes, as first written."""
    pinned = set(pins)
    out: list[tuple[Message, str | None]] = []
    for eid in state.initial_ids:
        i = state.index.get(eid)
        if i is None or i >= first_kept or eid in pinned:
            continue
        m = state.original(eid)
        if m is not None:
            out.append((m, eid))
    return out


class Digest:
    """Summarize everything before a cut with ``digest_messages``; keep recent steps whole."""

    name = "digest"

    def __init__(self, keep_ratio: float = 0.5) -> None:
        if not 0 < keep_ratio <= 1:
            raise ValueError("keep_ratio must be in (0, 1]")
        self.keep_ratio = keep_ratio

    def __call__(self, state: CompactionState, plan: Plan) -> Plan | None:
        cut = choose_cut(state, plan, int(state.policy.target * self.keep_ratio))
        first_kept = max(cut.first_kept, plan.first_kept) if cut else plan.first_kept
        pins = tuple(dict.fromkeys([*plan.pinned, *(cut.pins if cut else ())]))
        items = dropped_items(state, first_kept, pins)
        if not items:
            return None
        summary = digest_messages(state.initial_plan.summary, items)
        new = replace(plan, first_kept=first_kept, pinned=pins)
        return with_summary(new, summary, [eid for _, eid in items if eid])
