"""Overhead per turn of ``ContextreeMiddleware`` in a LangChain 1.x ``create_agent`` graph,
against the same graph with ``InMemorySaver`` alone, measured in the same run.

    python bench/bench_integrations_langchain.py                 # 1,000 and 10,000 messages
    python bench/bench_integrations_langchain.py --sizes 10000 --turns 30

Each thread starts from ``size`` messages in the checkpointer (a user message, an AI message
calling a tool, the tool's ~1 KB result, an answer; the AI messages carry usage, as real
replies do). A *turn* is one ``agent.invoke`` with a new user message: the model (scripted,
no model time) calls the tool, the tool runs, the model answers; so the middleware mirrors
and builds its view twice, and records three times. Agents: LangGraph's own (the baseline),
with ``ContextreeMiddleware`` on an in-memory session, on a JSONL file per thread (durable,
the default: every new message synced with ``fdatasync`` before the hook returns), on JSONL
with ``durable=False`` (written, the flushing left to the OS), and on durable JSONL with a
compaction window (large enough that nothing is compacted, so each call also runs the
trigger check). The agents take turns, so noise on a
shared machine falls on all of them alike, and each turn starts after a full garbage
collection, so that one does not fall on whichever turn happens to trigger it.

Printed per agent and size: the median of a turn, in ms of CPU time (the process's, all
threads: what the turn costs, and steady on a machine that other work shares) and of wall
time, each with its ratio to the baseline's, and the CPU ms of the turn spent in the
middleware's own work ("in it"). The aim is at most 1.1x. "The same hooks, doing
nothing" is a middleware with ContextreeMiddleware's hooks and no work: the floor that the
graph's own extra steps set.

``InMemorySaver`` keeps nothing on disk, so a durable store cannot reach it: each turn pays
the device's sync time once a new message. After each size, the line "fsync floor" gives
how many syncs a durable turn made and what that many ``os.write`` + ``os.fdatasync`` of
the same size cost on the same disk, in the same run; the next line is the durable JSONL
turn less that floor, against the baseline: the middleware's own cost, which the
``durable=False`` row shows directly. The floor is
timed once a round, among the turns, so that a busy disk weighs on both alike.
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from contextree.integrations.langchain import ContextreeMiddleware

OUTPUT = "\n".join(f"tests/test_{i}.py::test_case PASSED  [{i:3d}%]" for i in range(20))  # ~1 KB


def usage(tokens: int) -> dict[str, int]:
    return {"input_tokens": tokens, "output_tokens": 20, "total_tokens": tokens + 20}


def turn_messages(i: int) -> list[BaseMessage]:
    """One turn: prompt, tool call, tool result, answer."""
    return [
        HumanMessage(f"step {i}: run the tests", id=f"h{i}"),
        AIMessage("", id=f"a{i}", tool_calls=[{"id": f"c{i}", "name": "shell",
                                               "args": {"command": f"pytest -k {i}"}}],
                  usage_metadata=usage(1000 + 300 * i)),  # type: ignore[arg-type]
        ToolMessage(OUTPUT, tool_call_id=f"c{i}", name="shell", id=f"t{i}"),
        AIMessage(f"all {i} tests pass", id=f"d{i}",
                  usage_metadata=usage(1280 + 300 * i)),  # type: ignore[arg-type]
    ]


def history(size: int) -> list[BaseMessage]:
    out: list[BaseMessage] = []
    i = 0
    while len(out) < size:
        out += turn_messages(i)
        i += 1
    return out[: max(4, size // 4 * 4)]


class Instant(BaseChatModel):
    """Calls the tool, then answers; no model time."""

    calls: int = 0

    @property
    def _llm_type(self) -> str:
        return "instant"

    def bind_tools(self, tools: Any, **kwargs: Any) -> Instant:  # type: ignore[override]
        return self

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:
        self.calls += 1
        n = self.calls
        tokens = 150 * len(messages)
        if isinstance(messages[-1], ToolMessage):
            reply = AIMessage("all tests pass", usage_metadata=usage(tokens))  # type: ignore[arg-type]
        else:
            reply = AIMessage("", tool_calls=[{"id": f"call{n}", "name": "shell",
                                               "args": {"command": "pytest"}}],
                              usage_metadata=usage(tokens))  # type: ignore[arg-type]
        return ChatResult(generations=[ChatGeneration(message=reply)])


class Hooks(AgentMiddleware):  # type: ignore[type-arg]
    """The hooks ContextreeMiddleware uses, doing nothing: what the graph's own steps cost."""

    def wrap_model_call(self, request: Any, handler: Any) -> Any:
        return handler(request)

    def after_model(self, state: Any, runtime: Any) -> None:
        return None

    def after_agent(self, state: Any, runtime: Any) -> None:
        return None


