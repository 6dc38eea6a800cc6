"""Import and export of other agents' session formats.

``import_session(fmt, src, dest_path)`` reads ``src`` and writes a new contextree session file
(atomically: complete or not at all); ``export_session(fmt, session, out_path)`` writes a
session in another format. ``FORMATS`` lists what each format supports:

=================  ======  ======  ==========================================================
format             import  export  what
=================  ======  ======  ==========================================================
brute              yes     yes     Brute ``SessionLog`` JSONL (one message per line)
pi                 yes     yes     pi coding agent session files (versions 1-3), whole tree
openai-chat        yes     yes     OpenAI Chat Completions ``messages`` (JSON list)
openai-responses   yes     yes     OpenAI Responses API ``input`` items (JSON list)
anthropic          yes     yes     Anthropic Messages ``{"system", "messages"}``
claude-code        yes     yes     Claude Code ``~/.claude/projects/*/*.jsonl``
codex              yes     yes     Codex CLI ``~/.codex/sessions/**/rollout-*.jsonl``
contextree         yes     yes     another contextree store: a JSONL file or a
                                   ``postgresql://host/db#SESSION_ID`` URL, copied losslessly
=================  ======  ======  ==========================================================

Exports other than ``pi`` write the context the model sees at the leaf (or at ``at``);
``export_to_claude_code_home`` and ``export_to_codex_home`` write one where that tool finds it.
Malformed input raises ``SessionError`` naming the file and line.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .._files import atomic_write
from .._public import publish
from .._session import Session
from ..errors import EntryNotFound, SessionExists, SessionNotFound
from ..storage import create_storage
from . import _brute, _claude_code, _claude_code_export, _codex, _codex_export, _pi
from . import _provider_lists as _lists
from ._base import Ids, Imported, Progress, UnknownFormatError, finish
from ._claude_code_export import export_to_claude_code_home
from ._codex_export import export_to_codex_home
from ._detect import detect_format
from ._homes import HOME_FORMATS, FoundSession, find_tool_session, list_tool_sessions

Reader = Callable[[Path, Progress | None], Imported]
"""Reads a source file (reporting progress) into the header and entries of a new session."""
Writer = Callable[[Session, str | None], bytes]
"""Writes a session, as seen at an entry (``None``: the leaf), as the bytes of a file."""


@dataclass(frozen=True)
class Format:
    """A registered format: how to read it, how to write it, its usual file suffix."""

    name: str
    description: str
    reader: Reader | None = None
    writer: Writer | None = None
    suffix: str = ".jsonl"
    copy: bool = False  # contextree to contextree: every entry as it is, any storage


FORMATS: dict[str, Format] = {f.name: f for f in (
    Format("brute", "Brute SessionLog JSONL (one message per line)", _brute.read, _brute.write),
    Format("pi", "pi coding agent session file (whole tree)", _pi.read, _pi.write),
    Format("openai-chat", "OpenAI Chat Completions messages (JSON list)",
           _lists.read_openai_chat, _lists.write_openai_chat, ".json"),
    Format("openai-responses", "OpenAI Responses API input items (JSON list)",
           _lists.read_openai_responses, _lists.write_openai_responses, ".json"),
    Format("anthropic", "Anthropic Messages {system, messages} (JSON)",
           _lists.read_anthropic, _lists.write_anthropic, ".json"),
    Format("claude-code", "Claude Code session JSONL", _claude_code.read,
           _claude_code_export.write),
    Format("codex", "Codex CLI rollout JSONL", _codex.read, _codex_export.write),
    Format("contextree", "a contextree session file or postgresql://...#id URL (lossless)",
           copy=True),
)}

_ALIASES = {"openai": "openai-chat", "responses": "openai-responses", "claude": "claude-code"}


def get_format(name: str) -> Format:
    """The registered format called ``name`` (case and ``_``/``-`` do not matter)."""
    key = name.strip().lower().replace("_", "-")
    fmt = FORMATS.get(_ALIASES.get(key, key))
    if fmt is None:
        raise UnknownFormatError(f"unknown format {name!r}; choose one of: "
                                 f"{', '.join(FORMATS)} (or auto for import)")
    return fmt


def import_session(
    fmt: str,
    src: str | os.PathLike[str],
    dest_path: str | os.PathLike[str],
    *,
    progress: Progress | None = None,
    durable: bool = True,
) -> Session:
    """Read ``src`` in format ``fmt`` (``"auto"`` to detect it) into a new session file.

    Fails with ``exists`` if ``dest_path`` is already there; the new file appears complete or
    not at all. Returns the session, open for writing.
    """
    if fmt != "auto" and get_format(fmt).copy:
        return copy_session(src, dest_path, durable=durable)
    source = Path(src)
    if not source.is_file():
        raise SessionNotFound("no such file to import", path=str(source))
    name = detect_format(source) if fmt == "auto" else fmt
    if get_format(name).copy:
        return copy_session(src, dest_path, durable=durable)
    reader = get_format(name).reader
    if reader is None:
        raise UnknownFormatError(f"format {name!r} can be exported, not imported")
    imported = reader(source, progress)
    ids = Ids([e.id for e in imported.entries])
    return Session(create_storage(dest_path, imported.header, finish(imported, ids),
                                  durable=durable))


def copy_session(src: str | os.PathLike[str], dest: str | os.PathLike[str], *,
                 durable: bool = True) -> Session:
    """Copy a session between stores (JSONL file <-> PostgreSQL URL) entry for entry: same
    header, ids, tree, labels and leaf. Returns the new session, open for writing."""
    with Session.open(src, readonly=True) as source:
        entries = list(source.entries())
        return Session(create_storage(dest, source.header, entries, durable=durable))


def export_session(
    fmt: str,
    session: Session,
    out_path: str | os.PathLike[str],
    *,
    at: str | None = None,
    overwrite: bool = False,
) -> Path:
    """Write ``session`` to ``out_path`` in format ``fmt``; returns the path written.

    ``at`` picks the entry whose context is exported (default: the current leaf); for ``pi``
    it is the entry pi resumes at. The file is replaced atomically; an existing file is an
    ``exists`` error unless ``overwrite``.
    """
    spec = get_format(fmt)
    if spec.copy:
        create_storage(out_path, session.header, list(session.entries())).close()
        return Path(out_path)
    writer = spec.writer
    if writer is None:
        raise UnknownFormatError(f"format {fmt!r} can be imported, not exported")
    if at is not None and at not in session:
        raise EntryNotFound(f"no entry {at!r} in this session", path=session.location)
    data = writer(session, at)
    out = Path(out_path)
    out.parent.mkdir(parents=True, exist_ok=True)
    try:  # refusing an existing file and writing are one atomic step: no race between them
        atomic_write(out, data, overwrite=overwrite)
    except FileExistsError:
        raise SessionExists("a file is already there; choose another path or allow "
                            "overwriting it (overwrite=True; --force on the command line)",
                            path=str(out)) from None
    return out


__all__ = [
    "FORMATS",
    "HOME_FORMATS",
    "Format",
    "FoundSession",
    "Imported",
    "Progress",
    "UnknownFormatError",
    "copy_session",
    "detect_format",
    "export_session",
    "export_to_claude_code_home",
    "export_to_codex_home",
    "find_tool_session",
    "get_format",
    "import_session",
    "list_tool_sessions",
]

publish(globals())
