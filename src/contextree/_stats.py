"""Session statistics: messages, tokens and cost, for the current branch, each branch and the
whole file, and per model.

Every model call counts, under its model: a reply, each summarizer call of a compaction
(``details["calls"]``, accepted or rejected), the calls recorded in a ``contextree.calls``
custom entry (a compaction that wrote nothing, an interrupted call of which nothing arrived).
So the per-model figures add up to the totals; a call whose model is not recorded counts
under ``unknown``. A call whose input the provider did not report is counted by estimate and
said to be (``estimated_calls``).

Cost is what each call's usage carries (the provider's figure, or the price table's when the
reply arrived), else the price table's price of its usage now; a call whose price is not
known is counted in ``unpriced`` and its cost shows as unknown, never as ``$0``. A total with
an unknown part is unknown: ``None`` (``null`` in JSON), the known part beside it as
``cost_known``.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

import msgspec

from ._messages import Message, Usage
from ._pricing import PRICES_EXTRA, cost_of, price_source
from .entries import CALLS_TYPE, AnyEntry, CallRecord, CompactionEntry, CustomEntry, MessageEntry
from .markers import USAGE_ESTIMATED
from .storage._base import StorageHealth
from .storage._filetree import ROLE_CODES, ROLE_OF_FACT, UNKNOWN_FACT, FileTree


class StatsSource(Protocol):
    """What the statistics read of a session (``Session`` is one)."""

    @property
    def id(self) -> str: ...

    @property
    def name(self) -> str | None: ...

    @property
    def leaf_id(self) -> str | None: ...

    def entries(self) -> Iterator[AnyEntry]: ...

    def branch(self, leaf_id: str | None = None) -> list[AnyEntry]: ...

    def health(self) -> StorageHealth: ...

    def labels(self) -> dict[str, str]: ...


def cost_text(cost: float, unpriced: int) -> str:
    """A cost for people: ``$0.0123``; ``unknown`` when no call was priced;
    ``$0.0123 + unknown (2 calls)`` when some were not."""
    if not unpriced:
        return f"${cost:.4f}"
    if not cost:
        return "unknown"
    return f"${cost:.4f} + unknown ({unpriced} call{'s' if unpriced != 1 else ''})"


class _Priced:
    """The cost figures of a sum of calls (its ``usage`` and how many were ``unpriced``),
    the same for the statistics of a set of entries and of one branch."""

    usage: Usage
    unpriced: int

    @property
    def cost_known(self) -> float:
        """The sum of the costs that are known, in USD (``0.0`` when none is)."""
        return self.usage.cost or 0.0

    @property
    def cost(self) -> float | None:
        """The cost in USD, or None when a call's price is unknown."""
        return _total(self.usage, self.unpriced)

    @property
    def cost_text(self) -> str:
        """The cost for people (``unknown`` where a price is not known, never ``$0``)."""
        return cost_text(self.cost_known, self.unpriced)


@dataclass
class UsageStats(_Priced):
    """Counts over a set of entries. ``usage.cost`` sums the known costs (``cost_known``);
    ``unpriced`` counts the calls whose cost is unknown (``unpriced_by_model`` per model);
    ``calls`` the model calls, ``estimated`` those whose usage is an estimate. ``by_model``
    sums to ``usage``."""

    message_count: int = 0
    by_role: dict[str, int] = field(default_factory=dict)
    usage: Usage = field(default_factory=Usage)
    by_model: dict[str, Usage] = field(default_factory=dict)
    compactions: int = 0
    unpriced: int = 0
    unpriced_by_model: dict[str, int] = field(default_factory=dict)
    calls: int = 0
    calls_by_model: dict[str, int] = field(default_factory=dict)
    estimated: int = 0
    estimated_by_model: dict[str, int] = field(default_factory=dict)

    @property
    def total_tokens(self) -> int:
        """Billed tokens (prompt, cache and output) of every call."""
        return self.usage.total or (self.usage.input + self.usage.output
                                    + self.usage.cache_read + self.usage.cache_write)

    @property
    def cost_total(self) -> float | None:
        """The seed's name for ``cost``: None when a call's price is unknown."""
        return self.cost

    @property
    def cache_hit_share(self) -> float | None:
        """The share of prompt tokens the provider read from its cache (billed at the cache
        rate): ``cache_read / (input + cache_read + cache_write)``; None without prompt
        tokens."""
        u = self.usage
        prompt = u.input + u.cache_read + u.cache_write
        return u.cache_read / prompt if prompt else None

    def model_cost_text(self, model: str) -> str:
        """The cost of ``model``'s calls for people."""
        return cost_text(self.by_model[model].cost or 0.0,
                         self.unpriced_by_model.get(model, 0))

    def to_dict(self) -> dict[str, Any]:
        """The figures as JSON-ready data (what ``contextree stats --json`` prints)."""
        return {
            "message_count": self.message_count,
            "by_role": dict(self.by_role),
            "total_tokens": self.total_tokens,
            "cost_total": self.cost_total,
            "cost": self.cost,
            "cost_known": self.cost_known,
            "unpriced_calls": self.unpriced,
            "usage": _usage_dict(self.usage, self.cost),
            "by_model": {k: {**_priced_dict(v, self.unpriced_by_model.get(k, 0)),
                             "calls": self.calls_by_model.get(k, 0),
                             "estimated_calls": self.estimated_by_model.get(k, 0)}
                         for k, v in self.by_model.items()},
            "compactions": self.compactions,
            "cache_hit_share": self.cache_hit_share,
            "calls": self.calls,
            "estimated_calls": self.estimated,
        }


