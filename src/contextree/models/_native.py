"""Provider-native compaction: what a model adapter that can ask its provider to compact
returns, and the facts of the two wire formats.

``NativeCompaction`` is the provider's answer, kept as plain data: the opaque items the next
request to the same API sends back in place of what they summarize (Anthropic's
signed ``compaction`` block, asked for on demand or by the threshold edit; the output of
OpenAI's ``POST /responses/compact``: the user messages and one encrypted ``compaction``
item), the readable summary when the provider gives one
(Anthropic does, OpenAI's is encrypted), and what the call used. ``NativeCompactionModel`` is what
the ``ProviderCompaction`` rung asks of a model (``AnthropicMessages``, ``OpenAIResponses``).

The payload is stored in the compaction entry (``details["native"]``) and carried by the
summary message's marker, so the wire conversion of that very API sends the items
(``to_anthropic``, ``to_openai_responses``) while every other one sends the readable summary.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from contextree._messages import Message, Usage
from contextree.models._base import ToolSpec
from contextree.models._wire_common import Json

__all__ = [
    "ANTHROPIC_COMPACT_BETA",
    "ANTHROPIC_COMPACT_EDIT",
    "ANTHROPIC_MIN_TRIGGER",
    "ANTHROPIC_ON_DEMAND_BETA",
    "ANTHROPIC_SUMMARIZE",
    "MESSAGES_API",
    "RESPONSES_API",
    "NativeCompaction",
    "NativeCompactionModel",
    "native_items",
]

MESSAGES_API = "messages"
"""``NativeCompaction.api`` of the Anthropic Messages API."""
RESPONSES_API = "responses"
"""``NativeCompaction.api`` of the OpenAI Responses API."""

ANTHROPIC_COMPACT_BETA = "compact-2026-01-12"
"""The ``anthropic-beta`` header value threshold compaction needs, on the request that
compacts and on every request that sends its ``compaction`` block back."""
ANTHROPIC_COMPACT_EDIT = "compact_20260112"
"""The ``context_management.edits[].type`` of threshold compaction."""
ANTHROPIC_MIN_TRIGGER = 50_000
"""The lowest ``trigger`` (input tokens) the Messages API accepts for threshold
compaction."""
ANTHROPIC_ON_DEMAND_BETA = "compact-2026-09-04"
"""The ``anthropic-beta`` header value on-demand compaction needs, on the request that asks
for the summary and on every request that sends its signed block back."""
ANTHROPIC_SUMMARIZE = "summarize"
"""The ``compaction.type`` of an on-demand compaction request."""


@dataclass(frozen=True)
class NativeCompaction:
    """What a provider returned for one compaction of a conversation.

    ``items`` are sent back verbatim, first, by requests to the same ``api`` of the same
    ``provider``; ``summary`` is the provider's readable summary (``None`` when it gives
    none: the ladder's offline digest then writes the readable one); ``beta`` is the beta
    feature the requests that send the items back must name (Anthropic's
    ``anthropic-beta``), when there is one.
    """

    provider: str
    api: str
    model: str
    items: list[Json]
    summary: str | None = None
    usage: Usage = field(default_factory=Usage)
    beta: str | None = None

    def to_json(self) -> Json:
        """The payload as the compaction entry stores it (``details["native"]``)."""
        payload: Json = {"provider": self.provider, "api": self.api, "model": self.model,
                         "items": [dict(i) for i in self.items]}
        if self.beta:
            payload["beta"] = self.beta
        return payload


def native_items(native: Mapping[str, Any] | None, api: str) -> list[Json] | None:
    """The items of a stored payload (``NativeCompaction.to_json``) for ``api``, or ``None``
    when it is for another API or not a payload at all."""
    if not isinstance(native, Mapping) or native.get("api") != api:
        return None
    items = native.get("items")
    if not isinstance(items, list) or not items or not all(isinstance(i, dict) for i in items):
        return None
    return [dict(i) for i in items]


@runtime_checkable
class NativeCompactionModel(Protocol):
    """A model whose provider compacts a conversation itself.

    ``compact_native`` sends ``messages`` (system messages first, as in any request) with
    the ``tools`` the conversation was offered to be compacted and returns what the
    provider gave back; it raises a ``ContextreeError``
    (``ModelError`` when the call failed, ``CompactionError`` when the provider answered
    without compacting) so the ladder goes on to its next rung. ``min_native_tokens`` is the
    least the provider compacts (0: no minimum). A model may also have
    ``native_refusal(messages) -> str | None``: why its provider would refuse ``messages``,
    known before any request, so that the rung steps aside without a call.
    """

    provider: str
    min_native_tokens: int

    def compact_native(self, messages: Sequence[Message], *, tools: Sequence[ToolSpec] = (),
                       instructions: str | None = None) -> NativeCompaction:
        """What the provider returned for compacting ``messages`` (``tools``: those the
        conversation was offered; ``instructions``: for its summarizer)."""
        ...
