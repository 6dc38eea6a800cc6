"""The pi coding agent's session files (``~/.pi/agent/sessions/<cwd>/<time>_<id>.jsonl``).

pi writes one JSON object per line: a header ``{"type": "session", "version": 3, "id",
"timestamp", "cwd", "parentSession"?}``, then entries with ``id``, ``parentId`` and
``timestamp`` and camelCase fields (``thinkingLevel``, ``modelId``, ``firstKeptEntryId``,
``tokensBefore``, ``fromId``, ``fromHook``, ``customType``, ``targetId``). These are the same
eleven-ish entry types contextree has, so branches, labels, compactions, branch summaries and
model and thinking changes carry over one to one.

Versions: v1 files have no ids (each entry follows the one before; a compaction names its first
kept entry by ``firstKeptEntryIndex``, an index into the file's lines); v2 adds ids; v3 renames
the ``hookMessage`` message role to ``custom``. Older files are migrated the way pi does it.

pi has no leaf entry: when it opens a file, the current leaf is the last entry. Export writes
the current leaf last (its later siblings, if any, before it) so pi resumes where contextree
was. What pi cannot represent:

* contextree's compaction extras (``tokens_after``, ``retained_tail``, ``cleared``,
  ``pinned``, ``usage``) are written under one ``"contextree"`` key that pi ignores and import
  reads back. pi itself therefore shows full tool results, does not pin entries, and keeps only
  entries from ``firstKeptEntryId``.
* System messages become ``custom`` messages of type ``contextree.system`` (pi keeps the system
  prompt outside the session); they read back as system messages.
* pi places tool calls among the text and thinking blocks; contextree keeps them apart, so an
  exported assistant message lists its tool calls after its other content.
* pi's ``bashExecution``, ``branchSummary`` and ``compactionSummary`` messages are imported as
  the user message pi would send for them, with the original kept (``piMessage``) for export.

The package: ``reader`` (pi -> contextree), ``migrate`` (versions 1 and 2 -> 3, used by the
reader), ``writer`` (contextree -> pi) and ``schema`` (the names and defaults both agree on).
"""

from __future__ import annotations

from .reader import is_pi1_line, message_from_pi, read
from .schema import PI_ERAS, PI_VERSION
from .writer import entry_to_pi, message_to_pi, write

__all__ = ["PI_ERAS", "PI_VERSION", "entry_to_pi", "is_pi1_line", "message_from_pi",
           "message_to_pi", "read", "write"]
