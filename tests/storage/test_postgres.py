"""PostgreSQL storage: concurrent writers, killed workers, dropped connections, conflicts.

The backend-independent contract is in ``tests/conformance``; these tests are about what only
a shared database has. They run against ``CONTEXTREE_PG_URL`` or a server started for the
run, and skip (loudly) only when neither is possible.
"""

from __future__ import annotations

import contextlib
import json
import multiprocessing
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from contextree import Session
from contextree.entries import (
    AnyEntry,
    BranchSummaryEntry,
    MessageEntry,
    SessionHeader,
    SessionInfoEntry,
    now,
)
from contextree.errors import DuplicateId, SessionError

psycopg = pytest.importorskip("psycopg")
from psycopg.conninfo import conninfo_to_dict, make_conninfo  # noqa: E402
from psycopg_pool import ConnectionPool  # noqa: E402

from conformance import fresh_schema_url  # noqa: E402
from contextree.storage import postgres as pg  # noqa: E402
from contextree.storage.postgres import PostgresStorage  # noqa: E402
from contextree.storage.postgres._storage import _PATH  # noqa: E402
from helpers import message_entry as msg  # noqa: E402
from helpers import require_postgres  # noqa: E402

pytestmark = pytest.mark.postgres

SPAWN = multiprocessing.get_context("spawn")


@pytest.fixture(scope="module")
def url() -> str:
    return require_postgres()


def header() -> SessionHeader:
    return SessionHeader(id=str(uuid.uuid4()), created_at=now(), cwd="/w")


@pytest.fixture
def storages(url: str) -> Iterator[Callable[..., PostgresStorage]]:
    """``make(header=None, target=url)``: a new session, closed at the end of the test."""
    made: list[PostgresStorage] = []

    def make(h: SessionHeader | None = None, target: Any = None,
             entries: list[AnyEntry] | None = None) -> PostgresStorage:
        s = PostgresStorage.create(url if target is None else target, h or header(),
                                   entries or [])
        made.append(s)
        return s

    yield make
    for s in made:
        s.close()


def with_app_name(url: str, name: str) -> str:
    return make_conninfo(url, application_name=name)


def terminate(url: str, pid: int) -> None:
    with psycopg.connect(url, autocommit=True) as c:
        c.execute("SELECT pg_terminate_backend(%s)", [pid])
        for _ in range(100):  # wait until the backend is gone
            row = c.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = %s",
                            [pid]).fetchone()
            if row is not None and row[0] == 0:
                return
            time.sleep(0.05)


def db_rows(url: str, session_id: str) -> tuple[list[tuple[str, str | None]], int, str | None]:
    """(id, parent_id) of every entry, the session row's entry_count and leaf, read directly."""
    with psycopg.connect(url, autocommit=True) as c:
        rows = c.execute("SELECT id, parent_id FROM contextree_entries WHERE session_id = %s "
                         "ORDER BY seq", [session_id]).fetchall()
        srow = c.execute("SELECT entry_count, leaf_id FROM contextree_sessions WHERE id = %s",
                         [session_id]).fetchone()
    assert srow is not None
    return [(r[0], r[1]) for r in rows], int(srow[0]), srow[1]


# -- workers (module level so that spawned processes can import them) ----------------------------

def _session_worker(url: str, session_id: str, worker: int, n: int, barrier: Any) -> None:
    storage = PostgresStorage.open(url, session_id)
    session = Session(storage)
    barrier.wait(timeout=120)
    for i in range(n):
        session.append_message({"role": "user", "content": f"w{worker}-{i}"})
    storage.close()


def _hold_worker(url: str, session_id: str, ready: Any, go: Any) -> None:
    """Append five entries, then (once the test holds a lock on the fifth) a sixth, whose
    transaction stays open while it waits for that lock."""
    storage = PostgresStorage.open(url, session_id)
    for i in range(5):
        storage.append(msg(f"c{i}", f"c{i - 1}" if i else None))
    ready.set()
    go.wait(60)
    storage.append(msg("inflight", "c4"))


def _stream_worker(url: str, session_id: str, done: Any) -> None:
    """Append until killed; ``done`` counts the appends that returned (so committed)."""
    storage = PostgresStorage.open(url, session_id)
    session = Session(storage)
    i = 0
    while True:
        session.append_message({"role": "user", "content": f"s{i}"})
        i += 1
        done.value = i