@dataclass
class BranchStats(_Priced):
    """One branch: the path from the root to ``tip_id`` (an entry with no children)."""

    tip_id: str
    label: str | None
    current: bool
    message_count: int
    usage: Usage
    unpriced: int

    def to_dict(self) -> dict[str, Any]:
        """The branch's figures as JSON-ready data."""
        return {"tip_id": self.tip_id, "label": self.label, "current": self.current,
                "message_count": self.message_count,
                **_priced_dict(self.usage, self.unpriced, usage_key="usage")}


@dataclass
class SessionStats:
    """``branch``: root to current leaf; ``file``: every entry of the session."""

    session_id: str
    name: str | None
    leaf_id: str | None
    entry_count: int
    branch_count: int
    branch: UsageStats
    file: UsageStats
    quarantined_lines: int = 0
    branches: list[BranchStats] = field(default_factory=list)
    prices: str | None = None
    """Where prices came from (``"genai-prices 0.2.3"``); None: no price table installed
    (``pip install 'contextree[prices]'``)."""

    # The seed's flat fields, for the whole session.
    @property
    def message_count(self) -> int:
        """Messages in the whole session (every branch)."""
        return self.file.message_count

    @property
    def total_tokens(self) -> int:
        """Billed tokens of every call in the session (not the context size)."""
        return self.file.total_tokens

    @property
    def cost_total(self) -> float | None:
        """The cost in USD of the whole session; None when a call's price is unknown."""
        return self.file.cost_total

    def to_dict(self) -> dict[str, Any]:
        """Every figure as JSON-ready data (what ``contextree stats --json`` prints)."""
        return {
            "session_id": self.session_id,
            "name": self.name,
            "leaf_id": self.leaf_id,
            "entry_count": self.entry_count,
            "branch_count": self.branch_count,
            "quarantined_lines": self.quarantined_lines,
            "message_count": self.message_count,
            "total_tokens": self.total_tokens,
            "cost_total": self.cost_total,
            "cost": self.file.cost,
            "cost_known": self.file.cost_known,
            "prices": self.prices,
            "branch": self.branch.to_dict(),
            "file": self.file.to_dict(),
            "branches": [b.to_dict() for b in self.branches],
        }

    @property
    def prices_hint(self) -> str | None:
        """What to do when costs are unknown for want of a price table, else None."""
        if self.prices is None and self.file.unpriced:
            return f"no price table is installed: pip install 'contextree[{PRICES_EXTRA}]'"
        return None


def _total(usage: Usage, unpriced: int) -> float | None:
    """The cost of a sum of calls: None when one of them is unpriced."""
    return None if unpriced else usage.cost or 0.0


def _usage_dict(u: Usage, cost: float | None) -> dict[str, Any]:
    return {"input": u.input, "output": u.output, "cache_read": u.cache_read,
            "cache_write": u.cache_write, "total": u.total, "cost": cost}


def _priced_dict(u: Usage, unpriced: int, usage_key: str | None = None) -> dict[str, Any]:
    """Token counts and cost of a sum of calls: ``cost`` None when one is unpriced, the known
    part in ``cost_known`` (the counts under ``usage_key``, or beside the costs)."""
    cost = _total(u, unpriced)
    counts = _usage_dict(u, cost)
    costs = {"cost": cost, "cost_known": u.cost or 0.0, "unpriced_calls": unpriced}
    return {usage_key: counts, **costs} if usage_key else {**counts, **costs}


