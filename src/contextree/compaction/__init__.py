"""Compaction: keep a conversation inside the model's window without losing its history.

``plan_compaction(branch_or_messages, policy, ladder, counter)`` is pure and returns the
compaction entry to append; ``Session.compact`` plans and appends it. A ladder is a list of
stages (``ToolResults``, ``SlidingWindow``, ``Summarize``, ``Digest``, or any callable
``(state, plan) -> plan | None`` with a ``name``).
"""

from __future__ import annotations

from ._digest import digest_messages
from ._pipeline import (
    CompactionPipeline,
    CompactionResult,
    StageReport,
    default_pipeline,
    plan_compaction,
)
from ._policy import CompactionPolicy
from ._stages import Digest, SlidingWindow, ToolResults, placeholder
from ._state import CompactionState, Plan, Stage
from ._summarize import Summarize

__all__ = [
    "CompactionPipeline",
    "CompactionPolicy",
    "CompactionResult",
    "CompactionState",
    "Digest",
    "Plan",
    "SlidingWindow",
    "Stage",
    "StageReport",
    "Summarize",
    "ToolResults",
    "default_pipeline",
    "digest_messages",
    "placeholder",
    "plan_compaction",
]
