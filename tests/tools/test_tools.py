"""The @tool decorator, Tool validation and running, ToolContext and workspace confinement."""

from __future__ import annotations

import asyncio
import json
import os
import threading
from pathlib import Path
from typing import Annotated, Any, Literal

import pytest

from contextree import OverflowStore
from contextree.errors import ToolError
from contextree.tools import (
    ALL,
    Tool,
    ToolContext,
    ToolResult,
    Workspace,
    make_tools,
    parse_docstring,
    schema_for,
    tool,
)


@pytest.fixture(autouse=True)
def _private_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONTEXTREE_HOME", str(tmp_path / "home"))


# -- schema generation ---------------------------------------------------------------------
def sample(
    name: str,
    count: int = 3,
    ratio: float = 0.5,
    flag: bool = False,
    tags: list[str] | None = None,
    options: dict[str, Any] | None = None,
    mode: Literal["fast", "slow"] = "fast",
    level: Literal[1, 2, 3] = 1,
    note: str | None = None,
    weights: dict[str, int] | None = None,
    context: ToolContext | None = None,
) -> str:
    """Do a sample thing
    over two lines.

    More detail that is not part of the description.

    Args:
        name: The name to use.
        count (int): How many times,
            continued on a second line.
        mode: Which speed.

    Returns:
        Something.
    """
    return f"{name}:{count}:{mode}"


def test_schema_from_type_hints_and_defaults() -> None:
    t = tool(sample)
    props = t.parameters["properties"]
    assert t.parameters["type"] == "object"
    assert t.parameters["required"] == ["name"]
    assert t.parameters["additionalProperties"] is False
    assert props["name"] == {"type": "string", "description": "The name to use."}
    assert props["count"]["type"] == "integer" and props["count"]["default"] == 3
    assert props["ratio"] == {"type": "number", "default": 0.5}
    assert props["flag"] == {"type": "boolean", "default": False}
    assert props["tags"] == {"type": "array", "items": {"type": "string"}, "default": None}
    assert props["options"] == {"type": "object", "default": None}
    assert props["weights"]["additionalProperties"] == {"type": "integer"}
    assert props["mode"]["enum"] == ["fast", "slow"] and props["mode"]["type"] == "string"
    assert props["level"] == {"type": "integer", "enum": [1, 2, 3], "default": 1}
    assert props["note"] == {"type": "string", "default": None}
    assert "context" not in props
    assert t.context_param == "context"


def test_docstring_gives_descriptions() -> None:
    t = tool(sample)
    assert t.description == "Do a sample thing over two lines."
    props = t.parameters["properties"]
    assert props["count"]["description"] == "How many times, continued on a second line."
    assert props["mode"]["description"] == "Which speed."
    assert "description" not in props["flag"]


def test_parse_docstring_variants() -> None:
    summary, args = parse_docstring(
        """Summary.

        Arguments:
            a: first
            *b: second

            c (list[int], optional): third
        Raises:
            ValueError: never.
        """
    )
    assert summary == "Summary."
    assert args == {"a": "first", "b": "second", "c": "third"}
    assert parse_docstring("") == ("", {})
    assert parse_docstring("Args:\n    x: y") == ("", {"x": "y"})


def test_optional_without_default_is_not_required() -> None:
    @tool
    def f(a: int | None, b: Annotated[str, "the b value"] = "x") -> str:
        return f"{a}{b}"

    assert f.parameters["required"] == []
    assert f.parameters["properties"]["a"] == {"type": "integer", "default": None}
    assert f.parameters["properties"]["b"]["description"] == "the b value"
    assert f.run({}).content == "Nonex"


def test_unions_become_any_of() -> None:
    assert schema_for(int | str) == {"anyOf": [{"type": "integer"}, {"type": "string"}]}
    assert schema_for(list[int | None]) == {
        "type": "array",
        "items": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
    }
    assert schema_for(Any) == {}
    assert schema_for(list) == {"type": "array"}


def test_decorator_with_options() -> None:
    @tool(name="renamed", truncates_itself=True, description="Custom.")
    def f(x: int) -> str:
        """Ignored."""
        return str(x)

    assert isinstance(f, Tool)
    assert f.spec() == {
        "name": "renamed",
        "description": "Custom.",
        "parameters": {
            "type": "object",
            "properties": {"x": {"type": "integer"}},
            "required": ["x"],
            "additionalProperties": False,
        },
    }
    assert f.truncates_itself is True
    assert f(4) == "4"  # the Tool is still callable directly


