"""What tool calls and results tell compaction: which tools read or change files, a
command's exit code, the lines of an output that say what went wrong."""

from __future__ import annotations

import re

from .._messages import Message
from .._text import shorten

__all__ = ["READ_TOOLS", "SHELL_TOOLS", "WRITE_TOOLS", "cap", "error_excerpt", "exit_code"]

READ_TOOLS = frozenset({"read", "grep", "glob", "view", "cat", "ls", "list"})
WRITE_TOOLS = frozenset({"write", "edit", "create", "apply_patch", "str_replace", "patch",
                         "multi_edit", "delete", "move", "rename"})
SHELL_TOOLS = frozenset({"shell", "bash", "exec", "run", "sh", "terminal"})
_EXIT = re.compile(r"exit code[:= ]+(-?\d+)", re.IGNORECASE)
_ERROR_LINE = re.compile(
    r"error|exception|traceback|fail|fatal|panic|assert|denied|not found|no such|invalid|"
    r"cannot|can't|unable|refused|timed out|timeout",
    re.IGNORECASE,
)


def cap(text: str, n: int) -> str:
    """``text`` stripped, in at most ``n`` characters: its start and end, the cut counted."""
    return shorten(text.strip(), n, keep="middle", counted=True)


def exit_code(result: Message, *, scan_text: bool = True) -> int | None:
    """The exit code of a command's result: from its meta, or (``scan_text``) stated in its
    text."""
    meta = result.meta or {}
    code = meta.get("exit_code")
    if isinstance(code, int) and not isinstance(code, bool):
        return code
    if not scan_text:
        return None
    m = _EXIT.search(result.text[-400:]) or _EXIT.search(result.text[:400])
    return int(m.group(1)) if m else None


def error_excerpt(text: str, n: int = 800) -> str:
    """The lines of an error output that say what went wrong, and its last line."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    if not lines:
        return ""
    picked = [line for line in lines if _ERROR_LINE.search(line)][-6:]
    if lines[-1] not in picked:
        picked.append(lines[-1])
    return cap(" | ".join(dict.fromkeys(cap(line, 300) for line in picked)), n)
