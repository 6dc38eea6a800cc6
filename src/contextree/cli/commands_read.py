"""Read-only commands: ``ls``, ``tree``, ``show``, ``stats``, ``verify`` (each with ``--json``)."""

from __future__ import annotations

import io
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

import orjson
import typer

from .._context import SessionContext
from .._messages import Message
from .._session import Session, TreeNode
from .._stats import SessionStats, UsageStats
from .._text import first_line
from ..entries import MessageEntry, RequestEntry, to_dict
from ..errors import SessionError, SessionNotFound
from ..formats import Progress as ProgressFn
from ..runtime import is_flat_log, verify_log
from ..storage import Address
from ..storage._backends import PostgresBackend
from ..storage._jsonl import load
from ..tokens import EstimateCounter, count_context
from .app import command
from .listing import NAME_WIDTH, scan, utc_stamp, when
from .listing import rows as listing_rows
from .output import Out, UsageProblem, clip, emit_json, human_size, progress_bar, short_id
from .render import (
    TipsOnDemand,
    TreeLine,
    entry_summary,
    message_body,
    message_title,
    request_summary,
    shown_prompt,
    summary_line,
    tree_lines,
)
from .sessions import (
    address_of,
    open_session,
    open_storage_of,
    require_directory,
    require_regular_file,
    resolve_entry,
)
from .terminal import fit, visible, width_of

VERIFY_PROGRESS_BYTES = 50 << 20
LABEL_WIDTH = 24  # columns of a label in a tree line
MIN_TEXT = 16  # columns an entry's text keeps in a tree line before the notes give way

JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")]
FileArg = Annotated[str, typer.Argument(metavar="FILE", help="A session file.",
                                         show_default=False)]


# -- ls ------------------------------------------------------------------------------------

@command("ls")
def ls_command(
    where: Annotated[str, typer.Argument(metavar="DIR", help="Where to look (recursively), "
                                         "or a postgresql:// URL.")] = ".",
    as_json: JsonOpt = False,
) -> None:
    """List the sessions under DIR (or in a PostgreSQL database), newest activity first.

    Each file is read in bounded memory: its header, its tail and a few samples for the
    entry count (marked ≈ when estimated); a name set before the tail is found by a byte
    search backwards through the file."""
    address = address_of(where)
    if not address.is_file:
        _ls_database(address, as_json)
        return
    directory = Path(address.where)
    if directory.is_file():
        raise UsageProblem(f"{directory}: this is a session file, not a directory; `ls` lists "
                           f"the sessions in a directory (`contextree stats {directory}` "
                           "describes one)")
    require_directory(directory, "`ls` lists the sessions in a directory")
    if not directory.is_dir():
        raise SessionNotFound("no such directory", path=str(directory))
    found, other = scan(directory)
    if as_json:
        emit_json([s.to_dict() for s in found])
        return
    out = Out()
    if not found:
        out.line(f"no contextree sessions under {directory}")
    else:
        out.table(["path", "name", "id", "created", "last activity", "entries", "size"],
                  listing_rows(found, directory), right=(5, 6))
    if other:
        out.line(f"({len(other)} other .jsonl files are not contextree sessions; "
                 "`contextree import auto FILE` converts other agents' sessions)", "dim")


def _ls_database(address: Address, as_json: bool) -> None:
    if not isinstance(address.backend, PostgresBackend):
        raise UsageProblem(f"`contextree ls` lists directories and PostgreSQL databases, "
                           f"not {address.scheme}:// targets")
    from ..storage.postgres import list_sessions

    base = address.where
    found = sorted(list_sessions(base), key=lambda r: (utc_stamp(r.last_activity), r.id),
                   reverse=True)  # newest activity first, as for files
    if as_json:
        emit_json([{"url": f"{base}#{r.id}", "id": r.id, "name": r.name,
                    "created": utc_stamp(r.header.created_at),
                    "last_activity": utc_stamp(r.last_activity), "entries": r.entry_count,
                    "leaf_id": r.leaf_id} for r in found])
        return
    out = Out()
    if not found:
        out.line(f"no contextree sessions in {base}")
        return
    out.table(["id", "name", "created", "last activity", "entries"],
              [[r.id, fit(visible(r.name or ""), NAME_WIDTH), when(utc_stamp(r.header.created_at)),
                when(utc_stamp(r.last_activity)), str(r.entry_count)] for r in found],
              right=(4,))


# -- tree ----------------------------------------------------------------------------------

@command("tree")
def tree_command(
    file: FileArg,
    expand: Annotated[bool, typer.Option("--all", help="Show every entry (no collapsing).")]
    = False,
    as_json: JsonOpt = False,
) -> None:
    """Print the entry tree: branch points, labels, compactions, branch summaries, and the
    current leaf (<- leaf). Entries on the current branch are marked with *."""
    with open_session(file, readonly=True) as session:
        roots = session.tree()
        left = TipsOnDemand(session.storage.outline)
        if as_json:
            emit_json(_tree_json(session, roots, left))
            return
        out = Out()
        if not roots:
            out.line("(empty session)")
            return
        for line in tree_lines(roots, expand=expand):
            _print_tree_line(out, line, left)


