"""``ProviderCompaction``: the rung where the provider compacts the conversation itself.

Anthropic's server-side compaction (on demand, the ``compaction`` parameter; or the
``compact_20260112`` threshold edit: ``AnthropicMessages(native_compaction=...)``) and
OpenAI's ``POST /responses/compact`` return an item only that provider reads (a signed or
encrypted summary). The rung chooses its cut like the digest does, sends what the cut drops (after
the current summary, whose own provider items go back as they came) to the provider, and
keeps what it returned in the plan: the entry stores it in ``details["native"]``, the wire
conversion of that API sends it in place of the summary text, and every other provider gets
the readable summary (the provider's own when it gives one, the user's messages verbatim
around it; the offline digest when it gives none). The history stays in the file.

A model whose adapter cannot compact natively, a conversation under the provider's minimum,
a refused call or an answer that is no compaction: the rung steps aside (or raises, which
the ladder reports as a ``compaction_failed`` event) and the next rung compacts instead.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from .._context import repair_pairing, summary_message
from .._messages import Message, Usage
from ..entries import CallRecord
from ..models._native import NativeCompaction, NativeCompactionModel
from ._cuts import dropped_items
from ._fold import fold, with_model_text
from ._state import CompactionState, Plan

__all__ = ["ProviderCompaction"]


class ProviderCompaction:
    """Let the model's provider compact what the cut drops (see the module notes).

    ``model`` is an adapter with ``compact_native`` (``AnthropicMessages``,
    ``OpenAIResponses``); any other model makes the rung step aside, saying so. The kept
    messages take at most ``keep_ratio`` of the target; ``instructions`` go to the
    provider's summarizer (Anthropic's ``instructions``, OpenAI's ``instructions``).
    """

    name = "provider"

    def __init__(self, model: Any, *, keep_ratio: float = 0.5,
                 instructions: str | None = None) -> None:
        if not 0 < keep_ratio <= 1:
            raise ValueError(f"keep_ratio must be in (0, 1], got {keep_ratio!r}")
        self.model = model
        self.keep_ratio = keep_ratio
        self.instructions = instructions

    def __call__(self, state: CompactionState, plan: Plan) -> Plan | None:
        model = self.model
        if not isinstance(model, NativeCompactionModel):
            state.report(f"{type(model).__name__} cannot ask its provider to compact (no "
                         "compact_native); the next rung compacts")
            return None
        folded = fold(state, plan, steps=True, keep_ratio=self.keep_ratio)
        if folded is None:
            return None
        messages = request_messages(state, folded)
        tools = state.render(state.initial_plan).tools or ()
        size = round(state.estimate(messages) * state.scale)
        if size < model.min_native_tokens:
            state.report(f"{size} tokens to compact, under the {model.min_native_tokens} "
                         f"{model.provider} compacts at least; the next rung compacts")
            return None
        refusal = getattr(model, "native_refusal", None)
        why = refusal(messages) if refusal is not None else None
        if why is not None:  # known before asking: no call to record
            state.report(f"{model.provider} would refuse: {why}; the next rung compacts")
            return None
        name = getattr(model, "name", None)
        try:
            native = model.compact_native(messages, tools=tools,
                                          instructions=self.instructions)
        except Exception:
            state.calls.append(CallRecord(provider=model.provider, model=name,
                                          outcome="summarizer_failed"))
            raise
        state.calls.append(CallRecord(provider=native.provider, model=native.model,
                                      usage=native.usage, outcome="summary"))
        return with_native(state, folded, native)


def request_messages(state: CompactionState, folded: Plan) -> list[Message]:
    """What the provider is asked to compact for ``folded``: the system prompts (the one the
    session recorded with its requests first), the current summary (its provider items, if
    it has them), then the messages the cut drops, as first written, with every tool call
    answered."""
    initial = state.initial_plan
    view = state.render(initial)
    head = [m for m in view.messages if m.role == "system" and m.kind is None]
    head[:0] = [Message.system(text) for text in view.system_texts()]
    base = state.base
    if base is not None and initial.summary:
        # The base's own summary message carries its provider items; a summary the
        # planner rebuilt (from an imported tail) is plain text.
        head.append(summary_message(base if base.summary == initial.summary
                                    else state.entry_for(initial)))
    dropped = dropped_items(state, folded.first_kept, folded.pinned)
    body, _ = repair_pairing([(m, eid) for m, eid in dropped
                              if not (m.role == "system" and m.kind is None)])
    return [*head, *body]


def with_native(state: CompactionState, folded: Plan, native: NativeCompaction) -> Plan:
    """``folded`` carrying the provider's items, and its readable summary when it gave
    one (the digest's otherwise), with the call's usage."""
    plan = with_model_text(state, folded, native.summary) if native.summary else folded
    return replace(plan, native=native.to_json(),
                   usage=(plan.usage or Usage()) + native.usage)
