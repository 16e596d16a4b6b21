"""The proxy's logs: the client and the user are fields of a record, not text in its message
(JSON lines carry them as keys, text lines append them), and a successful login is a debug
record, so that a busy proxy's info log is not one line per connection."""

from __future__ import annotations

import json
import logging

import pytest

from proxy.cli import JsonFormatter, TextFormatter
from proxy.testing import ProxyThread

from .conftest import standalone_config
from .rawclient import RawClient, ServerError


def _record(message: str, **fields: str) -> logging.LogRecord:
    record = logging.LogRecord("proxy.server", logging.INFO, __file__, 1, message, (), None)
    for name, value in fields.items():
        setattr(record, name, value)
    return record


def test_json_lines_carry_the_client_and_the_user_as_fields() -> None:
    line = JsonFormatter().format(_record("login", client="10.0.0.7", user="app"))
    entry = json.loads(line)
    assert (entry["msg"], entry["client"], entry["user"]) == ("login", "10.0.0.7", "app")
    assert (entry["level"], entry["logger"]) == ("info", "proxy.server")
    assert "client" not in json.loads(JsonFormatter().format(_record("listening")))


def test_text_lines_append_the_fields() -> None:
    text = TextFormatter().format(_record("login refused: nope", client="10.0.0.7"))
    assert text.endswith("INFO proxy.server: login refused: nope (client=10.0.0.7)")
    assert TextFormatter().format(_record("listening")).endswith("proxy.server: listening")


def test_logins_are_logged_with_the_client_and_the_user_in_fields(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="proxy.server")
    with ProxyThread(standalone_config()) as proxy:  # no backend: logins only
        RawClient(proxy.port, "app", "app-secret").close()
        with pytest.raises(ServerError):
            RawClient(proxy.port, "app", "wrong")
    records = [r for r in caplog.records if r.name == "proxy.server"]
    (success,) = [r for r in records if r.getMessage() == "login"]
    assert success.levelno == logging.DEBUG
    assert (getattr(success, "client", None), getattr(success, "user", None)) == (
        "127.0.0.1",
        "app",
    )
    (refused,) = [r for r in records if r.getMessage().startswith("login refused")]
    assert refused.levelno == logging.INFO
    assert getattr(refused, "client", None) == "127.0.0.1"
    # The reason is the error the client received, verbatim; the address is no prefix of it.
    assert refused.getMessage().startswith("login refused: Access denied for user 'app'@")
