"""``DefaultCompactionPipeline``: the compaction ladder before every model call."""

from __future__ import annotations

from typing import ClassVar

from .._messages import Message
from ..compaction import (
    CompactionLadder,
    CompactionPolicy,
    CompactionResult,
    default_ladder,
    plan_compaction,
)
from ..errors import InvalidArgument
from ..models._base import Model
from ..tokens import EstimateCounter, TokenCounter, count_context
from ._builder import App
from ._env import Env
from ._events import CompactedPayload, CompactionFailedPayload, CompactionStartPayload, Event


class DefaultCompactionPipeline:
    """Compact the conversation once it fills ``compact_at`` of ``window``.

    It belongs inside ``ToolResultLoop`` so it runs before every model call. With a
    ``SessionTree`` the compaction is appended to the session (history stays on disk);
    otherwise the same planner compacts the conversation in memory and ``SessionLog``
    rewrites its file. When the ladder cannot reach the target it is not retried until the
    context has grown by another tenth of the window, so it never burns calls in a loop.
    """

    renamed_options: ClassVar[dict[str, str]] = {"summariser": "summarizer",
                                                 "compactor": "ladder"}
    """The spellings of Brute's seed, and the option each is in contextree."""

    def __init__(self, app: App, /, window: int, *, summarizer: Model | None = None,
                 ladder: CompactionLadder | None = None, compact_at: float = 0.7,
                 compact_to: float = 0.4, counter: TokenCounter | None = None) -> None:
        self.app = app
        try:
            self.policy = CompactionPolicy(window, compact_at, compact_to)
        except InvalidArgument as e:
            raise InvalidArgument(f"DefaultCompactionPipeline: {e}") from None
        self.ladder = ladder or default_ladder(summarizer)
        self.counter = counter or EstimateCounter()
        self._failed_at: int | None = None

    def __call__(self, env: Env) -> Env:
        tokens = count_context(env.messages, self.counter, fresh_from=env.fresh_from)
        if tokens >= self.policy.trigger and not self._recently_failed(tokens):
            self.compact(env, tokens)
        return self.app(env)

    def _recently_failed(self, tokens: int) -> bool:
        return self._failed_at is not None and tokens < self._failed_at + self.policy.window // 10

    def compact(self, env: Env, tokens: int | None = None) -> None:
        """Compact ``env``'s conversation now and report it (``tokens``: its count, if known)."""
        if tokens is None:
            tokens = count_context(env.messages, self.counter, fresh_from=env.fresh_from)
        session = env.session
        env.emit(CompactionStartPayload(event=Event.COMPACTION_START,
                                        leaf_id=session.leaf_id if session is not None else None,
                                        window=self.policy.window, tokens=tokens))
        prompts = [m for m in env.messages if _is_prompt(m)]
        # The tools the model was offered say what they do (their declared kinds).
        ladder = self.ladder.with_tools(env.tools)
        result: CompactionResult
        if session is not None:
            result = session.compact(self.policy.window, compact_at=self.policy.compact_at,
                                     compact_to=self.policy.compact_to,
                                     ladder=ladder, counter=self.counter)
        else:
            result = self._plan(env, ladder)
        # The summarizer's calls are the turn's too, whether or not a compaction came of
        # them (a summarizer that records none: the entry's usage).
        entry_usage = result.entry.usage if result.entry is not None else None
        for used in ([c.usage for c in result.calls] if result.calls
                     else [entry_usage] if entry_usage is not None else []):
            env.count(used, used.cost if used.cost is not None
                      else None if used.context_tokens + used.output else 0.0)
        for payload in compaction_events(result):
            env.emit(payload)
        if result.entry_id is None:
            self._failed_at = result.tokens_before
            return
        self._failed_at = None if result.reached_target else result.tokens_after
        env.replace([*prompts, *result.context().messages])

    def _plan(self, env: Env, ladder: CompactionLadder) -> CompactionResult:
        """Plan on the conversation itself (no session in the stack); the system prompt is
        left out and put back in front afterwards, as with a session."""
        conversation: list[Message] = []
        fresh_from = 0
        for i, m in enumerate(env.messages):
            if _is_prompt(m):
                continue
            if i < env.fresh_from:
                fresh_from += 1
            conversation.append(m)
        result = plan_compaction(conversation, self.policy, ladder, self.counter,
                                 fresh_from=fresh_from)
        if result.entry is not None:
            result.entry_id = result.entry.id  # applied: it replaces the conversation
        return result


def _is_prompt(m: Message) -> bool:
    """A system prompt (re-added every turn), not a system message contextree made."""
    return m.role == "system" and m.kind is None


def compaction_events(result: CompactionResult
                      ) -> list[CompactedPayload | CompactionFailedPayload]:
    """The events that report a compaction run, in order: ``compaction_failed`` for each
    stage that raised, then ``compacted`` when the entry was applied (``entry_id`` set), or
    ``compaction_failed`` for the whole ladder when there is no entry (a dry run's plan ends
    with neither). One payload class an event (``PAYLOADS``)."""
    events: list[CompactedPayload | CompactionFailedPayload] = [
        CompactionFailedPayload(event=Event.COMPACTION_FAILED, reason=f"stage {s.name} {s.note}",
                                tokens=s.tokens_before, stage=s.name, error=s.error)
        for s in result.failures
    ]
    if result.entry_id is not None:
        events.append(CompactedPayload.of(result))
    elif result.entry is None:
        events.append(CompactionFailedPayload(event=Event.COMPACTION_FAILED,
                                              reason=result.reason,
                                              tokens=result.tokens_before, stage=None,
                                              error=None))
    return events
