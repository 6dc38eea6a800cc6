"""Sub-agents of other tools' sessions: each one linked to the tool call that started it.

A coding agent that delegates (Gemini CLI's ``invoke_agent``, opencode's and Copilot CLI's
``task``) records the sub-agent's own conversation beside the parent's: a file of its own, a
child session in the same database, or events inside the same file. A format's reader names
them as ``SubagentRef`` (the call, the tool's id for the agent, the source its reader reads
for it alone) and calls ``place``: after the result of the call, a ``<format>/subagent``
custom entry names the sub-agent (``agent_id``, ``tool_use_id``, ``file``, ``meta``), and

* by default the sub-agent's entries go into the same session as a root of their own (the
  link's ``first_entry_id`` names it), so one import loses nothing;
* with ``import_session(..., with_subagents=True)`` (``import_with_subagents``) each one is a
  session of its own beside the parent (``<name>.agent-<id>.jsonl``), whose header's
  ``parent_session`` is the parent, and the link names it (``session``).

The leaf stays the parent's. Claude Code's sub-agents (``_claude_code_subagents``) work the
same way and share ``pointed_at``.

On export, ``linked_agents(session, at, redactor)`` finds the sub-agents linked on the
exported branch, each with the session that holds it and where its context ends: its root in
the same session (``first_entry_id``), or the session it was imported into (``session``,
opened read-only and redacted like the parent), for a format that writes them beside the
session (Claude Code's sidechain files).
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from .._session import Session
from ..entries import (
    AnyEntry,
    CompactionEntry,
    ContextEditEntry,
    CustomEntry,
    LabelEntry,
    LeafEntry,
    MessageEntry,
)
from ..errors import SessionError, SessionExists
from ._base import Ids, Imported, Json, Progress

if TYPE_CHECKING:  # loaded by an export's redactor: an import never needs it
    from ..redaction import Redactor

__all__ = ["LinkedAgent", "SubagentRef", "import_with_subagents", "linked_agents", "place",
           "pointed_at", "report", "session_path"]

WriteImported = Callable[..., Session]
ReadAgent = Callable[[Path], Imported]
"""Reads one sub-agent's source (``SubagentRef.source``) as a session of its own."""


@dataclass(frozen=True)
class SubagentRef:
    """One sub-agent of a session: the id of the tool call that started it (``call_id``;
    ``None`` when the tool does not say), the tool's own id for it (``agent_id``), what the
    format's reader reads for it alone (``source``: a file, or ``FILE#KEY``) and what the
    tool says of it (``meta``: its type, name, description...)."""

    call_id: str | None
    agent_id: str
    source: Path
    meta: Json = field(default_factory=dict)


def session_path(dest: Path, agent_id: str) -> Path:
    """Where the sub-agent ``agent_id`` of the session imported to ``dest`` goes:
    ``<dest without .jsonl>.agent-<id>.jsonl`` beside it (the id made safe for a file name)."""
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", agent_id).strip(".") or "agent"
    return dest.with_name(f"{dest.name.removesuffix('.jsonl')}.agent-{safe}.jsonl")


