"""Read-your-writes under injected lag, and a token carrying a write to another session,
through every form.  Each has its control: ``eventual`` under the same lag, and the other
session's read before it is given the token, both read stale data — so a zero means something.

Which server answered is the answer's own ``@@port``."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from consistent.testing.replication import Replication

    from .sessions import Form, Session

#: Write-then-read iterations: enough for ``eventual`` to meet a paused replica many times.
ITERATIONS = 60


def write_then_read(session: Session, table: str, ports: set[int]) -> tuple[int, int]:
    """:data:`ITERATIONS` times: write a new value, read it back.  Returns (stale reads, reads
    served by one of ``ports``)."""
    session.rows(f"INSERT INTO {table} VALUES (1, 0)")
    stale = on_replicas = 0
    for i in range(1, ITERATIONS + 1):
        session.rows(f"UPDATE {table} SET v = %s WHERE k = 1", (i,))
        # An empty answer is stale too (a replica without the first insert).
        answer = session.rows(f"SELECT v, @@port FROM {table} WHERE k = 1") or [(None, None)]
        [(value, port)] = answer
        stale += value != i
        on_replicas += port in ports
    return stale, on_replicas


def test_read_own_writes_holds_under_lag(form: Form, backend: Replication, table: str) -> None:
    session = form.session()
    with backend.injected_lag(0.05):
        stale, on_replicas = write_then_read(session, table, form.replica_ports)
    assert stale == 0
    assert on_replicas > ITERATIONS // 2  # the guarantee did not come from avoiding replicas


def test_eventual_reads_stale_data_under_the_same_lag(
    form: Form, backend: Replication, table: str
) -> None:
    """The control: the same workload, nothing waited for."""
    session = form.session(level="eventual")
    with backend.injected_lag(0.05):
        stale, _ = write_then_read(session, table, form.replica_ports)
    assert stale > 0


def test_a_token_carries_a_write_to_another_session(
    form: Form, backend: Replication, table: str
) -> None:
    writer, reader = form.session(), form.session()
    assert reader.token() == ""
    backend.pause_all()
    timer = None
    try:
        writer.rows(f"INSERT INTO {table} VALUES (1, 99)")
        token = writer.token()
        assert token
        # Without the token the reader owes nothing to that write: a paused replica serves it.
        [(count, port)] = reader.rows(f"SELECT COUNT(*), @@port FROM {table}")
        assert (count, port in form.replica_ports) == (0, True)
        reader.require(token)
        assert reader.token() == token  # it wrote nothing of its own
        timer = backend.resume_all_later(0.3)
        # Now it waits for a replica to apply the write (or falls back to the primary).
        assert [v for v, _port in reader.rows(f"SELECT v, @@port FROM {table}")] == [99]
    finally:
        if timer is not None:
            timer.join()
        backend.resume_all()


def test_a_token_crosses_forms(form: Form, backend: Replication, table: str) -> None:
    """A token is text with one meaning: one minted by any form is honoured by every other
    (here the reader is always a wrapper session, with replica knowledge of its own)."""
    from .sessions import Form as Reader

    other = Reader("dbapi" if form.kind != "dbapi" else "proxy", backend)
    try:
        writer, reader = form.session(), other.session()
        backend.pause_all()
        writer.rows(f"INSERT INTO {table} VALUES (2, 7)")
        assert reader.rows(f"SELECT COUNT(*) FROM {table}") == [(0,)]  # stale without it
        reader.require(writer.token())
        timer = backend.resume_all_later(0.3)
        try:
            assert reader.rows(f"SELECT v FROM {table}") == [(7,)]
        finally:
            timer.join()
    finally:
        backend.resume_all()
        other.close()
