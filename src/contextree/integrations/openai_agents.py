"""A contextree ``Session`` for the OpenAI Agents SDK (``contextree[openai-agents]``).

``ContextreeSession`` implements the SDK's ``Session`` protocol (and its context-aware
``wrapper=`` opt-in, and ``run_compaction``) on any contextree session: a JSONL file, memory or
PostgreSQL. What it adds to the SDK's own stores:

- **Every item is kept exactly.** Each item's JSON is stored as it came (ids, call ids,
  reasoning ``encrypted_content`` and summaries), next to a contextree ``Message`` that says
  the same thing, so contextree's compaction, stats and tools understand the conversation.
  The items of one model response form one assistant message (thinking, text, tool calls).
  Only two things change: a tool output's text is cut to the truncation limits (the whole
  saved to the overflow store), and a lone surrogate, which UTF-8 cannot hold, becomes U+FFFD.
- **Compaction is an entry.** ``add_items`` runs contextree's ladder once the context
  reaches ``compact_at`` of ``window``, whatever the model API (the ``Runner`` calls
  ``run_compaction`` only for Responses models, and not after a turn with a tool call), and
  appends a compaction entry; nothing is cleared and re-added. ``get_items`` then returns the
  compacted view; the full history stays in the session.
- **The view is always valid input.** No ``function_call_output`` without its call, no
  reasoning item without the item that followed it; a call the conversation moved past
  without a result gets an explicit "interrupted" output (calls still open at the end of
  the branch are left open: an approval or a resumed run may answer them, and the SDK leaves
  unanswered calls out of the model's input).
- **Nothing is deleted by accident.** ``pop_item`` moves the leaf back (the popped item, the
  one ``get_items`` showed last, stays in the tree), ``clear_session`` starts an empty branch;
  ``clear_session(delete=True)`` (or ``ContextreeSession(..., delete_on_clear=True)``) really
  deletes.
- **Writes survive cancellation**: a write runs to its end in a worker thread even when the
  task that awaited it is cancelled; the cancellation is raised once the write is done.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar, cast

import orjson

from .._context import INTERRUPTED, interrupted_result, take_open
from .._limits import parse_json
from .._messages import ImagePart, Message, TextPart, ThinkingPart, ToolCall, Usage
from .._messages import _replace_surrogates as _valid_data
from .._overflow import OverflowStore
from .._session import Session
from .._truncation import LIMITS, Direction, TruncationLimits, is_truncated
from ..compaction import CompactionLadder, CompactionResult
from ..entries import BranchSummaryEntry, CompactionEntry, CustomMessageEntry, MessageEntry
from ..errors import InvalidArgument, InvalidEntry, missing_extra
from ..markers import TRUNCATION_KEY, Kind
from ..models._base import Model
from ..storage import key_to_session_id
from ..tokens import TokenCounter, count_context
from ._compaction import CompactionOptions
from ._ids import checked_id, session_in
from ._results import bounded_result

try:
    from agents.memory.session_settings import SessionSettings, resolve_session_limit
    from agents.run_config import ModelInputData
except ImportError as e:  # pragma: no cover - exercised without the extra installed
    raise missing_extra("openai-agents", "agents") from e

if TYPE_CHECKING:
    from agents.items import TResponseInputItem
    from agents.memory.session import OpenAIResponsesCompactionArgs
    from agents.run_config import CallModelData
    from agents.run_context import RunContextWrapper

__all__ = ["ITEMS_KEY", "ContextreeSession", "item_message", "message_items"]

ITEMS_KEY = "openai_agents_items"
"""The ``Message`` extra field that holds the JSON text of the SDK items it stands for."""
_CALL_TYPE_KEY = "openai_agents_type"  # ToolCall extra: the item type, when not function_call

# Tool calls answered by an output item that carries the same ``call_id``.
CALL_OUTPUTS: dict[str, str] = {
    "function_call": "function_call_output",
    "custom_tool_call": "custom_tool_call_output",
    "computer_call": "computer_call_output",
    "local_shell_call": "local_shell_call_output",
    "shell_call": "shell_call_output",
    "apply_patch_call": "apply_patch_call_output",
    "tool_search_call": "tool_search_output",
    "program": "program_output",
}
OUTPUT_TYPES = frozenset(CALL_OUTPUTS.values())
# Outputs whose ``output`` is text, so compaction may show a placeholder instead.
_TEXT_OUTPUTS = frozenset({"function_call_output", "custom_tool_call_output",
                           "local_shell_call_output"})
# Calls that can be given an explicit "interrupted" output; others are left out instead.
_SYNTHETIC_OUTPUTS = {"function_call": "function_call_output",
                      "custom_tool_call": "custom_tool_call_output"}
_INPUT_ROLES = frozenset({"user", "system", "developer"})
# Outputs whose text is cut to the truncation limits, and the end of it that is kept (a
# shell's last lines, as the runtime keeps for its shell tool).
_CUT_FROM: dict[str, Direction] = {"function_call_output": "head",
                                   "custom_tool_call_output": "head",
                                   "apply_patch_call_output": "head",
                                   "local_shell_call_output": "tail",
                                   "shell_call_output": "tail"}
# Outputs the input filter cut before ``add_items`` stored them (normally one turn's): kept
# until stored, at most this many (only outputs the session never stores go over it).
_PENDING = 256

T = TypeVar("T")
Item = dict[str, Any]
_CutKey = tuple[str, str | None, tuple[int, int]]  # type, call id, whole output's fingerprint


# -- items <-> contextree messages ----------------------------------------------------------

def _kind(item: Item) -> str:
    """``input`` (a user, system or developer message, or an approval), ``output`` (a tool
    result) or ``model`` (anything a model response holds: text, reasoning, calls)."""
    t = item.get("type")
    if t is None or t == "message":
        return "model" if item.get("role") == "assistant" else "input"
    if t in OUTPUT_TYPES:
        return "output"
    if t == "mcp_approval_response":
        return "input"
    return "model"


def _dumps(item: Item) -> str:
    """The item's JSON. Read back with orjson (fast) unless orjson would not give the same
    values back (integers beyond 64 bits, NaN): then the text starts with a space, which
    tells ``_loads`` to use the standard library's parser."""
    text = json.dumps(item, ensure_ascii=False, separators=(",", ":"))
    try:
        if orjson.loads(text) == json.loads(text):
            return text
    except orjson.JSONDecodeError:  # NaN, Infinity
        pass
    return " " + text


