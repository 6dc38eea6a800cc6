"""``contextree view --serve``: the viewer over HTTP on 127.0.0.1, for the sessions it was
given and nothing else.

The server binds to the loopback address on a free port, and every page is under a random
token (``http://127.0.0.1:PORT/TOKEN/``), so another user of the machine cannot guess a
URL. Each session is read again on every request (a live session shows its new entries on
reload); a PostgreSQL URL works as well as a file.

Given a catalog (a directory of sessions, a PostgreSQL database: ``storage.open_catalog``)
instead of sessions, the index lists the catalog's sessions as they are at each request
(names redacted), and ``/TOKEN/s/SESSION_ID`` is the page of the session of exactly that id
in that catalog: nothing outside it is reachable.
"""

from __future__ import annotations

import html
import secrets
import threading
from collections.abc import Callable, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import quote, unquote

from ..errors import InvalidArgument
from ..redaction import Redactor
from ..storage import Catalog, SessionInfo
from ._page import _asset, _hash, content_security_policy

__all__ = ["ViewServer"]

_INDEX_STYLE = ("body{font:15px/1.5 system-ui,sans-serif;max-width:960px;margin:2em auto;"
                "padding:0 1em;color:#1d1f21}table{border-collapse:collapse;width:100%}"
                "td,th{text-align:left;padding:4px 10px;border-bottom:1px solid #ddd}"
                ".meta{color:#666;font-size:13px}code{font-size:13px}")
_INDEX_CSP = (f"default-src 'none'; style-src {_hash(_INDEX_STYLE)}; base-uri 'none'; "
              "form-action 'none'")


