"""Claude Code session files (``~/.claude/projects/<encoded cwd>/<session id>.jsonl``): import.

Checked against files written by Claude Code 2.1.197 (``tests/data/formats/real/claude_code``,
whose README documents the records) and 2.1.332 (``claude_code_2.1.332``). Claude Code writes
one JSON object per line:

* **Chain records** have a ``uuid`` and a ``parentUuid``: ``user``, ``assistant``, ``system``
  and ``attachment`` lines. Each line's parent is the line written before it on the same
  branch, whatever its type, so every one of them takes part in the chain.
* **Other records** have no uuid: ``queue-operation``, ``last-prompt``, ``mode``, ``summary``,
  ``custom-title``, ``file-history-snapshot``...

How they map (nothing is dropped: every line becomes an entry, goes into one, or is counted as
a rewritten duplicate; ``Imported.report`` and the header's ``imported_from.report`` say which):

* The uuid of a line becomes the id of its entry (extra entries from one line get ``.1``,
  ``.2``...), so ``contextree show --at`` takes the ids Claude Code uses. Each entry keeps the
  lines it came from under the entry field ``claude_code.records`` (with ``message.content``
  left out: it is the entry's message).
* One API response is written as one ``assistant`` line per content block (same
  ``message.id``, each the parent of the next): they become one assistant message, its
  ``records`` in order and ``claude_code.blocks`` counting the blocks of each line.
* Each tool result is its own ``user`` line whose parent is the line of *its own* tool_use, so
  parallel results hang off different lines of one response. The results of one response are
  chained in file order, and whatever names any of them as parent continues after the last.
* ``attachment`` lines become the messages Claude Code sent for them, harness context: since
  2.1.3xx a line carries them (``rendered`` pieces and their ``renderedRole``: a user message
  marked ``ATTACHMENT_MARK``, or a system message without the ``<system-reminder>`` tags);
  for older lines two types are rendered here, as **system** messages (``file`` with text: the
  Read tool call and its numbered lines; ``agent_listing_delta``: the agent listing). Other
  attachments, which the model is not sent, are kept as ``claude-code/attachment`` custom
  entries.
* A ``compact_boundary`` system line (``parentUuid`` null, ``logicalParentUuid`` the last line
  before it) becomes a compaction entry under that line. Its ``summary`` is what the model
  wrote (``model_summary``: the text after ``Summary:`` in the ``isCompactSummary`` message);
  its ``retained_tail`` is what the model saw: that user message (marked
  ``compaction_summary`` with the summary, so the context does not send it twice), then the
  messages the boundary's ``compactMetadata.preservedMessages`` names.
  ``tokens_before``/``tokens_after`` are ``preTokens``/``postTokens``. The summary line's
  children continue after the compaction entry. Lines written a second time around a
  mid-turn compaction (same uuid) are counted as duplicates; fields that differ are kept in
  ``claude_code.rewritten`` of the first copy's entry.
* Other ``system`` lines, records without a uuid, and records of unknown types become
  ``claude-code/<type>`` custom entries, linked into the chain where they were written.
* Sub-agent transcripts (``<session>/subagents/agent-<id>.jsonl`` beside the file, with
  ``agent-<id>.meta.json``) are imported as their own root, so their context is what the
  sub-agent saw; a ``claude-code/subagent`` custom entry after the Agent (or Task) tool result
  names the agent, its tool call and the first and last entry of its transcript. Sidechain
  lines inside the main file (older versions) are kept the same way. With
  ``subagent_sessions`` (``_claude_code_subagents``) the transcripts are sessions of their own
  that the custom entries name instead. One that cannot be read is named in the report
  (``subagent_errors``). A transcript read on its own (every chain line ``isSidechain``) is a
  session whose header links it to its parent (``subagent_link``).
* The current leaf is where Claude Code resumes: the last main-chain line (or the
  ``last-prompt`` leaf written after it), followed by the custom entries written after it. The
  session name is the ``custom-title`` if any, else the ``summary`` whose ``leafUuid`` is in
  this file.

A big file is read in bounded memory: the first pass keeps where each line is and what linking
needs, each line is read again while its node is placed, and the entries wait in a temporary
file until the header (which holds the report) is known; ``import_session`` then streams them.

``--resume`` and ``--continue`` append to the same file; ``--fork-session`` writes a new file
that repeats the parent's lines with the same uuids: each reads like any other file.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import msgspec
import orjson
from msgspec import UNSET, UnsetType

from .._gc import gc_paused
from .._limits import parse_json, surely_shallow
from .._messages import (
    AnyPart,
    ImagePart,
    Message,
    TextPart,
    ThinkingPart,
    ToolCall,
    UnknownPart,
    Usage,
)
from ..entries import (
    AnyEntry,
    CompactionEntry,
    CustomEntry,
    MessageEntry,
    SessionInfoEntry,
    now,
)
from ..errors import SessionError
from ..markers import CompactionSummaryMarker, CustomMessageMarker
from ..storage._encoded import EncodedEntry, encode_entry
from ._base import (
    Ids,
    Imported,
    Json,
    LineFile,
    Progress,
    Span,
    file_time,
    find_by_id,
    header,
    imported_metadata,
    input_error,
    parse_line,
    read_json_spans,
)

__all__ = [
    "CUSTOM_PREFIX",
    "SessionRow",
    "claude_home",
    "find_session",
    "list_sessions",
    "read",
]

CUSTOM_PREFIX = "claude-code/"
"""Custom entries made from Claude Code records are of type ``claude-code/<record type>``."""
EXTRA_KEY = "claude_code"
"""The entry field holding the Claude Code lines an entry was made from."""

_CHAIN_MESSAGES = ("user", "assistant")
_CLAUDE_SUMMARY = CompactionSummaryMarker(source="claude-code")
KNOWN_RECORDS = frozenset((
    "user", "assistant", "system", "attachment", "summary", "custom-title",
    "file-history-snapshot", "queue-operation", "last-prompt", "mode", "ai-title", "tag",
    "agent-name", "progress",
    # Claude Code 2.1.3xx: the requests it sent (``api-request`` names the messages of each by
    # the hashes of ``api-request-blob`` lines and of the chain's messages), the tools used,
    # costs, and the state of a cache latch; kept as custom entries, never sent.
    "api-request", "api-request-blob", "api-request-shape", "tools-used", "cost-state",
    "atis-latch",
))
"""Record types this importer knows (all are kept; others are reported as unknown)."""
_AGENT_TOOLS = ("Agent", "Task")
_BLOCK_KEYS = {
    "text": ("type", "text"),
    "thinking": ("type", "thinking", "signature"),
    "redacted_thinking": ("type", "data"),
    "tool_use": ("type", "id", "name", "input"),
    "tool_result": ("type", "tool_use_id", "content", "is_error"),
    "image": ("type", "source"),
}


# -- content blocks -> messages -------------------------------------------------------------

def _rest(block: Json, keys: Sequence[str]) -> Json:
    return {k: v for k, v in block.items() if k not in keys}


def part_from_block(block: Json) -> AnyPart:
    """One Anthropic content block as a message part, unknown fields kept as extras."""
    kind = block.get("type")
    keys = _BLOCK_KEYS.get(str(kind), ())
    if kind == "text" and isinstance(block.get("text"), str):
        return TextPart(text=block["text"]).set_extra(_rest(block, keys))
    if kind == "thinking":
        sig = block.get("signature")
        return ThinkingPart(thinking=str(block.get("thinking") or ""),
                            signature=sig if isinstance(sig, str) else None
                            ).set_extra(_rest(block, keys))
    if kind == "redacted_thinking" and isinstance(block.get("data"), str):
        return ThinkingPart(thinking="", signature=block["data"], redacted=True
                            ).set_extra(_rest(block, keys))
    if kind == "image":
        source = block.get("source")
        if isinstance(source, dict):
            src_rest = _rest(source, ("type", "media_type", "data", "url"))
            if source.get("type") == "base64" and isinstance(source.get("data"), str):
                media = source.get("media_type")
                part = ImagePart(data=source["data"],
                                 mime_type=media if isinstance(media, str) else None)
            elif source.get("type") == "url" and isinstance(source.get("url"), str):
                part = ImagePart(url=source["url"])
            else:
                return UnknownPart(dict(block))
            extra = _rest(block, keys)
            if src_rest:
                extra["source_extra"] = src_rest
            return part.set_extra(extra)
    if not isinstance(kind, str):
        raise ValueError(f"a content block needs a string `type`, got {block!r:.80}")
    return UnknownPart(dict(block))


def _parts(content: Any) -> list[AnyPart]:
    if isinstance(content, str):
        return [TextPart(text=content)] if content else []
    return [part_from_block(b) for b in content or () if isinstance(b, dict)]


def _tool_call(block: Json) -> ToolCall:
    args = block.get("input")
    call = ToolCall(id=str(block.get("id") or ""), name=str(block.get("name") or ""),
                    arguments=dict(args) if isinstance(args, dict) else {})
    extra = _rest(block, _BLOCK_KEYS["tool_use"])
    if not isinstance(args, dict) and args is not None:
        extra["input"] = args
    return call.set_extra(extra)


def _tool_result(block: Json, names: dict[str, str]) -> Message:
    raw = block.get("content")
    content: str | list[AnyPart] = _parts(raw) if isinstance(raw, list) else str(raw or "")
    call_id = str(block.get("tool_use_id") or "")
    msg = Message(role="tool", content=cast(Any, content), tool_call_id=call_id,
                  name=names.get(call_id), is_error=bool(block.get("is_error", False)))
    rest = _rest(block, _BLOCK_KEYS["tool_result"])
    if "is_error" not in block:
        rest["is_error"] = None  # absent in the file (not false): written back the same way
    return msg.set_extra({EXTRA_KEY: {"block": rest}}) if rest else msg


def user_messages(content: Any, names: dict[str, str]) -> list[Message]:
    """A user line's content: tool results become tool messages, the rest user messages."""
    if not isinstance(content, list):
        return [Message.user(content if isinstance(content, str) else "")]
    out: list[Message] = []
    parts: list[AnyPart] = []
    for b in content:
        if not isinstance(b, dict):
            continue
        if b.get("type") != "tool_result":
            parts.append(part_from_block(b))
            continue
        if parts:
            out.append(Message.user(parts))
            parts = []
        out.append(_tool_result(b, names))
    if parts or not out:
        out.append(Message.user(parts))
    return out