@tool
def shell(command: str) -> str:
    """Run a shell command."""
    return OUTPUT


class Timed:
    """Adds up the CPU time (of the thread doing it) spent in a middleware's own work
    (mirroring, the view, compaction checks), without the model call it wraps."""

    def __init__(self, mw: ContextreeMiddleware) -> None:
        self.spent = 0.0
        for name in ("prepare", "_record"):
            setattr(mw, name, self._timed(getattr(mw, name)))

    def _timed(self, fn: Any) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            start = time.thread_time()
            try:
                return fn(*args, **kwargs)
            finally:
                self.spent += time.thread_time() - start
        return call


DURABLE = "+ ContextreeMiddleware (JSONL, durable)"


def agents(tmp: Path) -> list[tuple[str, Any, ContextreeMiddleware | None]]:
    made: list[tuple[str, Any, ContextreeMiddleware | None]] = []
    floor = create_agent(Instant(), tools=[shell], system_prompt="Be brief.",
                         middleware=[Hooks()], checkpointer=InMemorySaver())
    options: list[tuple[str, dict[str, Any] | None]] = [
        ("InMemorySaver alone (baseline)", None),
        ("+ ContextreeMiddleware (memory)", {}),
        (DURABLE, {"directory": tmp / "jsonl"}),
        ("+ ContextreeMiddleware (JSONL, durable=False)", {"directory": tmp / "buffered",
                                                           "durable": False}),
        ("+ ContextreeMiddleware (JSONL, durable, window)", {"directory": tmp / "window",
                                                             "window": 100_000_000}),
    ]
    for name, opts in options:
        mw = ContextreeMiddleware(**opts) if opts is not None else None
        agent = create_agent(Instant(), tools=[shell], system_prompt="Be brief.",
                             middleware=[mw] if mw is not None else [],
                             checkpointer=InMemorySaver())
        made.append((name, agent, mw))
    made.insert(1, ("+ the same hooks, doing nothing", floor, None))
    return made


