"""The pi coding agent's session files (``~/.pi/agent/sessions/<cwd>/<time>_<id>.jsonl``), of
pi 0.73 (npm ``@mariozechner/pi-coding-agent``) and pi 1.x (``@earendil-works/pi-coding-agent``).

pi writes one JSON object per line: a header ``{"type": "session", "version": 3, "id",
"timestamp", "cwd", "parentSession"?}``, then entries with ``id``, ``parentId`` and
``timestamp`` and camelCase fields (``thinkingLevel``, ``modelId``, ``firstKeptEntryId``,
``tokensBefore``, ``fromId``, ``fromHook``, ``customType``, ``targetId``). These are the same
eleven-ish entry types contextree has, so branches, labels, compactions, branch summaries and
model and thinking changes carry over one to one.

pi 1.x writes the same file version 3 with more in it: ``context_edit`` entries (read as
``ContextEditEntry``: from there on, on that branch, the target is left out of the context or
shows other content), ``usage`` entries (cache warming; kept, never sent), retain-none
compactions (``firstKeptEntryId`` is the compaction's own id), a compaction's ``systemMessage``
checkpoint and ``system`` messages (pi's prompt and tools; kept as pi wrote them, outside the
context). Export writes for pi 1.x by default (``pi="0.73"`` for the old package).

Versions: v1 files have no ids (each entry follows the one before; a compaction names its first
kept entry by ``firstKeptEntryIndex``, an index into the file's lines); v2 adds ids; v3 renames
the ``hookMessage`` message role to ``custom``. Older files are migrated the way pi does it.

pi has no leaf entry: when it opens a file, the current leaf is the last entry. Export writes
the current leaf last (its later siblings, if any, before it) so pi resumes where contextree
was. What pi cannot represent:

* contextree's compaction extras (``tokens_after``, ``retained_tail``, ``cleared``,
  ``pinned``, ``usage``) are written under one ``"contextree"`` key that pi ignores and import
  reads back. pi itself therefore does not pin entries and keeps only entries from
  ``firstKeptEntryId``; pi 0.73 shows full tool results, pi 1.x the ``cleared`` placeholders
  (they are also written as ``context_edit`` lines, which import folds back).
* System messages become ``custom`` messages of type ``contextree.system`` (pi keeps the system
  prompt outside the session); they read back as system messages.
* pi places tool calls among the text and thinking blocks; contextree keeps them apart, so an
  exported assistant message lists its tool calls after its other content.
* pi's ``bashExecution``, ``branchSummary`` and ``compactionSummary`` messages are imported as
  the user message pi would send for them, with the original kept (``piMessage``) for export.

The package: ``reader`` (pi -> contextree), ``migrate`` (versions 1 and 2 -> 3, used by the
reader), ``writer`` (contextree -> pi), ``schema`` (the names and defaults both agree on) and
``home`` (finding pi's sessions where pi keeps them).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .schema import PI_ERAS, PI_VERSION

if TYPE_CHECKING:  # imported on first use (below): the format table reads PI_ERAS alone
    from .reader import is_pi1_line, message_from_pi, read
    from .writer import entry_to_pi, message_to_pi, write

__all__ = ["PI_ERAS", "PI_VERSION", "entry_to_pi", "is_pi1_line", "message_from_pi",
           "message_to_pi", "read", "write"]

_LATER = {"is_pi1_line": ".reader", "message_from_pi": ".reader", "read": ".reader",
          "entry_to_pi": ".writer", "message_to_pi": ".writer", "write": ".writer"}


def __getattr__(name: str) -> Any:
    module = _LATER.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value