def usage_of(raw: Any) -> Usage | None:
    if not isinstance(raw, dict):
        return None
    n = {k: int(raw.get(k) or 0) for k in ("input_tokens", "output_tokens",
                                           "cache_read_input_tokens",
                                           "cache_creation_input_tokens")}
    return Usage(input=n["input_tokens"], output=n["output_tokens"],
                 cache_read=n["cache_read_input_tokens"],
                 cache_write=n["cache_creation_input_tokens"], total=sum(n.values()))


def assistant_message(lines: Sequence[Json]) -> Message:
    """One assistant message from the lines of one API response."""
    parts: list[AnyPart] = []
    calls: list[ToolCall] = []
    usage: Any = None
    model: Any = None
    stop: Any = None
    for line in lines:
        message = line["message"]
        content = message.get("content")
        blocks = ([{"type": "text", "text": content}] if isinstance(content, str) and content
                  else [b for b in content or () if isinstance(b, dict)]
                  if isinstance(content, list) else [])
        for b in blocks:
            if b.get("type") == "tool_use":
                calls.append(_tool_call(b))
            else:
                parts.append(part_from_block(b))
        usage = message.get("usage") or usage
        model = message.get("model") or model
        stop = message.get("stop_reason") or stop
    content_out: str | list[AnyPart] = parts
    if not parts:
        content_out = ""
    elif len(parts) == 1 and isinstance(parts[0], TextPart) and not parts[0].extra:
        content_out = parts[0].text
    return Message(role="assistant", content=cast(Any, content_out), tool_calls=calls or None,
                   usage=usage_of(usage), model=model if isinstance(model, str) else None,
                   provider="anthropic", stop_reason=stop if isinstance(stop, str) else None)


def _without_content(record: Json) -> Json:
    message = record.get("message")
    if not isinstance(message, dict) or "content" not in message:
        return record
    return {**record, "message": {k: v for k, v in message.items() if k != "content"}}


def _block_count(record: Json) -> int:
    content = record.get("message", {}).get("content")
    if isinstance(content, list):
        return sum(1 for b in content if isinstance(b, dict))
    return 1 if isinstance(content, str) and content else 0


# -- compaction summaries -------------------------------------------------------------------

_SUMMARY_HEAD = "\nSummary:\n"
_SUMMARY_ENDS = (
    "\n\nIf you need specific details from before compaction",
    "\n\nRecent messages are preserved verbatim",
    "\nContinue the conversation from where it left off",
    "\n\nThe messages after this summary are the most recent messages",
)


def model_summary(text: str) -> str:
    """The summary the model wrote, out of the ``isCompactSummary`` message Claude Code made
    of it: the text after ``Summary:`` (Claude Code drops the model's ``<analysis>`` and the
    ``<summary>`` tags), without the instructions Claude Code adds after it. A text without
    that frame is the summary as it is."""
    start = text.find(_SUMMARY_HEAD)
    if start < 0:
        return text.strip()
    body = text[start + len(_SUMMARY_HEAD):]
    ends = [i for i in (body.find(end) for end in _SUMMARY_ENDS) if i >= 0]
    return body[:min(ends)].strip() if ends else body.strip()


# -- attachments ----------------------------------------------------------------------------

