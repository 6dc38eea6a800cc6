"""``contextree demo``: the offline agent run (see ``contextree.cli.demo``)."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from .app import command
from .output import CommandFailed, emit_json


@command("demo")
def demo(
    directory: Annotated[
        Path | None,
        typer.Option("--dir", help="Run in this new or empty directory and keep it (default: "
                     "a temporary directory, removed at the end); its parent must exist."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the facts of the run as JSON "
                                          "instead of the run itself.")] = False,
) -> None:
    """Run a real agent loop offline (scripted model, real tools): truncation, compaction,
    a branch and a label; then print the tree, the stats and the model's context."""
    from .demo import DemoDirectoryTaken, run_demo

    console = Console(file=io.StringIO()) if as_json else None
    try:
        facts = run_demo(directory, console=console)
    except DemoDirectoryTaken as e:
        raise CommandFailed(str(e)) from None
    if as_json:
        emit_json(facts)
