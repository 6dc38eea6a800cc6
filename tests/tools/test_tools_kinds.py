"""Tool kinds (what a tool does, instead of lists of names), other agents' tool names, and
arguments checked by msgspec in the model's words."""

from __future__ import annotations

import dataclasses
import enum
from pathlib import Path
from typing import Annotated

import msgspec
import pytest

from contextree.errors import ToolError
from contextree.markers import truncation_of
from contextree.tools import ALL, ToolContext, ToolKind, kind_of_tool_name, read, schema_for, tool


def test_built_in_tools_declare_their_kind() -> None:
    kinds = {t.name: (t.kind, t.truncate_from) for t in ALL}
    assert kinds == {
        "read": (ToolKind.READ, "head"),
        "write": (ToolKind.WRITE, "head"),
        "edit": (ToolKind.EDIT, "head"),
        "shell": (ToolKind.SHELL, "tail"),
        "grep": (ToolKind.SEARCH, "head"),
        "glob": (ToolKind.SEARCH, "head"),
    }


@pytest.mark.parametrize(("name", "kind"), [
    # Claude Code
    ("Bash", ToolKind.SHELL), ("Read", ToolKind.READ), ("Write", ToolKind.WRITE),
    ("Edit", ToolKind.EDIT), ("MultiEdit", ToolKind.EDIT), ("Grep", ToolKind.SEARCH),
    ("Glob", ToolKind.SEARCH),
    # Codex
    ("shell", ToolKind.SHELL), ("exec_command", ToolKind.SHELL), ("local_shell", ToolKind.SHELL),
    ("apply_patch", ToolKind.EDIT),
    # pi
    ("bash", ToolKind.SHELL), ("read", ToolKind.READ), ("write", ToolKind.WRITE),
    ("edit", ToolKind.EDIT), ("find", ToolKind.SEARCH),
    # Brute
    ("fs_read", ToolKind.READ), ("fs_write", ToolKind.WRITE), ("patch", ToolKind.EDIT),
    ("fs_patch", ToolKind.EDIT), ("fs_search", ToolKind.SEARCH),
    # case and spacing do not matter; anything else is "other"
    ("BASH", ToolKind.SHELL), (" Read ", ToolKind.READ), ("TodoWrite", ToolKind.OTHER),
    ("", ToolKind.OTHER),
])
def test_other_agents_tool_names_map_to_kinds(name: str, kind: ToolKind) -> None:
    assert kind_of_tool_name(name) is kind


def test_decorator_takes_kind_and_truncation_end() -> None:
    @tool(kind=ToolKind.SEARCH)
    def find(pattern: str) -> str:
        return pattern

    @tool(kind=ToolKind.SHELL, truncate_from="head")
    def run(command: str) -> str:
        return command

    @tool
    def plain() -> str:
        return ""

    assert (find.kind, find.truncate_from) == (ToolKind.SEARCH, "head")
    assert (run.kind, run.truncate_from) == (ToolKind.SHELL, "head")
    assert (plain.kind, plain.truncate_from) == (ToolKind.OTHER, "head")
    assert find.with_context(ToolContext()).kind is ToolKind.SEARCH


def test_read_records_its_truncation_as_a_record(tmp_path: Path) -> None:
    root = tmp_path
    (root / "a.txt").write_text("".join(f"l{i}\n" for i in range(10)))
    r = read.run({"path": "a.txt", "limit": 3}, context=ToolContext(cwd=root))
    record = truncation_of(r.meta)
    assert record is not None
    assert (record.by, record.shown_lines, record.total_lines, record.saved_path) == (
        "read", 3, 10, None)


# -- msgspec under the validator -------------------------------------------------------------
class Speed(enum.Enum):
    FAST = "fast"
    SLOW = "slow"


@dataclasses.dataclass
class Point:
    x: int
    y: int = 0


def test_structured_parameters_are_converted_to_their_types() -> None:
    seen: list[object] = []

    @tool
    def place(point: Point, speed: Speed = Speed.FAST,
              count: Annotated[int, msgspec.Meta(ge=1)] = 1) -> str:
        """Place a point.

        Args:
            point: Where.
            speed: How fast.
            count: How many.
        """
        seen.append((point, speed, count))
        return "ok"

    props = place.parameters["properties"]
    assert props["point"] == {"$ref": "#/$defs/Point", "description": "Where."}
    assert place.parameters["$defs"]["Point"]["required"] == ["x"]
    assert props["speed"] == {"$ref": "#/$defs/Speed", "description": "How fast.",
                              "default": "fast"}
    assert place.parameters["$defs"]["Speed"]["enum"] == ["fast", "slow"]
    assert place.parameters["$defs"]["Speed"]["type"] == "string"
    assert props["count"]["minimum"] == 1
    assert place.run({"point": {"x": 2.0}, "speed": "slow"}).content == "ok"
    assert seen == [(Point(2, 0), Speed.SLOW, 1)]

    with pytest.raises(ToolError) as info:
        place.validate({"point": {"x": "2"}})
    assert "parameter 'point.x' must be an integer, got string \"2\"" in str(info.value)
    with pytest.raises(ToolError, match="parameter 'point': object missing required field `x`"):
        place.validate({"point": {}})
    with pytest.raises(ToolError, match="parameter 'count': expected `int` >= 1, got integer 0"):
        place.validate({"point": {"x": 1}, "count": 0})


def test_nested_dict_entries_are_named() -> None:
    @tool
    def f(table: dict[str, dict[str, int]]) -> str:
        return ""

    with pytest.raises(ToolError, match=r"parameter 'table\.b\.y' must be an integer"):
        f.validate({"table": {"a": {"x": 1}, "b": {"x": 2, "y": "no"}}})


def test_fixed_length_tuples_and_unknown_types_are_refused() -> None:
    with pytest.raises(TypeError, match="fixed-length tuples are not supported"):
        schema_for(tuple[int, str])
    with pytest.raises(TypeError, match="unsupported parameter type"):
        schema_for(object)
    assert schema_for(tuple[int, ...]) == {"type": "array", "items": {"type": "integer"}}
