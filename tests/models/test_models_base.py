"""Shared adapter helpers: retry-after parsing, status mapping, local URLs, option splitting."""

from __future__ import annotations

import email.utils
from typing import Any

import pytest

from contextree.errors import model_error_for_status
from contextree.models._base import (
    is_local_url,
    merge_options,
    parse_retry_after,
    sdk_kwargs,
    status_error,
    tool_spec,
)


def test_parse_retry_after() -> None:
    assert parse_retry_after({"retry-after": "7"}) == 7.0
    assert parse_retry_after({"Retry-After": "1.5"}) == 1.5
    assert parse_retry_after({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    assert parse_retry_after({"retry-after": "-3"}) == 0.0
    assert parse_retry_after({"retry-after": "soon"}) is None
    assert parse_retry_after({}) is None
    assert parse_retry_after(None) is None
    date = email.utils.formatdate(1_000_030, usegmt=True)
    assert parse_retry_after({"retry-after": date}, now=1_000_000) == pytest.approx(30.0)
    assert parse_retry_after({"retry-after": date}, now=2_000_000) == 0.0


@pytest.mark.parametrize(
    ("status", "retryable"),
    [
        (400, False),
        (401, False),
        (404, False),
        (408, True),
        (409, True),
        (429, True),
        (500, True),
        (529, True),
    ],
)
def test_retryable_statuses(status: int, retryable: bool) -> None:
    assert model_error_for_status(status).retryable is retryable
    err = status_error("p", status, "detail", {"retry-after": "2"})
    assert (err.status, err.retryable, err.retry_after) == (status, retryable, 2.0)
    assert str(err).startswith(f"p: HTTP {status}: detail (")


@pytest.mark.parametrize(
    ("url", "local"),
    [
        ("http://localhost:11434/v1", True),
        ("http://127.0.0.1:8000/v1", True),
        ("http://[::1]:8080", True),
        ("http://192.168.1.20:8000/v1", True),
        ("https://api.openai.com/v1", False),
        ("https://openrouter.ai/api/v1", False),
        (None, False),
    ],
)
def test_is_local_url(url: str | None, local: bool) -> None:
    assert is_local_url(url) is local


def test_merge_options() -> None:
    assert merge_options({"a": 1, "b": 2}, {"b": 3, "c": None}) == {"a": 1, "b": 3}


def test_sdk_kwargs_sends_unknown_options_in_extra_body() -> None:
    def create(*, model: str, temperature: float = 0, extra_body: Any = None) -> None: ...

    got = sdk_kwargs(create, {"model": "m", "temperature": 1, "top_k": 3, "extra_body": {"x": 1}})
    assert got == {"model": "m", "temperature": 1, "extra_body": {"top_k": 3, "x": 1}}

    def anything(**kwargs: Any) -> None: ...

    assert sdk_kwargs(anything, {"top_k": 3}) == {"top_k": 3}


def test_tool_spec() -> None:
    assert tool_spec({"name": "t"}) == ("t", None, {"type": "object", "properties": {}})
    with pytest.raises(ValueError, match="name"):
        tool_spec({"name": ""})


def test_the_hint_follows_the_one_retry_rule() -> None:
    """The default hint says to retry exactly when the error class says a retry may help."""
    for status in range(400, 600):
        err = status_error("p", status, "x")
        assert ("retry" in str(err)) is err.retryable, (status, str(err))