def test_unsupported_signatures_are_refused() -> None:
    with pytest.raises(TypeError, match="unsupported parameter type"):

        @tool
        def f(x: object) -> str:
            return ""

    with pytest.raises(TypeError, match="keyword"):

        @tool
        def g(*xs: int) -> str:
            return ""


def test_specs_are_json_serialisable() -> None:
    for t in ALL:
        spec = json.loads(json.dumps(t.spec()))
        assert spec["name"] == t.name and spec["description"]
        assert "context" not in spec["parameters"]["properties"]
    assert [t.name for t in ALL] == ["read", "write", "edit", "shell", "grep", "glob"]
    read = ALL[0]
    assert list(read.parameters["properties"]) == ["path", "offset", "limit", "char_offset"]


# -- validation ------------------------------------------------------------------------------
@pytest.fixture
def sample_tool() -> Tool:
    return tool(sample)


def test_validate_applies_defaults(sample_tool: Tool) -> None:
    args = sample_tool.validate({"name": "n"})
    assert args["count"] == 3 and args["mode"] == "fast" and args["note"] is None


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({}, "missing required parameter 'name'"),
        ({"name": None}, "missing required parameter 'name'"),
        ({"name": "n", "bogus": 1}, "unknown parameter 'bogus'"),
        ({"name": 5}, "parameter 'name' must be a string, got integer 5"),
        ({"name": "n", "count": "3"}, "parameter 'count' must be an integer, got string \"3\""),
        ({"name": "n", "count": True}, "parameter 'count' must be an integer"),
        ({"name": "n", "count": 2.5}, "parameter 'count' must be an integer, got number 2.5"),
        ({"name": "n", "flag": "yes"}, "parameter 'flag' must be true or false"),
        ({"name": "n", "tags": "a"}, "parameter 'tags' must be a list of a string"),
        ({"name": "n", "tags": ["a", 1]}, "parameter 'tags[1]' must be a string"),
        ({"name": "n", "mode": "medium"}, 'parameter \'mode\' must be one of "fast", "slow"'),
        ({"name": "n", "level": True}, "parameter 'level' must be one of 1, 2, 3"),
        ({"name": "n", "weights": {"a": "x"}}, "parameter 'weights.a' must be an integer"),
        ({"name": "n", "options": []}, "parameter 'options' must be an object"),
    ],
)
def test_validation_errors(sample_tool: Tool, arguments: dict[str, Any], message: str) -> None:
    with pytest.raises(ToolError) as info:
        sample_tool.validate(arguments)
    text = str(info.value)
    assert message in text
    assert text.startswith("invalid arguments for tool 'sample'")
    assert "Call it as sample(name: string, count: integer = 3" in text


def test_validation_rejects_non_objects(sample_tool: Tool) -> None:
    with pytest.raises(ToolError, match="must be a JSON object, got list"):
        sample_tool.validate(["n"])


def test_validation_coerces_numbers_and_nulls(sample_tool: Tool) -> None:
    args = sample_tool.validate({"name": "n", "count": 7.0, "ratio": 2, "mode": None})
    assert args["count"] == 7 and isinstance(args["count"], int)
    assert args["ratio"] == 2.0 and isinstance(args["ratio"], float)
    assert args["mode"] == "fast"  # null means "use the default"


def test_manual_tool_validates_against_its_schema() -> None:
    t = Tool(
        name="m",
        description="manual",
        parameters={
            "type": "object",
            "properties": {"q": {"type": ["string", "null"]}, "n": {"type": "integer"}},
            "required": ["q"],
        },
        fn=lambda **kw: json.dumps(kw, sort_keys=True),
    )
    assert t.validate({"q": None, "extra": 1}) == {"q": None, "extra": 1}
    assert t.run({"q": "x", "n": 2}).content == '{"n": 2, "q": "x"}'
    assert t.run({"q": "x", "n": "2"}).is_error


