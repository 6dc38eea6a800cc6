"""A fake Anthropic Messages API server (``POST /v1/messages``).

It validates requests like the real API: ``user``/``assistant`` roles only (system text goes
in ``system``), non-empty text blocks, signed thinking blocks, and every ``tool_use`` answered
by a ``tool_result`` at the start of the very next user message.
"""

from __future__ import annotations

from typing import Any

from . import FakeServer, Reply, keys_outside


class AnthropicServer(FakeServer):
    """The Messages API at ``url`` (the SDK appends ``/v1/messages``)."""

    def route_ok(self, method: str, path: str) -> bool:
        return method == "POST" and path == "/v1/messages"

    def error_reply(self, status: int, message: str) -> Reply:
        return error(status, message)

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
        return _check_messages(messages)


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
