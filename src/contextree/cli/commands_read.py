"""Read-only commands on one session: ``tree``, ``show``, ``stats``, ``verify`` (each with
``--json``)."""

from __future__ import annotations

import io
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import orjson
import typer

from .._context import SessionContext
from .._messages import Message
from .._session import Session, TreeNode
from .._stats import SessionStats, UsageStats
from .._text import first_line
from ..entries import (
    CompactionEntry,
    MessageEntry,
    RequestEntry,
    recorded_system,
    system_texts,
    to_dict,
)
from ..errors import SessionError, SessionNotFound
from ..runtime import is_flat_log, verify_log
from ..storage._jsonl import load
from ..tokens import EstimateCounter
from .app import command
from .output import (
    Out,
    UsageProblem,
    clip,
    emit_bytes,
    emit_json,
    human_size,
    progress_bar,
    short_id,
)
from .redacting import PatternsOpt, RedactOpt, make_redactor
from .render import (
    TipsOnDemand,
    TreeLine,
    entry_summary,
    message_body,
    message_title,
    receipt_lines,
    request_summary,
    summary_line,
    tree_lines,
)
from .sessions import (
    address_of,
    open_session,
    open_storage_of,
    require_regular_file,
    resolve_entry,
)
from .terminal import fit, visible, width_of

if TYPE_CHECKING:  # annotations only: `stats` needs neither the redactor nor the formats
    from ..formats import Progress as ProgressFn
    from ..redaction import Redactor

VERIFY_PROGRESS_BYTES = 50 << 20
LABEL_WIDTH = 24  # columns of a label in a tree line
MIN_TEXT = 16  # columns an entry's text keeps in a tree line before the notes give way

JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")]
FileArg = Annotated[str, typer.Argument(metavar="FILE", help="A session file.",
                                         show_default=False)]


# -- tree ----------------------------------------------------------------------------------

