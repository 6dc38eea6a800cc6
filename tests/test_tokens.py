"""Token counting: the offline estimate, tiktoken, and the usage-anchored context count."""

from __future__ import annotations

import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from contextree import ImagePart, Message, TextPart, ThinkingPart, ToolCall, Usage
from contextree.errors import ContextreeError
from contextree.markers import Kind
from contextree.tokens import (
    EstimateCounter,
    TiktokenCounter,
    TokenCounter,
    count_context,
    fresh_start,
    usage_anchor,
)

PROSE = (
    "The committee met on Tuesday to discuss the budget for next year, and after a long "
    "debate it agreed to fund the new library while postponing the road repairs. "
)
CODE = (
    "def load(path: str) -> dict[str, int]:\n"
    "    with open(path) as f:\n"
    '        return {k: int(v) for k, v in (l.split("=") for l in f if l.strip())}\n'
)
CJK = "今天委员会开会讨论了明年的预算经过长时间的辩论决定为新图书馆提供资金同时推迟道路维修。"
RUSSIAN = "Комитет собрался во вторник, чтобы обсудить бюджет на следующий год. "


def same_length(sample: str, n: int = 3000) -> str:
    return (sample * (n // len(sample) + 1))[:n]


counter = EstimateCounter()


def test_estimate_is_a_token_counter() -> None:
    assert isinstance(counter, TokenCounter)


def test_english_prose_is_about_four_chars_a_token() -> None:
    text = same_length(PROSE)
    assert 3.3 <= len(text) / counter.count_text(text) <= 4.5


def test_denser_scripts_and_code_cost_more_than_prose() -> None:
    prose = counter.count_text(same_length(PROSE))
    code = counter.count_text(same_length(CODE))
    cjk = counter.count_text(same_length(CJK))
    russian = counter.count_text(same_length(RUSSIAN))
    assert code > prose * 1.2
    assert russian > prose * 1.2
    assert cjk > prose * 3
    assert cjk >= 3000 * 0.9  # about one token per CJK character


def test_empty_and_tiny() -> None:
    assert counter.count_text("") == 0
    assert counter.count_text("a") == 1
    assert counter.count_text("\ud800") >= 1  # a lone surrogate does not crash


@given(st.text(max_size=200), st.text(max_size=200))
def test_estimate_is_additive_within_rounding(a: str, b: str) -> None:
    whole = counter.count_text(a + b)
    assert whole <= counter.count_text(a) + counter.count_text(b)
    assert whole >= counter.count_text(a) + counter.count_text(b) - 2


def test_message_overhead_tool_calls_images_and_thinking() -> None:
    base = counter.count_message(Message.user(""))
    assert base == 4
    text = counter.count_message(Message.user("hello world"))
    assert text == 4 + counter.count_text("hello world")
    call = ToolCall(id="c1", name="read_file", arguments={"path": "/tmp/x.txt", "limit": 200})
    with_call = counter.count_message(Message.assistant("", tool_calls=[call]))
    assert with_call >= 4 + counter.count_text("read_file") + counter.count_text('"/tmp/x.txt"')
    image = counter.count_message(Message.user([ImagePart(data="aGk=", mime_type="image/png")]))
    assert image == 4 + 1200
    thinking = counter.count_message(
        Message.assistant([ThinkingPart(thinking="let me think " * 50), TextPart(text="ok")])
    )
    assert thinking > 4 + counter.count_text("let me think " * 49)
    msgs = [Message.user("a"), Message.assistant("b")]
    assert counter.count_messages(msgs) == sum(counter.count_message(m) for m in msgs)


def test_custom_costs() -> None:
    cheap = EstimateCounter(image_tokens=85, message_overhead=0)
    assert cheap.count_message(Message.user([ImagePart(url="http://x/y.png")])) == 85
    with pytest.raises(ValueError, match=">= 0"):
        EstimateCounter(image_tokens=-1)


def test_estimate_handles_megabytes() -> None:
    big = same_length(PROSE + CODE + CJK, 2_000_000)
    assert counter.count_text(big) > 400_000


# -- tiktoken -----------------------------------------------------------------------------


def test_tiktoken_missing_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "tiktoken", None)
    with pytest.raises(ImportError, match=r"contextree\[tiktoken\]"):
        TiktokenCounter()


def test_tiktoken_counts_when_the_encoding_loads() -> None:
    pytest.importorskip("tiktoken")
    try:
        exact = TiktokenCounter("o200k_base")
    except ContextreeError as exc:
        pytest.skip(f"tiktoken encoding unavailable offline: {exc}")
    assert exact.count_text("") == 0
    assert exact.count_text("hello world") == 2
    assert exact.count_text("<|endoftext|>") > 1  # special tokens counted as plain text
    assert exact.count_message(Message.user("hello world")) == 6


# -- anchored context count ---------------------------------------------------------------


def convo() -> list[Message]:
    return [
        Message.system("You are terse."),
        Message.user("list files"),
        Message.assistant(
            "",
            tool_calls=[ToolCall(id="c1", name="ls", arguments={})],
            usage=Usage(input=1000, cache_read=500, cache_write=20, output=30),
        ),
        Message.tool("a.txt\nb.txt", tool_call_id="c1"),
        Message.user("thanks"),
    ]


def test_usage_anchor_and_anchored_count() -> None:
    msgs = convo()
    assert usage_anchor(msgs) == 2
    expected = 1000 + 500 + 20 + 30 + counter.count_messages(msgs[3:])
    assert count_context(msgs, counter) == expected
    assert count_context(msgs, counter, fresh_from=2) == expected


def test_no_anchor_is_the_pure_estimate() -> None:
    msgs = convo()
    assert count_context(msgs[:2], counter) == counter.count_messages(msgs[:2])
    # usage from before ``fresh_from`` (produced before a compaction) anchors nothing
    for stale in (3, 5, 99):
        assert usage_anchor(msgs, stale) is None
        assert count_context(msgs, counter, fresh_from=stale) == counter.count_messages(msgs)


def test_anchor_skips_assistants_without_usable_usage() -> None:
    msgs = [*convo(), Message.assistant("done", usage=Usage(output=5))]
    assert usage_anchor(msgs) == 2
    assert usage_anchor([Message.user("hi"), Message.assistant("yo")]) is None
    assert usage_anchor([]) is None


@pytest.mark.parametrize("kind", [Kind.COMPACTION_SUMMARY, Kind.CLEARED_TOOL_RESULT])
def test_compacted_view_has_no_anchor(kind: Kind) -> None:
    msgs = convo()
    msgs[1] = msgs[1].marked(kind, content="summary of earlier turns")
    assert usage_anchor(msgs) is None  # where the compaction fell is not recorded
    assert fresh_start(msgs) == len(msgs)
    assert usage_anchor(msgs, fresh_from=2) == 2  # when it is, later usage anchors


def test_other_meta_kinds_keep_the_anchor() -> None:
    msgs = convo()
    msgs[3] = msgs[3].replace(content="a.txt", meta={"truncated": {"saved_path": None}})
    assert usage_anchor(msgs) == 2 and fresh_start(msgs) == 0


def test_tiktoken_counter_with_a_local_encoding(monkeypatch: pytest.MonkeyPatch) -> None:
    """The counting path, offline: a byte-level encoding built in memory (one token a byte)."""
    tiktoken = pytest.importorskip("tiktoken")
    local = tiktoken.Encoding(
        name="bytes",
        pat_str=r"\S+|\s+",
        mergeable_ranks={bytes([i]): i for i in range(256)},
        special_tokens={"<|endoftext|>": 256},
    )
    monkeypatch.setattr(tiktoken, "get_encoding", lambda name: local)
    exact = TiktokenCounter("bytes")
    assert exact.count_text("héllo") == len("héllo".encode())
    assert exact.count_text("<|endoftext|>") == len("<|endoftext|>")
    call = ToolCall(id="c", name="ls", arguments={"a": 1})
    assert exact.count_message(Message.assistant("ok", tool_calls=[call])) == 4 + 2 + 3 + 2 + 7


def test_tiktoken_load_failure_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    tiktoken = pytest.importorskip("tiktoken")

    def offline(name: str) -> None:
        raise OSError("network is unreachable")

    monkeypatch.setattr(tiktoken, "get_encoding", offline)
    with pytest.raises(ContextreeError, match="TIKTOKEN_CACHE_DIR"):
        TiktokenCounter()
