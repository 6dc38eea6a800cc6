"""What the viewer shows of a session, as plain JSON-ready data: every entry (redacted), the
tree's shape, labels, the context the model saw at every compaction (from the library's own
``build_context``) and a receipt for each compaction.

The page (``_page.py``) and the readable exports (``_export.py``) read this one model, so a
session is walked and redacted once, whatever it is shown as. Entries are numbered in file
order and point at their parent by number; the page walks the tree with those numbers.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import orjson

from .._context import build_context
from .._messages import ImagePart, Message, TextPart, ThinkingPart
from .._pricing import cost_of
from .._session import Session
from .._text import escape_control, first_line, shorten
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
)
from ..redaction import Redactor

__all__ = ["SessionView", "build_view"]

_IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
_CUSTOM_DATA_CHARS = 2000  # how much of a custom entry's data is shown


@dataclass
class SessionView:
    """A session as the viewer shows it: ``data`` is what the page reads (JSON-ready, every
    text in it redacted); ``entries`` are the entries as stored, in file order (their ids and
    shape only are read from them: texts come from ``data``)."""

    data: dict[str, Any]
    entries: list[AnyEntry] = field(repr=False)
    index: dict[str, int] = field(repr=False)

    def path(self, k: int) -> list[int]:
        """The numbers of the entries from the root to entry ``k``."""
        parents = self.data["parents"]
        out: list[int] = []
        while k >= 0:
            out.append(k)
            k = parents[k]
        out.reverse()
        return out

    def leaves(self) -> list[int]:
        """The entries no other entry (but leaf moves) hangs under, in file order."""
        has_child = [False] * len(self.entries)
        for k, p in enumerate(self.data["parents"]):
            if p >= 0 and self.data["entries"][k]["t"] != "leaf":
                has_child[p] = True
        return [k for k, e in enumerate(self.data["entries"])
                if not has_child[k] and e["t"] != "leaf"]


def build_view(session: Session, redactor: Redactor, *, location: str | None = None) -> SessionView:
    """Read ``session`` whole into a ``SessionView``, every text it shows passed through
    ``redactor`` (the stored session is not changed)."""
    entries = list(session.entries())
    index = {e.id: k for k, e in enumerate(entries)}
    parents = [index.get(e.parent_id, -1) if e.parent_id is not None else -1 for e in entries]
    records = [_record(e, index) for e in entries]
    labels = {index[eid]: redactor.text(label) for eid, label in session.labels().items()
              if eid in index}
    leaf = index.get(session.leaf_id, -1) if session.leaf_id is not None else -1
    view = SessionView(data={}, entries=entries, index=index)
    view.data.update({
        "session": {
            "id": session.id,
            "name": redactor.text(session.name) if session.name else None,
            "location": _path_text(redactor.text(location or session.location)),
            "created_at": session.header.created_at,
            "cwd": redactor.text(session.header.cwd) if session.header.cwd else None,
        },
        "entries": records,
        "parents": parents,
        "labels": {str(k): v for k, v in labels.items()},
        "leaf": leaf,
    })
    view.data["compactions"] = {str(k): _compaction_view(view, k)
                                for k, e in enumerate(entries) if isinstance(e, CompactionEntry)}
    if redactor.enabled:
        slots = Slots()
        for rec in records:
            _text_slots(rec, slots)
        for comp in view.data["compactions"].values():
            _compaction_slots(comp, slots)
        redact_slots(slots, redactor)
    view.data["redaction"] = {"enabled": redactor.enabled, "found": dict(redactor.found)}
    return view


_SURROGATE = re.compile("[\ud800-\udfff]")


def _path_text(path: str) -> str:
    """A path as the page holds it: each undecodable byte of the name (a lone surrogate,
    which UTF-8 and so the page cannot hold) written as the command line shows it,
    ``\\udcff``."""
    return _SURROGATE.sub(escape_control, path)


# -- redaction: every text the page shows, once ------------------------------------------

class Slots:
    """Where the texts to redact sit: ``objs[i][keys[i]]`` is a string. Two flat lists
    rather than a pair per text: a view of 50,000 entries has ~100,000 texts, and each pair
    would be one more object for the collector to track."""

    __slots__ = ("keys", "objs")

    def __init__(self) -> None:
        self.objs: list[Any] = []
        self.keys: list[Any] = []

    def add(self, obj: Any, key: Any) -> None:
        self.objs.append(obj)
        self.keys.append(key)

    def add_all(self, obj: Any, keys: Iterable[Any]) -> None:
        for key in keys:
            self.add(obj, key)


def _text_slots(rec: dict[str, Any], out: Slots) -> None:
    """The texts an entry or message record shows: its parts, tool calls, summary, names,
    where a cut result was saved. Ids, numbers and image data are left out (the page's
    structure; an image is not text)."""
    objs, keys = out.objs, out.keys  # 50,000 records: the loop itself is the cost here
    for part in rec.get("c", ()):
        if "s" in part:
            objs.append(part)
            keys.append("s")
    for call in rec.get("tc", ()):
        objs += (call, call)
        keys += ("name", "args")
    for key in ("s", "n", "m"):
        if rec.get(key).__class__ is str:
            objs.append(rec)
            keys.append(key)
    cut = rec.get("cut")
    if cut and cut.get("saved"):
        out.add(cut, "saved")


def _compaction_slots(comp: dict[str, Any], out: Slots) -> None:
    """The texts of a compaction's frame and receipt."""
    for item in comp["frame"]:
        if "msg" in item:
            _text_slots(item["msg"], out)
    rc = comp["receipt"]
    out.add_all(comp["cleared"], list(comp["cleared"]))
    out.add_all(rc["cleared"], list(rc["cleared"]))
    out.add_all(rc, ("summary", "details"))
    out.add_all(rc["spills"], range(len(rc["spills"])))
    out.add_all(rc["identifiers"], range(len(rc["identifiers"])))


