"""The commands that act on a whole session: COM_RESET_CONNECTION, COM_CHANGE_USER, KILL.

Each runs as a task of the session (:meth:`proxy.session.Session.spawn`) and ends the command
with the proxy's own reply.  A reset or a new login leaves the session's backend connections
none of its state; ``KILL`` reaches other sessions only through their public methods and the
servers only as ``KILL [QUERY]`` of their own threads (see :mod:`proxy.threads`).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from consistent.errnos import ER
from consistent.errors import RemoteProtocolError
from consistent.policy import PRIMARY
from consistent.protocol import parse_change_user
from proxy.backends import BackendUnavailable
from proxy.clientlogin import AccessDenied
from proxy.errors import ReplayFailed
from proxy.stream import ConnectionClosed
from proxy.threads import Kill

if TYPE_CHECKING:
    from proxy.session import Session

__all__ = ["change_user", "kill", "reset_connection"]

logger = logging.getLogger(__name__)


def _forget_state(session: Session, *, new_login: bool = False) -> None:
    session.backends.reset(new_login=new_login)
    session.handler.prepared.clear()
    session.last_insert_id = 0


async def reset_connection(session: Session) -> None:
    """COM_RESET_CONNECTION: the session as just logged in (its schema stays)."""
    _forget_state(session)
    policy = session.policy
    policy.reset()
    policy.level = session.user_level or session.config.level
    if session.schema is not None and session.schema != session.database:
        session.database = session.schema
    session.handler.reply_ok()


async def change_user(session: Session, payload: bytes) -> None:
    """COM_CHANGE_USER: authenticate again, then the session as the new user just logged in."""
    handler = session.handler
    request = parse_change_user(payload, session.caps)
    client = session.client
    client.packet_mode()
    # Anything the client already sent after the command is its auth response.
    leftover = session.reader.take_all()
    if leftover:
        client.feed(leftover)
    try:
        account, seq = await session.host.authenticator.authenticate(
            client,
            username=request.username,
            plugin=request.auth_plugin_name or "mysql_native_password",
            auth_response=request.auth_response,
            nonce=session.nonce,
            seq=handler.reply_seq - 1,
            capabilities=session.caps,
            tls=session.tls,
            host=session.peer,
        )
    except (AccessDenied, RemoteProtocolError, ConnectionClosed) as e:
        session.metrics.auth_failures += 1
        session.close(f"COM_CHANGE_USER failed: {e}")
        return
    # Another user may log in to the servers as another backend account: other pools.
    _forget_state(session, new_login=True)
    session.user = account.name
    session.user_level = account.level
    if request.charset is not None:
        session.charset = request.charset
    session.database = request.database or None
    session.router.set_schema(session.database)
    session.policy.reset()
    session.policy.level = session.user_level or session.config.level
    handler.reply_seq = (seq + 1) & 0xFF
    client.stream(session.reader.on_data)
    handler.reply_ok()


async def kill(session: Session, found: Kill) -> None:
    """KILL [QUERY] of one session (by proxy id, or by its primary connection's thread
    id) or of a user's sessions: only the caller's own user's (see :mod:`proxy.threads`)."""
    handler = session.handler
    sessions = session.host.sessions
    if found.by_user:
        name = found.user or session.user
        # The caller's other sessions: its own ends with the reply it waits for.
        targets = [
            s for s in sessions.values() if s.user == name == session.user and s is not session
        ]
    else:
        thread_id = found.thread_id or 0
        target = sessions.get(thread_id) or next(
            (s for s in sessions.values() if s.owns_thread(PRIMARY, thread_id)), None
        )
        if target is None:
            handler.reply_err(
                ER.NO_SUCH_THREAD, "HY000", f"Unknown thread id: {thread_id}", handler.reply_seq
            )
            return
        if target.user != session.user:
            handler.reply_err(
                ER.KILL_DENIED_ERROR,
                "HY000",
                f"You are not owner of thread {thread_id}",
                handler.reply_seq,
            )
            return
        targets = [target]
    itself = False
    for victim in targets:
        if victim is session:
            itself = True
            continue
        running = victim.running_threads()
        if not found.query_only:
            victim.abort()  # its idle backend connections close with it
        await _interrupt(session, running, query_only=found.query_only)
    if itself and found.query_only:
        handler.reply_err(
            ER.QUERY_INTERRUPTED, "70100", "Query execution was interrupted", handler.reply_seq
        )
    elif itself:
        handler.reply_err(ER.CONNECTION_KILLED, "70100", "Connection was killed", handler.reply_seq)
        session.close("killed by its own KILL")
    else:
        handler.reply_ok()


async def _interrupt(session: Session, running: list[tuple[str, int]], *, query_only: bool) -> None:
    """Stop what another session's backend connections are running, with ``KILL
    [QUERY]`` of exactly those server threads, sent on this session's own connections
    (the same proxy user, so the same backend account)."""
    verb = "KILL QUERY" if query_only else "KILL"
    for server, thread_id in running:
        try:
            mine = await session.backends.connect_ready(server)
            await mine.query(f"{verb} {thread_id:d}", timeout=5.0)
        except (BackendUnavailable, ConnectionClosed, TimeoutError, ReplayFailed) as e:
            logger.warning("%s %d on %s failed: %s", verb, thread_id, server, e)