ATTACHMENT_MARK = CustomMessageMarker(custom_type=CUSTOM_PREFIX + "attachment")
"""The marker of a user message rendered from an ``attachment`` line: harness context, which
Claude Code sent the model as a user message but no person typed (a system message says so
by its role)."""
_REMINDER = ("<system-reminder>\n", "\n</system-reminder>")


def rendered_attachment(record: Json) -> Message | None:
    """The message an attachment line's ``rendered`` content was sent as (Claude Code 2.1.3xx
    writes it with its ``renderedRole``); ``None`` without one.

    ``renderedRole: "user"``: a user message, one text part per rendered piece, as written.
    ``"system"``: a system message; Claude Code sends it without the ``<system-reminder>``
    tags the piece is written in, its pieces joined by a blank line."""
    pieces = record.get("rendered")
    if not isinstance(pieces, list) or not pieces:
        return None
    texts: list[str] = []
    for piece in pieces:
        content = piece.get("content") if isinstance(piece, dict) else None
        if isinstance(content, list):
            content = "".join(str(b.get("text") or "") for b in content
                              if isinstance(b, dict) and b.get("type") == "text")
        if not isinstance(content, str):
            return None
        texts.append(content)
    if record.get("renderedRole") == "system":
        bare = [t[len(_REMINDER[0]):-len(_REMINDER[1])]
                if t.startswith(_REMINDER[0]) and t.endswith(_REMINDER[1]) else t
                for t in texts]
        return Message.system("\n\n".join(bare))
    parts: str | list[AnyPart] = (texts[0] if len(texts) == 1
                                  else [TextPart(text=t) for t in texts])
    return Message(role="user", content=cast(Any, parts)).marked(ATTACHMENT_MARK)


def render_attachment(attachment: Any) -> str | None:
    """The text Claude Code 2.1.197 sends for an attachment (as a system message), or
    ``None`` for a type that is not rendered here (kept as a custom entry)."""
    if not isinstance(attachment, dict):
        return None
    kind = attachment.get("type")
    if kind == "agent_listing_delta":
        return _agent_listing(attachment)
    if kind == "file":
        return _file_attachment(attachment)
    return None


def _agent_listing(a: Json) -> str | None:
    added, removed = a.get("addedLines") or [], a.get("removedTypes") or []
    if not isinstance(added, list) or not isinstance(removed, list):
        return None
    out: list[str] = []
    if added:
        head = ("Available agent types for the Agent tool:" if a.get("isInitial")
                else "New agent types are now available for the Agent tool:")
        out.append(head + "\n" + "\n".join(str(x) for x in added))
    if removed:
        return None  # the removal note carries a constant of Claude Code's not seen in a file
    if a.get("isInitial") and a.get("showConcurrencyNote"):
        out.append("When you launch multiple agents for independent work, send them in a "
                   "single message with multiple tool uses so they run concurrently.")
    return "\n\n".join(out) if out else None


def _file_attachment(a: Json) -> str | None:
    content = a.get("content")
    name = a.get("filename")
    if not isinstance(content, dict) or content.get("type") != "text" or a.get("truncated"):
        return None
    file = content.get("file")
    if not isinstance(file, dict) or not isinstance(file.get("content"), str):
        return None
    start = file.get("startLine")
    first = start if isinstance(start, int) else 1
    numbered = "\n".join(f"{first + i}\t{line}"
                         for i, line in enumerate(file["content"].split("\n")))
    called = json.dumps({"file_path": name}, ensure_ascii=False, separators=(",", ":"))
    return (f"Called the Read tool with the following input: {called}\n"
            f"Result of calling the Read tool:\n{numbered}")


# -- reading the lines ----------------------------------------------------------------------

@dataclass(eq=False, slots=True)
class _Node:
    """One or more lines that become entries together: where they are in the file, and what
    linking them needs (their ``records`` are read again only while the node is placed).

    A big file has a node per line or so, all held until the last is placed: slots, and
    empty tuples rather than a fresh list per field, keep each to a few hundred bytes."""

    kind: str  # assistant | user | summary | boundary | attachment | custom
    line: int
    uuids: list[str]
    parent: str | None  # uuid as written (for a boundary: its logical parent)
    timestamp: str
    sidechain: bool
    spans: list[int]  # where its lines are (``_packed`` spans)
    record_type: str
    chain: bool = True  # has a uuid (a line of the parent chain)
    leaf_uuid: str | None = None  # last-prompt: the leaf it names
    meta: Json | None = None  # boundary: its compactMetadata
    records: Sequence[Json] = ()  # while placed
    message_id: str | None = None
    messages: Sequence[Message] = ()
    ids: Sequence[str] = ()
    out: str | None = None  # the entry id its children continue from
    rewritten: list[Json] | tuple[()] = ()
    summary: _Node | None = None  # boundary: its summary line
    owner: _Node | None = None  # tool results: the assistant whose calls they answer
    placed: bool = False

    @property
    def first(self) -> Json:
        return self.records[0]


@dataclass
class _File:
    """The nodes of one file (the session, or one sub-agent transcript)."""

    path: Path
    role: str  # main | subagent
    nodes: list[_Node] = field(default_factory=list)
    by_uuid: dict[str, _Node] = field(default_factory=dict)
    records: Counter[str] = field(default_factory=Counter)
    meta: Json = field(default_factory=dict)  # agent-<id>.meta.json
    agent_id: str | None = None
    duplicates: int = 0
    lines: int = 0
    titles: list[str] = field(default_factory=list)
    summaries: list[tuple[Any, Any]] = field(default_factory=list)
    info: Json = field(default_factory=dict)
    lines_file: LineFile | None = None

    def load(self, node: _Node) -> list[Json]:
        """The records of ``node``, read again from the file."""
        if self.lines_file is None:
            self.lines_file = LineFile(self.path)
        line = self.lines_file.line
        return [line(_unpacked(span)) for span in node.spans]

    def read_line(self, span: Span) -> Any:
        """The line at ``span``, parsed whole."""
        if self.lines_file is None:
            self.lines_file = LineFile(self.path)
        return self.lines_file.line(span)

    def close(self) -> None:
        if self.lines_file is not None:
            self.lines_file.close()


class _Message(msgspec.Struct):
    """The one field of a line's ``message`` the first pass reads."""

    id: Any = None