def redact_slots(slots: Slots, r: Redactor) -> None:
    """Pass every text in ``slots`` through ``r`` (``Redactor.texts``: all of them in one
    call), in place."""
    if not r.enabled:
        return
    objs, keys = slots.objs, slots.keys
    done = r.texts([obj[key] for obj, key in zip(objs, keys, strict=True)])
    for obj, key, text in zip(objs, keys, done, strict=True):
        obj[key] = text


# -- one entry ----------------------------------------------------------------------------

def _record(entry: AnyEntry, index: dict[str, int]) -> dict[str, Any]:
    """One entry as the page reads it: ``t`` its type, ``ts`` its time, and what it says."""
    rec: dict[str, Any] = {"id": entry.id, "t": getattr(entry, "type", "unknown"),
                           "ts": getattr(entry, "timestamp", "")}
    if isinstance(entry, MessageEntry):
        rec.update(message_record(entry.message))
    elif isinstance(entry, CustomMessageEntry):
        rec.update({"r": "user", "c": _parts(entry.content), "s": entry.custom_type})
    elif isinstance(entry, ModelChangeEntry):
        rec["s"] = f"{entry.provider}/{entry.model_id}"
    elif isinstance(entry, ThinkingLevelChangeEntry):
        rec["s"] = entry.thinking_level
    elif isinstance(entry, ActiveToolsChangeEntry):
        rec["s"] = ", ".join(entry.active_tool_names)
    elif isinstance(entry, CompactionEntry):
        rec.update({"s": entry.summary, "tb": entry.tokens_before, "ta": entry.tokens_after})
    elif isinstance(entry, BranchSummaryEntry):
        rec.update({"s": entry.summary, "from": index.get(entry.from_id, -1)})
    elif isinstance(entry, CustomEntry):
        rec["s"] = f"{entry.custom_type}: " + shorten(_json(entry.data), _CUSTOM_DATA_CHARS)
    elif isinstance(entry, LabelEntry):
        rec.update({"s": entry.label or "", "to": index.get(entry.target_id, -1)})
    elif isinstance(entry, SessionInfoEntry):
        rec["s"] = entry.name or ""
    elif isinstance(entry, LeafEntry):
        rec["to"] = index.get(entry.target_id, -1) if entry.target_id else -1
    return rec


