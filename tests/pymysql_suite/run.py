"""PyMySQL's own test suite on real MariaDB, directly and through ``consistent.connect``,
compared test by test.

::

    .venv/bin/python tests/pymysql_suite/run.py                  # both passes, compared
    .venv/bin/python tests/pymysql_suite/run.py --source ~/src/PyMySQL -- -k test_basic

Where the suite comes from: PyMySQL's source distribution at the installed version
(``pip download --no-binary :all: --no-deps pymysql==<version>``), unpacked.  PyMySQL's
sdists stopped shipping ``pymysql/tests/`` with 1.0, so when the installed version's sdist has
no suite the run takes it from the newest sdist that does (:data:`FALLBACK_VERSION`), and says
so; ``--source DIR`` (a PyMySQL checkout, e.g. at the installed version's tag) overrides both.
The suite always runs against the *installed* PyMySQL: it is laid in an overlay directory that
the plugin (``pymysql_suite_plugin.py``) appends to ``pymysql.__path__``, with the few helper
modules an old suite imports that PyMySQL has since removed (``pymysql._compat``,
``pymysql.util``) taken from the same sdist.

One MariaDB primary with two replicas is started (``consistent.testing.mariadb``); the
suite's databases are recreated before each pass and its ``databases.json`` points at the
primary, as PyMySQL's CI does.  The direct pass uses PyMySQL as it is.  The wrapped pass
replaces ``pymysql.connect`` (and ``Connect``, ``Connection``,
``connections.Connection``) with ``consistent.connect`` given the same arguments plus both
replicas and ``level=read_latest``: the suite assumes one server, where a row committed by
one connection is visible to the next connection at once, which between sessions is what
``read_latest`` guarantees (``--level read_own_writes`` shows what the default owes to other
sessions: nothing).

Exit status: 0 when every test that passes directly also passes through the wrapper, or is
listed with its reason in README.md's table of PyMySQL-suite exceptions (between the
``pymysql-suite-exceptions`` markers); 1 otherwise.

``--proxy`` (``make test-pymysql-proxy``) runs the suite through the MySQL-protocol proxy
instead of the wrapper: plain PyMySQL, its ``databases.json`` pointing at a proxy (in this
process, on a port of its own) in front of the primary, once with multiplexing on (a pool of
:data:`PROXY_POOL` connections, so the suite's connections share backend connections) and once
with it off.  Exit status 1 when any test's outcome differs between the two proxy passes, or
when a test passes directly and not through the proxy without being listed in README.md's
table between the ``pymysql-proxy-exceptions`` markers.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
README = ROOT / "README.md"
#: The newest PyMySQL release whose sdist ships ``pymysql/tests/``.
FALLBACK_VERSION = "0.10.1"
PASSES = ("direct", "consistent")
PROXY_PASSES = ("direct", "proxy-multiplexing", "proxy-no-multiplexing")
#: The pool size of the multiplexing pass: small enough that the suite's connections share.
PROXY_POOL = 8
PASSED, FAILED, SKIPPED = "passed", "failed", "skipped"
DATABASES = ("test1", "test2")
OVERLAY_ENV = "CONSISTENT_PYMYSQL_OVERLAY"
WRAP_ENV = "CONSISTENT_PYMYSQL_WRAP"
_MARK_START = "<!-- pymysql-suite-exceptions:start -->"
_MARK_END = "<!-- pymysql-suite-exceptions:end -->"
_PROXY_MARKS = (
    "<!-- pymysql-proxy-exceptions:start -->",
    "<!-- pymysql-proxy-exceptions:end -->",
)
_ROW = re.compile(r"^\|\s*`([^`]+)`\s*\|(.+)\|\s*$")


# ------------------------------------------------------------------ the suite's source


def installed_version() -> str:
    import pymysql

    return str(pymysql.VERSION_STRING)


def download_sdist(version: str, directory: Path) -> Path:
    """PyMySQL's sdist at ``version``, unpacked under ``directory``; its top directory."""
    directory.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--quiet",
            "--no-binary",
            ":all:",
            "--no-deps",
            "--dest",
            str(directory),
            f"pymysql=={version}",
        ],
        check=True,
    )
    (archive,) = [p for p in directory.iterdir() if p.name.endswith(".tar.gz")]
    with tarfile.open(archive) as tar:
        tar.extractall(directory, filter="data")
    (top,) = [p for p in directory.iterdir() if p.is_dir()]
    return top


