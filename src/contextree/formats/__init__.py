"""Import and export of other agents' session formats.

``import_session(fmt, src, dest_path)`` reads ``src`` and writes a new contextree session file
(atomically: complete or not at all); ``export_session(fmt, session, out_path)`` writes a
session in another format. Formats are found by name in one table: ``list_formats()`` lists
them, ``get_format(name)`` finds one, and ``register_format(Format(...))`` adds one (the
built-in formats below are registered that way). The built-in formats:

=================  ======  ======  ==========================================================
format             import  export  what
=================  ======  ======  ==========================================================
brute              yes     yes     Brute ``SessionLog`` JSONL (one message per line)
pi                 yes     yes     pi 0.73 and 1.x session files (versions 1-3), whole tree
openai-chat        yes     yes     OpenAI Chat Completions ``messages`` (JSON list)
openai-responses   yes     yes     OpenAI Responses API ``input`` items (JSON list)
anthropic          yes     yes     Anthropic Messages ``{"system", "messages"}``
claude-code        yes     yes     Claude Code ``~/.claude/projects/*/*.jsonl``
codex              yes     yes     Codex CLI ``~/.codex/sessions/**/rollout-*.jsonl``
gemini-cli         yes     yes     Gemini CLI ``~/.gemini/tmp/*/chats/session-*.jsonl``
opencode           yes     yes     opencode's database ``opencode.db`` (``opencode.db#SESSION``);
                                   export: the JSON ``opencode import`` reads
copilot            yes     yes     GitHub Copilot CLI ``~/.copilot/session-state/*/events.jsonl``
atif               yes     yes     ATIF trajectories (Harbor RFC 0001), v1.0-v1.7 read, v1.7
                                   written
contextree         yes     yes     another contextree store: a JSONL file or a
                                   ``postgresql://host/db#SESSION_ID`` URL, copied losslessly
markdown           no      yes     one branch as readable Markdown, redacted (for an issue)
html               no      yes     one branch as a static HTML page, redacted, no script
=================  ======  ======  ==========================================================

Every export is redacted unless ``redact=False``: the writer reads ``redacted_copy(session,
redactor)``, the session with each secret replaced by a placeholder (docs/redaction.md).
Exports other than ``pi`` write the context the model sees at the leaf (or at ``at``);
``export_to_claude_code_home``, ``export_to_codex_home``, ``export_to_gemini_cli_home`` and
``export_to_copilot_home`` write one where that tool finds it.
Malformed input raises ``SessionError`` naming the file and line.

A format of your own::

    from contextree.formats import Format, register_format

    register_format(Format("my-log", "My agent's log (JSONL)", reader=read_my_log,
                           writer=write_my_log))

``reader(path, progress)`` returns an ``Imported`` (a header and the entries, or a
``stream`` of them: ``pi`` and ``claude-code`` stream, so a big file imports in bounded
memory); ``writer(session, at)`` returns the bytes of the file. ``contextree import my-log FILE``
and ``export my-log`` then work as for the built-in formats. A package makes it available
to the command line by naming the ``Format`` in an entry point of the group
``contextree.formats`` (in ``pyproject.toml``: ``[project.entry-points."contextree.formats"]
my-log = "my_package:MY_LOG"``).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._public import publish
from ._registry import register_builtins

if TYPE_CHECKING:  # imported on first use (PEP 562), from the modules _LAZY names
    from .._session import Session
    from ..entries import AnyEntry, SessionHeader
    from ..redaction import Redactor
    from ..storage._encoded import EncodedEntry
    from ._base import Imported, Progress
    from ._claude_code_export import export_to_claude_code_home
    from ._codex_export import export_to_codex_home
    from ._copilot_export import export_to_copilot_home
    from ._detect import detect_format
    from ._gemini_cli_export import export_to_gemini_cli_home
    from ._homes import find_tool_session, list_tool_sessions
    from ._redacted import redacted_copy
    from ._registry import (
        ENTRY_POINT_GROUP,
        Format,
        FoundSession,
        Reader,
        SessionHome,
        Writer,
        get_format,
        list_formats,
        register_format,
        unregister_format,
    )


@register_builtins
def _register_builtins() -> None:
    """The built-in formats, registered as any other would be (by the format table, before
    it is first used). Their functions are ``Later``s: importing this package, or the
    table, imports no format module; an import of pi imports pi's alone."""
    from ._homes import (
        CLAUDE_CODE_HOME,
        CODEX_HOME,
        COPILOT_HOME,
        GEMINI_CLI_HOME,
        OPENCODE_HOME,
        PI_HOME,
    )
    from ._later import Later
    from ._pi.schema import PI_ERAS
    from ._registry import Format, register_format

    def at(module: str, name: str) -> Any:
        return Later(f"{__name__}.{module}", name)

    lists = "_provider_lists"
    for builtin in (
        Format("brute", "Brute SessionLog JSONL (one message per line)",
               at("_brute", "read"), at("_brute", "write")),
        Format("pi", "pi coding agent session file (whole tree)",
               at("_pi", "read"), at("_pi", "write"),
               home=PI_HOME, versions=PI_ERAS, version_writer=at("_pi", "write")),
        Format("openai-chat", "OpenAI Chat Completions messages (JSON list)",
               at(lists, "read_openai_chat"), at(lists, "write_openai_chat"), ".json",
               aliases=("openai",)),
        Format("openai-responses", "OpenAI Responses API input items (JSON list)",
               at(lists, "read_openai_responses"), at(lists, "write_openai_responses"),
               ".json", aliases=("responses",)),
        Format("anthropic", "Anthropic Messages {system, messages} (JSON)",
               at(lists, "read_anthropic"), at(lists, "write_anthropic"), ".json"),
        Format("claude-code", "Claude Code session JSONL",
               at("_claude_code", "read"), at("_claude_code_export", "write"),
               aliases=("claude",), home=CLAUDE_CODE_HOME,
               companions=at("_claude_code_export", "subagent_files")),
        Format("codex", "Codex CLI rollout JSONL",
               at("_codex", "read"), at("_codex_export", "write"), home=CODEX_HOME),
        Format("atif", "ATIF trajectory (Harbor RFC 0001, v1.0-v1.7; writes v1.7)",
               at("_atif", "read"), at("_atif", "write"), ".json",
               detect=at("_atif", "detect")),
        Format("gemini-cli", "Gemini CLI chat JSONL (~/.gemini/tmp/*/chats/)",
               at("_gemini_cli", "read"), at("_gemini_cli_export", "write"),
               aliases=("gemini",), detect=at("_gemini_cli", "detect"),
               home=GEMINI_CLI_HOME),
        Format("opencode", "opencode's session database (opencode.db, or opencode.db#SESSION)",
               at("_opencode", "read"), at("_opencode_export", "write"), suffix=".db",
               detect=at("_opencode", "detect"), home=OPENCODE_HOME),
        Format("copilot", "GitHub Copilot CLI events.jsonl (~/.copilot/session-state/*/)",
               at("_copilot", "read"), at("_copilot_export", "write"),
               aliases=("copilot-cli",), detect=at("_copilot", "detect"), home=COPILOT_HOME),
        Format("contextree", "a contextree session file or postgresql://...#id URL (lossless)",
               copy=True),
        Format("markdown", "readable Markdown of one branch (--all: the tree), redacted, for "
               "an issue or a pull request", writer=at("_readable", "write_markdown"),
               suffix=".md", aliases=("md",)),
        Format("html", "a readable static HTML page of one branch (--all: the tree), "
               "redacted, no script", writer=at("_readable", "write_html"), suffix=".html"),
    ):
        register_format(builtin)


