"""The layers hold: no import cycle, no import against the layer order that
docs/architecture.md gives, and that doc names every module (and only modules that exist).

Every import counts, wherever it is written: at the top of a file, inside a function, under
``if TYPE_CHECKING:``. The checker is tested on a small package of its own first, so that a
pass means something.
"""

from __future__ import annotations

import ast
import importlib
import re
import textwrap
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = next(p for p in Path(__file__).resolve().parents if (p / "pyproject.toml").is_file())
SRC = ROOT / "src"
PACKAGE = SRC / "contextree"
DOC = ROOT / "docs" / "architecture.md"


# -- the checker -------------------------------------------------------------------------------

@dataclass(frozen=True)
class Import:
    """One import of a module by another: where it is written."""

    importer: str
    imported: str
    where: str  # file:line, the file relative to the source root


def modules_under(src: Path, package: str) -> dict[str, Path]:
    """Every module of ``package`` (a directory under ``src``) by dotted name."""
    found: dict[str, Path] = {}
    for path in sorted((src / package).rglob("*.py")):
        parts = list(path.relative_to(src).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def imports_of(src: Path, package: str) -> list[Import]:
    """Every import between the modules of ``package``, first occurrence per pair."""
    known = modules_under(src, package)
    seen: dict[tuple[str, str], Import] = {}
    for module, path in known.items():
        is_package = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            for target in _targets(node, module, is_package, known):
                if target != module and (module, target) not in seen:
                    where = f"{path.relative_to(src).as_posix()}:{node.lineno}"
                    seen[module, target] = Import(module, target, where)
    return sorted(seen.values(), key=lambda i: (i.importer, i.imported))


def _targets(node: ast.AST, module: str, is_package: bool,
             known: dict[str, Path]) -> Iterable[str]:
    """The known modules an import statement takes names from (or imports)."""
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    elif isinstance(node, ast.ImportFrom):
        if node.level:
            parts = module.split(".") if is_package else module.split(".")[:-1]
            parts = parts[:len(parts) - (node.level - 1)]
            base = ".".join(parts + ([node.module] if node.module else []))
        else:
            base = node.module or ""
        names = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base
                 for a in node.names]
    else:
        return []
    out = []
    for name in names:
        while name and name not in known:  # a name inside a module: the module
            name = name.rpartition(".")[0]
        if name:
            out.append(name)
    return out