def message_record(m: Message) -> dict[str, Any]:
    """A message as the page reads it: role, parts, tool calls and results, usage, cost."""
    rec: dict[str, Any] = {"r": m.role, "c": _parts(m.content)}
    if m.tool_calls:
        rec["tc"] = [{"id": c.id, "name": c.name, "args": _json(c.arguments, indent=2)}
                     for c in m.tool_calls]
    if m.tool_call_id is not None:
        rec["tid"] = m.tool_call_id
    if m.name:
        rec["n"] = m.name
    if m.is_error:
        rec["err"] = True
    if m.model:
        rec["m"] = f"{m.provider}/{m.model}" if m.provider else m.model
    kind = m.kind
    if kind is not None:
        rec["k"] = str(kind.value)
    cut = m.truncation
    if cut is not None:
        rec["cut"] = {"shown": cut.shown_lines, "total": cut.total_lines,
                      "saved": cut.saved_path}
    if m.usage is not None:
        u = m.usage
        try:
            cost = cost_of(m)
        except Exception:  # a price table that cannot be read leaves the cost unknown
            cost = None
        rec["u"] = [u.input, u.output, u.cache_read, u.cache_write, cost]
    return rec


def _parts(content: Any) -> list[dict[str, Any]]:
    """Content as parts: ``{"k": "text"|"think"|"img"|"other", ...}``."""
    if content is None:
        return []
    if isinstance(content, str):
        return [{"k": "text", "s": content}]
    out: list[dict[str, Any]] = []
    for p in content:
        if isinstance(p, TextPart):
            out.append({"k": "text", "s": p.text})
        elif isinstance(p, ThinkingPart):
            out.append({"k": "think", "s": "[redacted thinking]" if p.redacted and not p.thinking
                        else p.thinking})
        elif isinstance(p, ImagePart):
            out.append(_image(p))
        else:
            out.append({"k": "other", "s": shorten(_json(getattr(p, "data", str(p))), 500)})
    return out


def _image(p: ImagePart) -> dict[str, Any]:
    """An image part: inline data as a ``data:`` URL the page shows; a remote one (never
    fetched) or another type by its description only."""
    mime = (p.mime_type or "").lower()
    if p.data and mime in _IMAGE_TYPES and _is_base64(p.data):
        return {"k": "img", "src": f"data:{mime};base64,{p.data}"}
    if p.url and p.url.startswith("data:image/"):
        head = p.url.split(",", 1)[0].lower()
        if head.endswith(";base64") and head[5:-7] in _IMAGE_TYPES \
                and _is_base64(p.url.split(",", 1)[1] if "," in p.url else ""):
            return {"k": "img", "src": p.url}
    where = p.url if p.url and not p.url.startswith("data:") else (mime or "unknown type")
    return {"k": "other", "s": f"[image not shown: {shorten(where, 200)}]"}


_B64 = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=\n\r")


def _is_base64(s: str) -> bool:
    return bool(s) and set(s) <= _B64


def _json(value: Any, indent: int | None = None) -> str:
    try:  # orjson: the arguments of 10,000 calls in milliseconds, where json takes a second
        return orjson.dumps(value, default=str, option=orjson.OPT_INDENT_2 if indent else 0
                            ).decode()
    except (TypeError, ValueError):
        try:
            return json.dumps(value, indent=indent, ensure_ascii=False, default=str)
        except (TypeError, ValueError):
            return str(value)


# -- compactions: the context the model saw, and a receipt -------------------------------

