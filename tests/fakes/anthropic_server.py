"""A fake Anthropic Messages API server (``POST /v1/messages``).

It validates requests like the real API: ``user``/``assistant`` roles only (system text goes
in ``system``), non-empty text blocks, signed thinking blocks, and every ``tool_use`` answered
by a ``tool_result`` at the start of the very next user message.
"""

from __future__ import annotations

import json
from typing import Any

from . import SSE, FakeServer, Recorded, Reply, keys_outside


class AnthropicServer(FakeServer):
    """The Messages API at ``url`` (the SDK appends ``/v1/messages``)."""

    def route_ok(self, method: str, path: str) -> bool:
        return method == "POST" and path == "/v1/messages"

    def error_reply(self, status: int, message: str) -> Reply:
        return error(status, message)

    def to_stream(self, body: dict[str, Any], req: Recorded) -> SSE:
        """A ``message`` body as the Messages API's events: ``message_start`` (with the
        input usage), each block's start, deltas in pieces and stop, ``message_delta``
        (stop reason, output tokens) and ``message_stop``."""
        return SSE([(e["type"], e) for e in self.events(body)])

    def events(self, body: dict[str, Any]) -> list[dict[str, Any]]:
        """The event objects that stream ``body``."""
        usage = dict(body.get("usage") or {})
        start_usage = {**usage, "output_tokens": 1}
        out: list[dict[str, Any]] = [{"type": "message_start", "message": {
            **{k: v for k, v in body.items() if k not in ("content", "usage")},
            "content": [], "stop_reason": None, "stop_sequence": None, "usage": start_usage}}]
        for i, block in enumerate(body.get("content") or ()):
            out.extend(self._block_events(i, block))
        out.append({"type": "message_delta",
                    "delta": {"stop_reason": body.get("stop_reason"), "stop_sequence": None},
                    "usage": {"output_tokens": usage.get("output_tokens", 0)}})
        out.append({"type": "message_stop"})
        return out

    def _block_events(self, i: int, block: dict[str, Any]) -> list[dict[str, Any]]:
        kind = block.get("type")
        deltas: list[dict[str, Any]] = []
        if kind == "text":
            start = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": p} for p in self.pieces(block["text"])]
        elif kind == "thinking":
            start = {"type": "thinking", "thinking": "", "signature": ""}
            deltas = [{"type": "thinking_delta", "thinking": p}
                      for p in self.pieces(block["thinking"])]
            deltas.append({"type": "signature_delta", "signature": block["signature"]})
        elif kind == "tool_use":
            start = {**block, "input": {}}
            deltas = [{"type": "input_json_delta", "partial_json": p}
                      for p in self.pieces(json.dumps(block["input"]))]
        else:  # redacted thinking and the rest arrive whole
            start = block
        return [{"type": "content_block_start", "index": i, "content_block": start},
                *({"type": "content_block_delta", "index": i, "delta": d} for d in deltas),
                {"type": "content_block_stop", "index": i}]

    def validate(self, body: Any) -> str | None:
        if not isinstance(body, dict) or not isinstance(body.get("model"), str):
            return "model: Field required"
        if not isinstance(body.get("max_tokens"), int):
            return "max_tokens: Field required"
        system = body.get("system")
        if system is not None and not isinstance(system, (str, list)):
            return "system: Input should be a valid string or list"
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            return "messages: at least one message is required"
        for tool in body.get("tools") or []:
            if not tool.get("name") or not isinstance(tool.get("input_schema"), dict):
                return f"tools: invalid tool {tool!r}"
        problem = _check_cache_control(body)
        return problem or _check_messages(messages)


