"""A fake OpenAI Chat Completions server (``POST /v1/chat/completions``).

It validates requests like the real API: known message fields only, tool call arguments as
JSON strings, and every assistant ``tool_calls`` answered by ``tool`` messages before anything
else. ``reasoning_content`` on assistant messages is accepted, as vLLM and DeepSeek do.
"""

from __future__ import annotations

import json
from typing import Any

from . import SSE, FakeServer, Recorded, Reply, keys_outside

_ALLOWED = {
    "system": {"role", "content", "name"},
    "developer": {"role", "content", "name"},
    "user": {"role", "content", "name"},
    "assistant": {"role", "content", "name", "tool_calls", "refusal", "reasoning_content"},
    "tool": {"role", "content", "tool_call_id"},
}


class OpenAIServer(FakeServer):
    """Chat Completions at ``base_url`` (``<url>/v1``)."""

    @property
    def base_url(self) -> str:
        return self.url + "/v1"

    def route_ok(self, method: str, path: str) -> bool:
        return method == "POST" and path == "/v1/chat/completions"

    def error_reply(self, status: int, message: str) -> Reply:
        return error(status, message)

    def to_stream(self, body: dict[str, Any], req: Recorded) -> SSE:
        """A ``chat.completion`` body as ``chat.completion.chunk`` events, the way OpenAI
        sends them: role first, reasoning, content and each tool call's arguments in pieces,
        the finish reason, then (with ``stream_options.include_usage``) the usage."""
        return SSE([(None, c) for c in self.chunks(body, req)] + [(None, "[DONE]")])

    def chunks(self, body: dict[str, Any], req: Recorded) -> list[dict[str, Any]]:
        """The chunk objects of ``body`` (without the final ``[DONE]``)."""
        include_usage = bool((req.body.get("stream_options") or {}).get("include_usage"))
        head = {"id": body.get("id", "chatcmpl-fake"), "object": "chat.completion.chunk",
                "created": body.get("created", 0), "model": body.get("model", "gpt-test")}
        (choice,) = body["choices"]
        msg = choice["message"]
        usage_null = {"usage": None} if include_usage else {}

        def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
            return {**head, "choices": [{"index": 0, "delta": delta, "finish_reason": finish,
                                         "logprobs": None}], **usage_null}

        content = msg.get("content")
        first: dict[str, Any] = {"role": "assistant", "content": "" if content else None}
        out = [chunk(first)]
        for field_name in ("reasoning_content", "reasoning"):
            for piece in self.pieces(msg.get(field_name) or ""):
                out.append(chunk({field_name: piece}))
        if isinstance(content, str):
            out.extend(chunk({"content": piece}) for piece in self.pieces(content))
        if msg.get("refusal"):
            out.extend(chunk({"refusal": piece}) for piece in self.pieces(msg["refusal"]))
        for i, call in enumerate(msg.get("tool_calls") or ()):
            start = {k: v for k, v in call.items() if k != "function"}
            start["index"] = i
            start["function"] = {"name": call["function"]["name"], "arguments": ""}
            out.append(chunk({"tool_calls": [start]}))
            for piece in self.pieces(call["function"]["arguments"]):
                out.append(chunk({"tool_calls": [{"index": i, "function": {"arguments": piece}}]}))
        out.append(chunk({}, choice.get("finish_reason")))
        if include_usage:
            out.append({**head, "choices": [], "usage": body.get("usage")})
        return out

    def validate(self, body: Any) -> str | None:
        if not isinstance(body, dict) or not isinstance(body.get("model"), str):
            return "you must provide a model parameter"
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            return "'messages' must be a non-empty array"
        for tool in body.get("tools") or []:
            if tool.get("type") != "function" or not tool.get("function", {}).get("name"):
                return f"invalid tool: {tool!r}"
        return _check_messages(messages)


def _check_messages(messages: list[dict[str, Any]]) -> str | None:
    pending: set[str] = set()  # tool call ids still waiting for their tool message
    for i, m in enumerate(messages):
        role = m.get("role")
        if role not in _ALLOWED:
            return f"messages[{i}].role: invalid value {role!r}"
        unknown = keys_outside(m, _ALLOWED[role])
        if unknown:
            return f"messages[{i}]: unrecognized fields {unknown}"
        if role == "tool":
            if m.get("tool_call_id") not in pending:
                return (
                    f"messages[{i}]: messages with role 'tool' must be a response to a "
                    "preceding message with 'tool_calls'"
                )
            pending.discard(m["tool_call_id"])
            continue
        if pending:
            return (
                "An assistant message with 'tool_calls' must be followed by tool messages "
                f"responding to each 'tool_call_id'. Missing: {sorted(pending)}"
            )
        if role == "assistant":
            problem = _check_tool_calls(i, m.get("tool_calls") or [])
            if problem:
                return problem
            pending = {c["id"] for c in m.get("tool_calls") or []}
    return None


def _check_tool_calls(i: int, calls: list[dict[str, Any]]) -> str | None:
    for c in calls:
        fn = c.get("function") or {}
        if c.get("type") != "function" or not c.get("id") or not fn.get("name"):
            return f"messages[{i}].tool_calls: invalid tool call {c!r}"
        if not isinstance(fn.get("arguments"), str):
            return f"messages[{i}].tool_calls: arguments must be a string"
    return None


# -- response builders ---------------------------------------------------------------------


def tool_call(call_id: str, name: str, arguments: dict[str, Any] | str) -> dict[str, Any]:
    """A tool call as the API returns it (arguments as a JSON string)."""
    args = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}


def completion(
    content: str | None = None,
    *,
    tool_calls: list[dict[str, Any]] | None = None,
    finish_reason: str | None = None,
    prompt_tokens: int = 12,
    completion_tokens: int = 5,
    cached_tokens: int | None = None,
    model: str = "gpt-test",
    **message_fields: Any,
) -> dict[str, Any]:
    """A ``chat.completion`` body with one choice; extra fields go on the message."""
    message: dict[str, Any] = {"role": "assistant", "content": content, **message_fields}
    if tool_calls:
        message["tool_calls"] = tool_calls
    usage: dict[str, Any] = {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }
    if cached_tokens is not None:
        usage["prompt_tokens_details"] = {"cached_tokens": cached_tokens}
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": finish_reason or ("tool_calls" if tool_calls else "stop"),
                "logprobs": None,
            }
        ],
        "usage": usage,
    }


def error(
    status: int,
    message: str,
    *,
    kind: str = "invalid_request_error",
    headers: dict[str, str] | None = None,
) -> Reply:
    """An error response in OpenAI's shape."""
    body = {"error": {"message": message, "type": kind, "param": None, "code": None}}
    return Reply(status, body, headers or {})
