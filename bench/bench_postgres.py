"""PostgreSQL storage against the JSONL store: appends/s (1 and 8 writers), path load time.

Usage: python bench/bench_postgres.py [--url postgresql://...] [--appends 2000] ...

The URL defaults to ``CONTEXTREE_PG_URL``. The run uses a scratch PostgreSQL schema (dropped
at the end) and a temporary directory for the JSONL files. Appends go through
``Session.append_message`` (as an agent would); writers are separate processes. The server's
``fsync``/``synchronous_commit`` settings are printed, since they decide what a commit costs.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from contextree import Message, Session
from contextree.entries import AnyEntry, MessageEntry, SessionHeader, now
from contextree.storage import JsonlStorage
from contextree.storage.postgres import PostgresStorage, create_schema

TEXT = "lorem ipsum dolor sit amet " * 8  # ~220 characters per message
SPAWN = multiprocessing.get_context("spawn")


def header() -> SessionHeader:
    return SessionHeader(id=str(uuid.uuid4()), created_at=now(), cwd="/bench")


# -- writers (module level, for spawned processes) ----------------------------------------------

def _open(kind: str, where: str, session_id: str) -> Session:
    if kind == "postgres":
        return Session(PostgresStorage.open(where, session_id))
    if kind == "jsonl":
        return Session.open(where)
    return Session.open(where, durable=False)


def _writer(kind: str, where: str, session_id: str, n: int, barrier: Any, out: Any) -> None:
    session = _open(kind, where, session_id)
    barrier.wait()
    start = time.perf_counter()
    for i in range(n):
        session.append_message({"role": "user", "content": f"{i} {TEXT}"})
    out.put((start, time.perf_counter()))
    session.close()


def run_writers(kind: str, targets: list[tuple[str, str]], n: int) -> float:
    """Appends/s over all writers, from the first start to the last finish."""
    barrier = SPAWN.Barrier(len(targets))
    out = SPAWN.Queue()
    procs = [SPAWN.Process(target=_writer, args=(kind, where, sid, n, barrier, out))
             for where, sid in targets]
    for p in procs:
        p.start()
    times = [out.get(timeout=600) for _ in procs]
    for p in procs:
        p.join()
        if p.exitcode:
            raise SystemExit(f"a {kind} writer failed (exit code {p.exitcode})")
    span = max(t[1] for t in times) - min(t[0] for t in times)
    return n * len(targets) / span


def one_writer(session: Session, n: int) -> float:
    for i in range(20):  # warm up (connection, prepared statements)
        session.append_message({"role": "user", "content": f"w{i} {TEXT}"})
    start = time.perf_counter()
    for i in range(n):
        session.append_message({"role": "user", "content": f"{i} {TEXT}"})
    return n / (time.perf_counter() - start)


# -- path load --------------------------------------------------------------------------------------

def chain(n: int) -> list[AnyEntry]:
    out: list[AnyEntry] = []
    parent = None
    for i in range(n):
        role = "user" if i % 2 == 0 else "assistant"
        e = MessageEntry(f"e{i:06d}", parent, now(), message=Message(role=role,
                                                                    content=f"{i} {TEXT}"))
        out.append(e)
        parent = e.id
    return out


def branched(total: int, path_len: int) -> tuple[list[AnyEntry], str]:
    """A main branch of ``path_len`` entries plus side branches, ``total`` entries in all."""
    main = chain(path_len)
    out = list(main)
    k = 0
    while len(out) < total:
        parent = main[k % path_len].id
        for i in range(min(path_len, total - len(out))):
            e = MessageEntry(f"s{k}-{i}", parent, now(),
                             message=Message(role="user", content=f"side {k} {i} {TEXT}"))
            out.append(e)
            parent = e.id
        k += 1
    return out, main[-1].id


def time_load(open_storage: Callable[[], Any], repeat: int, n: int,
              leaf: str | None = None) -> tuple[float, float]:
    """Median seconds for open + build_context (cold), and for build_context again (warm)."""
    cold, warm = [], []
    for _ in range(repeat):
        start = time.perf_counter()
        session = Session(open_storage())
        ctx = session.build_context(leaf)
        cold.append(time.perf_counter() - start)
        assert len(ctx.messages) == n
        start = time.perf_counter()
        session.build_context(leaf)
        warm.append(time.perf_counter() - start)
        session.close()
    return statistics.median(cold), statistics.median(warm)


# -- main -------------------------------------------------------------------------------------------

def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--url", default=os.environ.get("CONTEXTREE_PG_URL"))
    ap.add_argument("--appends", type=int, default=2000, help="appends for the one writer")
    ap.add_argument("--writers", type=int, default=8)
    ap.add_argument("--per-writer", type=int, default=500)
    ap.add_argument("--branch", type=int, default=10_000, help="entries on the loaded branch")
    ap.add_argument("--big", type=int, default=100_000,
                    help="entries in the many-branch session (0: skip)")
    ap.add_argument("--big-branch", type=int, default=1_000,
                    help="entries on its loaded branch")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    if not args.url:
        sys.exit("set CONTEXTREE_PG_URL or pass --url (e.g. start a server as .ci/run does)")

    schema = f"contextree_bench_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(args.url, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
        settings = {k: conn.execute(f"SHOW {k}").fetchone()[0]  # type: ignore[index]
                    for k in ("server_version", "fsync", "synchronous_commit")}
    options = conninfo_to_dict(args.url).get("options") or ""
    url = make_conninfo(args.url, options=f"{options} -csearch_path={schema}".strip())
    create_schema(url)
    tmp = Path(tempfile.mkdtemp(prefix="contextree-bench-"))
    results: list[tuple[str, float, float, float]] = []
    try:
        print(f"PostgreSQL {settings['server_version']} (fsync={settings['fsync']}, "
              f"synchronous_commit={settings['synchronous_commit']}); JSONL in {tmp}; "
              f"{os.cpu_count()} CPUs")

        # One writer.
        pg_one = one_writer(Session(PostgresStorage.create(url, header())), args.appends)
        js_one = one_writer(Session.create(tmp / "one.jsonl"), args.appends)
        jn_one = one_writer(Session.create(tmp / "one-nosync.jsonl", durable=False),
                            args.appends)
        results.append(("appends/s, 1 writer", pg_one, js_one, jn_one))

        # N writers, one session each (JSONL allows one writer per file).
        k, per = args.writers, args.per_writer
        pg_sessions = []
        for _ in range(k):
            s = PostgresStorage.create(url, header())
            pg_sessions.append((url, s.session_id))
            s.close()
        js_files, jn_files = [], []
        for i in range(k):
            for files, name, durable in ((js_files, "sync", True), (jn_files, "nosync", False)):
                path = tmp / f"w{i}-{name}.jsonl"
                Session.create(path, durable=durable).close()
                files.append((str(path), ""))
        pg_many = run_writers("postgres", pg_sessions, per)
        js_many = run_writers("jsonl", js_files, per)
        jn_many = run_writers("jsonl-nosync", jn_files, per)
        results.append((f"appends/s, {k} writers, {k} sessions", pg_many, js_many, jn_many))

        # N writers on ONE session: only PostgreSQL can do this.
        shared = PostgresStorage.create(url, header())
        pg_shared = run_writers("postgres", [(url, shared.session_id)] * k, per)
        assert len(shared) == k * per and len(shared.path(shared.leaf_id)) == k * per
        shared.close()
        results.append((f"appends/s, {k} writers, 1 session", pg_shared, float("nan"),
                        float("nan")))

        # Path load for a long branch: open + build_context, then build_context again.
        entries = chain(args.branch)
        pg_id = PostgresStorage.create(url, header(), entries)
        pg_id.close()
        JsonlStorage.create(tmp / "chain.jsonl", header(), entries).close()
        pg_cold, pg_warm = time_load(lambda: PostgresStorage.open(url, pg_id.session_id),
                                     args.repeat, args.branch)
        js_cold, js_warm = time_load(lambda: JsonlStorage.open(tmp / "chain.jsonl"),
                                     args.repeat, args.branch)
        results.append((f"ms, open + build_context, {args.branch} entries",
                        pg_cold * 1e3, js_cold * 1e3, float("nan")))
        results.append(("ms, build_context again (cached)", pg_warm * 1e3, js_warm * 1e3,
                        float("nan")))

        # A short branch of a big session: PostgreSQL reads the path, JSONL the whole file.
        if args.big:
            entries, leaf = branched(args.big, args.big_branch)
            big = PostgresStorage.create(url, header(), entries)
            big.close()
            JsonlStorage.create(tmp / "big.jsonl", header(), entries).close()
            pg_cold, _ = time_load(lambda: PostgresStorage.open(url, big.session_id),
                                   args.repeat, args.big_branch, leaf)
            js_cold, _ = time_load(lambda: JsonlStorage.open(tmp / "big.jsonl"),
                                   args.repeat, args.big_branch, leaf)
            results.append((f"ms, open + build_context, {args.big_branch} of {args.big}",
                            pg_cold * 1e3, js_cold * 1e3, float("nan")))
    finally:
        with psycopg.connect(args.url, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")
        for f in tmp.iterdir():
            f.unlink()
        tmp.rmdir()

    print(f"\n{'':44} {'postgres':>10} {'jsonl':>10} {'pg/jsonl':>9} {'jsonl-nosync':>13}")
    for label, pg, js, jn in results:
        ratio = pg / js if js == js else float("nan")
        print(f"{label:44} {pg:10.1f} {js:10.1f} {ratio:9.2f} {jn:13.1f}")


if __name__ == "__main__":
    main()
