"""The routing policy: which server runs each statement, and what to wait for first.

Sans-I/O (DESIGN "Architecture"): :class:`SessionPolicy` is one session's state machine,
:class:`ReplicaKnowledge` what the whole process knows about its replicas,
:class:`AcknowledgedWrites` what the primary acknowledged to any session of the process.
The DB-API wrapper and the proxy drive the same machine; see :mod:`consistent.policy.session`
for the protocol.
"""

from __future__ import annotations

from consistent.native import require_fresh

require_fresh(__name__)  # before any module of this package, compiled or not, is imported

from consistent.policy.acknowledged import AcknowledgedWrites, process_acknowledged  # noqa: E402
from consistent.policy.config import Level, OnTimeout, PolicyConfig, Tracking  # noqa: E402
from consistent.policy.decision import (  # noqa: E402
    PRIMARY,
    Action,
    Decision,
    Reason,
    RequiredSources,
    WaitOutcome,
    wait_outcome,
)
from consistent.policy.knowledge import Learned, ReplicaKnowledge, ReplicaView, process_knowledge  # noqa: E402
from consistent.policy.replay import SessionStateLog  # noqa: E402
from consistent.policy.selection import rank_replicas  # noqa: E402
from consistent.policy.session import END_TRANSACTION, READ_ONLY_BEGIN, SessionPolicy, Transaction  # noqa: E402
from consistent.policy.states import MAX_TOKEN_LENGTH, FlavorName, format_token, parse_token  # noqa: E402

__all__ = [
    "END_TRANSACTION",
    "MAX_TOKEN_LENGTH",
    "PRIMARY",
    "READ_ONLY_BEGIN",
    "AcknowledgedWrites",
    "Action",
    "Decision",
    "FlavorName",
    "Learned",
    "Level",
    "OnTimeout",
    "PolicyConfig",
    "Reason",
    "ReplicaKnowledge",
    "ReplicaView",
    "RequiredSources",
    "SessionPolicy",
    "SessionStateLog",
    "Tracking",
    "Transaction",
    "WaitOutcome",
    "format_token",
    "parse_token",
    "process_acknowledged",
    "process_knowledge",
    "rank_replicas",
    "wait_outcome",
]
