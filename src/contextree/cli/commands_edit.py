"""Commands that change sessions or files: ``fork``, ``label``, ``name``, ``checkout``,
``repair``, ``gc``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from .._overflow import OverflowStore
from .._session import Session
from ..storage._repair import repair
from .app import command
from .output import Out, UsageProblem, clip, emit_json, human_size, short_id
from .sessions import open_session, resolve_entry

FileArg = Annotated[str, typer.Argument(metavar="FILE", help="A session file.",
                                         show_default=False)]
EntryArg = Annotated[str, typer.Argument(metavar="ENTRY", help="Entry id, id prefix or label.",
                                         show_default=False)]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")]
MAX_LISTED = 20


@command("fork")
def fork_command(
    file: FileArg,
    at: Annotated[str, typer.Option("--at", help="Entry to fork at (id, prefix or label).",
                                    show_default=False)],
    output: Annotated[Path | None, typer.Option("-o", "--output", help="The new session "
                                                "file (default: <file>-fork-<entry>.jsonl).")]
    = None,
) -> None:
    """Copy the path from the root to an entry into a new session file."""
    with open_session(file, readonly=True) as session:
        entry_id = resolve_entry(session, at)
        target = output or _fork_path(Path(file), entry_id)
        with session.fork(target, at=entry_id) as new:
            count = len(new)
    Out().line(f"forked {file} at {entry_id} -> {target} ({count} entries)")


def _fork_path(file: Path, entry_id: str) -> Path:
    stem = file.name.removesuffix(".jsonl")
    return file.with_name(f"{stem}-fork-{entry_id[:8]}.jsonl")


@command("label")
def label_command(
    file: FileArg,
    entry: EntryArg,
    text: Annotated[str | None, typer.Argument(metavar="TEXT", help="The label (omit with "
                                               "--clear).")] = None,
    clear: Annotated[bool, typer.Option("--clear", help="Remove the entry's label.")] = False,
) -> None:
    """Set (or --clear) the label of an entry."""
    if (text is None) == (not clear):
        raise UsageProblem("give either TEXT or --clear, not both")
    with open_session(file) as session:
        entry_id = resolve_entry(session, entry)
        session.set_label(entry_id, None if clear else text)
    Out().line(f"{entry_id}: label {'cleared' if clear else repr(text)}")


@command("name")
def name_command(
    file: FileArg,
    text: Annotated[str, typer.Argument(metavar="TEXT", help="The session's display name.",
                                        show_default=False)],
) -> None:
    """Set the session's display name."""
    with open_session(file) as session:
        session.set_name(text)
    Out().line(f"{file}: named {text!r}")


@command("rm")
def rm_command(
    file: FileArg,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")]
    = False,
) -> None:
    """Delete a session (file or postgresql:// URL), its quarantine file and the tool outputs
    it spilled to the overflow store. Backups written by `repair` are kept."""
    if not yes and not typer.confirm(f"Delete {file} and its saved tool outputs?"):
        raise typer.Exit(1)
    spills = Session.delete(file)
    Out().line(f"deleted {file} and {spills} saved tool outputs")


@command("checkout")
def checkout_command(
    file: FileArg,
    entry: EntryArg,
    summary: Annotated[str | None, typer.Option("--summary", help="Also record a summary "
                                                "of the branch being left.")] = None,
) -> None:
    """Move the current leaf to an entry; the next message starts a branch there."""
    with open_session(file) as session:
        entry_id = resolve_entry(session, entry)
        previous = session.leaf_id
        summary_id = session.move_to(entry_id, summary)
        leaf = session.leaf_id
    note = f" (branch summary {summary_id})" if summary_id else ""
    Out().line(f"leaf {short_id(previous)} -> {leaf}{note}")


@command("repair")
def repair_command(
    file: FileArg,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Only report what would be "
                                          "quarantined.")] = False,
    force: Annotated[bool, typer.Option("--force", help="Also rewrite a file that does not "
                                        "look like a session (as an empty session; its lines "
                                        "go to the quarantine file).")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Make a damaged session file loadable: bad lines go to <file>.quarantine after a backup
    of the file is written; entries below a bad line are kept when it names its parent."""
    report = repair(file, dry_run=dry_run, force=force)
    if as_json:
        emit_json({"path": report.path, "dry_run": dry_run, "changed": report.changed,
                   "kept": report.kept, "backup": report.backup,
                   "quarantine_file": report.quarantine_file,
                   "quarantined": [{"line": n, "reason": r} for n, r in report.quarantined],
                   "fixed": [{"line": n, "change": c} for n, c in report.fixed]})
        return
    out = Out()
    if not report.changed:
        out.line(f"OK {file}: nothing to repair ({report.kept} lines)")
        return
    verb = "would quarantine" if dry_run else "quarantined"
    out.line(f"{file}: {verb} {len(report.quarantined)} lines, kept {report.kept}")
    for n, reason in report.quarantined[:MAX_LISTED]:
        out.line(clip(f"  line {n}: {reason}", out.width))
    if len(report.quarantined) > MAX_LISTED:
        out.line(f"  … and {len(report.quarantined) - MAX_LISTED} more (--json lists all)")
    for n, change in report.fixed[:MAX_LISTED]:
        out.line(clip(f"  line {n} kept: {change}", out.width))
    if len(report.fixed) > MAX_LISTED:
        out.line(f"  … and {len(report.fixed) - MAX_LISTED} more kept with a change")
    if dry_run:
        out.line("dry run: nothing was changed")
    else:
        out.fields([("backup", report.backup or "-"),
                    ("quarantine file", report.quarantine_file or "-")])


@command("gc")
def gc_command(
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Only report what would be "
                                          "deleted.")] = False,
    directory: Annotated[Path | None, typer.Option("--dir", help="The overflow store "
                                                   "(default: the per-user one).")] = None,
    max_age_days: Annotated[float | None, typer.Option("--max-age-days", help="Delete "
                                                       "saved outputs older than this.")]
    = None,
    max_total_mb: Annotated[float | None, typer.Option("--max-total-mb", help="Then delete "
                                                       "the oldest until the store fits.")]
    = None,
    as_json: JsonOpt = False,
) -> None:
    """Apply retention to the overflow store (full tool outputs that truncation saved)."""
    default = OverflowStore.default()
    store = OverflowStore(
        directory or default.directory,
        max_age=default.max_age if max_age_days is None else max_age_days * 86400,
        max_total_bytes=(default.max_total_bytes if max_total_mb is None
                         else int(max_total_mb * 2**20)),
    )
    report = store.gc(dry_run=dry_run)
    if as_json:
        emit_json({"directory": str(store.directory), "dry_run": dry_run,
                   "removed": report.removed, "bytes_freed": report.bytes_freed,
                   "kept": report.kept, "kept_bytes": report.kept_bytes,
                   "paths": list(report.paths)})
        return
    verb = "would remove" if dry_run else "removed"
    out = Out()
    out.line(f"{store.directory}: {verb} {report.removed} files "
             f"({human_size(report.bytes_freed)}), kept {report.kept} "
             f"({human_size(report.kept_bytes)})")
    if dry_run:
        for path in report.paths:
            out.line(f"  {path}")
