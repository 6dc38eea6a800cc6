"""Every JSON text contextree reads is held to the nesting limit: parsed by
``contextree._limits.parse_json`` (``TooDeep``, never a ``RecursionError``), or at one of the
few places listed here, each with the reason it is safe."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextree._limits import MAX_DEPTH, TooDeep, parse_json, too_deep
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
    "formats/_claude_code.py": "a typed head of each line (its content skipped; past the "
                               "decoder's recursion guard parse_json reads it), and every "
                               "line is read by parse_json again when it is placed",
    "storage/_encoded.py": "reads back a line checked_line wrote (within the limits)",
    "formats/_brute.py": "a typed flat struct of text fields: a nested value fails its type "
                         "at its first bracket, and parse_json reads the line",
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


def _nested(depth: int, leaf: object) -> object:
    value = leaf
    for k in range(depth - 1):
        value = [value] if k % 2 else {"k": value}
    return value


@settings(max_examples=150, deadline=None)
@given(depth=st.integers(1, MAX_DEPTH + 3), padding=st.integers(0, 40_000),
       items=st.integers(0, 3_000), brackets=st.integers(0, 600), where=st.booleans())
def test_parse_json_refuses_exactly_what_nests_too_deep(depth: int, padding: int, items: int,
                                                        brackets: int, where: bool) -> None:
    # The check walks the containers while they are few next to the text's bytes (a big
    # string), else counts brackets first: either way, what it refuses is what is too deep,
    # brackets inside strings and long flat lists included.
    filler = "x" * padding + "[{" * brackets
    value = {"text": filler, "list": list(range(items)),
             "deep": _nested(depth, filler if where else items)}
    text = json.dumps(value)
    if too_deep(json.loads(text)):
        with pytest.raises(TooDeep):
            parse_json(text)
        with pytest.raises(TooDeep):
            parse_json(text.encode())
    else:
        assert parse_json(text) == value and parse_json(text.encode()) == value
