"""One login of the client matrix in a fresh interpreter (see ``clients.py``)."""

# ruff: noqa: I001
# MySQL Connector/Python's C extension first, before anything imports ssl: it needs the
# OpenSSL it bundles, and the system's would be loaded under the same name otherwise.
import _mysql_connector  # noqa: F401

import sys

import clients

if __name__ == "__main__":
    clients.main(sys.argv)
