"""opencode sessions (``opencode-ai`` 1.18), read from opencode's own database.

opencode keeps every session of every project in one SQLite file,
``$XDG_DATA_HOME/opencode/opencode.db`` (``~/.local/share/opencode/opencode.db``): a ``session``
row (id, directory, title, parent for a sub-agent's session...), its ``message`` rows (JSON
``data``: ``role``, ``time``, ``tokens``, ``cost``, ``modelID``...) and each message's ``part``
rows (``text``, ``reasoning``, ``tool`` with its call and result in ``state``, ``step-start`` /
``step-finish``, ``compaction``...). Name the session as ``opencode.db#SESSION_ID`` (or only the
file, when it holds one session; ``contextree import opencode ID`` finds it by id or prefix).

Import makes the messages a chain in the order opencode sends them: a user message's text
parts are one user message; each step of an assistant message (from ``step-start`` to
``step-finish``) is an assistant message (reasoning as thinking, text, tool calls, the
message's usage on its last step) followed by one tool message per tool part, holding what the
tool returned (``state.output``, or ``state.error`` marked as an error). A ``compaction`` part
(opencode's request for a summary) is sent as the user text "What did we do so far?" and the
assistant message that answers it is the summary: a compaction entry holding that text goes
before them, so that the context starts there as opencode's does, and names the reply as
``summary_entry``, so that the summary is sent once, as that reply (marked as the summary), not
also as contextree's own rendering of it. What has no
message of its own stays on the message it came with (step parts, tool metadata, the rows'
own fields), and the session row in the header. The system prompt is not stored (opencode
builds it for every request), nor is the ``event`` table read: it is a log of the same changes.
"""

from __future__ import annotations

import os
import re
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._limits import parse_json
from .._messages import Message, TextPart, ThinkingPart, ToolCall, Usage
from ..entries import AnyEntry, CompactionEntry, CustomEntry, MessageEntry
from ..markers import CompactionSummaryMarker
from ._base import (
    Ids,
    Imported,
    Json,
    Progress,
    header,
    imported_metadata,
    input_error,
    iso_from_seconds,
    split_selector,
)
from ._subagents import SubagentRef, place

FORMAT = "opencode"
COMPACTION_PROMPT = "What did we do so far?"
"""The user text opencode sends for a ``compaction`` part."""
_MAGIC = b"SQLite format 3\x00"


def is_opencode_db(path: Path) -> bool:
    """Whether ``path`` is a SQLite file with opencode's ``session``, ``message`` and ``part``
    tables."""
    db, _ = split_selector(path)
    try:
        with open(db, "rb") as f:
            if f.read(16) != _MAGIC:
                return False
        with _connect(db) as con:
            names = {r[0] for r in con.execute("select name from sqlite_master where type = "
                                               "'table'")}
    except (OSError, sqlite3.Error):
        return False
    return {"session", "message", "part", "project"} <= names


def detect(path: Path) -> bool:
    """The ``import auto`` hook: opencode's database."""
    return is_opencode_db(path)


def _connect(db: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True)


def _json(raw: object, db: Path, where: str) -> Json:
    try:
        value = parse_json(raw if isinstance(raw, bytes | str) else b"")
    except ValueError as e:
        raise input_error(db, None, f"{where}: `data` is not valid JSON ({e})") from None
    if not isinstance(value, dict):
        raise input_error(db, None, f"{where}: `data` is not a JSON object")
    return value


# -- import ------------------------------------------------------------------------------


def read(path: Path, progress: Progress | None = None, *,
         subagent_sessions: dict[str, str] | None = None) -> Imported:
    """Read one session of opencode's database (see the module notes), with its forks as
    branches and its sub-agents (``subagents``): each one a root of its own in the session,
    linked after the result of the ``task`` call, or, with ``subagent_sessions`` (agent id
    -> session), linked to the session it was imported into."""
    imported, refs = _read_one(path, progress)
    place(imported, FORMAT, refs, lambda p: _read_one(p)[0], subagent_sessions)
    return imported


def subagents(path: Path) -> list[SubagentRef]:
    """The sub-agents of one session of the database: its child sessions (``parent_id``),
    each named by the ``task`` call whose result's metadata holds its ``sessionId``."""
    return _read_one(path)[1]


@dataclass
class _Loaded:
    """One session's rows: the session, its messages (with their ``data``) and parts."""

    session: sqlite3.Row
    rows: list[sqlite3.Row]
    datas: list[Json]
    parts: dict[str, list[tuple[str, Json]]]


