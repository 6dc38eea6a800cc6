"""``view``: a session as one self-contained HTML page, or served on 127.0.0.1."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer

from .._files import atomic_write
from ..redaction import Redactor
from .app import command
from .output import Out, UsageProblem
from .redacting import PatternsOpt, RedactOpt, found_line, make_redactor
from .sessions import address_of, check_output, open_session


def _page(target: str, redactor: Redactor) -> str:
    """The viewer page of ``target``, redacted by ``redactor``."""
    from ..view import read_view, view_html

    with open_session(target, readonly=True) as session:
        return view_html(read_view(session, redact=redactor, location=target))


@command("view")
def view_command(
    targets: Annotated[list[str], typer.Argument(
        metavar="FILE|URL...", help="Session files or postgresql://...#SESSION_ID URLs.",
        show_default=False)],
    output: Annotated[str | None, typer.Option("-o", "--output", help="The HTML file to write "
                                               "(default: beside the session, its name with "
                                               ".html; required for a URL).")] = None,
    serve: Annotated[bool, typer.Option("--serve", help="Serve the viewer on 127.0.0.1 (a "
                                        "free port, a random token in the URL) instead of "
                                        "writing a file; Ctrl-C stops it.")] = False,
    open_browser: Annotated[bool, typer.Option("--open", help="Open the page in the web "
                                               "browser.")] = False,
    port: Annotated[int, typer.Option("--port", help="--serve: the port (default: a free "
                                      "one).")] = 0,
    redact: RedactOpt = True,
    patterns: PatternsOpt = None,
    force: Annotated[bool, typer.Option("--force", help="Replace an existing file at the "
                                        "output path.")] = False,
) -> None:
    """Show a session as one self-contained HTML page (the tree, the messages, what the model
    saw at each entry, compaction receipts, search, tokens and cost), redacted; or serve it
    on 127.0.0.1 with --serve."""
    if serve and output is not None:
        raise UsageProblem("--serve serves the page; -o writes it to a file: give one")
    make_redactor(redact, patterns, "the page")  # checks the patterns; says so when off

    def redactor() -> Redactor:  # one per page: a secret keeps one tag within a page
        return Redactor(patterns or (), enabled=redact)

    if serve:
        _serve(targets, redactor, port, open_browser)
        return
    if output is not None and len(targets) > 1:
        raise UsageProblem("-o names one file: give one session, or leave -o out to write "
                           "each page beside its session")
    for target in targets:
        if output is None and not address_of(target).is_file:
            raise UsageProblem(f"{target}: say where the page goes with -o FILE (or use "
                               "--serve)")
        out = output or str(Path(target).with_suffix(".html"))
        check_output(out, force=force, inputs=[target])
        r = redactor()
        page = _page(target, r)
        atomic_write(Path(out), page.encode())
        note = f"; {found_line(r)}" if redact else "; not redacted"
        Out().line(f"wrote {out} ({len(page.encode()) // 1024} KiB, one file, works "
                   f"offline){note}")
        if open_browser:
            import webbrowser

            webbrowser.open(Path(out).resolve().as_uri())


def _serve(targets: list[str], redactor: Callable[[], Redactor], port: int,
           open_browser: bool) -> None:
    """Serve ``targets`` until Ctrl-C; each is checked once before the server starts."""
    from ..view import ViewServer

    for target in targets:  # a bad target fails now, not on the first request
        with open_session(target, readonly=True):
            pass
    server = ViewServer(targets, lambda t: _page(t, redactor()), port=port)
    Out().line(f"serving {len(targets)} session{'s' if len(targets) > 1 else ''} at "
               f"{server.url} (127.0.0.1 only; Ctrl-C stops)")
    if open_browser:
        import webbrowser

        webbrowser.open(server.url)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.close()
