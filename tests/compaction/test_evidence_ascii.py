"""Error lines and exit codes are found in lowered ASCII text with case-sensitive patterns
(faster than IGNORECASE): the matches must be those of the case-insensitive patterns, and
text that is not ASCII keeps the case-insensitive ones."""

from __future__ import annotations

import random

from contextree import Message
from contextree.compaction import _evidence as ev

_WORDS = ["Error", "ERROR", "eRRor", "exception", "Traceback", "FAILED", "fail", "Timed Out",
          "can't", "CANNOT", "exit code 3", "Exit Code: -2", "EXIT CODE=12", "ok", "x", "\n",
          " ", "\u0130", "\u0131", "Ex\u0131t code 4", "\u017f", "as\u017fert", "\u212a", "Permission DENIED"]


def _text(rnd: random.Random) -> str:
    return "".join(rnd.choice(_WORDS) + rnd.choice([" ", "\n", ""])
                   for _ in range(rnd.randint(0, 200)))


def test_lowered_patterns_match_as_the_case_insensitive_ones() -> None:
    rnd = random.Random(7)
    for _ in range(3000):
        text = _text(rnd)
        if not text.isascii():
            continue
        assert ([m.start() for m in ev._ERROR_LINE_LOWER.finditer(text.lower())]
                == [m.start() for m in ev._ERROR_LINE.finditer(text)])
        low, ign = ev._EXIT_LOWER.search(text.lower()), ev._EXIT.search(text)
        assert (low and (low.start(), low.group(1))) == (ign and (ign.start(), ign.group(1)))


def test_exit_codes_in_any_text() -> None:
    rnd = random.Random(8)
    for _ in range(3000):
        text = _text(rnd)
        m = ev._EXIT.search(text[-400:]) or ev._EXIT.search(text[:400])
        assert ev.exit_code(Message.tool(text, tool_call_id="c")) == (
            int(m.group(1)) if m else None)
    assert ev.exit_code(Message.tool("failed: EX\u0131T CODE 9", tool_call_id="c")) == 9
