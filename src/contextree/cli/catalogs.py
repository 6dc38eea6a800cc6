"""Reaching a catalog (the sessions of a directory, a database...) from what the user typed."""

from __future__ import annotations

from pathlib import Path

from ..errors import InvalidArgument, SessionNotFound
from ..storage import Catalog, open_catalog
from .output import UsageProblem
from .places import address_of, require_directory


def open_catalog_of(where: str) -> tuple[Catalog, bool]:
    """The catalog ``where`` names, and whether it is a directory. A session file, a FIFO,
    a URL naming one session, or an unknown scheme is a usage error, said in CLI words."""
    address = address_of(where)
    if address.is_file:
        directory = Path(address.where)
        if directory.is_file():
            raise UsageProblem(f"{directory}: this is a session file, not a directory; this "
                               f"command takes the directory that holds sessions "
                               f"(`contextree stats {directory}` describes one session)")
        require_directory(directory, "give the directory that holds the sessions")
        if not directory.is_dir():
            raise SessionNotFound("no such directory", path=str(directory))
    try:
        return open_catalog(where), address.is_file
    except InvalidArgument as e:
        raise UsageProblem(str(e)) from None
