"""Compaction: keep a conversation inside the model's window without losing its history."""

from __future__ import annotations

from typing import Any

from ..tokens import TokenCounter
from .digest import Digest, digest_messages
from .pipeline import (
    CompactionPipeline,
    CompactionPolicy,
    CompactionResult,
    CompactionState,
    Plan,
    Stage,
    StageReport,
    run_compaction,
)
from .stages import SlidingWindow, ToolResults, placeholder
from .summarize import Summarize


def default_pipeline(model: Any = None) -> CompactionPipeline:
    """``ToolResults -> SlidingWindow -> Digest``, with ``Summarize(model)`` before the
    digest when a model is given (the digest is then the fallback if the model fails)."""
    stages: list[Stage] = [ToolResults(), SlidingWindow()]
    if model is not None:
        stages.append(Summarize(model))
    stages.append(Digest())
    return CompactionPipeline(stages)


def compact(
    session: Any,
    *,
    window: int,
    compact_at: float = 0.7,
    compact_to: float = 0.4,
    pipeline: CompactionPipeline | None = None,
    counter: TokenCounter | None = None,
    model: Any = None,
    dry_run: bool = False,
    force: bool = False,
) -> CompactionResult:
    """Run the ladder on the session's current branch and append a compaction entry."""
    policy = CompactionPolicy(window, compact_at, compact_to)
    return run_compaction(session, policy, pipeline or default_pipeline(model), counter,
                          dry_run=dry_run, force=force)


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
    "compact",
    "default_pipeline",
    "digest_messages",
    "placeholder",
    "run_compaction",
]
