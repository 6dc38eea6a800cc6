"""Adapters that put contextree under another agent framework, each behind its own extra.

- ``contextree.integrations.pydantic_ai``: a ``ConversationStore`` for pydantic-ai on any
  contextree storage, and a history capability that sends the model contextree's compacted
  view (``contextree[pydantic-ai]``).
- ``contextree.integrations.openai_agents``: a ``Session`` for the OpenAI Agents SDK
  (``contextree[openai-agents]``).
- ``contextree.integrations.langchain``: an ``AgentMiddleware`` for LangChain's
  ``create_agent`` (``contextree[langchain]``).

Importing a module whose framework is not installed raises an ``ImportError`` that names
the extra to install. This package imports none of them.
"""

__all__: list[str] = []  # each integration is imported by its own path, with its extra
