"""Replication between emulated servers: channels, lag models, delayed replication, monitoring.

* :mod:`.topology` — :class:`TopologySpec` (servers and channels) and the running
  :class:`Topology`; :mod:`.threaded` runs one in a background thread
  (:func:`start_topology`).
* :mod:`.channel` — receiver → relay log → coordinator → workers, timed by a
  :class:`~.lagmodel.LagModel` on an injected clock (:mod:`.clock`: real or virtual time).
* :mod:`.delay` — WL#7318 ``SOURCE_DELAY``; :mod:`.pfs` — WL#7374 performance_schema tables;
  :mod:`.sql` — CHANGE REPLICATION SOURCE, START/STOP/RESET REPLICA, SHOW REPLICA STATUS;
  :mod:`.events` — ``Gtid_log_event`` bytes and a ``mysqlbinlog``-style printer (WL#7319).
"""

from __future__ import annotations

from consistent.emulator.replication.channel import Channel, SourceConfig
from consistent.emulator.replication.clock import (
    DEFAULT_EPOCH,
    RealClock,
    SkewedClock,
    TopologyClock,
    VirtualClock,
    VirtualTimeLoop,
    run_virtual,
)
from consistent.emulator.replication.lagmodel import (
    Burst,
    Distribution,
    Exponential,
    Fixed,
    LagModel,
    LagModelError,
    LogNormal,
    Normal,
    Pause,
    Stage,
    Uniform,
    parse_distribution,
    parse_duration,
)
from consistent.emulator.replication.service import ReplicationService
from consistent.emulator.replication.topology import (
    ChannelSpec,
    Endpoint,
    ReplicationTimeout,
    ServerSpec,
    Topology,
    TopologyError,
    TopologySpec,
    as_lag_model,
)

__all__ = [
    "DEFAULT_EPOCH",
    "Burst",
    "Channel",
    "ChannelSpec",
    "Distribution",
    "Endpoint",
    "Exponential",
    "Fixed",
    "LagModel",
    "LagModelError",
    "LogNormal",
    "Normal",
    "Pause",
    "RealClock",
    "ReplicationService",
    "ReplicationTimeout",
    "ServerSpec",
    "SkewedClock",
    "SourceConfig",
    "Stage",
    "Topology",
    "TopologyClock",
    "TopologyError",
    "TopologySpec",
    "Uniform",
    "VirtualClock",
    "VirtualTimeLoop",
    "as_lag_model",
    "parse_distribution",
    "parse_duration",
    "run_virtual",
]
