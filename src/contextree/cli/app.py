"""The ``contextree`` command: the Typer app, error handling and exit codes.

Exit codes: 0 success, 1 a problem was found or the command failed, 2 the command was called
wrongly (a bad option value, a directory where a file is wanted, an entry reference that
matches several entries...). Errors are one line, ``error: <message>``, on stderr, without a
traceback (set ``CONTEXTREE_DEBUG=1`` to get one). This module is the one place that maps
errors to exit codes and puts the library's Python advice into the command line's words.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import re
import sys
from collections.abc import Callable
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, TypeVar

import typer
from typer.core import TyperCommand

from .._files import TEMP_SUFFIX
from ..errors import ContextreeError, InvalidArgument
from .output import CommandFailed, UsageProblem, fail

F = TypeVar("F", bound=Callable[..., Any])

CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"]}
PROG = "contextree"


class Command(TyperCommand):
    """A command whose usage line reads ``contextree tree [OPTIONS] FILE``: arguments
    bare when required, in brackets when optional (Typer would print ``{FILE}``)."""

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        pieces = [self.options_metavar] if self.options_metavar else []
        for param in self.get_params(ctx):
            if param.param_type_name == "argument":
                name = param.metavar or (param.name or "").upper()
                pieces.append(name if param.required else f"[{name}]")
        return pieces


def _new_app(**kwargs: Any) -> typer.Typer:
    return typer.Typer(no_args_is_help=True, add_completion=False,
                       pretty_exceptions_enable=False, rich_markup_mode=None,
                       context_settings=CONTEXT_SETTINGS, **kwargs)


app = _new_app(name=PROG, help="Inspect, branch, repair and convert contextree agent "
               "sessions (works offline).")
db_app = _new_app(name="db", help="Set up a PostgreSQL database for contextree sessions.")
app.add_typer(db_app, name="db")


def package_version() -> str:
    """The installed contextree version (``unknown`` when run from a bare source tree)."""
    try:
        return version("contextree")
    except PackageNotFoundError:  # pragma: no cover - the package is always installed
        return "unknown"


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"contextree {package_version()}")
        raise typer.Exit(0)


@app.callback()
def _root(
    show_version: bool = typer.Option(False, "--version", help="Print the version and exit.",
                                      is_eager=True, callback=_print_version),
) -> None:
    """Inspect, branch, repair and convert contextree agent sessions (works offline)."""
    _prepare_streams()


def _prepare_streams() -> None:
    """Output that cannot be encoded (an ASCII terminal) is escaped instead of stopping the
    command; libraries' log lines do not add to the one-line error."""
    for stream in (sys.stdout, sys.stderr):
        encoding = (getattr(stream, "encoding", None) or "").lower().replace("-", "")
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None and encoding not in ("utf8", "utf_8"):
            with contextlib.suppress(ValueError, OSError):
                reconfigure(errors="backslashreplace")
    # psycopg's pool logs a failed connection by itself ("error connecting in 'pool-1'");
    # the command reports it in its own error line.
    logging.getLogger("psycopg").addHandler(logging.NullHandler())


def command(name: str, *, group: typer.Typer | None = None, cls: type[Command] = Command,
            **kwargs: Any) -> Callable[[F], F]:
    """Register a command whose user errors end in one ``error:`` line and an exit code
    (``cls``: a ``Command`` subclass, to add to its help)."""

    def register(fn: F) -> F:
        @functools.wraps(fn)
        def run(*args: Any, **kw: Any) -> Any:
            if os.environ.get("CONTEXTREE_DEBUG"):
                return fn(*args, **kw)
            try:
                return fn(*args, **kw)
            except (UsageProblem, InvalidArgument) as e:
                raise fail(cli_words(str(e)), 2) from None
            except CommandFailed as e:
                raise fail(cli_words(str(e)), 1) from None
            except ContextreeError as e:
                raise fail(cli_words(str(e)), 1) from None
            except BrokenPipeError:  # the reader went away (`contextree ls | head`)
                _silence_stdout()
                raise typer.Exit(141) from None
            except OSError as e:
                raise fail(cli_words(os_error(e)), 1) from None
            except (ImportError, ValueError) as e:
                raise fail(cli_words(str(e)), 1) from None
            except KeyboardInterrupt:
                raise fail("interrupted", 130) from None

        (group or app).command(name, cls=cls, **kwargs)(run)
        return fn

    return register


