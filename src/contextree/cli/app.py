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
import importlib
import os
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

import typer
import typer.main
from typer.core import TyperCommand, TyperGroup

from .._files import TEMP_SUFFIX
from .._text import controls_visible
from ..errors import ContextreeError, InvalidArgument

F = TypeVar("F", bound=Callable[..., Any])

CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"]}
PROG = "contextree"


class Command(TyperCommand):
    """A command whose usage line reads ``contextree tree [OPTIONS] FILE``: arguments
    bare when required, in brackets when optional (Typer would print ``{FILE}``)."""

    def get_params(self, ctx: Any) -> list[Any]:
        return plain_values(super().get_params(ctx))

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        pieces = [self.options_metavar] if self.options_metavar else []
        for param in self.get_params(ctx):
            if param.param_type_name == "argument":
                name = param.metavar or (param.name or "").upper()
                pieces.append(name if param.required else f"[{name}]")
        return pieces


class Lazy(NamedTuple):
    """A command the command line offers before its module is imported: the module (in
    ``contextree.cli``) that registers it, and the first sentence of its help."""

    module: str
    summary: str


# Every command, in the order of --help. Its module is imported when the command runs or its
# own help is asked for; `contextree --help` and `--version` import none of them (the
# summaries are the commands' own first sentences: tests/test_startup.py compares them).
COMMANDS: dict[str, Lazy] = {
    "demo": Lazy("commands_demo", "Run a real agent loop offline (scripted model, real "
                 "tools): truncation, compaction, a branch and a label; then print the "
                 "tree, the stats and the model's context."),
    "ls": Lazy("commands_ls", "List the sessions under WHERE (a directory, a PostgreSQL "
               "database or another catalog), newest activity first."),
    "search": Lazy("commands_search", "Find the entries whose text matches QUERY in the "
                   "sessions under WHERE, newest first."),
    "index": Lazy("commands_search", "Build or refresh the search index of the sessions "
                  "under WHERE (a directory)."),
    "tree": Lazy("commands_read", "Print the entry tree: branch points, labels, compactions, "
                 "branch summaries, and the current leaf (<- leaf)."),
    "show": Lazy("commands_read", "Show the path from the root to an entry, or (--context) "
                 "what the model sees there."),
    "stats": Lazy("commands_read", "Messages, billed tokens and cost for the current branch "
                  "and the whole file."),
    "verify": Lazy("commands_read", "Check that a session file loads cleanly (read-only)."),
    "fork": Lazy("commands_edit", "Copy the path from the root to an entry into a new session "
                 "(its header links back to FILE by absolute path)."),
    "label": Lazy("commands_edit", "Set (or --clear) the label of an entry; a label names one "
                  "entry, and setting it on another moves it there."),
    "name": Lazy("commands_edit", "Set the session's display name (an empty TEXT clears it)."),
    "rm": Lazy("commands_edit", "Delete a session (file or postgresql:// URL), its quarantine "
               "file and the tool outputs it spilled: those its entries record, wherever "
               "they are, and its folder in the overflow store."),
    "checkout": Lazy("commands_edit", "Move the current leaf to an entry; the next message "
                     "starts a branch there."),
    "repair": Lazy("commands_edit", "Make a damaged session file (or flat message log) "
                   "loadable: bad lines (and entries that depend on them) go to "
                   "<file>.quarantine after a backup of the file is written."),
    "gc": Lazy("commands_edit", "Apply retention to the overflow store (full tool outputs "
               "that truncation saved)."),
    "du": Lazy("commands_retention", "Bytes each session takes (largest first): the session "
               "itself, its saved tool outputs, its sidecar files (quarantine, index, lock), "
               "and the catalog's search index; with totals."),
    "prune": Lazy("commands_retention", "Delete old sessions with the saved tool outputs only "
                  "they name; a saved output that a session that stays still names is kept, "
                  "and a session open for writing is skipped."),
    "archive": Lazy("commands_retention", "Fold a session, its quarantine file and its saved "
                    "tool outputs into one compressed file beside it (FILE.archive.zip); "
                    "`contextree unarchive` restores every byte."),
    "unarchive": Lazy("commands_retention", "Restore an archived session byte for byte: the "
                      "session file beside the archive, its saved tool outputs back in the "
                      "overflow store; then delete the archive."),
    "compact": Lazy("commands_compact", "Compact the current branch: clear old tool results, "
                    "drop old turns, summarize."),
    "replay": Lazy("commands_replay", "Send the request recorded at an assistant reply again "
                   "(its system prompt, tools and parameters) and write each answer as a new "
                   "branch labelled with the model; recorded tool results are served while "
                   "the calls match."),
    "import": Lazy("commands_interop", "Read another agent's session (or a provider message "
                   "list) into a new session."),
    "export": Lazy("commands_interop", "Write a session in another format."),
    "redact": Lazy("commands_redact", "Write a redacted copy of a session: every entry of "
                   "every branch, with the same ids and tree, each secret replaced by a "
                   "placeholder such as [REDACTED:aws-key:1]; the session itself is not "
                   "changed."),
    "view": Lazy("commands_view", "Show a session as one self-contained HTML page (the tree, "
                 "the messages, what the model saw at each entry, compaction receipts, "
                 "search, tokens and cost), redacted; or serve it on 127.0.0.1 with --serve."),
    "chat": Lazy("chat", "Chat with a model in this directory: streamed replies, tools that "
                 "ask first, the session tree underneath (/help inside lists the commands)."),
}
DB_COMMANDS: dict[str, Lazy] = {
    "init": Lazy("commands_db", "Create contextree's tables in the database, or upgrade "
                 "them; safe to run again and from several machines at once."),
}


