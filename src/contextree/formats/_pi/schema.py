"""What both directions of the pi format agree on: the version written, the names contextree
uses inside pi files, and the values pi derives (so import can drop them and export restore
them).
"""

from __future__ import annotations

from .._base import Json

__all__ = ["CLEARED_BY", "EXT", "PI_ERAS", "PI_MESSAGE", "PI_VERSION", "SYSTEM_TYPE",
           "default_api", "default_cost"]

PI_VERSION = 3
"""The pi session file version export writes (and migration brings older files to)."""
PI_ERAS = ("1", "0.73")
"""The pi releases export can write for, the default first: ``"1"`` (pi 1.x, npm
``@earendil-works/pi-coding-agent``) or ``"0.73"`` (the last of ``@mariozechner/pi-coding-agent``).
Both write file version 3; a 1.x file also holds what only pi 1.x reads (``context_edit``
lines for the tool results a compaction cleared, a retain-none compaction's own id)."""
CLEARED_BY = "cleared_by"
"""Key (under ``EXT``) of a ``context_edit`` line written for a compaction's ``cleared``: the
compaction's id, so that import folds it back into the compaction."""
SYSTEM_TYPE = "contextree.system"
"""``customType`` of the pi ``custom`` message that holds a contextree system message."""
EXT = "contextree"
"""The key under which contextree-only fields travel through pi files (pi ignores it)."""
PI_MESSAGE = "pi.message"
"""Custom type of the contextree entries holding a pi message no model sees."""

_API_BY_PROVIDER = {"anthropic": "anthropic-messages", "openai": "openai-responses",
                    "google": "google-generative-ai"}


def default_api(provider: str) -> str:
    """The ``api`` pi records for an assistant message of ``provider``."""
    return _API_BY_PROVIDER.get(provider, "openai-completions")


def default_cost(total: float) -> Json:
    """pi's cost breakdown for a message of which only the ``total`` cost is known."""
    return {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": total}
