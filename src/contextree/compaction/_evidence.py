"""What tool calls and results tell compaction: what a tool does (its ``ToolKind``), the
file a call changes, the command it runs, a command's exit code, the lines of an output that
say what went wrong, and the identifier-shaped tokens of a text.

Tool roles never come from lists of names here: a tool's declared kind wins (the runtime
passes them), otherwise ``contextree.tools.kind_of_tool_name`` maps the names of other
agents' tools (Claude Code ``Bash``/``Edit``, Codex ``apply_patch``, pi ``edit``...).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from .._limits import parse_json
from .._messages import Message, ToolCall
from .._text import shorten
from ..tools._kinds import ToolKind, kind_of_tool_name

__all__ = [
    "CallIndex",
    "argument_text",
    "cap",
    "changed_paths",
    "command_of",
    "error_excerpt",
    "error_excerpts",
    "exit_code",
    "identifiers_in",
    "kind_of",
    "output_text",
    "path_of",
]

_EXIT = re.compile(r"exit code[:= ]+(-?\d+)", re.IGNORECASE)
_ERROR_LINE = re.compile(
    r"error|exception|traceback|fail|fatal|panic|assert|denied|not found|no such|invalid|"
    r"cannot|can't|unable|refused|timed out|timeout",
    re.IGNORECASE,
)
# The same patterns, case-sensitive, for ASCII text lowered first: the same matches at the
# same places (lowering ASCII keeps its length), found several times faster than with
# IGNORECASE. Text that is not ASCII goes through the patterns above.
_EXIT_LOWER = re.compile(_EXIT.pattern)
_ERROR_LINE_LOWER = re.compile(_ERROR_LINE.pattern)
_PATCH_FILE = re.compile(r"^\*\*\* (?:Update|Add|Delete) File: (.+?)\s*$", re.MULTILINE)
_PATH_KEYS = ("path", "file_path", "filename", "file", "notebook_path", "target")


def cap(text: str, n: int) -> str:
    """``text`` stripped, in at most ``n`` characters: its start and end, the cut counted."""
    return shorten(text.strip(), n, keep="middle", counted=True)


def kind_of(name: str, kinds: Mapping[str, ToolKind] | None = None) -> ToolKind:
    """What the tool called ``name`` does: its declared kind when ``kinds`` has one (other
    than ``OTHER``), else the kind its name has in contextree or another agent's sessions."""
    if kinds:
        declared = kinds.get(name)
        if declared is not None and declared is not ToolKind.OTHER:
            return declared
    kind = _NAME_KINDS.get(name)
    if kind is None:
        kind = kind_of_tool_name(name)
        if len(_NAME_KINDS) < 4096:  # (names are few; a flood of them is not remembered)
            _NAME_KINDS[name] = kind
    return kind


_NAME_KINDS: dict[str, ToolKind] = {}  # tool name -> the kind its name has, a memo


def path_of(call: ToolCall) -> str | None:
    """The file a call names in its arguments (``path``, ``file_path``...), if any."""
    for key in _PATH_KEYS:
        v = call.arguments.get(key)
        if isinstance(v, str) and v:
            return v
    return None


def changed_paths(call: ToolCall) -> list[str]:
    """The files an edit or write call changes: its path argument, or the files a patch
    names (``*** Update File: x``, Codex's ``apply_patch``)."""
    path = path_of(call)
    if path:
        return [path]
    for value in call.arguments.values():
        if isinstance(value, str) and "*** " in value:
            found = _PATCH_FILE.findall(value)
            if found:
                return list(dict.fromkeys(found))
    return []


def command_of(call: ToolCall) -> str:
    """The command a shell call runs, as text (``["bash", "-lc", "x"]`` gives ``x``)."""
    cmd = call.arguments.get("command", call.arguments.get("cmd"))
    if isinstance(cmd, str):
        return cmd
    if isinstance(cmd, list) and cmd and all(isinstance(c, str) for c in cmd):
        words = [str(c) for c in cmd]
        if len(words) >= 3 and words[-2] in ("-c", "-lc"):
            return words[-1]
        return " ".join(words)
    return orjson.dumps(call.arguments).decode()


def _json_result(text: str) -> dict[str, Any] | None:
    """A result written as JSON with an ``output`` (Codex: ``{"output": ..., "metadata":
    {"exit_code": ...}}``), decoded; ``None`` for any other text."""
    if not text.startswith("{") or '"output"' not in text[:40]:
        return None
    try:
        data = parse_json(text)
    except orjson.JSONDecodeError:
        return None
    return data if isinstance(data, dict) and isinstance(data.get("output"), str) else None


