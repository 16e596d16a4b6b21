"""SQLAlchemy's dialect compliance suite on real MariaDB, through ``mysql+consistent`` and
through ``mysql+pymysql``: the same selection, compared test by test.  ``--form async`` runs
the asyncio pair instead: ``mysql+consistent_async`` against ``mysql+aiomysql``.

::

    .venv/bin/python tests/sqlalchemy_compliance/run.py             # both dialects, compared
    .venv/bin/python tests/sqlalchemy_compliance/run.py --form async   # the asyncio pair
    .venv/bin/python tests/sqlalchemy_compliance/run.py --only mysql+consistent -- -k Reflection

One MariaDB primary with two replicas is started for the run (``consistent.testing.mariadb``);
the suite's databases (``test``, ``test_schema``, ``test_schema_2``) are created fresh before
each dialect's pass.  ``mysql+pymysql`` talks to the primary alone; ``mysql+consistent`` gets the
primary and both replicas and reads on the replicas (``mysql+aiomysql`` and
``mysql+consistent_async`` likewise).

The suite assumes one server: a row committed by one connection is visible to the next
connection at once.  Between different sessions that is ``read_latest`` (every read waits for
what the primary had committed when it began), so that is the level of the main pass;
``--level read_own_writes`` shows what the default level owes to other sessions (nothing).

Exit status: 0 when no test passes on the baseline (``mysql+pymysql``, ``mysql+aiomysql``) and
fails on ours (``mysql+consistent``, ``mysql+consistent_async``).
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
#: Per form: (baseline, ours), run on the same selection and compared.
FORMS: dict[str, tuple[str, str]] = {
    "sync": ("mysql+pymysql", "mysql+consistent"),
    "async": ("mysql+aiomysql", "mysql+consistent_async"),
}
DRIVERS = FORMS["sync"]
DATABASES = ("test", "test_schema", "test_schema_2")
PASSED, FAILED, SKIPPED = "passed", "failed", "skipped"
# The suite names each class after the database it ran on (``Foo_mariadb+pymysql_10_11_9``).
_DIALECT_SUFFIX = re.compile(r"_(?:mysql|mariadb)\+\w+?_[\d_]+$")


def outcomes(junit: Path) -> dict[str, str]:
    """Test id -> passed / failed / skipped, from a JUnit XML report."""
    results: dict[str, str] = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        classname = _DIALECT_SUFFIX.sub("", case.get("classname") or "")
        test_id = f"{classname}::{case.get('name')}"
        if case.find("failure") is not None or case.find("error") is not None:
            results[test_id] = FAILED
        elif case.find("skipped") is not None:
            results[test_id] = SKIPPED
        else:
            results[test_id] = PASSED
    return results


def recreate_databases(topology: Any) -> None:
    """The suite's databases, empty, on the primary and every replica."""
    for name in DATABASES:
        topology.primary.query(f"DROP DATABASE IF EXISTS `{name}`")
        topology.primary.query(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4")
    topology.wait_for_all()


def run_suite(url: str, junit: Path, pytest_args: list[str], *, quiet: bool = False) -> int:
    """One pass of the suite on ``url`` in a pytest subprocess; its exit status."""
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-c",
        str(HERE / "compliance.ini"),
        "--rootdir",
        str(HERE),
        str(HERE / "compliance_suite.py"),
        "--dburi",
        url,
        f"--junitxml={junit}",
        "-q",
        *pytest_args,
    ]
    output = subprocess.DEVNULL if quiet else None
    return subprocess.run(command, cwd=HERE, check=False, stdout=output).returncode


