"""``import`` and ``export``: other agents' session formats (see ``contextree.formats``)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ..errors import SessionError
from ..formats import (
    FORMATS,
    UnknownFormatError,
    detect_format,
    export_session,
    get_format,
    import_session,
)
from .app import command
from .output import Out, progress_bar
from .sessions import open_session, resolve_entry

_FORMAT_HELP = "One of: " + ", ".join(FORMATS) + "."


@command("import")
def import_command(
    fmt: Annotated[str, typer.Argument(metavar="FORMAT", help=_FORMAT_HELP + " Or auto.",
                                       show_default=False)],
    src: Annotated[Path, typer.Argument(metavar="SRC", help="The file to read.",
                                        show_default=False)],
    output: Annotated[Path | None, typer.Option("-o", "--output", help="The new session "
                                                "file (default: <src>.contextree.jsonl).")]
    = None,
) -> None:
    """Read another agent's session (or a provider message list) into a new session file."""
    name = None if fmt == "auto" else get_format(fmt).name
    if not src.is_file():
        raise SessionError("not_found", "no such file to import", path=str(src))
    name = name or detect_format(src)
    target = output or src.with_name(src.name.removesuffix(src.suffix) + ".contextree.jsonl")
    with progress_bar(f"importing {src.name}", src.stat().st_size) as bar, \
            import_session(name, src, target, progress=bar) as session:
        count, leaf = len(session.storage), session.leaf_id
    Out().line(f"imported {src} ({name}) -> {target}: {count} entries, leaf {leaf}")


@command("export")
def export_command(
    fmt: Annotated[str, typer.Argument(metavar="FORMAT", help=_FORMAT_HELP,
                                       show_default=False)],
    file: Annotated[str, typer.Argument(metavar="FILE", help="A session file.",
                                        show_default=False)],
    output: Annotated[Path | None, typer.Option("-o", "--output", help="Where to write "
                                                "(default: <file>.<format>.<ext>).")] = None,
    at: Annotated[str | None, typer.Option("--at", help="Export the context at this entry "
                                           "(default: the current leaf).")] = None,
    force: Annotated[bool, typer.Option("--force", help="Overwrite OUTPUT.")] = False,
) -> None:
    """Write a session in another format (pi: the whole tree; others: the context the model
    sees at the leaf)."""
    spec = get_format(fmt)
    if spec.writer is None:
        raise UnknownFormatError(f"format {spec.name!r} can be imported, not exported")
    with open_session(file, readonly=True) as session:
        entry = resolve_entry(session, at) if at is not None else None
        stem = Path(file).name.removesuffix(".jsonl")
        target = output or Path(file).with_name(f"{stem}.{spec.name}{spec.suffix}")
        written = export_session(spec.name, session, target, at=entry, overwrite=force)
    Out().line(f"exported {file} ({spec.name}) -> {written}")
