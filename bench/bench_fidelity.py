"""Benchmark: how many planted facts survive compaction to 20% of a session's size.

Run: ``python bench/bench_fidelity.py [--seeds 8] [--turns 60]``.

Each seed generates a long coding-agent session (many turns of reads, edits, shell commands
and chatter) with facts planted in its first 60%: files the agent changed, constraints the
user stated, failing commands and their error text, and decisions the assistant announced.
The session is compacted so the target is 20% of its tokens (``compact_to`` 0.4 of a window
of half its size; ``--fraction`` changes it) with ``[Digest()]``, with ``[SlidingWindow()]``
alone (the baseline; also with ``within_turn=True``) and with the default pipeline, and the
fraction of facts still present in the text of the resulting context (message text and
tool-call arguments) is printed per kind and overall, with the worst seed ("min").
Target: >= 90% for Digest.
"""

from __future__ import annotations

import argparse
import random
import statistics
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

import contextree as ct
from contextree.compaction import CompactionPipeline, Digest, SlidingWindow, default_pipeline
from contextree.messages import Message, ToolCall
from contextree.tokens import EstimateCounter

WORDS = ("the", "parser", "cache", "returns", "config", "value", "handler", "module", "when",
         "missing", "default", "request", "retry", "client", "schema", "field", "index",
         "batch", "worker", "queue", "timeout", "session", "token", "export", "format")
LIBS = ("httpx", "orjson", "attrs", "pydantic", "sqlalchemy", "click", "rich", "trio",
        "anyio", "structlog", "tenacity", "polars", "duckdb", "lxml", "regex", "pyyaml")
CONSTRAINTS = (
    "never touch the file {x}",
    "keep the public function {x} backwards compatible",
    "do not add the dependency {x}",
    "all timestamps must stay in UTC, the field {x} included",
    "the CLI flag {x} must keep its current name",
)


@dataclass
class Facts:
    """Strings that must still appear in the context, by kind."""

    by_kind: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))

    def add(self, kind: str, text: str) -> None:
        self.by_kind[kind].append(text)


def words(rnd: random.Random, n: int) -> str:
    return " ".join(rnd.choice(WORDS) for _ in range(n))


def code(rnd: random.Random, lines: int) -> str:
    return "\n".join(f"    {rnd.choice(WORDS)}_{i} = {rnd.choice(WORDS)}({rnd.randint(0, 99)})"
                     for i in range(lines))


class Builder:
    def __init__(self, rnd: random.Random) -> None:
        self.rnd = rnd
        self.s = ct.Session.in_memory()
        self.n = 0
        self.s.append_message(Message.system("You are a coding agent in a Python repository."))

    def user(self, text: str) -> None:
        self.s.append_message(Message.user(text))

    def step(self, text: str, name: str | None = None, args: dict[str, Any] | None = None,
             output: str = "", *, exit_code: int | None = None) -> None:
        calls = []
        if name is not None:
            self.n += 1
            calls.append(ToolCall(id=f"call_{self.n}", name=name, arguments=args or {}))
        self.s.append_message(Message.assistant(text, tool_calls=calls))
        for c in calls:
            meta = {"exit_code": exit_code} if exit_code is not None else None
            self.s.append_message(Message.tool(output, tool_call_id=c.id, name=c.name,
                                               is_error=bool(exit_code), meta=meta))

    def filler_step(self) -> None:
        rnd = self.rnd
        kind = rnd.choice(("read", "read", "read", "grep", "edit", "shell", "talk"))
        mod = f"src/app/{rnd.choice(WORDS)}_{rnd.randint(1, 400)}.py"
        if kind == "read":
            self.step(f"Let me read {mod}.", "read", {"path": mod}, code(rnd, rnd.randint(20, 250)))
        elif kind == "grep":
            self.step("", "grep", {"pattern": rnd.choice(WORDS), "path": "src"},
                      "\n".join(f"{mod}:{i}: {words(rnd, 8)}" for i in range(rnd.randint(3, 40))))
        elif kind == "edit":
            self.step(f"Updating {mod}.", "edit", {"path": mod, "old": "a", "new": "b"},
                      f"Edited {mod} (1 replacement)")
        elif kind == "shell":
            cmd = f"pytest tests/test_{rnd.choice(WORDS)}.py -q"
            self.step("", "shell", {"command": cmd},
                      f"{'.' * rnd.randint(5, 60)}\n{rnd.randint(5, 60)} passed", exit_code=0)
        else:
            self.step(words(rnd, rnd.randint(15, 80)).capitalize() + ".")

    def plant(self, facts: Facts) -> None:
        """One planted fact of a random kind, inside a normal-looking step or turn."""
        rnd = self.rnd
        tag = f"{rnd.getrandbits(32):08x}"
        kind = rnd.choice(("changed_file", "constraint", "failing_command", "decision"))
        if kind == "changed_file":
            path = f"src/app/{rnd.choice(WORDS)}/{rnd.choice(WORDS)}_{tag}.py"
            tool = rnd.choice(("edit", "write"))
            args = ({"path": path, "old": "x", "new": "y"} if tool == "edit"
                    else {"path": path, "content": code(rnd, 30)})
            self.step(f"Changing {path}." if rnd.random() < 0.3 else "", tool, args,
                      f"{'Edited' if tool == 'edit' else 'Wrote'} {path}")
            facts.add(kind, path)
        elif kind == "constraint":
            x = f"{rnd.choice(WORDS)}_{tag}"
            text = rnd.choice(CONSTRAINTS).format(x=x)
            self.user(f"{words(rnd, rnd.randint(5, 30)).capitalize()}. Important: {text}. "
                      f"{words(rnd, rnd.randint(5, 30)).capitalize()}.")
            facts.add(kind, text)
        elif kind == "failing_command":
            cmd = f"pytest tests/test_{rnd.choice(WORDS)}_{tag}.py -x"
            error = f"AssertionError: expected {rnd.randint(100, 999)} but got {tag}"
            out = (code(rnd, rnd.randint(10, 120)) + f"\nE   {error}\n"
                   f"FAILED tests/test_x.py::test_{tag}\n1 failed")
            self.step("", "shell", {"command": cmd}, out, exit_code=1)
            facts.add("failing_command", cmd)
            facts.add("error_text", error)
        else:
            a, b = rnd.sample(LIBS, 2)
            decision = f"use {a}-{tag} instead of {b}"
            self.step(f"{words(rnd, rnd.randint(5, 25)).capitalize()}. I decided to {decision} "
                      f"because {words(rnd, 10)}. {words(rnd, rnd.randint(5, 30))}.")
            facts.add(kind, decision)


