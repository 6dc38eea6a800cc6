"""The vocabulary of synthetic messages: what contextree adds to a context, and how it says so.

A message that contextree made (a compaction summary, a cleared or interrupted tool result, a
branch summary...) carries a marker in ``Message.meta``: ``{"kind": <Kind>, ...}``. A tool
result that was cut carries a :class:`TruncationRecord` under ``"truncated"``; a built-in
tool's result carries its facts (:class:`ShellMeta` for the shell's ``exit_code``...). This
module is the only place those keys and values are spelled; everything else reads them
decoded, through ``Message.marker``, ``Message.kind``, ``Message.truncation`` and
``Message.shell`` (or ``ShellMeta.of(meta)``...). ``meta`` itself stays the plain JSON the
session file holds, unknown keys and all; ``meta`` is never sent to a provider.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Any, ClassVar, Literal, Self

import msgspec

__all__ = [
    "COMPACTED",
    "KIND_KEY",
    "SUMMARIES",
    "TRUNCATION_KEY",
    "USAGE_ESTIMATED",
    "BranchSummaryMarker",
    "ClearedToolResultMarker",
    "CompactionSummaryMarker",
    "CustomMessageMarker",
    "EditMeta",
    "ForeignMarker",
    "GlobMeta",
    "GrepMeta",
    "InterruptedMarker",
    "InterruptedReplyMarker",
    "Kind",
    "ListMeta",
    "Marker",
    "ReadMeta",
    "ResultViews",
    "ShellMeta",
    "ToolMeta",
    "TruncationRecord",
    "WriteMeta",
    "kind_of",
    "marker",
    "marker_for",
    "marker_of",
    "truncation_of",
]

KIND_KEY = "kind"
TRUNCATION_KEY = "truncated"
USAGE_ESTIMATED = "usage_estimated"
"""The meta key (``InterruptedReplyMarker.usage_estimated``) saying a reply's usage was
counted here, the provider having reported none before the call was cut short."""


class Kind(StrEnum):
    """What a synthetic message is. The values are what session files store."""

    COMPACTION_SUMMARY = "compaction_summary"
    """The summary a compaction put in place of the turns it folded (a system message)."""
    BRANCH_SUMMARY = "branch_summary"
    """The summary of a branch the conversation returned from (a system message)."""
    CLEARED_TOOL_RESULT = "cleared_tool_result"
    """A tool result whose content compaction replaced by a placeholder."""
    INTERRUPTED = "interrupted"
    """The stand-in result of a tool call that never returned one."""
    INTERRUPTED_REPLY = "interrupted_reply"
    """An assistant reply cut short (Ctrl-C, task cancellation, ``stream.close()``): its
    content is what had arrived; the model wrote it, contextree only marked it."""
    CUSTOM_MESSAGE = "custom_message"
    """A ``custom_message`` entry shown to the model as a user message."""
    FOREIGN = "pi"
    """A message of another tool's role with no equivalent here (pi's bash executions...)."""


# Kinds whose presence means a list of messages is a compacted view of the conversation.
COMPACTED: frozenset[Kind] = frozenset((Kind.COMPACTION_SUMMARY, Kind.CLEARED_TOOL_RESULT))
# Kinds that are summaries of something no longer in view.
SUMMARIES: frozenset[Kind] = frozenset((Kind.COMPACTION_SUMMARY, Kind.BRANCH_SUMMARY))

_KINDS: dict[str, Kind] = {k.value: k for k in Kind}


class TruncationRecord(msgspec.Struct, kw_only=True, omit_defaults=True):
    """How a tool result was cut: the model sees ``shown_lines`` of ``total_lines``.

    ``saved_path`` is where the original went (``None`` when nothing was lost, e.g. the
    ``read`` tool paging a file that holds the rest); ``by`` names the tool that cut its own
    output, so it is not cut again.
    """

    total_lines: int
    total_bytes: int
    shown_lines: int
    direction: Literal["head", "tail", "middle"] = "head"
    saved_path: str | None = None
    by: str | None = None
    first_line: int | None = None
    cut_lines: int | None = None

    def to_meta(self) -> dict[str, Any]:
        """The ``Message.meta`` entry that records this truncation."""
        data: dict[str, Any] = msgspec.to_builtins(self)
        data.setdefault("saved_path", None)
        return {TRUNCATION_KEY: data}


# -- markers: what a synthetic message is, typed ----------------------------------------------


class Marker(msgspec.Struct, kw_only=True, omit_defaults=True, frozen=True):
    """The decoded marker of a synthetic message; one subclass a :class:`Kind`.

    Read one with ``Message.marker`` (or :func:`marker_of`); write one with ``to_meta()``
    (or ``Message.marked(marker)``). A field left ``None`` is not written, so the JSON is
    what earlier versions wrote; keys this version does not know stay in ``Message.meta``.
    """

    kind: ClassVar[Kind]

    def to_meta(self) -> dict[str, Any]:
        """The ``Message.meta`` of a message with this marker."""
        info: dict[str, Any] = msgspec.to_builtins(self)
        return {KIND_KEY: self.kind.value, **{k: v for k, v in info.items() if v is not None}}


class CompactionSummaryMarker(Marker, kw_only=True, frozen=True):
    """A compaction summary: the entry it renders (``entry_id``), the tokens the context
    held before and after (``tokens_before``, ``tokens_after``: the compaction's count of
    the view it made, which token counts carry on from), the raw ``summary`` and the
    ``digest`` state, so a list of messages can be compacted again without reading text;
    ``source`` names the tool an imported summary came from (``"codex"``,
    ``"claude-code"``); ``native`` is the provider's own compacted items when a provider
    compacted (``details["native"]`` of the entry), which the wire conversion of that API
    sends instead of the text."""

    kind: ClassVar[Kind] = Kind.COMPACTION_SUMMARY
    entry_id: str | None = None
    tokens_before: int | None = None
    tokens_after: int | None = None
    summary: str | None = None
    digest: dict[str, Any] | None = None
    source: str | None = None
    native: dict[str, Any] | None = None


class BranchSummaryMarker(Marker, kw_only=True, frozen=True):
    """The summary of a branch left when the leaf moved to ``from_id``."""

    kind: ClassVar[Kind] = Kind.BRANCH_SUMMARY
    from_id: str | None = None


class ClearedToolResultMarker(Marker, kw_only=True, frozen=True):
    """A tool result whose content compaction replaced by a placeholder; ``tokens_after`` is
    that compaction's count of the view it made (token counts carry on from it when the
    compaction has no summary to carry it)."""

    kind: ClassVar[Kind] = Kind.CLEARED_TOOL_RESULT
    tokens_after: int | None = None


class InterruptedMarker(Marker, kw_only=True, frozen=True):
    """The stand-in result of a tool call that never returned one."""

    kind: ClassVar[Kind] = Kind.INTERRUPTED


class InterruptedReplyMarker(Marker, kw_only=True, frozen=True):
    """An assistant reply cut short: its content is what had arrived. ``usage_estimated``:
    the provider reported no usage before the cut, so the reply's usage is an estimate of
    what was sent (and of what arrived)."""

    kind: ClassVar[Kind] = Kind.INTERRUPTED_REPLY
    usage_estimated: bool | None = None


class CustomMessageMarker(Marker, kw_only=True, frozen=True):
    """A custom message shown to the model: its ``custom_type`` (and ``pi_role`` when it
    was imported from pi)."""

    kind: ClassVar[Kind] = Kind.CUSTOM_MESSAGE
    pi_role: str | None = None
    custom_type: str | None = None


class ForeignMarker(Marker, kw_only=True, frozen=True):
    """A message of another tool's role with no equivalent here (``pi_role``)."""

    kind: ClassVar[Kind] = Kind.FOREIGN
    pi_role: str | None = None
    custom_type: str | None = None


