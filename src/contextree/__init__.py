"""contextree: durable, branchable sessions for LLM agents, and context that fits the window."""

from .compaction import CompactionPipeline, CompactionPolicy, CompactionResult
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
from .models import AnthropicMessages, Model, OpenAIChat, ScriptedModel
from .overflow import OverflowStore
from .runtime import (
    Agent,
    DefaultCompactionPipeline,
    DefaultToolPipeline,
    DoomLoop,
    Env,
    MaxIterations,
    Retry,
    SessionLog,
    SessionTree,
    SystemPrompt,
    ToolResultLoop,
    TurnResult,
    agent,
)
from .session import Session, TreeNode
from .stats import SessionStats, UsageStats
from .storage import JsonlStorage, MemoryStorage, Storage, TornLineWarning
from .storage.repair import RepairReport, repair
from .tools import ALL, Tool, ToolContext, ToolResult, Workspace, make_tools, tool
from .truncation import Truncation, truncate

__version__ = "0.1.0"


def __getattr__(name: str) -> object:
    # PostgreSQL support needs the optional psycopg (contextree[postgres]): load it on use.
    if name in ("PostgresStorage", "create_schema", "list_sessions"):
        from .storage import postgres

        return getattr(postgres, name)
    raise AttributeError(f"module 'contextree' has no attribute {name!r}")

__all__ = [
    "ALL",
    "ActiveToolsChangeEntry",
    "Agent",
    "AnthropicMessages",
    "AnyEntry",
    "BranchSummaryEntry",
    "CompactionEntry",
    "CompactionError",
    "CompactionPipeline",
    "CompactionPolicy",
    "CompactionResult",
    "ContextreeError",
    "CustomEntry",
    "CustomMessageEntry",
    "DefaultCompactionPipeline",
    "DefaultToolPipeline",
    "DoomLoop",
    "Entry",
    "Env",
    "ImagePart",
    "JsonlStorage",
    "LabelEntry",
    "LeafEntry",
    "MaxIterations",
    "MemoryStorage",
    "Message",
    "MessageEntry",
    "Model",
    "ModelChangeEntry",
    "ModelError",
    "OpenAIChat",
    "OverflowStore",
    "PostgresStorage",
    "RepairReport",
    "Retry",
    "ScriptedModel",
    "Session",
    "SessionContext",
    "SessionError",
    "SessionHeader",
    "SessionInfoEntry",
    "SessionLog",
    "SessionStats",
    "SessionTree",
    "Storage",
    "SystemPrompt",
    "TextPart",
    "ThinkingLevelChangeEntry",
    "ThinkingPart",
    "Tool",
    "ToolCall",
    "ToolContext",
    "ToolError",
    "ToolResult",
    "ToolResultLoop",
    "TornLineWarning",
    "TreeNode",
    "Truncation",
    "TurnResult",
    "UnknownEntry",
    "UnknownPart",
    "Usage",
    "UsageStats",
    "Workspace",
    "agent",
    "build_context",
    "create_schema",
    "make_tools",
    "repair",
    "tool",
    "truncate",
]
