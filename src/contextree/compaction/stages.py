"""The free rungs of the ladder: clear old tool results, then drop the oldest turns."""

from __future__ import annotations

from dataclasses import dataclass, replace

import orjson

from ..messages import Message, ToolCall
from ..truncation import is_truncated
from .pipeline import CompactionState, Plan


class ToolResults:
    """Replace old tool results (oldest first) by a placeholder saying how to get them back.

    The results of the newest ``keep_recent`` tool-calling steps are never cleared.
    """

    name = "tool_results"

    def __init__(self, keep_recent: int = 3) -> None:
        if keep_recent < 0:
            raise ValueError("keep_recent must be >= 0")
        self.keep_recent = keep_recent

    def __call__(self, state: CompactionState, plan: Plan) -> Plan | None:
        ctx = state.render(plan)
        messages, ids = ctx.messages, ctx.entry_ids
        calls: dict[str, ToolCall] = {}
        steps: list[int] = []
        for i, m in enumerate(messages):
            if m.role == "assistant" and m.tool_calls:
                steps.append(i)
                for c in m.tool_calls:
                    calls[c.id] = c
        protected_from = steps[-self.keep_recent] if 0 < self.keep_recent <= len(steps) else (
            0 if self.keep_recent else len(messages))
        total = state.tokens(plan)
        target = state.policy.target
        cleared = dict(plan.cleared)
        for i, m in enumerate(messages[:protected_from]):
            eid = ids[i]
            if m.role != "tool" or eid is None or eid in cleared or (m.meta or {}).get("kind"):
                continue
            call = calls.get(m.tool_call_id or "")
            text = placeholder(m, call)
            saving = state.count(m) - state.count(Message.tool(text, tool_call_id="x"))
            if saving <= 0:
                continue
            cleared[eid] = text
            total -= saving
            if total <= target:
                break
        if len(cleared) == len(plan.cleared):
            return None
        return replace(plan, cleared=cleared)


def placeholder(result: Message, call: ToolCall | None) -> str:
    """What the model sees instead of a cleared tool result: what it was and how to get it."""
    name = call.name if call else (result.name or "tool")
    args = ""
    if call is not None:
        args = orjson.dumps(call.arguments).decode()
        if len(args) > 200:
            args = args[:200] + "…"
    text = result.text
    size = f"{text.count(chr(10)) + 1} lines, {len(text.encode())} bytes"
    how = "Run the tool again with the same arguments if you need it."
    meta = result.meta or {}
    if is_truncated(meta):
        saved = meta["truncated"].get("saved_path")
        if saved:
            how = (f'The full output is saved at {saved}; read it with '
                   f'read(path="{saved}", offset=1, limit=2000).')
    return f"[Cleared to save context: result of {name}({args}), {size}. {how}]"


@dataclass(frozen=True)
class Cut:
    """Where the kept part of the context starts, and what must stay pinned before it."""

    first_kept: int  # index in the branch
    pins: tuple[str, ...]
    dropped_tokens: int
    dropped_ids: tuple[str, ...]


def choose_cut(state: CompactionState, plan: Plan, budget: int, *,
               reserve: int = 0) -> Cut | None:
    """The earliest cut that brings the context to ``budget`` tokens (or the latest possible).

    Cuts fall before a user message (a whole turn) when one reaches the budget, else before
    an assistant message (a whole step: a call is never separated from its results). The
    system prompt and the current task (the last user message) are pinned, never dropped.
    """
    ctx = state.render(plan)
    messages, ids = ctx.messages, ctx.entry_ids
    base_id = state.base.id if state.base is not None else None
    total = state.tokens(plan) + reserve
    last_user = max((i for i, m in enumerate(messages) if m.role == "user"), default=None)
    last_step = max((i for i, m in enumerate(messages) if m.role in ("user", "assistant")),
                    default=None)
    if last_step is None:
        return None
    candidates: list[tuple[int, bool]] = []  # (position, is turn start)
    for i, m in enumerate(messages):
        eid = ids[i]
        if eid is None or eid == base_id or i == 0 or i > last_step:
            continue
        if m.role in ("user", "assistant") and state.index.get(eid, -1) >= plan.first_kept:
            candidates.append((i, m.role == "user"))
    if not candidates:
        return None
    pins_always = [i for i, m in enumerate(messages) if m.role == "system" and ids[i] not in
                   (None, base_id)]
    best: Cut | None = None
    for turns_only in (True, False):
        dropped = 0
        prev = 0
        for pos, is_turn in candidates:
            dropped += sum(state.count(messages[j]) for j in range(prev, pos)
                           if _droppable(messages[j], ids[j], base_id))
            prev = pos
            if turns_only and not is_turn:
                continue
            pins = [ids[i] for i in pins_always if i < pos]
            pin_tokens = sum(state.count(messages[i]) for i in pins_always if i < pos)
            if last_user is not None and last_user < pos:
                pins.append(ids[last_user])
                pin_tokens += state.count(messages[last_user])
            cut = Cut(
                first_kept=state.index[ids[pos] or ""],
                pins=tuple(p for p in pins if p is not None),
                dropped_tokens=dropped - pin_tokens,
                dropped_ids=tuple(ids[j] or "" for j in range(pos)
                                  if _droppable(messages[j], ids[j], base_id)
                                  and j not in pins_always and j != last_user),
            )
            best = cut
            if total - cut.dropped_tokens <= budget:
                return cut
    return best


def _droppable(m: Message, eid: str | None, base_id: str | None) -> bool:
    return eid is not None and eid != base_id


class SlidingWindow:
    """Drop the oldest whole turns, leaving a note that says how much was dropped."""

    name = "sliding_window"

    def __call__(self, state: CompactionState, plan: Plan) -> Plan | None:
        note_reserve = 40
        cut = choose_cut(state, plan, state.policy.target, reserve=note_reserve)
        if cut is None or cut.first_kept <= plan.first_kept:
            return None
        note = (f"[{len(cut.dropped_ids)} earlier messages (about {cut.dropped_tokens} tokens) "
                "were dropped from the context to fit the window; the full history is kept in "
                "the session file.]")
        summary = f"{plan.summary}\n\n{note}" if plan.summary else note
        return replace(plan, summary=summary, first_kept=cut.first_kept,
                       pinned=tuple(dict.fromkeys([*plan.pinned, *cut.pins])))