def _run_workers(target: Callable[..., None], args_list: list[tuple[Any, ...]],
                 timeout: float = 240) -> None:
    procs = [SPAWN.Process(target=target, args=args) for args in args_list]
    for p in procs:
        p.start()
    deadline = time.monotonic() + timeout
    for p in procs:
        p.join(max(1.0, deadline - time.monotonic()))
    alive = [p for p in procs if p.is_alive()]
    for p in alive:
        p.kill()
    assert not alive, "workers did not finish in time"
    assert [p.exitcode for p in procs] == [0] * len(procs)


def _check_linear(storage: PostgresStorage, count: int) -> list[AnyEntry]:
    """Every entry present once, every parent present, and one linear chain to the leaf."""
    entries = list(storage.entries())
    assert len(entries) == count == len(storage)
    by_id = {e.id: e for e in entries}
    assert len(by_id) == count, "duplicate ids"
    assert all(e.parent_id is None or e.parent_id in by_id for e in entries)
    path = storage.path(storage.leaf_id)
    assert len(path) == count, "the chain forked: some entry is not on the leaf's path"
    assert sum(isinstance(e, MessageEntry) for e in path) == count
    return path


# -- concurrency ----------------------------------------------------------------------------------

@pytest.mark.slow
def test_eight_processes_append_to_one_session(url: str,
                                               storages: Callable[..., PostgresStorage]) -> None:
    workers, n = 8, 1000
    s = storages()
    barrier = SPAWN.Barrier(workers)
    _run_workers(_session_worker, [(url, s.session_id, w, n, barrier) for w in range(workers)])
    reader = PostgresStorage.open(url, s.session_id, readonly=True)
    try:
        path = _check_linear(reader, workers * n)
        # Each worker's messages appear in the order it appended them.
        seen: dict[str, list[int]] = {}
        for e in path:
            assert isinstance(e, MessageEntry) and isinstance(e.message.content, str)
            w, i = e.message.content.split("-")
            seen.setdefault(w, []).append(int(i))
        assert sorted(seen) == [f"w{w}" for w in range(workers)]
        assert all(v == list(range(n)) for v in seen.values())
        rows, count, leaf = db_rows(url, s.session_id)
        assert count == len(rows) == workers * n and leaf == path[-1].id
    finally:
        reader.close()


@pytest.mark.slow
def test_eight_processes_append_to_eight_sessions(url: str,
                                                  storages: Callable[..., PostgresStorage]) -> None:
    workers, n = 8, 1000
    sessions = [storages() for _ in range(workers)]
    barrier = SPAWN.Barrier(workers)
    _run_workers(_session_worker,
                 [(url, s.session_id, w, n, barrier) for w, s in enumerate(sessions)])
    for w, s in enumerate(sessions):
        path = _check_linear(s, n)
        assert [e.message.content for e in path] == [  # type: ignore[union-attr]
            f"w{w}-{i}" for i in range(n)]


def test_threads_share_one_storage(storages: Callable[..., PostgresStorage]) -> None:
    s = storages()
    session = Session(s)

    def work(t: int) -> None:
        for i in range(100):
            session.append_message({"role": "user", "content": f"t{t}-{i}"})

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    _check_linear(s, 400)


# -- faults ---------------------------------------------------------------------------------------

@contextlib.contextmanager
def entry_locked(url: str, session_id: str, entry_id: str) -> Iterator[Callable[[], None]]:
    """Hold a row lock on an entry from a second connection until ``release()`` (or the end).

    An append whose parent is that entry then stops in the middle of its transaction: the
    entry is inserted, the session row locked, and the foreign-key check on the parent waits.
    """
    conn = psycopg.connect(url)  # not autocommit: the lock lasts until the rollback
    conn.execute("SELECT 1 FROM contextree_entries WHERE session_id = %s AND id = %s "
                 "FOR UPDATE", [session_id, entry_id])
    held = [True]

    def release() -> None:
        if held[0]:
            held[0] = False
            conn.rollback()

    try:
        yield release
    finally:
        release()
        conn.close()


def blocked_backend(url: str, app: str, timeout: float = 60) -> int:
    """The pid of the backend of ``app`` once it waits for a lock inside an append."""
    deadline = time.monotonic() + timeout
    with psycopg.connect(url, autocommit=True) as c:
        while time.monotonic() < deadline:
            row = c.execute("SELECT pid FROM pg_stat_activity WHERE application_name = %s "
                            "AND wait_event_type = 'Lock'", [app]).fetchone()
            if row is not None:
                return int(row[0])
            time.sleep(0.01)
    raise AssertionError("the append transaction never started")