def _loads(text: str) -> Item:
    if text[:1] == " ":
        return cast(Item, parse_json(text, exact=True))
    return cast(Item, parse_json(text))


def _compact_json(value: Any) -> str:
    try:
        return orjson.dumps(value).decode()
    except TypeError:
        return json.dumps(value, ensure_ascii=False, default=str)


def _content_text(content: Any) -> str:
    """The text of a message's or an output's content (a string or a list of parts)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        out = []
        for part in content:
            if isinstance(part, dict):
                text = part.get("text", part.get("refusal"))
                out.append(text if isinstance(text, str) else _compact_json(part))
            else:
                out.append(str(part))
        return "\n".join(out)
    return _compact_json(content)


def _input_parts(content: Any) -> str | list[TextPart | ImagePart]:
    if not isinstance(content, list):
        return _content_text(content)
    parts: list[TextPart | ImagePart] = []
    for part in content:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "input_image" and isinstance(part, dict):
            url = part.get("image_url")
            # an inline data URL is already in the item: do not copy it into the message
            keep = url if isinstance(url, str) and not url.startswith("data:") else None
            parts.append(ImagePart(url=keep, mime_type=None if keep else "image/*"))
        else:
            parts.append(TextPart(text=_content_text([part])))
    return parts


def _call(item: Item) -> ToolCall | None:
    call_id = item.get("call_id")
    t = item.get("type")
    if not isinstance(call_id, str) or t not in CALL_OUTPUTS:
        return None
    name = item.get("name")
    if t == "function_call":
        raw = item.get("arguments")
        try:
            args = parse_json(raw, exact=True) if isinstance(raw, str) and raw else {}
        except ValueError:
            args = {"arguments": raw}
        if not isinstance(args, dict):
            args = {"arguments": args}
        args = _valid_data(args)  # an escaped lone surrogate ("\\udcff") decodes to one
    else:
        args = {k: v for k, v in item.items()
                if k not in ("type", "id", "call_id", "status", "name")}
    call = ToolCall(id=call_id, name=name if isinstance(name, str) else str(t),
                    arguments=args)
    if t != "function_call":
        call.set_extra({_CALL_TYPE_KEY: t})
    return call


def _checked_items(items: Sequence[object]) -> list[Item]:
    """The items as dicts, each lone surrogate in them (which UTF-8 cannot store) replaced
    by U+FFFD; ``InvalidEntry`` (before anything is stored) for one that is not a JSON object
    of JSON data, as the SDK's own items always are."""
    out: list[Item] = []
    for i, item in enumerate(items):
        if not isinstance(item, Mapping):
            raise InvalidEntry(f"item {i} is {type(item).__name__}, not an item (a dict); "
                               "nothing was stored")
        try:
            json.dumps(item, ensure_ascii=False, allow_nan=True).encode()
        except UnicodeEncodeError:  # a lone surrogate (a file name os.listdir gave) -> U+FFFD
            item = _valid_data(dict(item))
        except (TypeError, ValueError, RecursionError) as e:
            raise InvalidEntry(f"item {i} holds data with no JSON form ({e}); items must "
                               "hold only dicts, lists, strings, numbers, booleans and None "
                               "(convert bytes, sets, datetimes and Decimals first); nothing "
                               "was stored") from None
        out.append(dict(cast(Item, item)))
    return out


def _cut_output(item: Item, cut: Callable[[str, Direction], str]) -> Item:
    """``item`` (a tool output) with each text of its output passed through ``cut``: the
    output when it is text, else the ``text`` of its parts and a shell's stdout and stderr."""
    direction = _CUT_FROM[str(item.get("type"))]
    out = item.get("output")
    if isinstance(out, str):
        return {**item, "output": cut(out, direction)}
    if not isinstance(out, list):
        return item  # a screenshot, no output: nothing to cut
    parts = []
    for part in out:
        if isinstance(part, dict):
            part = {k: cut(v, direction) if k in ("text", "stdout", "stderr") and
                    isinstance(v, str) else v for k, v in part.items()}
        parts.append(part)
    return {**item, "output": parts}


