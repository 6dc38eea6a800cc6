"""Provider message lists: OpenAI Chat Completions ``messages``, OpenAI Responses ``input``
items and Anthropic Messages ``messages`` (with ``system``), both ways.

The conversions are those the model adapters use (``contextree.models._wire_openai`` and
``wire_anthropic``; their notes list what each wire format cannot carry). Import makes a linear
chain of message entries; export writes the context the model sees at the current leaf.

Accepted input: a JSON document, either the list itself or the request body that holds it
(``{"messages": [...]}``, ``{"input": [...], "instructions"?}``, ``{"system"?, "messages":
[...]}``), or a ``.jsonl`` file with one list item per line. Exports are the request body
shapes: a list for OpenAI chat and Responses, ``{"system", "messages"}`` for Anthropic, with
the system prompt the session recorded as sent (its request entry) in front of the messages.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from .._messages import Message
from .._session import Session
from ..entries import AnyEntry
from ..models._wire_anthropic import from_anthropic, to_anthropic
from ..models._wire_openai import (
    from_openai_chat,
    from_openai_responses,
    to_openai_chat,
    to_openai_responses,
)
from ._base import (
    Ids,
    Imported,
    Json,
    Progress,
    dumps,
    file_time,
    header,
    imported_metadata,
    input_error,
    message_entry,
    read_json_document,
    read_json_lines,
)
from ._detect import list_evidence

Convert = Callable[[Any, list[Json], Path], list[Message]]


def _load(path: Path, key: str, progress: Progress | None) -> tuple[Any, list[Json]]:
    """``(the document, its list of items)``; items must be objects (errors name the item)."""
    if path.suffix == ".jsonl":
        pairs = list(read_json_lines(path, progress))
        doc: Any = None
        items = [obj for _, obj in pairs]
        where = [f"line {n}" for n, _ in pairs]
    else:
        doc = read_json_document(path)
        found = doc.get(key) if isinstance(doc, dict) else doc
        if not isinstance(found, list):
            if isinstance(doc, dict) and key not in doc:
                keys = ", ".join(f"`{k}`" for k in list(doc)[:5]) or "none"
                got = f"an object without a `{key}` key (its keys: {keys})"
            elif isinstance(doc, dict):
                got = f"an object whose `{key}` is {_json_type(found)}"
            else:
                got = _json_type(found)
            raise input_error(path, None, f"expected a JSON list of items or an object with a "
                              f"`{key}` list, got {got}")
        items = found
        where = [f"item {i}" for i in range(len(items))]
    for item, place in zip(items, where, strict=True):
        if not isinstance(item, dict):
            raise input_error(path, None, f"{place}: expected an object, got "
                              f"{type(item).__name__}")
    return doc, items


def _json_type(value: Any) -> str:
    """What a JSON value is, in JSON's words (``null``, ``a string``...)."""
    names = {type(None): "null", bool: "a boolean", int: "a number", float: "a number",
             str: "a string", list: "a list", dict: "an object"}
    return names.get(type(value), type(value).__name__)


def _chat(doc: Any, items: list[Json], path: Path) -> list[Message]:
    _require_roles(items, path)
    return from_openai_chat(items)


def _responses(doc: Any, items: list[Json], path: Path) -> list[Message]:
    instructions = doc.get("instructions") if isinstance(doc, dict) else None
    head = [Message.system(instructions)] if isinstance(instructions, str) and instructions else []
    return head + from_openai_responses(items)


def _anthropic(doc: Any, items: list[Json], path: Path) -> list[Message]:
    _require_roles(items, path)
    system = doc.get("system") if isinstance(doc, dict) else None
    return from_anthropic(system, items)


def _require_roles(items: list[Json], path: Path) -> None:
    for i, item in enumerate(items):
        if not isinstance(item.get("role"), str):
            raise input_error(path, None, f"item {i}: a message needs a string `role`")


def _refuse_other_format(fmt: str, doc: Any, items: list[Json], path: Path) -> None:
    """Refuse a list that shows signs of another provider's format and none of ``fmt``:
    read as ``fmt`` it would silently lose what only the other format has (tool calls and
    their results, a system prompt)."""
    evidence = list_evidence(doc, items)
    if fmt in evidence or not evidence:
        return
    other, why = next(iter(evidence.items()))
    raise input_error(path, None, f"this looks like {other}, not {fmt} ({why}); read as {fmt} "
                      f"it would lose content: import it as {other} (`contextree import "
                      f"{other} ...`, or `auto`)")


def _reader(fmt: str, key: str, convert: Convert) -> Callable[[Path, Progress | None], Imported]:
    def read(path: Path, progress: Progress | None = None) -> Imported:
        doc, items = _load(path, key, progress)
        _refuse_other_format(fmt, doc, items, path)
        try:
            messages = convert(doc, items, path)
        except (AttributeError, TypeError, ValueError, KeyError) as e:
            raise input_error(path, None, f"not a valid {fmt} list ({type(e).__name__}: "
                              f"{e})") from None
        stamp = file_time(path)
        ids = Ids()
        entries: list[AnyEntry] = []
        parent: str | None = None
        for msg in messages:
            eid = ids.new()
            entries.append(message_entry(eid, parent, stamp, msg))
            parent = eid
        hdr = header(None, stamp, cwd=None, metadata=imported_metadata(fmt, path))
        return Imported(hdr, entries)

    read.__doc__ = f"Read {fmt} messages as a linear chain."
    return read


read_openai_chat = _reader("openai-chat", "messages", _chat)
read_openai_responses = _reader("openai-responses", "input", _responses)
read_anthropic = _reader("anthropic", "messages", _anthropic)


def write_openai_chat(session: Session, at: str | None = None) -> bytes:
    """The context at the leaf as Chat Completions ``messages``, the recorded system prompt
    first (``SessionContext.request_messages``)."""
    return dumps(to_openai_chat(session.build_context(at).request_messages()))


def write_openai_responses(session: Session, at: str | None = None) -> bytes:
    """The context at the leaf as Responses API ``input`` items, the recorded system prompt
    first."""
    return dumps(to_openai_responses(session.build_context(at).request_messages()))


def write_anthropic(session: Session, at: str | None = None) -> bytes:
    """The context at the leaf as ``{"system", "messages"}`` for the Messages API, the
    recorded system prompt in ``system``."""
    system, messages = to_anthropic(session.build_context(at).request_messages())
    body: Json = {"system": system} if system is not None else {}
    body["messages"] = messages
    return dumps(body)
