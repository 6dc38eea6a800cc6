"""Where to cut a branch: the earliest point that brings the context to a budget without
splitting a turn (or a step) and without dropping the system prompt or the current task."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .._messages import Message
from ._state import CompactionState, Plan

__all__ = ["Cut", "choose_cut", "dropped_items"]


@dataclass(frozen=True)
class Cut:
    """Where the kept part of the context starts, and what must stay pinned before it."""

    first_kept: int  # index in the branch
    pins: tuple[str, ...]
    dropped_tokens: int
    dropped_ids: tuple[str, ...]


def choose_cut(state: CompactionState, plan: Plan, budget: int, *,
               reserve: int = 0, steps: bool = True) -> Cut | None:
    """The earliest cut that brings the context to ``budget`` tokens (or the latest possible).

    Cuts fall before a user message (a whole turn) when one reaches the budget, else (when
    ``steps``) before an assistant message (a whole step: a call is never separated from its
    results). The system prompt and the current task (the last user message) are pinned,
    never dropped, and so are the entries ``plan`` already pins.
    """
    ctx = state.render(plan)
    messages, ids = ctx.messages, ctx.entry_ids
    last_user = max((i for i, m in enumerate(messages) if m.role == "user"), default=None)
    last_step = max((i for i, m in enumerate(messages) if m.role in ("user", "assistant")),
                    default=None)
    if last_step is None:
        return None
    candidates: list[tuple[int, bool]] = []  # (position, is turn start)
    for i in range(1, last_step + 1):
        m, eid = messages[i], ids[i]
        if eid is None or m.role not in ("user", "assistant"):
            continue
        if state.index.get(eid, -1) >= plan.first_kept and (steps or m.role == "user"):
            candidates.append((i, m.role == "user"))
    if not candidates:
        return None
    # Messages that stay whatever the cut: system messages (the prompt, the summary) and
    # pins. Everything else before a cut is dropped, with the results of its calls.
    plan_pins = set(plan.pinned)
    keep = [
        (m.role == "system" and ids[i] is not None) or ids[i] in plan_pins or i == last_user
        for i, m in enumerate(messages)
    ]
    sizes = state.sizes(messages)
    scale = state.scale
    total = round(sum(sizes) * scale) + reserve
    # dropped[k]: estimated tokens dropped by a cut before message k (a prefix sum)
    dropped = [0.0] * (len(messages) + 1)
    for j, n in enumerate(sizes):
        dropped[j + 1] = dropped[j] + (0 if keep[j] else n)
    chosen: int | None = None
    for turns_only in (True, False):
        for pos, is_turn in candidates:
            if turns_only and not is_turn:
                continue
            if total - round(dropped[pos] * scale) <= budget:
                chosen = pos
                break
        if chosen is not None:
            break
    if chosen is None:
        chosen = candidates[-1][0]
    pos = chosen
    return Cut(
        first_kept=state.index[ids[pos] or ""],
        pins=tuple(eid for j in range(pos) if keep[j]
                   and (eid := ids[j]) is not None and eid in state.index),
        dropped_tokens=round(dropped[pos] * scale),
        dropped_ids=tuple(eid for j in range(pos) if not keep[j] and (eid := ids[j]) is not None),
    )


def dropped_items(state: CompactionState, first_kept: int,
                  pins: Sequence[str]) -> list[tuple[Message, str | None]]:
    """Messages of the initial view that a cut at ``first_kept`` removes, as first written."""
    pinned = set(pins)
    return [(m, eid) for eid, i, m in state.initial_messages()
            if i < first_kept and eid not in pinned]
