"""Tool-call ids made unique within one request.

Some providers (llama.cpp, Kimi, some Grok endpoints) reuse tool-call ids across turns
(``call_0`` in every reply). The session keeps them as they came; a request that repeats an
id is ambiguous, and Anthropic rejects duplicate ``tool_use`` ids outright. Before a
conversion to a provider's wire format, each reused id is renamed (``call_0_2``...) on the
later call and on the results that answer it: the results of the *nearest preceding*
assistant message that has the id.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable

from contextree._messages import Message

__all__ = ["unique_call_ids"]


def unique_call_ids(messages: Iterable[Message]) -> list[Message]:
    """``messages`` with every tool-call id unique (renamed copies where one was reused;
    the messages themselves are not changed)."""
    out: list[Message] = []
    used: set[str] = set()
    answers: dict[str, deque[str]] = {}  # id as sent by the model -> ids as sent here
    for m in messages:
        if m.role == "assistant" and m.tool_calls:
            answers = {}
            calls = []
            for call in m.tool_calls:
                new = call.id
                if new in used:
                    k = 2
                    while f"{call.id}_{k}" in used:
                        k += 1
                    new = f"{call.id}_{k}"
                used.add(new)
                answers.setdefault(call.id, deque()).append(new)
                calls.append(call if new == call.id else call.replace(id=new))
            changed = any(a is not b for a, b in zip(calls, m.tool_calls, strict=True))
            out.append(m.replace(tool_calls=calls) if changed else m)
        elif m.role == "tool" and m.tool_call_id in answers:
            ids = answers[m.tool_call_id]
            new = ids.popleft() if len(ids) > 1 else ids[0]  # duplicates answer in order
            out.append(m if new == m.tool_call_id else m.replace(tool_call_id=new))
        else:
            if m.role == "assistant":
                answers = {}
            out.append(m)
    return out
