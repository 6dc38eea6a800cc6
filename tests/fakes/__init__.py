"""Local HTTP servers that speak provider wire protocols, for tests without network or keys.

``FakeServer`` listens on 127.0.0.1 (a random port) in a thread, records every request
(method, path, headers, parsed JSON body) and answers from a queue of canned replies. A reply
is a ``Reply`` (status, JSON body, headers), a plain dict (a 200 JSON body), or a function of
the recorded request returning either. Subclasses validate requests the way the real API
would, answering 400 with the provider's error shape when a request is malformed.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self


@dataclass
class Recorded:
    """One request the server received."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any


@dataclass
class Reply:
    """One canned response."""

    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)


Responder = Reply | dict[str, Any] | Callable[[Recorded], "Reply | dict[str, Any]"]


class FakeServer:
    """A threaded HTTP server with a reply queue and a request log (use as a context manager)."""

    def __init__(self) -> None:
        self.requests: list[Recorded] = []
        self._replies: deque[Responder] = deque()
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    # -- lifecycle ---------------------------------------------------------------------------
    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    # -- script ------------------------------------------------------------------------------
    def reply(self, *responders: Responder) -> None:
        """Queue replies, one per request, in order."""
        with self._lock:
            self._replies.extend(responders)

    @property
    def bodies(self) -> list[Any]:
        """The JSON bodies of all requests so far."""
        return [r.body for r in self.requests]

    # -- hooks for subclasses ------------------------------------------------------------------
    def route_ok(self, method: str, path: str) -> bool:
        """Whether this server serves ``method path`` (else 404)."""
        return True

    def validate(self, body: Any) -> str | None:
        """A description of what is wrong with a request body, or None when it is valid."""
        return None

    def error_reply(self, status: int, message: str) -> Reply:
        """An error response in the provider's shape."""
        return Reply(status, {"error": {"message": message}})

    # -- request handling ------------------------------------------------------------------------
    def _answer(self, req: Recorded) -> Reply:
        if not self.route_ok(req.method, req.path):
            return self.error_reply(404, f"no route for {req.method} {req.path}")
        problem = self.validate(req.body)
        if problem is not None:
            return self.error_reply(400, problem)
        with self._lock:
            responder = self._replies.popleft() if self._replies else None
        if responder is None:
            return self.error_reply(500, "fake server: no reply queued for this request")
        if callable(responder):
            responder = responder(req)
        return responder if isinstance(responder, Reply) else Reply(200, responder)

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                self._handle()

            def do_POST(self) -> None:
                self._handle()

            def _handle(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length) if length else b""
                body = json.loads(raw) if raw else None
                req = Recorded(
                    self.command,
                    self.path,
                    {k.lower(): v for k, v in self.headers.items()},
                    body,
                )
                server.requests.append(req)
                self._send(server._answer(req))

            def _send(self, reply: Reply) -> None:
                data = json.dumps(reply.body).encode()
                self.send_response(reply.status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                for k, v in reply.headers.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

        return Handler


def keys_outside(d: Mapping[str, Any], allowed: set[str]) -> list[str]:
    """Keys of ``d`` not in ``allowed`` (unknown fields a strict API would reject)."""
    return sorted(set(d) - allowed)
