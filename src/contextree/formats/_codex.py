"""Codex CLI rollouts (``~/.codex/sessions/YYYY/MM/DD/rollout-<time>-<thread id>.jsonl``): import.

Checked against rollouts written by Codex 0.171.0 (``tests/data/formats/real/codex``, whose
README documents the lines). Each line is ``{"timestamp", "ordinal", "type", "payload"}``:

* ``session_meta`` (first line): the thread id, cwd, cli_version, ``base_instructions`` (the
  first message the model sees), and for a fork ``forked_from_id`` and ``history_base``;
* ``response_item``: what the model saw and said (``message`` with role developer, user or
  assistant; ``reasoning``; ``function_call``/``custom_tool_call`` and their outputs...);
* ``compacted``: a compaction, with the ``replacement_history`` the model sees from then on;
* ``turn_context``, ``world_state``, ``token_usage_record`` and ``event_msg``: settings,
  state and telemetry the model does not see.

How they map (every line becomes an entry or goes into one; ``Imported.report`` and the
header's ``imported_from.report`` count them by type):

* The base instructions become a system message; ``developer`` messages are system messages;
  user and assistant messages keep their role.
* Consecutive assistant items of one response (reasoning, messages, tool calls) become one
  assistant message: ``reasoning`` -> ``ThinkingPart`` (summary text, ``encrypted_content`` as
  its signature, item id kept), ``function_call`` -> a tool call with the parsed arguments,
  ``custom_tool_call`` (``apply_patch``) -> a tool call whose arguments are
  ``{"input": <the free-form input>}`` (marked ``codex_type: custom_tool_call``). Outputs
  become tool messages (Codex has no error flag: a failing command is just its exit code in
  the text). ``token_usage_record`` gives the usage of the response before it.
* Each entry keeps the lines it was made from under ``codex.records`` (without the fields
  that became its message: message content, arguments, input, output, encrypted content).
* ``compacted`` becomes a compaction entry whose ``retained_tail`` is what Codex sends from
  then on: the base instructions, then ``replacement_history`` in order (the kept user
  prompts *before* the summary, which is marked ``compaction_summary`` with the summary, so
  the context does not send it twice). The summary reply, a ``response_item`` marked
  ``metadata.compaction_output``, is kept in that entry, not joined to the assistant reply
  before it; its text is the entry's ``summary`` (``model_summary``).
* ``turn_context`` changes also become model and thinking-level entries; the other lines
  become ``codex/<type>`` custom entries (placed after the response they came in), and
  ``thread_rolled_back`` moves back before the undone turns, which stay in the tree.
* A fork (``exec fork``) holds only its own lines: ``session_meta.history_base`` names the
  parent thread and how much of its rollout belongs to the fork. The parent rollout is found
  by the thread id in each candidate's ``session_meta`` (the file name is not trusted), in the
  fork's own folder tree and under ``$CODEX_HOME/sessions`` (``~/.codex/sessions``); its
  lines up to ``end_byte_offset`` come first (marked ``codex.thread_id``), recursively.
  A missing parent is an error naming the thread.

``exec resume`` appends to the same rollout, so a resumed thread reads like any other.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import orjson

from .._files import open_regular_readonly
from .._limits import parse_json
from .._messages import AnyPart, ImagePart, Message, TextPart, ThinkingPart, ToolCall, Usage
from ..entries import (
    AnyEntry,
    CompactionEntry,
    CustomEntry,
    KnownEntry,
    MessageEntry,
    ModelChangeEntry,
    SessionInfoEntry,
    ThinkingLevelChangeEntry,
    now,
)
from ..errors import SessionNotFound
from ..markers import CompactionSummaryMarker
from ._base import (
    Ids,
    Imported,
    Json,
    Progress,
    find_by_id,
    header,
    imported_metadata,
    input_error,
    parse_line,
    read_json_lines,
)

__all__ = [
    "CUSTOM_PREFIX",
    "ThreadRow",
    "codex_home",
    "find_rollout",
    "find_thread",
    "list_sessions",
    "read",
]

CUSTOM_PREFIX = "codex/"
EXTRA_KEY = "codex"
CUSTOM_TOOL = "custom_tool_call"
KNOWN_LINES = frozenset(("session_meta", "response_item", "compacted", "turn_context",
                         "world_state", "token_usage_record", "event_msg"))
_OUTPUTS = ("function_call_output", "custom_tool_call_output", "local_shell_call_output")
_NOT_SENT = ("ghost_snapshot",)  # undo snapshots: kept as custom entries
_STRIPPED = {"message": "content", "function_call": "arguments", "custom_tool_call": "input",
             "function_call_output": "output", "custom_tool_call_output": "output",
             "reasoning": "encrypted_content"}
_CONTEXT_PREFIXES = ("<environment_context>", "<user_instructions>", "<permissions")
_MAX_FORK_DEPTH = 64


# -- items -> messages ----------------------------------------------------------------------

def _content_parts(content: Any) -> list[AnyPart]:
    from .._messages import UnknownPart

    parts: list[AnyPart] = []
    for c in content if isinstance(content, list) else ():
        if not isinstance(c, dict):
            continue
        kind = c.get("type")
        if kind in ("input_text", "output_text", "text") and isinstance(c.get("text"), str):
            rest = {k: v for k, v in c.items() if k not in ("type", "text")}
            if kind != "input_text":
                rest["codex_type"] = kind
            parts.append(TextPart(text=c["text"]).set_extra(rest))
        elif kind == "input_image" and isinstance(c.get("image_url"), str):
            rest = {k: v for k, v in c.items() if k not in ("type", "image_url")}
            parts.append(ImagePart(url=c["image_url"]).set_extra(rest))
        elif isinstance(kind, str):
            parts.append(UnknownPart(dict(c)))
    return parts


def _simple(parts: list[AnyPart]) -> str | list[AnyPart]:
    if len(parts) == 1 and isinstance(parts[0], TextPart) and not parts[0].extra:
        return parts[0].text
    return parts


def _thinking(item: Json) -> ThinkingPart:
    texts = [s.get("text", "") for s in item.get("summary") or () if isinstance(s, dict)]
    enc = item.get("encrypted_content")
    part = ThinkingPart(thinking="\n\n".join(str(t) for t in texts),
                        signature=enc if isinstance(enc, str) else None)
    rest = {k: v for k, v in item.items()
            if k in ("id",) or (k == "content" and v is not None)}
    return part.set_extra(rest)


def _arguments(raw: Any) -> tuple[dict[str, Any], Json]:
    """Parsed function-call arguments, and extras that give back the exact text."""
    if isinstance(raw, dict):
        return dict(raw), {}
    if not isinstance(raw, str):
        return {}, {"codex_arguments": raw}
    try:
        value = parse_json(raw, exact=True) if raw.strip() else {}
    except json.JSONDecodeError:
        return {}, {"codex_arguments": raw}
    if not isinstance(value, dict):
        return {}, {"codex_arguments": raw}
    return value, {}


def _call(item: Json) -> ToolCall:
    kind = item.get("type")
    call_id = str(item.get("call_id") or item.get("id") or "")
    name = str(item.get("name") or ("local_shell" if kind == "local_shell_call" else ""))
    extra: Json = {}
    if item.get("id") is not None:
        extra["codex_id"] = item.get("id")
    if kind == CUSTOM_TOOL:
        args: dict[str, Any] = {"input": item.get("input")}
        extra["codex_type"] = CUSTOM_TOOL
    elif kind == "local_shell_call":
        action = item.get("action")
        args = dict(action) if isinstance(action, dict) else {}
        extra["codex_type"] = "local_shell_call"
    else:
        args, more = _arguments(item.get("arguments"))
        extra.update(more)
    return ToolCall(id=call_id, name=name, arguments=args).set_extra(extra)


def _output_message(item: Json, names: dict[str, str]) -> Message:
    output = item.get("output")
    if isinstance(output, dict):  # older rollouts: {"content": ..., "success": ...}
        inner = output.get("content")
        output = inner if isinstance(inner, str | list) else json.dumps(output)
    content: str | list[AnyPart] = (_simple(_content_parts(output)) if isinstance(output, list)
                                    else str(output or ""))
    call_id = str(item.get("call_id") or "")
    msg = Message(role="tool", content=cast(Any, content), tool_call_id=call_id,
                  name=names.get(call_id))
    if item.get("type") != "function_call_output":
        msg.set_extra({"codex_type": item.get("type")})
    return msg


def _is_assistant_item(item: Json) -> bool:
    kind = item.get("type")
    if kind == "message":
        return item.get("role") == "assistant"
    return kind not in _OUTPUTS


def items_to_messages(items: Sequence[Json], names: dict[str, str]) -> list[Message]:
    """Response items in order as messages (consecutive assistant items: one message)."""
    out: list[Message] = []
    group: list[Json] = []
    for item in items:
        if _is_assistant_item(item):
            group.append(item)
            continue
        if group:
            out.append(assistant_message(group, names))
            group = []
        out.append(item_message(item, names))
    if group:
        out.append(assistant_message(group, names))
    return out


def item_message(item: Json, names: dict[str, str]) -> Message:
    """A non-assistant item: a user, developer (system) or tool message."""
    if item.get("type") in _OUTPUTS:
        return _output_message(item, names)
    role = item.get("role")
    role = "system" if role == "developer" else role if isinstance(role, str) else "user"
    msg = Message(role=role, content=cast(Any, _simple(_content_parts(item.get("content")))))
    if item.get("role") == "developer":
        msg.set_extra({"codex_role": "developer"})
    return msg


def assistant_message(items: Sequence[Json], names: dict[str, str]) -> Message:
    """One assistant message from the items of one response."""
    from .._messages import UnknownPart

    parts: list[AnyPart] = []
    calls: list[ToolCall] = []
    for item in items:
        kind = item.get("type")
        if kind == "reasoning":
            parts.append(_thinking(item))
        elif kind == "message":
            parts.extend(_content_parts(item.get("content")))
        elif kind in ("function_call", CUSTOM_TOOL, "local_shell_call"):
            call = _call(item)
            names[call.id] = call.name
            calls.append(call)
        else:
            parts.append(UnknownPart(dict(item)))
    return Message(role="assistant", content=cast(Any, _simple(parts) if parts else ""),
                   tool_calls=calls or None)


def _usage(raw: Any) -> Usage | None:
    if not isinstance(raw, dict):
        return None
    cached = int(raw.get("cached_input_tokens") or 0)
    prompt = int(raw.get("input_tokens") or 0)
    return Usage(input=max(prompt - cached, 0), output=int(raw.get("output_tokens") or 0),
                 cache_read=cached, cache_write=int(raw.get("cache_write_input_tokens") or 0),
                 total=int(raw.get("total_tokens") or 0))


def _kept_line(line: Json) -> Json:
    """A rollout line without the payload field that became (part of) a message."""
    payload = line.get("payload")
    if not isinstance(payload, dict):
        return line
    strip = _STRIPPED.get(str(payload.get("type")))
    if strip is None or strip not in payload:
        return line
    return {**line, "payload": {k: v for k, v in payload.items() if k != strip}}


# -- the builder ----------------------------------------------------------------------------

@dataclass
class _Pending:
    """Assistant items of the response being read, and what came with them."""

    items: list[Json] = field(default_factory=list)
    lines: list[Json] = field(default_factory=list)
    time: str = ""
    usage: Usage | None = None
    after: list[tuple[Json, str]] = field(default_factory=list)  # lines to place after it


class _Builder:
    """Turns rollout lines into a chain of entries (with branches for rollbacks)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.ids = Ids()
        self.entries: list[AnyEntry] = []
        self.by_id: dict[str, AnyEntry] = {}
        self.leaf: str | None = None
        self.meta: Json | None = None
        self.pending = _Pending()
        self.model: str | None = None
        self.effort: str | None = None
        self.provider = "openai"
        self.names: dict[str, str] = {}
        self.last_assistant: Message | None = None
        self.last_input_tokens = 0
        self.name: str | None = None
        self.base: Message | None = None  # the base instructions message now in force
        self.compaction_output: tuple[Json, Usage | None] | None = None
        self.thread: str | None = None  # set while reading a fork's parent
        self.records: Counter[str] = Counter()
        self.custom: Counter[str] = Counter()
        self.lines = 0
        self.unknown: set[str] = set()
        self.forks: list[Json] = []

    def append(self, entry: KnownEntry, kept: Json | None = None) -> None:
        if kept is not None or self.thread is not None:
            info = dict(kept or {})
            if self.thread is not None:
                info["thread_id"] = self.thread
            entry.set_extra({EXTRA_KEY: info})
        self.entries.append(entry)
        self.by_id[entry.id] = entry
        self.leaf = entry.id

    def add_message(self, msg: Message, ts: str, lines: Sequence[Json],
                    parts: list[int] | None = None) -> None:
        kept: Json = {"records": [_kept_line(x) for x in lines]}
        if parts is not None:
            kept["parts"] = parts
        self.append(MessageEntry(id=self.ids.new(), parent_id=self.leaf, timestamp=ts,
                                 message=msg), kept)

    def add_custom(self, line: Json, ts: str) -> None:
        custom_type = CUSTOM_PREFIX + str(line.get("type"))
        if self.thread is None:
            self.custom[custom_type] += 1
        self.append(CustomEntry(id=self.ids.new(), parent_id=self.leaf, timestamp=ts,
                                custom_type=custom_type, data=line))

    # -- lines -----------------------------------------------------------------------------
    def line(self, n: int, obj: Any, path: Path) -> None:
        if not isinstance(obj, dict) or not isinstance(obj.get("type"), str):
            raise input_error(path, n, "expected a JSON object with a string `type`")
        kind, payload = obj["type"], obj.get("payload")
        if not isinstance(payload, dict):
            raise input_error(path, n, f"the {kind!r} line has no `payload` object")
        if self.thread is None:
            self.lines += 1
            self.records[kind] += 1
            if kind not in KNOWN_LINES:
                self.unknown.add(kind)
        ts = obj.get("timestamp")
        ts = ts if isinstance(ts, str) else now()
        try:
            self._dispatch(obj, kind, payload, ts)
        except (AttributeError, TypeError, ValueError, KeyError) as e:
            raise input_error(path, n, f"unexpected {kind!r} payload "
                              f"({type(e).__name__}: {e})") from None

    def _dispatch(self, line: Json, kind: str, payload: Json, ts: str) -> None:
        if kind == "response_item":
            self._item(line, payload, ts)
            return
        if kind == "token_usage_record":
            usage = _usage(payload.get("usage"))
            raw = payload.get("usage")
            if isinstance(raw, dict) and isinstance(raw.get("input_tokens"), int):
                self.last_input_tokens = raw["input_tokens"]
            if self.pending.items:
                self.pending.usage = usage
            elif self.compaction_output is not None and self.compaction_output[1] is None:
                self.compaction_output = (self.compaction_output[0], usage)
            self.flush()
            self.add_custom(line, ts)
            return
        if kind == "event_msg":
            self._event(line, payload, ts)
            return
        self.flush()
        if kind == "session_meta":
            self._session_meta(line, payload, ts)
        elif kind == "turn_context":
            self._turn_context(line, payload, ts)
        elif kind == "compacted":
            self._compacted(line, payload, ts)
        else:
            self.add_custom(line, ts)

    def _session_meta(self, line: Json, payload: Json, ts: str) -> None:
        if self.meta is None or self.thread is None:
            self.meta = {**payload, "timestamp": payload.get("timestamp") or ts}
        if isinstance(payload.get("model_provider"), str):
            self.provider = payload["model_provider"]
        base = payload.get("base_instructions")
        text = base.get("text") if isinstance(base, dict) else payload.get("instructions")
        if not isinstance(text, str) or not text or (
                self.base is not None and self.base.text == text):
            self.add_custom(line, ts)  # a fork repeats its parent's base instructions
            return
        msg = Message.system(text).set_extra({"codex_role": "base_instructions"})
        self.base = msg
        kept = line
        if isinstance(base, dict):
            kept = {**line, "payload": {**payload, "base_instructions": {
                k: v for k, v in base.items() if k != "text"}}}
        self.append(MessageEntry(id=self.ids.new(), parent_id=self.leaf, timestamp=ts, message=msg),
                    {"records": [kept]})

    def _turn_context(self, line: Json, payload: Json, ts: str) -> None:
        self.add_custom(line, ts)
        model, effort = payload.get("model"), payload.get("effort")
        if isinstance(model, str) and model != self.model:
            self.model = model
            self.append(ModelChangeEntry(id=self.ids.new(), parent_id=self.leaf, timestamp=ts,
                                         provider=self.provider, model_id=model))
        if isinstance(effort, str) and effort != self.effort:
            self.effort = effort
            self.append(ThinkingLevelChangeEntry(id=self.ids.new(), parent_id=self.leaf,
                                                 timestamp=ts, thinking_level=effort))

    def _event(self, line: Json, payload: Json, ts: str) -> None:
        kind = payload.get("type")
        if kind == "token_count":
            self._token_count(payload.get("info"))
        elif kind == "thread_name_updated" and isinstance(payload.get("thread_name"), str):
            self.name = payload["thread_name"]
        elif kind == "thread_rolled_back":
            self.flush()
            self._roll_back(int(payload.get("num_turns") or 0))
        if self.pending.items:
            self.pending.after.append((line, ts))
        else:
            self.add_custom(line, ts)

    def _token_count(self, info: Any) -> None:
        last = info.get("last_token_usage") if isinstance(info, dict) else None
        usage = _usage(last)
        if usage is None or not isinstance(last, dict):
            return
        self.last_input_tokens = int(last.get("input_tokens") or 0)
        if self.pending.items:
            self.pending.usage = self.pending.usage or usage
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

    def _compacted(self, line: Json, payload: Json, ts: str) -> None:
        summary = str(payload.get("message") or "")
        records = [line]
        usage = None
        output: Json | None = None
        if self.compaction_output is not None:
            output_line, usage = self.compaction_output
            records.insert(0, _kept_line(output_line))
            output = output_line.get("payload") if isinstance(output_line, dict) else None
            self.compaction_output = None
        written = model_summary(summary, output)
        mark = CompactionSummaryMarker(source="codex", summary=written,
                                       tokens_before=self.last_input_tokens)
        history = payload.get("replacement_history")
        tail: list[Message] = [] if self.base is None else [self.base.replace()]
        if isinstance(history, list):
            items = [i for i in history if isinstance(i, dict)]
            for msg in items_to_messages(items, dict(self.names)):
                if msg.role == "user" and summary and msg.text.strip() == summary.strip():
                    msg = msg.marked(mark)
                tail.append(msg)
        elif summary:  # older rollouts: only the summary text
            tail.append(Message.user(summary).marked(mark))
        entry = CompactionEntry(
            id=self.ids.new(), parent_id=self.leaf, timestamp=ts, summary=written,
            first_kept_entry_id=None,
            tokens_before=self.last_input_tokens, retained_tail=tail, usage=usage,
            details={"source": "codex", "window_number": payload.get("window_number")},
        )
        self.append(entry, {"records": records})

    def _item(self, line: Json, payload: Json, ts: str) -> None:
        if payload.get("type") in _NOT_SENT:
            self.flush()
            self.add_custom(line, ts)
            return
        meta = line.get("metadata")
        if payload.get("type") == "message" and isinstance(meta, dict) \
                and meta.get("compaction_output"):
            self.flush()
            self.compaction_output = (line, None)  # the summary reply: kept in the compaction
            return
        if _is_assistant_item(payload):
            if not self.pending.items:
                self.pending.time = ts
            self.pending.items.append(payload)
            self.pending.lines.append(line)
            return
        self.flush()
        msg = item_message(payload, self.names)
        parts = [len(msg.content)] if isinstance(msg.content, list) else None
        self.add_message(msg, ts, [line], parts)

    def flush(self) -> None:
        """Write the pending assistant items as one assistant message."""
        p = self.pending
        if p.items:
            msg = assistant_message(p.items, self.names)
            msg.model, msg.provider, msg.usage = self.model, self.provider, p.usage
            self.last_assistant = msg
            parts = [len(_content_parts(i.get("content"))) if i.get("type") == "message"
                     else 1 for i in p.items]
            self.add_message(msg, p.time, p.lines, parts)
        for line, ts in p.after:
            self.add_custom(line, ts)
        self.pending = _Pending()

    def finish(self) -> None:
        self.flush()
        if self.compaction_output is not None:  # a summary with no compaction after it
            line = self.compaction_output[0]
            self.compaction_output = None
            stamp = line.get("timestamp")
            self.add_custom(line, stamp if isinstance(stamp, str) else now())


