"""``import`` and ``export``: other agents' session formats (see ``contextree.formats``)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, ClassVar

import typer

from .._files import atomic_write
from .._session import Session
from ..entries import encode_line
from ..errors import InvalidArgument, SessionNotFound
from ..formats import (
    Format,
    detect_format,
    export_session,
    find_tool_session,
    get_format,
    import_session,
    list_formats,
    list_tool_sessions,
)
from ..formats._base import split_selector
from .app import Command, command
from .output import Out, UsageProblem, clip, emit_bytes, emit_json, progress_bar
from .redacting import PatternsOpt, RedactOpt, found_line, make_redactor
from .sessions import (
    STDOUT,
    address_of,
    check_output,
    open_session,
    require_directory,
    require_regular_file,
    resolve_entry,
)
from .writing import replacing, to_stdout

if TYPE_CHECKING:  # loaded by an export's redactor: an import never needs it
    from ..redaction import Redactor

JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")]


class _FormatsCommand(Command):
    """A command whose help ends with the formats it takes, read from the format table when
    the help is shown (so formats registered by plugins are listed too)."""

    direction: ClassVar[str]

    def format_epilog(self, ctx: Any, formatter: Any) -> None:
        rows = [(f.name, f.description) for f in list_formats()
                if (f.can_import if self.direction == "import" else f.can_export)]
        with formatter.section("Formats"):
            formatter.write_dl(rows)
        super().format_epilog(ctx, formatter)


class _ImportCommand(_FormatsCommand):
    direction = "import"


class _ExportCommand(_FormatsCommand):
    direction = "export"


@command("import", cls=_ImportCommand)
def import_command(
    fmt: Annotated[str, typer.Argument(metavar="FORMAT", help="A format listed below, or "
                                       "auto (detected from the file).",
                                       show_default=False)],
    source: Annotated[str | None, typer.Argument(
        metavar="SRC", help="The file to read (for the contextree format: a file or a "
        "postgresql:// URL with #SESSION_ID; for claude-code, codex, pi, gemini-cli, "
        "opencode and copilot also a session id or its prefix, looked up in the tool's "
        "home; for opencode opencode.db#SESSION_ID).", show_default=False)] = None,
    output: Annotated[str | None, typer.Option("-o", "--output", help="The new session: a "
                                               "file, a postgresql:// URL, or - for stdout "
                                               "(default: SRC's name without its suffix + "
                                               ".contextree.jsonl, beside SRC, or here for "
                                               "a session found by id; required for the "
                                               "contextree format).")]
    = None,
    force: Annotated[bool, typer.Option("--force", help="Replace an existing file at "
                                        "OUTPUT.")] = False,
    list_them: Annotated[bool, typer.Option("--list", help="claude-code, codex, pi, "
                                            "gemini-cli, opencode, copilot: list the "
                                            "sessions in the tool's home, with their "
                                            "first prompt.")] = False,
    home: Annotated[str | None, typer.Option("--home", help="The tool's home (default "
                                             "~/.claude or $CLAUDE_CONFIG_DIR; $CODEX_HOME "
                                             "or ~/.codex; ~/.pi/agent or "
                                             "$PI_CODING_AGENT_DIR; ~/.gemini; the folder "
                                             "of opencode.db, ~/.local/share/opencode; "
                                             "$COPILOT_HOME or ~/.copilot).")] = None,
    with_subagents: Annotated[bool, typer.Option(
        "--with-subagents", help="claude-code, gemini-cli, opencode, copilot: import each "
        "sub-agent of the session as a session of its own beside OUTPUT (OUTPUT's name + "
        ".agent-<id>.jsonl), linked to it (without it, each is a root inside the one "
        "session).")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Read another agent's session (or a provider message list) into a new session."""
    spec = None if fmt == "auto" else get_format(fmt)
    if spec is not None and not spec.can_import:
        raise InvalidArgument(f"format {spec.name!r} can be exported, not imported")
    if home is not None:
        require_directory(home, "--home names the tool's home")
    if list_them:
        _list_sessions(spec.name if spec else fmt, home, as_json)
        return
    if source is None:
        raise UsageProblem("say which file to import (or --list the sessions of a tool: "
                           "claude-code, codex, pi, gemini-cli, opencode, copilot)")
    if as_json and output == STDOUT:
        raise UsageProblem("--json and -o - both write to stdout; use one of them")
    if spec is not None and spec.copy:
        if output is None:
            raise UsageProblem("say where the copy goes with -o FILE or -o postgresql://...")
        info = _write_import(spec.name, source, output, force=force)
        if info is not None:
            _report_import(info, as_json, f"copied {source} -> {info['path']}")
        return
    src = Path(source)
    default_dir = src.parent
    if not split_selector(src)[0].exists() and spec is not None and spec.home is not None:
        src = find_tool_session(spec.name, source, home)  # by id or prefix, in the tool's home
        default_dir = Path.cwd()
    if src.is_dir():
        raise UsageProblem(f"{src}: this is a directory; `import` reads one file (give the "
                           "session file inside it)")
    file, key = split_selector(src)  # FILE#KEY: one of the sessions FILE holds
    require_regular_file(file, "file to import")
    if not file.is_file():
        raise SessionNotFound("no such file to import", path=str(src))
    name = spec.name if spec is not None else detect_format(src)
    stem = key if key is not None else src.name.removesuffix(src.suffix)
    target = output or str(default_dir / (stem + ".contextree.jsonl"))
    if with_subagents:
        _import_with_subagents(name, src, target, force=force, as_json=as_json)
        return
    with progress_bar(f"importing {src.name}", file.stat().st_size) as bar:
        info = _write_import(name, str(src), target, force=force, progress=bar)
    if info is not None:
        _report_import(info, as_json, f"imported {src} ({name}) -> {info['path']}")


