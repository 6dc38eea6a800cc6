"""``repair``: make a damaged session file loadable again, keeping every entry that is valid.

Good lines are kept byte for byte. Bad ones go to the quarantine file with the reason: lines
that are not JSON, invalid entries, duplicate ids, a second header, entries whose parent is
missing or part of a cycle (and everything below them), and leaf moves or labels whose
target is gone. When a quarantined line still names its own id and parent (an invalid entry,
a label whose target is missing), the entries below it are kept and linked to its parent
instead, so one bad line in the middle of a conversation does not cost the rest of it; those
lines are reported as ``fixed``. The repaired file always opens, and a second repair finds
nothing to do.

A backup of the original file (a unique ``<file>.bak-<time>-<random>``, written whole or not
at all) is made first. A file that does not look like a session (text, binary: no line is a
header or an entry) is refused unless ``force=True``. A dry run reads the file and changes
nothing: it needs neither write access nor the writer's lock.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from .._files import atomic_write
from .._limits import JSONError, parse_json
from ..entries import (
    FORMAT_VERSION,
    AnyEntry,
    LabelEntry,
    LeafEntry,
    LineError,
    SessionHeader,
    decode_line,
    encode_line,
    from_dict,
    new_id,
    now,
    to_dict,
)
from ..errors import InvalidHeader, StorageFailure
from ._index import index_path
from ._jsonl import open_locked, open_regular, read_all, registry_lock, sweep
from ._loading import BOM
from ._sidecars import (
    clear_lock_info,
    describe_os_error,
    line_text,
    quarantine,
    quarantine_path,
    write_lock_info,
)

__all__ = ["RepairReport", "repair"]


@dataclass
class RepairReport:
    """What ``repair`` did (or, in a dry run, would do).

    ``kept``: lines kept (the header included); ``quarantined``: (line number, reason) of
    each line moved to the quarantine file (line 0: a header that had to be written);
    ``fixed``: (line number, what changed) of lines kept with a change (a byte order mark
    removed, an entry linked to the parent of a quarantined one); ``backup``: the copy of
    the original file.
    """

    path: str
    kept: int
    quarantined: list[tuple[int, str]] = field(default_factory=list)
    backup: str | None = None
    quarantine_file: str | None = None
    fixed: list[tuple[int, str]] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        """True when the repair changed (or, dry run, would change) the file."""
        return bool(self.quarantined or self.fixed)


def repair(path: str | os.PathLike[str], *, dry_run: bool = False,
           force: bool = False) -> RepairReport:
    """Repair a session file in place (after a backup); ``dry_run`` only reports.

    ``force`` rewrites a file that does not look like a session at all (its lines go to the
    quarantine file, and an empty session takes its place). A repair takes the writer's
    lock (``SessionLocked`` while someone writes to the session); a dry run reads only.
    """
    target = Path(path)
    if dry_run:
        fd = open_regular(target, os.O_RDONLY)
        try:
            raw = read_all(fd, target)
        finally:
            os.close(fd)
        return _plan(raw, str(target), force=force).report
    with registry_lock():
        fd = -1
        try:
            fd, _, _ = open_locked(target, os.O_RDONLY, share=False,
                                   then="close it first, then repair")
            write_lock_info(target)
            sweep(target.parent, always=True)  # a killed repair's temp files go first
            plan = _plan(read_all(fd, target), str(target), force=force)
            if plan.report.changed:
                _apply(target, fd, plan)
            return plan.report
        finally:
            if fd >= 0:
                try:
                    clear_lock_info(target)
                finally:  # an interrupt in the tidying must not keep the lock
                    os.close(fd)


# -- applying a plan ---------------------------------------------------------------------------

def _apply(target: Path, fd: int, plan: _Plan) -> None:
    """Back up, then replace the file with the kept lines; the quarantine gets the others."""
    info = os.fstat(fd)
    mode = info.st_mode & 0o777
    plan.report.backup = str(_backup(target, plan.raw, mode, info))
    records = [{"reason": reason, "line": n, "repaired_at": now(), **line_text(raw)}
               for n, reason, raw in plan.bad]

    def body() -> Iterator[bytes]:
        yield b"".join(line + b"\n" for line in plan.keep)
        # Once the new file is written in full (so the disk had room) and before it
        # replaces the old one, the quarantine gets the lines: a crash in between leaves
        # them in both places, never in neither.
        quarantine(target, records)

    try:
        # The new file is locked until it is in place: no writer gets in between.
        atomic_write(target, body(), mode=mode)
    except OSError as e:
        if isinstance(e, StorageFailure):
            raise
        raise StorageFailure(f"could not write the repaired file ({describe_os_error(e)}); "
                             f"the session file is unchanged (backup: {plan.report.backup})",
                             path=str(target)) from e
    plan.report.quarantine_file = str(quarantine_path(target))
    with contextlib.suppress(OSError):  # it placed the old lines (the next open rebuilds it)
        index_path(target).unlink()


def _backup(target: Path, raw: bytes, mode: int, info: os.stat_result) -> Path:
    """A complete copy of the original under a name no other backup has."""
    while True:
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
        backup = Path(f"{target}.bak-{stamp}-{secrets.token_hex(4)}")
        try:
            atomic_write(backup, raw, mode=mode, overwrite=False)
        except FileExistsError:  # pragma: no cover - 32 random bits
            continue
        except OSError as e:
            raise StorageFailure(f"could not write the backup {backup} "
                                 f"({describe_os_error(e)}); nothing was changed",
                                 path=str(target)) from e
        with contextlib.suppress(OSError):
            os.utime(backup, ns=(info.st_atime_ns, info.st_mtime_ns))
        return backup


# -- planning -----------------------------------------------------------------------------------

@dataclass
class _Plan:
    raw: bytes
    keep: list[bytes]
    bad: list[tuple[int, str, bytes]]
    report: RepairReport


@dataclass
class _Node:
    """A line that decoded as an entry."""

    line: int
    entry: AnyEntry
    raw: bytes


def _plan(raw: bytes, location: str, *, force: bool) -> _Plan:
    lines = raw.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    fixed: list[tuple[int, str]] = []
    if lines and lines[0].startswith(BOM):
        lines[0] = lines[0][len(BOM):]
        fixed.append((1, "a UTF-8 byte order mark was removed"))
    keep, bad, relinked, decodable = _triage(lines, location)
    if not decodable and any(x.strip() for x in lines) and not force:
        raise InvalidHeader(
            "this does not look like a session file: none of its lines is a session header "
            "or an entry (is it a text or binary file?); nothing was changed. To replace it "
            "with an empty session anyway (its lines go to the quarantine file, after a "
            "backup), repair it with force: `contextree repair --force FILE`, or "
            "repair(path, force=True) in Python", path=location, line=1)
    fixed += relinked
    fixed.sort()
    report = RepairReport(location, kept=len(keep), fixed=fixed,
                          quarantined=[(n, reason) for n, reason, _ in bad])
    return _Plan(raw, keep, bad, report)


def _triage(lines: list[bytes], location: str) -> tuple[
        list[bytes], list[tuple[int, str, bytes]], list[tuple[int, str]], bool]:
    """Split lines into those to keep (header first) and those to quarantine with a reason;
    also say which kept lines were relinked and whether any line decoded at all."""
    bad: list[tuple[int, str, bytes]] = []
    header: bytes | None = None
    decodable = False
    nodes: dict[str, _Node] = {}
    bypass: dict[str, str | None] = {}  # id -> parent of quarantined lines that name both
    previous: str | None = None  # the last entry read whole, in file order
    for n, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            item = decode_line(raw)
        except LineError as e:
            bad.append((n, str(e), raw))
            ident = _ident(raw)
            if ident is None:
                cut = _cut_id(raw)  # cut off before its parent: the id may still show
                if cut is not None:
                    # Entries are appended under the leaf, so the entry before a line is
                    # its likeliest parent: the entries below it stay, relinked (reported).
                    ident = (cut, previous)
            if ident is not None and ident[0] not in bypass:
                bypass[ident[0]] = ident[1]
                previous = ident[0]
            continue
        decodable = True
        if isinstance(item, SessionHeader):
            if n == 1 and header is None:
                if item.version > FORMAT_VERSION:
                    raise InvalidHeader(f"the file is in session format version "
                                        f"{item.version}, newer than this contextree "
                                        f"understands ({FORMAT_VERSION}); upgrade contextree "
                                        "(nothing was changed)", path=location, line=1)
                header = raw
            else:
                bad.append((n, "a second session header", raw))
            continue
        if not item.id:
            bad.append((n, "the entry id is empty", raw))
            continue
        if item.id in nodes:
            bad.append((n, f"duplicate id {item.id!r} (first used on line "
                           f"{nodes[item.id].line})", raw))
            continue
        nodes[item.id] = _Node(n, item, raw)
        previous = item.id
    for eid in nodes:
        bypass.pop(eid, None)  # a good line with that id is the one children mean
    if header is None:
        header = encode_line(SessionHeader(id=str(new_id()), created_at=now())).rstrip(b"\n")
        bad.append((0, "no session header: a new one was written", b""))
    chain = _chains(nodes, bypass)
    kept, target_reasons = _kept(nodes, chain)
    keep = [header]
    relinked: list[tuple[int, str]] = []
    for eid, node in nodes.items():
        if eid in kept:
            parent = _kept_parent(node.entry.parent_id, nodes, bypass, kept)
            if parent == node.entry.parent_id:
                keep.append(node.raw)
            else:
                keep.append(_with_parent(node.entry, parent))
                relinked.append((node.line, f"its parent {node.entry.parent_id!r} was "
                                 f"quarantined: now a child of {parent!r}"))
            continue
        reason = chain[eid] or target_reasons.get(eid, "quarantined")
        bad.append((node.line, reason, node.raw))
    bad.sort(key=lambda b: b[0])
    return keep, bad, relinked, decodable


def _ident(raw: bytes) -> tuple[str, str | None] | None:
    """The id and parent a bad line still names, if it is a JSON object that names both
    (however deeply its other fields nest)."""
    try:
        data = parse_json(raw)  # msgspec: a failed allocation is a MemoryError, no crash
    except JSONError:
        flat = _top_level(raw)
        try:
            data = parse_json(flat) if flat is not None else None
        except JSONError:
            return None
    if not isinstance(data, dict) or data.get("type") == "session":
        return None
    eid, parent = data.get("id"), data.get("parent_id")
    if isinstance(eid, str) and eid and (parent is None or isinstance(parent, str)):
        return eid, parent
    return None


_CUT_ID = re.compile(rb'^\s*\{\s*(?:"(?:type|timestamp)"\s*:\s*"(?:[^"\\]|\\.)*"\s*,\s*)*'
                     rb'"id"\s*:\s*"((?:[^"\\]|\\.)+)"\s*,')


def _cut_id(raw: bytes) -> str | None:
    """The id of a line cut off before its parent (the id field complete, among the first
    fields as contextree writes them), or None."""
    match = _CUT_ID.match(raw)
    if match is None:
        return None
    try:
        eid = orjson.loads(b'"' + match.group(1) + b'"')
    except orjson.JSONDecodeError:
        return None
    return eid if isinstance(eid, str) and eid else None


_TOKEN = re.compile(rb'"(?:[^"\\]|\\.)*"|[\[\]{}]')


def _top_level(raw: bytes) -> bytes | None:
    """``raw`` with every value nested in the top-level object replaced by ``null``: a line
    too deep for a JSON parser still shows its id and parent this way."""
    out: list[bytes] = []
    depth, pos, skipping = 0, 0, False
    for token in _TOKEN.finditer(raw):
        t = token.group()
        if t in (b"[", b"{"):
            depth += 1
            if depth == 2 and not skipping:
                out.append(raw[pos:token.start()])
                skipping = True
        elif t in (b"]", b"}"):
            if depth == 2 and skipping:
                out.append(b"null")
                pos, skipping = token.end(), False
            depth -= 1
    if skipping:
        return None
    out.append(raw[pos:])
    return b"".join(out)


def _chains(nodes: dict[str, _Node], bypass: dict[str, str | None]) -> dict[str, str | None]:
    """For each entry: ``None`` if its parent chain reaches a root (passing through
    quarantined lines that name their parent), else why not."""
    verdict: dict[str, str | None] = {}
    for start in nodes:
        if start in verdict:
            continue
        chain: list[str] = []
        on_chain: set[str] = set()
        current: str | None = start
        reason: str | None = None
        while current is not None:
            if current in verdict:
                reason = verdict[current]
                if reason is not None and not reason.startswith("ancestor "):
                    reason = f"ancestor {current!r} was quarantined: {reason}"
                break
            if current in on_chain:
                reason = "parent links form a cycle"
                break
            chain.append(current)
            on_chain.add(current)
            node = nodes.get(current)
            if node is not None:
                current = node.entry.parent_id
            elif current in bypass:
                current = bypass[current]
            else:
                chain.pop()
                reason = f"parent {current!r} does not exist"
                break
        for eid in chain:  # bypassed lines on the way too: the same fate below them
            verdict[eid] = reason
    return {eid: verdict[eid] for eid in nodes}


def _kept(nodes: dict[str, _Node],
          chain: dict[str, str | None]) -> tuple[set[str], dict[str, str]]:
    """The entries to keep: a sound parent chain, and a target (a leaf move's or a label's),
    if any, that is itself kept; a leaf move's target must come before it, as loading
    requires. Also the reason for each entry left out on account of its target."""
    state: dict[str, bool] = {}
    reasons: dict[str, str] = {}
    for start in nodes:
        path: list[str] = []  # each depends on the next one's fate (it is its target)
        on_path: set[str] = set()
        eid, ok = start, False
        while True:
            if eid in state:
                ok = state[eid]
                break
            if eid in on_path:
                ok = False
                for p in path:
                    reasons[p] = "leaf moves or labels point at each other in a cycle"
                break
            node = nodes[eid]
            target = _target(node.entry)
            if chain[eid] is not None:
                ok = state[eid] = False
                break
            if target is None:
                ok = state[eid] = True
                break
            tnode = nodes.get(target)
            if tnode is None or (isinstance(node.entry, LeafEntry) and tnode.line > node.line):
                ok = state[eid] = False
                reasons[eid] = (f"points at {target!r}, which is missing" if tnode is None else
                                f"moves the leaf to {target!r}, which comes after it")
                break
            path.append(eid)
            on_path.add(eid)
            eid = target
        for p in path:
            state[p] = ok
            if not ok:
                reasons.setdefault(p, f"points at {_target(nodes[p].entry)!r}, which was "
                                   "quarantined")
    return {eid for eid, ok in state.items() if ok}, reasons


def _target(entry: AnyEntry) -> str | None:
    if isinstance(entry, LeafEntry | LabelEntry):
        return entry.target_id
    return None


def _kept_parent(parent: str | None, nodes: dict[str, _Node], bypass: dict[str, str | None],
                 kept: set[str]) -> str | None:
    """The nearest kept ancestor, passing over quarantined lines (chains are acyclic here)."""
    while parent is not None and parent not in kept:
        node = nodes.get(parent)
        parent = node.entry.parent_id if node is not None else bypass.get(parent)
    return parent


def _with_parent(entry: AnyEntry, parent: str | None) -> bytes:
    data = to_dict(entry)
    data["parent_id"] = parent
    return encode_line(from_dict(data)).rstrip(b"\n")
