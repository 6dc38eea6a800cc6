"""ATIF, the Agent Trajectory Interchange Format (Harbor RFC 0001), versions 1.0 to 1.7.

A trajectory is one JSON document: ``{"schema_version": "ATIF-v1.7", "session_id", "agent":
{"name", "version", "model_name"}, "steps": [...], "final_metrics"}``. Each step has a
``source`` (``system``, ``user`` or ``agent``) and a ``message``; an agent step also carries
``reasoning_content``, ``tool_calls`` (``{"tool_call_id", "function_name", "arguments"}``),
``metrics`` (``prompt_tokens`` counting cached ones, ``completion_tokens``,
``cached_tokens``, ``cost_usd``) and the ``observation`` its tools returned
(``{"results": [{"source_call_id", "content"}]}``).

Import makes one message per step and one tool message per observation result, in order, as
a linear chain. A result that names no tool call (an agent that acts through its text) is
kept as a user message marked ``atif_observation``, since contextree's tool messages answer a
call. What has no message of its own is kept as data: the trajectory's root fields (agent,
notes, final metrics, embedded sub-agent trajectories...) in the header's metadata, each
step's ``extra``, token ids and log-probabilities on its message.

Export writes the context the model sees at the leaf (or ``at``) as an ATIF-v1.7 trajectory:
system, user and assistant messages become steps, each tool result joins the observation of
the agent step that called it. What ATIF has no field for (thinking signatures, cache-write
tokens, contextree's markers...) goes into the step's ``extra.contextree``, so that importing
the file again gives back the same messages.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import msgspec

from .._messages import ImagePart, Message, TextPart, ThinkingPart, ToolCall, Usage
from .._session import Session
from ..entries import AnyEntry
from ._base import (
    Ids,
    Imported,
    Json,
    Progress,
    dumps,
    file_time,
    header,
    imported_metadata,
    input_error,
    iso_to_ms,
    message_entry,
    read_json_document,
)

SCHEMA_VERSION = "ATIF-v1.7"
"""The version export writes."""
_VERSION = re.compile(r"ATIF-v1\.(\d+)")
_READS_UP_TO = 7
_OWN = "contextree"  # the key of contextree's own data in a step's (or result's) ``extra``
_IMAGE_TYPES = {"image/jpeg", "image/png", "image/gif", "image/webp"}
_ROLE_OF = {"system": "system", "user": "user", "agent": "assistant"}
_SOURCE_OF = {"system": "system", "user": "user", "assistant": "agent"}


def looks_like_atif(doc: object) -> bool:
    """Whether a parsed JSON document is an ATIF trajectory (for ``import auto``)."""
    return (isinstance(doc, dict) and isinstance(doc.get("schema_version"), str)
            and doc["schema_version"].startswith("ATIF-") and isinstance(doc.get("steps"), list))


def detect(path: Path) -> bool:
    """The ``import auto`` hook: a JSON document with an ``ATIF-`` schema version."""
    with open(path, "rb") as f:
        head = f.read(4096)
    return b'"schema_version"' in head and b'"ATIF-v' in head and looks_like_atif(
        read_json_document(path))


# -- import ------------------------------------------------------------------------------


def read(path: Path, progress: Progress | None = None) -> Imported:
    """Read an ATIF trajectory (v1.0-v1.7) as a linear chain of messages."""
    doc = read_json_document(path)
    if not looks_like_atif(doc):
        raise input_error(path, None, _not_atif(path))
    version = doc["schema_version"]
    m = _VERSION.fullmatch(version)
    if m is None or int(m.group(1)) > _READS_UP_TO:
        raise input_error(path, None, f"schema_version {version!r}: this version of "
                          "contextree reads ATIF-v1.0 to ATIF-v1.7; upgrade contextree")
    stamp = file_time(path)
    ids = Ids()
    entries: list[AnyEntry] = []
    parent: str | None = None
    steps = doc["steps"]
    for i, step in enumerate(steps):
        if not isinstance(step, dict):
            raise input_error(path, None, f"steps[{i}] is not an object")
        when = step.get("timestamp")
        when = when if isinstance(when, str) and iso_to_ms(when) is not None else stamp
        for msg in _step_messages(step, i, path, doc.get("agent")):
            eid = ids.new()
            entries.append(message_entry(eid, parent, when, msg))
            parent = eid
        if progress is not None:
            progress(i + 1, len(steps))
    root = {k: v for k, v in doc.items() if k != "steps"}
    session_id = doc.get("session_id") if isinstance(doc.get("session_id"), str) else None
    meta = imported_metadata("atif", path, schema_version=version)
    meta["atif"] = root
    first = entries[0].timestamp if entries else stamp
    hdr = header(session_id, first, cwd=None, metadata=meta)
    return Imported(hdr, entries, report={"steps": len(steps), "messages": len(entries)})


def _not_atif(path: Path) -> str:
    from ._detect import detected_other  # it imports the format table, which imports us

    other = detected_other(path, "atif")
    if other is not None:
        return (f"this is not an ATIF trajectory (no `schema_version` \"ATIF-v1.x\" with "
                f"`steps`); it looks like {other}: import it as {other} (`contextree import "
                f"{other} ...`, or `auto`)")
    return ("this is not an ATIF trajectory: expected a JSON object with `schema_version` "
            "\"ATIF-v1.x\" and a `steps` list")


def _step_messages(step: Json, i: int, path: Path, agent: object) -> list[Message]:
    source = step.get("source")
    role = _ROLE_OF.get(source) if isinstance(source, str) else None
    if role is None:
        raise input_error(path, None, f"steps[{i}]: `source` must be system, user or agent, "
                          f"got {source!r}")
    extra = dict(step.get("extra") or {}) if isinstance(step.get("extra"), dict) else {}
    own = extra.pop(_OWN, None)
    content = _content(step.get("message"), i, path)
    fields: Json = {"role": role, "content": content}
    if role == "assistant":
        thinking = step.get("reasoning_content")
        if isinstance(thinking, str) and thinking:
            fields["content"] = [ThinkingPart(thinking=thinking), *_parts(content)]
        calls = step.get("tool_calls")
        if isinstance(calls, list) and calls:
            fields["tool_calls"] = [_call(c, i, path) for c in calls]
        usage, kept = _usage(step.get("metrics"))
        if usage is not None:
            fields["usage"] = usage
        model = step.get("model_name")
        if model is None and isinstance(agent, dict):
            model = agent.get("model_name")
        if isinstance(model, str):
            fields["model"] = model
        if kept:
            extra["atif_metrics"] = kept
    for key in ("reasoning_effort", "is_copied_context", "llm_call_count"):
        if step.get(key) is not None:
            extra[f"atif_{key}"] = step[key]
    msg = _with_own(Message(**fields), own).set_extra(extra)
    out = [msg]
    observation = step.get("observation")
    results = observation.get("results") if isinstance(observation, dict) else None
    for j, result in enumerate(results if isinstance(results, list) else ()):
        if not isinstance(result, dict):
            raise input_error(path, None, f"steps[{i}].observation.results[{j}] is not an "
                              "object")
        out.append(_result_message(result, i, path, msg))
    return out


def _result_message(result: Json, i: int, path: Path, caller: Message) -> Message:
    extra = dict(result.get("extra") or {}) if isinstance(result.get("extra"), dict) else {}
    own = extra.pop(_OWN, None)
    content = _content(result.get("content"), i, path)
    refs = result.get("subagent_trajectory_ref")
    if refs is not None:
        extra["atif_subagent_trajectory_ref"] = refs
    call_id = result.get("source_call_id")
    names = {c.id: c.name for c in caller.tool_calls or ()}
    if isinstance(call_id, str) and call_id in names:
        msg = Message(role="tool", content=content, tool_call_id=call_id, name=names[call_id])
    else:  # a result of no tool call: what the agent's environment said back
        extra["atif_observation"] = True
        if call_id is not None:
            extra["atif_source_call_id"] = call_id
        msg = Message(role="user", content=content)
    return _with_own(msg, own).set_extra(extra)


def _with_own(msg: Message, own: object) -> Message:
    """``msg`` with the fields contextree's own export kept aside put back."""
    if not isinstance(own, dict) or not isinstance(own.get("fields"), dict):
        return msg
    data = msg.to_dict()
    data.update(own["fields"])
    for key in own.get("absent") or ():
        data.pop(key, None)
    try:
        return Message.from_dict(data)
    except msgspec.ValidationError:
        return msg


