"""Bringing older pi session files to version 3, the way pi itself migrates them.

v1 files have no ids (each entry follows the one before; a compaction names its first kept
entry by ``firstKeptEntryIndex``, an index into the file's lines); v2 adds ids; v3 renames the
``hookMessage`` message role to ``custom``. Migration works on the parsed entry lines, in place.
"""

from __future__ import annotations

from .._base import Ids, Json

__all__ = ["migrate"]


def migrate(body: list[tuple[int, Json]], version: int) -> None:
    """Migrate the entry lines (``(line number, object)``, header excluded) of a file of
    ``version`` to the current version."""
    if version < 2:
        _v1_to_v2(body)
    if version < 3:
        _v2_to_v3(body)


def _v1_to_v2(body: list[tuple[int, Json]]) -> None:
    """Give v1 entries ids, each the child of the one before (pi's own v1 -> v2 migration).

    A compaction's ``firstKeptEntryIndex`` counts the file's lines from the header (index 0).
    """
    ids = Ids()
    prev: str | None = None
    assigned: list[str] = []
    for _, obj in body:
        obj["id"] = ids.new()
        obj["parentId"] = prev
        prev = obj["id"]
        assigned.append(prev)
        index = obj.pop("firstKeptEntryIndex", None)
        if obj["type"] == "compaction" and isinstance(index, int) and 1 <= index <= len(body):
            obj["firstKeptEntryId"] = assigned[index - 1] if index - 1 < len(assigned) else None


def _v2_to_v3(body: list[tuple[int, Json]]) -> None:
    """v2 -> v3: the ``hookMessage`` message role is now ``custom``."""
    for _, obj in body:
        message = obj.get("message")
        if obj["type"] == "message" and isinstance(message, dict) \
                and message.get("role") == "hookMessage":
            message["role"] = "custom"

