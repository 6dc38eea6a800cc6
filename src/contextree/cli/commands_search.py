"""``contextree search`` and ``contextree index``: find entries by what was said in them.

A directory is searched through the index beside it (``<WHERE>/.contextree/index.sqlite``,
refreshed before each search); a PostgreSQL database through its own full-text search.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ..storage import CatalogListing, SearchHit, SearchResults
from .app import command
from .catalogs import open_catalog_of
from .commands_ls import report_unlisted
from .output import Out, UsageProblem, count_option, emit_json, human_size, progress_bar, warn
from .terminal import visible

DEFAULT_LIMIT = 20
ROLES = ("user", "assistant", "tool", "system", "compaction", "branch_summary", "custom")
"""What ``--role`` takes: the roles of messages, and the other entries that hold text."""
WhereArg = Annotated[str, typer.Argument(metavar="WHERE", help="A directory (looked through "
                                         "recursively), a postgresql:// URL, or any catalog "
                                         "URL.")]


@command("search")
def search_command(
    query: Annotated[str, typer.Argument(metavar="QUERY", help="Words to find (whole words; "
                                         "word* for a start; \"a phrase\" in quotes).")],
    where: WhereArg = ".",
    role: Annotated[str | None, typer.Option("--role", help="Only entries of this role: "
                                             f"{', '.join(ROLES)}.")] = None,
    since: Annotated[str | None, typer.Option("--since", help="Only entries written since "
                                              "this time (ISO, such as 2026-12-01 or "
                                              "2026-12-01T09:30; UTC unless it gives an "
                                              "offset).")] = None,
    until: Annotated[str | None, typer.Option("--until", help="Only entries written before "
                                              "this time (ISO, as --since).")] = None,
    cwd: Annotated[str | None, typer.Option("--cwd", help="Only sessions run in this "
                                            "directory or below it.")] = None,
    model: Annotated[str | None, typer.Option("--model", help="Only sessions a model of "
                                              "this id answered in.")] = None,
    tool: Annotated[str | None, typer.Option("--tool", help="Only entries that call or "
                                             "answer this tool.")] = None,
    on_branch: Annotated[bool, typer.Option("--on-branch", help="Only entries on their "
                                            "session's current branch.")] = False,
    limit: Annotated[str | None, typer.Option("--limit", metavar="N", help="At most this "
                                              f"many hits (default {DEFAULT_LIMIT}).")] = None,
    fts: Annotated[bool, typer.Option("--fts", help="Read QUERY as SQLite FTS5 syntax (AND, "
                                      "OR, NOT, NEAR, prefix*) instead of literally.")] = False,
    no_refresh: Annotated[bool, typer.Option("--no-refresh", help="Search the index as it "
                                             "is, without reading what changed.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")] = False,
) -> None:
    """Find the entries whose text matches QUERY in the sessions under WHERE, newest first.

    Each word is matched as a whole word (word* as the start of one; a sha's first digits
    find the sha), an identifier such as test_parse_header as itself, and "words in quotes"
    as a phrase. Every hit shows
    its session, entry id, role, time and a snippet, and says whether the entry is on the
    current branch (off-branch history and entries compaction took out of the model's view
    are found too, and marked). A directory's index is refreshed first."""
    from ..storage import search

    if role is not None and role not in ROLES:
        raise UsageProblem(f"--role {role!r} is not a role; give one of {', '.join(ROLES)}")
    since, until = _time_option("--since", since), _time_option("--until", until)
    count = count_option(limit) or DEFAULT_LIMIT
    catalog, is_dir = open_catalog_of(where)
    found = search(catalog, query, role=role, since=since, until=until, cwd=cwd, model=model,
                   tool=tool, on_branch=on_branch, limit=count, fts=fts,
                   refresh=not no_refresh)
    _report(found)
    if as_json:
        emit_json([_json_row(h, is_dir) for h in found])
        return
    _print(found, catalog.where, is_dir, query)


def _time_option(option: str, text: str | None) -> str | None:
    """An ISO time given to ``option`` as entries write it (UTC), or a usage error: any
    other text would be compared as it is, and match nothing or everything."""
    from ..storage._describe import parse_utc_stamp

    if text is None:
        return None
    try:
        return parse_utc_stamp(text)
    except ValueError as e:
        raise UsageProblem(f"{option} {e}") from None


def _report(found: SearchResults) -> None:
    for note in found.notes:
        warn(note)
    report_unlisted(CatalogListing(unlisted=found.unlisted))