def cycles(edges: list[Import]) -> list[list[Import]]:
    """One loop of imports for each group of modules that import each other round a loop."""
    graph: dict[str, list[Import]] = {}
    for e in edges:
        graph.setdefault(e.importer, []).append(e)
        graph.setdefault(e.imported, [])
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[set[str]] = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for e in graph[v]:
            w = e.imported
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.add(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(group)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return [_loop_in(group, graph) for group in groups]


def _loop_in(group: set[str], graph: dict[str, list[Import]]) -> list[Import]:
    """A shortest loop of imports through the first module of ``group``."""
    start = min(group)
    paths: dict[str, list[Import]] = {start: []}
    frontier = [start]
    while frontier:
        nxt = []
        for v in frontier:
            for e in graph[v]:
                if e.imported == start:
                    return [*paths[v], e]
                if e.imported in group and e.imported not in paths:
                    paths[e.imported] = [*paths[v], e]
                    nxt.append(e.imported)
        frontier = nxt
    raise AssertionError(f"no loop through {start}")  # pragma: no cover - a group has one


def describe(loop: list[Import]) -> str:
    chain = " -> ".join([loop[0].importer, *(e.imported for e in loop)])
    return chain + " (" + "; ".join(f"{e.where} imports {e.imported}" for e in loop) + ")"


@dataclass(frozen=True)
class Layer:
    number: int
    name: str
    patterns: tuple[str, ...]


def read_layers(markdown: str) -> list[Layer]:
    """The layer table of the doc's ``## Layers`` section, lowest number first."""
    section = _section(markdown, "Layers")
    layers = []
    for row in re.finditer(r"^\|\s*(\d+)\s*\|\s*([\w-]+)\s*\|(.*)\|\s*$", section, re.M):
        patterns = tuple(re.findall(r"`([^`]+)`", row.group(3)))
        layers.append(Layer(int(row.group(1)), row.group(2), patterns))
    return layers


def _section(markdown: str, title: str) -> str:
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", markdown, re.M | re.S)
    assert match, f"docs/architecture.md has no '## {title}' section"
    return match.group(1)


def layer_of(module: str, layers: list[Layer]) -> Layer | None:
    """The layer whose most specific pattern covers ``module``: an exact name, else the
    longest ``pkg.*`` that holds it."""
    best: tuple[int, Layer] | None = None
    for layer in layers:
        for pattern in layer.patterns:
            if pattern.endswith(".*"):
                pkg = pattern[:-2]
                if module == pkg or module.startswith(pkg + "."):
                    score = len(pkg)
                else:
                    continue
            elif pattern == module:
                score = 10_000  # an exact name beats every package
            else:
                continue
            if best is None or score > best[0]:
                best = (score, layer)
    return best[1] if best else None


def upward(edges: list[Import], layers: list[Layer]) -> list[str]:
    """Each import of a module from a higher layer than the importer's."""
    problems = []
    for e in edges:
        a, b = layer_of(e.importer, layers), layer_of(e.imported, layers)
        if a is not None and b is not None and b.number > a.number:
            problems.append(f"{e.where}: {e.importer} (layer {a.number} {a.name}) imports "
                            f"{e.imported} (layer {b.number} {b.name}, above it)")
    return problems


# -- the checker, on a package made for it ----------------------------------------------------

def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))


def test_the_checker_finds_deferred_and_type_checking_cycles(tmp_path: Path) -> None:
    _write(tmp_path, {
        "pkg/__init__.py": "from . import a\n",
        "pkg/a.py": """\
            from typing import TYPE_CHECKING
            if TYPE_CHECKING:
                from .b import B
            """,
        "pkg/b.py": """\
            def load():
                from pkg.sub import c
            """,
        "pkg/sub/__init__.py": "",
        "pkg/sub/c.py": "from ..a import thing\n",
        "pkg/d.py": "import pkg.a\n",
    })
    edges = imports_of(tmp_path, "pkg")
    assert {(e.importer, e.imported) for e in edges} == {
        ("pkg", "pkg.a"), ("pkg.a", "pkg.b"), ("pkg.b", "pkg.sub.c"), ("pkg.sub.c", "pkg.a"),
        ("pkg.d", "pkg.a")}
    found = cycles(edges)
    assert len(found) == 1
    text = describe(found[0])
    assert text.startswith("pkg.a -> pkg.b -> pkg.sub.c -> pkg.a (")
    assert "pkg/b.py:2 imports pkg.sub.c" in text


def test_the_checker_finds_an_import_against_the_layers(tmp_path: Path) -> None:
    _write(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/low.py": "def late():\n    import pkg.high.x\n",
        "pkg/high/__init__.py": "from ..low import late\n",
        "pkg/high/x.py": "",
        "pkg/high/_vocab.py": "",
        "pkg/mid.py": "from pkg.high._vocab import WORD\n",
    })
    layers = read_layers(textwrap.dedent("""\
        ## Layers

        | # | layer | modules |
        |---|-------|---------|
        | 1 | low | `pkg.low`, `pkg.high._vocab` |
        | 2 | mid | `pkg.mid` |
        | 3 | high | `pkg.high.*`, `pkg` |
        """))
    assert [(layer.number, layer.name) for layer in layers] == [(1, "low"), (2, "mid"),
                                                                (3, "high")]
    assert layer_of("pkg.high._vocab", layers) == layers[0]  # the exact name wins
    assert layer_of("pkg.high", layers) == layers[2]
    edges = imports_of(tmp_path, "pkg")
    assert upward(edges, layers) == [
        "pkg/low.py:2: pkg.low (layer 1 low) imports pkg.high.x (layer 3 high, above it)"]
    assert cycles(edges) == []


