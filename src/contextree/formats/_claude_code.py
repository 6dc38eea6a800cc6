"""Claude Code session files (``~/.claude/projects/<encoded cwd>/<session id>.jsonl``): import.

Claude Code writes one JSON object per line. Conversation lines have ``type`` ``user``,
``assistant`` or ``system``, a ``uuid``, a ``parentUuid`` (so rewinds make branches),
``timestamp``, ``sessionId``, ``cwd``, ``isSidechain``, and a ``message`` in the Anthropic
Messages shape (content blocks ``text``, ``thinking``, ``tool_use``, ``tool_result``,
``image``). Other lines (``summary``, ``custom-title``, ``file-history-snapshot``,
``queue-operation``...) carry no messages.

How they map:

* The uuid of a line becomes the id of its entry (extra entries from one line get ``.1``,
  ``.2``...), so ``contextree show --at`` takes the ids Claude Code uses.
* One API response is often written as several ``assistant`` lines (one per content block,
  same ``message.id``, each the parent of the next); they become one assistant message.
* A user line with ``tool_result`` blocks becomes tool messages (and a user message for other
  blocks). When parallel tool results each name the assistant line as parent, they are chained
  in file order instead of becoming sibling branches.
* A ``compact_boundary`` system line (a new root whose ``logicalParentUuid`` names the last
  message before it) becomes a compaction entry under that message; the summary is the
  ``isCompactSummary`` user message that follows it, which is folded into the entry.
* Other ``system`` lines (local commands, API errors, notices) are not sent to the model and
  are skipped; their children attach to their parent.
* Sidechain lines (sub-agent transcripts) are kept as their own branches; the current leaf is
  the last main-chain message. The session name is the ``custom-title`` if any, else the
  ``summary`` whose ``leafUuid`` is in this file.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._messages import Message
from ..entries import AnyEntry, CompactionEntry, SessionInfoEntry, now
from ..models._wire_anthropic import assistant_from_anthropic, from_anthropic, usage_from_anthropic
from ._base import (
    Imported,
    Json,
    Progress,
    header,
    imported_metadata,
    input_error,
    message_entry,
    read_json_lines,
    text_of_blocks,
)

_CONVERSATION = ("user", "assistant", "system")
_MAX_ALIAS_HOPS = 10_000


@dataclass
class _Node:
    """One or more lines that become entries together."""

    kind: str  # user | assistant | boundary | compact_summary
    line: int
    uuids: list[str]
    parent: str | None
    timestamp: str
    sidechain: bool
    lines: list[Json]
    message_id: str | None = None
    summary: str | None = None
    absorbed_by: _Node | None = None
    messages: list[Message] = field(default_factory=list)
    ids: list[str] = field(default_factory=list)

    @property
    def first(self) -> Json:
        return self.lines[0]


class _Reader:
    """Collects the lines of one file, then builds the entries."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.nodes: list[_Node] = []
        self.by_uuid: dict[str, _Node] = {}
        self.alias: dict[str, str | None] = {}
        self.titles: list[str] = []
        self.summaries: list[tuple[Any, Any]] = []
        self.info: Json = {}
        self.call_names: dict[str, str] = {}
        self.call_owner: dict[str, _Node] = {}

    # -- pass 1: lines to nodes ----------------------------------------------------------
    def add(self, n: int, obj: Any) -> None:
        if not isinstance(obj, dict) or not isinstance(obj.get("type"), str):
            raise input_error(self.path, n, "expected a JSON object with a string `type`")
        kind = obj["type"]
        if kind == "summary":
            self.summaries.append((obj.get("leafUuid"), obj.get("summary")))
        elif kind == "custom-title" and isinstance(obj.get("customTitle"), str):
            self.titles.append(obj["customTitle"])
        elif kind in _CONVERSATION:
            self._conversation_line(n, obj, kind)

    def _conversation_line(self, n: int, obj: Json, kind: str) -> None:
        uuid, parent = obj.get("uuid"), obj.get("parentUuid")
        if not isinstance(uuid, str) or not uuid:
            raise input_error(self.path, n, f"a {kind!r} line has no string `uuid`")
        if parent is not None and not isinstance(parent, str):
            raise input_error(self.path, n, "`parentUuid` must be a string or null")
        if uuid in self.by_uuid or uuid in self.alias:
            return  # a resumed session repeats lines it copied; the first one counts
        for key in ("sessionId", "cwd", "version", "timestamp"):
            if key in obj and key not in self.info:
                self.info[key] = obj[key]
        if kind == "system":
            if obj.get("subtype") == "compact_boundary":
                logical = obj.get("logicalParentUuid")
                self._node("boundary", n, obj, logical if isinstance(logical, str) else parent)
            else:
                self.alias[uuid] = parent
            return
        message = obj.get("message")
        if not isinstance(message, dict):
            raise input_error(self.path, n, f"a {kind!r} line needs a `message` object")
        if kind == "assistant":
            last = self.nodes[-1] if self.nodes else None
            mid = message.get("id")
            if (last is not None and last.kind == "assistant" and mid is not None
                    and last.message_id == mid and parent in last.uuids):
                last.uuids.append(uuid)
                last.lines.append(obj)
                self.by_uuid[uuid] = last
                return
            node = self._node("assistant", n, obj, parent)
            node.message_id = mid if isinstance(mid, str) else None
        else:
            self._node("compact_summary" if obj.get("isCompactSummary") else "user", n, obj,
                       parent)

    def _node(self, kind: str, n: int, obj: Json, parent: str | None) -> _Node:
        ts = obj.get("timestamp")
        node = _Node(kind, n, [obj["uuid"]], parent, ts if isinstance(ts, str) else now(),
                     bool(obj.get("isSidechain")), [obj])
        self.nodes.append(node)
        self.by_uuid[obj["uuid"]] = node
        return node

    # -- pass 2: nodes to messages ---------------------------------------------------------
    def convert(self) -> None:
        for node in self.nodes:
            if node.kind == "compact_summary":
                target = self._node_of(node.parent)
                if target is not None and target.kind == "boundary" and target.summary is None:
                    target.summary = text_of_blocks(node.first["message"].get("content"))
                    node.absorbed_by = target
                    continue
            try:
                self._convert(node)
            except (AttributeError, TypeError, ValueError, KeyError) as e:
                raise input_error(self.path, node.line, f"unexpected message shape "
                                  f"({type(e).__name__}: {e})") from None
            uuid = node.uuids[0]
            node.ids = [uuid] + [f"{uuid}.{i}" for i in range(1, len(node.messages))]

    def _convert(self, node: _Node) -> None:
        if node.kind == "boundary":
            node.ids = [node.uuids[0]]
            return
        message = node.first["message"]
        if node.kind == "assistant":
            msg = _assistant(node.lines)
            for call in msg.tool_calls or ():
                self.call_names[call.id] = call.name
                self.call_owner[call.id] = node
            node.messages = [msg]
            return
        content = message.get("content")
        if isinstance(content, list):
            msgs = from_anthropic(None, [{"role": "user", "content": content}])
        else:
            msgs = [Message.user(content if isinstance(content, str) else "")]
        for m in msgs:
            if m.role == "tool" and m.name is None and m.tool_call_id in self.call_names:
                m.name = self.call_names[m.tool_call_id]
        node.messages = msgs

    # -- pass 3: entries -----------------------------------------------------------------
    def _node_of(self, uuid: str | None) -> _Node | None:
        for _ in range(_MAX_ALIAS_HOPS):
            if uuid is None:
                return None
            node = self.by_uuid.get(uuid)
            if node is not None:
                return node.absorbed_by or node
            if uuid not in self.alias:
                return None
            uuid = self.alias[uuid]
        return None

    def entries(self) -> tuple[list[AnyEntry], str | None]:
        out: list[AnyEntry] = []
        result_tail: dict[int, str] = {}  # id(assistant node) -> last tool result entry id
        leaf: str | None = None
        for node in self.nodes:
            if node.absorbed_by is not None:
                continue
            parent_node = self._node_of(node.parent)
            parent = parent_node.ids[-1] if parent_node is not None else None
            owner = self._results_owner(node)
            if owner is not None and parent == owner.ids[-1] and id(owner) in result_tail:
                parent = result_tail[id(owner)]
            if node.kind == "boundary":
                out.append(self._compaction(node, parent))
            else:
                for eid, msg in zip(node.ids, node.messages, strict=True):
                    out.append(message_entry(eid, parent, node.timestamp, msg))
                    parent = eid
            if owner is not None:
                result_tail[id(owner)] = node.ids[-1]
            if not node.sidechain:
                leaf = node.ids[-1]
        return out, leaf

    def _results_owner(self, node: _Node) -> _Node | None:
        """The assistant node whose calls ``node`` answers, if it holds only tool results."""
        if node.kind != "user" or not node.messages:
            return None
        if any(m.role != "tool" for m in node.messages):
            return None
        return self.call_owner.get(node.messages[0].tool_call_id or "")

    def _compaction(self, node: _Node, parent: str | None) -> CompactionEntry:
        line = node.first
        raw = line.get("compactMetadata")
        meta: Json = raw if isinstance(raw, dict) else {}
        summary = node.summary if node.summary is not None else text_of_blocks(line.get("content"))
        return CompactionEntry(
            node.ids[0], parent, node.timestamp, summary=summary, first_kept_entry_id=None,
            tokens_before=int(meta.get("preTokens") or 0),
            details={"source": "claude-code", "trigger": meta.get("trigger")},
        )

    def name(self) -> str | None:
        if self.titles:
            return self.titles[-1]
        for leaf_uuid, text in reversed(self.summaries):
            if isinstance(text, str) and leaf_uuid in self.by_uuid:
                return text
        return None


