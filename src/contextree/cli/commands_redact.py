"""``redact``: write a redacted copy of a whole session (every entry of every branch).

The copy has the same header, ids, parents, labels and leaf as the session, so it opens,
builds context and branches the same, with each secret replaced by a placeholder. The
stored session is only read, and the copy never replaces a file: it goes to a new path.
"""

from __future__ import annotations

import os
from typing import Annotated

import typer

from ..errors import SessionExists
from ..formats import redacted_copy
from ..storage import create_storage
from .app import command
from .output import Out, UsageProblem, emit_json
from .redacting import PatternsOpt, found_line, make_redactor
from .sessions import STDOUT, address_of, check_output, open_session
from .writing import to_stdout

FileArg = Annotated[str, typer.Argument(metavar="FILE", help="A session file (or a "
                                        "postgresql://...#SESSION_ID URL).", show_default=False)]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")]


@command("redact")
def redact_command(
    file: FileArg,
    output: Annotated[str, typer.Option("-o", "--output", help="The redacted copy: a new "
                                        "file (never an existing one), a postgresql:// URL, "
                                        "or - for stdout.", show_default=False)],
    patterns: PatternsOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Write a redacted copy of a session: every entry of every branch, with the same ids and
    tree, each secret replaced by a placeholder such as [REDACTED:aws-key:1]; the session
    itself is not changed."""
    if as_json and output == STDOUT:
        raise UsageProblem("--json and -o - both write to stdout; use one of them")
    redactor = make_redactor(True, patterns, "the copy")
    with open_session(file, readonly=True) as stored:
        if address_of(output).is_file and os.path.lexists(output):
            raise SessionExists("a file is already there; redact never replaces a file: "
                                "choose a new -o path", path=output)
        check_output(output, force=False, inputs=[file])
        copy = redacted_copy(stored, redactor)
        entries = list(copy.entries())
        if output == STDOUT:
            with to_stdout("redacted.jsonl") as tmp:
                create_storage(tmp, copy.header, entries).close()
            if redactor.found:
                typer.echo(found_line(redactor), err=True)
            return
        create_storage(output, copy.header, entries).close()
    if as_json:
        emit_json({"source": file, "path": output, "entries": len(entries),
                   "found": redactor.found})
        return
    out = Out()
    out.line(f"redacted {file} -> {output} ({len(entries)} entries); {found_line(redactor)}")
    for kind, n in sorted(redactor.found.items()):
        out.line(f"  {kind:24s} {n}")