def import_session(
    fmt: str,
    src: str | os.PathLike[str],
    dest_path: str | os.PathLike[str],
    *,
    progress: Progress | None = None,
    durable: bool = True,
    with_subagents: bool = False,
) -> Session:
    """Read ``src`` in format ``fmt`` (``"auto"`` to detect it) into a new session file.

    Fails with ``exists`` if ``dest_path`` is already there; the new file appears complete or
    not at all. Returns the session, open for writing.

    ``with_subagents`` (claude-code): each sub-agent transcript of the session is imported
    too, as a session of its own beside ``dest_path`` (``<name>.agent-<id>.jsonl``) whose
    ``parent_session`` is ``dest_path``; the parent's ``claude-code/subagent`` entries name
    it (``session``). Without it the transcripts are roots inside the one session.
    """
    from ..errors import InvalidArgument, SessionNotFound
    from ._base import split_selector
    from ._detect import detect_format
    from ._registry import get_format

    spec = None if fmt == "auto" else get_format(fmt)
    if spec is not None and spec.copy:
        return copy_session(src, dest_path, durable=durable)
    source = Path(src)
    if not split_selector(source)[0].is_file():  # FILE#KEY: one session of FILE
        raise SessionNotFound("no such file to import", path=str(source))
    if spec is None:
        spec = get_format(detect_format(source))
    else:
        _refuse_another_format(spec.name, source)
    if spec.copy:
        return copy_session(src, dest_path, durable=durable)
    if spec.reader is None:
        raise InvalidArgument(f"format {spec.name!r} can be exported, not imported")
    if with_subagents:
        if spec.name not in _SUBAGENT_FORMATS:
            raise InvalidArgument(f"with_subagents: only {', '.join(_SUBAGENT_FORMATS)} "
                                  f"sessions have sub-agents of their own, not {spec.name!r}")
        from ..storage import resolve

        if resolve(dest_path).scheme is not None:
            raise InvalidArgument("with_subagents writes one file per sub-agent beside the "
                                  "session: import to a file path, not a database URL")
        return _import_with_subagents(spec.name, source, Path(dest_path), progress=progress,
                                      durable=durable)
    return _write_imported(spec.reader(source, progress), dest_path, durable=durable)


