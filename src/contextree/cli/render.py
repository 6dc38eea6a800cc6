"""Text for entries and messages: one-line summaries, the tree, full message bodies."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import orjson

from .._messages import ImagePart, Message, TextPart, ThinkingPart, UnknownPart
from .._session import TreeNode
from .._text import first_line, shorten
from ..entries import (
    ActiveToolsChangeEntry,
    AnyEntry,
    BranchSummaryEntry,
    CompactionEntry,
    CustomEntry,
    CustomMessageEntry,
    LabelEntry,
    LeafEntry,
    MessageEntry,
    ModelChangeEntry,
    SessionInfoEntry,
    ThinkingLevelChangeEntry,
    UnknownEntry,
)
from .output import clip, short_id

ARGS_PREVIEW = 40  # characters of a tool call's arguments in a one-line summary
KEEP_ENDS = 2  # entries shown at each end of a collapsed run
MIN_COLLAPSE = 3  # shorter runs are shown in full
ALWAYS_SHOWN = (CompactionEntry, BranchSummaryEntry, ModelChangeEntry, ThinkingLevelChangeEntry,
                SessionInfoEntry, ActiveToolsChangeEntry)


# -- one-line summaries --------------------------------------------------------------------

def entry_summary(entry: AnyEntry) -> str:
    """What an entry is, in one line (not yet cut to a width)."""
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
                f"{_first_line(entry.summary)}")
    if isinstance(entry, BranchSummaryEntry):
        return f"branch summary (left from {short_id(entry.from_id)}): " \
               f"{_first_line(entry.summary)}"
    if isinstance(entry, ModelChangeEntry):
        return f"model -> {entry.provider}/{entry.model_id}"
    if isinstance(entry, ThinkingLevelChangeEntry):
        return f"thinking -> {entry.thinking_level}"
    if isinstance(entry, ActiveToolsChangeEntry):
        return f"tools -> {', '.join(entry.active_tool_names) or '(none)'}"
    if isinstance(entry, CustomMessageEntry):
        return f"custom message {entry.custom_type}: {_first_line(entry.text)}"
    if isinstance(entry, CustomEntry):
        return f"custom {entry.custom_type}"
    if isinstance(entry, LabelEntry):
        if entry.label is None:
            return f"label on {short_id(entry.target_id)} cleared"
        return f"label {short_id(entry.target_id)} = {entry.label!r}"
    if isinstance(entry, SessionInfoEntry):
        return f"name = {entry.name!r}"
    if isinstance(entry, LeafEntry):
        return f"leaf moved to {short_id(entry.target_id)}"
    if isinstance(entry, UnknownEntry):
        return f"{entry.type} (an entry type this version does not know)"
    return entry.type


def message_summary(m: Message) -> str:
    """A message in one line: role, text, tool calls."""
    text = _first_line(m.text)
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


def _first_line(text: str) -> str:
    return first_line(text.strip())


def _args_preview(args: dict[str, object]) -> str:
    return shorten(orjson.dumps(args).decode()[1:-1], ARGS_PREVIEW)


# -- the tree ------------------------------------------------------------------------------

@dataclass
class TreeLine:
    """One line of ``tree``: guides, then an entry or a count of hidden entries."""

    prefix: str
    node: TreeNode | None = None
    hidden: int = 0


def tree_lines(roots: Sequence[TreeNode], *, expand: bool = False) -> Iterator[TreeLine]:
    """The tree, top down, without recursion.

    A chain of single children is printed at one indentation; a branch point indents its
    children under ``├─``/``└─``. Unless ``expand``, long runs of ordinary entries in a chain
    are collapsed to one ``… N entries …`` line; labelled entries, compactions, branch
    summaries, model and thinking changes, branch points, tips and the leaf are always shown.
    """
    work: list[tuple[TreeNode, str, str]] = []
    if len(roots) == 1:
        work.append((roots[0], "", ""))
    else:
        work.extend(reversed(_branches(roots, "")))
    while work:
        node, first_prefix, rest_prefix = work.pop()
        chain = [node]
        while len(chain[-1].children) == 1:
            chain.append(chain[-1].children[0])
        for i, item in enumerate(_collapse(chain, expand)):
            prefix = first_prefix if i == 0 else rest_prefix
            if isinstance(item, int):
                yield TreeLine(prefix, None, item)
            else:
                yield TreeLine(prefix, item)
        if len(chain[-1].children) > 1:
            work.extend(reversed(_branches(chain[-1].children, rest_prefix)))


def _branches(children: Sequence[TreeNode], prefix: str) -> list[tuple[TreeNode, str, str]]:
    out = []
    for i, child in enumerate(children):
        last = i == len(children) - 1
        out.append((child, prefix + ("└─ " if last else "├─ "), prefix + ("   " if last else "│  ")))
    return out


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
            or isinstance(node.entry, ALWAYS_SHOWN))


# -- full messages -------------------------------------------------------------------------

def message_body(m: Message) -> list[str]:
    """The whole message as lines of text: content, thinking, images, tool calls."""
    lines: list[str] = []
    content = m.content
    if isinstance(content, str):
        lines.extend(content.splitlines() or ([""] if content == "" and not m.tool_calls else []))
    elif content is not None:
        for part in content:
            lines.extend(_part_lines(part))
    for call in m.tool_calls or ():
        args = orjson.dumps(call.arguments).decode()
        lines.append(f"-> call {call.name} {args}  [id {call.id}]")
    return lines


def _part_lines(part: object) -> list[str]:
    if isinstance(part, TextPart):
        return part.text.splitlines() or [""]
    if isinstance(part, ThinkingPart):
        if part.redacted:
            return ["[redacted thinking]"]
        signed = " (signed)" if part.signature else ""
        body = part.thinking.splitlines() or [""]
        return [f"[thinking{signed}] {body[0]}", *body[1:]]
    if isinstance(part, ImagePart):
        if part.data is not None:
            return [f"[image {part.mime_type or '?'}, {len(part.data) * 3 // 4} bytes]"]
        return [f"[image {part.url}]"]
    if isinstance(part, UnknownPart):
        return [f"[{part.type}] {clip(orjson.dumps(part.data).decode(), 200)}"]
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
