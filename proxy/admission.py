"""Who may start a login: the limits on unauthenticated connections.

A connection is *unauthenticated* from its accept until its login succeeds or fails, which
``connect_timeout`` bounds (the handshake deadline).  Two limits keep a flood of such
connections, slow or idle, from locking everyone else out:

* ``max_unauthenticated_per_address``: one client address may have this many logins in
  progress; more from it are refused at once (ERR 1040) until some finish;
* ``max_unauthenticated``: logins in progress in all.  When it is reached, a newcomer from an
  address with fewer logins in progress than the busiest address takes the place of that
  address's oldest one (whose connection is closed); a newcomer from the busiest address is
  refused.  So new logins from other addresses always find room, however many addresses the
  flood comes from.

:class:`LoginGate` only counts and decides; the server closes the connections it names.
"""

from __future__ import annotations

from dataclasses import dataclass

from proxy.stream import PacketEndpoint

__all__ = ["Admission", "LoginGate"]


@dataclass(frozen=True, slots=True)
class Admission:
    """The gate's answer to a new connection."""

    admitted: bool
    #: Why it was refused (the ERR message's reason).
    reason: str = ""
    #: A login in progress that makes room for this one: close it.
    evicted: PacketEndpoint | None = None


class LoginGate:
    """Counts the logins in progress per client address (see the module docstring)."""

    def __init__(self, *, total: int, per_address: int) -> None:
        self.total = total
        self.per_address = per_address
        # address -> its logins in progress, oldest first (dicts keep insertion order).
        self._by_address: dict[str, dict[PacketEndpoint, None]] = {}
        self._count = 0

    @property
    def pending(self) -> int:
        """Logins in progress."""
        return self._count

    def pending_from(self, address: str) -> int:
        """Logins in progress from ``address``."""
        return len(self._by_address.get(address, ()))

    def admit(self, address: str, ep: PacketEndpoint) -> Admission:
        """Let ``ep`` (from ``address``) start its login, or say why not."""
        mine = self._by_address.get(address)
        held = len(mine) if mine is not None else 0
        if held >= self.per_address:
            return Admission(False, f"too many logins in progress from {address}")
        evicted: PacketEndpoint | None = None
        if self._count >= self.total:
            busiest = max(self._by_address, key=self.pending_from)
            if held >= self.pending_from(busiest):
                return Admission(False, "too many logins in progress")
            evicted = next(iter(self._by_address[busiest]))
            self._forget(busiest, evicted)
        if mine is None:
            mine = self._by_address[address] = {}
        mine[ep] = None
        self._count += 1
        return Admission(True, evicted=evicted)

    def done(self, address: str, ep: PacketEndpoint) -> None:
        """``ep``'s login ended (either way); nothing happens if it was evicted."""
        logins = self._by_address.get(address)
        if logins is not None and ep in logins:
            self._forget(address, ep)

    def _forget(self, address: str, ep: PacketEndpoint) -> None:
        logins = self._by_address[address]
        del logins[ep]
        self._count -= 1
        if not logins:
            del self._by_address[address]
