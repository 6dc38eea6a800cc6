"""contextree under pydantic-ai (``pip install 'contextree[pydantic-ai]'``).

- ``ContextreeConversationStore``: pydantic-ai's ``ConversationStore`` on a directory of JSONL
  sessions, in memory, or in PostgreSQL. Same contract as ``InMemoryConversationStore``
  (revisions, ``ConversationConflict``, branch, fork, scope, list, delete), and every
  conversation is a contextree session you can inspect, branch and compact.
- ``ContextreeHistory``: a ``ProcessHistory`` capability that sends the model contextree's
  compacted, pairing-valid view of the conversation, while the run's history and the stored
  conversation keep every message.
"""

from __future__ import annotations

from ..._public import publish
from ...errors import missing_extra

try:
    import pydantic_ai.conversation_store  # noqa: F401  (2.68 or later)
    from pydantic_ai.capabilities import ProcessHistory  # noqa: F401
except ImportError as e:  # pragma: no cover - exercised in a subprocess by the tests
    raise missing_extra("pydantic-ai", "pydantic_ai") from e

from ._history import ContextreeHistory
from ._mapping import to_messages
from ._store import ContextreeConversationStore

__all__ = ["ContextreeConversationStore", "ContextreeHistory", "to_messages"]

publish(globals())