def _import_with_subagents(name: str, src: Path, target: str, *, force: bool,
                           as_json: bool) -> None:
    """``--with-subagents``: the session and each sub-agent transcript, as files."""
    from ..formats import _SUBAGENT_FORMATS

    if name not in _SUBAGENT_FORMATS:
        raise UsageProblem(f"--with-subagents: only {', '.join(_SUBAGENT_FORMATS)} sessions "
                           f"have sub-agents of their own ({src} is {name})")
    if target == STDOUT or not address_of(target).is_file:
        raise UsageProblem("--with-subagents writes one file per sub-agent beside the "
                           "session: give -o a file path")
    if force:
        raise UsageProblem("--with-subagents does not replace files: remove the old "
                           "imports first, or import to another -o")
    check_output(target, force=False, inputs=[str(src)])
    with progress_bar(f"importing {src.name}", split_selector(src)[0].stat().st_size) as bar, \
            import_session(name, src, target, progress=bar, with_subagents=True) as session:
        info = _imported(session, name, str(src), session.location)
        report = (session.header.metadata or {}).get("imported_from", {}).get("report", {})
    agents = [x.get("session") for x in report.get("subagents", ()) if x.get("session")]
    errors = report.get("subagent_errors", [])
    info.update(subagent_sessions=agents, subagent_errors=errors)
    if as_json:
        emit_json(info)
        return
    out = Out()
    out.line(f"imported {src} ({name}) -> {info['path']}: {info['entries']} entries, "
             f"leaf {info['leaf_id']}")
    for path in agents:
        out.line(f"  sub-agent -> {path}")
    for err in errors:
        out.line(f"  WARNING: sub-agent transcript {err['file']} not imported: {err['error']}")


