"""Two ``ContextreeSession`` objects on one file, as a web app that builds a session per
request has: every item either adds is read back by both."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

pytest.importorskip("agents")

from contextree.integrations.openai_agents import ContextreeSession


def test_two_session_objects_on_one_file_lose_no_item(tmp_path: Path) -> None:
    path = tmp_path / "web.jsonl"
    a = ContextreeSession("chat", path)
    b = ContextreeSession("chat", path)

    async def add(session: ContextreeSession, tag: str) -> None:
        for k in range(100):
            await session.add_items([{"role": "user", "content": f"{tag}{k}"}])
            await session.get_items()  # keeps the view warm between appends

    # One event loop per request thread, as an ASGI server with workers has.
    threads = [threading.Thread(target=asyncio.run, args=(add(s, tag),))
               for s, tag in ((a, "a"), (b, "b"))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    want = {f"a{k}" for k in range(100)} | {f"b{k}" for k in range(100)}
    for s in (a, b):
        items = asyncio.run(s.get_items())
        assert {str(i.get("content")) for i in items} == want
        assert len(items) == 200
    reopened = ContextreeSession("chat", path)
    assert len(asyncio.run(reopened.get_items())) == 200
    for s in (a, b, reopened):
        s.close()


@pytest.mark.parametrize("value", [b"bytes", {1, 2}, __import__("datetime").date(2026, 1, 1),
                                   __import__("decimal").Decimal("1.5"), object()])
def test_items_with_no_json_form_are_invalid_entries(tmp_path: Path, value: object) -> None:
    from contextree.errors import InvalidEntry

    s = ContextreeSession("chat", tmp_path / "s.jsonl")
    asyncio.run(s.add_items([{"role": "user", "content": "kept"}]))
    with pytest.raises(InvalidEntry, match="nothing was stored"):
        asyncio.run(s.add_items([{"role": "user", "content": "x"},
                                 {"role": "user", "content": value}]))
    with pytest.raises(InvalidEntry, match="not an item"):
        asyncio.run(s.add_items([None]))  # type: ignore[list-item]
    assert [i.get("content") for i in asyncio.run(s.get_items())] == ["kept"]
    s.close()
