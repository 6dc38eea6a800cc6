"""Compaction: keep a conversation inside the model's window without losing its history.

``plan_compaction(branch_or_messages, policy, ladder, counter)`` is pure and returns the
compaction entry to append; ``Session.compact`` plans and appends it. A ladder is a list of
stages (``ToolResults``, ``SlidingWindow``, ``Summarize``, ``Digest``, or any callable
``(state, plan) -> plan | None`` with a ``name``). Every stage that drops messages folds
them into the summary (the summarizer's, or the offline digest, whose state ``DigestState``
the entry stores in ``details["digest"]`` for the next compaction to merge).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._public import publish

if TYPE_CHECKING:  # imported on first use (PEP 562), from the modules _LAZY names
    from ._digest import DigestState, digest_messages
    from ._ladder import (
        CompactionLadder,
        CompactionResult,
        StageReport,
        default_ladder,
        plan_compaction,
    )
    from ._native import ProviderCompaction
    from ._policy import CompactionPolicy
    from ._stages import Digest, SlidingWindow, ToolResults, placeholder
    from ._state import CompactionState, Plan, Stage
    from ._summarize import Summarize

__all__ = [
    "CompactionLadder",
    "CompactionPolicy",
    "CompactionResult",
    "CompactionState",
    "Digest",
    "DigestState",
    "Plan",
    "ProviderCompaction",
    "SlidingWindow",
    "Stage",
    "StageReport",
    "Summarize",
    "ToolResults",
    "default_ladder",
    "digest_messages",
    "placeholder",
    "plan_compaction",
]

_LAZY = {
    "._digest": ("DigestState", "digest_messages"),
    "._ladder": ("CompactionLadder", "CompactionResult", "StageReport", "default_ladder",
                 "plan_compaction"),
    "._native": ("ProviderCompaction",),
    "._policy": ("CompactionPolicy",),
    "._stages": ("Digest", "SlidingWindow", "ToolResults", "placeholder"),
    "._state": ("CompactionState", "Plan", "Stage"),
    "._summarize": ("Summarize",),
}

if not TYPE_CHECKING:  # type checkers see the imports above, not a catch-all __getattr__
    __getattr__, __dir__ = publish(globals(), _LAZY)
