"""Codex CLI session files (``~/.codex/sessions/YYYY/MM/DD/rollout-<time>-<id>.jsonl``): import.

Each line is ``{"timestamp", "type", "payload"}``. ``session_meta`` opens the file (id, cwd,
cli_version, model_provider, instructions); ``response_item`` payloads are OpenAI Responses
items (``message``, ``reasoning``, ``function_call``, ``function_call_output``,
``custom_tool_call``...) and are what the model saw and said; ``turn_context`` gives the model
and reasoning effort of each turn; ``event_msg`` is UI telemetry that mostly repeats the items,
except ``token_count`` (usage of the last call), ``thread_name_updated`` and
``thread_rolled_back``; ``compacted`` marks a compaction (``message``, and in newer versions
the ``replacement_history`` the model sees instead of the old items).

How they map: items become a chain of messages (consecutive assistant items form one assistant
message, as ``contextree.models._wire_openai.from_openai_responses`` reads them); custom tool
calls take their free-form input as ``{"input": ...}`` and shell calls their ``action``;
``turn_context`` changes become model and thinking-level entries; ``token_count`` becomes the
usage of the assistant message it follows; ``compacted`` becomes a compaction entry (kept
history as its retained tail); a rollback of N turns moves back before the Nth last user
message, so what follows is a new branch and the undone turns stay in the tree.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .._messages import Message, Usage
from ..entries import (
    AnyEntry,
    CompactionEntry,
    MessageEntry,
    ModelChangeEntry,
    SessionInfoEntry,
    ThinkingLevelChangeEntry,
    now,
)
from ..models._wire_openai import from_openai_responses
from ._base import (
    Ids,
    Imported,
    Json,
    Progress,
    header,
    imported_metadata,
    input_error,
    message_entry,
    read_json_lines,
)

_NON_ASSISTANT = ("function_call_output", "custom_tool_call_output")
_SKIPPED_ITEMS = ("ghost_snapshot",)
_CONTEXT_PREFIXES = ("<environment_context>", "<user_instructions>", "<permissions")


class _Builder:
    """Turns rollout lines into a chain of entries (with branches for rollbacks)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.ids = Ids()
        self.entries: list[AnyEntry] = []
        self.by_id: dict[str, AnyEntry] = {}
        self.leaf: str | None = None
        self.meta: Json | None = None
        self.group: list[Json] = []
        self.group_time = ""
        self.group_usage: Usage | None = None
        self.model: str | None = None
        self.effort: str | None = None
        self.provider = "openai"
        self.call_names: dict[str, str] = {}
        self.last_assistant: Message | None = None
        self.last_input_tokens = 0
        self.name: str | None = None

    def append(self, entry: AnyEntry) -> None:
        self.entries.append(entry)
        self.by_id[entry.id] = entry
        self.leaf = entry.id

    def add_message(self, msg: Message, ts: str) -> None:
        self.append(message_entry(self.ids.new(), self.leaf, ts, msg))

    # -- lines -----------------------------------------------------------------------------
    def line(self, n: int, obj: Any) -> None:
        if not isinstance(obj, dict) or not isinstance(obj.get("type"), str):
            raise input_error(self.path, n, "expected a JSON object with a string `type`")
        kind, payload = obj["type"], obj.get("payload")
        if not isinstance(payload, dict):
            raise input_error(self.path, n, f"the {kind!r} line has no `payload` object")
        ts = obj.get("timestamp")
        ts = ts if isinstance(ts, str) else now()
        try:
            self._dispatch(kind, payload, ts)
        except (AttributeError, TypeError, ValueError, KeyError) as e:
            raise input_error(self.path, n, f"unexpected {kind!r} payload "
                              f"({type(e).__name__}: {e})") from None

    def _dispatch(self, kind: str, payload: Json, ts: str) -> None:
        if kind == "session_meta":
            self._session_meta(payload, ts)
        elif kind == "response_item":
            self._item(payload, ts)
        elif kind == "turn_context":
            self.flush()
            self._turn_context(payload, ts)
        elif kind == "compacted":
            self.flush()
            self._compacted(payload, ts)
        elif kind == "event_msg":
            self._event(payload)

    def _session_meta(self, payload: Json, ts: str) -> None:
        if self.meta is not None:
            return
        self.meta = {**payload, "timestamp": payload.get("timestamp") or ts}
        if isinstance(payload.get("model_provider"), str):
            self.provider = payload["model_provider"]
        base = payload.get("base_instructions")
        text = base.get("text") if isinstance(base, dict) else payload.get("instructions")
        if isinstance(text, str) and text:
            self.add_message(Message.system(text), ts)

    def _turn_context(self, payload: Json, ts: str) -> None:
        model, effort = payload.get("model"), payload.get("effort")
        if isinstance(model, str) and model != self.model:
            self.model = model
            self.append(ModelChangeEntry(self.ids.new(), self.leaf, ts, provider=self.provider,
                                         model_id=model))
        if isinstance(effort, str) and effort != self.effort:
            self.effort = effort
            self.append(ThinkingLevelChangeEntry(self.ids.new(), self.leaf, ts,
                                                 thinking_level=effort))

    def _event(self, payload: Json) -> None:
        kind = payload.get("type")
        if kind == "token_count":
            self._token_count(payload.get("info"))
        elif kind == "thread_name_updated" and isinstance(payload.get("thread_name"), str):
            self.name = payload["thread_name"]
        elif kind == "thread_rolled_back":
            self.flush()
            self._roll_back(int(payload.get("num_turns") or 0))

    def _token_count(self, info: Any) -> None:
        last = info.get("last_token_usage") if isinstance(info, dict) else None
        if not isinstance(last, dict):
            return
        cached = int(last.get("cached_input_tokens") or 0)
        prompt = int(last.get("input_tokens") or 0)
        usage = Usage(input=max(prompt - cached, 0), output=int(last.get("output_tokens") or 0),
                      cache_read=cached, total=int(last.get("total_tokens") or 0))
        self.last_input_tokens = prompt
        if self.group:
            self.group_usage = usage
        elif self.last_assistant is not None and self.last_assistant.usage is None:
            self.last_assistant.usage = usage

    def _roll_back(self, turns: int) -> None:
        """Move the leaf to before the ``turns``-th last user message of the branch."""
        if turns <= 0 or self.leaf is None:
            return
        current: str | None = self.leaf
        while current is not None:
            entry = self.by_id[current]
            if isinstance(entry, MessageEntry) and _is_user_turn(entry.message):
                turns -= 1
                if turns == 0:
                    self.leaf = entry.parent_id
                    return
            current = entry.parent_id
        self.leaf = None

    def _compacted(self, payload: Json, ts: str) -> None:
        summary = str(payload.get("message") or "")
        history = payload.get("replacement_history")
        tail = None
        if isinstance(history, list):
            items = [_normalize(i) for i in history if isinstance(i, dict)]
            tail = [m for m in from_openai_responses([i for i in items if i is not None])
                    if m.text.strip() != summary.strip()]
        self.append(CompactionEntry(
            self.ids.new(), self.leaf, ts, summary=summary, first_kept_entry_id=None,
            tokens_before=self.last_input_tokens, retained_tail=tail,
            details={"source": "codex"},
        ))

    # -- items -----------------------------------------------------------------------------
    def _item(self, payload: Json, ts: str) -> None:
        item = _normalize(payload)
        if item is None:
            return
        if _is_assistant_item(item):
            if not self.group:
                self.group_time = ts
            self.group.append(item)
            return
        self.flush()
        for msg in from_openai_responses([item]):
            if msg.role == "tool" and msg.name is None:
                msg.name = self.call_names.get(msg.tool_call_id or "")
            self.add_message(msg, ts)

    def flush(self) -> None:
        """Write the pending assistant items as one assistant message."""
        if not self.group:
            return
        for msg in from_openai_responses(self.group):
            msg.model, msg.provider = self.model, self.provider
            if msg.role == "assistant":
                msg.usage = self.group_usage
                self.last_assistant = msg
                for call in msg.tool_calls or ():
                    self.call_names[call.id] = call.name
            self.add_message(msg, self.group_time)
        self.group, self.group_usage = [], None