def assert_session_locked(url: str, session_id: str) -> None:
    with psycopg.connect(url, autocommit=True) as c, pytest.raises(
        psycopg.errors.LockNotAvailable
    ), c.transaction():
        c.execute("SET LOCAL lock_timeout = '100ms'")
        c.execute("SELECT 1 FROM contextree_sessions WHERE id = %s FOR UPDATE", [session_id])


def test_worker_killed_mid_transaction_loses_nothing_committed(
    url: str, storages: Callable[..., PostgresStorage]
) -> None:
    s = storages()
    app = f"ctx-{uuid.uuid4().hex[:8]}"
    ready, go = SPAWN.Event(), SPAWN.Event()
    p = SPAWN.Process(target=_hold_worker,
                      args=(with_app_name(url, app), s.session_id, ready, go))
    p.start()
    try:
        assert ready.wait(120)
        with entry_locked(url, s.session_id, "c4"):
            go.set()
            try:
                backend_pid = blocked_backend(url, app)
                # Inside the open transaction: the entry is written but invisible, the
                # session locked.
                assert "inflight" not in s
                assert_session_locked(url, s.session_id)
            finally:
                os.kill(p.pid, signal.SIGKILL)  # type: ignore[arg-type]
                p.join(30)
    finally:
        if p.is_alive():
            p.kill()
    assert p.exitcode == -signal.SIGKILL
    with psycopg.connect(url, autocommit=True) as c:
        for _ in range(400):
            row = c.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = %s",
                            [backend_pid]).fetchone()
            if row is not None and row[0] == 0:
                break
            time.sleep(0.05)
    # The statement in flight commits whole or not at all (the server decides, not the dead
    # client); everything committed before is there, and the session row agrees.
    rows, count, leaf = db_rows(url, s.session_id)
    ids = [r[0] for r in rows]
    assert ids in (["c0", "c1", "c2", "c3", "c4"], ["c0", "c1", "c2", "c3", "c4", "inflight"])
    assert count == len(rows) and leaf == ids[-1]
    again = PostgresStorage.open(url, s.session_id)
    try:
        again.append(msg("after", again.leaf_id))  # the session is not left locked
        assert [e.id for e in again.path(again.leaf_id)] == [*ids, "after"]
    finally:
        again.close()


def test_worker_killed_while_streaming_appends(url: str,
                                               storages: Callable[..., PostgresStorage]) -> None:
    s = storages()
    done = SPAWN.Value("q", 0)
    p = SPAWN.Process(target=_stream_worker, args=(url, s.session_id, done))
    p.start()
    try:
        deadline = time.monotonic() + 120
        while done.value < 200 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert done.value >= 200
    finally:
        os.kill(p.pid, signal.SIGKILL)  # type: ignore[arg-type]
        p.join(30)
    returned = done.value
    time.sleep(0.5)
    rows, count, _leaf = db_rows(url, s.session_id)
    assert count == len(rows)  # the session row and the entries never disagree
    assert returned <= len(rows) <= returned + 1  # all acknowledged ones, maybe one more
    fresh = PostgresStorage.open(url, s.session_id)
    try:
        path = _check_linear(fresh, len(rows))
        assert [e.message.content for e in path] == [  # type: ignore[union-attr]
            f"s{i}" for i in range(len(rows))]
    finally:
        fresh.close()


class Killer(threading.Thread):
    """Terminates ``app``'s backend while it holds an append transaction open (waiting for
    the lock ``release`` gives up), then releases the lock."""

    def __init__(self, url: str, app: str, release: Callable[[], None]) -> None:
        super().__init__(daemon=True)
        self.url, self.app, self.release = url, app, release
        self.killed: int | None = None
        self.start()

    def run(self) -> None:
        try:
            pid = blocked_backend(self.url, self.app)
            terminate(self.url, pid)
            self.killed = pid
        finally:
            self.release()

    def wait(self) -> None:
        self.join(30)
        assert self.killed is not None, "the backend was not terminated"


