"""``contextree ls``: the table of a catalog's sessions, one bounded line per session."""

from __future__ import annotations

from pathlib import Path

from ..storage import SessionInfo
from .output import human_size, short_id
from .terminal import ELLIPSIS, fit, visible, width_of

NAME_WIDTH = 40  # columns of a name in the table (--json has it whole)
PATH_WIDTH = 70  # columns of a path in the table (the end is kept)


DIRECTORY_COLUMNS = ["path", "name", "id", "created", "last activity", "entries", "size"]
DATABASE_COLUMNS = ["id", "name", "created", "last activity", "entries"]


def rows(listings: list[SessionInfo], root: Path | None) -> list[list[str]]:
    """Table rows for ``ls``: for a directory ``root``, the path relative to it, name, id,
    times, entries, size (``DIRECTORY_COLUMNS``); elsewhere (``root`` None) the whole id
    first and no path or size (``DATABASE_COLUMNS``). Every cell is one line of bounded
    width (``--json`` has the values whole)."""
    out = []
    for s in listings:
        entries = str(s.entries) if s.entries_exact else f"≈{s.entries}"
        name = fit(visible(s.name if s.name is not None else ("" if s.name_exact else "?")),
                   NAME_WIDTH)
        if root is None:
            out.append([visible(s.id), name, when(s.created), when(s.last_activity), entries])
            continue
        try:
            shown = str(Path(s.target).relative_to(root))
        except ValueError:
            shown = s.target
        out.append([_keep_end(visible(shown), PATH_WIDTH), name, short_id(s.id),
                    when(s.created), when(s.last_activity), entries,
                    human_size(s.size) if s.size is not None else "-"])
    return out


def _keep_end(text: str, width: int) -> str:
    """``text`` in at most ``width`` columns, keeping its end (``…`` + the end of a path)."""
    if width_of(text) <= width:
        return text
    kept: list[str] = []
    used = 0
    for ch in reversed(text):
        used += width_of(ch)
        if used > width - 1:
            break
        kept.append(ch)
    return ELLIPSIS + "".join(reversed(kept))


def when(stamp: str) -> str:
    """A ``utc_stamp`` as ``YYYY-MM-DD HH:MM`` (UTC), for a table."""
    return visible(stamp[:16].replace("T", " ") if len(stamp) >= 16 else stamp)