class LazyGroup(TyperGroup):
    """A group whose commands are registered by modules imported on first use: listing the
    commands (``--help``) or running the group's own options (``--version``) imports none."""

    def get_params(self, ctx: Any) -> list[Any]:
        return plain_values(super().get_params(ctx))

    def make_context(self, *args: Any, **kwargs: Any) -> Any:
        with visible_usage_errors():
            return super().make_context(*args, **kwargs)

    def invoke(self, ctx: Any) -> Any:
        with visible_usage_errors():  # the commands' own arguments are parsed in here
            return super().invoke(ctx)

    def _lazy(self) -> tuple[typer.Typer, dict[str, Lazy]]:
        return _LAZY_GROUPS[self.name or PROG]

    def list_commands(self, ctx: Any) -> list[str]:
        table = self._lazy()[1]
        return [*table, *(name for name in super().list_commands(ctx) if name not in table)]

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        typer_app, table = self._lazy()
        if cmd_name not in self.commands and cmd_name in table:
            importlib.import_module(f"{__package__}.{table[cmd_name].module}")
            for info in typer_app.registered_commands:  # what the import registered
                name = info.name or typer.main.get_command_name(
                    getattr(info.callback, "__name__", ""))
                if name not in self.commands:
                    self.add_command(typer.main.get_command_from_info(
                        info, pretty_exceptions_short=typer_app.pretty_exceptions_short,
                        rich_markup_mode=typer_app.rich_markup_mode), name)
        return super().get_command(ctx, cmd_name)

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        """Click's list of commands, with the summary of each command not imported yet."""
        table = self._lazy()[1]
        rows = []
        for name in self.list_commands(ctx):
            cmd = self.commands.get(name) or TyperCommand(name, help=table[name].summary)
            if not cmd.hidden:
                rows.append((name, cmd))
        if rows:
            limit = formatter.width - 6 - max(len(name) for name, _ in rows)
            with formatter.section("Commands"):
                formatter.write_dl([(name, cmd.get_short_help_str(limit)) for name, cmd in rows])


@contextlib.contextmanager
def visible_usage_errors() -> Iterator[None]:
    """Click's usage errors quote what was typed (``Got unexpected extra argument(s)
    (...)``); Click escapes C0 and C1 controls in some of them, not bidirectional ones. Every
    control character of the message is made visible, as in the command's own errors."""
    try:
        yield
    except _click_error() as e:
        error: Any = e  # a ClickException: ``show`` prints its ``message``
        error.message = controls_visible(error.message)
        raise


