"""Model adapters: one ``Model`` interface over OpenAI-compatible and Anthropic APIs.

``OpenAIChat`` and ``AnthropicMessages`` need the ``openai`` / ``anthropic`` extras, imported
only when constructed. ``ScriptedModel`` replays prepared replies for tests. All of them
implement the ``Model`` protocol (they subclass it, so mypy checks that they do). The pure wire
conversions are in ``contextree.models._wire_openai`` and ``contextree.models._wire_anthropic``,
which share ``contextree.models._wire_common`` and never import each other.
"""

from contextree.models._anthropic import AnthropicMessages
from contextree.models._base import Model, ToolSpec
from contextree.models._openai_chat import OpenAIChat
from contextree.models._scripted import ScriptedModel
from contextree.models._wire_anthropic import from_anthropic, to_anthropic
from contextree.models._wire_openai import (
    from_openai_chat,
    from_openai_responses,
    to_openai_chat,
    to_openai_responses,
)

__all__ = [
    "AnthropicMessages",
    "Model",
    "OpenAIChat",
    "ScriptedModel",
    "ToolSpec",
    "from_anthropic",
    "from_openai_chat",
    "from_openai_responses",
    "to_anthropic",
    "to_openai_chat",
    "to_openai_responses",
]
