"""What a client sends cannot forge a line of the proxy's log, in either format: the
formatters alone, and the ``consistent proxy`` process refusing a user name with a newline
in it, on real MariaDB."""

from __future__ import annotations

import json
import logging
import re
import subprocess
import sys
import time
from pathlib import Path

import pymysql
import pytest

from consistent.testing.mariadb import MariaDBTopology
from proxy.logformat import JsonFormatter, TextFormatter, escape_controls

from .conftest import free_port

ROOT = Path(__file__).resolve().parents[2]
FORGED = "x\n2030-01-01 00:00:00,000 INFO proxy.server: admin logged in\r\x1b[2J\u2028"
RECORD_START = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} [A-Z]+ [\w.]+: ")


def record(message: str, *args: object) -> logging.LogRecord:
    return logging.LogRecord("proxy.server", logging.INFO, __file__, 1, message, args, None)


def test_escape_controls() -> None:
    assert escape_controls("a\nb\rc\td\\e") == "a\\nb\\rc\\td\\\\e"
    assert escape_controls("\x00\x1b\x7f\x85\u2028\u2029") == "\\x00\\x1b\\x7f\\x85\\u2028\\u2029"
    assert escape_controls("plain ünïcode") == "plain ünïcode"


def test_text_format_is_one_line_per_record_whatever_the_fields() -> None:
    formatter = TextFormatter()
    line = formatter.format(record("login refused from %s: %s", "127.0.0.1", FORGED))
    assert len(line.splitlines()) == 1
    assert "\\n2030-01-01" in line
    try:
        raise ValueError(FORGED)
    except ValueError:
        failed = record("handling %s failed", FORGED)
        failed.exc_info = sys.exc_info()
    line = formatter.format(failed)
    assert len(line.splitlines()) == 1  # the traceback too
    assert "Traceback" in line


def test_json_format_is_one_object_per_line() -> None:
    line = JsonFormatter().format(record("login refused: %s", FORGED))
    assert len(line.splitlines()) == 1
    assert json.loads(line)["msg"] == f"login refused: {FORGED}"
    assert "\u2028" not in line


def _config(topology: MariaDBTopology, port: int) -> str:
    return f"""
listen = "127.0.0.1:{port}"
shutdown_timeout = 5.0

[backends]
primary = "127.0.0.1:{topology.primary.port}"
user = "{topology.app_user}"
password = "{topology.app_password}"

[users.app]
password = "app-secret"
"""


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_a_forged_user_name_stays_in_its_line(
    mariadb_topology: MariaDBTopology, tmp_path: Path, fmt: str
) -> None:
    port = free_port()
    config = tmp_path / "proxy.toml"
    config.write_text(_config(mariadb_topology, port))
    process = subprocess.Popen(
        [sys.executable, "-m", "proxy", "--config", str(config), "--log-format", fmt],
        cwd=ROOT,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                pymysql.connect(host="127.0.0.1", port=port, user=FORGED, password="x")
            except pymysql.err.OperationalError as e:
                if e.args[0] == 1045:
                    break
            assert time.monotonic() < deadline, "the proxy did not start"
            time.sleep(0.1)
        process.terminate()
        assert process.wait(15) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(5)
    logs = process.stderr.read() if process.stderr is not None else ""
    lines = logs.split("\n")[:-1]
    assert any("login refused" in line for line in lines)
    for line in lines:
        if fmt == "json":
            json.loads(line)
        else:
            assert RECORD_START.match(line), line
    assert not any("admin logged in" in line and "login refused" not in line for line in lines)
