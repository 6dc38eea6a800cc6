"""Model adapters: one ``Model`` interface over OpenAI-compatible and Anthropic APIs.

``OpenAIChat``, ``OpenAIResponses`` and ``AnthropicMessages`` need the ``openai`` / ``anthropic`` extras, imported
only when constructed. Each can ``stream(...)`` a reply (a ``ReplyStream`` of ``TextDelta``,
``ThinkingDelta`` and ``ToolCallReady``, whose ``message`` is then what ``complete`` would
have returned); ``stream_reply(model, ...)`` streams any model, completing and replaying one
that cannot stream. Replies carry their cost in ``usage.cost``: the provider's own figure, or
the ``genai-prices`` table's (``cost_of(message)`` is ``None`` when neither knows it). ``ScriptedModel`` replays prepared replies for tests. All of them
implement the ``Model`` protocol (they subclass it, so mypy checks that they do). The pure wire
conversions are in ``contextree.models._wire_openai`` and ``contextree.models._wire_anthropic``,
which share ``contextree.models._wire_common`` and never import each other.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from contextree._public import publish

if TYPE_CHECKING:  # imported on first use (PEP 562), from the modules _LAZY names
    from contextree._pricing import cost_of, table_cost
    from contextree.models._anthropic import AnthropicMessages
    from contextree.models._base import Model, ToolSpec
    from contextree.models._native import NativeCompaction, NativeCompactionModel
    from contextree.models._openai_chat import OpenAIChat
    from contextree.models._openai_responses import OpenAIResponses
    from contextree.models._scripted import ScriptedModel
    from contextree.models._stream import (
        AsyncReplyStream,
        Delta,
        ReplyStream,
        StreamingModel,
        TextDelta,
        ThinkingDelta,
        ToolCallReady,
        astream_reply,
        stream_reply,
    )
    from contextree.models._wire_anthropic import from_anthropic, to_anthropic
    from contextree.models._wire_openai import (
        from_openai_chat,
        from_openai_responses,
        to_openai_chat,
        to_openai_responses,
    )

__all__ = [
    "AnthropicMessages",
    "AsyncReplyStream",
    "Delta",
    "Model",
    "NativeCompaction",
    "NativeCompactionModel",
    "OpenAIChat",
    "OpenAIResponses",
    "ReplyStream",
    "ScriptedModel",
    "StreamingModel",
    "TextDelta",
    "ThinkingDelta",
    "ToolCallReady",
    "ToolSpec",
    "astream_reply",
    "cost_of",
    "from_anthropic",
    "from_openai_chat",
    "from_openai_responses",
    "stream_reply",
    "table_cost",
    "to_anthropic",
    "to_openai_chat",
    "to_openai_responses",
]

_LAZY = {
    "contextree._pricing": ("cost_of", "table_cost"),
    "._anthropic": ("AnthropicMessages",),
    "._base": ("Model", "ToolSpec"),
    "._native": ("NativeCompaction", "NativeCompactionModel"),
    "._openai_chat": ("OpenAIChat",),
    "._openai_responses": ("OpenAIResponses",),
    "._scripted": ("ScriptedModel",),
    "._stream": ("AsyncReplyStream", "Delta", "ReplyStream", "StreamingModel", "TextDelta",
                 "ThinkingDelta", "ToolCallReady", "astream_reply", "stream_reply"),
    "._wire_anthropic": ("from_anthropic", "to_anthropic"),
    "._wire_openai": ("from_openai_chat", "from_openai_responses", "to_openai_chat",
                      "to_openai_responses"),
}

if not TYPE_CHECKING:  # type checkers see the imports above, not a catch-all __getattr__
    __getattr__, __dir__ = publish(globals(), _LAZY)
