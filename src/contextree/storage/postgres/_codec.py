"""Entries as rows and rows as entries: the stored line is the entry's JSON line, byte for
byte, so what is read back is exactly what was appended."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import msgspec

from ...entries import (
    LINE_DECODER,
    AnyEntry,
    LeafEntry,
    LineError,
    SessionHeader,
    decode_line,
    decoded_problem,
    encode_line,
)
from ...errors import InvalidEntry, InvalidHeader

__all__ = ["created_at", "decode_entry", "decode_header", "decode_many", "entry_row",
           "line_text"]


def line_text(line: SessionHeader | AnyEntry) -> str:
    """The JSON line of a header or entry, without the newline."""
    return encode_line(line)[:-1].decode()


def entry_row(session_id: str, entry: AnyEntry) -> tuple[str, str, str | None, str, str | None, str]:
    """The ``contextree_entries`` columns of an entry, for ``COPY``."""
    target = entry.target_id if isinstance(entry, LeafEntry) else None
    return (session_id, entry.id, entry.parent_id, entry.type, target, line_text(entry))


def created_at(header: SessionHeader) -> datetime:
    try:
        when = datetime.fromisoformat(header.created_at)
    except (TypeError, ValueError):
        return datetime.now(UTC)
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)




def decode_entry(line: str, location: str) -> AnyEntry:
    try:
        entry = decode_line(line)
    except LineError as e:
        raise InvalidEntry(f"a stored entry does not decode ({e})", path=location) from None
    if isinstance(entry, SessionHeader):
        raise InvalidEntry("a session header is stored as an entry", path=location)
    return entry


def decode_many(lines: list[str], location: str) -> list[AnyEntry]:
    """Decode lines in one msgspec call; lines of unknown types fall back one by one."""
    try:
        out: list[Any] = LINE_DECODER.decode_lines("\n".join(lines))
    except (msgspec.DecodeError, RecursionError):
        return [decode_entry(line, location) for line in lines]
    if len(out) != len(lines) or any(isinstance(e, SessionHeader) or decoded_problem(e)
                                     for e in out):
        return [decode_entry(line, location) for line in lines]
    return out


def decode_header(line: str, location: str) -> SessionHeader:
    try:
        header = decode_line(line)
    except LineError as e:
        raise InvalidHeader(f"the stored session header does not decode ({e})",
                            path=location) from None
    if not isinstance(header, SessionHeader):
        raise InvalidHeader("the stored session header is not a header", path=location)
    return header
