"""The ids a framework hands an integration (a LangGraph thread, a pydantic-ai conversation)
name contextree sessions, so they are held to what a session id may be."""

from __future__ import annotations

from ..errors import InvalidArgument
from ..storage._base import check_session_id

__all__ = ["checked_id"]


def checked_id(value: str, what: str) -> str:
    """``value`` if a session can be named by it, else ``InvalidArgument`` that names
    ``what`` it is (``"LangGraph thread id"``) and says what to use instead; never a raw
    ``UnicodeEncodeError`` later, inside a write."""
    try:
        return check_session_id(value)
    except InvalidArgument as e:
        raise InvalidArgument(f"{what}: {e}") from None