def test_connection_dropped_mid_transaction_is_retried(
    url: str, storages: Callable[..., PostgresStorage]
) -> None:
    app = f"ctx-{uuid.uuid4().hex[:8]}"
    s = storages(target=with_app_name(url, app), entries=[msg("a", None)])
    with entry_locked(url, s.session_id, "a") as release:  # the first attempt waits
        killer = Killer(url, app, release)
        s.append(msg("b", "a"))
        killer.wait()
    rows, count, leaf = db_rows(url, s.session_id)
    assert rows == [("a", None), ("b", "a")] and count == 2 and leaf == "b"
    assert s.leaf_id == "b" and len(s) == 2


def test_connection_dropped_after_commit_is_not_applied_twice(
    url: str, storages: Callable[..., PostgresStorage]
) -> None:
    s = storages(entries=[msg("a", None)])
    fired: list[bool] = []

    def drop(conn: Any) -> None:
        if not fired:
            fired.append(True)
            terminate(url, conn.info.backend_pid)
            conn.execute("SELECT 1")  # the client learns of the drop after the commit

    s._after_commit = drop
    s.append(msg("b", "a"))  # retried: the retry finds the commit and stops
    assert fired
    rows, count, leaf = db_rows(url, s.session_id)
    assert rows == [("a", None), ("b", "a")] and count == 2 and leaf == "b"
    s.append(msg("c", "b"))
    assert [e.id for e in s.path(s.leaf_id)] == ["a", "b", "c"]


def test_a_retry_that_finds_a_different_entry_under_its_id_is_a_duplicate(
    url: str, storages: Callable[..., PostgresStorage]
) -> None:
    # The first attempt is lost before it commits, and another writer has stored a different
    # entry under the same id: the retry must not take that entry for its own.
    app = f"ctx-{uuid.uuid4().hex[:8]}"
    s = storages(target=with_app_name(url, app), entries=[msg("a", None)])
    assert s.leaf_id == "a"  # the pool now holds an idle connection
    other = PostgresStorage.open(url, s.session_id)
    try:
        other.append(msg("b", "a", "theirs"))
    finally:
        other.close()
    with psycopg.connect(url, autocommit=True) as c:
        pids = [r[0] for r in c.execute(
            "SELECT pid FROM pg_stat_activity WHERE application_name = %s", [app])]
    for pid in pids:
        terminate(url, pid)
    with pytest.raises(DuplicateId, match="different entry"):
        s.append(msg("b", "a", "mine"))
    rows, count, _ = db_rows(url, s.session_id)
    assert rows == [("a", None), ("b", "a")] and count == 2
    entry = s.get("b")
    assert isinstance(entry, MessageEntry) and entry.message.content == "theirs"
    # Through a Session the duplicate is retried under a fresh id: nothing is lost.
    session = Session(s)
    new = session.append_message({"role": "user", "content": "mine"})
    assert new != "b" and session.get_entry(new) is not None


def test_connection_dropped_on_a_given_connection_is_reported(
    url: str, storages: Callable[..., PostgresStorage]
) -> None:
    app = f"ctx-{uuid.uuid4().hex[:8]}"
    conn = psycopg.connect(with_app_name(url, app), autocommit=True)
    try:
        s = storages(target=conn, entries=[msg("a", None)])
        with entry_locked(url, s.session_id, "a") as release:
            killer = Killer(url, app, release)
            with pytest.raises(SessionError) as e:
                s.append(msg("b", "a"))
            killer.wait()
        assert e.value.code == "storage" and "connection" in str(e.value)
        rows, count, leaf = db_rows(url, s.session_id)
        assert rows == [("a", None)] and count == 1 and leaf == "a"  # not half-applied
    finally:
        conn.close()


def test_idle_connections_killed_between_calls_are_replaced(
    url: str, storages: Callable[..., PostgresStorage]
) -> None:
    app = f"ctx-{uuid.uuid4().hex[:8]}"
    s = storages(target=with_app_name(url, app), entries=[msg("a", None)])
    assert s.leaf_id == "a"

    def kill_all() -> None:
        with psycopg.connect(url, autocommit=True) as c:
            pids = [r[0] for r in c.execute(
                "SELECT pid FROM pg_stat_activity WHERE application_name = %s", [app])]
        assert pids
        for pid in pids:
            terminate(url, pid)

    kill_all()
    assert s.leaf_id == "a"  # a read, retried on a fresh connection
    kill_all()
    s.append(msg("b", "a"))  # a write, likewise
    assert [e.id for e in s.path(s.leaf_id)] == ["a", "b"]