class ViewServer:
    """An HTTP server on 127.0.0.1 for ``targets``: ``/TOKEN/`` lists them and
    ``/TOKEN/N`` is the viewer page of the N-th (made by ``render(target)``).

    ``targets`` may be a ``Catalog`` instead: ``/TOKEN/`` then lists its sessions (read at
    each request, names redacted unless ``redact=False``) and ``/TOKEN/s/ID`` is the page of
    the session of that id, ``render(its target)``."""

    def __init__(self, targets: Sequence[str] | Catalog, render: Callable[[str], str], *,
                 port: int = 0, redact: bool = True) -> None:
        if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
            raise InvalidArgument(f"port={port!r}: a port is 0 to 65535 (0: a free one)")
        self.catalog: Catalog | None = None if isinstance(targets, Sequence) else targets
        self.targets = list(targets) if isinstance(targets, Sequence) else []
        self.redact = redact
        self.token = secrets.token_urlsafe(18)
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                server._get(self, render)

            def log_message(self, format: str, *args: object) -> None:
                return None  # quiet: the command prints the URL, not every request

        self.httpd = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.httpd.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """The address of the first page: the viewer itself for one session, else the list."""
        host, port = self.httpd.server_address[:2]
        base = f"http://{host!s}:{port}/{self.token}/"
        return base + "0" if self.catalog is None and len(self.targets) == 1 else base

    def start(self) -> ViewServer:
        """Serve in a background thread (for tests and embedding); returns ``self``."""
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        """Serve in this thread until interrupted."""
        self.httpd.serve_forever()

    def close(self) -> None:
        """Stop serving and free the port."""
        if self._thread is not None:
            self.httpd.shutdown()
        self.httpd.server_close()

    def _get(self, req: BaseHTTPRequestHandler, render: Callable[[str], str]) -> None:
        path = req.path.split("?", 1)[0]
        prefix = f"/{self.token}/"
        if not secrets.compare_digest(path[:len(prefix)].encode(), prefix.encode()):
            self._send(req, 404, "not found", "text/plain")
            return
        rest = path[len(prefix):]
        try:
            if rest == "":
                self._send(req, 200, self._index(), "text/html", csp=_INDEX_CSP)
                return
            target = self._target(rest)
            if target is None:
                self._send(req, 404, "not found", "text/plain")
                return
            page = render(target)
        except Exception as e:  # the reason, on the page: the server keeps serving
            self._send(req, 500, f"cannot show this: {Redactor(enabled=self.redact).text(str(e))}",
                       "text/plain")
            return
        self._send(req, 200, page, "text/html", csp=_viewer_csp())

    def _target(self, rest: str) -> str | None:
        """The session the path after the token names, if it is one of those served."""
        if self.catalog is None:
            return self.targets[int(rest)] if rest.isdigit() and int(rest) < len(
                self.targets) else None
        if not rest.startswith("s/"):
            return None
        wanted = unquote(rest[2:])
        found = [s for s in self.catalog.list().sessions if s.id == wanted]  # exactly that id
        return found[0].target if len(found) == 1 else None

    def _index(self) -> str:
        redactor = Redactor(enabled=self.redact)  # one per page: one tag per secret in it
        if self.catalog is None:
            titles = redactor.texts(self.targets)
            rows = "".join(f"<tr><td><a href=\"{i}\">{html.escape(t)}</a></td></tr>"
                           for i, t in enumerate(titles))
            where = f"{len(titles)} session{'' if len(titles) == 1 else 's'}"
        else:
            listing = self.catalog.list()
            rows = _catalog_rows(listing.sessions, redactor)
            n = len(listing.sessions)
            where = (f"{n} session{'' if n == 1 else 's'} in "
                     f"{redactor.text(self.catalog.where)}, newest activity first")
            if listing.unlisted:
                where += f"; {len(listing.unlisted)} other files not listed"
        note = "" if self.redact else (" · NOT REDACTED (--no-redact): names as stored, "
                                       "secrets included")
        return (f"<!doctype html><html lang=\"en\"><meta charset=\"utf-8\">"
                f"<meta name=\"referrer\" content=\"no-referrer\">"
                f"<title>contextree sessions</title><style>{_INDEX_STYLE}</style>"
                f"<h1>contextree sessions</h1><p class=\"meta\">{html.escape(where + note)}</p>"
                f"<table>{rows}</table></html>")

    @staticmethod
    def _send(req: BaseHTTPRequestHandler, status: int, body: str, kind: str, *,
              csp: str | None = None) -> None:
        # an undecodable byte of a file name (a lone surrogate) shows as the CLI shows it, \udcff
        data = body.encode(errors="backslashreplace")
        req.send_response(status)
        req.send_header("Content-Type", f"{kind}; charset=utf-8")
        req.send_header("Content-Length", str(len(data)))
        req.send_header("Cache-Control", "no-store")
        req.send_header("X-Content-Type-Options", "nosniff")
        req.send_header("Referrer-Policy", "no-referrer")
        if csp:
            req.send_header("Content-Security-Policy", csp)
        req.end_headers()
        req.wfile.write(data)


def _catalog_rows(sessions: list[SessionInfo], redactor: Redactor) -> str:
    """The index's rows for a catalog's sessions: name (redacted), id, last activity and
    entries; each links to ``s/ID``."""
    names = redactor.texts([s.name or "" for s in sessions])
    head = "<tr><th>name</th><th>id</th><th>last activity</th><th>entries</th></tr>"
    rows = [head]
    for s, name in zip(sessions, names, strict=True):
        shown = name or "(no name)"
        count = f"{'' if s.entries_exact else '≈'}{s.entries:,}"
        rows.append(f"<tr><td><a href=\"s/{quote(s.id, safe='')}\">{html.escape(shown)}</a></td>"
                    f"<td><code>{html.escape(s.id[:12])}</code></td>"
                    f"<td>{html.escape(s.last_activity[:19].replace('T', ' '))}</td>"
                    f"<td>{count}</td></tr>")
    return "".join(rows)


def _viewer_csp() -> str:
    """The viewer page's policy, also sent as a header (the page carries it in a meta tag)."""
    return content_security_policy(_asset("page.js"), _asset("page.css"))