def _fingerprint(value: Any) -> tuple[int, int]:
    """What tells one tool output from another without keeping it (a str caches its hash)."""
    text = value if isinstance(value, str) else _compact_json(value)
    return len(text), hash(text)


def _call_names(items: Sequence[object]) -> dict[str, str]:
    """The tool name of each call among ``items``, by call id."""
    return {i["call_id"]: i["name"] for i in items if isinstance(i, dict)
            and isinstance(i.get("call_id"), str) and isinstance(i.get("name"), str)}


def item_message(items: Sequence[Item], texts: Sequence[str] | None = None) -> Message:
    """The contextree message that stands for ``items``: one input message, one tool output,
    or the items of one model response. The items' JSON (``texts``, or ``items`` encoded) is
    kept in the message's ``openai_agents_items`` extra field."""
    if not items:
        raise InvalidArgument("item_message needs at least one item")
    stored = list(texts) if texts is not None else [_dumps(i) for i in items]
    first = items[0]
    kind = _kind(first)
    if kind == "input" and len(items) == 1:
        role = first.get("role")
        if first.get("type") == "mcp_approval_response" or role not in _INPUT_ROLES:
            msg = Message(role="user", content=_compact_json(first))
        else:
            msg = Message(role="system" if role == "developer" else str(role),
                          content=_input_parts(first.get("content")))  # type: ignore[arg-type]
    elif kind == "output" and len(items) == 1:
        call_id = first.get("call_id")
        output = first.get("output", first.get("tools"))
        text = _content_text(output) if first.get("type") in _TEXT_OUTPUTS else \
            _compact_json(output)
        if isinstance(call_id, str):
            msg = Message.tool(text, tool_call_id=call_id)
        else:
            msg = Message(role="user", content=text)
    else:
        parts: list[TextPart | ThinkingPart] = []
        calls: list[ToolCall] = []
        for item in items:
            t = item.get("type")
            if t == "reasoning":
                summary = item.get("summary") or []
                thought = "\n".join(s.get("text", "") for s in summary if isinstance(s, dict))
                parts.append(ThinkingPart(thinking=thought, redacted=not thought))
            elif t is None or t == "message":
                parts.append(TextPart(text=_content_text(item.get("content"))))
            else:
                call = _call(item)
                if call is not None:
                    calls.append(call)
                else:
                    rest = {k: v for k, v in item.items() if k not in ("id", "status")}
                    parts.append(TextPart(text=_compact_json(rest)))
        msg = Message(role="assistant", content=parts or "",  # type: ignore[arg-type]
                      tool_calls=calls or None)
    return msg.set_extra({ITEMS_KEY: stored})


def message_items(message: Message) -> list[Item]:
    """The SDK items for a contextree message: the stored ones when it has them, else the
    message converted (a message contextree or another tool wrote)."""
    stored = message.extra.get(ITEMS_KEY)
    if isinstance(stored, list):
        return [_loads(t) for t in stored]
    return _convert(message)


def _convert(m: Message) -> list[Item]:
    if m.role == "tool":
        return [{"type": "function_call_output", "call_id": m.tool_call_id or "",
                 "output": m.text}]
    if m.role != "assistant":
        return [{"role": m.role if m.role in _INPUT_ROLES else "user", "content": m.text}]
    out: list[Item] = []
    if m.text:
        out.append({"role": "assistant", "content": m.text})
    for c in m.tool_calls or ():
        out.append({"type": "function_call", "call_id": c.id, "name": c.name,
                    "arguments": _compact_json(c.arguments)})
    return out


@dataclass(frozen=True)
class _Stored:
    """One stored item in the view: its JSON text (or a made-up item), type and call id."""

    payload: str | Item
    type: str | None
    call_id: str | None
    group: str | None  # the entry that holds it: items of one model response share it


def _stored(payload: str | Item, group: str | None) -> _Stored:
    item = _loads(payload) if isinstance(payload, str) else payload
    t = item.get("type")
    call_id = item.get("call_id")
    return _Stored(payload, t if isinstance(t, str) else None,
                   call_id if isinstance(call_id, str) else None, group)


def _type(item: Item) -> str | None:
    t = item.get("type")
    return t if isinstance(t, str) else None


def _call_id(item: Item) -> str | None:
    c = item.get("call_id")
    return c if isinstance(c, str) else None


def _group_items(stored: Sequence[_Stored]) -> list[_Stored]:
    """The items of one model response that go into the view: a reasoning item only when
    another item of the response follows it."""
    out = []
    for i, s in enumerate(stored):
        if s.type == "reasoning" and all(x.type == "reasoning" for x in stored[i + 1:]):
            continue
        out.append(s)
    return out


