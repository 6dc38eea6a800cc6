"""Middleware that owns the conversation on disk: a flat message log, or the entry tree."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson

from .._files import atomic_write, write_all
from .._messages import Message
from .._session import Session
from ..errors import CorruptLine
from ..tokens import fresh_start
from ._builder import App
from ._env import Env


def _persisted(m: Message) -> bool:
    """System prompts are re-added every turn; compaction summaries are history."""
    return m.role != "system" or m.kind is not None


class SessionLog:
    """Brute's flat JSONL log: one message per line, loaded on the way in.

    Beyond the seed: new messages are appended (and synced) as they are produced, so a crash
    or an exception loses nothing already said; after compaction the file is rewritten
    atomically (``atomic_write``: temp file, fsync, rename).
    """

    def __init__(self, app: App, /, path: str | os.PathLike[str]) -> None:
        self.app = app
        self.path = Path(path)

    def load(self) -> list[Message]:
        """The messages in the file (none if there is no file); a torn last line is
        skipped, any other unreadable line is an error."""
        if not self.path.exists():
            return []
        out = []
        with open(self.path, "rb") as f:
            for n, line in enumerate(f, start=1):
                if not line.strip():
                    continue
                try:
                    out.append(Message.from_dict(orjson.loads(line)))
                except Exception as e:
                    if not line.endswith(b"\n"):
                        break  # a torn last line from a crash: ignore it
                    raise CorruptLine(f"not a message ({e})", path=str(self.path),
                                       line=n) from None
        return out

    def __call__(self, env: Env) -> Env:
        history = self.load()
        # A file rewritten by a compaction does not record which replies came after it, so
        # then none of the loaded usage anchors a token count.
        new = env.load_history(history, fresh_from=fresh_start(history))
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # One-element holder: the rewrite after compaction replaces the file, so later
        # appends must go to a descriptor of the new file, not the unlinked old one.
        fds = [self._open()]

        def rewrite(messages: Sequence[Message]) -> None:
            self._rewrite(messages)
            os.close(fds[0])
            fds[0] = self._open()

        def append(m: Message) -> None:
            self._append(fds[0], [m])

        try:
            self._append(fds[0], new)
            for m in new:
                env.committed(m, None)
            env.on_add(append)
            env.on_replace(rewrite)
            return self.app(env)
        finally:
            os.close(fds[0])

    def _open(self) -> int:
        return os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def _append(self, fd: int, messages: Sequence[Message]) -> None:
        data = _lines(messages)
        if data:
            write_all(fd, data)
            os.fsync(fd)

    def _rewrite(self, messages: Sequence[Message]) -> None:
        atomic_write(self.path, _lines(messages))


def _lines(messages: Sequence[Message]) -> bytes:
    """The JSON lines of the messages the log keeps."""
    return b"".join(orjson.dumps(m.to_dict()) + b"\n" for m in messages if _persisted(m))


class SessionTree:
    """The session tree as the agent's memory: every message is appended as an entry when
    it is produced; compaction appends a compaction entry; nothing is ever rewritten."""

    def __init__(self, app: App, /, path: str | os.PathLike[str] | None = None, *,
                 session: Session | None = None, cwd: str | None = None,
                 session_id: str | None = None, metadata: dict[str, Any] | None = None,
                 durable: bool = True) -> None:
        """``path`` (a file or URL, opened or created) or a ready ``session``; ``cwd``,
        ``session_id`` and ``metadata`` apply when the session is created."""
        if (path is None) == (session is None):
            raise ValueError("give SessionTree a path or a session (one of them)")
        self.app = app
        self.path = path
        self.session = session
        self.cwd, self.session_id, self.metadata = cwd, session_id, metadata
        self.durable = durable

    def __call__(self, env: Env) -> Env:
        session = self.session
        owned = session is None
        if session is None:
            assert self.path is not None
            session = Session.open_or_create(self.path, cwd=self.cwd,
                                             session_id=self.session_id,
                                             metadata=self.metadata, durable=self.durable)
        try:
            ctx = session.build_context()
            new = env.load_history(ctx.messages, fresh_from=ctx.fresh_from)
            env.attach_session(session)
            for m in new:
                env.committed(m, session.append_message(m))
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
            return self.app(env)
        finally:
            if owned:
                session.close()
