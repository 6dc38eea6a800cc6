"""``Summarize``: the rung that spends a model call, updating the previous summary."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import orjson

from ..errors import CompactionError
from ..messages import Message, Usage
from .digest import dropped_items
from .pipeline import CompactionState, Plan, with_summary
from .stages import choose_cut

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
        text = m.text
        if len(text) > cap:
            text = text[: cap // 2] + f"\n… [{len(text) - cap} chars omitted] …\n" + text[-cap // 2 :]
        if m.role == "assistant" and m.tool_calls:
            calls = "; ".join(f"{c.name}({orjson.dumps(c.arguments).decode()[:500]})"
                              for c in m.tool_calls)
            text = f"{text}\n[tool calls: {calls}]" if text else f"[tool calls: {calls}]"
        label = f"tool result ({m.name})" if m.role == "tool" and m.name else m.role
        lines.append(f"[{label}]\n{text}")
    return "\n\n".join(lines)


class Summarize:
    """Summarize the dropped history with ``model`` (any object with ``complete(messages)``).

    Input larger than ``max_input_tokens`` (the summarizer's own budget) is summarized in
    chunks, each updating the summary so far. The model is asked to stay within the room the
    cut leaves under the target, and is not called when that room is below
    ``min_summary_tokens`` (a summary could not make the context smaller).
    """

    name = "summarize"

    def __init__(self, model: Any, *, keep_ratio: float = 0.5,
                 max_input_tokens: int = 60_000, min_summary_tokens: int = 256,
                 **options: Any) -> None:
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
        self.options = options

    def __call__(self, state: CompactionState, plan: Plan) -> Plan | None:
        cut = choose_cut(state, plan, int(state.policy.target * self.keep_ratio))
        first_kept = max(cut.first_kept, plan.first_kept) if cut else plan.first_kept
        pins = tuple(dict.fromkeys([*plan.pinned, *(cut.pins if cut else ())]))
        items = dropped_items(state, first_kept, pins)
        if not items:
            return None
        new = replace(plan, first_kept=first_kept, pinned=pins)
        # The summary only pays off if it is smaller than what it replaces: when there is no
        # room for one (the cut gains nothing over ``plan``), the model is not called at all.
        floor = state.tokens(replace(new, summary=""))
        room = state.tokens(plan) - floor - 1
        if room < self.min_summary_tokens:
            return None
        limit = min(room, max(state.policy.target - floor, self.min_summary_tokens))
        summary = state.initial_plan.summary
        usage = Usage()
        for chunk in self._chunks(state, items):
            summary, used = self._summarize(summary, chunk, limit)
            usage = usage + used
        return with_summary(new, summary, [eid for _, eid in items if eid], usage)

    def _chunks(self, state: CompactionState,
                items: list[tuple[Message, str | None]]) -> list[list[tuple[Message, str | None]]]:
        chunks: list[list[tuple[Message, str | None]]] = [[]]
        size = 0
        for item in items:
            n = min(state.count(item[0]), self.max_input_tokens)
            if chunks[-1] and size + n > self.max_input_tokens:
                chunks.append([])
                size = 0
            chunks[-1].append(item)
            size += n
        return chunks

    def _summarize(self, previous: str, chunk: list[tuple[Message, str | None]],
                   limit: int) -> tuple[str, Usage]:
        request = (
            (f"<previous-summary>\n{previous}\n</previous-summary>\n\n" if previous else "")
            + f"<conversation>\n{render_transcript(chunk)}\n</conversation>\n\n"
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