def has_suite(source: Path) -> bool:
    return (source / "pymysql" / "tests" / "base.py").is_file()


def find_suite(source: Path | None, work: Path) -> tuple[Path, str]:
    """The directory holding ``pymysql/tests`` and a sentence saying where it came from."""
    if source is not None:
        if not has_suite(source):
            raise SystemExit(f"{source} has no pymysql/tests/base.py")
        return source, f"the suite from {source}"
    version = installed_version()
    top = download_sdist(version, work / f"sdist-{version}")
    if has_suite(top):
        return top, f"the suite of PyMySQL {version}'s sdist"
    fallback = download_sdist(FALLBACK_VERSION, work / f"sdist-{FALLBACK_VERSION}")
    if not has_suite(fallback):
        raise SystemExit(f"PyMySQL {FALLBACK_VERSION}'s sdist has no pymysql/tests either")
    return fallback, (
        f"PyMySQL {version}'s sdist ships no pymysql/tests: the suite of PyMySQL "
        f"{FALLBACK_VERSION}'s sdist (the newest that ships one), run against PyMySQL {version}"
    )


def build_overlay(source: Path, overlay: Path, databases: list[dict[str, Any]]) -> Path:
    """``overlay/pymysql/tests`` from ``source``, its ``databases.json``, and the helper
    modules of ``source``'s PyMySQL that the installed one no longer has."""
    import pymysql

    installed = Path(pymysql.__file__).parent
    package = overlay / "pymysql"
    if overlay.exists():
        shutil.rmtree(overlay)
    shutil.copytree(source / "pymysql" / "tests", package / "tests")
    # Marks the overlay as the ``pymysql`` package for pytest's module naming; never imported
    # (the installed ``pymysql`` is imported first, by the plugin).
    (package / "__init__.py").write_text("# overlay of pymysql.tests; never imported\n")
    for module in (source / "pymysql").glob("*.py"):
        if module.name != "__init__.py" and not (installed / module.name).exists():
            shutil.copy2(module, package / module.name)
    (package / "tests" / "databases.json").write_text(json.dumps(databases, indent=2))
    return overlay


# ------------------------------------------------------------------ the servers


def _spelling(base_source: str, old: str, new: str) -> str:
    """``old`` when the suite's own default databases spell that option so (older suites
    read ``databases[0]["db"]``), else ``new``."""
    return old if re.search(rf"[\"']{old}[\"']\s*:", base_source) else new


def suite_databases(topology: Any, base_source: str) -> list[dict[str, Any]]:
    """``databases.json`` as PyMySQL's CI writes it (two databases, the first with
    ``use_unicode`` and ``local_infile``), pointing at the primary over TCP, with the option
    names the suite's ``base.py`` uses."""
    params = topology.connection_params()
    database = _spelling(base_source, "db", "database")
    common = {
        "host": params.host,
        "port": params.port,
        "user": params.user,
        "password": params.password,
    }
    return [
        {**common, database: DATABASES[0], "use_unicode": True, "local_infile": True},
        {**common, database: DATABASES[1]},
    ]


def recreate_databases(topology: Any) -> None:
    for name in DATABASES:
        topology.primary.query(f"DROP DATABASE IF EXISTS `{name}`")
        topology.primary.query(f"CREATE DATABASE `{name}` DEFAULT CHARACTER SET utf8mb4")
    topology.wait_for_all()


# ------------------------------------------------------------------ one pass


def outcomes(junit: Path) -> dict[str, str]:
    """Test id (``test_module.Class::test``) -> passed / failed / skipped."""
    results: dict[str, str] = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        classname = (case.get("classname") or "").removeprefix("pymysql.tests.")
        test_id = f"{classname}::{case.get('name')}"
        if case.find("failure") is not None or case.find("error") is not None:
            results[test_id] = FAILED
        elif case.find("skipped") is not None:
            results[test_id] = SKIPPED
        else:
            results[test_id] = PASSED
    return results


