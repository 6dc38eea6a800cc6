"""Bringing older pi session files to version 3, the way pi itself migrates them.

v1 files have no ids (each entry follows the one before; a compaction names its first kept
entry by ``firstKeptEntryIndex``, an index into the file's lines); v2 adds ids; v3 renames the
``hookMessage`` message role to ``custom``. Migration works on the parsed entry lines, in place,
one at a time and in file order, so that a big file streams through it.
"""

from __future__ import annotations

from .._base import Ids, Json

__all__ = ["Migration"]


class Migration:
    """Migrates the entry lines of a file of ``version`` (``lines`` of them, header
    excluded), called on each in file order."""

    def __init__(self, version: int, lines: int) -> None:
        self.version = version
        self.lines = lines
        self.ids = Ids()
        self.prev: str | None = None
        self.assigned: list[str] = []  # v1: the id given to each line so far

    def __call__(self, obj: Json) -> None:
        if self.version < 2:
            self._v1_to_v2(obj)
        if self.version < 3:
            _v2_to_v3(obj)

    def _v1_to_v2(self, obj: Json) -> None:
        """Give a v1 entry an id, the child of the one before (pi's own v1 -> v2 migration).

        A compaction's ``firstKeptEntryIndex`` counts the file's lines from the header
        (index 0).
        """
        obj["id"] = self.ids.new()
        obj["parentId"] = self.prev
        self.prev = obj["id"]
        self.assigned.append(self.prev)
        index = obj.pop("firstKeptEntryIndex", None)
        if obj["type"] == "compaction" and isinstance(index, int) and 1 <= index <= self.lines:
            obj["firstKeptEntryId"] = (self.assigned[index - 1]
                                       if index - 1 < len(self.assigned) else None)


def _v2_to_v3(obj: Json) -> None:
    """v2 -> v3: the ``hookMessage`` message role is now ``custom``."""
    message = obj.get("message")
    if obj["type"] == "message" and isinstance(message, dict) \
            and message.get("role") == "hookMessage":
        message["role"] = "custom"