_SUMMARY_LEAD = "use the information in this summary to assist with your own analysis:\n"


def model_summary(message: str, output: Json | None) -> str:
    """The summary the model wrote: the text of its reply (the ``compaction_output`` item),
    else the ``compacted`` message without the sentences Codex puts before it."""
    if isinstance(output, dict):
        text = "".join(str(c.get("text") or "") for c in output.get("content") or ()
                       if isinstance(c, dict))
        if text.strip():
            return text.strip()
    at = message.find(_SUMMARY_LEAD)
    return (message[at + len(_SUMMARY_LEAD):] if at >= 0 else message).strip()


def _is_user_turn(msg: Message) -> bool:
    return msg.role == "user" and not msg.text.lstrip().startswith(_CONTEXT_PREFIXES)


# -- forks ----------------------------------------------------------------------------------

def codex_home(home: str | os.PathLike[str] | None = None) -> Path:
    """Codex's home: ``home``, else ``$CODEX_HOME``, else ``~/.codex``."""
    if home is not None:
        return Path(home).expanduser()
    env = os.environ.get("CODEX_HOME")
    return Path(env).expanduser() if env else Path.home() / ".codex"


def _session_roots(near: Path | None, home: str | os.PathLike[str] | None) -> list[Path]:
    roots: list[Path] = []
    if near is not None:
        folder = near.resolve().parent
        tree = next((p for p in (folder, *folder.parents)
                     if p.name in ("sessions", "archived_sessions")), folder)
        roots.append(tree)
    base = codex_home(home)
    roots += [base / "sessions", base / "archived_sessions"]
    out: list[Path] = []
    for r in roots:
        if r.is_dir() and r not in out:
            out.append(r)
    return out


