"""Output for the command line: rich on a terminal, stable plain text when piped, JSON on request.

Everything a command prints goes through ``Out``: on a terminal it styles lines and draws
tables with rich; when stdout is a pipe or a file it writes plain lines (no colour, no
wrapping, columns separated by spaces), so scripts and tests see the same text every time.
Either way every piece of text is passed through ``terminal.visible`` first, so nothing a
session holds can send an escape sequence to the terminal; ``emit_json`` and ``emit_bytes``
write data exactly (``emit_bytes`` on a terminal: what could act on it made visible).
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import sys
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import orjson
import typer

from .._text import without_passwords
from .terminal import fit, surrogates_escaped, visible, width_of

if TYPE_CHECKING:  # for annotations only: rich and the formats load on use
    from rich.console import Console

    from ..formats import Progress as ProgressFn

PLAIN_WIDTH = 100  # columns a line may take when the output is piped
PROGRESS_MIN_BYTES = 8 << 20


class UsageProblem(Exception):
    """A mistake in how the command was called (exit code 2), said in one line."""


class CommandFailed(Exception):
    """The command could not do its job (exit code 1), said in one line."""


def _surely_plain() -> bool:
    """True when rich could not see a terminal either: stdout is no tty (or cannot say) and
    neither ``TTY_COMPATIBLE`` nor ``FORCE_COLOR`` says otherwise (the checks rich makes first).
    A piped command so decides without importing ``rich.console``, the largest import a piped
    ``ls`` would make; every other case is left to rich."""
    if "TTY_COMPATIBLE" in os.environ or "FORCE_COLOR" in os.environ:
        return False
    isatty = getattr(sys.stdout, "isatty", None)
    try:
        return isatty is None or not isatty()
    except ValueError:  # a closed stream, which rich takes for no terminal as well
        return True


class Out:
    """Where a command writes: styled lines and tables on a terminal, plain ones otherwise.

    The rich console is built on first use, so plain (piped) output never imports rich.
    """

    def __init__(self) -> None:
        self.rich = not _surely_plain() and self.console.is_terminal

    @functools.cached_property
    def console(self) -> Console:
        """The rich console writing to stdout (built, and rich imported, when first asked)."""
        from rich.console import Console

        return Console(highlight=False, soft_wrap=True)

    @property
    def width(self) -> int:
        """Characters available for one line."""
        return self.console.width if self.rich else PLAIN_WIDTH

    def line(self, text: str = "", style: str | None = None) -> None:
        """One line; tabs are kept, every other control character is made visible."""
        text = visible(text, tabs=True)
        if self.rich:
            from rich.text import Text

            self.console.print(Text(text, style=style or ""))
        else:
            typer.echo(text)

    def styled(self, parts: Sequence[tuple[str, str | None]]) -> None:
        """One line made of differently styled pieces (each made visible)."""
        if self.rich:
            from rich.text import Text

            text = Text()
            for piece, style in parts:
                text.append(visible(piece), style=style or "")
            self.console.print(text)
        else:
            typer.echo("".join(visible(piece) for piece, _ in parts))

    def table(self, headers: Sequence[str], rows: Sequence[Sequence[str]],
              right: Sequence[int] = ()) -> None:
        """Rows under headers; ``right`` lists the columns aligned to the right. Every cell
        is plain text, never rich markup: a name such as ``[/]`` shows as it is."""
        rows = [[visible(c) for c in row] for row in rows]
        if self.rich:
            from rich.table import Table  # on use: a piped listing needs no table
            from rich.text import Text

            table = Table(show_edge=False, box=None, pad_edge=False, header_style="bold")
            for i, h in enumerate(headers):
                table.add_column(Text(visible(h)), justify="right" if i in right else "left",
                                 overflow="fold")
            for row in rows:
                table.add_row(*(Text(c) for c in row))
            self.console.print(table)
            return
        widths = [max([width_of(h), *(width_of(r[i]) for r in rows)])
                  for i, h in enumerate(headers)]
        for row in [list(headers), *rows]:
            cells = [_pad(c, w, i in right) for i, (c, w) in enumerate(zip(row, widths,
                                                                           strict=True))]
            typer.echo("  ".join(cells).rstrip())

    def fields(self, pairs: Sequence[tuple[str, str]]) -> None:
        """``key: value`` lines, keys aligned."""
        width = max((len(k) for k, _ in pairs), default=0)
        for key, value in pairs:
            self.styled([(f"{key + ':':<{width + 1}} ", "bold"), (value, None)])


def _pad(cell: str, width: int, right: bool) -> str:
    gap = " " * max(width - width_of(cell), 0)
    return gap + cell if right else cell + gap


# The UTF-8 of the C1 controls, the bidirectional controls and the line separators: JSON
# may carry them raw, and some terminals act on them. Written as \u escapes, they decode to
# the same strings (the JSON stays exact) and never reach a terminal as controls.
_JSON_UNSAFE = re.compile(rb"\xc2[\x80-\x9f]|\xd8\x9c|\xe2\x80[\x8e\x8f\xa8-\xae]|"
                          rb"\xe2\x81[\xa6-\xa9]")


def _json_escape(match: re.Match[bytes]) -> bytes:
    return b"\\u%04x" % ord(match.group().decode())


def emit_json(value: Any) -> None:
    """Print ``value`` as indented JSON on stdout (never through rich: no wrapping, no markup).

    The values are exact; characters a terminal could act on are written as ``\\u`` escapes.
    A name with undecodable bytes (which UTF-8 cannot hold) has them escaped as the text
    output escapes them (``a\\udcffb.jsonl``), so the JSON stays valid.
    """
    try:
        data = _dumps(value)
    except TypeError:  # a lone surrogate: an undecodable byte of a file name
        data = _dumps(_encodable(value))
    typer.echo(_JSON_UNSAFE.sub(_json_escape, data).decode())


def _dumps(value: Any) -> bytes:
    return orjson.dumps(value, default=_as_text,
                        option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS)


def _as_text(value: Any) -> str:
    """A value JSON has no type for (a path, a datetime) as its text, UTF-8 encodable."""
    return surrogates_escaped(str(value))


def _encodable(value: Any) -> Any:
    """``value`` with every string (keys included) passed through ``surrogates_escaped``;
    the command's own report, so nesting is shallow."""
    if isinstance(value, str):
        return surrogates_escaped(value)
    if isinstance(value, dict):
        return {_encodable(k): _encodable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_encodable(v) for v in value]
    return value