class _View:
    """The view at ``leaf`` (``items``), the calls at its end still waiting for an output
    (``pending``: call id, with its call type and tool name, in call order: calls that share
    an id are answered in order) and the context's size in tokens (``tokens``)."""

    __slots__ = ("items", "leaf", "pending", "tokens")

    def __init__(self, leaf: str | None, items: list[_Stored],
                 pending: list[tuple[str, tuple[str, str | None]]],
                 tokens: int) -> None:
        self.leaf = leaf
        self.items = items
        self.pending = pending
        self.tokens = tokens

    def extend(self, appended: Sequence[tuple[Message, tuple[_Stored, ...]]],
               counter: TokenCounter) -> bool:
        """Bring the view up to date with messages appended after its leaf, as a rebuild
        would (``build_context`` then the item rules); ``False`` when only a rebuild can."""
        for m, stored in appended:
            if m.role == "tool":
                if take_open(self.pending, m.tool_call_id) is None:
                    continue  # an orphan or a second answer: left out
                self.items.extend(stored)
            else:
                for call_id, (t, name) in self.pending:  # moved past them
                    out = _SYNTHETIC_OUTPUTS.get(t)
                    if out is None:
                        return False  # the call has to go from the view: rebuild
                    self.items.append(_Stored({"type": out, "call_id": call_id,
                                               "output": INTERRUPTED}, out, call_id, None))
                    self.tokens += counter.count_message(interrupted_result(call_id, name))
                self.pending = []
                if m.role == "assistant":
                    self.items.extend(_group_items(stored))
                    for c in m.tool_calls or ():
                        self.pending.append((c.id, (str(c.extra.get(_CALL_TYPE_KEY,
                                                                    "function_call")), c.name)))
                else:
                    self.items.extend(stored)
            usage = m.usage
            if m.role == "assistant" and usage is not None and usage.context_tokens > 0:
                self.tokens = usage.context_tokens + usage.output
            else:
                self.tokens += counter.count_message(m)
        return True


# -- the session ------------------------------------------------------------------------------

