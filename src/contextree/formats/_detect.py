"""Telling formats apart from the first lines of a file (``contextree import auto``).

The built-in formats are told apart here, first; then each registered format with a
``detect`` hook is asked, in the order registered.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from .._files import open_regular_readonly
from .._limits import parse_json
from ..errors import SessionNotFound, UnknownFormat
from ._base import read_json_document, split_selector
from ._registry import get_format, list_formats

_HEAD_BYTES = 256 * 1024
_CODEX_TYPES = {"session_meta", "response_item", "turn_context", "event_msg", "compacted"}
_CLAUDE_TYPES = {"summary", "file-history-snapshot", "queue-operation", "custom-title"}
_RESPONSES_TYPES = {"function_call", "function_call_output", "reasoning", "custom_tool_call"}
_ANTHROPIC_BLOCKS = {"tool_use", "tool_result", "thinking", "redacted_thinking"}


def detect_format(path: Path) -> str:
    """The name of the registered format ``path`` is in; ``UnknownFormat`` if it cannot
    tell."""
    try:
        with open(open_regular_readonly(split_selector(path)[0]), "rb") as f:
            head = f.read(_HEAD_BYTES)
    except FileNotFoundError:
        raise SessionNotFound("no such file", path=str(path)) from None
    except OSError as e:
        raise UnknownFormat(f"{path}: cannot read it ({e.strerror}); name a regular "
                                 "file") from None
    raw_lines = [raw for raw in head.splitlines()[:50] if raw.strip()]
    first = _parse(raw_lines[0]) if raw_lines else None
    name = None
    if isinstance(first, dict):  # JSON Lines (or a one-line document)
        name = _from_lines([_parse(raw) for raw in raw_lines])
    if name is None and head.lstrip()[:1] in (b"[", b"{"):
        name = _from_document(read_json_document(path))
    if name is None:
        name = claimed_by_other(path, "")
    if name is None:
        names = ", ".join(f.name for f in list_formats() if f.can_import)
        raise UnknownFormat(f"{path}: cannot tell which format this is; name it instead of "
                            f"auto (one of: {names})")
    return get_format(name).name


def detected_other(path: Path, fmt: str) -> str | None:
    """The format ``detect_format`` finds ``path`` to be when that is not ``fmt`` (``None``
    when it is ``fmt`` or nothing is found): for a reader's "it looks like X" error."""
    try:
        other: str | None = detect_format(path)
    except Exception:  # the file cannot be told: say nothing more than the reader does
        return None
    return other if other != fmt else None


_SIGNED = ("pi", "gemini-cli", "copilot", "codex", "claude-code")
"""The JSON Lines formats ``detect_format`` knows by their own records, not by elimination."""


def signed_by_other(path: Path, fmt: str) -> str | None:
    """Another format that ``path`` carries the signature of (its records' own types and
    keys, or a ``detect`` hook's), or ``None``: an import under the explicit ``fmt`` is
    refused then, naming the right one."""
    try:
        found: str | None = detect_format(path)
    except Exception:  # not something detection can tell: only the hooks may claim it
        found = None
    if found in _SIGNED and found != fmt:
        return found
    return claimed_by_other(path, fmt)


def claimed_by_other(path: Path, fmt: str) -> str | None:
    """The name of another registered format whose ``detect`` hook claims ``path`` (these
    hooks recognize a format by its own signature, not by elimination), or ``None``: an
    import under an explicit ``fmt`` is refused then, naming the right one."""
    for other in list_formats():
        if other.detect is None or other.name == fmt:
            continue
        try:
            if other.detect(path):
                return other.name
        except Exception:  # a hook that cannot read the file does not claim it
            continue
    return None


def _parse(raw: bytes) -> Any:
    try:
        return parse_json(raw) if raw.strip() else None
    except orjson.JSONDecodeError:
        return None


