"""The standalone MySQL-protocol proxy (``consistent proxy``), built on the ``consistent`` core.

Any MySQL client (the ``mariadb`` command line, PyMySQL, JDBC, sysbench…) connects to it as to a
server, authenticates against the users it is configured with, and gets its reads sent to
replicas with read-your-writes: every routing decision comes from the same sans-I/O
:class:`~consistent.policy.SessionPolicy` the DB-API wrapper drives.

Modules, from the socket up:

===================  ========================================================================
``errors``           the proxy's exceptions (never compiled: they derive from PyMySQL's classes)
``stream``           one TCP connection: packet mode (connection phase), stream mode (commands)
``clientlogin``      the connection phase with a client: greeting, TLS, the configured users
``handshake``        the connection phase at a backend: the proxy logs in as a client
``relay``            the response state machine: where each backend response ends, what changes
``backends``         backend connections, per-server accounting, the health/GTID monitor
``pool``             backend connections shared by the sessions (multiplexing), pin reasons
``statements``       prepared statements across backends (id mapping, types, long data)
``intercept``        ``SET/SELECT @@consistent_level|token``, answered by the proxy
``threads``          connection ids: ``KILL``, ``CONNECTION_ID()``, ``SHOW PROCESSLIST``
``clientreader``     a session's client byte stream framed into commands (streaming, INFILE)
``backendset``       a session's backend connections: opened or borrowed, made ready, given back
``routing``          a session's statements routed by the policy, sent, completed
``slowpath``         what a session's statements await: connections, replays, waits, preludes
``commands``         a session's commands: dispatched, answered by the proxy or handed on
``sessioncommands``  COM_RESET_CONNECTION, COM_CHANGE_USER, KILL: commands on whole sessions
``session``          one client: its login and lifecycle, composed of the parts above
``server``           the listener, the sessions, the monitors, reload and graceful shutdown
``admission``        the limits on logins in progress, per client address and in all
``histogram``        duration buckets, bound to backend connections (one increment a statement)
``metrics``          the Prometheus families: counters, histograms, backends' health and lag
``admin``            HTTP(S) ``/metrics`` (Prometheus) and ``/status`` (JSON), token required
``config``           the TOML configuration and its command-line overrides
``cli``              ``consistent proxy --config FILE`` (``python -m proxy`` too)
``logformat``        the text and JSON log formats (one line per record, controls escaped)
``testing``          a proxy on a background thread, for tests and benches
===================  ========================================================================
"""

from consistent.native import require_fresh

require_fresh(__name__)
