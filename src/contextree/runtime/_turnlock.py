"""One turn at a time on a conversation: turns started at once on the same session (threads
of a web app, asyncio tasks, an agent per request on one file) run one after the other, so
each sees the ones before it whole instead of stacking questions and crossing replies."""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field

from ._env import Env

__all__ = ["TURNS", "TurnLocks"]

_POLL = 0.05  # seconds between looks at an interruption while waiting


@dataclass
class _Slot:
    lock: threading.Lock = field(default_factory=threading.Lock)
    users: int = 0  # turns holding or waiting for it
    owner: Env | None = None  # the turn that holds it
    depth: int = 0  # how many layers of that turn took it (two SessionTree on one file)


class TurnLocks:
    """A lock per conversation key, made on first use and dropped when nobody holds or
    waits for it (so a server with many conversations keeps none it does not use). A turn
    that holds a key takes it again at once (layers of one stack on the same session)."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._slots: dict[str, _Slot] = {}

    def acquire(self, key: str, env: Env) -> bool:
        """Wait until no other turn runs on ``key``; False when ``env`` was interrupted
        first (then nothing is held)."""
        with self._guard:
            slot = self._slots.setdefault(key, _Slot())
            slot.users += 1
            if slot.owner is env:
                slot.depth += 1
                return True
        while not slot.lock.acquire(timeout=_POLL):
            if env.cancelled:
                self._leave(key)
                return False
        slot.owner, slot.depth = env, 1
        return True

    def release(self, key: str) -> None:
        """End what ``acquire`` let run on ``key``."""
        slot = self._slots[key]
        slot.depth -= 1
        if slot.depth == 0:
            slot.owner = None
            slot.lock.release()
        self._leave(key)

    def forget_all(self) -> None:
        """Drop every lock (in a child of ``os.fork()``: the parent's turns do not run
        there, and a lock one of them held would never be released)."""
        self._guard = threading.Lock()
        self._slots = {}

    def _leave(self, key: str) -> None:
        with self._guard:
            slot = self._slots[key]
            slot.users -= 1
            if slot.users == 0:
                del self._slots[key]


TURNS = TurnLocks()
"""The process's turn locks (sessions are shared per process, so are their turns)."""
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=TURNS.forget_all)