# -- running -------------------------------------------------------------------------------
def test_run_converts_return_values() -> None:
    @tool
    def text() -> str:
        return "hello"

    @tool
    def result() -> ToolResult:
        return ToolResult("r", is_error=True, meta={"k": 1})

    @tool
    def nothing() -> None:
        return None

    @tool
    def data() -> dict[str, int]:
        return {"a": 1}

    assert text.run() == ToolResult("hello")
    assert result.run({}) == ToolResult("r", is_error=True, meta={"k": 1})
    assert nothing.run().content == ""
    assert data.run().content == '{"a": 1}'


def test_a_tool_that_returns_bytes_gives_the_model_their_text() -> None:
    """``return subprocess.check_output(...)`` is the careless way to write a tool: the
    model reads the output, not ``"b'...\\n'"``; undecodable bytes become U+FFFD."""
    @tool
    def output() -> bytes:
        return b"line one\nline two\n"

    @tool
    def garbled() -> bytes:
        return bytearray(b"caf\xe9 ok")

    assert output.run().content == "line one\nline two\n"
    assert garbled.run().content == "caf\ufffd ok"


def test_a_tool_that_returns_a_generator_or_a_set_gives_the_model_its_items() -> None:
    """``return (p.name for p in ...)`` or ``map(...)`` or a set: the model reads the items,
    not ``"<generator object ...>"``."""
    @tool
    def names() -> Any:
        return (n for n in ["a.py", "b.py"])

    @tool
    def mapped() -> Any:
        return map(str.upper, ["x", "y"])

    @tool
    def unique() -> Any:
        return {"only"}

    assert names.run().content == '["a.py", "b.py"]'
    assert mapped.run().content == '["X", "Y"]'
    assert unique.run().content == '["only"]'


def test_lone_surrogates_in_a_result_become_the_replacement_character() -> None:
    @tool
    def name() -> str:
        return "a\udcffb"  # os.listdir of a name that is not UTF-8

    assert name.run().content == "a\ufffdb"


def test_tool_errors_become_error_results_and_bugs_propagate() -> None:
    @tool
    def refuse() -> str:
        raise ToolError("no, try again with x")

    @tool
    def crash() -> str:
        raise ZeroDivisionError

    assert refuse.run() == ToolResult("no, try again with x", is_error=True)
    with pytest.raises(ZeroDivisionError):
        crash.run()


def test_arun_runs_sync_functions_in_a_thread() -> None:
    seen: list[int] = []

    @tool
    def where() -> str:
        seen.append(threading.get_ident())
        return "ok"

    result = asyncio.run(where.arun({}))
    assert result.content == "ok"
    assert seen[0] != threading.get_ident()


def test_async_functions_run_from_sync_and_async_code() -> None:
    @tool
    async def later(x: int) -> str:
        await asyncio.sleep(0)
        return f"got {x}"

    assert later.run({"x": 1}).content == "got 1"
    assert asyncio.run(later.arun({"x": 2})).content == "got 2"
    assert asyncio.run(later.arun({"x": "2"})).is_error

    async def inside_a_loop() -> str:
        return later.run({"x": 3}).content  # a sync call from within a running loop

    assert asyncio.run(inside_a_loop()) == "got 3"


def test_context_is_injected(tmp_path: Path) -> None:
    @tool
    def where(context: ToolContext) -> str:
        return str(context.base)

    assert where.parameters["properties"] == {}
    assert where.run().content == os.path.realpath(os.getcwd())
    ctx = ToolContext(workspace=Workspace(tmp_path))
    assert where.run(context=ctx).content == str(tmp_path.resolve())
    bound = where.with_context(ToolContext(cwd=tmp_path / "sub"))
    assert bound.run().content == str((tmp_path / "sub").resolve())
    assert bound.run(context=ctx).content == str(tmp_path.resolve())  # explicit wins