def read(path: Path, progress: Progress | None = None) -> Imported:
    """Read a Claude Code session file (see the module notes)."""
    reader = _Reader(path)
    for n, obj in read_json_lines(path, progress):
        reader.add(n, obj)
    if not reader.nodes:
        raise input_error(path, None, "no Claude Code messages found (lines of type user or "
                          "assistant with a uuid); is this a Claude Code session file?")
    reader.convert()
    entries, leaf = reader.entries()
    info = reader.info
    name = reader.name()
    if name is not None and leaf is not None:
        stamp = entries[-1].timestamp if entries else now()
        entries.append(SessionInfoEntry(f"{leaf}.name", leaf, stamp, name=name))
        leaf = None
    meta = imported_metadata("claude-code", path, claude_code_version=info.get("version"))
    sid, cwd, ts = info.get("sessionId"), info.get("cwd"), info.get("timestamp")
    hdr = header(sid if isinstance(sid, str) else None, ts if isinstance(ts, str) else None,
                 cwd=cwd if isinstance(cwd, str) else None, metadata=meta)
    return Imported(hdr, entries, leaf)


def _assistant(lines: list[Json]) -> Message:
    """One assistant message from the lines of one API response."""
    blocks: list[Json] = []
    usage: Any = None
    model: Any = None
    stop: Any = None
    for line in lines:
        message = line["message"]
        content = message.get("content")
        if isinstance(content, str):
            blocks.extend([{"type": "text", "text": content}] if content else [])
        else:
            blocks.extend(b for b in content or () if isinstance(b, dict))
        usage = message.get("usage") or usage
        model = message.get("model") or model
        stop = message.get("stop_reason") or stop
    msg = assistant_from_anthropic(blocks)
    msg.usage = usage_from_anthropic(usage) if isinstance(usage, dict) else None
    msg.model = model if isinstance(model, str) else None
    msg.provider = "anthropic"
    msg.stop_reason = stop if isinstance(stop, str) else None
    return msg