class _Head(msgspec.Struct):
    """What the first pass reads of a line: what placing its node needs. The rest (the
    content above all) is skipped by the decoder, and read when the node is placed."""

    type: Any = None
    uuid: Any = None
    parent: Any = msgspec.field(default=None, name="parentUuid")
    timestamp: Any = UNSET
    session_id: Any = msgspec.field(default=UNSET, name="sessionId")
    cwd: Any = UNSET
    version: Any = UNSET
    agent_id: Any = msgspec.field(default=None, name="agentId")
    sidechain: Any = msgspec.field(default=None, name="isSidechain")
    compact_summary: Any = msgspec.field(default=None, name="isCompactSummary")
    subtype: Any = None
    logical_parent: Any = msgspec.field(default=None, name="logicalParentUuid")
    compact_metadata: Any = msgspec.field(default=None, name="compactMetadata")
    leaf_uuid: Any = msgspec.field(default=None, name="leafUuid")
    summary: Any = None
    custom_title: Any = msgspec.field(default=None, name="customTitle")
    message: _Message | UnsetType | None = UNSET  # None: there, but not an object

    @classmethod
    def of(cls, obj: Json) -> _Head:
        """The head of a line parsed whole."""
        message = obj.get("message", UNSET)
        if not isinstance(message, UnsetType):
            message = _Message(message.get("id")) if isinstance(message, dict) else None
        return cls(obj.get("type"), obj.get("uuid"), obj.get("parentUuid"),
                   obj.get("timestamp", UNSET), obj.get("sessionId", UNSET),
                   obj.get("cwd", UNSET), obj.get("version", UNSET), obj.get("agentId"),
                   obj.get("isSidechain"), obj.get("isCompactSummary"), obj.get("subtype"),
                   obj.get("logicalParentUuid"), obj.get("compactMetadata"),
                   obj.get("leafUuid"), obj.get("summary"), obj.get("customTitle"), message)


_HEAD = msgspec.json.Decoder(_Head)


def _head_of(raw: bytes, path: Path, n: int) -> _Head:
    """The head of line ``n`` of the session file, decoded alone (the content is skipped,
    not built); a line of another shape, or nested past the decoder's own recursion guard,
    is parsed whole, which says what is wrong with it as it always did. A line nested past
    ``MAX_DEPTH`` but within that guard is refused when it is placed: every line is parsed
    whole then (``_File.load``), with the same error and line number."""
    try:
        return _HEAD.decode(raw)
    except (msgspec.DecodeError, RecursionError):  # parsed whole: the error it always got
        return _whole_head(raw, path, n)


def _checked_head_of(raw: bytes, path: Path, n: int) -> _Head:
    """``_head_of`` for a sub-agent's transcript, whose lines are checked against
    ``MAX_DEPTH`` here, in the first pass: an unreadable transcript is reported, not fatal,
    so it must fail before any of its lines are placed (the bracket count is a pass over
    the bytes that the session file is spared)."""
    if surely_shallow(raw):
        return _head_of(raw, path, n)
    return _whole_head(raw, path, n)


def _whole_head(raw: bytes, path: Path, n: int) -> _Head:
    obj = parse_line(raw, path, n)
    if not isinstance(obj, dict):
        raise input_error(path, n, "expected a JSON object with a string `type`")
    return _Head.of(obj)


def _read_file(path: Path, role: str, progress: Progress | None) -> _File:
    f = _File(path, role)
    parse = _head_of if role == "main" else _checked_head_of
    for n, span, head in read_json_spans(path, progress, parse=parse):
        _add_line(f, n, head, span)
    return f


def _add_line(f: _File, n: int, h: _Head, span: Span) -> None:
    kind = h.type
    if not isinstance(kind, str):
        raise input_error(f.path, n, "expected a JSON object with a string `type`")
    f.lines += 1
    packed = _packed(span)
    f.records[kind] += 1
    if kind == "summary":
        f.summaries.append((h.leaf_uuid, h.summary))
    elif kind == "custom-title" and isinstance(h.custom_title, str):
        f.titles.append(h.custom_title)
    uuid = h.uuid
    stamp = h.timestamp if isinstance(h.timestamp, str) else ""
    if not isinstance(uuid, str) or not uuid:
        if kind in _CHAIN_MESSAGES:
            raise input_error(f.path, n, f"a {kind!r} line has no string `uuid`")
        leaf = h.leaf_uuid if kind == "last-prompt" else None
        f.nodes.append(_Node("custom", n, [], None, stamp, False, [packed], kind, chain=False,
                             leaf_uuid=leaf if isinstance(leaf, str) else None))
        return
    parent = h.parent
    if parent is not None and not isinstance(parent, str):
        raise input_error(f.path, n, "`parentUuid` must be a string or null")
    if parent is not None:
        parent = _same_uuid(f, parent)
    if uuid in f.by_uuid:
        _duplicate(f, f.by_uuid[uuid], f.read_line(span))
        return
    if len(f.info) < len(_INFO_KEYS):  # the first line that has each one gives it
        for key, value in zip(_INFO_KEYS, (h.session_id, h.cwd, h.version, h.timestamp),
                              strict=True):
            if value is not UNSET and key not in f.info:
                f.info[key] = value
    if isinstance(h.agent_id, str) and f.agent_id is None:
        f.agent_id = h.agent_id
    sidechain = bool(h.sidechain) and f.role == "main"
    message = h.message
    if kind in _CHAIN_MESSAGES and not isinstance(message, _Message):
        raise input_error(f.path, n, f"a {kind!r} line needs a `message` object")
    if kind == "assistant":
        assert isinstance(message, _Message)
        mid = message.id
        owner = f.by_uuid.get(parent) if parent is not None else None
        if (owner is not None and owner.kind == "assistant" and isinstance(mid, str)
                and owner.message_id == mid and not owner.placed):
            owner.uuids.append(uuid)
            owner.spans.append(packed)
            f.by_uuid[uuid] = owner
            return
        node = _Node("assistant", n, [uuid], parent, stamp, sidechain, [packed], kind,
                     message_id=mid if isinstance(mid, str) else None)
    elif kind == "user":
        node = _Node("summary" if h.compact_summary else "user", n, [uuid], parent,
                     stamp, sidechain, [packed], kind)
    elif kind == "system" and h.subtype == "compact_boundary":
        logical = h.logical_parent
        meta = h.compact_metadata
        node = _Node("boundary", n, [uuid], logical if parent is None and isinstance(
            logical, str) else parent, stamp, sidechain, [packed], kind,
            meta=meta if isinstance(meta, dict) else {})
    elif kind == "attachment":
        node = _Node("attachment", n, [uuid], parent, stamp, sidechain, [packed], kind)
    else:
        node = _Node("custom", n, [uuid], parent, stamp, sidechain, [packed], kind)
    if kind == "last-prompt" and isinstance(h.leaf_uuid, str):
        node.leaf_uuid = h.leaf_uuid
    f.nodes.append(node)
    f.by_uuid[uuid] = node


_INFO_KEYS = ("sessionId", "cwd", "version", "timestamp")
"""What a file's ``info`` holds: each as the first line that has it gives it."""

_BITS = 48
_MASK = (1 << _BITS) - 1


def _packed(span: Span) -> int:
    """A line's ``Span`` as one int (~40 bytes, not a tuple of three: ~150)."""
    offset, length, n = span
    return (((offset << _BITS) | length) << _BITS) | n


def _unpacked(packed: int) -> Span:
    return packed >> (2 * _BITS), (packed >> _BITS) & _MASK, packed & _MASK