_SUBAGENT_FORMATS = ("claude-code", "gemini-cli", "opencode", "copilot")
"""The formats whose sessions record sub-agents (``import_session(..., with_subagents=True)``,
``contextree import FMT SRC --with-subagents``)."""


def _import_with_subagents(fmt: str, source: Path, dest: Path, *, progress: Progress | None,
                           durable: bool) -> Session:
    """``import_session(..., with_subagents=True)``: the session and each of its sub-agents,
    as files (``_subagents``; Claude Code's own in ``_claude_code_subagents``)."""
    if fmt == "claude-code":
        from ._claude_code_subagents import import_with_subagents

        return import_with_subagents(source, dest, _write_imported, progress=progress,
                                     durable=durable)
    from . import _copilot, _gemini_cli, _opencode
    from ._subagents import import_with_subagents as with_agents

    module = {"gemini-cli": _gemini_cli, "opencode": _opencode, "copilot": _copilot}[fmt]

    def parent(src: Path, progress: Progress | None, sessions: dict[str, str]) -> Imported:
        imported: Imported = module.read(src, progress, subagent_sessions=sessions)
        return imported

    return with_agents(source, dest, _write_imported, module.subagents(source),
                       module.read, parent,
                       progress=progress, durable=durable)


def _write_imported(imported: Imported, dest_path: str | os.PathLike[str], *,
                   durable: bool = True) -> Session:
    """A new session at ``dest_path`` holding what a reader returned (the second half of
    ``import_session``)."""
    from .._session import Session
    from ..storage import create_storage, resolve
    from ..storage._encoded import EncodedEntry
    from ._base import Ids, finish, finish_stream, in_parent_order

    if imported.stream is None:
        ids = Ids([e.id for e in imported.entries])
        return Session(create_storage(dest_path, imported.header, finish(imported, ids),
                                      durable=durable))
    ids = Ids(imported.used_ids)
    entries = finish_stream(in_parent_order(imported.stream(), imported.used_ids),
                            imported.leaf_id, ids)
    if resolve(dest_path).scheme is not None:  # a database: one transaction
        decoded = (e.entry() if isinstance(e, EncodedEntry) else e for e in entries)
        return Session(create_storage(dest_path, imported.header, decoded, durable=durable))
    return _create_streaming(Path(dest_path), imported.header, entries, durable=durable)


