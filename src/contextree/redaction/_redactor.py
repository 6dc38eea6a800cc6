"""``Redactor``: secrets out of text, JSON-like values and session entries, at every exit.

The stored session is never changed: ``entry`` returns a redacted copy. One ``Redactor``
gives each secret one tag for its whole life (``[REDACTED:aws-key:1]`` in the first entry and
in the last), so use one per export, view or copy.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, TypeVar

from .._messages import Message
from ..entries import Line, from_dict, to_dict
from ._detectors import BUILTIN, Detector
from ._entropy import HighEntropy
from ._keywords import Assignments, is_secret_key, kind_of_key
from ._patterns import UserPattern, compile_pattern
from ._placeholders import KnownSecrets, Placeholders, is_placeholder_text, is_placeholder_value
from ._plugins import plugin_detectors
from ._scanner import scan

__all__ = ["Redactor"]

T = TypeVar("T")
L = TypeVar("L", bound=Line)

# Fields of an entry's line that hold no user content: ids, times, tags, provider names, a
# thinking signature (opaque and checked by the provider). Everything else is redacted.
_STRUCTURAL = frozenset((
    "id", "parent_id", "timestamp", "type", "tool_call_id", "target_id", "first_kept_entry_id",
    "from_id", "role", "signature", "mime_type", "model", "provider", "model_id",
    "stop_reason", "thinking_level", "custom_type", "version", "created_at", "parent_session",
    "is_error", "display", "redacted", "from_hook", "pinned", "usage", "kind",
))


# kinds found by their context, not their shape: looked for again wherever they recur
_BY_CONTEXT = frozenset(("password", "token", "api-key", "secret", "url-password",
                         "db-password", "custom", "auth-header"))


class Redactor:
    """Finds secrets and replaces each with a stable placeholder ``[REDACTED:<kind>:<n>]``.

    ``patterns`` are extra regular expressions (kind ``custom``; a group named ``secret``
    limits what is replaced); a pattern that is not valid raises ``InvalidArgument``.
    ``enabled=False`` makes every method return its input unchanged (``--no-redact``).
    ``detect_secrets`` adds detect-secrets' regex plugins when that package is installed
    (``None``: when installed; ``False``: never; ``True``: required).
    """

    def __init__(self, patterns: Iterable[str] = (), *, enabled: bool = True,
                 detect_secrets: bool | None = None) -> None:
        self._enabled = bool(enabled)
        self._user: list[UserPattern] = [compile_pattern(p) for p in patterns]
        self._placeholders = Placeholders()
        self._known = KnownSecrets()
        self._detectors: Sequence[Detector] = (
            self._known, *BUILTIN, *self._user, Assignments(), *plugin_detectors(detect_secrets),
            HighEntropy(),
        )

    @property
    def enabled(self) -> bool:
        """Whether this redactor changes anything."""
        return self._enabled

    @property
    def patterns(self) -> list[str]:
        """The user patterns, as given."""
        return [p.source for p in self._user]

    @property
    def found(self) -> dict[str, int]:
        """How many distinct secrets of each kind were replaced so far."""
        return self._placeholders.counts

    def text(self, s: str) -> str:
        """``s`` with every secret replaced by its placeholder."""
        if not self._enabled or not s:
            return s
        hits = scan(s, self._detectors)
        if not hits:
            return s
        out: list[str] = []
        pos = 0
        for start, end, kind in hits:
            secret = s[start:end]
            if is_placeholder_text(secret):
                continue
            out.append(s[pos:start])
            out.append(self._tag(secret, kind))
            pos = end
        out.append(s[pos:])
        return "".join(out)

    def value(self, obj: T) -> T:
        """A same-shaped copy of a JSON-like value with every string redacted.

        Dict keys are redacted like any string (a token used as a key is still a token); the
        value of a key that names a secret (``"password"``, ``"api_key"``, ``"DB_TOKEN"``...)
        is replaced whole when it is a string, whatever it looks like. Bytes are read as
        UTF-8 (undecodable bytes kept as they were); other scalars are returned as they are.
        """
        if not self._enabled:
            return obj
        return self._value(obj, None)  # type: ignore[no-any-return]

    def entry(self, entry: L) -> L:
        """A redacted copy of a session line (an entry, or the header).

        Every string that holds content is redacted: message text, tool call arguments and
        results, thinking, compaction and branch summaries, labels, names, custom data,
        unknown fields and unknown entry types. Ids, timestamps, roles, model names, image
        data and thinking signatures are kept, so the copy is a valid entry with the same
        place in the tree. The entry given is not changed.
        """
        data = to_dict(entry)
        if self._enabled:
            data = self._fields(data)
        return from_dict(data)  # type: ignore[return-value]  # the same type: same tag

    def message(self, message: Message) -> Message:
        """A redacted copy of one message (what ``entry`` does to a message entry's)."""
        if not self._enabled:
            return message
        return Message.from_dict(self._fields(message.to_dict()))

    def _tag(self, secret: str, kind: str) -> str:
        if kind in _BY_CONTEXT:
            self._known.add(secret, kind)
        return self._placeholders.tag(secret, kind)

    # -- the walk ------------------------------------------------------------------------

    def _value(self, obj: Any, key: str | None) -> Any:
        if isinstance(obj, str):
            if key is not None and is_secret_key(key) and not is_placeholder_value(obj):
                return self._tag(obj, kind_of_key(key)) if not is_placeholder_text(obj) else obj
            return self.text(obj)
        if isinstance(obj, dict):
            return {(self.text(k) if isinstance(k, str) else k): self._value(v, _key(k))
                    for k, v in obj.items()}
        if isinstance(obj, list):
            return [self._value(v, None) for v in obj]
        if isinstance(obj, tuple):
            return tuple(self._value(v, None) for v in obj)
        if isinstance(obj, bytes | bytearray):
            text = bytes(obj).decode("utf-8", "surrogateescape")
            return type(obj)(self._value(text, key).encode("utf-8", "surrogateescape"))
        return obj

    def _fields(self, data: dict[str, Any]) -> dict[str, Any]:
        """A line's or content part's fields: structural ones kept, the rest redacted."""
        image = data.get("type") == "image"
        out: dict[str, Any] = {}
        for k, v in data.items():
            if k in _STRUCTURAL or (image and k == "data"):
                out[k] = v
            elif k == "cleared" and isinstance(v, dict):  # entry ids -> placeholder text
                out[k] = {eid: self._value(text, None) for eid, text in v.items()}
            elif isinstance(v, dict):
                out[k] = self._fields(v) if _is_part(v) else self._value(v, k)
            elif isinstance(v, list):
                out[k] = [self._fields(x) if isinstance(x, dict) and _is_part(x)
                          else self._value(x, None) for x in v]
            else:
                out[k] = self._value(v, k)
        return out


def _key(k: Any) -> str | None:
    return k if isinstance(k, str) else None


def _is_part(d: dict[str, Any]) -> bool:
    """True for a nested struct of a line (a message, a content part, a tool call)."""
    return isinstance(d.get("type"), str) or "role" in d or ("name" in d and "arguments" in d)
