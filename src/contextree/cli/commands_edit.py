"""Commands that change sessions or files: ``fork``, ``label``, ``name``, ``checkout``, ``rm``,
``repair``, ``gc`` (each with ``--json``)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Any

import typer

from .._overflow import OverflowStore
from .._session import Session
from .._spills import delete_session_and_spills
from .._text import without_passwords
from ..runtime import is_flat_log, repair_log
from ..storage._repair import repair
from ..storage._search_index import leaving_indexes
from .app import command
from .output import (
    CommandFailed,
    Out,
    UsageProblem,
    clip,
    emit_json,
    human_size,
    short_id,
    warn,
)
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

FileArg = Annotated[str, typer.Argument(metavar="FILE", help="A session file (or a "
                                        "postgresql://...#SESSION_ID URL).",
                                        show_default=False)]
EntryArg = Annotated[str, typer.Argument(metavar="ENTRY", help="Entry id, id prefix or label.",
                                         show_default=False)]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")]
MAX_LISTED = 20


def no_json_with_stdout(as_json: bool, output: str | None) -> None:
    """``--json`` and ``-o -`` would both write to stdout."""
    if as_json and output == STDOUT:
        raise UsageProblem("--json and -o - both write to stdout; use one of them")


@command("fork")
def fork_command(
    file: FileArg,
    at: Annotated[str, typer.Option("--at", help="Entry to fork at (id, prefix or label).",
                                    show_default=False)],
    output: Annotated[str | None, typer.Option("-o", "--output", help="The new session: a "
                                               "file (default: <file>-fork-<entry>.jsonl), "
                                               "a postgresql:// URL, or - for stdout.")]
    = None,
    force: Annotated[bool, typer.Option("--force", help="Replace an existing file at "
                                        "OUTPUT.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Copy the path from the root to an entry into a new session (its header links back
    to FILE by absolute path)."""
    no_json_with_stdout(as_json, output)
    with open_session(file, readonly=True) as session:
        entry_id = resolve_entry(session, at)
        if output is None and not address_of(file).is_file:
            raise UsageProblem("say where the fork goes with -o FILE (or -o postgresql://...)")
        target = output or str(_fork_path(Path(file), entry_id))
        check_output(target, force=force, inputs=[file])
        if target == STDOUT:
            with to_stdout("fork.jsonl") as tmp, session.fork(tmp, at=entry_id):
                pass
            return
        if address_of(target).is_file:
            with replacing(Path(target)) as path, session.fork(path, at=entry_id) as new:
                info = _forked(new, target)
        else:
            with session.fork(target, at=entry_id) as new:
                info = _forked(new, new.location)
    info.update(source=file, forked_at=entry_id)
    if as_json:
        emit_json(info)
        return
    Out().line(f"forked {file} at {entry_id} -> {info['path']} ({info['entries']} entries)")


def _forked(new: Session, where: str) -> dict[str, Any]:
    return {"path": where, "session_id": new.id, "entries": len(new), "leaf_id": new.leaf_id,
            "parent_session": new.header.parent_session}


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
    as_json: JsonOpt = False,
) -> None:
    """Set (or --clear) the label of an entry; a label names one entry, and setting it on
    another moves it there. When nothing would change (the entry already has that label, or
    no label to clear) nothing is written: it says so and exits 0."""
    if text is None and not clear:
        raise UsageProblem("give the label TEXT to set, or --clear to remove the entry's label")
    if text is not None and clear:
        raise UsageProblem("give the label TEXT or --clear, not both")
    if text is not None and not text.strip():
        raise UsageProblem("a label needs some text (--clear removes one)")
    with open_session(file) as session:
        entry_id = resolve_entry(session, entry)
        label_entry = session.set_label(entry_id, None if clear else text)
    if as_json:
        emit_json({"path": file, "entry_id": entry_id, "label": None if clear else text,
                   "label_entry_id": label_entry, "changed": label_entry is not None})
        return
    if label_entry is None:
        Out().line(f"{entry_id}: " + ("has no label" if clear else f"already labelled {text!r}")
                   + "; nothing changed")
        return
    Out().line(f"{entry_id}: label {'cleared' if clear else repr(text)}")