def thread_id_of(path: Path) -> str | None:
    """The thread id in a rollout's ``session_meta`` (its first line), or ``None``."""
    meta = _first_meta(path)
    tid = meta.get("id") if meta is not None else None
    return tid if isinstance(tid, str) else None


_META_LIMIT = 16 << 20  # bytes of a first line read to find a session_meta


def _first_meta(path: Path) -> Json | None:
    """The ``session_meta`` payload of a rollout's first line. Reads at most
    ``_META_LIMIT`` bytes, and never waits on a FIFO or device named ``*.jsonl``."""
    try:
        with open(open_regular_readonly(path), "rb") as f:
            while raw := f.readline(_META_LIMIT):
                if len(raw) == _META_LIMIT and not raw.endswith(b"\n"):
                    return None  # a first line this long is not a rollout's session_meta
                if raw.strip():
                    obj = parse_json(raw)
                    if isinstance(obj, dict) and obj.get("type") == "session_meta" \
                            and isinstance(obj.get("payload"), dict):
                        return cast(Json, obj["payload"])
                    return None
    except (OSError, orjson.JSONDecodeError):
        return None
    return None


def find_rollout(thread_id: str, *, near: Path | None = None,
                 home: str | os.PathLike[str] | None = None) -> Path:
    """The rollout of ``thread_id``: looked for in ``near``'s folder tree, then under
    ``$CODEX_HOME/sessions``; files whose name holds the id are read first, but only the
    ``session_meta`` decides."""
    roots = _session_roots(near, home)
    seen: set[Path] = set()
    for pass_ in (0, 1):
        for root in roots:
            for p in sorted(root.rglob("*.jsonl")):
                if p in seen or (pass_ == 0 and thread_id not in p.name):
                    continue
                seen.add(p)
                if near is not None and p.resolve() == near.resolve():
                    continue
                if thread_id_of(p) == thread_id:
                    return p
    where = ", ".join(str(r) for r in roots) or "no Codex session folder"
    raise SessionNotFound(f"the rollout of thread {thread_id} was not found (looked in {where});"
                          " copy it next to this file or set CODEX_HOME")