def run_pass(
    overlay: Path,
    junit: Path,
    pytest_args: list[str],
    *,
    wrap: Mapping[str, Any] | None,
    quiet: bool = False,
) -> int:
    """One pass of the suite in a pytest subprocess; its exit status."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(HERE), str(ROOT), env.get("PYTHONPATH", "")) if p
    )
    env[OVERLAY_ENV] = str(overlay)
    env.pop(WRAP_ENV, None)
    if wrap is not None:
        env[WRAP_ENV] = json.dumps(wrap)
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-c",
        str(HERE / "suite.ini"),
        "--rootdir",
        str(overlay),
        str(overlay / "pymysql" / "tests"),
        f"--junitxml={junit}",
        "-q",
        *pytest_args,
    ]
    output = subprocess.DEVNULL if quiet else None
    return subprocess.run(
        command, cwd=overlay.parent, env=env, check=False, stdout=output
    ).returncode


# ------------------------------------------------------------------ comparison


def listed_exceptions(
    readme: str, marks: tuple[str, str] = (_MARK_START, _MARK_END)
) -> dict[str, str]:
    """Test id -> reason, from the README's table between the exception markers."""
    start = readme.find(marks[0])
    end = readme.find(marks[1])
    if start < 0 or end < start:
        return {}
    listed: dict[str, str] = {}
    for line in readme[start:end].splitlines():
        match = _ROW.match(line.strip())
        if match:
            listed[match.group(1)] = match.group(2).strip()
    return listed


@dataclass
class Comparison:
    """Outcomes of both passes and how they differ."""

    results: dict[str, dict[str, str]] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)

    def counts(self, name: str) -> Counter[str]:
        return Counter(self.results.get(name, {}).values())

    def summary(self, name: str) -> str:
        counts = self.counts(name)
        return (
            f"{name}: {counts[PASSED]} passed, {counts[FAILED]} failed, "
            f"{counts[SKIPPED]} skipped in {self.seconds.get(name, 0.0):.0f} s"
        )

    def rows(self, against: str = "consistent") -> list[tuple[str, str, str]]:
        direct = self.results.get("direct", {})
        wrapped = self.results.get(against, {})
        return [
            (t, direct.get(t, "-"), wrapped.get(t, "-"))
            for t in sorted(direct.keys() | wrapped.keys())
        ]

    def regressions(self, against: str = "consistent") -> list[str]:
        """Tests that pass directly and not through ``against`` (the wrapper by default)."""
        return [t for t, d, w in self.rows(against) if d == PASSED and w != PASSED]

    def differences(self, one: str, other: str) -> list[str]:
        """Tests whose outcome differs between passes ``one`` and ``other``."""
        a, b = self.results.get(one, {}), self.results.get(other, {})
        return sorted(t for t in a.keys() | b.keys() if a.get(t, "-") != b.get(t, "-"))


def verdict(
    comparison: Comparison, listed: Mapping[str, str], against: str = "consistent"
) -> tuple[list[str], list[str], list[str]]:
    """(unlisted regressions, listed regressions, listed tests that no longer regress)."""
    regressions = comparison.regressions(against)
    unlisted = [t for t in regressions if t not in listed]
    explained = [t for t in regressions if t in listed]
    stale = sorted(t for t in listed if t not in regressions)
    return unlisted, explained, stale


def table(rows: Iterable[tuple[str, str, str]], listed: Mapping[str, str]) -> str:
    """One line per test: id, direct outcome, wrapped outcome, and a flag."""
    rows = list(rows)
    width = max((len(t) for t, _, _ in rows), default=10)
    lines = [f"{'test':<{width}}  {'direct':<8}  {'consistent':<10}"]
    for test_id, direct, wrapped in rows:
        flag = ""
        if direct == PASSED and wrapped != PASSED:
            flag = "listed" if test_id in listed else "REGRESSION"
        lines.append(f"{test_id:<{width}}  {direct:<8}  {wrapped:<10}  {flag}".rstrip())
    return "\n".join(lines)


# ------------------------------------------------------------------ main