def _content(value: object, i: int, path: Path) -> str | list[Any]:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if not isinstance(value, list):
        raise input_error(path, None, f"steps[{i}]: a message is a string or a list of parts")
    parts: list[Any] = []
    for part in value:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text":
            parts.append(TextPart(text=str(part.get("text") or "")))
        elif kind == "image" and isinstance(part.get("source"), dict):
            parts.append(_image(part["source"]))
        else:
            raise input_error(path, None, f"steps[{i}]: a content part is text or image, "
                              f"got {kind!r}")
    return parts


def _image(source: Json) -> ImagePart:
    from ..models._wire_common import parse_data_url

    where = str(source.get("path") or "")
    mime = source.get("media_type")
    data_url = parse_data_url(where)
    if data_url is not None:
        return ImagePart(data=data_url[1], mime_type=data_url[0])
    return ImagePart(url=where, mime_type=mime if isinstance(mime, str) else None)


def _parts(content: str | list[Any]) -> list[Any]:
    if isinstance(content, str):
        return [TextPart(text=content)] if content else []
    return content


def _call(c: object, i: int, path: Path) -> ToolCall:
    if not isinstance(c, dict) or not isinstance(c.get("function_name"), str):
        raise input_error(path, None, f"steps[{i}]: each tool call needs a string "
                          "`function_name`")
    args = c.get("arguments")
    call = ToolCall(id=str(c.get("tool_call_id") or ""), name=c["function_name"],
                    arguments=args if isinstance(args, dict) else {})
    extra = {"atif_extra": c["extra"]} if isinstance(c.get("extra"), dict) else {}
    return call.set_extra(extra)


