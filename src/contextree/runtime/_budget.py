"""``Budget``: stop a turn before a model call that would spend past a limit."""

from __future__ import annotations

from typing import Literal

from .._messages import Usage
from .._pricing import cost_of, table_cost, usd
from .._stats import tally
from ..errors import InvalidArgument
from ..tokens import EstimateCounter, TokenCounter, count_context
from ._builder import App, require_non_negative
from ._env import Env
from ._events import BudgetPayload, Event, StopReason

__all__ = ["Budget"]

Scope = Literal["turn", "session"]


def _tokens(u: Usage) -> int:
    return u.input + u.cache_read + u.cache_write + u.output


class Budget:
    """Keep a turn (``per="turn"``) or the whole session (``per="session"``) within
    ``max_cost`` USD and/or ``max_tokens`` billed tokens (prompt, cache and output).

    Before each model call it adds what was spent to an estimate of the call: the context
    as it will be sent (reported usage plus an estimate of what came after) and
    ``reserve_output`` output tokens, priced by the price table (or, for a model the table
    does not know, at the rate of the calls seen so far). A call that would go past a limit
    is not made: the turn stops with ``stopped == "budget"``, a notice and a ``budget``
    event, and nothing is left half-done (the last tool results are saved; ``start()`` goes
    on from there once the limit allows). A turn refused before the model answered at all
    has no ``reply`` (``text == ""``) and takes its input back: ``SessionTree`` moves the
    leaf back (the message stays in the tree, off the branch), ``SessionLog`` drops it from
    the log; so asking again, in the same words or new ones, asks once. A call's own output can still take the total past
    the limit by one reply; ``reserve_output`` bounds that.

    The price of a model the table does not know is learnt from the first call, when the
    provider reports it; when it cannot be known, a cost budget stops the turn and says so.
    Put it inside ``ToolResultLoop`` and after the compaction pipeline, so it checks every
    call on the context that call sends. ``per="session"`` counts every call the session
    recorded (all branches), so it needs ``SessionTree`` (else: the loaded history).
    """

    def __init__(self, app: App, /, max_cost: float | None = None,
                 max_tokens: int | None = None, per: Scope = "turn", *,
                 reserve_output: int = 0, counter: TokenCounter | None = None) -> None:
        if max_cost is None and max_tokens is None:
            raise InvalidArgument("Budget: give max_cost (USD) or max_tokens, or both")
        if per not in ("turn", "session"):
            raise InvalidArgument(f"Budget: per must be 'turn' or 'session', got {per!r}")
        require_non_negative("Budget", max_cost=max_cost, max_tokens=max_tokens,
                             reserve_output=reserve_output)
        self.app = app
        self.max_cost = max_cost
        self.max_tokens = max_tokens
        self.per = per
        self.reserve_output = reserve_output
        self.counter = counter or EstimateCounter()
        self._before: tuple[Usage, int] | None = None  # the session's spending before the turn

    def __call__(self, env: Env) -> Env:
        spent, unpriced = self._spent(env)
        context = count_context(env.messages, self.counter, fresh_from=env.fresh_from)
        next_tokens = context + self.reserve_output
        if self.max_tokens is not None and _tokens(spent) + next_tokens > self.max_tokens:
            total = _tokens(spent) + next_tokens
            return self._stop(env, "tokens", self.max_tokens, _tokens(spent), next_tokens,
                              f"{_tokens(spent):,} tokens spent and about {next_tokens:,} "
                              f"for the next call would make about {total:,}, past "
                              f"max_tokens={self.max_tokens:,}")
        if self.max_cost is not None:
            spent_cost = spent.cost or 0.0  # the known part (None: no call yet)
            if unpriced:
                name = _model_name(env)
                return self._stop(env, "cost", self.max_cost, spent_cost, 0.0,
                                  f"the cost of {unpriced} call(s) to {name} is unknown (the "
                                  "price table does not list the model and the provider did "
                                  "not report it), so max_cost cannot be kept")
            estimate = self._estimate(env, spent, context)
            if spent_cost + estimate > self.max_cost:
                return self._stop(env, "cost", self.max_cost, spent_cost, estimate,
                                  f"{usd(spent_cost)} spent and about {usd(estimate)} for the "
                                  f"next call would make about {usd(spent_cost + estimate)}, "
                                  f"past max_cost={usd(self.max_cost)}")
        return self.app(env)

    def _spent(self, env: Env) -> tuple[Usage, int]:
        """What the scope spent so far, and how many of its calls have no known cost."""
        turn = env.turn_usage
        unpriced = 1 if env.turn_cost is None else 0
        if self.per == "turn":
            return turn, unpriced
        if self._before is None:
            self._before = self._session_before(env)
        before, before_unpriced = self._before
        return before + turn, before_unpriced + unpriced

    def _session_before(self, env: Env) -> tuple[Usage, int]:
        session = env.session
        if session is not None:
            stats = tally(session.entries())
            return stats.usage, stats.unpriced
        usage, unpriced = Usage(), 0
        for m in env.messages[:env.turn_start]:
            if m.role == "assistant" and m.usage is not None:
                cost = cost_of(m)
                usage = usage + m.usage.replace(cost=cost or 0.0)
                unpriced += cost is None
        return usage, unpriced

    def _estimate(self, env: Env, spent: Usage, context: int) -> float:
        """The next call's cost: by the price table, else at the rate seen so far."""
        model = env.model
        call = Usage(input=context, output=self.reserve_output)
        if model is not None:
            priced = table_cost(call, model.provider, model.name)
            if priced is not None:
                return priced
        tokens = _tokens(spent)
        return spent.cost / tokens * _tokens(call) if tokens and spent.cost else 0.0

    def _stop(self, env: Env, limit: Literal["cost", "tokens"], maximum: float, spent: float,
              next_call: float, why: str) -> Env:
        if env.reply is None:  # the turn's input is taken back (see the class docstring)
            advice = "The model was not asked; raise the budget and ask again."
        elif self.per == "turn":
            advice = ("Raise the budget, or start another turn: start() with no input goes "
                      "on from the saved tool results.")
        else:
            advice = "Raise the budget to go on."
        env.stop(StopReason.BUDGET, f"Stopped before a model call: {why} (Budget per {self.per}). "
                 + advice)
        env.emit(BudgetPayload(event=Event.BUDGET, limit=limit, per=self.per,
                               maximum=float(maximum), spent=float(spent),
                               next_call=float(next_call)))
        return env


def _model_name(env: Env) -> str:
    model = env.model
    return f"{model.provider}/{model.name}" if model is not None else "the model"