def _write_import(name: str, source: str, target: str, *, force: bool,
                  progress: Any = None) -> dict[str, Any] | None:
    """Import ``source`` to ``target`` (a new file, a replaced one with ``force``, a URL, or
    stdout); what was written, or ``None`` when it went to stdout."""
    check_output(target, force=force, inputs=[source])
    if target == STDOUT:
        with to_stdout("import.jsonl") as tmp, import_session(name, source, tmp,
                                                              progress=progress):
            pass
        return None
    if address_of(target).is_file:
        with replacing(Path(target)) as path, import_session(name, source, path,
                                                             progress=progress) as session:
            return _imported(session, name, source, target)
    with import_session(name, source, target, progress=progress) as session:
        return _imported(session, name, source, session.location)


def _imported(session: Session, name: str, source: str, where: str) -> dict[str, Any]:
    return {"source": source, "format": name, "path": where, "session_id": session.id,
            "entries": len(session), "leaf_id": session.leaf_id}


def _report_import(info: dict[str, Any], as_json: bool, what: str) -> None:
    if as_json:
        emit_json(info)
        return
    Out().line(f"{what}: {info['entries']} entries, leaf {info['leaf_id']}")


def _list_sessions(fmt: str, home: str | None, as_json: bool) -> None:
    found = list_tool_sessions(fmt, home)
    if as_json:
        emit_json([f.to_dict() for f in found])
        return
    out = Out()
    if not found:
        out.line(f"no {fmt} sessions found")
        return
    rows = [[f.id, f.to_dict()["modified"], clip(f.cwd or "", 60), clip(f.first_prompt or "", 60)]
            for f in found]
    out.table(["id", "modified", "cwd", "first prompt"], rows)


