"""One turn at a time on a conversation: turns started at once on the same session (threads
of a web app, asyncio tasks, an agent per request on one file) run one after the other, so
each sees the ones before it whole instead of stacking questions and crossing replies."""

from __future__ import annotations

import os
import threading

from ._env import Env

__all__ = ["TurnLocks"]

_POLL = 0.05  # seconds between looks at an interruption while waiting


class TurnLocks:
    """A lock per conversation key, made on first use and dropped when nobody holds or
    waits for it (so a server with many conversations keeps none it does not use)."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._locks: dict[str, tuple[threading.Lock, list[int]]] = {}

    def acquire(self, key: str, env: Env) -> bool:
        """Wait until no other turn runs on ``key``; False when ``env`` was interrupted
        first (then nothing is held)."""
        with self._guard:
            lock, users = self._locks.setdefault(key, (threading.Lock(), [0]))
            users[0] += 1
        while not lock.acquire(timeout=_POLL):
            if env.cancelled:
                self._leave(key)
                return False
        return True

    def release(self, key: str) -> None:
        """End the turn that ``acquire`` let run on ``key``."""
        self._locks[key][0].release()
        self._leave(key)

    def forget_all(self) -> None:
        """Drop every lock (in a child of ``os.fork()``: the parent's turns do not run
        there, and a lock one of them held would never be released)."""
        self._guard = threading.Lock()
        self._locks = {}

    def _leave(self, key: str) -> None:
        with self._guard:
            _, users = self._locks[key]
            users[0] -= 1
            if users[0] == 0:
                del self._locks[key]


TURNS = TurnLocks()
"""The process's turn locks (sessions are shared per process, so are their turns)."""
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=TURNS.forget_all)
