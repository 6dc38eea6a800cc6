"""Unsynced and batched appends against pi's SessionManager (the real package, in node).

    PI_CODING_AGENT=/path/to/node_modules/@mariozechner/pi-coding-agent \
        python bench/bench_appends_pi.py [--n 20000]

pi appends each entry with ``appendFileSync`` and no sync; the fair comparisons are our
unsynced appends (``durable=False``) and our batched ones. Both sides append the same
alternating user and assistant messages to a new session file in a temp directory, and
are timed around the loop alone. Goal: >= 1.5x pi. ``.ci/run`` installs the package (it
sets PI_CODING_AGENT); without it the bench says so and measures our side only.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import contextree as ct

TEXT = "run the tests again, please; then fix what fails"

PI_SCRIPT = r"""
const [pkg, dir, n] = [process.argv[1], process.argv[2], Number(process.argv[3])];
const { SessionManager } = await import(pkg + "/dist/index.js");
const sm = SessionManager.create(dir, dir);
// pi writes the file once the first assistant reply exists: start with one, untimed.
sm.appendMessage({ role: "user", content: "hi", timestamp: Date.now() });
sm.appendMessage({ role: "assistant", content: [{ type: "text", text: "hello" }],
                   api: "openai-completions", provider: "openai", model: "m",
                   usage: { input: 1, output: 1, cacheRead: 0, cacheWrite: 0, totalTokens: 2,
                            cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 } },
                   stopReason: "stop", timestamp: Date.now() });
const text = %TEXT%;
const t0 = process.hrtime.bigint();
for (let i = 0; i < n; i++) {
  sm.appendMessage({ role: "user", content: text, timestamp: Date.now() });
}
const s = Number(process.hrtime.bigint() - t0) / 1e9;
console.log(JSON.stringify({ rate: n / s }));
"""


def pi_rate(package: str, n: int) -> float:
    with tempfile.TemporaryDirectory(prefix="pi-appends-") as d:
        script = PI_SCRIPT.replace("%TEXT%", json.dumps(TEXT))
        out = subprocess.run(["node", "--input-type=module", "-e", script, package, d, str(n)],
                             check=True, capture_output=True, text=True)
        return float(json.loads(out.stdout.strip().splitlines()[-1])["rate"])


def our_rate(n: int, *, batched: bool) -> float:
    d = Path(tempfile.mkdtemp(prefix="appends-"))
    try:
        with ct.Session.create(d / "s.jsonl", cwd="/", durable=False) as s:
            msg = ct.Message.user(TEXT)
            t = time.perf_counter()
            if batched:
                with s.batch():
                    for _ in range(n):
                        s.append_message(msg)
            else:
                for _ in range(n):
                    s.append_message(msg)
            return n / (time.perf_counter() - t)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--n", type=int, default=20000)
    args = ap.parse_args(argv)
    package = os.environ.get("PI_CODING_AGENT")
    unsynced = our_rate(args.n, batched=False)
    batched = our_rate(args.n, batched=True)
    print(f"appends of {args.n} user messages, no sync")
    if package and shutil.which("node"):
        pi = pi_rate(package, args.n)
        print(f"  pi SessionManager.appendMessage  {pi:9.0f}/s  1.00x")
        print(f"  contextree, unsynced           {unsynced:9.0f}/s  {unsynced / pi:5.2f}x pi")
        print(f"  contextree, batched            {batched:9.0f}/s  {batched / pi:5.2f}x pi")
        print("  goal: >= 1.5x pi")
    else:
        print("  (PI_CODING_AGENT not set or no node: pi not measured)")
        print(f"  contextree, unsynced {unsynced:9.0f}/s; batched {batched:9.0f}/s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
