"""contextree: durable, branchable sessions for LLM agents, and context that fits the window.

The names here are the ones a user needs every day. Each layer has its own namespace:
``contextree.entries`` (the typed lines of a session), ``contextree.storage`` (backends),
``contextree.compaction`` (the ladder and its stages), ``contextree.runtime`` (middleware),
``contextree.tools``, ``contextree.models``, ``contextree.formats`` (import/export),
``contextree.markers`` (synthetic messages), ``contextree.tokens`` (counters),
``contextree.errors`` and ``contextree.integrations``.
"""

from . import compaction, entries, errors, formats, markers, models, runtime, storage, tokens, tools
from ._context import SessionContext, build_context
from ._messages import ImagePart, Message, TextPart, ThinkingPart, ToolCall, UnknownPart, Usage
from ._overflow import OverflowStore
from ._session import Session, TreeNode
from ._stats import SessionStats, UsageStats
from ._truncation import Truncation, TruncationLimits, truncate
from .errors import (
    CompactionError,
    ContextreeError,
    CorruptLine,
    CorruptSession,
    DuplicateId,
    EntryNotFound,
    InvalidArgument,
    InvalidEntry,
    InvalidHeader,
    LeafConflict,
    MissingParent,
    ModelError,
    ModelRateLimited,
    ModelRequestRejected,
    ModelUnavailable,
    ParentCycle,
    ReadOnlySession,
    SessionError,
    SessionExists,
    SessionLocked,
    SessionNotFound,
    StorageFailure,
    ToolError,
    TornLine,
)
from .runtime import Agent, TurnResult, agent
from .storage import RepairReport, repair
from .tools import Tool, ToolKind, ToolResult, Workspace, make_tools, tool

__version__ = "0.1.0"

__all__ = [
    "Agent",
    "CompactionError",
    "ContextreeError",
    "CorruptLine",
    "CorruptSession",
    "DuplicateId",
    "EntryNotFound",
    "ImagePart",
    "InvalidArgument",
    "InvalidEntry",
    "InvalidHeader",
    "LeafConflict",
    "Message",
    "MissingParent",
    "ModelError",
    "ModelRateLimited",
    "ModelRequestRejected",
    "ModelUnavailable",
    "OverflowStore",
    "ParentCycle",
    "ReadOnlySession",
    "RepairReport",
    "Session",
    "SessionContext",
    "SessionError",
    "SessionExists",
    "SessionLocked",
    "SessionNotFound",
    "SessionStats",
    "StorageFailure",
    "TextPart",
    "ThinkingPart",
    "Tool",
    "ToolCall",
    "ToolError",
    "ToolKind",
    "ToolResult",
    "TornLine",
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
    "compaction",
    "entries",
    "errors",
    "formats",
    "make_tools",
    "markers",
    "models",
    "repair",
    "runtime",
    "storage",
    "tokens",
    "tool",
    "tools",
    "truncate",
]