@dataclass
class Comparison:
    """Per-dialect outcomes of one selection, and how they differ (``drivers``: the
    baseline, then ours)."""

    drivers: tuple[str, str] = DRIVERS
    results: dict[str, dict[str, str]] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)

    def counts(self, driver: str) -> Counter[str]:
        return Counter(self.results[driver].values())

    def summary(self, driver: str) -> str:
        counts = self.counts(driver)
        return (
            f"{driver}: {counts[PASSED]} passed, {counts[FAILED]} failed, "
            f"{counts[SKIPPED]} skipped in {self.seconds[driver]:.0f} s"
        )

    @property
    def differences(self) -> list[tuple[str, str | None, str | None]]:
        baseline, ours_name = self.drivers
        theirs = self.results.get(baseline, {})
        ours = self.results.get(ours_name, {})
        return [
            (t, theirs.get(t), ours.get(t))
            for t in sorted(theirs.keys() | ours.keys())
            if theirs.get(t) != ours.get(t)
        ]

    @property
    def regressions(self) -> list[str]:
        """Tests that pass on the baseline and not on ours."""
        return [t for t, theirs, ours in self.differences if theirs == PASSED and ours != PASSED]


def consistent_url(
    topology: Any, level: str, wait_timeout: str, driver: str = "mysql+consistent"
) -> str:
    params = topology.connection_params(None, "test")
    replicas = "&".join(f"replica={r.host}:{r.port}" for r in topology.replicas)
    return f"{params.url(driver)}?{replicas}&level={level}&wait_timeout={wait_timeout}"


def form_of(driver: str) -> str:
    """The form (``sync`` / ``async``) a driver belongs to."""
    return next(form for form, pair in FORMS.items() if driver in pair)


def compare(
    topology: Any,
    *,
    level: str = "read_latest",
    wait_timeout: str = "5",
    drivers: tuple[str, ...] = DRIVERS,
    reports: Path,
    pytest_args: list[str] | None = None,
    quiet: bool = False,
) -> Comparison:
    """Run the selection on each dialect against ``topology`` (a MariaDB topology); the
    baseline and ours are the pair of the form ``drivers[0]`` belongs to."""
    primary = topology.connection_params(None, "test")
    urls: dict[str, str] = {}
    for baseline, ours in FORMS.values():
        urls[baseline] = primary.url(baseline)
        urls[ours] = consistent_url(topology, level, wait_timeout, ours)
    comparison = Comparison(drivers=FORMS[form_of(drivers[0])])
    for driver in drivers:
        recreate_databases(topology)
        junit = reports / f"{driver.replace('+', '_')}.xml"
        started = time.monotonic()
        run_suite(urls[driver], junit, list(pytest_args or ()), quiet=quiet)
        comparison.seconds[driver] = time.monotonic() - started
        comparison.results[driver] = outcomes(junit)
    return comparison


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--form", choices=FORMS, default="sync", help="the pair to compare")
    parser.add_argument("--level", default="read_latest", help="our dialect's level")
    parser.add_argument("--wait-timeout", default="5", help="our dialect's wait_timeout")
    all_drivers = [driver for pair in FORMS.values() for driver in pair]
    parser.add_argument("--only", choices=all_drivers, help="run one dialect only")
    parser.add_argument("--junit-dir", type=Path, help="keep the JUnit reports here")
    parser.add_argument("pytest_args", nargs="*", help="after --: passed to pytest")
    args = parser.parse_args(argv)

    from consistent.testing.mariadb import start_topology

    drivers = (args.only,) if args.only else FORMS[args.form]
    reports = args.junit_dir or Path(tempfile.mkdtemp(prefix="sqla-compliance-"))
    reports.mkdir(parents=True, exist_ok=True)
    with start_topology(replicas=2) as topology:
        comparison = compare(
            topology,
            level=args.level,
            wait_timeout=args.wait_timeout,
            drivers=drivers,
            reports=reports,
            pytest_args=args.pytest_args,
        )
    print(f"JUnit reports: {reports}")
    for driver in drivers:
        print(comparison.summary(driver))
    if len(drivers) < 2:
        return 1 if comparison.counts(drivers[0])[FAILED] else 0
    baseline, ours_name = comparison.drivers
    print(f"differences: {len(comparison.differences)}")
    for test_id, theirs, ours in comparison.differences:
        print(f"  {test_id}: {baseline} {theirs}, {ours_name} {ours}")
    print(f"pass on {baseline}, not on {ours_name}: {len(comparison.regressions)}")
    return 1 if comparison.regressions else 0


if __name__ == "__main__":
    sys.exit(main())