@command("name")
def name_command(
    file: FileArg,
    text: Annotated[str, typer.Argument(metavar="TEXT", help="The session's display name "
                                        "(\"\" clears it).", show_default=False)],
    as_json: JsonOpt = False,
) -> None:
    """Set the session's display name (an empty TEXT clears it)."""
    name = text if text.strip() else None
    with open_session(file) as session:
        entry_id = session.set_name(name)
    if as_json:
        emit_json({"path": file, "name": name, "entry_id": entry_id})
        return
    Out().line(f"{file}: named {text!r}" if name is not None else f"{file}: name cleared")


@command("rm")
def rm_command(
    file: FileArg,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")]
    = False,
    directory: Annotated[Path | None, typer.Option("--dir", help="The overflow store the "
                                                   "session spilled to (default: the "
                                                   "per-user one; the stores its entries "
                                                   "name are cleaned as well).")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Delete a session (file or postgresql:// URL), its quarantine file and the tool outputs
    it spilled: those its entries record, wherever they are, and its folder in the overflow
    store. Backups written by `repair` are kept."""
    _require_store(directory)
    if directory is not None and not directory.is_dir():
        raise CommandFailed(f"{directory}: no such directory (--dir names an overflow store)")
    if address_of(file).is_file:
        require_regular_file(file)
    if not yes and not typer.confirm(f"Delete {clip(without_passwords(file), 200)} and its "
                                     "saved tool outputs?",
                                     err=True):
        raise typer.Exit(1)
    store = OverflowStore(directory) if directory is not None else OverflowStore.default()
    with leaving_indexes(file) as notes:  # a search index above it forgets it now
        report = delete_session_and_spills(file, store)
    for note in notes:
        warn(note)
    if as_json:
        emit_json({"path": file, "session_id": report.session_id, "deleted": True,
                   "spills_removed": len(report.removed), "spill_paths": report.removed,
                   "spills_kept": report.kept_for})
        return
    if report.kept_for is not None:
        Out().line(f"deleted {file}; its saved tool outputs were kept: {report.kept_for}")
        return
    Out().line(f"deleted {file} and {len(report.removed)} saved tool outputs")


@command("checkout")
def checkout_command(
    file: FileArg,
    entry: EntryArg,
    summary: Annotated[str | None, typer.Option("--summary", help="Also record a summary "
                                                "of the branch being left.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Move the current leaf to an entry; the next message starts a branch there. When the
    leaf is already there nothing is written (no --summary either): it says so and exits 0."""
    with open_session(file) as session:
        entry_id = resolve_entry(session, entry)
        previous = session.leaf_id
        before = len(session)
        summary_id = session.move_to(entry_id, summary)
        leaf = session.leaf_id
        written = None
        if len(session) > before:
            written = summary_id or _last_entry_id(session)
    if as_json:
        emit_json({"path": file, "previous_leaf_id": previous, "leaf_id": leaf,
                   "target_id": entry_id, "summary_entry_id": summary_id,
                   "entry_id": written, "changed": written is not None})
        return
    if written is None:
        note = " (no branch is left, so no summary is recorded)" if summary else ""
        Out().line(f"the leaf is already {leaf}; nothing changed{note}")
        return
    note = f" (branch summary {summary_id})" if summary_id else ""
    Out().line(f"leaf {short_id(previous)} -> {leaf}{note}")


def _last_entry_id(session: Session) -> str | None:
    last = None
    for e in session.entries():
        last = e.id
    return last


@command("repair")
def repair_command(
    file: FileArg,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Only report what would be "
                                          "quarantined.")] = False,
    force: Annotated[bool, typer.Option("--force", help="Repair even a file in which no "
                                        "line can be kept (it may not be a session).")]
    = False,
    as_json: JsonOpt = False,
) -> None:
    """Make a damaged session file (or flat message log) loadable: bad lines (and entries
    that depend on them) go to <file>.quarantine after a backup of the file is written."""
    if not address_of(file).is_file:
        raise UsageProblem(f"`repair` works on session files; {file} is a database session, "
                           "which checks every entry as it is stored (`contextree verify "
                           "URL` confirms it loads)")
    require_regular_file(file)
    if is_flat_log(Path(file)):
        _repair_flat_log(file, dry_run, force, as_json)
        return
    report = repair(file, dry_run=dry_run, force=force)
    kept = report.kept - 1  # entries, as `verify` counts them: the header is not one
    if as_json:
        emit_json({"path": report.path, "dry_run": dry_run, "changed": report.changed,
                   "kept": kept, "backup": report.backup,
                   "quarantine_file": report.quarantine_file,
                   "quarantined": [{"line": n, "reason": r} for n, r in report.quarantined],
                   "fixed": [{"line": n, "change": c} for n, c in report.fixed]})
        return
    lines = [f"  line {n}: {reason}" for n, reason in report.quarantined[:MAX_LISTED]]
    if len(report.quarantined) > MAX_LISTED:
        lines.append(f"  … and {len(report.quarantined) - MAX_LISTED} more (--json lists all)")
    lines += [f"  line {n} kept: {change}" for n, change in report.fixed[:MAX_LISTED]]
    if len(report.fixed) > MAX_LISTED:
        lines.append(f"  … and {len(report.fixed) - MAX_LISTED} more kept with a change")
    _print_repair(file, changed=report.changed, dry_run=dry_run,
                  quarantined=len(report.quarantined), kept=_count(kept, "entry", "entries"),
                  header=True, lines=lines, backup=report.backup,
                  quarantine_file=report.quarantine_file)


def _print_repair(file: str, *, changed: bool, dry_run: bool, quarantined: int, kept: str,
                  header: bool, lines: list[str], backup: str | None,
                  quarantine_file: str | None) -> None:
    """What ``repair`` did, for people, the same for a session file and a flat log: how
    many lines went to quarantine and what was kept, ``lines`` (one a line, clipped to the
    terminal), then the backup and the quarantine file (or that a dry run changed nothing)."""
    out = Out()
    if not changed:
        out.line(f"OK {file}: nothing to repair ({kept})")
        return
    verb = "would quarantine" if dry_run else "quarantined"
    out.line(f"{file}: {verb} {_count(quarantined, 'line')}, kept {kept}"
             + (" and the header" if header else ""))
    for line in lines:
        out.line(clip(line, out.width))
    if dry_run:
        out.line("dry run: nothing was changed")
    else:
        out.fields([("backup", backup or "-"), ("quarantine file", quarantine_file or "-")])


def _count(n: int, one: str, many: str | None = None) -> str:
    return f"{n} {one if n == 1 else many or one + 's'}"


def _repair_flat_log(file: str, dry_run: bool, force: bool, as_json: bool) -> None:
    report = repair_log(Path(file), dry_run=dry_run, force=force)
    if as_json:
        emit_json({"path": file, "kind": "flat_log", "dry_run": dry_run,
                   "changed": bool(report.quarantined) and not dry_run, "kept": report.kept,
                   "quarantined": report.quarantined, "backup": report.backup})
        return
    _print_repair(file, changed=bool(report.quarantined), dry_run=dry_run,
                  quarantined=report.quarantined, kept=_count(report.kept, "message"),
                  header=False, lines=[], backup=report.backup,
                  quarantine_file=f"{file}.quarantine")


def _require_store(directory: Path | None) -> None:
    """``--dir`` names a directory: a file, a pipe or a device there is a usage error."""
    if directory is not None:
        require_directory(directory, "--dir names an overflow store")


def _non_negative(value: float | None, option: str, unit: str) -> None:
    if value is not None and (not math.isfinite(value) or value < 0):
        raise UsageProblem(f"{option} takes a number of {unit} (0 or more), got {value}")


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
    _non_negative(max_age_days, "--max-age-days", "days")
    _non_negative(max_total_mb, "--max-total-mb", "megabytes")
    _require_store(directory)
    if directory is not None and not directory.is_dir():
        raise CommandFailed(f"{directory}: no such directory (--dir names an overflow store)")
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