def _load(con: sqlite3.Connection, db: Path, session: sqlite3.Row) -> _Loaded:
    rows = con.execute("select * from message where session_id = ? order by "
                       "time_created, id", (session["id"],)).fetchall()
    parts: dict[str, list[tuple[str, Json]]] = {}
    for p in con.execute("select * from part where session_id = ? order by id",
                         (session["id"],)):
        parts.setdefault(p["message_id"], []).append((p["id"], _json(p["data"], db,
                                                                     f"part {p['id']}")))
    datas = [_json(r["data"], db, f"message {r['id']}") for r in rows]
    return _Loaded(session, rows, datas, parts)


def _read_one(path: Path, progress: Progress | None = None
              ) -> tuple[Imported, list[SubagentRef]]:
    """One session with its forks, and the sub-agents it names."""
    db, key = split_selector(path)
    if not is_opencode_db(db):
        raise input_error(db, None, _not_opencode(db))
    try:
        with _connect(db) as con:
            con.row_factory = sqlite3.Row
            session = _session_row(con, db, key)
            own = _load(con, db, session)
            forks = [_load(con, db, f) for f in _fork_rows(con, own)]
            children = [r["id"] for r in con.execute(
                "select id from session where parent_id = ? order by time_created, id",
                (session["id"],))]
    except sqlite3.Error as e:
        raise input_error(db, None, f"cannot read the opencode database ({e}); is it "
                          "opencode's opencode.db?") from None
    ids = Ids()
    entries: list[AnyEntry] = []
    at_row = _chain(own, 0, None, ids, entries, progress)
    report: Json = {"messages": len(own.rows),
                    "parts": sum(len(v) for v in own.parts.values())}
    leaf = entries[-1].id if entries else None
    fork_rows = []
    for fork in forks:
        shared = _shared_prefix(own, fork)
        base = at_row.get(own.rows[shared - 1]["id"]) if shared else None
        mark = CustomEntry(ids.new(), base, iso_from_seconds(fork.session["time_created"]
                                                              / 1000),
                           custom_type=f"{FORMAT}/fork",
                           data={"session": fork.session["id"], "title": fork.session["title"],
                                 "copied_messages": [r["id"] for r in fork.rows[:shared]],
                                 "copied_parts": [pid for r in fork.rows[:shared]
                                                  for pid, _ in fork.parts.get(r["id"], ())]})
        entries.append(mark)
        _chain(fork, shared, mark.id, ids, entries, None)
        fork_rows.append(fork.session["id"])
        report["parts"] += sum(len(fork.parts.get(r["id"], ())) for r in fork.rows[shared:])
    if fork_rows:
        report["forks"] = [{"session": f} for f in fork_rows]
    meta = imported_metadata(FORMAT, db, session_id=session["id"],
                             report={"forks": report["forks"]} if fork_rows else None)
    meta["opencode"] = {k: _cell(session[k]) for k in session.keys()}  # noqa: SIM118 - a Row
    hdr = header(session["id"], iso_from_seconds(session["time_created"] / 1000),
                 cwd=session["directory"], metadata=meta, parent_session=session["parent_id"])
    imported = Imported(hdr, entries, leaf_id=leaf if fork_rows else None, report=report)
    return imported, _refs(db, own, children)


def _chain(s: _Loaded, start: int, parent: str | None, ids: Ids, entries: list[AnyEntry],
           progress: Progress | None) -> dict[str, str]:
    """Append the messages of ``s`` from row ``start`` on as a chain below ``parent``;
    returns the last entry id of each message row."""
    summaries = {r["id"] for r, d in zip(s.rows, s.datas, strict=True)
                 if d.get("summary") is True}
    answers = {d.get("parentID"): r["id"] for r, d in zip(s.rows, s.datas, strict=True)
               if r["id"] in summaries}
    tokens_before = 0  # what the context held, by the last reply's usage
    last: dict[str, str] = {}
    waiting: dict[str, CompactionEntry] = {}  # a summary's row -> its compaction
    for n, (row, data) in enumerate(zip(s.rows, s.datas, strict=True)):
        if n < start:
            continue
        when = iso_from_seconds(row["time_created"] / 1000)
        its_parts = s.parts.get(row["id"], [])
        if any(p.get("type") == "compaction" for _, p in its_parts):
            comp = CompactionEntry(ids.new(), parent, when, summary="",
                                   first_kept_entry_id=None, tokens_before=tokens_before,
                                   details={"source": FORMAT,
                                            "summary_message": answers.get(row["id"])})
            entries.append(comp)
            waiting[str(answers.get(row["id"]))] = comp
            parent = comp.id
        for i, msg in enumerate(_messages(row["id"], data, its_parts, row["id"] in summaries)):
            if msg.usage is not None:
                tokens_before = msg.usage.context_tokens
            comp_of = waiting.pop(row["id"], None) if msg.role == "assistant" else None
            if comp_of is not None:  # the summary the model wrote, sent as this reply
                # an id of contextree's: the link survives an export's redaction, which takes
                # an opencode id in `details` for a secret (the row id stays in `extra`)
                eid = ids.new()
                msg = msg.set_extra({"opencode_message_id": row["id"]})
                comp_of.summary = msg.text
                comp_of.details["summary_entry"] = eid
            else:
                eid = row["id"] if i == 0 and ids.claim(row["id"]) else ids.new()
            entries.append(MessageEntry(eid, parent, when, message=msg))
            parent = eid
        if parent is not None:
            last[row["id"]] = parent
        if progress is not None:
            progress(n + 1, len(s.rows))
    return last


