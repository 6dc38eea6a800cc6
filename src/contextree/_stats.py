"""Session statistics: messages, tokens and cost, for the current branch and the whole file."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from ._messages import Usage
from .entries import AnyEntry, CompactionEntry, LeafEntry, MessageEntry
from .storage._base import StorageHealth


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


@dataclass
class UsageStats:
    """Counts over a set of entries."""

    message_count: int = 0
    by_role: dict[str, int] = field(default_factory=dict)
    usage: Usage = field(default_factory=Usage)
    by_model: dict[str, Usage] = field(default_factory=dict)
    compactions: int = 0

    @property
    def total_tokens(self) -> int:
        return self.usage.total or (self.usage.input + self.usage.output
                                    + self.usage.cache_read + self.usage.cache_write)

    @property
    def cost_total(self) -> float:
        return self.usage.cost

    def to_dict(self) -> dict[str, Any]:
        return {
            "message_count": self.message_count,
            "by_role": dict(self.by_role),
            "total_tokens": self.total_tokens,
            "cost_total": self.cost_total,
            "usage": _usage_dict(self.usage),
            "by_model": {k: _usage_dict(v) for k, v in self.by_model.items()},
            "compactions": self.compactions,
        }


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

    # The seed's flat fields, for the whole session.
    @property
    def message_count(self) -> int:
        return self.file.message_count

    @property
    def total_tokens(self) -> int:
        return self.file.total_tokens

    @property
    def cost_total(self) -> float:
        return self.file.cost_total

    def to_dict(self) -> dict[str, Any]:
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
            "branch": self.branch.to_dict(),
            "file": self.file.to_dict(),
        }


def _usage_dict(u: Usage) -> dict[str, Any]:
    return {"input": u.input, "output": u.output, "cache_read": u.cache_read,
            "cache_write": u.cache_write, "total": u.total, "cost": u.cost}


def tally(entries: Iterable[AnyEntry]) -> UsageStats:
    """Message, token and cost totals over ``entries``."""
    s = UsageStats()
    usage = Usage()
    for e in entries:
        if isinstance(e, MessageEntry):
            m = e.message
            s.message_count += 1
            s.by_role[m.role] = s.by_role.get(m.role, 0) + 1
            if m.usage is not None:
                usage = usage + m.usage
                key = f"{m.provider}/{m.model}" if m.provider else (m.model or "unknown")
                s.by_model[key] = s.by_model.get(key, Usage()) + m.usage
        elif isinstance(e, CompactionEntry):
            s.compactions += 1
            if e.usage is not None:
                usage = usage + e.usage
    s.usage = usage
    return s


def compute_stats(session: StatsSource) -> SessionStats:
    """The statistics of ``session``: its current branch, all its entries, and how many of
    its branches end in a tip."""
    all_entries = list(session.entries())
    parents = {e.parent_id for e in all_entries if not isinstance(e, LeafEntry)}
    tips = sum(1 for e in all_entries if not isinstance(e, LeafEntry) and e.id not in parents)
    return SessionStats(
        session_id=session.id,
        name=session.name,
        leaf_id=session.leaf_id,
        entry_count=len(all_entries),
        branch_count=tips,
        branch=tally(session.branch()),
        file=tally(all_entries),
        quarantined_lines=session.health().quarantined_lines,
    )
