"""The redaction options every command that lets content out shares (``--no-redact``,
``--redact-pattern``), and what they print on stderr.

Redaction is on by default (see docs/redaction.md). ``--no-redact`` (or ``--raw``) turns it
off, and the command then says so on stderr, ``not redacted: ...``, so that a copy pasted
from a terminal log still shows that it holds the session's secrets. What was redacted is
counted on stderr too, so stdout (``-o -``) carries the output alone.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from .output import UsageProblem, one_line

if TYPE_CHECKING:  # imported when a redactor is made: `ls` of no session needs none
    from ..redaction import Redactor

__all__ = ["PatternsOpt", "RedactOpt", "found_line", "make_redactor", "say_not_redacted"]

RedactOpt = Annotated[bool, typer.Option(
    "--redact/--no-redact", " /--raw",
    help="Replace secrets (API keys, tokens, passwords, private keys...) with placeholders "
         "such as [REDACTED:aws-key:1] (the default); --no-redact (or --raw) writes them "
         "as stored, and says so on stderr.")]
PatternsOpt = Annotated[list[str] | None, typer.Option(
    "--redact-pattern", metavar="REGEX",
    help="Also redact what this regular expression matches (kind `custom`; a group named "
         "`secret` limits it to that group). Repeatable.", show_default=False)]


def make_redactor(redact: bool, patterns: list[str] | None, what: str) -> Redactor:
    """The redactor the options ask for; ``what`` names the output in the stderr note.

    An invalid pattern is an ``InvalidArgument`` (exit code 2); patterns with
    ``--no-redact`` contradict each other, also exit code 2.
    """
    from ..redaction import Redactor

    if not redact:
        if patterns:
            raise UsageProblem("--redact-pattern and --no-redact contradict each other; "
                               "drop one of them")
        say_not_redacted(what)
        return Redactor(enabled=False)
    return Redactor(patterns or ())


def say_not_redacted(what: str) -> None:
    """``not redacted: <what> ...`` on stderr."""
    typer.echo(one_line(f"not redacted: {what} holds the session's content as stored, "
                        "secrets included (--no-redact)"), err=True)


def found_line(redactor: Redactor) -> str:
    """``redacted 3 secrets (aws-key 1, github-token 2)``, or that none was found."""
    found = redactor.found
    total = sum(found.values())
    if not redactor.enabled:
        return "not redacted"
    if not total:
        return "redacted: no secrets found"
    kinds = ", ".join(f"{kind} {n}" for kind, n in sorted(found.items()))
    return f"redacted {total} secret{'s' if total != 1 else ''} ({kinds})"