def _normalize(item: Json) -> Json | None:
    """A rollout item in the shape ``from_openai_responses`` reads (``None``: skip it)."""
    kind = item.get("type")
    if kind in _SKIPPED_ITEMS:
        return None
    if kind == "custom_tool_call":
        return {"type": "function_call", "call_id": item.get("call_id"),
                "name": item.get("name"), "arguments": json.dumps({"input": item.get("input")})}
    if kind == "local_shell_call":
        return {"type": "function_call", "call_id": item.get("call_id") or item.get("id"),
                "name": "local_shell", "arguments": json.dumps(item.get("action") or {})}
    if kind in _NON_ASSISTANT:
        output = item.get("output")
        if isinstance(output, dict):
            content = output.get("content")
            output = content if isinstance(content, str | list) else json.dumps(output)
        return {"type": "function_call_output", "call_id": item.get("call_id"),
                "output": output if isinstance(output, str | list) else ""}
    return item


def _is_assistant_item(item: Json) -> bool:
    if item.get("type") == "message":
        return item.get("role") == "assistant"
    return item.get("type") != "function_call_output"


def _is_user_turn(msg: Message) -> bool:
    return msg.role == "user" and not msg.text.lstrip().startswith(_CONTEXT_PREFIXES)


def read(path: Path, progress: Progress | None = None) -> Imported:
    """Read a Codex CLI rollout file (see the module notes)."""
    b = _Builder(path)
    for n, obj in read_json_lines(path, progress):
        b.line(n, obj)
    b.flush()
    if b.meta is None and not b.entries:
        raise input_error(path, None, "no Codex rollout lines found (session_meta, "
                          "response_item...); is this a Codex session file?")
    meta = b.meta or {}
    leaf = b.leaf
    if b.name is not None:
        stamp = b.entries[-1].timestamp if b.entries else now()
        b.entries.append(SessionInfoEntry(b.ids.new(), leaf, stamp, name=b.name))
        leaf = b.entries[-1].id
    info = imported_metadata("codex", path, cli_version=meta.get("cli_version"),
                             forked_from_id=meta.get("forked_from_id"))
    sid, cwd, ts = meta.get("id"), meta.get("cwd"), meta.get("timestamp")
    hdr = header(sid if isinstance(sid, str) else None, ts if isinstance(ts, str) else None,
                 cwd=cwd if isinstance(cwd, str) else None, metadata=info)
    return Imported(hdr, b.entries, leaf)
