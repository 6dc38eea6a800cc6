"""``compact``: run the compaction ladder on a session file, offline or with a model.

Without a model the last rung is the offline digest. A model is named with ``--model`` and
``--base-url`` (or ``$CONTEXTREE_MODEL`` and ``$CONTEXTREE_BASE_URL``), as in every command
that takes one (``contextree.cli.model_options``).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from typing import Annotated

import typer
from rich.console import Console

from ..compaction import CompactionPolicy, CompactionResult, default_ladder
from ..tokens import EstimateCounter
from .app import command
from .model_options import BaseUrlOpt, ModelOpt, make_model
from .output import Out, UsageProblem, emit_json, short_id, stderr_is_terminal
from .render import receipt_lines
from .sessions import open_session

FileArg = Annotated[str, typer.Argument(metavar="FILE", help="A session file (or a "
                                        "postgresql://...#SESSION_ID URL).",
                                        show_default=False)]


@command("compact")
def compact_command(
    file: FileArg,
    window: Annotated[int, typer.Option("--window", help="The model's context window in "
                                        "tokens.")] = 200_000,
    compact_at: Annotated[float, typer.Option("--compact-at", help="Compact when the "
                                              "context fills this fraction of the window.")]
    = 0.7,
    compact_to: Annotated[float, typer.Option("--compact-to", help="Compact down to this "
                                              "fraction of the window.")] = 0.4,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Show each stage's before and "
                                          "after; write nothing.")] = False,
    force: Annotated[bool, typer.Option("--force", help="Compact even when under "
                                        "--compact-at (and, when already under the target, "
                                        "aim at --compact-to / --compact-at of the context's "
                                        "size, as the report says).")] = False,
    model: ModelOpt = None,
    base_url: BaseUrlOpt = None,
    native: Annotated[bool, typer.Option("--native", help="Let the model's provider compact "
                                         "first (Anthropic's server-side compaction, "
                                         "responses:MODEL's /responses/compact); the other "
                                         "rungs stand in when it refuses.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")]
    = False,
) -> None:
    """Compact the current branch: clear old tool results, drop old turns, summarize. The
    history stays in the file; one compaction entry changes what the model sees. The
    summary is written by --model, else by the offline digest."""
    check_policy(window, compact_at, compact_to)
    summarizer = make_model(model, base_url)
    if native and summarizer is None:
        raise UsageProblem("--native needs the model whose provider compacts: --model "
                           "anthropic:NAME or responses:NAME (with --base-url for a server "
                           "of your own)")
    ladder = default_ladder(summarizer, native=True) if native else None
    policy = CompactionPolicy(window, compact_at, compact_to)
    with open_session(file, readonly=dry_run) as session, _busy("compacting"):
        # The one count (as `show --context` and the runtime trigger count): below the
        # trigger, nothing is due unless forced.
        tokens = session.build_context().measure(EstimateCounter()).tokens
        if tokens < policy.trigger and not force:
            result = CompactionResult(tokens, tokens, policy.target,
                                      reason=f"under the trigger of {policy.trigger} tokens "
                                      f"(--compact-at {compact_at:g} of the window)")
        else:
            result = session.compact(window, compact_at=compact_at, compact_to=compact_to,
                                     model=summarizer, ladder=ladder, dry_run=dry_run,
                                     force=force)
    if as_json:
        emit_json({**result.payload(), "dry_run": dry_run, "reason": result.reason,
                   "reached_target": result.reached_target})
        return
    _report(Out(), result, dry_run, window)


def check_policy(window: int, compact_at: float, compact_to: float) -> None:
    """The policy options in the command line's words (exit 2 when they are wrong)."""
    if window <= 0:
        raise UsageProblem(f"--window takes the model's context window in tokens (more than "
                           f"0), got {window}")
    for option, value in (("--compact-at", compact_at), ("--compact-to", compact_to)):
        if not math.isfinite(value) or not 0 < value <= 1:
            raise UsageProblem(f"{option} takes a fraction of the window (more than 0, at most "
                               f"1), got {value}")
    if compact_to >= compact_at:
        raise UsageProblem(f"--compact-to ({compact_to}) must be below --compact-at "
                           f"({compact_at}): compaction goes down to a smaller fraction than "
                           "the one that triggers it")


@contextlib.contextmanager
def _busy(what: str) -> Iterator[None]:
    """A spinner on stderr while a model call may take a while (terminal only)."""
    if not stderr_is_terminal():
        yield
        return
    with Console(stderr=True).status(what):
        yield


def _report(out: Out, result: CompactionResult, dry_run: bool, window: int) -> None:
    out.line(f"context: {result.tokens_before} tokens; target {result.target} "
             f"(window {window})")
    if result.note:
        out.line(result.note)
    if result.stages:
        out.table(["stage", "before", "after", "applied", "note"],
                  [[s.name, str(s.tokens_before), str(s.tokens_after),
                    "yes" if s.applied else "no", s.note] for s in result.stages],
                  right=(1, 2))
    if result.entry is None:
        due = result.reason == "already under the target" or result.reason.startswith(
            "under the trigger")
        out.line(f"nothing to do: {result.reason or 'no stage could make it smaller'}"
                 + (" (--force compacts anyway)" if due else ""))
        return
    out.line(f"{result.tokens_before} -> {result.tokens_after} tokens: {_counts(result)}")
    if not result.reached_target:
        out.line(f"missed the target of {result.target} tokens: {result.reason}")
    for text in receipt_lines(result.receipt):
        out.line(text)
    if dry_run:
        out.line("dry run: nothing was written")
    else:
        out.line(f"wrote compaction entry {short_id(result.entry_id)}")


def _counts(result: CompactionResult) -> str:
    """What left the view and what was cleared in it, in agreement with the stage table:
    tool results cleared by an early stage in turns a later stage dropped count as dropped."""
    dropped, summarized, cleared = (len(result.dropped), len(result.summarized),
                                    len(result.cleared))
    parts = [f"{dropped} entr{'y' if dropped == 1 else 'ies'} dropped from the view "
             f"({summarized} summarized)",
             f"{cleared} tool result{'' if cleared == 1 else 's'} cleared in what is kept"]
    applied = result.applied
    later = " and ".join(applied[applied.index("tool_results") + 1:]
                         if "tool_results" in applied else [])
    if dropped and later:
        parts[-1] += (f" (results cleared by tool_results in entries that {later} then "
                      "dropped are counted as dropped)")
    return ", ".join(parts)