class _Estimate(msgspec.Struct):
    """What the statistics need of a message's ``meta``: whether its usage is estimated."""

    usage_estimated: bool | None = None


class _Call(msgspec.Struct):
    """What the statistics need of a message: its role, and what its call used."""

    role: str
    usage: Usage | None = None
    model: str | None = None
    provider: str | None = None
    meta: _Estimate | None = None


class _Calls(msgspec.Struct):
    """The ``calls`` a compaction's details or a ``contextree.calls`` entry records."""

    calls: list[CallRecord] | None = None


_CALLS = msgspec.json.Decoder(_Calls)


class _Facts(msgspec.Struct):
    """What the statistics need of an entry. A line of a big session decodes straight into
    this (msgspec skips the content, the bulk of the file, without building it); an entry
    already decoded is reduced to it by ``_facts``, so both paths count alike."""

    type: str
    id: str
    parent_id: str | None = None
    message: _Call | None = None
    usage: Usage | None = None  # a compaction's summarizer calls
    details: msgspec.Raw | None = None  # a compaction's: its ``calls`` are read on use
    custom_type: str | None = None
    data: msgspec.Raw | None = None  # a custom entry's: read only for ``contextree.calls``


_FACTS = msgspec.json.Decoder(_Facts)
_READ_KINDS = frozenset({"message", "compaction", "custom"})  # the types whose lines are read
SPARSE_BLOCK = 256 << 10  # the lines read are far apart: read little around each
_ESTIMATED = _Estimate(usage_estimated=True)


def _facts(e: AnyEntry) -> _Facts:
    if isinstance(e, MessageEntry):
        m = e.message
        estimated = _ESTIMATED if isinstance(m.meta, dict) and m.meta.get(
            USAGE_ESTIMATED) is True else None
        return _Facts(e.type, e.id, e.parent_id, _Call(m.role, m.usage, m.model, m.provider,
                                                       estimated))
    if isinstance(e, CompactionEntry):
        details = (msgspec.Raw(msgspec.json.encode({"calls": e.details["calls"]}))
                   if isinstance(e.details, dict) and "calls" in e.details else None)
        return _Facts(e.type, e.id, e.parent_id, usage=e.usage, details=details)
    if isinstance(e, CustomEntry) and e.custom_type == CALLS_TYPE:
        return _Facts(e.type, e.id, e.parent_id, custom_type=e.custom_type,
                      data=msgspec.Raw(msgspec.json.encode(e.data)))
    return _Facts(e.type, e.id, e.parent_id)


@dataclass(frozen=True)
class _Priced1:
    """One call as the statistics count it: under ``model``, its usage (cost filled where
    known), whether the cost is known, whether the usage is an estimate."""

    model: str
    usage: Usage
    known: bool
    estimated: bool = False


def _model_key(provider: str | None, model: str | None) -> str:
    return f"{provider}/{model}" if provider else (model or "unknown")


def _recorded_calls(raw: msgspec.Raw | None) -> list[CallRecord]:
    """The ``calls`` recorded in a compaction's details or a calls entry (none when the
    data is not that shape: it counts under ``unknown`` then)."""
    if raw is None:
        return []
    try:
        return _CALLS.decode(raw).calls or []
    except (msgspec.DecodeError, RecursionError):
        return []


def _table_priced(usage: Usage, provider: str | None, model: str | None) -> float | None:
    return cost_of(Message(role="assistant", content=None, usage=usage, model=model,
                           provider=provider))


def _one(key: str, usage: Usage, cost: float | None, estimated: bool = False) -> _Priced1:
    if cost is None:
        return _Priced1(key, usage.replace(cost=0.0), False, estimated)
    return _Priced1(key, usage if cost == usage.cost else usage.replace(cost=cost), True,
                    estimated)


