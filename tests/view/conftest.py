"""The viewer's servers, set up one way for every test that serves: ``serve`` starts a
``ViewServer`` in the test's process, ``serve_cli`` runs ``contextree view --serve``; both
are stopped when the test ends (``viewer_serving.http_get`` fetches their pages)."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from viewer_serving import Serve, ServeCli, render_view

from contextree.storage import Catalog
from contextree.view import ViewServer


@pytest.fixture
def serve() -> Iterator[Serve]:
    """``serve(sessions_or_catalog, redact=True)``: a started ``ViewServer`` rendering with
    ``render_view``."""
    started: list[ViewServer] = []

    def start(targets: Sequence[str] | Catalog, *, redact: bool = True) -> ViewServer:
        server = ViewServer(targets, render_view, redact=redact).start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.close()


@pytest.fixture
def serve_cli() -> Iterator[ServeCli]:
    """``serve_cli(*args)``: ``contextree view --serve *args`` running; returns the first
    line it printed and the URL in it."""
    procs: list[subprocess.Popen[str]] = []

    def start(*args: str | Path) -> tuple[str, str]:
        proc = subprocess.Popen([sys.executable, "-m", "contextree", "view", "--serve",
                                 *map(str, args)], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        procs.append(proc)
        assert proc.stdout is not None
        line = proc.stdout.readline()
        m = re.search(r"(http://127\.0\.0\.1:\d+/[\w-]+/\S*)", line)
        assert m, line
        return line, m.group(1)

    yield start
    for proc in procs:
        proc.terminate()
        proc.wait(timeout=20)
