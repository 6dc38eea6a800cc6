"""Sessions for the viewer's tests, its screenshot and its bench: a realistic small one with
every kind of entry the viewer shows, a hostile one, and a big one with many branches."""

from __future__ import annotations

import base64
import struct
import zlib
from pathlib import Path

from contextree import ImagePart, Message, Session, TextPart, ThinkingPart, ToolCall, Usage

SECRET = "AKIAIOSFODNN7EXAMPLE"  # an AWS access key id in the documented example form
"""A secret planted in a tool output: redaction must take it out of every page."""

RETRIES = 40
"""Retries at the sample's branch point (a wall of lines in `tree`)."""


def tiny_png() -> str:
    """A 2x2 PNG, base64: an image part for the viewer to show."""
    raw = b"".join(b"\x00" + b"\xff\x00\x00\x00\xff\x00" for _ in range(2))
    def chunk(kind: bytes, data: bytes) -> bytes:
        return (struct.pack(">I", len(data)) + kind + data
                + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))
    png = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 2, 2, 8, 2, 0, 0, 0))
           + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))
    return base64.b64encode(png).decode()


def _usage(i: int, cost: float | None = None) -> Usage:
    return Usage(input=1200 + 300 * i, output=80 + 10 * i, total=1280 + 310 * i,
                 cost=0.001 * (i + 1) if cost is None else cost)


def sample_session(path: Path) -> dict[str, str]:
    """A coding session: markdown and code, thinking, tool calls with a long result (holding
    a secret), an image, a model change, a label, a branch point with ``RETRIES`` retries, a
    compaction that clears a result and keeps a tail, a name. Returns the interesting ids."""
    ids: dict[str, str] = {}
    with Session.create(path, cwd="/work/app", durable=False) as s:
        ids["task"] = s.append_message(Message.user(
            "The **tests fail** in `calc.py`: please fix `add()`.\n\nHere is the traceback "
            "screenshot:"))
        s.append_message(Message.user([TextPart(text="(screenshot)"),
                                       ImagePart(data=tiny_png(), mime_type="image/png")]))
        ids["read"] = s.append_message(Message.assistant(
            [ThinkingPart(thinking="The user says add() is wrong. Read the file first."),
             TextPart(text="Let me read `calc.py`.")],
            tool_calls=[ToolCall(id="c1", name="read", arguments={"path": "calc.py"})],
            usage=_usage(0), model="gpt-5-mini", provider="openai"))
        ids["result"] = s.append_message(Message.tool(
            "def add(a, b):\n    return a - b\n", tool_call_id="c1", name="read"))
        ids["env"] = s.append_message(Message.assistant(
            "Checking the environment.", tool_calls=[ToolCall(id="c2", name="shell",
                                                              arguments={"command": "env"})],
            usage=_usage(1), model="gpt-5-mini", provider="openai"))
        lines = [f"VAR_{i}=value {i}" for i in range(60)]
        lines.insert(30, f"AWS_ACCESS_KEY_ID={SECRET}")
        ids["env_result"] = s.append_message(Message.tool("\n".join(lines), tool_call_id="c2",
                                                          name="shell"))
        ids["diagnosis"] = s.append_message(Message.assistant(
            "Found it: `add()` **subtracts**. The fix:\n\n```python\ndef add(a, b):\n"
            "    return a + b  # was a - b\n```\n\nSee [the docs](https://docs.python.org/3/).",
            usage=_usage(2), model="gpt-5-mini", provider="openai"))
        s.set_label(ids["diagnosis"], "diagnosis")
        ids["model"] = s.append_model_change("anthropic", "claude-sonnet-4-5")
        ids["ask"] = s.append_message(Message.user("Now run the tests."))
        for i in range(RETRIES):  # retries: a branch point with RETRIES children
            s.move_to(ids["ask"])
            last = s.append_message(Message.assistant(
                f"Attempt {i}: running `pytest -q`.", usage=_usage(3, 0.002),
                model="claude-sonnet-4-5", provider="anthropic"))
        ids["chosen"] = last
        ids["passed"] = s.append_message(Message.user("They pass now. Tidy up."))
        ids["compaction"] = s.append_compaction(
            summary="The user asked to fix `add()` in calc.py; it subtracted. Fixed, tests "
                    "pass.", first_kept_entry_id=ids["env"], tokens_before=5400,
            tokens_after=900, cleared={ids["env_result"]: "[env output cleared]"},
            details={"stages": ["tool_results", "digest"], "dropped": 9})
        ids["tip"] = s.append_message(Message.assistant(
            "Done: `add()` fixed and the tests pass.", usage=_usage(4),
            model="claude-sonnet-4-5", provider="anthropic"))
        s.set_name("calc fix")
    return ids