def _same_uuid(f: _File, uuid: str) -> str:
    """``uuid`` as the line that has it holds it (one string where parent and child name it,
    not two), or as it is if no line before has it."""
    node = f.by_uuid.get(uuid)
    if node is not None:
        for held in node.uuids:
            if held == uuid:
                return held
    return uuid


def _duplicate(f: _File, node: _Node, obj: Json) -> None:
    """A line whose uuid was already written: counted, and what differs kept."""
    f.duplicates += 1
    records = f.load(node)
    original = next((r for r in records if r.get("uuid") == obj.get("uuid")), records[0])
    changed = {k: v for k, v in obj.items() if original.get(k) != v}
    gone = [k for k in original if k not in obj]
    note: Json = {"uuid": obj.get("uuid"), "changed": changed}
    if gone:
        note["removed"] = gone
    notes = node.rewritten if isinstance(node.rewritten, list) else []
    notes.append(note)
    node.rewritten = notes


# -- building entries -----------------------------------------------------------------------

class _Builder:
    """Places the nodes of every file as entries (see the module notes)."""

    def __init__(self, main: _File, agents: list[_File],
                 sessions: dict[Path, str] | None = None) -> None:
        self.main = main
        self.agents = agents
        # With sessions, each transcript becomes the session named there (not a root here).
        self.sessions = sessions
        self.ids = Ids([u for f in (main, *agents) for u in f.by_uuid])
        self.taken: set[str] = set()
        self.entries = _Spool()
        self.by_id: dict[str, AnyEntry] = {}  # the entries changed after they are made
        self.keep: set[int] = set()  # id() of the nodes whose messages a boundary carries
        self.names: dict[str, str] = {}  # tool call id -> tool name
        self.call_owner: dict[str, _Node] = {}
        self.tail: dict[int, str] = {}  # id(assistant node) -> its last tool result entry
        self.tip_after: dict[str | None, str] = {}  # entry -> custom entry chained after it
        self.anchor: dict[int, str | None] = {}  # id(file) -> last entry placed from it
        self.custom: Counter[str] = Counter()
        self.unrendered: Counter[str] = Counter()
        self.missing_parents = 0
        self.missing_preserved = 0
        self.links: list[Json] = []
        first = main.info.get("timestamp")
        self.stamp = first if isinstance(first, str) else ""
        self.agent_by_call: dict[str, _File] = {}
        self.agent_by_id: dict[str, _File] = {}
        for a in agents:
            call = a.meta.get("toolUseId")
            if isinstance(call, str):
                self.agent_by_call[call] = a
            if a.agent_id:
                self.agent_by_id[a.agent_id] = a

    # -- helpers ----------------------------------------------------------------------------
    def _id(self, wanted: str | None) -> str:
        if wanted is not None and wanted not in self.taken:
            self.taken.add(wanted)
            return wanted
        eid = self.ids.new()
        self.taken.add(eid)
        return eid

    def _add(self, entry: AnyEntry, *, hold: bool = False) -> None:
        """Add an entry; one that is changed later (``hold``) stays in memory."""
        self.entries.add(entry, hold=hold)
        if hold:
            self.by_id[entry.id] = entry

    def _time(self, node: _Node) -> str:
        if node.timestamp:
            self.stamp = node.timestamp
        return node.timestamp or self.stamp or now()

    def last(self, eid: str | None) -> str | None:
        """``eid`` followed by the custom entries chained after it."""
        for _ in range(len(self.tip_after) + 1):
            if eid not in self.tip_after:
                break
            eid = self.tip_after[eid]
        return eid

    def tip(self, node: _Node) -> str | None:
        """Where what names ``node`` as its parent continues: after the last tool result of
        the response ``node`` belongs to, and after the custom entries chained there."""
        group = node if node.kind == "assistant" else node.owner
        if group is not None and id(group) in self.tail:
            return self.last(self.tail[id(group)])
        return self.last(node.out)

    @staticmethod
    def _start_key(f: _File) -> str | None:
        """What the records before a file's first line are chained after (main: the root)."""
        return None if f.role == "main" else f"\0start:{f.path}"

    def _start(self, f: _File) -> str | None:
        key = self._start_key(f)
        tip = self.last(key)
        return None if tip == key else tip

    def resolve(self, f: _File, node: _Node) -> str | None:
        """The entry id ``node`` hangs from."""
        if node.parent is None:
            return None if node.sidechain else self._start(f)
        target = f.by_uuid.get(node.parent)
        if target is None or not target.placed or target.out is None:
            self.missing_parents += 1
            return None if node.sidechain else self._start(f)
        return self.tip(target)

    # -- nodes ------------------------------------------------------------------------------
    def place_file(self, f: _File) -> None:
        self.keep.update(id(n) for b in f.nodes if b.kind == "boundary"
                         for n in _preserved_nodes(f, b.meta or {}))
        for node in f.nodes:
            node.records = f.load(node)
            try:
                self._place(f, node)
            except (AttributeError, TypeError, ValueError, KeyError) as e:
                raise input_error(f.path, node.line, f"unexpected record shape "
                                  f"({type(e).__name__}: {e})") from None
            finally:
                node.records = ()
            node.placed = True
            node.spans = []  # its lines are read again only while it is placed
            node.message_id = None  # only the first pass joins lines by it
            if node.out is not None and not node.sidechain:
                self.anchor[id(f)] = node.out

    def _place(self, f: _File, node: _Node) -> None:
        if not node.chain:
            self._inline_custom(f, node)
            return
        if node.kind == "summary" and self._join_summary(f, node):
            return
        parent = self.resolve(f, node)
        if node.kind == "assistant":
            if node.first.get("isApiErrorMessage"):  # shown by Claude Code, never sent
                self._custom(node, parent, "api_error")
                return
            msg = assistant_message(node.records)
            self._messages(node, parent, [msg])
            for call in msg.tool_calls or ():
                self.names[call.id] = call.name
                self.call_owner[call.id] = node
            if msg.tool_calls:
                self.tail[id(node)] = node.ids[-1]
        elif node.kind in ("user", "summary"):
            msgs = user_messages(node.first["message"].get("content"), self.names)
            if node.kind == "summary":
                msgs = [m.marked(_CLAUDE_SUMMARY) for m in msgs]
            owner = None
            if all(m.role == "tool" for m in msgs):
                owner = self.call_owner.get(msgs[0].tool_call_id or "")
            self._messages(node, parent, msgs)
            if owner is not None and id(owner) in self.tail:
                node.owner = owner
                self.tail[id(owner)] = node.ids[-1]
                self._link_agents(f, node, msgs)
        elif node.kind == "boundary":
            self._boundary(f, node, parent)
        elif node.kind == "attachment":
            attachment = node.first.get("attachment")
            shown = rendered_attachment(node.first)
            if shown is None:
                text = render_attachment(attachment)
                shown = None if text is None else Message.system(text)
            if shown is None:
                kind = attachment.get("type") if isinstance(attachment, dict) else None
                self.unrendered[str(kind)] += 1
                self._custom(node, parent, "attachment")
            else:
                self._messages(node, parent, [shown])
        else:
            self._custom(node, parent, node.record_type)

    def _messages(self, node: _Node, parent: str | None, msgs: list[Message]) -> None:
        stamp = self._time(node)
        if id(node) in self.keep:
            node.messages = msgs
        first = self._id(node.uuids[0])
        node.ids = [first] + [self._id(f"{first}.{i}") for i in range(1, len(msgs))]
        for i, (eid, msg) in enumerate(zip(node.ids, msgs, strict=True)):
            entry = MessageEntry(id=eid, parent_id=parent, timestamp=stamp, message=msg)
            if i == 0:
                entry.set_extra({EXTRA_KEY: self._kept(node)})
            self._add(entry)
            parent = eid
        node.out = node.ids[-1]

    def _kept(self, node: _Node) -> Json:
        kept: Json = {"records": [_without_content(r) for r in node.records]}
        if node.kind == "assistant":
            kept["blocks"] = [_block_count(r) for r in node.records]
        if node.rewritten:
            kept["rewritten"] = node.rewritten
        return kept

    def _custom(self, node: _Node, parent: str | None, kind: str) -> str:
        eid = self._id(node.uuids[0] if node.uuids else None)
        custom_type = CUSTOM_PREFIX + kind
        entry = CustomEntry(id=eid, parent_id=parent, timestamp=self._time(node),
                            custom_type=custom_type, data=node.first)
        if node.rewritten:
            entry.set_extra({EXTRA_KEY: {"rewritten": node.rewritten}})
        self._add(entry)
        self.custom[custom_type] += 1
        node.ids = [eid]
        node.out = eid
        return eid

    def _inline_custom(self, f: _File, node: _Node) -> None:
        """A record without a uuid: chained after the last line written before it."""
        at = self.anchor.get(id(f))
        key = at if at is not None else self._start_key(f)
        tip = self.last(key)
        parent = None if tip == self._start_key(f) else tip
        self.tip_after[tip] = self._custom(node, parent, node.record_type)

    def _join_summary(self, f: _File, node: _Node) -> bool:
        """Fold an ``isCompactSummary`` line into the compaction entry of its boundary."""
        boundary = None
        uuid = node.parent
        for _ in range(64):  # the summary's parent is the boundary, or an attachment after it
            target = f.by_uuid.get(uuid or "")
            if target is None:
                break
            if target.kind == "boundary":
                boundary = target
                break
            uuid = target.parent
        if boundary is None or boundary.summary is not None or not boundary.placed:
            return False
        boundary.summary = node
        comp = self.by_id[boundary.ids[0]]
        assert isinstance(comp, CompactionEntry)
        msgs = user_messages(node.first["message"].get("content"), self.names)
        comp.summary = model_summary("".join(m.text for m in msgs))
        mark = CompactionSummaryMarker(source="claude-code", summary=comp.summary,
                                       tokens_before=comp.tokens_before)
        summary = [m.marked(mark) for m in msgs]
        comp.retained_tail = summary + list(comp.retained_tail or ())
        kept = comp.extra[EXTRA_KEY]
        kept["records"].append(_without_content(node.first))
        if node.rewritten:
            kept.setdefault("rewritten", []).extend(node.rewritten)
        node.ids = [comp.id]
        node.out = self.resolve(f, node)
        return True

    def _boundary(self, f: _File, node: _Node, parent: str | None) -> None:
        raw = node.first.get("compactMetadata")
        meta: Json = raw if isinstance(raw, dict) else {}
        tail: list[Message] = []
        for kept in self._preserved(f, meta):
            tail.extend(m.replace() for m in kept.messages)
        eid = self._id(node.uuids[0])
        pre, post = meta.get("preTokens"), meta.get("postTokens")
        entry = CompactionEntry(
            id=eid, parent_id=parent, timestamp=self._time(node), summary="",
            first_kept_entry_id=None,
            tokens_before=pre if isinstance(pre, int) else 0,
            tokens_after=post if isinstance(post, int) else None,
            retained_tail=tail,
            details={"source": "claude-code", "trigger": meta.get("trigger")},
        )
        entry.set_extra({EXTRA_KEY: self._kept(node)})
        self._add(entry, hold=True)  # its summary line joins it later
        node.ids = [eid]
        node.out = eid

    def _preserved(self, f: _File, meta: Json) -> list[_Node]:
        """The nodes Claude Code carried across a boundary, in order."""
        out: list[_Node] = []
        seen: set[int] = set()
        for node in _preserved_nodes(f, meta):
            if node is None or not node.placed:
                self.missing_preserved += 1
            elif id(node) not in seen:
                seen.add(id(node))
                out.append(node)
        return out

    # -- sub-agents -------------------------------------------------------------------------
    def _link_agents(self, f: _File, node: _Node, msgs: list[Message]) -> None:
        """After the result of an Agent/Task call, a custom entry naming its transcript."""
        if f.role != "main":
            return
        for m in msgs:
            call = m.tool_call_id or ""
            if self.names.get(call) not in _AGENT_TOOLS:
                continue
            result = node.first.get("toolUseResult")
            agent_id = result.get("agentId") if isinstance(result, dict) else None
            agent = self.agent_by_call.get(call) or self.agent_by_id.get(str(agent_id))
            if agent is not None and not any(x["file"] == str(agent.path) for x in self.links):
                self._agent_link(agent, call, after=node.out)

    def _agent_link(self, agent: _File, call: str | None, after: str | None) -> None:
        data: Json = {"agent_id": agent.agent_id, "tool_use_id": call,
                      "file": str(agent.path), "meta": agent.meta}
        if self.sessions is not None:
            data["session"] = self.sessions.get(agent.path)
        parent = self.last(after)
        eid = self._id(None)
        entry = CustomEntry(id=eid, parent_id=parent, timestamp=self.stamp or now(),
                            custom_type=CUSTOM_PREFIX + "subagent", data=data)
        self._add(entry, hold=True)  # place_agents fills in its first and last entry
        self.custom[entry.custom_type] += 1
        self.tip_after[parent] = eid
        self.links.append(data)

    def place_agents(self) -> None:
        """Each sub-agent transcript as its own root; a link for one no call named."""
        for agent in self.agents:
            if self.sessions is None:
                self.place_file(agent)
            link = next((x for x in self.links if x["file"] == str(agent.path)), None)
            if link is None:
                call = agent.meta.get("toolUseId")
                self._agent_link(agent, call if isinstance(call, str) else None,
                                 self.anchor.get(id(self.main)))
                link = self.links[-1]
            if self.sessions is not None:
                continue
            firsts = [n.ids[0] for n in agent.nodes if n.ids]
            link["first_entry_id"] = firsts[0] if firsts else None
            link["last_entry_id"] = self.last(self.anchor.get(id(agent)))