def _priced(e: _Facts) -> list[_Priced1]:
    """The calls an entry records, each with its cost filled where known (none for an
    entry that records no call)."""
    if e.message is not None:
        call = e.message
        if call.usage is None:
            return []
        estimated = bool(call.meta is not None and call.meta.usage_estimated)
        return [_one(_model_key(call.provider, call.model), call.usage,
                     _table_priced(call.usage, call.provider, call.model), estimated)]
    if e.type == "compaction":
        calls = _recorded_calls(e.details)
        if calls:
            return [_one(_model_key(c.provider, c.model), c.usage,
                         _table_priced(c.usage, c.provider, c.model), c.estimated)
                    for c in calls]
        if e.usage is None:
            return []
        usage = e.usage  # an older entry: one sum, by a model it does not name
        billed = usage.input + usage.output + usage.cache_read + usage.cache_write
        return [_one("unknown", usage, usage.cost if usage.cost is not None
                     else (None if billed else 0.0))]
    if e.type == "custom" and e.custom_type == CALLS_TYPE:
        return [_one(_model_key(c.provider, c.model), c.usage,
                     _table_priced(c.usage, c.provider, c.model), c.estimated)
                for c in _recorded_calls(e.data)]
    return []


def tally(entries: Iterable[AnyEntry]) -> UsageStats:
    """Message, token and cost totals over ``entries``."""
    return _tally(map(_facts, entries))


def _tally(entries: Iterable[_Facts]) -> UsageStats:
    s = UsageStats()
    usage = Usage()
    for e in entries:
        m = e.message
        if m is not None:
            s.message_count += 1
            s.by_role[m.role] = s.by_role.get(m.role, 0) + 1
        elif e.type == "compaction":
            s.compactions += 1
        for call in _priced(e):
            key, used = call.model, call.usage
            usage = usage + used
            s.calls += 1
            s.calls_by_model[key] = s.calls_by_model.get(key, 0) + 1
            s.by_model[key] = s.by_model.get(key, Usage()) + used
            if call.estimated:
                s.estimated += 1
                s.estimated_by_model[key] = s.estimated_by_model.get(key, 0) + 1
            if not call.known:
                s.unpriced += 1
                s.unpriced_by_model[key] = s.unpriced_by_model.get(key, 0) + 1
    s.usage = usage
    return s


_NOTHING = (0, Usage(), 0)  # the totals above a root (shared: Usage sums make new ones)
# Entries that record something about the session rather than a turn of it: ``label`` and
# ``name`` append theirs on the current branch, where they become its tip.
_BOOKKEEPING = frozenset({"label", "leaf", "session_info"})
K = TypeVar("K", str, int)  # an entry, by id or by its number in a file tree


def _branch_label(tip: K, label: Callable[[K], str | None],
                  kept_above: Callable[[K], K | None]) -> str | None:
    """The label a branch shows: its tip's, else (a bookkeeping tip) that of the nearest entry
    above it that is labelled or holds content. ``kept_above``: the parent of a bookkeeping
    entry, None for any other entry."""
    seen: set[K] = set()
    at: K | None = tip
    while at is not None and at not in seen:
        found = label(at)
        if found is not None:
            return found
        seen.add(at)
        at = kept_above(at)
    return None


class _BranchTotals:
    """Messages, usage and cost of the path to each tip, added up one entry at a time
    (parents come before their children in a session)."""

    def __init__(self) -> None:
        self.totals: dict[str, tuple[int, Usage, int]] = {}
        self.parents: set[str | None] = set()
        self.order: list[str] = []
        self.kept: dict[str, str | None] = {}  # bookkeeping entry -> its parent

    def add(self, e: _Facts) -> None:
        if e.type == "leaf":
            return
        parent = e.parent_id
        self.parents.add(parent)
        if e.type in _BOOKKEEPING:
            self.kept[e.id] = parent
        above = self.totals.get(parent, _NOTHING) if parent else _NOTHING
        calls = _priced(e)
        if not calls and e.message is None:  # most entries: the totals above, shared
            self.totals[e.id] = above
        else:
            count, usage, unpriced = above
            if e.message is not None:
                count += 1
            for call in calls:
                usage = usage + call.usage
                unpriced += 0 if call.known else 1
            self.totals[e.id] = (count, usage, unpriced)
        self.order.append(e.id)

    def result(self, leaf_id: str | None, labels: dict[str, str]) -> list[BranchStats]:
        tips = [eid for eid in self.order if eid not in self.parents]
        return [BranchStats(tip, _branch_label(tip, labels.get, self.kept.get), tip == leaf_id,
                            *self.totals[tip]) for tip in tips]


def branch_stats(entries: Iterable[AnyEntry], leaf_id: str | None,
                 labels: dict[str, str]) -> list[BranchStats]:
    """Messages, usage and cost of the path to each tip, in one pass over ``entries``."""
    totals = _BranchTotals()
    for e in entries:
        totals.add(_facts(e))
    return totals.result(leaf_id, labels)