class ContextreeSession(CompactionOptions):
    """An OpenAI Agents SDK session stored in a contextree session.

    ``target`` is a catalog that keeps the session under ``session_id`` (a directory, a
    path ending in a separator, a path that does not exist yet and does not end in
    ``.jsonl``: the folder is made; a ``postgresql://`` URL without ``#``, any registered
    scheme), one session (an existing file, a path ending in ``.jsonl``, a URL with
    ``#SESSION_ID``: ``InvalidArgument`` if it holds another session id, as one file is one
    conversation), a ``contextree.Session`` (used as it is, whatever its id: how to share
    one session between ids on purpose), or ``None`` for memory. The session is opened, or
    created with ``session_id`` as its id. ``window``
    (in tokens) turns on compaction: ``run_compaction`` compacts once the context reaches
    ``compact_at`` of it, down to ``compact_to``, with ``ladder`` (default: clear old tool
    results, drop old turns, then ``Summarize(model)`` if a ``model`` is given, then the
    offline digest). Each tool output is stored cut to ``limits``, the whole of it saved to
    ``store`` with a hint the model can follow to read it, as the runtime's tool pipeline
    does; pass ``call_model_input_filter`` to the ``RunConfig`` for the model to see the cut
    output within the run that made it too.
    """

    def __init__(
        self,
        session_id: str,
        target: str | os.PathLike[str] | Session | None = None,
        *,
        session_settings: SessionSettings | dict[str, Any] | None = None,
        window: int | None = None,
        compact_at: float = 0.7,
        compact_to: float = 0.4,
        ladder: CompactionLadder | None = None,
        model: Model | None = None,
        counter: TokenCounter | None = None,
        delete_on_clear: bool = False,
        limits: TruncationLimits = LIMITS,
        store: OverflowStore | None = None,
    ) -> None:
        self.session_id = session_id
        self.limits = limits
        """The caps on one tool output (lines, bytes, characters per line) as it is stored."""
        self.store = store
        """Where a cut tool output is saved whole (``None``: the per-user overflow store)."""
        if session_settings is None:
            self.session_settings: SessionSettings | None = SessionSettings()
        elif isinstance(session_settings, SessionSettings):
            self.session_settings = session_settings
        else:
            self.session_settings = SessionSettings(**session_settings)
        self._window: int | None = None
        self._set_compaction_options(window, compact_at, compact_to, ladder, counter)
        self.model = model
        self.delete_on_clear = delete_on_clear
        self.last_compaction: CompactionResult | None = None
        """What the latest ``run_compaction`` that ran the ladder did."""
        self._target: str | os.PathLike[str] | None = None
        if isinstance(target, Session):
            self.session = target
        elif target is None:
            self.session = Session.in_memory(session_id=session_id)
        else:
            self._target, one = session_in(target, checked_id(session_id, "Agents session id"))
            wanted = key_to_session_id(session_id)
            self.session = Session.open_or_create(self._target, session_id=wanted)
            if self.session.id != wanted:
                held = self.session.id
                self.session.close()
                named = repr(wanted)
                if wanted != session_id:
                    named += f" (for {session_id!r})"
                if not one:  # a copy or a link put where the folder keeps another id's
                    raise InvalidArgument(
                        f"{os.fspath(self._target)!r}, where {os.fspath(target)!r} keeps "
                        f"session {named}, holds session {held!r} (a copy or a link of "
                        f"another session's file?): it is not opened, so that no session id "
                        f"reads another's conversation. Move that file away (or open it "
                        f"yourself with contextree.Session.open and pass the Session)")
                raise InvalidArgument(
                    f"{os.fspath(target)!r} holds session {held!r}, not {named}: one "
                    f"session file is one conversation, which another session id would "
                    f"read and write. Pass a directory (made if missing) or a catalog URL "
                    f"to keep one session per id, or the id the file holds ({held!r}); to "
                    f"share this one session between ids on purpose, open it yourself: "
                    f"ContextreeSession({session_id!r}, contextree.Session.open(...))")
        self.lock = threading.RLock()
        """Held by every operation; hold it to use ``session`` while a run may be going on."""
        self._cache: dict[str, tuple[_Stored, ...]] = {}
        self._v: _View | None = None
        self._usage_seen: object = None  # the SDK's usage record of the last call recorded
        self._failed_at: int | None = None  # the size at which the ladder last fell short
        # (type, call id, fingerprint of the whole output) of outputs the input filter cut
        # that the session does not hold yet -> their cut output and truncation record
        self._cuts: dict[_CutKey, tuple[Any, dict[str, Any]]] = {}
        self._cut_texts: set[tuple[int, int]] = set()  # fingerprints of outputs cut already
        # the cut outputs this handle stored, by the same key: the session's copy is what
        # the filter sends (one small entry an output, beside the stored item it points to)
        self._held: dict[_CutKey, _Stored] = {}

    @property
    def window(self) -> int | None:
        """The context window in tokens that compaction keeps the view inside; ``None``: no
        compaction. Only with a window is the session *compaction-aware* (``run_compaction``
        is offered to the SDK): the SDK then digests every model input for it, work it is
        spared when there is nothing to compact."""
        return self._window

    @window.setter
    def window(self, value: int | None) -> None:
        self._window = value
        if value is None:
            setattr(self, "run_compaction", None)  # noqa: B010 - hides the method
        else:
            self.__dict__.pop("run_compaction", None)

    # -- the Session protocol ----------------------------------------------------------------
    async def get_items(self, limit: int | None = None, *,
                        wrapper: RunContextWrapper[Any] | None = None
                        ) -> list[TResponseInputItem]:
        """The current branch's compacted, pairing-valid view: its latest ``limit`` items
        (default ``session_settings.limit``; ``None`` or negative: all, 0: none), oldest
        first. When the cut falls between calls and their outputs, the outputs at the start
        are left out rather than sent without their calls."""
        n = resolve_session_limit(limit, self.session_settings)
        items = await asyncio.to_thread(self.view, n)
        return cast("list[TResponseInputItem]", items)

    async def add_items(self, items: list[TResponseInputItem], *,
                        wrapper: RunContextWrapper[Any] | None = None) -> None:
        """Append ``items`` to the current branch, durably (one sync for the batch)."""
        if not items:
            return
        usage = self._new_usage(wrapper)
        batch = _checked_items(items)
        await _settle(asyncio.to_thread(self._locked, self._add, batch, usage))

    async def pop_item(self, *, wrapper: RunContextWrapper[Any] | None = None
                       ) -> TResponseInputItem | None:
        """Take the newest item off the branch and return it. Nothing is deleted: the leaf
        moves back (the rest of its model response, and a compaction that came after it, are
        written again under the new leaf)."""
        item = await _settle(asyncio.to_thread(self._locked, self._pop))
        return cast("TResponseInputItem | None", item)

    async def clear_session(self, *, wrapper: RunContextWrapper[Any] | None = None,
                            delete: bool | None = None) -> None:
        """Start an empty branch (the history stays in the tree); with ``delete`` (default
        ``delete_on_clear``) delete the session and start a new, empty one."""
        really = self.delete_on_clear if delete is None else delete
        await _settle(asyncio.to_thread(self._locked, self._clear, really))

    async def run_compaction(self, args: OpenAIResponsesCompactionArgs | None = None, *,
                             wrapper: RunContextWrapper[Any] | None = None) -> None:
        """Run contextree's compaction ladder if the context has reached ``compact_at`` of
        ``window`` (or ``args["force"]``); the result is appended as a compaction entry and
        kept in ``last_compaction``. Offered only when the session has a ``window``."""
        force = bool((args or {}).get("force", False))
        await _settle(asyncio.to_thread(self._locked, self.compact, force=force))

    async def call_model_input_filter(self, data: CallModelData[Any]) -> ModelInputData:
        """``RunConfig(call_model_input_filter=session.call_model_input_filter)``: each tool
        output in the model input cut as the session stores it. Within a run the SDK sends
        a new output from the run's own items, not the session's, so without it the model
        sees the whole output once, in the run that made it."""
        items = await asyncio.to_thread(self._locked, self._bounded_input,
                                        list(data.model_data.input))
        return ModelInputData(input=cast("list[TResponseInputItem]", items),
                              instructions=data.model_data.instructions)

    # -- synchronous API (what the async methods run in a worker thread) ---------------------
    def view(self, limit: int | None = None) -> list[Item]:
        """The items ``get_items(limit)`` returns, computed on the calling thread."""
        with self.lock:
            items = self._current().items
            whole = limit is None or limit < 0
            stored = list(items) if whole else _trim_head(_tail(items, limit or 0))
        return [_loads(s.payload) if isinstance(s.payload, str) else dict(s.payload)
                for s in stored]

    def compact(self, *, force: bool = False, window: int | None = None
                ) -> CompactionResult | None:
        """Run the compaction ladder now (see ``run_compaction``); ``None`` when the context
        is under the trigger (and not ``force``), calls at its end still wait for their
        outputs, or there is no window."""
        with self.lock:
            return self._compact_if_due(force, window)

    def close(self) -> None:
        with self.lock:
            self.session.close()

    async def __aenter__(self) -> ContextreeSession:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()

    def __enter__(self) -> ContextreeSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"ContextreeSession({self.session_id!r}, {self.session.location!r})"

    # -- internals ---------------------------------------------------------------------------
    def _locked(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        with self.lock:
            return fn(*args, **kwargs)

    def _new_usage(self, wrapper: RunContextWrapper[Any] | None) -> Usage | None:
        """The usage of the model call that produced what is being added, if the SDK handed
        over its run context and a call finished since the last time."""
        if wrapper is None:
            return None
        entries = getattr(getattr(wrapper, "usage", None), "request_usage_entries", None)
        if not entries:
            return None
        last = entries[-1]
        if last is self._usage_seen:
            return None  # that call's usage is on an earlier message
        self._usage_seen = last
        details = getattr(last, "input_tokens_details", None)
        cached = int(getattr(details, "cached_tokens", 0) or 0)
        inp = int(last.input_tokens)
        return Usage(input=max(inp - cached, 0), cache_read=cached,
                     output=int(last.output_tokens), total=int(last.total_tokens))

    def _bounded(self, item: Item, names: Mapping[str, str]
                 ) -> tuple[Item, dict[str, Any] | None, tuple[int, int] | None]:
        """``item`` as the model should see it: a tool output with its text cut to ``limits``
        (the whole saved to ``store``), its truncation record and the whole output's
        fingerprint; anything else as it is. An output is cut and saved once, however many
        outputs a run or the session holds, though both ``add_items`` and the input filter
        see it (the filter, on every model call of the run): once the session holds the cut
        output, that is what is given back."""
        t = _type(item)
        if t not in _CUT_FROM or "output" not in item:
            return item, None, None
        call_id = _call_id(item)
        fingerprint = _fingerprint(item["output"])
        if fingerprint in self._cut_texts:  # the session's own cut copy (its hint may go over)
            return item, None, None
        key = (t, call_id, fingerprint)
        hit = self._cuts.get(key)
        if hit is not None:
            return {**item, "output": hit[0]}, hit[1], fingerprint
        held = self._held.get(key)
        if held is not None:
            stored = _loads(held.payload) if isinstance(held.payload, str) else held.payload
            return {**item, "output": stored.get("output")}, self._record(held), fingerprint
        records: list[dict[str, Any]] = []

        def cut(text: str, direction: Direction) -> str:
            c = bounded_result(text, store=self.store, session_id=self.session.id,
                               label=names.get(call_id or "", t), limits=self.limits,
                               direction=direction)
            if c.truncated:
                records.append(c.meta())
            return c.text

        bounded = _cut_output(item, cut)
        if not records:
            return bounded, None, None
        self._cuts[key] = (bounded["output"], records[0])
        self._cut_texts.add(_fingerprint(bounded["output"]))
        while len(self._cuts) > _PENDING:
            del self._cuts[next(iter(self._cuts))]
        return bounded, records[0], fingerprint

    def _record(self, held: _Stored) -> dict[str, Any] | None:
        """The truncation record of the stored message that holds ``held``."""
        entry = self.session.storage.get(held.group) if held.group else None
        meta = entry.message.meta if isinstance(entry, MessageEntry) else None
        return {TRUNCATION_KEY: meta[TRUNCATION_KEY]} if meta and is_truncated(meta) else None

    def _bounded_input(self, items: list[Any]) -> list[Any]:
        """The model input with each tool output cut (``_bounded``)."""
        self._current()  # knows the outputs the session holds cut
        names = _call_names(items)
        return [self._bounded(i, names)[0] if isinstance(i, dict) else i for i in items]

    def _add(self, batch: list[Item], usage: Usage | None) -> None:
        names = _call_names(batch)
        groups: list[list[Item]] = []
        records: list[dict[str, Any] | None] = []  # of each group's first item (a tool output)
        origins: list[tuple[int, int] | None] = []  # of each group's first item
        for raw in batch:
            item, record, origin = self._bounded(raw, names)
            if _kind(item) == "model" and groups and _kind(groups[-1][-1]) == "model":
                groups[-1].append(item)
            else:
                groups.append([item])
                records.append(record)
                origins.append(origin)
        messages = [item_message(g) for g in groups]
        for m, record in zip(messages, records, strict=True):
            if record is not None:
                m.meta = {**(m.meta or {}), **record}
        if usage is not None:
            for m in reversed(messages):
                if m.role == "assistant":
                    m.usage = usage
                    break
        view = self._v if self._v is not None and self._v.leaf == self.session.leaf_id \
            else None
        self._v = None
        appended: list[tuple[Message, tuple[_Stored, ...]]] = []
        with self.session.batch():
            for m, g, origin in zip(messages, groups, origins, strict=True):
                eid = self.session.append_message(m)
                texts = m.extra[ITEMS_KEY]
                stored = tuple(_Stored(t, _type(i), _call_id(i), eid)
                               for t, i in zip(texts, g, strict=True))
                if origin is not None:  # the session holds it now: found there from here on
                    key = (str(stored[0].type), stored[0].call_id, origin)
                    self._held.setdefault(key, stored[0])
                    self._cuts.pop(key, None)
                self._cache[eid] = stored
                appended.append((m, stored))
        first = self.session.storage.get(appended[0][1][0].group or "") if appended else None
        if first is not None and view is not None and first.parent_id != view.leaf:
            view = None  # another handle appended between our look and our append
        if view is not None and view.extend(appended, self.counter):
            view.leaf = self.session.leaf_id
            self._v = view
        self._compact_if_due()

    def _compact_if_due(self, force: bool = False, window: int | None = None
                        ) -> CompactionResult | None:
        """Run the ladder when the view has reached the trigger (or ``force``), after a run
        that could not reach the target only once it has grown by a tenth of the window.
        ``add_items`` calls it: the Runner calls ``run_compaction`` only for a Responses
        model's turn without local tool output, so a Chat Completions model (vLLM, Ollama)
        or a turn with a tool call would never compact otherwise. Calls still open at the
        end of the view wait for their outputs first."""
        window = window or self.window
        if window is None or self.session.leaf_id is None:
            return None
        view = self._current()
        if not force and (view.pending
                          or not self._compaction_due(view.tokens, self._failed_at, window)):
            return None
        result = self._compact(self.session, self.model, window=window, force=force)
        if result is None:
            return None
        self.last_compaction = result
        if result.entry_id is None:
            self._failed_at = result.tokens_before
        else:
            self._failed_at = None if result.reached_target else result.tokens_after
        return result

    def _pop(self) -> Item | None:
        """Take off the newest item ``get_items`` shows, as the SDK's own sessions do: a
        reasoning item is shown only before another item of its response, so one left last
        goes with the item popped, and one that was last already is passed over."""
        popped = self._pop_last()
        while popped is not None and _type(popped) == "reasoning":
            popped = self._pop_last()
        return popped

    def _pop_last(self) -> Item | None:
        """Take off the newest stored item, and the reasoning items it leaves last."""
        s = self.session
        branch = s.branch()
        for i in range(len(branch) - 1, -1, -1):
            e = branch[i]
            if isinstance(e, MessageEntry | BranchSummaryEntry | CustomMessageEntry):
                break
        else:
            return None
        later = [x for x in branch[i + 1:] if isinstance(x, CompactionEntry)]
        if isinstance(e, MessageEntry):
            stored = e.message.extra.get(ITEMS_KEY)
            texts = list(stored) if isinstance(stored, list) else \
                [_dumps(x) for x in _convert(e.message)]
        else:
            texts = [_dumps(x) for x in self._entry_items(e)]
        if not texts:  # an empty message: nothing to give back, but it goes all the same
            texts = []
        popped = texts[-1] if texts else None
        rest = texts[:-1]
        while rest and _type(_loads(rest[-1])) == "reasoning":
            rest.pop()
        with s.batch():
            s.move_to(e.parent_id)
            rest_id = None
            if rest:
                rest_id = s.append_message(item_message([_loads(t) for t in rest], rest))
            if later:
                c = later[-1]
                first = rest_id if c.first_kept_entry_id == e.id else c.first_kept_entry_id
                s.append_compaction(
                    summary=c.summary, first_kept_entry_id=first, tokens_before=c.tokens_before,
                    tokens_after=c.tokens_after, retained_tail=c.retained_tail,
                    cleared={k: v for k, v in (c.cleared or {}).items() if k != e.id},
                    pinned=[p for p in (c.pinned or ()) if p != e.id], details=c.details,
                    usage=c.usage, from_hook=c.from_hook, receipt=c.receipt)
        return _loads(popped) if popped is not None else None

    def _entry_items(self, e: BranchSummaryEntry | CustomMessageEntry) -> list[Item]:
        text = e.summary if isinstance(e, BranchSummaryEntry) else e.content
        role = "system" if isinstance(e, BranchSummaryEntry) else "user"
        return [{"role": role, "content": text}]

    def _clear(self, delete: bool) -> None:
        s = self.session
        if not delete:
            s.move_to(None)
            return
        session_id = s.id
        if s.location == "memory":
            s.close()
            self.session = Session.in_memory(session_id=session_id)
        else:
            target = self._target if self._target is not None else s.location
            s.close()
            Session.delete(target)
            self.session = Session.create(target, session_id=session_id)  # the same id again
        self._cache.clear()
        self._held.clear()  # deleted with the session, spills and all
        self._cuts.clear()
        self._v = None

    def _current(self) -> _View:
        """The view at the current leaf: kept up to date by ``_add``, rebuilt otherwise."""
        v = self._v
        if v is None or v.leaf != self.session.leaf_id:
            v = self._v = self._rebuild()
        return v

    def _rebuild(self) -> _View:
        ctx = self.session.build_context()
        out: list[_Stored] = []
        call_types: dict[str, str] = {}
        left_out: set[str] = set()
        # Calls still open at the end of the branch may yet be answered (an approval, a
        # resumed run): they get no "interrupted" output, only calls the conversation moved
        # past do.
        end = len(ctx.messages)
        while end and ctx.entry_ids[end - 1] is None and ctx.messages[end - 1].kind == \
                Kind.INTERRUPTED:
            end -= 1
        for m, eid in zip(ctx.messages[:end], ctx.entry_ids[:end], strict=True):
            kind = m.kind
            stored = m.extra.get(ITEMS_KEY)
            if m.tool_calls:
                for c in m.tool_calls:
                    call_types[c.id] = str(c.extra.get(_CALL_TYPE_KEY, "function_call"))
            if isinstance(stored, list) and eid is not None:
                cached = self._cache.get(eid)
                if cached is None or len(cached) != len(stored):
                    cached = self._cache[eid] = tuple(_stored(t, eid) for t in stored)
                    if is_truncated(m.meta) and cached and cached[0].type in _CUT_FROM:
                        self._cut_texts.add(_fingerprint(_loads(stored[0]).get("output")))
                if kind == Kind.CLEARED_TOOL_RESULT and cached and \
                        cached[0].type in _TEXT_OUTPUTS:
                    item = _loads(stored[0])
                    item["output"] = m.text
                    out.append(_Stored(item, cached[0].type, cached[0].call_id, eid))
                else:
                    out.extend(cached)
            elif kind == Kind.INTERRUPTED:
                call_id = m.tool_call_id or ""
                t = call_types.get(call_id, "function_call")
                if t in _SYNTHETIC_OUTPUTS:
                    out.append(_Stored({"type": _SYNTHETIC_OUTPUTS[t], "call_id": call_id,
                                        "output": INTERRUPTED}, _SYNTHETIC_OUTPUTS[t],
                                       call_id, None))
                else:
                    left_out.add(call_id)
            else:
                out.extend(_stored(x, eid) for x in _convert(m))
        pending = [(m.tool_call_id or "", (call_types.get(m.tool_call_id or "", "function_call"),
                                           m.name)) for m in ctx.messages[end:]]
        tokens = count_context(ctx.messages[:end], self.counter, fresh_from=ctx.fresh_from)
        return _View(self.session.leaf_id, _repair(out, left_out), pending, tokens)


def _repair(items: list[_Stored], left_out: set[str]) -> list[_Stored]:
    """Leave out outputs without an earlier call (or answering one twice), calls in
    ``left_out`` with the reasoning just before them, and reasoning items not followed by
    another item of their model response."""
    if left_out:
        kept: list[_Stored] = []
        for s in items:
            if s.type in CALL_OUTPUTS and s.call_id in left_out:
                while kept and kept[-1].type == "reasoning" and kept[-1].group == s.group:
                    kept.pop()
                continue
            kept.append(s)
        items = kept
    out: list[_Stored] = []
    open_calls: Counter[str] = Counter()  # calls that share an id are answered one each
    for s in items:
        if s.type in OUTPUT_TYPES:
            if s.call_id is None or not open_calls[s.call_id]:
                continue
            open_calls[s.call_id] -= 1
        elif s.type in CALL_OUTPUTS and s.call_id is not None:
            open_calls[s.call_id] += 1
        out.append(s)
    # a reasoning item needs a following item of the same response
    result: list[_Stored] = []
    for i, s in enumerate(out):
        if s.type == "reasoning":
            j = i + 1
            while j < len(out) and out[j].type == "reasoning" and out[j].group == s.group:
                j += 1
            if j == len(out) or out[j].group != s.group or s.group is None:
                continue
        result.append(s)
    return result


def _tail(items: list[_Stored], limit: int) -> list[_Stored]:
    """The latest ``limit`` items, less those at the start whose model response lost a
    reasoning item to the cut: the Responses API refuses an item without its reasoning."""
    start = max(len(items) - limit, 0) if limit else len(items)
    group = items[start - 1].group if 0 < start < len(items) else None
    if group is not None and items[start].group == group:
        j = start - 1
        while j >= 0 and items[j].group == group and items[j].type != "reasoning":
            j -= 1
        if j >= 0 and items[j].group == group:  # a reasoning item of the response was cut
            while start < len(items) and items[start].group == group:
                start += 1
    return items[start:]


def _trim_head(items: list[_Stored]) -> list[_Stored]:
    """A tail of a valid view, without the outputs whose calls were cut off."""
    calls = {s.call_id for s in items if s.type in CALL_OUTPUTS}
    return [s for s in items if not (s.type in OUTPUT_TYPES and s.call_id not in calls)]


async def _settle(awaitable: Awaitable[T]) -> T:
    """Await a write to its end even if the awaiting task is cancelled meanwhile; the
    cancellation is raised afterwards, so the caller still sees it."""
    task = asyncio.ensure_future(awaitable)
    cancelled: asyncio.CancelledError | None = None
    while not task.done():
        try:
            await asyncio.wait({task})
        except asyncio.CancelledError as e:
            cancelled = cancelled or e
    result = task.result()
    if cancelled is not None:
        raise cancelled
    return result