def compare(
    topology: Any,
    overlay: Path,
    reports: Path,
    *,
    level: str,
    wait_timeout: float,
    passes: tuple[str, ...] = PASSES,
    pytest_args: list[str] | None = None,
) -> Comparison:
    replicas = [f"{r.host}:{r.port}" for r in topology.replicas]
    wraps: dict[str, dict[str, Any] | None] = {
        "direct": None,
        "consistent": {
            "replicas": replicas,
            "options": {"level": level, "wait_timeout": wait_timeout},
        },
    }
    comparison = Comparison()
    for name in passes:
        recreate_databases(topology)
        junit = reports / f"{name}.xml"
        started = time.monotonic()
        run_pass(overlay, junit, list(pytest_args or ()), wrap=wraps[name])
        comparison.seconds[name] = time.monotonic() - started
        comparison.results[name] = outcomes(junit)
    return comparison


def proxy_config(topology: Any, multiplexing: bool) -> Any:
    """A proxy in front of the primary alone (the suite expects one server), with the suite's
    account as both its client user and its backend user."""
    from proxy.config import parse

    params = topology.connection_params()
    return parse(
        {
            "listen": "127.0.0.1:0",
            "local_infile": True,
            "backends": {
                "primary": f"{params.host}:{params.port}",
                "user": params.user,
                "password": params.password,
            },
            "users": {params.user: {"password": params.password}},
            "pool": {"multiplexing": multiplexing, "max_connections": PROXY_POOL},
        }
    )


def compare_proxy(
    topology: Any,
    overlay: Path,
    reports: Path,
    base_source: str,
    *,
    passes: tuple[str, ...] = PROXY_PASSES,
    pytest_args: list[str] | None = None,
) -> Comparison:
    """The suite directly and through the proxy with multiplexing on and off."""
    from proxy.testing import ProxyThread

    comparison = Comparison()
    databases_json = overlay / "pymysql" / "tests" / "databases.json"
    direct = suite_databases(topology, base_source)
    for name in passes:
        recreate_databases(topology)
        junit = reports / f"{name}.xml"
        started = time.monotonic()
        if name == "direct":
            databases_json.write_text(json.dumps(direct, indent=2))
            run_pass(overlay, junit, list(pytest_args or ()), wrap=None)
        else:
            multiplexing = name == "proxy-multiplexing"
            with ProxyThread(proxy_config(topology, multiplexing)) as proxy:
                through = [{**db, "host": "127.0.0.1", "port": proxy.port} for db in direct]
                databases_json.write_text(json.dumps(through, indent=2))
                run_pass(overlay, junit, list(pytest_args or ()), wrap=None)
                pools = proxy.run(proxy.server.status)["pools"]
            print(f"{name}: pools at the end {pools}")
        comparison.seconds[name] = time.monotonic() - started
        comparison.results[name] = outcomes(junit)
    databases_json.write_text(json.dumps(direct, indent=2))
    return comparison


def proxy_table(comparison: Comparison, listed: Mapping[str, str], every: bool) -> str:
    """One line per test (every test, or those whose outcomes differ): direct, multiplexing
    on, multiplexing off, and a flag."""
    names = PROXY_PASSES
    tests = sorted(set().union(*(comparison.results.get(n, {}).keys() for n in names)))
    width = max((len(t) for t in tests), default=10)
    lines = [f"{'test':<{width}}  {'direct':<8}  {'mux on':<8}  {'mux off':<8}"]
    for test_id in tests:
        outs = [comparison.results.get(n, {}).get(test_id, "-") for n in names]
        if not every and len(set(outs)) == 1:
            continue
        flag = ""
        if outs[1] != outs[2]:
            flag = "ON/OFF DIFFER"
        elif outs[0] == PASSED and outs[1] != PASSED:
            flag = "listed" if test_id in listed else "REGRESSION"
        lines.append(
            f"{test_id:<{width}}  {outs[0]:<8}  {outs[1]:<8}  {outs[2]:<8}  {flag}".rstrip()
        )
    return "\n".join(lines)