def _check_messages(messages: list[dict[str, Any]]) -> str | None:
    if messages[0].get("role") != "user":
        return "messages: first message must use the 'user' role"
    expected: set[str] = set()  # tool_use ids the next user message must answer
    for i, m in enumerate(messages):
        unknown = keys_outside(m, {"role", "content"})
        if unknown:
            return f"messages.{i}: Extra inputs are not permitted: {unknown}"
        role, content = m.get("role"), m.get("content")
        if role not in ("user", "assistant"):
            return f"messages.{i}.role: Input should be 'user' or 'assistant'"
        blocks = content if isinstance(content, list) else []
        if isinstance(content, str) and not content:
            return f"messages.{i}: all messages must have non-empty content"
        problem = _check_blocks(i, role, blocks)
        if problem:
            return problem
        results = _leading_results(blocks) if role == "user" else []
        if expected and set(results) != expected:
            return (
                f"messages.{i}: `tool_use` ids were found without `tool_result` blocks "
                f"immediately after: {sorted(expected - set(results))}"
            )
        if not expected and results:
            return f"messages.{i}: unexpected `tool_use_id` in `tool_result` blocks: {results}"
        expected = {b["id"] for b in blocks if b.get("type") == "tool_use"}
    return None


MAX_BREAKPOINTS = 4
LOOKBACK = 20  # blocks before a breakpoint the API checks for an earlier cache entry


def blocks_of(body: dict[str, Any]) -> list[tuple[dict[str, Any], bool]]:
    """The request as the cache sees it, in its order (tools, system, then each message's
    blocks): each block without its ``cache_control``, and whether it carried one."""
    out: list[tuple[dict[str, Any], bool]] = []

    def add(block: dict[str, Any], where: str) -> None:
        marked = "cache_control" in block
        out.append(({"at": where, **{k: v for k, v in block.items() if k != "cache_control"}},
                    marked))

    for tool in body.get("tools") or []:
        add(tool, "tools")
    system = body.get("system")
    for block in ([{"type": "text", "text": system}] if isinstance(system, str) else
                  system or []):
        add(block, "system")
    for i, m in enumerate(body.get("messages") or []):
        content = m.get("content")
        for block in ([{"type": "text", "text": content}] if isinstance(content, str)
                      else content or []):
            add(block, f"{m.get('role')}{i}")
    return out


def _check_cache_control(body: dict[str, Any]) -> str | None:
    """At most four breakpoints, each ``{"type": "ephemeral"}`` (with an optional ``ttl``),
    never on a thinking block."""
    count = 0
    raw: list[dict[str, Any]] = [*(body.get("tools") or [])]
    system = body.get("system")
    if isinstance(system, list):
        raw += system
    for m in body.get("messages") or []:
        if isinstance(m.get("content"), list):
            raw += m["content"]
    for b in raw:
        cc = b.get("cache_control")
        if cc is None:
            continue
        count += 1
        if not isinstance(cc, dict) or cc.get("type") != "ephemeral" or keys_outside(
                cc, {"type", "ttl"}):
            return f"cache_control: Input should be {{'type': 'ephemeral'}}, got {cc!r}"
        if b.get("type") in ("thinking", "redacted_thinking"):
            return "cache_control cannot be set for thinking blocks"
    if count > MAX_BREAKPOINTS:
        return (f"A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. "
                f"Found {count}.")
    return None


