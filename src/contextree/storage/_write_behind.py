"""Rows written to SQLite by a thread of their own while the caller reads on: an index build
keeps two cores busy, one parsing session files and one in SQLite (FTS5's tokenizer and
merges), which runs without the GIL.

Each batch of rows goes in as a few statements of many rows each
(``INSERT ... VALUES (...), (...)``, see ``Table.statements``), not as one statement per row: a thread that gives up the GIL for every row waits up to the
interpreter's switch interval (5 ms) to get it back while the other thread is busy, and would
spend the build waiting. ``WriteBehind`` keeps the order of what it is given; ``sync`` waits
until all of it is written and raises what a write raised; the caller calls it before
anything else uses the connection, so that two threads never use it at once. At most
``DEPTH`` batches wait, so memory stays bounded.
"""

from __future__ import annotations

import queue
import sqlite3
import threading
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["DEPTH", "Table", "WriteBehind"]

DEPTH = 1  # batches queued behind the one being written


class Table:
    """An insert into one table, of rows given as tuples of ``columns``."""

    def __init__(self, name: str, columns: Sequence[str], *, replace: bool = False) -> None:
        verb = "INSERT OR REPLACE" if replace else "INSERT"
        self._head = f"{verb} INTO {name} ({', '.join(columns)}) VALUES "
        self._row = f"({', '.join('?' * len(columns))})"
        self.width = len(columns)

    def statements(self, rows: list[tuple[Any, ...]],
                   most: int) -> list[tuple[str, list[Any]]]:
        """``rows`` as statements of at most ``most`` parameters each, with their values.

        Each statement holds a power of two of rows (1,000 rows: 512 + 256 + 128 + 64 + 32
        + 8), so that a few shapes serve every batch: the connection's cache of prepared
        statements, each as big as its rows, stays small."""
        largest = 1 << max(0, (max(1, most // self.width)).bit_length() - 1)
        out = []
        start = 0
        while start < len(rows):
            count = min(largest, 1 << ((len(rows) - start).bit_length() - 1))
            chunk = rows[start:start + count]
            out.append((self._head + ",".join([self._row] * count),
                        [value for row in chunk for value in row]))
            start += count
        return out


class WriteBehind:
    """Batches of rows written in order by a thread (``threaded``) or at once (not: small
    refreshes, where a thread would only add its start)."""

    def __init__(self, con: sqlite3.Connection, *, threaded: bool) -> None:
        self.con = con
        self._jobs: queue.Queue[Callable[[], None] | None] = queue.Queue(maxsize=DEPTH)
        self._error: BaseException | None = None
        self._dropping = False
        self._thread: threading.Thread | None = None
        if threaded:
            self._thread = threading.Thread(target=self._run, name="contextree-index-writer",
                                            daemon=True)
            self._thread.start()

    def insert(self, writes: Sequence[tuple[Table, list[tuple[Any, ...]]]]) -> None:
        """Insert each ``(table, rows)`` in turn (the lists become the writer's)."""
        most = self.con.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER)
        statements = [s for table, rows in writes if rows for s in table.statements(rows, most)]

        def job() -> None:
            for sql, values in statements:
                self.con.execute(sql, values)

        if self._thread is None:
            job()
            return
        self._raise()
        self._jobs.put(job)

    def sync(self) -> None:
        """Wait until everything given is written; raise what a write raised."""
        if self._thread is not None:
            self._jobs.join()
        self._raise()

    def close(self) -> None:
        """Write what is left and stop the thread (what a write raised is raised)."""
        try:
            self.sync()
        finally:
            self._stop()

    def abandon(self) -> None:
        """Drop what is not written yet and stop the thread, before a rollback: the
        connection is the caller's alone when this returns."""
        self._dropping = True
        self._stop()
        self._error = None

    def _stop(self) -> None:
        if self._thread is not None:
            self._jobs.put(None)
            self._thread.join()
            self._thread = None

    def _raise(self) -> None:
        error, self._error = self._error, None
        if error is not None:
            raise error

    def _run(self) -> None:
        while True:
            job = self._jobs.get()
            try:
                if job is None:
                    return
                if self._error is None and not self._dropping:
                    job()
            except BaseException as e:  # raised in the caller's thread, at its next sync
                self._error = e
            finally:
                self._jobs.task_done()