def _click_error() -> type[Exception]:
    """The class of the errors Click shows as ``Error: ...`` (Typer's own copy of Click, or
    Click itself for a Typer that depends on it)."""
    try:
        from typer._click.exceptions import ClickException
    except ImportError:  # pragma: no cover - an older Typer
        from click.exceptions import ClickException  # type: ignore[assignment]
    return ClickException


def plain_values(params: list[Any]) -> list[Any]:
    """``params`` (a command's), their plain ``str`` and ``bool`` ones (and repeatable
    ``str`` options, ``list[str]``) set to take a value that already has their type as it
    is.

    Typer (0.2x) coerces every parameter value through a pydantic ``TypeAdapter``, built on
    first use (the help option's too): for a short command, importing pydantic and building
    the adapters takes longer than everything else (``contextree ls`` of an empty directory:
    more than twice as long). A command-line value for a ``str`` parameter is already a
    ``str``, and a flag's a ``bool``, a repeated option's a tuple of ``str`` (a list of them
    is what Typer's adapter returns): what Typer's adapter returns for them. Any other value
    (bytes from a test runner, a string from an environment variable for a flag) still goes
    through Typer's own coercion; a Typer without this machinery is left alone."""
    try:
        from typer._coercion import RuntimeParam, build_runtime_param
    except ImportError:  # pragma: no cover - another Typer: nothing to do
        return params

    class Plain(RuntimeParam):
        def _coerce_value(self, value: Any, param: Any, ctx: Any) -> Any:
            if type(value) is self.annotation:
                return value
            if (self.annotation == list[str] and type(value) in (tuple, list)
                    and all(type(v) is str for v in value)):
                return list(value)
            return build_runtime_param(param.type_descriptor)._coerce_value(
                value, param=param, ctx=ctx)

    for param in params:
        described = getattr(param, "type_descriptor", None)
        if (described is None or getattr(param, "_runtime_param", ()) is not None
                or described.annotation not in (str, bool, list[str])
                or described.parameter_info.parser
                or described.is_file or described.is_path or described.is_choice
                or param.multiple != (described.annotation == list[str]) or param.nargs != 1):
            continue
        param._runtime_param = Plain(parameter_info=described.parameter_info,
                                     annotation=described.annotation)
    return params


def _new_app(**kwargs: Any) -> typer.Typer:
    return typer.Typer(no_args_is_help=True, add_completion=False,
                       pretty_exceptions_enable=False, rich_markup_mode=None,
                       context_settings=CONTEXT_SETTINGS, cls=LazyGroup, **kwargs)


app = _new_app(name=PROG, help="Inspect, branch, repair and convert contextree agent "
               "sessions (works offline).")
db_app = _new_app(name="db", help="Set up a PostgreSQL database for contextree sessions.")
app.add_typer(db_app, name="db")
_LAZY_GROUPS = {PROG: (app, COMMANDS), "db": (db_app, DB_COMMANDS)}


def package_version() -> str:
    """The contextree version: the package's ``__version__``, which is the version in
    pyproject.toml (tests/test_startup.py checks; reading the installed metadata instead
    would import importlib.metadata, slower than the rest of ``--version``)."""
    from .. import __version__

    return __version__


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
    command (psycopg's log lines are kept out of the one-line error where psycopg is
    imported: ``contextree.storage.postgres._driver``)."""
    for stream in (sys.stdout, sys.stderr):
        encoding = (getattr(stream, "encoding", None) or "").lower().replace("-", "")
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None and encoding not in ("utf8", "utf_8"):
            with contextlib.suppress(ValueError, OSError):
                reconfigure(errors="backslashreplace")


def command(name: str, *, group: typer.Typer | None = None, cls: type[Command] = Command,
            **kwargs: Any) -> Callable[[F], F]:
    """Register a command whose user errors end in one ``error:`` line and an exit code
    (``cls``: a ``Command`` subclass, to add to its help)."""

    def register(fn: F) -> F:
        # Here, not at the top: the command line's own options (--version) need no output.
        from .output import CommandFailed, UsageProblem, fail

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
