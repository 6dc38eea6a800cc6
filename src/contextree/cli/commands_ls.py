"""``contextree ls``: the sessions of a catalog (a directory, a database...), newest first.

Its own module, importing only the catalog: a person who types ``contextree ls`` waits for
nothing else (tests/test_startup.py keeps it so).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Annotated, Any

import typer

from ..storage import CatalogListing, Query, SessionInfo
from ..storage._catalog import NOT_A_SESSION
from .app import command
from .catalogs import open_catalog_of
from .listing import DATABASE_COLUMNS, DIRECTORY_COLUMNS
from .listing import rows as listing_rows
from .output import Out, count_option, emit_json, warn
from .redacting import RedactOpt, say_not_redacted
from .terminal import visible

SHOWN_UNLISTED = 5

JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")]


@command("ls")
def ls_command(
    where: Annotated[str, typer.Argument(metavar="WHERE", help="A directory (looked through "
                                         "recursively), a postgresql:// URL, or any "
                                         "catalog URL.")] = ".",
    cwd: Annotated[str | None, typer.Option("--cwd", help="Only sessions run in this "
                                            "directory or below it.")] = None,
    name: Annotated[str | None, typer.Option("--name", help="Only sessions whose name "
                                             "contains this (any case).")] = None,
    label: Annotated[str | None, typer.Option("--label", help="Only sessions with an entry "
                                              "labelled this.")] = None,
    model: Annotated[str | None, typer.Option("--model", help="Only sessions a model of "
                                              "this id answered in.")] = None,
    since: Annotated[str | None, typer.Option("--since", help="Only sessions active since "
                                              "this time (ISO, UTC).")] = None,
    until: Annotated[str | None, typer.Option("--until", help="Only sessions last active "
                                              "before this time (ISO, UTC).")] = None,
    limit: Annotated[str | None, typer.Option("--limit", metavar="N", help="At most this "
                                              "many sessions.")] = None,
    redact: RedactOpt = True,
    as_json: JsonOpt = False,
) -> None:
    """List the sessions under WHERE (a directory, a PostgreSQL database or another catalog),
    newest activity first.

    Each file is read in bounded memory: its header, its tail and a few samples for the
    entry count (marked ≈ when estimated); a name set before the tail is found by a byte
    search backwards through the file. Files that are not sessions, and anything that cannot
    be read, are counted below the table (listed with --json). Names, working directories
    and metadata are redacted unless --no-redact. (No --redact-pattern here: a list option
    costs Typer its Pydantic import, a third of the time of an `ls`.)"""
    from ..storage._describe import utc_stamp

    if not redact:
        say_not_redacted("this listing")
    catalog, is_dir = open_catalog_of(where)
    query = Query(cwd=cwd, name=name, label=label, model=model,
                  since=utc_stamp(since) if since else None,
                  until=utc_stamp(until) if until else None)
    listing = catalog.list(query if query != Query() else None, limit=count_option(limit))
    if redact and listing.sessions:
        listing = dataclasses.replace(listing, sessions=redacted_infos(listing.sessions))
    report_unlisted(listing)
    if as_json:
        emit_json([_json_row(s, is_dir) for s in listing.sessions])
        return
    _print(listing, catalog.where, is_dir)


def redacted_infos(infos: list[SessionInfo]) -> list[SessionInfo]:
    """``infos`` with their names, working directories and metadata redacted (one
    ``Redactor.texts`` call for all the names and directories)."""
    from ..redaction import Redactor

    redactor = Redactor()
    texts = redactor.texts([t for s in infos for t in (s.name or "", s.cwd or "")])
    return [dataclasses.replace(
        s, name=texts[2 * i] if s.name else s.name, cwd=texts[2 * i + 1] if s.cwd else s.cwd,
        metadata=redactor.value(s.metadata) if s.metadata else s.metadata)
        for i, s in enumerate(infos)]


def _json_row(info: SessionInfo, is_dir: bool) -> dict[str, Any]:
    row = info.to_dict()
    row["path" if is_dir else "url"] = info.target
    return row


def _print(listing: CatalogListing, where: str, is_dir: bool) -> None:
    out = Out()
    if not listing.sessions:
        out.line(f"no contextree sessions {'under' if is_dir else 'in'} {where}")
    elif is_dir:
        out.table(DIRECTORY_COLUMNS, listing_rows(listing.sessions, Path(where)), right=(5, 6))
    else:
        out.table(DATABASE_COLUMNS, listing_rows(listing.sessions, None), right=(4,))
    foreign = [u for u in listing.unlisted if u.reason == NOT_A_SESSION]
    if foreign:
        out.line(f"({len(foreign)} other .jsonl files are not contextree sessions; "
                 "`contextree import auto FILE` converts other agents' sessions)", "dim")


def report_unlisted(listing: CatalogListing) -> None:
    """Say on stderr what could not be listed (a few of them, with the reason), so that
    nothing under WHERE is passed over silently; files of other tools are only counted."""
    other = [u for u in listing.unlisted if u.reason != NOT_A_SESSION]
    for u in other[:SHOWN_UNLISTED]:
        warn(f"not listed: {visible(u.where)}: {u.reason}")
    if len(other) > SHOWN_UNLISTED:
        warn(f"not listed: {len(other) - SHOWN_UNLISTED} more")
