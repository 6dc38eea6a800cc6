"""Benchmark: how much of each request a provider's prompt cache serves in an agent loop.

Run: ``python bench/bench_cache_prefix.py [--steps 150] [--window 100000]``.

contextree's runtime (system prompt, tool loop, compaction at 0.7 of ``--window``, a
``read_file`` tool returning about 1,500 tokens) drives ``AnthropicMessages`` (the real
``anthropic`` SDK) against a fake Messages API on 127.0.0.1 that simulates the documented
prompt cache (``tests/fakes/anthropic_server.PromptCache``: the prefix up to each
``cache_control`` breakpoint is written; a later request reads the longest cached prefix
within 20 blocks of one of its breakpoints) and reports ``cache_read_input_tokens`` and
``cache_creation_input_tokens`` as the API does.

Printed: the share of input tokens read from the cache between compactions (every request
but the first one after each compaction; goal >= 90%), over all requests, and the same run
without breakpoints (``prompt_cache=False``) as the baseline.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import contextree as ct
from contextree.models import AnthropicMessages
from fakes import Recorded
from fakes.anthropic_server import CachingAnthropicServer, message, text, tool_use

SYSTEM = ("You are a careful coding agent working in a Python repository. Read files before "
          "you change them, run the tests after every change, and report what you did. ") * 8


@ct.tool
def read_file(path: str) -> str:
    """Read a file of the repository."""
    return "".join(f"{path}:{i}: value_{i} = compute({i}, cache=True)  # line\n"
                   for i in range(110))


def run(steps: int, window: int, cached: bool) -> tuple[float, float, int, int, float]:
    """(share between compactions, share over all requests, requests, compactions, and the
    share of the previous request's tokens the warm requests read from the cache)."""
    with CachingAnthropicServer() as server:
        calls = iter(range(10**6))

        def reply(req: Recorded) -> dict[str, Any]:
            n = next(calls)
            if n + 1 >= steps:
                return message(text("All done."))
            return message(text(f"Step {n}: reading the next file."),
                           tool_use(f"toolu_{n}", "read_file", {"path": f"src/mod_{n}.py"}))

        server.reply(*[reply] * (steps + 10))
        model = AnthropicMessages("claude-test", base_url=server.url, api_key="k",
                                  prompt_cache=cached)
        compacted_at: list[int] = []
        agent = (ct.agent()
                 .use(ct.runtime.SystemPrompt, text=SYSTEM)
                 .use(ct.runtime.ToolResultLoop)
                 .use(ct.runtime.MaxIterations, limit=steps + 5)
                 .use(ct.runtime.DefaultCompactionPipeline, window=window)
                 .use(ct.runtime.DefaultToolPipeline, tools=[read_file])
                 .run(model))
        agent.on("compacted", lambda env, p: compacted_at.append(len(server.usages)))
        agent.start("Go through the modules one by one and fix the loader.")
        usages = server.usages
    cold = set(compacted_at) | {0}  # the first request, and the first after a compaction
    warm = [u for i, u in enumerate(usages) if i not in cold]

    def share(us: list[tuple[int, int, int]]) -> float:
        total = sum(a + b + c for a, b, c in us)
        return sum(b for _, b, _ in us) / total if total else 0.0

    reused = [(sum(usages[i - 1]), usages[i][1]) for i in range(1, len(usages)) if i not in cold]
    prefix = sum(r for _, r in reused) / max(1, sum(p for p, _ in reused))
    return share(warm), share(usages), len(usages), len(compacted_at), prefix


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--window", type=int, default=100_000)
    args = parser.parse_args()
    base_warm, base_all, _, _, _ = run(args.steps, args.window, cached=False)
    warm, overall, requests, compactions, prefix = run(args.steps, args.window, cached=True)
    verdict = "met" if warm >= 0.9 else "MISSED"
    print(f"{requests} requests, {compactions} compactions (window {args.window:,})")
    print(f"cache_control breakpoints: {warm:.1%} of input tokens read from the cache between "
          f"compactions (goal >= 90%: {verdict}), {overall:.1%} over all requests; each "
          f"request between compactions reads {prefix:.1%} of the previous one from the cache "
          "(the rest of it is what the step added)")
    print(f"baseline, no breakpoints: {base_warm:.1%} between compactions, "
          f"{base_all:.1%} over all requests")


if __name__ == "__main__":
    main()
