"""The URL and ``connect_args`` become ``consistent.dbapi.connect`` keywords (no server)."""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa
from pymysql.constants import CLIENT

import consistent.dbapi
from consistent.dbapi.config import ServerSpec, build_config
from consistent.errors import InterfaceError
from consistent.policy import Level, OnTimeout
from consistent.sqlalchemy import ConsistentDialect, ConsistentMariaDBDialect
from consistent.sqlalchemy.url import normalize_connect_params


def connect_params(url: str) -> dict[str, Any]:
    dialect = ConsistentDialect(dbapi=consistent.dbapi)
    cargs, cparams = dialect.create_connect_args(sa.make_url(url))
    assert list(cargs) == []
    return dict(cparams)


def test_the_url_names_primary_replicas_and_consistency_options() -> None:
    params = connect_params(
        "mysql+consistent://app:s%40cret@db1:3307/shop?replica=db2:3306&replica=db3:3308"
        "&level=read_latest&wait_timeout=0.25&on_timeout=next_replica&max_lag=2"
        "&charset=utf8mb4&connect_timeout=5"
    )
    assert params["host"] == "db1"
    assert params["port"] == 3307
    assert params["user"] == "app"
    assert params["password"] == "s@cret"
    assert params["database"] == "shop"
    assert params["replicas"] == ["db2:3306", "db3:3308"]
    assert params["level"] == "read_latest"
    assert params["wait_timeout"] == 0.25
    assert params["on_timeout"] == "next_replica"
    assert params["max_lag"] == 2.0
    # PyMySQL options are converted as mysql+pymysql converts them.
    assert params["charset"] == "utf8mb4"
    assert params["connect_timeout"] == 5
    # FOUND_ROWS, as mysql+pymysql sets it: UPDATE reports matched rows to the ORM.
    assert params["client_flag"] & CLIENT.FOUND_ROWS


def test_read_only_functions_may_be_listed_or_repeated() -> None:
    params = connect_params(
        "mysql+consistent://app:pw@db1/shop?read_only_functions=price,shop.fmt"
        "&read_only_functions=`odd name`"
    )
    assert params["read_only_functions"] == "price,shop.fmt,`odd name`"
    config = build_config(**normalize_connect_params(params))
    assert config.read_only_functions == {"PRICE", "SHOP.FMT", "ODD NAME"}


def test_the_translated_keywords_build_the_configuration_the_url_says() -> None:
    params = connect_params(
        "mysql+consistent://app:pw@db1:3307/shop?replicas=db2:3306,db3:3308"
        "&level=eventual&wait_timeout=3&on_timeout=error&flavor=mariadb&autocommit=false"
    )
    config = build_config(**normalize_connect_params(params))
    assert config.primary == ServerSpec("db1", 3307)
    assert config.replicas == (ServerSpec("db2", 3306), ServerSpec("db3", 3308))
    assert config.policy.level is Level.EVENTUAL
    assert config.policy.wait_timeout == 3.0
    assert config.policy.on_timeout is OnTimeout.ERROR
    assert config.flavor == "mariadb"
    assert config.autocommit is False
    assert config.options["database"] == "shop"


def test_the_same_options_work_through_connect_args() -> None:
    params = connect_params("mysql+consistent://app:pw@db1:3307/shop")
    params.update(
        {"replica": "db2:3306", "level": Level.READ_ALL_WRITES, "wait_timeout": 0.5}
    )  # what create_engine(url, connect_args=...) merges in
    config = build_config(**normalize_connect_params(params))
    assert config.replicas == (ServerSpec("db2", 3306),)
    assert config.policy.level is Level.READ_ALL_WRITES
    assert config.policy.wait_timeout == 0.5


def test_connect_args_primary_replaces_the_url_host() -> None:
    params = connect_params("mysql+consistent://app:pw@db1:3307/shop?replica=db2:3306")
    params.update({"primary": "db9:3310", "replicas": ["db8:3306"]})
    config = build_config(**normalize_connect_params(params))
    assert config.primary == ServerSpec("db9", 3310)
    assert config.replicas == (ServerSpec("db8", 3306),)


def test_replica_and_replicas_add_up() -> None:
    params = normalize_connect_params({"host": "h", "replicas": "a:1,b:2", "replica": "c:3"})
    assert params["replicas"] == ["a:1", "b:2", "c:3"]


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("wait_timeout=soon", "wait_timeout"),
        ("level=a&level=b", "level"),
        ("autocommit=maybe", "autocommit"),
    ],
)
def test_bad_options_are_refused_with_their_name(query: str, message: str) -> None:
    with pytest.raises(InterfaceError, match=message):
        connect_params(f"mysql+consistent://app@db1/shop?{query}")


def test_the_registered_names_load_the_dialects() -> None:
    assert sa.make_url("mysql+consistent://h/db").get_dialect() is ConsistentDialect
    mariadb = sa.make_url("mariadb+consistent://h/db").get_dialect()
    assert mariadb is ConsistentMariaDBDialect
    assert mariadb.is_mariadb is True


def test_the_dialect_builds_on_mysql_pymysql_with_our_dbapi() -> None:
    from sqlalchemy.dialects.mysql.pymysql import MySQLDialect_pymysql

    assert issubclass(ConsistentDialect, MySQLDialect_pymysql)
    assert ConsistentDialect.import_dbapi() is consistent.dbapi
    assert (ConsistentDialect.name, ConsistentDialect.driver) == ("mysql", "consistent")


def test_deadline_and_monitor_options_in_the_url() -> None:
    params = connect_params(
        "mysql+consistent://app:pw@db1:3307/shop?replica=db2:3306&replica_read_timeout=0.5"
        "&monitor_interval=0&read_timeout=20&write_timeout=15"
    )
    config = build_config(**normalize_connect_params(params))
    deadlines = config.deadlines
    assert (deadlines.replica_read, deadlines.read, deadlines.write) == (0.5, 20.0, 15.0)
    assert config.monitor_interval is None


def test_the_url_may_send_statement_spans_to_the_applications_provider() -> None:
    params = connect_params("mysql+consistent://app:pw@db1/shop?tracer_provider=global")
    assert params["tracer_provider"] == "global"
    assert "tracer_provider" not in connect_params("mysql+consistent://app:pw@db1/shop")


def test_role_discovery_options_in_the_url() -> None:
    params = connect_params(
        "mysql+consistent://app:pw@db1/shop?replica=db2&discover_roles=false&on_split_brain=refuse"
    )
    assert params["discover_roles"] is False
    config = build_config(**normalize_connect_params(params))
    assert config.discover_roles is False
    assert str(config.on_split_brain) == "refuse"
    defaults = build_config(
        **normalize_connect_params(connect_params("mysql+consistent://a@db1/s"))
    )
    assert defaults.discover_roles is True
    assert str(defaults.on_split_brain) == "keep"
