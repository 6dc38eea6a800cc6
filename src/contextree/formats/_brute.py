"""Brute's ``SessionLog`` files: one message per line, a flat conversation.

Each line is a message's ``to_h``: ``{"role", "content", "tool_calls": [{"id", "name",
"arguments"}], "tool_call_id"}`` (``tool_calls`` and ``tool_call_id`` only when set). Import
makes a linear chain of message entries, one per line; fields contextree does not know are
kept on the message.

Export writes what Brute would reload into ``env[:messages]``: the messages the model sees at
the current leaf (``Session.build_context``), without system messages, since Brute's
``SystemPrompt`` middleware adds the system prompt on every turn. Compaction and branch
summaries (system messages in contextree) are kept, as user messages, so the reloaded history
still says what came before. Content is written as text: thinking and images are dropped,
and only the four fields above are written, as Brute's ``Message.new`` accepts no others.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec

from .._messages import Message
from .._session import Session
from ..entries import AnyEntry
from ..markers import SUMMARIES
from ..models._wire_common import arguments_from_json
from ..storage._encoded import EncodedEntry, encode_entry
from ._base import (
    Ids,
    Imported,
    Json,
    Progress,
    dump_lines,
    file_time,
    header,
    imported_metadata,
    input_error,
    message_entry,
    parse_line,
    read_json_spans,
)


def read(path: Path, progress: Progress | None = None) -> Imported:
    """Read a Brute ``SessionLog`` file as a linear chain of messages.

    The entries are streamed (``Imported.stream``): each line is read, made an entry and
    encoded for its session line as the file is read, so memory does not grow with the
    file. Every entry's parent is the one before it, so ``used_ids`` may stay empty: no
    entry waits for its parent, and no leaf move is made (the last line is the leaf)."""
    stamp = file_time(path)
    hdr = header(None, stamp, cwd=None, metadata=imported_metadata("brute", path))
    return Imported(hdr, stream=lambda: _entries(path, stamp, progress))


class _Plain(msgspec.Struct, forbid_unknown_fields=True):
    """A line of the common shape: a text message with no tool calls and no field
    contextree does not know. Decoded into this at once (no dict, no conversion); a line of
    any other shape is parsed whole and converted (``message_from_brute``)."""

    role: str
    content: str | None = None
    tool_call_id: str | None = None


_PLAIN = msgspec.json.Decoder(_Plain)


def _line(raw: bytes, path: Path, n: int) -> _Plain | Any:
    """Line ``n``: a ``_Plain`` if it has that shape, else its JSON value."""
    try:
        return _PLAIN.decode(raw)
    except msgspec.DecodeError:  # another shape, or not JSON: what parse_line says
        return parse_line(raw, path, n)


def _entries(path: Path, stamp: str,
             progress: Progress | None) -> Iterator[AnyEntry | EncodedEntry]:
    ids = Ids()
    parent: str | None = None
    for n, _, obj in read_json_spans(path, progress, parse=_line):
        if type(obj) is _Plain and obj.role:
            msg = Message(role=obj.role, content=obj.content, tool_call_id=obj.tool_call_id)
        else:
            msg = message_from_brute(obj, path, n)
        eid = ids.new()
        entry = message_entry(eid, parent, stamp, msg)
        # Encoded here, so the storage writes the line as it is and keeps no decoded copy;
        # one that breaks a line's limits goes as it is, for ``append`` to say why.
        yield encode_entry(entry) or entry
        parent = eid


def message_from_brute(obj: object, path: Path, n: int) -> Message:
    """One line of a Brute log as a ``Message``; malformed lines name the file and line."""
    if not isinstance(obj, dict):
        raise input_error(path, n, f"expected a message object, got {type(obj).__name__}")
    role = obj.get("role")
    if not isinstance(role, str) or not role:
        raise input_error(path, n, "the message has no string `role`")
    data = dict(obj)
    calls = data.get("tool_calls")
    if calls is not None:
        if not isinstance(calls, list):
            raise input_error(path, n, "`tool_calls` must be a list")
        data["tool_calls"] = [_call(c, path, n) for c in calls] or None
    data.setdefault("content", None)
    try:
        return Message.from_dict(data)
    except msgspec.ValidationError as e:
        raise input_error(path, n, f"not a Brute message ({e})") from None


def _call(c: Any, path: Path, n: int) -> Json:
    if not isinstance(c, dict) or not isinstance(c.get("name"), str):
        raise input_error(path, n, "each tool call needs an object with a string `name`")
    call = dict(c)
    call["id"] = str(call.get("id") or "")
    call["arguments"] = arguments_from_json(call.get("arguments"))
    return call


def write(session: Session, at: str | None = None) -> bytes:
    """The context at the leaf (or ``at``) as a Brute ``SessionLog`` (see the module notes)."""
    lines = [message_to_brute(m) for m in session.build_context(at).messages
             if m.role != "system" or m.kind in SUMMARIES]
    return dump_lines(lines)


def message_to_brute(m: Message) -> Json:
    """A message as Brute's ``Message#to_h`` (role, content, tool_calls, tool_call_id)."""
    role = "user" if m.role == "system" else m.role
    content = m.content if isinstance(m.content, str) or m.content is None else m.text
    out: Json = {"role": role, "content": content}
    if m.tool_calls:
        out["tool_calls"] = [{"id": c.id, "name": c.name, "arguments": c.arguments}
                             for c in m.tool_calls]
    if m.tool_call_id is not None:
        out["tool_call_id"] = m.tool_call_id
    return out
