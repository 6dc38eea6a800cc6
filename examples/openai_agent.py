"""A coding agent on any OpenAI-compatible endpoint (OpenAI, vLLM, Ollama, llama.cpp, OpenRouter).

    export OPENAI_BASE_URL=http://localhost:11434/v1   # optional; default: OpenAI
    export OPENAI_API_KEY=sk-...                       # any value for local servers
    export CONTEXTREE_MODEL=gpt-4o-mini
    python examples/openai_agent.py "List the Python files and summarise what they do"

The conversation is kept in a session file (``--session``), so running it again continues
where the last run stopped, even after a crash; ``contextree tree FILE`` shows it.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

ENV_HELP = """environment:
  OPENAI_BASE_URL   the endpoint (default: https://api.openai.com/v1)
  OPENAI_API_KEY    the API key (any value for a local server)
  CONTEXTREE_MODEL  the model name (default: gpt-4o-mini)
"""


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Run one turn of a contextree coding agent on an OpenAI-compatible "
                    "endpoint.",
        epilog=ENV_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("prompt", nargs="*", help="what to ask (omit to resume the session)")
    parser.add_argument("--session", type=Path, default=Path("agent-session.jsonl"),
                        help="session file (default: %(default)s)")
    parser.add_argument("--workspace", type=Path, default=Path.cwd(),
                        help="the directory the tools may touch (default: the current one)")
    parser.add_argument("--window", type=int, default=128_000,
                        help="context window in tokens (default: %(default)s)")
    parser.add_argument("--max-iterations", type=int, default=50)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    # Imported here so --help works without the optional openai dependency.
    import contextree as ct
    from contextree.models import OpenAIChat
    from contextree.runtime import (
        DefaultCompactionPipeline,
        DefaultToolPipeline,
        MaxIterations,
        Retry,
        SessionTree,
        SystemPrompt,
        ToolResultLoop,
    )
    from contextree.tools import make_tools

    model = OpenAIChat(os.environ.get("CONTEXTREE_MODEL", "gpt-4o-mini"),
                       base_url=os.environ.get("OPENAI_BASE_URL"),
                       api_key=os.environ.get("OPENAI_API_KEY"))
    workspace = args.workspace.resolve()

    def compacted(env: Any, p: dict[str, Any]) -> None:
        print(f"[compacted] {p['tokens_before']:,} -> {p['tokens_after']:,} tokens: "
              f"{len(p['cleared'])} tool results cleared, {len(p['dropped'])} entries dropped, "
              f"{len(p['summarized'])} summarized (all kept in {args.session})",
              file=sys.stderr)

    def tool_start(env: Any, p: dict[str, Any]) -> None:
        call = p["call"]
        print(f"[tool] {call.name}({call.arguments})", file=sys.stderr)

    agent = (ct.agent()
             .use(SessionTree, path=args.session, cwd=str(workspace))
             .use(SystemPrompt, text=f"You are a careful coding agent working in {workspace}. "
                                     "Use the tools to inspect and change files; be brief.")
             .use(ToolResultLoop)
             .use(MaxIterations, limit=args.max_iterations)
             .use(DefaultCompactionPipeline, window=args.window, summarizer=model)
             .use(Retry)
             .use(DefaultToolPipeline, tools=make_tools(workspace))
             .run(model)
             .on("compacted", compacted)
             .on("tool_start", tool_start))
    try:
        result = agent.start(" ".join(args.prompt) or None)
    except ct.errors.ModelError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(result.text)
    for notice in result.notices:
        print(f"[notice] {notice}", file=sys.stderr)
    u = result.usage
    print(f"[usage] {u.input:,} in, {u.output:,} out, {result.iterations + 1} model calls",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
