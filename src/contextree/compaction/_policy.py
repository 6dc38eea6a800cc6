"""``CompactionPolicy``: when to compact (a fraction of the window) and how far down."""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import InvalidArgument

__all__ = ["CompactionPolicy"]


@dataclass(frozen=True)
class CompactionPolicy:
    """``window`` tokens; compact once the context reaches ``compact_at`` of it, down to
    ``compact_to`` of it."""

    window: int
    compact_at: float = 0.7
    compact_to: float = 0.4

    def __post_init__(self) -> None:
        if isinstance(self.window, bool) or not isinstance(self.window, int) or self.window <= 0:
            raise InvalidArgument(f"window must be a positive number of tokens, got {self.window!r}")
        if not 0 < self.compact_to < self.compact_at <= 1:
            raise InvalidArgument(
                "need 0 < compact_to < compact_at <= 1 (compact down to a fraction of the window "
                f"smaller than the one that triggers), got compact_at={self.compact_at}, "
                f"compact_to={self.compact_to}"
            )

    @property
    def trigger(self) -> int:
        """The token count at which compaction starts."""
        return int(self.window * self.compact_at)

    @property
    def target(self) -> int:
        """The token count compaction tries to reach."""
        return int(self.window * self.compact_to)
