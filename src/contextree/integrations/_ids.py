"""The ids a framework hands an integration (a LangGraph thread, a pydantic-ai conversation)
name contextree sessions, so they are held to what a session id may be, and found in a
catalog by the same rule everywhere."""

from __future__ import annotations

import os

from ..errors import InvalidArgument
from ..storage import Catalog, key_to_session_id, open_catalog, resolve
from ..storage._base import check_session_id

__all__ = ["catalog_in", "checked_id", "session_in"]


def checked_id(value: str, what: str) -> str:
    """``value`` if a session can be named by it, else ``InvalidArgument`` that names
    ``what`` it is (``"LangGraph thread id"``) and says what to use instead; never a raw
    ``UnicodeEncodeError`` later, inside a write."""
    try:
        return check_session_id(value)
    except InvalidArgument as e:
        raise InvalidArgument(f"{what}: {e}") from None


def session_in(place: str | os.PathLike[str], key: str, *, create: bool = True
               ) -> tuple[str, bool]:
    """Where the session of a framework's ``key`` (a thread or session id) is kept in
    ``place``, and whether ``place`` names that one session rather than a catalog.

    One session: a URL with ``#SESSION_ID``, an existing file, or a path that does not exist
    yet and ends in ``.jsonl`` (returned as it is). A catalog, which gives
    ``catalog.target(key_to_session_id(key))``: a URL without ``#SESSION_ID`` (any
    registered scheme), a directory, a path ending in a separator (a folder, whether or not
    it exists), and any other path that does not exist yet (the folder is made): a missing
    ``sessions`` is never made a single file that every key would share."""
    if isinstance(place, str) and place.startswith("~"):
        place = os.path.expanduser(place)  # as a shell would (no shell ever sees it)
    address = resolve(place)
    if address.session_id is not None:
        return os.fspath(place), True
    if address.is_file:
        path = os.fspath(place)
        folder = path.endswith(os.sep) or bool(os.altsep and path.endswith(os.altsep))
        if os.path.isdir(path):
            pass
        elif folder:
            if os.path.lexists(path.rstrip(os.sep + (os.altsep or ""))):
                raise InvalidArgument(f"{path!r} ends in a separator, so it names a folder "
                                      f"of sessions, but it is a file: leave the separator "
                                      f"off to use that file as one session")
        elif os.path.lexists(path) or path.lower().endswith(".jsonl"):
            return path, True
    return open_catalog(place, create=create).target(key_to_session_id(key)), False


def catalog_in(place: str | os.PathLike[str], instead: str) -> Catalog:
    """The catalog at ``place`` where a framework keeps one session per key (a thread): a
    missing folder is made; a file is refused (``instead`` says what takes one file), as
    every key's messages would be mixed in it."""
    if resolve(place).is_file and os.path.exists(place) and not os.path.isdir(place):
        raise InvalidArgument(f"{os.fspath(place)!r} is a file: pass a directory (made if "
                              f"missing) or a catalog URL, where each thread gets a session "
                              f"of its own; for one session file, pass it as {instead}")
    return open_catalog(place, create=True)
