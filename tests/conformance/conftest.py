"""Backend fixtures: every conformance test runs against memory, JSONL and PostgreSQL."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from contextree.entries import AnyEntry, SessionHeader, now
from contextree.storage import JsonlStorage, MemoryStorage, Storage
from helpers import require_postgres

from . import postgres_skip_reason

BACKENDS = ["memory", "jsonl", "postgres"]


def new_header(**kw: Any) -> SessionHeader:
    return SessionHeader(id=str(uuid.uuid4()), created_at=now(), cwd="/work", **kw)


@dataclass
class Backend:
    """Makes storages of one kind, reopens them, and closes them all at the end."""

    name: str
    _make: Callable[[SessionHeader, list[AnyEntry]], Storage]
    _reopen: Callable[[Storage, bool], Storage]
    persistent: bool = True
    opened: list[Storage] = field(default_factory=list)

    def make(self, header: SessionHeader | None = None,
             entries: Iterable[AnyEntry] = ()) -> Storage:
        storage = self._make(header or new_header(), list(entries))
        self.opened.append(storage)
        return storage

    def reopen(self, storage: Storage, *, readonly: bool = False) -> Storage:
        """Close ``storage`` and open the same session again (memory: the same object)."""
        if not self.persistent:
            return storage
        storage.close()
        again = self._reopen(storage, readonly)
        self.opened.append(again)
        return again

    def handle(self, storage: Storage) -> Storage:
        """Another writable handle on the same session, ``storage`` left open (memory: the
        same object), as a web app that opens the session per request has."""
        if not self.persistent:
            return storage
        again = self._reopen(storage, False)
        self.opened.append(again)
        return again

    def handle_readonly(self, storage: Storage) -> Storage:
        """A read-only view of what is stored now, ``storage`` left open (memory: itself)."""
        if not self.persistent:
            return storage
        again = self._reopen(storage, True)
        self.opened.append(again)
        return again

    def close_all(self) -> None:
        for s in self.opened:
            s.close()


def _memory() -> Backend:
    def make(header: SessionHeader, entries: list[AnyEntry]) -> Storage:
        s = MemoryStorage(header)
        for e in entries:
            s.append(e)
        return s

    return Backend("memory", make, lambda s, ro: s, persistent=False)


def _jsonl(tmp: Path) -> Backend:
    def make(header: SessionHeader, entries: list[AnyEntry]) -> Storage:
        return JsonlStorage.create(tmp / f"{header.id}.jsonl", header, entries, durable=False)

    def reopen(s: Storage, readonly: bool) -> Storage:
        assert isinstance(s, JsonlStorage)
        return JsonlStorage.open(s.file, readonly=readonly, durable=False)

    return Backend("jsonl", make, reopen)


def _postgres(url: str) -> Backend:
    from contextree.storage.postgres import PostgresStorage

    def make(header: SessionHeader, entries: list[AnyEntry]) -> Storage:
        return PostgresStorage.create(url, header, entries)

    def reopen(s: Storage, readonly: bool) -> Storage:
        return PostgresStorage.open(url, s.header.id, readonly=readonly)

    return Backend("postgres", make, reopen)


@pytest.fixture(scope="session")
def pg_url() -> str:
    return require_postgres()


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    if request.param == "memory":
        b = _memory()
    elif request.param == "jsonl":
        b = _jsonl(tmp_path)
    else:
        request.applymarker(pytest.mark.postgres)
        b = _postgres(request.getfixturevalue("pg_url"))
    try:
        yield b
    finally:
        b.close_all()


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Say loudly, at the end of the run, when PostgreSQL was not tested."""
    reason = postgres_skip_reason()
    if reason:
        terminalreporter.write_sep("!", "PostgreSQL storage tests were SKIPPED", red=True,
                                   bold=True)
        terminalreporter.write_line(f"reason: {reason}")
        terminalreporter.write_line("set CONTEXTREE_PG_URL (or install PostgreSQL) to run them")