def place(imported: Imported, fmt: str, refs: list[SubagentRef], read_agent: ReadAgent,
          sessions: dict[str, str] | None = None) -> None:
    """Link each of ``refs`` in ``imported`` (a parent's entries, as read) after the result
    of its call, and put its entries in as a root of their own, unless ``sessions`` maps its
    ``agent_id`` to the session it was imported into (then the link names that session). A
    sub-agent that cannot be read is reported (``report["subagent_errors"]``), not fatal."""
    if not refs:
        return
    entries = imported.entries
    if imported.leaf_id is None and entries:
        imported.leaf_id = entries[-1].id  # the parent's leaf, whatever comes after it
    ids = Ids(e.id for e in entries)
    links: list[Json] = []
    errors: list[Json] = []
    for ref in refs:
        data: Json = {"agent_id": ref.agent_id, "tool_use_id": ref.call_id,
                      "file": str(ref.source), "meta": ref.meta}
        if sessions is not None and ref.agent_id in sessions:
            data["session"] = sessions[ref.agent_id]
        elif sessions is None:
            try:
                agent = read_agent(ref.source)
            except (SessionError, OSError) as e:
                errors.append({"agent_id": ref.agent_id, "file": str(ref.source),
                               "error": str(e)})
                continue
            added = _as_new_root(agent.entries, ids)
            if added:
                data["first_entry_id"] = added[0].id
            entries.extend(added)
        else:  # import_with_subagents could not read it: say why
            try:
                read_agent(ref.source)
                problem = "not imported"
            except (SessionError, OSError) as e:
                problem = str(e)
            errors.append({"agent_id": ref.agent_id, "file": str(ref.source),
                           "error": problem})
            continue
        after = _result_of(entries, ref.call_id)
        link = CustomEntry(ids.new(), after.id if after else None,
                           after.timestamp if after else imported.header.created_at,
                           custom_type=f"{fmt}/subagent", data=data)
        _insert_after(entries, after, link)
        links.append(data)
    report(imported, {"subagents": links, **({"subagent_errors": errors} if errors else {})})


def report(imported: Imported, found: Json) -> None:
    """Add ``found`` to what the import reports: ``imported.report`` and the header's
    ``imported_from.report``, where ``import`` finds it again."""
    imported.report.update(found)
    meta = imported.header.metadata
    info = meta.get("imported_from") if isinstance(meta, dict) else None
    if isinstance(info, dict):
        info["report"] = {**(info.get("report") or {}), **found}


def _result_of(entries: list[AnyEntry], call_id: str | None) -> AnyEntry | None:
    """The tool result of ``call_id`` (else the call itself), where the link goes."""
    found: AnyEntry | None = None
    for e in entries:
        if not isinstance(e, MessageEntry) or call_id is None:
            continue
        m = e.message
        if m.role == "tool" and m.tool_call_id == call_id:
            return e
        if found is None and any(c.id == call_id for c in m.tool_calls or ()):
            found = e
    return found


def _insert_after(entries: list[AnyEntry], after: AnyEntry | None, link: CustomEntry) -> None:
    """``link`` on the branch right after ``after``: what followed ``after`` follows it."""
    if after is None:
        entries.append(link)
        return
    for e in entries:
        if e.parent_id == after.id:
            e.parent_id = link.id
    entries.insert(entries.index(after) + 1, link)


def _as_new_root(agent: list[AnyEntry], ids: Ids) -> list[AnyEntry]:
    """A sub-agent's entries with ids not taken in the parent (renamed where one is, with
    every reference to it), their root a root of the parent's session."""
    renamed: dict[str, str] = {}
    for e in agent:
        if not ids.claim(e.id):
            renamed[e.id] = ids.new()
            e.id = renamed[e.id]
    if renamed:
        for e in agent:
            _rename_references(e, renamed)
    if agent:
        agent[0].parent_id = None
    return agent


def _rename_references(e: AnyEntry, renamed: dict[str, str]) -> None:
    def new(x: Any) -> Any:
        return renamed.get(x, x) if isinstance(x, str) else x

    e.parent_id = new(e.parent_id)
    if isinstance(e, CompactionEntry):
        e.first_kept_entry_id = new(e.first_kept_entry_id)
        if e.pinned is not None:
            e.pinned = [new(x) for x in e.pinned]
    elif isinstance(e, LabelEntry | LeafEntry | ContextEditEntry):
        e.target_id = new(e.target_id)