def _compaction_view(view: SessionView, k: int) -> dict[str, Any]:
    """What compaction ``k`` left the model: its context (``frame``: entry numbers for
    entries shown as they are, whole messages for what compaction made), and a receipt."""
    comp = view.entries[k]
    assert isinstance(comp, CompactionEntry)
    path_ks = view.path(k)
    path = [view.entries[i] for i in path_ks]
    ctx = build_context(path)
    frame: list[dict[str, Any]] = []
    for m, eid in zip(ctx.messages, ctx.entry_ids, strict=True):
        src = view.index.get(eid, -1) if eid is not None else -1
        entry = view.entries[src] if src >= 0 else None
        if isinstance(entry, MessageEntry) and entry.message is m:
            frame.append({"ref": src})
        else:
            frame.append({"msg": message_record(m), "from": src,
                          "why": _why(m, comp, entry)})
    while frame and "msg" in frame[-1] and frame[-1]["from"] < 0:
        frame.pop()  # stand-ins for results still to come: the page pairs what follows
    in_context = {view.index[e] for e in ctx.entry_ids if e is not None and e in view.index}
    before = [i for i in path_ks[:-1] if _speaks(view.entries[i])]
    cleared = {view.index[eid]: text for eid, text in (comp.cleared or {}).items()
               if eid in view.index}
    kept = [i for i in before if i in in_context and i not in cleared]
    folded = [i for i in before if i not in in_context and i not in cleared]
    dropped: list[int] = []
    identifiers: list[str] = []
    recorded = comp.receipt
    if recorded is not None:  # what the compaction itself wrote down wins over a guess
        def ks(ids: list[str]) -> list[int]:
            return [view.index[e] for e in ids if e in view.index]

        kept, folded, dropped = ks(recorded.kept), ks(recorded.folded), ks(recorded.dropped)
        identifiers = list(recorded.identifiers)
    details = comp.details if isinstance(comp.details, dict) else {}
    receipt = {
        "tokens_before": comp.tokens_before,
        "tokens_after": comp.tokens_after,
        "summary": comp.summary,
        "first_kept": view.index.get(comp.first_kept_entry_id, -1)
        if comp.first_kept_entry_id else -1,
        "kept": kept,
        "pinned": [view.index[p] for p in comp.pinned or () if p in view.index],
        "retained_tail": len(comp.retained_tail or ()),
        "cleared": {str(i): t for i, t in cleared.items()},
        "folded": folded,
        "dropped": dropped,
        "identifiers": identifiers,
        "recorded": recorded is not None,
        "stages": [str(s) for s in details.get("stages", ())] if isinstance(
            details.get("stages"), list) else [],
        "details": shorten(_json({k2: v for k2, v in details.items() if k2 != "digest"}), 2000),
        "spills": _spills(view.entries[i] for i in folded + dropped + list(cleared)),
    }
    return {"frame": frame, "cleared": {str(i): t for i, t in cleared.items()},
            "receipt": receipt}


def _why(m: Message, comp: CompactionEntry, entry: AnyEntry | None) -> str:
    """Why a context message is not an entry as it is: the summary, a kept copy, a cleared
    result, a stand-in for an interrupted call, or an entry shown as a message."""
    if entry is comp:
        return "summary" if m.role == "system" and comp.summary and m.text.endswith(
            comp.summary) else "retained"
    if entry is None:
        return "interrupted"
    if m.role == "tool" and isinstance(entry, MessageEntry):
        return "cleared"
    return "entry"


def _speaks(entry: AnyEntry) -> bool:
    """True for an entry that puts a message in the context."""
    return isinstance(entry, MessageEntry | CustomMessageEntry | BranchSummaryEntry)


def _spills(entries: Iterable[AnyEntry]) -> list[str]:
    """Where the full text of the cut tool results among ``entries`` was saved."""
    out: list[str] = []
    for e in entries:
        if isinstance(e, MessageEntry):
            cut = e.message.truncation
            if cut is not None and cut.saved_path:
                out.append(cut.saved_path)
    return out


def text_of(record: dict[str, Any]) -> str:
    """The plain text of an entry record (its parts and tool calls), for search and titles."""
    bits = [p.get("s", "") for p in record.get("c", ()) if p.get("k") in ("text", "think")]
    bits += [f"{c['name']}({c['args']})" for c in record.get("tc", ())]
    if "s" in record:
        bits.append(str(record["s"]))
    return "\n".join(b for b in bits if b)


def title_of(record: dict[str, Any], limit: int = 80) -> str:
    """One line that names an entry record."""
    return first_line(text_of(record), limit)