def _preserved_nodes(f: _File, meta: Json) -> list[_Node | None]:
    """The nodes a boundary's ``compactMetadata`` names (``None`` for a uuid not in ``f``)."""
    pm = meta.get("preservedMessages")
    uuids = pm.get("uuids") if isinstance(pm, dict) else None
    if not isinstance(uuids, list):
        seg = meta.get("preservedSegment")
        uuids = _segment(f, seg) if isinstance(seg, dict) else []
    return [f.by_uuid.get(u) if isinstance(u, str) else None for u in uuids]


def _segment(f: _File, seg: Json) -> list[str]:
    """The uuids from ``headUuid`` to ``tailUuid`` along the parent chain."""
    head, tail = seg.get("headUuid"), seg.get("tailUuid")
    out: list[str] = []
    uuid = tail
    while isinstance(uuid, str) and len(out) < 100_000:
        out.append(uuid)
        if uuid == head:
            return list(reversed(out))
        node = f.by_uuid.get(uuid)
        uuid = node.parent if node is not None else None
    return []


def subagent_files(path: Path) -> list[Path]:
    """The sub-agent transcripts of a session file: ``<stem>/subagents/agent-*.jsonl``."""
    folder = path.with_suffix("") / "subagents"
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.glob("agent-*.jsonl") if p.is_file())