class PromptCache:
    """Anthropic's prompt caching as documented, for a fake server: the prefix up to each
    ``cache_control`` breakpoint is written to the cache; a later request reads the longest
    cached prefix that ends at most ``LOOKBACK`` blocks before one of its breakpoints.
    Tokens are about four characters of each block's JSON."""

    def __init__(self) -> None:
        self.entries: set[str] = set()

    def usage(self, body: dict[str, Any]) -> tuple[int, int, int]:
        """``(input, cache_read, cache_write)`` tokens of the request ``body``, recording its
        breakpoints' prefixes."""
        import hashlib

        blocks = blocks_of(body)
        sizes = [len(json.dumps(b, sort_keys=True)) // 4 + 1 for b, _ in blocks]
        keys: list[str] = []
        h = hashlib.sha256()
        for b, _ in blocks:
            h.update(json.dumps(b, sort_keys=True).encode())
            keys.append(h.hexdigest())
        marks = [i for i, (_, marked) in enumerate(blocks) if marked]
        read_end = 0  # blocks read from the cache
        for p in marks:
            for i in range(p, max(-1, p - LOOKBACK - 1), -1):
                if keys[i] in self.entries:
                    read_end = max(read_end, i + 1)
                    break
        write_end = max(marks, default=-1) + 1
        for p in marks:
            self.entries.add(keys[p])
        read = sum(sizes[:read_end])
        write = sum(sizes[read_end:write_end]) if write_end > read_end else 0
        return sum(sizes) - read - write, read, write


class CachingAnthropicServer(AnthropicServer):
    """An ``AnthropicServer`` whose replies report the cached prefix tokens (``PromptCache``)
    in their usage, as the Messages API does: ``input_tokens`` excludes cache reads and
    writes."""

    def __init__(self) -> None:
        super().__init__()
        self.cache = PromptCache()
        self.usages: list[tuple[int, int, int]] = []

    def _answer(self, req: Recorded) -> Reply | SSE:
        reply = super()._answer(req)
        if isinstance(reply, Reply) and reply.status == 200 and isinstance(reply.body, dict) \
                and isinstance(req.body, dict):
            inp, read, write = self.cache.usage(req.body)
            self.usages.append((inp, read, write))
            usage = {**reply.body.get("usage", {}), "input_tokens": inp,
                     "cache_read_input_tokens": read, "cache_creation_input_tokens": write}
            reply = Reply(reply.status, {**reply.body, "usage": usage}, reply.headers)
        return reply


def _leading_results(blocks: list[dict[str, Any]]) -> list[str]:
    ids = []
    for b in blocks:
        if b.get("type") != "tool_result":
            break
        ids.append(str(b.get("tool_use_id")))
    return ids


def _check_blocks(i: int, role: str, blocks: list[dict[str, Any]]) -> str | None:
    where = f"messages.{i}.content"
    seen_other = False
    for j, b in enumerate(blocks):
        kind = b.get("type")
        if kind == "text" and not b.get("text"):
            return f"{where}.{j}: text content blocks must be non-empty"
        if kind == "thinking" and not isinstance(b.get("signature"), str):
            return f"{where}.{j}.thinking.signature: Field required"
        if kind == "redacted_thinking" and not isinstance(b.get("data"), str):
            return f"{where}.{j}.redacted_thinking.data: Field required"
        if kind == "tool_use" and (role != "assistant" or not isinstance(b.get("input"), dict)):
            return f"{where}.{j}: invalid tool_use block"
        if kind == "tool_result":
            if role != "user" or seen_other:
                return f"{where}.{j}: tool_result blocks must come first in a user message"
        else:
            seen_other = True
    return None


# -- response builders ---------------------------------------------------------------------


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def tool_use(use_id: str, name: str, input: dict[str, Any]) -> dict[str, Any]:
    return {"type": "tool_use", "id": use_id, "name": name, "input": input}


def thinking(value: str, signature: str) -> dict[str, Any]:
    return {"type": "thinking", "thinking": value, "signature": signature}


def redacted_thinking(data: str) -> dict[str, Any]:
    return {"type": "redacted_thinking", "data": data}


def message(
    *content: dict[str, Any],
    stop_reason: str | None = None,
    input_tokens: int = 20,
    output_tokens: int = 7,
    cache_read: int | None = None,
    cache_write: int | None = None,
    model: str = "claude-test",
) -> dict[str, Any]:
    """A ``message`` response body."""
    has_tool = any(b.get("type") == "tool_use" for b in content)
    return {
        "id": "msg_fake",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": list(content),
        "stop_reason": stop_reason or ("tool_use" if has_tool else "end_turn"),
        "stop_sequence": None,
        "usage": {
            "input_tokens": input_tokens,
            "output_tokens": output_tokens,
            "cache_read_input_tokens": cache_read,
            "cache_creation_input_tokens": cache_write,
        },
    }


def error(
    status: int,
    message: str,
    *,
    kind: str = "invalid_request_error",
    headers: dict[str, str] | None = None,
) -> Reply:
    """An error response in Anthropic's shape."""
    body = {"type": "error", "error": {"type": kind, "message": message}}
    return Reply(status, body, headers or {})
