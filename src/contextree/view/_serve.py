"""``contextree view --serve``: the viewer over HTTP on 127.0.0.1, for the sessions it was
given and nothing else.

The server binds to the loopback address on a free port, and every page is under a random
token (``http://127.0.0.1:PORT/TOKEN/``), so another user of the machine cannot guess a
URL. Each session is read again on every request (a live session shows its new entries on
reload); a PostgreSQL URL works as well as a file.
"""

from __future__ import annotations

import html
import secrets
import threading
from collections.abc import Callable, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

__all__ = ["ViewServer"]

_INDEX_CSP = "default-src 'none'; base-uri 'none'; form-action 'none'"


class ViewServer:
    """An HTTP server on 127.0.0.1 for ``targets``: ``/TOKEN/`` lists them and
    ``/TOKEN/N`` is the viewer page of the N-th (made by ``render(target)``)."""

    def __init__(self, targets: Sequence[str], render: Callable[[str], str], *,
                 port: int = 0) -> None:
        self.targets = list(targets)
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
        return base + "0" if len(self.targets) == 1 else base

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
        if rest == "":
            self._send(req, 200, self._index(), "text/html", csp=_INDEX_CSP)
            return
        if not rest.isdigit() or int(rest) >= len(self.targets):
            self._send(req, 404, "not found", "text/plain")
            return
        try:
            page = render(self.targets[int(rest)])
        except Exception as e:  # the reason, on the page: the server keeps serving
            self._send(req, 500, f"cannot show this session: {e}", "text/plain")
            return
        self._send(req, 200, page, "text/html")

    def _index(self) -> str:
        rows = "".join(f"<li><a href=\"{i}\">{html.escape(t)}</a></li>"
                       for i, t in enumerate(self.targets))
        return (f"<!doctype html><meta charset=\"utf-8\"><title>contextree sessions</title>"
                f"<h1>contextree sessions</h1><ul>{rows}</ul>")

    @staticmethod
    def _send(req: BaseHTTPRequestHandler, status: int, body: str, kind: str, *,
              csp: str | None = None) -> None:
        data = body.encode()
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
