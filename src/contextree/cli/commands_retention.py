"""Retention over many sessions: ``du``, ``prune``, ``archive`` and ``unarchive``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from .._overflow import OverflowStore
from ..errors import InvalidArgument
from ..retention import (
    ARCHIVE_SUFFIX,
    archive,
    disk_usage,
    parse_age,
    plan_prune,
    prune,
    unarchive,
)
from ..storage._search_index import leaving_indexes
from .app import command
from .catalogs import open_catalog_of
from .listing import when
from .output import CommandFailed, Out, UsageProblem, emit_json, human_size, short_id, warn
from .places import address_of, require_directory, require_regular_file
from .sessions import check_output
from .terminal import visible

JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")]
WhereArg = Annotated[str, typer.Argument(metavar="WHERE", help="A directory of sessions, or "
                                         "a postgresql:// URL.")]
StoreOpt = Annotated[Path | None, typer.Option("--store", help="The overflow store the "
                                               "sessions spilled to (default: the per-user "
                                               "one).")]


def _store(directory: Path | None) -> OverflowStore:
    if directory is None:
        return OverflowStore.default()
    require_directory(directory, "--store names an overflow store")
    if not directory.is_dir():
        raise CommandFailed(f"{directory}: no such directory (--store names an overflow store)")
    return OverflowStore(directory)


@command("du")
def du_command(where: WhereArg = ".", store: StoreOpt = None, as_json: JsonOpt = False) -> None:
    """Bytes each session takes (largest first): the session itself, its saved tool outputs,
    its sidecar files (quarantine, index, lock), and the catalog's search index; with totals."""
    catalog, is_dir = open_catalog_of(where)
    report = disk_usage(catalog, _store(store))
    if as_json:
        emit_json({"where": catalog.where, "totals": report.totals,
                   "sessions": [{"id": s.session.id, "target": s.session.target,
                                 "session_bytes": s.session_bytes,
                                 "spill_bytes": s.spill_bytes, "spill_files": s.spill_files,
                                 "sidecar_bytes": s.sidecar_bytes, "total": s.total}
                                for s in report.sessions],
                   "unlisted": [{"where": u.where, "reason": u.reason}
                                for u in report.unlisted]})
        return
    out = Out()
    rows = [[visible(_shown(s.session.target, catalog.where, is_dir)), short_id(s.session.id),
             human_size(s.session_bytes), human_size(s.spill_bytes),
             human_size(s.sidecar_bytes), human_size(s.total)] for s in report.sessions]
    t = report.totals
    rows.append(["(total)", f"{len(report.sessions)} sessions", human_size(t["session"]),
                 human_size(t["spills"]), human_size(t["sidecars"]), human_size(t["total"])])
    out.table(["session", "id", "session", "spills", "sidecars", "total"], rows,
              right=(2, 3, 4, 5))
    if t["index"]:
        out.line(f"search index and listing cache (.contextree): {human_size(t['index'])} "
                 "(in the total; a cache: `contextree index --drop` deletes it)", "dim")
    for u in report.unlisted:
        out.line(f"not a session: {visible(u.where)}: {u.reason}", "dim")


def _shown(target: str, where: str, is_dir: bool) -> str:
    if not is_dir:
        return target.rsplit("#", 1)[-1]
    try:
        return str(Path(target).relative_to(where))
    except ValueError:
        return target


