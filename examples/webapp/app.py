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
``GET /api/notes`` and ``POST /api/notes`` (JSON; the read says which server served it).  API
clients without cookies may send the token in the ``X-Consistent-Token`` header instead.
``app_async.py`` is the same application on FastAPI and ``mysql+consistent_async``; what they
share is in ``notes.py``.
"""

from __future__ import annotations

import logging
import os
from typing import Any

import sqlalchemy as sa
from flask import Flask, Response, g, jsonify, redirect, request, url_for
from notes import (
    TOKEN_COOKIE,
    TOKEN_HEADER,
    Base,
    Note,
    note_json,
    render_page,
    served_by,
    start_emulator,
)
from sqlalchemy import orm
from werkzeug.wrappers import Response as BaseResponse

import consistent.sqlalchemy as csa
from consistent.errors import MalformedGtidSet

__all__ = ["TOKEN_COOKIE", "TOKEN_HEADER", "create_app"]

logger = logging.getLogger(__name__)


def where_read(session: orm.Session) -> dict[str, str]:
    """Where the session's last statement ran and why (from the DB-API's last decision)."""
    raw = session.connection().connection.dbapi_connection
    return served_by(raw, csa.token(session))


def create_app(database_url: str | None = None, **engine_options: Any) -> Flask:
    """The application; without a URL (and without ``DATABASE_URL``) it brings its own
    emulated topology."""
    url = database_url or os.environ.get("DATABASE_URL")
    topology = None
    if not url:
        url, topology = start_emulator("mysql+consistent")
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
            csa.require(
                g.db, request.headers.get(TOKEN_HEADER) or request.cookies.get(TOKEN_COOKIE)
            )
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
        served = where_read(g.db)
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
        return render_page(notes, served, url_for("add_note"))

    @app.post("/notes")
    def add_note() -> BaseResponse:
        add(request.form.get("text", ""))
        return redirect(url_for("index"), code=303)

    @app.get("/api/notes")
    def api_list() -> Response:
        notes, served = list_notes()
        return jsonify(notes=[note_json(n) for n in notes], served_by=served)

    @app.post("/api/notes")
    def api_add() -> tuple[Response, int]:
        body = request.get_json(silent=True) or {}
        note = add(str(body.get("text", "")))
        return jsonify(id=note.id, token=csa.token(g.db)), 201

    return app


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO)
    create_app().run(host="127.0.0.1", port=int(os.environ.get("PORT", "5000")))
