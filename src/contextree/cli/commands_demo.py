"""``contextree demo``: the offline agent run (see ``contextree.cli.demo``)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from .app import command


@command("demo")
def demo(
    directory: Annotated[
        Path | None,
        typer.Option("--dir", help="Run in this directory (kept) instead of a temporary one."),
    ] = None,
) -> None:
    """Run a real agent loop offline (scripted model, real tools): truncation, compaction,
    a branch and a label; then print the tree, the stats and the model's context."""
    from .demo import run_demo

    if directory is not None:
        directory.mkdir(parents=True, exist_ok=True)
    run_demo(directory)
