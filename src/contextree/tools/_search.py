"""Search tools: ``grep`` (regular expressions over file contents) and ``glob`` (file names).

Both are pure Python. They skip version-control and cache directories (``SKIP_DIRS``) while
walking, unless the search starts inside one, skip binary files, and keep to the workspace:
directories are walked by descriptor (``os.fwalk``) and files opened from the workspace
root's descriptor, so a directory swapped for a symlink mid-search cannot lead out. grep's
patterns run on RE2 (linear time) when ``google-re2`` is installed, else on Python's ``re``
under a time budget (``contextree.tools._regex``).
"""

from __future__ import annotations

import bisect
import itertools
import os
import stat
from collections.abc import Iterator
from pathlib import Path

from contextree._truncation import BINARY_SNIFF, is_binary
from contextree.errors import ToolError
from contextree.markers import GlobMeta, GrepMeta
from contextree.tools._context import ToolContext
from contextree.tools._decorator import tool
from contextree.tools._files import not_found, os_error, shown_name
from contextree.tools._globmatch import GlobPattern
from contextree.tools._kinds import ToolKind
from contextree.tools._regex import LineSearch, compile_search, engine_name
from contextree.tools._result import ToolResult

SKIP_DIRS = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        "node_modules",
        "__pycache__",
        ".venv",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
        ".tox",
    }
)
GREP_LINE_CHARS = 500
MAX_GREP_FILE_BYTES = 20 * 2**20
MAX_GLOB_RESULTS = 1000
_GLOB_CHARS = frozenset("*?[{")


# -- glob patterns ---------------------------------------------------------------------------
MAX_BRACE_ALTERNATIVES = 256
MAX_BRACE_DEPTH = 32
MAX_BRACE_CHARS = 1 << 20


def expand_braces(pattern: str) -> list[str]:
    """``a{b,c}d`` -> ``["abd", "acd"]`` (nested braces work; unmatched ones, and a group
    without a comma, are literal).

    The pattern is parsed once, in linear time. ``ToolError`` when the expansion would pass
    ``MAX_BRACE_ALTERNATIVES`` patterns or ``MAX_BRACE_CHARS`` characters in all, or groups
    nest more than ``MAX_BRACE_DEPTH`` deep.
    """
    if "{" not in pattern:
        return [pattern]
    groups = _brace_groups(pattern)
    if not groups:
        return [pattern]
    depth = _brace_depth(groups)
    if depth > MAX_BRACE_DEPTH:
        raise ToolError(
            f"glob pattern {_short(pattern)} nests {{a,b}} groups {depth} deep; at most "
            f"{MAX_BRACE_DEPTH} levels are expanded. Flatten the braces, or split the "
            "pattern into several calls")
    return _Expansion(pattern, groups).expand(0, len(pattern))


def _brace_groups(pattern: str) -> dict[int, tuple[int, list[int]]]:
    """The groups that expand: ``{`` index -> (its ``}`` index, the indexes of its own
    commas), for each matched pair that has a comma at its level. One pass with a stack."""
    groups: dict[int, tuple[int, list[int]]] = {}
    stack: list[tuple[int, list[int]]] = []
    for i, c in enumerate(pattern):
        if c == "{":
            stack.append((i, []))
        elif c == "," and stack:
            stack[-1][1].append(i)
        elif c == "}" and stack:
            start, commas = stack.pop()
            if commas:
                groups[start] = (i, commas)
    return groups


def _brace_depth(groups: dict[int, tuple[int, list[int]]]) -> int:
    """How deep the expanding groups nest (1 for ``{a,b}``)."""
    deepest = 0
    open_ends: list[int] = []
    for start in sorted(groups):
        while open_ends and open_ends[-1] < start:
            open_ends.pop()
        open_ends.append(groups[start][0])
        deepest = max(deepest, len(open_ends))
    return deepest


def _short(pattern: str) -> str:
    if len(pattern) <= 80:
        return repr(pattern)
    return f"{pattern[:60]!r}... ({len(pattern)} characters)"