@command("tree")
def tree_command(
    file: FileArg,
    expand: Annotated[bool, typer.Option("--all", help="Show every entry (no collapsing).")]
    = False,
    redact: RedactOpt = True,
    patterns: PatternsOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Print the entry tree: branch points, labels, compactions, branch summaries, and the
    current leaf (<- leaf). Entries on the current branch are marked with *."""
    redactor = make_redactor(redact, patterns, "this output")
    with open_session(file, readonly=True) as session:
        roots = session.tree()
        left = TipsOnDemand(session.storage.outline)
        if as_json:
            emit_json(_tree_json(session, roots, left, redactor))
            return
        out = Out()
        if not roots:
            out.line("(empty session)")
            return
        lines = list(tree_lines(roots, expand=expand))
        # every line's text and label redacted in one call (one by one, the detectors'
        # fixed cost per call is most of the time of a big tree)
        texts: list[str] = []
        for line in lines:
            if line.node is not None:
                texts += [entry_summary(line.node.entry, left), line.node.label or ""]
        done = iter(redactor.texts(texts))
        for line in lines:
            shown = (next(done), next(done)) if line.node is not None else ("", "")
            _print_tree_line(out, line, *shown)


def _print_tree_line(out: Out, line: TreeLine, text: str, label: str) -> None:
    """One tree line, never wider than the output: the entry's text gives way first, then
    the notes; the current branch starts at the same column on every line."""
    node = line.node
    note = f"  ({line.note})" if line.note else ""
    if node is None:
        parts: list[tuple[str, str | None]] = [("  ", None), (line.prefix, "dim"),
                                               (f"… {line.hidden} entries …", "dim italic"),
                                               (note, "dim")]
        out.styled(_fitted(parts, out.width))
        return
    eid = short_id(node.entry.id)
    marker = "* " if node.on_branch else "  "
    tail = ""
    if node.label:
        tail += f"  [{fit(visible(label), LABEL_WIDTH)}]"
    if node.is_leaf:
        tail += "  <- leaf"
    fixed = width_of(marker + line.prefix + eid + "  ")
    if out.width - fixed - width_of(tail + note) < MIN_TEXT:
        note = ""
    room = max(out.width - fixed - width_of(tail + note), 1)
    # the line's text was redacted before it is cut (the summary, not the whole entry: a
    # tree of a big session stays fast)
    text = clip(text, room)
    style = "bold" if node.on_branch else None
    out.styled(_fitted([(marker, "green" if node.on_branch else None), (line.prefix, "dim"),
                        (eid, "cyan"), ("  ", None), (text, style), (tail, "yellow bold"),
                        (note, "dim")], out.width))


def _fitted(parts: list[tuple[str, str | None]], width: int) -> list[tuple[str, str | None]]:
    """``parts`` cut so that together they take at most ``width`` columns."""
    out: list[tuple[str, str | None]] = []
    budget = width
    for text, style in parts:
        shown = fit(visible(text), budget)
        budget -= len(shown) if shown.isascii() else width_of(shown)  # visible: printable
        out.append((shown, style))
    return out


def _tree_json(session: Session, roots: list[TreeNode], left: Mapping[str, str | None],
               redactor: Redactor) -> dict[str, Any]:
    entries: list[dict[str, Any]] = []
    texts: list[str] = []  # each entry's summary and label, redacted in one call below
    stack = list(reversed(roots))
    while stack:
        node = stack.pop()
        texts += [entry_summary(node.entry, left), node.label or ""]
        entries.append({
            "id": node.entry.id,
            "parent_id": node.entry.parent_id,
            "type": node.entry.type,
            "timestamp": node.entry.timestamp,
            "summary": "",
            "label": node.label,
            "on_branch": node.on_branch,
            "is_leaf": node.is_leaf,
            "children": [c.entry.id for c in node.children],
        })
        if node.entry.id in left:
            entries[-1]["left_from"] = left[node.entry.id]
        stack.extend(reversed(node.children))
    done = iter(redactor.texts(texts))
    for e in entries:
        e["summary"], label = next(done), next(done)
        if e["label"]:
            e["label"] = label
    name = redactor.text(session.name) if session.name else session.name
    return {"session_id": session.id, "name": name, "leaf_id": session.leaf_id,
            "roots": [r.entry.id for r in roots], "entries": entries}


# -- show ----------------------------------------------------------------------------------

@command("show")
def show_command(
    file: FileArg,
    at: Annotated[str | None, typer.Option("--at", help="Entry id, id prefix or label "
                                           "(default: the current leaf).")] = None,
    context: Annotated[bool, typer.Option("--context", help="Show the exact request the "
                                          "model would get there: system prompt, tools and "
                                          "messages, with token counts.")] = False,
    wire: Annotated[str | None, typer.Option(
        "--wire", metavar="API", show_default=False,
        help="With --context: print the request body that would be sent, for openai (Chat "
        "Completions), anthropic (Messages) or responses (OpenAI Responses).")] = None,
    redact: RedactOpt = True,
    patterns: PatternsOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Show the path from the root to an entry, or (--context) what the model sees there."""
    from ..models._wire_body import WIRE_APIS  # on use: the models are not for every command

    if wire is not None and not context:
        raise UsageProblem("--wire prints the request body of a context: add --context")
    if wire is not None and wire not in WIRE_APIS:
        raise UsageProblem(f"--wire {wire!r}: choose one of {', '.join(WIRE_APIS)}")
    redactor = make_redactor(redact, patterns, "this output")
    with open_session(file, readonly=True) as session:
        leaf = resolve_entry(session, at) if at is not None else session.leaf_id
        if wire is not None:
            _show_wire(session, leaf, wire, redactor)
        elif context:
            _show_context(session, leaf, as_json, redactor)
        else:
            _show_path(session, leaf, as_json, redactor)


def _show_wire(session: Session, leaf: str | None, api: str, redactor: Redactor) -> None:
    """The request body a call at ``leaf`` would send, as the SDK would write it (secrets
    redacted unless --no-redact: the bytes sent are those with --no-redact). Piped, the
    bytes are exact; on a terminal, C1 and bidirectional controls are ``\\u`` escapes."""
    from ..models._wire_body import request_body

    ctx = session.build_context(leaf)
    messages = redactor.messages(ctx.request_messages())
    tools = redactor.value(ctx.tools) if ctx.tools else ()
    model = ctx.model[1] if ctx.model else "unknown-model"
    body = request_body(api, model, messages, tools, ctx.params, stream=ctx.stream)
    emit_bytes(body + b"\n", kind="json")


def _show_path(session: Session, leaf: str | None, as_json: bool, redactor: Redactor) -> None:
    # only what is printed is redacted (the branch, not the whole file: a big session stays
    # fast to show)
    path = redactor.entries(session.branch(leaf))
    stored = session.labels()
    labels = dict(zip(stored, redactor.texts(list(stored.values())), strict=True))
    if as_json:
        emit_json([{**to_dict(e), "label": labels.get(e.id)} for e in path])
        return
    out = Out()
    left = TipsOnDemand(session.storage.outline)
    for i, entry in enumerate(path):
        label = f"  [{labels[entry.id]}]" if entry.id in labels else ""
        if isinstance(entry, MessageEntry):
            head = message_title(entry.message)
            body = message_body(entry.message)
        elif isinstance(entry, RequestEntry):
            head, body = entry.type, _request_body(entry)
        else:
            head, body = entry.type, _entry_body(entry, left)
        out.styled([(f"#{i} ", "dim"), (entry.id, "cyan"), (f"  {head}", "bold"),
                    (f"  {entry.timestamp}", "dim"), (label, "yellow bold")])
        for text in body:
            out.line("    " + text)
    if not path:
        out.line("(empty: the leaf is before the first entry)")


def _request_body(entry: RequestEntry) -> list[str]:
    """A request entry in full (as redacted for printing), but for the tool schemas
    (elided, and marked so)."""
    lines = [request_summary(entry)]
    texts = system_texts(entry.system)
    for n, text in enumerate(texts, 1):
        lines.append("system prompt:" if len(texts) == 1 else
                     f"system message {n} of {len(texts)}:")
        lines += ["  " + line for line in text.split("\n")]
    lines += _tool_lines(entry.tools)
    if entry.params:
        lines.append("parameters: " + orjson.dumps(entry.params).decode())
    return lines


def _tool_lines(tools: list[dict[str, Any]] | None) -> list[str]:
    lines = []
    for tool in tools or ():
        schema = orjson.dumps(tool.get("parameters") or {})
        lines.append(f"tool {tool.get('name')}: {first_line(str(tool.get('description') or ''))}"
                     f"  [schema elided: {len(schema):,} bytes; --json or --wire prints it]")
    return lines


def _entry_body(entry: Any, left: Mapping[str, str | None]) -> list[str]:
    summary = entry_summary(entry, left)
    receipt = receipt_lines(entry.receipt) if isinstance(entry, CompactionEntry) else []
    full = getattr(entry, "summary", None)
    if isinstance(full, str) and full:
        head = summary.removesuffix(summary_line(full)).rstrip()
        return [head, *receipt, *full.split("\n")]
    return [summary, *receipt]


def _show_context(session: Session, leaf: str | None, as_json: bool,
                  redactor: Redactor) -> None:
    ctx = session.build_context(leaf)
    counter = EstimateCounter()
    counts = [counter.count_message(m) for m in ctx.messages]  # of what the model sees
    total, basis, how = context_size(ctx, counter)
    shown = redactor.messages(ctx.messages)
    model = "/".join(ctx.model) if ctx.model else None
    texts = [redactor.text(text) for text in ctx.system_texts()]
    system = recorded_system(texts)  # as recorded: one text, or the list of several
    tools = redactor.value(ctx.tools) if ctx.tools else ctx.tools
    if as_json:
        emit_json({
            "leaf_id": leaf, "model": model, "thinking_level": ctx.thinking_level,
            "active_tools": ctx.active_tools,
            "compaction_id": ctx.compaction.id if ctx.compaction else None,
            "receipt": (ctx.compaction.receipt.to_dict() if ctx.compaction is not None
                        and ctx.compaction.receipt is not None else None),
            "total_tokens": total, "total_is_estimate": basis != "reported",
            "total_basis": basis,
            "system_prompt_stored": _has_system_prompt(ctx),
            "request_id": ctx.request_id, "system": system, "tools": tools,
            "params": ctx.params, "stream": ctx.stream,
            "messages": [{"index": i, "entry_id": eid, "tokens": n, "message": m.to_dict()}
                         for i, (m, eid, n) in enumerate(zip(shown, ctx.entry_ids,
                                                             counts, strict=True))],
        })
        return
    out = Out()
    # The provider's order: Anthropic builds the prompt from the tools, the system prompt,
    # then the messages; a Chat Completions body holds the messages (the system prompt
    # first), then the tools.
    tools_first = ctx.model is not None and ctx.model[0] == "anthropic"
    if tools_first:
        _print_tools(out, ctx, tools)
    for n, text in enumerate(texts, 1):
        which = f" ({n} of {len(texts)})" if len(texts) > 1 else ""
        out.styled([("[system] ", "bold magenta"),
                    (f"recorded in entry {ctx.request_id}{which}  ~"
                     f"{counter.count_message(Message.system(text))} tokens", "dim")])
        for line in text.split("\n"):
            out.line("    " + line)
    if not texts and not _has_system_prompt(ctx):
        out.line("(no system prompt is stored in this session: the agent that runs it sends "
                 "its own before these messages)", "dim")
    for i, (m, eid, n) in enumerate(zip(shown, ctx.entry_ids, counts, strict=True)):
        _print_message(out, i, m, eid, n)
    if not tools_first:
        _print_tools(out, ctx, tools)
    out.line()
    out.fields([
        ("messages", str(len(ctx.messages))),
        ("context size", f"{total} tokens ({how})"),
        ("model", model or "-"),
        ("thinking", ctx.thinking_level or "-"),
        ("tools", ", ".join(ctx.active_tools) if ctx.active_tools is not None else "-"),
        ("compaction", short_id(ctx.compaction.id) if ctx.compaction else "none"),
    ])
    if ctx.compaction is not None:
        for text in receipt_lines(ctx.compaction.receipt):
            out.line(text)


def _print_tools(out: Out, ctx: SessionContext, tools: list[dict[str, Any]] | None) -> None:
    if not tools:
        return
    out.styled([("[tools] ", "bold magenta"),
                (f"{len(tools)} recorded in entry {ctx.request_id}", "dim")])
    for text in _tool_lines(tools):
        out.line("    " + text)


def _has_system_prompt(ctx: SessionContext) -> bool:
    return ctx.system is not None or any(m.role == "system" and m.kind is None
                                         for m in ctx.messages)


def context_size(ctx: SessionContext, counter: EstimateCounter) -> tuple[int, str, str]:
    """The tokens the next request sends from this context, how that was found (``reported``,
    ``compaction`` or ``estimate``), and those words for a person.

    The one count (``SessionContext.measure``). The provider's last reported usage comes
    first. Right after a compaction there is none yet: the compaction entry's own count (which includes what the provider reported beyond
    the estimate, such as tool definitions) plus estimates of what came after it, so the
    figure `compact` printed is the one shown here.
    """
    count = ctx.measure(counter)
    if count.basis == "reported":
        return count.tokens, "reported", (f"provider-reported at message [{count.anchor}] "
                                          "plus estimates after it")
    if count.basis == "compaction" and ctx.compaction is not None:
        return (count.tokens, "compaction",
                f"counted by compaction {short_id(ctx.compaction.id)} plus estimates after it")
    return count.tokens, "estimate", "estimated"


def _print_message(out: Out, i: int, m: Message, eid: str | None, tokens: int) -> None:
    source = f"entry {eid}" if eid else "added by contextree"
    out.styled([(f"[{i}] ", "dim"), (message_title(m), "bold magenta"),
                (f"  {source}  ~{tokens} tokens", "dim")])
    for text in message_body(m):
        out.line("    " + text)


# -- stats ---------------------------------------------------------------------------------

@command("stats")
def stats_command(
    file: FileArg,
    expand: Annotated[bool, typer.Option("--all", help="List every branch tip (by default "
                                         "a session with many lists the current one, the "
                                         "labelled ones and the longest).")] = False,
    by_model: Annotated[bool, typer.Option("--by-model", help="Only the model calls of the "
                                           "whole file, per model, with their total.")]
    = False,
    as_json: JsonOpt = False,
) -> None:
    """Messages, billed tokens and cost for the current branch and the whole file."""
    storage = open_storage_of(file, readonly=True)
    with Session.open(storage) as session:
        stats = session.stats()
        size = storage.health().size
    if by_model:
        _print_by_model(stats, as_json)
        return
    if as_json:
        emit_json(stats.to_dict())
        return
    _print_stats(Out(), stats, size, expand)


def _print_by_model(s: SessionStats, as_json: bool) -> None:
    """Every call of the file under its model (replies, summarizer calls, interrupted
    calls), and the total they add up to."""
    f = s.file
    if as_json:
        emit_json({"by_model": f.to_dict()["by_model"],
                   "total": {**f.to_dict()["usage"], "calls": f.calls,
                             "estimated_calls": f.estimated, "cost_known": f.cost_known,
                             "unpriced_calls": f.unpriced}})
        return
    out = Out()
    rows = [_model_row(k, f.calls_by_model.get(k, 0), f.estimated_by_model.get(k, 0),
                       f.by_model[k], f.model_cost_text(k)) for k in sorted(f.by_model)]
    rows.append(_model_row("total", f.calls, f.estimated, f.usage, f.cost_text))
    out.table(["model", "calls", "input", "output", "cache read", "cache write", "cost"],
              rows, right=(1, 2, 3, 4, 5, 6))
    if f.estimated:
        out.line(f"~ {f.estimated} call(s) interrupted before the provider reported usage: "
                 "their tokens are estimated", "dim")
    if s.prices_hint:
        out.line(f"costs unknown: {s.prices_hint}")


def _model_row(name: str, calls: int, estimated: int, u: Any, cost: str) -> list[str]:
    mark = "~" if estimated else ""
    return [name, str(calls) + (f" ({estimated} estimated)" if estimated else ""),
            mark + str(u.input), mark + str(u.output), str(u.cache_read), str(u.cache_write),
            cost]


SHOWN_BRANCHES = 20  # branch tips `stats` lists without --all (beside current and labelled)


def _branches_shown(branches: list[Any], expand: bool) -> list[Any]:
    """The tips a person reads: all of them with ``expand`` or when they are few; else the
    current one, the labelled ones and the longest, in the file's order."""
    if expand or len(branches) <= SHOWN_BRANCHES * 2:
        return branches
    longest = sorted(range(len(branches)), key=lambda i: -branches[i].message_count)
    keep = {i for i, b in enumerate(branches) if b.current or b.label}
    keep.update(longest[:SHOWN_BRANCHES])
    return [b for i, b in enumerate(branches) if i in keep]


def _print_stats(out: Out, s: SessionStats, size: int | None, expand: bool = False) -> None:
    out.fields([
        ("session", s.session_id),
        ("name", s.name or "-"),
        ("leaf", s.leaf_id or "-"),
        ("entries", str(s.entry_count)),
        ("branches", str(s.branch_count)),
        ("size", human_size(size) if size is not None else "-"),
        ("quarantined", str(s.quarantined_lines)),
    ])
    out.line()
    names = ["messages", "user", "assistant", "tool", "system", "billed tokens", "input",
             "output", "cache read", "cache write", "cache hits", "cost", "compactions"]
    table = [[n, _stat(s.branch, n), _stat(s.file, n)] for n in names]
    out.table(["", "current branch", "whole file"], table, right=(1, 2))
    models = sorted(set(s.file.by_model))
    if models:
        out.line()
        out.table(["model", "calls", "input", "output", "cost"],
                  [[k, str(s.file.calls_by_model.get(k, 0)), str(s.file.by_model[k].input),
                    str(s.file.by_model[k].output), s.file.model_cost_text(k)]
                   for k in models], right=(1, 2, 3, 4))
    if len(s.branches) > 1:
        out.line()
        shown = _branches_shown(s.branches, expand)
        out.table(["branch tip", "label", "messages", "cost"],
                  [[("* " if b.current else "  ") + b.tip_id, b.label or "",
                    str(b.message_count), b.cost_text] for b in shown], right=(2, 3))
        if len(shown) < len(s.branches):
            out.line(f"({len(s.branches) - len(shown)} more branches: the current one, the "
                     f"labelled ones and the {SHOWN_BRANCHES} longest are shown; --all shows "
                     "every one, --json has them all)", "dim")
    if s.prices_hint:
        out.line()
        out.line(f"costs unknown: {s.prices_hint}")


def _stat(u: UsageStats, name: str) -> str:
    values: dict[str, str] = {
        "messages": str(u.message_count),
        "billed tokens": str(u.total_tokens),
        "input": str(u.usage.input),
        "output": str(u.usage.output),
        "cache read": str(u.usage.cache_read),
        "cache write": str(u.usage.cache_write),
        "cache hits": (f"{u.cache_hit_share:.0%} of prompt" if u.cache_hit_share is not None
                       else "-"),
        "cost": u.cost_text,
        "compactions": str(u.compactions),
    }
    return values.get(name, str(u.by_role.get(name, 0)))


# -- verify --------------------------------------------------------------------------------

class _Reporting(io.BufferedReader):
    """A buffered file that reports how far it has been read (for the progress bar)."""

    def __init__(self, path: Path, report: ProgressFn) -> None:
        super().__init__(io.FileIO(path, "rb"), buffer_size=1 << 20)
        self._report = report
        self._total = os.fstat(self.fileno()).st_size

    def _progress(self) -> None:
        self._report(self.tell(), self._total)

    def read(self, size: int | None = -1, /) -> bytes:
        data = super().read(size)
        self._progress()
        return data

    def readinto(self, buffer: Any, /) -> int:
        n = super().readinto(buffer)
        self._progress()
        return n

    def readline(self, size: int | None = -1, /) -> bytes:
        data = super().readline(size)
        self._progress()
        return data


@command("verify")
def verify_command(file: FileArg, as_json: JsonOpt = False) -> None:
    """Check that a session file loads cleanly (read-only). Exit 1 names the problem line."""
    address = address_of(file)
    if not address.is_file:  # a database checks every entry as it is stored
        with open_session(file, readonly=True) as session:
            report: dict[str, Any] = {"path": file, "ok": True, "entries": len(session),
                                      "leaf_id": session.leaf_id, "session_id": session.id}
        if as_json:
            emit_json(report)
        else:
            Out().styled([("OK ", "bold green"), (f"{file}: {report['entries']} entries, "
                                                  f"leaf {short_id(report['leaf_id'])}", None)])
        return
    path = Path(address.where)
    require_regular_file(path)
    if not path.is_file():
        raise SessionNotFound("no such session file", path=file)
    if is_flat_log(path):
        _verify_flat_log(path, file, as_json)
        return
    size = path.stat().st_size
    report = {"path": file, "ok": True, "size": size}
    try:
        with progress_bar("verifying", size, VERIFY_PROGRESS_BYTES) as bar, (
            _Reporting(path, bar) if bar is not None else open(path, "rb")
        ) as f:
            index, _, torn = load(f, file)
        report.update(entries=len(index.by_id), leaf_id=index.leaf_id,
                      session_id=index.header.id)
        if torn is not None:
            report.update(ok=False, code="torn_line", line=torn.line,
                          message=f"{file}:{torn.line}: the last line is incomplete (a write "
                          "was cut short or is in progress); `contextree repair` moves it to "
                          "the quarantine file")
    except SessionError as e:
        report.update(ok=False, code=e.code, line=e.line, message=str(e))
    if as_json:
        emit_json(report)
    else:
        out = Out()
        if report["ok"]:
            out.styled([("OK ", "bold green"),
                        (f"{file}: {report['entries']} entries, leaf "
                         f"{short_id(report['leaf_id'])}", None)])
        else:
            out.styled([("PROBLEM ", "bold red"), (f"[{report['code']}] ", "red"),
                        (report["message"], None)])
    if not report["ok"]:
        raise typer.Exit(1)


def _verify_flat_log(path: Path, file: str, as_json: bool) -> None:
    health = verify_log(path)
    report: dict[str, Any] = {
        "path": file, "ok": health.ok, "kind": "flat_log", "messages": health.messages,
        "size": health.size, "torn_tail": health.torn_tail,
        "bad_lines": [{"line": n, "reason": r} for n, r in health.bad_lines]}
    if not health.ok:
        line, reason = health.bad_lines[0]
        more = len(health.bad_lines) - 1
        report.update(code="corrupt_line", line=line,
                      message=f"{file}:{line}: {reason}"
                      + (f" (and {more} more unreadable lines)" if more else "")
                      + "; `contextree repair` moves unreadable lines to the quarantine file")
    if as_json:
        emit_json(report)
    elif health.ok:
        Out().styled([("OK ", "bold green"),
                      (f"{file}: flat message log, {health.messages} messages", None)])
    else:
        Out().styled([("PROBLEM ", "bold red"), ("[corrupt_line] ", "red"),
                      (report["message"], None)])
    if not health.ok:
        raise typer.Exit(1)
