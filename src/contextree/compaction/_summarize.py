"""``Summarize``: the rung that spends a model call, updating the previous summary.

It is also the ladder's summarizer: every stage that drops messages folds them with it
when the ladder has one (see ``contextree.compaction._fold``). Its reply is checked before
it is accepted; the offline digest stands in otherwise.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson

from .._messages import Message, Usage
from .._text import shorten
from ..entries import CallRecord
from ..errors import CompactionError
from ..models._base import Model
from ._evidence import CallIndex
from ._fold import fold
from ._state import CompactionState, Plan

__all__ = ["SYSTEM_PROMPT", "Summarize", "render_transcript"]

SYSTEM_PROMPT = """\
You compact the history of an AI agent's conversation so the agent can continue without it.
Write a summary in Markdown with exactly these sections:
## Objective — what the user wants overall.
## User requirements and constraints — the user's instructions, rules and limits, verbatim
where possible; when the user corrected something, keep the correction in place of what it
corrects.
## Decisions — choices made and why.
## Work done — what was read, changed, run, and the outcome.
## Identifiers — copied verbatim: file paths, ids, shas, ports, names, commands, URLs, error
messages.
## Outstanding work — what remains, and the next step.
Be concise and factual; never invent anything. If a previous summary is given, update it with
the new messages: keep what still holds, correct what changed, add what is new."""


def render_transcript(items: Sequence[tuple[Message, str | None]], *, cap: int = 4000) -> str:
    """The messages as plain text for the summarizer (long tool output shortened). A tool
    result is labelled with the call it answers: the nearest preceding one with its id."""
    lines = []
    index = CallIndex()
    for m, _ in items:
        call = index.see(m)
        text = shorten(m.text, cap, keep="middle", counted=True)
        if m.role == "assistant" and m.tool_calls:
            calls = "; ".join(f"{c.name}({shorten(orjson.dumps(c.arguments).decode(), 500)})"
                              for c in m.tool_calls)
            text = f"{text}\n[tool calls: {calls}]" if text else f"[tool calls: {calls}]"
        if m.role == "tool":
            if call is not None:
                args = shorten(orjson.dumps(call.arguments).decode(), 200)
                label = f"tool result of {call.name}({args})"
            else:
                label = f"tool result ({m.name})" if m.name else "tool result"
        else:
            label = m.role
        lines.append(f"[{label}]\n{text}")
    return "\n\n".join(lines)


class Summarize:
    """Summarize the dropped history with ``model`` (its ``complete`` is called).

    As a rung, it folds the oldest steps (even of the current turn) so that the kept
    messages take at most ``keep_ratio`` of the target. Input larger than
    ``max_input_tokens`` (the summarizer's own budget) is summarized in chunks, each
    updating the summary so far. The model is asked to stay within the room the cut leaves
    under the target (at most ``max_summary_tokens``), and is not called when that room is
    below ``min_summary_tokens``. Its reply must be non-empty, smaller than what it
    replaces and copy the pinned identifiers; otherwise the digest is used (the stage
    report says why).
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
        return fold(state, plan, steps=True, keep_ratio=self.keep_ratio, summarizer=self,
                    force_model=True)

    def summarize(self, state: CompactionState, items: Sequence[tuple[Message, str | None]],
                  previous: str, limit: int, pinned: Sequence[str]) -> tuple[str, Usage]:
        """The model's summary of ``items`` updating ``previous``, asked to stay within
        ``limit`` tokens and to copy ``pinned`` verbatim; the usage of its calls."""
        summary = previous
        usage = Usage()
        # Each request holds the summary so far, up to ``limit`` tokens, and the prompt.
        reserve = (state.counter.count_text(SYSTEM_PROMPT)
                   + max(limit, state.counter.count_text(summary))
                   + state.counter.count_text(" ".join(pinned)) + 100)
        for chunk in self._chunks(state, items, max(self.max_input_tokens - reserve,
                                                    self.max_input_tokens // 4)):
            summary, used = self._summarize(summary, "\n\n".join(chunk), limit, pinned,
                                            state.calls)
            usage = usage + used
        return summary, usage

    def _chunks(self, state: CompactionState, items: Sequence[tuple[Message, str | None]],
                budget: int) -> list[list[str]]:
        """The transcript (as sent: long outputs shortened), one piece a message, in
        consecutive chunks that fit ``budget`` tokens. A tool result stays in the chunk of
        the call it answers."""
        chunks: list[list[str]] = [[]]
        size = 0
        step: list[tuple[Message, str | None]] = []

        def flush() -> None:
            nonlocal size
            if not step:
                return
            piece = render_transcript(step)
            n = state.counter.count_text(piece) + 2
            if chunks[-1] and size + n > budget:
                chunks.append([])
                size = 0
            chunks[-1].append(piece)
            size += n
            step.clear()

        for item in items:
            if item[0].role != "tool":
                flush()
            step.append(item)
        flush()
        return chunks

    def _summarize(self, previous: str, transcript: str, limit: int,
                   pinned: Sequence[str], calls: list[CallRecord]) -> tuple[str, Usage]:
        """One summarizer call; it is recorded in ``calls`` (every call is counted in the
        statistics, whatever becomes of its reply)."""
        request = (
            (f"<previous-summary>\n{previous}\n</previous-summary>\n\n" if previous else "")
            + f"<conversation>\n{transcript}\n</conversation>\n\n"
            + ("Update the previous summary with this conversation." if previous
               else "Summarize this conversation.")
            + f" Keep the summary under about {limit} tokens."
            + (" Copy these identifiers verbatim into the Identifiers section: "
               + ", ".join(pinned) + "." if pinned else "")
        )
        reply = self.model.complete(
            [Message.system(SYSTEM_PROMPT), Message.user(request)], **self.options
        )
        text = reply.text.strip()
        usage = reply.usage or Usage()
        calls.append(CallRecord(provider=reply.provider or getattr(self.model, "provider", None),
                                model=reply.model or getattr(self.model, "name", None),
                                usage=usage, outcome="summary" if text
                                else "summarizer_failed"))
        if not text:
            raise CompactionError("the summarizer returned an empty summary")
        return text, usage
