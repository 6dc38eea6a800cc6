"""``replay``: send the request recorded at an assistant reply again, on the same model or
another, and write each answer as a new branch beside the recorded one.

The request is the one the session recorded there: the context just before the reply
(``build_context`` of its parent), with the system prompt, the tool schemas and the
parameters of the request entry in force. Where the new answer calls a tool with the same
name and arguments as the recorded run did, the recorded result is served (the tool is not
run) and the model is called again; at the first call the recording has no result for, the
lane stops: it diverged there. Replaying on another model always adds a lane on the recorded
model, the baseline, since a model does not repeat itself either. The ``ReplayReport``
compares each lane with the recording: the same tool calls, the same final text, tokens and
cost.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import orjson

from .._context import take_open
from .._messages import Message, ToolCall, Usage
from .._pricing import cost_of
from .._session import Session
from ..entries import AnyEntry, MessageEntry
from ..errors import InvalidArgument, ModelUnavailable
from ..models._base import Model
from ..models._stream import stream_reply

__all__ = ["ReplayLane", "ReplayReport", "recorded_model", "replay"]

PORTABLE_PARAMS = ("temperature", "top_p")
"""The request parameters sent to a model of another provider than the recorded one (the
others name one API's options)."""
DEFAULT_MAX_STEPS = 20
MAX_SAMPLES = 100  # per model: each is at least one paid model call, and a branch


def samples_problem(n: int) -> str | None:
    """What is wrong with ``n`` samples per model, or ``None`` (the API's and ``--n``'s
    rule)."""
    if 1 <= n <= MAX_SAMPLES:
        return None
    return (f"takes how many samples to run per model, from 1 to {MAX_SAMPLES} (each is a "
            f"model call and a branch), got {n}")


@dataclass
class ReplayLane:
    """One sample: the branch written (``tip_id``, ``label``), the model, what it did and
    how that compares with the recorded run."""

    model: str
    baseline: bool
    sample: int
    tip_id: str | None = None
    label: str | None = None
    tool_calls: list[list[Any]] = field(default_factory=list)  # [name, arguments]
    final_text: str | None = None
    diverged_at: int | None = None  # the step whose call the recording has no result for
    same_tool_calls: bool = False
    same_final_text: bool = False
    usage: Usage = field(default_factory=Usage)
    unpriced: int = 0
    calls: int = 0

    @property
    def cost(self) -> float | None:
        """What the lane's calls cost in USD; ``None`` when one's price is unknown."""
        return None if self.unpriced else (self.usage.cost or 0.0)

    def to_dict(self) -> dict[str, Any]:
        """The lane as JSON-ready data."""
        return {"model": self.model, "baseline": self.baseline, "sample": self.sample,
                "tip_id": self.tip_id, "label": self.label, "tool_calls": self.tool_calls,
                "final_text": self.final_text, "diverged_at": self.diverged_at,
                "same_tool_calls": self.same_tool_calls,
                "same_final_text": self.same_final_text, "calls": self.calls,
                "input_tokens": self.usage.input + self.usage.cache_read
                + self.usage.cache_write, "output_tokens": self.usage.output,
                "cost": self.cost}


@dataclass
class ReplayReport:
    """What ``replay`` did: the entry replayed (``at``, its parent ``from_id``), the
    recorded run's tool calls and final text, and one ``ReplayLane`` per sample."""

    at: str
    from_id: str | None
    location: str
    recorded_model: str
    recorded_tool_calls: list[list[Any]]
    recorded_final_text: str | None
    lanes: list[ReplayLane]

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON-ready data (``contextree replay --json``)."""
        return {"at": self.at, "from_id": self.from_id, "session": self.location,
                "recorded": {"model": self.recorded_model,
                             "tool_calls": self.recorded_tool_calls,
                             "final_text": self.recorded_final_text},
                "lanes": [lane.to_dict() for lane in self.lanes]}


def recorded_model(provider: str | None, name: str | None, *,
                   base_url: str | None = None) -> Model:
    """The adapter for a model a session recorded (``provider``, ``name``), configured from
    the environment; ``ModelUnavailable`` naming what is missing when it cannot be."""
    if not provider or not name:
        raise ModelUnavailable("the session does not say which model answered there; pass a "
                               "model (--model PROVIDER:MODEL)")
    if provider not in ("openai", "anthropic"):
        raise ModelUnavailable(
            f"the recorded request was answered by {provider}/{name}, a provider contextree "
            "does not call itself: pass a model for it (--model openai:NAME --base-url URL "
            "for an OpenAI-compatible server)")
    key_env, url_env = (("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL") if provider == "anthropic"
                        else ("OPENAI_API_KEY", "OPENAI_BASE_URL"))
    if not (base_url or os.environ.get(key_env) or os.environ.get(url_env)):
        raise ModelUnavailable(
            f"the recorded request was answered by {provider}/{name}, and {provider} is not "
            f"configured: set {key_env} (or {url_env}, or pass --base-url) to replay it")
    if provider == "anthropic":
        from ..models._anthropic import AnthropicMessages

        return AnthropicMessages(name, base_url=base_url)
    from ..models._openai_chat import OpenAIChat

    return OpenAIChat(name, base_url=base_url)


def replay(session: Session, at: str, model: Model | None = None, *, n: int = 1,
           baseline: Model | Literal[False] | None = None, serve_tools: bool = True,
           max_steps: int = DEFAULT_MAX_STEPS, base_url: str | None = None,
           fork: str | os.PathLike[str] | None = None) -> ReplayReport:
    """Send the request recorded at the assistant reply ``at`` (id, prefix or label) again,
    ``n`` times on ``model`` (default: the recorded one), each answer a new branch from the
    reply's parent labelled with the model; the session's leaf stays where it was.

    When ``model`` is not the recorded one, ``n`` more samples run on the recorded model
    (``baseline``, default: built from the environment as ``recorded_model`` does;
    ``False``: none). With ``serve_tools`` (the default) a tool call equal to one of the
    recorded run's is given the recorded result and the model is called again, at most
    ``max_steps`` times. ``fork``: write the branches into a new session at that path (a
    fork holding the recorded run) instead; ``base_url`` is where a model built from the
    recording is served. Every model is made before anything is written.
    """
    if problem := samples_problem(n):
        raise InvalidArgument(f"replay: n {problem}")
    at = session.resolve(at)
    reply = _reply_at(session, at)
    recorded = (reply.message.provider, reply.message.model)
    if reply.parent_id is not None and recorded[1] is None:
        recorded = session.build_context(reply.parent_id).model or recorded
    lanes = _lanes(model, recorded, n, baseline, base_url)
    if fork is None:
        return _replay_lanes(session, at, recorded, lanes, serve_tools, max_steps)
    end = [at, *(e.id for e in _after(session, at))][-1]
    with session.fork(fork, at=end) as forked:
        return _replay_lanes(forked, at, recorded, lanes, serve_tools, max_steps)


def _lanes(model: Model | None, recorded: tuple[str | None, str | None], n: int,
           baseline: Model | Literal[False] | None, base_url: str | None
           ) -> list[tuple[Model, bool]]:
    """``(model, is_baseline)`` for each lane: ``n`` on the chosen model, and ``n`` on the
    recorded one when the chosen model is another (unless ``baseline`` is False)."""
    target = model if model is not None else recorded_model(*recorded, base_url=base_url)
    lanes = [(target, False)] * n
    if _name(target.provider, target.name) == _name(*recorded) or baseline is False:
        return lanes
    if baseline is None:
        try:
            baseline = recorded_model(*recorded, base_url=base_url)
        except ModelUnavailable as e:
            raise ModelUnavailable(
                f"the baseline lanes run on the recorded model, and it cannot be called: "
                f"{e}; or pass --no-baseline (baseline=False) to replay on "
                f"{_name(target.provider, target.name)} alone") from None
    return lanes + [(baseline, True)] * n


def _replay_lanes(session: Session, at: str, recorded: tuple[str | None, str | None],
                  lanes: Sequence[tuple[Model, bool]], serve_tools: bool,
                  max_steps: int) -> ReplayReport:
    """Run ``lanes`` from the parent of the reply ``at`` and compare each with it."""
    from_id = _reply_at(session, at).parent_id
    run_calls, run_final = _recorded_run(session, at)
    served = _served_results(session, at)
    leaf = session.leaf_id
    run_id = uuid.uuid4().hex[:6]
    report = ReplayReport(at, from_id, session.location, _name(*recorded),
                          [[c.name, c.arguments] for c in run_calls], run_final, [])
    counts: dict[tuple[str, bool], int] = {}
    try:
        for lane_model, is_baseline in lanes:
            key = (_name(lane_model.provider, lane_model.name), is_baseline)
            counts[key] = counts.get(key, 0) + 1
            lane = ReplayLane(key[0], is_baseline, counts[key])
            _run_lane(session, from_id, lane_model, recorded, lane, served if serve_tools
                      else {}, max_steps)
            lane.same_tool_calls = lane.tool_calls == report.recorded_tool_calls
            lane.same_final_text = (lane.final_text is not None and run_final is not None
                                    and lane.final_text.strip() == run_final.strip())
            if lane.tip_id is not None:
                lane.label = (f"replay-{run_id}:{key[0]}"
                              + (" baseline" if is_baseline else "") + f" #{lane.sample}")
                session.set_label(lane.tip_id, lane.label)
            report.lanes.append(lane)
    finally:
        if session.leaf_id != leaf:
            session.move_to(leaf)
    return report


def _name(provider: str | None, model: str | None) -> str:
    return f"{provider}/{model}" if provider else (model or "unknown")


def _reply_at(session: Session, at: str) -> MessageEntry:
    """The assistant reply ``at`` names; otherwise the error names the nearest one."""
    entry = session.get_entry(at)
    if isinstance(entry, MessageEntry) and entry.message.role == "assistant":
        return entry
    nearest = _nearest_reply(session, at)
    what = (f"a {entry.message.role} message" if isinstance(entry, MessageEntry)
            else f"a {entry.type} entry" if entry is not None else "not an entry")
    hint = (f"the nearest assistant reply is {nearest}" if nearest is not None
            else "this branch has no assistant reply to replay")
    raise InvalidArgument(f"replay needs an assistant reply; {at} is {what}: {hint}",
                          path=session.location)


def _is_reply(entry: AnyEntry | None) -> bool:
    return isinstance(entry, MessageEntry) and entry.message.role == "assistant"


def _nearest_reply(session: Session, at: str) -> str | None:
    """The assistant reply closest to ``at``: on its path to the root, or after it on the
    way to the leaf (or along first children), whichever is fewer entries away."""
    back = next(((i, e.id) for i, e in enumerate(reversed(session.branch(at)))
                 if _is_reply(e)), None)
    forward = next(((i + 1, e.id) for i, e in enumerate(_after(session, at))
                    if _is_reply(e)), None)
    found = [x for x in (back, forward) if x is not None]
    return min(found)[1] if found else None


def _after(session: Session, at: str) -> Iterator[AnyEntry]:
    """The entries after ``at`` on the recorded run: towards the leaf when ``at`` is on the
    current branch, else along first children."""
    leaf_path = session.branch()
    ids = [e.id for e in leaf_path]
    if at in ids:
        yield from leaf_path[ids.index(at) + 1:]
        return
    current = at
    while True:
        kids = session.children(current)
        if not kids:
            return
        current = kids[0].id
        yield kids[0]


def _turn_messages(session: Session, at: str) -> Iterator[Message]:
    """The messages of the recorded run from the reply ``at`` (itself first) to the end of
    its turn (the next user message)."""
    for entry in [session.get_entry(at), *_after(session, at)]:
        if not isinstance(entry, MessageEntry):
            continue
        if entry.message.role == "user":
            return
        yield entry.message


def _recorded_run(session: Session, at: str) -> tuple[list[ToolCall], str | None]:
    """The recorded run from the reply ``at`` to the end of its turn: its tool calls in
    order, and the text of its last reply (``None`` when that reply calls tools)."""
    calls: list[ToolCall] = []
    final: str | None = None
    for m in _turn_messages(session, at):
        if m.role == "assistant":
            calls += m.tool_calls or ()
            final = m.text if not m.tool_calls else None
    return calls, final


def _call_key(name: str, arguments: Any) -> bytes:
    return name.encode() + b"\x00" + orjson.dumps(arguments, option=orjson.OPT_SORT_KEYS)


def _served_results(session: Session, at: str) -> dict[bytes, list[Message]]:
    """The recorded tool results of the run from ``at``, by call (name and arguments), in
    the order they were given."""
    pending: list[tuple[str, bytes]] = []  # (call id, its key), in call order
    out: dict[bytes, list[Message]] = {}
    for m in _turn_messages(session, at):
        if m.role == "assistant":
            pending += [(c.id, _call_key(c.name, c.arguments)) for c in m.tool_calls or ()]
        elif m.role == "tool" and (call := take_open(pending, m.tool_call_id)) is not None:
            out.setdefault(call[1], []).append(m)
    return out


def _run_lane(session: Session, from_id: str | None, model: Model,
              recorded: tuple[str | None, str | None], lane: ReplayLane,
              served: dict[bytes, list[Message]], max_steps: int) -> None:
    """Call ``model`` on the recorded request from ``from_id`` and write what it answers,
    serving recorded tool results while its calls match."""
    ctx = session.build_context(from_id)
    same_provider = model.provider == (recorded[0] or (ctx.model and ctx.model[0]))
    params = dict(ctx.params or {})
    if not same_provider:
        params = {k: v for k, v in params.items() if k in PORTABLE_PARAMS}
    tools = list(ctx.tools or ())
    stream = ctx.stream
    messages = ctx.request_messages()
    left = {k: list(v) for k, v in served.items()}
    session.move_to(from_id)
    if _name(model.provider, model.name) != _name(*(ctx.model or recorded)):
        session.append_model_change(model.provider, model.name)
    if not same_provider or params != (ctx.params or {}):
        session.append_request(ctx.system, tools, params, stream=stream)
    for step in range(max_steps):
        reply = _answer(model, messages, tools, params, stream)
        lane.calls += 1
        lane.usage = lane.usage + (reply.usage or Usage()).replace(cost=cost_of(reply) or 0.0)
        lane.unpriced += cost_of(reply) is None
        lane.tip_id = session.append_message(reply)
        messages.append(reply)
        calls = list(reply.tool_calls or ())
        lane.tool_calls += [[c.name, c.arguments] for c in calls]
        if not calls:
            lane.final_text = reply.text
            return
        results = []
        for c in calls:
            recorded_results = left.get(_call_key(c.name, c.arguments))
            if not recorded_results:
                lane.diverged_at = step
                return
            results.append(recorded_results.pop(0).replace(tool_call_id=c.id))
        for result in results:
            lane.tip_id = session.append_message(result)
            messages.append(result)


def _answer(model: Model, messages: Sequence[Message], tools: Sequence[Any],
            params: dict[str, Any], stream: bool) -> Message:
    """One call, streamed when the recorded one was (the same body)."""
    if not stream:
        return model.complete(messages, tools=tools, **params)
    with stream_reply(model, messages, tools=tools, **params) as reply:
        for _ in reply:
            pass
    return reply.message
