"""Search and listing over many sessions: ``ls`` warm, the index build, one append's refresh,
``search`` p95, and the same on PostgreSQL (search p95, append cost of the search columns).

    python bench/bench_search.py                       # 10,000 sessions, 1 GB of text
    python bench/bench_search.py --sessions 1000 --megabytes 50 --pg-sessions 5000  # quick
    BENCH_SEARCH_SESSIONS=... BENCH_SEARCH_MB=... BENCH_SEARCH_PG_SESSIONS=...  (the same)

PostgreSQL is measured when ``CONTEXTREE_PG_URL`` is set (a scratch schema is made and
dropped). Each figure is printed beside a baseline measured in the same run: ``ls`` without
the cache, a plain read of every session file (what any index must at least do), ``grep
-rl`` over the same files, and appends with the search trigger and indexes taken away.
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import orjson

from contextree.entries import SessionHeader, encode_line
from contextree.storage import DirectoryCatalog
from contextree.storage._search_index import SearchIndex, search_directory

WORDS = ["config", "parser", "session", "entry", "tree", "branch", "leaf", "token", "usage", "model", "stream", "buffer", "retry", "handler", "request", "response", "cache", "index", "payload", "schema", "record", "worker", "queue", "lock", "timeout", "signal", "module", "package", "import", "export", "value", "result", "error", "warning", "connect", "socket", "refused", "listen", "bind", "accept", "close", "thread", "process", "memory", "disk", "network"]
IDENTS = ("test_parse_header", "load_config", "ECONNREFUSED", "os.path.join",
          "HttpClient.send", "max_retries", "__init__", "read_timeout")
QUERIES = ("ECONNREFUSED", "test_parse_header", '"connection refused"', "deadbeef", "socket",
           "worker timeout", "needle_4242")


def _corpus(rng: random.Random, chars: int) -> str:
    out: list[str] = []
    size = 0
    while size < chars:
        r = rng.random()
        word = (rng.choice(IDENTS) if r < 0.03 else f"{rng.getrandbits(40):010x}" if r < 0.04
                else rng.choice(WORDS))
        out.append(word)
        size += len(word) + 1
        if rng.random() < 0.08:
            out.append("\n")
    return " ".join(out)


def generate(root: Path, sessions: int, megabytes: float, seed: int = 1) -> int:
    """``sessions`` files holding about ``megabytes`` of message text; the bytes written."""
    rng = random.Random(seed)
    corpus = _corpus(rng, 4 << 20)
    per = int(megabytes * (1 << 20) / sessions)
    total = 0
    for i in range(sessions):
        folder = root / f"p{i % 100:02}"
        folder.mkdir(exist_ok=True)
        lines = [encode_line(SessionHeader(id=str(uuid.UUID(int=rng.getrandbits(128))),
                                           created_at="2026-01-01T00:00:00.000Z",
                                           cwd=f"/work/p{i % 100}"))]
        parent = None
        written = 0
        n = 0
        while written < per:
            size = min(int(rng.paretovariate(1.2) * 600), 200_000, per - written + 50)
            at = rng.randrange(0, len(corpus) - size)
            text = corpus[at:at + size]
            if n == 3 and i % 500 == 0:
                text += f" needle_{i} connection refused"
            role = ("user", "assistant", "tool")[n % 3]
            eid = f"{i:x}-{n}"
            lines.append(orjson.dumps({
                "type": "message", "id": eid, "parent_id": parent,
                "timestamp": f"2026-01-{1 + n % 28:02}T00:00:00.000Z",
                "message": {"role": role, "content": text}}) + b"\n")
            parent, n, written = eid, n + 1, written + size
        data = b"".join(lines)
        (folder / f"s{i}.jsonl").write_bytes(data)
        total += len(data)
    return total


def timed(fn: Callable[[], object], runs: int) -> list[float]:
    out = []
    for _ in range(runs):
        started = time.perf_counter()
        fn()
        out.append(time.perf_counter() - started)
    return out


def p95(values: list[float]) -> float:
    return sorted(values)[max(0, int(len(values) * 0.95) - 1)] if values else 0.0


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


def read_all(root: Path) -> int:
    total = 0
    for dirpath, _, files in os.walk(root):
        if ".contextree" in dirpath:
            continue
        for name in files:
            with open(os.path.join(dirpath, name), "rb") as f:
                while chunk := f.read(1 << 20):
                    total += len(chunk)
    return total


def bench_directory(root: Path, sessions: int, megabytes: float) -> None:
    print(f"generating {sessions} sessions, ~{megabytes:g} MB of text in {root} ...",
          flush=True)
    started = time.perf_counter()
    total = generate(root, sessions, megabytes)
    print(f"  {total / 1e6:.0f} MB written in {time.perf_counter() - started:.1f} s")

    catalog = DirectoryCatalog(root)
    plain = DirectoryCatalog(root, cache=False)
    cold = timed(lambda: plain.list(), 1)[0]
    catalog.list()  # fills the cache
    warm = timed(lambda: catalog.list(), 5)
    print(f"ls (catalog.list) over {sessions} sessions: warm {ms(min(warm))} "
          f"(p95 {ms(p95(warm))}); without the cache {ms(cold)} = "
          f"{cold / min(warm):.1f}x slower")
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).parents[1] / "src"))
    cli = timed(lambda: subprocess.run([sys.executable, "-m", "contextree", "ls", str(root),
                                        "--json"], check=True, env=env,
                                       stdout=subprocess.DEVNULL), 3)
    empty = tempfile.mkdtemp()
    base = timed(lambda: subprocess.run([sys.executable, "-m", "contextree", "ls", empty],
                                        check=True, env=env, stdout=subprocess.DEVNULL), 3)
    print(f"  `contextree ls --json` (new process): {ms(min(cli))}; of an empty directory "
          f"{ms(min(base))} (start-up)")

    plain_read = timed(lambda: read_all(root), 1)[0]
    index = SearchIndex.open(root)
    started = time.perf_counter()
    report = index.refresh()
    build = time.perf_counter() - started
    stats = index.stats()
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"  peak RSS of this process so far (generation, ls, build): {rss:.0f} MB")
    print(f"index build: {report.read_bytes / 1e6:.0f} MB in {build:.1f} s = "
          f"{report.read_bytes / 1e6 / build:.1f} MB/s (a plain read of the files: "
          f"{total / 1e6 / plain_read:.0f} MB/s); index {stats['bytes'] / 1e6:.0f} MB "
          f"= {stats['bytes'] / total:.2f}x the sessions")

    target = root / "p00" / "s0.jsonl"
    refreshes = []
    for i in range(20):
        with open(target, "ab") as f:
            f.write(orjson.dumps({"type": "message", "id": f"extra-{i}",
                                  "parent_id": "0-0" if i == 0 else f"extra-{i - 1}",
                                  "timestamp": "2026-02-01T00:00:00.000Z",
                                  "message": {"role": "user", "content": f"appended {i}"}})
                    + b"\n")
        refreshes += timed(lambda: index.refresh(files=[target]), 1)
    noop = timed(index.refresh, 5)
    print(f"refresh of the file after one append: p50 {ms(statistics.median(refreshes))}, "
          f"p95 {ms(p95(refreshes))}; a whole refresh, which walks and stats every file "
          f"to find what changed: {ms(min(noop))} when nothing did")
    index.close()

    for label, refresh in (("after a refresh (nothing changed)", True),
                           ("--no-refresh", False)):
        times = []
        for query in QUERIES:
            times += timed(lambda q=query, r=refresh: search_directory(root, q, refresh=r), 5)  # type: ignore[misc]
        print(f"search ({len(QUERIES)} queries x 5, {label}): p50 "
              f"{ms(statistics.median(times))}, p95 {ms(p95(times))}")
    prefixes = [min(timed(lambda q=q: search_directory(root, q, refresh=False), 3))  # type: ignore[misc]
                for q in ("sock*", "conf*", "3f9a*")]
    print(f"  prefix queries (sock*, conf*, 3f9a*: every word that starts so is merged): "
          f"{', '.join(ms(t) for t in prefixes)}")
    if shutil.which("grep"):
        grep = timed(lambda: subprocess.run(["grep", "-rl", "--exclude-dir=.contextree",
                                             "ECONNREFUSED", str(root)],
                                            stdout=subprocess.DEVNULL), 1)[0]
        print(f"  baseline: grep -rl ECONNREFUSED over the files: {ms(grep)}")


def bench_postgres(base: str, sessions: int) -> None:
    import psycopg

    sys.path.insert(0, str(Path(__file__).parents[1] / "tests"))
    from conformance import fresh_schema_url
    from contextree import Message, Session
    from contextree.entries import MessageEntry
    from contextree.storage import search
    from contextree.storage.postgres import create_schema
    from helpers import as_url

    conninfo, drop = fresh_schema_url(base)
    url = as_url(conninfo)
    try:
        create_schema(conninfo)
        rng = random.Random(2)
        corpus = _corpus(rng, 2 << 20)
        print(f"PostgreSQL: creating {sessions} sessions of 6 messages (COPY, the search "
              "trigger fills each row) ...", flush=True)
        started = time.perf_counter()
        with psycopg.connect(conninfo) as conn, conn.transaction():
            session_rows = []
            entry_rows = []
            for i in range(sessions):
                header = SessionHeader(id=f"s{i}", created_at="2026-01-01T00:00:00.000Z",
                                       cwd="/w")
                head = encode_line(header).decode().rstrip("\n")
                parent = None
                size = len(head.encode()) + 1
                for n in range(6):
                    at = rng.randrange(0, len(corpus) - 400)
                    text = corpus[at:at + 300] + (f" needle_{i}" if n == 2 and i % 997 == 0
                                                  else "")
                    line = encode_line(MessageEntry(
                        id=f"e{n}", parent_id=parent, timestamp="2026-01-01T00:00:00.000Z",
                        message=Message.user(text))).decode().rstrip("\n")
                    entry_rows.append((f"s{i}", f"e{n}", parent, "message", None, line))
                    size += len(line.encode()) + 1
                    parent = f"e{n}"
                session_rows.append((f"s{i}", head, "2026-01-01T00:00:00Z", parent, 6, size))
            with conn.cursor().copy("COPY contextree_sessions (id, header, created_at, leaf_id, "
                                    "entry_count, bytes) FROM STDIN") as copy:
                for row in session_rows:
                    copy.write_row(row)
            with conn.cursor().copy("COPY contextree_entries (session_id, id, parent_id, type, "
                                    "target_id, line) FROM STDIN") as copy:
                for row in entry_rows:
                    copy.write_row(row)
        print(f"  made in {time.perf_counter() - started:.0f} s "
              f"({len(entry_rows) / (time.perf_counter() - started):.0f} entries/s)")
        with psycopg.connect(conninfo, autocommit=True) as conn:
            conn.execute("ANALYZE")
        times = []
        for query in QUERIES:
            times += timed(lambda q=query: search(url, q), 5)  # type: ignore[misc]
        if os.environ.get("BENCH_SEARCH_PG_DETAIL"):
            for query in QUERIES:
                print(f"  {query}: {ms(min(timed(lambda q=query: search(url, q), 3)))}")
        print(f"PostgreSQL search over {sessions} sessions ({len(QUERIES)} queries x 5): "
              f"p50 {ms(statistics.median(times))}, p95 {ms(p95(times))}")

        def appends(n: int) -> float:
            with Session.create(url) as s:
                started = time.perf_counter()
                for k in range(n):
                    at = rng.randrange(0, len(corpus) - 2000)
                    s.append_message(Message.user(corpus[at:at + 1500] + f" {k}"))
                return n / (time.perf_counter() - started)

        def toggle(conn: psycopg.Connection, *statements: str) -> None:
            for statement in statements:
                conn.execute(statement)

        figures = {}
        with psycopg.connect(conninfo, autocommit=True) as conn:
            for label, statements in (
                    ("with the search columns and both indexes", ()),
                    ("without the trigram index", (
                        "DROP INDEX IF EXISTS contextree_entries_trgm_idx",)),
                    ("without any (trigger disabled, no index)", (
                        "ALTER TABLE contextree_entries DISABLE TRIGGER "
                        "contextree_entries_search",
                        "DROP INDEX contextree_entries_search_idx"))):
                toggle(conn, *statements)
                figures[label] = statistics.median(appends(300) for _ in range(3))
        floor = figures["without any (trigger disabled, no index)"]
        for label, rate in figures.items():
            print(f"PostgreSQL durable appends of 1.5 KB messages {label}: {rate:.0f}/s = "
                  f"{100 * (1 - rate / floor):.0f}% cost")
    finally:
        drop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sessions", type=int,
                        default=int(os.environ.get("BENCH_SEARCH_SESSIONS", 10_000)))
    parser.add_argument("--megabytes", type=float,
                        default=float(os.environ.get("BENCH_SEARCH_MB", 1024)))
    parser.add_argument("--pg-sessions", type=int,
                        default=int(os.environ.get("BENCH_SEARCH_PG_SESSIONS", 100_000)))
    parser.add_argument("--dir", type=Path, default=None,
                        help="where to generate the sessions (default: a temporary folder)")
    args = parser.parse_args()
    root = args.dir or Path(tempfile.mkdtemp(prefix="bench-search-"))
    root.mkdir(parents=True, exist_ok=True)
    try:
        bench_directory(root, args.sessions, args.megabytes)
    finally:
        if args.dir is None:
            shutil.rmtree(root, ignore_errors=True)
    base = os.environ.get("CONTEXTREE_PG_URL")
    if base and args.pg_sessions:
        bench_postgres(base, args.pg_sessions)
    elif not base:
        print("PostgreSQL: not measured (set CONTEXTREE_PG_URL)")


if __name__ == "__main__":
    main()