def _json_row(hit: SearchHit, is_dir: bool) -> dict[str, object]:
    row = hit.to_dict()
    row["path" if is_dir else "url"] = hit.target
    return row


def _print(hits: list[SearchHit], where: str, is_dir: bool, query: str) -> None:
    out = Out()
    if not hits:
        out.line(f"no entries match {query!r} {'under' if is_dir else 'in'} {where}")
        return
    for hit in hits:
        place = _shown_target(hit.target, where, is_dir)
        state = "on branch" if hit.on_branch else "off branch"
        if hit.compacted:
            state += ", compacted"
        if hit.archived:
            state += ", archived"
        who = hit.role + (f" {hit.tool}" if hit.tool else "")
        out.styled([(place, "bold"), (f"  {hit.entry_id}  ", "cyan"), (who, None),
                    (f"  {hit.timestamp}  ", "dim"),
                    (f"[{state}]", "green" if hit.on_branch and not hit.compacted
                     else "yellow")])
        out.styled(_marked(hit, out.rich))


def _shown_target(target: str, where: str, is_dir: bool) -> str:
    if not is_dir:
        return target
    try:
        return str(Path(target).relative_to(where))
    except ValueError:
        return target


def _marked(hit: SearchHit, rich: bool) -> list[tuple[str, str | None]]:
    """The snippet in pieces, the matches styled (on a terminal) or between ``[[ ]]``.
    Each piece is made visible on its own, so an escape in the text cannot reach the
    terminal and the marks stay where the matches are."""
    pieces: list[tuple[str, str | None]] = [("    ", None)]
    at = 0
    for start, end in hit.marks:
        if start < at:
            continue
        pieces.append((visible(hit.snippet[at:start]), None))
        match = visible(hit.snippet[start:end])
        pieces.append((match, "bold reverse") if rich else (f"[[{match}]]", None))
        at = end
    pieces.append((visible(hit.snippet[at:]), None))
    return pieces


@command("index")
def index_command(
    where: WhereArg = ".",
    rebuild: Annotated[bool, typer.Option("--rebuild", help="Delete the index and build it "
                                          "again from the sessions.")] = False,
    drop: Annotated[bool, typer.Option("--drop", help="Delete the index (and the listing "
                                       "cache in it) and build nothing; the next search or "
                                       "ls makes it again.")] = False,
) -> None:
    """Build or refresh the search index of the sessions under WHERE (a directory).

    The index is <WHERE>/.contextree/index.sqlite, a cache of the sessions (never their
    truth: delete it at any time). Only what changed is read: a session that grew is read
    from where the index stopped. `contextree search` refreshes it too; this command is for
    building a big one ahead, with a progress bar; --drop deletes it (with the words of
    deleted sessions it may still hold). A PostgreSQL database keeps its index current with
    every append: nothing to do there."""
    import time

    from ..storage._index_db import index_path, remove_index
    from ..storage._search_index import SearchIndex, drop_index

    if rebuild and drop:
        raise UsageProblem("--rebuild builds the index again, --drop deletes it: choose one")
    catalog, is_dir = open_catalog_of(where)
    out = Out()
    if not is_dir:
        if drop:
            raise UsageProblem(f"{catalog.where}: a database's search columns are part of "
                               "its tables, not a cache to drop; turn search inside words "
                               "off with `contextree db init URL --no-trigrams`")
        out.line(f"{catalog.where} keeps its search index current with every append "
                 "(nothing to build)")
        return
    root = Path(catalog.where)
    if drop:
        freed = drop_index(root)
        out.line(f"deleted the search index of {root} ({human_size(freed)})" if freed
                 else f"{root} has no search index")
        return
    if rebuild:
        remove_index(index_path(root))
    started = time.perf_counter()
    with SearchIndex.open(root) as index:
        for note in index.notes:
            warn(note)
        total = index.pending_bytes()
        with progress_bar(f"indexing {root}", total) as progress:
            report = index.refresh(progress)
        stats = index.stats()
    for note in report.notes:
        warn(note)
    report_unlisted(CatalogListing(unlisted=report.unlisted))
    took = time.perf_counter() - started
    out.line(f"indexed {report.files} changed session files ({human_size(report.read_bytes)} "
             f"read in {took:.2f} s); dropped {report.dropped}; the index holds "
             f"{stats['sessions']} sessions, {stats['texts']} texts "
             f"({human_size(stats['bytes'])})" + (" [temporary]" if index.temporary else ""))
