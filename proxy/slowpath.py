"""What a session's statements await: backend connections, waits, preludes, preparing.

:meth:`~proxy.routing.Router.execute` sends a statement at once when it can (the fast path);
everything else runs here, as a task of the session: opening or borrowing a connection and
bringing it to the session's state (:meth:`~proxy.backendset.BackendSet.connect_ready`), waits
that cannot be pipelined, the primary-state fetches of ``read_latest``, preludes, and preparing
a statement on a replica.  Each ends with the statement sent (its response then completes it,
as on the fast path) or answered.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Final

from consistent.errnos import CR, ER
from consistent.flavors import ServerRole
from consistent.policy import END_TRANSACTION, PRIMARY, Action, Decision, WaitOutcome
from consistent.policy.driver import wait_query
from proxy.backends import BackendConnection, BackendUnavailable
from proxy.errors import Broken, ReplayFailed
from proxy.stream import ConnectionClosed

if TYPE_CHECKING:
    from proxy.routing import Router
    from proxy.session import Session

__all__ = ["SlowPath"]

logger = logging.getLogger(__name__)

_EXECUTE: Final = Action.EXECUTE


class SlowPath:
    """The awaiting steps of one session's statements (see the module docstring)."""

    def __init__(self, session: Session, router: Router) -> None:
        self._session = session
        self._router = router
        self._handler = session.handler
        self._backends = session.backends

    async def direct(self, target: str, client_stmt_id: int | None) -> None:
        """Send the current command to ``target`` once its connection is ready."""
        handler = self._handler
        try:
            conn = await self._backends.connect_ready(target)
        except BackendUnavailable as down:
            handler.unavailable(down)
            return
        except Broken as broken:
            handler.broken_now(str(broken))
            return
        self._router.send_direct(conn, client_stmt_id)

    async def run(self, d: Decision) -> None:
        """Everything :meth:`~proxy.routing.Router.execute` could not do synchronously,
        ending with the command sent (its response then completes it) or answered."""
        handler = self._handler
        try:
            await self._steps(d)
        except asyncio.CancelledError:
            raise
        except Broken as broken:
            handler.broken_now(str(broken))
        except BackendUnavailable as down:
            handler.unavailable(down)
        except (ConnectionClosed, TimeoutError) as lost:
            handler.reply_err(
                CR.SERVER_LOST, "HY000", f"Lost connection to a backend: {lost}", handler.reply_seq
            )
        except Exception:
            logger.exception("session %d: command failed", self._session.id)
            handler.fail_command(ER.UNKNOWN_ERROR, "HY000", "internal proxy error")

    async def _steps(self, d: Decision) -> None:
        router = self._router
        policy = self._session.policy
        backends = self._backends
        while True:
            settled = await self._settle(d)
            if settled is None:
                return
            d = settled
            if d.prelude:
                await self._prelude(d)
            try:
                conn = await backends.connect_ready(d.target)
            except ReplayFailed as e:
                if d.target == PRIMARY:
                    # A reopened primary connection that cannot take the session's state: the
                    # session is lost, as with a transaction there.
                    raise Broken(f"the session's state could not follow to the primary: {e}") from e
                logger.info(
                    "session %d: state cannot follow to %s (%s): pinning",
                    self._session.id,
                    d.target,
                    e,
                )
                d = policy.on_replay_failed(d)
                continue
            except BackendUnavailable:
                if d.target == PRIMARY:
                    raise
                retry = policy.on_error(d, connection_lost=True)
                if retry is None:
                    raise
                d = retry
                continue
            ps = self._handler.ps
            if (
                ps is not None
                and ps.client_id not in conn.statements
                and not await backends.prepare_on(conn, ps)
            ):
                d = policy.on_prepare_failed(d)
                continue
            if self._session.reader.streaming and conn.max_allowed_packet is None:
                await backends.read_packet_limit(conn)
            router.send(conn, d)
            return

    async def _settle(self, d: Decision) -> Decision | None:
        """Do what the policy asks until it says EXECUTE (returned) or the command was
        answered or handed to the pipelined path (``None``)."""
        router = self._router
        policy = self._session.policy
        backends = self._backends
        flavor = self._session.flavor
        while True:
            if router.tracing:
                router.observer.decision(d)  # the last decision is the route the span reports
            action = d.action
            if action is _EXECUTE:
                return d
            if action is Action.DEFER or action is Action.FAIL:
                router.execute(d)
                return None
            if action is Action.FETCH_PRIMARY_STATE:
                conn = await backends.connect_ready(PRIMARY)
                result = await conn.query(
                    flavor.executed_state_statement(ServerRole.PRIMARY), timeout=10.0
                )
                if result.error is not None:
                    handler = self._handler
                    handler.reply_err(
                        result.error.errno,
                        result.error.sqlstate,
                        result.error.message,
                        handler.reply_seq,
                    )
                    return None
                d = policy.on_primary_state(d, flavor.parse_executed(result.scalar()))
                continue
            started = time.monotonic()
            try:
                conn = await backends.connect_ready(d.target)
            except (BackendUnavailable, ReplayFailed) as e:
                logger.info(
                    "session %d: replica %s unusable for a wait: %s", self._session.id, d.target, e
                )
                d = policy.on_wait(d, WaitOutcome.FAILED, duration=time.monotonic() - started)
                continue
            ps = self._handler.ps
            if router.pipelinable(d) and (ps is None or ps.client_id in conn.statements):
                router.send_pipelined(conn, d)
                return None
            outcome = await self._wait(conn, d)
            duration = time.monotonic() - started
            router.observer.wait(d, outcome, duration, pipelined=False)
            d = policy.on_wait(d, outcome, duration=duration)

    async def _wait(self, conn: BackendConnection, d: Decision) -> WaitOutcome:
        session = self._session
        wait = wait_query(session.policy, session.flavor, d)
        try:
            result = await conn.query(wait.sql, timeout=wait.deadline)
        except (ConnectionClosed, TimeoutError) as e:
            logger.info("session %d: wait on %s failed: %s", self._session.id, conn.address, e)
            self._backends.forget(conn)
            return WaitOutcome.FAILED
        return self._router.wait_outcome(result)

    async def _prelude(self, d: Decision) -> None:
        backends = self._backends
        for target, sql in d.prelude:
            try:
                conn = await backends.connect_ready(target)
                result = await conn.query(sql, timeout=None)
            except (ConnectionClosed, BackendUnavailable):
                if sql is END_TRANSACTION and target != PRIMARY:
                    continue  # the read-only transaction died with its connection
                raise
            if result.error is not None and sql is not END_TRANSACTION:
                raise BackendUnavailable(target, f"{sql} failed: {result.error.message}")
        self._session.policy.on_prelude_done(d)
