"""Shared helpers for the storage conformance suite: backends, and a PostgreSQL to test with.

``postgres_url()`` returns a conninfo for a scratch schema (dropped at exit) on the server
named by ``CONTEXTREE_PG_URL``, or else on a throwaway server it starts from the local
PostgreSQL binaries. It returns ``None`` (and ``postgres_skip_reason()`` says why) only when
neither works; the PostgreSQL tests then skip, loudly.
"""

from __future__ import annotations

import atexit
import contextlib
import glob
import os
import re
import shutil
import socket
import subprocess
import tempfile
import uuid
import warnings
from collections.abc import Callable

ENV = "CONTEXTREE_PG_URL"

_state: dict[str, str | None] = {}


class PostgresSkipWarning(UserWarning):
    """The PostgreSQL backend was not tested."""


def postgres_url() -> str | None:
    """A conninfo for a fresh scratch schema, or ``None`` if no server is available."""
    if "url" in _state:
        return _state["url"]
    url: str | None = None
    reason: str | None = None
    base = os.environ.get(ENV)
    if not base:
        base, reason = _start_server()
    if base:
        try:
            url = _scratch_schema(base)
        except Exception as e:
            # A server that is configured (or was started) but unusable is a failure, not a
            # reason to skip.
            _state["error"] = f"PostgreSQL at {base!r} is unusable: {type(e).__name__}: {e}"
    _state["url"] = url
    _state["reason"] = reason if url is None and "error" not in _state else None
    if _state["reason"]:
        warnings.warn(f"PostgreSQL tests SKIPPED: {reason}", PostgresSkipWarning, stacklevel=2)
    return url


def postgres_error() -> str | None:
    """Why a configured PostgreSQL could not be used (the tests then fail, not skip)."""
    postgres_url()
    return _state.get("error")


def postgres_skip_reason() -> str | None:
    return _state.get("reason")


def pg_bin_dir() -> str | None:
    """The newest local PostgreSQL server binaries (Debian layout, or on PATH)."""
    candidates = glob.glob("/usr/lib/postgresql/*/bin/initdb")
    if candidates:
        def version(p: str) -> tuple[int, ...]:
            return tuple(int(x) for x in re.findall(r"\d+", p.split("/")[4]))

        return os.path.dirname(max(candidates, key=version))
    initdb = shutil.which("initdb")
    return os.path.dirname(initdb) if initdb else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start_server() -> tuple[str | None, str | None]:
    """Start a throwaway server in a temp dir; return (url, None) or (None, why not)."""
    bindir = pg_bin_dir()
    if bindir is None:
        return None, f"{ENV} is unset and no PostgreSQL binaries (initdb) were found"
    root = os.geteuid() == 0
    tmp = tempfile.mkdtemp(prefix="contextree-pgtest-")
    data = os.path.join(tmp, "data")
    port = _free_port()

    def run(args: list[str]) -> None:
        cmd = ["runuser", "-u", "postgres", "--", *args] if root else args
        subprocess.run(cmd, check=True, capture_output=True, timeout=120)

    try:
        if root:
            shutil.chown(tmp, "postgres")
        run([f"{bindir}/initdb", "-D", data, "-A", "trust", "-U", "postgres"])
        run([f"{bindir}/pg_ctl", "-D", data, "-l", os.path.join(tmp, "log"), "-w", "-o",
             f"-p {port} -k {tmp} -c listen_addresses=127.0.0.1 -c fsync=off "
             "-c max_connections=200", "start"])
    except (OSError, LookupError, subprocess.SubprocessError) as e:
        detail = getattr(e, "stderr", b"") or b""
        shutil.rmtree(tmp, ignore_errors=True)
        return None, (f"{ENV} is unset and starting a local server failed: {e} "
                      f"{detail.decode(errors='replace').strip()[:300]}")

    def stop() -> None:
        with contextlib.suppress(Exception):
            run([f"{bindir}/pg_ctl", "-D", data, "-m", "immediate", "-w", "stop"])
        shutil.rmtree(tmp, ignore_errors=True)

    atexit.register(stop)
    return f"postgresql://postgres@127.0.0.1:{port}/postgres", None


def _scratch_schema(base: str) -> str:
    """Create a fresh PostgreSQL schema (namespace) for this run, with contextree's tables."""
    import psycopg
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    from contextree.storage.postgres import create_schema

    name = f"contextree_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(base, autocommit=True, connect_timeout=10) as conn:
        conn.execute(f"CREATE SCHEMA {name}")
    options = conninfo_to_dict(base).get("options") or ""
    url = make_conninfo(base, options=f"{options} -csearch_path={name}".strip())
    create_schema(url)

    def drop() -> None:
        with contextlib.suppress(Exception), psycopg.connect(base, autocommit=True) as c:
            c.execute(f"DROP SCHEMA {name} CASCADE")

    atexit.register(drop)
    return url


def fresh_schema_url(base: str) -> tuple[str, Callable[[], None]]:
    """A conninfo for a new, empty schema (no contextree tables), and a function to drop it."""
    import psycopg
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    name = f"contextree_empty_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {name}")
    options = conninfo_to_dict(base).get("options") or ""
    options = re.sub(r"-csearch_path=\S+", "", str(options)).strip()

    def drop() -> None:
        with psycopg.connect(base, autocommit=True) as c:
            c.execute(f"DROP SCHEMA {name} CASCADE")

    return make_conninfo(base, options=f"{options} -csearch_path={name}".strip()), drop