def _usage(metrics: object) -> tuple[Usage | None, Json]:
    """The usage of a step's ``metrics`` and what else they hold (token ids, logprobs...)."""
    if not isinstance(metrics, dict):
        return None, {}
    known = {"prompt_tokens", "completion_tokens", "cached_tokens", "cost_usd", "extra"}
    kept = {k: v for k, v in metrics.items() if k not in known}
    extra = dict(metrics.get("extra") or {}) if isinstance(metrics.get("extra"), dict) else {}
    prompt = _int(metrics.get("prompt_tokens"))
    output = _int(metrics.get("completion_tokens"))
    cached = _int(metrics.get("cached_tokens"))
    written = _int(extra.pop("cache_write_tokens", 0))
    total = extra.pop("total_tokens", None)
    if extra:
        kept["extra"] = extra
    cost = metrics.get("cost_usd")
    usage = Usage(input=max(prompt - cached - written, 0), output=output, cache_read=cached,
                  cache_write=written,
                  total=_int(total) if total is not None else prompt + output,
                  cost=float(cost) if isinstance(cost, int | float) else None)
    return usage, kept


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


# -- export ------------------------------------------------------------------------------


def write(session: Session, at: str | None = None) -> bytes:
    """The context at the leaf (or ``at``) as an ATIF-v1.7 trajectory (see the module notes)."""
    return dumps(trajectory(session, at))


def trajectory(session: Session, at: str | None = None) -> Json:
    """The ATIF-v1.7 trajectory of the context at ``at`` (default: the leaf), as JSON data."""
    ctx = session.build_context(at)
    steps: list[Json] = []
    calls: dict[str, Json] = {}  # tool call id -> the agent step that made it
    models: list[str] = []
    for msg, eid in zip(ctx.messages, ctx.entry_ids or [None] * len(ctx.messages), strict=False):
        entry = session.get_entry(eid) if eid is not None else None
        when = entry.timestamp if entry is not None else None
        if msg.role == "tool":
            step = calls.get(msg.tool_call_id or "")
            if step is None:  # a result whose call is not in the context: a step of its own
                step = _new_step(steps, "system", "", when)
            _observe(step, msg, calls)
            continue
        step = _new_step(steps, _SOURCE_OF.get(msg.role, "user"), "", when)
        _fill(step, msg)
        if msg.role == "assistant":
            if msg.model:
                models.append(msg.model)
            for call in msg.tool_calls or ():
                calls[call.id] = step
    doc: Json = {"schema_version": SCHEMA_VERSION, "session_id": session.id,
                 "agent": {"name": "contextree", "version": _own_version()}}
    if models:
        doc["agent"]["model_name"] = models[-1]
    doc["steps"] = steps
    doc["final_metrics"] = _final_metrics(steps)
    return doc


def _own_version() -> str:
    from importlib.metadata import PackageNotFoundError, version  # on use: slow to import

    try:
        return version("contextree")
    except PackageNotFoundError:
        return "unknown"


