"""Importing a Claude Code session with its sub-agents, each as a session of its own.

``import_session("claude-code", src, dest, with_subagents=True)`` (``contextree import
claude-code SRC --with-subagents``): every transcript under ``<session>/subagents/`` becomes
the session ``<dest name>.agent-<id>.jsonl`` beside ``dest``, read the way a sidechain file
read on its own is (``_claude_code.read``: its header links to the parent), then pointed at
``dest``: its ``parent_session`` is ``dest`` and ``imported_from.subagent.session`` too. The
parent's ``claude-code/subagent`` entry after the Agent/Task result names that session
(``session``) instead of holding the transcript as a root of its own.

The sub-agent sessions are written first and removed again if the parent fails, so the import
is all or nothing for the files it writes. A transcript that cannot be read is left out and
named in the parent's report (``subagent_errors``): the parent still imports.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

from .._session import Session
from ..errors import SessionError, SessionExists
from ._base import Progress
from ._claude_code import read, subagent_files
from ._subagents import WriteImported, pointed_at

__all__ = ["import_with_subagents", "subagent_session_path"]



def subagent_session_path(dest: Path, transcript: Path) -> Path:
    """Where the sub-agent transcript ``agent-<id>.jsonl`` of the session imported to
    ``dest`` goes: ``<dest without .jsonl>.agent-<id>.jsonl`` beside it."""
    return dest.with_name(f"{dest.name.removesuffix('.jsonl')}.{transcript.stem}.jsonl")


def import_with_subagents(src: Path, dest: Path, write: WriteImported, *,
                          progress: Progress | None = None, durable: bool = True) -> Session:
    """Import ``src`` to ``dest`` and each of its sub-agent transcripts beside it (see the
    module notes); ``write(imported, path, durable=...)`` makes a session of a reader's
    result. Returns the parent session, open for writing."""
    transcripts = subagent_files(src)
    targets = {t: subagent_session_path(dest, t) for t in transcripts}
    for target in (dest, *targets.values()):
        if target.exists():
            raise SessionExists("a file is already there; choose another path or remove it",
                                path=str(target))
    written: list[Path] = []
    try:
        for transcript, target in targets.items():
            try:
                imported = read(transcript)
            except (SessionError, OSError):
                continue  # the parent's read reports it (subagent_errors)
            write(pointed_at(imported, dest, target), target, durable=durable).close()
            written.append(target)
        sessions = {t: str(targets[t]) for t in transcripts if targets[t] in written}
        return write(read(src, progress, subagent_sessions=sessions), dest, durable=durable)
    except BaseException:
        for path in written:
            with contextlib.suppress(OSError):
                path.unlink()
        raise
