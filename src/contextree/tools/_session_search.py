"""``session_search``: a read-only tool an agent calls to find what was said in past sessions.

``session_search_tool(where)`` makes it for one catalog (a directory of sessions, a
``postgresql://`` URL, any ``Catalog``): the model gives words, and gets back the matching
entries with their session, entry id, role, time, branch and a snippet. It reads sessions and
never writes them (a directory's search index, a cache, is refreshed as ``search`` does).
"""

from __future__ import annotations

import os
from typing import Literal

from contextree.errors import InvalidArgument, SessionNotFound, ToolError
from contextree.storage import Catalog, SearchHit, search
from contextree.tools._decorator import build_tool
from contextree.tools._kinds import ToolKind
from contextree.tools._result import ToolResult
from contextree.tools._tool import Tool

__all__ = ["session_search_tool"]

MAX_RESULTS = 50

Role = Literal["user", "assistant", "tool", "system", "compaction", "branch_summary", "custom"]


def session_search_tool(where: str | os.PathLike[str] | Catalog) -> Tool:
    """The ``session_search`` tool over the sessions at ``where`` (read-only)."""

    def session_search(query: str, role: Role | None = None, since: str | None = None,
                       until: str | None = None, tool: str | None = None,
                       on_branch: bool = False, max_results: int = 10) -> ToolResult:
        """Search past sessions for entries whose text matches the query: words match whole words (word* matches their start; a sha prefix finds the sha), identifiers like test_parse_header match as themselves, "quoted words" match a phrase. Each hit gives session id, entry id, role, time, whether it is on the session's current branch, and a snippet.

        Args:
            query: The words to find.
            role: Only entries of this role.
            since: Only entries written at or after this ISO time (UTC).
            until: Only entries written at or before this ISO time (UTC).
            tool: Only entries that call or answer this tool.
            on_branch: Only entries on their session's current branch.
            max_results: At most this many hits (1 to 50).
        """
        if not 1 <= max_results <= MAX_RESULTS:
            raise ToolError(f"max_results must be between 1 and {MAX_RESULTS}, got "
                            f"{max_results}")
        try:
            hits = search(where, query, role=role, since=since, until=until, tool=tool,
                          on_branch=on_branch, limit=max_results)
        except (InvalidArgument, SessionNotFound) as e:
            raise ToolError(str(e)) from None
        if not hits:
            return ToolResult(f"No entries match {query!r}.", meta={"matches": 0})
        text = "\n".join(_line(h) for h in hits)
        return ToolResult(text, meta={"matches": len(hits)})

    return build_tool(session_search, name="session_search", kind=ToolKind.SEARCH)


def _line(hit: SearchHit) -> str:
    place = "on branch" if hit.on_branch else "off branch"
    if hit.compacted:
        place += ", compacted"
    if hit.archived:
        place += ", archived"
    who = hit.role + (f" ({hit.tool})" if hit.tool else "")
    return (f"session {hit.session_id} entry {hit.entry_id} {who} {hit.timestamp} "
            f"[{place}]: {hit.snippet}")
