"""``Background``: a daemon thread that runs queued jobs in batches, after a short delay.

What ``Tracing`` hands its spans to: the thread that ran a turn only queues a job, and the
jobs queued within ``delay`` seconds run in one burst while the code they call is warm.
``drain()`` runs every queued job on the calling thread (a flush, and interpreter exit).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable

__all__ = ["Background"]

HOLD_SECONDS = 0.002  # how long the thread runs jobs before it lets go of the GIL
YIELD_SECONDS = 0.0001  # and for how long

log = logging.getLogger("contextree.background")


class Background:
    """Jobs run in the order they were queued, one at a time, on one daemon thread
    (``name``) started by the first job; a job that raises is logged and the others run."""

    def __init__(self, name: str, *, delay: float) -> None:
        self.name = name
        self.delay = delay
        self.reset()

    def reset(self) -> None:
        """Start empty, with no thread (also in a forked child: the parent's thread and
        queue are not the child's)."""
        self._queue: deque[Callable[[], object]] = deque()  # append/popleft are atomic
        self._wake = threading.Event()
        self._running = threading.Lock()  # one job at a time: jobs run in order
        self._starting = threading.Lock()
        self._thread: threading.Thread | None = None

    def submit(self, job: Callable[[], object]) -> None:
        """Queue ``job`` (an append, mostly: the caller's thread does nothing else)."""
        self._queue.append(job)
        if not self._wake.is_set():  # set until the thread takes the batch
            if self._thread is None:
                self._start()
            self._wake.set()

    def drain(self) -> None:
        """Run every job queued so far, here and now (once the job the thread is running
        has ended: the lock is taken at least once)."""
        for _ in range(len(self._queue) + 1):
            if not self._run_one():
                break

    def _start(self) -> None:
        with self._starting:
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name=self.name,
                                                daemon=True)
                self._thread.start()

    def _loop(self) -> None:
        while True:
            self._wake.wait()
            time.sleep(self.delay)
            self._wake.clear()  # before running: a job queued from now on wakes it again
            since = time.perf_counter()
            while self._run_one():
                # Let go of the GIL now and then: a thread waiting for it gets it in a
                # moment, not after the interpreter's switch interval (5 ms). Not after
                # each job: a burst keeps the jobs' code warm.
                if time.perf_counter() - since > HOLD_SECONDS:
                    time.sleep(YIELD_SECONDS)
                    since = time.perf_counter()

    def _run_one(self) -> bool:
        """Run the job queued first; False when none was queued."""
        with self._running:
            if not self._queue:
                return False
            job = self._queue.popleft()
            try:
                job()
            except Exception:  # one job's failure must not stop the others
                log.exception("%s: a queued job failed", self.name)
        return True
