"""contextree: durable, branchable sessions for LLM agents, and context that fits the window."""

from .context import SessionContext, build_context
from .entries import (
    ActiveToolsChangeEntry,
    AnyEntry,
    BranchSummaryEntry,
    CompactionEntry,
    CustomEntry,
    CustomMessageEntry,
    Entry,
    LabelEntry,
    LeafEntry,
    MessageEntry,
    ModelChangeEntry,
    SessionHeader,
    SessionInfoEntry,
    ThinkingLevelChangeEntry,
    UnknownEntry,
)
from .errors import CompactionError, ContextreeError, ModelError, SessionError, ToolError
from .messages import ImagePart, Message, TextPart, ThinkingPart, ToolCall, UnknownPart, Usage
from .session import Session, TreeNode
from .stats import SessionStats, UsageStats
from .storage import JsonlStorage, MemoryStorage, Storage, TornLineWarning
from .storage.repair import RepairReport, repair

__version__ = "0.1.0"

__all__ = [
    "ActiveToolsChangeEntry",
    "AnyEntry",
    "BranchSummaryEntry",
    "CompactionEntry",
    "CompactionError",
    "ContextreeError",
    "CustomEntry",
    "CustomMessageEntry",
    "Entry",
    "ImagePart",
    "JsonlStorage",
    "LabelEntry",
    "LeafEntry",
    "MemoryStorage",
    "Message",
    "MessageEntry",
    "ModelChangeEntry",
    "ModelError",
    "RepairReport",
    "Session",
    "SessionContext",
    "SessionError",
    "SessionHeader",
    "SessionInfoEntry",
    "SessionStats",
    "Storage",
    "TextPart",
    "ThinkingLevelChangeEntry",
    "ThinkingPart",
    "ToolCall",
    "ToolError",
    "TornLineWarning",
    "TreeNode",
    "UnknownEntry",
    "UnknownPart",
    "Usage",
    "UsageStats",
    "build_context",
    "repair",
]
