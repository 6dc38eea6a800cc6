"""Text for entries and messages: one-line summaries, the tree, full message bodies.

Nothing here escapes control characters: ``Out`` makes every piece visible when it prints.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

import orjson

from .._messages import ImagePart, Message, TextPart, ThinkingPart, UnknownPart
from .._session import TreeNode
from .._text import shorten
from ..entries import (
    ActiveToolsChangeEntry,
    AnyEntry,
    BranchSummaryEntry,
    CompactionEntry,
    CompactionReceipt,
    ContextEditEntry,
    CustomEntry,
    CustomMessageEntry,
    LabelEntry,
    LeafEntry,
    MessageEntry,
    ModelChangeEntry,
    RequestEntry,
    SessionInfoEntry,
    ThinkingLevelChangeEntry,
    UnknownEntry,
    system_texts,
)
from ..storage import Outline
from .output import short_id

ARGS_PREVIEW = 40  # characters of a tool call's arguments in a one-line summary
KEEP_ENDS = 2  # entries shown at each end of a collapsed run
MIN_COLLAPSE = 3  # shorter runs are shown in full
MAX_LEVEL = 4  # side-branch levels drawn with guides; deeper ones say their level instead
ALWAYS_SHOWN = (CompactionEntry, BranchSummaryEntry, ModelChangeEntry, ThinkingLevelChangeEntry,
                SessionInfoEntry, ActiveToolsChangeEntry, ContextEditEntry, RequestEntry)
ALWAYS_SHOWN_TYPES = frozenset(cls.__struct_config__.tag for cls in ALWAYS_SHOWN)
_BOOKKEEPING_TYPES = frozenset({"label", "session_info", "leaf"})


# -- compaction receipts -------------------------------------------------------------------

_RECEIPT_SHOWN = 12  # entry ids listed per kind before "and N more"


def receipt_lines(receipt: CompactionReceipt | None) -> list[str]:
    """A compaction's receipt for a person: how many entries it kept, folded, cleared,
    dropped and pinned, which ones (the first few of each), and the identifiers the summary
    copies."""
    if receipt is None:
        return ["receipt: none recorded (a compaction written elsewhere or by an older "
                "version)"]
    kinds = (("kept", receipt.kept), ("folded", receipt.folded),
             ("cleared", receipt.cleared), ("dropped", receipt.dropped),
             ("pinned", receipt.pinned))
    out = ["receipt: " + ", ".join(f"{len(ids)} {name}" for name, ids in kinds)
           + f", {len(receipt.identifiers)} identifiers pinned"]
    for name, ids in kinds:
        if ids:
            out.append(f"  {name}: {_listed([short_id(i) for i in ids])}")
    if receipt.identifiers:
        out.append(f"  identifiers: {_listed(receipt.identifiers)}")
    return out


def _listed(items: Sequence[str]) -> str:
    shown = " ".join(items[:_RECEIPT_SHOWN])
    more = len(items) - _RECEIPT_SHOWN
    return shown + (f" and {more} more" if more > 0 else "")


# -- one-line summaries --------------------------------------------------------------------

def entry_summary(entry: AnyEntry, left: Mapping[str, str | None] | None = None) -> str:
    """What an entry is, in one line (not yet cut to a width).

    ``left`` maps a branch summary's id to the tip of the branch that was left
    (``abandoned_tips``); without it a summary names only the entry returned to.
    """
    if isinstance(entry, MessageEntry):
        return message_summary(entry.message)
    if isinstance(entry, CompactionEntry):
        after = entry.tokens_after if entry.tokens_after is not None else "?"
        kept = (f"keeps from {short_id(entry.first_kept_entry_id)}"
                if entry.first_kept_entry_id else "keeps nothing before it")
        if entry.retained_tail is not None:
            kept = f"keeps {len(entry.retained_tail)} messages"
        extra = f", {len(entry.cleared)} tool results cleared" if entry.cleared else ""
        return (f"compaction: {entry.tokens_before} -> {after} tokens, {kept}{extra}: "
                f"{summary_line(entry.summary)}")
    if isinstance(entry, BranchSummaryEntry):
        tip = (left or {}).get(entry.id)
        ends = (f"left {short_id(tip)}, back at {short_id(entry.from_id)}"
                if tip is not None and tip != entry.from_id
                else f"back at {short_id(entry.from_id)}")
        return f"branch summary ({ends}): {summary_line(entry.summary)}"
    if isinstance(entry, ModelChangeEntry):
        return f"model -> {entry.provider}/{entry.model_id}"
    if isinstance(entry, ThinkingLevelChangeEntry):
        return f"thinking -> {entry.thinking_level}"
    if isinstance(entry, ActiveToolsChangeEntry):
        return f"tools -> {', '.join(entry.active_tool_names) or '(none)'}"
    if isinstance(entry, RequestEntry):
        return request_summary(entry)
    if isinstance(entry, CustomMessageEntry):
        return f"custom message {entry.custom_type}: {summary_line(entry.text)}"
    if isinstance(entry, CustomEntry):
        link = _subagent_link(entry)
        return link if link is not None else f"custom {entry.custom_type}"
    if isinstance(entry, LabelEntry):
        if entry.label is None:
            return f"label on {short_id(entry.target_id)} cleared"
        return f"label {short_id(entry.target_id)} = {entry.label!r}"
    if isinstance(entry, SessionInfoEntry):
        return f"name = {entry.name!r}"
    if isinstance(entry, LeafEntry):
        return f"leaf moved to {short_id(entry.target_id)}"
    if isinstance(entry, ContextEditEntry):
        if entry.content is None:
            return f"context edit: {short_id(entry.target_id)} left out from here on"
        text = entry.content if isinstance(entry.content, str) else "".join(
            getattr(p, "text", "") for p in entry.content)
        return (f"context edit: {short_id(entry.target_id)} shows from here on: "
                f"{summary_line(text)}")
    if isinstance(entry, UnknownEntry):
        return f"{entry.type} (an entry type this version does not know)"
    return entry.type


def _subagent_link(entry: CustomEntry) -> str | None:
    """A sub-agent link an importer wrote (a custom entry of type ``<tool>/subagent`` naming
    the ``session`` or ``file`` of the transcript and the ``tool_use_id`` that started it)
    as ``sub-agent -> <where> (call <id>)``; ``None`` for any other custom entry."""
    data = entry.data
    if not entry.custom_type.endswith("/subagent") or not isinstance(data, dict):
        return None
    where = data.get("session") or data.get("file") or data.get("agent_id")
    if not isinstance(where, str):
        return None
    if data.get("first_entry_id") and not data.get("session"):
        where += f" (its root here: {short_id(str(data['first_entry_id']))})"
    call = data.get("tool_use_id")
    return f"sub-agent -> {where}" + (f", for call {call}" if isinstance(call, str) else "")


def request_summary(entry: RequestEntry) -> str:
    """A request entry in one line: what the system prompt, tools and parameters are."""
    if entry.same_as is not None:
        return f"request: the same as {short_id(entry.same_as)} [sha256 {entry.sha256[:12]}]"
    pieces = []
    texts = system_texts(entry.system)
    if len(texts) == 1:
        pieces.append(f"system prompt of {len(texts[0]):,} characters")
    elif texts:
        pieces.append(f"system prompt of {len(texts)} messages, "
                      f"{sum(map(len, texts)):,} characters")
    if entry.tools:
        names = ", ".join(str(t.get("name")) for t in entry.tools)
        pieces.append(f"{len(entry.tools)} tools ({names})")
    if entry.params:
        pieces.append(", ".join(f"{k}={_param_preview(v)}" for k, v in entry.params.items()))
    if entry.stream:
        pieces.append("streamed")
    return f"request: {'; '.join(pieces) or 'nothing besides the messages'} " \
           f"[sha256 {entry.sha256[:12]}]"


def _param_preview(value: object) -> str:
    return shorten(orjson.dumps(value).decode(), ARGS_PREVIEW)


def message_summary(m: Message) -> str:
    """A message in one line: role, text, tool calls."""
    text = summary_line(m.text)
    if m.role == "tool":
        flag = " (error)" if m.is_error else ""
        return f"tool {m.name or m.tool_call_id or ''}{flag}: {text}"
    pieces = [f"{m.role}:"]
    if text:
        pieces.append(text)
    elif m.thinking:
        pieces.append("(thinking)")
    if m.tool_calls:
        calls = ", ".join(f"{c.name}({_args_preview(c.arguments)})" for c in m.tool_calls)
        pieces.append(f"-> {calls}")
    return " ".join(pieces)


def summary_line(text: str) -> str:
    """The first line of ``text`` as a one-line summary shows it (`` …`` if more follow)."""
    head, sep, _ = text.strip().partition("\n")
    return head + (" …" if sep else "")


def _args_preview(args: dict[str, object]) -> str:
    return shorten(orjson.dumps(args).decode()[1:-1], ARGS_PREVIEW)


def abandoned_tips(outline: Iterable[Outline]) -> dict[str, str | None]:
    """For each branch summary, the entry that was the leaf just before it was written: the
    tip of the branch it summarizes (labels and names set there are skipped).

    ``outline`` is ``Session.storage.outline()``: ids, parents, types and leaf targets in
    append order (no entry is read).
    """
    parents: dict[str, str | None] = {}
    bookkeeping: set[str] = set()
    out: dict[str, str | None] = {}
    leaf: str | None = None
    for eid, parent, kind, target in outline:
        parents[eid] = parent
        if kind in _BOOKKEEPING_TYPES:
            bookkeeping.add(eid)
        if kind == "branch_summary":
            tip = leaf
            while tip is not None and tip in bookkeeping:
                tip = parents.get(tip)
            out[eid] = tip
        leaf = target if kind == "leaf" else eid
    return out


class TipsOnDemand(Mapping[str, str | None]):
    """``abandoned_tips`` worked out on first use: a view that shows no branch summary
    (most trees of a big session) never walks the outline for it."""

    def __init__(self, outline: Callable[[], Iterable[Outline]]) -> None:
        self._outline = outline
        self._tips: dict[str, str | None] | None = None

    @property
    def tips(self) -> dict[str, str | None]:
        if self._tips is None:
            self._tips = abandoned_tips(self._outline())
        return self._tips

    def __getitem__(self, entry_id: str) -> str | None:
        return self.tips[entry_id]

    def __iter__(self) -> Iterator[str]:
        return iter(self.tips)

    def __len__(self) -> int:
        return len(self.tips)


# -- the tree ------------------------------------------------------------------------------

@dataclass
class TreeLine:
    """One line of ``tree``: guides, then an entry or a count of hidden entries.

    ``level`` is 0 on the current branch (always at the same column) and counts side
    branches below it; ``note`` says how many entries a side branch holds (on its first
    line), and its level where the indentation stopped growing.
    """

    prefix: str
    node: TreeNode | None = None
    hidden: int = 0
    level: int = 0
    note: str = ""


FOLD_ABOVE = 2000  # entries off the current branch beyond which side branches fold


def tree_lines(roots: Sequence[TreeNode], *, expand: bool = False) -> Iterator[TreeLine]:
    """The tree, top down, without recursion: the current branch first-class at the left
    margin, each side branch indented under the entry it leaves from.

    A chain of single children stays at one indentation. Side branches indent by three
    columns per level up to ``MAX_LEVEL``; deeper ones stay there and say their level. Unless
    ``expand``, long runs of ordinary entries in a chain are collapsed to one ``… N entries …``
    line; labelled entries, compactions, branch summaries, model and thinking changes, branch
    points, tips and the leaf are always shown. Unless ``expand``, a tree with more than
    ``FOLD_ABOVE`` entries off the current branch shows each branch point's side branches
    as one line.
    """
    trunk_root = next((r for r in roots if r.on_branch), None)
    total = sum(r.size for r in roots)
    others = [r for r in roots if r is not trunk_root]
    if trunk_root is None and len(roots) == 1:
        yield from _side(roots[0], "", "", 0, expand, note=False)
        return
    if trunk_root is not None:
        trunk = [trunk_root]
        while True:
            nxt = next((c for c in trunk[-1].children if c.on_branch), None)
            if nxt is None:
                break
            trunk.append(nxt)
        # A big tree folds its side branches at their branch points: one line each point.
        fold = not expand and total - len(trunk) > FOLD_ABOVE
        for item in _collapse(trunk, expand):
            if isinstance(item, int):
                yield TreeLine("", None, item)
                continue
            yield TreeLine("", item)
            sides = [c for c in item.children if not c.on_branch]
            if sides and fold:
                count = len(sides)
                yield TreeLine("└─ ", None, sum(c.size for c in sides), 1,
                               f"{count} side branch{'es' if count > 1 else ''} folded; "
                               "--all shows them")
            elif sides:
                yield from _sides(sides, "", 1, expand)
    for root in others:
        yield from _side(root, "", "", 0, expand, note=True, what="another root")


def _sides(children: Sequence[TreeNode], base: str, level: int,
           expand: bool) -> Iterator[TreeLine]:
    for i, child in enumerate(children):
        first, rest = _guides(base, level, last=i == len(children) - 1)
        yield from _side(child, first, rest, level, expand, note=True)


def _guides(base: str, level: int, *, last: bool) -> tuple[str, str]:
    if level > MAX_LEVEL:  # the indentation stops growing; the lines say their level
        return base, base
    return base + ("└─ " if last else "├─ "), base + ("   " if last else "│  ")


def _side(node: TreeNode, first: str, rest: str, level: int, expand: bool, *, note: bool,
          what: str = "branch") -> Iterator[TreeLine]:
    """A subtree off the current branch, top down (an explicit stack: no recursion)."""
    work: list[tuple[TreeNode, str, str, int]] = [(node, first, rest, level)]
    while work:
        head, first, rest, level = work.pop()
        chain = [head]
        while len(chain[-1].children) == 1:
            chain.append(chain[-1].children[0])
        deep = f"level {level}" if level > MAX_LEVEL else ""
        for i, item in enumerate(_collapse(chain, expand)):
            prefix = first if i == 0 else rest
            text = deep
            if i == 0 and note:
                count = head.size
                text = ", ".join(x for x in (f"{what}: {count} "
                                             f"entr{'y' if count == 1 else 'ies'}", deep) if x)
            if isinstance(item, int):
                yield TreeLine(prefix, None, item, level, text)
            else:
                yield TreeLine(prefix, item, 0, level, text)
        kids = chain[-1].children
        if len(kids) > 1:
            branches = []
            for i, kid in enumerate(kids):
                f, r = _guides(rest, level + 1, last=i == len(kids) - 1)
                branches.append((kid, f, r, level + 1))
            work.extend(reversed(branches))


def _collapse(chain: list[TreeNode], expand: bool) -> list[TreeNode | int]:
    if expand or len(chain) <= 2 * KEEP_ENDS + MIN_COLLAPSE:
        return list(chain)
    n = len(chain)
    keep = [i < KEEP_ENDS or i >= n - KEEP_ENDS or _notable(node)
            for i, node in enumerate(chain)]
    out: list[TreeNode | int] = []
    i = 0
    while i < n:
        if keep[i]:
            out.append(chain[i])
            i += 1
            continue
        j = i
        while j < n and not keep[j]:
            j += 1
        if j - i >= MIN_COLLAPSE:
            out.append(j - i)
        else:
            out.extend(chain[i:j])
        i = j
    return out


def _notable(node: TreeNode) -> bool:
    return (node.label is not None or node.is_leaf or len(node.children) != 1
            or node.type in ALWAYS_SHOWN_TYPES or (node.type == "custom" and _links(node)))


def _links(node: TreeNode) -> bool:
    """A sub-agent link (always shown: it says where the sub-agent's work is)."""
    entry = node.entry
    return isinstance(entry, CustomEntry) and entry.custom_type.endswith("/subagent")


# -- full messages -------------------------------------------------------------------------

def message_body(m: Message) -> list[str]:
    """The whole message as lines of text, exactly as written (split at newlines only;
    whitespace kept): content, thinking, images, tool calls."""
    lines: list[str] = []
    content = m.content
    if isinstance(content, str):
        if content or not m.tool_calls:
            lines.extend(content.split("\n"))
    elif content is not None:
        for part in content:
            lines.extend(_part_lines(part))
    for call in m.tool_calls or ():
        args = orjson.dumps(call.arguments).decode()
        lines.append(f"-> call {call.name} {args}  [id {call.id}]")
    return lines


def _part_lines(part: object) -> list[str]:
    if isinstance(part, TextPart):
        return part.text.split("\n")
    if isinstance(part, ThinkingPart):
        if part.redacted:
            return ["[redacted thinking]"]
        signed = " (signed)" if part.signature else ""
        body = part.thinking.split("\n")
        return [f"[thinking{signed}] {body[0]}", *body[1:]]
    if isinstance(part, ImagePart):
        if part.data is not None:
            return [f"[image {part.mime_type or '?'}, {len(part.data) * 3 // 4} bytes]"]
        return [f"[image {part.url}]"]
    if isinstance(part, UnknownPart):
        return [f"[{part.type}] {orjson.dumps(part.data).decode()}"]
    return []


def message_title(m: Message) -> str:
    """The heading of a message in ``show``: role, tool call it answers, markers."""
    title = m.role
    if m.role == "tool":
        title += f" result of {m.tool_call_id}" + (f" ({m.name})" if m.name else "")
        if m.is_error:
            title += " error"
    if m.role == "assistant" and m.model:
        title += f" [{m.provider + '/' if m.provider else ''}{m.model}]"
    kind = m.kind
    if kind is not None:
        title += f" <{kind.value.replace('_', ' ')}>"
    return title
