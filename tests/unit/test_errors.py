"""The exception hierarchy: PEP 249 shape, MySQL errnos and texts, disconnect codes."""

from __future__ import annotations

import pytest

from consistent import errors

# SQLAlchemy's MySQLDialect.is_disconnect treats these errnos as a lost connection.
SQLALCHEMY_DISCONNECT_ERRNOS = {1927, 2006, 2013, 2014, 2045, 2055, 4031}


def test_pep249_hierarchy() -> None:
    assert issubclass(errors.InterfaceError, errors.Error)
    assert issubclass(errors.DatabaseError, errors.Error)
    for cls in (
        errors.DataError,
        errors.OperationalError,
        errors.IntegrityError,
        errors.InternalError,
        errors.ProgrammingError,
        errors.NotSupportedError,
    ):
        assert issubclass(cls, errors.DatabaseError)
    assert not issubclass(errors.Warning, errors.Error)


def test_malformed_gtid_set_has_mysql_errno_text_and_sqlstate() -> None:
    err = errors.MalformedGtidSet("abc")
    assert err.args == (1772, "Malformed GTID set specification 'abc'.")
    assert err.errno == 1772
    assert err.sqlstate == "HY000"
    assert err.msg == "Malformed GTID set specification 'abc'."


def test_malformed_gtid_message_is_cut_at_200_characters_like_mysqld() -> None:
    text = "x" * 300
    err = errors.MalformedGtid(text)
    assert err.errno == 1774
    assert err.msg == "Malformed GTID specification '" + "x" * 200 + "'."


def test_consistency_timeout_is_never_taken_for_a_disconnect() -> None:
    err = errors.ConsistencyTimeout("replica r1 did not reach the set within 1.0 s")
    assert isinstance(err, errors.OperationalError)
    assert err.errno not in SQLALCHEMY_DISCONNECT_ERRNOS
    assert err.args[0] == err.errno


def test_protocol_errors_are_split_by_blame() -> None:
    with pytest.raises(errors.ProtocolError):
        raise errors.RemoteProtocolError("truncated OK packet")
    assert not issubclass(errors.RemoteProtocolError, errors.LocalProtocolError)
    assert not issubclass(errors.LocalProtocolError, errors.RemoteProtocolError)
