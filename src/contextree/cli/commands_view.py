"""``view``: a session as one self-contained HTML page, or served on 127.0.0.1."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from .._files import atomic_write
from .app import command
from .output import Out, UsageProblem, warn
from .sessions import address_of, check_output, open_session


def _page(target: str, redact: bool) -> tuple[str, str]:
    """The viewer page of ``target`` and the line that says how it was redacted."""
    from ..view import read_view, redaction_notice, view_html

    with open_session(target, readonly=True) as session:
        view = read_view(session, redact=redact, location=target)
    return view_html(view), redaction_notice(view)


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
    no_redact: Annotated[bool, typer.Option("--no-redact", help="Show secrets as they are "
                                            "stored (the page says it is not redacted).")]
    = False,
    force: Annotated[bool, typer.Option("--force", help="Replace an existing file at the "
                                        "output path.")] = False,
) -> None:
    """Show a session as one self-contained HTML page (the tree, the messages, what the model
    saw at each entry, compaction receipts, search, tokens and cost), redacted; or serve it
    on 127.0.0.1 with --serve."""
    redact = not no_redact
    if serve:
        if output is not None:
            raise UsageProblem("--serve serves the page; -o writes it to a file: give one")
        _serve(targets, redact, port, open_browser)
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
        page, notice = _page(target, redact)
        atomic_write(Path(out), page.encode())
        Out().line(f"wrote {out} ({len(page.encode()) // 1024} KiB, one file, works offline)")
        _notice(notice, redact)
        if open_browser:
            import webbrowser

            webbrowser.open(Path(out).resolve().as_uri())


def _notice(notice: str, redact: bool) -> None:
    if redact:
        Out().line(notice)
    else:
        warn(notice)


def _serve(targets: list[str], redact: bool, port: int, open_browser: bool) -> None:
    """Serve ``targets`` until Ctrl-C; each is checked once before the server starts."""
    from ..view import ViewServer

    for target in targets:  # a bad target fails now, not on the first request
        with open_session(target, readonly=True):
            pass
    server = ViewServer(targets, lambda t: _page(t, redact)[0], port=port)
    Out().line(f"serving {len(targets)} session{'s' if len(targets) > 1 else ''} at "
               f"{server.url} (127.0.0.1 only; Ctrl-C stops)")
    _notice("redacted: secrets show as [REDACTED:kind:n]" if redact else
            "NOT REDACTED: --no-redact was given; the pages may contain secrets", redact)
    if open_browser:
        import webbrowser

        webbrowser.open(server.url)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.close()
