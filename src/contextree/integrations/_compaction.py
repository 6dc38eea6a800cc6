"""What the integrations share about compaction: their options and when it is due.

The LangChain middleware, the Agents SDK session and the pydantic-ai history take the same
options (``window``, ``compact_at``, ``compact_to``, ``ladder``, ``counter``, and a model that
summarizes) and compact alike: once the context reaches ``compact_at`` of the window; after a
run that could not reach the target, only once the context has grown by a tenth of the
window since, so a ladder that cannot help is not climbed again on every call.
"""

from __future__ import annotations

from .._session import Session
from ..compaction import CompactionLadder, CompactionResult
from ..models._base import Model
from ..tokens import EstimateCounter, TokenCounter

__all__ = ["CompactionOptions"]


class CompactionOptions:
    """The compaction options, kept as attributes of the integration that takes them."""

    window: int | None
    compact_at: float
    compact_to: float
    ladder: CompactionLadder | None
    counter: TokenCounter

    def _set_compaction_options(self, window: int | None, compact_at: float,
                                compact_to: float, ladder: CompactionLadder | None,
                                counter: TokenCounter | None) -> None:
        """Keep the options (``counter`` defaults to the offline estimator)."""
        self.window = window
        self.compact_at = compact_at
        self.compact_to = compact_to
        self.ladder = ladder
        self.counter = counter or EstimateCounter()

    def _compaction_due(self, tokens: int, failed_at: int | None = None,
                        window: int | None = None) -> bool:
        """True when a context of ``tokens`` should be compacted: there is a window
        (``window``, else the integration's), the trigger is reached, and (``failed_at``: the
        size at which the ladder last could not reach the target) it has grown by a tenth of
        the window since."""
        window = window or self.window
        if window is None or tokens < int(window * self.compact_at):
            return False
        return failed_at is None or tokens >= failed_at + window // 10

    def _compact(self, session: Session, model: Model | None, *, window: int | None = None,
                 force: bool = False) -> CompactionResult | None:
        """Run the ladder on ``session`` with these options (``window`` overrides the
        integration's); None when there is no window."""
        window = window or self.window
        if window is None:
            return None
        return session.compact(window, ladder=self.ladder, counter=self.counter, model=model,
                               compact_at=self.compact_at, compact_to=self.compact_to,
                               force=force)
