"""Imports of big files: ``contextree import pi``, ``import claude-code`` and ``import brute``
of ~200 MB session files, against the read floor, with each process's peak RSS.

    python bench/bench_imports.py                  # 200 MB each (written once to a temp dir)
    python bench/bench_imports.py --size-mb 50     # quicker

The files have the line shapes the real CLIs write (see tests/data/formats): a coding agent's
turns of a prompt, an assistant reply with thinking and a tool call, and a tool result of
1-50 KB. Two more shapes have many small records, where the cost of each entry shows
rather than that of its bytes: ``claude-code-small`` (Claude Code's lines of ~0.3-1.5 KB:
a prompt, an assistant line per content block, a short tool result) and ``brute`` (a flat
log of ~1.2 KB messages, user and assistant in turn). Every figure is measured in a fresh process (the page cache warm) and is the median
of ``--repeat`` runs; RSS is the process's peak.

- floor: reading the whole file in 1 MiB blocks (what ``cat`` does);
- JSON round trip: each line parsed and written again with orjson, nothing else (the gc
  off): what no importer that reads every line as JSON can beat; on many small records
  it, not the disk, bounds the rate;
- import: ``contextree import FORMAT FILE -o OUT`` (goal <= 300 MB RSS, >= 50 MB/s).

Wall time on a shared machine moves with others' disk traffic (the import syncs its output),
so the CPU time (user + system) is printed beside it.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

CHILD = r"""
import json, resource, sys, time
mode, path, out = sys.argv[1], sys.argv[2], sys.argv[3]
def cpu():
    use = resource.getrusage(resource.RUSAGE_SELF)
    return use.ru_utime + use.ru_stime
if mode == "floor":
    cpu0, t0 = cpu(), time.perf_counter()
    with open(path, "rb", buffering=0) as f:
        while f.read(1 << 20):
            pass
elif mode == "json":
    import gc, orjson
    gc.disable()
    cpu0, t0 = cpu(), time.perf_counter()
    with open(path, "rb") as f, open(out, "wb") as w:
        for line in f:
            w.write(orjson.dumps(orjson.loads(line)) + b"\n")
else:
    from contextree.cli.app import main
    cpu0, t0 = cpu(), time.perf_counter()
    sys.argv = ["contextree", "import", mode, path, "-o", out]
    try:
        main()
    except SystemExit as e:
        if e.code:
            raise
t = time.perf_counter() - t0
use = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"s": t, "cpu_s": use.ru_utime + use.ru_stime - cpu0,
                  "rss_mb": use.ru_maxrss / 1024}))