class _Expansion:
    """The expansion of one pattern, each range of it expanded once."""

    def __init__(self, pattern: str, groups: dict[int, tuple[int, list[int]]]) -> None:
        self.pattern = pattern
        self.groups = groups
        self.starts = sorted(groups)

    def expand(self, lo: int, hi: int) -> list[str]:
        """The alternatives of ``pattern[lo:hi]``: its text around each outermost group
        in the range, times the alternatives of the group."""
        out = [""]
        at = lo
        k = bisect.bisect_left(self.starts, lo)
        while k < len(self.starts) and self.starts[k] < hi:
            start = self.starts[k]
            end, commas = self.groups[start]
            if start > at:
                out = self._product(out, [self.pattern[at:start]])
            choices: list[str] = []
            for a, b in itertools.pairwise([start, *commas, end]):
                choices.extend(self.expand(a + 1, b))
                self._check(len(choices), sum(map(len, choices)))
            out = self._product(out, choices)
            at = end + 1
            k = bisect.bisect_left(self.starts, at, k + 1)
        if at < hi:
            out = self._product(out, [self.pattern[at:hi]])
        return out

    def _product(self, heads: list[str], tails: list[str]) -> list[str]:
        chars = len(tails) * sum(map(len, heads)) + len(heads) * sum(map(len, tails))
        self._check(len(heads) * len(tails), chars)
        return [h + t for h in heads for t in tails]

    def _check(self, count: int, chars: int) -> None:
        if count > MAX_BRACE_ALTERNATIVES:
            raise ToolError(
                f"glob pattern {_short(self.pattern)} expands to too many alternatives, "
                f"more than {MAX_BRACE_ALTERNATIVES} (each {{a,b}} group multiplies them); "
                "split it into several calls, or match with * and ? instead")
        if chars > MAX_BRACE_CHARS:
            raise ToolError(
                f"glob pattern {_short(self.pattern)} expands to more than "
                f"{MAX_BRACE_CHARS} characters of patterns; shorten it or split it into "
                "several calls")


def compile_glob(pattern: str) -> GlobPattern:
    """A matcher for any brace alternative of ``pattern`` (whole relative paths); it never
    backtracks, so no pattern can make it hang (``contextree.tools._globmatch``)."""
    return GlobPattern(expand_braces(pattern))


def _split_literal(pattern: str) -> tuple[str, str]:
    """``src/lib/**/*.py`` -> (``src/lib``, ``**/*.py``): the leading plain directories."""
    parts = pattern.split("/")
    n = 0
    while n < len(parts) - 1 and not (_GLOB_CHARS & set(parts[n])):
        n += 1
    prefix = "/".join(parts[:n])
    if pattern.startswith("/") and not prefix:
        prefix = "/"
    return prefix, "/".join(parts[n:])


# -- walking -------------------------------------------------------------------------------
def walk(dir_fd: int) -> Iterator[tuple[str, bool]]:
    """``(relative posix path, is_dir)`` under the open directory ``dir_fd``, sorted per
    directory, pruned of ``SKIP_DIRS``. Walked by descriptor, never through a symlink."""
    for dirpath, dirnames, filenames, _ in os.fwalk(".", dir_fd=dir_fd):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
        rel = dirpath[2:]  # "./a/b" -> "a/b"
        prefix = rel + "/" if rel else ""
        for d in dirnames:
            yield prefix + d, True
        for f in sorted(filenames):
            yield prefix + f, False


def _probe(path: Path, ctx: ToolContext) -> os.stat_result | None:
    """What ``path`` is (``fstat`` of it opened from the root), or None if it is missing."""
    try:
        fd = ctx.open(path, getattr(os, "O_PATH", os.O_RDONLY | os.O_NONBLOCK))
    except FileNotFoundError:
        return None
    except OSError as e:
        raise os_error("open", shown_name(ctx.display(path)), e) from None
    try:
        return os.fstat(fd)
    finally:
        os.close(fd)


def _start(path: str, ctx: ToolContext) -> tuple[Path, os.stat_result]:
    base = ctx.resolve(path)
    st = _probe(base, ctx)
    if st is None:
        raise not_found(path, base, ctx)
    return base, st


