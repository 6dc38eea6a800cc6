"""Middleware that owns the conversation on disk: a flat message log, or the entry tree."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from .._messages import Message
from .._session import Session
from ..entries import CALLS_TYPE, CallRecord, RequestEntry
from ..errors import InvalidArgument
from ..tokens import fresh_start
from ._builder import App
from ._call import INTERRUPTED_NOTICE, keep_failed_reply
from ._env import Env, SentRequest
from ._events import StopReason
from ._flatlog import FlatLog
from ._turnlock import TURNS


def _persisted(m: Message) -> bool:
    """System prompts are re-added every turn; compaction summaries are history."""
    return m.role != "system" or m.kind is not None


def _refused(env: Env) -> bool:
    """The budget stopped the turn before the model answered: its input is taken back, so
    a retry (the same words or new ones) asks once instead of stacking unanswered messages."""
    return env.stopped == "budget" and env.reply is None


def _request_recorder(session: Session, in_force: str | None
                      ) -> Callable[[SentRequest], None]:
    """The listener that appends a request entry when a call sends another system prompt,
    tool set or parameters than the request in force (``in_force``: its entry id)."""
    entry = session.get_entry(in_force) if in_force is not None else None
    digest = [entry.sha256 if isinstance(entry, RequestEntry) else None]

    def record(request: SentRequest) -> None:
        new = request.digest
        if new != digest[0]:
            session.append_request(request.system, request.tools, request.params,
                                   stream=request.stream)
            digest[0] = new

    return record


def _record_calls(session: Session, calls: Sequence[CallRecord]) -> None:
    """Store model calls that no message records, for the statistics."""
    session.append_custom(CALLS_TYPE, {"calls": [c.to_dict() for c in calls]})


class SessionLog:
    """Brute's flat JSONL log: one message per line, loaded on the way in.

    Beyond the seed: new messages are appended (and synced) as they are produced, so a crash
    or an exception loses nothing already said; after compaction the file is rewritten
    atomically (``atomic_write``: temp file, fsync, rename). A torn last line left by a crash
    is moved to ``<log>.quarantine`` on load, so the next turn never appends after a
    fragment; a full disk is a ``StorageFailure`` and never leaves half a line; new logs
    are 0600 (``contextree.runtime._flatlog``; ``verify_log`` and ``repair_log`` check and
    fix a log offline).
    """

    def __init__(self, app: App, /, path: str | os.PathLike[str]) -> None:
        self.app = app
        self.path = Path(path)

    def load(self) -> list[Message]:
        """The messages in the file (none if there is no file), read-only: a torn last line
        is skipped (and left), any other unreadable line is a ``CorruptLine`` error."""
        return FlatLog(self.path).load(writable=False)

    def __call__(self, env: Env) -> Env:
        key = f"log:{os.path.realpath(self.path)}"
        if not TURNS.acquire(key, env):  # interrupted while another turn ran on it
            env.stop(StopReason.INTERRUPTED, INTERRUPTED_NOTICE)
            return env
        try:
            return self._turn(env)
        finally:
            TURNS.release(key)

    def _turn(self, env: Env) -> Env:
        log = FlatLog(self.path)
        history = log.load()  # a torn tail is quarantined before anything is appended
        # A file rewritten by a compaction does not record which replies came after it, so
        # then none of the loaded usage anchors a token count. A retried input that the log
        # ends with, unanswered, is not written again (``load_history`` leaves it out).
        new = env.load_history(history, fresh_from=fresh_start(history))
        log.open()

        written = [m for m in new if _persisted(m)]
        changed = [False]  # anything written after the turn's input

        def append(m: Message) -> None:
            changed[0] = True
            log.append([m] if _persisted(m) else [])

        def rewrite(messages: Sequence[Message]) -> None:
            changed[0] = True
            log.rewrite([m for m in messages if _persisted(m)])

        try:
            log.append(written)
            for m in new:
                env.committed(m, None)
            env.on_add(append)
            env.on_replace(rewrite)
            env = self.app(env)
            if written and not changed[0] and _refused(env):
                log.rewrite(history)
            return env
        except BaseException as e:
            keep_failed_reply(env, e)
            raise
        finally:
            log.close()


class SessionTree:
    """The session tree as the agent's memory: every message is appended as an entry when
    it is produced; compaction appends a compaction entry; nothing is ever rewritten.
    Turns on one session (any handle of it in this process) run one at a time."""

    def __init__(self, app: App, /, path: str | os.PathLike[str] | None = None, *,
                 session: Session | None = None, cwd: str | None = None,
                 session_id: str | None = None, metadata: dict[str, Any] | None = None,
                 durable: bool = True) -> None:
        """``path`` (a file or URL, opened or created) or a ready ``session``; ``cwd``,
        ``session_id`` and ``metadata`` apply when the session is created."""
        if (path is None) == (session is None):
            raise InvalidArgument("SessionTree: give path= (a file or URL) or session= (an "
                                  "open Session), one of them")
        self.app = app
        self.path = path
        self.session = session
        self.cwd, self.session_id, self.metadata = cwd, session_id, metadata
        self.durable = durable

    def __call__(self, env: Env) -> Env:
        if env.session is not None:  # every message would be written twice, or to a closed one
            raise InvalidArgument(
                "SessionTree met a turn that already has its session: use SessionTree once "
                "per stack, as its first (outermost) layer, outside ToolResultLoop")
        session = self.session
        owned = session is None
        if session is None:
            assert self.path is not None
            session = Session.open_or_create(self.path, cwd=self.cwd,
                                             session_id=self.session_id,
                                             metadata=self.metadata, durable=self.durable)
        key = f"session:{session.id}"
        if not TURNS.acquire(key, env):  # interrupted while another turn ran on it
            if owned:
                session.close()
            env.stop(StopReason.INTERRUPTED, INTERRUPTED_NOTICE)
            return env
        try:
            ctx = session.build_context()
            before = session.leaf_id
            new = env.load_history(ctx.messages, fresh_from=ctx.fresh_from)
            env.attach_session(session)
            written: list[str] = []
            for m in new:
                written.append(session.append_message(m))
                env.committed(m, written[-1])
            model = [ctx.model]  # the model in force, updated as replies name theirs

            def record(m: Message) -> str | None:
                if not _persisted(m):
                    return None
                if m.role == "assistant" and m.model and m.provider and (
                    model[0] != (m.provider, m.model)
                ):
                    session.append_model_change(m.provider, m.model)
                    model[0] = (m.provider, m.model)
                return session.append_message(m)

            env.on_add(record)
            env.on_request(_request_recorder(session, ctx.request_id))
            env.on_call(lambda call: _record_calls(session, [call]))
            env = self.app(env)
            if written and session.leaf_id == written[-1] and _refused(env):
                session.move_to(before)  # the input stays in the tree, off the branch
            return env
        except BaseException as e:
            keep_failed_reply(env, e)
            raise
        finally:
            TURNS.release(key)
            if owned:
                session.close()