def _agent_file(path: Path) -> _File:
    f = _read_file(path, "subagent", None)
    meta_path = path.with_suffix(".meta.json")
    if meta_path.is_file():
        try:
            meta = parse_json(meta_path.read_bytes())
        except orjson.JSONDecodeError as e:
            raise input_error(meta_path, None, f"not valid JSON ({e})") from None
        if isinstance(meta, dict):
            f.meta = meta
    return f


def parent_file(path: Path) -> Path:
    """Where the session a sub-agent transcript belongs to is:
    ``<session>/subagents/agent-<id>.jsonl`` -> ``<session>.jsonl``."""
    return path.parent.parent.with_suffix(".jsonl")


def subagent_link(agent: _File) -> Json:
    """How a sub-agent transcript imported on its own links to its parent (the header's
    ``imported_from.subagent``): ``agent_id``, ``agent_type``, ``description``, the
    ``tool_use_id`` of the Agent/Task call that started it (from ``agent-<id>.meta.json``, or
    found in the parent), ``parent_file`` and ``parent_session_id`` (Claude Code's),
    ``parent_session`` (the header's: the parent file, else its session id), and
    ``resolved`` (whether the parent file is there; if not, ``note`` says so)."""
    parent = parent_file(agent.path.resolve())
    meta = agent.meta
    call = meta.get("toolUseId")
    sid = agent.info.get("sessionId")
    resolved = parent.is_file()
    if not isinstance(call, str) and resolved and agent.agent_id:
        call = _call_of_agent(parent, agent.agent_id)
    link: Json = {"agent_id": agent.agent_id, "agent_type": meta.get("agentType"),
                  "description": meta.get("description"),
                  "tool_use_id": call if isinstance(call, str) else None,
                  "parent_file": str(parent), "parent_session_id": sid,
                  "parent_session": str(parent) if resolved else sid, "resolved": resolved}
    if not resolved:
        link["note"] = (f"the parent session file {parent} is not there: the link names "
                        "its Claude Code session id only")
    return link


def _call_of_agent(parent: Path, agent_id: str) -> str | None:
    """The tool_use id whose result in ``parent`` names ``agent_id`` (``toolUseResult``)."""
    for obj in _quick_lines(parent):
        result = obj.get("toolUseResult")
        if isinstance(result, dict) and result.get("agentId") == agent_id:
            content = obj.get("message", {}).get("content")
            for block in content if isinstance(content, list) else ():
                if isinstance(block, dict) and isinstance(block.get("tool_use_id"), str):
                    return str(block["tool_use_id"])
    return None


def read(path: Path, progress: Progress | None = None, *,
         subagent_sessions: dict[Path, str] | None = None) -> Imported:
    """Read a Claude Code session file and its sub-agent transcripts (see the module notes).

    A sub-agent transcript read on its own (every chain line ``isSidechain``) is a session of
    its own, linked to its parent (see ``subagent_link``). ``subagent_sessions`` maps the
    transcripts beside ``path`` to the sessions they are imported into (``import_session(...,
    with_subagents=True)``): they are then linked, not copied in. A transcript that cannot be
    read is reported (``subagent_errors``), not fatal."""
    # The nodes (a few objects a line, all acyclic and all kept until the last is placed)
    # would have the cyclic collector walk them again and again as they grow: ~30% of the
    # time of a file of many small lines.
    with gc_paused(untraversed=True):
        return _read(path, progress, subagent_sessions)


def _read(path: Path, progress: Progress | None,
          subagent_sessions: dict[Path, str] | None) -> Imported:
    main = _read_file(path, "main", progress)
    if not any(n.kind in ("user", "assistant", "summary") for n in main.nodes):
        raise input_error(path, None, "no Claude Code messages found (lines of type user or "
                          "assistant with a uuid); is this a Claude Code session file?")
    sidechain = all(n.sidechain for n in main.nodes if n.chain)
    if sidechain:  # a sub-agent's transcript, imported on its own
        main.close()
        main = _agent_file(path)
    agents: list[_File] = []
    errors: list[Json] = []
    try:
        for p in [] if sidechain else subagent_files(path):
            try:
                agents.append(_agent_file(p))
            except (SessionError, OSError) as e:
                errors.append({"file": str(p), "error": str(e)})
        b = _Builder(main, agents, subagent_sessions)
        try:
            b.place_file(main)
            b.place_agents()
        except BaseException:
            b.entries.close()
            raise
    finally:
        for f in (main, *agents):
            f.close()
    leaf = _leaf(b, main)
    entries = b.entries
    name = _name(main)
    if name is not None:
        stamp = entries.last_stamp if entries.ids else now()
        info_id = b._id(f"{leaf}.name" if leaf else None)
        entries.add(SessionInfoEntry(id=info_id, parent_id=leaf, timestamp=stamp, name=name))
        leaf = info_id
    report = _report(b, main, agents)
    if errors:
        report["subagent_errors"] = errors
    info = main.info
    link = subagent_link(main) if sidechain else None
    meta = imported_metadata("claude-code", path, claude_code_version=info.get("version"),
                             report=report, subagent=link)
    sid, cwd, ts = info.get("sessionId"), info.get("cwd"), info.get("timestamp")
    if link is not None:  # the transcript shares its parent's sessionId: not its own id
        sid = f"{sid}-agent-{main.agent_id}" if isinstance(sid, str) and main.agent_id \
            else None
    hdr = header(sid if isinstance(sid, str) else None,
                 ts if isinstance(ts, str) else file_time(path),
                 cwd=cwd if isinstance(cwd, str) else None, metadata=meta,
                 parent_session=None if link is None else link["parent_session"])
    return Imported(hdr, leaf_id=leaf, report=report, stream=entries.replay,
                    used_ids=entries.ids)


