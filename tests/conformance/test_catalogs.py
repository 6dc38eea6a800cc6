"""Every catalog (a directory, memory://, PostgreSQL, and a backend registered by a user)
behaves the same through the public API and the command line."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import CliRunner

import contextree as ct
from conformance import fresh_schema_url
from contextree.cli.app import app
from contextree.entries import AnyEntry, LabelEntry, SessionHeader, now
from contextree.errors import InvalidArgument, SessionExists, SessionNotFound
from contextree.storage import (
    Address,
    Catalog,
    CatalogListing,
    MemoryStorage,
    Query,
    SessionInfo,
    Storage,
    filter_sessions,
    open_catalog,
    pick_session,
    register_backend,
)
from contextree.storage._backends import _BACKENDS
from helpers import require_postgres, run, run_json

KINDS = ["directory", "memory", "postgres", "registered"]


# -- a backend a user registers: sessions kept in a dict, its own catalog ---------------------

class ShelfCatalog:
    """A catalog written against the public protocol only (``shelf://NAME``)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.shelf: dict[str, MemoryStorage] = {}
        self.lock = threading.Lock()

    @property
    def where(self) -> str:
        return f"shelf://{self.name}"

    def _info(self, s: MemoryStorage) -> SessionInfo:
        last = max((e.timestamp for e in s.entries()), default=s.header.created_at)
        return SessionInfo(id=s.header.id, target=self.target(s.header.id), name=s.name,
                           created=s.header.created_at, last_activity=last, entries=len(s),
                           cwd=s.header.cwd, metadata=s.header.metadata)

    def list(self, query: Query | None = None, *, limit: int | None = None) -> CatalogListing:
        with self.lock:
            shelf = dict(self.shelf)
        return CatalogListing(filter_sessions([self._info(s) for s in shelf.values()], query, limit,
                                       lambda i: shelf[i.id]))

    def get(self, ref: str) -> SessionInfo:
        return pick_session(ref, [self._info(s) for s in self.shelf.values()], self.where)

    def target(self, session_id: str) -> str:
        return f"{self.where}#{session_id}"

    def open(self, ref: str, *, readonly: bool = False, durable: bool = True) -> Storage:
        return self.shelf[self.get(ref).id]

    def create(self, header: SessionHeader, entries: Sequence[AnyEntry] = (), *,
               durable: bool = True) -> Storage:
        with self.lock:
            if header.id in self.shelf:
                raise SessionExists(f"{header.id} exists", path=self.where)
            s = self.shelf[header.id] = MemoryStorage(header)
        for e in entries:
            s.append(e)
        return s

    def delete(self, ref: str) -> SessionInfo:
        info = self.get(ref)
        self.shelf.pop(info.id).delete()
        return info


SHELVES: dict[str, ShelfCatalog] = {}


class ShelfBackend:
    def address(self, target: str, scheme: str | None) -> Address:
        name, _, sid = target.split("://", 1)[1].partition("#")
        return Address(self, f"shelf://{name}", sid or None, scheme)

    def catalog(self, address: Address, *, create: bool) -> Catalog:
        name = address.where.split("://", 1)[1]
        return SHELVES.setdefault(name, ShelfCatalog(name))

    def open(self, address: Address, *, readonly: bool, durable: bool) -> Storage:
        assert address.session_id is not None
        return self.catalog(address, create=False).open(address.session_id)

    def create(self, address: Address, header: SessionHeader, entries: Sequence[AnyEntry],
               *, durable: bool) -> Storage:
        return self.catalog(address, create=True).create(header, entries)


@pytest.fixture(autouse=True, scope="module")
def _shelf_scheme() -> Iterator[None]:
    register_backend("shelf", ShelfBackend())
    yield
    _BACKENDS.pop("shelf", None)


@dataclass
class Place:
    kind: str
    where: str


@pytest.fixture(params=KINDS)
def place(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Place]:
    if request.param == "directory":
        yield Place("directory", str(tmp_path))
    elif request.param == "memory":
        yield Place("memory", f"memory://t-{uuid.uuid4().hex[:8]}")
    elif request.param == "registered":
        yield Place("registered", f"shelf://t-{uuid.uuid4().hex[:8]}")
    else:
        request.applymarker(pytest.mark.postgres)
        from psycopg.conninfo import conninfo_to_dict

        from contextree.storage.postgres import create_schema
        from helpers import as_url

        conninfo, drop = fresh_schema_url(require_postgres())
        create_schema(conninfo)
        assert conninfo_to_dict(conninfo).get("options")
        try:
            yield Place("postgres", as_url(conninfo))
        finally:
            drop()


def _session(catalog: Catalog, *, cwd: str, name: str | None = None, label: str | None = None,
             model: str | None = None, sid: str | None = None) -> str:
    time.sleep(0.003)  # activity times are in milliseconds: keep "newest first" well defined
    header = SessionHeader(id=sid or uuid.uuid4().hex[:12], created_at=now(), cwd=cwd)
    storage = catalog.create(header)
    with ct.Session(storage) as s:
        first = s.append_message(ct.Message.user(f"hello from {cwd}"))
        s.append_message(ct.Message.assistant("hi", model=model))
        if name:
            s.set_name(name)
        if label:
            s.append(LabelEntry(ct.entries.new_id(), s.leaf_id, now(), target_id=first,
                                label=label))
    return header.id


def test_create_list_get_open_delete(place: Place) -> None:
    catalog = open_catalog(place.where)
    a = _session(catalog, cwd="/work/a", name="first")
    b = _session(catalog, cwd="/work/b")
    listing = catalog.list()
    assert [s.id for s in listing.sessions] == [b, a]  # newest activity first
    info = catalog.get(a)
    assert (info.id, info.name, info.cwd, info.entries >= 2) == (a, "first", "/work/a", True)
    assert catalog.get(a[:6]).id == a  # a unique prefix
    with ct.Session.open(info.target) as again:  # the target opens with the plain API
        assert [m.text for m in again.build_context().messages] == ["hello from /work/a", "hi"]
    with ct.Session(catalog.open(b, readonly=True)) as s:
        assert s.id == b
    assert catalog.delete(a).id == a
    with pytest.raises(SessionNotFound):
        catalog.get(a)
    assert [s.id for s in catalog.list().sessions] == [b]


def test_filters(place: Place) -> None:
    catalog = open_catalog(place.where)
    a = _session(catalog, cwd="/repo/app", name="Fix the parser", model="m-small")
    b = _session(catalog, cwd="/repo/app/sub", label="keep", model="m-large")
    c = _session(catalog, cwd="/repoX", name="other")

    def ids(**kw: object) -> set[str]:
        return {s.id for s in catalog.list(Query(**kw)).sessions}  # type: ignore[arg-type]

    assert ids(cwd="/repo/app") == {a, b}  # the directory and below, not /repoX
    assert ids(cwd="/repo") == {a, b}
    assert ids(name="parser") == {a}
    assert ids(label="keep") == {b}
    assert ids(model="m-large") == {b}
    assert ids(since="2000-01-01T00:00:00.000Z") == {a, b, c}
    assert ids(until="2000-01-01T00:00:00.000Z") == set()
    assert len(catalog.list(limit=2).sessions) == 2


def test_ids_taken_and_prefixes_of_several(place: Place) -> None:
    catalog = open_catalog(place.where)
    _session(catalog, cwd="/w", sid="abc-one")
    _session(catalog, cwd="/w", sid="abc-two")
    with pytest.raises(SessionExists):
        _session(catalog, cwd="/w", sid="abc-one")
    with pytest.raises(InvalidArgument, match="start of 2 session ids"):
        catalog.get("abc")
    with pytest.raises(SessionNotFound, match="contextree ls"):
        catalog.get("zzz")


def test_ls_takes_every_catalog(place: Place) -> None:
    catalog = open_catalog(place.where)
    a = _session(catalog, cwd="/w", name="listed")
    rows = run_json("ls", place.where)
    assert [r["id"] for r in rows] == [a] and rows[0]["name"] == "listed"
    key = "path" if place.kind == "directory" else "url"
    with ct.Session.open(rows[0][key]) as s:
        assert s.id == a
    assert a in run("ls", place.where).stdout or a[:8] in run("ls", place.where).stdout


def test_a_url_naming_one_session_is_not_a_catalog(place: Place) -> None:
    if place.kind == "directory":
        pytest.skip("a path names no session id")
    with pytest.raises(InvalidArgument, match="names one session"):
        open_catalog(place.where + "#abc")


def test_a_backend_without_a_catalog_is_refused_saying_what_to_add() -> None:
    class OpenOnly:
        def address(self, target: str, scheme: str | None) -> Address:
            return Address(self, target, None, scheme)  # type: ignore[arg-type]

    register_backend("openonly", OpenOnly())  # type: ignore[arg-type]
    try:
        with pytest.raises(InvalidArgument, match="catalog"):
            open_catalog("openonly://x")
        result = run("ls", "openonly://x", code=2)
        assert "catalog" in result.stderr
    finally:
        _BACKENDS.pop("openonly", None)


def test_directory_catalog_reports_what_it_cannot_list(tmp_path: Path) -> None:
    import os

    catalog = open_catalog(tmp_path)
    good = _session(catalog, cwd="/w")
    (tmp_path / "foreign.jsonl").write_text('{"type": "user", "message": "hi"}\n')
    (tmp_path / "corrupt.jsonl").write_bytes(b"\xff\xfe not json\n")
    os.mkfifo(tmp_path / "pipe.jsonl")
    (tmp_path / "link.jsonl").symlink_to(tmp_path / f"{good}.jsonl")
    sub = tmp_path / "locked"
    sub.mkdir()
    listing = catalog.list()
    assert [s.id for s in listing.sessions] == [good]
    reasons = {Path(u.where).name: u.reason for u in listing.unlisted}
    assert set(reasons) == {"foreign.jsonl", "corrupt.jsonl", "pipe.jsonl", "link.jsonl"}
    assert "FIFO" in reasons["pipe.jsonl"] and "symbolic link" in reasons["link.jsonl"]
    out = CliRunner().invoke(app, ["ls", str(tmp_path)])
    assert out.exit_code == 0
    assert "pipe.jsonl" in out.stderr and "link.jsonl" in out.stderr
    assert "2 other .jsonl files are not contextree sessions" in out.stdout


def test_a_session_file_anywhere_below_is_found_by_id(tmp_path: Path) -> None:
    nested = tmp_path / "a" / "b"
    nested.mkdir(parents=True)
    with ct.Session.create(nested / "chat.jsonl", session_id="deep-one") as s:
        s.append_message(ct.Message.user("x"))
    catalog = open_catalog(tmp_path)
    assert catalog.get("deep-one").target == str(nested / "chat.jsonl")
    with ct.Session(catalog.open("deep")) as again:
        assert again.id == "deep-one"


def test_copies_with_one_id_are_named_not_guessed(tmp_path: Path) -> None:
    import shutil

    catalog = open_catalog(tmp_path)
    sid = _session(catalog, cwd="/w")
    (tmp_path / "sub").mkdir()
    shutil.copy(tmp_path / f"{sid}.jsonl", tmp_path / "sub" / "copy.jsonl")
    assert catalog.get(sid).target == str(tmp_path / f"{sid}.jsonl")  # its own file first
    os_rm = tmp_path / f"{sid}.jsonl"
    os_rm.rename(tmp_path / "moved.jsonl")
    with pytest.raises(InvalidArgument, match="have the id"):
        catalog.get(sid)


def test_catalog_json_rows_are_plain_json(tmp_path: Path) -> None:
    catalog = open_catalog(tmp_path)
    _session(catalog, cwd="/w")
    rows = json.loads(run("ls", tmp_path, "--json").stdout)
    assert set(rows[0]) >= {"id", "target", "path", "name", "created", "last_activity",
                            "entries", "size", "cwd"}


def test_a_registered_backend_works_for_every_integration_and_chat_targets() -> None:
    # The same scheme table serves the three integrations: each keeps its sessions in the
    # user's backend, found by the framework's own key.
    pytest.importorskip("pydantic_ai")
    pytest.importorskip("langchain")
    pytest.importorskip("agents")
    import asyncio

    from contextree.integrations.langchain import ContextreeMiddleware
    from contextree.integrations.openai_agents import ContextreeSession
    from contextree.integrations.pydantic_ai import ContextreeConversationStore

    where = f"shelf://integrations-{uuid.uuid4().hex[:6]}"
    catalog = open_catalog(where)

    middleware = ContextreeMiddleware(directory=where)
    session = middleware.session_for("thread-1")
    session.append_message(ct.Message.user("from langgraph"))
    assert catalog.get("thread-1").id == session.id == "thread-1"

    agents = ContextreeSession("agents-1", where)
    asyncio.run(agents.add_items([{"role": "user", "content": "from the agents sdk"}]))
    assert catalog.get("agents-1").entries >= 1

    store = ContextreeConversationStore(where)
    try:
        ids = {s.id for s in catalog.list().sessions}
        assert {"thread-1", "agents-1"} <= ids
        assert store.session("nobody") is None
    finally:
        store.close()
        middleware.close()
