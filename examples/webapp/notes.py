"""What the two example applications share: the model, the emulated topology, the page, and
where a read ran.  ``app.py`` is the Flask application on ``mysql+consistent``;
``app_async.py`` the FastAPI one on ``mysql+consistent_async``.  Only the framework and the
``await``s differ between them."""

from __future__ import annotations

import atexit
from collections.abc import Iterable
from html import escape
from typing import Any, Final

import sqlalchemy as sa
from sqlalchemy import orm

from consistent.policy import PRIMARY

#: The cookie that carries the session's consistency token between requests.
TOKEN_COOKIE: Final = "consistent-token"
#: The same token in a request header, for API clients that keep no cookies.
TOKEN_HEADER: Final = "X-Consistent-Token"
#: Replica lag of the embedded emulator: long enough that a read right after a write would be
#: stale without the token.
DEMO_LAG: Final = "150ms..400ms"

PAGE: Final = """<!doctype html>
<title>Notes</title>
<h1>Notes</h1>
<form method="post" action="{action}">
  <input name="text" maxlength="200" required autofocus> <button>Add</button>
</form>
<ul>{items}</ul>
<p><small>This page was read on <b>{server}</b> ({role},
{reason}); your token: <code>{token}</code></small></p>
"""


class Base(orm.DeclarativeBase):
    pass


class Note(Base):
    __tablename__ = "notes"

    id: orm.Mapped[int] = orm.mapped_column(primary_key=True)
    text: orm.Mapped[str] = orm.mapped_column(sa.String(200))


def start_emulator(driver: str, lag: str = DEMO_LAG) -> tuple[str, Any]:
    """Start an emulated primary and two replicas in this process: a ``driver`` URL for them
    (``mysql+consistent`` or ``mysql+consistent_async``), and the topology (closed at exit,
    or by ``close()``)."""
    from consistent.emulator import start_topology  # noqa: PLC0415 - only for the demo

    topology = start_topology(replicas=2, lag=lag)
    atexit.register(topology.close)
    topology.create_database("notes")
    primary = topology.connection_params(None, "notes")
    replicas = "&".join(f"replica={r.host}:{r.port}" for r in topology.replicas)
    return f"{primary.url(driver)}?{replicas}&wait_timeout=2", topology


def served_by(raw: object, token: str) -> dict[str, str]:
    """Where the last statement of ``raw`` (a ``consistent`` connection of either form) ran
    and why, from its last routing decision, with the session's ``token``."""
    decision = getattr(raw, "last_decision", None)
    if decision is None:
        return {"server": "?", "role": "?", "reason": "?", "token": token}
    return {
        "server": decision.target,
        "role": "primary" if decision.target == PRIMARY else "replica",
        "reason": decision.reason.value,
        "token": token,
    }


def render_page(notes: Iterable[Note], served: dict[str, str], action: str) -> str:
    """The HTML page: the form posting to ``action``, the notes, and where they were read."""
    items = "".join(f"<li>{escape(note.text)}</li>" for note in notes)
    return PAGE.format(
        action=escape(action),
        items=items,
        server=escape(served["server"]),
        role=escape(served["role"]),
        reason=escape(served["reason"]),
        token=escape(served["token"] or "none"),
    )


def note_json(note: Note) -> dict[str, Any]:
    return {"id": note.id, "text": note.text}