def test_server_unreachable_is_a_storage_error() -> None:
    with pytest.raises(SessionError) as e:
        PostgresStorage.open("postgresql://postgres@127.0.0.1:1/postgres", "x")
    assert e.value.code == "storage" and "could not connect" in str(e.value)


# -- ordering: re-parenting and conflicts -----------------------------------------------------------

def test_stale_writer_is_reparented_onto_the_current_leaf(
    url: str, storages: Callable[..., PostgresStorage]
) -> None:
    a = storages(entries=[msg("root", None)])
    b = PostgresStorage.open(url, a.session_id)
    try:
        assert a.leaf_id == "root" and b.leaf_id == "root"
        a.append(msg("x", "root"))
        b.append(msg("y", "root"))  # b's view of the leaf is stale: y goes after x
        stored = b.get("y")
        assert stored is not None and stored.parent_id == "x"
        assert b.leaf_id == "y" and a.leaf_id == "y"
        # A deliberate branch (a parent that is not the last seen leaf) is kept.
        a.append(msg("z", "root"))
        assert a.get("z").parent_id == "root"  # type: ignore[union-attr]
        # A branch summary stays attached to the entry it summarises from.
        assert b.leaf_id == "z"
        a.append(msg("w", "z"))
        b.append(BranchSummaryEntry("bs", "z", now(), from_id="z", summary="s"))
        assert b.get("bs").parent_id == "z"  # type: ignore[union-attr]
    finally:
        b.close()


def test_conflict_when_expected_leaf_is_stale(
    url: str, storages: Callable[..., PostgresStorage]
) -> None:
    a = storages()
    b = PostgresStorage.open(url, a.session_id)
    try:
        a.append(msg("r", None), expected_leaf=None)
        with pytest.raises(SessionError) as e:
            b.append(msg("s", None), expected_leaf=None)
        assert e.value.code == "conflict"
        a.append(msg("t", "r"), expected_leaf="r")
        with pytest.raises(SessionError) as e:
            b.append(msg("u", "r"), expected_leaf="r")
        assert e.value.code == "conflict" and "'t'" in str(e.value)
        assert "u" not in b and len(b) == 2
        b.append(msg("u", "t"), expected_leaf="t")
        assert [x.id for x in a.path(a.leaf_id)] == ["r", "t", "u"]
    finally:
        b.close()


# -- batches and durability ------------------------------------------------------------------------

def test_a_batch_is_one_transaction(url: str, storages: Callable[..., PostgresStorage]) -> None:
    s = storages(entries=[msg("a", None)])
    session = Session(s)
    made: list[str] = []
    with pytest.raises(RuntimeError, match="boom"), session.batch():
        for i in range(3):
            made.append(session.append_message({"role": "user", "content": f"b{i}"}))
        assert session.leaf_id == made[-1] and len(session) == 4  # seen inside the batch
        assert db_rows(url, s.session_id) == ([("a", None)], 1, "a")  # not committed yet
        raise RuntimeError("boom")
    # Nothing of the batch was stored, and the storage forgot it too.
    assert db_rows(url, s.session_id) == ([("a", None)], 1, "a")
    assert s.leaf_id == "a" and len(s) == 1 and not any(m in s for m in made)
    assert [e.id for e in s.entries()] == ["a"]
    # A batch that ends normally commits all its appends at once.
    with session.batch():
        x = session.append_message({"role": "user", "content": "x"})
        y = session.append_message({"role": "assistant", "content": "y"})
        assert db_rows(url, s.session_id)[0] == [("a", None)]
    assert db_rows(url, s.session_id) == ([("a", None), (x, "a"), (y, x)], 3, y)
    with PostgresStorage.open(url, s.session_id) as again:
        assert [e.id for e in again.path(again.leaf_id)] == ["a", x, y]


def test_a_refused_append_ends_the_batch_with_nothing_stored(
    url: str, storages: Callable[..., PostgresStorage]
) -> None:
    s = storages(entries=[msg("a", None)])
    with pytest.raises(SessionError), s.batch():
        s.append(msg("b", "a"))
        s.append(msg("b", "b"))  # a duplicate id: refused, the transaction goes on
    assert db_rows(url, s.session_id) == ([("a", None)], 1, "a")
    assert s.leaf_id == "a" and "b" not in s