def pointed_at(imported: Imported, dest: Path, target: Path) -> Imported:
    """``imported`` (one sub-agent) with its header linked to the session at ``dest``: its
    ``parent_session`` is ``dest``, and so is ``imported_from.subagent.parent_session``."""
    hdr = imported.header
    meta = dict(hdr.metadata or {})
    info = dict(meta.get("imported_from") or {})
    link = dict(info.get("subagent") or {})
    link.update(parent_session=str(dest), session=str(target), resolved=True)
    link.pop("note", None)
    info["subagent"] = link
    meta["imported_from"] = info
    imported.header = msgspec.structs.replace(hdr, parent_session=str(dest), metadata=meta)
    return imported


ReadParent = Callable[[Path, Progress | None, dict[str, str]], Imported]
"""Reads the parent session, linking the sub-agents mapped (agent id -> session path)."""


def import_with_subagents(src: Path, dest: Path, write: WriteImported, refs: list[SubagentRef],
                          read_agent: ReadAgent, read_parent: ReadParent, *,
                          progress: Progress | None = None, durable: bool = True) -> Session:
    """Import ``src`` to ``dest`` and each sub-agent of ``refs`` beside it (see the module
    notes); all or nothing for the files it writes: the sub-agents are written first and
    removed again if the parent fails. Returns the parent session, open for writing."""
    targets = {ref.agent_id: session_path(dest, ref.agent_id) for ref in refs}
    for target in (dest, *targets.values()):
        if target.exists():
            raise SessionExists("a file is already there; choose another path or remove it",
                                path=str(target))
    written: dict[str, str] = {}
    try:
        for ref in refs:
            target = targets[ref.agent_id]
            try:
                agent = read_agent(ref.source)
            except (SessionError, OSError):
                continue  # the parent's read reports it (subagent_errors)
            write(pointed_at(agent, dest, target), target, durable=durable).close()
            written[ref.agent_id] = str(target)
        return write(read_parent(src, progress, written), dest, durable=durable)
    except BaseException:
        for path in written.values():
            with contextlib.suppress(OSError):
                Path(path).unlink()
        raise


# -- export: the sub-agents a branch links to -----------------------------------------------


@dataclass(frozen=True)
class LinkedAgent:
    """A sub-agent linked on an exported branch: its link (the ``<format>/subagent`` entry,
    whose data names ``agent_id``, ``tool_use_id``, ``meta``), the session that holds it and
    the entry its context ends at (``None``: that session's leaf)."""

    link: CustomEntry
    session: Session
    leaf: str | None


@contextlib.contextmanager
def linked_agents(session: Session, at: str | None,
                  redactor: Redactor) -> Iterator[list[LinkedAgent]]:
    """The sub-agents linked on the branch at ``at`` of ``session`` (the redacted copy an
    export is written from), their sessions open until the block ends (see the module
    notes). A link whose sub-agent is not there (a session file gone) is left out."""
    with contextlib.ExitStack() as stack:
        out = []
        for link in session.branch(at):
            if not (isinstance(link, CustomEntry) and link.custom_type.endswith("/subagent")
                    and isinstance(link.data, dict)):
                continue
            found = _agent_context(session, link.data, redactor, stack)
            if found is not None:
                out.append(LinkedAgent(link, *found))
        yield out


def _agent_context(session: Session, data: Json, redactor: Redactor,
                   stack: contextlib.ExitStack) -> tuple[Session, str | None] | None:
    root = data.get("first_entry_id")
    if isinstance(root, str) and root in session:
        last = data.get("last_entry_id")
        return session, last if isinstance(last, str) and last in session else _leaf_below(
            session, root)
    where = data.get("session")
    if not isinstance(where, str) or not Path(where).is_file():
        return None
    try:
        linked = stack.enter_context(Session.open(where, readonly=True))
    except SessionError:
        return None
    from ._redacted import redacted_copy, redactor_for

    return redacted_copy(linked, redactor_for(session, redactor)), None


def _leaf_below(session: Session, root: str) -> str:
    """The last entry appended below ``root`` (a sub-agent's own root in its parent)."""
    below, last = {root}, root
    for e in session.entries():
        if e.parent_id in below:
            below.add(e.id)
            last = e.id
    return last