def _fork_rows(con: sqlite3.Connection, own: _Loaded) -> list[sqlite3.Row]:
    """The forks of a session (``opencode run --fork``, ``/fork``): top-level sessions titled
    ``<its title> (fork #N)`` whose messages start with copies of its own. opencode records no
    other link: a copy has a new id but keeps the time it was created and its parts."""
    title = own.session["title"]
    if own.session["parent_id"] is not None or not own.rows:
        return []
    found = []
    for row in con.execute("select * from session where parent_id is null and id != ? and "
                           "title like ? order by time_created, id",
                           (own.session["id"], title.replace("%", "_") + " (fork #%)")):
        m = _FORK_TITLE.fullmatch(row["title"])
        if m is None or m.group(1) != title:
            continue
        first = con.execute("select time_created from message where session_id = ? order by "
                            "time_created, id limit 1", (row["id"],)).fetchone()
        if first is not None and first[0] == own.rows[0]["time_created"]:
            found.append(_row(row))
    return found


_FORK_TITLE = re.compile(r"(.*) \(fork #\d+\)")
"""The title opencode gives a fork: the forked session's, then `` (fork #N)``."""


def _shared_prefix(own: _Loaded, fork: _Loaded) -> int:
    """How many leading messages of ``fork`` are copies of ``own``'s: the same role, creation
    time and part contents (ids aside)."""
    n = 0
    for (a, da), (b, db_) in zip(zip(own.rows, own.datas, strict=True),
                                 zip(fork.rows, fork.datas, strict=True), strict=False):
        same = (da.get("role") == db_.get("role") and a["time_created"] == b["time_created"]
                and _contents(own.parts.get(a["id"], [])) == _contents(
                    fork.parts.get(b["id"], [])))
        if not same:
            break
        n += 1
    return n


def _contents(parts: list[tuple[str, Json]]) -> list[Any]:
    return [(p.get("type"), p.get("text"), p.get("callID"),
             (p.get("state") or {}).get("output") if isinstance(p.get("state"), dict) else None)
            for _, p in parts if p.get("type") in ("text", "tool", "reasoning")]


def _refs(db: Path, own: _Loaded, children: list[str]) -> list[SubagentRef]:
    """A sub-agent for each child session, with the ``task`` call that started it."""
    calls: dict[str, tuple[str, Any]] = {}
    for parts in own.parts.values():
        for _, p in parts:
            state: Json = p["state"] if isinstance(p.get("state"), dict) else {}
            meta: Json = state["metadata"] if isinstance(state.get("metadata"), dict) else {}
            if p.get("type") == "tool" and isinstance(meta.get("sessionId"), str):
                calls[meta["sessionId"]] = (str(p.get("callID")), state.get("input"))
    out = []
    for child in children:
        call, args = calls.get(child, (None, None))
        info: Json = {k: args[k] for k in ("subagent_type", "description", "prompt")
                      if isinstance(args, dict) and k in args}
        out.append(SubagentRef(call, child, Path(f"{db}#{child}"), info))
    return out


def _cell(value: object) -> object:
    if isinstance(value, str) and value[:1] in ("{", "["):
        try:
            return parse_json(value)
        except ValueError:
            return value
    return value


