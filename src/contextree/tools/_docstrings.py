"""Reading a tool's descriptions from its docstring: the summary and a Google-style ``Args:``."""

from __future__ import annotations

import inspect
import re

__all__ = ["parse_docstring"]

_SECTION = re.compile(r"^(\s*)(Args|Arguments|Parameters|Params|Keyword Args):\s*$")
_OTHER_SECTION = re.compile(r"^\s*[A-Z][A-Za-z ]*:\s*$")
_ENTRY = re.compile(r"^\s*\**(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")


def parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """The first paragraph (joined into one line) and the ``Args:`` descriptions."""
    if _SECTION.match(doc.lstrip(" ").split("\n", 1)[0]):
        doc = "\n" + doc  # keep the header's indentation relative to its entries
    lines = inspect.cleandoc(doc).splitlines()
    summary: list[str] = []
    for line in lines:
        if not line.strip() or _SECTION.match(line) or _OTHER_SECTION.match(line):
            break
        summary.append(line.strip())
    return " ".join(summary), _arg_docs(lines)


def _arg_docs(lines: list[str]) -> dict[str, str]:
    docs: dict[str, list[str]] = {}
    header_indent: int | None = None
    entry_indent: int | None = None
    current: str | None = None
    for line in lines:
        m = _SECTION.match(line)
        if header_indent is None:
            if m:
                header_indent = len(m.group(1))
            continue
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        if indent <= header_indent:
            break
        entry = _ENTRY.match(line)
        if entry and (entry_indent is None or indent <= entry_indent):
            entry_indent = indent
            current = entry.group(1)
            docs[current] = [entry.group(2).strip()]
        elif current is not None:
            docs[current].append(line.strip())
    return {k: " ".join(x for x in v if x) for k, v in docs.items()}
