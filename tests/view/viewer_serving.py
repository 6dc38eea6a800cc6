"""What the viewer's serving tests share besides their fixtures (``conftest.py``): how a
page is rendered and fetched, and the fixtures' types."""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Callable

from contextree import Session
from contextree.view import ViewServer, view_html

Serve = Callable[..., ViewServer]
"""``serve(sessions_or_catalog, redact=True)``: a started server."""
ServeCli = Callable[..., tuple[str, str]]
"""``serve_cli(*args)``: the first line ``contextree view --serve`` printed, and its URL."""


def render_view(target: str) -> str:
    """The page of one session, as ``contextree view`` renders it (redacted)."""
    with Session.open(target, readonly=True) as s:
        return view_html(s)


def http_get(url: str) -> tuple[int, str, dict[str, str]]:
    """GET ``url``: its status, body and headers (an HTTP error is a status, not a raise)."""
    try:
        with urllib.request.urlopen(url, timeout=30) as r:
            return r.status, r.read().decode(), dict(r.headers)
    except urllib.error.HTTPError as e:
        return e.code, "", dict(e.headers)