def _refuse_another_format(fmt: str, source: Path) -> None:
    """Refuse to read ``source`` as ``fmt`` when another format recognizes it as its own:
    read so, it would fail halfway or silently lose what only the other format has."""
    from ._base import input_error
    from ._detect import signed_by_other

    other = signed_by_other(source, fmt)
    if other is not None:
        raise input_error(source, None, f"this looks like {other}, not {fmt}: import it as "
                          f"{other} (`contextree import {other} ...`, or `auto`)")


def _create_streaming(dest: Path, header: SessionHeader,
                      entries: Iterable[AnyEntry | EncodedEntry], *, durable: bool) -> Session:
    """A new session file at ``dest`` written as ``entries`` come, in bounded memory: they
    are appended to a locked temporary session beside it, which is linked into place once
    complete (never over an existing file) and removed on any error. An entry that comes
    encoded is written as it is (``JsonlStorage.append_encoded``)."""
    from .._files import fsync_dir
    from .._session import Session

    _write_streaming(dest, header, entries, durable=durable)  # its tree is let go: the
    if durable:                                               # open below reads its own
        fsync_dir(dest.parent)
    return Session.open(dest, durable=durable)


def _write_streaming(dest: Path, header: SessionHeader,
                     entries: Iterable[AnyEntry | EncodedEntry], *, durable: bool) -> None:
    """``_create_streaming``'s file and its index, at ``dest``."""
    from .._files import temp_path
    from ..errors import SessionError, SessionExists
    from ..storage import JsonlStorage
    from ..storage._index import index_path

    dest.parent.mkdir(parents=True, exist_ok=True)
    storage = JsonlStorage.create(temp_path(dest), header, durable=durable)
    try:
        with storage.batch():
            for group in _runs(entries):
                try:
                    if isinstance(group, list):
                        storage.append_encoded_many(group)
                    else:
                        storage.append(group)
                except SessionError as e:  # named as the whole-file import names it
                    if e.path != storage.location:
                        raise
                    raise type(e)(e.reason, path=str(dest), line=e.line) from None
        try:
            os.link(storage.location, dest)  # never replaces a file
        except FileExistsError:
            raise SessionExists("a file is already there; choose another path or open it",
                                path=str(dest)) from None
    except BaseException:
        storage.delete()
        raise
    # The batch's end wrote the index anew, as columns (``_index_caught_up``). It comes
    # along (else the open rebuilds it), replacing any there, which is stale.
    with contextlib.suppress(OSError):
        os.replace(index_path(storage.location), index_path(dest))
    storage.delete()  # the temporary name and its sidecars; the file lives on at dest


_RUN = 512
"""Encoded entries appended together (``JsonlStorage.append_encoded_many``)."""


def _runs(entries: Iterable[AnyEntry | EncodedEntry]) -> Iterator[AnyEntry | list[EncodedEntry]]:
    """``entries`` in order: runs of up to ``_RUN`` encoded ones as lists (appended in one
    call), any other entry on its own."""
    from ..storage._encoded import EncodedEntry

    run: list[EncodedEntry] = []
    for entry in entries:
        if isinstance(entry, EncodedEntry):
            run.append(entry)
            if len(run) >= _RUN:
                yield run
                run = []
            continue
        if run:
            yield run
            run = []
        yield entry
    if run:
        yield run