@command("export", cls=_ExportCommand)
def export_command(
    fmt: Annotated[str, typer.Argument(metavar="FORMAT", help="A format listed below.",
                                       show_default=False)],
    file: Annotated[str, typer.Argument(metavar="FILE", help="A session file (or a "
                                        "postgresql://...#SESSION_ID URL).",
                                        show_default=False)],
    output: Annotated[str | None, typer.Option("-o", "--output", help="Where to write: a "
                                               "file, or - for stdout (default: "
                                               "<file>.<format>.<ext> beside FILE; for the "
                                               "contextree format also a postgresql:// URL)."
                                               )] = None,
    at: Annotated[str | None, typer.Option("--at", "--branch", help="Export the branch "
                                           "that ends at this entry (default: the current "
                                           "leaf); pi resumes there; contextree copies the "
                                           "file as it is.")] = None,
    whole: Annotated[bool, typer.Option("--all", help="markdown, html: the whole tree, every "
                                        "branch, instead of one branch.")] = False,
    force: Annotated[bool, typer.Option("--force", help="Replace an existing file at "
                                        "OUTPUT (never FILE itself).")] = False,
    format_version: Annotated[str | None, typer.Option(
        "--format-version", help="The version of the format to write, for a format that "
        "has several: pi 1 (pi 1.x, the default) or 0.73 (the old "
        "@mariozechner/pi-coding-agent).")] = None,
    redact: RedactOpt = True,
    patterns: PatternsOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Write a session in another format. pi and contextree keep the whole tree (every
    branch); the other formats hold the current branch only: the context the model sees at
    the leaf (or at --at). Secrets are redacted unless --no-redact."""
    spec = get_format(fmt)
    if not spec.can_export:
        raise InvalidArgument(f"format {spec.name!r} can be imported, not exported")
    if as_json and output == STDOUT:
        raise UsageProblem("--json and -o - both write to stdout; use one of them")
    if whole and spec.name not in READABLE:
        raise UsageProblem(f"--all is for the readable formats ({', '.join(READABLE)}); "
                           f"{spec.name} " + ("keeps the whole tree anyway"
                                              if spec.name in ("pi", "contextree")
                                              else "holds one branch (pick it with --at)"))
    if whole and at is not None:
        raise UsageProblem("--all exports every branch; --branch picks one: give one of them")
    redactor = make_redactor(redact, patterns, "the export")
    with open_session(file, readonly=True) as stored:
        entry = resolve_entry(stored, at) if at is not None else None
        if spec.name in READABLE:
            _export_readable(spec, stored, file, output, entry, whole=whole,
                             redactor=redactor, force=force, as_json=as_json)
            return
        # the one place the export is redacted: every format's writer reads this copy
        from ..formats import redacted_copy

        session = redacted_copy(stored, redactor)
        if output is None and not address_of(file).is_file:
            raise UsageProblem("say where the export goes with -o FILE (or -o - for stdout)")
        stem = Path(file).name.removesuffix(".jsonl")
        target = output or str(Path(file).with_name(f"{stem}.{spec.name}{spec.suffix}"))
        check_output(target, force=force, inputs=[file])
        if target == STDOUT:
            emit_bytes(_export_bytes(spec, session, entry, format_version),
                       kind=_stdout_kind(spec))
            _note_found(redactor)
            return
        if spec.copy and address_of(target).is_file:
            with replacing(Path(target)) as path:
                export_session(spec.name, session, path, at=entry, redact=False)
            written = target
        else:
            written = str(export_session(spec.name, session, target, at=entry,
                                         overwrite=force, version=format_version,
                                         redact=False))
    if as_json:
        emit_json({"source": file, "format": spec.name, "path": written, "at": entry,
                   "redacted": redactor.found if redactor.enabled else None})
        return
    note = f"; {found_line(redactor)}" if redactor.enabled else ""
    Out().line(f"exported {file} ({spec.name}) -> {written}{note}")


def _note_found(redactor: Redactor) -> None:
    """What was redacted, on stderr when stdout is the export itself (nothing when nothing
    was found: a clean run says nothing on stderr)."""
    if redactor.enabled and redactor.found:
        typer.echo(found_line(redactor), err=True)


READABLE = ("markdown", "html")
"""The formats for people: one branch or the tree, redacted unless --no-redact."""


def _export_readable(spec: Format, stored: Session, file: str, output: str | None,
                     at: str | None, *, whole: bool, redactor: Redactor, force: bool,
                     as_json: bool) -> None:
    """``export markdown|html``: a readable copy of one branch or the tree, redacted by
    ``redactor``; the copy itself says whether it is redacted."""
    from ..view import read_view
    from ..view._export import html_export, markdown_export

    if output is None and not address_of(file).is_file:
        raise UsageProblem("say where the export goes with -o FILE (or -o - for stdout)")
    stem = Path(file).name.removesuffix(".jsonl")
    target = output or str(Path(file).with_name(f"{stem}{spec.suffix}"))
    check_output(target, force=force, inputs=[file])
    view = read_view(stored, redact=redactor)
    k = view.index[at] if at is not None else None
    render = markdown_export if spec.name == "markdown" else html_export
    data = render(view, at=k, whole=whole).encode()
    if target == STDOUT:
        emit_bytes(data, kind="text")
        _note_found(redactor)
        return
    atomic_write(Path(target), data)
    if as_json:
        emit_json({"source": file, "format": spec.name, "path": target, "at": at,
                   "all": whole, "redacted": redactor.found if redactor.enabled else None})
        return
    note = f"; {found_line(redactor)}" if redactor.enabled else ""
    Out().line(f"exported {file} ({spec.name}{', every branch' if whole else ''}) -> "
               f"{target}{note}")


def _stdout_kind(spec: Format) -> str:
    """How ``-o -`` shows an export on a terminal (``emit_bytes``): by its file suffix."""
    if spec.suffix in (".json", ".jsonl"):
        return "json"
    return "text" if spec.name in READABLE else "binary"


def _export_bytes(spec: Format, session: Session, at: str | None,
                  version: str | None = None) -> bytes:
    """What ``export`` writes, as bytes (for ``-o -``)."""
    if spec.copy:
        return b"".join([encode_line(session.header), *(encode_line(e)
                                                         for e in session.entries())])
    return spec.write(session, at, version)