def run(size: int, turns: int, tmp: Path) -> None:
    made = agents(tmp / str(size))
    cfg = {"configurable": {"thread_id": f"bench-{size}"}}
    for name, agent, _ in made:  # the history, then turns to warm every cache up
        agent.update_state(cfg, {"messages": history(size)})
        agent.invoke({"messages": [HumanMessage("warm up")]}, cfg)
        if name == DURABLE:  # a second one counts what a durable turn syncs
            syncs, written = synced_turn(agent, cfg)
        else:
            agent.invoke({"messages": [HumanMessage("warm up again")]}, cfg)
    disk = Floor(tmp / f"floor-{size}", syncs, written // max(syncs, 1))
    timers = {name: Timed(mw) for name, _, mw in made if mw is not None}
    inside: dict[str, list[float]] = {name: [] for name in timers}
    cpu: dict[str, list[float]] = {name: [] for name, _, _ in made}
    wall: dict[str, list[float]] = {name: [] for name, _, _ in made}
    floor_wall: list[float] = []
    for t in range(turns):
        order = made[t % len(made):] + made[:t % len(made)]
        floor_wall.append(disk.time())  # the disk's sync time, in the same round
        for name, agent, _ in order:
            timer = timers.get(name)
            before = timer.spent if timer is not None else 0.0
            gc.collect()  # each turn starts clean: a full collection falls on no one
            start, start_cpu = time.perf_counter(), time.process_time()
            agent.invoke({"messages": [HumanMessage(f"turn {t}: run the tests")]}, cfg)
            cpu[name].append(time.process_time() - start_cpu)
            if timer is not None:
                inside[name].append(timer.spent - before)
            wall[name].append(time.perf_counter() - start)
    n = len(made[0][1].get_state(cfg).values["messages"])
    base_cpu, base_wall = (statistics.median(cpu[made[0][0]]),
                           statistics.median(wall[made[0][0]]))
    for name, agent, _ in made:
        assert len(agent.get_state(cfg).values["messages"]) == n
        c, w = statistics.median(cpu[name]), statistics.median(wall[name])
        own = f"{statistics.median(inside[name]) * 1e3:>9.2f}" if name in inside else ""
        print(f"{name:48} {n:>7,} {c * 1e3:>9.2f} {c / base_cpu:>7.2f}x "
              f"{w * 1e3:>9.2f} {w / base_wall:>7.2f}x {own}")
    for _, _, mw in made:
        if mw is not None:
            mw.close()
    disk.close()
    floor = statistics.median(floor_wall)
    less = statistics.median(wall[DURABLE]) - floor
    print(f"{'  fsync floor: ' + str(syncs) + ' write+fdatasync alone':48} {'':>7} {'':>9} "
          f"{'':>8} {floor * 1e3:>9.2f}")
    print(f"{'  JSONL, durable, less the floor':48} {'':>7} {'':>9} {'':>8} "
          f"{less * 1e3:>9.2f} {less / base_wall:>7.2f}x")


def synced_turn(agent: Any, cfg: Any) -> tuple[int, int]:
    """How many ``fdatasync`` calls one more turn of ``agent`` makes, and the bytes it writes."""
    real_sync, real_write = os.fdatasync, os.write
    counts = [0, 0]

    def sync(fd: int) -> None:
        counts[0] += 1
        real_sync(fd)

    def write(fd: int, data: Any) -> int:
        counts[1] += len(data)
        return real_write(fd, data)

    os.fdatasync, os.write = sync, write  # type: ignore[assignment]
    try:
        agent.invoke({"messages": [HumanMessage("count the syncs")]}, cfg)
    finally:
        os.fdatasync, os.write = real_sync, real_write
    return counts[0], counts[1]


class Floor:
    """What a durable turn pays the disk whatever writes it: ``syncs`` appends of ``size``
    bytes to a file on the same disk, each followed by ``fdatasync``."""

    def __init__(self, path: Path, syncs: int, size: int) -> None:
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        self.syncs, self.line = syncs, b"x" * max(size - 1, 0) + b"\n"

    def time(self) -> float:
        """The wall time of one turn's appends and syncs."""
        start = time.perf_counter()
        for _ in range(self.syncs):
            os.write(self.fd, self.line)
            os.fdatasync(self.fd)
        return time.perf_counter() - start

    def close(self) -> None:
        os.close(self.fd)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 10_000])
    parser.add_argument("--turns", type=int, default=25)
    args = parser.parse_args()
    print(f"agent.invoke turns (tool call, tool, answer; median of {args.turns} turns, ms)")
    print(f"{'agent':48} {'messages':>7} {'cpu':>9} {'vs base':>8} {'wall':>9} {'vs base':>8} "
          f"{'in it':>9}")
    with tempfile.TemporaryDirectory() as tmp:
        for size in args.sizes:
            run(size, args.turns, Path(tmp))


if __name__ == "__main__":
    main()