_MARKERS: dict[Kind, type[Marker]] = {cls.kind: cls for cls in (
    CompactionSummaryMarker, BranchSummaryMarker, ClearedToolResultMarker, InterruptedMarker,
    InterruptedReplyMarker, CustomMessageMarker, ForeignMarker)}


def marker_for(kind: Kind) -> Marker:
    """The marker of ``kind`` with no details."""
    return _MARKERS[kind]()


def marker(kind: Kind, **info: Any) -> dict[str, Any]:
    """The ``meta`` of a synthetic message of ``kind`` with loose ``info``; prefer a
    :class:`Marker`'s ``to_meta()``, which checks the fields."""
    return {KIND_KEY: kind.value, **info}


def kind_of(meta: Mapping[str, Any] | None) -> Kind | None:
    """The marker's kind in ``meta``, or ``None`` for a message a person or model wrote."""
    if not meta:
        return None
    value = meta.get(KIND_KEY)
    return _KINDS.get(value) if isinstance(value, str) else None


def marker_of(meta: Mapping[str, Any] | None) -> Marker | None:
    """The marker in ``meta``, decoded (``None`` when there is none). A field of the wrong
    type (a hand-edited file) is read as absent; the rest of the marker still counts."""
    kind = kind_of(meta)
    if kind is None or meta is None:
        return None
    cls = _MARKERS[kind]
    try:
        return msgspec.convert(meta, cls)
    except msgspec.ValidationError:
        good = {k: meta[k] for k in cls.__struct_fields__ if k in meta and _valid(cls, k, meta[k])}
        return msgspec.convert(good, cls)