def main_proxy(args: argparse.Namespace, source: Path, work: Path) -> int:
    from consistent.testing.mariadb import start_topology

    passes = ("direct", args.only) if args.only and args.only != "direct" else PROXY_PASSES
    with start_topology(replicas=0) as topology:
        base_source = (source / "pymysql" / "tests" / "base.py").read_text(encoding="utf-8")
        overlay = build_overlay(source, work / "overlay", suite_databases(topology, base_source))
        comparison = compare_proxy(
            topology, overlay, work, base_source, passes=passes, pytest_args=args.pytest_args
        )
    print(f"JUnit reports: {work}")
    listed = listed_exceptions(README.read_text(encoding="utf-8"), _PROXY_MARKS)
    print(proxy_table(comparison, listed, args.table))
    for name in passes:
        print(comparison.summary(name))
    status = 0
    if len(passes) == len(PROXY_PASSES):
        differ = comparison.differences("proxy-multiplexing", "proxy-no-multiplexing")
        print(f"differ between multiplexing on and off: {len(differ)}")
        for test_id in differ:
            print(f"  ON/OFF DIFFER: {test_id}")
        status = 1 if differ else 0
    for name in passes[1:]:
        unlisted, explained, stale = verdict(comparison, listed, name)
        print(
            f"pass directly, fail through the proxy ({name}): {len(unlisted) + len(explained)} "
            f"({len(explained)} listed in README.md, {len(unlisted)} not)"
        )
        for test_id in unlisted:
            print(f"  NOT LISTED: {test_id}")
        for test_id in stale:
            print(f"  listed in README.md but passing (or absent) now: {test_id}")
        status = status or (1 if unlisted else 0)
    return status


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", type=Path, help="a PyMySQL source tree with pymysql/tests")
    parser.add_argument("--level", default="read_latest", help="the wrapper's level")
    parser.add_argument("--wait-timeout", type=float, default=5.0, help="the wrapper's")
    parser.add_argument(
        "--proxy",
        action="store_true",
        help="through the proxy with multiplexing on and off instead of the wrapper",
    )
    parser.add_argument(
        "--only",
        choices=sorted({*PASSES, *PROXY_PASSES}),
        help="run one pass only (with --proxy: direct and that pass)",
    )
    parser.add_argument("--work-dir", type=Path, help="keep downloads and reports here")
    parser.add_argument("--table", action="store_true", help="print every test, not only diffs")
    parser.add_argument("pytest_args", nargs="*", help="after --: passed to pytest")
    args = parser.parse_args(argv)

    from consistent.testing.mariadb import start_topology

    work = args.work_dir or Path(tempfile.mkdtemp(prefix="pymysql-suite-"))
    work.mkdir(parents=True, exist_ok=True)
    source, origin = find_suite(args.source, work)
    print(f"suite: {origin}")
    if args.proxy:
        return main_proxy(args, source, work)
    if args.only not in (None, *PASSES):
        parser.error(f"--only {args.only} needs --proxy")
    passes = (args.only,) if args.only else PASSES
    with start_topology(replicas=2) as topology:
        base_source = (source / "pymysql" / "tests" / "base.py").read_text(encoding="utf-8")
        databases = suite_databases(topology, base_source)
        overlay = build_overlay(source, work / "overlay", databases)
        comparison = compare(
            topology,
            overlay,
            work,
            level=args.level,
            wait_timeout=args.wait_timeout,
            passes=passes,
            pytest_args=args.pytest_args,
        )
    print(f"JUnit reports: {work}")
    listed = listed_exceptions(README.read_text(encoding="utf-8"))
    rows = comparison.rows()
    shown = rows if args.table else [r for r in rows if r[1] != r[2]]
    print(table(shown, listed))
    for name in passes:
        print(comparison.summary(name))
    if len(passes) < 2:
        return 1 if comparison.counts(passes[0])[FAILED] else 0
    unlisted, explained, stale = verdict(comparison, listed)
    print(
        f"pass directly, fail through consistent.connect: {len(unlisted) + len(explained)} "
        f"({len(explained)} listed in README.md, {len(unlisted)} not)"
    )
    for test_id in unlisted:
        print(f"  NOT LISTED: {test_id}")
    for test_id in stale:
        print(f"  listed in README.md but passing (or absent) now: {test_id}")
    return 1 if unlisted else 0


if __name__ == "__main__":
    sys.exit(main())
