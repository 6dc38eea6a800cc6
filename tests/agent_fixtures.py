"""What the tests of other agents' sessions share: reading the fixtures the real CLIs wrote
(tests/data/formats/real/<tool>/<scenario>/: the files, manifest.json, requests.json), and
reducing what a CLI sent and what contextree's context holds to the same flat items, so that
one comparison serves every tool.

An item is a tuple: ``(role, "text", text)``, ``("thinking", text)``, ``("call", id, name,
arguments)``, ``("tool", call id, text)`` for the Chat Completions tools (Copilot CLI,
opencode); Gemini CLI's are in its own terms (``("assistant", "call", name, args)``,
``("tool", name, response)``), as its API has no call ids.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from contextree import Message, Session
from contextree.entries import CustomEntry
from contextree.formats import import_session

Json = dict[str, Any]
Item = tuple[Any, ...]


def json_lines(path: Path) -> list[Json]:
    """The JSON objects of a JSON Lines file."""
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def manifest(scenario: Path) -> Json:
    """A fixture's manifest.json (tool, version, commands, which request is the last...)."""
    return json.loads((scenario / "manifest.json").read_text())  # type: ignore[no-any-return]


def requests(scenario: Path) -> list[Json]:
    """Every request the fake server received while the CLI ran (requests.json)."""
    return json.loads((scenario / "requests.json").read_text())  # type: ignore[no-any-return]


def request_body(scenario: Path, key: str = "final_main_request") -> Json:
    """The body of the request the manifest names by ``key``."""
    index = manifest(scenario)[key]
    assert index is not None, f"{scenario}: the manifest names no {key}"
    return requests(scenario)[int(index)]["body"]  # type: ignore[no-any-return]


Importer = Callable[..., Session]


def importer(tmp_path: Path, fmt: str) -> Iterator[Importer]:
    """``load(src, fmt=fmt)``: ``src`` imported to a new session under ``tmp_path``; every
    session it opened is closed at the end (the body of each module's ``imported`` fixture)."""
    opened: list[Session] = []

    def load(src: Path | str, fmt: str = fmt) -> Session:
        s = import_session(fmt, src, tmp_path / f"{len(opened)}.jsonl", durable=False)
        opened.append(s)
        return s

    yield load
    for s in opened:
        s.close()


# -- Chat Completions (Copilot CLI, opencode) ----------------------------------------------

def chat_request_items(body: Json, *, system: bool = True) -> list[Item]:
    """The messages of a Chat Completions request as items (``system=False``: without the
    system prompt)."""
    out: list[Item] = []
    for m in body["messages"]:
        if m["role"] == "system" and not system:
            continue
        if m["role"] == "tool":
            out.append(("tool", m["tool_call_id"], m["content"]))
            continue
        if m.get("reasoning_content"):
            out.append(("thinking", m["reasoning_content"]))
        if m.get("content"):
            out.append((m["role"], "text", m["content"]))
        for c in m.get("tool_calls") or ():
            out.append(("call", c["id"], c["function"]["name"],
                        json.loads(c["function"]["arguments"])))
    return out


def chat_message_items(m: Message) -> list[Item]:
    """A contextree message as the same items."""
    if m.role == "tool":
        return [("tool", m.tool_call_id, m.text)]
    out: list[Item] = [("thinking", p.thinking) for p in m.thinking]
    if m.text:
        out.append((m.role, "text", m.text))
    out += [("call", c.id, c.name, c.arguments) for c in m.tool_calls or ()]
    return out


def chat_context_items(s: Session, leaf: str | None = None, *,
                       system: bool = True) -> list[Item]:
    """The items of ``s.build_context(leaf)``."""
    return [i for m in s.build_context(leaf).messages if system or m.role != "system"
            for i in chat_message_items(m)]


# -- sub-agents ------------------------------------------------------------------------------

def subagent_links(s: Session, fmt: str) -> list[CustomEntry]:
    """The ``<fmt>/subagent`` links an import wrote, in order."""
    return [e for e in s.entries() if isinstance(e, CustomEntry)
            and e.custom_type == f"{fmt}/subagent"]


def subtree_leaf(s: Session, root: str) -> str:
    """The last entry below ``root`` (a sub-agent's root in its parent's session)."""
    below = {root}
    last = root
    for e in s.entries():
        if e.parent_id in below:
            below.add(e.id)
            last = e.id
    return last