def _print_tree_line(out: Out, line: TreeLine, left: Mapping[str, str | None]) -> None:
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
        tail += f"  [{fit(visible(node.label), LABEL_WIDTH)}]"
    if node.is_leaf:
        tail += "  <- leaf"
    fixed = width_of(marker + line.prefix + eid + "  ")
    if out.width - fixed - width_of(tail + note) < MIN_TEXT:
        note = ""
    room = max(out.width - fixed - width_of(tail + note), 1)
    text = clip(entry_summary(node.entry, left), room)
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
        budget -= width_of(shown)
        out.append((shown, style))
    return out


def _tree_json(session: Session, roots: list[TreeNode],
               left: Mapping[str, str | None]) -> dict[str, Any]:
    entries: list[dict[str, Any]] = []
    stack = list(reversed(roots))
    while stack:
        node = stack.pop()
        entries.append({
            "id": node.entry.id,
            "parent_id": node.entry.parent_id,
            "type": node.entry.type,
            "timestamp": node.entry.timestamp,
            "summary": entry_summary(node.entry, left),
            "label": node.label,
            "on_branch": node.on_branch,
            "is_leaf": node.is_leaf,
            "children": [c.entry.id for c in node.children],
        })
        if node.entry.id in left:
            entries[-1]["left_from"] = left[node.entry.id]
        stack.extend(reversed(node.children))
    return {"session_id": session.id, "name": session.name, "leaf_id": session.leaf_id,
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
    raw: Annotated[bool, typer.Option("--raw", help="Print recorded system prompts as they "
                                      "are, secrets included (default: redacted).")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Show the path from the root to an entry, or (--context) what the model sees there."""
    from ..models._wire_body import WIRE_APIS  # on use: the models are not for every command

    if wire is not None and not context:
        raise UsageProblem("--wire prints the request body of a context: add --context")
    if wire is not None and wire not in WIRE_APIS:
        raise UsageProblem(f"--wire {wire!r}: choose one of {', '.join(WIRE_APIS)}")
    with open_session(file, readonly=True) as session:
        leaf = resolve_entry(session, at) if at is not None else session.leaf_id
        if wire is not None:
            _show_wire(session, leaf, wire, raw)
        elif context:
            _show_context(session, leaf, as_json, raw)
        else:
            _show_path(session, leaf, as_json, raw)


def _show_wire(session: Session, leaf: str | None, api: str, raw: bool) -> None:
    """The request body a call at ``leaf`` would send, as the SDK would write it."""
    from ..models._wire_body import request_body

    ctx = session.build_context(leaf)
    if ctx.system is not None:
        ctx.system = shown_prompt(ctx.system, raw=raw)
    model = ctx.model[1] if ctx.model else "unknown-model"
    body = request_body(api, model, ctx.request_messages(), ctx.tools or (), ctx.params,
                        stream=ctx.stream)
    out = typer.get_binary_stream("stdout")
    out.write(body + b"\n")
    out.flush()


def _show_path(session: Session, leaf: str | None, as_json: bool, raw: bool = False) -> None:
    path = session.branch(leaf)
    labels = session.labels()
    if as_json:
        emit_json([{**_entry_json(e, raw), "label": labels.get(e.id)} for e in path])
        return
    out = Out()
    left = TipsOnDemand(session.storage.outline)
    for i, entry in enumerate(path):
        label = f"  [{labels[entry.id]}]" if entry.id in labels else ""
        if isinstance(entry, MessageEntry):
            head = message_title(entry.message)
            body = message_body(entry.message)
        elif isinstance(entry, RequestEntry):
            head, body = entry.type, _request_body(entry, raw)
        else:
            head, body = entry.type, _entry_body(entry, left)
        out.styled([(f"#{i} ", "dim"), (entry.id, "cyan"), (f"  {head}", "bold"),
                    (f"  {entry.timestamp}", "dim"), (label, "yellow bold")])
        for text in body:
            out.line("    " + text)
    if not path:
        out.line("(empty: the leaf is before the first entry)")


def _entry_json(entry: Any, raw: bool) -> dict[str, Any]:
    data = to_dict(entry)
    if isinstance(entry, RequestEntry) and entry.system is not None:
        data["system"] = shown_prompt(entry.system, raw=raw)
    return data


def _request_body(entry: RequestEntry, raw: bool) -> list[str]:
    """A request entry in full, but for the tool schemas (elided, and marked so)."""
    lines = [request_summary(entry)]
    if entry.system is not None:
        lines.append("system prompt:")
        lines += ["  " + line for line in shown_prompt(entry.system, raw=raw).split("\n")]
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
    full = getattr(entry, "summary", None)
    if isinstance(full, str) and full:
        head = summary.removesuffix(summary_line(full)).rstrip()
        return [head, *full.split("\n")]
    return [summary]


def _show_context(session: Session, leaf: str | None, as_json: bool,
                  raw: bool = False) -> None:
    ctx = session.build_context(leaf)
    counter = EstimateCounter()
    counts = [counter.count_message(m) for m in ctx.messages]
    total, basis, how = context_size(ctx, counter)
    model = "/".join(ctx.model) if ctx.model else None
    system = shown_prompt(ctx.system, raw=raw) if ctx.system is not None else None
    if as_json:
        emit_json({
            "leaf_id": leaf, "model": model, "thinking_level": ctx.thinking_level,
            "active_tools": ctx.active_tools,
            "compaction_id": ctx.compaction.id if ctx.compaction else None,
            "total_tokens": total, "total_is_estimate": basis != "reported",
            "total_basis": basis,
            "system_prompt_stored": _has_system_prompt(ctx),
            "request_id": ctx.request_id, "system": system, "tools": ctx.tools,
            "params": ctx.params, "stream": ctx.stream,
            "messages": [{"index": i, "entry_id": eid, "tokens": n, "message": m.to_dict()}
                         for i, (m, eid, n) in enumerate(zip(ctx.messages, ctx.entry_ids,
                                                             counts, strict=True))],
        })
        return
    out = Out()
    # The provider's order: Anthropic builds the prompt from the tools, the system prompt,
    # then the messages; a Chat Completions body holds the messages (the system prompt
    # first), then the tools.
    tools_first = ctx.model is not None and ctx.model[0] == "anthropic"
    if tools_first:
        _print_tools(out, ctx)
    if system is not None:
        out.styled([("[system] ", "bold magenta"),
                    (f"recorded in entry {ctx.request_id}  ~"
                     f"{counter.count_message(Message.system(system))} tokens", "dim")])
        for text in system.split("\n"):
            out.line("    " + text)
    elif not _has_system_prompt(ctx):
        out.line("(no system prompt is stored in this session: the agent that runs it sends "
                 "its own before these messages)", "dim")
    for i, (m, eid, n) in enumerate(zip(ctx.messages, ctx.entry_ids, counts, strict=True)):
        _print_message(out, i, m, eid, n)
    if not tools_first:
        _print_tools(out, ctx)
    out.line()
    out.fields([
        ("messages", str(len(ctx.messages))),
        ("context size", f"{total} tokens ({how})"),
        ("model", model or "-"),
        ("thinking", ctx.thinking_level or "-"),
        ("tools", ", ".join(ctx.active_tools) if ctx.active_tools is not None else "-"),
        ("compaction", short_id(ctx.compaction.id) if ctx.compaction else "none"),
    ])


def _print_tools(out: Out, ctx: SessionContext) -> None:
    if not ctx.tools:
        return
    out.styled([("[tools] ", "bold magenta"),
                (f"{len(ctx.tools)} recorded in entry {ctx.request_id}", "dim")])
    for text in _tool_lines(ctx.tools):
        out.line("    " + text)


def _has_system_prompt(ctx: SessionContext) -> bool:
    return ctx.system is not None or any(m.role == "system" and m.kind is None
                                         for m in ctx.messages)


def context_size(ctx: SessionContext, counter: EstimateCounter) -> tuple[int, str, str]:
    """The tokens the next request sends from this context, how that was found (``reported``,
    ``compaction`` or ``estimate``), and those words for a person.

    The provider's last reported usage comes first. Right after a compaction there is none
    yet: the compaction entry's own count (which includes what the provider reported beyond
    the estimate, such as tool definitions) plus estimates of what came after it, so the
    figure `compact` printed is the one shown here.
    """
    anchor = ctx.usage_anchor
    if anchor is not None:
        total = count_context(ctx.messages, counter, fresh_from=ctx.fresh_from)
        return total, "reported", (f"provider-reported at message [{anchor}] plus estimates "
                                   "after it")
    comp = ctx.compaction
    if comp is not None and comp.tokens_after is not None:
        after = counter.count_messages(ctx.messages[ctx.fresh_from:])
        return (comp.tokens_after + after, "compaction",
                f"counted by compaction {short_id(comp.id)} plus estimates after it")
    return counter.count_messages(ctx.messages), "estimate", "estimated"


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
    _print_stats(Out(), stats, size)


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


def _print_stats(out: Out, s: SessionStats, size: int | None) -> None:
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
             "output", "cache read", "cache write", "cost", "compactions"]
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
        out.table(["branch tip", "label", "messages", "cost"],
                  [[("* " if b.current else "  ") + b.tip_id, b.label or "",
                    str(b.message_count), b.cost_text] for b in s.branches], right=(2, 3))
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
