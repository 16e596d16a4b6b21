"""What a failover lost (the GTIDs a session required that the new primary never had), and the
replicas a source lists."""

from __future__ import annotations

from consistent.flavors import MARIADB, MYSQL
from consistent.gtid import GtidSet, MariaPosition

U1 = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
U2 = "4e11fa47-71ca-11e1-9e33-c80aa9429562"


def test_mariadb_a_new_primary_that_wrote_on_still_lacks_the_old_primarys_last_writes() -> None:
    required = MariaPosition.parse("0-1-100")
    # Promoted at 0-1-98, then it wrote 0-2-99..105: by sequence numbers it "covers" 0-1-100.
    assert MariaPosition.parse("0-2-105").covers(required)
    assert MARIADB.missing_gtids(required, ("0-1-98,0-2-105", "0-1-98")) == "0-1-100"
    # Without log_slave_updates, the binary logs hold only its own writes: the replicated
    # position tells the rest.
    assert MARIADB.missing_gtids(required, ("0-2-105", "0-1-98")) == "0-1-100"


def test_mariadb_nothing_is_missing_when_the_new_primary_had_everything() -> None:
    required = MariaPosition.parse("0-1-100,1-1-7")
    assert MARIADB.missing_gtids(required, ("0-1-100,0-2-105,1-1-7", "0-1-100,1-1-7")) is None
    assert MARIADB.missing_gtids(required, ("0-2-105", "0-1-100,1-1-9")) is None
    # Its own writes, and an older primary's that it replicated past.
    assert MARIADB.missing_gtids(MariaPosition.parse("0-2-104"), ("0-2-105", "0-1-98")) is None
    assert MARIADB.missing_gtids(MariaPosition.parse("0-7-50"), ("0-2-105", "0-1-98")) is None


def test_mariadb_each_domain_is_judged_on_its_own() -> None:
    required = MariaPosition.parse("0-1-100,1-1-7")
    assert MARIADB.missing_gtids(required, ("0-1-100,1-1-5", "0-1-100,1-1-5")) == "1-1-7"
    assert MARIADB.missing_gtids(required, ("", "")) == "0-1-100,1-1-7"


def test_mysql_compares_sets_exactly() -> None:
    required = GtidSet.parse(f"{U1}:1-100,{U2}:1-3")
    assert MYSQL.missing_gtids(required, (f"{U1}:1-98,{U2}:1-10",)) == f"{U1}:99-100"
    assert MYSQL.missing_gtids(required, (f"{U1}:1-100,{U2}:1-3",)) is None
    assert MYSQL.missing_gtids(GtidSet.parse(""), ("",)) is None


def test_mariadb_the_new_primarys_own_gtids_are_never_missing() -> None:
    required = MariaPosition.parse("0-2-110")  # written by the new primary after the history
    assert MARIADB.missing_gtids(required, ("0-1-98,0-2-105", "0-1-98", "2")) is None
    assert MARIADB.missing_gtids(required, ("0-1-98,0-2-105", "0-1-98", 3)) == "0-2-110"


def test_a_mariadb_replica_that_kept_the_lost_writes_has_diverged() -> None:
    history = ("0-2-105", "0-1-98", "2")
    assert MARIADB.diverged(MariaPosition.parse("0-1-100"), history) == "0-1-100"
    assert MARIADB.diverged(MariaPosition.parse("0-1-98"), history) is None
    assert MARIADB.diverged(MariaPosition.parse("0-2-107"), history) is None


def test_a_mysql_replica_never_misleads_by_its_gtid_set() -> None:
    assert MYSQL.diverged(GtidSet.parse(f"{U1}:1-100"), (f"{U1}:1-98",)) is None


def test_replica_hosts_as_a_source_lists_them() -> None:
    columns = ("Server_id", "Host", "Port", "Master_id")
    rows = [(2, "127.0.0.1", 3307, 1), (3, "", 3308, 1), (4, b"db4", b"3309", 1), (5, "::1", 1, 1)]
    assert MARIADB.parse_replica_hosts(columns, rows) == {"127.0.0.1:3307", "db4:3309", "[::1]:1"}
    assert MARIADB.replica_hosts_statement() == "SHOW SLAVE HOSTS"
    assert MYSQL.replica_hosts_statement() == "SHOW REPLICAS"
