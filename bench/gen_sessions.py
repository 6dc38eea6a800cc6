"""Generate realistic coding-agent sessions as contextree JSONL session files.

    python bench/gen_sessions.py OUT.jsonl --messages 10000 --seed 1

A session is a sequence of turns: a user request, then rounds of assistant messages (thinking
with a signature, text, 1-3 tool calls to read/shell/edit/grep) each followed by its tool
results, then a final assistant answer with usage. Tool results have heavy-tailed sizes
(Pareto, alpha ~1.05, capped at 1 MB) and code/log-like text with quotes, backslashes,
newlines, tabs and some unicode (a quarter of the outputs; a few with emoji). Along the way
there are occasional branches (move back with a branch summary, or a plain leaf move),
labels, model and thinking-level changes, interrupted tool calls (no result) and
compactions when the context grows past a budget.

Files are written on the fast path: entries are built as structs, encoded with the library's
line encoder and written in large blocks (no per-entry syscalls or fsync). The output is a
pure function of ``--messages`` and ``--seed``.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import contextree as ct
from contextree.entries import encode_line

FLUSH_AT = 8 << 20
MAX_RESULT = 1 << 20  # bytes of the largest tool result
PARETO_ALPHA = 1.05
PARETO_MIN = 1500  # characters of the smallest "typical" tool result

TOOLS = ("read", "shell", "edit", "grep")
MODELS = (("anthropic", "claude-sonnet-4"), ("openai", "gpt-4.1"), ("anthropic", "claude-opus-4"))
PRICES = {"claude-sonnet-4": (3e-6, 15e-6), "gpt-4.1": (2e-6, 8e-6), "claude-opus-4": (15e-6, 75e-6)}

WORDS = (
    "config", "parser", "session", "entry", "tree", "branch", "leaf", "token", "usage",
    "model", "stream", "buffer", "retry", "handler", "request", "response", "cache", "index",
    "payload", "schema", "record", "worker", "queue", "lock", "timeout", "signal", "module",
    "package", "import", "export", "value", "result", "error", "warning",
)
FILES = ("src/app/server.py", "src/app/models.py", "tests/test_api.py", "README.md",
         "src/lib/utils.ts", "package.json", "Cargo.toml", "src/main.rs", "docs/guide.md",
         "scripts/deploy.sh", ".github/workflows/ci.yml", "src/app/handlers/auth.py")
BMP = ("é", "ü", "ñ", "ß", "→", "←", "✓", "✗", "│", "─", "┌", "└", "…", "“", "”", "°", "±", "\u00d7", "中文", "日本語", "Привет", "λ", "Δ")
EMOJI = ("🚀", "🐛", "✨", "🔥", "📦", "✅", "❌", "🎉")


def _code_line(rng: random.Random) -> str:
    w = rng.choice
    kind = rng.randrange(8)
    indent = "    " * rng.randrange(4)
    if kind == 0:
        return f"{indent}def {w(WORDS)}_{w(WORDS)}(self, {w(WORDS)}: str = \"{w(WORDS)}\") -> dict:"
    if kind == 1:
        return f'{indent}raise ValueError(f"bad {w(WORDS)}: {{{w(WORDS)}!r}} in \\"{w(FILES)}\\"")'
    if kind == 2:
        return f"{indent}# {w(WORDS)} the {w(WORDS)} before {w(WORDS)}ing; see {w(FILES)}"
    if kind == 3:
        return f"{indent}{w(WORDS)} = {{'{w(WORDS)}': [{rng.randrange(999)}, None, True], \"re\": r'\\d+\\s*'}}"
    if kind == 4:
        return (f"2026-03-{rng.randrange(1, 29):02d}T{rng.randrange(24):02d}:{rng.randrange(60):02d}"
                f":{rng.randrange(60):02d}.{rng.randrange(1000):03d}Z {w(['INFO', 'WARN', 'ERROR', 'DEBUG'])}"
                f" [{w(WORDS)}] {w(WORDS)} {w(WORDS)} took {rng.randrange(5000)}ms\tid={rng.getrandbits(40):x}")
    if kind == 5:
        return f"{w(FILES)}:{rng.randrange(1, 900)}:{rng.randrange(1, 80)}: {w(WORDS)} = {w(WORDS)}.{w(WORDS)}()"
    if kind == 6:
        return f"  File \"/usr/lib/python3.11/{w(WORDS)}.py\", line {rng.randrange(1, 2000)}, in {w(WORDS)}"
    return f"{indent}return {w(WORDS)}.{w(WORDS)}({w(WORDS)}=\"{w(WORDS)}\", {w(WORDS)}='{w(WORDS)}')"


def _blob(rng: random.Random, chars: int, extra: tuple[str, ...], every: int) -> str:
    """A long code/log-like text; one line in ``every`` carries a character from ``extra``."""
    lines: list[str] = []
    n = 0
    while n < chars:
        line = _code_line(rng)
        if extra and rng.randrange(every) == 0:
            cut = rng.randrange(len(line) + 1)
            line = f"{line[:cut]} {rng.choice(extra)} {line[cut:]}"
        lines.append(line)
        n += len(line) + 1
    return "\n".join(lines)


class Corpus:
    """Text sources for tool results: mostly ASCII, some BMP unicode, a few emoji."""

    def __init__(self, rng: random.Random) -> None:
        size = 3 * MAX_RESULT
        self.ascii = _blob(rng, size, (), 1)
        self.bmp = _blob(rng, size, tuple(BMP), 15)
        self.emoji = _blob(rng, size, tuple(EMOJI) + tuple(BMP), 15)

    def text(self, rng: random.Random, chars: int) -> str:
        r = rng.random()
        src = self.ascii if r < 0.75 else self.bmp if r < 0.97 else self.emoji
        chars = min(chars, len(src) - 1)
        start = rng.randrange(len(src) - chars)
        return src[start:start + chars]


def result_size(rng: random.Random) -> int:
    """Heavy-tailed: Pareto(alpha) above PARETO_MIN, capped at MAX_RESULT (~1 MB)."""
    size = PARETO_MIN * (1.0 - rng.random()) ** (-1.0 / PARETO_ALPHA)
    return int(min(size, MAX_RESULT)) // rng.choice((1, 1, 1, 4, 16)) + 20


class Writer:
    """Builds entries on the current branch and writes their lines in large blocks."""

    def __init__(self, path: Path, rng: random.Random) -> None:
        self.rng = rng
        self.f = open(path, "xb")  # noqa: SIM115 - closed in close()
        self.buf: list[bytes] = []
        self.size = 0
        self.ids: set[str] = set()
        self.path: list[tuple[str, str]] = []  # (id, kind) from the root to the leaf
        self.t = datetime(2026, 3, 2, 9, 0, tzinfo=UTC).timestamp()
        self.messages = 0
        self.lines = 0

    def new_id(self) -> str:
        while True:
            eid = f"{self.rng.getrandbits(32):08x}"
            if eid not in self.ids:
                self.ids.add(eid)
                return eid

    def stamp(self) -> str:
        self.t += self.rng.uniform(0.2, 20.0)
        return datetime.fromtimestamp(self.t, UTC).isoformat(timespec="milliseconds")[:-6] + "Z"

    def write(self, line: Any) -> None:
        data = encode_line(line)
        self.buf.append(data)
        self.size += len(data)
        self.lines += 1
        if self.size >= FLUSH_AT:
            self.flush()

    def add(self, cls: type[Any], kind: str, parent: str | None = None, **fields: Any) -> str:
        eid = self.new_id()
        if parent is None:
            parent = self.path[-1][0] if self.path else None
        self.write(cls(eid, parent, self.stamp(), **fields))
        if cls is ct.entries.LeafEntry:
            return eid
        if parent is not None and (not self.path or self.path[-1][0] != parent):
            cut = next(i for i in range(len(self.path) - 1, -1, -1) if self.path[i][0] == parent)
            del self.path[cut + 1:]
        self.path.append((eid, kind))
        if cls is ct.entries.MessageEntry:
            self.messages += 1
        return eid

    def flush(self) -> None:
        self.f.write(b"".join(self.buf))
        self.buf.clear()
        self.size = 0

    def close(self) -> None:
        self.flush()
        self.f.close()


def generate(out: Path, messages: int, seed: int) -> dict[str, Any]:
    """Write a session with ``messages`` message entries to ``out``; return a summary."""
    rng = random.Random(seed)
    corpus = Corpus(rng)
    w = Writer(out, rng)
    w.write(ct.entries.SessionHeader(
        id=str(uuid.UUID(int=rng.getrandbits(128), version=4)),
        created_at=w.stamp(),
        cwd="/home/dev/project",
        metadata={"generator": "bench/gen_sessions.py", "seed": seed, "messages": messages},
    ))
    provider, model = MODELS[0]
    w.add(ct.entries.ModelChangeEntry, "state", provider=provider, model_id=model)
    w.add(ct.entries.ThinkingLevelChangeEntry, "state", thinking_level="medium")
    w.add(ct.entries.ActiveToolsChangeEntry, "state", active_tool_names=list(TOOLS))
    context_chars = 0
    compact_at = rng.randrange(600_000, 1_200_000)  # characters of context before compaction
    call_no = 0
    counts = {"branches": 0, "leaf_moves": 0, "labels": 0, "compactions": 0, "interrupted": 0}

    def usage(out_chars: int) -> ct.Usage:
        inp = context_chars // 4 + 3000
        cached = int(inp * rng.uniform(0.5, 0.95))
        out_tok = max(1, out_chars // 4)
        p_in, p_out = PRICES[model]
        cost = (inp - cached) * p_in + cached * p_in * 0.1 + out_tok * p_out
        return ct.Usage(input=inp - cached, output=out_tok, cache_read=cached,
                        cache_write=rng.randrange(0, 2000), total=inp + out_tok,
                        cost=round(cost, 6))

    while w.messages < messages:
        # -- a user request
        ask = f"Please {rng.choice(WORDS)} the {rng.choice(WORDS)} in {rng.choice(FILES)}. "
        if rng.random() < 0.1:  # pasted a traceback or a log
            ask += "Here is what I see:\n```\n" + corpus.text(rng, rng.randrange(500, 8000)) + "\n```"
        user_id = w.add(ct.entries.MessageEntry, "user", message=ct.Message.user(ask))
        context_chars += len(ask)
        if rng.random() < 0.03:
            w.add(ct.entries.LabelEntry, "label", target_id=user_id, label=f"task-{w.messages}")
            counts["labels"] += 1
        # -- rounds of tool use
        for _ in range(min(12, int(rng.expovariate(1 / 3)) + 1)):
            if w.messages >= messages:
                break
            calls = []
            for _ in range(rng.choice((1, 1, 1, 2, 2, 3))):
                call_no += 1
                tool = rng.choice(TOOLS)
                args: dict[str, Any] = {
                    "read": lambda: {"path": rng.choice(FILES), "offset": rng.randrange(0, 400),
                                     "limit": 2000},
                    "shell": lambda: {"command": f"pytest -x -q tests/ -k '{rng.choice(WORDS)}'",
                                      "timeout": 120},
                    "edit": lambda: {"path": rng.choice(FILES),
                                     "edits": [{"old": _code_line(rng), "new": _code_line(rng)}]},
                    "grep": lambda: {"pattern": f"def {rng.choice(WORDS)}\\(", "glob": "**/*.py",
                                     "options": {"ignore_case": True, "context": 2}},
                }[tool]()
                calls.append(ct.ToolCall(id=f"toolu_{rng.getrandbits(96):024x}", name=tool,
                                         arguments=args))
            say = f"I'll {rng.choice(WORDS)} the {rng.choice(WORDS)} next."
            thinking = corpus.text(rng, rng.randrange(100, 1500))
            content: list[Any] = [ct.ThinkingPart(thinking=thinking,
                                                  signature=f"{rng.getrandbits(256):064x}"),
                                  ct.TextPart(text=say)]
            w.add(ct.entries.MessageEntry, "assistant", message=ct.Message.assistant(
                content, tool_calls=calls, usage=usage(len(say) + len(thinking)), model=model,
                provider=provider, stop_reason="tool_use"))
            context_chars += len(say) + len(thinking) + 200 * len(calls)
            for c in calls:
                if w.messages >= messages:
                    break
                if rng.random() < 0.005:  # the call was interrupted: no result
                    counts["interrupted"] += 1
                    continue
                body = corpus.text(rng, result_size(rng))
                w.add(ct.entries.MessageEntry, "tool", message=ct.Message.tool(
                    body, tool_call_id=c.id, name=c.name, is_error=rng.random() < 0.05))
                context_chars += len(body)
        if w.messages >= messages:
            break
        # -- the answer
        answer = "Done. " + " ".join(rng.choice(WORDS) for _ in range(rng.randrange(20, 300)))
        w.add(ct.entries.MessageEntry, "assistant", message=ct.Message.assistant(
            [ct.TextPart(text=answer)], usage=usage(len(answer)), model=model,
            provider=provider, stop_reason="end_turn"))
        context_chars += len(answer)
        # -- bookkeeping between turns
        r = rng.random()
        users = [eid for eid, kind in w.path[-60:] if kind == "user"]
        if r < 0.02 and len(users) > 1:  # go back and try again, with a summary
            target = rng.choice(users[:-1])
            w.add(ct.entries.BranchSummaryEntry, "summary", parent=target, from_id=target,
                  summary="Tried: " + " ".join(rng.choice(WORDS) for _ in range(60)))
            counts["branches"] += 1
        elif r < 0.03 and len(users) > 1:  # a plain leaf move back
            target = rng.choice(users[:-1])
            w.add(ct.entries.LeafEntry, "leaf", target_id=target)
            cut = next(i for i in range(len(w.path) - 1, -1, -1) if w.path[i][0] == target)
            del w.path[cut + 1:]
            counts["leaf_moves"] += 1
        elif r < 0.04:
            provider, model = rng.choice(MODELS)
            w.add(ct.entries.ModelChangeEntry, "state", provider=provider, model_id=model)
        elif r < 0.05:
            w.add(ct.entries.ThinkingLevelChangeEntry, "state",
                  thinking_level=rng.choice(("low", "medium", "high")))
        if context_chars > compact_at:
            recent = [eid for eid, kind in w.path[-40:] if kind == "user"]
            first_kept = recent[-1] if recent else None
            w.add(ct.entries.CompactionEntry, "compaction",
                  summary="## Summary\n" + corpus.text(rng, rng.randrange(1500, 6000)),
                  first_kept_entry_id=first_kept, tokens_before=context_chars // 4,
                  tokens_after=4000, details={"read_files": list(FILES[:4])},
                  usage=usage(3000))
            context_chars = 16_000
            counts["compactions"] += 1
    w.close()
    return {"path": str(out), "bytes": out.stat().st_size, "lines": w.lines,
            "messages": w.messages, **counts}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path, help="session file to write (must not exist)")
    ap.add_argument("--messages", type=int, default=10_000, help="message entries to write")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--force", action="store_true", help="replace OUT if it exists")
    args = ap.parse_args(argv)
    if args.force and args.out.exists():
        os.unlink(args.out)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    t = time.perf_counter()
    info = generate(args.out, args.messages, args.seed)
    info["seconds"] = round(time.perf_counter() - t, 2)
    print(" ".join(f"{k}={v}" for k, v in info.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
