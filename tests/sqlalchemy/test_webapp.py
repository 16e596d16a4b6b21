"""The example web application (``examples/webapp``) through Flask's test client: a write, then
a read on a replica that still sees it, with the token carried by a cookie between requests."""

from __future__ import annotations

from collections.abc import Iterator
from types import ModuleType
from typing import TYPE_CHECKING

import pytest

from .conftest import load_example, notes_of

if TYPE_CHECKING:
    from flask import Flask

    from .conftest import Backend


@pytest.fixture(scope="module")
def webapp() -> ModuleType:
    pytest.importorskip("flask")
    return load_example("app.py")


@pytest.fixture
def app(webapp: ModuleType, backend: Backend) -> Iterator[Flask]:
    app: Flask = webapp.create_app(backend.url(wait_timeout="3"))
    backend.catch_up()
    yield app
    app.extensions["consistent_engine"].dispose()


def test_the_next_request_reads_the_write_on_a_replica(
    app: Flask, webapp: ModuleType, backend: Backend
) -> None:
    user, stranger = app.test_client(), app.test_client()
    assert user.get_cookie(webapp.TOKEN_COOKIE) is None
    backend.pause(0)
    backend.pause(1)  # both replicas miss the write until resumed
    created = user.post("/api/notes", json={"text": "hello"})
    assert created.status_code == 201
    cookie = user.get_cookie(webapp.TOKEN_COOKIE)
    assert cookie is not None
    assert cookie.value == created.get_json()["token"] != ""

    # without the cookie, a replica answers at once and does not have the note yet
    unseen = stranger.get("/api/notes").get_json()
    assert notes_of(unseen) == []
    assert unseen["served_by"]["role"] == "replica"

    timer = backend.resume_all_later()
    try:
        seen = user.get("/api/notes").get_json()
    finally:
        timer.join()
    assert notes_of(seen) == ["hello"]
    assert seen["served_by"]["role"] == "replica"
    assert seen["served_by"]["reason"] == "waited"
    assert seen["served_by"]["token"] == cookie.value


def test_the_page_shows_a_posted_note_after_the_redirect(
    app: Flask, webapp: ModuleType, backend: Backend
) -> None:
    client = app.test_client()
    response = client.post("/notes", data={"text": "<b>bold</b> move"}, follow_redirects=True)
    assert response.status_code == 200
    page = response.get_data(as_text=True)
    assert "&lt;b&gt;bold&lt;/b&gt; move" in page  # escaped, and there
    assert client.get_cookie(webapp.TOKEN_COOKIE) is not None


def test_a_tampered_cookie_is_ignored(app: Flask, webapp: ModuleType) -> None:
    client = app.test_client()
    client.set_cookie(webapp.TOKEN_COOKIE, "not-a-token")
    response = client.get("/api/notes")
    assert response.status_code == 200
    assert response.get_json()["served_by"]["token"] == ""


def test_it_runs_on_the_embedded_emulator_by_default(
    webapp: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DATABASE_URL", raising=False)
    app = webapp.create_app()
    try:
        client = app.test_client()
        assert client.post("/api/notes", json={"text": "demo"}).status_code == 201
        body = client.get("/api/notes").get_json()
        assert notes_of(body) == ["demo"]
        assert body["served_by"]["role"] == "replica"
    finally:
        app.extensions["consistent_engine"].dispose()
        app.extensions["consistent_topology"].close()