class _Stale(Exception):
    """A line read for the statistics does not say what the index says of it."""


def _read_facts(tree: FileTree, said: list[bool]) -> tuple[dict[int, _Facts], bool]:
    """The facts of the entries of a file tree whose lines must be read: messages that
    record a call (or whose role the index does not know), compactions and custom entries,
    decoded from their lines as ``_Facts`` only, by entry number. ``said[k]``: the columns
    say all of entry ``k`` (a message's role, and that it records no call: tool results and
    prompts, the bulk of a big session, are never read). ``_Stale`` when a line does not
    decode so (a field beyond what ``_Facts`` knows, say) or does not match the columns: the
    caller then counts from whole entries. Also whether it learnt roles the index did not
    hold (an index written before that column: worth saving)."""
    ids, types, parents, codes = tree.ids, tree.types, tree.parents, tree.facts
    learnt = False
    out: dict[int, _Facts] = {}
    for k, line in tree.lines(_READ_KINDS, SPARSE_BLOCK, skip=said.__getitem__):
        try:
            facts = _FACTS.decode(line)
        except (msgspec.DecodeError, RecursionError):  # the whole-entry path says what is wrong
            raise _Stale from None
        p = parents[k]
        if facts.id != ids[k] or facts.type != types[k] or facts.parent_id != (
                None if p < 0 else ids[p]):
            raise _Stale
        if codes[k] == UNKNOWN_FACT and facts.message is not None and (
                facts.message.usage is None and facts.message.role in ROLE_CODES):
            codes[k] = ROLE_CODES[facts.message.role]  # learnt for an index that lacked it
            learnt = True
        # A field of the other type is an extra of this one (kept, never counted).
        if facts.type == "message":
            facts.usage, facts.details, facts.custom_type, facts.data = None, None, None, None
        elif facts.type == "compaction":
            facts.message, facts.custom_type, facts.data = None, None, None
        else:
            facts.message, facts.usage, facts.details = None, None, None
        out[k] = facts
    return out, learnt


def _tree_stats(tree: FileTree, leaf: str | None, labels: dict[str, str],
                save: Callable[[], object] | None,
                ) -> tuple[UsageStats, list[BranchStats], UsageStats, int]:
    """The figures of ``compute_stats`` (the file's, each branch's, the current branch's,
    and the entry count) from the columns of a file tree and the few lines they do not
    answer for, by entry number: no entry is built, no dict by id. Counts as the pass over
    whole entries does, in the same order (``_Stale`` as ``_read_facts`` gives it). Roles
    learnt for an index that lacked them are saved (``save``), so that the next count reads
    only the lines that need it."""
    ids, types, parents, codes = tree.ids, tree.types, tree.parents, tree.facts
    role_of = ROLE_OF_FACT
    said = [t == "message" and c in role_of for t, c in zip(types, codes, strict=True)]
    read, learnt = _read_facts(tree, [c in role_of for c in codes])
    if learnt and save is not None:
        save()
    n = len(ids)
    # How each entry counts: 0 a message the columns answer for, 1 an entry that adds
    # nothing, 2 a leaf move (no totals, not a tip), 3 an entry whose line was read.
    how = [0 if told else 2 if kind == "leaf" else 1 for told, kind in zip(said, types,
                                                                          strict=True)]
    for k in read:
        how[k] = 3
    # Totals above and at each entry, as a message count and an account (a usage sum and
    # its unpriced calls, which change only at the entries read): -1, no totals (a leaf
    # move, or an entry not counted yet), whose children count from nothing.
    count = [-1] * n
    account = [0] * n
    accounts: list[tuple[Usage, int]] = [(_NOTHING[1], _NOTHING[2])]
    is_parent = bytearray(n)
    read_roles: dict[str, int] = {}  # role -> messages read, in the order they come
    firsts: dict[str, int] = {}  # role -> where it first comes
    column_compactions = 0
    for k, p, what in zip(range(n), parents, how, strict=True):
        if p >= 0 and count[p] >= 0:
            above, acct = count[p], account[p]
        else:
            above, acct = 0, 0
        if what == 0:
            count[k], account[k] = above + 1, acct
        elif what == 1:
            column_compactions += types[k] == "compaction"
            count[k], account[k] = above, acct
        elif what == 2:
            is_parent[k] = 1  # not a tip either
            continue
        else:
            got = read[k]
            calls = _priced(got)
            if got.message is not None:
                role = got.message.role
                read_roles[role] = read_roles.get(role, 0) + 1
                firsts.setdefault(role, k)
                above += 1
            if calls:
                usage, unpriced = accounts[acct]
                for call in calls:
                    usage = usage + call.usage
                    unpriced += 0 if call.known else 1
                acct = len(accounts)
                accounts.append((usage, unpriced))
            count[k], account[k] = above, acct
        if p >= 0:
            is_parent[p] = 1
    told_codes = bytes(itertools.compress(codes, said))  # the messages counted above
    told_roles: dict[str, int] = {}
    for code, role in role_of.items():
        if code in told_codes:
            told_roles[role] = told_codes.count(code)
            where = next(k for k in range(n) if said[k] and codes[k] == code)
            firsts[role] = min(firsts.get(role, where), where)
    roles = {role: read_roles.get(role, 0) + told_roles.get(role, 0)  # in the order roles
             for role in sorted(firsts, key=firsts.__getitem__)}  # first appear
    file = _tally(read[k] for k in sorted(read))
    file.message_count = sum(roles.values())
    file.by_role = roles
    file.compactions += column_compactions

    def label_of(k: int) -> str | None:
        return labels.get(ids[k])

    def kept_above(k: int) -> int | None:  # the parent of a bookkeeping entry
        return parents[k] if types[k] in _BOOKKEEPING and parents[k] >= 0 else None

    branches = []
    k = is_parent.find(0)  # the tips, found in C (the entries with no child, leaf moves aside)
    while k >= 0:
        usage, unpriced = accounts[account[k]]
        label = _branch_label(k, label_of, kept_above)
        branches.append(BranchStats(ids[k], label, ids[k] == leaf, count[k], usage, unpriced))
        k = is_parent.find(0, k + 1)
    path: list[_Facts] = []
    seen: set[int] = set()
    at = tree.slot_of(leaf) if leaf is not None else None
    while at is not None and at >= 0 and at not in seen:
        seen.add(at)
        facts = read.get(at)
        if facts is None:
            p = parents[at]
            facts = _Facts(types[at], ids[at], None if p < 0 else ids[p],
                           _Call(role_of[codes[at]]) if said[at] else None)
        path.append(facts)
        at = parents[at]
    path.reverse()
    return file, branches, _tally(path), len(set(ids))


