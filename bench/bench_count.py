"""Benchmark: the one count (``SessionContext.measure``) of a 1,000-message branch.

Run: ``python bench/bench_count.py [--messages 1000] [--repeat 200]``.

The count behind every decision to compact (the planner, ``show --context``, ``compact``,
the runtime trigger, the integrations). Timed on a context that is already built (as the
runtime and the integrations hold it), in its three cases: anchored on usage the provider
reported for the last call, carried on from a compaction's own count, and estimated (no
usage at all: every message is estimated). The goal: <= 5 ms with the estimate cached
(anchored, or carried on from a compaction: only the messages after the anchor are
estimated). Baseline in the same run: estimating every message once, and building the
context.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import contextree as ct
from contextree import Message, ToolCall, Usage
from contextree.tokens import EstimateCounter


def branch(n: int, *, usage: bool) -> ct.Session:
    """A coding-agent branch of about ``n`` messages (user, assistant call, tool result)."""
    s = ct.Session.in_memory()
    s.append_message(Message.system("You are a coding agent."))
    i = 0
    while len(s.branch()) < n:
        s.append_message(Message.user(f"step {i}: look at src/mod_{i}.py and fix the loader"))
        call = ToolCall(id=f"c{i}", name="read", arguments={"path": f"src/mod_{i}.py"})
        s.append_message(Message.assistant("Reading it.", tool_calls=[call],
                                           usage=Usage(input=900 * i + 500, output=20)
                                           if usage else None))
        s.append_message(Message.tool("def load(path):\n    return {}\n" * 40,
                                      tool_call_id=f"c{i}", name="read"))
        i += 1
    return s


def timeit(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=200)
    args = parser.parse_args()
    counter = EstimateCounter()
    reported = branch(args.messages, usage=True)
    estimated = branch(args.messages, usage=False)
    compacted = branch(args.messages, usage=True)
    compacted.compact(int(compacted.build_context().measure(counter).tokens / 0.8))
    compacted.append_message(Message.user("and now the tests"))
    cases = {"anchored on reported usage": reported, "carried on from a compaction": compacted,
             "estimated (no usage)": estimated}
    ctx0 = reported.build_context()
    base = timeit(lambda: counter.count_messages(ctx0.messages), args.repeat)
    build = timeit(reported.build_context, max(5, args.repeat // 20))
    print(f"{len(ctx0.messages)} messages; baseline: estimate every message once "
          f"{base * 1000:.2f} ms, build_context {build * 1000:.2f} ms")
    for label, s in cases.items():
        ctx = s.build_context()
        secs = timeit(lambda ctx=ctx: ctx.measure(counter), args.repeat)
        count = ctx.measure(counter)
        goal = "" if count.basis == "estimate" else (
            f" (goal <= 5 ms: {'met' if secs <= 0.005 else 'MISSED'})")
        print(f"{label}: {secs * 1000:.3f} ms for {len(ctx.messages)} messages, "
              f"{count.tokens:,} tokens ({count.basis}){goal}")


if __name__ == "__main__":
    main()