class _Spool:
    """The entries made so far, in order, written to a temporary file as they are made (so a
    big import holds only their places); those changed after they are made stay in memory.

    Each is written encoded (``encode_entry``: its session line and what appending it needs),
    so that the storage writes the line as it is, neither decoded nor encoded again."""

    def __init__(self) -> None:
        # Closed by replay() or close(); written and read back 1 MiB at a time, not 8 KiB.
        self.file = tempfile.TemporaryFile(buffering=_SPOOL_BUFFER)  # noqa: SIM115
        self.size = 0
        self.slots: list[AnyEntry | tuple[int, int]] = []
        self.ids: set[str] = set()
        self.last_stamp = ""

    def add(self, entry: AnyEntry, *, hold: bool = False) -> None:
        self.ids.add(entry.id)
        self.last_stamp = entry.timestamp
        encoded = None if hold else encode_entry(entry)
        if encoded is None:  # held, or kept as it is: the storage says what is wrong with it
            self.slots.append(entry)
            return
        record = _SPOOLED.encode(encoded)
        self.file.write(record)
        self.slots.append((self.size, len(record)))
        self.size += len(record)

    def replay(self) -> Iterator[AnyEntry | EncodedEntry]:
        """The entries in the order they were made (once: the file is closed after)."""
        try:
            self.file.seek(0)  # read in order, in 1 MiB reads (the slots follow one another)
            read = self.file.read
            decode = _UNSPOOLED.decode
            for slot in self.slots:
                if isinstance(slot, tuple):
                    yield decode(read(slot[1]))
                else:
                    yield slot
        finally:
            self.close()

    def close(self) -> None:
        self.file.close()


_SPOOL_BUFFER = 1 << 20
_SPOOLED = msgspec.msgpack.Encoder()
_UNSPOOLED = msgspec.msgpack.Decoder(EncodedEntry)


def _leaf(b: _Builder, main: _File) -> str | None:
    """Where Claude Code resumes: the last main-chain line, or the ``last-prompt`` leaf
    written after it; then the custom entries chained after that."""
    last_chain: _Node | None = None
    leaf_uuid: str | None = None
    for node in main.nodes:
        if node.chain and not node.sidechain and node.out is not None:
            last_chain, leaf_uuid = node, None
        elif node.leaf_uuid is not None:
            leaf_uuid = node.leaf_uuid
    target = main.by_uuid.get(leaf_uuid or "") or last_chain
    if target is None or target.out is None:
        return b.last(None)
    if target is last_chain:  # the custom entries written after it belong to the branch
        return b.last(b.anchor.get(id(main)))
    return b.tip(target)


def _name(f: _File) -> str | None:
    if f.titles:
        return f.titles[-1]
    for leaf_uuid, text in reversed(f.summaries):
        if isinstance(text, str) and leaf_uuid in f.by_uuid:
            return text
    return None


def _report(b: _Builder, main: _File, agents: list[_File]) -> Json:
    records: Counter[str] = Counter()
    for f in (main, *agents):
        records.update(f.records)
    report: Json = {
        "records": dict(sorted(records.items())),
        "custom_entries": dict(sorted(b.custom.items())),
        "files": [{"path": str(f.path), "role": f.role, "lines": f.lines,
                   "duplicates": f.duplicates} for f in (main, *agents)],
    }
    unknown = sorted(k for k in records if k not in KNOWN_RECORDS)
    if unknown:
        report["unknown_types"] = unknown
    if b.unrendered:
        report["unrendered_attachments"] = dict(sorted(b.unrendered.items()))
    if b.missing_parents:
        report["missing_parents"] = b.missing_parents
    if b.missing_preserved:
        report["missing_preserved"] = b.missing_preserved
    if b.links:
        report["subagents"] = b.links
    return report


# -- finding sessions -----------------------------------------------------------------------

@dataclass(frozen=True)
class SessionRow:
    """A session found under a tool's home directory."""

    id: str
    path: Path
    cwd: str | None
    modified: float
    first_prompt: str | None
    messages: int


def claude_home(home: str | os.PathLike[str] | None = None) -> Path:
    """Where Claude Code keeps its projects: ``home`` (a ``.claude`` directory or its
    ``projects``), else ``$CLAUDE_CONFIG_DIR``, else ``~/.claude``."""
    if home is not None:
        base = Path(home).expanduser()
    elif os.environ.get("CLAUDE_CONFIG_DIR"):
        base = Path(os.environ["CLAUDE_CONFIG_DIR"]).expanduser()
    else:
        base = Path.home() / ".claude"
    return base if base.name == "projects" else base / "projects"


def list_sessions(home: str | os.PathLike[str] | None = None) -> list[SessionRow]:
    """The session files under ``<home>/projects/*/``, newest first, with their first prompt."""
    root = claude_home(home)
    if not root.is_dir():
        return []
    rows = [_row(p) for p in root.glob("*/*.jsonl") if p.is_file()]
    return sorted((r for r in rows if r is not None), key=lambda r: r.modified, reverse=True)


def _row(path: Path) -> SessionRow | None:
    sid: str | None = None
    cwd: str | None = None
    first: str | None = None
    count = 0
    try:
        for obj in _quick_lines(path):
            if sid is None and isinstance(obj.get("sessionId"), str):
                sid = obj["sessionId"]
            if cwd is None and isinstance(obj.get("cwd"), str):
                cwd = obj["cwd"]
            if obj.get("type") in _CHAIN_MESSAGES and not obj.get("isSidechain"):
                count += 1
                if first is None and obj.get("type") == "user" and not obj.get("isMeta") \
                        and not obj.get("isCompactSummary"):
                    text = _prompt_text(obj.get("message", {}).get("content"))
                    first = text or None
        modified = path.stat().st_mtime
    except OSError:
        return None
    return SessionRow(sid or path.stem, path, cwd, modified, first, count)


def _prompt_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        if any(isinstance(b, dict) and b.get("type") == "tool_result" for b in content):
            return ""
        return "".join(str(b.get("text", "")) for b in content
                       if isinstance(b, dict) and b.get("type") == "text")
    return ""


def _quick_lines(path: Path) -> Iterator[Json]:
    with open(path, "rb") as f:
        for raw in f:
            if not raw.strip():
                continue
            try:
                obj = parse_json(raw)
            except orjson.JSONDecodeError:
                continue
            if isinstance(obj, dict):
                yield obj


def find_session(key: str, home: str | os.PathLike[str] | None = None) -> Path:
    """The session file whose id is ``key`` or starts with it (a path is returned as is)."""
    return find_by_id(key, lambda: list_sessions(home), "Claude Code session",
                      claude_home(home))