def _walk_from(path: str, base: Path, ctx: ToolContext) -> Iterator[tuple[str, bool]]:
    """``walk`` of the directory ``base``, opened from the workspace root."""
    try:
        fd = ctx.open_dir(base)
    except OSError as e:
        raise os_error("search", path, e) from None
    try:
        yield from walk(fd)
    finally:
        os.close(fd)


# -- grep ----------------------------------------------------------------------------------
@tool(kind=ToolKind.SEARCH)
def grep(
    pattern: str,
    path: str = ".",
    glob: str | None = None,
    ignore_case: bool = False,
    max_results: int = 200,
    context: ToolContext | None = None,
) -> ToolResult:
    """Search file contents with a Python regular expression; prints matching lines as path:line:text. Searches a file or a whole directory tree (binary files and .git, node_modules and cache directories are skipped).

    Args:
        pattern: Python regular expression, searched in each line (escape ( [ . * + ? to match them literally).
        path: File or directory to search.
        glob: Only search files whose name matches, e.g. "*.py"; a glob with a '/' matches the path (from path or the working directory), e.g. "src/**/*.{ts,tsx}".
        ignore_case: Match letters case-insensitively.
        max_results: Stop after this many matching lines.
    """
    ctx = context or ToolContext()
    if max_results < 1:
        raise ToolError(f"max_results must be 1 or more, got {max_results}")
    search = compile_search(pattern, ignore_case)
    base, st = _start(path, ctx)
    name_filter = _name_filter(glob)
    hits: list[str] = []
    files = 0
    try:
        for file, shown in _grep_files(path, base, st, ctx, name_filter):
            found = _grep_file(file, shown, search, max_results - len(hits), ctx)
            files += bool(found)
            hits.extend(found)
            if len(hits) >= max_results:
                break
    finally:
        search.close()
    capped = len(hits) >= max_results
    meta = GrepMeta(pattern=pattern, path=ctx.display(base), matches=len(hits), files=files,
                    capped=capped, engine=search.engine).to_meta()
    if not hits:
        where = f" in files matching {_short(glob)}" if glob else ""
        return ToolResult(f"No matches for {pattern!r} in {path}{where}.", meta=meta)
    text = "\n".join(hits)
    if capped:
        text += (
            f"\n\n[stopped at {max_results} matches; narrow the pattern, path or glob, "
            "or raise max_results]"
        )
    return ToolResult(text, meta=meta)


_ENGINE_NOTES = {
    "re2": "Patterns run on RE2 (linear time, so no pattern can hang; no backreferences or "
           "lookaround, \\d \\w \\s are ASCII).",
    "re": "Patterns run on Python's re with a 10 s time budget per call: a pattern that "
          "backtracks catastrophically, such as (a+)+$, is stopped with an error.",
}
grep.description = f"{grep.description} {_ENGINE_NOTES[engine_name()]}"


def _name_filter(glob: str | None) -> tuple[GlobPattern, bool] | None:
    """The compiled glob and whether it applies to the whole relative path (has a '/')."""
    if not glob:
        return None
    return compile_glob(glob), "/" in glob


def _grep_files(
    path: str, base: Path, st: os.stat_result, ctx: ToolContext,
    name_filter: tuple[GlobPattern, bool] | None,
) -> Iterator[tuple[Path, str]]:
    """Files to search under ``base`` (or ``base`` itself), with their display path."""
    if not stat.S_ISDIR(st.st_mode):
        yield base, ctx.display(base)
        return
    for rel in sorted(rel for rel, is_dir in _walk_from(path, base, ctx) if not is_dir):
        lexical = base / rel
        shown = ctx.display(lexical)
        if name_filter is not None and not _wanted(rel, shown, *name_filter):
            continue
        yield lexical, shown


def _wanted(rel: str, shown: str, pattern: GlobPattern, whole: bool) -> bool:
    """Whether a file passes the glob: by name, or by path from the search base or root."""
    if not whole:
        return pattern.fullmatch(rel.rsplit("/", 1)[-1])
    return pattern.fullmatch(rel) or pattern.fullmatch(shown)