def _read_lines(b: _Builder, path: Path, progress: Progress | None, *,
                end_byte: int | None = None, end_ordinal: int | None = None,
                depth: int = 0, home: str | os.PathLike[str] | None = None) -> None:
    """Feed a rollout's lines to ``b``, its fork parent's first."""
    first = _first_meta(path)
    base = first.get("history_base") if first is not None else None
    if isinstance(base, dict) and isinstance(base.get("thread_id"), str):
        if depth >= _MAX_FORK_DEPTH:
            raise input_error(path, 1, "fork parents nest too deep (a cycle?)")
        parent_id = base["thread_id"]
        parent = find_rollout(parent_id, near=path, home=home)
        saved = b.thread
        b.thread = parent_id
        eb, eo = base.get("end_byte_offset"), base.get("end_ordinal_exclusive")
        _read_lines(b, parent, None, end_byte=eb if isinstance(eb, int) else None,
                    end_ordinal=eo if isinstance(eo, int) else None, depth=depth + 1, home=home)
        b.flush()
        b.thread = saved
        b.forks.append({"thread_id": parent_id, "path": str(parent),
                        "end_byte_offset": eb, "end_ordinal_exclusive": eo})
    for n, obj in _limited(path, progress if depth == 0 else None, end_byte):
        if end_ordinal is not None and isinstance(obj, dict) \
                and isinstance(obj.get("ordinal"), int) and obj["ordinal"] >= end_ordinal:
            break
        b.line(n, obj, path)


