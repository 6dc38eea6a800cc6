"""Search and listing over many sessions: ``ls`` warm, the index build, one append's refresh,
``search`` p95, and the same on PostgreSQL (search p95, append cost of the search columns).

    python bench/bench_search.py                       # 10,000 sessions, 1 GB of text
    python bench/bench_search.py --sessions 1000 --megabytes 50 --pg-sessions 5000  # quick
    python bench/bench_search.py --skip-directory --pg-sessions 0  # PostgreSQL append cost only
    BENCH_SEARCH_SESSIONS=... BENCH_SEARCH_MB=... BENCH_SEARCH_PG_SESSIONS=...  (the same)

PostgreSQL is measured when ``CONTEXTREE_PG_URL`` is set (a scratch schema is made and
dropped). Each figure is printed beside a baseline measured in the same run: ``ls`` without
the cache, a plain read of every session file (what any index must at least do), ``grep
-rl`` over the same files, and appends without the vector and the indexes search uses.
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


def make_sessions(conninfo: str, sessions: int, rng: random.Random, corpus: str) -> int:
    """``sessions`` sessions of 6 messages in the database, by COPY of the rows
    ``PostgresStorage.create`` writes (their vectors made as an append makes them); the
    number of entries."""
    import psycopg

    from contextree import Message
    from contextree.entries import MessageEntry
    from contextree.storage.postgres._codec import entry_row
    from contextree.storage.postgres._words import search_columns

    entries = 0
    with psycopg.connect(conninfo) as conn, conn.transaction():
        for first in range(0, sessions, 5000):
            session_rows = []
            entry_rows = []
            for i in range(first, min(sessions, first + 5000)):
                header = SessionHeader(id=f"s{i}", created_at="2026-01-01T00:00:00.000Z",
                                       cwd=f"/w/p{i % 100}")
                head = encode_line(header).decode().rstrip("\n")
                parent = None
                size = len(head.encode()) + 1
                for n in range(6):
                    at = rng.randrange(0, len(corpus) - 400)
                    text = corpus[at:at + 300] + (f" needle_{i}" if n == 2 and i % 997 == 0
                                                  else "")
                    stamp = f"2026-01-{1 + i % 28:02}T00:00:{n:02}.000Z"
                    row = entry_row(f"s{i}", MessageEntry(
                        id=f"e{n}", parent_id=parent, timestamp=stamp,
                        message=Message.user(text)))
                    entry_rows.append((*row, search_columns(row[5], words=False)[0]))
                    size += len(row[5].encode()) + 1
                    parent = f"e{n}"
                session_rows.append((f"s{i}", head, "2026-01-01T00:00:00Z", parent, 6, size))
            with conn.cursor().copy("COPY contextree_sessions (id, header, created_at, "
                                    "leaf_id, entry_count, bytes) FROM STDIN") as copy:
                for srow in session_rows:
                    copy.write_row(srow)
            with conn.cursor().copy("COPY contextree_entries (session_id, id, parent_id, "
                                    "type, target_id, line, search) FROM STDIN") as copy:
                for erow in entry_rows:
                    copy.write_row(erow)
            entries += len(entry_rows)
    return entries


def bench_postgres(base: str, sessions: int) -> None:
    """Search p95 over ``sessions`` sessions on PostgreSQL."""
    import psycopg

    sys.path.insert(0, str(Path(__file__).parents[1] / "tests"))
    from conformance import fresh_schema_url
    from contextree.storage import search
    from contextree.storage.postgres import create_schema
    from helpers import as_url

    conninfo, drop = fresh_schema_url(base)
    url = as_url(conninfo)
    rng = random.Random(2)
    corpus = _corpus(rng, 2 << 20)
    try:
        create_schema(conninfo)
        with psycopg.connect(conninfo, autocommit=True) as conn:
            settings = {k: conn.execute(f"SHOW {k}").fetchone()[0]  # type: ignore[index]
                        for k in ("server_version", "fsync", "synchronous_commit")}
        print(f"PostgreSQL {settings['server_version']} (fsync={settings['fsync']}, "
              f"synchronous_commit={settings['synchronous_commit']}): creating {sessions} "
              "sessions of 6 messages (COPY of the rows PostgresStorage.create writes, "
              "vectors made by the client as an append makes them) ...", flush=True)
        started = time.perf_counter()
        entries = make_sessions(conninfo, sessions, rng, corpus)
        took = time.perf_counter() - started
        print(f"  made in {took:.0f} s ({entries / took:.0f} entries/s)")
        with psycopg.connect(conninfo, autocommit=True) as conn:
            conn.execute("VACUUM ANALYZE")
        times = []
        detail = []
        for query in QUERIES:
            these = timed(lambda q=query: search(url, q), 5)  # type: ignore[misc]
            times += these
            detail.append(f"{query} {ms(statistics.median(these))}")
        print(f"PostgreSQL search over {sessions} sessions ({entries} entries; "
              f"{len(QUERIES)} queries x 5, a new connection each): "
              f"p50 {ms(statistics.median(times))}, p95 {ms(p95(times))}")
        print(f"  medians: {'; '.join(detail)}")
    finally:
        drop()


def bench_postgres_appends(base: str, rounds: int) -> None:
    """The append cost of search: three fresh schemas (no search, search, search with the
    trigram index), rounds interleaved in a rotating order so that the machine's load and
    its drift fall on each alike; the cost is the median of each round's paired ratio."""
    import psycopg

    sys.path.insert(0, str(Path(__file__).parents[1] / "tests"))
    from conformance import fresh_schema_url
    from contextree import Message, Session
    from contextree.storage.postgres import _storage, create_schema

    rng = random.Random(3)
    corpus = _corpus(rng, 2 << 20)
    with psycopg.connect(base, autocommit=True) as conn:
        settings = {k: conn.execute(f"SHOW {k}").fetchone()[0]  # type: ignore[index]
                    for k in ("server_version", "fsync", "synchronous_commit")}
    # "no search": no vector sent (the storage's search_columns replaced by one that returns
    # nothing), no GIN index and no index of the entries' order (search's newest first),
    # i.e. appends as before search.
    # Besides appends/s (wall clock, noisy on a shared machine), the CPU time of this
    # process and of the server's backend (/proc/PID/schedstat) per append, the merge of
    # the GIN indexes' pending lists included (see ``appends``).
    places: dict[str, str] = {}
    drops = []
    real = _storage.search_columns
    try:
        for label in ("no search", "search", "search + trigram index"):
            info, dropper = fresh_schema_url(base)
            drops.append(dropper)
            create_schema(info, trigrams=label.endswith("index"))
            if label == "no search":  # the indexes that only search uses go too
                with psycopg.connect(info, autocommit=True) as conn:
                    conn.execute("DROP INDEX contextree_entries_search_idx")
                    conn.execute("DROP INDEX contextree_entries_newest_idx")
            places[label] = info
        nothing = lambda line, words=False, entry=None, encoding=None: (None, None)  # noqa: E731

        def cpu_ns(pid: int) -> int:
            return int(Path(f"/proc/{pid}/schedstat").read_text().split()[0])

        def appends(info: str, n: int) -> tuple[float, float, float]:
            conn = psycopg.connect(info, autocommit=True)
            backend = conn.info.backend_pid
            header = SessionHeader(id=str(uuid.uuid4()), created_at="2026-01-01T00:00:00Z")
            with Session(_storage.PostgresStorage.create(conn, header)) as s:
                for k in range(20):  # warm up: the prepared statement, the caches
                    s.append_message(Message.user(f"warm {k}"))
                texts = [corpus[at:at + 1500] + f" {k}" for k, at in enumerate(
                    rng.randrange(0, len(corpus) - 2000) for _ in range(n))]
                server, client = cpu_ns(backend), time.process_time()
                started = time.perf_counter()
                for text in texts:
                    s.append_message(Message.user(text))
                # The GIN indexes put new entries on a pending list and merge it into the
                # index later (past 4 MB: in an append; or in autovacuum): work that these
                # appends caused, paid here so that each round counts its own share.
                for index in conn.execute(
                        "SELECT indexrelid::regclass::text FROM pg_index i JOIN pg_class c "
                        "ON c.oid = i.indexrelid JOIN pg_am a ON a.oid = c.relam "
                        "WHERE a.amname = 'gin' AND i.indrelid = "
                        "'contextree_entries'::regclass").fetchall():
                    conn.execute("SELECT gin_clean_pending_list(%s::regclass)", index)
                wall = time.perf_counter() - started
                client = time.process_time() - client
                server = (cpu_ns(backend) - server) / 1e9
            conn.close()
            return n / wall, client / n * 1e6, server / n * 1e6

        labels = list(places)
        runs: dict[str, list[tuple[float, float, float]]] = {label: [] for label in places}
        for r in range(rounds):
            for label in labels[r % 3:] + labels[:r % 3]:  # each goes first in turn
                _storage.search_columns = nothing if label == "no search" else real  # type: ignore[assignment]
                runs[label].append(appends(places[label], 400))
                if os.environ.get("BENCH_SEARCH_PG_DETAIL"):
                    print(f"  {label}: {runs[label][-1]}", flush=True)
    finally:
        _storage.search_columns = real  # type: ignore[assignment]
        for dropper in drops:
            dropper()

    base_runs = runs["no search"]
    print(f"PostgreSQL {settings['server_version']} (fsync={settings['fsync']}, "
          f"synchronous_commit={settings['synchronous_commit']}): durable appends of 1.5 KB "
          f"messages, one writer, {rounds} rounds of 400 in a rotating order:")
    for label in places:
        rates = [r[0] for r in runs[label]]
        cpus = [r[1] + r[2] for r in runs[label]]
        fewer = sorted(100 * (1 - r[0] / b[0]) for r, b in zip(runs[label], base_runs, strict=True))
        more = sorted(100 * ((r[1] + r[2]) / (b[1] + b[2]) - 1)
                      for r, b in zip(runs[label], base_runs, strict=True))
        quart = statistics.quantiles(fewer, n=4) if len(fewer) > 1 else [fewer[0]] * 3
        client = statistics.median(r[1] for r in runs[label])
        server = statistics.median(r[2] for r in runs[label])
        print(f"  {label:24} {statistics.median(rates):5.0f}/s: "
              f"{statistics.median(fewer):5.1f}% fewer than the round's no-search "
              f"(quartiles {quart[0]:.1f} .. {quart[2]:.1f}); CPU per append "
              f"{statistics.median(cpus):4.0f} us (client {client:4.0f} + server "
              f"{server:4.0f}), {statistics.median(more):5.1f}% more")
    print("  goal: search costs <= 15% of append throughput")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sessions", type=int,
                        default=int(os.environ.get("BENCH_SEARCH_SESSIONS", 10_000)))
    parser.add_argument("--megabytes", type=float,
                        default=float(os.environ.get("BENCH_SEARCH_MB", 1024)))
    parser.add_argument("--pg-sessions", type=int,
                        default=int(os.environ.get("BENCH_SEARCH_PG_SESSIONS", 100_000)))
    parser.add_argument("--pg-rounds", type=int, default=15,
                        help="interleaved rounds of 400 appends per PostgreSQL setting "
                        "(0: no append cost)")
    parser.add_argument("--skip-directory", action="store_true",
                        help="measure PostgreSQL only")
    parser.add_argument("--dir", type=Path, default=None,
                        help="where to generate the sessions (default: a temporary folder)")
    args = parser.parse_args()
    root = args.dir or Path(tempfile.mkdtemp(prefix="bench-search-"))
    root.mkdir(parents=True, exist_ok=True)
    try:
        if not args.skip_directory:
            bench_directory(root, args.sessions, args.megabytes)
    finally:
        if args.dir is None:
            shutil.rmtree(root, ignore_errors=True)
    base = os.environ.get("CONTEXTREE_PG_URL")
    if base and args.pg_sessions:
        bench_postgres(base, args.pg_sessions)
    if base and args.pg_rounds:
        bench_postgres_appends(base, args.pg_rounds)
    if not base:
        print("PostgreSQL: not measured (set CONTEXTREE_PG_URL)")


if __name__ == "__main__":
    main()