def _new_step(steps: list[Json], source: str, message: str, when: str | None) -> Json:
    step: Json = {"step_id": len(steps) + 1}
    if when:
        step["timestamp"] = when
    step.update(source=source, message=message)
    steps.append(step)
    return step


def _fill(step: Json, msg: Message) -> None:
    step["message"] = _atif_content(msg.content)
    if msg.role == "assistant":
        if msg.model:
            step["model_name"] = msg.model
        thinking = "".join(p.thinking for p in msg.thinking)
        if thinking:
            step["reasoning_content"] = thinking
        if msg.tool_calls:
            step["tool_calls"] = [{"tool_call_id": c.id, "function_name": c.name,
                                   "arguments": c.arguments} for c in msg.tool_calls]
        if msg.usage is not None:
            step["metrics"] = _metrics(msg.usage)
    elif msg.role not in _SOURCE_OF:
        step.setdefault("extra", {})["role"] = msg.role
    _keep_rest(step, msg, _step_back(step, msg))


def _observe(step: Json, msg: Message, calls: dict[str, Json]) -> None:
    result: Json = {"source_call_id": msg.tool_call_id if msg.tool_call_id in calls else None,
                    "content": _atif_content(msg.content)}
    step.setdefault("observation", {"results": []})["results"].append(result)
    if result["source_call_id"] is None:
        back = Message(role="user", content=_back_content(result["content"]))
    else:
        names = {c["tool_call_id"]: c["function_name"] for c in step.get("tool_calls", ())}
        back = Message(role="tool", content=_back_content(result["content"]),
                       tool_call_id=msg.tool_call_id, name=names.get(msg.tool_call_id))
    _keep_rest(result, msg, back)


def _step_back(step: Json, msg: Message) -> Message:
    """What importing ``step`` alone gives back (without its observation)."""
    plain = {k: v for k, v in step.items() if k not in ("observation", "extra")}
    return _step_messages(plain, 0, Path("-"), None)[0]


def _keep_rest(target: Json, msg: Message, back: Message) -> None:
    """Put in ``target["extra"]["contextree"]`` the fields of ``msg`` that importing
    ``target`` would not give back, so that the round trip is exact."""
    want, got = msg.to_dict(), back.to_dict()
    fields = {k: v for k, v in want.items() if got.get(k) != v}
    absent = [k for k in got if k not in want]
    if fields or absent:
        own: Json = {"fields": fields}
        if absent:
            own["absent"] = absent
        target.setdefault("extra", {})[_OWN] = own


def _atif_content(content: object) -> str | list[Json]:
    if content is None or isinstance(content, str):
        return content or ""
    parts: list[Json] = []
    for p in content if isinstance(content, list) else ():
        if isinstance(p, TextPart):
            parts.append({"type": "text", "text": p.text})
        elif isinstance(p, ImagePart) and (p.mime_type in _IMAGE_TYPES or p.url):
            where = f"data:{p.mime_type};base64,{p.data}" if p.data else str(p.url)
            mime = p.mime_type if p.mime_type in _IMAGE_TYPES else "image/png"
            parts.append({"type": "image", "source": {"media_type": mime, "path": where}})
    if not any(p["type"] == "image" for p in parts):
        return "".join(p["text"] for p in parts)
    return parts


def _back_content(value: str | list[Json]) -> str | list[Any]:
    return _content(value, 0, Path("-"))


def _metrics(usage: Usage) -> Json:
    prompt = usage.input + usage.cache_read + usage.cache_write
    out: Json = {"prompt_tokens": prompt, "completion_tokens": usage.output,
                 "cached_tokens": usage.cache_read}
    if usage.cost is not None:
        out["cost_usd"] = usage.cost
    extra: Json = {}
    if usage.cache_write:
        extra["cache_write_tokens"] = usage.cache_write
    if usage.total != prompt + usage.output:
        extra["total_tokens"] = usage.total
    if extra:
        out["extra"] = extra
    return out


def _final_metrics(steps: list[Json]) -> Json:
    metrics = [s["metrics"] for s in steps if "metrics" in s]
    costs = [m["cost_usd"] for m in metrics if "cost_usd" in m]
    out: Json = {
        "total_prompt_tokens": sum(m["prompt_tokens"] for m in metrics),
        "total_completion_tokens": sum(m["completion_tokens"] for m in metrics),
        "total_cached_tokens": sum(m["cached_tokens"] for m in metrics),
        "total_steps": len(steps),
    }
    if costs:
        out["total_cost_usd"] = sum(costs)
    return out
