"""What every format module shares: reading JSON input with file:line errors, building entries.

A reader turns a source file into an ``Imported`` (a header and the entries, parents before
children where the source allows it, or a ``stream`` of them for files too big to hold);
``contextree.formats.import_session`` writes it as a new session file in one atomic step.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Container, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO, Protocol, TypeVar

import orjson

from .._limits import MAX_DEPTH, TOO_DEEP, TooDeep, parse_json
from .._messages import Message
from .._session import new_session_id
from ..entries import AnyEntry, LeafEntry, MessageEntry, SessionHeader, new_id, now
from ..errors import CorruptLine, InvalidArgument, InvalidEntry, SessionError, SessionNotFound
from ..storage._encoded import EncodedEntry

Progress = Callable[[int, int], None]
"""Called as ``progress(bytes_done, bytes_total)`` while a large source is read."""

Json = dict[str, Any]
T = TypeVar("T")
_PROGRESS_STEP = 1 << 20
_READ_BUFFER = 1 << 20


@dataclass
class Imported:
    """A session read from another format: its header, its entries and the leaf to restore.

    ``leaf_id`` is the entry the source considers current; ``None`` means the last entry.
    ``report`` says what the reader found (records by type, which became custom entries...).
    A reader of big files leaves ``entries`` empty and sets ``stream``: called once, it yields
    the entries in file order (``import_session`` puts parents first as it writes them), and
    ``used_ids`` holds every id they take, so that bounded memory suffices. It may yield an
    entry already encoded (``storage._encoded.EncodedEntry``), which is written as it is.
    """

    header: SessionHeader
    entries: list[AnyEntry] = field(default_factory=list)
    leaf_id: str | None = None
    report: dict[str, Any] = field(default_factory=dict)
    stream: Callable[[], Iterator[AnyEntry | EncodedEntry]] | None = None
    used_ids: set[str] = field(default_factory=set)


def input_error(path: str | os.PathLike[str], line: int | None, message: str) -> SessionError:
    """The error for malformed input: ``path:line: message``."""
    return InvalidEntry(message, path=os.fspath(path), line=line)


def read_json_lines(path: Path, progress: Progress | None = None) -> Iterator[tuple[int, Any]]:
    """``(line number, parsed value)`` for each non-blank line of a JSON Lines file.

    Raises ``SessionError`` naming the file and line for a line that is not valid JSON.
    """
    for n, _, value in read_json_spans(path, progress):
        yield n, value


Span = tuple[int, int, int]
"""Where a line is: ``(offset, length, line number)``, to read it again (``LineFile``)."""


def read_json_spans(path: Path, progress: Progress | None = None, *,
                    parse: Callable[[bytes, Path, int], Any] | None = None,
                    ) -> Iterator[tuple[int, Span, Any]]:
    """``read_json_lines`` with where each line is, for readers that keep the place of a line
    rather than its value. ``parse(raw, path, n)`` reads a line (``parse_line``: its JSON
    value; a reader that needs a few fields of each line can decode only those)."""
    read = parse_line if parse is None else parse
    total = _size(path)
    done = reported = 0
    try:
        # 1 MiB buffer: lines of tool output (tens of KB) are read 4-5x faster than with 8 KiB
        f = open(path, "rb", buffering=_READ_BUFFER)  # noqa: SIM115 - closed below
    except FileNotFoundError:
        raise SessionNotFound("no such file", path=str(path)) from None
    with f:
        for n, raw in enumerate(f, start=1):
            start = done
            done += len(raw)
            if progress is not None and done - reported >= _PROGRESS_STEP:
                progress(done, total)
                reported = done
            if raw.isspace() or not raw:  # blank (isspace stops at the first other byte)
                continue
            yield n, (start, len(raw), n), read(raw, path, n)
    if progress is not None:
        progress(total, total)


class LineFile:
    """A JSON Lines file open to read lines again by their ``Span``. Lines read in the
    order of the file (a second pass) come from one read of 1 MiB, not a read each."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file: BinaryIO | None = None
        self._block = b""
        self._start = 0  # where _block is in the file

    def line(self, span: Span) -> Any:
        """The JSON value of the line at ``span`` (errors as ``read_json_lines`` gives them)."""
        offset, length, n = span
        return parse_line(self.raw(offset, length), self.path, n)

    def raw(self, offset: int, length: int) -> bytes:
        """The ``length`` bytes at ``offset`` (fewer at the end of the file)."""
        at = offset - self._start
        if at >= 0 and at + length <= len(self._block):
            return self._block[at:at + length]
        if self._file is None:
            self._file = open(self.path, "rb")  # noqa: SIM115 - closed by close()
        fd = self._file.fileno()
        if length >= _READ_BUFFER:
            return os.pread(fd, length, offset)
        self._block, self._start = os.pread(fd, _READ_BUFFER, offset), offset
        return self._block[:length]

    def close(self) -> None:
        self._block = b""
        if self._file is not None:
            self._file.close()
            self._file = None