def _every_fact(session: StatsSource) -> Iterator[_Facts]:
    """The facts of every entry in append order, from its entries."""
    return map(_facts, session.entries())


def _path_to(leaf: str | None, by_id: dict[str, _Facts]) -> list[_Facts]:
    """The facts of the path from the root to ``leaf``, from the facts already gathered
    (the branch is not read a second time)."""
    path: list[_Facts] = []
    seen: set[str] = set()
    at = by_id.get(leaf) if leaf is not None else None
    while at is not None and at.id not in seen:
        seen.add(at.id)
        path.append(at)
        at = by_id.get(at.parent_id) if at.parent_id is not None else None
    path.reverse()
    return path


def compute_stats(session: StatsSource) -> SessionStats:
    """The statistics of ``session``: its current branch, all its entries, and how many of
    its branches end in a tip."""
    leaf = session.leaf_id
    storage = getattr(session, "storage", None)
    tree = FileTree.of(storage)
    figures = None
    if tree is not None:  # an indexed session file: from its columns
        with tree.lock:
            try:
                figures = _tree_stats(tree, leaf, session.labels(),
                                      getattr(storage, "save_index", None))
            except _Stale:
                pass
    if figures is None:
        figures = _entry_stats(session, leaf)
    file, branches, branch, count = figures
    return SessionStats(
        session_id=session.id,
        name=session.name,
        leaf_id=leaf,
        entry_count=count,
        branch_count=len(branches),
        branch=branch,
        file=file,
        quarantined_lines=session.health().quarantined_lines,
        branches=branches,
        prices=price_source(),
    )


def _entry_stats(session: StatsSource, leaf: str | None,
                 ) -> tuple[UsageStats, list[BranchStats], UsageStats, int]:
    """``_tree_stats`` from the entries of any session, in one pass."""
    totals = _BranchTotals()
    by_id: dict[str, _Facts] = {}

    def every_entry() -> Iterator[_Facts]:  # one pass for all three tallies
        for e in _every_fact(session):
            by_id[e.id] = e
            totals.add(e)
            yield e

    file = _tally(every_entry())
    branches = totals.result(leaf, session.labels())
    return file, branches, _tally(_path_to(leaf, by_id)), len(by_id)
