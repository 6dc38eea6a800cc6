"""``glob`` on hostile brace patterns: the time to answer (expand or refuse).

    python bench/bench_glob_braces.py [--braces 8000]

Before the linear parser, 8,000 nested braces took 13-15 s in ``expand_braces`` alone (each
``{`` rescanned the rest of the pattern). Now each pattern is parsed once.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from contextree.tools import ToolContext, Workspace, glob


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--braces", type=int, default=8000)
    n = parser.parse_args().braces
    patterns = {
        "nested, no commas (literal)": "{" * n + "}" * n,
        "nested, comma innermost": "{" * n + "a,b" + "}" * n,
        "nested alternatives (refused)": "{a," * n + "b" + "}" * n,
        "2**40 alternatives (refused)": "{a,b}" * 40,
    }
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "a.py").write_text("x = 1\n")
        ctx = ToolContext(workspace=Workspace(tmp))
        for name, pattern in patterns.items():
            started = time.perf_counter()
            result = glob.run({"pattern": pattern}, context=ctx)
            took = time.perf_counter() - started
            print(f"{name:32} {len(pattern):>7} chars  {took * 1000:8.1f} ms  "
                  f"{'error' if result.is_error else 'ok'}: {result.content[:70]!r}")


if __name__ == "__main__":
    main()