def parse_line(raw: bytes, path: Path, n: int) -> Any:
    """The JSON value of line ``n`` of ``path``: ``InvalidEntry`` if it nests too deeply,
    ``CorruptLine`` if it is not JSON."""
    try:
        return parse_json(raw)
    except TooDeep:
        raise InvalidEntry(TOO_DEEP, path=str(path), line=n) from None
    except orjson.JSONDecodeError as e:
        raise CorruptLine(f"not valid JSON ({e})", path=str(path), line=n) from None


class _Row(Protocol):
    @property
    def id(self) -> str: ...
    @property
    def path(self) -> Path: ...


def find_by_id(key: str, rows: Callable[[], Sequence[_Row]], what: str, where: Path) -> Path:
    """The file of the row (from ``rows()``) whose id or file name is ``key`` or starts with
    it; a ``.jsonl`` file named by ``key`` is taken as it is. ``what`` names a row in the
    errors (``"Codex thread"``), ``where`` the folder searched."""
    candidate = Path(key).expanduser()
    if candidate.suffix == ".jsonl" and candidate.is_file():
        return candidate
    listed = rows()
    found = ([r for r in listed if key in (r.id, r.path.stem)]
             or [r for r in listed if r.id.startswith(key) or r.path.stem.startswith(key)])
    if not found:
        raise SessionNotFound(f"no {what} {key!r} under {where}")
    ids = sorted({r.id for r in found})
    if len(ids) > 1:
        raise InvalidArgument(f"{key!r} matches several {what}s ({', '.join(ids[:5])}); give "
                              "more of the id")
    return found[0].path


def split_selector(path: str | os.PathLike[str]) -> tuple[Path, str | None]:
    """``FILE#KEY`` (one session of a file that holds many, as opencode's database does) as
    the file and the key; any other path as itself and ``None``. A file whose own name holds
    a ``#`` is taken as it is."""
    text = os.fspath(path)
    base, sep, key = text.rpartition("#")
    if sep and base and key and "/" not in key and not Path(text).exists():
        return Path(base), key
    return Path(text), None


def first_line_says(path: Path, marker: bytes, looks_like: Callable[[Any], bool]) -> bool:
    """An ``import auto`` hook's test of a JSONL format by its first line: it holds
    ``marker`` (a cheap look before the parse) and parses to what ``looks_like`` accepts."""
    with open(path, "rb") as f:
        line = f.readline(1 << 20)
    if marker not in line:
        return False
    try:
        return looks_like(parse_json(line))
    except ValueError:
        return False


def read_json_document(path: Path) -> Any:
    """A whole-file JSON document; a syntax error names the file and the line."""
    try:
        text = path.read_bytes()
    except FileNotFoundError:
        raise SessionNotFound("no such file", path=str(path)) from None
    try:
        # Items nest one level inside the document's list (two inside {"messages": [...]}).
        return parse_json(text, exact=True, limit=MAX_DEPTH + 2)
    except TooDeep:
        raise InvalidEntry(TOO_DEEP.replace("a session line", "an item"),
                           path=str(path)) from None
    except json.JSONDecodeError as e:
        raise CorruptLine(f"not valid JSON ({e.msg}, column {e.colno})",
                           path=str(path), line=e.lineno) from None
    except UnicodeDecodeError as e:
        raise CorruptLine(f"not UTF-8 text ({e})", path=str(path)) from None


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


class Ids:
    """Fresh entry ids, unique among those already used."""

    def __init__(self, used: Iterable[str] = ()) -> None:
        self.used: set[str] = set(used)

    def new(self) -> str:
        eid = new_id()
        while eid in self.used:
            eid = new_id()
        self.used.add(eid)
        return eid

    def claim(self, eid: str) -> bool:
        """Reserve ``eid``; ``False`` if it was already taken."""
        if eid in self.used:
            return False
        self.used.add(eid)
        return True


def text_of_blocks(content: object) -> str:
    """The text of a string, or of the ``{"type": "text"}`` blocks of a content list."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(b.get("text", "")) for b in content
                       if isinstance(b, dict) and b.get("type") == "text")
    return ""


def message_entry(eid: str, parent: str | None, timestamp: str, message: Message) -> MessageEntry:
    return MessageEntry(eid, parent, timestamp or now(), message=message)


def file_time(path: Path) -> str:
    """The file's modification time as an entry timestamp (for sources without any)."""
    try:
        return iso_from_seconds(path.stat().st_mtime)
    except OSError:
        return now()


def iso_from_seconds(seconds: float) -> str:
    stamp = datetime.fromtimestamp(seconds, UTC).isoformat(timespec="milliseconds")
    return stamp.replace("+00:00", "Z")