def output_text(result: Message) -> str:
    """What a tool printed: the text of its result, or the ``output`` of a JSON result."""
    data = _json_result(result.text)
    return data["output"] if data is not None else result.text


def exit_code(result: Message, *, scan_text: bool = True) -> int | None:
    """The exit code of a command's result: from its meta, from a JSON result's
    ``metadata`` (Codex), or (``scan_text``) stated in its text."""
    shell = result.shell
    if shell is not None:
        return shell.exit_code
    if not scan_text:
        return None
    text = result.text
    data = _json_result(text)
    if data is not None and isinstance(data.get("metadata"), dict):
        code = data["metadata"].get("exit_code")
        if isinstance(code, int) and not isinstance(code, bool):
            return code
    m = _exit_search(text[-400:]) or (_exit_search(text[:400]) if len(text) > 400 else None)
    return int(m.group(1)) if m else None


def _exit_search(text: str) -> re.Match[str] | None:
    """``_EXIT.search(text)``, faster on ASCII text (see ``_EXIT_LOWER``)."""
    return _EXIT_LOWER.search(text.lower()) if text.isascii() else _EXIT.search(text)


_ERROR_HEAD = re.compile(r"^(?:FAILED|ERROR|E\s|error(?:\[|:))|(?:Error|Exception|Warning):"
                         r"|\bfatal:|\bpanic", re.IGNORECASE)
_SCAN_LINES = 400  # long outputs say what went wrong at their end


def error_excerpt(text: str, n: int = 800) -> str:
    """The lines of an error output that say what went wrong, and its last line, in at
    most ``n`` characters: the lines that name an error (``FAILED ...``, ``E  ...``,
    ``ValueError: ...``) first, newest first, then other error-sounding lines."""
    return error_excerpts(text, n)[0]


def error_excerpts(text: str, *sizes: int) -> list[str]:
    """``error_excerpt`` of ``text`` at each of ``sizes`` (the lines ranked once)."""
    region = _tail_lines(text, _SCAN_LINES)
    if not region.strip():
        return ["" for _ in sizes]
    last_line = region.rstrip().rsplit("\n", 1)[-1].strip()
    # One pass of the regex over the region finds the error-sounding lines.
    lines: dict[int, str] = {}  # line start -> line, in order
    found = (_ERROR_LINE_LOWER.finditer(region.lower()) if region.isascii()
             else _ERROR_LINE.finditer(region))
    for m in found:
        start = region.rfind("\n", 0, m.start()) + 1
        if start not in lines:
            lines[start] = region[start:_line_end(region, m.start())].strip()
    ranked = sorted(((0 if _ERROR_HEAD.search(line) else 1, -start, line)
                     for start, line in lines.items()))
    out = []
    for n in sizes:
        picked: dict[int, str] = {len(region): last_line}
        size = min(len(last_line), 300) + 3
        for _, neg, line in ranked:
            if -neg in picked or line == last_line:
                continue
            add = min(len(line), 300) + 3
            if size + add > n and len(picked) > 1:
                break
            picked[-neg] = line
            size += add
            if len(picked) >= 8:
                break
        shown = list(dict.fromkeys(cap(picked[k], 300) for k in sorted(picked)))
        out.append(cap(" | ".join(shown), n))
    return out


def _line_end(text: str, pos: int) -> int:
    end = text.find("\n", pos)
    return len(text) if end < 0 else end


def _tail_lines(text: str, n: int) -> str:
    """The last ``n`` lines of ``text`` (found from its end, without splitting it all)."""
    end = len(text)
    pos = end
    for _ in range(n):
        pos = text.rfind("\n", 0, pos)
        if pos < 0:
            return text
    return text[pos + 1:]


class CallIndex:
    """Which call a tool result answers: the call of the *nearest preceding* assistant
    message with that id. Some providers (llama.cpp, Kimi, some Grok endpoints) reuse ids
    across turns, so a global id -> call map would attribute a result to the wrong call."""

    def __init__(self) -> None:
        self._calls: dict[str, ToolCall] = {}

    def see(self, message: Message) -> ToolCall | None:
        """Feed the messages in order; for a tool result, the call it answers."""
        if message.role == "assistant":
            self._calls = {c.id: c for c in message.tool_calls or ()}
            return None
        if message.role == "tool":
            return self._calls.get(message.tool_call_id or "")
        return None


