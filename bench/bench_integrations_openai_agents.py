"""ContextreeSession against the SDK's SQLiteSession: the cost of the session in each turn.

Usage: python bench/bench_integrations_openai_agents.py [--items 10000] [--turns 20]

Three stores start from the same history (``--items`` items in realistic batches: a user
message; reasoning, two parallel function calls and their outputs; reasoning and an answer)
on disk: SQLiteSession in a database file, and ContextreeSession in a JSONL file (each append
synced), without and with a compaction window ("ct+window"; the window is large enough that
nothing is compacted, so every store keeps serving the full history). Then ``Runner.run``
drives ``--turns`` turns through each, in turn, with a scripted model that replies at once
(so the figures are the SDK's and the store's work, no model time). Each turn reads the whole
history (``get_items``), writes three batches and, for ct+window, runs ``run_compaction``
(its trigger check). With a window the session is compaction-aware, and the SDK digests the
whole model input on every call for such sessions: that is in "whole Runner.run", not in
"in the session".

Reported per turn (medians): the time spent inside the session's methods, and the whole
``Runner.run``. The aim is ContextreeSession no slower than SQLiteSession. Also reported: the
first ``get_items`` after reopening each store (JSONL reads the whole file on open).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from agents import (
    Agent,
    ModelResponse,
    Runner,
    SQLiteSession,
    Usage,
    function_tool,
    set_tracing_disabled,
)
from agents.models.interface import Model
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
    ResponseReasoningItem,
)
from openai.types.responses.response_reasoning_item import Summary

from contextree.integrations.openai_agents import ContextreeSession

set_tracing_disabled(True)
PROSE = "The quick brown fox jumps over the lazy dog. "


def turn_items(i: int) -> list[list[dict[str, Any]]]:
    """One turn of history as the Runner writes it: three add_items batches, 8 items."""
    return [
        [{"content": f"Task {i}: " + PROSE * 4, "role": "user"}],
        [{"id": f"rs_{i}", "summary": [{"text": "Plan: " + PROSE * 2, "type": "summary_text"}],
          "type": "reasoning", "encrypted_content": "gAAAAB" + "x" * 600},
         {"arguments": json.dumps({"path": f"src/a{i}.py"}), "call_id": f"call_{i}a",
          "name": "read_file", "type": "function_call", "id": f"fc_{i}a", "status": "completed"},
         {"arguments": json.dumps({"path": f"src/b{i}.py"}), "call_id": f"call_{i}b",
          "name": "read_file", "type": "function_call", "id": f"fc_{i}b", "status": "completed"},
         {"call_id": f"call_{i}a", "output": "def f():\n    return 1\n" * 20,
          "type": "function_call_output"},
         {"call_id": f"call_{i}b", "output": "def g():\n    return 2\n" * 20,
          "type": "function_call_output"}],
        [{"id": f"rs_{i}z", "summary": [], "type": "reasoning", "encrypted_content": "gAAAAB" +
          "y" * 300},
         {"id": f"msg_{i}", "content": [{"annotations": [], "text": "Done: " + PROSE * 3,
                                         "type": "output_text"}],
          "role": "assistant", "status": "completed", "type": "message"}],
    ]


class Instant(Model):
    """Calls the tool twice in parallel, then answers; no model time."""

    def __init__(self) -> None:
        self.n = 0

    async def get_response(self, system_instructions: Any, input: Any, *args: Any,
                           **kwargs: Any) -> ModelResponse:
        self.n += 1
        n = self.n
        last = input[-1] if isinstance(input, list) else {}
        if last.get("type") == "function_call_output":
            out: list[Any] = [
                ResponseReasoningItem(id=f"r{n}", type="reasoning", summary=[],
                                      encrypted_content="gAAAAB" + "y" * 300),
                ResponseOutputMessage(id=f"m{n}", type="message", role="assistant",
                                      status="completed", content=[ResponseOutputText(
                                          type="output_text", text="Done: " + PROSE * 3,
                                          annotations=[])])]
        else:
            out = [ResponseReasoningItem(id=f"r{n}", type="reasoning",
                                         summary=[Summary(type="summary_text", text=PROSE)],
                                         encrypted_content="gAAAAB" + "x" * 600)]
            out += [ResponseFunctionToolCall(type="function_call", id=f"f{n}{s}",
                                             call_id=f"c{n}{s}", name="read_file",
                                             arguments=json.dumps({"path": f"{s}.py"}),
                                             status="completed") for s in "ab"]
        usage = Usage(requests=1, input_tokens=len(input) * 150, output_tokens=100,
                      total_tokens=len(input) * 150 + 100)
        return ModelResponse(output=out, usage=usage, response_id=f"resp_{n}")

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError


@function_tool
def read_file(path: str) -> str:
    """Read a file."""
    return "def f():\n    return 1\n" * 20


class Timed:
    """Wraps a session: adds up the time spent inside its methods."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.session_id = inner.session_id
        self.session_settings = inner.session_settings
        self.spent = 0.0
        if callable(getattr(inner, "run_compaction", None)):
            self.run_compaction = self._timed(inner.run_compaction)

    def _timed(self, fn: Any) -> Any:
        async def call(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return await fn(*args, **kwargs)
            finally:
                self.spent += time.perf_counter() - start
        return call

    async def get_items(self, limit: int | None = None) -> Any:
        return await self._timed(self.inner.get_items)(limit)

    async def add_items(self, items: Any) -> Any:
        return await self._timed(self.inner.add_items)(items)

    async def pop_item(self) -> Any:
        return await self._timed(self.inner.pop_item)()

    async def clear_session(self) -> Any:
        return await self._timed(self.inner.clear_session)()


async def fill(session: Any, items: int) -> None:
    for i in range(items // 8):
        for batch in turn_items(i):
            await session.add_items(batch)


KINDS = ("sqlite", "contextree", "ct+window")


def open_store(kind: str, where: Path) -> Any:
    if kind == "sqlite":
        return SQLiteSession("bench", where / "sessions.db")
    if kind == "contextree":
        return ContextreeSession("bench", where / "bench.jsonl")
    return ContextreeSession("bench", where / "window.jsonl", window=100_000_000)


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--items", type=int, default=10_000)
    ap.add_argument("--turns", type=int, default=20)
    args = ap.parse_args()
    kinds = KINDS
    with tempfile.TemporaryDirectory() as tmp:
        where = Path(tmp)
        stores = {}
        for kind in kinds:
            start = time.perf_counter()
            stores[kind] = open_store(kind, where)
            await fill(stores[kind], args.items)
            print(f"{kind:>10}: filled {args.items:,} items in {time.perf_counter() - start:.1f} s")
        agent = Agent(name="bench", instructions="Be brief.", model=Instant(), tools=[read_file])
        spent: dict[str, list[float]] = {k: [] for k in kinds}
        whole: dict[str, list[float]] = {k: [] for k in kinds}
        for t in range(args.turns):
            for kind in kinds[t % len(kinds):] + kinds[:t % len(kinds)]:
                timed = Timed(stores[kind])
                start = time.perf_counter()
                await Runner.run(agent, f"turn {t}: " + PROSE, session=timed)
                whole[kind].append(time.perf_counter() - start)
                spent[kind].append(timed.spent)
        n = len(await stores["sqlite"].get_items())
        for k in kinds:
            assert len(await stores[k].get_items()) == n
        print(f"\nper turn, {n:,}-item history, {args.turns} turns each (medians):")
        ms = {k: (statistics.median(spent[k]) * 1000, statistics.median(whole[k]) * 1000)
              for k in kinds}
        for kind in kinds:
            ratio = "" if kind == "sqlite" else (
                f"   ratio to sqlite: session {ms[kind][0] / ms['sqlite'][0]:.2f}x, "
                f"whole turn {ms[kind][1] / ms['sqlite'][1]:.2f}x")
            print(f"{kind:>10}: in the session {ms[kind][0]:7.1f} ms   "
                  f"whole Runner.run {ms[kind][1]:7.1f} ms{ratio}")
        print("(aim: <= 1.0x. ct+window is compaction-aware: the SDK then digests every model "
              "input itself, in the whole turn but not in the session)")
        for kind in kinds:
            s = stores[kind]
            s.close()
            start = time.perf_counter()
            again = open_store(kind, where)
            await again.get_items()
            print(f"{kind:>10}: reopen + first get_items {(time.perf_counter() - start) * 1000:.0f} ms")
            again.close()


if __name__ == "__main__":
    asyncio.run(main())