def iso_to_ms(stamp: str) -> int | None:
    """Milliseconds since the epoch of an ISO 8601 timestamp, or ``None`` if it is not one."""
    try:
        dt = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except (ValueError, AttributeError):
        return None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return int(dt.timestamp() * 1000)


def parents_first(entries: Sequence[AnyEntry]) -> list[AnyEntry]:
    """Entries reordered so that each comes after its parent, otherwise keeping their order.

    An entry whose parent is not among ``entries`` at all must be handled by the caller.
    """
    return list(in_parent_order(entries, {e.id for e in entries}))


class Placed(Protocol):
    """What ordering entries needs of them: an entry, or one already encoded."""

    @property
    def id(self) -> str: ...
    @property
    def parent_id(self) -> str | None: ...
    @property
    def timestamp(self) -> str: ...


P = TypeVar("P", bound=Placed)


def in_parent_order(entries: Iterable[P], present: Container[str]) -> Iterator[P]:
    """``parents_first`` as a stream: ``present`` holds the ids of all ``entries``; only the
    entries that come before their parent are held until it does. No ``present`` ids (a
    reader whose entries all follow their parents, such as a flat log): taken as they come."""
    if isinstance(present, set | frozenset) and not present:
        yield from entries
        return
    placed: set[str] = set()
    waiting: dict[str, list[P]] = {}
    for entry in entries:
        parent = entry.parent_id
        if parent is not None and parent in present and parent not in placed:
            waiting.setdefault(parent, []).append(entry)
            continue
        if not waiting:  # nothing waits for it (the common case): as it comes
            yield entry
            placed.add(entry.id)
            continue
        stack = [entry]
        while stack:
            e = stack.pop()
            yield e
            placed.add(e.id)
            stack.extend(reversed(waiting.pop(e.id, [])))
    for group in waiting.values():  # parent links that form a cycle
        yield from group


def finish(imported: Imported, ids: Ids) -> list[AnyEntry]:
    """The entries to write: parents first, then a leaf move if the source's leaf is not last."""
    return list(finish_stream(parents_first(imported.entries), imported.leaf_id, ids))


def finish_stream(entries: Iterable[P], leaf_id: str | None,
                  ids: Ids) -> Iterator[P | LeafEntry]:
    """``entries`` (parents first), then a leaf move to ``leaf_id`` if it is not the last."""
    last: P | None = None
    for last in entries:
        yield last
    if leaf_id is not None and last is not None and last.id != leaf_id:
        yield LeafEntry(ids.new(), last.id, last.timestamp, target_id=leaf_id)


def imported_metadata(fmt: str, src: Path, **more: Any) -> Json:
    """The header metadata recording where an imported session came from."""
    info: Json = {"format": fmt, "path": str(src.resolve()), "imported_at": now()}
    info.update({k: v for k, v in more.items() if v is not None})
    return {"imported_from": info}


def header(session_id: str | None, created_at: str | None, *, cwd: str | None,
           metadata: Json, parent_session: str | None = None) -> SessionHeader:
    return SessionHeader(
        id=session_id or new_session_id(),
        created_at=created_at or now(),
        cwd=cwd,
        parent_session=parent_session,
        metadata=metadata,
    )


def dumps(value: object) -> bytes:
    """Pretty JSON for list exports (UTF-8, two-space indent, trailing newline)."""
    return orjson.dumps(value, option=orjson.OPT_INDENT_2) + b"\n"


def dump_lines(values: Sequence[object]) -> bytes:
    """JSON Lines: one compact JSON value per line."""
    return b"".join(orjson.dumps(v) + b"\n" for v in values)


def write_beside(main: Path, files: dict[str, bytes], write_main: Callable[[], object], *,
                 overwrite: bool) -> None:
    """Write ``files`` (paths relative to ``main`` without its suffix: a tool's files
    beside a session, e.g. Claude Code's ``<session>/subagents/``), then ``write_main()``:
    all or nothing, so an existing file (unless ``overwrite``) or a failure leaves none of
    them written."""
    from .._files import atomic_write
    from ..errors import SessionExists

    folder = main.with_suffix("")
    targets = {folder / rel: data for rel, data in files.items()}
    if not overwrite:
        for target in targets:
            if target.exists():
                raise SessionExists("a file is already there; choose another path or allow "
                                    "overwriting it (overwrite=True; --force on the command "
                                    "line)", path=str(target))
    written: list[Path] = []
    try:
        for target, data in targets.items():
            target.parent.mkdir(parents=True, exist_ok=True)
            existed = target.exists()
            atomic_write(target, data)
            if not existed:
                written.append(target)
        write_main()
    except BaseException:
        for target in written:
            with contextlib.suppress(OSError):
                target.unlink()
        raise
