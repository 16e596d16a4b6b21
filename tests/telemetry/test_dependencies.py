"""Telemetry subscribes to the front ends' events: it imports the policy's public package at
most, never one of its internal modules."""

from __future__ import annotations

import ast
from pathlib import Path

import consistent.telemetry


def _imported(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module is not None:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return names


def test_telemetry_imports_no_internal_module_of_the_policy() -> None:
    package = Path(consistent.telemetry.__file__).parent
    found = {
        (path.name, name)
        for path in sorted(package.glob("*.py"))
        for name in _imported(path)
        if name.startswith("consistent.policy.")
    }
    assert found == set()
    assert ("produced.py", "consistent.gtid") in {
        (path.name, name) for path in package.glob("*.py") for name in _imported(path)
    }