# -- the source tree ---------------------------------------------------------------------------

def _doc() -> str:
    return DOC.read_text(encoding="utf-8")


def test_no_module_imports_itself_round_a_loop() -> None:
    found = [describe(loop) for loop in cycles(imports_of(SRC, "contextree"))]
    assert not found, "import cycles:\n" + "\n".join(found)


def test_every_module_has_a_layer_and_every_pattern_a_module() -> None:
    layers = read_layers(_doc())
    assert [layer.number for layer in layers] == list(range(1, len(layers) + 1))
    mods = modules_under(SRC, "contextree")
    unplaced = sorted(m for m in mods if layer_of(m, layers) is None)
    assert not unplaced, ("modules in no layer of docs/architecture.md (add them to its "
                          f"table): {', '.join(unplaced)}")
    stale = [f"{layer.name}: {p}" for layer in layers for p in layer.patterns
             if (p[:-2] if p.endswith(".*") else p) not in mods]
    assert not stale, f"layer patterns naming no module: {', '.join(stale)}"


def test_no_import_goes_against_the_layer_order() -> None:
    problems = upward(imports_of(SRC, "contextree"), read_layers(_doc()))
    assert not problems, "imports against the layers:\n" + "\n".join(problems)


def test_compaction_takes_the_tool_kinds_not_the_tools() -> None:
    edges = imports_of(SRC, "contextree")
    into_tools = sorted(f"{e.where} imports {e.imported}" for e in edges
                        if e.importer.startswith("contextree.compaction")
                        and e.imported.startswith("contextree.tools")
                        and e.imported != "contextree.tools._kinds")
    assert not into_tools, into_tools


# -- the doc names every module, and only modules --------------------------------------------

def _listed_modules(markdown: str) -> list[str]:
    """The paths of the doc's one-line-per-module list (``- `storage/_jsonl.py`: ...``)."""
    return re.findall(r"^- `([\w/]+\.py)`:", _section(markdown, "Modules"), re.M)


def test_the_doc_lists_every_module_once() -> None:
    listed = _listed_modules(_doc())
    actual = {p.relative_to(PACKAGE).as_posix() for p in PACKAGE.rglob("*.py")}
    missing = sorted(actual - set(listed))
    extra = sorted(set(listed) - actual)
    twice = sorted({p for p in listed if listed.count(p) > 1})
    assert not (missing or extra or twice), (
        "docs/architecture.md, '## Modules': "
        f"missing (add a line each): {missing}; "
        f"not in src/contextree (remove or rename): {extra}; "
        f"listed twice: {twice}")


def test_every_path_and_name_the_doc_gives_exists() -> None:
    text = re.sub(r"^```.*?^```", "", _doc(), flags=re.M | re.S)  # code blocks run elsewhere
    code = " ".join(re.findall(r"`([^`\n]+)`", text))
    paths = set(re.findall(r"[\w./]+\.py\b", code))
    missing_paths = sorted(p for p in paths
                           if not ((PACKAGE / p).is_file() or (ROOT / p).is_file()))
    names = set(re.findall(r"\bcontextree(?:\.\w+)+", code))
    missing_names = sorted(n for n in names if not _resolves(n))
    assert not (missing_paths or missing_names), (
        f"docs/architecture.md names what does not exist: files {missing_paths}, "
        f"Python names {missing_names}")


def _resolves(dotted: str) -> bool:
    """Whether ``dotted`` is a module, or a name inside one."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj: object = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


@pytest.mark.parametrize("section", ["Layers", "How a model's reply gets into the session",
                                     "Modules", "The seams", "Where things plug in"])
def test_the_doc_has_its_sections(section: str) -> None:
    assert _section(_doc(), section).strip()
