"""Benchmark: what OpenTelemetry tracing (``Tracing``) adds to a turn, on its thread and off.

Run: ``python bench/bench_tracing.py [--turns 200] [--block 10] [--batch SECONDS]``.

Each turn is a real agent turn: a ``SessionTree`` on a JSONL file, the system prompt, a tool
call and its result, and two streamed model calls through the ``openai`` SDK to a local fake
Chat Completions server (one HTTP round trip each, no network). Four ways alternate in
blocks of ``--block`` turns, so drift in the machine's load hits them alike: no handler (the
baseline); a timed handler that does nothing (what the timers themselves cost);
``agent.on("*", Tracing(...))`` as it ships, whose spans the SDK makes on ``Tracing``'s
daemon thread in batches; and the same with each turn's spans made at its ``turn_end`` on
the turn's thread (how ``Tracing`` worked before it had the daemon thread). Every span goes
through the SDK's ``BatchSpanProcessor`` into an in-memory exporter; a traced block ends
with ``tracing.flush()``, inside its measurement, so all its spans are made and exported in
it.

Printed per turn: the median wall time and its ratio to the baseline's; the process's CPU
time (every thread, the fake server's included: block totals over their turns, median of
the blocks) and its ratio to the baseline's (a few percent of noise on a busy machine);
the time spent inside the handler (wall and CPU of the turn's thread, ``turn_end``'s apart,
then less the timers' own); the CPU time of the threads that make and export the spans
(``contextree-tracing``, the SDK's batch thread), read from their own CPU clocks, and of
the flush ending each block; and their sum, tracing's CPU in all, which moving work off the
turn's thread cannot hide. A turn against a real provider takes far longer (the model's
seconds), so the ratios here are upper bounds of the overhead.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import contextree as ct
from contextree.models import OpenAIChat
from contextree.runtime import (
    DefaultToolPipeline,
    SessionTree,
    SystemPrompt,
    ToolResultLoop,
    _tracing,
)
from fakes.openai_server import OpenAIServer, completion, tool_call


@ct.tool
def lookup(city: str) -> str:
    """The weather in a city.

    Args:
        city: Which city.
    """
    return f"sunny in {city}"


class _Timed:
    """The tracing handler, timed: the seconds spent inside it are summed, in wall-clock
    time and in CPU time of the calling thread (``turn_end``'s apart). ``inline``: make the
    turn's spans right after its ``turn_end``, on its thread (counted as inside)."""

    def __init__(self, handler: Any, *, inline: bool = False) -> None:
        self.handler, self.inline = handler, inline
        self.seconds = self.cpu = self.at_end = 0.0

    def reset(self) -> None:
        self.seconds = self.cpu = self.at_end = 0.0

    def __call__(self, env: Any, payload: Any) -> None:
        cpu = time.thread_time()
        started = time.perf_counter()
        self.handler(env, payload)
        if self.inline and payload.event == "turn_end":
            _tracing._MAKER.drain()  # what the handler did at turn_end before the thread
        spent = time.perf_counter() - started
        self.cpu += time.thread_time() - cpu
        self.seconds += spent
        if payload.event == "turn_end":
            self.at_end += spent


class _ThreadCpu:
    """The CPU seconds of the threads named ``name`` (alive now), from their own clocks."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __call__(self) -> float:
        total = 0.0
        for thread in threading.enumerate():
            if thread.name == self.name and thread.ident is not None:
                try:
                    total += time.clock_gettime(time.pthread_getcpuclockid(thread.ident))
                except (OSError, AttributeError):  # ended meanwhile, or not on this system
                    pass
        return total


class _Way:
    """One way of running the bench's turns, and what was measured of it."""

    def __init__(self, label: str, handler: _Timed | None, *, traced: bool = False) -> None:
        self.label, self.handler, self.traced = label, handler, traced
        self.walls: list[float] = []  # per turn
        self.cpu_blocks: list[float] = []  # process CPU per turn, per block
        self.turns = 0
        self.maker_cpu = self.export_cpu = self.flush_cpu = 0.0


def _turn(server: OpenAIServer, model: OpenAIChat, path: Path, handler: Any) -> float:
    """The seconds one turn takes (on a new session)."""
    server.reply(completion(tool_calls=[tool_call("c1", "lookup", {"city": "Oslo"})]),
                 completion("Sunny in Oslo."))
    agent = (ct.agent().use(SessionTree, path=path).use(SystemPrompt, text="You are terse.")
             .use(ToolResultLoop).use(DefaultToolPipeline, tools=[lookup]).run(model))
    if handler is not None:
        agent.on("*", handler)
    started = time.perf_counter()
    agent.start("Weather in Oslo?")
    return time.perf_counter() - started


def _block(way: _Way, n: int, run: Any, tracing: Any, maker: _ThreadCpu,
           exporter: _ThreadCpu) -> None:
    """Run ``n`` turns ``way``'s way, the traced ones' spans made and exported in it."""
    maker_cpu, export_cpu = maker(), exporter()
    cpu = time.process_time()
    for _ in range(n):
        way.walls.append(run(way.handler))
    if way.traced:
        flush = time.thread_time()
        tracing.flush()
        way.flush_cpu += time.thread_time() - flush
    way.cpu_blocks.append((time.process_time() - cpu) / n)
    way.maker_cpu += maker() - maker_cpu
    way.export_cpu += exporter() - export_cpu
    way.turns += n


def _bare_spans(provider: Any, n: int) -> float:
    """CPU seconds per span made straight with the SDK in a loop (its code warm)."""
    tracer = provider.get_tracer("bench")
    started = time.process_time()
    for _ in range(n):
        span = tracer.start_span("chat m", attributes={"a": 1, "b": "x", "c": 2.0, "d": 3,
                                                      "e": "y"})
        span.set_attributes({"f": 1, "g": 2, "h": 3})
        span.end()
    return (time.process_time() - started) / n


def _load() -> str:
    """The load averages (1, 5, 15 minutes), for the record."""
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "unknown"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=200, help="turns each way")
    parser.add_argument("--block", type=int, default=10, help="turns per block")
    parser.add_argument("--batch", type=float, default=_tracing.BATCH_SECONDS,
                        help="seconds a turn's spans wait to be made (default: Tracing's)")
    args = parser.parse_args()
    _tracing._MAKER.delay = args.batch

    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from contextree.runtime import Tracing

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(exporter))
    tracing = Tracing(tracer_provider=provider)
    base, noop = _Way("without tracing", None), _Way("a timed handler that does nothing",
                                                     _Timed(lambda env, payload: None))
    ways = [base, noop, _Way("with tracing", _Timed(tracing), traced=True),
            _Way("spans made at turn end (before the thread)", _Timed(tracing, inline=True),
                 traced=True)]
    maker, export = _ThreadCpu("contextree-tracing"), _ThreadCpu("OtelBatchSpanRecordProcessor")
    load_before = _load()
    with OpenAIServer() as server, tempfile.TemporaryDirectory() as tmp:
        model = OpenAIChat("gpt-test", base_url=server.base_url, api_key="k")
        directory = Path(tmp)
        count = iter(range(10**9))

        def run(handler: Any) -> float:
            return _turn(server, model, directory / f"t{next(count)}.jsonl", handler)

        for way in ways:  # warm up: imports, the SDK client, the disk, both threads
            for _ in range(10):
                run(way.handler)
        tracing.flush()
        for way in ways:
            if way.handler is not None:
                way.handler.reset()
            way.walls.clear()
        blocks = max(1, args.turns // args.block)
        for _ in range(blocks):  # alternate, so the machine's drift hits every way alike
            for way in ways:
                _block(way, args.block, run, tracing, maker, export)
    provider.force_flush()
    spans = len(exporter.get_finished_spans())
    bare = _bare_spans(provider, 2000)
    base_wall, base_cpu = statistics.median(base.walls), statistics.median(base.cpu_blocks)
    timers = noop.handler
    assert timers is not None
    print(f"{blocks * args.block} turns each way, in alternating blocks of {args.block} (a "
          "tool call and two streamed model calls through the openai SDK to a local server "
          f"per turn, JSONL session; spans made {args.batch} s after a turn ended); load {load_before} before, {_load()} after")
    print(f"  {base.label}: {base_wall * 1e3:.2f} ms per turn (median wall), process CPU "
          f"{base_cpu * 1e3:.2f} ms per turn (all threads; median of the blocks)")
    for way in ways[1:]:
        timed = way.handler
        assert timed is not None
        wall, cpu = statistics.median(way.walls), statistics.median(way.cpu_blocks)
        inside, inside_cpu = timed.seconds / way.turns, timed.cpu / way.turns
        print(f"  {way.label}: {wall * 1e3:.2f} ms per turn, ratio {wall / base_wall:.4f}; "
              f"process CPU {cpu * 1e3:.2f} ms per turn, ratio {cpu / base_cpu:.4f}")
        print(f"    inside the handler, on the turn's thread: {inside * 1e6:.0f} us per turn "
              f"= {100 * inside / base_wall:.2f}% of a turn "
              f"({timed.at_end / way.turns * 1e6:.0f} us at turn_end); CPU "
              f"{inside_cpu * 1e6:.0f} us")
        if not way.traced:
            continue
        net = inside - timers.seconds / way.turns
        net_cpu = inside_cpu - timers.cpu / way.turns
        maker_cpu, export_cpu = way.maker_cpu / way.turns, way.export_cpu / way.turns
        flush_cpu = way.flush_cpu / way.turns
        total = net_cpu + maker_cpu + export_cpu + flush_cpu
        print(f"    less the timers' own (the handler that does nothing): {net * 1e6:.0f} us "
              f"= {100 * net / base_wall:.2f}% of a turn; CPU {net_cpu * 1e6:.0f} us")
        print(f"    off the turn's thread, CPU per turn: {maker_cpu * 1e6:.0f} us making spans "
              f"(contextree-tracing), {export_cpu * 1e6:.0f} us exporting (the SDK's batch "
              f"thread), {flush_cpu * 1e6:.0f} us in the flush ending each block")
        print(f"    tracing's CPU in all: {total * 1e6:.0f} us per turn = "
              f"{100 * total / base_wall:.2f}% of a turn's wall time, "
              f"{100 * total / base_cpu:.2f}% of its process CPU")
    print(f"  {spans} spans exported; for scale, a bare span made with the SDK in a warm loop "
          f"(start, 8 attributes, end): {bare * 1e6:.0f} us CPU")


if __name__ == "__main__":
    main()