def copy_session(src: str | os.PathLike[str], dest: str | os.PathLike[str], *,
                 durable: bool = True) -> Session:
    """Copy a session between stores (JSONL file <-> PostgreSQL URL) entry for entry: same
    header, ids, tree, labels and leaf. Returns the new session, open for writing."""
    from .._session import Session
    from ..storage import create_storage

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
    version: str | None = None,
    redact: bool | Redactor = True,
) -> Path:
    """Write ``session`` to ``out_path`` in format ``fmt``; returns the path written.

    ``at`` picks the entry whose context is exported (default: the current leaf); for ``pi``
    it is the entry pi resumes at. ``version`` is the version of the format to write, for a
    format that has several (``pi``: ``"1"``, the default, or ``"0.73"``). The file is
    replaced atomically; an existing file is an ``exists`` error unless ``overwrite``.

    Secrets are redacted (``[REDACTED:aws-key:1]``, see docs/redaction.md) in every format
    unless ``redact=False``; pass a ``Redactor`` for your own patterns or to read its
    ``found`` counts afterwards. The writer only sees the redacted copy; ``session`` is only
    read.
    """
    from .._files import atomic_write
    from ..errors import EntryNotFound, InvalidArgument, SessionExists
    from ..storage import create_storage
    from ._base import write_beside
    from ._redacted import as_redactor, redacted_copy
    from ._registry import get_format

    spec = get_format(fmt)
    redactor = as_redactor(redact)
    writer = spec.writer
    if writer is None and not spec.copy:
        raise InvalidArgument(f"format {spec.name!r} can be imported, not exported")
    if at is not None and at not in session:
        raise EntryNotFound(f"no entry {at!r} in this session", path=session.location)
    session = redacted_copy(session, redactor)  # the one place: no writer sees a secret
    if spec.copy:
        create_storage(out_path, session.header, list(session.entries())).close()
        return Path(out_path)
    data = spec.write(session, at, version)
    out = Path(out_path)
    out.parent.mkdir(parents=True, exist_ok=True)
    beside = spec.companions(session, at, redactor) if spec.companions is not None else {}
    try:  # refusing an existing file and writing are one atomic step: no race between them
        write_beside(out, beside, lambda: atomic_write(out, data, overwrite=overwrite),
                     overwrite=overwrite)
    except SessionExists:
        raise  # a file beside it, named
    except FileExistsError:
        raise SessionExists("a file is already there; choose another path or allow "
                            "overwriting it (overwrite=True; --force on the command line)",
                            path=str(out)) from None
    return out


__all__ = [
    "ENTRY_POINT_GROUP",
    "Format",
    "FoundSession",
    "Imported",
    "Progress",
    "Reader",
    "SessionHome",
    "Writer",
    "copy_session",
    "detect_format",
    "export_session",
    "export_to_claude_code_home",
    "export_to_codex_home",
    "export_to_copilot_home",
    "export_to_gemini_cli_home",
    "find_tool_session",
    "get_format",
    "import_session",
    "list_formats",
    "list_tool_sessions",
    "redacted_copy",
    "register_format",
    "unregister_format",
]

_LAZY = {
    "._base": ("Imported", "Progress"),
    "._claude_code_export": ("export_to_claude_code_home",),
    "._codex_export": ("export_to_codex_home",),
    "._copilot_export": ("export_to_copilot_home",),
    "._detect": ("detect_format",),
    "._gemini_cli_export": ("export_to_gemini_cli_home",),
    "._homes": ("find_tool_session", "list_tool_sessions"),
    "._redacted": ("redacted_copy",),
    "._registry": ("ENTRY_POINT_GROUP", "Format", "FoundSession", "Reader", "SessionHome",
                   "Writer", "get_format", "list_formats", "register_format",
                   "unregister_format"),
}

if not TYPE_CHECKING:  # type checkers see the imports above, not a catch-all __getattr__
    __getattr__, __dir__ = publish(globals(), _LAZY)
