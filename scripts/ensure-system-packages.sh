#!/usr/bin/env bash
# Installs the real servers the test suite needs, and the Java runtime Spark needs, from Debian's
# packages, when they are missing.
set -euo pipefail

have() { command -v "$1" >/dev/null 2>&1 || [ -x "/usr/sbin/$1" ] || [ -x "/usr/bin/$1" ]; }

# `--java`: only the Java runtime (what `make demo` needs beside .venv);
# `--compiler`: only the C compiler that builds the proxy's compiled modules (`make native`);
# `--clients`: the compiler and headers the dev extra's client libraries build with.
mode="${1:-all}"
missing=()
if [ "$mode" != "--compiler" ] && [ "$mode" != "--clients" ]; then
    have java || missing+=(default-jre-headless)   # PySpark: analytics and the demo
fi
have cc || have gcc || missing+=(gcc)   # mypyc's C extensions (scripts/compile.py)
if [ "$mode" = "all" ]; then
    have mariadbd || missing+=(mariadb-server)
    have mariadb || missing+=(mariadb-client)
    have sysbench || missing+=(sysbench)   # proxy tests and bench/proxy.py
    have haproxy || missing+=(haproxy)     # bench/proxy.py compares with it
fi
if [ "$mode" = "all" ] || [ "$mode" = "--clients" ]; then
    # What mysqlclient and MariaDB Connector/Python (the proxy's client matrix, in the dev
    # extra) compile against: `make venv` runs this before `pip install '.[dev]'`.
    have pkg-config || missing+=(pkg-config)
    { [ -e /usr/include/mariadb/mysql.h ] && have mariadb_config; } || missing+=(libmariadb-dev)
fi

if [ ${#missing[@]} -eq 0 ]; then
    exit 0
fi

echo "Installing from Debian's packages: ${missing[*]}"
if [ "$(id -u)" -ne 0 ] && ! command -v sudo >/dev/null 2>&1; then
    echo "ERROR: ${missing[*]} missing and not running as root: install them with apt-get." >&2
    exit 1
fi
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
if ! { $SUDO apt-get update -qq && $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null; }; then
    echo "ERROR: could not install ${missing[*]} with apt-get." >&2
    exit 1
fi
# The packages may start system-wide services; the suite starts its own on free ports.
if command -v service >/dev/null 2>&1; then
    $SUDO service mariadb stop >/dev/null 2>&1 || true
    $SUDO service haproxy stop >/dev/null 2>&1 || true
fi
[ "$mode" = "--compiler" ] || [ "$mode" = "--clients" ] || have java || {
    echo "ERROR: java still not found after installing default-jre-headless." >&2
    exit 1
}
[ "$mode" != "all" ] || have mariadbd || {
    echo "ERROR: mariadbd still not found after installing mariadb-server." >&2
    exit 1
}
