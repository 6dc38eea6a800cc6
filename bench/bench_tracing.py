"""Benchmark: what OpenTelemetry tracing (``Tracing``) adds to a turn.

Run: ``python bench/bench_tracing.py [--turns 400]``.

Each turn is a real agent turn: a ``SessionTree`` on a JSONL file, the system prompt, a tool
call and its result, and two streamed model calls through the ``openai`` SDK to a local fake
Chat Completions server (one HTTP round trip each, no network). The same turns run without
tracing (the baseline) and with ``agent.on("*", Tracing(...))`` exporting every span
through the SDK's ``BatchSpanProcessor`` into an in-memory exporter. Traced and untraced
turns alternate, so drift in the machine's load hits both; the figures are the medians per
turn, their ratio, and the time spent inside the tracing handler itself (the steadier
figure on a busy machine), in wall-clock and in CPU time of the thread that runs the turn.
``Tracing`` records a turn's spans as it runs and makes them with the SDK when it ends, so
the handler's time is mostly that of the ``turn_end`` event (printed apart).
A turn against a real provider takes far longer (the model's seconds), so the ratio here is
an upper bound of the overhead.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import contextree as ct
from contextree.models import OpenAIChat
from contextree.runtime import DefaultToolPipeline, SessionTree, SystemPrompt, ToolResultLoop
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
    time and in CPU time of the calling thread (``turn_end``'s apart: the spans are made
    then)."""

    def __init__(self, handler: Any) -> None:
        self.handler = handler
        self.seconds = self.cpu = self.at_end = 0.0

    def reset(self) -> None:
        self.seconds = self.cpu = self.at_end = 0.0

    def __call__(self, env: Any, payload: Any) -> None:
        cpu = time.thread_time()
        started = time.perf_counter()
        self.handler(env, payload)
        spent = time.perf_counter() - started
        self.cpu += time.thread_time() - cpu
        self.seconds += spent
        if payload.event == "turn_end":
            self.at_end += spent


def _turn(server: OpenAIServer, model: OpenAIChat, path: Path, tracing: Any) -> float:
    """The seconds one turn takes (on a new session)."""
    server.reply(completion(tool_calls=[tool_call("c1", "lookup", {"city": "Oslo"})]),
                 completion("Sunny in Oslo."))
    agent = (ct.agent().use(SessionTree, path=path).use(SystemPrompt, text="You are terse.")
             .use(ToolResultLoop).use(DefaultToolPipeline, tools=[lookup]).run(model))
    if tracing is not None:
        agent.on("*", tracing)
    started = time.perf_counter()
    agent.start("Weather in Oslo?")
    return time.perf_counter() - started


def _bare_spans(provider: Any, n: int) -> float:
    """Seconds per span made straight with the SDK (what any tracing of a call costs)."""
    tracer = provider.get_tracer("bench")
    started = time.perf_counter()
    for _ in range(n):
        span = tracer.start_span("chat m", attributes={"a": 1, "b": "x", "c": 2.0, "d": 3,
                                                      "e": "y"})
        span.set_attributes({"f": 1, "g": 2, "h": 3})
        span.end()
    return (time.perf_counter() - started) / n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=400)
    args = parser.parse_args()

    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from contextree.runtime import Tracing

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(exporter))
    timed = _Timed(Tracing(tracer_provider=provider))
    plain: list[float] = []
    traced: list[float] = []
    with OpenAIServer() as server, tempfile.TemporaryDirectory() as tmp:
        model = OpenAIChat("gpt-test", base_url=server.base_url, api_key="k")
        directory = Path(tmp)
        for i in range(20):  # warm up: imports, the SDK client, the disk
            _turn(server, model, directory / f"w{i}.jsonl", timed if i % 2 else None)
        timed.reset()
        for i in range(args.turns):  # alternate, so the machine's drift hits both alike
            traced.append(_turn(server, model, directory / f"t{i}.jsonl", timed))
            plain.append(_turn(server, model, directory / f"p{i}.jsonl", None))
    provider.force_flush()
    spans = len(exporter.get_finished_spans())
    per_turn = spans / (args.turns + 10)  # the warm-up traced half of its 20 turns
    bare = _bare_spans(provider, 2000)
    base, with_spans = statistics.median(plain), statistics.median(traced)
    inside = timed.seconds / args.turns
    print(f"{args.turns} turns each way, alternating (a tool call and two streamed model "
          "calls through the openai SDK to a local server per turn, JSONL session)")
    print(f"  without tracing: {base * 1e3:.2f} ms per turn (median)")
    print(f"  with tracing:    {with_spans * 1e3:.2f} ms per turn (median); {spans} spans "
          "exported")
    print(f"  ratio of medians with/without: {with_spans / base:.4f}")
    print(f"  time inside the tracing handler: {inside * 1e6:.0f} us per turn = "
          f"{100 * inside / base:.2f}% of a turn (span export runs in the SDK's batch thread); "
          f"{timed.at_end / args.turns * 1e6:.0f} us of it at turn_end, where the spans are "
          f"made; CPU time {timed.cpu / args.turns * 1e6:.0f} us")
    print(f"  for scale, the SDK alone: {per_turn:.1f} spans per turn x {bare * 1e6:.0f} us "
          f"per bare span made in a loop (start, 8 attributes, end) = "
          f"{per_turn * bare * 1e6:.0f} us")


if __name__ == "__main__":
    main()