# -- the command line's words -------------------------------------------------------------
# The library's messages end with advice for Python callers. On the command line the same
# advice is given as a command. Each pattern is one phrase of the library, matched loosely
# (argument lists vary) so that rewording inside the parentheses does not bypass it.
_CLI_WORDS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"\bSession\.create\([^)]*\) or (`contextree import` makes one)"),
     r"\1 from another agent's session"),
    (re.compile(r"\bopen it read-only with Session\.open\([^)]*readonly=True[^)]*\)"),
     "use a command that only reads it (`contextree show`, `tree`, `stats`)"),
    (re.compile(r"\bSession\.open\([^)]*readonly=True[^)]*\)"),
     "a command that only reads it (`contextree show`, `tree`, `stats`)"),
    (re.compile(r"\brun (?:contextree\.storage\.postgres\.)?create_schema\([^)]*\)"),
     "run `contextree db init URL`"),
    (re.compile(r"\b(?:contextree\.storage\.postgres\.)?create_schema\([^)]*\)"),
     "`contextree db init URL`"),
    (re.compile(r"\ballow overwriting it \(overwrite=True; --force on the command line\)"),
     "pass --force to overwrite it"),
    (re.compile(r"\(overwrite=True[^)]*\)"), "(--force)"),
    (re.compile(r",? or a Storage instance such as PostgresStorage\.open\([^)]*\)"), ""),
    (re.compile(r"\bSession\.delete\([^)]*\)"), "`contextree rm`"),
    (re.compile(r",? or repair\([^)]*\) in Python"), ""),
    (re.compile(r"\brepair\(\)"), "`contextree repair`"),
    (re.compile(r"\bcreate it with PostgresStorage\.create \(or list them with "
                r"list_sessions\)"),
     "`contextree ls URL` lists them (`contextree import` and `contextree fork` put one "
     "there with -o URL)"),
)


# A writer's temp file (``_files.temp_path``: ``DIR/.NAME.RANDOM.tmp``): the user never named
# it, so a message about it names the directory instead.
_TEMP_NAME = re.compile(r"^\..+\.[0-9a-f]{6,}" + re.escape(TEMP_SUFFIX) + "$")
_TEMP_PATH = re.compile(r"(?:(?P<dir>[^\s:'\"]*)/)?\.[^/\s:'\"]+\.[0-9a-f]{6,}"
                        + re.escape(TEMP_SUFFIX) + r"\b")


def cli_words(message: str) -> str:
    """``message`` with the library's Python advice replaced by the matching command, and
    a temp file named by the directory it was being written in."""
    for pattern, replacement in _CLI_WORDS:
        message = pattern.sub(replacement, message)
    return _TEMP_PATH.sub(lambda m: m.group("dir") or ".", message)


def os_error(e: OSError) -> str:
    """An ``OSError`` as ``path: reason``; a failure on a writer's temp file names the
    directory it was being written in (the user never named the temp file)."""
    if e.strerror and e.filename:
        name = os.fsdecode(e.filename)
        if _TEMP_NAME.match(Path(name).name):
            return f"cannot write in {Path(name).parent}: {e.strerror}"
        return f"{name}: {e.strerror}"
    return str(e)


def _silence_stdout() -> None:
    """Point stdout at /dev/null so flushing it at exit does not fail again."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())


def main() -> None:
    """Entry point of the ``contextree`` console script."""
    app(prog_name=PROG)
