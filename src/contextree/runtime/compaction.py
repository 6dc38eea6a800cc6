"""``DefaultCompactionPipeline``: the compaction ladder before every model call."""

from __future__ import annotations

from typing import Any

from ..compaction import CompactionPipeline, CompactionPolicy, default_pipeline, run_compaction
from ..context import SUMMARY_PREFIX
from ..session import Session
from ..tokens import EstimateCounter, TokenCounter, count_context
from .builder import App
from .env import Env
from .events import CompactionFailedPayload, Event, as_payload


class DefaultCompactionPipeline:
    """Compact the conversation once it fills ``compact_at`` of ``window``.

    It belongs inside ``ToolResultLoop`` so it runs before every model call. With a
    ``SessionTree`` the compaction is appended to the session (history stays on disk);
    otherwise the conversation is compacted in memory and ``SessionLog`` rewrites its file.
    When the ladder cannot reach the target it is not retried until the context has grown
    by another tenth of the window, so it never burns calls in a loop.
    """

    def __init__(self, app: App, /, window: int, *, summarizer: Any = None,
                 summariser: Any = None, compactor: CompactionPipeline | None = None,
                 compact_at: float = 0.7, compact_to: float = 0.4,
                 counter: TokenCounter | None = None) -> None:
        self.app = app
        self.policy = CompactionPolicy(window, compact_at, compact_to)
        self.pipeline = compactor or default_pipeline(summarizer or summariser)
        self.counter = counter or EstimateCounter()
        self._failed_at: int | None = None

    def __call__(self, env: Env) -> Env:
        tokens = count_context(env.messages, self.counter, anchor=env.usage_anchor())
        if tokens >= self.policy.trigger and not self._recently_failed(tokens):
            self.compact(env)
        return self.app(env)

    def _recently_failed(self, tokens: int) -> bool:
        return self._failed_at is not None and tokens < self._failed_at + self.policy.window // 10

    def compact(self, env: Env) -> None:
        system = [m for m in env.messages if m.role == "system" and not (m.meta or {}).get("kind")]
        session = env.session if env.session is not None else self._in_memory(env)
        result = run_compaction(session, self.policy, self.pipeline, self.counter,
                                emit=lambda event, payload: env.emit(as_payload(event, payload)))
        if result.entry_id is None:
            self._failed_at = result.tokens_before
            env.emit(CompactionFailedPayload(event=Event.COMPACTION_FAILED, reason=result.reason,
                                             tokens=result.tokens_before, stage=None, error=None))
            return
        self._failed_at = None if result.reached_target else result.tokens_after
        env.replace([*system, *session.build_context().messages])

    @staticmethod
    def _in_memory(env: Env) -> Session:
        """A throwaway session holding the conversation (no SessionTree in the stack); an
        earlier compaction summary becomes a compaction entry again, so summaries are updated
        rather than piled up."""
        session = Session.in_memory()
        for m in env.messages:
            kind = (m.meta or {}).get("kind")
            if m.role == "system" and not kind:
                continue  # the system prompt is put back in front afterwards
            if kind == "compaction_summary":
                text = m.text.removeprefix(SUMMARY_PREFIX)
                session.append_compaction(text, None, int((m.meta or {}).get("tokens_before", 0)))
            else:
                session.append_message(m)
        return session
