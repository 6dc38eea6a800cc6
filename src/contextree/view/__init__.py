"""The session viewer and the readable exports, redacted by default.

``view_html(session)`` is one self-contained HTML page (no network needed, nothing from the
session ever runs); ``write_view(session, path)`` writes it. ``export_markdown`` and
``export_html`` are readable copies of one branch or the whole tree, for an issue or a pull
request. ``ViewServer`` serves the viewer on 127.0.0.1 under a random token. Every one of
them passes the session through a ``contextree.redaction.Redactor`` first (``redact=False``
turns that off, and the output says so); the stored session is never changed::

    from contextree.view import export_markdown, view_html

    page = view_html(session)              # what `contextree view FILE` writes
    text = export_markdown(session)        # what `contextree export markdown FILE` writes
"""

from __future__ import annotations

import os
from pathlib import Path

from .._files import atomic_write
from .._gc import gc_paused
from .._public import publish
from .._session import Session
from ..redaction import Redactor
from ._export import html_export, markdown_export
from ._model import SessionView, build_view
from ._page import page_html
from ._serve import ViewServer

__all__ = [
    "Redact",
    "SessionView",
    "ViewServer",
    "export_html",
    "export_markdown",
    "read_view",
    "redaction_notice",
    "view_html",
    "write_view",
]


Redact = bool | Redactor
"""What the functions here take as ``redact``: ``True`` (the default redactor), ``False`` (as
stored; the output says so) or a ``Redactor`` of your own (patterns, its ``found`` counts)."""


def read_view(session: Session, *, redact: Redact = True,
              location: str | None = None) -> SessionView:
    """The whole session as the viewer and the exports show it, redacted unless
    ``redact=False``."""
    redactor = redact if isinstance(redact, Redactor) else Redactor(enabled=bool(redact))
    with gc_paused(untraversed=True):
        return build_view(session, redactor, location=location)


def redaction_notice(view: SessionView) -> str:
    """One line that says whether (and how much) ``view`` was redacted."""
    red = view.data["redaction"]
    if not red["enabled"]:
        return ("NOT REDACTED: --no-redact was given, so this page shows the session as it is "
                "stored and may contain secrets.")
    found = red["found"]
    if not found:
        return "Redacted: no secret was found (secrets would show as [REDACTED:kind:n])."
    kinds = ", ".join(f"{kind} {n}" for kind, n in sorted(found.items()))
    n = sum(found.values())
    return (f"Redacted: {n} secret{'' if n == 1 else 's'} replaced by [REDACTED:kind:n] "
            f"({kinds}).")


def view_html(session: Session | SessionView, *, redact: Redact = True) -> str:
    """The viewer page of ``session``: one HTML file with everything inline."""
    view = session if isinstance(session, SessionView) else read_view(session, redact=redact)
    s = view.data["session"]
    title = s["name"] or f"session {s['id']}"
    with gc_paused(untraversed=True):
        return page_html(view.data, title=title, notice=redaction_notice(view),
                         redacted=view.data["redaction"]["enabled"])


def write_view(session: Session | SessionView, path: str | os.PathLike[str], *,
               redact: Redact = True) -> Path:
    """Write the viewer page of ``session`` to ``path`` (atomically); returns the path."""
    target = Path(path)
    atomic_write(target, view_html(session, redact=redact).encode())
    return target


def _view_at(session: Session, at: str | None, redact: Redact) -> tuple[SessionView, int | None]:
    view = read_view(session, redact=redact)
    return view, (view.index[session.resolve(at)] if at is not None else None)


def export_markdown(session: Session, *, at: str | None = None, whole: bool = False,
                    redact: Redact = True, notice: bool = True) -> str:
    """The branch ending at ``at`` (id, prefix or label; default: the current leaf), or
    with ``whole`` the entire tree, as Markdown to paste into an issue or a pull request.
    ``notice`` puts the line that says how it was redacted under the title."""
    view, k = _view_at(session, at, redact)
    return markdown_export(view, at=k, whole=whole, notice=notice)


def export_html(session: Session, *, at: str | None = None, whole: bool = False,
                redact: Redact = True, notice: bool = True) -> str:
    """The branch ending at ``at`` (or with ``whole`` the entire tree) as a static HTML page
    without any script (``notice`` as for ``export_markdown``)."""
    view, k = _view_at(session, at, redact)
    return html_export(view, at=k, whole=whole, notice=notice)


publish(globals())