def build(seed: int, turns: int) -> tuple[ct.Session, Facts]:
    rnd = random.Random(seed)
    b = Builder(rnd)
    facts = Facts()
    planted_until = int(turns * 0.6)
    for t in range(turns):
        b.user(f"Turn {t}: {words(rnd, rnd.randint(8, 60))}.")
        n_steps = rnd.randint(3, 14)
        plant_at = {rnd.randrange(n_steps) for _ in range(2)} if t < planted_until else set()
        for k in range(n_steps):
            if k in plant_at:
                b.plant(facts)
            b.filler_step()
        b.step(f"Finished turn {t}: {words(rnd, rnd.randint(10, 40))}.")
    b.user(f"Turn {turns}: now {words(rnd, 20)}.")
    for _ in range(3):
        b.filler_step()
    return b.s, facts


def context_text(session: ct.Session) -> str:
    parts = []
    for m in session.build_context().messages:
        parts.append(m.text)
        for c in m.tool_calls or ():
            parts.append(orjson.dumps(c.arguments).decode())
    return "\n".join(parts)


def score(session: ct.Session, facts: Facts) -> dict[str, tuple[int, int]]:
    text = context_text(session)
    return {k: (sum(f in text for f in v), len(v)) for k, v in facts.by_kind.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=8)
    ap.add_argument("--turns", type=int, default=60)
    ap.add_argument("--fraction", type=float, default=0.2, help="target, as a fraction of "
                    "the session's tokens (default 0.2)")
    ap.add_argument("--show", action="store_true", help="print the digest of the first seed")
    args = ap.parse_args()

    counter = EstimateCounter()
    pipelines: dict[str, Callable[[], CompactionPipeline]] = {
        "Digest": lambda: CompactionPipeline([Digest()]),
        "SlidingWindow": lambda: CompactionPipeline([SlidingWindow()]),
        "SlidingWindow(within_turn)": lambda: CompactionPipeline([SlidingWindow(within_turn=True)]),
        "default (ToolResults, SlidingWindow, Digest)": default_pipeline,
    }
    totals: dict[str, dict[str, list[int]]] = {p: defaultdict(lambda: [0, 0]) for p in pipelines}
    overall: dict[str, list[float]] = defaultdict(list)
    sizes = []
    for seed in range(args.seeds):
        for label, make in pipelines.items():
            session, facts = build(seed, args.turns)
            before = counter.count_messages(session.build_context().messages)
            window = int(before * args.fraction / 0.4)  # compact_to 0.4: target = fraction
            result = session.compact(window, pipeline=make(), counter=counter)
            after = counter.count_messages(session.build_context().messages)
            if label == "Digest":
                sizes.append((before, after, result.target, result.reached_target))
                if args.show and seed == 0:
                    print(result.summary, "\n")
            got = score(session, facts)
            for kind, (present, n) in got.items():
                totals[label][kind][0] += present
                totals[label][kind][1] += n
            present = sum(p for p, _ in got.values())
            n = sum(n for _, n in got.values())
            overall[label].append(present / n if n else 1.0)

    print(f"{args.seeds} seeds x {args.turns} turns; sessions "
          f"{min(s[0] for s in sizes):,}-{max(s[0] for s in sizes):,} tokens, "
          f"compacted to a target of {args.fraction:.0%} "
          f"(Digest result {statistics.mean(s[1] / s[0] for s in sizes):.1%} of the size on "
          f"average; target reached in {sum(s[3] for s in sizes)}/{len(sizes)})")
    kinds = sorted({k for t in totals.values() for k in t})
    print(f"\n{'pipeline':46} {'overall':>8} {'min':>6}  " + "  ".join(f"{k:>15}" for k in kinds))
    for label in pipelines:
        cells = []
        for k in kinds:
            p, n = totals[label][k]
            cells.append(f"{p / n:>14.0%} " if n else f"{'-':>15}")
        fr = overall[label]
        print(f"{label:46} {statistics.mean(fr):>8.1%} {min(fr):>6.0%}  " + "  ".join(cells))
    digest = statistics.mean(overall["Digest"])
    print(f"\nDigest keeps {digest:.1%} of planted facts (target >= 90% at 20%): "
          f"{'PASS' if digest >= 0.9 else 'FAIL'}")


if __name__ == "__main__":
    main()
