"""``replay``: send the request recorded at an assistant reply again and compare.

The model is named with ``--model`` and ``--base-url`` as in every command that takes one
(``contextree.cli.model_options``); without ``--model`` the recorded model is called, its
provider configured from the environment (``--base-url`` applies to it).
"""

from __future__ import annotations

from typing import Annotated

import typer

from ..runtime._replay import ReplayLane, ReplayReport, replay, samples_problem
from .app import command
from .commands_compact import FileArg
from .model_options import BaseUrlOpt, ModelOpt, make_model
from .output import Out, UsageProblem, emit_json, short_id
from .sessions import open_session, resolve_entry


@command("replay")
def replay_command(
    file: FileArg,
    at: Annotated[str, typer.Option("--at", help="The assistant reply to replay: an entry "
                                    "id, id prefix or label.", show_default=False)],
    model: ModelOpt = None,
    base_url: BaseUrlOpt = None,
    n: Annotated[int, typer.Option("--n", help="Samples per model (a model other than the "
                                   "recorded one also gets as many baseline samples on the "
                                   "recorded model).")] = 1,
    fork: Annotated[str | None, typer.Option("--fork", metavar="PATH", show_default=False,
                                             help="Write the branches into a fork of the "
                                             "session at PATH instead of FILE.")] = None,
    no_baseline: Annotated[bool, typer.Option("--no-baseline", help="With --model: run no "
                                              "baseline lanes on the recorded model (for one "
                                              "that cannot be called).")] = False,
    no_serve: Annotated[bool, typer.Option("--no-serve-tools", help="Stop at the first tool "
                                           "call instead of serving the recorded result.")]
    = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")]
    = False,
) -> None:
    """Send the request recorded at an assistant reply again (its system prompt, tools and
    parameters) and write each answer as a new branch labelled with the model; recorded
    tool results are served while the calls match. Prints how each branch compares with
    the recorded one."""
    if problem := samples_problem(n):  # before a model is made or the session opened
        raise UsageProblem(f"--n {problem}")
    chosen = make_model(model, base_url)
    with open_session(file) as session:
        entry = resolve_entry(session, at)
        report = replay(session, entry, chosen, n=n, serve_tools=not no_serve,
                        base_url=base_url, fork=fork,
                        baseline=False if no_baseline else None)
    if as_json:
        emit_json(report.to_dict())
        return
    _print(Out(), report)


def _print(out: Out, report: ReplayReport) -> None:
    out.fields([
        ("replayed", f"{report.at} (from {short_id(report.from_id)})"),
        ("session", report.location),
        ("recorded", f"{report.recorded_model}: {_calls(report.recorded_tool_calls)}"
                     f"{_final(report.recorded_final_text)}"),
    ])
    out.line()
    out.table(["branch", "model", "tool calls", "same calls", "same text", "tokens in/out",
               "cost"], [_row(lane) for lane in report.lanes], right=(5, 6))
    for lane in report.lanes:
        if lane.diverged_at is not None:
            out.line(f"{lane.label}: diverged at step {lane.diverged_at} (a call the "
                     "recording has no result for); the branch stops there", "dim")


def _row(lane: ReplayLane) -> list[str]:
    d = lane.to_dict()
    cost = "unknown" if lane.cost is None else f"${lane.cost:.4f}"
    return [short_id(lane.tip_id), lane.model + (" (baseline)" if lane.baseline else ""),
            _calls(lane.tool_calls), _yes(lane.same_tool_calls), _yes(lane.same_final_text),
            f"{d['input_tokens']}/{d['output_tokens']}", cost]


def _yes(value: bool) -> str:
    return "yes" if value else "no"


def _calls(calls: list[list[object]]) -> str:
    return ", ".join(str(name) for name, _ in calls) or "(none)"


def _final(text: str | None) -> str:
    return "" if text is None else f"; final text {text.strip()[:60]!r}"
