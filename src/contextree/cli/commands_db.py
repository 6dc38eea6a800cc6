"""``contextree db init URL``: create (or upgrade) contextree's tables in a PostgreSQL
database, the step every ``postgresql://`` command needs once per database."""

from __future__ import annotations

from typing import Annotated

import typer

from ..storage._backends import PostgresBackend
from .app import command, db_app
from .output import Out, UsageProblem, emit_json
from .sessions import address_of


@command("init", group=db_app)
def db_init_command(
    url: Annotated[str, typer.Argument(metavar="URL", help="postgresql://user@host/db (no "
                                       "#SESSION_ID).", show_default=False)],
    trigrams: Annotated[bool | None, typer.Option(
        "--trigrams/--no-trigrams", help="Turn search inside words on (pg_trgm: CONNREF "
        "finds ECONNREFUSED; appends cost more) or off. Left out: as it is (off in a new "
        "database).", show_default=False)] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")]
    = False,
) -> None:
    """Create contextree's tables in the database, or upgrade them; safe to run again and
    from several machines at once."""
    address = address_of(url)
    if not isinstance(address.backend, PostgresBackend):
        raise UsageProblem(f"`db init` takes a postgresql:// URL, not {url!r}")
    if address.session_id is not None:
        raise UsageProblem("`db init` sets up a whole database: leave #SESSION_ID off the URL")
    from ..storage.postgres import create_schema, trigrams_enabled

    version = create_schema(address.where, trigrams=trigrams)
    inside = trigrams_enabled(address.where)
    if as_json:
        emit_json({"url": address.where, "schema_version": version, "trigrams": inside})
        return
    Out().line(f"{address.where}: contextree tables ready (schema version {version}; "
               f"search inside words {'on' if inside else 'off'})")
