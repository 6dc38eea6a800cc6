"""``import`` and ``export``: other agents' session formats (see ``contextree.formats``)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ..errors import SessionNotFound
from ..formats import (
    FORMATS,
    HOME_FORMATS,
    UnknownFormatError,
    detect_format,
    export_session,
    find_tool_session,
    get_format,
    import_session,
    list_tool_sessions,
)
from .app import command
from .output import Out, UsageProblem, clip, emit_json, progress_bar
from .sessions import open_session, resolve_entry

_FORMAT_HELP = "One of: " + ", ".join(FORMATS) + "."


@command("import")
def import_command(
    fmt: Annotated[str, typer.Argument(metavar="FORMAT", help=_FORMAT_HELP + " Or auto.",
                                       show_default=False)],
    source: Annotated[str | None, typer.Argument(
        metavar="SRC", help="The file to read (for the contextree format: a file or a "
        "postgresql:// URL with #SESSION_ID; for claude-code and codex also a session id "
        "or its prefix, looked up in the tool's home).", show_default=False)] = None,
    output: Annotated[str | None, typer.Option("-o", "--output", help="The new session: a "
                                               "file (default: <src>.contextree.jsonl) or a "
                                               "postgresql:// URL.")]
    = None,
    list_them: Annotated[bool, typer.Option("--list", help="claude-code, codex: list the "
                                            "sessions in the tool's home, with their first "
                                            "prompt.")] = False,
    home: Annotated[str | None, typer.Option("--home", help="The tool's home (default "
                                             "~/.claude or $CLAUDE_CONFIG_DIR; $CODEX_HOME "
                                             "or ~/.codex).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="With --list: print JSON.")] = False,
) -> None:
    """Read another agent's session (or a provider message list) into a new session file."""
    name = None if fmt == "auto" else get_format(fmt).name
    if list_them:
        _list_sessions(name or fmt, home, as_json)
        return
    if source is None:
        raise UsageProblem("say which file to import (or --list the sessions of claude-code "
                           "or codex)")
    if name is not None and get_format(name).copy:
        if output is None:
            raise UsageProblem("say where the copy goes with -o FILE or -o postgresql://...")
        with import_session(name, source, output) as session:
            count, leaf, where = len(session), session.leaf_id, session.location
        Out().line(f"copied {source} -> {where}: {count} entries, leaf {leaf}")
        return
    src = Path(source)
    default_dir = src.parent
    if not src.is_file() and name in HOME_FORMATS:
        src = find_tool_session(name, source, home)  # by id or prefix, in the tool's home
        default_dir = Path.cwd()
    if not src.is_file():
        raise SessionNotFound("no such file to import", path=str(src))
    name = name or detect_format(src)
    target = output or default_dir / (src.name.removesuffix(src.suffix) + ".contextree.jsonl")
    with progress_bar(f"importing {src.name}", src.stat().st_size) as bar, \
            import_session(name, src, target, progress=bar) as session:
        count, leaf = len(session), session.leaf_id
    Out().line(f"imported {src} ({name}) -> {target}: {count} entries, leaf {leaf}")


def _list_sessions(fmt: str, home: str | None, as_json: bool) -> None:
    found = list_tool_sessions(fmt, home)
    if as_json:
        emit_json([f.to_dict() for f in found])
        return
    out = Out()
    if not found:
        out.line(f"no {fmt} sessions found")
        return
    rows = [[f.id, f.to_dict()["modified"], f.cwd or "", clip(f.first_prompt or "", 60)]
            for f in found]
    out.table(["id", "modified", "cwd", "first prompt"], rows)


@command("export")
def export_command(
    fmt: Annotated[str, typer.Argument(metavar="FORMAT", help=_FORMAT_HELP,
                                       show_default=False)],
    file: Annotated[str, typer.Argument(metavar="FILE", help="A session file.",
                                        show_default=False)],
    output: Annotated[str | None, typer.Option("-o", "--output", help="Where to write "
                                               "(default: <file>.<format>.<ext>; for the "
                                               "contextree format also a postgresql:// URL)."
                                               )] = None,
    at: Annotated[str | None, typer.Option("--at", help="Export the context at this entry "
                                           "(default: the current leaf).")] = None,
    force: Annotated[bool, typer.Option("--force", help="Overwrite OUTPUT.")] = False,
) -> None:
    """Write a session in another format (pi: the whole tree; others: the context the model
    sees at the leaf)."""
    spec = get_format(fmt)
    if spec.writer is None and not spec.copy:
        raise UnknownFormatError(f"format {spec.name!r} can be imported, not exported")
    with open_session(file, readonly=True) as session:
        entry = resolve_entry(session, at) if at is not None else None
        stem = Path(file).name.removesuffix(".jsonl")
        target = output or str(Path(file).with_name(f"{stem}.{spec.name}{spec.suffix}"))
        written = export_session(spec.name, session, target, at=entry, overwrite=force)
    Out().line(f"exported {file} ({spec.name}) -> {written}")
