"""contextree: durable, branchable sessions for LLM agents, and context that fits the window.

The names here are the ones a user types every day. Each layer has its own namespace:
``contextree.entries`` (the typed lines of a session), ``contextree.storage`` (backends),
``contextree.compaction`` (the ladder and its stages), ``contextree.runtime`` (middleware),
``contextree.tools``, ``contextree.models``, ``contextree.formats`` (import/export),
``contextree.markers`` (synthetic messages), ``contextree.tokens`` (counters),
``contextree.errors`` (every exception; ``ContextreeError`` and ``SessionError`` are here
too) and ``contextree.integrations``.

``import contextree`` imports none of them: each name and namespace is imported the first
time it is used (PEP 562), so a command line or a program that needs only sessions does not
pay for the agent runtime, the tools or the formats.
"""

from ._public import publish

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing at start-up

if TYPE_CHECKING:
    # What the names below are, for type checkers and editors; at run time each is imported
    # on first use from the module named in _LAZY and _LAYERS (keep them the same as these
    # imports; tests/test_startup.py checks).
    # The layers' namespaces, reachable as contextree.storage and so on (not in __all__):
    from . import (  # noqa: F401
        compaction,
        entries,
        errors,
        formats,
        markers,
        models,
        redaction,
        retention,
        runtime,
        storage,
        tokens,
        tools,
        view,
    )
    from ._context import SessionContext, build_context
    from ._messages import (
        ImagePart,
        Message,
        TextPart,
        ThinkingPart,
        ToolCall,
        UnknownPart,
        Usage,
    )
    from ._overflow import OverflowStore
    from ._session import Session, TreeNode
    from ._stats import SessionStats, UsageStats
    from ._truncation import Truncation, TruncationLimits, truncate
    from .errors import ContextreeError, SessionError
    from .runtime import Agent, TurnResult, agent, replay
    from .storage import RepairReport, SearchHit, repair, search
    from .tools import Tool, ToolKind, ToolResult, Workspace, make_tools, tool

__version__ = "0.1.0"

__all__ = [
    "Agent",
    "ContextreeError",
    "ImagePart",
    "Message",
    "OverflowStore",
    "RepairReport",
    "SearchHit",
    "Session",
    "SessionContext",
    "SessionError",
    "SessionStats",
    "TextPart",
    "ThinkingPart",
    "Tool",
    "ToolCall",
    "ToolKind",
    "ToolResult",
    "TreeNode",
    "Truncation",
    "TruncationLimits",
    "TurnResult",
    "UnknownPart",
    "Usage",
    "UsageStats",
    "Workspace",
    "agent",
    "build_context",
    "make_tools",
    "repair",
    "replay",
    "search",
    "tool",
    "truncate",
]

_LAYERS = ("compaction", "entries", "errors", "formats", "markers", "models", "redaction",
           "retention", "runtime", "storage", "tokens", "tools", "view")
_LAZY = {
    "._context": ("SessionContext", "build_context"),
    "._messages": ("ImagePart", "Message", "TextPart", "ThinkingPart", "ToolCall",
                   "UnknownPart", "Usage"),
    "._overflow": ("OverflowStore",),
    "._session": ("Session", "TreeNode"),
    "._stats": ("SessionStats", "UsageStats"),
    "._truncation": ("Truncation", "TruncationLimits", "truncate"),
    ".errors": ("ContextreeError", "SessionError"),
    ".runtime": ("Agent", "TurnResult", "agent", "replay"),
    ".storage": ("RepairReport", "SearchHit", "repair", "search"),
    ".tools": ("Tool", "ToolKind", "ToolResult", "Workspace", "make_tools", "tool"),
}

if not TYPE_CHECKING:  # type checkers see the imports above, not a catch-all __getattr__
    __getattr__, __dir__ = publish(globals(), _LAZY, submodules=_LAYERS)
del TYPE_CHECKING, publish  # the root's names are the user's: not these helpers
