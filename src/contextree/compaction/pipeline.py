"""The compaction ladder: a policy decides *when*, an ordered list of stages decides *what*.

Stages never touch the session. Each turns a ``Plan`` (a view of the branch that a compaction
entry can describe: summary, first kept entry, pinned entries, cleared tool results) into a
smaller one; the first plan that fits the target ends the ladder and is appended as one
compaction entry, so the original history stays in the file.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from ..context import (
    Projector,
    SessionContext,
    build_context,
    latest_compaction,
    summary_message,
)
from ..entries import AnyEntry, CompactionEntry, MessageEntry
from ..errors import CompactionError
from ..messages import Message, Usage
from ..tokens import EstimateCounter, TokenCounter, count_context

log = logging.getLogger("contextree.compaction")

Emit = Callable[[str, dict[str, Any]], None]
_CANDIDATE_ID = "\x00candidate"


@dataclass(frozen=True)
class CompactionPolicy:
    """``window`` tokens; compact once the context reaches ``compact_at`` of it, down to
    ``compact_to`` of it."""

    window: int
    compact_at: float = 0.7
    compact_to: float = 0.4

    def __post_init__(self) -> None:
        if isinstance(self.window, bool) or not isinstance(self.window, int) or self.window <= 0:
            raise ValueError(f"window must be a positive number of tokens, got {self.window!r}")
        if not 0 < self.compact_to < self.compact_at <= 1:
            raise ValueError(
                "need 0 < compact_to < compact_at <= 1 (compact down to a fraction of the window "
                f"smaller than the one that triggers), got compact_at={self.compact_at}, "
                f"compact_to={self.compact_to}"
            )

    @property
    def trigger(self) -> int:
        return int(self.window * self.compact_at)

    @property
    def target(self) -> int:
        return int(self.window * self.compact_to)


@dataclass(frozen=True)
class Plan:
    """A view of the branch that one compaction entry can describe."""

    summary: str
    first_kept: int  # index in the branch of the first kept entry
    cleared: dict[str, str] = field(default_factory=dict)
    pinned: tuple[str, ...] = ()
    usage: Usage | None = None
    summarized: tuple[str, ...] = ()  # entry ids whose content went into the summary


@dataclass
class StageReport:
    name: str
    tokens_before: int
    tokens_after: int
    applied: bool
    note: str = ""


@dataclass
class CompactionResult:
    """What a compaction run did (``entry_id`` is ``None`` when nothing was written)."""

    tokens_before: int
    tokens_after: int
    target: int
    stages: list[StageReport] = field(default_factory=list)
    entry_id: str | None = None
    summary: str = ""
    cleared: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    summarized: list[str] = field(default_factory=list)
    reason: str = ""

    @property
    def reached_target(self) -> bool:
        return self.tokens_after <= self.target

    @property
    def applied(self) -> list[str]:
        return [s.name for s in self.stages if s.applied]

    def payload(self) -> dict[str, Any]:
        """The ``compacted`` event payload."""
        return {
            "tokens_before": self.tokens_before,
            "tokens_after": self.tokens_after,
            "target": self.target,
            "stages": [vars(s) for s in self.stages],
            "cleared": list(self.cleared),
            "dropped": list(self.dropped),
            "summarized": list(self.summarized),
            "summary": self.summary,
            "entry_id": self.entry_id,
            "reached_target": self.reached_target,
            "reason": self.reason,
        }


class Stage(Protocol):
    """One rung of the ladder: a smaller plan, or ``None`` when it has nothing to offer."""

    name: str

    def __call__(self, state: CompactionState, plan: Plan) -> Plan | None: ...


class CompactionState:
    """The branch being compacted, with cached token counts and the rendering of plans."""

    def __init__(self, branch: Sequence[AnyEntry], policy: CompactionPolicy,
                 counter: TokenCounter, projectors: Mapping[str, Projector] | None = None
                 ) -> None:
        self.branch = list(branch)
        self.projectors = dict(projectors) if projectors else None
        self.policy = policy
        self.counter = counter
        self.index = {e.id: i for i, e in enumerate(self.branch)}
        # Token counts are cached by object id, only for the messages of the branch's
        # entries: ``self.branch`` keeps them alive, so their ids cannot be reused by the
        # short-lived messages a render creates (placeholders, the summary).
        self._stable = {id(e.message) for e in self.branch if isinstance(e, MessageEntry)}
        self._counts: dict[int, int] = {}
        # Other messages (placeholders, summaries) are rebuilt by every render: their counts
        # are cached by what is counted.
        self._text_counts: dict[tuple[str, str, str | None], int] = {}
        self._renders: dict[int, tuple[Plan, SessionContext]] = {}
        self._tokens: dict[int, tuple[Plan, int]] = {}
        self._bare: dict[tuple[int, tuple[str, ...], int], tuple[dict[str, str], int]] = {}
        self.tokens_before = 0
        self.base: CompactionEntry | None = None
        ci = latest_compaction(self.branch)
        if ci is not None:
            base = self.branch[ci]
            assert isinstance(base, CompactionEntry)
            self.base = base
        self.initial_plan = self._initial_plan(ci)
        initial = self.render(self.initial_plan)
        if self.base is not None and self.base.retained_tail:
            # The initial plan digests the retained messages: count what is shown now.
            current = build_context(self.branch, projectors=projectors)
            estimate = self.estimate(current.messages)
            self.tokens_before = count_context(current.messages, _Cached(self),
                                               anchor=current.usage_anchor)
        else:
            # The initial view shows the same messages as the current context; only usage
            # reported after the latest compaction can anchor the count (as in build_context).
            estimate = self.estimate(initial.messages)
            self.tokens_before = count_context(initial.messages, _Cached(self),
                                               anchor=self._anchor(initial, ci))
        # Plans are counted so that the current view counts exactly what the provider last
        # reported (plus the estimate of what came after). When it reported more than the
        # estimate, the excess is taken as overhead outside the messages (a system prompt or
        # tool definitions the runtime adds), the same whatever is dropped; when it reported
        # less, the estimate is scaled down (it overestimates this content).
        self.scale = 1.0
        self.offset = 0
        if estimate and self.tokens_before < estimate:
            self.scale = self.tokens_before / estimate
        else:
            self.offset = self.tokens_before - estimate
        self.initial_ids = [i for i in initial.entry_ids if i is not None]

    def _anchor(self, ctx: SessionContext, ci: int | None) -> int | None:
        for i in range(len(ctx.messages) - 1, -1, -1):
            m = ctx.messages[i]
            if m.role == "assistant" and m.usage is not None and m.usage.context_tokens > 0:
                fresh = ci is None or self.index.get(ctx.entry_ids[i] or "", -1) > ci
                return i if fresh else None
        return None

    def _initial_plan(self, ci: int | None) -> Plan:
        base = self.base
        if base is None or ci is None:
            return Plan(summary="", first_kept=0)
        first = ci + 1
        if base.retained_tail is None and base.first_kept_entry_id in self.index:
            first = self.index[base.first_kept_entry_id]
        summary = base.summary
        if base.retained_tail:
            from .digest import digest_messages

            summary = digest_messages(summary, [(m, None) for m in base.retained_tail])
        return Plan(summary=summary, first_kept=first, cleared=dict(base.cleared or {}),
                    pinned=tuple(base.pinned or ()))

    def entry_for(self, plan: Plan) -> CompactionEntry:
        """The compaction entry that would describe ``plan``."""
        first = self.branch[plan.first_kept].id if plan.first_kept < len(self.branch) else None
        kept_from = plan.first_kept
        live = {e.id for e in self.branch[kept_from:]}
        return CompactionEntry(
            _CANDIDATE_ID,
            self.branch[-1].id if self.branch else None,
            "",
            summary=plan.summary,
            first_kept_entry_id=first,
            tokens_before=self.tokens_before,
            cleared={k: v for k, v in plan.cleared.items() if k in live} or None,
            pinned=[p for p in plan.pinned if self.index.get(p, len(self.branch)) < kept_from]
            or None,
        )

    def render(self, plan: Plan) -> SessionContext:
        """The context the model would see after appending ``plan``'s compaction entry.

        Cached per plan object (plans are immutable): the stages and the ladder ask for the
        same plans several times. The result is shared: do not modify it.
        """
        hit = self._renders.get(id(plan))
        if hit is not None and hit[0] is plan:
            return hit[1]
        ctx = build_context([*self.branch, self.entry_for(plan)], projectors=self.projectors)
        self._renders[id(plan)] = (plan, ctx)
        return ctx

    def estimate(self, messages: Sequence[Message]) -> int:
        return sum(self.sizes(messages))

    def sizes(self, messages: Sequence[Message]) -> list[int]:
        """The unscaled estimate of each message (cached for the branch's own messages)."""
        counts = self._counts
        stable = self._stable
        by_text = self._text_counts
        count = self.counter.count_message
        out = []
        for m in messages:
            key = id(m)
            if key in stable:
                n = counts.get(key)
                if n is None:
                    n = counts[key] = count(m)
            elif isinstance(m.content, str) and not m.tool_calls:
                tkey = (m.role, m.content, m.name)
                n = by_text.get(tkey)
                if n is None:
                    n = by_text[tkey] = count(m)
            else:
                n = count(m)
            out.append(n)
        return out

    def count(self, message: Message) -> int:
        return round(self.estimate((message,)) * self.scale)

    def tokens(self, plan: Plan) -> int:
        """The tokens of the context ``plan`` describes, as the ladder counts them."""
        hit = self._tokens.get(id(plan))
        if hit is not None and hit[0] is plan:
            return hit[1]
        n = round(self.estimate(self.render(plan).messages) * self.scale) + self.offset
        self._tokens[id(plan)] = (plan, n)
        return n

    def bare_tokens(self, plan: Plan) -> int:
        """The tokens of ``plan`` without its summary (cached by cut, pins and cleared)."""
        key = (plan.first_kept, plan.pinned, id(plan.cleared))
        hit = self._bare.get(key)
        if hit is not None and hit[0] is plan.cleared:
            return hit[1]
        n = self.tokens(replace(plan, summary="") if plan.summary else plan)
        self._bare[key] = (plan.cleared, n)
        return n

    def tokens_with_summary(self, plan: Plan) -> int:
        """``tokens(plan)`` without rendering it: the tokens of the same plan with no summary
        plus its summary message (which comes first and pairs with nothing). Stages that try
        several summaries for one cut use it; the count is cached for the ladder."""
        n = self.bare_tokens(plan)
        if plan.summary:
            message = summary_message(self.entry_for(plan))
            n += round(self.sizes((message,))[0] * self.scale)
        self._tokens[id(plan)] = (plan, n)
        return n

    def original(self, entry_id: str) -> Message | None:
        """A message as first written (before any placeholder replaced it)."""
        i = self.index.get(entry_id)
        if i is None:
            return None
        entry = self.branch[i]
        return entry.message if isinstance(entry, MessageEntry) else None


class _Cached:
    """The state's cached estimates, as a ``TokenCounter``."""

    def __init__(self, state: CompactionState) -> None:
        self.state = state

    def count_text(self, text: str) -> int:
        return self.state.counter.count_text(text)

    def count_message(self, msg: Message) -> int:
        return self.state.sizes((msg,))[0]

    def count_messages(self, msgs: Sequence[Message]) -> int:
        return self.state.estimate(msgs)


class CompactionPipeline:
    """An ordered ladder of stages; the order is the policy (cheap stages first)."""

    def __init__(self, stages: Sequence[Stage]) -> None:
        if not stages:
            raise ValueError("a compaction pipeline needs at least one stage")
        self.stages = list(stages)

    def plan(
        self,
        branch: Sequence[AnyEntry],
        policy: CompactionPolicy,
        counter: TokenCounter | None = None,
        emit: Emit | None = None,
        *,
        force: bool = False,
        projectors: Mapping[str, Projector] | None = None,
    ) -> tuple[CompactionState, Plan | None, CompactionResult]:
        """Run the ladder on ``branch`` without writing anything.

        Unless ``force``, nothing is done when the context is already at or under target.
        ``projectors`` turn custom entries into messages, as in ``build_context``.
        """
        state = CompactionState(branch, policy, counter or EstimateCounter(), projectors)
        target = policy.target
        result = CompactionResult(state.tokens_before, state.tokens_before, target)
        if state.tokens_before <= target and not force:
            result.reason = "already under the target"
            return state, None, result
        plan = state.initial_plan
        tokens = state.tokens(plan)
        best: Plan | None = None
        for stage in self.stages:
            name = getattr(stage, "name", type(stage).__name__)
            try:
                candidate = stage(state, plan)
            except Exception as e:  # a failing stage (e.g. the summarizer) never loses history
                log.warning("compaction stage %s failed: %s", name, e)
                result.stages.append(StageReport(name, tokens, tokens, False, f"failed: {e}"))
                if emit is not None:
                    emit("compaction_failed", {"stage": name, "error": repr(e)})
                continue
            if candidate is None:
                result.stages.append(StageReport(name, tokens, tokens, False, "nothing to do"))
                continue
            after = state.tokens(candidate)
            if after >= tokens:
                result.stages.append(StageReport(name, tokens, after, False, "not smaller: rejected"))
                continue
            result.stages.append(StageReport(name, tokens, after, True))
            plan, tokens, best = candidate, after, candidate
            if tokens <= target:
                break
        result.tokens_after = tokens
        if tokens > target:
            stages = "; ".join(f"{s.name}: {s.note or 'applied'}" for s in result.stages)
            result.reason = (f"the ladder reached {tokens} tokens, above the target of {target}; "
                             "no stage could drop or shrink more of what is left (the system "
                             f"prompt, the current task and its newest steps) ({stages})")
        return state, best, result


def describe(state: CompactionState, plan: Plan, result: CompactionResult) -> None:
    """Fill in what was cleared, dropped and summarized, comparing with the initial view."""
    after = state.render(plan)
    kept = {i for i in after.entry_ids if i is not None}
    base_cleared = set(state.initial_plan.cleared)
    result.cleared = [k for k in plan.cleared if k not in base_cleared and k in kept]
    result.dropped = [i for i in state.initial_ids if i not in kept
                      and (state.base is None or i != state.base.id)]
    result.summarized = list(plan.summarized)
    result.summary = plan.summary


def run_compaction(
    session: Any,
    policy: CompactionPolicy,
    pipeline: CompactionPipeline,
    counter: TokenCounter | None = None,
    *,
    dry_run: bool = False,
    force: bool = False,
    emit: Emit | None = None,
    from_hook: bool = False,
) -> CompactionResult:
    """Compact ``session``'s current branch if it is over the target (or ``force``)."""
    branch = session.branch()
    if not branch:
        raise CompactionError("the session is empty; there is nothing to compact")
    started = time.perf_counter()
    if emit is not None:
        emit("compaction_start", {"leaf_id": session.leaf_id, "window": policy.window})
    state, plan, result = pipeline.plan(branch, policy, counter, emit, force=force,
                                        projectors=getattr(session, "projectors", None))
    if plan is None:
        if not result.reason:
            result.reason = "no stage could make the context smaller"
        return result
    describe(state, plan, result)
    if dry_run:
        return result
    entry = state.entry_for(plan)
    result.entry_id = session.append_compaction(
        plan.summary,
        entry.first_kept_entry_id,
        state.tokens_before,
        details={
            "stages": result.applied,
            "dropped": len(result.dropped),
            "summarized": len(result.summarized),
            "seconds": round(time.perf_counter() - started, 4),
        },
        usage=plan.usage,
        from_hook=from_hook,
        tokens_after=result.tokens_after,
        cleared=entry.cleared,
        pinned=entry.pinned,
    )
    if emit is not None:
        emit("compacted", result.payload())
    return result


def with_summary(plan: Plan, summary: str, summarized: Sequence[str],
                 usage: Usage | None = None) -> Plan:
    return replace(plan, summary=summary,
                   summarized=tuple(dict.fromkeys([*plan.summarized, *summarized])),
                   usage=usage if usage is not None else plan.usage)
