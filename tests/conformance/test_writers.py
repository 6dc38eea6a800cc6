"""Many writers in one process: every acknowledged entry is on the branch the next context
is built from, for threads, asyncio tasks, handles and batches, on every backend."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable

from contextree import Message, Session
from contextree.entries import MessageEntry

from .conftest import Backend

THREADS = 8
PER_THREAD = 150


def _on_branch(session: Session) -> list[str]:
    """The texts of the messages on the current branch, root first."""
    return [str(e.message.content) for e in session.branch() if isinstance(e, MessageEntry)]


def _run_threads(work: Callable[[int], None], n: int = THREADS) -> None:
    start = threading.Barrier(n)
    errors: list[BaseException] = []

    def run(i: int) -> None:
        start.wait()
        try:
            work(i)
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


def _expected() -> set[str]:
    return {f"t{i}-{k}" for i in range(THREADS) for k in range(PER_THREAD)}


def test_threads_on_one_session_keep_every_entry_on_the_branch(backend: Backend) -> None:
    s = Session(backend.make())
    _run_threads(lambda i: [s.append_message(Message.user(f"t{i}-{k}"))
                            for k in range(PER_THREAD)])
    texts = _on_branch(s)
    assert len(texts) == THREADS * PER_THREAD
    assert set(texts) == _expected()
    reopened = Session(backend.reopen(s.storage, readonly=True))
    assert set(_on_branch(reopened)) == _expected()


def test_threads_on_their_own_handles_of_one_session(backend: Backend) -> None:
    first = backend.make()
    handles = [first] + [backend.handle(first) for _ in range(THREADS - 1)]
    sessions = [Session(h) for h in handles]
    _run_threads(lambda i: [sessions[i].append_message(Message.user(f"t{i}-{k}"))
                            for k in range(PER_THREAD)])
    for s in sessions:
        assert set(_on_branch(s)) == _expected()


def test_asyncio_to_thread_appends_stay_on_the_branch(backend: Backend) -> None:
    s = Session(backend.make())

    async def main() -> None:
        await asyncio.gather(*(asyncio.to_thread(s.append_message, Message.user(f"a{k}"))
                               for k in range(200)))

    asyncio.run(main())
    assert {t for t in _on_branch(s)} == {f"a{k}" for k in range(200)}


def test_a_batch_belongs_to_its_thread(backend: Backend) -> None:
    """Thread A sits in a batch; thread B's plain append is durable when it returns, and
    A's entries are stored when A's block exits although B's block is still open."""
    storage = backend.make()
    s = Session(storage)
    inside_a, b_done, inside_b, a_done = (threading.Event() for _ in range(4))
    seen: dict[str, set[str]] = {}

    def durable_texts() -> set[str]:
        return set(_on_branch(Session(backend.handle_readonly(storage))))

    def a() -> None:
        with s.batch():
            for k in range(5):
                s.append_message(Message.user(f"a{k}"))
            inside_a.set()
            b_done.wait(10)
        seen["after a's block"] = durable_texts()
        a_done.set()

    def b() -> None:
        inside_a.wait(10)
        s.append_message(Message.user("b-plain"))
        seen["after b's append"] = durable_texts()
        with s.batch():
            s.append_message(Message.user("b-batched"))
            inside_b.set()
            b_done.set()
            a_done.wait(10)

    ta, tb = threading.Thread(target=a), threading.Thread(target=b)
    ta.start()
    tb.start()
    ta.join()
    tb.join()
    if backend.persistent:
        assert "b-plain" in seen["after b's append"]
        assert {f"a{k}" for k in range(5)} <= seen["after a's block"]
    assert {f"a{k}" for k in range(5)} | {"b-plain", "b-batched"} <= set(_on_branch(s))


def test_threads_tasks_batches_and_handles_at_once(backend: Backend) -> None:
    """The shape of a busy web app on one session: threads on a shared object, threads on
    their own handles, asyncio tasks offloading appends, one thread in batches, all at once.
    Every append that returned is on the current branch, once, seen from a fresh handle."""
    first = backend.make()
    shared = Session(first)
    handles = [Session(backend.handle(first)) for _ in range(3)]
    acked: list[set[str]] = [set() for _ in range(THREADS)]

    def append(s: Session, slot: int, text: str) -> None:
        s.append_message(Message.user(text))
        acked[slot].add(text)  # acknowledged: the append returned

    def tasks(slot: int) -> None:
        async def main() -> None:
            await asyncio.gather(*(asyncio.to_thread(append, handles[0], slot, f"t{slot}-{k}")
                                   for k in range(PER_THREAD // 3)))
        asyncio.run(main())

    def batches(slot: int) -> None:
        for k in range(0, PER_THREAD // 3, 5):
            with handles[1].batch():
                for j in range(k, k + 5):
                    handles[1].append_message(Message.user(f"t{slot}-{j}"))
            acked[slot].update(f"t{slot}-{j}" for j in range(k, k + 5))

    def work(i: int) -> None:
        if i == 0:
            tasks(i)
        elif i == 1:
            batches(i)
        else:
            s = shared if i % 2 else handles[2]
            for k in range(PER_THREAD // 3):
                append(s, i, f"t{i}-{k}")

    _run_threads(work)
    every = set().union(*acked)
    assert len(every) == THREADS * (PER_THREAD // 3)
    fresh = _on_branch(Session(backend.handle_readonly(first)))
    assert len(fresh) == len(set(fresh)) == len(every)  # once each, nothing off the branch
    assert set(fresh) == every
    for s in [shared, *handles]:
        assert set(_on_branch(s)) == every


def test_a_batch_belongs_to_its_asyncio_task(backend: Backend) -> None:
    """Task A awaits inside its batch; task B's plain append, on the same thread, is stored
    when it returns (JSONL, memory). On PostgreSQL a batch is one transaction of the object:
    B's append joins A's batch and is stored when A's block ends (docs/storage.md)."""
    storage = backend.make()
    s = Session(storage)
    seen: dict[str, set[str]] = {}

    def durable_texts() -> set[str]:
        return set(_on_branch(Session(backend.handle_readonly(storage))))

    async def a(inside: asyncio.Event, b_done: asyncio.Event) -> None:
        with s.batch():
            s.append_message(Message.user("a0"))
            inside.set()
            await b_done.wait()
            s.append_message(Message.user("a1"))
        seen["after a's block"] = durable_texts()

    async def b(inside: asyncio.Event, b_done: asyncio.Event) -> None:
        await inside.wait()
        s.append_message(Message.user("b-plain"))
        seen["after b's append"] = durable_texts()
        b_done.set()

    async def main() -> None:
        inside, b_done = asyncio.Event(), asyncio.Event()
        await asyncio.wait_for(asyncio.gather(a(inside, b_done), b(inside, b_done)), 30)

    asyncio.run(main())
    assert {"a0", "a1", "b-plain"} <= set(_on_branch(s))
    if backend.name == "jsonl":  # stored (A's buffered line is written first, for order)
        assert "b-plain" in seen["after b's append"]
    if backend.name == "postgres":
        assert seen["after b's append"] == set()  # in A's transaction, not yet committed
    if backend.persistent:
        assert seen["after a's block"] == {"a0", "a1", "b-plain"}