def _grep_file(file: Path, shown: str, search: LineSearch, room: int,
               ctx: ToolContext) -> list[str]:
    """Matching lines of one file, opened from the root (a symlink leading out is skipped,
    as are binary files, files over ``MAX_GREP_FILE_BYTES`` and what cannot be read)."""
    try:
        fd = ctx.open(file, os.O_RDONLY | os.O_NONBLOCK)
    except (OSError, ToolError):
        return []
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_GREP_FILE_BYTES:
            return []
        with os.fdopen(os.dup(fd), "rb") as f:
            raw = f.read(MAX_GREP_FILE_BYTES + 1)
    except OSError:
        return []
    finally:
        os.close(fd)
    if len(raw) > MAX_GREP_FILE_BYTES or is_binary(raw[:BINARY_SNIFF]):
        return []
    text = raw.decode("utf-8", "replace")
    name = shown_name(shown)
    return [f"{name}:{n}:{_cut(line)}" for n, line in search.lines(text, room, name)]


def _cut(line: str) -> str:
    if len(line) <= GREP_LINE_CHARS:
        return line
    return f"{line[:GREP_LINE_CHARS]}... [{len(line) - GREP_LINE_CHARS} more characters]"


# -- glob ----------------------------------------------------------------------------------
@tool(kind=ToolKind.SEARCH)
def glob(pattern: str, path: str = ".", context: ToolContext | None = None) -> ToolResult:
    """Find files and directories by name pattern; results are sorted alphabetically, directories end with '/'. '*' matches within one path segment, '**' across directories ("**/*.py" finds Python files at any depth), '?' one character, [abc] one of a set, {a,b} either alternative. .git, node_modules and cache directories are skipped.

    Args:
        pattern: Glob pattern relative to path, e.g. "**/*.py" or "src/*.{js,ts}".
        path: Directory to search from.
    """
    ctx = context or ToolContext()
    if not pattern.strip():
        raise ToolError('pattern is empty; give a glob pattern such as "**/*.py"')
    if "\0" in pattern:
        raise ToolError("pattern contains a NUL character; file names cannot contain one")
    start, st = _start(path, ctx)
    if not stat.S_ISDIR(st.st_mode):
        raise ToolError(f"{path} is not a directory; glob searches from a directory")
    found: set[str] = set()
    for alternative in expand_braces(pattern):
        found.update(_glob_one(path, start, alternative, ctx))
    matches = sorted(found)
    meta = GlobMeta(pattern=pattern, path=ctx.display(start), matches=len(matches)).to_meta()
    if not matches:
        hint = ""
        if "/" not in pattern and "**" not in pattern:
            hint = f'; to search subdirectories too, use "**/{pattern}"'
        return ToolResult(f"No files match {_short(pattern)} in {path}{hint}.", meta=meta)
    text = "\n".join(shown_name(m) for m in matches[:MAX_GLOB_RESULTS])
    if len(matches) > MAX_GLOB_RESULTS:
        text += (
            f"\n\n[showing the first {MAX_GLOB_RESULTS} of {len(matches)} matches; "
            "narrow the pattern or path]"
        )
    return ToolResult(text, meta=meta)


def _glob_one(path: str, start: Path, pattern: str, ctx: ToolContext) -> Iterator[str]:
    """Display paths matching one brace-free pattern (directories with a trailing '/')."""
    prefix, rest = _split_literal(pattern)
    if not _GLOB_CHARS & set(rest):
        prefix, rest = os.path.join(prefix, rest), ""
    matcher = GlobPattern([rest]) if rest else None
    base = ctx.resolve(os.path.join(start, prefix)) if prefix else start
    st = _probe(base, ctx)
    if st is None:
        return
    is_dir = stat.S_ISDIR(st.st_mode)
    if matcher is None:
        yield ctx.display(base) + ("/" if is_dir else "")
        return
    if not is_dir:
        return
    for rel, rel_is_dir in _walk_from(path, base, ctx):
        if matcher.fullmatch(rel):
            yield ctx.display(base / rel) + ("/" if rel_is_dir else "")


__all__ = ["SKIP_DIRS", "compile_glob", "expand_braces", "glob", "grep", "walk"]