def _limited(path: Path, progress: Progress | None, end_byte: int | None
             ) -> Iterator[tuple[int, Any]]:
    if end_byte is None:
        yield from read_json_lines(path, progress)
        return
    with open(path, "rb") as f:
        data = f.read(end_byte)
    for n, raw in enumerate(data.splitlines(), start=1):
        if raw.strip():
            yield n, parse_line(raw, path, n)


def read(path: Path, progress: Progress | None = None, *,
         home: str | os.PathLike[str] | None = None) -> Imported:
    """Read a Codex rollout, with its fork parents (see the module notes)."""
    b = _Builder(path)
    _read_lines(b, path, progress, home=home)
    b.finish()
    if b.meta is None and not b.entries:
        raise input_error(path, None, "no Codex rollout lines found (session_meta, "
                          "response_item...); is this a Codex session file?")
    meta = b.meta or {}
    leaf = b.leaf
    if b.name is not None:
        stamp = b.entries[-1].timestamp if b.entries else now()
        b.entries.append(SessionInfoEntry(id=b.ids.new(), parent_id=leaf, timestamp=stamp,
                                          name=b.name))
        leaf = b.entries[-1].id
    report: Json = {"records": dict(sorted(b.records.items())),
                    "custom_entries": dict(sorted(b.custom.items())),
                    "files": [{"path": str(path), "role": "main", "lines": b.lines}]}
    if b.unknown:
        report["unknown_types"] = sorted(b.unknown)
    if b.forks:
        report["fork_parents"] = b.forks
    info = imported_metadata("codex", path, cli_version=meta.get("cli_version"),
                             forked_from_id=meta.get("forked_from_id"), report=report)
    sid, cwd, ts = meta.get("id"), meta.get("cwd"), meta.get("timestamp")
    parent = meta.get("forked_from_id")
    hdr = header(sid if isinstance(sid, str) else None, ts if isinstance(ts, str) else None,
                 cwd=cwd if isinstance(cwd, str) else None, metadata=info,
                 parent_session=parent if isinstance(parent, str) else None)
    return Imported(hdr, b.entries, leaf, report=report)