def emit_bytes(data: bytes, *, kind: str = "json") -> None:
    """Write ``data`` to stdout (``-o -``: a file's bytes on stdout): as it is into a pipe
    or a file; on a terminal, nothing in it may act on the screen. ``kind`` says how:
    ``"json"`` (JSON or JSON lines: C1 and bidirectional controls written as ``\\u``
    escapes, the same JSON), ``"text"`` (every control made visible, as ``show`` prints
    it), ``"binary"`` (refused: it is no text to look at)."""
    stream = sys.stdout
    if _is_terminal(stream):
        if kind == "binary":
            raise UsageProblem("this is a binary file, not text for a terminal: write it "
                               "with -o FILE, or pipe stdout into a file or a program")
        data = (_JSON_UNSAFE.sub(_json_escape, data) if kind == "json"
                else "\n".join(visible(line, tabs=True) for line in data.decode(
                    "utf-8", "surrogateescape").split("\n")).encode())
    stream.flush()
    buffer = getattr(stream, "buffer", None)
    if buffer is not None:
        buffer.write(data)
        buffer.flush()
    else:  # a text-only stream (tests capture output this way)
        stream.write(data.decode("utf-8", "surrogateescape"))


def _is_terminal(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


def one_line(message: str) -> str:
    """``message`` on one line (runs of whitespace made one space), made visible."""
    return visible(" ".join(str(message).split()))


def count_option(text: str | None, option: str = "--limit") -> int | None:
    """A positive whole number given as text (``--limit 20``), or a usage error. Options
    typed ``str`` skip Typer's pydantic coercion, which costs a short command most of its
    time (see ``app.plain_values``)."""
    if text is None:
        return None
    try:
        value = int(text.strip())
    except ValueError:
        value = 0
    if value < 1:
        raise UsageProblem(f"{option} takes a whole number of at least 1, not {text!r}")
    return value


def warn(message: str) -> None:
    """Print ``warning: <message>`` on stderr (a database URL's password masked)."""
    typer.echo(f"warning: {one_line(without_passwords(message))}", err=True)


def fail(message: str, code: int = 1) -> typer.Exit:
    """Print ``error: <message>`` on stderr (a database URL's password masked); return
    the ``Exit`` to raise."""
    typer.echo(f"error: {one_line(without_passwords(message))}", err=True)
    return typer.Exit(code)


def stderr_is_terminal() -> bool:
    return sys.stderr.isatty() and os.environ.get("TERM") != "dumb"


@contextlib.contextmanager
def progress_bar(description: str, total: int,
                 minimum: int = PROGRESS_MIN_BYTES) -> Iterator[ProgressFn | None]:
    """A progress callback ``(done, total)`` drawing a bar on stderr, for work on ``total``
    bytes; ``None`` (no bar) when stderr is not a terminal or ``total`` is under ``minimum``."""
    if total < minimum or not stderr_is_terminal():
        yield None
        return
    from rich.console import Console
    from rich.progress import (  # on use: most commands draw no bar
        BarColumn,
        DownloadColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
    )

    # The description is plain text (a path may hold ``[/]``), never rich markup.
    columns = (TextColumn("{task.description}", markup=False), BarColumn(), DownloadColumn(),
               TimeRemainingColumn())
    with Progress(*columns, console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task(visible(description), total=total)

        def update(done: int, whole: int) -> None:
            bar.update(task, completed=done, total=whole or total)

        yield update


def human_size(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if abs(n) < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GB"  # pragma: no cover


def short_id(eid: str | None) -> str:
    """An entry id as shown in tables: ids longer than 10 characters are cut to 8 and ``…``."""
    if eid is None:
        return "-"
    return eid if len(eid) <= 10 else eid[:8] + "…"


def clip(text: str, width: int) -> str:
    """The first line of ``text`` (`` …`` when more follow), made visible and cut to
    ``width`` terminal columns."""
    head, sep, _ = text.strip().partition("\n")
    return fit(visible(head) + (" …" if sep else ""), width)