HOSTILE = [
    "</script><script>alert('closed the data block')</script>",
    "<img src=x onerror=\"alert('img onerror')\">",
    "[click me](javascript:alert('javascript link'))",
    "<svg xmlns='http://www.w3.org/2000/svg' onload=\"alert('svg onload')\">"
    "<script>alert('svg script')</script></svg>",
    "<a href='https://example.com/track'>tracked</a> ![remote](https://example.com/x.png)",
    "\u2028\u2029 <!-- --> <style>body{display:none}</style> &lt;b&gt;",
]
"""Text that must not run, fetch or restyle anything in the viewer."""


def hostile_session(path: Path) -> None:
    """A session whose every field that the page shows carries markup that would run."""
    svg = base64.b64encode(b"<svg xmlns='http://www.w3.org/2000/svg' onload='alert(1)'>"
                           b"<script>alert(2)</script></svg>").decode()
    with Session.create(path, durable=False) as s:
        s.append_message(Message.user(HOSTILE[0]))
        for text in HOSTILE[1:]:
            s.append_message(Message.assistant(text, tool_calls=[ToolCall(
                id="x", name=HOSTILE[1], arguments={"q": HOSTILE[0]})]))
            s.append_message(Message.tool(text, tool_call_id="x", name=HOSTILE[0]))
        s.append_message(Message.user([ImagePart(data=svg, mime_type="image/svg+xml"),
                                       ImagePart(url="https://example.com/pixel.png"),
                                       ImagePart(data="x\" onerror=\"alert(3)",
                                                 mime_type="image/png")]))
        s.set_label(s.leaf_id or "", "<b>label</b>")
        s.set_name(HOSTILE[1])


def big_session(path: Path, *, entries: int = 50_000, branches: int = 20) -> int:
    """A session of about ``entries`` entries on ``branches`` branches: one long trunk of
    turns (a tool call and its result, a reply), each branch leaving the trunk at an even
    step and running for a while. Returns the number of entries written."""
    per_branch = entries // (2 * branches)
    trunk = entries - per_branch * (branches - 1)
    points: list[str] = []
    with Session.create(path, durable=False) as s, s.batch():
        s.append_message(Message.user("Refactor the parser. " + "Context line. " * 20))
        n = 1
        for i in range(0, trunk - 1, 4):
            s.append_message(Message.assistant(
                f"Step {i}: reading `mod{i}.py`.", tool_calls=[ToolCall(
                    id=f"t{i}", name="read", arguments={"path": f"mod{i}.py"})],
                usage=_usage(i % 7), model="gpt-5-mini", provider="openai"))
            s.append_message(Message.tool(f"line of mod{i}\n" * 12, tool_call_id=f"t{i}",
                                          name="read"))
            s.append_message(Message.assistant(f"mod{i}.py: **fine**; next.", usage=_usage(1),
                                               model="gpt-5-mini", provider="openai"))
            a = s.append_message(Message.user(f"continue {i}"))
            n += 4
            if len(points) < branches - 1 and i % max(4, (trunk // branches) // 4 * 4) == 0:
                points.append(a)
        for p in points:
            s.move_to(p)
            for j in range(per_branch):
                s.append_message(Message.user(f"branch step {j}") if j % 2 else
                                 Message.assistant(f"alternative {j}", usage=_usage(2),
                                                   model="gpt-5-mini", provider="openai"))
                n += 1
    return n