def _valid(cls: type[msgspec.Struct], name: str, value: object) -> bool:
    try:
        msgspec.convert({name: value}, cls)
    except msgspec.ValidationError:
        return False
    return True


def truncation_of(meta: Mapping[str, Any] | None) -> TruncationRecord | None:
    """The truncation recorded in ``meta``, or ``None`` if the result was not cut."""
    if not meta:
        return None
    data = meta.get(TRUNCATION_KEY)
    if not isinstance(data, dict):
        return None
    try:
        return msgspec.convert(data, TruncationRecord)
    except msgspec.ValidationError:
        return None


# -- tool facts: what a built-in tool's result records, typed ----------------------------------


class ToolMeta(msgspec.Struct, kw_only=True, omit_defaults=True, frozen=True):
    """The facts a built-in tool records in its result's ``meta``; one subclass a tool.

    ``Cls.of(meta)`` decodes them (``None`` when ``meta`` does not hold them); ``to_meta()``
    writes them. A truncation record sits beside them (``TruncationRecord.to_meta()``).
    """

    def to_meta(self) -> dict[str, Any]:
        """These facts as ``meta`` entries."""
        data: dict[str, Any] = msgspec.to_builtins(self)
        return data

    @classmethod
    def of(cls, meta: Mapping[str, Any] | None) -> Self | None:
        """The facts in ``meta`` (a tool result's or a tool message's), or ``None``."""
        if not meta:
            return None
        try:
            return msgspec.convert(meta, cls)
        except msgspec.ValidationError:
            return None


class ShellMeta(ToolMeta, kw_only=True, frozen=True):
    """What the shell tool ran (``command``), its ``exit_code``, and whether it was killed
    at its timeout. ``exit_code`` alone is enough: a tool of yours can record it too."""

    command: str | None = None
    exit_code: int
    timed_out: bool = False


class ReadMeta(ToolMeta, kw_only=True, frozen=True):
    """The ``read`` tool's page: ``lines`` lines from line ``offset`` of ``total_lines``."""

    path: str
    offset: int
    total_lines: int
    lines: int


class ListMeta(ToolMeta, kw_only=True, frozen=True):
    """The ``read`` tool on a directory: how many ``entries`` it holds."""

    path: str
    entries: int


class WriteMeta(ToolMeta, kw_only=True, frozen=True):
    """The ``write`` tool: ``bytes`` and ``lines`` written; ``created`` for a new file."""

    path: str
    bytes: int
    lines: int
    created: bool


class EditMeta(ToolMeta, kw_only=True, frozen=True):
    """The ``edit`` tool: how many ``replacements``, the first at line ``first_line``."""

    path: str
    replacements: int
    first_line: int


class GlobMeta(ToolMeta, kw_only=True, frozen=True):
    """The ``glob`` tool: how many files ``matches`` the ``pattern`` under ``path``."""

    pattern: str
    path: str
    matches: int


class GrepMeta(GlobMeta, kw_only=True, frozen=True):
    """The ``grep`` tool: ``matches`` lines in ``files`` files; ``capped`` when it stopped at
    ``max_results``; ``engine`` is the regular-expression engine used."""

    files: int
    capped: bool
    engine: str


class ResultViews:
    """Mixin: a tool result's ``meta`` read typed (``truncation``, ``shell``), so that a
    ``ToolResult`` and the tool ``Message`` it becomes answer the same questions the same way.
    """

    __slots__ = ()
    meta: dict[str, Any] | None

    @property
    def truncation(self) -> TruncationRecord | None:
        """How this tool result was cut, or ``None`` if it was not."""
        return truncation_of(self.meta)

    @property
    def shell(self) -> ShellMeta | None:
        """What this shell tool result records (``exit_code``...), or ``None``."""
        return ShellMeta.of(self.meta)
