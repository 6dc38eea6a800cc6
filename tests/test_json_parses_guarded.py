"""Every JSON text contextree reads is held to the nesting limit: parsed by
``contextree._limits.parse_json`` (``TooDeep``, never a ``RecursionError``), or at one of the
few places listed here, each with the reason it is safe."""

from __future__ import annotations

import re

import pytest

from contextree._limits import MAX_DEPTH, TooDeep, parse_json
from helpers import SRC

PARSE = re.compile(r"\b(?:json\.loads?|orjson\.loads|msgspec\.json\.decode|json\.Decoder)\(")

SAFE = {
    "_limits.py": "parse_json itself",
    "entries.py": "session lines: decode_line checks depth and integers (line_problem)",
    "runtime/_loop.py": "reads back the signature it just wrote from checked arguments",
    "integrations/openai_agents.py": "_dumps reads back the text json.dumps just wrote",
    "storage/_repair.py": "reads back one JSON string literal that a regex matched",
    "storage/_index.py": "typed decoders of flat structs (an index's head and records)",
    "_stats.py": "a typed skeleton of a session line; RecursionError falls back to decode_line",
    "formats/_claude_code.py": "a typed head of each line, decoded only when surely_shallow "
                               "says it nests within the limit (else parse_json reads it)",
    "storage/_encoded.py": "reads back a line checked_line wrote (within the limits)",
}


def test_no_json_parse_outside_parse_json_but_the_listed_ones() -> None:
    package = SRC / "contextree"
    found = {str(p.relative_to(package)) for p in package.rglob("*.py")
             if PARSE.search(p.read_text())}
    assert found <= set(SAFE), sorted(found - set(SAFE))


@pytest.mark.parametrize("exact", [False, True])
@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 1_000, 100_000])
def test_parse_json_refuses_deep_nesting_with_a_json_error(exact: bool, depth: int) -> None:
    text = "[" * depth + "]" * depth
    with pytest.raises(TooDeep, match="levels deep") as info:
        parse_json(text, exact=exact)
    assert isinstance(info.value, ValueError)  # caught where malformed JSON already is
    assert parse_json("[" * MAX_DEPTH + "]" * MAX_DEPTH, exact=exact) is not None
    assert parse_json(b'{"a": "[[[[[[["}') == {"a": "[[[[[[["}
