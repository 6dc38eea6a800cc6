"""What a stage works on: a ``Plan`` (a view one compaction entry can describe) and the
``CompactionState`` that renders and counts plans for one branch.

Stages never touch a session. Each turns a plan into a smaller one; the planner
(``contextree.compaction._ladder``) runs them in order and turns the chosen plan into the
compaction entry to append.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from .._context import (
    CutViews,
    Projector,
    SessionContext,
    build_context,
    latest_compaction,
    summary_message,
    summary_of,
)
from .._messages import Message, Usage
from ..entries import AnyEntry, CallRecord, CompactionEntry, CompactionReceipt, MessageEntry
from ..markers import ClearedToolResultMarker
from ..tokens import TokenCounter
from ..tools._kinds import ToolKind
from ._digest import DigestState
from ._policy import CompactionPolicy

__all__ = ["CompactionState", "FoldSettings", "Plan", "Stage", "Summarizer", "with_summary"]

_CANDIDATE_ID = "\x00candidate"


@dataclass(frozen=True)
class Plan:
    """A view of the branch that one compaction entry can describe."""

    summary: str
    first_kept: int  # index in the branch of the first kept entry
    cleared: dict[str, str] = field(default_factory=dict)
    pinned: tuple[str, ...] = ()
    usage: Usage | None = None
    summarized: tuple[str, ...] = ()  # entry ids whose content went into the summary
    digest: DigestState | None = None  # the summary's state (None: the summary is opaque)
    native: dict[str, Any] | None = None  # the provider's own compacted items, if it compacted


class Summarizer(Protocol):
    """What folding needs of a summarizer (``Summarize`` is one): a summary of ``items``
    that updates ``previous``, in about ``limit`` tokens, copying ``pinned`` verbatim."""

    min_summary_tokens: int
    max_summary_tokens: int

    def summarize(self, state: CompactionState, items: Sequence[tuple[Message, str | None]],
                  previous: str, limit: int, pinned: Sequence[str]) -> tuple[str, Usage]: ...


@dataclass(frozen=True)
class FoldSettings:
    """How dropping stages fold what they drop into the summary.

    ``summarizer`` writes the summary when set (the digest stands in when it fails or its
    reply is rejected); ``tool_kinds`` maps tool names to their declared kinds; the user's
    own messages get ``user_share`` of the target, verbatim; a summary may claim at most
    ``summary_share`` of the target when a stage chooses how much to keep.
    """

    summarizer: Summarizer | None = None
    tool_kinds: Mapping[str, ToolKind] = field(default_factory=dict)
    user_share: float = 0.25
    summary_share: float = 0.5


class Stage(Protocol):
    """One rung of the ladder: a smaller plan, or ``None`` when it has nothing to offer.

    A stage may raise: the planner records the failure in its report and goes on with the
    next stage, so a failing stage (a summarizer that is down) never loses history.
    """

    name: str

    def __call__(self, state: CompactionState, plan: Plan) -> Plan | None: ...


def with_summary(plan: Plan, summary: str, summarized: Sequence[str],
                 usage: Usage | None = None, digest: DigestState | None = None) -> Plan:
    """``plan`` with a new summary that folds in the entries ``summarized`` (``digest``: its
    state, if it has one; without it the next compaction carries the summary verbatim)."""
    return replace(plan, summary=summary,
                   summarized=tuple(dict.fromkeys([*plan.summarized, *summarized])),
                   usage=usage if usage is not None else plan.usage, digest=digest,
                   native=None)


class CompactionState:
    """The branch being compacted, with cached token counts and the rendering of plans.

    ``fresh_from`` overrides where reported usage starts to count in the branch's current
    context (an index into ``build_context(branch).messages``); by default the context
    says (usage from before the latest compaction on the branch does not count).
    ``carry=False``: the latest compaction's own count does not carry on (a message list
    whose ``fresh_from`` nobody recorded, so where its compacted view ends is unknown).
    """

    def __init__(self, branch: Sequence[AnyEntry], policy: CompactionPolicy,
                 counter: TokenCounter, projectors: Mapping[str, Projector] | None = None,
                 *, fresh_from: int | None = None, fold: FoldSettings | None = None,
                 carry: bool = True) -> None:
        self.branch = list(branch)
        self.fold = fold or FoldSettings()
        self.reports: list[tuple[str, str | None]] = []  # (note, error) of the running stage
        self.calls: list[CallRecord] = []  # every summarizer call made while planning
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
        # Renders and counts are cached by what decides the view (``_view_key``): stages
        # build equal plans as new objects.
        self._renders: dict[tuple[Any, ...], tuple[Plan, SessionContext]] = {}
        self._tokens: dict[tuple[Any, ...], tuple[Plan, int]] = {}
        self._by_cut: dict[tuple[int, tuple[str, ...]], tuple[Plan, SessionContext]] = {}
        self._bare: dict[tuple[int, tuple[str, ...], int], tuple[dict[str, str], int]] = {}
        # The sizes of each rendered view's messages, by the list's identity (the list is
        # kept alive here, and renders are never modified); ``None`` until first asked for.
        # A view derived from another derives its sizes too, instead of a pass over them all.
        self._view_sizes: dict[int, tuple[list[Message], list[int] | None]] = {}
        self.tokens_before = 0  # until counted below
        # Candidate views from one pass over the branch (None: each is built again).
        self._views = CutViews.of(self.branch, self.projectors, index=self.index)
        self._initial_messages: list[tuple[str, int, Message]] | None = None
        self.base: CompactionEntry | None = None
        ci = latest_compaction(self.branch)
        if ci is not None:
            base = self.branch[ci]
            assert isinstance(base, CompactionEntry)
            self.base = base
        self.initial_plan = self._initial_plan(ci)
        initial = self.render(self.initial_plan)
        # Without a compaction on the branch the initial view is what the model sees now;
        # with one, it is built as it stands.
        current = initial if self.base is None else build_context(self.branch,
                                                                   projectors=projectors)
        if fresh_from is None:
            fresh_from = 0 if self.base is None else current.fresh_from
        # What the model sees now, counted by the one count (reported usage since the latest
        # compaction, else that compaction's own count carried on, else the estimate).
        # Every estimate is then scaled by the ratio of that count to the estimate of the
        # same context (higher or lower), so plans are counted the way the provider will.
        measured = current.measure(_Cached(self), fresh_from=fresh_from, estimate=True,
                                   carry=carry)
        self.tokens_before = measured.tokens
        self.scale = measured.scale
        self.initial_ids = [i for i in initial.entry_ids if i is not None]

    def _initial_plan(self, ci: int | None) -> Plan:
        base = self.base
        if base is None or ci is None:
            return Plan(summary="", first_kept=0, digest=DigestState())
        first = ci + 1
        if base.retained_tail is None and base.first_kept_entry_id in self.index:
            first = self.index[base.first_kept_entry_id]
        details = base.details if isinstance(base.details, Mapping) else {}
        digest = DigestState.from_json(details.get("digest"))
        if digest is None:  # a summary written by a model, an import or an older version
            digest = DigestState.from_summary(base.summary)
        summary = base.summary
        if base.retained_tail:
            # The retained messages become part of the summary the next entry carries; a
            # summary among them (an imported compaction's) is carried whole, like ours.
            rest: list[tuple[Message, str | None]] = []
            for m in base.retained_tail:
                found = summary_of(m)
                if found is None:
                    rest.append((m, None))
                elif found[0].strip() and found[0].strip() not in digest.earlier:
                    digest.earlier.append(found[0].strip())
            digest.add(rest, self.fold.tool_kinds)
            summary = digest.render()[0]
        # A provider's compacted items stay in force while the summary they stand for does.
        native = details.get("native") if not base.retained_tail else None
        return Plan(summary=summary, first_kept=first, cleared=dict(base.cleared or {}),
                    pinned=tuple(base.pinned or ()), digest=digest,
                    native=native if isinstance(native, dict) else None)

    def report(self, note: str, error: str | None = None) -> None:
        """Note something the running stage did (a summarizer reply rejected...), for its
        stage report."""
        self.reports.append((note, error))

    def entry_for(self, plan: Plan, entry_id: str = _CANDIDATE_ID, timestamp: str = "", *,
                  tokens_after: int | None = None, details: Any = None,
                  receipt: CompactionReceipt | None = None) -> CompactionEntry:
        """The compaction entry that would describe ``plan`` (a child of the branch's tip)."""
        first = self.branch[plan.first_kept].id if plan.first_kept < len(self.branch) else None
        kept_from = plan.first_kept
        index = self.index
        return CompactionEntry(
            entry_id,
            self.branch[-1].id if self.branch else None,
            timestamp,
            summary=plan.summary,
            first_kept_entry_id=first,
            tokens_before=self.tokens_before,
            cleared={k: v for k, v in plan.cleared.items()
                     if index.get(k, -1) >= kept_from} or None,
            pinned=[p for p in plan.pinned if self.index.get(p, len(self.branch)) < kept_from]
            or None,
            tokens_after=tokens_after,
            details=details,
            usage=plan.usage,
            receipt=receipt,
        )

    def render(self, plan: Plan) -> SessionContext:
        """The context the model would see after appending ``plan``'s compaction entry.

        Cached per plan object (plans are immutable): the stages and the ladder ask for the
        same plans several times. The result is shared: do not modify it.
        """
        key = _view_key(plan)
        hit = self._renders.get(key)
        if hit is not None and hit[0].cleared is plan.cleared:
            return hit[1]
        if plan.summary:
            # The same view without the summary, with the summary message first: it pairs
            # with nothing, so building the whole branch again would give the same list.
            bare = self.render(replace(plan, summary=""))
            entry = self.entry_for(plan)
            first = summary_message(entry)
            ctx = replace(bare, messages=[first, *bare.messages],
                          entry_ids=[entry.id, *bare.entry_ids], compaction=entry,
                          fresh_from=bare.fresh_from + 1)
            known = self._view_sizes[id(bare.messages)][1]
            self._view_sizes[id(ctx.messages)] = (
                ctx.messages, None if known is None else [*self.sizes((first,)), *known])
        else:
            derived = self._with_more_cleared(plan)
            if derived is None:
                entry = self.entry_for(plan)
                derived = self._views.view(entry) if self._views is not None else None
                if derived is None:
                    derived = build_context([*self.branch, entry], projectors=self.projectors)
                self._view_sizes[id(derived.messages)] = (derived.messages, None)
            ctx = derived
        self._renders[key] = (plan, ctx)
        if not plan.summary:
            self._by_cut[plan.first_kept, plan.pinned] = (plan, ctx)
        return ctx

    def _with_more_cleared(self, plan: Plan) -> SessionContext | None:
        """``plan``'s view (no summary) from the last one rendered with the same cut and
        pins, when ``plan`` only clears more tool results (what ``ToolResults`` does): the
        same list with those results as placeholders, as ``build_context`` marks them."""
        hit = self._by_cut.get((plan.first_kept, plan.pinned))
        if hit is None:
            return None
        old, ctx = hit
        if any(plan.cleared.get(k) != v for k, v in old.cleared.items()):
            return None
        new = {k: v for k, v in plan.cleared.items() if k not in old.cleared}
        messages = list(ctx.messages)
        mark = ClearedToolResultMarker(tokens_after=None)  # (a candidate entry has no count)
        changed: list[int] = []
        for i, eid in enumerate(ctx.entry_ids):
            if eid is not None and eid in new and messages[i].role == "tool":
                messages[i] = messages[i].marked(mark, content=new[eid])
                changed.append(i)
        known = self._view_sizes[id(ctx.messages)][1]
        sizes: list[int] | None = None
        if known is not None:
            sizes = list(known)
            for i, n in zip(changed, self.sizes([messages[i] for i in changed]), strict=True):
                sizes[i] = n
        self._view_sizes[id(messages)] = (messages, sizes)
        return replace(ctx, messages=messages, compaction=self.entry_for(plan))

    def estimate(self, messages: Sequence[Message]) -> int:
        """The unscaled estimate of ``messages``."""
        return sum(self.sizes(messages))

    def sizes(self, messages: Sequence[Message]) -> list[int]:
        """The unscaled estimate of each message (cached for the branch's own messages, and
        for the messages of a rendered view as a whole: that list is shared, do not modify
        it)."""
        view = self._view_sizes.get(id(messages))
        if view is not None and view[0] is messages:
            known = view[1]
            if known is None:
                known = self._sizes(messages)
                self._view_sizes[id(messages)] = (view[0], known)
            return known
        return self._sizes(messages)

    def _sizes(self, messages: Sequence[Message]) -> list[int]:
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
        """One message's tokens, as the ladder counts them (scaled to the reported usage)."""
        return round(self.estimate((message,)) * self.scale)

    def count_text(self, text: str) -> int:
        """Tokens of ``text``, as the ladder counts them (scaled to the reported usage)."""
        return round(self.counter.count_text(text) * self.scale)

    def summary_tokens(self, plan: Plan, summary: str) -> int:
        """Tokens of the summary message ``summary`` would be in ``plan``'s context."""
        message = summary_message(self.entry_for(replace(plan, summary=summary)))
        return round(self.sizes((message,))[0] * self.scale) if summary else 0

    def tokens(self, plan: Plan) -> int:
        """The tokens of the context ``plan`` describes, as the ladder counts them."""
        key = _view_key(plan)
        hit = self._tokens.get(key)
        if hit is not None and hit[0].cleared is plan.cleared:
            return hit[1]
        n = round(self.estimate(self.render(plan).messages) * self.scale)
        self._tokens[key] = (plan, n)
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
        self._tokens[_view_key(plan)] = (plan, n)
        return n

    def initial_messages(self) -> list[tuple[str, int, Message]]:
        """The messages of the initial view that are the branch's own, as first written:
        (entry id, index in the branch, message), in the view's order (computed once)."""
        if self._initial_messages is None:
            out: list[tuple[str, int, Message]] = []
            for eid in self.initial_ids:
                i = self.index.get(eid)
                if i is None:
                    continue
                entry = self.branch[i]
                if isinstance(entry, MessageEntry):
                    out.append((eid, i, entry.message))
            self._initial_messages = out
        return self._initial_messages

    def original(self, entry_id: str) -> Message | None:
        """A message as first written (before any placeholder replaced it)."""
        i = self.index.get(entry_id)
        if i is None:
            return None
        entry = self.branch[i]
        return entry.message if isinstance(entry, MessageEntry) else None


def _view_key(plan: Plan) -> tuple[Any, ...]:
    """What decides the view a plan renders: its summary, cut and pins, and its cleared
    results (by identity: a caller checks that the cached plan holds the same dict)."""
    return (plan.summary, plan.first_kept, plan.pinned, id(plan.cleared))


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
