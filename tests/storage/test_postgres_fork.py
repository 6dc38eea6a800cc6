"""A child of fork() and its parent's PostgreSQL session: the child shares the parent's
sockets, so it is refused (to write and to read) with an error that says what to do, its
close ends none of the parent's connections, and the parent goes on working."""

from __future__ import annotations

import os
import signal
import uuid

import pytest

from contextree import Message, Session
from contextree.errors import SessionLocked
from helpers import as_url, require_postgres

pytestmark = [pytest.mark.postgres,
              pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")]

CHILD_TRIES = {
    "append": "s.append_message(Message.user('child'))",
    "read": "s.leaf_id",
    "batch": "s.batch().__enter__()",
}


def _new_url() -> str:
    """A URL of a new session in this run's scratch schema."""
    from contextree.storage.postgres import create_schema

    conninfo = require_postgres()
    create_schema(conninfo)
    return f"{as_url(conninfo)}#{uuid.uuid4()}"


def _child(s: Session, work: str) -> str:
    """What ``work`` did in a forked child (the child closes ``s`` and exits at once)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # never return into pytest
        os.close(r)
        signal.alarm(20)  # a child stuck on a connection it must not use dies, not hangs
        try:
            exec(work, {"s": s, "Message": Message, "Session": Session})
            note = "ok"
        except SessionLocked as e:
            note = f"SessionLocked: {e}"
        except BaseException as e:
            note = f"{type(e).__name__}: {e}"
        try:
            s.close()
        except BaseException as e:
            note += f" / close: {type(e).__name__}: {e}"
        os.write(w, note.encode())
        os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        note = f.read().decode()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, (status, note)
    return note


@pytest.mark.timeout(120)
@pytest.mark.parametrize("what", sorted(CHILD_TRIES))
def test_a_forked_child_is_refused_and_the_parent_keeps_working(what: str) -> None:
    url = _new_url()
    s = Session.create(url)
    try:
        s.append_message(Message.user("parent"))
        note = _child(s, CHILD_TRIES[what])
        assert note.startswith("SessionLocked: "), note
        assert "child of it (os.fork())" in note and "open the session again" in note
        assert "close:" not in note
        # The parent's pooled connections survived the child's close: a batch (one
        # connection, never retried) and plain appends go through.
        with s.batch():
            s.append_message(Message.user("batched"))
        s.append_message(Message.user("parent again"))
        with Session.open(url, readonly=True) as again:
            texts = [str(m.content) for m in again.build_context().messages]
        assert texts == ["parent", "batched", "parent again"]
    finally:
        s.storage.delete()


@pytest.mark.timeout(120)
def test_a_child_opens_the_session_again_and_writes() -> None:
    """What the error advises works: the child's own open, beside the parent's."""
    url = _new_url()
    s = Session.create(url)
    try:
        s.append_message(Message.user("parent"))
        note = _child(s, f"c = Session.open({url!r}); c.append_message(Message.user('child'));"
                         " c.close()")
        assert note == "ok", note
        s.append_message(Message.user("parent again"))
        assert [str(m.content) for m in s.build_context().messages] == [
            "parent", "child", "parent again"]
    finally:
        s.storage.delete()


@pytest.mark.timeout(120)
def test_a_child_forked_inside_a_batch_never_touches_the_parents_transaction() -> None:
    """The batch's connection is in a transaction of the parent's when the child is made:
    the child's append is refused, and its leaving the block (a COMMIT on its copy of the
    socket) reaches no server, so the parent's batch stays all or nothing."""
    url = _new_url()
    s = Session.create(url)
    try:
        s.append_message(Message.user("before"))
        with pytest.raises(RuntimeError), s.batch():
            s.append_message(Message.user("in the parent's batch"))
            # The child: its append is refused; then what leaving the parent's block does
            # there, a COMMIT on the batch's connection, must fail, reaching no server.
            note = _child(s, "try:\n"
                             "    s.append_message(Message.user('child'))\n"
                             "except Exception as e:\n"
                             "    refused = type(e).__name__\n"
                             "assert refused == 'SessionLocked', refused\n"
                             "s.storage._tx.execute('COMMIT')\n")
            assert note.startswith("OperationalError"), note
            raise RuntimeError("the parent abandons its batch")
        with Session.open(url, readonly=True) as again:
            texts = [str(e.message.content) for e in again.branch()]
        assert texts == ["before"]
        s.append_message(Message.user("after"))  # the parent's connections still work
    finally:
        s.close()