def test_durable_false_is_synchronous_commit_off(
    url: str, storages: Callable[..., PostgresStorage]
) -> None:
    conn = psycopg.connect(url, autocommit=True)  # the application's own connection
    try:
        made = storages(entries=[msg("a", None)])
        for durable, expected in ((False, "off"), (True, "on")):
            s = PostgresStorage.open(conn, made.session_id, durable=durable)
            with s.batch():
                s.append(msg(f"d-{expected}", s.leaf_id))
                # The setting of contextree's transaction, seen from inside it.
                assert conn.execute("SHOW synchronous_commit").fetchone() == (expected,)
            assert conn.execute("SHOW synchronous_commit").fetchone() == ("on",)  # not leaked
            s.append(msg(f"e-{expected}", s.leaf_id))
        assert conn.execute("SHOW synchronous_commit").fetchone() == ("on",)
        again = PostgresStorage.open(url, made.session_id)
        assert [e.id for e in again.path(again.leaf_id)] == [
            "a", "d-off", "e-off", "d-on", "e-on"]
        again.close()
    finally:
        conn.close()


# -- schema, listing, targets ---------------------------------------------------------------------

def test_schema_is_explicit_idempotent_and_versioned(url: str) -> None:
    empty, drop = fresh_schema_url(url)
    try:
        assert pg.schema_version(empty) is None
        with pytest.raises(SessionError) as e:
            PostgresStorage.open(empty, "nope")
        assert e.value.code == "storage" and "create_schema" in str(e.value)
        with pytest.raises(SessionError) as e:
            PostgresStorage.create(empty, header())
        assert "create_schema" in str(e.value)
        with pytest.raises(SessionError):
            pg.list_sessions(empty)
        # Many processes may run the migration at once.
        errors: list[BaseException] = []

        def migrate() -> None:
            try:
                assert pg.create_schema(empty) == pg.SCHEMA_VERSION
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)

        threads = [threading.Thread(target=migrate) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors
        assert pg.create_schema(empty) == pg.SCHEMA_VERSION
        assert pg.schema_version(empty) == pg.SCHEMA_VERSION
        with PostgresStorage.create(empty, header()) as s:
            s.append(msg("a", None))
    finally:
        drop()


def test_list_sessions_and_delete(url: str) -> None:
    empty, drop = fresh_schema_url(url)
    try:
        pg.create_schema(empty)
        made = []
        for i in range(3):
            s = PostgresStorage.create(empty, header())
            s.append(msg("a", None))
            s.append(SessionInfoEntry("n", "a", now(), name=f"name{i}"))
            made.append(s.session_id)
            s.close()
        listed = pg.list_sessions(empty)
        assert [x.id for x in listed] == made[::-1]  # most recently updated first
        assert [x.name for x in listed] == ["name2", "name1", "name0"]
        assert all(x.entry_count == 2 and x.leaf_id == "n" for x in listed)
        assert listed[0].header.id == made[2]
        assert [x.id for x in pg.list_sessions(empty, limit=1)] == [made[2]]
        with psycopg.connect(empty) as c:
            plan = "\n".join(r[0] for r in c.execute(
                "EXPLAIN SELECT id FROM contextree_sessions ORDER BY updated_at DESC, id "
                "LIMIT 5"))
        assert "contextree_sessions_updated_idx" in plan or "Seq Scan" in plan
        assert pg.delete_session(empty, made[0]) is True
        assert pg.delete_session(empty, made[0]) is False
        assert [x.id for x in pg.list_sessions(empty)] == made[:0:-1]
        with pytest.raises(SessionError) as e:
            PostgresStorage.open(empty, made[0])
        assert e.value.code == "not_found"
    finally:
        drop()


def test_lookups_use_the_keys_for_a_session_newer_than_the_statistics(
    url: str, storages: Callable[..., PostgresStorage]
) -> None:
    for _ in range(3):
        storages(entries=[msg(f"e{i}", f"e{i - 1}" if i else None) for i in range(300)])
    with psycopg.connect(url, autocommit=True) as c:
        c.execute("ANALYZE contextree_entries")
    s = storages(entries=[msg(f"e{i}", f"e{i - 1}" if i else None) for i in range(3000)])

    def plan(sql: str, params: Any) -> str:
        with psycopg.connect(url, autocommit=True) as c:
            return "\n".join(r[0] for r in c.execute(f"EXPLAIN {sql}", params))

    path_plan = plan(_PATH, {"s": s.session_id, "leaf": "e2999"})
    assert "Index Cond: ((session_id = " in path_plan and "(id = p_1.parent_id)" in path_plan
    get_plan = plan("SELECT line FROM contextree_entries WHERE session_id = %s AND id = %s",
                    [s.session_id, "e5"])
    assert "contextree_entries_pkey" in get_plan
    with PostgresStorage.open(url, s.session_id) as again:
        assert len(again.path("e2999")) == 3000


def test_jsonl_to_postgres_and_back_is_byte_identical(
    url: str, storages: Callable[..., PostgresStorage], tmp_path: Any
) -> None:
    from contextree.entries import decode_line
    from contextree.storage import JsonlStorage

    src = Session.create(tmp_path / "a.jsonl", metadata={"k": 1})
    a = src.append_message({"role": "user", "content": "héllo", "x_new": [1, {"y": None}]})
    src.append_message({"role": "assistant", "content": [{"type": "text", "text": "hi"},
                                                         {"type": "future_part", "z": 1}]})
    src.set_label(a, "first")
    src.set_name("copied")
    src.move_to(a, summary="other way")
    future = {"type": "future", "id": "fut1", "parent_id": src.leaf_id, "timestamp": "t",
              "q": [1.5]}
    src.append(decode_line(json.dumps(future)))  # type: ignore[arg-type]
    src.close()
    original = (tmp_path / "a.jsonl").read_bytes()
    js = JsonlStorage.open(tmp_path / "a.jsonl", readonly=True)
    pgs = storages(js.header, entries=list(js.entries()))
    again = PostgresStorage.open(url, pgs.session_id)
    try:
        JsonlStorage.create(tmp_path / "b.jsonl", again.header, list(again.entries())).close()
        assert (tmp_path / "b.jsonl").read_bytes() == original
        assert again.name == "copied" and again.labels() == {a: "first"}
        assert again.leaf_id == "fut1"
    finally:
        again.close()


def test_create_existing_session_fails_with_exists(
    url: str, storages: Callable[..., PostgresStorage]
) -> None:
    s = storages()
    with pytest.raises(SessionError) as e:
        PostgresStorage.create(url, s.header)
    assert e.value.code == "exists"


def test_accepts_a_connection_or_a_pool_and_leaves_them_open(
    url: str, storages: Callable[..., PostgresStorage]
) -> None:
    conn = psycopg.connect(url)  # not autocommit: contextree switches it (it is idle)
    pool: ConnectionPool[Any] = ConnectionPool(url, min_size=1, max_size=2, open=True)
    try:
        s1 = storages(target=conn)
        s1.append(msg("a", None))
        s2 = PostgresStorage.open(pool, s1.session_id)
        s2.append(msg("b", "a"))
        assert [e.id for e in s1.path(s1.leaf_id)] == ["a", "b"]
        s2.close()
        s1.close()
        assert not conn.closed and not pool.closed
        assert conn.execute("SELECT 1").fetchone() == (1,)
        with pool.connection() as c:
            assert c.execute("SELECT 1").fetchone() == (1,)
        assert s1.readonly
        with pytest.raises(SessionError):
            s1.path(s1.header.id)
    finally:
        pool.close()
        conn.close()


def test_connection_in_a_transaction_is_refused(
    url: str, storages: Callable[..., PostgresStorage]
) -> None:
    conn = psycopg.connect(url)
    try:
        conn.execute("SELECT 1")  # opens a transaction (not autocommit)
        with pytest.raises(SessionError) as e:
            storages(target=conn)
        assert "transaction in progress" in str(e.value)
    finally:
        conn.close()


def test_location_never_shows_the_password(url: str,
                                           storages: Callable[..., PostgresStorage]) -> None:
    secret = make_conninfo(url, password="s3cret-pw")
    s = storages(target=secret)
    assert "s3cret-pw" not in s.location
    assert s.location.startswith("postgresql://") and s.location.endswith(f"#{s.session_id}")
    assert conninfo_to_dict(secret)["password"] == "s3cret-pw"
    assert pg.split_session_url("postgresql://h/db#abc") == ("postgresql://h/db", "abc")
    assert pg.split_session_url("postgresql://h/db") == ("postgresql://h/db", None)


def test_missing_psycopg_names_the_extra() -> None:
    code = ("import sys; sys.modules['psycopg'] = None\n"
            "try:\n    import contextree.storage.postgres\n"
            "except ImportError as e:\n    print(e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert "contextree[postgres]" in out
