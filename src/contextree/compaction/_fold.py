"""Folding: what every stage that drops messages does with them.

Nothing leaves the view without a trace. ``fold`` chooses a cut that leaves room for the
summary of what it drops, folds the dropped messages into the digest state of the previous
summary, and writes the new summary: the summarizer's (checked before it is accepted) when
one is asked for, else the digest. Either way the user's own messages are in it verbatim,
and the summary uses the room the cut leaves: the context lands between 0.85 and 1.0 of the
target whenever there is enough to say.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from msgspec.structs import replace as replace_struct

from .._messages import Message, Usage
from ._cuts import choose_cut, dropped_items
from ._digest import DEFAULT_MAX_CHARS, DigestState
from ._state import CompactionState, Plan, Summarizer

__all__ = ["fold", "with_model_text"]

LOW = 0.85  # the context should land at or above this fraction of the target...
AIM = 0.97  # ...aiming here, never above 1.0
MIN_SUMMARY = 256  # tokens a summary may claim whatever the target (a tiny target is missed)


def fold(state: CompactionState, plan: Plan, *, steps: bool, keep_ratio: float = 1.0,
         summarizer: Summarizer | None = None, force_model: bool = False) -> Plan | None:
    """A plan that drops the oldest turns (or steps, with ``steps``) of ``plan`` and folds
    them into its summary, or ``None`` when it would drop nothing new.

    The kept part gets at most ``keep_ratio`` of the target, and leaves room for the
    summary. ``summarizer`` writes the summary when the plan reaches the target (always, with
    ``force_model``); the digest stands in when it fails or its reply is rejected.
    """
    cut = _cut(state, plan, steps=steps, keep_ratio=keep_ratio)
    if cut is None:
        return None
    target = state.policy.target
    new, items, digest, need = cut
    summary, complete = _fill(state, new, digest, _room(state, new, digest, need),
                              _user_chars(state, digest))
    size = state.summary_tokens(new, summary)
    if keep_ratio < 1 and complete and state.bare_tokens(new) + size < LOW * target:
        # The digest says all it has in less than the room: keep more recent messages
        # instead of leaving the room empty.
        wider = _cut(state, plan, steps=steps, keep_ratio=1.0, reserve=size)
        if wider is not None and wider[0].first_kept < new.first_kept:
            new, items, digest, need = wider
            summary, _ = _fill(state, new, digest, _room(state, new, digest, need),
                               _user_chars(state, digest))
    bare = state.bare_tokens(new)
    ids = tuple(eid for _, eid in items if eid)
    if summarizer is not None and (force_model or bare + need <= target):
        saves = state.tokens(plan) - bare  # what the summary must stay under to pay off
        with_model = _summarized(state, new, digest, items, _room(state, new, digest, need), saves,
                                 _user_chars(state, digest), summarizer)
        if with_model is not None:
            return _restore(state, replace(with_model, summarized=ids))
    return _restore(state, replace(new, summary=summary, digest=digest, summarized=ids))


def with_model_text(state: CompactionState, plan: Plan, text: str) -> Plan:
    """``plan`` (a folded one) whose summary carries ``text``, a summary written elsewhere
    (a provider's), in place of the summaries it updates; the user's messages and the
    digest's other sections stay around it, in the room under the target."""
    digest = (plan.digest or DigestState()).copy()
    digest.earlier, digest.model = [], text.strip()
    need = _essential(state, plan, digest)
    summary, _ = _fill(state, plan, digest, _room(state, plan, digest, need),
                       _user_chars(state, digest))
    return replace(plan, summary=summary, digest=digest)


def _restore(state: CompactionState, plan: Plan) -> Plan:
    """Give back, newest first, tool results this compaction cleared in the part that
    stays, while the context is under ``LOW`` of the target and they fit under it."""
    target = state.policy.target
    total = state.tokens(plan)
    if total >= LOW * target or not plan.cleared:
        return plan
    earlier = state.initial_plan.cleared
    cleared = dict(plan.cleared)
    for eid in reversed(list(cleared)):
        i = state.index.get(eid)
        original = state.original(eid)
        if eid in earlier or i is None or i < plan.first_kept or original is None:
            continue
        shown = Message.tool(cleared[eid], tool_call_id="x", name=original.name)
        cost = round((state.sizes((original,))[0] - state.sizes((shown,))[0]) * state.scale)
        if total + cost <= target:
            del cleared[eid]
            total += cost
            if total >= AIM * target:
                break
    if len(cleared) == len(plan.cleared):
        return plan
    return replace(plan, cleared=cleared)


def _room(state: CompactionState, plan: Plan, digest: DigestState, need: int) -> int:
    """The summary's room under the target; never less than what is never cut (the user's
    messages, the carried summaries), nor than ``MIN_SUMMARY`` of what it ``need``s: when
    what must stay leaves less, the context ends above the target rather than lose them.
    Beyond that, errors, files and notes share the room under the target, never more."""
    return max(state.policy.target - state.bare_tokens(plan), _hard(state, plan, digest),
               min(need, MIN_SUMMARY))


def _hard(state: CompactionState, plan: Plan, digest: DigestState) -> int:
    """Tokens of the part of the summary that is never cut."""
    text = digest.render(DEFAULT_MAX_CHARS, user_chars=_user_chars(state, digest),
                         hard_only=True)[0]
    return state.summary_tokens(plan, text)


def _cut(state: CompactionState, plan: Plan, *, steps: bool, keep_ratio: float,
         reserve: int | None = None
         ) -> tuple[Plan, list[tuple[Message, str | None]], DigestState, int] | None:
    """The earliest cut whose kept part plus the essential summary of what it drops fits the
    target (``reserve``: the summary's size, when known), with the dropped messages and
    their digest (folded into the initial one)."""
    target = state.policy.target
    base = state.initial_plan.digest or DigestState()
    bare_plan = replace(plan, summary="") if plan.summary else plan
    need = _essential(state, plan, base) if reserve is None else reserve
    digest = base.copy()
    items: list[tuple[Message, str | None]] = []
    best: Plan | None = None
    margin = int((1 - AIM) * target)  # the summary aims that far under the target
    for _ in range(6):
        budget = min(target - need - margin, int(target * keep_ratio))
        cut = choose_cut(state, bare_plan, max(budget, 0), steps=steps)
        if cut is None:
            break
        first_kept = max(cut.first_kept, plan.first_kept)
        if best is not None and first_kept <= best.first_kept:
            break  # the cut cannot move any later
        pins = tuple(dict.fromkeys([*plan.pinned, *cut.pins]))
        found = dropped_items(state, first_kept, pins)
        if not found and best is None and reserve is None:
            # Nothing to drop: the digest (and so the room it needs, the budget and the
            # cut) would stay as they are, so no later pass can drop anything either.
            return None
        if found[: len(items)] == items:
            extra = found[len(items):]
        else:  # (pins changed what an earlier cut dropped) start again
            digest, extra = base.copy(), found
        digest.add(extra, state.fold.tool_kinds,
                   tokens=round(state.estimate([m for m, _ in extra]) * state.scale))
        items, best = found, replace(plan, first_kept=first_kept, pinned=pins, native=None)
        need = _essential(state, best, digest) if reserve is None else max(
            reserve, _essential(state, best, digest))
        if state.bare_tokens(best) + need + margin <= target:
            break
    if best is None or not items:
        return None
    if set(plan.summarized) >= {e for _, e in items if e}:
        return None  # nothing new to drop (at most the cut moved past pinned messages)
    digest.promote_used(state.render(replace(best, summary="")).messages)
    return best, items, digest, need


def _essential(state: CompactionState, plan: Plan, digest: DigestState) -> int:
    """Tokens the summary needs at least: the user's messages and the carried summaries
    whole, and errors, files, identifiers and notes up to ``summary_share`` of the target
    (at least ``MIN_SUMMARY``; commands run and details only fill what room is left)."""
    target = state.policy.target
    hard = _hard(state, plan, digest)
    cap = max(int(state.fold.summary_share * target), hard, MIN_SUMMARY)
    chars = int(cap * _chars_per_token(state, digest))
    text, _ = digest.render(chars, user_chars=_user_chars(state, digest), essential=True)
    # (rendered in ``chars``, the user's messages may come out shorter than they will be)
    return max(min(state.summary_tokens(plan, text), cap), hard)


def _chars_per_token(state: CompactionState, digest: DigestState) -> float:
    sample = "\n".join([*digest.users[-20:], *digest.notes[-20:], *digest.details[-10:]])
    if len(sample) < 200:
        return 3.5
    return max(1.0, len(sample) / max(state.count_text(sample), 1))


def _user_chars(state: CompactionState, digest: DigestState) -> int:
    """The user's messages' share of the target, in characters."""
    tokens = state.fold.user_share * state.policy.target
    if not digest.users:
        return int(tokens * 4)
    text = "\n".join(digest.users[-50:])
    per = len(text) / max(state.count_text(text), 1)
    return int(tokens * per)


def _fill(state: CompactionState, plan: Plan, digest: DigestState, room: int,
          user_chars: int) -> tuple[str, bool]:
    """The digest rendered to use the ``room`` (tokens) under the target: grown while the
    context is under ``LOW`` of the target and there is more to say, shrunk when over; and
    whether all of it fitted."""
    target = state.policy.target
    aim = max(room - int((1 - AIM) * target), 1)
    close = aim - int(0.02 * target)  # near enough to the aim
    hard = len(digest.render(DEFAULT_MAX_CHARS, user_chars=user_chars, hard_only=True)[0])
    floor = max(hard + 300, 400)  # never less than what is never cut
    chars = max(int(aim * _chars_per_token(state, digest)), floor)
    best: tuple[str, int, bool] | None = None
    text, complete = "", False
    fits, over = 0, 0  # the largest budget known to fit, the smallest known not to
    for _ in range(12):
        text, complete = digest.render(chars, user_chars=user_chars)
        n = state.summary_tokens(plan, text)
        if n <= room:
            if best is None or n > best[1]:
                best = (text, n, complete)
            if n >= close or complete:
                break
            fits = max(fits, chars)
            guess = int(chars * aim / max(n, 1)) + 16
            chars = min(guess, (fits + over) // 2) if over else guess
        else:
            over = chars if not over else min(over, chars)
            if chars <= floor:
                break
            guess = max(int(chars * aim / n * 0.98), floor)
            chars = max(guess, (fits + over) // 2) if fits else guess
        if over and over - fits <= 40:
            break
    return (best[0], best[2]) if best is not None else (text, complete)


def _summarized(state: CompactionState, new: Plan, digest: DigestState,
                items: Sequence[tuple[Message, str | None]], room: int, saves: int,
                user_chars: int, summarizer: Summarizer) -> Plan | None:
    """``new`` with the summarizer's summary (its reply checked; the user's messages and
    the digest's other sections around it), or ``None`` (reported) to use the digest.

    ``room`` is the summary's room under the target and ``saves`` what dropping saves: the
    model is not called when a summary of ``min_summary_tokens`` could not pay off."""
    mine = digest.copy()
    mine.earlier, mine.model = [], ""  # the model's summary updates the carried ones
    hard = state.summary_tokens(new, mine.render(DEFAULT_MAX_CHARS, user_chars=user_chars,
                                                 hard_only=True)[0])
    pays = saves - hard - 1
    if pays < summarizer.min_summary_tokens:
        state.report(f"no room for a model summary (dropping saves {max(pays, 0)} tokens "
                     "beyond the user's messages); the digest was used")
        return None
    limit = min(max(room - hard - 32, summarizer.min_summary_tokens), pays,
                summarizer.max_summary_tokens)
    previous = state.initial_plan.summary
    new_users = [m.text for m, _ in items if m.role == "user" and m.kind is None]
    pinned = digest.pinned_identifiers(new_users)
    made = len(state.calls)  # the calls from here on are this summary's
    try:
        text, usage = summarizer.summarize(state, items, previous, limit, pinned)
    except Exception as e:  # a summarizer that is down never loses history
        state.report(f"the summarizer failed ({e}); the digest was used", repr(e))
        _ended(state, made, "summarizer_failed")
        return None
    problem = _check(state, text, items, previous, pinned)
    if problem:
        state.report(f"the summarizer's reply was rejected ({problem}); the digest was used")
        _ended(state, made, "summary_rejected")
        return None
    mine.model = text.strip()
    summary, _ = _fill(state, new, mine, room, user_chars)
    if state.summary_tokens(new, summary) > room:
        state.report("the summarizer's reply was rejected (it does not fit the room under "
                     "the target); the digest was used")
        _ended(state, made, "summary_rejected")
        return None
    total = (new.usage or Usage()) + usage
    return replace(new, summary=summary, digest=mine, usage=total)


def _ended(state: CompactionState, made: int, outcome: str) -> None:
    """Say how the summarizer calls recorded from index ``made`` on ended."""
    state.calls[made:] = [replace_struct(c, outcome=outcome) for c in state.calls[made:]]


def _check(state: CompactionState, text: str, items: Sequence[tuple[Message, str | None]],
           previous: str, pinned: Sequence[str]) -> str:
    """Why a summarizer's reply cannot be accepted (``""`` when it can)."""
    if not text.strip():
        return "it is empty"
    replaced = round(state.estimate([m for m, _ in items]) * state.scale)
    replaced += state.count_text(previous) if previous else 0
    size = state.count_text(text)
    if size >= replaced:
        return f"it is not smaller than what it replaces ({size} >= {replaced} tokens)"
    missing = [p for p in pinned if p not in text]
    if missing:
        shown = ", ".join(missing[:8]) + (" ..." if len(missing) > 8 else "")
        return f"it leaves out {len(missing)} identifiers it had to copy: {shown}"
    return ""
