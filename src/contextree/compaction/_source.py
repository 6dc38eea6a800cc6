"""A plain list of messages as a branch the planner can compact.

The runtime's in-memory conversation and the flat ``SessionLog`` hold messages, not entries.
Each message becomes a message entry (ids ``m0``, ``m1``... by position); the last compaction
summary among them (recognised by its marker, which carries the raw summary and its digest state) becomes
the compaction entry it was rendered from, so a new compaction merges that summary instead of
piling another one on top.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .._context import SessionContext, summary_of
from .._messages import Message
from ..entries import AnyEntry, CompactionEntry, MessageEntry
from ..markers import CompactionSummaryMarker, Kind

__all__ = ["MessageBranch", "branch_of"]


@dataclass(frozen=True)
class MessageBranch:
    """The entries standing for a message list, and where each came from in the list."""

    entries: list[AnyEntry]
    positions: dict[str, int]  # entry id -> index in the message list

    def context_index(self, ctx: SessionContext, index: int) -> int:
        """The index in ``ctx`` (built from these entries) of the first message that comes
        from message ``index`` of the list or later (``len(ctx.messages)`` if none does)."""
        for i, eid in enumerate(ctx.entry_ids):
            if eid is not None and self.positions.get(eid, -1) >= index:
                return i
        return len(ctx.messages)


def branch_of(messages: Sequence[Message]) -> MessageBranch:
    """``messages`` as a chain of entries, root first (see the module docstring).

    Messages before the summary stay in view (the compaction entry keeps them), after the
    summary, as the context renders them.
    """
    last = max((i for i, m in enumerate(messages) if m.kind is Kind.COMPACTION_SUMMARY),
               default=None)
    entries: list[AnyEntry] = []
    positions: dict[str, int] = {}
    parent: str | None = None
    for i, m in enumerate(messages):
        eid = f"m{i}"
        entry: AnyEntry
        found = summary_of(m) if i == last else None
        if found is not None:
            summary, tokens_before = found
            mark = m.marker
            digest = mark.digest if isinstance(mark, CompactionSummaryMarker) else None
            entry = CompactionEntry(eid, parent, "", summary=summary,
                                    first_kept_entry_id=entries[0].id if entries else None,
                                    tokens_before=tokens_before,
                                    tokens_after=mark.tokens_after if isinstance(
                                        mark, CompactionSummaryMarker) else None,
                                    details={"digest": digest} if digest is not None else None)
        else:
            entry = MessageEntry(eid, parent, "", message=m)
        entries.append(entry)
        positions[eid] = i
        parent = eid
    return MessageBranch(entries, positions)
