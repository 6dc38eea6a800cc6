"""The readable formats, ``markdown`` and ``html``: one branch of a session for a person to
read (pasted into an issue or a pull request). They are written by ``contextree.view``;
``contextree export markdown|html --all`` takes the whole tree.

``export_session`` hands a writer the session already redacted (or not, as asked), so the
writers redact nothing more and print no notice of their own."""

from __future__ import annotations

from .._session import Session

# ``contextree.view`` (its server, the redaction) is imported by the writers when they run:
# registering the formats for an import of another one must not load it.


def write_markdown(session: Session, at: str | None) -> bytes:
    """The branch ending at ``at`` (default: the current leaf) as Markdown."""
    from ..view import export_markdown

    return export_markdown(session, at=at, redact=False, notice=False).encode()


def write_html(session: Session, at: str | None) -> bytes:
    """The branch ending at ``at`` as a static HTML page (no script)."""
    from ..view import export_html

    return export_html(session, at=at, redact=False, notice=False).encode()
