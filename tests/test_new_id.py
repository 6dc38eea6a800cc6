"""Entry ids come from ``os.urandom`` bytes drawn 4 KiB at a time: unique across threads, and
a child of ``fork()`` never gives the ids its parent gives next."""

from __future__ import annotations

import os
import threading

import pytest

from contextree.entries import new_id


def test_ids_are_eight_hex_digits_and_do_not_repeat_across_refills() -> None:
    ids = [new_id() for _ in range(5_000)]  # several refills of the pool
    assert all(len(i) == 8 and int(i, 16) >= 0 for i in ids)
    assert len(set(ids)) > 4_990  # 2**32 ids: a repeat or two is chance, a cycle is not


def test_threads_never_take_the_same_bytes() -> None:
    got: list[list[str]] = [[] for _ in range(8)]

    def draw(out: list[str]) -> None:
        out.extend(new_id() for _ in range(2_000))

    threads = [threading.Thread(target=draw, args=(g,)) for g in got]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    every = [i for g in got for i in g]
    assert len(set(every)) > len(every) - 10


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork()")
def test_a_forked_child_draws_its_own_ids() -> None:
    new_id()  # the pool holds bytes the parent has not given yet
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        os.write(write, ",".join(new_id() for _ in range(50)).encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as f:
        child = f.read().decode().split(",")
    os.waitpid(pid, 0)
    parent = [new_id() for _ in range(50)]
    assert len(child) == 50 and not set(child) & set(parent)
