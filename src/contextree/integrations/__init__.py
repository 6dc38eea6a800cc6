"""Adapters that put contextree under another agent framework, each behind its own extra.

- ``contextree.integrations.openai_agents``: a ``Session`` for the OpenAI Agents SDK
  (``contextree[openai-agents]``).
- ``contextree.integrations.langchain``: an ``AgentMiddleware`` for LangChain's
  ``create_agent`` (``contextree[langchain]``).

Importing a module whose framework is not installed raises an ``ImportError`` that names
the extra to install. This package imports none of them.
"""