def _from_lines(objs: list[Any]) -> str | None:
    dicts = [o for o in objs if isinstance(o, dict)]
    first = dicts[0]
    if first.get("type") == "session":
        if "created_at" in first:
            raise UnknownFormat("this is already a contextree session file; open it "
                                     "directly instead of importing it")
        return "pi"
    if isinstance(first.get("projectHash"), str) and isinstance(first.get("sessionId"), str):
        return "gemini-cli"  # before Claude Code, whose lines carry a `sessionId` too
    data = first.get("data")
    if first.get("type") == "session.start" and isinstance(data, dict) \
            and data.get("producer") == "copilot-agent":
        return "copilot"
    for obj in dicts:
        kind = obj.get("type")
        if kind in _CODEX_TYPES and "payload" in obj:
            return "codex"
        if kind in _CLAUDE_TYPES or "parentUuid" in obj or "sessionId" in obj:
            return "claude-code"
    if len(dicts) == 1 and ("messages" in first or "input" in first):
        return None  # a one-line JSON document
    if all("role" in o for o in dicts):
        return "brute"
    if all(o.get("type") in _RESPONSES_TYPES | {"message"} for o in dicts):
        return "openai-responses"
    return None


def _from_document(doc: Any) -> str | None:
    if isinstance(doc, dict):
        if "input" in doc:
            return "openai-responses"
        if "messages" in doc:
            items = doc["messages"]
            return "anthropic" if "system" in doc or _has_blocks(items) else "openai-chat"
        return None
    if not isinstance(doc, list) or not all(isinstance(i, dict) for i in doc):
        return None
    if any("role" not in i or i.get("type") in _RESPONSES_TYPES for i in doc):
        return "openai-responses"
    return "anthropic" if _has_blocks(doc) else "openai-chat"


def _has_blocks(items: Any) -> bool:
    if not isinstance(items, list):
        return False
    for item in items:
        content = item.get("content") if isinstance(item, dict) else None
        if isinstance(content, list) and any(
            isinstance(b, dict) and b.get("type") in _ANTHROPIC_BLOCKS for b in content
        ):
            return True
    return False


_CHAT_ROLES = {"system", "developer", "tool", "function"}
_CHAT_KEYS = ("tool_calls", "tool_call_id", "function_call")
_CHAT_PARTS = {"image_url", "input_audio", "refusal"}
_RESPONSES_PARTS = {"input_text", "output_text", "input_image", "input_file"}


def list_evidence(doc: Any, items: list[dict[str, Any]]) -> dict[str, str]:
    """For each provider list format, the first sign in ``doc``/``items`` that the data is in
    it (a format with no sign is left out): what an import in the wrong one would lose."""
    found: dict[str, str] = {}

    def note(fmt: str, why: str) -> None:
        found.setdefault(fmt, why)

    if isinstance(doc, dict):
        if "system" in doc:
            note("anthropic", "a top-level `system` prompt")
        if "input" in doc or "instructions" in doc:
            note("openai-responses", "an `input` list or `instructions`")
    for i, item in enumerate(items):
        role, kind = item.get("role"), item.get("type")
        if kind in _RESPONSES_TYPES:
            note("openai-responses", f"item {i} of type `{kind}`")
        if role in _CHAT_ROLES and "type" not in item:
            note("openai-chat", f"item {i} with role `{role}`")
        for key in _CHAT_KEYS:
            if key in item:
                note("openai-chat", f"item {i} with `{key}`")
        content = item.get("content")
        for part in content if isinstance(content, list) else ():
            ptype = part.get("type") if isinstance(part, dict) else None
            if ptype in _ANTHROPIC_BLOCKS or (ptype == "image" and "source" in part):
                note("anthropic", f"item {i} with a `{ptype}` block")
            elif ptype in _CHAT_PARTS:
                note("openai-chat", f"item {i} with an `{ptype}` part")
            elif ptype in _RESPONSES_PARTS:
                note("openai-responses", f"item {i} with an `{ptype}` part")
    return found