# -- finding threads ------------------------------------------------------------------------

@dataclass(frozen=True)
class ThreadRow:
    """A Codex thread found under ``$CODEX_HOME/sessions``."""

    id: str
    path: Path
    cwd: str | None
    modified: float
    first_prompt: str | None
    forked_from: str | None


def list_sessions(home: str | os.PathLike[str] | None = None) -> list[ThreadRow]:
    """The rollouts under ``<home>/sessions`` (default ``$CODEX_HOME``/``~/.codex``), newest
    first, with the first prompt the user typed."""
    root = codex_home(home) / "sessions"
    if not root.is_dir():
        return []
    rows = [r for r in (_row(p) for p in root.rglob("*.jsonl")) if r is not None]
    return sorted(rows, key=lambda r: r.modified, reverse=True)


def _row(path: Path) -> ThreadRow | None:
    meta: Json | None = None
    first: str | None = None
    try:
        with open(open_regular_readonly(path), "rb") as f:
            for raw in f:
                try:
                    obj = parse_json(raw)
                except orjson.JSONDecodeError:
                    continue
                if not isinstance(obj, dict) or not isinstance(obj.get("payload"), dict):
                    continue
                payload = obj["payload"]
                if meta is None and obj.get("type") == "session_meta":
                    meta = payload
                elif (obj.get("type") == "response_item" and payload.get("type") == "message"
                      and payload.get("role") == "user"):
                    text = "".join(str(c.get("text", "")) for c in payload.get("content") or ()
                                   if isinstance(c, dict))
                    if text and not text.lstrip().startswith(_CONTEXT_PREFIXES):
                        first = text
                        break
        modified = path.stat().st_mtime
    except OSError:
        return None
    if meta is None or not isinstance(meta.get("id"), str):
        return None
    cwd, parent = meta.get("cwd"), meta.get("forked_from_id")
    return ThreadRow(meta["id"], path, cwd if isinstance(cwd, str) else None, modified, first,
                     parent if isinstance(parent, str) else None)


def find_thread(key: str, home: str | os.PathLike[str] | None = None) -> Path:
    """The rollout of the thread whose id is ``key`` or starts with it (a path as is)."""
    return find_by_id(key, lambda: list_sessions(home), "Codex thread",
                      codex_home(home) / "sessions")