# -- identifiers --------------------------------------------------------------------------

_URL = re.compile(r"https?://[^\s'\"<>()\[\]{}`]+")
_HEX = re.compile(r"[0-9a-f]{7,40}")
_NUMBER = re.compile(r"\d{4,}")
_TICKET = re.compile(r"[A-Z][A-Z0-9]{1,9}-\d{1,7}")
_CONSTANT = re.compile(r"[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+")
_EXTENSIONS = frozenset((
    "py", "pyi", "md", "rst", "txt", "toml", "yaml", "yml", "json", "jsonl", "cfg", "ini",
    "conf", "env", "lock", "log", "csv", "tsv", "sql", "html", "css", "scss", "js", "mjs",
    "cjs", "ts", "tsx", "jsx", "vue", "rs", "go", "c", "h", "cc", "cpp", "hpp", "java", "kt",
    "kts", "scala", "rb", "php", "sh", "bash", "zsh", "ps1", "swift", "m", "mm", "cs", "fs",
    "ex", "exs", "erl", "hs", "ml", "lua", "r", "pl", "proto", "graphql", "tf", "hcl", "xml",
    "svg", "ipynb", "gradle", "mk", "cmake", "dockerfile", "patch", "diff", "gz", "zip", "tar",
    "whl",
))
# Bytes that can be part of an identifier (ASCII letters, digits, ``_ . / -``); every other
# byte splits the text (one C-level ``translate`` and ``split``, not a regex per token).
_ID_BYTES = bytes(b if chr(b).isascii() and (chr(b).isalnum() or chr(b) in "_./-") else 32
                  for b in range(256))
_SHAPED: dict[bytes, str] = {}  # token -> the identifier it is ("" when none), a memo
_ID_SCAN = 20_000  # characters read at each end of an output longer than twice this


def _shaped(token: str) -> bool:
    """Whether ``token`` looks like an identifier worth copying: a hex sha (7-40 chars, with
    a digit and a letter), a number of 4+ digits (ports, ids), a ticket id (``ABC-123``), a
    constant or environment variable name (``FOO_BAR``), or a path (a slash, or a known file
    extension)."""
    if _HEX.fullmatch(token):
        return not token.isdigit() and not token.isalpha()
    if _NUMBER.fullmatch(token) or _TICKET.fullmatch(token) or _CONSTANT.fullmatch(token):
        return True
    if "/" in token:
        return any(c.isalnum() for c in token.replace("/", ""))
    stem, dot, ext = token.rpartition(".")
    return bool(dot and stem and ext.lower() in _EXTENSIONS)


def _identifier(raw: bytes) -> str:
    token = raw.decode("ascii").strip("./-")
    if len(token) < 4 or (token.isalpha() and not token.isupper()):
        return ""
    return token if _shaped(token) else ""


def identifiers_in(text: str) -> list[str]:
    """The identifier-shaped tokens of ``text`` (see ``_shaped``), URLs included, each once,
    in order of first appearance (of a very long text, its first and last 20,000
    characters)."""
    out: list[str] = []
    if "://" in text:
        out += [m.group(0).rstrip(".,;:") for m in _URL.finditer(text)]
    memo = _SHAPED
    if len(text) > 2 * _ID_SCAN:  # a very long output: its start and its end
        text = text[:_ID_SCAN] + "\n" + text[-_ID_SCAN:]
    data = text.encode("utf-8", "surrogatepass").translate(_ID_BYTES)
    for raw in dict.fromkeys(data.split()):
        if len(raw) < 4:
            continue
        token = memo.get(raw)
        if token is None:
            token = _identifier(raw)
            if len(memo) < 200_000:
                memo[raw] = token
        if token:
            out.append(token)
    return out


def argument_text(call: ToolCall) -> str:
    """A call's name and argument values as one text (for finding identifiers it uses)."""
    args = call.arguments
    if all(type(v) is str for v in args.values()):  # (most calls: a few strings)
        return " ".join(args.values())
    parts: list[str] = []
    _strings(args, parts)
    return " ".join(parts)


def _strings(value: Any, out: list[str]) -> None:
    if isinstance(value, str):
        out.append(value)
    elif isinstance(value, Mapping):
        for v in value.values():
            _strings(v, out)
    elif isinstance(value, Sequence) and not isinstance(value, (bytes, bytearray)):
        for v in value:
            _strings(v, out)
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        out.append(str(value))
