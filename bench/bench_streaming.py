"""Benchmark: assembling streamed replies, and the time to the first event.

Run: ``python bench/bench_streaming.py [--deltas 100000] [--runs 30]``.

1. Assembly: the OpenAI and Anthropic assemblers fed ``--deltas`` SDK chunk objects (built
   before the clock starts), against a baseline that appends the same deltas' text to a list
   and joins it. Measured at a tenth, half and all of the deltas, so the per-delta time
   shows whether assembly stays linear (no copy of the reply per delta).
2. Time to first event: an agent streaming from a local SSE server through the real
   ``openai`` SDK; the time from the server's first event leaving the socket to the
   ``text_delta`` event arriving at the ``for event in agent.stream(...)`` loop (median and
   worst of ``--runs``).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import contextree as ct
from contextree.models import OpenAIChat
from contextree.models._stream import AnthropicAssembler, ChatAssembler
from contextree.runtime import Event
from fakes import SSE
from fakes.openai_server import OpenAIServer


def openai_chunks(n: int) -> list[Any]:
    from openai.types.chat import ChatCompletionChunk

    base = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m"}
    chunks = [ChatCompletionChunk.model_validate(
        {**base, "choices": [{"index": 0, "delta": {"content": f"w{i} "},
                              "finish_reason": None}]}) for i in range(n)]
    chunks.append(ChatCompletionChunk.model_validate(
        {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}))
    return chunks


def anthropic_events(n: int) -> list[Any]:
    from anthropic.types import (
        RawContentBlockDeltaEvent,
        RawContentBlockStartEvent,
        RawContentBlockStopEvent,
        RawMessageDeltaEvent,
        RawMessageStartEvent,
        RawMessageStopEvent,
    )

    start = RawMessageStartEvent.model_validate({"type": "message_start", "message": {
        "id": "m", "type": "message", "role": "assistant", "model": "claude", "content": [],
        "stop_reason": None, "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 1}}})
    events: list[Any] = [start, RawContentBlockStartEvent.model_validate(
        {"type": "content_block_start", "index": 0,
         "content_block": {"type": "text", "text": ""}})]
    events += [RawContentBlockDeltaEvent.model_validate(
        {"type": "content_block_delta", "index": 0,
         "delta": {"type": "text_delta", "text": f"w{i} "}}) for i in range(n)]
    events += [RawContentBlockStopEvent.model_validate({"type": "content_block_stop",
                                                        "index": 0}),
               RawMessageDeltaEvent.model_validate(
                   {"type": "message_delta", "delta": {"stop_reason": "end_turn"},
                    "usage": {"output_tokens": n}}),
               RawMessageStopEvent.model_validate({"type": "message_stop"})]
    return events


def assemble(make: Callable[[], Any], chunks: list[Any]) -> float:
    assembler = make()
    t = time.perf_counter()
    for chunk in chunks:
        assembler.feed(chunk)
    assembler.body()
    return time.perf_counter() - t


def baseline(texts: list[str]) -> float:
    t = time.perf_counter()
    parts: list[str] = []
    for text in texts:
        parts.append(text)
    "".join(parts)
    return time.perf_counter() - t


def bench_assembly(n: int) -> None:
    print(f"assembly of a streamed reply ({n:,} deltas; per-delta time at 10%, 50%, 100%)")
    sdk_chunks = {"openai": (ChatAssembler, openai_chunks(n)),
                  "anthropic": (AnthropicAssembler, anthropic_events(n))}
    texts = [f"w{i} " for i in range(n)]
    for name, (make, chunks) in sdk_chunks.items():
        per_delta = []
        for share in (10, 50, 100):
            k = n * share // 100
            part = chunks[:k] + chunks[-1:] if name == "openai" else (
                chunks[:k + 2] + chunks[-3:])
            best = min(assemble(make, part) for _ in range(3))
            per_delta.append(best / k * 1e9)
        full = min(assemble(make, chunks) for _ in range(3))
        join = min(baseline(texts) for _ in range(3))
        print(f"  {name:9s} {full * 1e3:7.1f} ms ({full / n * 1e9:6.0f} ns/delta; "
              f"{'/'.join(f'{x:.0f}' for x in per_delta)} ns at 10/50/100%) "
              f"= {full / join:5.1f}x a list append + join ({join * 1e3:.1f} ms)")


def bench_first_event(runs: int) -> None:
    latencies = []
    with OpenAIServer() as server:
        model = OpenAIChat("gpt-test", base_url=server.base_url, api_key="k")
        agent = ct.agent().run(model)
        for _ in range(runs):
            chunk = {"id": "c", "object": "chat.completion.chunk", "created": 0,
                     "model": "gpt-test"}
            events: list[tuple[str | None, Any]] = [
                (None, {**chunk, "choices": [{"index": 0, "delta": {"content": "Hi"},
                                              "finish_reason": None}]}),
                (None, {**chunk, "choices": [{"index": 0, "delta": {},
                                              "finish_reason": "stop"}]}),
                (None, "[DONE]")]
            sse = SSE(events, hold_after=1)
            server.reply(sse)
            with agent.stream("hi") as stream:
                for event in stream:
                    if event["event"] == Event.TEXT_DELTA:
                        arrived = time.perf_counter()
                        latencies.append(arrived - sse.written[0])
                        sse.release.set()
    latencies.sort()
    p95 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.95))]
    print(f"time to the first event after the server's first byte ({runs} runs): "
          f"median {statistics.median(latencies) * 1e3:.2f} ms, p95 {p95 * 1e3:.2f} ms, "
          f"worst {latencies[-1] * 1e3:.2f} ms (target < 5 ms)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--deltas", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=100)
    args = parser.parse_args()
    bench_assembly(args.deltas)
    bench_first_event(args.runs)


if __name__ == "__main__":
    main()
