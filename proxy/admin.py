"""The admin HTTP endpoint: ``/metrics`` (Prometheus text) and ``/status`` (JSON).

It listens where the configuration says (loopback by default; any address is allowed, and
every request needs the configured token wherever it listens), as ``Authorization: Bearer
<token>`` or ``?token=<token>``; the comparison is constant-time.  With ``tls_cert`` and
``tls_key`` configured it speaks HTTPS (stdlib ``ssl``), which a token sent over a network
deserves.  The server is a deliberately small HTTP/1.0-style responder
on asyncio streams: GET only, one request per connection, bounded request size and time.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hmac
import json
import logging
import ssl
from collections.abc import Callable
from typing import Final
from urllib.parse import parse_qs, urlsplit

from proxy.config import AdminConfig, ConfigError

__all__ = ["AdminServer"]

logger = logging.getLogger(__name__)

_MAX_REQUEST: Final = 16 * 1024
_TIMEOUT: Final = 5.0
_REASONS: Final = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    404: "Not Found",
    405: "Method Not Allowed",
}
_PROMETHEUS: Final = "text/plain; version=0.0.4; charset=utf-8"


class AdminServer:
    """Serves ``/metrics`` from ``metrics()`` and ``/status`` from ``status()``."""

    def __init__(
        self,
        config: AdminConfig,
        *,
        metrics: Callable[[], bytes],
        status: Callable[[], object],
    ) -> None:
        self._config = config
        self._metrics = metrics
        self._status = status
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def port(self) -> int:
        if self._server is None or not self._server.sockets:
            raise RuntimeError("the admin endpoint is not listening")
        return int(self._server.sockets[0].getsockname()[1])

    async def start(self) -> None:
        config = self._config
        context = None
        if config.tls_cert is not None and config.tls_key is not None:
            context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            try:
                context.load_cert_chain(config.tls_cert, config.tls_key)
            except (OSError, ssl.SSLError) as e:
                raise ConfigError(f"[admin] tls_cert/tls_key cannot be loaded: {e}") from e
        listen = config.listen
        self._server = await asyncio.start_server(
            self._accept, listen.host, listen.port, ssl=context
        )
        if not listen.is_loopback:
            logger.warning(
                "the admin endpoint listens on %s, beyond this machine (%s)",
                listen.name,
                "HTTPS" if context is not None else "plain HTTP: the token travels in clear",
            )

    def set_token(self, config: AdminConfig) -> None:
        """A reload may change the token (not the address nor the certificate)."""
        self._config = dataclasses.replace(self._config, token=config.token)

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.wait(self._tasks, timeout=_TIMEOUT)
        if self._server is not None:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(_TIMEOUT):
                    await self._server.wait_closed()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        try:
            async with asyncio.timeout(_TIMEOUT):
                status, content_type, body = await self._handle(reader)
                head = (
                    f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}\r\n"
                    f"Content-Type: {content_type}\r\n"
                    f"Content-Length: {len(body)}\r\n"
                    "Connection: close\r\n"
                )
                if status == 401:
                    head += 'WWW-Authenticate: Bearer realm="consistent-proxy"\r\n'
                writer.write(head.encode("ascii") + b"\r\n" + body)
                await writer.drain()
        except (TimeoutError, ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            if task is not None:
                self._tasks.discard(task)
            writer.close()
            with contextlib.suppress(OSError, TimeoutError):
                async with asyncio.timeout(_TIMEOUT):
                    await writer.wait_closed()

    async def _handle(self, reader: asyncio.StreamReader) -> tuple[int, str, bytes]:
        try:
            raw = await reader.readuntil(b"\r\n\r\n")
        except asyncio.LimitOverrunError:
            return 400, "text/plain", b"request too large\n"
        if len(raw) > _MAX_REQUEST:
            return 400, "text/plain", b"request too large\n"
        lines = raw.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ")
        if len(parts) != 3:
            return 400, "text/plain", b"bad request\n"
        method, target, _version = parts
        if method != "GET":
            return 405, "text/plain", b"GET only\n"
        headers = {}
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            if sep:
                headers[name.strip().lower()] = value.strip()
        url = urlsplit(target)
        token = ""
        auth = headers.get("authorization", "")
        if auth.lower().startswith("bearer "):
            token = auth[7:].strip()
        else:
            token = (parse_qs(url.query).get("token") or [""])[0]
        if not hmac.compare_digest(token.encode(), self._config.token.encode()):
            return 401, "text/plain", b"a valid token is required\n"
        if url.path == "/metrics":
            return 200, _PROMETHEUS, self._metrics()
        if url.path == "/status":
            body = json.dumps(self._status(), indent=2, default=str).encode() + b"\n"
            return 200, "application/json", body
        return 404, "text/plain", b"not found: try /metrics or /status\n"