def _session_row(con: sqlite3.Connection, db: Path, key: str | None) -> sqlite3.Row:
    if key is None:  # the one session, with its sub-agents (its children) and forks if any
        rows = con.execute("select * from session where parent_id is null order by "
                           "time_updated desc").fetchall() or con.execute(
            "select * from session order by time_updated desc").fetchall()
        titles = {r["title"] for r in rows}
        origins = [r for r in rows if not (m := _FORK_TITLE.fullmatch(r["title"]))
                   or m.group(1) not in titles]
        if len(origins) == 1:
            return _row(origins[0])
        if len(rows) == 1:
            return _row(rows[0])
        if not rows:
            raise input_error(db, None, "this opencode database holds no session")
        listed = ", ".join(r["id"] for r in rows[:5])
        raise input_error(db, None, f"this opencode database holds {len(rows)} sessions "
                          f"({listed}...): name one as {db}#SESSION_ID, or import it by id "
                          "(`contextree import opencode ID`; `--list` lists them)")
    rows = con.execute("select * from session where id = ? or id like ? order by id",
                       (key, key.replace("%", "").replace("_", r"\_") + "%")).fetchall()
    exact = [r for r in rows if r["id"] == key]
    if exact:
        return _row(exact[0])
    if len(rows) == 1:
        return _row(rows[0])
    if not rows:
        raise input_error(db, None, f"no session {key!r} in this opencode database; "
                          "`contextree import opencode --list` lists them")
    raise input_error(db, None, f"{key!r} matches several sessions "
                      f"({', '.join(r['id'] for r in rows[:5])}); give more of the id")


def _row(row: Any) -> sqlite3.Row:
    assert isinstance(row, sqlite3.Row)
    return row


def _messages(mid: str, data: Json, parts: list[tuple[str, Json]],
              is_summary: bool) -> Iterator[Message]:
    row = {k: v for k, v in data.items() if k not in ("role", "tokens", "modelID",
                                                       "providerID")}
    if data.get("role") != "assistant":
        texts: list[str] = []
        kept: list[Json] = []
        for pid, part in parts:  # all kept: the text parts say which text was synthetic
            if part.get("type") == "text" and isinstance(part.get("text"), str):
                texts.append(part["text"])
            elif part.get("type") == "compaction":
                texts.append(COMPACTION_PROMPT)
            kept.append({"id": pid, **part})
        first: Json = {"opencode_message": row}
        if kept:
            first["opencode_parts"] = kept
        yield Message(role="user", content="".join(texts)).set_extra(first)
        return
    steps = _steps(parts)
    usage = _usage(data)
    for k, step in enumerate(steps):
        content: list[Any] = []
        calls: list[ToolCall] = []
        results: list[Message] = []
        kept = []
        shown: list[Json] = []  # the text and reasoning parts, less their text
        for pid, part in step:
            kind = part.get("type")
            if kind == "reasoning" and isinstance(part.get("text"), str):
                content.append(ThinkingPart(thinking=part["text"]))
                shown.append({"id": pid, **{k: v for k, v in part.items() if k != "text"}})
            elif kind == "text" and isinstance(part.get("text"), str):
                content.append(TextPart(text=part["text"]))
                shown.append({"id": pid, **{k: v for k, v in part.items() if k != "text"}})
            elif kind == "tool" and isinstance(part.get("state"), dict):
                call, result = _tool(pid, part)
                calls.append(call)
                if result is not None:
                    results.append(result)
            else:
                kept.append({"id": pid, **part})
        last = k == len(steps) - 1
        text_only = all(isinstance(p, TextPart) for p in content)
        msg = Message(role="assistant",
                      content="".join(p.text for p in content) if text_only else content,
                      tool_calls=calls or None, usage=usage if last else None,
                      model=str(data["modelID"]) if data.get("modelID") else None,
                      provider=str(data["providerID"]) if data.get("providerID") else None)
        extra: Json = {"opencode_message": row} if k == 0 else {}
        if kept:
            extra["opencode_parts"] = kept
        if shown:
            extra["opencode_text_parts"] = shown
        if is_summary and last:
            msg = msg.marked(CompactionSummaryMarker(summary=msg.text, source=FORMAT))
        yield msg.set_extra(extra)
        yield from results


def _steps(parts: list[tuple[str, Json]]) -> list[list[tuple[str, Json]]]:
    """The parts of an assistant message, one list per model call (``step-start`` begins
    one); parts before the first step-start join the first."""
    steps: list[list[tuple[str, Json]]] = [[]]
    for pid, part in parts:
        if part.get("type") == "step-start" and any(p.get("type") != "step-start"
                                                    for _, p in steps[-1]):
            steps.append([])
        steps[-1].append((pid, part))
    return steps


