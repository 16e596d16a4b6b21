"""The modules compiled to C extensions with mypyc, and the check that each matches its source.

The per-statement path (the routing policy; the proxy's framing, response relay and command
handling; the emulator's wire front-end, lexer, statement caches, SELECT, INSERT, UPDATE and
DELETE plans, sessions, SQLite store and GTID state) is ordinary typed Python; ``make``
compiles it with mypyc (``scripts/compile.py``) into C extensions that CPython imports in
place of the ``.py`` files beside them.  Nothing else changes: the same source runs
interpreted when no compiled module is there, as after ``make clean-native`` or on a machine
without a C compiler.

A compiled module that is older than its source is stale: importing it would run code that
no longer exists.  So is one left by an earlier build for a module no longer compiled.
:func:`require_fresh`, called by each package that has compiled modules, refuses both with
:class:`StaleNativeModule`, which says how to rebuild.
"""

from __future__ import annotations

import importlib.machinery
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Final

from consistent.errors import InterfaceError

__all__ = [
    "COMPILED",
    "GROUPS",
    "StaleNativeModule",
    "compiled_files",
    "is_compiled",
    "require_fresh",
    "source_path",
    "stale_modules",
]

#: What ``scripts/compile.py`` compiles, as module names.  Every module a compiled module
#: calls on the per-query path belongs here; modules that subclass compiled classes must be
#: compiled too (an interpreted class cannot inherit from a compiled one).
COMPILED: Final[tuple[str, ...]] = (
    "consistent.policy.acknowledged",
    "consistent.policy.decision",
    "consistent.policy.knowledge",
    "consistent.policy.replay",
    "consistent.policy.selection",
    "consistent.policy.states",
    "consistent.policy.session",
    "consistent.policy.driver",
    "proxy.histogram",
    "proxy.tally",
    "proxy.stream",
    "proxy.relay",
    "proxy.statements",
    "proxy.intercept",
    "proxy.backends",
    "proxy.pool",
    "proxy.clientreader",
    "proxy.backendset",
    "proxy.slowpath",
    "proxy.routing",
    "proxy.sessioncommands",
    "proxy.commands",
    "proxy.session",
    "proxy.server",
    "consistent.emulator.results",
    "consistent.emulator.waiters",
    "consistent.emulator.gtid_state",
    "consistent.emulator.gtid_table",
    "consistent.emulator.sql.storage",
    "consistent.emulator.tracker",
    "consistent.emulator.sql.lexer",
    "consistent.emulator.sql.shapes",
    "consistent.emulator.sql.stmtcache",
    "consistent.emulator.sql.types",
    "consistent.emulator.sql.metadata",
    "consistent.emulator.sql.query",
    "consistent.emulator.sql.writes",
    "consistent.emulator.sql.insert",
    "consistent.emulator.statements",
    "consistent.emulator.session",
    "consistent.emulator.wire.transport",
    "consistent.emulator.wire.stream",
    "consistent.emulator.wire.encode",
    "consistent.emulator.wire.connection",
)

#: The compiled modules' groups, by package: mypyc puts a group's shared code in one library,
#: the module ``<group>__mypyc``, inside the package so that it is found wherever that is.
GROUPS: Final[dict[str, str]] = {
    "consistent.policy": "consistent.policy._native",
    "proxy": "proxy._native",
    "consistent.emulator": "consistent.emulator._native",
}
_ROOT: Final = Path(__file__).resolve().parents[1]


class StaleNativeModule(InterfaceError):
    """A compiled module is older than its source: rebuild it, or remove it."""


def source_path(root: Path, module: str) -> Path:
    """The ``.py`` file of ``module`` under ``root``."""
    return root.joinpath(*module.split(".")).with_suffix(".py")


def _extensions(directory: Path) -> Iterator[tuple[Path, str]]:
    """Every compiled module under ``directory``, with its file name less the suffix."""
    suffixes = sorted(importlib.machinery.EXTENSION_SUFFIXES, key=len, reverse=True)
    for path in sorted(directory.rglob("*")):
        for suffix in suffixes:  # the longest first: ".so" ends them all
            if path.name.endswith(suffix):
                yield path, path.name[: -len(suffix)]
                break


def _directory(root: Path, package: str) -> Path:
    return root.joinpath(*package.split("."))


def compiled_files(root: Path) -> list[Path]:
    """Every compiled module in the packages of :data:`GROUPS` under ``root``, their shared
    libraries included, whether or not the module is still listed."""
    return [path for package in GROUPS for path, _stem in _extensions(_directory(root, package))]


def stale_modules(root: Path, package: str) -> list[str]:
    """The compiled modules of ``package`` that must not be imported: older than their source,
    or no longer listed in :data:`COMPILED` (left by an earlier build)."""
    stale = []
    directory = _directory(root, package)
    shared = GROUPS[package].rpartition(".")[2] + "__mypyc"
    for path, stem in _extensions(directory):
        module = ".".join((*path.parent.relative_to(root).parts, stem))
        source = path.with_name(stem + ".py")
        if stem == shared and path.parent == directory:
            continue
        unlisted = module not in COMPILED or not source.exists()
        if unlisted or source.stat().st_mtime > path.stat().st_mtime:
            stale.append(module)
    return stale


def require_fresh(package: str, root: Path = _ROOT) -> None:
    """Raise :class:`StaleNativeModule` if a compiled module of ``package`` is stale."""
    stale = stale_modules(root, package)
    if stale:
        raise StaleNativeModule(
            f"compiled module(s) older than their source or no longer compiled: "
            f"{', '.join(stale)}; rebuild with `make native` (or remove them with "
            "`make clean-native` to run from source)"
        )


def is_compiled(module: ModuleType) -> bool:
    """Whether ``module`` was imported from a compiled extension rather than its source."""
    file = getattr(module, "__file__", None) or ""
    return file.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES))
