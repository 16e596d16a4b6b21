"""The FastAPI example (``examples/webapp/app_async.py``, on ``mysql+consistent_async``) through
FastAPI's test client: a write, then a read on a replica that still sees it, with the token
carried by a cookie (or a header) between requests; the same scenarios as the Flask example's
(``test_webapp.py``).

One client per application: the test client runs the application in one event loop for the
whole ``with`` block (the pool's connections belong to it), so the "stranger" without the
token is the same client with its cookies cleared."""

from __future__ import annotations

from collections.abc import Iterator
from types import ModuleType
from typing import TYPE_CHECKING

import pytest

from .conftest import load_example, notes_of

if TYPE_CHECKING:
    from fastapi.testclient import TestClient

    from .conftest import Backend


@pytest.fixture(scope="module")
def webapp() -> ModuleType:
    pytest.importorskip("fastapi")
    pytest.importorskip("httpx")
    return load_example("app_async.py")


@pytest.fixture
def client(webapp: ModuleType, backend: Backend) -> Iterator[TestClient]:
    from fastapi.testclient import TestClient  # the optional extra

    app = webapp.create_app(backend.url("mysql+consistent_async", wait_timeout="3"))
    with TestClient(app) as client:  # runs the lifespan: the schema exists from here on
        backend.catch_up()
        yield client


def test_the_next_request_reads_the_write_on_a_replica(
    client: TestClient, webapp: ModuleType, backend: Backend
) -> None:
    assert client.cookies.get(webapp.TOKEN_COOKIE) is None
    backend.pause(0)
    backend.pause(1)  # both replicas miss the write until resumed
    created = client.post("/api/notes", json={"text": "hello"})
    assert created.status_code == 201
    cookie = client.cookies.get(webapp.TOKEN_COOKIE)
    assert cookie is not None
    assert cookie == created.json()["token"] != ""

    # without the cookie, a replica answers at once and does not have the note yet
    client.cookies.clear()
    unseen = client.get("/api/notes").json()
    assert notes_of(unseen) == []
    assert unseen["served_by"]["role"] == "replica"
    assert unseen["served_by"]["token"] == ""

    client.cookies.set(webapp.TOKEN_COOKIE, cookie)
    timer = backend.resume_all_later()
    try:
        seen = client.get("/api/notes").json()
    finally:
        timer.join()
    assert notes_of(seen) == ["hello"]
    assert seen["served_by"]["role"] == "replica"
    assert seen["served_by"]["reason"] == "waited"
    assert seen["served_by"]["token"] == cookie


def test_the_token_header_works_without_cookies(
    client: TestClient, webapp: ModuleType, backend: Backend
) -> None:
    backend.pause_all()
    token = client.post("/api/notes", json={"text": "by header"}).json()["token"]
    client.cookies.clear()
    timer = backend.resume_all_later()
    try:
        seen = client.get("/api/notes", headers={webapp.TOKEN_HEADER: token}).json()
    finally:
        timer.join()
    assert notes_of(seen) == ["by header"]
    assert seen["served_by"]["reason"] == "waited"


def test_the_page_shows_a_posted_note_after_the_redirect(
    client: TestClient, webapp: ModuleType
) -> None:
    response = client.post("/notes", data={"text": "<b>bold</b> move"}, follow_redirects=True)
    assert response.status_code == 200
    assert response.history[0].status_code == 303
    assert "&lt;b&gt;bold&lt;/b&gt; move" in response.text  # escaped, and there
    assert client.cookies.get(webapp.TOKEN_COOKIE) is not None


def test_a_tampered_cookie_is_ignored(client: TestClient, webapp: ModuleType) -> None:
    client.cookies.set(webapp.TOKEN_COOKIE, "not-a-token")
    response = client.get("/api/notes")
    assert response.status_code == 200
    assert response.json()["served_by"]["token"] == ""


def test_it_runs_on_the_embedded_emulator_by_default(
    webapp: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fastapi.testclient import TestClient  # the optional extra

    monkeypatch.delenv("DATABASE_URL", raising=False)
    app = webapp.create_app()
    try:
        with TestClient(app) as client:
            assert client.post("/api/notes", json={"text": "demo"}).status_code == 201
            body = client.get("/api/notes").json()
            assert notes_of(body) == ["demo"]
            assert body["served_by"]["role"] == "replica"
    finally:
        app.state.topology.close()