@command("prune")
def prune_command(
    where: WhereArg,
    older_than: Annotated[str, typer.Option("--older-than", metavar="AGE", help="Delete "
                                            "sessions last active longer ago than this "
                                            "(30d, 12h, 2w).")],
    keep_labeled: Annotated[bool, typer.Option("--keep-labeled", help="Keep sessions with a "
                                               "label on any entry.")] = False,
    keep_named: Annotated[bool, typer.Option("--keep-named", help="Keep sessions that have "
                                             "a name.")] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print exactly what would be "
                                          "deleted, and delete nothing.")] = False,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")]
    = False,
    store: StoreOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Delete old sessions with the saved tool outputs only they name; a saved output that a
    session that stays still names is kept, and a session open for writing is skipped."""
    try:
        age = parse_age(older_than)
    except InvalidArgument as e:
        raise UsageProblem(str(e)) from None
    catalog, _ = open_catalog_of(where)
    spills = _store(store)
    plan = plan_prune(catalog, older_than=age, keep_labeled=keep_labeled,
                      keep_named=keep_named)
    if dry_run or not plan.delete:
        _print_plan(plan, as_json, dry_run)
        return
    if not yes and not typer.confirm(f"Delete {len(plan.delete)} sessions last active before "
                                     f"{plan.cutoff} and their saved tool outputs?", err=True):
        raise typer.Exit(1)
    report = prune(plan, spills)
    if as_json:
        emit_json({"where": catalog.where, "cutoff": plan.cutoff, "dry_run": False,
                   "deleted": [s.target for s in report.deleted],
                   "spills_removed": report.spills_removed, "spills_kept": report.spills_kept,
                   "skipped": report.skipped, "kept": plan.kept})
        return
    out = Out()
    out.line(f"deleted {len(report.deleted)} sessions and {len(report.spills_removed)} saved "
             f"tool outputs; kept {len(report.spills_kept)} outputs other sessions name")
    for target, why in report.skipped.items():
        out.line(f"skipped {visible(target)}: {visible(why)}")


def _print_plan(plan: Any, as_json: bool, dry_run: bool) -> None:
    if as_json:
        emit_json({"where": plan.catalog.where, "cutoff": plan.cutoff, "dry_run": dry_run,
                   "would_delete": [s.target for s in plan.delete], "kept": plan.kept})
        return
    out = Out()
    if not plan.delete:
        out.line(f"nothing to prune: no session last active before {plan.cutoff}"
                 + (f" ({len(plan.kept)} kept)" if plan.kept else ""))
        return
    out.line(f"would delete {len(plan.delete)} sessions last active before {plan.cutoff}:")
    for info in plan.delete:
        out.line(f"  {visible(info.target)}  (last active {when(info.last_activity)})")
    for target, why in plan.kept.items():
        out.line(f"  kept {visible(target)}: {why}", "dim")


@command("archive")
def archive_command(
    file: Annotated[str, typer.Argument(metavar="TARGET", help="A session file, or a "
                                        "postgresql://...#ID URL.")],
    output: Annotated[Path | None, typer.Option("-o", "--output", help="The archive to "
                                                "write (default: FILE.archive.zip beside the "
                                                "file; ID.archive.zip here for a URL).")]
    = None,
    store: StoreOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Fold a session, its quarantine file and its saved tool outputs into one compressed
    file beside it (FILE.archive.zip); `contextree unarchive` restores every byte."""
    if address_of(file).is_file:
        require_regular_file(file)
    if output is not None:
        check_output(str(output), force=False, inputs=[file])
    with leaving_indexes(file) as notes:  # a search index above it forgets the file now
        done = archive(file, store=_store(store), output=output)
    for note in notes:
        warn(note)
    if as_json:
        emit_json({"archive": str(done.path), "session_id": done.session_id,
                   "files": done.files, "spills_kept": list(done.spills_kept)})
        return
    out = Out()
    out.line(f"archived {visible(file)} and {len(done.files) - 1} more files into "
             f"{done.path}")
    if done.spills_kept:
        out.line(f"kept {len(done.spills_kept)} saved tool outputs in place: other sessions "
                 "name them", "dim")


@command("unarchive")
def unarchive_command(
    file: Annotated[str, typer.Argument(metavar="ARCHIVE", help=f"A *{ARCHIVE_SUFFIX} file.")],
    into: Annotated[str | None, typer.Option("--into", metavar="WHERE", help="Create the "
                                             "session in this catalog (a postgresql:// URL "
                                             "or a directory) instead of beside the archive; "
                                             "needed for a session archived from a "
                                             "database.")] = None,
    store: StoreOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Restore an archived session byte for byte: the session file beside the archive, its
    saved tool outputs back in the overflow store; then delete the archive."""
    require_regular_file(file, "archive")
    catalog = open_catalog_of(into)[0] if into is not None else None
    try:
        with leaving_indexes(file) as notes:  # a search index above it forgets the archive
            done = unarchive(file, store=_store(store), into=catalog)
    except InvalidArgument as e:
        raise CommandFailed(str(e)) from None
    for note in notes:
        warn(note)
    if as_json:
        emit_json({"session_id": done.session_id, "files": done.files})
        return
    Out().line(f"restored {visible(done.files['session.jsonl'])} and {len(done.files) - 1} "
               "more files")