def _tool(pid: str, part: Json) -> tuple[ToolCall, Message | None]:
    state = part["state"]
    call_id = str(part.get("callID") or pid)
    name = str(part.get("tool") or "")
    args = state.get("input") if isinstance(state.get("input"), dict) else {}
    rest = {k: v for k, v in state.items() if k not in ("input", "output", "error")}
    call = ToolCall(id=call_id, name=name, arguments=args).set_extra(
        {"opencode_part": {"id": pid, **{k: v for k, v in part.items()
                                         if k not in ("state", "callID", "tool")}}})
    status = state.get("status")
    if status not in ("completed", "error"):
        return call, None  # never ran (pending, running): opencode sends no result either
    is_error = status == "error"
    text = state.get("error" if is_error else "output")
    result = Message(role="tool", content=str(text or ""), tool_call_id=call_id, name=name,
                     is_error=is_error).set_extra({"opencode_state": rest})
    return call, result


def _usage(data: Json) -> Usage | None:
    tokens = data.get("tokens")
    if not isinstance(tokens, dict):
        return None

    def n(value: object) -> int:
        return value if isinstance(value, int) and not isinstance(value, bool) else 0

    cache = tokens["cache"] if isinstance(tokens.get("cache"), dict) else {}
    cost = data.get("cost")
    return Usage(input=n(tokens.get("input")),
                 output=n(tokens.get("output")) + n(tokens.get("reasoning")),
                 cache_read=n(cache.get("read")), cache_write=n(cache.get("write")),
                 total=n(tokens.get("total")),
                 cost=float(cost) if isinstance(cost, int | float) else None)


def _not_opencode(db: Path) -> str:
    from ._detect import detect_format  # it imports the format table, which imports us

    try:
        other: str | None = detect_format(db)
    except Exception:
        other = None
    if other is not None and other != FORMAT:
        return (f"this is not opencode's database (no SQLite tables session, message, part); "
                f"it looks like {other}: import it as {other} (`contextree import {other} "
                "...`, or `auto`)")
    return ("this is not opencode's database: expected the SQLite file opencode.db with the "
            "tables session, message and part")


# -- where opencode keeps them -----------------------------------------------------------


@dataclass(frozen=True)
class OpencodeSession:
    """A session found in opencode's database."""

    id: str
    path: Path
    modified: float
    cwd: str | None
    first_prompt: str | None


def database(home: str | os.PathLike[str] | None = None) -> Path:
    """opencode's database: ``<home>/opencode.db`` if ``home`` is given, else under
    ``$XDG_DATA_HOME/opencode`` (``~/.local/share/opencode``)."""
    if home is not None:
        return Path(home).expanduser() / "opencode.db"
    data = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(data).expanduser() / "opencode" / "opencode.db"


def list_sessions(home: str | os.PathLike[str] | None = None) -> list[OpencodeSession]:
    """Every session in opencode's database, newest first; each path is ``DB#SESSION_ID``."""
    db = database(home)
    if not db.is_file() or not is_opencode_db(db):
        return []
    rows: list[OpencodeSession] = []
    with _connect(db) as con:
        for sid, directory, updated in con.execute(
                "select id, directory, time_updated from session order by time_updated desc"):
            first = con.execute(
                "select p.data from part p join message m on p.message_id = m.id where "
                "m.session_id = ? and m.data like '%\"role\":\"user\"%' order by m.time_created,"
                " p.id limit 1", (sid,)).fetchone()
            prompt = None
            if first is not None:
                part = parse_json(first[0])
                if isinstance(part, dict) and isinstance(part.get("text"), str):
                    prompt = part["text"].strip()[:200] or None
            rows.append(OpencodeSession(sid, Path(f"{db}#{sid}"), updated / 1000, directory,
                                        prompt))
    return rows


def find_session(key: str, home: str | os.PathLike[str] | None = None) -> Path:
    """``DB#SESSION_ID`` of the session whose id is ``key`` or starts with it."""
    from ..errors import InvalidArgument, SessionNotFound

    listed = list_sessions(home)
    found = [r for r in listed if r.id == key] or [r for r in listed if r.id.startswith(key)]
    if not found:
        raise SessionNotFound(f"no opencode session {key!r} in {database(home)}")
    if len(found) > 1:
        raise InvalidArgument(f"{key!r} matches several opencode sessions "
                              f"({', '.join(r.id for r in found[:5])}); give more of the id")
    return found[0].path