def test_make_tools_binds_one_context(tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_text("hi\n")
    tools = {t.name: t for t in make_tools(tmp_path, session_id="s1")}
    assert set(tools) == {"read", "write", "edit", "shell", "grep", "glob"}
    context = tools["read"].context
    assert context is not None and context.workspace is not None
    assert context.workspace.root == tmp_path.resolve() and context.session_id == "s1"
    assert tools["read"].run({"path": "f.txt"}).content == "     1\thi"
    assert tools["read"].run({"path": "/etc/hostname"}).is_error
    assert ALL[0].context is None  # the module-level tools are untouched


# -- workspace confinement -----------------------------------------------------------------
@pytest.fixture
def root(tmp_path: Path) -> Path:
    r = tmp_path / "root"
    (r / "sub").mkdir(parents=True)
    (r / "sub" / "a.txt").write_text("a")
    (tmp_path / "outside.txt").write_text("secret")
    return r


def test_relative_and_absolute_paths_inside_resolve(root: Path) -> None:
    ws = Workspace(root)
    real_root = root.resolve()
    assert ws.resolve("sub/a.txt") == real_root / "sub" / "a.txt"
    assert ws.resolve(str(root / "sub" / "a.txt")) == real_root / "sub" / "a.txt"
    assert ws.resolve("sub/../sub/new.txt") == real_root / "sub" / "new.txt"
    assert ws.resolve(".") == real_root
    assert ws.resolve("a.txt", cwd=root / "sub") == real_root / "sub" / "a.txt"


@pytest.mark.parametrize("path", ["../outside.txt", "sub/../../outside.txt", "/etc/passwd"])
def test_paths_outside_are_refused(root: Path, path: str) -> None:
    with pytest.raises(ToolError) as info:
        Workspace(root).resolve(path)
    message = str(info.value)
    assert "outside the workspace root" in message
    assert f"use a path under {root.resolve()}" in message


def test_symlink_escape_is_refused(root: Path, tmp_path: Path) -> None:
    (root / "link").symlink_to(tmp_path / "outside.txt")
    (root / "dirlink").symlink_to(tmp_path)
    (root / "inner").symlink_to(root / "sub")
    ws = Workspace(root)
    with pytest.raises(ToolError, match="a symlink leads to"):
        ws.resolve("link")
    with pytest.raises(ToolError, match="outside the workspace root"):
        ws.resolve("dirlink/outside.txt")
    assert ws.resolve("inner/a.txt") == root.resolve() / "sub" / "a.txt"


def test_extra_readable_directories_are_read_only(root: Path, tmp_path: Path) -> None:
    spill = tmp_path / "spill"
    spill.mkdir()
    ws = Workspace(root, extra_readable=[spill])
    assert ws.resolve(str(spill / "x.txt")) == spill.resolve() / "x.txt"
    with pytest.raises(ToolError):
        ws.resolve(str(spill / "x.txt"), write=True)
    assert ws.readable(spill / "x.txt") and not ws.contains(spill / "x.txt")


def test_nul_bytes_in_paths_are_refused(root: Path) -> None:
    with pytest.raises(ToolError, match="invalid path"):
        Workspace(root).resolve("a\0b")


def test_context_without_workspace_is_unconfined(tmp_path: Path) -> None:
    ctx = ToolContext(cwd=tmp_path)
    assert ctx.resolve("x") == tmp_path.resolve() / "x"
    assert ctx.resolve("../y") == tmp_path.resolve().parent / "y"
    assert ctx.display(tmp_path.resolve() / "d" / "x") == "d/x"
    assert ctx.display(tmp_path.resolve()) == "."
    assert ctx.display(Path("/elsewhere")) == "/elsewhere"


def test_context_makes_the_overflow_store_readable(root: Path, tmp_path: Path) -> None:
    store = OverflowStore(tmp_path / "store")
    saved = store.save("spilled\n")
    ctx = ToolContext(workspace=Workspace(root), store=store)
    assert ctx.resolve(str(saved)) == saved.resolve()
    with pytest.raises(ToolError):
        ctx.resolve(str(saved), write=True)
    default = OverflowStore.default().save("default store\n")
    assert ToolContext(workspace=Workspace(root)).resolve(str(default)) == default.resolve()


def test_display_paths_resolve_back_from_a_sub_cwd(root: Path) -> None:
    ctx = ToolContext(workspace=Workspace(root), cwd=root / "sub")
    target = ctx.resolve("a.txt")
    assert ctx.display(target) == "a.txt"
    assert ctx.resolve(ctx.display(target)) == target
    other = ctx.resolve("../b.txt")
    assert ctx.display(other) == str(root.resolve() / "b.txt")
