"""Building what the model sees from a path of entries.

``build_context(path)`` follows the AgentCore.jl rules (the latest compaction on the path
decides: its summary, the kept entries, then everything after it), applies the context edits
among those entries (``ContextEditEntry``: the latest one per target; it hides the target or
replaces its content) and then guarantees the
pairing invariant that providers enforce: each tool result directly follows the assistant
message that called it, each call has a result, and no result is orphaned.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from ._messages import Message
from .entries import (
    ActiveToolsChangeEntry,
    AnyEntry,
    BranchSummaryEntry,
    CompactionEntry,
    ContextEditEntry,
    CustomEntry,
    CustomMessageEntry,
    MessageEntry,
    ModelChangeEntry,
    RequestEntry,
    ThinkingLevelChangeEntry,
    system_texts,
)
from .markers import (
    BranchSummaryMarker,
    ClearedToolResultMarker,
    CompactionSummaryMarker,
    CustomMessageMarker,
    InterruptedMarker,
)
from .tokens import ContextCount, TokenCounter, measure_context, usage_anchor

# A projector turns a custom entry into messages: (entry, index in context entries, entries).
Projector = Callable[[CustomEntry, int, Sequence[AnyEntry]], Sequence[Message]]

INTERRUPTED = "[no result: the tool call was interrupted before it returned a result]"
SUMMARY_PREFIX = ("Earlier parts of this conversation were compacted to fit the context window. "
                  "Summary of what came before:\n\n")

T = TypeVar("T")


@dataclass
class SessionContext:
    """The messages to send and the state in force at the leaf.

    ``entry_ids[i]`` is the id of the entry that produced ``messages[i]`` (``None`` for a
    message contextree added, such as an "interrupted" tool result). ``fresh_from`` is the
    index of the first message from an entry appended after the latest compaction (``0``
    without one): usage reported before it describes a context that no longer exists.

    ``system``, ``tools``, ``params`` and ``stream`` are what the latest request entry on the
    branch (``request_id``) recorded: the system prompt sent before ``messages`` (not one of
    them: the text of the one system message, or the list of their texts when several were
    sent; ``system_texts`` reads either), the tool schemas, the request parameters; ``None``
    where no request was recorded (a session written before they were, or imported without
    them).
    """

    messages: list[Message]
    model: tuple[str, str] | None = None  # (provider, model_id)
    thinking_level: str | None = None
    active_tools: list[str] | None = None
    entry_ids: list[str | None] = field(default_factory=list)
    compaction: CompactionEntry | None = None
    fresh_from: int = 0
    system: str | list[str] | None = None
    tools: list[dict[str, Any]] | None = None
    params: dict[str, Any] | None = None
    stream: bool = False
    request_id: str | None = None

    def request_messages(self) -> list[Message]:
        """The messages of the request as sent: the recorded system messages, then
        ``messages``."""
        return [*(Message.system(text) for text in self.system_texts()), *self.messages]

    def system_texts(self) -> list[str]:
        """The recorded system messages sent before ``messages``, as texts in order (none
        without a record). A request records every leading system message it sent; those
        the branch holds itself (an imported Codex session's instructions) are in
        ``messages`` and left out here, so ``request_messages`` sends each once."""
        texts = system_texts(self.system)
        stored: list[str] = []
        for m in self.messages:
            if m.role != "system" or m.kind is not None:
                break
            stored.append(m.text)
        if not texts or not stored:
            return texts
        if texts[-len(stored):] == stored:
            return texts[:-len(stored)]
        if len(texts) == 1:  # recorded before lists were: the texts joined by a blank line
            joined = "\n\n".join(stored)
            if texts[0] == joined:
                return []
            if texts[0].endswith("\n\n" + joined):
                return [texts[0][:-len(joined) - 2]]
        return texts

    @property
    def usage_anchor(self) -> int | None:
        """The index of the assistant message whose reported usage describes this very
        context (see :func:`contextree.tokens.usage_anchor`), or ``None``."""
        return usage_anchor(self.messages, self.fresh_from)

    def measure(self, counter: TokenCounter, *, fresh_from: int | None = None,
                estimate: bool = False, carry: bool = True) -> ContextCount:
        """The one count of this context (:func:`contextree.tokens.measure_context`): the
        reported usage, else the latest compaction's count carried on, else the estimate.
        ``fresh_from`` overrides ``self.fresh_from``."""
        comp = self.compaction
        compacted = comp.tokens_after if comp is not None else None
        return measure_context(self.messages, counter,
                               fresh_from=self.fresh_from if fresh_from is None else fresh_from,
                               compacted=compacted if carry else None, estimate=estimate,
                               carry=carry)


def latest_compaction(path: Sequence[AnyEntry]) -> int | None:
    """Index of the last compaction entry on the path, or ``None``."""
    for i in range(len(path) - 1, -1, -1):
        if isinstance(path[i], CompactionEntry):
            return i
    return None


def context_entries(path: Sequence[AnyEntry]) -> tuple[CompactionEntry | None, list[AnyEntry]]:
    """The entries that make up the context: kept ones before the compaction and all after."""
    ci = latest_compaction(path)
    if ci is None:
        return None, list(path)
    comp = path[ci]
    assert isinstance(comp, CompactionEntry)
    after = list(path[ci + 1 :])
    if comp.retained_tail is not None or comp.first_kept_entry_id is None:
        return comp, after
    pinned = set(comp.pinned or ())
    for i in range(ci):
        if path[i].id == comp.first_kept_entry_id:
            # Older compactions inside the kept range are superseded by this one.
            kept = [e for e in path[:i] if e.id in pinned]
            kept += [e for e in path[i:ci] if not isinstance(e, CompactionEntry)]
            return comp, kept + after
    return comp, after


def context_edits(entries: Sequence[AnyEntry]) -> dict[str, ContextEditEntry]:
    """The edit in force for each edited target among ``entries`` (the latest one wins).

    Only the edits in the context entries count, as in pi: an edit on another branch, or
    one summarized away by a compaction, changes nothing.
    """
    return {e.target_id: e for e in entries if isinstance(e, ContextEditEntry)}


def build_context(
    path: Sequence[AnyEntry],
    *,
    projectors: Mapping[str, Projector] | None = None,
) -> SessionContext:
    """The context the model sees at the end of ``path`` (root first)."""
    ctx = SessionContext(messages=[])
    _derive_state(path, ctx)
    comp, entries = context_entries(path)
    ctx.compaction = comp
    cleared = (comp.cleared or {}) if comp is not None else {}
    edits = context_edits(entries)
    tokens_after = comp.tokens_after if comp is not None else None
    raw: list[tuple[Message, str | None]] = []
    if comp is not None and not (comp.id in edits and edits[comp.id].content is None):
        if comp.summary and not tail_renders_summary(comp) and not sent_as_entry(comp,
                                                                                  entries):
            raw.append((summary_message(comp), comp.id))
        for m in comp.retained_tail or ():
            raw.append((m, comp.id))
    for index, entry in enumerate(entries):
        eid = entry.id
        edit = edits.get(eid) if edits else None
        if edit is not None and edit.content is None:
            continue  # left out of the context from the edit on
        if edit is None and eid not in cleared and isinstance(entry, MessageEntry):
            raw.append((entry.message, eid))  # (most entries: nothing to change)
            continue
        for m in _entry_messages(entry, index, entries, projectors):
            if edit is not None:
                m = _edited(m, edit)
            if eid in cleared and m.role == "tool":
                m = m.marked(ClearedToolResultMarker(tokens_after=tokens_after),
                             content=cleared[eid])
            raw.append((m, eid))
    ctx.messages, ctx.entry_ids = repair_pairing(raw)
    ctx.fresh_from = _fresh_from(ctx, path) if comp is not None else 0
    return ctx


class CutViews:
    """The views that a compaction entry appended at the tip of ``branch`` gives, for any
    cut, pins and cleared results, each without building the branch again: what
    ``build_context([*branch, entry])`` gives for an entry with no summary and no retained
    messages (the planner renders many such candidates of one branch).

    Made by ``CutViews.of``, only for a branch whose entries each give their messages on
    their own: no context edits, no custom entry that a projector turns into messages, no
    id twice.
    """

    def __init__(self, state: SessionContext, raw: list[tuple[Message, str | None]],
                 starts: list[int], index: Mapping[str, int]) -> None:
        self.state = state  # what is in force at the tip, with no messages
        # (message, entry id) of every entry but compactions (they give no messages once a
        # later one is in force), in branch order; ``starts[i]``: the first pair of entry i.
        self.raw = raw
        self.starts = starts
        self.index = index  # entry id -> index in the branch

    @classmethod
    def of(cls, branch: Sequence[AnyEntry], projectors: Mapping[str, Projector] | None = None,
           *, index: Mapping[str, int] | None = None) -> CutViews | None:
        """The views of ``branch``, or ``None`` when its entries do not each give their
        messages on their own (see the class docstring). ``index``: the branch's entry ids
        to their indexes, when the caller has it."""
        raw: list[tuple[Message, str | None]] = []
        starts: list[int] = []
        for i, entry in enumerate(branch):
            starts.append(len(raw))
            if isinstance(entry, MessageEntry):
                raw.append((entry.message, entry.id))
            elif isinstance(entry, ContextEditEntry) or (
                    isinstance(entry, CustomEntry) and projectors
                    and entry.custom_type in projectors):
                return None
            elif not isinstance(entry, CompactionEntry):
                raw += [(m, entry.id) for m in _entry_messages(entry, i, branch, None)]
        starts.append(len(raw))
        if index is None:
            index = {e.id: i for i, e in enumerate(branch)}
        if len(index) != len(branch):
            return None  # an id twice
        state = SessionContext(messages=[])
        _derive_state(branch, state)
        return cls(state, raw, starts, index)

    def view(self, comp: CompactionEntry) -> SessionContext | None:
        """``build_context([*branch, comp])``, or ``None`` when ``comp`` is not an entry
        these views can give (it has a summary or retained messages, or keeps nothing)."""
        first = self.index.get(comp.first_kept_entry_id or "")
        if comp.summary or comp.retained_tail is not None or first is None:
            return None
        starts, raw = self.starts, self.raw
        pinned = sorted({i for p in comp.pinned or () if (i := self.index.get(p, first)) < first})
        pairs = [pair for i in pinned for pair in raw[starts[i]:starts[i + 1]]]
        pairs += raw[starts[first]:]
        cleared = comp.cleared
        if cleared:
            mark = ClearedToolResultMarker(tokens_after=comp.tokens_after)
            pins = set(pinned)
            offset = len(pairs) - (len(raw) - starts[first])  # where raw[starts[first]] is
            for eid, text in cleared.items():
                e = self.index.get(eid)
                if e is None or (e < first and e not in pins):
                    continue
                if e < first:  # a pinned entry: find its pairs among the pinned ones
                    at = sum(starts[j + 1] - starts[j] for j in pinned if j < e)
                else:
                    at = offset + starts[e] - starts[first]
                for k in range(at, at + starts[e + 1] - starts[e]):
                    m, pid = pairs[k]
                    if m.role == "tool":
                        pairs[k] = (m.marked(mark, content=text), pid)
        ctx = replace(self.state, compaction=comp,
                      active_tools=None if self.state.active_tools is None
                      else list(self.state.active_tools))
        ctx.messages, ctx.entry_ids = repair_pairing(pairs)
        ctx.fresh_from = len(ctx.messages)  # (nothing comes after the compaction)
        return ctx


def _edited(m: Message, edit: ContextEditEntry) -> Message:
    """``m`` with the content of ``edit``. As in pi, where tool calls are blocks of an
    assistant message's content, the replacement takes the place of its tool calls too."""
    if m.role == "assistant":
        return m.replace(content=edit.content, tool_calls=None)
    return m.replace(content=edit.content)


def summary_message(comp: CompactionEntry) -> Message:
    """The compaction summary as the model sees it: a system message whose marker carries
    the raw summary, so a list of messages can be compacted again without reading text."""
    details = comp.details if isinstance(comp.details, dict) else {}
    digest, native = details.get("digest"), details.get("native")
    mark = CompactionSummaryMarker(  # the digest: its state, for compacting the list again
        entry_id=comp.id, tokens_before=comp.tokens_before, tokens_after=comp.tokens_after,
        summary=comp.summary,
        digest=digest if isinstance(digest, dict) else None,
        native=native if isinstance(native, dict) else None)  # the provider's own items
    return Message(role="system", content=SUMMARY_PREFIX + comp.summary, meta=mark.to_meta())


def tail_renders_summary(comp: CompactionEntry) -> bool:
    """Whether ``comp``'s ``retained_tail`` already holds its summary as the model saw it: a
    message marked as a compaction summary of that very text (an import keeps the summary the
    way the other tool sent it, e.g. Claude Code's user message), so it is not sent twice."""
    for m in comp.retained_tail or ():
        mark = m.marker
        if isinstance(mark, CompactionSummaryMarker) and mark.summary == comp.summary:
            return True
    return False


def sent_as_entry(comp: CompactionEntry, entries: Sequence[AnyEntry]) -> bool:
    """Whether an entry of the context already sends ``comp``'s summary the way another tool
    sent it: an import names that message entry in ``details["summary_entry"]`` (Copilot
    CLI's user message after the compaction, opencode's summary reply), so it is not sent
    twice."""
    named = comp.details.get("summary_entry") if isinstance(comp.details, dict) else None
    return isinstance(named, str) and any(e.id == named for e in entries)


def summary_of(message: Message) -> tuple[str, int] | None:
    """The raw summary and ``tokens_before`` a compaction summary message was rendered from
    (by :func:`summary_message`), or ``None`` for any other message. A marker without the raw
    summary (written by an older version) gives the text the model saw."""
    mark = message.marker
    if not isinstance(mark, CompactionSummaryMarker):
        return None
    return (mark.summary if mark.summary is not None else message.text,
            mark.tokens_before or 0)


def _entry_messages(
    entry: AnyEntry,
    index: int,
    entries: Sequence[AnyEntry],
    projectors: Mapping[str, Projector] | None,
) -> Sequence[Message]:
    if isinstance(entry, MessageEntry):
        return (entry.message,)
    if isinstance(entry, CustomMessageEntry):
        return (
            Message(
                role="user",
                content=entry.content,
                meta=CustomMessageMarker(custom_type=entry.custom_type).to_meta(),
            ),
        )
    if isinstance(entry, BranchSummaryEntry):
        return (
            Message(
                role="system",
                content="The conversation returned here from another branch. Summary of that "
                "branch:\n\n" + entry.summary,
                meta=BranchSummaryMarker(from_id=entry.from_id).to_meta(),
            ),
        )
    if isinstance(entry, CustomEntry) and projectors and entry.custom_type in projectors:
        return projectors[entry.custom_type](entry, index, entries)
    return ()


def _derive_state(path: Sequence[AnyEntry], ctx: SessionContext) -> None:
    requests: dict[str, RequestEntry] = {}
    for entry in path:
        if isinstance(entry, MessageEntry):
            # A reply names the model that wrote it: the latest one is in force.
            m = entry.message
            if m.role == "assistant" and m.model and m.provider:
                ctx.model = (m.provider, m.model)
        elif isinstance(entry, RequestEntry):
            requests[entry.id] = entry
            _apply_request(ctx, requests.get(entry.same_as or "", entry), entry.id)
        elif isinstance(entry, ModelChangeEntry):
            ctx.model = (entry.provider, entry.model_id)
        elif isinstance(entry, ThinkingLevelChangeEntry):
            ctx.thinking_level = entry.thinking_level
        elif isinstance(entry, ActiveToolsChangeEntry):
            ctx.active_tools = list(entry.active_tool_names)


def _apply_request(ctx: SessionContext, content: RequestEntry, entry_id: str) -> None:
    """Put the request ``content`` holds in force (``entry_id`` may refer to it by
    ``same_as``)."""
    ctx.system, ctx.params, ctx.stream = content.system, content.params, content.stream
    ctx.tools = content.tools
    ctx.request_id = entry_id


def interrupted_result(call_id: str, name: str | None) -> Message:
    """The tool result that stands in for one that never arrived."""
    return Message.tool(INTERRUPTED, tool_call_id=call_id, name=name, is_error=True,
                        meta=InterruptedMarker().to_meta())


def take_open(pending: list[tuple[str, T]], call_id: str | None) -> tuple[str, T] | None:
    """Take the first open call with ``call_id`` off ``pending`` (call id, what goes with
    it), if there is one: calls that share an id are answered in order, one result each."""
    for k, item in enumerate(pending):
        if item[0] == call_id:
            del pending[k]
            return item
    return None


def repair_pairing(
    raw: Sequence[tuple[Message, str | None]],
) -> tuple[list[Message], list[str | None]]:
    """Enforce the pairing invariant on (message, entry id) pairs.

    A tool call with no result before the next non-tool message gets an explicit
    "interrupted" result; a tool result that does not answer a call of the assistant message
    just before it (an orphan, or a duplicate) is left out. Calls that share an id (some
    providers give every call ``call_0``) are answered in order, one result each, as the
    wire formats pair them (``models._wire_ids``).
    """
    out: list[Message] = []
    ids: list[str | None] = []
    pending: list[tuple[str, str | None]] = []  # (call id, tool name), in call order

    def close_pending() -> None:
        for call_id, name in pending:
            out.append(interrupted_result(call_id, name))
            ids.append(None)
        pending.clear()

    for msg, eid in raw:
        if msg.role == "tool":
            if take_open(pending, msg.tool_call_id) is not None:
                out.append(msg)
                ids.append(eid)
            continue  # orphan or duplicate result: never sent
        close_pending()
        out.append(msg)
        ids.append(eid)
        if msg.role == "assistant" and msg.tool_calls:
            pending.extend((call.id, call.name) for call in msg.tool_calls)
    close_pending()
    return out, ids


def _fresh_from(ctx: SessionContext, path: Sequence[AnyEntry]) -> int:
    """The index of the first message from an entry after the latest compaction on ``path``
    (``len(messages)`` when there is none yet)."""
    ci = latest_compaction(path)
    if ci is None:
        return 0
    after = {e.id for e in path[ci + 1 :]}
    for i, eid in enumerate(ctx.entry_ids):
        if eid is not None and eid in after:
            return i
    return len(ctx.messages)
