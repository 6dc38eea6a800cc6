"""The compaction planner: a policy decides *when*, an ordered ladder of stages decides *what*.

``plan_compaction(source, policy, ladder, counter)`` is pure: it reads a branch (or a plain
list of messages) and returns a ``CompactionResult`` that carries the compaction entry to
append, touching no session. ``Session.compact`` plans and then appends that entry; the
runtime plans on its message list and emits the events from the result. Stages emit
nothing either: a stage that fails is reported in ``result.stages`` and the ladder goes on.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .._context import Projector, SessionContext, build_context
from .._messages import Message, Usage
from ..entries import AnyEntry, CallRecord, CompactionEntry, CompactionReceipt, new_id, now
from ..errors import CompactionError, InvalidArgument
from ..models._base import Model
from ..tokens import EstimateCounter, TokenCounter, fresh_start
from ..tools._kinds import ToolKind
from ._native import ProviderCompaction
from ._policy import CompactionPolicy
from ._source import branch_of
from ._stages import Digest, SlidingWindow, ToolResults
from ._state import CompactionState, FoldSettings, Plan, Stage
from ._summarize import Summarize

__all__ = [
    "CompactionLadder",
    "CompactionResult",
    "StageReport",
    "default_ladder",
    "plan_compaction",
]

log = logging.getLogger("contextree.compaction")


@dataclass
class StageReport:
    """What one stage did: tokens before and after it, and why it was not applied.

    ``error`` is the ``repr`` of the exception when the stage failed (the ladder went on),
    or when the summarizer it called failed (the stage folded with the digest instead).
    """

    name: str
    tokens_before: int
    tokens_after: int
    applied: bool
    note: str = ""
    error: str | None = None

    @property
    def failed(self) -> bool:
        """True when the stage (or the summarizer it called) raised."""
        return self.error is not None


@dataclass
class CompactionResult:
    """What a compaction plan (or run) found.

    ``entry`` is the compaction entry to append (``None`` when nothing can be done); once
    ``Session.compact`` appended it, ``entry`` is the stored entry and ``entry_id`` its id
    (``None`` when nothing was written: a dry run, or no entry). ``branch`` is what was
    planned on (for a message list, the entries standing for it), so ``context()`` can
    show the view the entry gives. ``calls`` are the summarizer calls made while planning,
    accepted or not (also recorded in the entry's ``details["calls"]``): each is billed.
    """

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
    note: str = ""
    entry: CompactionEntry | None = None
    calls: list[CallRecord] = field(default_factory=list)
    branch: list[AnyEntry] = field(default_factory=list, repr=False)
    projectors: Mapping[str, Projector] | None = field(default=None, repr=False)

    @property
    def reached_target(self) -> bool:
        """True when the context is at or under the target."""
        return self.tokens_after <= self.target

    @property
    def receipt(self) -> CompactionReceipt | None:
        """What the compaction does to each entry (``CompactionEntry.receipt``), or
        ``None`` when nothing was planned."""
        return self.entry.receipt if self.entry is not None else None

    @property
    def applied(self) -> list[str]:
        """The names of the stages whose plans were taken, in order."""
        return [s.name for s in self.stages if s.applied]

    @property
    def failures(self) -> list[StageReport]:
        """The stages that raised."""
        return [s for s in self.stages if s.failed]

    def context(self) -> SessionContext:
        """What the model sees once ``entry`` is appended to the branch planned on (the
        branch as it is when there is no entry)."""
        path = [*self.branch, self.entry] if self.entry is not None else self.branch
        return build_context(path, projectors=self.projectors)

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
            "note": self.note,
            "receipt": self.receipt.to_dict() if self.receipt is not None else None,
        }


class CompactionLadder:
    """An ordered ladder of stages; the order is the policy (cheap stages first).

    Every stage that drops messages folds them into the summary. ``summarizer`` (a model,
    or a configured ``Summarize``) writes that summary; by default it is the first
    ``Summarize`` stage of the ladder, and without one the offline digest does. The user's
    own messages get ``user_share`` of the target in the summary, verbatim.
    ``tool_kinds`` maps tool names to the kind they declare (``ToolKind``); tools not in it
    are known by their names (``contextree.tools.kind_of_tool_name``).
    """

    def __init__(self, stages: Sequence[Stage], *, summarizer: Model | Summarize | None = None,
                 user_share: float = 0.25,
                 tool_kinds: Mapping[str, ToolKind] | None = None) -> None:
        if not stages:
            raise InvalidArgument("a compaction ladder needs at least one stage")
        if not 0 < user_share <= 1:
            raise InvalidArgument(f"user_share must be in (0, 1], got {user_share!r}")
        self.stages = list(stages)
        if summarizer is not None and not isinstance(summarizer, Summarize):
            summarizer = Summarize(summarizer)
        if summarizer is None:
            summarizer = next((s for s in self.stages if isinstance(s, Summarize)), None)
        self.summarizer: Summarize | None = summarizer
        self.user_share = user_share
        self.tool_kinds: dict[str, ToolKind] = dict(tool_kinds or {})

    def with_tools(self, tools: Iterable[Any]) -> CompactionLadder:
        """The same ladder, knowing the kinds ``tools`` declare (``Tool.kind``)."""
        kinds = dict(self.tool_kinds)
        for t in tools:
            name, kind = getattr(t, "name", None), getattr(t, "kind", None)
            if isinstance(name, str) and isinstance(kind, ToolKind):
                kinds[name] = kind
        if kinds == self.tool_kinds:
            return self
        return CompactionLadder(self.stages, summarizer=self.summarizer,
                                  user_share=self.user_share, tool_kinds=kinds)

    def settings(self) -> FoldSettings:
        """How this ladder's dropping stages fold what they drop."""
        return FoldSettings(summarizer=self.summarizer, tool_kinds=self.tool_kinds,
                            user_share=self.user_share)


def default_ladder(model: Model | None = None, *, native: bool = False) -> CompactionLadder:
    """``ToolResults -> SlidingWindow -> Digest``, with ``Summarize(model)`` before the
    digest when a model is given. With a model, what any stage drops is summarized by it
    (the digest stands in if it fails or its reply is rejected). ``native=True`` with a
    model whose provider compacts (``AnthropicMessages``, ``OpenAIResponses``) puts
    ``ProviderCompaction(model)`` right after ``ToolResults``: the provider compacts, and
    the next rungs stand in when it refuses."""
    stages: list[Stage] = [ToolResults()]
    if native and model is not None:  # (a model that cannot: the rung says so, steps aside)
        stages.append(ProviderCompaction(model))
    stages.append(SlidingWindow())
    if model is not None:
        stages.append(Summarize(model))
    stages.append(Digest())
    return CompactionLadder(stages)


def plan_compaction(
    source: Sequence[AnyEntry] | Sequence[Message],
    policy: CompactionPolicy,
    ladder: CompactionLadder | None = None,
    counter: TokenCounter | None = None,
    *,
    force: bool = False,
    projectors: Mapping[str, Projector] | None = None,
    fresh_from: int | None = None,
) -> CompactionResult:
    """Run the ladder on a branch (entries, root first) or a list of messages; write nothing.

    Unless ``force``, nothing is planned when the context is already at or under the target;
    forced, it then aims at ``compact_to / compact_at`` of the context's size, as the
    trigger would.
    ``projectors`` turn custom entries into messages, as in ``build_context``. For a message
    list, ``fresh_from`` is the index of its first message produced since the latest
    compaction (``None``: decided by its markers, see ``contextree.tokens.fresh_start``); a
    previous compaction summary in the list is updated, not piled on. The result's
    ``entry`` then refers to the entries standing for the messages (ids ``m<index>``), and
    ``result.context().messages`` is the compacted list.
    """
    if not source:
        raise CompactionError("there is nothing to compact: the session (or the list of "
                              "messages) is empty")
    started = time.perf_counter()
    branch: list[AnyEntry]
    carry = True
    if isinstance(source[0], Message):
        messages = [m for m in source if isinstance(m, Message)]
        if len(messages) != len(source):
            raise InvalidArgument("compact a branch of entries or a list of messages, "
                                  "not a mix of both")
        chain = branch_of(messages)
        branch = chain.entries
        # ``fresh_from`` counts list positions; the state wants context positions.
        carry = fresh_from is not None  # else where the compacted view ends is unknown
        start = fresh_start(messages) if fresh_from is None else fresh_from
        fresh_from = chain.context_index(build_context(branch, projectors=projectors), start)
    else:
        branch = [e for e in source if not isinstance(e, Message)]
    ladder = ladder or default_ladder()
    state = CompactionState(branch, policy, counter or EstimateCounter(), projectors,
                            fresh_from=fresh_from, fold=ladder.settings(), carry=carry)
    result = CompactionResult(state.tokens_before, state.tokens_before, policy.target,
                              branch=branch, projectors=projectors, calls=state.calls)
    if state.tokens_before <= policy.target:
        if not force:
            result.reason = "already under the target"
            return result
        # Forced under the target: compact as the trigger would, by compact_to / compact_at
        # of what there is (folding keeps what the user typed, so merely dropping the oldest
        # turn would not make the context smaller).
        state.policy = CompactionPolicy(max(1, int(state.tokens_before / policy.compact_at)),
                                        policy.compact_at, policy.compact_to)
        result.target = state.policy.target
        result.note = (f"forced: the context ({state.tokens_before} tokens) is already under "
                       f"the target of {policy.target}, so it aims at {result.target} "
                       f"(compact_to / compact_at = {policy.compact_to:g} / "
                       f"{policy.compact_at:g} of its size)")
    plan = _climb(ladder, state, result)
    if plan is None:
        if not result.reason:
            result.reason = "no stage could make the context smaller"
        return result
    _describe(state, plan, result)
    details: dict[str, Any] = {
        "stages": result.applied,
        "dropped": len(result.dropped),
        "summarized": len(result.summarized),
        "seconds": round(time.perf_counter() - started, 4),
    }
    if plan.digest is not None and plan.summary:
        # The summary's state: the next compaction merges it instead of reading the text.
        details["digest"] = plan.digest.to_json()
    if plan.native is not None:  # the provider's own items, sent back to that provider
        details["native"] = plan.native
    if state.calls:  # every summarizer call, by model, whatever became of its reply
        details["calls"] = [c.to_dict() for c in state.calls]
    result.entry = state.entry_for(plan, new_id(), now(), tokens_after=result.tokens_after,
                                   details=details, receipt=_receipt(state, plan, result))
    if state.calls:
        result.entry.usage = sum((c.usage for c in state.calls), Usage())
    return result


def _climb(ladder: CompactionLadder, state: CompactionState,
           result: CompactionResult) -> Plan | None:
    """Try each stage in order from the initial view; the best plan (``None``: no stage
    made the context smaller). Fills in ``result.stages`` and ``tokens_after``."""
    target = state.policy.target
    plan = state.initial_plan
    tokens = state.tokens(plan)
    best: Plan | None = None
    for stage in ladder.stages:
        name = getattr(stage, "name", type(stage).__name__)
        state.reports.clear()
        try:
            candidate = stage(state, plan)
        except Exception as e:  # a failing stage (e.g. the summarizer) never loses history
            log.warning("compaction stage %s failed: %s", name, e)
            result.stages.append(StageReport(name, tokens, tokens, False, f"failed: {e}",
                                             error=repr(e)))
            continue
        notes = "; ".join(n for n, _ in state.reports)
        error = next((e for _, e in state.reports if e), None)
        if candidate is None:
            result.stages.append(StageReport(name, tokens, tokens, False,
                                             notes or "nothing to do", error=error))
            continue
        after = state.tokens(candidate)
        if after >= tokens:
            result.stages.append(StageReport(name, tokens, after, False,
                                             "; ".join(filter(None, [notes,
                                                                     "not smaller: rejected"])),
                                             error=error))
            continue
        result.stages.append(StageReport(name, tokens, after, True, notes, error=error))
        plan, tokens, best = candidate, after, candidate
        if tokens <= target:
            break
    result.tokens_after = tokens
    if tokens > target:
        stages = "; ".join(f"{s.name}: {s.note or 'applied'}" for s in result.stages)
        result.reason = (f"the ladder reached {tokens} tokens, above the target of {target}; "
                         "no stage could drop or shrink more of what is left (the system "
                         f"prompt, the current task and its newest steps) ({stages})")
    return best


def _describe(state: CompactionState, plan: Plan, result: CompactionResult) -> None:
    """Fill in what was cleared, dropped and summarized, comparing with the initial view."""
    after = state.render(plan)
    kept = {i for i in after.entry_ids if i is not None}
    base_cleared = set(state.initial_plan.cleared)
    result.cleared = [k for k in plan.cleared if k not in base_cleared and k in kept]
    result.dropped = [i for i in state.initial_ids if i not in kept
                      and (state.base is None or i != state.base.id)]
    result.summarized = list(plan.summarized)
    result.summary = plan.summary


def _receipt(state: CompactionState, plan: Plan, result: CompactionResult
             ) -> CompactionReceipt:
    """What the plan does to each entry of the branch, as the entry records it."""
    view = list(dict.fromkeys(i for i in state.render(plan).entry_ids
                              if i is not None and i in state.index))
    cleared = set(plan.cleared)
    folded = set(plan.summarized)
    in_view = set(view)
    pinned = [p for p in plan.pinned if state.index.get(p, len(state.branch)) < plan.first_kept
              and p in in_view]
    identifiers: list[str] = []
    if plan.digest is not None and plan.summary:
        identifiers = [i for i in plan.digest.pinned_identifiers() if i in plan.summary]
    return CompactionReceipt(
        kept=[i for i in view if i not in cleared],
        folded=list(result.summarized),
        cleared=[i for i in view if i in cleared],
        dropped=[i for i in result.dropped if i not in folded],
        pinned=pinned, identifiers=identifiers)
