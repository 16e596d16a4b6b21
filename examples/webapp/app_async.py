"""The notes application on FastAPI and ``mysql+consistent_async``: asyncio end to end.

The same application as ``app.py`` (Flask): the page after a write is read on a replica and
still shows the write, because the session's consistency token travels in a cookie (or the
``X-Consistent-Token`` header) from the request that wrote to the request that reads.  Each
request gets an ``AsyncSession``; ``consistent.sqlalchemy.require()`` hands it the request's
token and ``consistent.sqlalchemy.token()`` gives the response its new one.

Run it (an emulated primary with two lagging replicas starts inside the process)::

    .venv/bin/python examples/webapp/app_async.py          # http://127.0.0.1:8000/
    DATABASE_URL='mysql+consistent_async://app:pw@db1/notes?replica=db2:3306' \\
        .venv/bin/python examples/webapp/app_async.py      # or your own servers

Endpoints: ``GET /`` (the page), ``POST /notes`` (form, then redirect to ``/``),
``GET /api/notes`` and ``POST /api/notes`` (JSON; the read says which server served it).
"""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated, Any

import sqlalchemy as sa
from fastapi import Body, Depends, FastAPI, Form, Request, Response
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse
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
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker, create_async_engine

import consistent.sqlalchemy as csa
from consistent.errors import MalformedGtidSet

__all__ = ["TOKEN_COOKIE", "TOKEN_HEADER", "create_app"]

logger = logging.getLogger(__name__)


async def where_read(session: AsyncSession) -> dict[str, str]:
    """Where the session's last statement ran and why (from the connection's last decision)."""
    connection = await session.connection()
    raw = (await connection.get_raw_connection()).driver_connection
    return served_by(raw, csa.token(session))


def carry_token(response: Response, session: AsyncSession) -> None:
    """Give the client the session's token for its next request."""
    token = csa.token(session)
    if token:
        response.set_cookie(TOKEN_COOKIE, token, httponly=True, samesite="lax")


async def db_session(request: Request) -> AsyncIterator[AsyncSession]:
    """The request's ORM session, told the token the client brought (a cookie or a header)."""
    sessions: async_sessionmaker[AsyncSession] = request.app.state.sessions
    async with sessions() as session:
        token = request.headers.get(TOKEN_HEADER) or request.cookies.get(TOKEN_COOKIE)
        try:
            csa.require(session, token)
        except MalformedGtidSet:
            logger.info("ignoring a malformed consistency token")
        yield session


Session = Annotated[AsyncSession, Depends(db_session)]


def create_app(database_url: str | None = None, **engine_options: Any) -> FastAPI:
    """The application; without a URL (and without ``DATABASE_URL``) it brings its own
    emulated topology.  The engine connects in the application's event loop: the schema is
    created at startup and the pool closed at shutdown (FastAPI's lifespan)."""
    url = database_url or os.environ.get("DATABASE_URL")
    topology = None
    if not url:
        url, topology = start_emulator("mysql+consistent_async")
    engine = create_async_engine(url, **engine_options)
    sessions = async_sessionmaker(engine, expire_on_commit=False)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with engine.begin() as conn:
            await conn.run_sync(Base.metadata.create_all)
        yield
        await engine.dispose()

    app = FastAPI(lifespan=lifespan)
    app.state.engine = engine
    app.state.topology = topology
    app.state.sessions = sessions

    async def list_notes(session: AsyncSession) -> tuple[list[Note], dict[str, str]]:
        notes = list(await session.scalars(sa.select(Note).order_by(Note.id)))
        served = await where_read(session)
        await session.commit()  # read-only: nothing is sent, the connection goes back to the pool
        return notes, served

    async def add(session: AsyncSession, text: str) -> Note:
        note = Note(text=text[:200])
        session.add(note)
        await session.commit()
        return note

    @app.get("/", response_class=HTMLResponse)
    async def index(session: Session) -> HTMLResponse:
        notes, served = await list_notes(session)
        response = HTMLResponse(render_page(notes, served, "/notes"))
        carry_token(response, session)
        return response

    @app.post("/notes")
    async def add_note(session: Session, text: Annotated[str, Form()] = "") -> RedirectResponse:
        await add(session, text)
        response = RedirectResponse("/", status_code=303)
        carry_token(response, session)
        return response

    @app.get("/api/notes")
    async def api_list(session: Session) -> JSONResponse:
        notes, served = await list_notes(session)
        body = {"notes": [note_json(n) for n in notes], "served_by": served}
        response = JSONResponse(body)
        carry_token(response, session)
        return response

    @app.post("/api/notes", status_code=201)
    async def api_add(
        session: Session, text: Annotated[str, Body(embed=True)] = ""
    ) -> JSONResponse:
        note = await add(session, text)
        response = JSONResponse({"id": note.id, "token": csa.token(session)}, status_code=201)
        carry_token(response, session)
        return response

    return app


if __name__ == "__main__":
    import uvicorn

    logging.basicConfig(level=logging.INFO)
    uvicorn.run(create_app(), host="127.0.0.1", port=int(os.environ.get("PORT", "8000")))
