"""``Redactor``: secrets out of text, JSON-like values and session entries, at every exit.

The stored session is never changed: ``entry`` returns a redacted copy. One ``Redactor``
gives each secret one tag for its whole life (``[REDACTED:aws-key:1]`` in the first entry and
in the last), so use one per export, view or copy.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

from .._messages import Message
from ..entries import Line, from_dict, to_dict
from ._detectors import BUILTIN, Detector
from ._entropy import HighEntropy
from ._keywords import Assignments, is_secret_key, kind_of_key
from ._patterns import UserPattern, compile_pattern
from ._placeholders import KnownSecrets, Placeholders, is_placeholder_text, is_placeholder_value
from ._plugins import PluginGate, plugin_detectors
from ._prefilter import Prefilter, anchored
from ._scanner import scan

__all__ = ["BATCH_CHARS", "BATCH_TEXTS", "SEPARATOR", "Redactor"]

T = TypeVar("T")
L = TypeVar("L", bound=Line)
Take = Callable[[str], str]  # what the walk does with each text it meets

SEPARATOR = "\n\x00\u241e\x00\n"
"""What ``Redactor.texts`` puts between the texts of a batch: no secret holds a NUL."""
BATCH_CHARS = 1 << 16
"""About how many characters go to the detectors at once: few enough that the prefilter
leaves out the detectors whose literals a batch lacks, many enough that a pass's fixed cost
is spread thin."""
BATCH_TEXTS = 4000

# Fields of an entry's line that hold no user content: ids, times, tags, provider names, a
# thinking signature (opaque and checked by the provider). Everything else is redacted.
_STRUCTURAL = frozenset((
    "id", "parent_id", "timestamp", "type", "tool_call_id", "target_id", "first_kept_entry_id",
    "from_id", "role", "signature", "mime_type", "model", "provider", "model_id",
    "stop_reason", "thinking_level", "custom_type", "version", "created_at", "parent_session",
    "is_error", "display", "redacted", "from_hook", "pinned", "usage", "kind",
))


# Keys that name another entry, kept wherever they are (an import's details, a sub-agent
# link): ids of other tools look random enough for the entropy detector.
_ENTRY_REFS = frozenset(("first_kept_entry_id", "summary_entry", "first_entry_id",
                         "last_entry_id"))

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
        # detect-secrets' plugins: imported now when required, else behind a gate that
        # imports them for the first text that may hold what they find (most never do)
        self._gate = PluginGate() if detect_secrets is None and self._enabled else None
        self._opening = threading.Lock()
        plugins: Sequence[Detector] = (
            [self._gate] if self._gate is not None else
            plugin_detectors(True) if detect_secrets and self._enabled else [])
        self._detectors: list[Detector] = [] if not self._enabled else [
            self._known, *BUILTIN, *self._user, Assignments(), *plugins, HighEntropy()]
        self._prefilter = Prefilter(self._detectors)
        # a pattern anchored at the text's start or end must see each text alone
        self._one_by_one = any(anchored(p.source) for p in self._user)

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
        known = len(self._known)
        hits = scan(s, self._select(s))
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
        done = "".join(out)
        if len(self._known) > known:  # found by context here: also where it came earlier
            done = self._known.replace_new(done, known, self._placeholders)
        return done

    def _select(self, s: str) -> list[Detector]:
        """The detectors to run on ``s``; the plugins in place of their gate once a text
        passes it."""
        chosen = self._prefilter.select(s)
        gate = self._gate  # never reset: a thread may still hold a selection with it
        if gate is None or gate not in chosen:
            return chosen
        with self._opening:  # two threads at the gate: one puts the plugins in its place
            if gate in self._detectors:
                detectors = list(self._detectors)
                k = detectors.index(gate)
                detectors[k:k + 1] = plugin_detectors(None)
                self._detectors, self._prefilter = detectors, Prefilter(detectors)
        return self._prefilter.select(s)

    def texts(self, texts: Sequence[str]) -> list[str]:
        """Every text of ``texts`` redacted, in order: what ``text`` gives for each, in a
        fraction of the time for many short ones.

        Texts go to the detectors many at a time, joined by a separator no secret can
        hold (a pass has a fixed cost far above that of a short text: a session's 50,000
        texts take a second this way, a minute one by one). A batch whose separators do not
        all come back (a text that holds one, a secret across two texts) is redone text by
        text; the tags are the same either way.
        """
        if not self._enabled:
            return list(texts)
        out: list[str] = []
        batch: list[str] = []
        size = 0
        for t in texts:
            batch.append(t)
            size += len(t)
            if size >= BATCH_CHARS or len(batch) >= BATCH_TEXTS:
                out += self._batch(batch)
                batch, size = [], 0
        out += self._batch(batch)
        return out

    def _batch(self, texts: list[str]) -> list[str]:
        if len(texts) <= 1 or self._one_by_one:
            return [self.text(t) for t in texts]
        out = self.text(SEPARATOR.join(texts)).split(SEPARATOR) \
            if not any(SEPARATOR in t for t in texts) else []
        if len(out) != len(texts):
            out = [self.text(t) for t in texts]
        return out

    def value(self, obj: T) -> T:
        """A same-shaped copy of a JSON-like value with every string redacted.

        Dict keys are redacted like any string (a token used as a key is still a token); the
        value of a key that names a secret (``"password"``, ``"api_key"``, ``"DB_TOKEN"``...)
        is replaced whole when it is a string, whatever it looks like. Bytes are read as
        UTF-8 (undecodable bytes kept as they were); other scalars are returned as they are.
        """
        if not self._enabled:
            return obj
        return self._batched(lambda o, take: self._value(o, None, take), [obj])[0]  # type: ignore[no-any-return]

    def entries(self, entries: Iterable[L]) -> list[L]:
        """A redacted copy of each session line (an entry, or the header), in order.

        Every string that holds content is redacted: message text, tool call arguments and
        results, thinking, compaction and branch summaries, labels, names, custom data,
        unknown fields and unknown entry types. Ids, timestamps, roles, model names, image
        data and thinking signatures are kept, so each copy is a valid entry with the same
        place in the tree. The entries given are not changed; their texts go to the
        detectors together (``texts``), so many entries cost little more than one.
        """
        data = [to_dict(e) for e in entries]
        if self._enabled:
            data = self._batched(self._fields, data)
        return [from_dict(d) for d in data]  # type: ignore[misc]  # the same type: same tag

    def entry(self, entry: L) -> L:
        """A redacted copy of one session line (see ``entries``)."""
        return self.entries([entry])[0]

    def messages(self, messages: Iterable[Message]) -> list[Message]:
        """A redacted copy of each message (what ``entries`` does to a message entry's)."""
        if not self._enabled:
            return list(messages)
        return [Message.from_dict(d) for d in
                self._batched(self._fields, [m.to_dict() for m in messages])]

    def message(self, message: Message) -> Message:
        """A redacted copy of one message (see ``messages``)."""
        return self.messages([message])[0]

    def _tag(self, secret: str, kind: str) -> str:
        if kind in _BY_CONTEXT:
            self._known.add(secret, kind)
        return self._placeholders.tag(secret, kind)

    # -- the walk ------------------------------------------------------------------------

    def _batched(self, walk: Callable[[Any, Take], Any], items: list[Any]) -> list[Any]:
        """``walk`` over each of ``items`` with every text redacted, the texts of all of
        them redacted in one ``texts`` call: a first walk collects the texts, the second
        (the same walk, so the same order) puts each one's redacted form in its place."""
        seen: list[str] = []

        def collect(s: str) -> str:
            seen.append(s)
            return s

        for item in items:
            walk(item, collect)
        done = iter(self.texts(seen))
        return [walk(item, lambda _s: next(done)) for item in items]

    def _value(self, obj: Any, key: str | None, take: Take) -> Any:
        if isinstance(obj, str):
            if key is not None and is_secret_key(key) and not is_placeholder_value(obj):
                return self._tag(obj, kind_of_key(key)) if not is_placeholder_text(obj) else obj
            return take(obj) if obj else obj
        if isinstance(obj, dict):
            return {(take(k) if isinstance(k, str) and k else k):
                    v if k in _ENTRY_REFS and isinstance(v, str) else self._value(v, _key(k), take)
                    for k, v in obj.items()}
        if isinstance(obj, list):
            return [self._value(v, None, take) for v in obj]
        if isinstance(obj, tuple):
            return tuple(self._value(v, None, take) for v in obj)
        if isinstance(obj, bytes | bytearray):
            text = bytes(obj).decode("utf-8", "surrogateescape")
            return type(obj)(self._value(text, key, take).encode("utf-8", "surrogateescape"))
        return obj

    def _fields(self, data: dict[str, Any], take: Take) -> dict[str, Any]:
        """A line's or content part's fields: structural ones kept, the rest redacted."""
        image = data.get("type") == "image"
        out: dict[str, Any] = {}
        for k, v in data.items():
            if k in _STRUCTURAL or (image and k == "data"):
                out[k] = v
            elif k == "cleared" and isinstance(v, dict):  # entry ids -> placeholder text
                out[k] = {eid: self._value(text, None, take) for eid, text in v.items()}
            elif isinstance(v, dict):
                out[k] = self._fields(v, take) if _is_part(v) else self._value(v, k, take)
            elif isinstance(v, list):
                out[k] = [self._fields(x, take) if isinstance(x, dict) and _is_part(x)
                          else self._value(x, None, take) for x in v]
            else:
                out[k] = self._value(v, k, take)
        return out


def _key(k: Any) -> str | None:
    return k if isinstance(k, str) else None


def _is_part(d: dict[str, Any]) -> bool:
    """True for a nested struct of a line (a message, a content part, a tool call)."""
    return isinstance(d.get("type"), str) or "role" in d or ("name" in d and "arguments" in d)
