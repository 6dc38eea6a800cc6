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
        metavar="FILE|URL...", help="Session files or postgresql://...#SESSION_ID URLs; "
        "with --serve, a directory of sessions or a postgresql:// URL (a catalog) instead.",
        show_default=False)],
    output: Annotated[str | None, typer.Option("-o", "--output", help="The HTML file to write "
                                               "(default: beside the session, its name with "
                                               ".html; required for a URL).")] = None,
    serve: Annotated[bool, typer.Option("--serve", help="Serve the viewer on 127.0.0.1 (a "
                                        "free port, a random token in the URL) instead of "
                                        "writing a file; Ctrl-C stops it.")] = False,
    open_browser: Annotated[bool, typer.Option("--open", help="Open the page in the web "
                                               "browser.")] = False,
    port: Annotated[int, typer.Option("--port", min=0, max=65535, help="--serve: the port "
                                      "(0 to 65535; default 0: a free one).")] = 0,
    redact: RedactOpt = True,
    patterns: PatternsOpt = None,
    force: Annotated[bool, typer.Option("--force", help="Replace an existing file at the "
                                        "output path.")] = False,
) -> None:
    """Show a session as one self-contained HTML page (the tree, the messages, what the model
    saw at each entry, compaction receipts, search, tokens and cost), redacted; or serve it
    on 127.0.0.1 with --serve.

    With --serve, a directory or a postgresql:// URL without #SESSION_ID serves the whole
    catalog: an index of its sessions (names redacted), each one's page under the same
    token."""
    if serve and output is not None:
        raise UsageProblem("--serve serves the page; -o writes it to a file: give one")
    catalogs = [t for t in targets if _is_catalog(t)]
    if catalogs and not serve:
        raise UsageProblem(f"{catalogs[0]}: this holds many sessions; --serve serves them "
                           "all (an index and each session's page), or name one session")
    if catalogs and len(targets) > 1:
        raise UsageProblem("--serve takes one catalog (a directory or a database URL) or "
                           "session files, not both")
    make_redactor(redact, patterns, "the page")  # checks the patterns; says so when off

    def redactor() -> Redactor:  # one per page: a secret keeps one tag within a page
        return Redactor(patterns or (), enabled=redact)

    if serve:
        _serve(targets, redactor, port, open_browser, catalog=bool(catalogs), redact=redact)
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


def _is_catalog(target: str) -> bool:
    """True for a directory, or a URL that names no session (a database of sessions)."""
    address = address_of(target)
    if address.is_file:
        return Path(target).is_dir()
    return address.session_id is None


def _serve(targets: list[str], redactor: Callable[[], Redactor], port: int,
           open_browser: bool, *, catalog: bool, redact: bool) -> None:
    """Serve ``targets`` (or the one catalog they name) until Ctrl-C; each is checked once
    before the server starts."""
    from ..view import ViewServer
    from .catalogs import open_catalog_of

    if catalog:
        sessions = open_catalog_of(targets[0])[0]
        count = len(sessions.list().sessions)  # a catalog that cannot be read fails now
        server = ViewServer(sessions, lambda t: _page(t, redactor()), port=port, redact=redact)
        what = f"the {count} session{'' if count == 1 else 's'} of {redactor().text(targets[0])}"
    else:
        for target in targets:  # a bad target fails now, not on the first request
            with open_session(target, readonly=True):
                pass
        server = ViewServer(targets, lambda t: _page(t, redactor()), port=port, redact=redact)
        what = f"{len(targets)} session{'s' if len(targets) > 1 else ''}"
    Out().line(f"serving {what} at {server.url} (127.0.0.1 only; Ctrl-C stops)")
    if open_browser:
        import webbrowser

        webbrowser.open(server.url)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.close()
