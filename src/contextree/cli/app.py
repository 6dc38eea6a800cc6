"""The ``contextree`` command: the Typer app, error handling and exit codes.

Exit codes: 0 success, 1 a problem was found or the command failed, 2 the command was called
wrongly. Errors are one line, ``error: <message>``, on stderr, without a traceback (set
``CONTEXTREE_DEBUG=1`` to get one).
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import typer

from ..errors import ContextreeError
from ..formats._base import UnknownFormatError
from .output import UsageProblem, fail

F = TypeVar("F", bound=Callable[..., Any])

app = typer.Typer(
    name="contextree",
    help="Inspect, branch, repair and convert contextree agent sessions (works offline).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


def command(name: str, **kwargs: Any) -> Callable[[F], F]:
    """Register a command whose user errors end in one ``error:`` line and an exit code."""

    def register(fn: F) -> F:
        @functools.wraps(fn)
        def run(*args: Any, **kw: Any) -> Any:
            if os.environ.get("CONTEXTREE_DEBUG"):
                return fn(*args, **kw)
            try:
                return fn(*args, **kw)
            except (UsageProblem, UnknownFormatError) as e:
                raise fail(str(e), 2) from None
            except ContextreeError as e:
                raise fail(str(e), 1) from None
            except BrokenPipeError:  # the reader went away (`contextree ls | head`)
                _silence_stdout()
                raise typer.Exit(141) from None
            except OSError as e:
                raise fail(_os_error(e), 1) from None
            except (ImportError, ValueError) as e:
                raise fail(str(e), 1) from None
            except KeyboardInterrupt:
                raise fail("interrupted", 130) from None

        app.command(name, **kwargs)(run)
        return fn

    return register


def _silence_stdout() -> None:
    """Point stdout at /dev/null so flushing it at exit does not fail again."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())


def _os_error(e: OSError) -> str:
    if e.strerror and e.filename:
        return f"{e.filename}: {e.strerror}"
    return str(e)


def main() -> None:
    """Entry point of the ``contextree`` console script."""
    app()
