"""A small Flask application on ``mysql+consistent``: post a note, see it on the next page.

The page after a write is read on a replica, and it still shows the write: the session's
consistency token travels in a cookie from the request that wrote to the request that reads,
and the read waits on the replica for exactly that token (or goes to the primary if the
replica cannot catch up in time).  Nothing else in the application knows about replicas.

Run it (an emulated primary with two lagging replicas starts inside the process)::

    .venv/bin/python examples/webapp/app.py            # http://127.0.0.1:5000/
    DATABASE_URL='mysql+consistent://app:pw@db1/notes?replica=db2:3306' \
        .venv/bin/python examples/webapp/app.py        # or your own servers

Endpoints: ``GET /`` (the page), ``POST /notes`` (form, then redirect to ``/``),
``GET /api/notes`` and ``POST /api/notes`` (JSON; the read says which server served it).
"""

from __future__ import annotations

import atexit
import logging
import os
from typing import Any, Final

import sqlalchemy as sa
from flask import Flask, Response, g, jsonify, redirect, render_template_string, request, url_for
from sqlalchemy import orm
from werkzeug.wrappers import Response as BaseResponse

import consistent.dbapi
import consistent.sqlalchemy as csa
from consistent.errors import MalformedGtidSet
from consistent.policy import PRIMARY

logger = logging.getLogger(__name__)

#: The cookie that carries the session's consistency token between requests.
TOKEN_COOKIE: Final = "consistent-token"
#: Replica lag of the embedded emulator: long enough that a read right after a write would be
#: stale without the token.
DEMO_LAG: Final = "150ms..400ms"

PAGE: Final = """<!doctype html>
<title>Notes</title>
<h1>Notes</h1>
<form method="post" action="{{ url_for('add_note') }}">
  <input name="text" maxlength="200" required autofocus> <button>Add</button>
</form>
<ul>{% for note in notes %}<li>{{ note.text }}</li>{% endfor %}</ul>
<p><small>This page was read on <b>{{ served.server }}</b> ({{ served.role }},
{{ served.reason }}); your token: <code>{{ served.token or "none" }}</code></small></p>
"""


class Base(orm.DeclarativeBase):
    pass


class Note(Base):
    __tablename__ = "notes"

    id: orm.Mapped[int] = orm.mapped_column(primary_key=True)
    text: orm.Mapped[str] = orm.mapped_column(sa.String(200))


def start_emulator(lag: str = DEMO_LAG) -> tuple[str, Any]:
    """Start an emulated primary and two replicas in this process: their URL, and the
    topology (closed at exit, or by ``close()``)."""
    from consistent.emulator import start_topology  # noqa: PLC0415 - only for the demo

    topology = start_topology(replicas=2, lag=lag)
    atexit.register(topology.close)
    topology.create_database("notes")
    primary = topology.connection_params(None, "notes")
    replicas = "&".join(f"replica={r.host}:{r.port}" for r in topology.replicas)
    return f"{primary.url('mysql+consistent')}?{replicas}&wait_timeout=2", topology


def served_by(session: orm.Session) -> dict[str, str]:
    """Where the session's last statement ran and why (from the DB-API's last decision)."""
    raw: object = session.connection().connection.dbapi_connection
    decision = raw.last_decision if isinstance(raw, consistent.dbapi.Connection) else None
    if decision is None:
        return {"server": "?", "role": "?", "reason": "?", "token": csa.token(session)}
    return {
        "server": decision.target,
        "role": "primary" if decision.target == PRIMARY else "replica",
        "reason": decision.reason.value,
        "token": csa.token(session),
    }


def create_app(database_url: str | None = None, **engine_options: Any) -> Flask:
    """The application; without a URL (and without ``DATABASE_URL``) it brings its own
    emulated topology."""
    url = database_url or os.environ.get("DATABASE_URL")
    topology = None
    if not url:
        url, topology = start_emulator()
    engine = sa.create_engine(url, **engine_options)
    Base.metadata.create_all(engine)
    sessions = orm.sessionmaker(engine, expire_on_commit=False)
    app = Flask(__name__)
    app.extensions["consistent_engine"] = engine
    app.extensions["consistent_topology"] = topology

    @app.before_request
    def open_session() -> None:
        g.db = sessions()
        try:
            csa.require(g.db, request.cookies.get(TOKEN_COOKIE))
        except MalformedGtidSet:
            logger.info("ignoring a malformed consistency token cookie")

    @app.after_request
    def carry_token(response: Response) -> Response:
        db: orm.Session | None = g.get("db")
        token = csa.token(db) if db is not None else ""
        if token:
            response.set_cookie(TOKEN_COOKIE, token, httponly=True, samesite="Lax")
        return response

    @app.teardown_request
    def close_session(exc: BaseException | None) -> None:
        db: orm.Session | None = g.pop("db", None)
        if db is not None:
            db.close()

    def list_notes() -> tuple[list[Note], dict[str, str]]:
        notes = list(g.db.scalars(sa.select(Note).order_by(Note.id)))
        served = served_by(g.db)
        g.db.commit()  # read-only: nothing is sent, the connection goes back to the pool
        return notes, served

    def add(text: str) -> Note:
        note = Note(text=text[:200])
        g.db.add(note)
        g.db.commit()
        return note

    @app.get("/")
    def index() -> str:
        notes, served = list_notes()
        return render_template_string(PAGE, notes=notes, served=served)

    @app.post("/notes")
    def add_note() -> BaseResponse:
        add(request.form.get("text", ""))
        return redirect(url_for("index"), code=303)

    @app.get("/api/notes")
    def api_list() -> Response:
        notes, served = list_notes()
        return jsonify(notes=[{"id": n.id, "text": n.text} for n in notes], served_by=served)

    @app.post("/api/notes")
    def api_add() -> tuple[Response, int]:
        body = request.get_json(silent=True) or {}
        note = add(str(body.get("text", "")))
        return jsonify(id=note.id, token=csa.token(g.db)), 201

    return app


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO)
    create_app().run(host="127.0.0.1", port=int(os.environ.get("PORT", "5000")))
