"""A MySQL-semantics server without sockets: GTID state, session trackers, SQL on SQLite.

``consistent.emulator`` is how the MySQL flavour is tested and demonstrated where no MySQL
server exists.  It behaves like mysqld 8.0 where the worklogs say how (WL#6972
``session_track_gtids``, WL#6559 ``mysql.gtid_executed``, WL#7319 commit timestamps) and where
``reference/protocol.md`` §2-§4 pins the details; XA transactions follow ``sql/xa.cc``
(:mod:`.xa`) and the ``GTID_NEXT`` rules ``sql/rpl_gtid_execution.cc`` (:mod:`.statements`).
``ServerConfig.version`` chooses the release (8.0 by default, :data:`VERSION_84`): tagged GTIDs
from 8.3, ``mysql.gtid_executed`` written at commit from 8.0.17 (:mod:`.config`).  A wire
front-end drives it; tests drive it directly.

API::

    server = EmulatedServer(ServerConfig(server_uuid=..., log_bin=True), clock=time.time)
    await server.start()                      # background compress_gtid_table task
    session = server.open_session("root", "test", client_capabilities=caps)
    async for outcome in session.query("INSERT …; SELECT …"):
        ...                                   # one Outcome per statement (OK or result set)
    session.prepare(sql) / await session.execute_prepared(stmt_id, params)
    session.close_prepared(id) / session.reset_prepared(id) / session.field_list(t, wildcard)
    await session.init_db(name) / session.ping() / await session.reset_connection()
    await session.change_user(user, database) / await session.close()
    await server.kill(connection_id, query_only=True)
    await server.shutdown(); server.restart()   # restart rebuilds gtid_executed
    server.users                                # user -> Account (plain password + native hash)
    server.gtid_state / server.binlog / server.catalog   # for replication and tests

Each :class:`Outcome` is one response: ``result`` (a :class:`ResultSet`) or None for an OK,
``affected_rows``, ``last_insert_id``, ``status`` (:class:`ServerStatus`, with
``MORE_RESULTS_EXISTS`` and ``SESSION_STATE_CHANGED`` set as mysqld would), ``warnings``,
``info`` and ``session_state`` — the tracker blocks mysqld puts in that OK (empty when the
client lacks ``CLIENT_SESSION_TRACK`` or the response ends with a classic EOF).  Errors are
:class:`SqlError` with ``args == (errno, message)`` and ``sqlstate``.

Replication hooks (for the applier of a replica): open a session with ``system=True``, then
``SET GTID_NEXT``, ``SET original_commit_timestamp``, the transaction's statements and COMMIT;
or call :meth:`EmulatedServer.apply_transaction` with a :class:`BinlogTransaction`.  A source's
committed transactions are in ``server.binlog`` (``BinaryLog.subscribe`` notifies appends,
``transactions_missing_from(executed)`` serves GTID auto-positioning).  Extension points:
``server.statement_handlers`` (e.g. ``"START REPLICA"``), ``server.show_handlers`` (e.g.
``"REPLICA STATUS"``) and ``server.virtual_tables`` (``performance_schema`` tables).
``session.add_close_listener`` tells a front-end when KILL or shutdown ends a session.

:mod:`consistent.emulator.testing` has a fake clock and query shortcuts for tests.

Replication topologies (:mod:`consistent.emulator.replication`): ``start_topology(replicas=2,
lag="20ms..800ms")`` runs a primary and replicas in a background thread, each on its own port
on 127.0.0.1; ``await start_topology_async(spec, clock=VirtualClock(), serve=False)`` builds a
:class:`TopologySpec` on the running loop (virtual time in tests, see
:func:`~consistent.emulator.replication.run_virtual`).
"""

from __future__ import annotations

from consistent.native import require_fresh

require_fresh(__name__)  # before any module of this package, compiled or not, is imported

from consistent.emulator.binlog import (  # noqa: E402
    UNDEFINED_COMMIT_TIMESTAMP,
    BinaryLog,
    BinlogFile,
    BinlogStatement,
    BinlogTransaction,
)
from consistent.emulator.config import (  # noqa: E402
    VERSION_57,
    VERSION_80,
    VERSION_84,
    Account,
    Clock,
    GtidMode,
    ServerConfig,
)
from consistent.emulator.errors import ER, SqlError  # noqa: E402
from consistent.emulator.gtid_state import GtidNext, GtidNextType, GtidState  # noqa: E402

# Replication builds on everything above, so it is imported last.
from consistent.emulator.replication import (  # noqa: E402
    ChannelSpec,
    LagModel,
    ServerSpec,
    Topology,
    TopologySpec,
    VirtualClock,
    run_virtual,
)
from consistent.emulator.replication.threaded import (  # noqa: E402
    TopologyThread,
    start_topology,
    start_topology_async,
)
from consistent.emulator.results import Column, Outcome, PreparedStatement, ResultSet  # noqa: E402
from consistent.emulator.server import DEFAULT_CLIENT_CAPABILITIES, EmulatedServer  # noqa: E402
from consistent.emulator.session import Session  # noqa: E402

__all__ = [
    "DEFAULT_CLIENT_CAPABILITIES",
    "ER",
    "UNDEFINED_COMMIT_TIMESTAMP",
    "VERSION_57",
    "VERSION_80",
    "VERSION_84",
    "Account",
    "BinaryLog",
    "BinlogFile",
    "BinlogStatement",
    "BinlogTransaction",
    "ChannelSpec",
    "Clock",
    "Column",
    "EmulatedServer",
    "GtidMode",
    "GtidNext",
    "GtidNextType",
    "GtidState",
    "LagModel",
    "Outcome",
    "PreparedStatement",
    "ResultSet",
    "ServerConfig",
    "ServerSpec",
    "Session",
    "SqlError",
    "Topology",
    "TopologySpec",
    "TopologyThread",
    "VirtualClock",
    "run_virtual",
    "start_topology",
    "start_topology_async",
]
