"""Local HTTP servers that speak provider wire protocols, for tests without network or keys.

``FakeServer`` listens on 127.0.0.1 (a random port) in a thread, records every request
(method, path, headers, parsed JSON body) and answers from a queue of canned replies. A reply
is a ``Reply`` (status, JSON body, headers), a plain dict (a 200 JSON body), an ``SSE`` stream,
or a function of the recorded request returning one of them. Subclasses validate requests the
way the real API would, answering 400 with the provider's error shape when a request is
malformed.

Streaming: a request with ``"stream": true`` answered with a 200 JSON body gets that body as
the provider's server-sent events (``to_stream``, per subclass: text and arguments split in
pieces of ``chunk`` characters), so one canned reply serves ``complete()`` and ``stream()``
alike. An ``SSE`` reply gives the events themselves, and can cut the connection after some of
them (``cut_after``) or hold until a test releases it (``hold_after`` / ``release``).
"""

from __future__ import annotations

import json
import socket
import threading
import time
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
    raw: bytes = b""  # the body as it came, byte for byte


@dataclass
class Reply:
    """One canned response."""

    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    raw: bytes | None = None  # sent as it is instead of ``body`` (JSON no encoder would write)


@dataclass
class SSE:
    """A streamed response: ``events`` as ``(event name or None, data)``; data is JSON-encoded
    unless it is a ``str`` (``"[DONE]"``). The body is chunked, so a cut is a real cut."""

    events: list[tuple[str | None, Any]]
    cut_after: int | None = None  # close the connection mid-body after this many events
    hold_after: int | None = None  # after this many events, wait for ``release`` (or 30 s)
    release: threading.Event = field(default_factory=threading.Event)
    sent: threading.Event = field(default_factory=threading.Event)  # set when holding / done
    delay: float = 0.0  # seconds before each event
    written: list[float] = field(default_factory=list)  # perf_counter() as each event is sent

    def encode(self, index: int) -> bytes:
        name, data = self.events[index]
        text = data if isinstance(data, str) else json.dumps(data)
        head = f"event: {name}\n" if name else ""
        return f"{head}data: {text}\n\n".encode()


Responder = (Reply | SSE | dict[str, Any]
             | Callable[[Recorded], "Reply | SSE | dict[str, Any]"])


class FakeServer:
    """A threaded HTTP server with a reply queue and a request log (use as a context manager)."""

    chunk = 4
    """Characters per text or argument piece when a JSON reply is turned into a stream."""

    def __init__(self) -> None:
        self.requests: list[Recorded] = []
        self._replies: deque[Responder] = deque()
        self._lock = threading.Lock()
        self._httpd = _Server(("127.0.0.1", 0), self._handler_class())
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

    def to_stream(self, body: dict[str, Any], req: Recorded) -> SSE:
        """The server-sent events that stream the JSON reply ``body`` (per provider)."""
        raise NotImplementedError(f"{type(self).__name__} does not stream")

    def pieces(self, text: str) -> list[str]:
        """``text`` in pieces of ``chunk`` characters (none for an empty text)."""
        return [text[i:i + self.chunk] for i in range(0, len(text), self.chunk)]

    # -- request handling ------------------------------------------------------------------------
    def _respond(self, req: Recorded) -> Reply | SSE:
        reply = self._answer(req)
        streamed = isinstance(req.body, dict) and req.body.get("stream") is True
        if (streamed and isinstance(reply, Reply) and reply.status == 200
                and isinstance(reply.body, dict)):
            return self.to_stream(reply.body, req)
        return reply

    def refusal(self, req: Recorded) -> Reply | None:
        """The error a request gets before any reply is looked at: 404 for a route this
        server does not serve, 400 for a body the API would reject; ``None`` when valid."""
        if not self.route_ok(req.method, req.path):
            return self.error_reply(404, f"no route for {req.method} {req.path}")
        problem = self.validate(req.body)
        return self.error_reply(400, problem) if problem is not None else None

    def _answer(self, req: Recorded) -> Reply | SSE:
        refused = self.refusal(req)
        if refused is not None:
            return refused
        with self._lock:
            responder = self._replies.popleft() if self._replies else None
        if responder is None:
            return self.error_reply(500, "fake server: no reply queued for this request")
        if callable(responder):
            responder = responder(req)
        return responder if isinstance(responder, Reply | SSE) else Reply(200, responder)

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
                    raw,
                )
                server.requests.append(req)
                reply = server._respond(req)
                if isinstance(reply, SSE):
                    self._stream(reply)
                else:
                    self._send(reply)

            def _stream(self, sse: SSE) -> None:
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("transfer-encoding", "chunked")
                self.end_headers()
                try:
                    for i in range(len(sse.events)):
                        if sse.cut_after is not None and i >= sse.cut_after:
                            self.close_connection = True
                            self.wfile.flush()
                            self.connection.shutdown(socket.SHUT_RDWR)
                            return
                        if sse.hold_after is not None and i == sse.hold_after:
                            sse.sent.set()
                            sse.release.wait(30)
                        if sse.delay:
                            time.sleep(sse.delay)
                        data = sse.encode(i)
                        sse.written.append(time.perf_counter())
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                        self.wfile.flush()
                    self.wfile.write(b"0\r\n\r\n")
                    self.wfile.flush()
                except OSError:  # the client went away (it closed the stream)
                    self.close_connection = True
                finally:
                    sse.sent.set()

            def _send(self, reply: Reply) -> None:
                data = reply.raw if reply.raw is not None else json.dumps(reply.body).encode()
                self.send_response(reply.status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                for k, v in reply.headers.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

        return Handler


class _Server(ThreadingHTTPServer):
    """Quiet about clients that hang up (a closed stream, a test that is done)."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        import sys

        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


def keys_outside(d: Mapping[str, Any], allowed: set[str]) -> list[str]:
    """Keys of ``d`` not in ``allowed`` (unknown fields a strict API would reject)."""
    return sorted(set(d) - allowed)
