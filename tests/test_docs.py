"""Every ```python block in docs/ runs, in order per page, in a fresh directory."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from helpers import DOCS

BLOCK = re.compile(r"```python\n(.*?)```", re.DOTALL)


@pytest.mark.parametrize("page", sorted([*DOCS.glob("*.md"), *DOCS.glob("integrations/*.md")]),
                         ids=lambda p: p.name)
def test_doc_examples_run(page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CONTEXTREE_HOME", str(tmp_path / "home"))
    namespace: dict[str, object] = {"__name__": f"docs_{page.stem}"}
    for n, block in enumerate(BLOCK.findall(page.read_text()), start=1):
        code = compile(block, f"{page.name}[block {n}]", "exec")
        exec(code, namespace)
    assert os.getcwd() == str(tmp_path)
