"""The ``Model`` interface every adapter implements, and helpers the adapters share.

A model takes provider-neutral ``Message`` objects and returns one assistant ``Message`` with
``usage``, ``model``, ``provider`` and ``stop_reason`` set. Adapters never retry: they turn a
provider failure into a ``ModelError`` that says whether a retry may help, and how long the
provider asked to wait; a separate retry layer acts on that.
"""

from __future__ import annotations

import email.utils
import functools
import inspect
import ipaddress
import time
from collections.abc import Callable, Mapping, Sequence
from types import ModuleType
from typing import Any, Protocol, runtime_checkable
from urllib.parse import urlsplit

from contextree._messages import Message
from contextree._text import shorten
from contextree.errors import ModelError, ModelUnavailable, model_error_for_status

__all__ = [
    "Model",
    "ToolSpec",
    "is_local_url",
    "map_sdk_error",
    "merge_options",
    "parse_retry_after",
    "request_params",
    "sdk_kwargs",
    "status_error",
    "tool_spec",
]

ToolSpec = Mapping[str, Any]
"""A tool as adapters receive it: ``{"name", "description", "parameters"}`` (JSON schema)."""


@runtime_checkable
class Model(Protocol):
    """A chat model: messages in, one assistant message out (sync and async)."""

    name: str
    provider: str

    def complete(
        self, messages: Sequence[Message], *, tools: Sequence[ToolSpec] = (), **options: Any
    ) -> Message:
        """Run one completion and return the assistant reply."""
        ...

    async def acomplete(
        self, messages: Sequence[Message], *, tools: Sequence[ToolSpec] = (), **options: Any
    ) -> Message:
        """Async ``complete``, with the same behaviour."""
        ...


# -- tools and options -------------------------------------------------------------------

_EMPTY_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}


def tool_spec(tool: ToolSpec) -> tuple[str, str | None, dict[str, Any]]:
    """Validate a tool dict and return ``(name, description, parameters)``.

    A missing ``parameters`` means the tool takes no arguments.
    """
    name = tool.get("name")
    if not isinstance(name, str) or not name:
        raise ValueError(f"a tool needs a non-empty string 'name'; got {shorten(repr(dict(tool)), 200)}")
    description = tool.get("description")
    parameters = tool.get("parameters") or _EMPTY_SCHEMA
    return name, (str(description) if description else None), dict(parameters)


def merge_options(defaults: Mapping[str, Any], options: Mapping[str, Any]) -> dict[str, Any]:
    """Per-call options over the adapter's defaults; ``None`` values are dropped."""
    merged = {**defaults, **options}
    return {k: v for k, v in merged.items() if v is not None}


REQUEST_ONLY = ("model", "stream", "stream_options")
"""Options that say which call this is, not how the model answers: never recorded."""


def request_params(model: Any, options: Mapping[str, Any]) -> dict[str, Any]:
    """The request parameters a call of ``model`` with per-call ``options`` sends: the
    adapter's defaults under them (``model.request_params`` where it has one), without
    the model name and the streaming switches."""
    own = getattr(model, "request_params", None)
    merged = own(options) if callable(own) else merge_options({}, options)
    return {k: v for k, v in merged.items() if k not in REQUEST_ONLY}


@functools.lru_cache(maxsize=32)
def _param_names(func: Callable[..., Any]) -> frozenset[str] | None:
    """Keyword parameters ``func`` names, or None when it takes ``**kwargs``."""
    params = inspect.signature(func).parameters.values()
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return None
    return frozenset(p.name for p in params)


def sdk_kwargs(create: Callable[..., Any], request: Mapping[str, Any]) -> dict[str, Any]:
    """Keyword arguments for an SDK ``create`` method; those it does not name go in
    ``extra_body``, so API parameters newer (or older) than the installed SDK still work."""
    names = _param_names(getattr(create, "__func__", create))
    if names is None:
        return dict(request)
    known = {k: v for k, v in request.items() if k in names}
    extra = {k: v for k, v in request.items() if k not in names}
    if extra:
        known["extra_body"] = {**extra, **(known.get("extra_body") or {})}
    return known


def is_local_url(url: str | None) -> bool:
    """True when ``url`` points at this machine (a local vLLM, Ollama, llama.cpp server)."""
    if not url:
        return False
    host = urlsplit(str(url)).hostname or ""
    if host in ("localhost", "host.docker.internal") or host.endswith(".localhost"):
        return True
    try:
        addr = ipaddress.ip_address(host)
    except ValueError:
        return False
    return addr.is_loopback or addr.is_unspecified or addr.is_private


# -- errors ------------------------------------------------------------------------------


def parse_retry_after(headers: Mapping[str, str] | None, now: float | None = None) -> float | None:
    """Seconds to wait from ``retry-after-ms`` or ``retry-after`` (seconds or an HTTP date)."""
    if not headers:
        return None
    lowered = {str(k).lower(): str(v) for k, v in headers.items()}
    ms = lowered.get("retry-after-ms")
    if ms is not None:
        try:
            return max(float(ms) / 1000.0, 0.0)
        except ValueError:
            pass
    value = lowered.get("retry-after")
    if value is None:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(when.timestamp() - (time.time() if now is None else now), 0.0)


_HINTS = {
    400: "the provider rejected the request; check the messages, tools and options",
    401: "check the API key",
    403: "check the API key's permissions for this model",
    404: "check the model name and base_url",
    413: "the request is too large; compact the context",
    429: "rate limited; retry later",
}


def status_error(
    provider: str, status: int, detail: str, headers: Mapping[str, str] | None = None
) -> ModelError:
    """A ``ModelError`` for an HTTP error status, with a hint of what to do about it.

    The class (and so whether a retry may help) comes from ``model_error_for_status``, and the
    default hint follows it, so the two never disagree.
    """
    error = model_error_for_status(status)
    hint = _HINTS.get(status) or (
        "the provider failed; retry later" if error.retryable else "check the request"
    )
    return error(
        f"{provider}: HTTP {status}: {detail} ({hint})",
        status=status,
        retry_after=parse_retry_after(headers),
    )


def _api_detail(exc: BaseException) -> str:
    """The provider's own error message from an SDK exception, falling back to its text."""
    body = getattr(exc, "body", None)
    if isinstance(body, Mapping):
        err = body.get("error", body)
        if isinstance(err, Mapping) and isinstance(err.get("message"), str):
            return str(err["message"])
    return str(getattr(exc, "message", None) or exc)


def map_sdk_error(
    provider: str, exc: BaseException, sdk: ModuleType, base_url: str
) -> ModelError:
    """Map an ``openai`` or ``anthropic`` SDK exception to a ``ModelError``.

    Both SDKs share the shape: ``APIStatusError`` (status, response headers, body),
    ``APIConnectionError`` (network failures and timeouts) and a base ``APIError``. ``sdk`` is
    the SDK module, imported at run time (the SDKs are optional extras), so its exception
    classes are looked up on it rather than named in this module. The status decides the
    error class through ``model_error_for_status``, the one rule for what is worth a retry.
    """
    if isinstance(exc, sdk.APIStatusError):
        headers = getattr(exc.response, "headers", None)
        return status_error(provider, int(exc.status_code), _api_detail(exc), headers)
    if isinstance(exc, sdk.APIConnectionError):
        return ModelUnavailable(
            f"{provider}: could not reach {base_url}: {exc} "
            "(check the base_url and the network; retrying may help)",
        )
    return ModelError(f"{provider}: {type(exc).__name__}: {_api_detail(exc)}")