"""

TS = "2026-01-01T00:00:00.000Z"
MS = 1767225600000
CWD = "/home/dev/project"


def _text(rng: random.Random, size: int) -> str:
    """Tool output of about ``size`` characters: numbered source-like lines."""
    words = ["def", "return", "self", "value", "index", "for", "in", "if", "None", "data"]
    lines: list[str] = []
    total = 0
    while total < size:
        line = f"{len(lines) + 1}\t" + " ".join(rng.choice(words) for _ in range(10))
        lines.append(line)
        total += len(line) + 1
    return "\n".join(lines)


def _turns(rng: random.Random, size: int) -> Iterator[tuple[int, str, str]]:
    """(turn number, prompt, tool output) until about ``size`` bytes of output."""
    done = n = 0
    while done < size:
        out = _text(rng, rng.randint(1_000, 50_000))
        done += len(out) + 1500
        n += 1
        yield n, f"Step {n}: read the next file and fix what is wrong.", out


def pi_lines(size: int, seed: int = 1) -> Iterator[dict[str, Any]]:
    """A pi v3 session, as pi writes it (``tests/data/formats/pi_written_by_pi.jsonl``)."""
    rng = random.Random(seed)
    yield {"type": "session", "version": 3, "id": str(uuid.UUID(int=seed)), "timestamp": TS,
           "cwd": CWD}
    ids = iter(f"{i:08x}" for i in range(1, 1 << 31))
    parent = next(ids)
    yield {"type": "model_change", "id": parent, "parentId": None, "timestamp": TS,
           "provider": "anthropic", "modelId": "claude-sonnet-4-5"}
    usage = {"input": 1200, "output": 60, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 1260,
             "cost": {"input": 0.00225, "output": 0.00225, "cacheRead": 0, "cacheWrite": 0,
                      "total": 0.0045}}

    def entry(message: dict[str, Any]) -> dict[str, Any]:
        nonlocal parent
        eid = next(ids)
        line = {"type": "message", "id": eid, "parentId": parent, "timestamp": TS,
                "message": {**message, "timestamp": MS}}
        parent = eid
        return line

    for n, prompt, out in _turns(rng, size):
        call = f"toolu_{n:06d}"
        yield entry({"role": "user", "content": prompt})
        yield entry({"role": "assistant", "content": [
            {"type": "thinking", "thinking": "Read the file first.",
             "thinkingSignature": "EqQBCkgIBxABGAIiQK1r"},
            {"type": "text", "text": f"Reading file {n}."},
            {"type": "toolCall", "id": call, "name": "read",
             "arguments": {"path": f"src/file_{n}.py"}}],
            "api": "anthropic-messages", "provider": "anthropic",
            "model": "claude-sonnet-4-5", "usage": usage, "stopReason": "toolUse"})
        yield entry({"role": "toolResult", "toolCallId": call, "toolName": "read",
                     "content": [{"type": "text", "text": out}], "isError": False})
        if n % 50 == 0:
            yield {"type": "label", "id": next(ids), "parentId": parent, "timestamp": TS,
                   "targetId": parent, "label": f"step-{n}"}


def claude_code_lines(size: int, seed: int = 1) -> Iterator[dict[str, Any]]:
    """A Claude Code session, as Claude Code 2.1 writes it (one line per content block of a
    response, each tool result its own line; ``tests/data/formats/real/claude_code``)."""
    rng = random.Random(seed)
    sid = str(uuid.UUID(int=seed))
    common = {"userType": "external", "entrypoint": "cli", "cwd": CWD, "sessionId": sid,
              "version": "2.1.197", "gitBranch": "main"}
    usage = {"input_tokens": 131, "cache_creation_input_tokens": 0,
             "cache_read_input_tokens": 0, "output_tokens": 126,
             "service_tier": "standard"}
    counter = iter(range(1, 1 << 62))
    parent: str | None = None

    def line(kind: str, message: dict[str, Any], **more: Any) -> dict[str, Any]:
        nonlocal parent
        uid = str(uuid.UUID(int=(seed << 64) + next(counter)))
        out = {"parentUuid": parent, "isSidechain": False, "type": kind, "message": message,
               "uuid": uid, "timestamp": TS, **more, **common}
        parent = uid
        return out

    yield {"type": "queue-operation", "operation": "enqueue", "timestamp": TS,
           "sessionId": sid, "content": "Fix the project."}
    for n, prompt, out in _turns(rng, size):
        mid, call = f"msg_{n:08d}", f"toolu_{n:06d}"

        def reply(content: list[dict[str, Any]], mid: str = mid) -> dict[str, Any]:
            return {"id": mid, "type": "message", "role": "assistant",
                    "model": "claude-opus-4-8", "content": content,
                    "stop_reason": "tool_use", "stop_sequence": None, "usage": usage}

        yield line("user", {"role": "user", "content": prompt}, promptId=str(n))
        yield line("assistant", reply([{"type": "thinking", "thinking": "Read it first.",
                                        "signature": "c2lnLWZpeHR1cmUtMQ=="}]),
                   requestId=f"req_{n}")
        yield line("assistant", reply([{"type": "text", "text": f"Reading file {n}."}]),
                   requestId=f"req_{n}")
        yield line("assistant", reply([{"type": "tool_use", "id": call, "name": "Read",
                                        "input": {"file_path": f"{CWD}/file_{n}.py"}}]),
                   requestId=f"req_{n}")
        yield line("user", {"role": "user", "content": [
            {"tool_use_id": call, "type": "tool_result", "content": out}]},
            toolUseResult={"type": "text", "file": {"filePath": f"{CWD}/file_{n}.py",
                                                    "numLines": out.count("\n") + 1}})


def claude_code_small_lines(size: int, seed: int = 1) -> Iterator[dict[str, Any]]:
    """A Claude Code session of many small lines (~1 KB each; no big tool output)."""
    rng = random.Random(seed)
    sid = str(uuid.UUID(int=seed))
    common = {"userType": "external", "entrypoint": "cli", "cwd": CWD, "sessionId": sid,
              "version": "2.1.197", "gitBranch": "main"}
    usage = {"input_tokens": 131, "cache_creation_input_tokens": 0,
             "cache_read_input_tokens": 0, "output_tokens": 126, "service_tier": "standard"}
    counter = iter(range(1, 1 << 62))
    parent: str | None = None
    done = 0

    def line(kind: str, message: dict[str, Any], **more: Any) -> dict[str, Any]:
        nonlocal parent, done
        uid = str(uuid.UUID(int=(seed << 64) + next(counter)))
        out = {"parentUuid": parent, "isSidechain": False, "type": kind, "message": message,
               "uuid": uid, "timestamp": TS, **more, **common}
        parent = uid
        done += 400 + len(json.dumps(message))
        return out

    n = 0
    while done < size:
        n += 1
        mid, call = f"msg_{n:08d}", f"toolu_{n:06d}"

        def reply(content: list[dict[str, Any]], mid: str = mid) -> dict[str, Any]:
            return {"id": mid, "type": "message", "role": "assistant",
                    "model": "claude-opus-4-8", "content": content,
                    "stop_reason": "tool_use", "stop_sequence": None, "usage": usage}

        yield line("user", {"role": "user", "content": f"Step {n}: check the next file."},
                   promptId=str(n))
        yield line("assistant", reply([{"type": "text", "text": _text(rng, 600)}]),
                   requestId=f"req_{n}")
        yield line("assistant", reply([{"type": "tool_use", "id": call, "name": "Bash",
                                        "input": {"command": f"cat file_{n}.txt"}}]),
                   requestId=f"req_{n}")
        yield line("user", {"role": "user", "content": [
            {"tool_use_id": call, "type": "tool_result", "content": _text(rng, 200)}]},
            toolUseResult={"stdout": "ok", "stderr": "", "interrupted": False})


def brute_lines(size: int, seed: int = 1) -> Iterator[dict[str, Any]]:
    """A Brute ``SessionLog``: ~1.2 KB messages, user and assistant in turn."""
    done = 0
    user = {"role": "user", "content": "lorem ipsum dolor sit amet " * 40}
    assistant = {"role": "assistant", "content": "ok " * 300}
    while done < size:
        for m in (user, assistant):
            done += len(json.dumps(m)) + 1
            yield m


SHAPES: dict[str, tuple[str, Callable[[int, int], Iterator[dict[str, Any]]]]] = {
    "pi": ("pi", pi_lines), "claude-code": ("claude-code", claude_code_lines),
    "claude-code-small": ("claude-code", claude_code_small_lines),
    "brute": ("brute", brute_lines)}
"""Each shape: the format it is imported as, and its lines."""


def generate(fmt: str, path: Path, size: int, seed: int = 1) -> int:
    """Write a ``fmt`` session of about ``size`` bytes to ``path``; returns the lines."""
    n = 0
    with open(path, "w", encoding="utf-8") as f:
        for obj in SHAPES[fmt][1](size, seed):
            f.write(json.dumps(obj, separators=(",", ":")) + "\n")
            n += 1
    return n


def _remove(out: Path) -> None:
    for p in (out, Path(f"{out}.index")):
        p.unlink(missing_ok=True)


def child(mode: str, path: Path, out: Path) -> dict[str, float]:
    _remove(out)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(Path(__file__).resolve().parents[1] / "src"), os.environ.get("PYTHONPATH", "")])}
    res = subprocess.run([sys.executable, "-c", CHILD, mode, str(path), str(out)], check=True,
                         capture_output=True, text=True, env=env)
    return dict(json.loads(res.stdout.strip().splitlines()[-1]))


def median(runs: list[dict[str, float]]) -> dict[str, float]:
    return {k: statistics.median(r[k] for r in runs) for k in runs[0]}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--size-mb", type=float, default=200)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--dir", type=Path, default=None, help="keep the files here")
    p.add_argument("--formats", default=",".join(SHAPES), help="shapes: " + ", ".join(SHAPES))
    args = p.parse_args(argv)
    size = int(args.size_mb * 1e6)
    with tempfile.TemporaryDirectory() as tmp:
        where = args.dir or Path(tmp)
        where.mkdir(parents=True, exist_ok=True)
        for fmt in args.formats.split(","):
            src = where / f"{fmt}-{args.size_mb:g}mb.jsonl"
            if not src.exists():
                t = time.perf_counter()
                lines = generate(fmt, src, size)
                print(f"wrote {src.name}: {lines:,} lines in {time.perf_counter() - t:.1f} s")
            mb = src.stat().st_size / 1e6
            out = where / f"{fmt}.contextree.jsonl"
            floor = median([child("floor", src, out) for _ in range(args.repeat)])
            trip = median([child("json", src, out) for _ in range(args.repeat)])
            run = median([child(SHAPES[fmt][0], src, out) for _ in range(args.repeat)])
            out_mb = out.stat().st_size / 1e6
            _remove(out)
            print(f"\n{fmt}: {mb:.0f} MB -> {out_mb:.0f} MB session")
            for name, r in (("floor (1 MiB reads)", floor), ("JSON round trip", trip),
                            ("contextree import", run)):
                print(f"  {name:20} {r['s']:7.3f} s  {mb / r['s']:8.0f} MB/s  "
                      f"(CPU {r['cpu_s']:.2f} s: {mb / max(r['cpu_s'], 1e-3):.0f} MB/s)  "
                      f"{r['rss_mb']:6.0f} MB RSS")
            print(f"  = {run['s'] / floor['s']:.0f}x the floor's time, "
                  f"{run['cpu_s'] / trip['cpu_s']:.1f}x the JSON round trip's CPU, "
                  f"{run['rss_mb'] / mb:.2f}x the file in RSS (goal >= 50 MB/s, <= 300 MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
