"""Helpers for testing against real servers: a MariaDB replication topology
(:mod:`consistent.testing.mariadb`) and the pytest fixtures built on it
(:mod:`consistent.testing.pytest_plugin`)."""
