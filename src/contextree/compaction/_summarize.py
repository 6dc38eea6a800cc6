"""``Summarize``: the rung that spends a model call, updating the previous summary."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson

from .._messages import Message, Usage
from .._text import shorten
from ..errors import CompactionError
from ..models._base import Model
from ._cuts import summary_cut
from ._state import CompactionState, Plan, with_summary

__all__ = ["SYSTEM_PROMPT", "Summarize", "render_transcript"]

SYSTEM_PROMPT = """\
You compact the history of an AI agent's conversation so the agent can continue without it.
Write a summary in Markdown with exactly these sections:
## Objective — what the user wants overall.
## Constraints and preferences — the user's instructions and limits, quoted where possible.
## Decisions — choices made and why.
## Work done — what was read, changed, run, and the outcome.
## Identifiers — copied verbatim: file paths, ids, names, commands, URLs, error messages.
## Outstanding work — what remains, and the next step.
Be concise and factual; never invent anything. If a previous summary is given, update it with
the new messages: keep what still holds, correct what changed, add what is new."""


def render_transcript(items: Sequence[tuple[Message, str | None]], *, cap: int = 4000) -> str:
    """The messages as plain text for the summarizer (long tool output shortened)."""
    lines = []
    for m, _ in items:
        text = shorten(m.text, cap, keep="middle", counted=True)
        if m.role == "assistant" and m.tool_calls:
            calls = "; ".join(f"{c.name}({shorten(orjson.dumps(c.arguments).decode(), 500)})"
                              for c in m.tool_calls)
            text = f"{text}\n[tool calls: {calls}]" if text else f"[tool calls: {calls}]"
        label = f"tool result ({m.name})" if m.role == "tool" and m.name else m.role
        lines.append(f"[{label}]\n{text}")
    return "\n\n".join(lines)


class Summarize:
    """Summarize the dropped history with ``model`` (its ``complete`` is called).

    Input larger than ``max_input_tokens`` (the summarizer's own budget) is summarized in
    chunks, each updating the summary so far. The model is asked to stay within the room the
    cut leaves under the target (at most ``max_summary_tokens``), and is not called when
    that room is below ``min_summary_tokens`` (a summary could not make the context smaller).
    """

    name = "summarize"

    def __init__(self, model: Model, *, keep_ratio: float = 0.5,
                 max_input_tokens: int = 60_000, min_summary_tokens: int = 256,
                 max_summary_tokens: int = 8_000, **options: Any) -> None:
        if not hasattr(model, "complete"):
            raise TypeError("Summarize needs a model with a complete(messages) method")
        if not 0 < keep_ratio <= 1:
            raise ValueError(f"keep_ratio must be in (0, 1], got {keep_ratio!r}")
        if max_input_tokens <= 0:
            raise ValueError(f"max_input_tokens must be positive, got {max_input_tokens!r}")
        self.model = model
        self.keep_ratio = keep_ratio
        self.max_input_tokens = max_input_tokens
        self.min_summary_tokens = min_summary_tokens
        self.max_summary_tokens = max(max_summary_tokens, min_summary_tokens)
        self.options = options

    def __call__(self, state: CompactionState, plan: Plan) -> Plan | None:
        found = summary_cut(state, plan, self.keep_ratio)
        if found is None:
            return None
        new, items = found
        # The summary only pays off if it is smaller than what it replaces: when there is no
        # room for one (the cut gains nothing over ``plan``), the model is not called at all.
        floor = state.bare_tokens(new)
        room = state.tokens(plan) - floor - 1
        if room < self.min_summary_tokens:
            return None
        limit = min(room, self.max_summary_tokens,
                    max(state.policy.target - floor, self.min_summary_tokens))
        summary = state.initial_plan.summary
        usage = Usage()
        # Each request holds the summary so far, up to ``limit`` tokens, and the prompt.
        reserve = (state.counter.count_text(SYSTEM_PROMPT)
                   + max(limit, state.counter.count_text(summary)) + 100)
        for chunk in self._chunks(state, items, max(self.max_input_tokens - reserve,
                                                    self.max_input_tokens // 4)):
            summary, used = self._summarize(summary, "\n\n".join(chunk), limit)
            usage = usage + used
        candidate = with_summary(new, summary, [eid for _, eid in items if eid], usage)
        state.tokens_with_summary(candidate)  # counted without rendering it again
        return candidate

    def _chunks(self, state: CompactionState, items: list[tuple[Message, str | None]],
                budget: int) -> list[list[str]]:
        """The transcript (as sent: long outputs shortened), one piece a message, in
        consecutive chunks that fit ``budget`` tokens."""
        chunks: list[list[str]] = [[]]
        size = 0
        for item in items:
            piece = render_transcript([item])
            n = state.counter.count_text(piece) + 2
            if chunks[-1] and size + n > budget:
                chunks.append([])
                size = 0
            chunks[-1].append(piece)
            size += n
        return chunks

    def _summarize(self, previous: str, transcript: str, limit: int) -> tuple[str, Usage]:
        request = (
            (f"<previous-summary>\n{previous}\n</previous-summary>\n\n" if previous else "")
            + f"<conversation>\n{transcript}\n</conversation>\n\n"
            + ("Update the previous summary with this conversation." if previous
               else "Summarize this conversation.")
            + f" Keep the summary under about {limit} tokens."
        )
        reply = self.model.complete(
            [Message.system(SYSTEM_PROMPT), Message.user(request)], **self.options
        )
        text = reply.text.strip()
        if not text:
            raise CompactionError("the summarizer returned an empty summary")
        return text, reply.usage or Usage()
